/* The common main of every Check suite: run it, return the exit status.
 * With LOONG_TEST_RECORD=DIR (make check sets it), Check also writes its
 * XML report, every test's result and duration, to DIR/PROGRAM.xml, which
 * tests/record.sh reads for the closing summary (the slowest tests). */
#ifndef LOONG_TEST_CHECK_RUN_H
#define LOONG_TEST_CHECK_RUN_H

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static inline int check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    const char *dir = getenv("LOONG_TEST_RECORD");
    char xml[4096];
    if (dir && *dir && (mkdir(dir, 0777) == 0 || errno == EEXIST)) {
        snprintf(xml, sizeof xml, "%s/%s.xml", dir, program_invocation_short_name);
        srunner_set_xml(sr, xml);
    }
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif

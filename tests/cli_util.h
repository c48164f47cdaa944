/* Run the built `loong` (or any command) and capture its exit status and
 * output, for the CLI tests of every command. */
#ifndef LOONG_TEST_CLI_UTIL_H
#define LOONG_TEST_CLI_UTIL_H

#include <stddef.h>

typedef struct run_result {
    int status;     /* exit status, or -1 if it did not exit normally */
    char err[4096]; /* stderr */
    size_t out_len; /* bytes on stdout */
    char out[8192]; /* the start of stdout */
} run_result;

/* Run `sh -c cmd` with stdin from /dev/null. */
run_result run_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Lines in s (a final line without '\n' counts). */
int count_lines(const char *s);

/* The whole file at path, NUL-terminated (malloc'd; a failed read fails the test). */
char *read_text(const char *path);

#endif

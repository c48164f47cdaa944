/*
 * check_dagjson: the configuration a `loong dag` command line gives, as
 * JSON, for the tests that compare command lines by what they configure
 * (check_config's every-knob test, check_cli's framework round trips).
 */
#ifndef LOONG_CHECK_DAGJSON_H
#define LOONG_CHECK_DAGJSON_H

#include <check.h>
#include <jansson.h>
#include <string.h>

#include "check_run.h"

/* The configuration object of `LOONG dag ARGS --format json`, with the
 * model's name replaced by "x" (the cases' models are files or unnamed).
 * The caller owns the result (json_decref). */
static json_t *dag_config_json(const char *loong, const char *args)
{
    run_result r = run_cmd("%s dag %s --format json", loong, args);
    ck_assert_msg(r.status == 0, "loong dag %s: %s", args, r.err);
    const char *at = strstr(r.out, "\"config\":");
    ck_assert_ptr_nonnull(at);
    json_error_t je;
    json_t *c = json_loads(at + 9, JSON_DISABLE_EOF_CHECK, &je);
    ck_assert_ptr_nonnull(c);
    json_object_set_new(json_object_get(c, "model"), "name", json_string("x"));
    return c;
}

#endif

/*
 * fuzz_config: the configuration JSON, the "config" object that every trace
 * and the DAG JSON (`loong dag --format json`) embed (core/config.h; there
 * is no separate DAG JSON reader).
 *
 * Contract under test: config_from_json() on any JSON value returns 0 with
 * a configuration config_validate() accepts, or -1 with a one-line message,
 * never reading out of bounds, overflowing or leaking. An accepted
 * configuration writes (config_to_json) and reads back to the same
 * configuration (equal config_hash), as a trace of it would.
 */
#include <stdio.h>

#include "core/config.h"
#include "fuzz_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size); /* the trace reader refuses a NUL byte */
    if (!text) return 0;
    json_error_t je;
    json_t *j = json_loadb(text, size, 0, &je);
    free(text);
    if (!j) return 0;
    config c;
    char err[LOONG_ERRLEN] = "";
    if (config_from_json(j, &c, err) < 0) {
        if (!err[0] || strnlen(err, LOONG_ERRLEN) == LOONG_ERRLEN) abort();
        json_decref(j);
        return 0;
    }
    json_decref(j);
    json_t *out = config_to_json(&c);
    config back;
    if (!out || config_from_json(out, &back, err) < 0) {
        fprintf(stderr, "config_to_json wrote a configuration config_from_json refuses: %s\n", err);
        abort();
    }
    json_decref(out);
    if (config_hash(&c) != config_hash(&back)) {
        fprintf(stderr, "the configuration does not read back to itself\n");
        abort();
    }
    char line[512];
    config_describe(&c, line, sizeof line);
    config_layout_name(&c, line, sizeof line);
    return 0;
}

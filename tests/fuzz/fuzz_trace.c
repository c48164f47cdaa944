/*
 * fuzz_trace: the trace reader (`loong compare`, `loong calibrate`;
 * core/trace.h), and the check of a trace against the DAG of its own
 * configuration.
 *
 * Contract under test: trace_parse() on any bytes returns 0 with events
 * inside the trace's configuration, or -1 with a one-line message, never
 * reading out of bounds, overflowing or leaking. When it succeeds on a small
 * configuration (at most 64 ranks, S <= 64K, 4 layers: a fuzzer must not
 * build a billion-task DAG), dag_build() of that configuration succeeds
 * (config_from_json validated it) and trace_check_dag() returns 0 or -1.
 */
#include <stdio.h>

#include "core/trace.h"
#include "fuzz_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size); /* infile_read refuses a NUL byte */
    if (!text) return 0;
    trace t;
    char err[LOONG_ERRLEN] = "";
    int rc = trace_parse(text, size, "fuzz.json", &t, err);
    free(text);
    if (rc < 0) {
        if (!err[0] || strnlen(err, LOONG_ERRLEN) == LOONG_ERRLEN) abort();
        return 0;
    }
    if (config_ranks(&t.cfg) <= 64 && t.cfg.seq <= 65536 && t.cfg.model.layers <= 4) {
        dag *g = dag_build(&t.cfg, err);
        if (!g) {
            fprintf(stderr, "dag_build refuses the configuration of an accepted trace: %s\n", err);
            abort();
        }
        (void)trace_check_dag(&t, g, err);
        dag_free(g);
    }
    (void)trace_makespan(&t);
    trace_free(&t);
    return 0;
}

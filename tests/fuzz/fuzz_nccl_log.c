/*
 * fuzz_nccl_log: nccl-tests logs (`loong coll --compare LOG`,
 * analysis/nccl_log.h).
 *
 * Contract under test: nccl_log_parse() on any text returns 0 with at least
 * one row, sizes growing and positive times, or -1 with a one-line message
 * and nothing to free; never reading out of bounds, overflowing or leaking.
 */
#include <stdio.h>

#include "analysis/nccl_log.h"
#include "fuzz_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    if (!text) return 0;
    nccl_log log;
    char err[LOONG_ERRLEN] = "";
    int rc = nccl_log_parse(text, "fuzz.log", &log, err);
    free(text);
    if (rc < 0) {
        if (!err[0] || strnlen(err, LOONG_ERRLEN) == LOONG_ERRLEN || log.rows) abort();
        return 0;
    }
    if (log.nrows < 1 || log.gpus < 0 || log.nodes < 0) abort();
    for (int i = 0; i < log.nrows; i++)
        if (!(log.rows[i].time_s > 0) || (i && !(log.rows[i].size > log.rows[i - 1].size))) abort();
    nccl_log_free(&log);
    return 0;
}

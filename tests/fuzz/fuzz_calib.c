/*
 * fuzz_calib: calibration tables (`--calib FILE`, topologies/NAME.calib;
 * model/calib.h).
 *
 * Contract under test: calib_parse() on any text returns a table or NULL
 * with a one-line message, never reading out of bounds, overflowing or
 * leaking; a table it accepts predicts a finite, non-negative time for every
 * compute kind, and calib_write() of it reads back (calib.h: the format
 * round-trips), to the same text.
 */
#include <math.h>
#include <stdio.h>

#include "model/calib.h"
#include "fuzz_text.h"

/* calib_write into a malloc'd string (caller frees). */
static char *written(const calib *cb)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f || calib_write(f, cb) < 0) abort();
    fclose(f);
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    if (!text) return 0;
    char err[LOONG_ERRLEN] = "";
    calib *cb = calib_parse(text, "fuzz.calib", err);
    free(text);
    if (!cb) {
        if (!err[0] || strnlen(err, LOONG_ERRLEN) == LOONG_ERRLEN) abort();
        return 0;
    }
    for (int k = TASK_GEMM; k <= TASK_ACC; k++) {
        double s = calib_seconds(cb, k, 1e12, 1e9, 4096);
        if (!(s >= 0 && isfinite(s))) {
            fprintf(stderr, "kind %s predicts %g s for 1 TFLOP / 1 GB / 4096 tokens\n", task_kind_name(k), s);
            abort();
        }
    }
    for (int bwd = 0; bwd < 2; bwd++) { /* a shaped GEMM: finite too */
        double s = calib_gemm_task_seconds(cb, 4096, 1536, 5120, bwd, 0);
        if (!(s >= 0 && isfinite(s))) {
            fprintf(stderr, "a %s GEMM 4096 x 1536 x 5120 predicts %g s\n", bwd ? "backward" : "forward", s);
            abort();
        }
    }
    char *once = written(cb);
    calib *back = calib_parse(once, "written.calib", err);
    if (!back) {
        fprintf(stderr, "calib_write wrote a table calib_parse refuses: %s\n--- written ---\n%s", err, once);
        abort();
    }
    char *twice = written(back);
    if (strcmp(once, twice)) {
        fprintf(stderr, "calib_write does not round-trip:\n--- first ---\n%s--- second ---\n%s", once, twice);
        abort();
    }
    free(once);
    free(twice);
    calib_free(back);
    calib_free(cb);
    return 0;
}

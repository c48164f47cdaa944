/*
 * fuzz_kineto: the PyTorch profiler trace reader (`loong compare --kineto`,
 * `loong calibrate --kineto`; analysis/kineto.h), plain or gzip.
 *
 * Contract under test: kineto_parse() on any bytes returns 0 with kernels
 * whose times are finite, kinds in range, streams and names indexed within
 * the rank's tables and steps sorted, or -1 with a one-line message, never
 * reading out of bounds, overflowing or leaking. The bytes are given as they
 * are (a gzip stream is inflated by its magic), under a name that does not
 * end in .gz.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/kineto.h"

static kineto_names *names;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!names) names = kineto_names_default();
    kineto_rank r;
    char err[LOONG_ERRLEN] = "";
    if (kineto_parse(data, size, "fuzz.json", names, &r, err) < 0) {
        if (!err[0] || strnlen(err, LOONG_ERRLEN) == LOONG_ERRLEN || strchr(err, '\n')) abort();
        return 0;
    }
    for (size_t i = 0; i < r.nk; i++) {
        const kineto_kernel *k = &r.k[i];
        if (!isfinite(k->ts) || !(k->dur >= 0) || k->kind < 0 || k->kind >= KINETO_KINDS || k->stream < 0 ||
            k->stream >= r.nstreams || k->name < 0 || k->name >= r.nnames || !(k->flops >= 0) || !(k->bytes >= 0))
            abort();
        (void)kineto_kernel_work(k, NULL);
    }
    for (int i = 1; i < r.nsteps; i++)
        if (r.steps[i].ts < r.steps[i - 1].ts) abort();
    kineto_rank_free(&r);
    return 0;
}

/*
 * bench_kernels: throughput of the CPU attention kernels (src/exec/kernels_cpu.c)
 * against the OpenBLAS sgemm they are built on, in the same run. Not a test:
 * it first checks the forward once against the float64 reference (and exits
 * non-zero if that fails), then times.
 *
 * FLOPs per block (per head, nq = nk = n): forward 4*n*n*d (QK^T and PV),
 * backward 10*n*n*d (QK^T recomputed, dV, dP, dQ, dK: 2.5x the forward, the
 * convention of the DAG's FLOP accounting); a causal block counts half.
 * sgemm: a square n x n x n product, 2*n^3 FLOPs. Every time is the best of
 * `reps` runs (the machine is shared); the thread count is OpenBLAS's.
 *
 * usage: bench_kernels [-d head_dim] [-H heads] [-r reps] [n ...]   (default n = 512 1024 2048)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>
#include <gsl/gsl_rng.h>

#include "exec/kernels.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "bench_kernels: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

/* Uniform in [-1, 1). (gsl_randist.h would pull in gsl_cblas.h, whose
 * declarations clash with OpenBLAS's cblas.h.) */
static void fill(gsl_rng *r, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(2.0 * gsl_rng_uniform(r) - 1.0);
}

/* ---- correctness first: one causal block against the float64 reference ---- */

static double check_fwd(gsl_rng *r, int n, int hq, int hkv, int d)
{
    size_t nq = (size_t)n * hq * d, nk = (size_t)n * hkv * d;
    float *q = xmalloc(nq * 4), *k = xmalloc(nk * 4), *v = xmalloc(nk * 4), *o = xmalloc(nq * 4);
    float *lse = xmalloc((size_t)n * hq * 4);
    double *qd = xmalloc(nq * 8), *kd = xmalloc(nk * 8), *vd = xmalloc(nk * 8), *od = xmalloc(nq * 8);
    double *lsed = xmalloc((size_t)n * hq * 8);
    int64_t *pos = xmalloc((size_t)n * sizeof *pos);
    fill(r, q, nq), fill(r, k, nk), fill(r, v, nk);
    for (size_t i = 0; i < nq; i++)
        qd[i] = q[i];
    for (size_t i = 0; i < nk; i++)
        kd[i] = k[i], vd[i] = v[i];
    for (int i = 0; i < n; i++)
        pos[i] = i;
    attn_shape sh = {n, n, hq, hkv, d, 1, NULL, 0};
    attn_block_fwd(o, lse, q, k, v, pos, pos, &sh);
    attn_ref_fwd(od, lsed, qd, kd, vd, NULL, n, hq, hkv, d);
    double num = 0, den = 0;
    for (size_t i = 0; i < nq; i++) {
        double e = fabs(o[i] - od[i]);
        if (!(e <= num)) num = e; /* NaN propagates */
        if (fabs(od[i]) > den) den = fabs(od[i]);
    }
    free(q), free(k), free(v), free(o), free(lse), free(qd), free(kd), free(vd), free(od), free(lsed), free(pos);
    return num / den;
}

/* ---- timing ---- */

typedef struct bench_buf {
    int n, hq, hkv, d;
    float *q, *k, *v, *o, *lse, *do_, *dq, *dk, *dv;
    int64_t *pos;
} bench_buf;

static double time_fwd(bench_buf *b, int causal, int reps)
{
    attn_shape sh = {b->n, b->n, b->hq, b->hkv, b->d, causal, NULL, 0};
    double best = INFINITY;
    attn_block_fwd(b->o, b->lse, b->q, b->k, b->v, b->pos, b->pos, &sh); /* warm-up */
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        attn_block_fwd(b->o, b->lse, b->q, b->k, b->v, b->pos, b->pos, &sh);
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* Backward of the block whose final (o, lse) is its own forward. */
static double time_bwd(bench_buf *b, int causal, int reps)
{
    attn_shape sh = {b->n, b->n, b->hq, b->hkv, b->d, causal, NULL, 0};
    attn_block_fwd(b->o, b->lse, b->q, b->k, b->v, b->pos, b->pos, &sh);
    double best = INFINITY;
    for (int r = 0; r <= reps; r++) { /* r = 0 is the warm-up */
        memset(b->dq, 0, (size_t)b->n * b->hq * b->d * sizeof(float));
        double t0 = now();
        attn_block_bwd(b->dq, b->dk, b->dv, b->q, b->k, b->v, b->o, b->lse, b->do_, b->pos, b->pos, &sh);
        double t = now() - t0;
        if (r > 0 && t < best) best = t;
    }
    return best;
}

static double time_sgemm(gsl_rng *rng, int n, int reps)
{
    size_t nn = (size_t)n * n;
    float *a = xmalloc(nn * 4), *b = xmalloc(nn * 4), *c = xmalloc(nn * 4);
    fill(rng, a, nn), fill(rng, b, nn);
    double best = INFINITY;
    for (int r = 0; r <= reps; r++) {
        double t0 = now();
        /* c (n, n) = a (n, n) b (n, n) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double t = now() - t0;
        if (r > 0 && t < best) best = t;
    }
    free(a), free(b), free(c);
    return best;
}

int main(int argc, char **argv)
{
    int d = 128, hq = 4, reps = 3, opt;
    while ((opt = getopt(argc, argv, "d:H:r:")) != -1) {
        switch (opt) {
        case 'd': d = atoi(optarg); break;
        case 'H': hq = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        default: fprintf(stderr, "usage: %s [-d head_dim] [-H heads] [-r reps] [n ...]\n", argv[0]); return 2;
        }
    }
    if (d <= 0 || hq <= 0 || reps <= 0) {
        fprintf(stderr, "bench_kernels: -d, -H and -r must be positive\n");
        return 2;
    }
    static const int defaults[] = {512, 1024, 2048};
    int nsizes = argc - optind;
    int *sizes = xmalloc(sizeof(int) * (size_t)(nsizes ? nsizes : 3));
    for (int i = 0; i < nsizes; i++)
        sizes[i] = atoi(argv[optind + i]);
    if (!nsizes) memcpy(sizes, defaults, sizeof defaults), nsizes = 3;
    const int hkv = hq; /* MHA; GQA changes no FLOP count */

    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 42);
    double err = check_fwd(rng, 256, 2, 1, d);
    printf("# kernel-bench: CPU attention block, FA2 math in fp32 on OpenBLAS sgemm tiles; d=%d hq=hkv=%d, "
           "OpenBLAS threads %d, best of %d\n",
           d, hq, openblas_get_num_threads(), reps);
    printf("# check: causal fwd n=256 hq=2 hkv=1 vs float64 reference: max rel err %.2e %s\n", err,
           err <= 1e-5 ? "OK" : "NOT OK");
    if (!(err <= 1e-5)) return 1;
    printf("# fwd FLOPs 4*n^2*d*hq (causal: half), bwd 10*n^2*d*hq (causal: half), sgemm 2*n^3 (square n)\n");
    printf("# %6s %7s %9s %9s %9s %9s %10s %9s %9s\n", "tokens", "mask", "fwd_ms", "fwd_GF/s", "bwd_ms", "bwd_GF/s",
           "sgemm_GF/s", "fwd/gemm", "bwd/gemm");
    for (int si = 0; si < nsizes; si++) {
        const int n = sizes[si];
        bench_buf b = {n, hq, hkv, d, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        size_t nq = (size_t)n * hq * d, nk = (size_t)n * hkv * d;
        b.q = xmalloc(nq * 4), b.o = xmalloc(nq * 4), b.do_ = xmalloc(nq * 4), b.dq = xmalloc(nq * 4);
        b.k = xmalloc(nk * 4), b.v = xmalloc(nk * 4), b.dk = xmalloc(nk * 4), b.dv = xmalloc(nk * 4);
        b.lse = xmalloc((size_t)n * hq * 4);
        b.pos = xmalloc((size_t)n * sizeof *b.pos);
        fill(rng, b.q, nq), fill(rng, b.k, nk), fill(rng, b.v, nk), fill(rng, b.do_, nq);
        for (int i = 0; i < n; i++)
            b.pos[i] = i;
        const double gemm_gf = 2.0 * n * n * (double)n / time_sgemm(rng, n, reps) / 1e9;
        for (int causal = 0; causal <= 1; causal++) {
            const double full = (double)n * n * d * hq, frac = causal ? 0.5 : 1.0;
            const double tf = time_fwd(&b, causal, reps), tb = time_bwd(&b, causal, reps);
            const double fgf = 4.0 * full * frac / tf / 1e9, bgf = 10.0 * full * frac / tb / 1e9;
            printf("  %6d %7s %9.2f %9.2f %9.2f %9.2f %10.2f %9.2f %9.2f\n", n, causal ? "causal" : "full", tf * 1e3,
                   fgf, tb * 1e3, bgf, gemm_gf, fgf / gemm_gf, bgf / gemm_gf);
        }
        free(b.q), free(b.o), free(b.do_), free(b.dq), free(b.k), free(b.v), free(b.dk), free(b.dv);
        free(b.lse), free(b.pos);
    }
    gsl_rng_free(rng);
    free(sizes);
    return 0;
}

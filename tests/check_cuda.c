/* The CUDA device. Without a GPU (CI, most developer machines) only the
 * bad-input suite runs and the program then exits 77, which automake
 * reports as SKIP, with a message saying what was skipped. With a GPU:
 * every kernel against the float64 reference with bf16 tolerances (max
 * relative error <= 1e-2, no NaN), then `loong exec --device cuda
 * --transport local --check` over several meshes and strategies. */
#include <check.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "cli_util.h"
#include "cuda/kernels_cuda.h"

#define LOCAL LOONG_BIN " exec --device cuda --transport local"
#define FAST  "--iters 1 --warmup 0"

/* ---- no GPU: bad input must be one line and exit 2 ---- */

START_TEST(no_gpu_is_one_line)
{
    run_result r = run_cmd(LOONG_BIN " exec --device cuda --model tiny --seq 1K --mesh 2 --scope attn");
    ck_assert_msg(r.status == 2, "exit %d\n%s", r.status, r.err);
    ck_assert_int_eq(count_lines(r.err), 1);
    ck_assert_msg(strstr(r.err, "--device cuda") && strstr(r.err, "GPU"), "%s", r.err);
    r = run_cmd(LOCAL " --model tiny --seq 1K --mesh 2 --scope attn");
    ck_assert_msg(r.status == 2, "exit %d\n%s", r.status, r.err);
    ck_assert_int_eq(count_lines(r.err), 1);
}
END_TEST

START_TEST(bad_transport)
{
    run_result r = run_cmd(LOONG_BIN " exec --device cpu --transport local --model tiny --seq 1K --mesh 2");
    ck_assert_msg(r.status == 2, "exit %d\n%s", r.status, r.err);
    ck_assert_int_eq(count_lines(r.err), 1);
}
END_TEST

/* ---- with a GPU: kernels ---- */

static unsigned long long rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static double rel_err(const float *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isinf(b[i]) && a[i] == (float)b[i]) continue;
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= num)) num = e; /* NaN propagates */
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return den > 0 ? num / den : num;
}

static void *dmem(const void *h, size_t bytes)
{
    void *d = NULL;
    ck_assert_int_eq(cudaMalloc(&d, bytes + 8), cudaSuccess);
    ck_assert_int_eq(h ? cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) : cudaMemset(d, 0, bytes + 8), cudaSuccess);
    return d;
}

static const attn_shape kshapes[] = {
    {300, 300, 4, 2, 64, 1, NULL, 0},
    {257, 257, 8, 8, 128, 1, NULL, 0},
    {200, 200, 6, 2, 40, 1, NULL, 0},
    {65, 65, 2, 1, 16, 1, NULL, 0},
};

/* Row i of a zigzag block holds token zz(i): the block is chunks 0 and 3
 * of four (rank 0 of a 2-rank zigzag ring), then chunks 1 and 2, so that
 * the causal mask must follow the positions, not the rows. */
static int64_t zz(int i, int n)
{
    const int c = n / 4;
    const int size[4] = {c, n - 3 * c, c, c}; /* chunk 3 takes the remainder */
    const int64_t first[4] = {0, 3 * (int64_t)c, c, 2 * (int64_t)c};
    for (int j = 0; j < 4; i -= size[j++])
        if (i < size[j]) return first[j] + i;
    return -1;
}

/* rows (width w doubles) from row order to position order and back */
static void to_positions(double *dst, const double *src, const int64_t *pos, int n, size_t w)
{
    for (int i = 0; i < n; i++)
        memcpy(dst + (size_t)pos[i] * w, src + (size_t)i * w, w * sizeof *dst);
}

static void from_positions(double *dst, const double *src, const int64_t *pos, int n, size_t w)
{
    for (int i = 0; i < n; i++)
        memcpy(dst + (size_t)i * w, src + (size_t)pos[i] * w, w * sizeof *dst);
}

/* The float64 reference on rows whose tokens sit at pos (a permutation of
 * 0..n-1): computed in position order, returned in row order. */
static void ref_permuted(double *ro, double *rl, double *rdq, double *rdk, double *rdv, const double *qd,
                         const double *kd, const double *vd, const double *dod, const int64_t *pos, int n, attn_shape s)
{
    size_t wq = (size_t)s.hq * s.d, wk = (size_t)s.hkv * s.d;
    double *q = calloc(n * wq, 8), *k = calloc(n * wk, 8), *v = calloc(n * wk, 8), *g = calloc(n * wq, 8);
    double *o = malloc(n * wq * 8), *l = malloc((size_t)n * s.hq * 8), *dq = malloc(n * wq * 8),
           *dk = malloc(n * wk * 8), *dv = malloc(n * wk * 8);
    to_positions(q, qd, pos, n, wq), to_positions(k, kd, pos, n, wk), to_positions(v, vd, pos, n, wk);
    to_positions(g, dod, pos, n, wq);
    attn_ref_fwd(o, l, q, k, v, NULL, n, s.hq, s.hkv, s.d);
    attn_ref_bwd(dq, dk, dv, q, k, v, g, NULL, n, s.hq, s.hkv, s.d);
    from_positions(ro, o, pos, n, wq), from_positions(rl, l, pos, n, (size_t)s.hq);
    from_positions(rdq, dq, pos, n, wq), from_positions(rdk, dk, pos, n, wk), from_positions(rdv, dv, pos, n, wk);
    free(q), free(k), free(v), free(g), free(o), free(l), free(dq), free(dk), free(dv);
}

/* Shapes x {causal, documents, zigzag}: under documents, query i sees keys
 * from the start of its 77-token document, and the last 9 tokens are
 * padding; under zigzag, rows hold tokens out of order (zz). */
START_TEST(attention_matches_float64)
{
    attn_shape s = kshapes[_i / 3];
    const bool docs = _i % 3 == 1, zigzag = _i % 3 == 2;
    int n = s.nq;
    size_t nq = (size_t)n * s.hq * s.d, nk = (size_t)n * s.hkv * s.d, nl = (size_t)n * s.hq;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *dO = malloc(nq * 4), *got = malloc(nq * 4);
    double *qd = malloc(nq * 8), *kd = malloc(nk * 8), *vd = malloc(nk * 8), *dod = malloc(nq * 8);
    double *ro = malloc(nq * 8), *rl = malloc(nl * 8), *rdq = malloc(nq * 8), *rdk = malloc(nk * 8),
           *rdv = malloc(nk * 8);
    int64_t *pos = malloc((size_t)n * sizeof *pos), *start = malloc((size_t)n * sizeof *start);
    for (int i = 0; i < n; i++) {
        pos[i] = zigzag ? zz(i, n) : i;
        start[i] = i >= n - 9 ? i + 1 : i - i % 77;
    }
    for (size_t i = 0; i < nq; i++)
        qd[i] = q[i] = frand(), dod[i] = dO[i] = frand();
    for (size_t i = 0; i < nk; i++)
        kd[i] = k[i] = frand(), vd[i] = v[i] = frand();
    if (zigzag) {
        ref_permuted(ro, rl, rdq, rdk, rdv, qd, kd, vd, dod, pos, n, s);
    } else {
        attn_ref_fwd(ro, rl, qd, kd, vd, docs ? start : NULL, n, s.hq, s.hkv, s.d);
        attn_ref_bwd(rdq, rdk, rdv, qd, kd, vd, dod, docs ? start : NULL, n, s.hq, s.hkv, s.d);
    }
    float *Q = dmem(q, nq * 4), *K = dmem(k, nk * 4), *V = dmem(v, nk * 4), *DO = dmem(dO, nq * 4);
    float *O = dmem(NULL, nq * 4), *L = dmem(NULL, nl * 4), *DQ = dmem(NULL, nq * 4), *DK = dmem(NULL, nk * 4),
          *DV = dmem(NULL, nk * 4), *DI = dmem(NULL, nl * 4);
    int64_t *P = dmem(pos, (size_t)n * sizeof *pos), *ST = dmem(start, (size_t)n * sizeof *start);
    if (docs) s.qstart = ST; /* a device pointer, as device_cuda passes it */
    ck_assert_int_eq(cuda_attn_fwd(O, L, Q, K, V, P, P, &s, 0), 0);
    ck_assert_int_eq(cuda_attn_bwd(DQ, DK, DV, Q, K, V, O, L, DO, P, P, &s, DI, 0), 0);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    const struct {
        const char *name;
        const float *dev;
        const double *ref;
        size_t n;
    } t[] = {{"O", O, ro, nq}, {"LSE", L, rl, nl}, {"dQ", DQ, rdq, nq}, {"dK", DK, rdk, nk}, {"dV", DV, rdv, nk}};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(cudaMemcpy(got, t[i].dev, t[i].n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        double e = rel_err(got, t[i].ref, t[i].n);
        ck_assert_msg(e <= 1e-2, "%s (%s): max rel err %.3e (n=%d hq=%d hkv=%d d=%d)", t[i].name,
                      zigzag ? "zigzag"
                      : docs ? "documents"
                             : "causal",
                      e, n, s.hq, s.hkv, s.d);
    }
    cudaFree(Q), cudaFree(K), cudaFree(V), cudaFree(DO), cudaFree(O), cudaFree(L), cudaFree(DQ), cudaFree(DK);
    cudaFree(DV), cudaFree(DI), cudaFree(P), cudaFree(ST);
    free(q), free(k), free(v), free(dO), free(got), free(qd), free(kd), free(vd), free(dod), free(ro), free(rl);
    free(rdq), free(rdk), free(rdv), free(pos), free(start);
}
END_TEST

/* ---- with a GPU: the whole schedule through the local transport ---- */

static const char *meshes[] = {
    "--mesh 4 --strategy ulysses",
    "--mesh 4 --strategy ring",
    "--mesh 4 --strategy zigzag",
    "--mesh 2x2 --strategy usp",
    "--mesh 2x4 --strategy loongtrain --window 2",
    "--mesh 4x2 --strategy loongtrain --window 2 --placement context-first",
    "--mesh 2x4 --strategy dualring",
    "--mesh 2x2 --strategy usp --partition doc-zigzag --docs 5,300,700",
    "--mesh 2x4 --strategy dualring --partition balanced --docs 1,2,3,1000",
};

START_TEST(local_exec_matches_reference)
{
    run_result r = run_cmd(LOCAL " --model tiny --seq 1K %s --scope attn --check " FAST, meshes[_i]);
    ck_assert_msg(r.status == 0, "%s: exit %d\n%s\n%s", meshes[_i], r.status, r.out, r.err);
    ck_assert_msg(strstr(r.out, "  O ") && !strstr(r.out, "FAILED"), "%s\n%s", meshes[_i], r.out);
}
END_TEST

START_TEST(local_exec_step)
{
    run_result r = run_cmd(LOCAL " --model tiny --seq 512 --mesh 2x2 --strategy usp --scope step --check " FAST);
    ck_assert_msg(r.status == 0, "exit %d\n%s\n%s", r.status, r.out, r.err);
    ck_assert_msg(strstr(r.out, "dW_qkv") && !strstr(r.out, "FAILED"), "%s", r.out);
}
END_TEST

int main(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create(n > 0 && e == cudaSuccess ? "gpu" : "no_gpu");
    if (n > 0 && e == cudaSuccess) {
        /* CUDA is initialised here (the device count), and a forked child
         * cannot use its parent's CUDA: run the GPU tests in this process */
        setenv("CK_FORK", "no", 1);
        tcase_add_loop_test(tc, attention_matches_float64, 0, 3 * (int)(sizeof kshapes / sizeof kshapes[0]));
        tcase_add_loop_test(tc, local_exec_matches_reference, 0, (int)(sizeof meshes / sizeof meshes[0]));
        tcase_add_test(tc, local_exec_step);
        tcase_add_test(tc, bad_transport);
    } else {
        tcase_add_test(tc, no_gpu_is_one_line);
        tcase_add_test(tc, bad_transport);
    }
    suite_add_tcase(s, tc);
    int rc = check_run(s);
    if (rc == EXIT_SUCCESS && !(n > 0 && e == cudaSuccess)) {
        printf("check_cuda: no CUDA GPU here (%s): bad input checked; the kernel and --transport local tests SKIPPED\n",
               e == cudaSuccess ? "device count 0" : cudaGetErrorString(e));
        return 77;
    }
    return rc;
}

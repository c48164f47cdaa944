/*
 * cuda_lab: the kernel lab of the CUDA device, llm.c style. First it
 * validates every kernel against the float64 reference (exec/attn_ref.c):
 * attention forward (O, LSE), backward (dQ, dK, dV), and the LSE merge of
 * two key blocks (positions split by absolute position), with bf16
 * tolerances; then it times attention forward/backward on full blocks of N
 * tokens (d = 128) and cuBLAS GEMMs, one line per measurement:
 *   attn_fwd n=4096 hq=8 hkv=2 d=128 ms=... tflops=...
 * Exit 1 if any check fails, 77 if there is no GPU.
 *
 * usage: cuda_lab [--check-only] [--sizes 4096,8192,16384] [--iters N]
 * Builds with gcc against libloongcuda.a, or on a bare GPU machine with
 *   nvcc -O3 -arch=sm_90 -Isrc -I. experiments/cuda-lab/cuda_lab.c \
 *        src/cuda/kernels_cuda.cu src/exec/attn_ref.c -lcublas
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/kernels_cuda.h"

#define TOL 1e-2

static void cuda_check(cudaError_t e, const char *file, int line)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "cuda_lab: CUDA error at %s:%d: %s\n", file, line, cudaGetErrorString(e));
    exit(2);
}
#define cudaCheck(x) cuda_check((cudaError_t)(x), __FILE__, __LINE__)

static float *dput(const float *h, size_t n)
{
    float *d;
    cudaCheck(cudaMalloc((void **)&d, n * sizeof *d + 4));
    if (h)
        cudaCheck(cudaMemcpy(d, h, n * sizeof *d, cudaMemcpyHostToDevice));
    else
        cudaCheck(cudaMemset(d, 0, n * sizeof *d + 4));
    return d;
}

static void dget(float *h, const float *d, size_t n)
{
    cudaCheck(cudaMemcpy(h, d, n * sizeof *h, cudaMemcpyDeviceToHost));
}

static int64_t *dpos(int64_t first, int n)
{
    int64_t *h = malloc((size_t)n * sizeof *h), *d;
    for (int i = 0; i < n; i++)
        h[i] = first + i;
    cudaCheck(cudaMalloc((void **)&d, (size_t)n * sizeof *d));
    cudaCheck(cudaMemcpy(d, h, (size_t)n * sizeof *d, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

static unsigned long long rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* max|a-b| / max|b| (NaN propagates, as exec_check) */
static double rel_err(const float *a, const double *b, size_t n, int skip_inf)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (skip_inf && isinf(b[i]) && a[i] == (float)b[i]) continue;
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= num)) num = e;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return den > 0 ? num / den : num;
}

static int report(const char *what, double err)
{
    int ok = err <= TOL;
    printf("check %-28s max_rel_err %.3e  %s\n", what, err, ok ? "OK" : "NOT OK");
    return ok ? 0 : 1;
}

/* One causal sequence of n tokens: GPU fwd/bwd vs float64; then the same
 * forward as two key blocks merged. */
static int validate(int n, int hq, int hkv, int d)
{
    size_t nqh = (size_t)n * hq * d, nkh = (size_t)n * hkv * d;
    float *q = malloc(nqh * 4), *k = malloc(nkh * 4), *v = malloc(nkh * 4), *dO = malloc(nqh * 4);
    double *qd = malloc(nqh * 8), *kd = malloc(nkh * 8), *vd = malloc(nkh * 8), *dod = malloc(nqh * 8);
    double *ro = malloc(nqh * 8), *rl = malloc((size_t)n * hq * 8), *rdq = malloc(nqh * 8), *rdk = malloc(nkh * 8),
           *rdv = malloc(nkh * 8);
    for (size_t i = 0; i < nqh; i++)
        qd[i] = q[i] = frand(), dod[i] = dO[i] = frand();
    for (size_t i = 0; i < nkh; i++)
        kd[i] = k[i] = frand(), vd[i] = v[i] = frand();
    attn_ref_fwd(ro, rl, qd, kd, vd, NULL, n, hq, hkv, d);
    attn_ref_bwd(rdq, rdk, rdv, qd, kd, vd, dod, NULL, n, hq, hkv, d);

    float *Q = dput(q, nqh), *K = dput(k, nkh), *V = dput(v, nkh), *DO = dput(dO, nqh);
    float *O = dput(NULL, nqh), *L = dput(NULL, (size_t)n * hq), *DQ = dput(NULL, nqh), *DK = dput(NULL, nkh),
          *DV = dput(NULL, nkh), *DI = dput(NULL, (size_t)n * hq);
    int64_t *pos = dpos(0, n);
    attn_shape s = {n, n, hq, hkv, d, 1, NULL, 0};
    cudaCheck(cuda_attn_fwd(O, L, Q, K, V, pos, pos, &s, 0));
    cudaCheck(cuda_attn_bwd(DQ, DK, DV, Q, K, V, O, L, DO, pos, pos, &s, DI, 0));
    cudaCheck(cudaDeviceSynchronize());
    float *o = malloc(nqh * 4), *l = malloc((size_t)n * hq * 4), *g = malloc(nqh * 4);
    char what[64];
    int bad = 0;
    dget(o, O, nqh);
    dget(l, L, (size_t)n * hq);
    snprintf(what, sizeof what, "fwd O   n=%d hq=%d hkv=%d d=%d", n, hq, hkv, d);
    bad += report(what, rel_err(o, ro, nqh, 0));
    snprintf(what, sizeof what, "fwd LSE n=%d hq=%d hkv=%d d=%d", n, hq, hkv, d);
    bad += report(what, rel_err(l, rl, (size_t)n * hq, 1));
    dget(g, DQ, nqh);
    snprintf(what, sizeof what, "bwd dQ  n=%d hq=%d hkv=%d d=%d", n, hq, hkv, d);
    bad += report(what, rel_err(g, rdq, nqh, 0));
    dget(g, DK, nkh);
    snprintf(what, sizeof what, "bwd dK  n=%d hq=%d hkv=%d d=%d", n, hq, hkv, d);
    bad += report(what, rel_err(g, rdk, nkh, 0));
    dget(g, DV, nkh);
    snprintf(what, sizeof what, "bwd dV  n=%d hq=%d hkv=%d d=%d", n, hq, hkv, d);
    bad += report(what, rel_err(g, rdv, nkh, 0));

    /* keys [0, h) and [h, n) as two blocks (the second one causal by
     * absolute position), merged: must equal the whole sequence */
    int h = n / 2 + 3;
    attn_shape s1 = {n, h, hq, hkv, d, 1, NULL, 0}, s2 = {n, n - h, hq, hkv, d, 1, NULL, 0};
    float *OB = dput(NULL, nqh), *LB = dput(NULL, (size_t)n * hq);
    int64_t *pos2 = dpos(h, n - h);
    cudaCheck(cuda_attn_fwd(O, L, Q, K, V, pos, pos, &s1, 0));
    cudaCheck(cuda_attn_fwd(OB, LB, Q, K + (size_t)h * hkv * d, V + (size_t)h * hkv * d, pos, pos2, &s2, 0));
    cudaCheck(cuda_attn_merge(O, L, OB, LB, n, hq, d, 0));
    cudaCheck(cudaDeviceSynchronize());
    dget(o, O, nqh);
    snprintf(what, sizeof what, "merge O n=%d hq=%d hkv=%d d=%d", n, hq, hkv, d);
    bad += report(what, rel_err(o, ro, nqh, 0));

    cudaFree(Q), cudaFree(K), cudaFree(V), cudaFree(DO), cudaFree(O), cudaFree(L), cudaFree(DQ), cudaFree(DK);
    cudaFree(DV), cudaFree(DI), cudaFree(OB), cudaFree(LB), cudaFree(pos), cudaFree(pos2);
    free(q), free(k), free(v), free(dO), free(qd), free(kd), free(vd), free(dod), free(ro), free(rl), free(rdq);
    free(rdk), free(rdv), free(o), free(l), free(g);
    return bad;
}

/* ms per call of a block of n queries x n keys, full or causal (FLOPs
 * then half the full block's, FlashAttention's convention) */
static void bench_attn(int n, int hq, int hkv, int d, int iters, int causal)
{
    size_t nqh = (size_t)n * hq * d, nkh = (size_t)n * hkv * d;
    float *h = malloc((nqh > nkh ? nqh : nkh) * 4);
    for (size_t i = 0; i < (nqh > nkh ? nqh : nkh); i++)
        h[i] = frand();
    float *Q = dput(h, nqh), *K = dput(h, nkh), *V = dput(h, nkh), *DO = dput(h, nqh), *O = dput(NULL, nqh),
          *L = dput(NULL, (size_t)n * hq), *DQ = dput(NULL, nqh), *DK = dput(NULL, nkh), *DV = dput(NULL, nkh),
          *DI = dput(NULL, (size_t)n * hq);
    int64_t *pos = dpos(0, n);
    attn_shape s = {n, n, hq, hkv, d, causal, NULL, 0};
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    double flops = 4.0 * n * (double)n * hq * d / (causal ? 2 : 1); /* QK^T and PV */
    for (int pass = 0; pass < 2; pass++) {
        for (int w = 0; w < 2; w++) /* warm-up */
            cudaCheck(pass ? cuda_attn_bwd(DQ, DK, DV, Q, K, V, O, L, DO, pos, pos, &s, DI, 0)
                           : cuda_attn_fwd(O, L, Q, K, V, pos, pos, &s, 0));
        cudaCheck(cudaEventRecord(a, 0));
        for (int i = 0; i < iters; i++)
            cudaCheck(pass ? cuda_attn_bwd(DQ, DK, DV, Q, K, V, O, L, DO, pos, pos, &s, DI, 0)
                           : cuda_attn_fwd(O, L, Q, K, V, pos, pos, &s, 0));
        cudaCheck(cudaEventRecord(b, 0));
        cudaCheck(cudaEventSynchronize(b));
        float ms;
        cudaCheck(cudaEventElapsedTime(&ms, a, b));
        ms /= (float)iters;
        double f = pass ? 2.5 * flops : flops; /* backward: 5 products of the size of 2 */
        printf("%s%s n=%d hq=%d hkv=%d d=%d ms=%.4f tflops=%.1f\n", pass ? "attn_bwd" : "attn_fwd",
               causal ? "_causal" : "", n, hq, hkv, d, ms, f / (ms * 1e-3) / 1e12);
    }
    cudaFree(Q), cudaFree(K), cudaFree(V), cudaFree(DO), cudaFree(O), cudaFree(L), cudaFree(DQ), cudaFree(DK);
    cudaFree(DV), cudaFree(DI), cudaFree(pos);
    free(h);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
}

/* bf16 bits of x, rounded to nearest even (finite inputs) */
static unsigned short to_bf16(float x)
{
    unsigned int u;
    memcpy(&u, &x, 4);
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* n elements of random data in [-1, 1) on the device, fp32 or bf16: never
 * time on zeros (they run faster than real data, METHOD.md) */
static void *drand_buf(size_t n, int bf16)
{
    size_t el = bf16 ? 2 : 4;
    unsigned char *h = malloc(n * el);
    for (size_t i = 0; i < n; i++) {
        float x = frand();
        if (bf16) {
            unsigned short b = to_bf16(x);
            memcpy(h + 2 * i, &b, 2);
        } else {
            memcpy(h + 4 * i, &x, 4);
        }
    }
    void *d;
    cudaCheck(cudaMalloc(&d, n * el));
    cudaCheck(cudaMemcpy(d, h, n * el, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

/* C[m x n] = A[m x k] B[k x n] (row-major, as the executor's y = x W with
 * x tokens x in): cuBLAS sees the column-major transpose, n x m = (n x k)(k x m).
 * bf16 operands with fp32 output and accumulation (cublasGemmEx), or fp32
 * (cublasSgemm, what the device runs today). */
static void bench_gemm(int m, int n, int k, int bf16, int iters, const char *what)
{
    cublasHandle_t hd;
    if (cublasCreate(&hd) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cuda_lab: cublasCreate failed\n");
        exit(2);
    }
    void *A = drand_buf((size_t)m * k, bf16), *B = drand_buf((size_t)k * n, bf16), *C;
    cudaCheck(cudaMalloc(&C, (size_t)m * n * 4));
    float one = 1, zero = 0;
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    for (int i = 0; i < iters + 2; i++) {
        if (i == 2) cudaCheck(cudaEventRecord(a, 0));
        cublasStatus_t st =
            bf16 ? cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, CUDA_R_16BF, n, A, CUDA_R_16BF, k,
                                &zero, C, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
                 : cublasSgemm(hd, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, n, A, k, &zero, C, n);
        if (st != CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "cuda_lab: cuBLAS GEMM failed (status %d)\n", (int)st);
            exit(2);
        }
    }
    cudaCheck(cudaEventRecord(b, 0));
    cudaCheck(cudaEventSynchronize(b));
    float ms;
    cudaCheck(cudaEventElapsedTime(&ms, a, b));
    ms /= (float)iters;
    printf("gemm_%s m=%d n=%d k=%d ms=%.4f tflops=%.1f (%s, random inputs)\n", bf16 ? "bf16" : "fp32", m, n, k, ms,
           2.0 * m * (double)n * k / (ms * 1e-3) / 1e12, what);
    cudaFree(A), cudaFree(B), cudaFree(C);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cublasDestroy(hd);
}

/* Device-to-device copies (what --transport local's sends are), bytes
 * per call from 1 MiB to 1 GiB: GB/s counts the bytes copied once. */
static void bench_copy(int iters)
{
    size_t most = (size_t)1 << 30;
    void *a = drand_buf(most / 4, 0), *b;
    cudaCheck(cudaMalloc(&b, most));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    for (size_t bytes = (size_t)1 << 20; bytes <= most; bytes <<= 2) {
        cudaCheck(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice)); /* warm-up */
        cudaCheck(cudaEventRecord(e0, 0));
        for (int i = 0; i < iters; i++)
            cudaCheck(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0));
        cudaCheck(cudaEventRecord(e1, 0));
        cudaCheck(cudaEventSynchronize(e1));
        float ms;
        cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
        ms /= (float)iters;
        printf("copy_d2d bytes=%zu ms=%.4f GBps=%.1f\n", bytes, ms, (double)bytes / (ms * 1e-3) / 1e9);
    }
    cudaFree(a), cudaFree(b);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
}

/* The step's GEMMs for llama3-8b (hidden 4096, 32 heads, 8 KV heads of 128,
 * ffn 14336) on 8192 tokens, forward shapes, and a square ceiling. */
static void bench_gemms(int iters)
{
    static const struct {
        int m, n, k;
        const char *what;
    } g[] = {
        {8192, 8192, 8192, "square"},
        {8192, 6144, 4096, "qkv 4096->6144"},
        {8192, 4096, 4096, "o 4096->4096"},
        {8192, 28672, 4096, "gate+up 4096->2x14336"},
        {8192, 4096, 14336, "down 14336->4096"},
    };
    for (int bf16 = 1; bf16 >= 0; bf16--)
        for (size_t i = 0; i < sizeof g / sizeof *g; i++)
            bench_gemm(g[i].m, g[i].n, g[i].k, bf16, iters, g[i].what);
}

int main(int argc, char **argv)
{
    int check_only = 0, iters = 5, sizes[8] = {4096, 8192, 16384}, nsizes = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check-only")) {
            check_only = 1;
        } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            nsizes = 0;
            for (char *t = strtok(argv[++i], ","); t && nsizes < 8; t = strtok(NULL, ","))
                sizes[nsizes++] = atoi(t);
        } else {
            fprintf(stderr, "usage: cuda_lab [--check-only] [--sizes N,N,...] [--iters N]\n");
            return 2;
        }
    }
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) {
        printf("cuda_lab: no CUDA GPU here: skipped\n");
        return 77;
    }
    struct cudaDeviceProp p;
    cudaCheck(cudaGetDeviceProperties(&p, 0));
    printf("# %s, %d SMs, sm_%d%d; attention smem fwd %zu B, bwd %zu B\n", p.name, p.multiProcessorCount, p.major,
           p.minor, cuda_attn_fwd_smem(), cuda_attn_bwd_smem());
    int bad = 0;
    bad += validate(300, 4, 2, 64);
    bad += validate(257, 8, 8, 128);
    bad += validate(200, 6, 2, 40);
    bad += validate(130, 2, 1, 16);
    printf("# validation: %s\n", bad ? "FAILED" : "all OK");
    if (bad || check_only) return bad ? 1 : 0;
    for (int i = 0; i < nsizes; i++)
        for (int causal = 0; causal < 2; causal++)
            bench_attn(sizes[i], 8, 2, 128, iters, causal);
    bench_gemms(iters);
    bench_copy(iters);
    return 0;
}

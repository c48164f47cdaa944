/*
 * kernels_cuda: attention block forward/backward, LSE merge and the small
 * element-wise kernels of the executor on an NVIDIA GPU (see kernels_cuda.h
 * for the contract; exec/kernels_cpu.c is the reference they mirror).
 *
 * Attention is FlashAttention-2 shaped, written for clarity first:
 *   forward   one block of 64 query rows x one head per CTA (4 warps, 16
 *             rows each); loop over 64-key tiles: S = Q K^T (WMMA bf16 ->
 *             fp32), online softmax in fp32, O += P V with O kept in shared
 *             memory as fp32; O /= l, LSE = m + log l at the end.
 *   backward  one block of 64 keys x one KV head per CTA; loop over the
 *             query heads of its GQA group and 32-row query tiles: recompute
 *             P = exp(scale S - LSE), dV += P^T dO, dP = dO V^T,
 *             dS = P (dP - D) scale, dK += dS^T Q (fp32 accumulators in
 *             shared memory), dQ += dS K (fp32 atomics into global memory).
 * Tiles that the causal mask removes entirely are skipped. This is NOT a
 * tuned kernel: no cp.async/TMA pipelining, no wgmma; see docs/exec.md.
 */
#include <cuda_bf16.h>
#include <limits.h>
#include <math.h>
#include <mma.h>

#include "kernels_cuda.h"

using namespace nvcuda;
typedef __nv_bfloat16 bf16;

namespace
{

constexpr int DMAX = CUDA_ATTN_DMAX;
constexpr int LDH = DMAX + 8; /* bf16 tile rows (elements; 16-byte multiple) */
constexpr int LDF = DMAX + 4; /* fp32 accumulator rows */
constexpr int THREADS = 128;  /* 4 warps */

/* forward tiles */
constexpr int FBQ = 64, FBK = 64;
constexpr int SLD = FBK + 4; /* fp32 score rows */
constexpr int PLD = FBK + 8; /* bf16 probability rows */
/* backward tiles */
constexpr int BBQ = 32, BBK = 64;

constexpr size_t FWD_SMEM = (size_t)FBQ * LDH * 2 + 2 * (size_t)FBK * LDH * 2       /* Q, K, V */
                            + (size_t)FBQ * SLD * 4 + (size_t)FBQ * PLD * 2         /* S, P */
                            + (size_t)FBQ * LDF * 4                                 /* O */
                            + 2 * FBQ * 4 + (FBQ + FBK) * 8;                        /* m, l, qpos, kpos */
constexpr size_t BWD_SMEM = 2 * (size_t)BBK * LDH * 2 + 2 * (size_t)BBQ * LDH * 2   /* K, V, Q, dO */
                            + 2 * (size_t)BBQ * SLD * 4 + 2 * (size_t)BBQ * PLD * 2 /* S, dP, P, dS */
                            + 2 * (size_t)BBK * LDF * 4                             /* dK, dV */
                            + 2 * BBQ * 4 + (BBQ + BBK) * 8;                        /* lse, D, qpos, kpos */
static_assert((size_t)BBQ * LDF * 4 <= 2 * (size_t)BBQ * SLD * 4, "dQ scratch must fit in S + dP");

typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc_t;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a_row_t;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major> a_col_t;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b_row_t;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b_col_t;

/* rows x dp tile of one head from a (n, heads, d) fp32 tensor into bf16
 * shared memory (zero outside [0, n) x [0, d)). */
__device__ void load_tile(bf16 *dst, const float *src, int row0, int rows, int n, int heads, int head, int d, int dp)
{
    const size_t stride = (size_t)heads * d;
    for (int i = threadIdx.x; i < rows * dp; i += THREADS) {
        const int r = i / dp, c = i % dp;
        float x = 0.0f;
        if (row0 + r < n && c < d) x = src[(size_t)(row0 + r) * stride + (size_t)head * d + c];
        dst[r * LDH + c] = __float2bfloat16(x);
    }
}

/* The first key position query row i may see (its document's start). */
__device__ long long row_start(const int64_t *qstart, int i, int n)
{
    return qstart && i < n ? (long long)qstart[i] : 0;
}

__global__ void __launch_bounds__(THREADS)
    attn_fwd_kernel(float *o, float *lse, const float *q, const float *k, const float *v, const int64_t *qpos,
                    const int64_t *qstart, const int64_t *kpos, int nq, int nk, int hq, int hkv, int d, int dp,
                    int causal, float scale)
{
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Qs = (bf16 *)smem, *Ks = Qs + FBQ * LDH, *Vs = Ks + FBK * LDH;
    float *Ss = (float *)(Vs + FBK * LDH);
    bf16 *Ps = (bf16 *)(Ss + FBQ * SLD);
    float *Os = (float *)(Ps + FBQ * PLD), *mrow = Os + FBQ * LDF, *lrow = mrow + FBQ;
    long long *qp = (long long *)(lrow + FBQ), *kp = qp + FBQ;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int h = blockIdx.y, kh = h / (hq / hkv), q0 = blockIdx.x * FBQ;

    load_tile(Qs, q, q0, FBQ, nq, hq, h, d, dp);
    for (int i = tid; i < FBQ * dp; i += THREADS)
        Os[(i / dp) * LDF + i % dp] = 0.0f;
    if (tid < FBQ) {
        mrow[tid] = -INFINITY;
        lrow[tid] = 0.0f;
        qp[tid] = q0 + tid < nq ? (long long)qpos[q0 + tid] : LLONG_MIN;
    }
    __syncthreads();
    long long qmax = LLONG_MIN, smin = LLONG_MAX;
    for (int r = 0; r < FBQ; r++) {
        qmax = qp[r] > qmax ? qp[r] : qmax;
        const long long st = row_start(qstart, q0 + r, nq);
        smin = q0 + r < nq && st < smin ? st : smin;
    }

    for (int k0 = 0; k0 < nk; k0 += FBK) {
        if (causal) { /* skip a tile no query of this block can see */
            const long long kq = k0 + tid < nk ? (long long)kpos[k0 + tid] : LLONG_MAX;
            const int live = tid < FBK && k0 + tid < nk && kq <= qmax && kq >= smin;
            if (!__syncthreads_or(live)) continue;
        }
        load_tile(Ks, k, k0, FBK, nk, hkv, kh, d, dp);
        load_tile(Vs, v, k0, FBK, nk, hkv, kh, d, dp);
        if (tid < FBK) kp[tid] = k0 + tid < nk ? (long long)kpos[k0 + tid] : LLONG_MAX;
        __syncthreads();

        /* S = Q K^T: this warp's 16 rows x 64 keys */
        {
            acc_t acc[FBK / 16];
#pragma unroll
            for (int n = 0; n < FBK / 16; n++)
                wmma::fill_fragment(acc[n], 0.0f);
            for (int kk = 0; kk < dp / 16; kk++) {
                a_row_t a;
                wmma::load_matrix_sync(a, Qs + warp * 16 * LDH + kk * 16, LDH);
#pragma unroll
                for (int n = 0; n < FBK / 16; n++) {
                    b_col_t b;
                    wmma::load_matrix_sync(b, Ks + n * 16 * LDH + kk * 16, LDH);
                    wmma::mma_sync(acc[n], a, b, acc[n]);
                }
            }
#pragma unroll
            for (int n = 0; n < FBK / 16; n++)
                wmma::store_matrix_sync(Ss + warp * 16 * SLD + n * 16, acc[n], SLD, wmma::mem_row_major);
        }
        __syncwarp();

        /* online softmax: two lanes per row, 32 keys each */
        {
            const int r = warp * 16 + lane / 2, half = lane % 2;
            const long long qr = qp[r], sr = row_start(qstart, q0 + r, nq);
            float s[32], tmax = -INFINITY;
#pragma unroll
            for (int j = 0; j < 32; j++) {
                const int c = half * 32 + j;
                const bool ok = q0 + r < nq && k0 + c < nk && (!causal || (kp[c] <= qr && kp[c] >= sr));
                s[j] = ok ? Ss[r * SLD + c] * scale : -INFINITY;
                tmax = fmaxf(tmax, s[j]);
            }
            tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
            const float mold = mrow[r], mnew = fmaxf(mold, tmax);
            float alpha = 1.0f, sum = 0.0f;
            if (mnew != -INFINITY) alpha = __expf(mold - mnew); /* mold = -inf: 0 */
#pragma unroll
            for (int j = 0; j < 32; j++) {
                const float p = s[j] == -INFINITY ? 0.0f : __expf(s[j] - mnew);
                sum += p;
                Ps[r * PLD + half * 32 + j] = __float2bfloat16(p);
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            const float lold = lrow[r];
            __syncwarp();
            if (half == 0) {
                mrow[r] = mnew;
                lrow[r] = lold * alpha + sum;
            }
            for (int c = half; c < dp; c += 2)
                Os[r * LDF + c] *= alpha;
        }
        __syncwarp();

        /* O += P V */
        for (int n = 0; n < dp / 16; n++) {
            acc_t acc;
            wmma::load_matrix_sync(acc, Os + warp * 16 * LDF + n * 16, LDF, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < FBK / 16; kk++) {
                a_row_t a;
                b_row_t b;
                wmma::load_matrix_sync(a, Ps + warp * 16 * PLD + kk * 16, PLD);
                wmma::load_matrix_sync(b, Vs + kk * 16 * LDH + n * 16, LDH);
                wmma::mma_sync(acc, a, b, acc);
            }
            wmma::store_matrix_sync(Os + warp * 16 * LDF + n * 16, acc, LDF, wmma::mem_row_major);
        }
        __syncthreads();
    }

    const size_t qstride = (size_t)hq * d;
    for (int i = lane; i < 16 * dp; i += 32) {
        const int r = warp * 16 + i / dp, c = i % dp;
        if (q0 + r < nq && c < d) {
            const float l = lrow[r];
            o[(size_t)(q0 + r) * qstride + (size_t)h * d + c] = l > 0.0f ? Os[r * LDF + c] / l : 0.0f;
        }
    }
    if (tid < FBQ && q0 + tid < nq)
        lse[(size_t)(q0 + tid) * hq + h] = lrow[tid] > 0.0f ? mrow[tid] + logf(lrow[tid]) : -INFINITY;
}

/* D[r][h] = sum_c dO[r][h][c] * O[r][h][c]; one warp per (row, head). */
__global__ void attn_bwd_dot_kernel(float *di, const float *o, const float *do_, int nq, int hq, int d)
{
    const long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (w >= (long long)nq * hq) return;
    const float *a = o + (size_t)w * d, *b = do_ + (size_t)w * d;
    float s = 0.0f;
    for (int c = lane; c < d; c += 32)
        s += a[c] * b[c];
    for (int off = 16; off > 0; off /= 2)
        s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) di[w] = s;
}

__global__ void __launch_bounds__(THREADS)
    attn_bwd_kernel(float *dq, float *dk, float *dv, const float *q, const float *k, const float *v, const float *lse,
                    const float *do_, const float *di, const int64_t *qpos, const int64_t *qstart, const int64_t *kpos,
                    int nq, int nk, int hq, int hkv, int d, int dp, int causal, float scale)
{
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Ks = (bf16 *)smem, *Vs = Ks + BBK * LDH, *Qs = Vs + BBK * LDH, *dOs = Qs + BBQ * LDH;
    float *Ss = (float *)(dOs + BBQ * LDH), *dPs = Ss + BBQ * SLD;
    float *scr = Ss; /* dQ tile (BBQ x LDF), once S and dP are consumed */
    bf16 *Ps = (bf16 *)(dPs + BBQ * SLD), *dSs = Ps + BBQ * PLD;
    float *dKs = (float *)(dSs + BBQ * PLD), *dVs = dKs + BBK * LDF, *ls = dVs + BBK * LDF, *ds_ = ls + BBQ;
    long long *qp = (long long *)(ds_ + BBQ), *kp = qp + BBQ;

    const int tid = threadIdx.x, warp = tid / 32;
    const int kh = blockIdx.y, g = hq / hkv, k0 = blockIdx.x * BBK;

    load_tile(Ks, k, k0, BBK, nk, hkv, kh, d, dp);
    load_tile(Vs, v, k0, BBK, nk, hkv, kh, d, dp);
    for (int i = tid; i < BBK * dp; i += THREADS) {
        dKs[(i / dp) * LDF + i % dp] = 0.0f;
        dVs[(i / dp) * LDF + i % dp] = 0.0f;
    }
    if (tid < BBK) kp[tid] = k0 + tid < nk ? (long long)kpos[k0 + tid] : LLONG_MAX;
    __syncthreads();
    long long kmin = LLONG_MAX, kmax = LLONG_MIN;
    for (int c = 0; c < BBK; c++) {
        kmin = kp[c] < kmin ? kp[c] : kmin;
        kmax = k0 + c < nk && kp[c] > kmax ? kp[c] : kmax;
    }

    for (int hh = 0; hh < g; hh++) {
        const int h = kh * g + hh;
        for (int q0 = 0; q0 < nq; q0 += BBQ) {
            if (causal) {
                const int live = tid < BBQ && q0 + tid < nq && (long long)qpos[q0 + tid] >= kmin &&
                                 row_start(qstart, q0 + tid, nq) <= kmax;
                if (!__syncthreads_or(live)) continue;
            }
            load_tile(Qs, q, q0, BBQ, nq, hq, h, d, dp);
            load_tile(dOs, do_, q0, BBQ, nq, hq, h, d, dp);
            if (tid < BBQ) {
                const bool in = q0 + tid < nq;
                ls[tid] = in ? lse[(size_t)(q0 + tid) * hq + h] : -INFINITY;
                ds_[tid] = in ? di[(size_t)(q0 + tid) * hq + h] : 0.0f;
                qp[tid] = in ? (long long)qpos[q0 + tid] : LLONG_MIN;
            }
            __syncthreads();

            /* S = Q K^T and dP = dO V^T: 2 x 4 tiles, two per warp */
            {
                const int rt = warp / 2;
#pragma unroll
                for (int t = 0; t < 2; t++) {
                    const int ct = (warp % 2) * 2 + t;
                    acc_t s, p;
                    wmma::fill_fragment(s, 0.0f);
                    wmma::fill_fragment(p, 0.0f);
                    for (int kk = 0; kk < dp / 16; kk++) {
                        a_row_t a;
                        b_col_t b;
                        wmma::load_matrix_sync(a, Qs + rt * 16 * LDH + kk * 16, LDH);
                        wmma::load_matrix_sync(b, Ks + ct * 16 * LDH + kk * 16, LDH);
                        wmma::mma_sync(s, a, b, s);
                        wmma::load_matrix_sync(a, dOs + rt * 16 * LDH + kk * 16, LDH);
                        wmma::load_matrix_sync(b, Vs + ct * 16 * LDH + kk * 16, LDH);
                        wmma::mma_sync(p, a, b, p);
                    }
                    wmma::store_matrix_sync(Ss + rt * 16 * SLD + ct * 16, s, SLD, wmma::mem_row_major);
                    wmma::store_matrix_sync(dPs + rt * 16 * SLD + ct * 16, p, SLD, wmma::mem_row_major);
                }
            }
            __syncthreads();

            /* P = exp(scale S - LSE), dS = scale P (dP - D) */
            for (int i = tid; i < BBQ * BBK; i += THREADS) {
                const int r = i / BBK, c = i % BBK;
                const bool ok = q0 + r < nq && k0 + c < nk &&
                                (!causal || (kp[c] <= qp[r] && kp[c] >= row_start(qstart, q0 + r, nq))) &&
                                ls[r] != -INFINITY;
                const float p = ok ? __expf(Ss[r * SLD + c] * scale - ls[r]) : 0.0f;
                Ps[r * PLD + c] = __float2bfloat16(p);
                dSs[r * PLD + c] = __float2bfloat16(p * (dPs[r * SLD + c] - ds_[r]) * scale);
            }
            __syncthreads();

            /* dV += P^T dO and dK += dS^T Q: this warp's 16 keys */
            for (int n = 0; n < dp / 16; n++) {
                acc_t av, ak;
                wmma::load_matrix_sync(av, dVs + warp * 16 * LDF + n * 16, LDF, wmma::mem_row_major);
                wmma::load_matrix_sync(ak, dKs + warp * 16 * LDF + n * 16, LDF, wmma::mem_row_major);
#pragma unroll
                for (int kk = 0; kk < BBQ / 16; kk++) {
                    a_col_t a;
                    b_row_t b;
                    wmma::load_matrix_sync(a, Ps + kk * 16 * PLD + warp * 16, PLD);
                    wmma::load_matrix_sync(b, dOs + kk * 16 * LDH + n * 16, LDH);
                    wmma::mma_sync(av, a, b, av);
                    wmma::load_matrix_sync(a, dSs + kk * 16 * PLD + warp * 16, PLD);
                    wmma::load_matrix_sync(b, Qs + kk * 16 * LDH + n * 16, LDH);
                    wmma::mma_sync(ak, a, b, ak);
                }
                wmma::store_matrix_sync(dVs + warp * 16 * LDF + n * 16, av, LDF, wmma::mem_row_major);
                wmma::store_matrix_sync(dKs + warp * 16 * LDF + n * 16, ak, LDF, wmma::mem_row_major);
            }

            /* dQ tile = dS K into scratch (S and dP are consumed) */
            for (int t = warp; t < (BBQ / 16) * (dp / 16); t += THREADS / 32) {
                const int rt = t / (dp / 16), n = t % (dp / 16);
                acc_t acc;
                wmma::fill_fragment(acc, 0.0f);
#pragma unroll
                for (int kk = 0; kk < BBK / 16; kk++) {
                    a_row_t a;
                    b_row_t b;
                    wmma::load_matrix_sync(a, dSs + rt * 16 * PLD + kk * 16, PLD);
                    wmma::load_matrix_sync(b, Ks + kk * 16 * LDH + n * 16, LDH);
                    wmma::mma_sync(acc, a, b, acc);
                }
                wmma::store_matrix_sync(scr + rt * 16 * LDF + n * 16, acc, LDF, wmma::mem_row_major);
            }
            __syncthreads();
            const size_t qstride = (size_t)hq * d;
            for (int i = tid; i < BBQ * dp; i += THREADS) {
                const int r = i / dp, c = i % dp;
                if (q0 + r < nq && c < d)
                    atomicAdd(&dq[(size_t)(q0 + r) * qstride + (size_t)h * d + c], scr[r * LDF + c]);
            }
            __syncthreads();
        }
    }

    const size_t kstride = (size_t)hkv * d;
    for (int i = tid; i < BBK * dp; i += THREADS) {
        const int r = i / dp, c = i % dp;
        if (k0 + r < nk && c < d) {
            dk[(size_t)(k0 + r) * kstride + (size_t)kh * d + c] = dKs[r * LDF + c];
            dv[(size_t)(k0 + r) * kstride + (size_t)kh * d + c] = dVs[r * LDF + c];
        }
    }
}

/* one warp per (row, head), as attn_merge */
__global__ void merge_kernel(float *o, float *lse, const float *ob, const float *lseb, int nq, int hq, int d)
{
    const long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (w >= (long long)nq * hq) return;
    const float a = lse[w], b = lseb[w];
    float *oa = o + (size_t)w * d;
    const float *obr = ob + (size_t)w * d;
    __syncwarp();
    if (b == -INFINITY) return;
    if (a == -INFINITY) {
        for (int c = lane; c < d; c += 32)
            oa[c] = obr[c];
        if (lane == 0) lse[w] = b;
        return;
    }
    const float t = expf(-fabsf(a - b)), wmax = 1.0f / (1.0f + t), wmin = t * wmax;
    const float wa = a >= b ? wmax : wmin, wb = a >= b ? wmin : wmax;
    for (int c = lane; c < d; c += 32)
        oa[c] = oa[c] * wa + obr[c] * wb;
    if (lane == 0) lse[w] = (a >= b ? a : b) + log1pf(t);
}

__global__ void axpy_kernel(float *y, const float *x, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] += x[i];
}

__global__ void fill_kernel(float *y, size_t n, float value)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = value;
}

__global__ void sum_groups_kernel(float *dst, const float *src, size_t rows, size_t dst_ld, size_t src_ld, int groups,
                                  int gs, int d)
{
    const size_t n = rows * (size_t)groups * (size_t)d;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t x = i % (size_t)d, g = i / (size_t)d % (size_t)groups, r = i / ((size_t)d * (size_t)groups);
        const float *s = src + r * src_ld + g * (size_t)gs * (size_t)d + x;
        float acc = 0.0f;
        for (int j = 0; j < gs; j++)
            acc += s[(size_t)j * (size_t)d];
        dst[r * dst_ld + g * (size_t)d + x] = acc;
    }
}

__global__ void rowdot_kernel(float *dst, const float *a, const float *b, size_t rows, size_t n, size_t dst_ld,
                              size_t lda, size_t ldb)
{
    const size_t w = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32, nw = (size_t)gridDim.x * blockDim.x / 32;
    const int lane = threadIdx.x % 32;
    for (size_t r = w; r < rows; r += nw) { /* uniform over the warp */
        const float *x = a + r * lda, *y = b + r * ldb;
        float s = 0.0f;
        for (size_t j = (size_t)lane; j < n; j += 32)
            s += x[j] * y[j];
        for (int off = 16; off > 0; off /= 2)
            s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0) dst[r * dst_ld] = s;
    }
}

__global__ void swiglu_kernel(int backward, float *m, float *dg, float *du, const float *g, const float *u,
                              const float *dm, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float x = g[i], sig = 1.0f / (1.0f + expf(-x)), silu = x * sig;
        if (!backward) {
            m[i] = silu * u[i];
        } else {
            du[i] = dm[i] * silu;
            dg[i] = dm[i] * u[i] * (sig + x * sig * (1.0f - sig));
        }
    }
}

unsigned grid_for(size_t n, int threads)
{
    size_t b = (n + (size_t)threads - 1) / (size_t)threads;
    if (b > 65535u * 16u) b = 65535u * 16u;
    return (unsigned)(b ? b : 1);
}

int check_shape(const attn_shape *s)
{
    if (s->d < 1 || s->d > DMAX || s->hkv < 1 || s->hq % s->hkv) return (int)cudaErrorInvalidValue;
    return 0;
}

} /* namespace */

extern "C" size_t cuda_attn_fwd_smem(void) { return FWD_SMEM; }
extern "C" size_t cuda_attn_bwd_smem(void) { return BWD_SMEM; }

extern "C" int cuda_attn_fwd(float *o, float *lse, const float *q, const float *k, const float *v, const int64_t *qpos,
                             const int64_t *kpos, const attn_shape *s, cudaStream_t st)
{
    if (check_shape(s)) return check_shape(s);
    if (s->nq == 0) return 0;
    static bool attr_set; /* benign race: every thread sets the same value */
    if (!attr_set) {
        cudaError_t e =
            cudaFuncSetAttribute(attn_fwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)FWD_SMEM);
        if (e != cudaSuccess) return (int)e;
        attr_set = true;
    }
    const int dp = (s->d + 15) / 16 * 16;
    dim3 grid((unsigned)((s->nq + FBQ - 1) / FBQ), (unsigned)s->hq);
    attn_fwd_kernel<<<grid, THREADS, FWD_SMEM, st>>>(o, lse, q, k, v, qpos, s->qstart, kpos, s->nq, s->nk, s->hq,
                                                     s->hkv, s->d, dp, s->causal, 1.0f / sqrtf((float)s->d));
    return (int)cudaGetLastError();
}

extern "C" int cuda_attn_bwd(float *dq, float *dk, float *dv, const float *q, const float *k, const float *v,
                             const float *o, const float *lse, const float *do_, const int64_t *qpos,
                             const int64_t *kpos, const attn_shape *s, float *di, cudaStream_t st)
{
    if (check_shape(s)) return check_shape(s);
    if (s->nk == 0) return 0;
    static bool attr_set;
    if (!attr_set) {
        cudaError_t e =
            cudaFuncSetAttribute(attn_bwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)BWD_SMEM);
        if (e != cudaSuccess) return (int)e;
        attr_set = true;
    }
    const size_t rows = (size_t)s->nq * (size_t)s->hq;
    if (rows) attn_bwd_dot_kernel<<<grid_for(rows * 32, 256), 256, 0, st>>>(di, o, do_, s->nq, s->hq, s->d);
    const int dp = (s->d + 15) / 16 * 16;
    dim3 grid((unsigned)((s->nk + BBK - 1) / BBK), (unsigned)s->hkv);
    attn_bwd_kernel<<<grid, THREADS, BWD_SMEM, st>>>(dq, dk, dv, q, k, v, lse, do_, di, qpos, s->qstart, kpos, s->nq,
                                                     s->nk, s->hq, s->hkv, s->d, dp, s->causal,
                                                     1.0f / sqrtf((float)s->d));
    return (int)cudaGetLastError();
}

extern "C" int cuda_attn_merge(float *o, float *lse, const float *ob, const float *lseb, int nq, int hq, int d,
                               cudaStream_t st)
{
    const size_t rows = (size_t)nq * (size_t)hq;
    if (!rows) return 0;
    merge_kernel<<<(unsigned)((rows * 32 + 255) / 256), 256, 0, st>>>(o, lse, ob, lseb, nq, hq, d);
    return (int)cudaGetLastError();
}

extern "C" int cuda_axpy(float *y, const float *x, size_t n, cudaStream_t st)
{
    if (!n) return 0;
    axpy_kernel<<<grid_for(n, 256), 256, 0, st>>>(y, x, n);
    return (int)cudaGetLastError();
}

extern "C" int cuda_fill(float *y, size_t n, float value, cudaStream_t st)
{
    if (!n) return 0;
    if (value == 0.0f) return (int)cudaMemsetAsync(y, 0, n * sizeof(float), st); /* all-zero bits */
    fill_kernel<<<grid_for(n, 256), 256, 0, st>>>(y, n, value);
    return (int)cudaGetLastError();
}

extern "C" int cuda_sum_groups(float *dst, const float *src, size_t rows, size_t dst_ld, size_t src_ld, int groups,
                               int gs, int d, cudaStream_t st)
{
    const size_t n = rows * (size_t)groups * (size_t)d;
    if (!n) return 0;
    sum_groups_kernel<<<grid_for(n, 256), 256, 0, st>>>(dst, src, rows, dst_ld, src_ld, groups, gs, d);
    return (int)cudaGetLastError();
}

extern "C" int cuda_rowdot(float *dst, const float *a, const float *b, size_t rows, size_t n, size_t dst_ld, size_t lda,
                           size_t ldb, cudaStream_t st)
{
    if (!rows) return 0;
    rowdot_kernel<<<grid_for(rows * 32, 256), 256, 0, st>>>(dst, a, b, rows, n, dst_ld, lda, ldb);
    return (int)cudaGetLastError();
}

extern "C" int cuda_swiglu(int backward, float *m, float *dg, float *du, const float *g, const float *u,
                           const float *dm, size_t n, cudaStream_t st)
{
    if (!n) return 0;
    swiglu_kernel<<<grid_for(n, 256), 256, 0, st>>>(backward, m, dg, du, g, u, dm, n);
    return (int)cudaGetLastError();
}

/*
 * kernels_cuda: the executor's kernels on an NVIDIA GPU, as C launchers on a
 * CUDA stream. Same semantics and layouts as the CPU kernels (exec/kernels.h):
 *   q, o, dq, do_  (nq, hq, d); k, v, dk, dv (nk, hkv, d); lse (nq, hq);
 *   qpos, kpos     absolute positions (int64), DEVICE pointers here, and so
 *                  is attn_shape.qstart (each query row's document start);
 *   GQA: query head h reads KV head h / (hq / hkv); the document-causal
 *   mask keeps qstart <= kpos <= qpos.
 *
 * Storage is fp32 (the executor's buffers); the attention kernels convert
 * each tile to bf16 in shared memory and multiply on the tensor cores (WMMA
 * 16x16x16, bf16 in, fp32 accumulate); softmax statistics, O, LSE and the
 * dQ/dK/dV accumulators stay fp32. Head dim: d <= 128 (padded to a multiple
 * of 16 inside the tiles).
 *
 * Every launcher returns 0 (cudaSuccess) or the CUDA error of the launch;
 * errors during execution surface at the next synchronisation.
 *
 * Layer: cuda (fills exec's device interface; uses exec and core).
 */
#ifndef LOONG_CUDA_KERNELS_CUDA_H
#define LOONG_CUDA_KERNELS_CUDA_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "exec/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUDA_ATTN_DMAX 128

/* o, lse = attention(q, k, v) for one block (overwrites o and lse). */
int cuda_attn_fwd(float *o, float *lse, const float *q, const float *k, const float *v, const int64_t *qpos,
                  const int64_t *kpos, const attn_shape *s, cudaStream_t st);

/* FlashAttention-2 backward of one block given the FINAL o and lse:
 * dq += ...; dk, dv overwritten. di is scratch of nq * hq floats (device). */
int cuda_attn_bwd(float *dq, float *dk, float *dv, const float *q, const float *k, const float *v, const float *o,
                  const float *lse, const float *do_, const int64_t *qpos, const int64_t *kpos, const attn_shape *s,
                  float *di, cudaStream_t st);

/* Stable LSE combine, as attn_merge (one warp per row and head). */
int cuda_attn_merge(float *o, float *lse, const float *ob, const float *lseb, int nq, int hq, int d, cudaStream_t st);

/* y[i] += x[i] */
int cuda_axpy(float *y, const float *x, size_t n, cudaStream_t st);
/* y[i] = value */
int cuda_fill(float *y, size_t n, float value, cudaStream_t st);
/* dst[r][g][:] = sum_j src[r][g*gs + j][:], rows of dst_ld / src_ld floats */
int cuda_sum_groups(float *dst, const float *src, size_t rows, size_t dst_ld, size_t src_ld, int groups, int gs, int d,
                    cudaStream_t st);
/* dst[r * dst_ld] = sum_j a[r * lda + j] * b[r * ldb + j], r < rows, j < n (a warp per row) */
int cuda_rowdot(float *dst, const float *a, const float *b, size_t rows, size_t n, size_t dst_ld, size_t lda,
                size_t ldb, cudaStream_t st);
/* fwd: m = silu(g) * u; bwd: du = dm * silu(g), dg = dm * u * silu'(g) */
int cuda_swiglu(int backward, float *m, float *dg, float *du, const float *g, const float *u, const float *dm, size_t n,
                cudaStream_t st);

/* Shared memory the attention kernels need, for the lab's report. */
size_t cuda_attn_fwd_smem(void);
size_t cuda_attn_bwd_smem(void);

#ifdef __cplusplus
}
#endif

#endif

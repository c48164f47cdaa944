/*
 * kernels: the CPU reference kernels of the executor — attention block
 * forward/backward with LSE (FlashAttention-2 math, fp32 accumulation), the
 * numerically stable LSE merge, and the float64 whole-sequence reference that
 * `loong exec --check` compares against. GEMMs go through CBLAS (OpenBLAS);
 * nothing here hand-writes a matrix product.
 *
 * Layouts (row-major, one sample; the executor loops over the batch):
 *   q, o, dq, do_   (nq, hq, d)      tokens x query heads x head dim
 *   k, v, dk, dv    (nk, hkv, d)     tokens x KV heads x head dim
 *   lse             (nq, hq)         natural-log sum-exp of the scaled logits
 *   qpos, kpos      absolute token positions of each row (int64)
 *   qstart          per query row, the first position it may see: the start
 *                   of its document (docs.h), or qpos + 1 for padding
 * With MLA's widths (attn_shape.dv != d) v, dv, o and do_ are (.., dv).
 * GQA: query head h reads KV head h / (hq / hkv). The document-causal mask
 * keeps qstart <= kpos <= qpos, by absolute position, so zigzag chunks,
 * double rings and packed documents mask correctly (qstart NULL: 0, one
 * document). scale = 1/sqrt(d). A fully masked row has o = 0, lse = -inf.
 *
 * Layer: exec (uses core; MPI and CBLAS only in the CPU device).
 */
#ifndef LOONG_EXEC_KERNELS_H
#define LOONG_EXEC_KERNELS_H

#include <stdint.h>

typedef struct attn_shape {
    int nq, nk;            /* query rows, key rows */
    int hq, hkv;           /* query heads, KV heads (hq % hkv == 0) */
    int d;                 /* head dim of Q and K */
    int causal;            /* apply the mask qstart <= kpos <= qpos; 0: every pair counts */
    const int64_t *qstart; /* nq document starts, or NULL: 0 */
    int dv;                /* head dim of V and O (MLA's v_head_dim); 0: d */
} attn_shape;

/* o, lse = attention(q, k, v) for one block. Overwrites o and lse. */
void attn_block_fwd(float *o, float *lse, const float *q, const float *k, const float *v, const int64_t *qpos,
                    const int64_t *kpos, const attn_shape *s);

/* Backward of one block given the FINAL o and lse of the whole row (as in
 * FlashAttention-2 ring backward): recompute P = exp(scale*QK^T - lse),
 * dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)), dQ += scale*dS K,
 * dK = scale*dS^T Q. dq is ACCUMULATED (+=); dk and dv are OVERWRITTEN. */
void attn_block_bwd(float *dq, float *dk, float *dv, const float *q, const float *k, const float *v, const float *o,
                    const float *lse, const float *do_, const int64_t *qpos, const int64_t *kpos, const attn_shape *s);

/* (o, lse) <- stable LSE combine of (o, lse) and (ob, lseb), over nq rows of
 * hq heads: lse' = max + log(exp(lse-max) + exp(lseb-max)); o' = o*exp(lse-lse')
 * + ob*exp(lseb-lse'). -inf on either side is handled (no NaN). */
void attn_merge(float *o, float *lse, const float *ob, const float *lseb, int nq, int hq, int d);

/* Float64 reference over a whole sequence of n tokens (positions 0..n-1),
 * document-causal: position i sees [start[i], i] (start NULL: [0, i]);
 * o, lse forward; dq, dk, dv backward (overwritten). Same layouts with
 * nq = nk = n. O(n^2) memory-free loops; meant for test sizes. */
void attn_ref_fwd(double *o, double *lse, const double *q, const double *k, const double *v, const int64_t *start,
                  int n, int hq, int hkv, int d);
void attn_ref_bwd(double *dq, double *dk, double *dv, const double *q, const double *k, const double *v,
                  const double *do_, const int64_t *start, int n, int hq, int hkv, int d);
/* The same with V and O of head dim d_v (MLA); the two above are d_v = d. */
void attn_ref_fwd_v(double *o, double *lse, const double *q, const double *k, const double *v, const int64_t *start,
                    int n, int hq, int hkv, int d, int d_v);
void attn_ref_bwd_v(double *dq, double *dk, double *dv, const double *q, const double *k, const double *v,
                    const double *do_, const int64_t *start, int n, int hq, int hkv, int d, int d_v);

/* ---- a mixture of experts (kernels_ep_cpu.c; exec_ep.c runs them) ---- */

/* Rows of `width` floats: for r < rows, dst row di(r) = (or +=, add)
 * scale[r] * src row si(r), where di(r) = dst_idx[r] (NULL: r), si(r) =
 * src_idx[r] (NULL: r) and scale NULL is 1. The permute (tokens into
 * expert order), the unpermute (the experts' outputs back, weighted) and
 * their gradients. Rows that several r write must have add set. */
void moe_move_rows(float *dst, const int32_t *dst_idx, const float *src, const int32_t *src_idx, const float *scale,
                   size_t rows, size_t width, int add);

/* The router's gates as Megatron-Core's top-k router computes them with
 * moe_router_pre_softmax off (megatron/core/transformer/moe/moe_utils.py,
 * topk_softmax_with_capacity): a softmax over the k chosen experts'
 * logits. logits (n, experts); sel (n, k) the chosen experts; gates (n, k). */
void moe_route_fwd(float *gates, const float *logits, const int32_t *sel, size_t n, int experts, int k);
/* Its backward: dlogits (n, experts) = 0 but at the chosen experts,
 * g_j (dg_j - sum_i g_i dg_i), where dg of entry i k + j is
 * dgates[dg_idx[i k + j]] (dg_idx NULL: dgates[i k + j]). */
void moe_route_bwd(float *dlogits, const float *gates, const float *dgates, const int32_t *dg_idx, const int32_t *sel,
                   size_t n, int experts, int k);

#endif

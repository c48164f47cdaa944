/*
 * sizes: the FLOP, byte and element counts that the DAG builder, the
 * analytical and memory models, the calibration and the executor all
 * derive from a config, each defined once. Exact 64-bit integers: each is
 * one task's count, which config_validate() bounds below 2^63; sums over
 * tasks, layers or micro-batches are for the caller to total in floating
 * point (stats.h), as they pass 2^64 at scale. Tensor shapes
 * follow DESIGN.md: T = B*S/P tokens per rank sequence-sharded, hq query
 * heads and kvh KV heads per rank after the head all-to-all.
 *
 * Layer: core (config and model only).
 */
#ifndef LOONG_SIZES_H
#define LOONG_SIZES_H

#include "config.h"

/* Forward FLOPs of an attention block of `pairs` unmasked (query, key)
 * pairs of one sample (ringgeo_block): 4*d per pair and head (QK^T and PV,
 * a multiply-add each), all query heads of the rank, all B samples. */
static inline uint64_t size_attn_fwd_flops(const config *c, uint64_t pairs)
{
    return pairs * 4 * (uint64_t)c->model.head_dim * (uint64_t)config_q_heads(c) * (uint64_t)c->batch;
}

/* The FlashAttention-2 backward recomputes P and runs four GEMMs: 2.5x. */
static inline uint64_t size_attn_bwd_flops(uint64_t fwd_flops) { return fwd_flops * 5 / 2; }

/* GEMM m x n x k: 2*m*n*k forward, 4*m*n*k backward (dX and dW). */
static inline uint64_t size_gemm_flops(uint64_t m, uint64_t n, uint64_t k, bool bwd)
{
    return (bwd ? 4 : 2) * m * n * k;
}

/* Merge of a block's (O, LSE) into the running output: two rescales and an
 * add per output element plus the row LSE, q_tokens x hq x d per sample. */
static inline uint64_t size_merge_flops(const config *c, uint64_t q_tokens)
{
    return 4 * q_tokens * (uint64_t)config_q_heads(c) * (uint64_t)c->model.head_dim * (uint64_t)c->batch;
}

/* HBM bytes of that merge: it reads the block's output at activation
 * precision and the fp32 running output, and writes the latter back. */
static inline uint64_t size_merge_hbm_bytes(const config *c, uint64_t q_tokens)
{
    return q_tokens * (uint64_t)config_q_heads(c) * (uint64_t)c->model.head_dim * (uint64_t)c->batch *
           (uint64_t)(8 + c->act_bytes);
}

/* K and V elements of `tokens` tokens per sample of this rank's KV heads:
 * what a ring transfer moves and a dK/dV accumulation adds. */
static inline uint64_t size_kv_elems(const config *c, uint64_t tokens)
{
    return 2 * tokens * (uint64_t)config_kv_heads(c) * (uint64_t)c->model.head_dim * (uint64_t)c->batch;
}

/* Bytes of those elements: act_bytes for KV, 4 for the fp32 dK/dV. */
static inline uint64_t size_kv_bytes(const config *c, uint64_t tokens, int elem_bytes)
{
    return size_kv_elems(c, tokens) * (uint64_t)elem_bytes;
}

/* An fp32 accumulation y += x reads two operands and writes one. */
static inline uint64_t size_acc_hbm_bytes(uint64_t elems) { return 12 * elems; }

/* Elements summed back when P_h/H_kv replicas of each KV head's gradient
 * meet (H_kv of the TP shard): the P_h - H_kv extra dK and dV heads of the
 * rank's T tokens. */
static inline uint64_t size_kv_rep_sum_elems(const config *c)
{
    return config_local_tokens(c) * 2 * (uint64_t)(c->p_head - config_tp_kv_heads(c)) * (uint64_t)c->model.head_dim;
}

/* Bytes one rank sends in a head all-to-all of `heads` heads of its T
 * tokens: all but its own 1/P_h share. */
static inline uint64_t size_a2a_bytes(const config *c, uint64_t heads)
{
    uint64_t ph = (uint64_t)c->p_head;
    return config_local_tokens(c) * heads * (uint64_t)c->model.head_dim * (uint64_t)c->act_bytes / ph * (ph - 1);
}

/* Bytes one member sends in a ring collective over n ranks of `elems`
 * elements of act_bytes: chunks of ceil(size / n), 2(n-1) of them for an
 * all-reduce, n-1 for a reduce-scatter or an all-gather. */
static inline uint64_t size_ring_coll_bytes(uint64_t elems, int act_bytes, uint64_t n, bool allreduce)
{
    uint64_t chunk = (elems * (uint64_t)act_bytes + n - 1) / n;
    return (allreduce ? 2 : 1) * (n - 1) * chunk;
}

#endif

/*
 * unfused: --attention unfused, the materialised-softmax attention of
 * Megatron's CoreAttention before FlashAttention (megatron/core/
 * transformer/dot_product_attention.py, DotProductAttention.forward):
 *   scores = baddbmm(Q, K^T) * 1/sqrt(d)    (b*np, sq, sk), one batched GEMM
 *   probs  = FusedScaleMaskSoftmax(scores)   the s x s scores in and out
 *   probs  = attention_dropout(probs)        nn.Dropout: a bool mask kept
 *   ctx    = bmm(probs, V)                   a second batched GEMM
 * Every (query, key) pair is computed, masked or not: the causal mask is
 * applied in the softmax.
 *
 * In the DAG an attention block (TASK_ATTN_FWD/BWD) stands for its
 * batched GEMMs: forward QK^T and PV, 4 q kv d FLOPs per head and sample;
 * backward their four (dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q),
 * twice that, with no recompute of P (the probabilities are kept). The
 * memory-bound kernels of the scores are tasks of their own, placed on
 * the compute stream just before the block's (so that the block's output
 * is ready when the last of them ends): forward the softmax then the
 * dropout, backward the dropout's backward then the softmax's. The
 * dropout runs only when --attention-dropout is above 0.
 *
 * The CPU executor runs the block itself with its attention kernel (the
 * same function at dropout 0) and not the softmax and dropout tasks,
 * like the other memory-bound kernels (elementwise.h).
 *
 * Layer: core (config and the DAG; the builder's API in unfused.c).
 */
#ifndef LOONG_UNFUSED_H
#define LOONG_UNFUSED_H

#include "dag.h"

typedef struct builder builder; /* dag_internal.h's */

/* The scores' elements of a block of q queries against kv keys over
 * `heads` query heads, all B samples of c. */
uint64_t unfused_scores(const config *c, uint64_t q, uint64_t kv, uint64_t heads);

/* FLOPs of a block's batched GEMMs under --attention unfused: forward
 * 4 q kv d per head and sample, backward (bwd) 8. */
uint64_t unfused_attn_flops(const config *c, uint64_t q, uint64_t kv, uint64_t heads, bool bwd);

/* Under --attention unfused, begin and end on the current rank the
 * memory-bound tasks of one block of layer `layer` in phase ph (q
 * queries, kv keys, `heads` query heads) that precede its TASK_ATTN
 * task; `reads` is the buffer they wait for (the block's inputs). No
 * task under flash. */
void unfused_block_kernels(builder *b, int layer, task_phase ph, uint64_t q, uint64_t kv, uint64_t heads, int reads);

#endif

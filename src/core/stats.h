/*
 * stats: per-rank FLOP and byte accounting of a DAG, the model-FLOP count
 * and the one MFU formula every backend and the planner use.
 *
 * MFU = model FLOPs / (step time * P * peak FLOP/s per GPU). Model FLOPs
 * count 2 FLOPs per multiply-add, the backward as 2x the forward, causal
 * attention as half of full attention, and no recompute (recompute shows up
 * as lower MFU, as in Megatron and PaLM):
 *   attn-fwd: 2*B*S^2*H*d            (one layer)
 *   attn:     6*B*S^2*H*d            (one layer, forward + backward)
 *   step:     L*(6*B*S*W_layer + 6*B*S^2*H*d) + 6*B*S*hidden*vocab
 * With packed documents S^2 becomes the sum of L_i^2 over the documents:
 * the same convention per document (the DAG's tasks count exact pairs).
 * where W_layer is the GEMM weights of one block (QKV, output, 3x SwiGLU;
 * a mixture of experts': the router, the shared experts and the top-k
 * routed experts a token goes through, 3 k hidden expert_ffn), and B the samples of the whole step: --batch times its m
 * micro-batches. Norms, activations, RoPE and the embedding lookup are not counted.
 *
 * Layer: core (libc and jansson only: it knows no predictor, measurement or backend).
 */
#ifndef LOONG_STATS_H
#define LOONG_STATS_H

#include <stdio.h>

#include "dag.h"

/* A rank's totals over its tasks, layers and micro-batches pass 2^64 at
 * scale (llama3-405b at S = 4M on a few ranks), while each task's own
 * count fits (config_validate). long double holds them: its 64-bit (x86-64)
 * or 113-bit (aarch64) mantissa keeps every total below 2^64 exact, so the
 * sums that fit uint64_t print as they did, and beyond it rounds at 1e-19. */
typedef struct rank_stats {
    long double flops;          /* all compute tasks */
    long double flops_attn;     /* attention blocks, forward and backward */
    long double flops_attn_fwd; /* attention blocks, forward (and recompute) */
    long double flops_gemm;
    long double bytes_intra; /* sent to ranks on the same node */
    long double bytes_inter; /* sent to ranks on other nodes */
    uint32_t tasks;
    uint32_t by_kind[TASK_KIND_COUNT];
} rank_stats;

/* Fill out[0..P-1]. Collective bytes are split as NCCL moves them: an
 * all-to-all evenly over the other members, ring collectives to the next
 * member of the group. */
void stats_compute(const dag *g, rank_stats *out);

/* The MFU numerator of the formula above (whole batch, all ranks). */
double stats_model_flops(const config *c);

/* MFU in [0, 1+] for a measured or predicted step time. */
double stats_mfu(const config *c, double step_seconds, double peak_flops_per_gpu);

/* The `#`-headed per-rank table of `loong dag --format stats`. */
void stats_print(FILE *f, const dag *g, const rank_stats *rs);

#endif

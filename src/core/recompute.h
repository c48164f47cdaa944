/*
 * recompute: what the backward of a block re-runs before differentiating
 * it, by activation-recompute policy — the one decision that the builder
 * (build.c's layer_bwd), the memory model and the analytical model read.
 *
 * Policies (config.h's recompute_kind), as the frameworks name them:
 *   none:      every activation is kept.
 *   selective: Megatron-Core's selective recompute (--recompute-granularity
 *              selective with --recompute-modules; Korthikanti et al. 2022):
 *              each listed module of the block is wrapped in a checkpoint
 *              (tensor_parallel.checkpoint, which re-runs the whole module
 *              in the backward) and keeps its input and output.
 *                core_attn (the default; megatron/core/transformer/
 *                  attention.py, _checkpointed_attention_forward): core
 *                  attention, which under context parallelism includes its
 *                  own communication (Transformer Engine's attention with CP
 *                  runs the all-to-alls and the KV ring inside it): the head
 *                  all-to-all, the ring and the all-to-all back re-run; the
 *                  QKV projection's output and the attention output that
 *                  the output projection reads are kept.
 *                mlp (transformer_layer.py, recompute_mlp): the MLP block,
 *                  gate, up and down with their TP collectives, re-run from
 *                  its input; its norm is TE's fused LayerNormMLP, so the
 *                  norm's output is dropped with the SwiGLU tensors.
 *   sc++:      LoongTrain's Selective Checkpoint++ (Gu et al. 2024): the
 *              attention output and its LSE are kept, so the recompute pass
 *              re-runs the GEMMs and the head all-to-alls but never the ring.
 *   full:      Megatron's full recompute (transformer_block.py,
 *              _checkpointed_forward) with --recompute-method and
 *              --recompute-num-layers N, per model chunk of a pipeline
 *              stage (the layers one TransformerBlock holds):
 *                uniform: the chunk's layers in groups of N, the last one
 *                  shorter; each group keeps its input, and the backward of
 *                  its last layer re-runs the whole group's forward;
 *                block: the chunk's first N layers keep only their input
 *                  and are re-run one by one; the rest keep everything.
 *              Default uniform, N = 1 (every block re-run alone: Megatron-
 *              LM's --recompute-num-layers default of 1 and its deprecated
 *              --checkpoint-activations, which meant uniform).
 *
 * Layer: core (libc only).
 */
#ifndef LOONG_RECOMPUTE_H
#define LOONG_RECOMPUTE_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* The parts of a block's forward (build.c's layer_fwd, in its order). */
enum {
    RC_QKV = 1,  /* the QKV projection and the TP gather of its input */
    RC_A2A = 2,  /* the head all-to-alls around attention (P_h > 1) */
    RC_RING = 4, /* the attention itself: the ring, or the all-gather of K/V */
    RC_OUT = 8,  /* the output projection and its TP reduction */
    RC_MLP = 16, /* gate, up and down with their TP collectives */
    RC_ALL = 31
};

/* Set c's policy to r with Megatron's defaults for the rest (modules
 * core_attn, method uniform, N = 1): how the fixes of an OOM try another
 * policy. */
void recompute_set(config *c, recompute_kind r);

/* The parts of a block that its recompute re-runs under c's policy (0
 * under none). Never fails. */
unsigned recompute_parts(const config *c);

/* Of recompute_parts(c), those re-run just before attention's backward
 * rather than at the start of the block's: Megatron's checkpointed core
 * attention re-runs when autograd reaches it, after the MLP's and the
 * output projection's backward; every other part re-runs at the start. */
unsigned recompute_parts_late(const config *c);

/* The blocks that the backward of block l re-runs before its own, on
 * pipeline stage `stage` (which holds l): blocks *first .. l, in forward
 * order; returns how many (0: none, *first untouched). */
int recompute_span(const config *c, int stage, int l, int *first);

/* Whether every block's backward re-runs the same (not so for full's
 * uniform groups of N > 1 nor for its block method on part of a chunk):
 * what composing a step from a few layers' runs needs. */
bool recompute_layers_alike(const config *c);

/* After c's layers shrank (a reduced DAG: the plan's task estimate), clamp
 * --recompute-num-layers to the largest chunk so that c stays valid: exact
 * for uniform (every block re-run once), an upper bound for block. */
void recompute_clamp_layers(config *c);

/* For a chunk of n blocks under c's policy: *reruns gets how many of them
 * are re-run in the backward, *inputs how many keep only a checkpointed
 * input (the uniform method's groups), *group the most blocks re-run
 * together (the uniform method's N; else 1). The memory model's count. */
void recompute_chunk(const config *c, int n, int *reruns, int *inputs, int *group);

/* Parse a --recompute-modules list ("core_attn,mlp") into RECOMPUTE_MOD_*
 * bits. Returns 0, or -1 with a one-line message naming an unknown module
 * or a Megatron-Core module that loong does not model. */
int recompute_modules_parse(const char *s, int *mods, char err[LOONG_ERRLEN]);

/* The list as --recompute-modules spells it, into buf. */
void recompute_modules_text(int mods, char *buf, size_t len);

/* The policy's short name in a `loong plan` layout: "none", "sel",
 * "sel/mlp" (mlp alone), "sel+mlp", "sc++", "full", "full-u2", "full-b4". */
void recompute_abbrev(const config *c, char *buf, size_t len);

#endif

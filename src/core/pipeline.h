/*
 * pipeline: pipeline parallelism's geometry and schedules — which layers a
 * stage holds and in which order a stage runs the forward and backward
 * passes of its micro-batches. The builder (build.c) emits a stage's
 * program in this order; the analytical model and the memory model read
 * the same order, so the bubble and the in-flight activations come from
 * one place.
 *
 * Stages and chunks: pp stages, each holding v model chunks (v = 1 but
 * under the interleaved schedule). Virtual stage u = chunk * pp + stage
 * holds layers [u * L/(pp v), (u+1) * L/(pp v)) (Megatron-Core's
 * interleaved assignment: stage 0 holds chunks 0, pp, 2pp, ... of the
 * model); the embedding runs on virtual stage 0, the LM head and loss on
 * the last, pp v - 1. An activation travels from virtual stage u to u+1,
 * its gradient back. Two other splits move the boundaries only:
 *   uneven (c->pp_first and c->pp_last layers on the first and last
 *     stages, the rest even over the others, Megatron's --decoder-first/
 *     last-pipeline-num-layers): each stage's layers split evenly over its
 *     v chunks, and round j = 0 .. v-1 holds layers [j L/v, (j+1) L/v),
 *     the stages' chunk j in stage order (get_transformer_layer_offset);
 *   slots (c->pp_embed_slot, c->pp_loss_slot: Megatron's --account-for-
 *     embedding/loss-in-pipeline-split): L plus the slots split evenly as
 *     above, and virtual stage 0 (the embedding's) or pp v - 1 (the
 *     loss's) holds one layer fewer, possibly none.
 *
 * Schedules (megatron/core/pipeline_parallel/schedules.py):
 *   gpipe: every forward, then every backward (Huang et al. 2019);
 *   1f1b:  PipeDream-flush, forward_backward_pipelining_without_interleaving:
 *          min(pp - stage - 1, m) warm-up forwards, then one forward and
 *          one backward in turn, then the remaining backwards;
 *   interleaved: forward_backward_pipelining_with_interleaving, v chunks
 *          per stage (Narayanan et al. 2021): warm-up (pp - stage - 1) * 2
 *          + (v - 1) * pp forwards (all of them when m == pp), then 1F1B
 *          over virtual micro-batches k = 0 .. m v - 1, whose chunk is
 *          (k mod pp v) / pp (reversed for backwards) and whose
 *          micro-batch is (k / (pp v)) * pp + k mod pp.
 * With pp = 1 every schedule is F0 B0 F1 B1 ... (gradient accumulation,
 * Megatron's forward_backward_no_pipelining).
 *
 * Layer: core (libc only).
 */
#ifndef LOONG_PIPELINE_H
#define LOONG_PIPELINE_H

#include <stdbool.h>

#include "config.h"

/* One pass of one micro-batch through one chunk of a stage. */
typedef struct pipe_op {
    bool bwd;  /* the backward pass (else the forward) */
    int chunk; /* model chunk of the stage, 0 .. v-1 */
    int mb;    /* micro-batch, 0 .. m-1 */
} pipe_op;

/* Passes of one stage per step: 2 m v. */
int pipe_nops(const config *c);

/* The passes of `stage` in program order into out (pipe_nops entries). */
void pipe_ops(const config *c, int stage, pipe_op *out);

/* The stage of rank (its coordinate along pp). */
int pipe_stage(const config *c, int rank);

/* Layers of a full chunk of `stage`: L / (pp v), the uneven split's
 * stage count / v, or (L + slots) / (pp v) with the embedding's or loss's
 * slot (every chunk but the one the slot shortens). */
int pipe_chunk_layers(const config *c, int stage);

/* Layers of chunk `chunk` of `stage`: pipe_chunk_layers, less one in the
 * chunk an embedding or loss slot shortens (0 layers possible: a chunk of
 * the embedding or the LM head alone). */
int pipe_layers(const config *c, int stage, int chunk);

/* Layers of all of stage's chunks. */
int pipe_stage_layers(const config *c, int stage);

/* The first layer of chunk `chunk` of `stage`. */
int pipe_first_layer(const config *c, int stage, int chunk);

/* Whether (stage, chunk) is virtual stage 0 (the embedding's) or the last
 * (the LM head's). */
bool pipe_is_first(const config *c, int stage, int chunk);
bool pipe_is_last(const config *c, int stage, int chunk);

/* Whether stage holds block l; l = L: weights outside the blocks, all of
 * them at pp 1, else the embedding on stage 0 and the LM head and final
 * norm on the last (Megatron's pre_process and post_process stages). */
bool pipe_holds(const config *c, int stage, int l);

/* Parameters of one TP shard (model_params_tp's counting) that stage
 * holds outside the blocks, and in all. */
uint64_t pipe_head_params(const config *c, int stage);
uint64_t pipe_stage_params(const config *c, int stage);
/* The same without the head's: the stage's blocks (the experts' apart). */
uint64_t pipe_stage_block_params(const config *c, int stage);
/* The stage's blocks whose MLP is a mixture of experts (model_block_moe). */
int pipe_stage_moe_blocks(const config *c, int stage);

/* Forward passes of `stage` whose backward has not run yet, at most, over
 * the schedule: the activations it holds at its peak, in micro-batches of
 * one chunk (so 1F1B's pp - stage, GPipe's m, interleaving's more). */
int pipe_peak_in_flight(const config *c, int stage);

/* The same walk counting each pass's layers (pipe_layers): the most
 * blocks' activations stage holds at once; pipe_peak_in_flight x
 * pipe_chunk_layers but where a slot shortens a chunk. */
int pipe_peak_layers_in_flight(const config *c, int stage);

/* The micro-batch counts over which a step's time grows by a constant once
 * the schedule runs steadily: from *first in steps of *stride. One stage
 * runs its micro-batches back to back (1, 1); 1F1B and GPipe reach their
 * steady state at pp micro-batches, below which the warm-up is cut short
 * and the increments wander (0.5 % on a communication-bound pp 16: docs/
 * sim.md) (pp, 1); the interleaved schedule runs them in groups of pp (pp,
 * pp). What composing a step over its micro-batches walks (loong sim
 * --compose), checking that the increments agree. */
void pipe_mb_lattice(const config *c, int *first, int *stride);

/* The micro-batches that search simulates in all when the increment
 * settles at once: the lattice's first three points and the check two
 * points on. */
int pipe_mb_search_cost(const config *c);

#endif

/*
 * memtrack: the memory timeline of a timed DAG — per rank, the bytes each
 * term of the memory model (memory.h) holds over the step, from the
 * simulated (or measured) start and end of the tasks that allocate and
 * free them. Its sizes are memory.h's formulas (memory_layer_activations,
 * memory_attention_buffers, ...), called, not copied; the DAG says only
 * when each lives:
 *
 *   weights, grads, optimizer, workspace
 *                  the whole step (model states as the rank's ZeRO stage
 *                  shards them; ZeRO-3's weights without the gathered ones);
 *   gathered       ZeRO-3: a block's bf16 parameters, from the start of its
 *                  all-gather to the end of the block's pass that reads them
 *                  (its forward, or its backward with the recompute; the
 *                  head's, to the end of the LM head's backward GEMM);
 *   activations    what a block keeps for its backward (per policy, per
 *                  block: full recompute keeps a group's input only), from
 *                  the start of its forward's first kernel to the end of its
 *                  backward's last, per micro-batch;
 *   recompute      what a re-run regenerates beside what was kept, from the
 *                  re-run's first kernel to the end of the block's backward;
 *   gradients      the block's activation gradients (and under sequence
 *                  parallelism its two gathered (T, hidden) tensors) during
 *                  its backward;
 *   attention      the ring slots, block output and all-to-all staging,
 *                  from the first to the last attention kernel or head
 *                  all-to-all of each attention pass (forward, re-run,
 *                  backward);
 *   lm_head        the logits and their fp32 copy, from the LM head's
 *                  forward GEMM to the end of its backward GEMM.
 *
 * The model's allocated peak is states + the activations of the passes in
 * flight + max(LM head, one block's gradients + re-run + attention): the
 * timeline's peak equals it where those terms coincide in the schedule,
 * which tests/check_memtrack.c asserts for every ZeRO stage, pipeline
 * schedule and recompute policy.
 *
 * Layer: model (uses core only).
 */
#ifndef LOONG_MEMTRACK_H
#define LOONG_MEMTRACK_H

#include "core/dag.h"

enum {
    MT_WEIGHTS,
    MT_GRADS,
    MT_OPTIMIZER,
    MT_WORKSPACE,
    MT_GATHERED,
    MT_ACTIVATIONS,
    MT_RECOMPUTE,
    MT_GRADIENTS,
    MT_ATTENTION,
    MT_LM_HEAD,
    MT_TERMS
};

/* One rank's timeline: n points; from t[i] (seconds from the step's
 * start) until t[i+1] the terms hold v[i*MT_TERMS + term] bytes, total[i]
 * in all. t[0] = 0. */
typedef struct memtrack_rank {
    size_t n;
    double *t, *v, *total;
    double peak, peak_t; /* the largest total, and when it is first reached */
} memtrack_rank;

typedef struct memtrack {
    int nranks; /* the DAG's ranks */
    memtrack_rank *r;
} memtrack;

/* The timeline of every rank of g, from start[id] and dur[id] in seconds.
 * Never fails (aborts on out of memory, like the DAG's builder). */
void memtrack_build(const dag *g, const double *start, const double *dur, memtrack *out);
void memtrack_free(memtrack *m);

/* The term's name as the trace's counter series spell it ("weights", ...). */
const char *memtrack_term_name(int term);

#endif

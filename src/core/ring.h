/*
 * ring: the context-parallel attention programs of one rank, forward and
 * backward: the rings of ring.c and the all-gather of allgather.c; build.c
 * calls them around the head all-to-alls. Internal to the DAG builder.
 *
 * Layer: core (libc and jansson only: it knows no predictor, measurement or backend).
 */
#ifndef LOONG_RING_H
#define LOONG_RING_H

#include "dag_internal.h"

/* Emit this rank's forward ring of `layer` (phase fwd, or recompute). */
void ring_attention_fwd(builder *b, int layer, task_phase phase);
/* Emit this rank's backward ring of `layer`, with the travelling dK/dV. */
void ring_attention_bwd(builder *b, int layer);

/* The same for --ring allgather (allgather.c): gather K and V over the
 * context ranks, one block per KV-head group; backward reduce-scatters dK/dV. */
void allgather_attention_fwd(builder *b, int layer, task_phase phase);
void allgather_attention_bwd(builder *b, int layer);

#endif

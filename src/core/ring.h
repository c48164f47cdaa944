/*
 * ring: the ring attention programs of one rank (ring.c), forward and
 * backward, for every ring mode; build.c calls them around the head
 * all-to-alls. Internal to the DAG builder.
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

#endif

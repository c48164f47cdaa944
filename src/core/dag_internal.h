/*
 * dag_internal: the builder's side of dag — task creation with automatic
 * dependency inference from the buffers each task reads and writes, p2p
 * matching by FIFO channel, and collective instances (implemented in
 * dag.c). Only the programs (build.c, ring.c, validate.c) include this.
 *
 * Programs emit one rank's tasks at a time, in program order, like SPMD
 * code: ranks 0..P-1 in turn (dag_build() in build.c). Within a rank, each task declares the buffers
 * it reads and writes; bt_end() turns hazards (read-after-write, write-after-
 * read, write-after-write) into cross-stream deps, keeping only the latest
 * task per other stream because stream order covers the rest.
 *
 * Layer: core (libc and jansson only: it knows no predictor, measurement or backend).
 */
#ifndef LOONG_DAG_INTERNAL_H
#define LOONG_DAG_INTERNAL_H

#include "dag.h"

/* Tracked buffers of one rank. */
enum {
    BUF_KV = 0,                        /* + lane * DAG_SLOTS_PER_LANE + KV slot */
    BUF_DKV = 2 * DAG_SLOTS_PER_LANE,  /* + lane * DAG_SLOTS_PER_LANE + dKV slot */
    BUF_OBLK = 4 * DAG_SLOTS_PER_LANE, /* a forward block's (O, LSE) before its merge */
    BUF_LAYER0,                        /* + layer * LB_COUNT + LB_* */
};
/* Per-layer buffers: activations (seq-sharded unless "head"), grads, weights. */
enum {
    LB_X,    /* block input (T, hidden) */
    LB_QKV,  /* QKV projection, seq-sharded */
    LB_QKVH, /* Q and own KV, head-sharded (S/P_s tokens) */
    LB_O,    /* attention output + LSE, head-sharded */
    LB_OS,   /* attention output, seq-sharded */
    LB_H,    /* after output projection + residual */
    LB_M,    /* SwiGLU intermediate */
    LB_DM,
    LB_DH,
    LB_DOS,
    LB_DOH,   /* dO head-sharded */
    LB_DQKVH, /* dQ head-sharded (dK, dV arrive in the DKV_FINAL slots) */
    LB_DQKV,  /* dQ, dK, dV seq-sharded */
    LB_DX,
    LB_GRAD, /* weight gradients of the block */
    LB_W,    /* weights of the block */
    /* tp > 1: the GEMMs' side of the TP collectives (tp = 1: the above) */
    LB_XG,  /* block input gathered (sequence parallelism) for QKV */
    LB_HG,  /* MLP input gathered for gate and up */
    LB_HP,  /* output projection's partial sum (before its reduction) */
    LB_YP,  /* MLP down's partial sum */
    LB_DYG, /* block output's gradient gathered for down's backward */
    LB_DHG, /* MLP input's gradient gathered for the output projection's backward */
    LB_DHP, /* gate and up backward's partial input gradient */
    LB_DXP, /* QKV backward's partial input gradient */
    /* a mixture of experts' block (build_ep.c): routed rows, forward then their gradients */
    LB_ROUTE,  /* the router's probabilities (T', experts) */
    LB_PERM,   /* the rank's routed rows in expert order */
    LB_DISP,   /* the rows dispatched to this rank's experts */
    LB_DISPG,  /* the same gathered over TP */
    LB_EM,     /* the experts' SwiGLU intermediate */
    LB_EY,     /* the experts' down partial sums */
    LB_EYS,    /* reduce-scattered over TP */
    LB_COMB,   /* the rank's rows back from the experts */
    LB_DCOMB,  /* their gradient */
    LB_DEYS,   /* at the experts */
    LB_DEY,    /* gathered over TP */
    LB_DEM,    /* the experts' intermediate's gradient */
    LB_DDISPP, /* the experts' input gradient, partial over TP */
    LB_DDISP,  /* reduce-scattered */
    LB_DPERM,  /* back at the rank, in expert order */
    LB_COUNT
};
#define BUF_LB(layer, k) (BUF_LAYER0 + (layer)*LB_COUNT + (k))

typedef struct builder builder;

/* A builder for the DAG of validated config c (exits 2 on out of memory). */
builder *bt_new(const config *c);
/* Record that only the ranks with coordinate 0 in `folded` are built (dag_folded). */
void bt_fold(builder *b, mesh_dims folded);
/* Start the program of `rank`: forget the previous rank's buffer state. */
void bt_start_rank(builder *b, int rank);
/* The micro-batch of the tasks begun from now on (0 at each rank's start):
 * the activation buffers named from now on are that micro-batch's. */
void bt_set_micro_batch(builder *b, int mb);
/* After the first rank: reserve room for `ranks` programs of its size. */
int bt_reserve(builder *b, int ranks, char err[LOONG_ERRLEN]);
/* Free a builder and its unfinished DAG. */
void bt_abort(builder *b);

/* Check that every send met its recv, index the streams and free b.
 * Returns the DAG, or NULL with a message (a program bug). */
dag *bt_finish(builder *b, char err[LOONG_ERRLEN]);

/* Start a task on the current rank. Returns its id; the task is filled by
 * the caller through bt_task() and committed by bt_end(). */
uint32_t bt_begin(builder *b, task_kind kind, stream_kind stream, task_op op, task_phase phase, int layer);
dag_task *bt_task(builder *b, uint32_t id);
void bt_reads(builder *b, int buf);
void bt_writes(builder *b, int buf);
/* An explicit dependency (e.g. on a task whose buffer is not tracked). */
void bt_after(builder *b, uint32_t id);
/* Commit the task begun last. p2p tasks are matched here. */
void bt_end(builder *b);

/* Intern the communicator of stream over the mesh dimensions dims (the
 * group of the current rank; dag.h says which members); returns its index. */
uint32_t bt_group(builder *b, stream_kind stream, mesh_dims dims);
/* The same group over dims split into `parts` runs of consecutive members
 * (mesh order; parts divides its size): the run that holds the current
 * rank. Its dims are those it splits (a backend widens no split group). */
uint32_t bt_group_split(builder *b, stream_kind stream, mesh_dims dims, int parts);

/* bt_group_split's run over dims, spanning `rep_count` replicas
 * `rep_stride` apart (dag_group_replicas; dp joins its dims). */
uint32_t bt_group_replicas(builder *b, stream_kind stream, mesh_dims dims, int parts, int rep_stride, int rep_count);
/* The members of the group over dims at the current rank's place modulo
 * `stride` (mesh order; stride divides its size): one of every stride
 * consecutive members. With dp in dims it spans the same members of every
 * replica (a backend widens it as dag.h says). */
uint32_t bt_group_strided(builder *b, stream_kind stream, mesh_dims dims, int stride);
/* A group of explicit members (DAG ranks of replica 0, the current rank
 * among them, n of them; the builder takes the malloc'd array) over dims,
 * spanning the replicas (rep_stride, rep_count) as dag_group_replicas
 * gives them: (0, 0) is every replica when dims hold dp, else its own. */
uint32_t bt_group_of(builder *b, stream_kind stream, mesh_dims dims, int32_t *members, int n, int rep_stride,
                     int rep_count);

/* The members group gid holds in the DAG. */
int bt_group_size(const builder *b, uint32_t gid);
const config *bt_config(const builder *b);
int bt_rank(const builder *b);
/* Every ring block of the config, computed once per build (ringgeo.h). */
const struct ringgeo_blocks *bt_blocks(const builder *b);

/* malloc (zeroed if asked) with huge pages advised, for per-task arrays;
 * exits 2 naming the request when out of memory (xalloc.h). */
void *dag_big_alloc(size_t n, size_t size, bool zero);

#endif

/*
 * exec_tasks: what the files that launch a DAG task's device ops share.
 * The launcher is cut by parallel dimension, one file each, so that a
 * dimension is read in its file alone:
 *   exec_tasks.c  xr_launch_task(): attention, the ring's transfers, the
 *                 head all-to-alls, the GEMMs;
 *   exec_tp.c     tensor parallelism: the TP collectives, --tp-overlap's
 *                 ring steps, adds and chunk rows, the KV replicas' sum;
 *   exec_pp.c     the pipeline's p2p;
 *   exec_grad.c   the gradient reduction over the gradient group;
 *   exec_ep.c     a mixture of experts: router, permutes, the EP
 *                 all-to-alls, the experts and their gradients' reduction;
 *   exec_mla.c    multi-head latent attention's projections.
 * The op emitter below is static inline: every file launches ops alike.
 * Only these files include this header.
 *
 * Layer: exec.
 */
#ifndef LOONG_EXEC_TASKS_H
#define LOONG_EXEC_TASKS_H

#include <string.h>

#include "exec_state.h"

/* A device op of `kind`, zeroed, its stamps unset. */
static inline dev_op op_new(dev_op_kind kind)
{
    dev_op op;
    memset(&op, 0, sizeof op);
    op.kind = kind;
    op.stamp_start = op.stamp_end = op.stamp_start2 = op.stamp_end2 = -1;
    return op;
}

/* Ops of one task: stamps go on the first and the last op launched. */
typedef struct emit {
    xr *x;
    int stream, slot, fail;
    bool started;
    dev_op pending;
    bool has_pending;
    int rc;
} emit;

/* Launch the pending op, stamping the task's start on the first and its
 * end on the last. */
static inline void emit_flush(emit *e, bool last)
{
    if (!e->has_pending) return;
    if (!e->started) {
        e->pending.stamp_start = e->slot;
        e->pending.fail = e->fail;
        e->pending.fail_signal = (int)e->x->o->fail_signal;
        e->started = true;
    }
    if (last) e->pending.stamp_end = e->slot;
    if (e->rc == 0) e->rc = devq_launch(e->x->q, e->stream, &e->pending);
    e->has_pending = false;
}

/* Queue op (the one before it launched). */
static inline void emit_op(emit *e, const dev_op *op)
{
    emit_flush(e, false);
    e->pending = *op;
    e->has_pending = true;
}

/* Launch the task's last op. Returns 0, or the first launch's error. */
static inline int emit_end(emit *e)
{
    emit_flush(e, true);
    return e->rc;
}

/* Copy rows x cols floats between strided buffers. */
static inline void copy2d(emit *e, float *dst, size_t dst_ld, const float *src, size_t src_ld, size_t rows, size_t cols)
{
    dev_op op = op_new(DOP_COPY2D);
    op.u.copy = (__typeof__(op.u.copy)){dst, src, rows, cols, dst_ld, src_ld};
    emit_op(e, &op);
}

/* C = op(A) op(B) + beta C, row-major. */
static inline void gemm(emit *e, int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                        float beta, float *c, int ldc)
{
    dev_op op = op_new(DOP_GEMM);
    op.u.gemm = (__typeof__(op.u.gemm)){ta, tb, m, n, k, lda, ldb, ldc, 1.0f, beta, a, b, c};
    emit_op(e, &op);
}

/* Rows [r0, r0 + n) of the T a GEMM task multiplies: all, or its chunk's
 * part; own: a gather-side chunk 0, which reads the ungathered rows;
 * first, last: whether it opens or closes its pair (or is whole). */
typedef struct span {
    size_t r0, n;
    bool own, first, last;
} span;

/* ---- exec_tp.c: tensor parallelism ---- */

/* Floats [*off, *off + *n) of a (T, width) buffer that are this rank's:
 * its part under sequence parallelism, else all. */
void xt_tp_own_part(const xr *x, size_t count, size_t *off, size_t *n);
/* A TP collective task (STREAM_TP). */
void xt_tp_collective(emit *e, const dag_task *t);
/* tp > H_kv: the KV head's weight gradient summed over its shards (STREAM_TP_KV). */
void xt_tp_kv_grads(emit *e, const dag_task *t);
/* --tp-overlap: a ring step (the send s and its recv r), an ACC of a
 * scatter-side pair, and the rows a GEMM task multiplies (all of T
 * without --tp-overlap). */
void xt_tp_ovl_sendrecv(emit *e, const dag_task *s, const dag_task *r);
void xt_tp_ovl_acc(emit *e, const dag_task *t);
span xt_tp_gemm_span(const xr *x, const dag_task *t);

/* ---- exec_pp.c: pipeline parallelism ---- */

/* A send s and the recv r grouped with it, or either alone (NULL). */
void xt_pp_sendrecv(emit *e, const dag_task *s, const dag_task *r);

/* ---- exec_ep.c: a mixture of experts ---- */

/* Whether task t is a mixture of experts' (its router, permutes, the EP
 * all-to-alls, the experts' GEMMs and SwiGLU, their gradients'
 * collectives), which xt_ep_task launches. */
bool xt_ep_owns(const dag_task *t);
void xt_ep_task(emit *e, const dag_task *t);

/* ---- exec_mla.c: multi-head latent attention's projections ---- */

/* An OP_QKV task of an MLA model: its projection, forward or backward
 * (build.c's qkv_gemms, reversed in the backward). xt_mla_edge: whether
 * it is the forward's last or the backward's first, where P_h = 1 changes
 * the layouts (exec_tasks.c). */
void xt_mla_qkv(emit *e, const dag_task *t);
bool xt_mla_edge(const xr *x, const dag_task *t);

/* ---- exec_grad.c: the gradient reduction ---- */

/* A collective over the gradient group (STREAM_DP). */
void xt_grad_collective(emit *e, const dag_task *t);

#endif

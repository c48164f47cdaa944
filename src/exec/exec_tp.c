/*
 * exec_tp: tensor parallelism on the device (exec_tasks.h): the TP
 * collectives (STREAM_TP, tp > 1), --tp-overlap's ring steps and adds and
 * the rows its chunk GEMMs multiply, and the KV replicas' gradient sum
 * (STREAM_TP_KV).
 *
 * TP collectives are over the (T, hidden) activations of a layer, or the loss statistics
 * (T, 3). TP rank t's part of T rows is rows [t*T/tp, (t+1)*T/tp): part t
 * of the device collectives (dev_part_of; T % tp == 0 under sequence
 * parallelism, config_validate). The collectives run in place on the
 * GEMM-side buffer (gathered input, partial sum); the rank's own rows move
 * between it and the sharded activation around them.
 */
#include "exec_tasks.h"

void xt_tp_own_part(const xr *x, size_t count, size_t *off, size_t *n)
{
    if (!x->sp) {
        *off = 0;
        *n = count;
        return;
    }
    dev_part_of(count, x->tp, x->ops->comm_rank(x->comm[STREAM_TP], x->rank), n, off);
}

static void tp_op(emit *e, dev_op_kind kind, float *buf, size_t count)
{
    dev_op op = op_new(kind);
    op.u.coll = (__typeof__(op.u.coll)){e->x->comm[STREAM_TP], buf, buf, count};
    emit_op(e, &op);
}

/* All-gather: the own rows of `from` into `to`, then gathered in place. */
static void tp_gather(emit *e, float *to, const float *from, size_t count)
{
    size_t off, n;
    xt_tp_own_part(e->x, count, &off, &n);
    copy2d(e, to + off, n, from + off, n, 1, n);
    tp_op(e, DOP_ALLGATHER, to, count);
}

/* Reduce-scatter (all-reduce without sequence parallelism) the partial
 * sums in `part`, and the own rows of out = the sum + residual (NULL: none). */
static void tp_reduce(emit *e, float *out, float *part, const float *residual, size_t count)
{
    size_t off, n;
    xt_tp_own_part(e->x, count, &off, &n);
    tp_op(e, e->x->sp ? DOP_REDUCESCATTER : DOP_ALLREDUCE, part, count);
    copy2d(e, out + off, n, part + off, n, 1, n);
    if (residual) {
        dev_op op = op_new(DOP_AXPY);
        op.u.axpy = (__typeof__(op.u.axpy)){out + off, residual + off, n};
        emit_op(e, &op);
    }
}

/* The buffers of TP collective (or --tp-overlap pair) t, by its op, phase
 * and side: a gather's own rows `from` and the gathered `to`; a
 * reduction's partial sums `from`, its result `to` and the residual added
 * to it (NULL: none). */
typedef struct tp_bufs {
    float *from, *to;
    const float *res;
} tp_bufs;

static tp_bufs tp_buffers(const xr *x, const dag_task *t, bool gather)
{
    layer_t *ly = &x->ly[t->layer], *next = t->layer < x->L ? &x->ly[t->layer + 1] : NULL;
    bool fwd = t->phase != PHASE_BWD;
    switch (t->op) {
    case OP_TP_X: /* the block's (or LM head's) input gathered; its gradient reduced (+ dh) */
        return gather ? (tp_bufs){ly->x, ly->xg, NULL} : (tp_bufs){ly->dxp, ly->dx, next ? ly->dh : NULL};
    case OP_TP_H: /* forward: h = reduce(out-proj) + x, gathered for gate/up; backward likewise for dh */
        if (!gather) return fwd ? (tp_bufs){ly->hp, ly->h, ly->x} : (tp_bufs){ly->dhp, ly->dh, next->dx};
        if (!fwd && t->buf == DAG_TP_GRAD) return (tp_bufs){ly->dh, ly->dhg, NULL}; /* for out-proj's backward */
        return (tp_bufs){ly->h, ly->hg, NULL}; /* forward, or again for up's and gate's weight gradients */
    default: /* OP_TP_Y: forward x_{l+1} = reduce(down) + h; backward dx_{l+1} gathered */
        return fwd ? (tp_bufs){ly->yp, next->x, ly->h} : (tp_bufs){next->dx, ly->dyg, NULL};
    }
}

void xt_tp_collective(emit *e, const dag_task *t)
{
    xr *x = e->x;
    size_t count = (size_t)t->dim[0] * (size_t)t->dim[1];
    bool gather = t->kind == TASK_ALLGATHER;
    if (t->op == OP_TP_LOSS || t->op == OP_TP_NORM_GRAD) {
        tp_op(e, DOP_ALLREDUCE, t->op == OP_TP_LOSS ? x->loss : x->norm_grad, count);
        return;
    }
    if (t->op == OP_TP_EMBED) { /* the lookup's partial rows reduced into x_0; its gradient gathered */
        layer_t *ly = &x->ly[0];
        if (t->phase != PHASE_BWD) {
            copy2d(e, ly->xg, count, x->embed_part, count, 1, count);
            tp_reduce(e, ly->x, ly->xg, NULL, count);
        } else {
            tp_gather(e, ly->dyg, ly->dx, count);
        }
        return;
    }
    tp_bufs b = tp_buffers(x, t, gather);
    if (gather)
        tp_gather(e, b.to, b.from, count);
    else
        tp_reduce(e, b.to, b.from, b.res, count);
}

/* ---- --tp-overlap: build_tp.c's ring-exchange pairs ----
 * A pair's GEMMs run in tp chunks of T/tp rows, chunk j of a TP part of
 * the tokens (step j of the task). Gather side (the all-gather before a
 * column-parallel GEMM: forward QKV, gate and up; backward down and the
 * output projection): chunk j multiplies part (t - j) mod tp, its own at
 * j = 0 (read from the ungathered buffer) and then the rows step j-1
 * received, which step j sends on. Scatter side (the reduce-scatter after
 * a row-parallel GEMM: forward the output projection and down; backward
 * up, gate and QKV): chunk j computes the partial sum of part
 * (t - j - 1) mod tp, ACC j adds the partial step j-1 received, step j
 * sends the sum on, and the last (j = tp - 1, the own part) is reduced. */

/* Whether GEMM task t is on the scatter side of its pair. */
static bool ovl_scatter_gemm(const dag_task *t)
{
    if (t->phase == PHASE_BWD) return t->op == OP_MLP_UP || t->op == OP_MLP_GATE || t->op == OP_QKV;
    return t->op == OP_OUT_PROJ || t->op == OP_MLP_DOWN;
}

/* The TP part of chunk or step j on either side. */
static int ovl_part(const xr *x, int j, bool scatter)
{
    return ((x->t - j - (scatter ? 1 : 0)) % x->tp + x->tp) % x->tp;
}

span xt_tp_gemm_span(const xr *x, const dag_task *t)
{
    if (!x->c->tp_overlap || t->op == OP_LM_HEAD) return (span){0, (size_t)x->T, false, true, true};
    size_t n = (size_t)x->T / (size_t)x->tp;
    bool scatter = ovl_scatter_gemm(t);
    return (span){(size_t)ovl_part(x, t->step, scatter) * n, n, !scatter && t->step == 0, t->step == 0,
                  t->step + 1 == x->tp};
}

/* ---- --tp-overlap: the ring steps and adds of a pair (above) ---- */

/* Floats of one TP part of a (T, hidden) buffer. */
static size_t ovl_floats(const xr *x) { return (size_t)x->T / (size_t)x->tp * (size_t)x->c->model.hidden; }

/* Step j (the send s, its recv r): gather side, part (t - j) mod tp on
 * (from `from` at j = 0, then the rows received at step j-1), part
 * (t - j - 1) mod tp into `to`; scatter side, the partial sum of part
 * (t - j - 1) mod tp on, the next one in into x->tp_recv. */
void xt_tp_ovl_sendrecv(emit *e, const dag_task *s, const dag_task *r)
{
    xr *x = e->x;
    bool scatter = s->flags & DAG_F_TP_SCATTER;
    tp_bufs b = tp_buffers(x, s, !scatter);
    size_t n = ovl_floats(x);
    int j = s->step;
    dev_comm *c = x->comm[STREAM_TP];
    dev_op op = op_new(DOP_SENDRECV);
    op.u.p2p.comm = c;
    float *src = scatter || j == 0 ? b.from : b.to;
    op.u.p2p.sbuf = src + (size_t)ovl_part(x, j, scatter) * n;
    op.u.p2p.sbytes = s->bytes;
    op.u.p2p.to = x->ops->comm_rank(c, s->peer);
    op.u.p2p.rbuf = scatter ? x->tp_recv : b.to + (size_t)ovl_part(x, j + 1, false) * n;
    op.u.p2p.rbytes = dag_task_bytes_moved(x->g, r);
    op.u.p2p.from = x->ops->comm_rank(c, r->peer);
    op.stamp_end = e->slot;
    op.stamp_start2 = op.stamp_end2 = (int)(r->id - x->base);
    emit_op(e, &op);
}

/* ACC j of a scatter-side pair: the partial received at step j-1 added to
 * chunk j's; the last, of the own part, written to `to` with the residual. */
void xt_tp_ovl_acc(emit *e, const dag_task *t)
{
    xr *x = e->x;
    tp_bufs b = tp_buffers(x, t, false);
    size_t n = ovl_floats(x), off = (size_t)ovl_part(x, t->step, true) * n;
    dev_op op = op_new(DOP_AXPY);
    op.u.axpy = (__typeof__(op.u.axpy)){b.from + off, x->tp_recv, n};
    emit_op(e, &op);
    if (t->step + 1 < x->tp) return;
    copy2d(e, b.to + off, n, b.from + off, n, 1, n);
    if (!b.res) return;
    op.u.axpy = (__typeof__(op.u.axpy)){b.to + off, b.res + off, n};
    emit_op(e, &op);
}

/* tp > H_kv: the K and V columns (hidden, 2 Hkv d) of block l's QKV weight
 * gradient, adjacent in each row after the Q columns, summed over the
 * shards of the KV head (the tp_kv communicator) in place. */
void xt_tp_kv_grads(emit *e, const dag_task *t)
{
    xr *x = e->x;
    size_t hid = (size_t)x->c->model.hidden, hd = (size_t)x->H * (size_t)x->d, kv = 2 * (size_t)x->Hkv * (size_t)x->d;
    float *g = x->ly[t->layer].gw.qkv + hd;
    copy2d(e, x->kv_grad, kv, g, hd + kv, hid, kv);
    dev_op op = op_new(DOP_ALLREDUCE);
    op.u.coll = (__typeof__(op.u.coll)){x->comm[STREAM_TP_KV], x->kv_grad, x->kv_grad, hid * kv};
    emit_op(e, &op);
    copy2d(e, g, hd + kv, x->kv_grad, kv, hid, kv);
}

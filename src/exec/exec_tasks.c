/*
 * exec_tasks: what each DAG task does on the device — the ops it launches
 * on its stream, reading and writing this rank's buffers (exec_state.h).
 * The task's first op stamps its start, its last op its end. The parallel
 * dimensions have their own files (exec_tasks.h): tensor parallelism
 * exec_tp.c, the pipeline's p2p exec_pp.c, the gradient reduction
 * exec_grad.c; the ring's transfers and attention are here.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/ringgeo.h"
#include "exec_tasks.h"

static void fill(emit *e, float *y, size_t n, float value)
{
    dev_op op = op_new(DOP_FILL);
    op.u.fill.y = y;
    op.u.fill.n = n;
    op.u.fill.value = value;
    emit_op(e, &op);
}

static void zero(emit *e, float *y, size_t n) { fill(e, y, n, 0.0f); }

/* ---- buffers ---- */

static size_t slot_floats(const xr *x) { return (size_t)x->lane_tok * (xr_kd(x) + xr_vd(x)); }

static float *kv_ptr(xr *x, int layer, int buf)
{
    int lane = buf / DAG_SLOTS_PER_LANE, slot = buf % DAG_SLOTS_PER_LANE;
    return slot == KV_OWN ? x->ly[layer].kv_own[lane] : x->kv_slot[lane][slot];
}

static float *dkv_ptr(xr *x, int buf) { return x->dkv_slot[buf / DAG_SLOTS_PER_LANE][buf % DAG_SLOTS_PER_LANE]; }

/* Rows [*r0, *r0 + *n) selected by 2-bit chunk mask `sel` in a buffer that
 * holds `parts` (bit mask) of a ring rank's chunks. */
static void sel_rows(const xr *x, int parts, int sel, int *r0, int *n)
{
    if (parts != 3) { /* one chunk: all of it */
        *r0 = 0;
        *n = x->ctok;
        return;
    }
    *r0 = sel == 2 ? x->ctok : 0;
    *n = sel == 3 ? 2 * x->ctok : x->ctok;
}

static int q_parts(const xr *x) { return (int)ringgeo_parts(x->c); }

/* ---- attention ---- */

typedef struct view {
    int q0, nq, k0, nk, lane;
    const float *k, *v;
    const int64_t *kpos;
} view;

static view block_view(xr *x, const dag_task *t)
{
    view w;
    w.lane = t->buf / DAG_SLOTS_PER_LANE;
    sel_rows(x, q_parts(x), SEL_Q(t->sel), &w.q0, &w.nq);
    sel_rows(x, x->lane_parts[w.lane], SEL_KV(t->sel), &w.k0, &w.nk);
    const float *slot = kv_ptr(x, t->layer, t->buf);
    w.k = slot + (size_t)w.k0 * xr_kd(x);
    w.v = slot + (size_t)x->lane_tok * xr_kd(x) + (size_t)w.k0 * xr_vd(x);
    w.kpos = x->kpos + ((size_t)t->src * (size_t)x->lanes + (size_t)w.lane) * (size_t)x->lane_tok + w.k0;
    return w;
}

/* ---- --ring allgather: gathered K and V (exec_state.h's layout) ---- */

static bool gathering(const xr *x) { return x->c->ring == RING_ALLGATHER; }
/* Floats of one rank's K (kv 0) or V (kv 1) part, and of the gathered K
 * or V; the gathered V starts at ag_all(x, 0). */
static size_t ag_part(const xr *x, int kv) { return (size_t)x->lane_tok * (kv ? xr_vd(x) : xr_kd(x)); }
static size_t ag_all(const xr *x, int kv) { return ag_part(x, kv) * (size_t)x->c->p_seq; }

/* The KV a block reads: the gathered copy in slot buf, or (P_s = 1) the own
 * KV, which has the same layout. */
static float *ag_kv(xr *x, const dag_task *t)
{
    return t->buf == KV_OWN ? x->ly[t->layer].kv_own[0] : x->ag_kv[t->buf == KV_IN1];
}

/* Where a block writes dK/dV: the whole sequence's, or (P_s = 1) the final slot. */
static float *ag_dkv(xr *x, int slot)
{
    return slot == DKV_FINAL ? dkv_ptr(x, DKV_FINAL) : x->ag_dkv[slot == DKV_BLK1];
}

/* All of this rank's queries against every gathered key. */
static view gathered_view(xr *x, const dag_task *t)
{
    const float *kv = ag_kv(x, t);
    return (view){0, x->N, 0, x->c->p_seq * x->lane_tok, 0, kv, kv + ag_all(x, 0), x->kpos};
}

static void ag_collective(emit *e, dev_op_kind kind, int stream, float *buf, size_t count)
{
    dev_op op = op_new(kind);
    op.u.coll = (__typeof__(op.u.coll)){e->x->comm[stream], buf, buf, count};
    emit_op(e, &op);
}

/* Own K and V into this rank's parts, then two in-place all-gathers. */
static void kv_gather(emit *e, const dag_task *t)
{
    xr *x = e->x;
    float *dst = ag_kv(x, t), *own = x->ly[t->layer].kv_own[0];
    for (int kv = 0; kv < 2; kv++) {
        size_t part = ag_part(x, kv), all = ag_all(x, kv), at = kv ? ag_all(x, 0) : 0, from = kv ? ag_part(x, 0) : 0;
        copy2d(e, dst + at + (size_t)x->s * part, part, own + from, part, 1, part);
        ag_collective(e, DOP_ALLGATHER, STREAM_RING, dst + at, all);
    }
}

/* Sum dK and dV over the context ranks; this rank's part becomes its final dK/dV. */
static void dkv_reduce(emit *e, const dag_task *t)
{
    xr *x = e->x;
    float *src = ag_dkv(x, t->buf2), *fin = dkv_ptr(x, DKV_FINAL);
    for (int kv = 0; kv < 2; kv++) {
        size_t part = ag_part(x, kv), all = ag_all(x, kv), at = kv ? ag_all(x, 0) : 0, to = kv ? ag_part(x, 0) : 0;
        ag_collective(e, DOP_REDUCESCATTER, STREAM_DKV, src + at, all);
        copy2d(e, fin + to, part, src + at + (size_t)x->s * part, part, 1, part);
    }
}

/* The inputs every attention op reads: this block's queries, KV, positions. */
static dev_op attn_op(dev_op_kind kind, const xr *x, const layer_t *ly, const view *w, const dag_task *t)
{
    dev_op op = op_new(kind);
    op.u.attn.q = ly->q_h + (size_t)w->q0 * (size_t)x->hq * (size_t)x->d;
    op.u.attn.k = w->k;
    op.u.attn.v = w->v;
    op.u.attn.qpos = x->qpos + w->q0;
    op.u.attn.kpos = w->kpos;
    op.u.attn.s = (attn_shape){
        w->nq, w->nk, x->hq, x->kvh, x->d, (t->flags & DAG_F_MASKED) != 0, x->qstart ? x->qstart + w->q0 : NULL, x->dv};
    return op;
}

static void attn_fwd(emit *e, const dag_task *t)
{
    xr *x = e->x;
    layer_t *ly = &x->ly[t->layer];
    int key = t->layer + t->mb * (x->L + 1); /* one micro-batch's layer after another's may be the same layer */
    if (x->cur_layer_o[t->phase] != key) {
        x->cur_layer_o[t->phase] = key;
        x->o_init[t->phase] = false;
    }
    view w = gathering(x) ? gathered_view(x, t) : block_view(x, t);
    size_t hqd = (size_t)x->hq * (size_t)x->dv; /* O's */
    bool first = !x->o_init[t->phase];
    x->o_init[t->phase] = true;
    if (first && w.nq != x->N) {
        /* With documents, a layer's first block may hold only some queries
         * (the others see none of its keys). It still writes its rows in
         * place, with no merge after it; the other rows start empty, as the
         * later merges expect: O = 0, LSE = -inf. */
        zero(e, ly->o_h, (size_t)x->N * hqd);
        fill(e, ly->lse, (size_t)x->N * (size_t)x->hq, -INFINITY);
    }
    dev_op op = attn_op(DOP_ATTN_FWD, x, ly, &w, t);
    op.u.attn.o = (first ? ly->o_h : x->ob) + (size_t)w.q0 * hqd;
    op.u.attn.lse = (first ? ly->lse : x->lseb) + (size_t)w.q0 * (size_t)x->hq;
    emit_op(e, &op);
}

static void merge(emit *e, const dag_task *t)
{
    xr *x = e->x;
    layer_t *ly = &x->ly[t->layer];
    int q0, nq;
    sel_rows(x, q_parts(x), SEL_Q(t->sel), &q0, &nq);
    size_t hqd = (size_t)x->hq * (size_t)x->dv;
    dev_op op = op_new(DOP_MERGE);
    op.u.merge = (__typeof__(op.u.merge)){ly->o_h + (size_t)q0 * hqd,
                                          ly->lse + (size_t)q0 * (size_t)x->hq,
                                          x->ob + (size_t)q0 * hqd,
                                          x->lseb + (size_t)q0 * (size_t)x->hq,
                                          nq,
                                          x->hq,
                                          x->dv};
    emit_op(e, &op);
}

static void attn_bwd(emit *e, const dag_task *t)
{
    xr *x = e->x;
    layer_t *ly = &x->ly[t->layer];
    size_t hqd = (size_t)x->hq * (size_t)x->d, hqv = (size_t)x->hq * (size_t)x->dv; /* Q's and O's */
    int key = t->layer + t->mb * (x->L + 1);
    if (x->cur_layer_dq != key) {
        x->cur_layer_dq = key;
        zero(e, ly->dq_h, (size_t)x->N * hqd);
    }
    view w = gathering(x) ? gathered_view(x, t) : block_view(x, t);
    float *out = gathering(x) ? ag_dkv(x, t->buf2) : dkv_ptr(x, t->buf2);
    size_t v_at = gathering(x) ? ag_all(x, 0) : (size_t)x->lane_tok * xr_kd(x); /* where V starts */
    if (!gathering(x) && w.nk != x->lane_tok) zero(e, out, slot_floats(x));     /* rows outside the block stay zero */
    dev_op op = attn_op(DOP_ATTN_BWD, x, ly, &w, t);
    op.u.attn.dq = ly->dq_h + (size_t)w.q0 * hqd;
    op.u.attn.dk = out + (size_t)w.k0 * xr_kd(x);
    op.u.attn.dv = out + v_at + (size_t)w.k0 * xr_vd(x);
    op.u.attn.o_in = ly->o_h + (size_t)w.q0 * hqv;
    op.u.attn.lse_in = ly->lse + (size_t)w.q0 * (size_t)x->hq;
    op.u.attn.do_ = ly->do_h + (size_t)w.q0 * hqv;
    emit_op(e, &op);
}

static void acc(emit *e, const dag_task *t)
{
    xr *x = e->x;
    if (t->op == OP_TP_X || t->op == OP_TP_H || t->op == OP_TP_Y) { /* --tp-overlap */
        xt_tp_ovl_acc(e, t);
        return;
    }
    if (t->op == OP_DKV_ACC) {
        dev_op op = op_new(DOP_AXPY);
        op.u.axpy = (__typeof__(op.u.axpy)){dkv_ptr(x, t->buf), dkv_ptr(x, t->buf2), slot_floats(x)};
        emit_op(e, &op);
        return;
    }
    /* OP_KV_REP_SUM: the R replicas of each KV head, adjacent after the
     * all-to-all, summed into the GEMM layout's dK and dV */
    layer_t *ly = &x->ly[t->layer];
    size_t d = (size_t)x->d, w3 = xr_qkv_width(x), weff = 2 * (size_t)x->Hkv_eff * d; /* no MLA: R = 1 there */
    for (int kv = 0; kv < 2; kv++) {
        dev_op op = op_new(DOP_SUM_GROUPS);
        op.u.sum = (__typeof__(op.u.sum)){ly->dqkv_s + (size_t)x->H * d + (size_t)kv * (size_t)x->Hkv * d,
                                          ly->dkv_eff + (size_t)kv * (size_t)x->Hkv_eff * d,
                                          (size_t)x->T,
                                          w3,
                                          weff,
                                          x->Hkv,
                                          x->R,
                                          x->d};
        emit_op(e, &op);
    }
}

/* ---- ring transfers ---- */

static float *xfer_buf(xr *x, const dag_task *t)
{
    if (t->op == OP_DKV) return (t->flags & DAG_F_ZERO) ? x->zeros : dkv_ptr(x, t->buf);
    return kv_ptr(x, t->layer, t->buf);
}

static void sendrecv(emit *e, const dag_task *s, const dag_task *r)
{
    xr *x = e->x;
    dev_comm *c = x->comm[s->stream];
    dev_op op = op_new(DOP_SENDRECV);
    op.u.p2p.comm = c;
    op.u.p2p.sbuf = xfer_buf(x, s);
    op.u.p2p.sbytes = s->bytes;
    op.u.p2p.to = x->ops->comm_rank(c, s->peer);
    op.u.p2p.rbuf = xfer_buf(x, r);
    op.u.p2p.rbytes = dag_task_bytes_moved(x->g, r);
    op.u.p2p.from = x->ops->comm_rank(c, r->peer);
    op.stamp_end = e->slot;
    op.stamp_start2 = op.stamp_end2 = (int)(r->id - x->base);
    emit_op(e, &op);
}

/* ---- head all-to-all ---- */

/* Copy T rows starting at ring-local row r0 between a (T, cols) block and
 * the slot layout of the own KV (or the final dK/dV) of each lane. */
static void slot_rows(emit *e, float *const *slots, bool to_slot, int r0, float *blk, size_t blk_ld, int col)
{
    xr *x = e->x;
    size_t w[2] = {xr_kd(x), xr_vd(x)}; /* K's and V's floats a token */
    for (int r = r0; r < r0 + x->T;) {
        int lane = x->lanes == 2 ? r / x->ctok : 0, lr = x->lanes == 2 ? r % x->ctok : r;
        int n = x->lanes == 2 ? x->ctok - lr : x->T;
        if (n > r0 + x->T - r) n = r0 + x->T - r;
        for (int kv = 0; kv < 2; kv++) {
            float *s = slots[lane] + (size_t)kv * (size_t)x->lane_tok * w[0] + (size_t)lr * w[kv];
            float *b = blk + (size_t)(r - r0) * blk_ld + (size_t)col + (size_t)kv * w[0];
            if (to_slot)
                copy2d(e, s, w[kv], b, blk_ld, (size_t)n, w[kv]);
            else
                copy2d(e, b, blk_ld, s, w[kv], (size_t)n, w[kv]);
        }
        r += n;
    }
}

static void alltoall(emit *e, const float *sbuf, float *rbuf, size_t count)
{
    xr *x = e->x;
    if (x->c->p_head == 1) {
        if (sbuf != rbuf) copy2d(e, rbuf, count, sbuf, count, 1, count);
        return;
    }
    dev_op op = op_new(DOP_ALLTOALL);
    op.u.coll = (__typeof__(op.u.coll)){x->comm[STREAM_A2A], sbuf, rbuf, count};
    emit_op(e, &op);
}

/* Where head block j's K (kv 0) or V (kv 1) starts in a row of the GEMM
 * layout [Q | K | V], and its width: K and V of the block's KV heads (its
 * replica's head when R > 1, which MLA never has: its H_kv is H). */
static size_t qkv_col(const xr *x, int j, int kv)
{
    size_t d = (size_t)x->d, at = (size_t)x->H * d + (kv ? (size_t)x->Hkv * d : 0);
    return at + (x->R > 1 ? (size_t)(j / x->R) * d : (size_t)j * (kv ? xr_vd(x) : xr_kd(x)));
}

static void a2a_qkv(emit *e, int l)
{
    xr *x = e->x;
    layer_t *ly = &x->ly[l];
    size_t T = (size_t)x->T, hqd = (size_t)x->hq * (size_t)x->d, w[2] = {xr_kd(x), xr_vd(x)};
    size_t bw = hqd + w[0] + w[1], w3 = xr_qkv_width(x);
    for (int j = 0; j < x->c->p_head; j++) {
        float *blk = x->a2a_send + (size_t)j * T * bw;
        copy2d(e, blk, bw, ly->qkv_s + (size_t)j * hqd, w3, T, hqd);
        for (int kv = 0; kv < 2; kv++)
            copy2d(e, blk + hqd + (size_t)kv * w[0], bw, ly->qkv_s + qkv_col(x, j, kv), w3, T, w[kv]);
    }
    alltoall(e, x->a2a_send, x->a2a_recv, T * bw);
    for (int i = 0; i < x->c->p_head; i++) {
        float *blk = x->a2a_recv + (size_t)i * T * bw;
        copy2d(e, ly->q_h + (size_t)i * T * hqd, hqd, blk, bw, T, hqd);
        slot_rows(e, ly->kv_own, true, i * x->T, blk, bw, (int)hqd);
    }
}

static void a2a_o(emit *e, int l)
{
    xr *x = e->x;
    layer_t *ly = &x->ly[l];
    size_t T = (size_t)x->T, hqd = (size_t)x->hq * (size_t)x->dv, hd = (size_t)x->H * (size_t)x->dv;
    alltoall(e, ly->o_h, x->a2a_recv, T * hqd);
    for (int i = 0; i < x->c->p_head; i++)
        copy2d(e, ly->o_s + (size_t)i * hqd, hd, x->a2a_recv + (size_t)i * T * hqd, hqd, T, hqd);
}

static void a2a_do(emit *e, int l)
{
    xr *x = e->x;
    layer_t *ly = &x->ly[l];
    size_t T = (size_t)x->T, hqd = (size_t)x->hq * (size_t)x->dv, hd = (size_t)x->H * (size_t)x->dv;
    for (int j = 0; j < x->c->p_head; j++)
        copy2d(e, x->a2a_send + (size_t)j * T * hqd, hqd, ly->do_s + (size_t)j * hqd, hd, T, hqd);
    alltoall(e, x->a2a_send, ly->do_h, T * hqd);
}

static void a2a_dqkv(emit *e, int l)
{
    xr *x = e->x;
    layer_t *ly = &x->ly[l];
    size_t d = (size_t)x->d, T = (size_t)x->T, hqd = (size_t)x->hq * d, w[2] = {xr_kd(x), xr_vd(x)};
    size_t bw = hqd + w[0] + w[1], w3 = xr_qkv_width(x);
    float *finals[2] = {x->dkv_slot[0][DKV_FINAL], x->dkv_slot[1][DKV_FINAL]};
    for (int j = 0; j < x->c->p_head; j++) {
        float *blk = x->a2a_send + (size_t)j * T * bw;
        copy2d(e, blk, bw, ly->dq_h + (size_t)j * T * hqd, hqd, T, hqd);
        slot_rows(e, finals, false, j * x->T, blk, bw, (int)hqd);
    }
    alltoall(e, x->a2a_send, x->a2a_recv, T * bw);
    for (int i = 0; i < x->c->p_head; i++) {
        float *blk = x->a2a_recv + (size_t)i * T * bw;
        copy2d(e, ly->dqkv_s + (size_t)i * hqd, w3, blk, bw, T, hqd);
        for (int kv = 0; kv < 2; kv++) {
            if (x->R > 1)
                copy2d(e, ly->dkv_eff + (size_t)kv * (size_t)x->Hkv_eff * d + (size_t)i * w[kv],
                       2 * (size_t)x->Hkv_eff * d, blk + hqd + (size_t)kv * w[0], bw, T, w[kv]);
            else
                copy2d(e, ly->dqkv_s + qkv_col(x, i, kv), w3, blk + hqd + (size_t)kv * w[0], bw, T, w[kv]);
        }
    }
}

static void a2a(emit *e, const dag_task *t)
{
    switch (t->op) {
    case OP_A2A_QKV: a2a_qkv(e, t->layer); break;
    case OP_A2A_O: a2a_o(e, t->layer); break;
    case OP_A2A_DO: a2a_do(e, t->layer); break;
    case OP_A2A_DQKV: a2a_dqkv(e, t->layer); break;
    default: break;
    }
}

/* With P_h = 1 there are no all-to-all tasks; the layout changes (a copy)
 * run on the stream of the task that first needs them. */
int xr_local_layout(xr *x, int stream, task_op which, int layer)
{
    emit e = {x, stream, -1, 0, true, {0}, false, 0};
    switch (which) {
    case OP_A2A_QKV: a2a_qkv(&e, layer); break;
    case OP_A2A_O: a2a_o(&e, layer); break;
    case OP_A2A_DO: a2a_do(&e, layer); break;
    case OP_A2A_DQKV: a2a_dqkv(&e, layer); break;
    default: break;
    }
    emit_flush(&e, false);
    return e.rc;
}

/* ---- GEMMs of the step ----
 * tp = 1: the GEMMs add the residuals themselves. tp > 1 (Megatron's
 * layer): column-parallel QKV, gate, up and LM head read the gathered
 * input (sequence parallelism) or the replicated one; row-parallel output
 * projection and down write partial sums, and so do the column-parallel
 * GEMMs' input gradients; the TP reductions (exec_tp.c) add the residuals. */

/* The input a column-parallel GEMM reads: gathered under sequence
 * parallelism (the own rows for a gather-side chunk 0), else the block's
 * own. */
static const float *gathered(const xr *x, const span *s, const float *gath, const float *own)
{
    return x->sp && !s->own ? gath : own;
}

#define ROWS(p, ld) ((p) + s.r0 * (size_t)(ld)) /* row s.r0 of a (T, ld) buffer */

/* Per token of the LM head's logits z (T, vocab shard) and loss weights R:
 * sum(z * R) (the loss, sum(logits * R)), sum(z), sum(z^2) into loss (T, 3),
 * partial over the vocabulary shard at tp > 1 (OP_TP_LOSS sums them). */
static void loss_stats(emit *e)
{
    xr *x = e->x;
    int V = x->vocab;
    const float *b[2] = {x->r_lm, x->logits};
    for (int k = 0; k < 2; k++) {
        dev_op op = op_new(DOP_ROWDOT);
        op.u.rowdot = (__typeof__(op.u.rowdot)){x->loss + 2 * k, x->logits, b[k],      (size_t)x->T,
                                                (size_t)V,       3,         (size_t)V, (size_t)V};
        emit_op(e, &op);
    }
    dev_op op = op_new(DOP_SUM_GROUPS);
    op.u.sum = (__typeof__(op.u.sum)){x->loss + 1, x->logits, (size_t)x->T, 3, (size_t)V, 1, V, 1};
    emit_op(e, &op);
}

static void gemm_fwd(emit *e, const dag_task *t)
{
    xr *x = e->x;
    const model *m = &x->c->model;
    int T = x->T, hid = m->hidden, hd = x->H * x->dv, w3 = (int)xr_qkv_width(x);
    bool tp = x->tp > 1;
    span s = xt_tp_gemm_span(x, t);
    int n = (int)s.n;
    if (t->op == OP_LM_HEAD) {
        layer_t *top = &x->ly[x->L];
        gemm(e, 0, 0, T, x->vocab, hid, gathered(x, &s, top->xg, top->x), hid, x->lm_w, x->vocab, 0, x->logits,
             x->vocab);
        loss_stats(e);
        return;
    }
    layer_t *ly = &x->ly[t->layer], *next = &x->ly[t->layer + 1];
    int ffn = ly->ffn; /* a mixture of experts' block: its shared experts' */
    switch (t->op) {
    case OP_QKV:
        if (ly->mla) {
            xt_mla_qkv(e, t);
            if (x->c->p_head == 1 && xt_mla_edge(x, t)) a2a_qkv(e, t->layer);
            break;
        }
        gemm(e, 0, 0, n, w3, hid, ROWS(gathered(x, &s, ly->xg, ly->x), hid), hid, ly->w.qkv, w3, 0, ROWS(ly->qkv_s, w3),
             w3);
        if (x->c->p_head == 1 && s.last) a2a_qkv(e, t->layer);
        break;
    case OP_OUT_PROJ:
        if (x->c->p_head == 1 && s.first) a2a_o(e, t->layer);
        if (tp) {
            gemm(e, 0, 0, n, hid, hd, ROWS(ly->o_s, hd), hd, ly->w.o, hid, 0, ROWS(ly->hp, hid), hid);
            break;
        }
        copy2d(e, ly->h, (size_t)hid, ly->x, (size_t)hid, (size_t)T, (size_t)hid);
        gemm(e, 0, 0, T, hid, hd, ly->o_s, hd, ly->w.o, hid, 1, ly->h, hid);
        break;
    case OP_MLP_GATE:
        gemm(e, 0, 0, n, ffn, hid, ROWS(gathered(x, &s, ly->hg, ly->h), hid), hid, ly->w.g, ffn, 0, ROWS(ly->g, ffn),
             ffn);
        break;
    case OP_MLP_UP:
        gemm(e, 0, 0, n, ffn, hid, ROWS(gathered(x, &s, ly->hg, ly->h), hid), hid, ly->w.u, ffn, 0, ROWS(ly->u, ffn),
             ffn);
        break;
    case OP_MLP_DOWN: {
        if (s.first) { /* all T rows: every chunk of gate and up is done */
            dev_op op = op_new(DOP_SWIGLU);
            op.u.swiglu.m = ly->m;
            op.u.swiglu.g = ly->g;
            op.u.swiglu.u = ly->u;
            op.u.swiglu.n = (size_t)T * (size_t)ffn;
            emit_op(e, &op);
        }
        if (tp) {
            gemm(e, 0, 0, n, hid, ffn, ROWS(ly->m, ffn), ffn, ly->w.dn, hid, 0, ROWS(ly->yp, hid), hid);
            break;
        }
        if (!ly->ep)
            copy2d(e, next->x, (size_t)hid, ly->h, (size_t)hid, (size_t)T, (size_t)hid); /* else unpermute did */
        gemm(e, 0, 0, T, hid, ffn, ly->m, ffn, ly->w.dn, hid, 1, next->x, hid);
        break;
    }
    default: break;
    }
}

/* Backward: the input gradient of the span's rows, and its part of the
 * weight gradient (accumulated over a pair's chunks). */
static void gemm_bwd(emit *e, const dag_task *t)
{
    xr *x = e->x;
    const model *m = &x->c->model;
    int T = x->T, hid = m->hidden, hd = x->H * x->dv, w3 = (int)xr_qkv_width(x);
    bool tp = x->tp > 1;
    span s = xt_tp_gemm_span(x, t);
    int n = (int)s.n;
    if (t->op == OP_LM_HEAD) { /* loss = sum(logits * R): dlogits = R */
        layer_t *top = &x->ly[x->L];
        gemm(e, 0, 1, T, hid, x->vocab, x->r_lm, x->vocab, x->lm_w, x->vocab, 0, tp ? top->dxp : top->dx, hid);
        gemm(e, 1, 0, hid, x->vocab, T, gathered(x, &s, top->xg, top->x), hid, x->r_lm, x->vocab, 1, x->lm_gw,
             x->vocab);
        return;
    }
    layer_t *ly = &x->ly[t->layer], *next = &x->ly[t->layer + 1];
    int ffn = ly->ffn;
    const float *hin = ROWS(gathered(x, &s, ly->hg, ly->h), hid);
    switch (t->op) {
    case OP_MLP_DOWN: {
        const float *dy = ROWS(gathered(x, &s, ly->dyg, next->dx), hid);
        gemm(e, 0, 1, n, ffn, hid, dy, hid, ly->w.dn, hid, 0, ROWS(ly->dm, ffn), ffn);
        gemm(e, 1, 0, ffn, hid, n, ROWS(ly->m, ffn), ffn, dy, hid, 1, ly->gw.dn, hid);
        if (!tp) copy2d(e, ly->dh, (size_t)hid, next->dx, (size_t)hid, (size_t)T, (size_t)hid);
        break;
    }
    case OP_MLP_UP: {
        if (s.first) { /* all T rows: every chunk of down's backward is done */
            dev_op op = op_new(DOP_SWIGLU);
            op.u.swiglu =
                (__typeof__(op.u.swiglu)){1, NULL, ly->dg, ly->du, ly->g, ly->u, ly->dm, (size_t)T * (size_t)ffn};
            emit_op(e, &op);
        }
        gemm(e, 0, 1, n, hid, ffn, ROWS(ly->du, ffn), ffn, ly->w.u, ffn, tp ? 0 : 1, ROWS(tp ? ly->dhp : ly->dh, hid),
             hid);
        gemm(e, 1, 0, hid, ffn, n, hin, hid, ROWS(ly->du, ffn), ffn, 1, ly->gw.u, ffn);
        break;
    }
    case OP_MLP_GATE:
        gemm(e, 0, 1, n, hid, ffn, ROWS(ly->dg, ffn), ffn, ly->w.g, ffn, 1, ROWS(tp ? ly->dhp : ly->dh, hid), hid);
        gemm(e, 1, 0, hid, ffn, n, hin, hid, ROWS(ly->dg, ffn), ffn, 1, ly->gw.g, ffn);
        break;
    case OP_OUT_PROJ: {
        const float *dh = ROWS(gathered(x, &s, ly->dhg, ly->dh), hid);
        gemm(e, 0, 1, n, hd, hid, dh, hid, ly->w.o, hid, 0, ROWS(ly->do_s, hd), hd);
        if (x->c->p_head == 1 && s.last) a2a_do(e, t->layer);
        gemm(e, 1, 0, hd, hid, n, ROWS(ly->o_s, hd), hd, dh, hid, 1, ly->gw.o, hid);
        if (!tp) copy2d(e, ly->dx, (size_t)hid, ly->dh, (size_t)hid, (size_t)T, (size_t)hid);
        break;
    }
    case OP_QKV:
        if (ly->mla) {
            if (x->c->p_head == 1 && xt_mla_edge(x, t)) a2a_dqkv(e, t->layer);
            xt_mla_qkv(e, t);
            break;
        }
        if (x->c->p_head == 1 && s.first) a2a_dqkv(e, t->layer);
        gemm(e, 0, 1, n, hid, w3, ROWS(ly->dqkv_s, w3), w3, ly->w.qkv, w3, tp ? 0 : 1, ROWS(tp ? ly->dxp : ly->dx, hid),
             hid);
        gemm(e, 1, 0, hid, w3, n, ROWS(gathered(x, &s, ly->xg, ly->x), hid), hid, ROWS(ly->dqkv_s, w3), w3, 1,
             ly->gw.qkv, w3);
        break;
    default: break;
    }
}

/* A collective task: TP's, the KV replicas', the all-gather's, or the
 * gradient reduction's. */
static void collective(emit *e, const dag_task *t)
{
    if (t->stream == STREAM_TP) {
        xt_tp_collective(e, t);
        return;
    }
    if (t->stream == STREAM_TP_KV) {
        xt_tp_kv_grads(e, t);
        return;
    }
    if (t->op == OP_KV_GATHER || t->op == OP_DKV_REDUCE) {
        (t->op == OP_KV_GATHER ? kv_gather : dkv_reduce)(e, t);
        return;
    }
    xt_grad_collective(e, t);
}

int xr_launch_task(xr *x, const dag_task *t, const dag_task *recv)
{
    emit e = {x, t->stream, (int)(t->id - x->base), 0, false, {0}, false, 0};
    xr_select_mb(x, t->mb);
    bool pp = t->stream == STREAM_PP || t->stream == STREAM_PP_GRAD;
    const exec_opts *o = x->o;
    bool its_recv = t->kind == TASK_SEND && (int)t->id + 1 == o->fail_task; /* the recv issued with this send */
    if (o->fail_rank == x->rank && o->fail_at == FAULT_TASK && ((int)t->id == o->fail_task || its_recv))
        e.fail = o->fail_task + 1;
    if (xt_ep_owns(t)) {
        xt_ep_task(&e, t);
        return emit_end(&e);
    }
    switch (t->kind) {
    case TASK_ATTN_FWD: attn_fwd(&e, t); break;
    case TASK_MERGE: merge(&e, t); break;
    case TASK_ATTN_BWD: attn_bwd(&e, t); break;
    case TASK_ACC: acc(&e, t); break;
    case TASK_SEND:
        if (pp)
            xt_pp_sendrecv(&e, t, recv);
        else
            (t->stream == STREAM_TP ? xt_tp_ovl_sendrecv : sendrecv)(&e, t, recv);
        break;
    case TASK_RECV: xt_pp_sendrecv(&e, NULL, t); break; /* a pipeline recv on its own */
    case TASK_ALLTOALL: a2a(&e, t); break;
    case TASK_GEMM: t->phase == PHASE_BWD ? gemm_bwd(&e, t) : gemm_fwd(&e, t); break;
    case TASK_ALLREDUCE:
    case TASK_REDUCESCATTER:
    case TASK_ALLGATHER: collective(&e, t); break;
    default: { /* the elementwise kernels: not run (docs/exec.md), an empty op keeps the stream's order */
        dev_op op = op_new(DOP_FILL);
        emit_op(&e, &op);
    }
    }
    return emit_end(&e);
}

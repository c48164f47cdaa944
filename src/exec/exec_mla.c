/*
 * exec_mla: multi-head latent attention's projections on the device
 * (exec_tasks.h), tp = 1, as Megatron-Core's MultiLatentAttention
 * (megatron/core/transformer/multi_latent_attention.py) computes them and
 * build.c's qkv_gemms tasks them:
 *
 *   Q down   qc (T, ql) = x Wqa                        (without q_lora:
 *   Q up     Q  (T, H dqk) = qc Wqb                     Q = x Wq)
 *   KV down  ckv (T, kl + dr) = x Wkva: the latent c and the rope key k_pe
 *   KV up    kv (T, H (dn + dv)) = c Wkvb; per head K = [k_nope | k_pe],
 *            V = v: the expanded heads that attention (and the ring) see
 *
 * into the GEMM layout [Q (H dqk) | K (H dqk) | V (H dv)] of qkv_s; dqk =
 * dn + dr. The backward runs the projections in reverse (the DAG's order):
 * KV up (dK's rope parts summed over the heads into the latent's rope
 * column), KV down, Q up, Q down. The executor has no norms and no
 * rotary: the latents' RMSNorms and RoPE are build.c's elementwise tasks,
 * which it does not run (docs/exec.md).
 */
#include <stdlib.h>

#include "exec_tasks.h"

typedef struct layer_mla {
    float *qc, *ckv, *kv;          /* the forward's: (T, ql), (T, kl + dr), (T, H (dn + dv)) */
    float *dqc, *dckv, *dkv, *dpe; /* their gradients; dpe (T, H dr): every head's rope part of dK */
} layer_mla;

typedef struct dims {
    size_t T, hid, H, ql, kl, dn, dr, dv, dqk, w3;
} dims;

static dims dims_of(const xr *x)
{
    const model *m = &x->c->model;
    return (dims){(size_t)x->T,       (size_t)m->hidden,  (size_t)m->heads,
                  (size_t)m->q_lora,  (size_t)m->kv_lora, (size_t)m->qk_nope,
                  (size_t)m->qk_rope, (size_t)m->v_dim,   (size_t)(m->qk_nope + m->qk_rope),
                  xr_qkv_width(x)};
}

size_t xr_mla_floats(const xr *x)
{
    dims d = dims_of(x);
    size_t q = d.ql ? d.hid * d.ql + d.ql * d.H * d.dqk : d.hid * d.H * d.dqk;
    return q + d.hid * (d.kl + d.dr) + d.kl * d.H * (d.dn + d.dv);
}

/* The projections' weights (or gradients) from the block's first float. */
typedef struct mla_w {
    float *qa, *qb, *kva, *kvb; /* qa NULL without q_lora, qb is then Wq */
} mla_w;

static mla_w weights_at(const xr *x, float *w)
{
    dims d = dims_of(x);
    mla_w o;
    o.qa = d.ql ? w : NULL;
    o.qb = d.ql ? w + d.hid * d.ql : w;
    o.kva = o.qb + (d.ql ? d.ql : d.hid) * d.H * d.dqk;
    o.kvb = o.kva + d.hid * (d.kl + d.dr);
    return o;
}

static float *mla_alloc(xr *x, size_t n, bool *ok)
{
    if (!n) return NULL;
    float *p = x->ops->alloc(x->dev, n * sizeof(float));
    if (!p) *ok = false;
    return p;
}

void xr_mla_alloc(xr *x, layer_t *l, bool *ok)
{
    dims d = dims_of(x);
    layer_mla *b = calloc(1, sizeof *b);
    if (!(l->mla = b)) {
        *ok = false;
        return;
    }
    size_t kv = d.T * d.H * (d.dn + d.dv);
    b->qc = mla_alloc(x, d.T * d.ql, ok), b->dqc = mla_alloc(x, d.T * d.ql, ok);
    b->ckv = mla_alloc(x, d.T * (d.kl + d.dr), ok), b->dckv = mla_alloc(x, d.T * (d.kl + d.dr), ok);
    b->kv = mla_alloc(x, kv, ok), b->dkv = mla_alloc(x, kv, ok), b->dpe = mla_alloc(x, d.T * d.H * d.dr, ok);
}

void xr_mla_free(layer_t *l)
{
    free(l->mla); /* device buffers: released with the device */
    l->mla = NULL;
}

/* Which of its layer's projection tasks t is (0 ..), counting the OP_QKV
 * tasks of its layer, phase and micro-batch just before it: build.c
 * emits them back to back (tp = 1). */
static int task_index(const xr *x, const dag_task *t)
{
    int i = 0;
    for (uint32_t id = t->id; id > x->base; id--) {
        const dag_task *p = dag_task_get(x->g, id - 1);
        if (p->op != OP_QKV || p->layer != t->layer || p->phase != t->phase || p->mb != t->mb) break;
        i++;
    }
    return i;
}

enum { Q_DOWN, Q_UP, KV_DOWN, KV_UP };

/* The projection a task runs: forward in qkv_gemms' order (Q down, Q up,
 * KV down, KV up; no Q down without q_lora), backward reversed. */
static int role_of(const xr *x, const dag_task *t, bool *edge)
{
    int n = x->c->model.q_lora ? 4 : 3, i = task_index(x, t), r = t->phase == PHASE_BWD ? n - 1 - i : i;
    *edge = t->phase == PHASE_BWD ? i == 0 : i == n - 1; /* the backward's first, the forward's last */
    return n == 4 ? r : r + 1;
}

/* KV up's forward: the expanded heads into qkv_s's K and V. */
static void expand_heads(emit *e, const dims *d, const layer_t *ly)
{
    const layer_mla *b = ly->mla;
    size_t kvw = d->H * (d->dn + d->dv);
    for (size_t h = 0; h < d->H; h++) {
        float *k = ly->qkv_s + d->H * d->dqk + h * d->dqk, *v = ly->qkv_s + 2 * d->H * d->dqk + h * d->dv;
        const float *src = b->kv + h * (d->dn + d->dv);
        copy2d(e, k, d->w3, src, kvw, d->T, d->dn);
        copy2d(e, k + d->dn, d->w3, b->ckv + d->kl, d->kl + d->dr, d->T, d->dr);
        copy2d(e, v, d->w3, src + d->dn, kvw, d->T, d->dv);
    }
}

static void forward(emit *e, const dims *d, layer_t *ly, mla_w W, int role)
{
    layer_mla *b = ly->mla;
    int T = (int)d->T, hid = (int)d->hid, ql = (int)d->ql, kl = (int)d->kl, ckw = (int)(d->kl + d->dr);
    int qw = (int)(d->H * d->dqk), kvw = (int)(d->H * (d->dn + d->dv)), w3 = (int)d->w3;
    switch (role) {
    case Q_DOWN: gemm(e, 0, 0, T, ql, hid, ly->x, hid, W.qa, ql, 0, b->qc, ql); break;
    case Q_UP:
        gemm(e, 0, 0, T, qw, ql ? ql : hid, ql ? b->qc : ly->x, ql ? ql : hid, W.qb, qw, 0, ly->qkv_s, w3);
        break;
    case KV_DOWN: gemm(e, 0, 0, T, ckw, hid, ly->x, hid, W.kva, ckw, 0, b->ckv, ckw); break;
    default: gemm(e, 0, 0, T, kvw, kl, b->ckv, ckw, W.kvb, kvw, 0, b->kv, kvw); expand_heads(e, d, ly);
    }
}

/* KV up's backward, first half: dK's nope parts and dV into dkv, dK's
 * rope parts summed over the heads into dckv's rope columns. */
static void fold_heads(emit *e, const dims *d, const layer_t *ly)
{
    const layer_mla *b = ly->mla;
    size_t kvw = d->H * (d->dn + d->dv);
    for (size_t h = 0; h < d->H; h++) {
        const float *dk = ly->dqkv_s + d->H * d->dqk + h * d->dqk, *dv = ly->dqkv_s + 2 * d->H * d->dqk + h * d->dv;
        float *dst = b->dkv + h * (d->dn + d->dv);
        copy2d(e, dst, kvw, dk, d->w3, d->T, d->dn);
        copy2d(e, dst + d->dn, kvw, dv, d->w3, d->T, d->dv);
        copy2d(e, b->dpe + h * d->dr, d->H * d->dr, dk + d->dn, d->w3, d->T, d->dr);
    }
    dev_op op = op_new(DOP_SUM_GROUPS);
    op.u.sum =
        (__typeof__(op.u.sum)){b->dckv + d->kl, b->dpe, d->T, d->kl + d->dr, d->H * d->dr, 1, (int)d->H, (int)d->dr};
    emit_op(e, &op);
}

static void backward(emit *e, const dims *d, layer_t *ly, mla_w W, mla_w G, int role)
{
    layer_mla *b = ly->mla;
    int T = (int)d->T, hid = (int)d->hid, ql = (int)d->ql, kl = (int)d->kl, ckw = (int)(d->kl + d->dr);
    int qw = (int)(d->H * d->dqk), kvw = (int)(d->H * (d->dn + d->dv)), w3 = (int)d->w3;
    switch (role) {
    case KV_UP:
        fold_heads(e, d, ly);
        gemm(e, 0, 1, T, kl, kvw, b->dkv, kvw, W.kvb, kvw, 0, b->dckv, ckw);
        gemm(e, 1, 0, kl, kvw, T, b->ckv, ckw, b->dkv, kvw, 1, G.kvb, kvw);
        break;
    case KV_DOWN:
        gemm(e, 0, 1, T, hid, ckw, b->dckv, ckw, W.kva, ckw, 1, ly->dx, hid);
        gemm(e, 1, 0, hid, ckw, T, ly->x, hid, b->dckv, ckw, 1, G.kva, ckw);
        break;
    case Q_UP: /* dQ: qkv_s's first H dqk columns */
        gemm(e, 0, 1, T, ql ? ql : hid, qw, ly->dqkv_s, w3, W.qb, qw, ql ? 0 : 1, ql ? b->dqc : ly->dx, ql ? ql : hid);
        gemm(e, 1, 0, ql ? ql : hid, qw, T, ql ? b->qc : ly->x, ql ? ql : hid, ly->dqkv_s, w3, 1, G.qb, qw);
        break;
    default:
        gemm(e, 0, 1, T, hid, ql, b->dqc, ql, W.qa, ql, 1, ly->dx, hid);
        gemm(e, 1, 0, hid, ql, T, ly->x, hid, b->dqc, ql, 1, G.qa, ql);
    }
}

bool xt_mla_edge(const xr *x, const dag_task *t)
{
    bool edge;
    role_of(x, t, &edge);
    return edge;
}

void xt_mla_qkv(emit *e, const dag_task *t)
{
    xr *x = e->x;
    layer_t *ly = &x->ly[t->layer];
    dims d = dims_of(x);
    bool edge;
    int role = role_of(x, t, &edge);
    if (t->phase == PHASE_BWD)
        backward(e, &d, ly, weights_at(x, ly->w.qkv), weights_at(x, ly->gw.qkv), role);
    else
        forward(e, &d, ly, weights_at(x, ly->w.qkv), role);
}

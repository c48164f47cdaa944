/*
 * exec_ep: a mixture of experts on the device (exec_tasks.h), the tasks of
 * build_ep.c at tp = 1 as Megatron-Core's MoELayer runs them with the
 * all-to-all dispatcher (megatron/core/transformer/moe/token_dispatcher.py):
 *
 *   router   z = h Wr (T, E); gates: softmax over each token's k experts
 *   permute  the T k routed rows (entries) into slot order: by expert,
 *            then entry, so each EP rank's rows are contiguous
 *   dispatch all-to-all-v over the EP group: to each rank its experts' rows;
 *            a rank receives, per source, its local experts' rows in order
 *   experts  per (source, local expert) chunk: gate, up, SwiGLU, down
 *   combine  the all-to-all-v back
 *   unpermute next x = h + sum_j gate_j * (expert j's output)
 *   (the shared experts are build.c's MLP tasks at their width, exec_tasks.c)
 *
 * Routing is config_ep_route's, a function of the block, the token's
 * position and --seed, so every rank knows its EP peers' counts without
 * exchanging them, and the --check reference routes alike. LOONG_EXEC_MUTATE=route (a test
 * hook) sends every choice to the next expert on the executor only: every
 * expert's gradient must then fail --check.
 */
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"
#include "exec_tasks.h"

/* One expert block's routing, every micro-batch's (the route depends on
 * the block and the token's position only). */
struct ep_route {
    int recv;               /* rows this rank's experts take */
    int32_t *slot, *sel;    /* device, per entry: its slot, its expert */
    int *cnt, *roff;        /* (ep, local): rows from member s for local expert e; their row in disp */
    int *sc, *sd, *rc, *rd; /* per member, floats: the dispatch's counts and displacements */
};

struct xr_ep {
    int k, E, local, ep, me, n; /* n: entries T k */
    int32_t *tok;               /* device, per entry: its token row */
    ep_route *routes;           /* per expert block */
    int nroutes;
    layer_ep *layers; /* mbs x L, used by the expert blocks */
};

/* ---- routing tables ---- */

/* The EP group's members in the order of its communicator (the DAG's
 * group on the ep stream): member i must be EP rank i. */
static int ep_members(const xr *x, int *mem)
{
    if (x->c->ep == 1) {
        mem[0] = x->rank;
        return 0;
    }
    for (uint32_t gid = 0; gid < dag_ngroups(x->g); gid++) {
        int n;
        const int32_t *m = dag_group(x->g, gid, &n);
        bool mine = false;
        for (int i = 0; i < n; i++)
            mine |= m[i] == x->rank;
        if (dag_group_stream(x->g, gid) != STREAM_EP || !mine) continue;
        if (n != x->c->ep) return -1;
        for (int i = 0; i < n; i++) {
            if (config_ep_rank(x->c, m[i]) != i) return -1;
            mem[i] = m[i];
        }
        return 0;
    }
    return -1;
}

/* The experts of every entry of rank r's T rows in block l. */
static void route_rows(const xr *x, int r, int l, bool mutate, int32_t *sel)
{
    int k = x->c->model.top_k, E = x->c->model.experts, *e = xmalloc_array((size_t)k, sizeof *e, "the routing");
    for (int i = 0; i < x->T; i++) {
        config_ep_route(x->c, x->o->seed, l, (uint64_t)xr_seq_pos_of(x, r, i), e);
        for (int j = 0; j < k; j++)
            sel[(size_t)i * (size_t)k + (size_t)j] = mutate ? (e[j] + 1) % E : e[j];
    }
    free(e);
}

/* Slot of every entry (a stable counting sort by expert) and the rows
 * sent to each member. */
static void send_side(const struct xr_ep *t, ep_route *rt, const int32_t *sel, int32_t *slot, int hid)
{
    int *start = xcalloc((size_t)t->E + 1, sizeof *start, "the routing");
    for (int i = 0; i < t->n; i++)
        start[sel[i] + 1]++;
    for (int e = 0; e < t->E; e++)
        start[e + 1] += start[e];
    for (int d = 0; d < t->ep; d++) {
        rt->sc[d] = (start[(d + 1) * t->local] - start[d * t->local]) * hid;
        rt->sd[d] = start[d * t->local] * hid;
    }
    for (int i = 0; i < t->n; i++)
        slot[i] = start[sel[i]]++;
    free(start);
}

/* Rows each member sends this rank in block l, per local expert, from its
 * routing. */
static void recv_side(const xr *x, const struct xr_ep *t, ep_route *rt, int l, const int *mem, bool mutate,
                      int32_t *peer, int hid)
{
    int row = 0;
    for (int s = 0; s < t->ep; s++) {
        route_rows(x, mem[s], l, mutate, peer);
        for (int i = 0; i < t->n; i++)
            if (peer[i] / t->local == t->me) rt->cnt[s * t->local + peer[i] % t->local]++;
        rt->rd[s] = row * hid;
        for (int e = 0; e < t->local; e++) {
            rt->roff[s * t->local + e] = row;
            row += rt->cnt[s * t->local + e];
        }
        rt->rc[s] = row * hid - rt->rd[s];
    }
    rt->recv = row;
}

static float *ep_alloc(xr *x, size_t n, bool *ok)
{
    if (!n) return NULL;
    float *p = x->ops->alloc(x->dev, n * sizeof(float));
    if (!p) *ok = false;
    return p;
}

/* An int32 table on the device: put copies floats, the same 4 bytes. */
static int32_t *put_table(xr *x, const int32_t *host, size_t n, bool *ok)
{
    _Static_assert(sizeof(int32_t) == sizeof(float), "tables travel as floats");
    int32_t *p = (int32_t *)ep_alloc(x, n, ok);
    if (p && x->ops->put(x->dev, p, (const float *)host, n) != DEV_OK) *ok = false;
    return p;
}

/* Block l's routing tables: its entries' experts and slots on the device,
 * the counts of its all-to-alls and grouped GEMMs. scratch: 3 T k ints. */
static void route_block(xr *x, ep_route *rt, int l, const int *mem, bool mutate, int32_t *scratch, bool *ok)
{
    const struct xr_ep *t = x->ept;
    int ep = t->ep, hid = x->c->model.hidden;
    int32_t *sel = scratch, *slot = sel + t->n, *peer = slot + t->n;
    rt->cnt = xcalloc((size_t)ep * (size_t)t->local, sizeof *rt->cnt, "the routing");
    rt->roff = xmalloc_array((size_t)ep * (size_t)t->local, sizeof *rt->roff, "the routing");
    rt->sc = xmalloc_array(4 * (size_t)ep, sizeof *rt->sc, "the routing");
    rt->sd = rt->sc + ep, rt->rc = rt->sd + ep, rt->rd = rt->rc + ep;
    route_rows(x, x->rank, l, mutate, sel);
    send_side(t, rt, sel, slot, hid);
    recv_side(x, t, rt, l, mem, mutate, peer, hid);
    rt->slot = put_table(x, slot, (size_t)t->n, ok);
    rt->sel = put_table(x, sel, (size_t)t->n, ok);
}

/* Block buffers (exec_state.h's layer_ep) of one micro-batch's expert block. */
static void alloc_block(xr *x, layer_ep *b, const ep_route *rt, bool *ok)
{
    const struct xr_ep *t = x->ept;
    size_t T = (size_t)x->T, E = (size_t)t->E, n = (size_t)t->n, r = (size_t)rt->recv;
    size_t hid = (size_t)x->c->model.hidden, fe = (size_t)x->c->model.expert_ffn;
    bool ep = t->ep > 1;
    b->rt = rt;
    b->z = ep_alloc(x, T * E, ok), b->gates = ep_alloc(x, n, ok), b->dz = ep_alloc(x, T * E, ok);
    b->dgs = ep_alloc(x, n, ok);
    b->perm = ep_alloc(x, n * hid, ok), b->disp = ep ? ep_alloc(x, r * hid, ok) : b->perm;
    b->eg = ep_alloc(x, r * fe, ok), b->eu = ep_alloc(x, r * fe, ok), b->em = ep_alloc(x, r * fe, ok);
    b->ey = ep_alloc(x, r * hid, ok), b->comb = ep ? ep_alloc(x, n * hid, ok) : b->ey;
    b->dcomb = ep_alloc(x, n * hid, ok), b->dey = ep ? ep_alloc(x, r * hid, ok) : b->dcomb;
    b->deg = ep_alloc(x, r * fe, ok), b->deu = ep_alloc(x, r * fe, ok), b->dem = ep_alloc(x, r * fe, ok);
    b->ddisp = ep_alloc(x, r * hid, ok), b->dperm = ep ? ep_alloc(x, n * hid, ok) : b->ddisp;
}

int xr_ep_alloc(xr *x, char err[LOONG_ERRLEN])
{
    const model *m = &x->c->model;
    struct xr_ep *t = xcalloc(1, sizeof *t, "the experts' routing");
    x->ept = t;
    const char *mut = getenv("LOONG_EXEC_MUTATE");
    bool mutate = mut && !strcmp(mut, "route"), ok = true;
    *t = (struct xr_ep){.k = m->top_k,
                        .E = m->experts,
                        .local = config_ep_local_experts(x->c),
                        .ep = x->c->ep,
                        .me = config_ep_rank(x->c, x->rank),
                        .n = x->T * m->top_k,
                        .nroutes = model_moe_blocks_below(m, x->L)};
    int *mem = xmalloc_array((size_t)t->ep, sizeof *mem, "the routing");
    int32_t *scratch = xmalloc_array(3 * (size_t)t->n, sizeof *scratch, "the routing");
    t->routes = xcalloc((size_t)t->nroutes, sizeof *t->routes, "the routing");
    t->layers = xcalloc((size_t)x->mbs * (size_t)x->L, sizeof *t->layers, "the routing");
    if (ep_members(x, mem) < 0) {
        snprintf(err, LOONG_ERRLEN, "rank %d: the DAG's EP group is not config_ep_rank's order (a bug)", x->rank);
        free(mem), free(scratch);
        return -1;
    }
    for (int i = 0; i < t->n; i++)
        scratch[i] = i / t->k;
    t->tok = put_table(x, scratch, (size_t)t->n, &ok);
    for (int l = 0, i = 0; ok && l < x->L; l++)
        if (model_block_moe(m, l)) route_block(x, &t->routes[i++], l, mem, mutate, scratch, &ok);
    for (int k = 0; ok && k < x->mbs; k++)
        for (int l = m->dense_layers; ok && l < x->L; l++) {
            if (!model_block_moe(m, l)) continue;
            layer_ep *b = &t->layers[(size_t)k * (size_t)x->L + (size_t)l];
            alloc_block(x, b, &t->routes[model_moe_blocks_below(m, l)], &ok);
            x->ly_all[(size_t)k * ((size_t)x->L + 1) + (size_t)l].ep = b;
        }
    free(mem), free(scratch);
    if (ok) return 0;
    snprintf(err, LOONG_ERRLEN, "rank %d: out of device memory for the experts' buffers: use a smaller --seq or model",
             x->rank);
    return -1;
}

void xr_ep_free(xr *x)
{
    struct xr_ep *t = x->ept;
    if (!t) return; /* device buffers: released with the device */
    for (int i = 0; t->routes && i < t->nroutes; i++)
        free(t->routes[i].cnt), free(t->routes[i].roff), free(t->routes[i].sc);
    free(t->routes), free(t->layers), free(t);
    x->ept = NULL;
}

/* ---- ops ---- */

static void move_rows(emit *e, float *dst, const int32_t *di, const float *src, const int32_t *si, const float *scale,
                      bool add)
{
    dev_op op = op_new(DOP_MOVE_ROWS);
    op.u.rows =
        (__typeof__(op.u.rows)){dst, src, di, si, scale, (size_t)e->x->ept->n, (size_t)e->x->c->model.hidden, add};
    emit_op(e, &op);
}

/* The all-to-all-v of a block: `forward` sends slot-ordered rows to the
 * experts (the dispatch, and the combine's gradient), else back. */
static void alltoallv(emit *e, const layer_ep *b, const float *sbuf, float *rbuf, bool forward)
{
    const ep_route *t = b->rt;
    dev_op op = op_new(DOP_ALLTOALLV);
    op.u.a2av = (__typeof__(op.u.a2av)){
        e->x->comm[STREAM_EP],  sbuf, rbuf, forward ? t->sc : t->rc, forward ? t->sd : t->rd, forward ? t->rc : t->sc,
        forward ? t->rd : t->sd};
    emit_op(e, &op);
}

static void route(emit *e, layer_ep *b, bool backward)
{
    const struct xr_ep *t = e->x->ept;
    dev_op op = op_new(DOP_ROUTE);
    op.u.route = (__typeof__(op.u.route)){backward,    b->z,  b->rt->sel,      b->gates, b->dgs,
                                          b->rt->slot, b->dz, (size_t)e->x->T, t->E,     t->k};
    emit_op(e, &op);
}

static void swiglu(emit *e, layer_ep *b, bool backward)
{
    dev_op op = op_new(DOP_SWIGLU);
    op.u.swiglu = (__typeof__(op.u.swiglu)){
        backward, b->em, b->deg, b->deu, b->eg, b->eu, b->dem, (size_t)b->rt->recv * (size_t)e->x->c->model.expert_ffn};
    emit_op(e, &op);
}

/* ---- the experts' GEMMs, one per (source, local expert) chunk ---- */

/* Local expert le's gate, up and down of a block's weights (or gradients). */
static float *expert_w(const xr *x, float *experts, int le, int which)
{
    size_t hid = (size_t)x->c->model.hidden, fe = (size_t)x->c->model.expert_ffn;
    return experts + (size_t)le * xr_expert_floats(x) + (size_t)which * hid * fe;
}
enum { EW_GATE, EW_UP, EW_DOWN };

static void expert_gemms(emit *e, const dag_task *t, const layer_t *ly, layer_ep *b)
{
    xr *x = e->x;
    const struct xr_ep *r = x->ept;
    int hid = x->c->model.hidden, fe = x->c->model.expert_ffn;
    bool bwd = t->phase == PHASE_BWD;
    for (int c = 0; c < r->ep * r->local; c++) {
        int n = b->rt->cnt[c], le = c % r->local;
        size_t o = (size_t)b->rt->roff[c], oh = o * (size_t)hid, of = o * (size_t)fe;
        if (!n) continue;
        if (t->op == OP_EXPERT_DOWN) {
            float *wd = expert_w(x, ly->w.experts, le, EW_DOWN), *gd = expert_w(x, ly->gw.experts, le, EW_DOWN);
            if (!bwd) {
                gemm(e, 0, 0, n, hid, fe, b->em + of, fe, wd, hid, 0, b->ey + oh, hid);
                continue;
            }
            gemm(e, 0, 1, n, fe, hid, b->dey + oh, hid, wd, hid, 0, b->dem + of, fe);
            gemm(e, 1, 0, fe, hid, n, b->em + of, fe, b->dey + oh, hid, 1, gd, hid);
            continue;
        }
        bool up = t->op == OP_EXPERT_UP;
        float *w = expert_w(x, ly->w.experts, le, up ? EW_UP : EW_GATE);
        float *g = expert_w(x, ly->gw.experts, le, up ? EW_UP : EW_GATE), *d = up ? b->deu : b->deg;
        if (!bwd) {
            gemm(e, 0, 0, n, fe, hid, b->disp + oh, hid, w, fe, 0, (up ? b->eu : b->eg) + of, fe);
            continue;
        }
        /* up's backward first (build_ep.c), so it writes the input gradient and gate's adds */
        gemm(e, 0, 1, n, hid, fe, d + of, fe, w, fe, up ? 0 : 1, b->ddisp + oh, hid);
        gemm(e, 1, 0, hid, fe, n, b->disp + oh, hid, d + of, fe, 1, g, fe);
    }
}

/* ---- the block's tasks ---- */

static void router(emit *e, const dag_task *t, layer_t *ly)
{
    xr *x = e->x;
    int T = x->T, hid = x->c->model.hidden, E = x->ept->E;
    if (t->phase != PHASE_BWD) {
        gemm(e, 0, 0, T, E, hid, ly->h, hid, ly->w.router, E, 0, ly->ep->z, E);
        return;
    }
    gemm(e, 0, 1, T, hid, E, ly->ep->dz, E, ly->w.router, E, 1, ly->dh, hid);
    gemm(e, 1, 0, hid, E, T, ly->h, hid, ly->ep->dz, E, 1, ly->gw.router, E);
}

/* Unpermute: forward, the block output h + the gated experts' outputs
 * (the shared experts add theirs after); backward, the gradient of the
 * rows sent, gated, and of the gates (slot order). */
static void unpermute(emit *e, const dag_task *t, layer_t *ly, layer_t *next)
{
    xr *x = e->x;
    const struct xr_ep *r = x->ept;
    layer_ep *b = ly->ep;
    size_t hid = (size_t)x->c->model.hidden, T = (size_t)x->T;
    if (t->phase != PHASE_BWD) {
        copy2d(e, next->x, hid, ly->h, hid, T, hid);
        move_rows(e, next->x, r->tok, b->comb, b->rt->slot, b->gates, true);
        return;
    }
    if (!ly->ffn) copy2d(e, ly->dh, hid, next->dx, hid, T, hid); /* else the shared experts' down did */
    move_rows(e, b->dcomb, b->rt->slot, next->dx, r->tok, NULL, false);
    dev_op op = op_new(DOP_ROWDOT);
    op.u.rowdot = (__typeof__(op.u.rowdot)){b->dgs, b->dcomb, b->comb, (size_t)r->n, hid, 1, hid, hid};
    emit_op(e, &op);
    move_rows(e, b->dcomb, b->rt->slot, next->dx, r->tok, b->gates, false);
}

/* The experts' gradients over the expert-data-parallel group (the ep_grad
 * stream), per block or (layer -1) all blocks' at once, like exec_grad.c's. */
static void grad_collective(emit *e, const dag_task *t)
{
    xr *x = e->x;
    dev_op op = op_new(t->kind == TASK_ALLREDUCE       ? DOP_ALLREDUCE
                       : t->kind == TASK_REDUCESCATTER ? DOP_REDUCESCATTER
                                                       : DOP_ALLGATHER);
    bool params = t->op == OP_PARAM_ALLGATHER;
    float *buf = t->layer < 0 ? (params ? x->ebuf : x->egbuf)
                              : (params ? x->ly[t->layer].w.experts : x->ly[t->layer].gw.experts);
    size_t n = t->layer < 0 ? x->ecount : (size_t)x->ept->local * xr_expert_floats(x);
    op.u.coll = (__typeof__(op.u.coll)){x->comm[STREAM_EP_GRAD], buf, buf, n};
    emit_op(e, &op);
}

bool xt_ep_owns(const dag_task *t)
{
    switch (t->op) {
    case OP_ROUTER:
    case OP_ROUTE:
    case OP_PERMUTE:
    case OP_UNPERMUTE:
    case OP_EP_DISPATCH:
    case OP_EP_COMBINE:
    case OP_EXPERT_GATE:
    case OP_EXPERT_UP:
    case OP_EXPERT_DOWN:
    case OP_EXPERT_ACT: return true;
    default: return t->stream == STREAM_EP_GRAD;
    }
}

void xt_ep_task(emit *e, const dag_task *t)
{
    xr *x = e->x;
    if (t->stream == STREAM_EP_GRAD) {
        grad_collective(e, t);
        return;
    }
    layer_t *ly = &x->ly[t->layer];
    layer_ep *b = ly->ep;
    const struct xr_ep *r = x->ept;
    bool bwd = t->phase == PHASE_BWD;
    switch (t->op) {
    case OP_ROUTER: router(e, t, ly); break;
    case OP_ROUTE: route(e, b, bwd); break;
    case OP_PERMUTE:
        if (!bwd)
            move_rows(e, b->perm, b->rt->slot, ly->h, r->tok, NULL, false);
        else
            move_rows(e, ly->dh, r->tok, b->dperm, b->rt->slot, NULL, true);
        break;
    case OP_EP_DISPATCH: /* forward: the rows out; backward: their gradient back */
        alltoallv(e, b, bwd ? b->ddisp : b->perm, bwd ? b->dperm : b->disp, !bwd);
        break;
    case OP_EP_COMBINE: /* forward: the outputs back; backward: their gradient out */
        alltoallv(e, b, bwd ? b->dcomb : b->ey, bwd ? b->dey : b->comb, bwd);
        break;
    case OP_EXPERT_ACT: swiglu(e, b, bwd); break;
    case OP_UNPERMUTE: unpermute(e, t, ly, &x->ly[t->layer + 1]); break;
    default: expert_gemms(e, t, ly, b); break;
    }
}

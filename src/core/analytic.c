/* analytic: fast step-time model of the planner. See analytic.h. */
#include "analytic.h"

#include <math.h>

#include "model.h"

static double maxd(double a, double b) { return a > b ? a : b; }
static int mod(int a, int n) { return ((a % n) + n) % n; }

/* ---- links ---- */

typedef struct link {
    double lat, bw;
    bool nic; /* crosses nodes */
} link;

static int rail_of(const analytic_net *n, int gpu) { return gpu / (n->gpus_per_node / n->nics_per_node); }

/* The path between GPUs a and b (platform GPU indices) for one flow that
 * has the NIC to itself. */
static link link_between(const analytic_net *n, int a, int b)
{
    int gpn = n->gpus_per_node, na = a / gpn, nb = b / gpn;
    if (na == nb) return (link){2 * n->nvlink_lat, n->nvlink_bw, false};
    bool spine = rail_of(n, a % gpn) != rail_of(n, b % gpn) || na / n->nodes_per_leaf != nb / n->nodes_per_leaf;
    double bw = n->nic_bw / (spine ? n->oversub : 1);
    return (link){2 * n->nic_lat + (spine ? 2 * n->uplink_lat : 0), bw, true};
}

/* Divide a NIC link's bandwidth among `share` concurrent flows. */
static link shared(link l, int share)
{
    if (l.nic && share > 1) l.bw /= share;
    return l;
}

/* GPUs (ranks < P) on the NIC of rank r, r included. */
static int nic_mates(const analytic_net *n, int r, int P, int *mates)
{
    int gpn = n->gpus_per_node, per = gpn / n->nics_per_node, first = r - r % gpn + rail_of(n, r % gpn) * per, k = 0;
    for (int q = first; q < first + per && q < P; q++)
        mates[k++] = q;
    return k;
}

/* Seconds for one flow of `bytes` on l. */
static double flow(const link *l, double bytes) { return bytes > 0 ? l->lat + bytes / l->bw : 0; }

/* ---- the ring ---- */

typedef struct ring_links {
    link in, out; /* slowest inner hop and outer hop of the ring */
    bool shared;  /* inner and outer use the same kind of link */
} ring_links;

/* The slowest inner and outer hop of head group 0's ring for a transfer of
 * `bytes` (every head group's ring has the same shape). */
/* Successor of rank r on the inner (outer = false) or outer ring. */
static int ring_next(const config *c, int r, bool outer)
{
    int h, s, w = c->window;
    config_coords(c, r, &h, &s);
    int p = s % w;
    return config_rank_of(c, h, outer ? mod(s + w, c->p_seq) : s - p + (p + 1) % w);
}

/* Rank r's hop on one ring, its NIC shared with the NIC mates whose hop on
 * that ring leaves the node too (all rings step at once). */
static link ring_hop(const config *c, const analytic_net *n, int r, bool outer)
{
    link l = link_between(n, r, ring_next(c, r, outer));
    if (!l.nic) return l;
    int mates[64], k = nic_mates(n, r, config_ranks(c), mates), share = 0;
    for (int i = 0; i < k && i < 64; i++)
        share += link_between(n, mates[i], ring_next(c, mates[i], outer)).nic;
    return shared(l, share);
}

static ring_links ring_links_of(const config *c, const analytic_net *n, double bytes)
{
    int P_s = c->p_seq, r0 = config_rank_of(c, 0, 0);
    ring_links rl = {link_between(n, r0, r0), link_between(n, r0, r0), false};
    double tin = -1, tout = -1;
    for (int s = 0; s < P_s; s++) {
        int r = config_rank_of(c, 0, s);
        link a = ring_hop(c, n, r, false), b = ring_hop(c, n, r, true);
        if (flow(&a, bytes) > tin) {
            rl.in = a;
            tin = flow(&a, bytes);
        }
        if (flow(&b, bytes) > tout) {
            rl.out = b;
            tout = flow(&b, bytes);
        }
    }
    rl.shared = rl.in.nic == rl.out.nic;
    return rl;
}

typedef struct lane_blocks {
    double pairs2; /* work in half chunk-by-chunk blocks */
    int q_chunks;
} lane_blocks;

/* ring.c's block_of: this ring index's queries against part set kv_parts
 * of src's KV. */
static lane_blocks block_of(const config *c, int s, int src, unsigned kv_parts)
{
    lane_blocks bl = {0, 0};
    int parts = config_parts(c);
    unsigned qsel = 0;
    for (int a = 0; a < parts; a++) {
        int qc = config_chunk_of(c, s, a);
        for (int k = 0; k < parts; k++) {
            if (!(kv_parts >> k & 1)) continue;
            int kc = config_chunk_of(c, src, k);
            if (kc > qc) continue;
            qsel |= 1u << a;
            bl.pairs2 += kc == qc ? 1 : 2;
        }
    }
    bl.q_chunks = (int)(qsel & 1) + (int)(qsel >> 1 & 1);
    return bl;
}

typedef struct ringctx {
    const config *c;
    const calib *cb;
    int lanes;
    unsigned lane_parts[2];
    double chunk, blk_unit; /* tokens per chunk; FLOPs of one half block */
    double merge_per_tok;   /* merge bytes per query token */
    double acc_s;           /* one dK/dV accumulation */
    double x_in, x_out;     /* forward KV hop times */
    double xb_in, xb_out;   /* backward KV + dKV hop times (shared link) */
} ringctx;

/* Compute seconds of step (s, src) forward (merges after the layer's first
 * block) or backward; *nonempty tells whether any block ran. */
static double step_compute(const ringctx *r, int s, int src, bool bwd, bool *first, bool *nonempty)
{
    double t = 0;
    *nonempty = false;
    for (int k = 0; k < r->lanes; k++) {
        lane_blocks bl = block_of(r->c, s, src, r->lane_parts[k]);
        if (!bl.pairs2) continue;
        *nonempty = true;
        double tok = bl.q_chunks * r->chunk, fl = bl.pairs2 * r->blk_unit;
        if (bwd) {
            t += calib_seconds(r->cb, TASK_ATTN_BWD, fl * 5 / 2, 0, tok);
            continue;
        }
        t += calib_seconds(r->cb, TASK_ATTN_FWD, fl, 0, tok);
        if (!*first) t += calib_seconds(r->cb, TASK_MERGE, 0, tok * r->merge_per_tok, tok);
        *first = false;
    }
    return t;
}

static int src_at(const config *c, int s, int o, int i)
{
    int w = c->window, p = s % w;
    return mod(s - p + mod(p - i, w) - o * w, c->p_seq);
}

/* Forward ring of ring index s: seconds from its start to its last block,
 * and the compute-stream part of it in *busy. */
static double ring_fwd(const ringctx *r, int s, double *busy)
{
    const config *c = r->c;
    int w = c->window, nw = c->p_seq / w;
    double comp = 0, enter = 0, outer_free = 0;
    bool first = true, ne;
    *busy = 0;
    for (int o = 0; o < nw; o++) {
        double next_enter = enter;
        if (o < nw - 1) next_enter = outer_free = maxd(enter, outer_free) + r->x_out;
        double cur = enter, xfree = 0;
        for (int i = 0; i < w; i++) {
            double start = maxd(comp, cur);
            if (i < w - 1) cur = xfree = maxd(start, xfree) + r->x_in;
            double b = step_compute(r, s, src_at(c, s, o, i), false, &first, &ne);
            comp = start + b;
            *busy += b;
        }
        enter = next_enter;
    }
    return comp;
}

/* Backward ring of ring index s, with the travelling dK/dV: seconds until
 * dQ and the final dK/dV are both on this rank. */
static double ring_bwd(const ringctx *r, int s, double *busy)
{
    const config *c = r->c;
    int w = c->window, nw = c->p_seq / w;
    double comp = 0, enter = 0, outer_free = 0, od_free = 0, final = 0;
    bool first = false, ne;
    *busy = 0;
    for (int o = 0; o < nw; o++) {
        double next_enter = enter;
        if (o < nw - 1) next_enter = outer_free = maxd(enter, outer_free) + r->xb_out;
        double cur = enter, xfree = 0, dfree = 0;
        for (int i = 0; i < w; i++) {
            double start = maxd(comp, cur);
            if (i < w - 1) cur = xfree = maxd(start, xfree) + r->xb_in;
            double b = step_compute(r, s, src_at(c, s, o, i), true, &first, &ne);
            comp = start + b;
            *busy += b;
            if (w == 1) continue;
            if (i > 0 && ne) { /* add the block into the accumulator that arrived */
                comp = maxd(comp, dfree) + r->acc_s;
                *busy += r->acc_s;
            }
            dfree = maxd(comp, dfree) + r->xb_in;
        }
        double wpart = w > 1 ? dfree : comp;
        if (nw == 1) {
            final = wpart;
            continue;
        }
        double ready = wpart;
        if (o > 0) { /* the window's partial joins the sum from the previous window */
            comp = maxd(maxd(comp, wpart), od_free) + r->acc_s;
            *busy += r->acc_s;
            ready = comp;
        }
        final = od_free = maxd(ready, od_free) + r->xb_out;
        enter = next_enter;
    }
    return maxd(comp, final);
}

static void ring_setup(ringctx *r, const config *c, const calib *cb, const analytic_net *n)
{
    const model *m = &c->model;
    double B = c->batch, d = m->head_dim, kvh = config_kv_heads(c), a = c->act_bytes;
    r->c = c;
    r->cb = cb;
    r->lanes = c->ring == RING_DUAL ? 2 : 1;
    r->lane_parts[0] = r->lanes == 2 ? 1 : (config_parts(c) == 2 ? 3 : 1);
    r->lane_parts[1] = 2;
    r->chunk = (double)config_chunk_tokens(c);
    r->blk_unit = 2 * r->chunk * r->chunk * d * config_q_heads(c) * B;
    r->merge_per_tok = config_q_heads(c) * d * B * (8 + a);
    double lane_tok = config_parts(c) * r->chunk / r->lanes;
    r->acc_s = r->lanes * calib_seconds(cb, TASK_ACC, 0, 12 * 2 * lane_tok * kvh * d * B, lane_tok);
    double kv = 2 * (double)c->seq / c->p_seq * kvh * d * a * B, dkv = kv / a * 4;
    ring_links rl = ring_links_of(c, n, kv);
    int w = c->window, nw = c->p_seq / w;
    /* fluid sharing: when the outer transfer shares the inner hops' kind of
     * link, its bytes are spread over the window's w-1 inner transfers */
    double spread = rl.shared && w > 1 && nw > 1 ? 1.0 / (w - 1) : 0;
    r->x_in = flow(&rl.in, kv + spread * kv);
    r->xb_in = flow(&rl.in, (kv + dkv) * (1 + spread));
    r->x_out = w > 1 && spread > 0 ? (w - 1) * r->x_in : flow(&rl.out, kv);
    r->xb_out = w > 1 && spread > 0 ? (w - 1) * r->xb_in : flow(&rl.out, kv + dkv);
}

/* ---- collectives ---- */

/* Head all-to-all of `bytes` sent per rank (spread over the other P_h-1). */
static double alltoall(const config *c, const analytic_net *n, double bytes)
{
    int ph = c->p_head;
    if (ph == 1 || bytes <= 0) return 0;
    double chunk = bytes / (ph - 1), worst = 0;
    int r0 = config_rank_of(c, 0, 0), mates[64];
    int share = nic_mates(n, r0, config_ranks(c), mates); /* every head group exchanges at once */
    double nv = 0, nic = 0, lat = 0;
    for (int h = 1; h < ph; h++) {
        link l = shared(link_between(n, r0, config_rank_of(c, h, 0)), share);
        lat = maxd(lat, l.lat);
        if (l.nic)
            nic += chunk / l.bw;
        else
            nv += chunk / l.bw;
    }
    worst = lat + maxd(nv, nic);
    return worst;
}

/* One pipelined ring collective over ranks 0..N-1 in order: every member
 * sends `bytes` to its successor at once; the slowest hop decides. */
static double dp_ring(const analytic_net *n, int N, double bytes)
{
    if (N <= 1) return 0;
    link worst = link_between(n, 0, 1 % N);
    for (int r = 0; r < N; r += n->gpus_per_node) { /* hops leaving each node */
        link l = link_between(n, r + n->gpus_per_node - 1 < N ? r + n->gpus_per_node - 1 : N - 1,
                              (r + n->gpus_per_node) % N);
        if (l.lat + bytes / l.bw > worst.lat + bytes / worst.bw) worst = l;
    }
    return flow(&worst, bytes);
}

typedef struct dpcost {
    double ar_layer, rs_layer, ag_layer, ar_head, rs_head, ag_head, rs_all, ag_all;
} dpcost;

static dpcost dp_costs(const config *c, const analytic_net *n, int dp)
{
    int N = dp * config_ranks(c);
    double a = c->act_bytes, f = (double)(N - 1);
    double lp = (double)model_layer_params(&c->model), all = (double)model_params(&c->model);
    double hp = 2.0 * c->model.vocab * c->model.hidden + c->model.hidden;
#define CH(x) (ceil((x)*a / N))
    dpcost k = {dp_ring(n, N, 2 * f * CH(lp)), dp_ring(n, N, f * CH(lp)), dp_ring(n, N, f * CH(lp)),
                dp_ring(n, N, 2 * f * CH(hp)), dp_ring(n, N, f * CH(hp)), dp_ring(n, N, f * CH(hp)),
                dp_ring(n, N, f * CH(all)),    dp_ring(n, N, f * CH(all))};
#undef CH
    return k;
}

/* ---- the step ---- */

typedef struct layer_cost {
    double fwd, bwd;           /* critical path of one layer, seconds */
    double fwd_busy, bwd_busy; /* compute-stream part */
    double a2a, ring_wait;
} layer_cost;

static double gemm(const calib *cb, double m, double n, double k, bool bwd)
{
    return calib_seconds(cb, TASK_GEMM, (bwd ? 4 : 2) * m * n * k, 0, m);
}

static double gemms(const config *c, const calib *cb, bool bwd)
{
    const model *m = &c->model;
    double T = (double)config_local_tokens(c), hid = m->hidden, d = m->head_dim, ffn = m->ffn;
    return gemm(cb, T, (m->heads + 2.0 * m->kv_heads) * d, hid, bwd) + gemm(cb, T, hid, (double)m->heads * d, bwd) +
           2 * gemm(cb, T, ffn, hid, bwd) + gemm(cb, T, hid, ffn, bwd);
}

static layer_cost layer_cost_of(const config *c, const calib *cb, const analytic_net *n, const ringctx *r, int s)
{
    const model *m = &c->model;
    double T = (double)config_local_tokens(c), d = m->head_dim, ph = c->p_head, a = c->act_bytes;
    double kvt = m->kv_heads > c->p_head ? m->kv_heads : c->p_head;
    double per_head = T * d * a / ph * (ph - 1);
    double a_qkv = alltoall(c, n, per_head * (m->heads + 2 * kvt)), a_o = alltoall(c, n, per_head * m->heads);
    double gf = gemms(c, cb, false), gb = gemms(c, cb, true);
    double fb, bb;
    double rf = ring_fwd(r, s, &fb), rb = ring_bwd(r, s, &bb);
    double rep = 0;
    if (config_kv_repl(c) > 1) rep = calib_seconds(cb, TASK_ACC, 0, 12 * T * 2 * (c->p_head - m->kv_heads) * d, T);
    layer_cost lc;
    lc.fwd = gf + a_qkv + rf + a_o; /* QKV all-to-all, ring, O all-to-all */
    lc.fwd_busy = gf + fb;
    double re = 0, re_busy = 0;
    if (c->recompute != RECOMPUTE_NONE) {
        bool full = c->recompute == RECOMPUTE_FULL;
        re = gf + a_qkv + a_o + (full ? rf : 0);
        re_busy = gf + (full ? fb : 0);
    }
    lc.bwd = re + gb + a_o /* dO */ + rb + a_qkv /* dQKV */ + rep;
    lc.bwd_busy = re_busy + gb + bb + rep;
    lc.a2a = 2 * (a_qkv + a_o) + (c->recompute != RECOMPUTE_NONE ? a_qkv + a_o : 0);
    lc.ring_wait = (rf - fb) + (rb - bb) + (c->recompute == RECOMPUTE_FULL ? rf - fb : 0);
    return lc;
}

/* Ring indices to evaluate: all of them, or an even sample plus the last
 * (the contiguous partition's busiest) for long rings. */
static int next_s(int s, int P_s)
{
    if (P_s <= 64) return s + 1;
    int step = P_s / 16;
    if (s == P_s - 1) return P_s;
    return s + step < P_s ? s + step : P_s - 1;
}

/* Walk the step: compute stream and dp stream in DAG program order. */
static void step_walk(const config *c, const calib *cb, const dpcost *k, const layer_cost *lc, analytic_result *out)
{
    const model *m = &c->model;
    int L = m->layers, z = c->zero;
    double T = (double)config_local_tokens(c);
    double lm = gemm(cb, T, m->vocab, m->hidden, false) + gemm(cb, T, m->vocab, m->hidden, true);
    double t = 0, dp = 0, busy = 0;
    for (int l = 0; l < L; l++) {
        if (z == 3) t = maxd(t, dp += k->ag_layer);
        t += lc->fwd;
        busy += lc->fwd_busy;
    }
    if (z == 3) t = maxd(t, dp += k->ag_head);
    t += lm;
    busy += lm;
    if (z == 0) dp = maxd(dp, t) + k->ar_head;
    if (z >= 2) dp = maxd(dp, t) + k->rs_head;
    for (int l = 0; l < L; l++) {
        if (z == 3) t = maxd(t, dp += k->ag_layer);
        t += lc->bwd;
        busy += lc->bwd_busy;
        if (z == 0) dp = maxd(dp, t) + k->ar_layer;
        if (z >= 2) dp = maxd(dp, t) + k->rs_layer;
    }
    if (z == 1) dp = maxd(dp, t) + k->rs_all;
    if (z == 1 || z == 2) dp = maxd(dp, t) + k->ag_all;
    out->step = maxd(t, dp);
    out->busy = busy;
    out->exposed = out->step - busy;
    out->a2a = L * lc->a2a;
    out->ring_wait = L * lc->ring_wait;
    out->dp_tail = out->step - t;
}

void analytic_step(const config *c, const calib *cb, const analytic_net *n, int dp, analytic_result *out)
{
    ringctx r;
    ring_setup(&r, c, cb, n);
    layer_cost worst = {0};
    int ws = 0;
    for (int s = 0; s < c->p_seq; s = next_s(s, c->p_seq)) {
        layer_cost lc = layer_cost_of(c, cb, n, &r, s);
        if (lc.fwd + lc.bwd > worst.fwd + worst.bwd) {
            worst = lc;
            ws = s;
        }
    }
    dpcost k = dp_costs(c, n, dp);
    step_walk(c, cb, &k, &worst, out);
    out->worst_s = ws;
}

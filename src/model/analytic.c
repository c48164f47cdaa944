/* analytic: fast step-time model of the planner. See analytic.h. */
#include "analytic.h"

#include "tiles.h"

#include <math.h>
#include <stdlib.h>

#include "core/elementwise.h"
#include "core/unfused.h"
#include "core/model.h"
#include "core/pipeline.h"
#include "core/recompute.h"
#include "core/ringgeo.h"
#include "core/sizes.h"
#include "core/xalloc.h"
#include "nccl.h"

static double maxd(double a, double b) { return a > b ? a : b; }
static double mind(double a, double b) { return a < b ? a : b; }

/* ---- links ---- */

typedef struct link {
    double lat, bw;
    bool nic; /* crosses nodes */
} link;

static int rail_of(const platform_spec *n, int gpu) { return gpu / (n->gpus_per_node / n->nics_per_node); }

/* The path between GPUs a and b (platform GPU indices) for one flow that
 * has the NIC to itself. */
static link link_between(const platform_spec *n, int a, int b)
{
    int gpn = n->gpus_per_node, na = a / gpn, nb = b / gpn;
    if (na == nb) return (link){2 * n->nvlink_lat, n->nvlink_bw, false};
    bool spine = rail_of(n, a % gpn) != rail_of(n, b % gpn) || na / n->nodes_per_leaf != nb / n->nodes_per_leaf;
    int pod = platform_spec_pod_nodes(n);
    bool core = spine && pod && na / pod != nb / pod; /* a rail fabric of three tiers */
    double bw = n->nic_bw / (spine ? n->oversub : 1) / (core ? n->spine_oversub : 1);
    return (link){2 * n->nic_lat + (spine ? 2 * n->uplink_lat : 0) + (core ? 2 * n->uplink_lat : 0), bw, true};
}

/* Divide a NIC link's bandwidth among `share` concurrent flows. */
static link shared(link l, int share)
{
    if (l.nic && share > 1) l.bw /= share;
    return l;
}

/* GPUs (ranks < P) on the NIC of rank r, r included. */
static int nic_mates(const platform_spec *n, int r, int P, int *mates)
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

/* Successor of rank r on the inner (outer = false) or outer ring. */
static int ring_next(const config *c, int r, bool outer)
{
    int h, s;
    config_coords(c, r, &h, &s);
    return config_rank_of(c, h, ringgeo_next(c, s, outer));
}

/* Rank r's hop on one ring, its NIC shared with the NIC mates whose hop on
 * that ring leaves the node too (all rings step at once). */
static link ring_hop(const config *c, const platform_spec *n, int r, bool outer)
{
    link l = link_between(n, r, ring_next(c, r, outer));
    if (!l.nic) return l;
    int mates[64], k = nic_mates(n, r, config_ranks(c), mates), share = 0;
    for (int i = 0; i < k && i < 64; i++)
        share += link_between(n, mates[i], ring_next(c, mates[i], outer)).nic;
    return shared(l, share);
}

/* The slowest inner and outer hop of head group 0's ring for a transfer of
 * `bytes` (every head group's ring has the same shape). */
static ring_links ring_links_of(const config *c, const platform_spec *n, double bytes)
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

/* A kernel of b seconds alone, with a communication kernel of x seconds
 * beside it from its start, slowed by interference f while they overlap
 * (calib.h: it progresses at 1/(1+f) of its rate meanwhile). */
static double overlapped(double b, double x, double f)
{
    if (f <= 0 || x <= 0) return b;
    return x >= b * (1 + f) ? b * (1 + f) : b + x * f / (1 + f);
}

typedef struct ringctx {
    const config *c;
    const calib *cb;
    double f_fwd, f_bwd; /* interference of attention kernels with the ring's transfers */
    int lanes;
    unsigned lane_parts[2];
    double chunk;         /* tokens per chunk */
    double acc_s;         /* one dK/dV accumulation */
    double x_in, x_out;   /* forward KV hop times */
    double xb_in, xb_out; /* backward KV + dKV hop times (shared link) */
    double xd_out;        /* a window's dK/dV partial to the next window (outer ring) */
    double nic_bwd;       /* seconds of one layer's backward the ring keeps a NIC busy */
    int groups;           /* --ring allgather: KV-head groups, gathered one after another */
    double ag_s, rs_s;    /* one group's KV all-gather and fp32 dK/dV reduce-scatter */
    tiles *tiles;         /* attention work at the kernels' tile granularity (NULL: exact pairs) */
} ringctx;

/* --attention unfused: a block's batched GEMMs and its scores' kernels
 * (core/unfused.h), as the DAG's tasks are timed. */
static double unfused_block_seconds(const config *c, const calib *cb, uint64_t q, uint64_t kv, uint64_t heads, bool bwd)
{
    task_phase ph = bwd ? PHASE_BWD : PHASE_FWD;
    uint64_t e = unfused_scores(c, q, kv, heads);
    double t = calib_unfused_attn_seconds(cb, c, (double)q, (double)kv, (double)heads, bwd) +
               calib_elementwise_seconds(cb, c, OP_SOFTMAX, ph, e);
    return c->attention_dropout > 0 ? t + calib_elementwise_seconds(cb, c, OP_ATTN_DROPOUT, ph, e) : t;
}

/* Compute seconds of step (s, src) forward (merges after the layer's first
 * block) or backward; *nonempty tells whether any block ran. */
static double step_compute(const ringctx *r, int s, int src, bool bwd, bool *first, bool *nonempty)
{
    double t = 0;
    *nonempty = false;
    for (int k = 0; k < r->lanes; k++) {
        ringgeo_block bl = ringgeo_block_of(r->c, s, src, r->lane_parts[k]);
        if (!bl.pairs) continue;
        *nonempty = true;
        uint64_t q_tok = (uint64_t)ringgeo_count(bl.q_sel) * config_chunk_tokens(r->c);
        uint64_t fl = size_attn_fwd_flops(r->c, bl.pairs);
        double tok = (double)q_tok;
        if (r->c->attention == ATTN_UNFUSED) {
            uint64_t kv = (uint64_t)ringgeo_count(bl.kv_sel) * config_chunk_tokens(r->c);
            t += unfused_block_seconds(r->c, r->cb, q_tok, kv, (uint64_t)config_q_heads(r->c), bwd);
        } else if (bwd) {
            double k = tiles_ratio(r->tiles, TASK_ATTN_BWD, s, src, bl.q_sel, bl.kv_sel);
            t += calib_seconds(r->cb, TASK_ATTN_BWD, (double)size_attn_bwd_flops(fl) * k, 0, tok);
        } else {
            double k = tiles_ratio(r->tiles, TASK_ATTN_FWD, s, src, bl.q_sel, bl.kv_sel);
            t += calib_seconds(r->cb, TASK_ATTN_FWD, (double)fl * k, 0, tok);
        }
        if (bwd) continue;
        if (!*first) t += calib_seconds(r->cb, TASK_MERGE, 0, (double)size_merge_hbm_bytes(r->c, q_tok), tok);
        *first = false;
    }
    return t;
}

/* Forward ring of ring index s: seconds from its start to its last block,
 * and the compute-stream part of it in *busy. */
static double ring_fwd(const ringctx *r, int s, double *busy)
{
    const config *c = r->c;
    int w = c->window, nw = ringgeo_windows(c);
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
            double b = step_compute(r, s, ringgeo_src_at(c, s, o, i), false, &first, &ne);
            b = overlapped(b, i < w - 1 ? xfree - start : 0, r->f_fwd);
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
    int w = c->window, nw = ringgeo_windows(c);
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
            double b = step_compute(r, s, ringgeo_src_at(c, s, o, i), true, &first, &ne);
            b = overlapped(b, i < w - 1 ? xfree - start : 0, r->f_bwd);
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
        final = od_free = maxd(ready, od_free) + r->xd_out;
        enter = next_enter;
    }
    return maxd(comp, final);
}

/* ---- the all-gather (--ring allgather, core/allgather.c) ---- */

/* One group's attention on ring index s (all its queries, every key). */
static double gather_block(const ringctx *r, int s, bool bwd)
{
    uint64_t fl = size_attn_fwd_flops(r->c, ringgeo_query_pairs(r->c, s)) / (uint64_t)r->groups;
    double tok = (double)(r->c->seq / (uint64_t)r->c->p_seq);
    if (!fl) return 0;
    if (r->c->attention == ATTN_UNFUSED)
        return unfused_block_seconds(r->c, r->cb, r->c->seq / (uint64_t)r->c->p_seq, r->c->seq,
                                     (uint64_t)(config_q_heads(r->c) / r->groups), bwd);
    unsigned all = ringgeo_parts(r->c);
    double k = tiles_ratio(r->tiles, bwd ? TASK_ATTN_BWD : TASK_ATTN_FWD, s, -1, all, all);
    return bwd ? calib_seconds(r->cb, TASK_ATTN_BWD, (double)size_attn_bwd_flops(fl) * k, 0, tok)
               : calib_seconds(r->cb, TASK_ATTN_FWD, (double)fl * k, 0, tok);
}

/* Gathers run back to back on their stream, group g's into the slot that
 * group g-2's block has finished with; each block waits for its gather. In
 * the backward each block's dK/dV is reduce-scattered on a third stream
 * before block g+2 reuses its buffer. */
static double gather_pass(const ringctx *r, int s, bool bwd, double *busy)
{
    double a = gather_block(r, s, bwd), comp = 0, gfree = 0, rfree = 0;
    double done[2] = {0, 0}, reduced[2] = {0, 0};
    for (int g = 0; g < r->groups; g++) {
        gfree = maxd(gfree, done[g % 2]) + r->ag_s;
        comp = maxd(maxd(comp, gfree), bwd ? reduced[g % 2] : 0) + a;
        done[g % 2] = comp;
        if (bwd) reduced[g % 2] = rfree = maxd(rfree, comp) + r->rs_s;
    }
    *busy = r->groups * a;
    return maxd(comp, rfree);
}

static void gather_setup(ringctx *r, const config *c, const platform_spec *n)
{
    int P_s = c->p_seq, kvh = config_kv_heads(c);
    r->groups = c->kv_stride ? kvh / c->kv_stride : 1;
    /* a ring collective: P_s - 1 steps of one member's part over the slowest hop */
    double elems = (double)size_kv_elems(c, c->seq) / r->groups, part = elems / P_s;
    ring_links rl = ring_links_of(c, n, part * c->act_bytes);
    r->ag_s = P_s > 1 ? (P_s - 1) * flow(&rl.in, part * c->act_bytes) : 0;
    r->rs_s = P_s > 1 ? (P_s - 1) * flow(&rl.in, part * 4) : 0;
}

static void ring_setup(ringctx *r, const config *c, const calib *cb, const platform_spec *n)
{
    r->c = c;
    r->cb = cb;
    r->tiles = tiles_new(cb, c);
    r->f_fwd = calib_interference(cb, TASK_ATTN_FWD);
    r->f_bwd = calib_interference(cb, TASK_ATTN_BWD);
    r->lanes = ringgeo_lanes(c);
    r->lane_parts[0] = ringgeo_lane_parts(c, 0);
    r->lane_parts[1] = ringgeo_lane_parts(c, 1);
    r->chunk = (double)config_chunk_tokens(c);
    uint64_t lane_tok = ringgeo_lane_tokens(c, 0), rank_tok = c->seq / (uint64_t)c->p_seq;
    r->acc_s = r->lanes *
               calib_seconds(cb, TASK_ACC, 0, (double)size_acc_hbm_bytes(size_kv_elems(c, lane_tok)), (double)lane_tok);
    /* the dual ring's two lanes move together: one transfer of the rank's KV */
    double kv = (double)size_kv_bytes(c, rank_tok, c->act_bytes), dkv = (double)size_kv_bytes(c, rank_tok, 4);
    ring_links rl = ring_links_of(c, n, kv);
    int w = c->window, nw = ringgeo_windows(c);
    /* fluid sharing: when the outer transfer shares the inner hops' kind of
     * link, its bytes are spread over the window's w-1 inner transfers */
    double spread = rl.shared && w > 1 && nw > 1 ? 1.0 / (w - 1) : 0;
    r->x_in = flow(&rl.in, kv + spread * kv);
    r->xb_in = flow(&rl.in, (kv + dkv) * (1 + spread));
    r->x_out = w > 1 && spread > 0 ? (w - 1) * r->x_in : flow(&rl.out, kv);
    r->xb_out = w > 1 && spread > 0 ? (w - 1) * r->xb_in : flow(&rl.out, kv + dkv);
    /* the partial is dK/dV alone, on its own stream, sent once its window is
     * done (ring.c outer_dkv): not the KV hop's bytes spread over a window
     * (on llama3-8b 512K 8x16 w=4, 4 NICs per 8 GPUs, that read 5.9 % over
     * SimGrid; 1.1 % this way). All-outer (w = 1), KV and dK/dV share
     * every hop, as the inner ones do. */
    r->xd_out = w > 1 ? flow(&rl.out, dkv) : r->xb_out;
    r->nic_bwd = (rl.in.nic ? 2.0 * (w - 1) * nw * r->xb_in : 0) + (rl.out.nic ? (nw - 1) * r->xb_out : 0);
    if (c->ring == RING_ALLGATHER) gather_setup(r, c, n);
}

/* ---- collectives ---- */

/* NCCL's time for collective op of `size` (nccl-tests' size) over group g
 * (model/nccl.h), with the config's forced algorithm and protocol. */
static double nccl_seconds(const config *c, const platform_spec *n, const nccl_group *g, coll_op op, double size)
{
    nccl_plan p;
    nccl_plan_lenient(n, g, op, size, (int)c->nccl_algo - 1, (int)c->nccl_proto - 1, &p);
    return p.seconds;
}

/* Head group 0's all-to-all as NCCL runs it; every head group exchanges at
 * once, so a NIC is shared by all the ranks behind it. */
static double nccl_alltoall(const config *c, const platform_spec *n, double bytes)
{
    int ph = c->p_head, *ranks = xmalloc_array((size_t)ph, sizeof *ranks, "a head group");
    for (int h = 0; h < ph; h++)
        ranks[h] = config_rank_of(c, h, 0);
    nccl_group g;
    double t = 0;
    if (nccl_group_init(&g, n, ranks, ph) == 0) {
        int mates[64], share = nic_mates(n, ranks[0], config_ranks(c), mates);
        if (g.nnodes > 1 && share > g.per_nic) g.per_nic = share;
        t = nccl_seconds(c, n, &g, COLL_ALLTOALL, bytes * ph / (ph - 1));
        nccl_group_free(&g);
    }
    free(ranks);
    return t;
}

/* Head all-to-all of `bytes` sent per rank (spread over the other P_h-1). */
static double alltoall(const config *c, const platform_spec *n, double bytes)
{
    int ph = c->p_head;
    if (ph == 1 || bytes <= 0) return 0;
    if (n->nccl) return nccl_alltoall(c, n, bytes);
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
static double dp_ring(const platform_spec *n, int N, double bytes)
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
    bool multinode; /* the gradient group crosses nodes */
} dpcost;

/* One gradient collective of `elems` elements (DAG sizes) over the
 * gradient group of rank 0, members from the mesh: NCCL's on a GPU
 * platform (as many nodes as they take), else one ring. */
static double dp_coll(const config *c, const platform_spec *n, const int *members, int N, uint64_t elems,
                      bool allreduce)
{
    if (N > 1 && n->nccl) {
        platform_spec big = nccl_spec_holding(n, members[N - 1] + 1, 0);
        nccl_group g;
        if (nccl_group_init(&g, &big, members, N) == 0) {
            double t = nccl_seconds(c, &big, &g, allreduce ? COLL_ALL_REDUCE : COLL_REDUCE_SCATTER,
                                    (double)elems * c->act_bytes);
            nccl_group_free(&g);
            return t;
        }
    }
    return dp_ring(n, N, (double)size_ring_coll_bytes(elems, c->act_bytes, (uint64_t)N, allreduce));
}

/* ---- tensor parallelism ---- */

/* One collective of nccl-tests size `size` over the first N members of
 * TP group 0 (the ranks its mesh places: inside a node by default, so
 * NVLink/NVLS; N < tp: the shards of KV head 0): NCCL's on a GPU
 * platform, else one ring over the members. */
static double tp_coll_of(const config *c, const platform_spec *n, int N, coll_op op, double size)
{
    if (N == 1 || size <= 0) return 0;
    mesh m = config_mesh(c);
    int *g = xmalloc_array((size_t)c->tp, sizeof *g, "the TP group");
    mesh_group_members(&m, CONFIG_TP_DIMS, 0, g);
    double t = -1;
    nccl_group grp;
    if (n->nccl && nccl_group_init(&grp, n, g, N) == 0) {
        t = nccl_seconds(c, n, &grp, op, size);
        nccl_group_free(&grp);
    }
    if (t < 0) {
        link worst = link_between(n, g[0], g[1]);
        for (int i = 1; i < N; i++) {
            link l = link_between(n, g[i], g[(i + 1) % N]);
            if (l.bw < worst.bw) worst = l;
        }
        uint64_t elems = (uint64_t)(size / c->act_bytes);
        t = flow(&worst, (double)size_ring_coll_bytes(elems, c->act_bytes, (uint64_t)N, op == COLL_ALL_REDUCE));
    }
    free(g);
    return t;
}

/* The same over the whole TP group. */
static double tp_coll(const config *c, const platform_spec *n, coll_op op, double size)
{
    return tp_coll_of(c, n, c->tp, op, size);
}

/* The TP collectives of one layer as build.c emits them, each of the
 * (T, hidden) activations: forward, backward (without the recompute). */
typedef struct tpcost {
    double fwd, bwd;           /* per block, exposed */
    double fwd_busy, bwd_busy; /* per block, compute added (--tp-overlap's chunks and adds) */
    double head, embed;        /* LM head (forward + backward), embedding (both) */
    double head_fwd;           /* the LM head's forward part of head */
    double norm;               /* the norm gradients' all-reduce, once per step (sequence parallelism) */
    double kv_rep;             /* per block, tp > H_kv: a KV head's weight gradient summed over its shards */
    /* fwd and fwd_busy by recompute part (what a re-run of it costs): the
     * QKV projection's, the output projection's, the MLP's */
    double part[3], part_busy[3];
} tpcost;

static tpcost tp_costs(const config *c, const platform_spec *n)
{
    tpcost k = {0};
    if (c->tp == 1) return k;
    k.kv_rep = tp_coll_of(c, n, config_tp_kv_repl(c), COLL_ALL_REDUCE,
                          2.0 * c->model.head_dim * c->model.hidden * c->act_bytes); /* build.c's kv_grad_replicas */
    double act = (double)config_local_tokens(c) * c->model.hidden * c->act_bytes;
    double loss = tp_coll(c, n, COLL_ALL_REDUCE, 3.0 * (double)config_local_tokens(c) * 4);
    if (c->sequence_parallel) {
        double ag = tp_coll(c, n, COLL_ALL_GATHER, act), rs = tp_coll(c, n, COLL_REDUCE_SCATTER, act);
        k.fwd = 2 * ag + 2 * rs;
        k.part[0] = ag, k.part[1] = rs, k.part[2] = ag + rs;
        /* the inputs gathered again for the weight gradients run beside
         * down's backward and attention's (build.c): hidden */
        k.bwd = 2 * ag + 2 * rs;
        k.head = 2 * ag + rs + loss;
        k.head_fwd = ag + loss;
        k.embed = rs + ag;
        k.norm = tp_coll(c, n, COLL_ALL_REDUCE, (2.0 * pipe_stage_layers(c, 0) + 1) * c->model.hidden * c->act_bytes);
    } else {
        double ar = tp_coll(c, n, COLL_ALL_REDUCE, act);
        k.fwd = 2 * ar;
        k.part[1] = k.part[2] = ar;
        k.bwd = 2 * ar;
        k.head = ar + loss;
        k.head_fwd = loss;
        k.embed = ar;
    }
    return k;
}

static dpcost dp_costs(const config *c, const platform_spec *n)
{
    mesh m = config_mesh(c);
    int N = mesh_group_size(&m, CONFIG_GRAD_DIMS), *g = xmalloc_array((size_t)N, sizeof *g, "the gradient group");
    mesh_group_members(&m, CONFIG_GRAD_DIMS, 0, g);
    const model *md = &c->model;
    uint64_t lp = model_layer_params_tp(md, c->tp), all = model_params_tp(md, c->tp),
             hp = model_head_params_tp(md, c->tp);
    dpcost k = {dp_coll(c, n, g, N, lp, true),   dp_coll(c, n, g, N, lp, false),  dp_coll(c, n, g, N, lp, false),
                dp_coll(c, n, g, N, hp, true),   dp_coll(c, n, g, N, hp, false),  dp_coll(c, n, g, N, hp, false),
                dp_coll(c, n, g, N, all, false), dp_coll(c, n, g, N, all, false), N > n->gpus_per_node};
    free(g);
    return k;
}

/* ---- the step ---- */

typedef struct layer_cost {
    double fwd, bwd;           /* critical path of one layer, seconds */
    double fwd_busy, bwd_busy; /* compute-stream part */
    double a2a, ring_wait;
    double tp;      /* TP collectives (exposed: the GEMMs wait for them) */
    double nic_bwd; /* seconds of the backward the ring keeps a NIC busy */
} layer_cost;

/* One GEMM task as the DAG's (m, n, k): by FLOPs, or by its shapes when the
 * table has them (a backward: its dgrad and wgrad). */
static double gemm(const config *c, const calib *cb, double m, double n, double k, bool bwd)
{
    return calib_gemm_task_seconds(cb, m, n, k, bwd, c->act_bytes);
}

/* The block's GEMMs, each with 1/tp of the weights (build.c's shapes), by
 * recompute part: g[0] QKV, g[1] the output projection, g[2] the MLP's. */
static void gemm_parts(const config *c, const calib *cb, bool bwd, double g[3])
{
    const model *m = &c->model;
    double T = (double)config_local_tokens(c), hid = m->hidden, d = m->head_dim, ffn = (double)m->ffn / c->tp;
    double qkv = (double)model_tp_qkv_heads(m, c->tp) * d, o = (double)m->heads * d / c->tp;
    g[0] = gemm(c, cb, T, qkv, hid, bwd);
    g[1] = gemm(c, cb, T, hid, o, bwd);
    g[2] = 2 * gemm(c, cb, T, ffn, hid, bwd) + gemm(c, cb, T, hid, ffn, bwd);
}

static double gemms(const config *c, const calib *cb, bool bwd)
{
    double g[3];
    gemm_parts(c, cb, bwd, g);
    return g[0] + g[1] + g[2];
}

/* One memory-bound kernel of op (elementwise.h) on a rank of `stage`, as
 * the calibration table times its task. */
static double elementwise_seconds(const config *c, const calib *cb, task_op op, bool bwd, int stage)
{
    uint64_t rows, cols;
    elementwise_shape(c, op, stage, &rows, &cols);
    return calib_elementwise_seconds(cb, c, op, bwd ? PHASE_BWD : PHASE_FWD, rows * cols);
}

/* The block's memory-bound kernels, forward or backward, that a pass of
 * `parts` runs (build.c; RC_ALL: a whole forward or backward). */
static double block_elementwise(const config *c, const calib *cb, bool bwd, unsigned parts)
{
    const task_op *ops;
    double t = 0;
    for (int i = 0, n = elementwise_block_ops(&ops); i < n; i++)
        if (elementwise_reruns(ops[i], parts)) t += elementwise_seconds(c, cb, ops[i], bwd, 0);
    return t;
}

/* The kernels around the blocks: the embedding's on the first stage, the
 * final norm's and the loss's on the last; forward and backward. */
typedef struct head_elementwise {
    double first_f, first_b, last_f, last_b;
} head_elementwise;

static head_elementwise head_elementwise_of(const config *c, const calib *cb)
{
    head_elementwise h;
    h.first_f = elementwise_seconds(c, cb, OP_EMBED, false, 0);
    h.first_b = elementwise_seconds(c, cb, OP_EMBED, true, 0);
    h.last_f = elementwise_seconds(c, cb, OP_NORM_FINAL, false, 0) + elementwise_seconds(c, cb, OP_LOSS, false, 0);
    h.last_b = elementwise_seconds(c, cb, OP_NORM_FINAL, true, 0) + elementwise_seconds(c, cb, OP_LOSS, true, 0);
    return h;
}

/* --tp-overlap: one ring-exchange pair as build.c emits it, tp chunk
 * GEMMs of g seconds and tp-1 ring steps of s seconds. gather: step j runs
 * back to back from the start, chunk j waits for step j-1; scatter: chunk
 * j's partial is added (acc seconds) once step j-1 has brought the
 * previous one, and step j sends what is ready. Returns the pair's time;
 * *busy gets its compute. */
static double ring_pair(int tp, double g, double s, double acc, bool gather, double *busy)
{
    double comp = 0, link = 0;
    for (int j = 0; j < tp; j++) {
        if (gather) {
            comp = (j ? maxd(comp, j * s) : comp) + g;
            continue;
        }
        comp += g;
        if (j > 0) comp = maxd(comp, link) + acc;
        if (j + 1 < tp) link = maxd(link, comp) + s;
    }
    *busy = tp * g + (gather ? 0 : (tp - 1) * acc);
    return comp;
}

/* The pairs of one block under --tp-overlap: chunk GEMM shapes (m = T/tp)
 * and which side the collective is on; forward (4), then backward (4). */
static void tp_overlap_costs(const config *c, const calib *cb, const platform_spec *n, tpcost *k)
{
    if (!c->tp_overlap) return;
    const model *m = &c->model;
    int tp = c->tp;
    double T = (double)config_local_tokens(c), rows = T / tp, hid = m->hidden, d = m->head_dim;
    double ffn = (double)m->ffn / tp, qkv = (double)model_tp_qkv_heads(m, tp) * d, o = (double)m->heads * d / tp;
    mesh ms = config_mesh(c);
    link l = link_between(n, 0, mesh_shift(&ms, 0, MESH_TP, 1)); /* a ring step: rank 0 to the next TP rank */
    double s = flow(&l, rows * hid * c->act_bytes);
    double acc = calib_seconds(cb, TASK_ACC, 0, (double)size_acc_hbm_bytes((uint64_t)(rows * hid)), rows);
    struct {
        double n, k, count; /* the GEMM's n, k; GEMMs per chunk (gate and up: 2) */
        bool gather, bwd;
    } pairs[8] = {{qkv, hid, 1, true, false},  {hid, o, 1, false, false}, {ffn, hid, 2, true, false},
                  {hid, ffn, 1, false, false}, {hid, ffn, 1, true, true}, {ffn, hid, 2, false, true},
                  {hid, o, 1, true, true},     {qkv, hid, 1, false, true}};
    static const int part[4] = {0, 1, 2, 2}; /* the forward pairs' recompute parts */
    k->fwd = k->bwd = k->fwd_busy = k->bwd_busy = 0;
    for (int i = 0; i < 3; i++)
        k->part[i] = k->part_busy[i] = 0;
    for (int i = 0; i < 8; i++) {
        bool bwd = pairs[i].bwd;
        double chunk = pairs[i].count * gemm(c, cb, rows, pairs[i].n, pairs[i].k, bwd);
        double whole = pairs[i].count * gemm(c, cb, T, pairs[i].n, pairs[i].k, bwd), busy;
        double t = ring_pair(tp, chunk, s, acc, pairs[i].gather, &busy);
        *(bwd ? &k->bwd : &k->fwd) += t - busy;
        *(bwd ? &k->bwd_busy : &k->fwd_busy) += busy - whole;
        if (!bwd) k->part[part[i]] += t - busy, k->part_busy[part[i]] += busy - whole;
    }
}

static layer_cost layer_cost_of(const config *c, const calib *cb, const platform_spec *n, const ringctx *r, int s,
                                const tpcost *tk)
{
    double T = (double)config_local_tokens(c);
    uint64_t heads = (uint64_t)config_tp_heads(c), qkv_heads = heads + 2 * (uint64_t)config_kv_heads_total(c);
    double a_qkv = alltoall(c, n, (double)size_a2a_bytes(c, qkv_heads));
    double a_o = alltoall(c, n, (double)size_a2a_bytes(c, heads));
    double gf = gemms(c, cb, false) + block_elementwise(c, cb, false, RC_ALL);
    double gb = gemms(c, cb, true) + block_elementwise(c, cb, true, RC_ALL);
    double fb, bb;
    bool ag = c->ring == RING_ALLGATHER;
    double rf = ag ? gather_pass(r, s, false, &fb) : ring_fwd(r, s, &fb);
    double rb = ag ? gather_pass(r, s, true, &bb) : ring_bwd(r, s, &bb);
    double rep = 0;
    if (config_kv_repl(c) > 1)
        rep = calib_seconds(cb, TASK_ACC, 0, (double)size_acc_hbm_bytes(size_kv_rep_sum_elems(c)), T);
    layer_cost lc;
    gf += tk->fwd_busy; /* --tp-overlap's chunked GEMMs and adds */
    gb += tk->bwd_busy;
    lc.fwd = gf + a_qkv + rf + a_o + tk->fwd; /* QKV all-to-all, ring, O all-to-all, TP */
    lc.fwd_busy = gf + fb;
    /* the recompute pass: the policy's parts (core/recompute.h), on the
     * share of a chunk's blocks that re-run (full's block method: N of n) */
    unsigned parts = recompute_parts(c);
    int blocks = pipe_chunk_layers(c, 0), reruns, inputs, group;
    recompute_chunk(c, blocks, &reruns, &inputs, &group);
    double share = (double)reruns / blocks, g[3], re_gemm = 0, re_tp = 0;
    gemm_parts(c, cb, false, g);
    static const unsigned gemm_part[3] = {RC_QKV, RC_OUT, RC_MLP};
    for (int i = 0; i < 3; i++)
        if (parts & gemm_part[i]) re_gemm += g[i] + tk->part_busy[i], re_tp += tk->part[i];
    if (parts) re_gemm += block_elementwise(c, cb, false, parts); /* the kernels the pass re-runs with them */
    double re_a2a = parts & RC_A2A ? a_qkv + a_o : 0, re_ring = parts & RC_RING ? rf : 0;
    double re = share * (re_gemm + re_tp + re_a2a + re_ring);
    double re_busy = share * (re_gemm + (parts & RC_RING ? fb : 0));
    lc.tp = tk->fwd + tk->bwd + share * re_tp;
    lc.bwd = re + gb + a_o /* dO */ + rb + a_qkv /* dQKV */ + rep + tk->bwd;
    lc.bwd_busy = re_busy + gb + bb + rep;
    lc.a2a = 2 * (a_qkv + a_o) + share * re_a2a;
    lc.ring_wait = (rf - fb) + (rb - bb) + share * (parts & RC_RING ? rf - fb : 0);
    lc.nic_bwd = ag ? 0 : r->nic_bwd;
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
/* Extra seconds of `busy` compute starting at t while the dp stream is
 * busy until `until` (interference f). */
static double beside_dp(double busy, double t, double until, double f) { return overlapped(busy, until - t, f) - busy; }

static void step_walk(const config *c, const calib *cb, const dpcost *k, const layer_cost *lc, const tpcost *tk,
                      analytic_result *out)
{
    const model *m = &c->model;
    int L = m->layers, z = c->zero;
    double T = (double)config_local_tokens(c), f = calib_interference(cb, TASK_GEMM);
    double v = (double)((m->vocab + c->tp - 1) / c->tp); /* vocab-parallel */
    head_elementwise he = head_elementwise_of(c, cb);
    double lm = gemm(c, cb, T, v, m->hidden, false) + gemm(c, cb, T, v, m->hidden, true) + he.last_f + he.last_b;
    double zero_grad = elementwise_seconds(c, cb, OP_ZERO_GRAD, false, 0);
    double optim = elementwise_seconds(c, cb, OP_OPTIM_STEP, false, 0);
    double t = zero_grad + he.first_f + tk->embed, dp = 0, busy = zero_grad + he.first_f + he.first_b + optim;
    double kv = 0; /* kv: the tp_kv stream (tp > H_kv) */
    /* ZeRO-3 gathers as build.c issues them (bounded prefetch): ready[j]
     * is when block j's parameters are in (j = L: the LM head's) */
    double *ready = z == 3 ? xmalloc_array((size_t)L + 1, sizeof *ready, "the gathers' times") : NULL;
    int n = c->prefetch;
    for (int l = 0; l < L; l++) {
        for (int j = l == 0 ? 0 : l + n; z == 3 && j <= l + n && j <= L; j++)
            ready[j] = dp = maxd(dp, t) + (j < L ? k->ag_layer : k->ag_head); /* after block l-1 */
        if (z == 3) t = maxd(t, ready[l]);
        t += lc->fwd + beside_dp(lc->fwd_busy, t, dp, f);
        busy += lc->fwd_busy;
    }
    if (z == 3 && n == 0) ready[L] = dp = maxd(dp, t) + k->ag_head;
    if (z == 3) t = maxd(t, ready[L]);
    t += lm + tk->head;
    busy += lm;
    if (z == 0) dp = maxd(dp, t) + k->ar_head;
    if (z >= 2) dp = maxd(dp, t) + k->rs_head;
    for (int l = L - 1; l >= 0; l--) {
        /* the gathers follow the last reduce-scatter on the stream, not the compute */
        for (int j = l == L - 1 ? l : l - n; z == 3 && j >= l - n && j >= 0; j--)
            ready[j] = dp += k->ag_layer;
        if (z == 3) t = maxd(t, ready[l]);
        t += lc->bwd + beside_dp(lc->bwd_busy, t, dp, f);
        busy += lc->bwd_busy;
        /* a gradient collective beside the next layer's backward shares
         * the NIC with its ring for the part of it the ring is sending:
         * two flows, each at half the link */
        double share = l > 0 && k->multinode ? 1 + mind(1, lc->nic_bwd / lc->bwd) : 1;
        /* the block's gradient is complete once its KV replicas summed theirs */
        double grads = tk->kv_rep > 0 ? (kv = maxd(kv, t) + tk->kv_rep) : t;
        if (z == 0) dp = maxd(dp, grads) + k->ar_layer * share;
        if (z >= 2) dp = maxd(dp, grads) + k->rs_layer * share;
    }
    free(ready);
    t += he.first_b;
    double grads = maxd(t, kv);
    if (z == 1) dp = maxd(dp, grads) + k->rs_all;
    /* the norm gradients' all-reduce after the gradient reduction, the
     * optimizer step after both, the parameters' all-gather after it
     * (build.c's norm_grads and optimizer) */
    double norm = tk->norm > 0 ? maxd(grads, dp) + tk->norm : 0;
    double stepped = maxd(maxd(dp, grads), norm) + optim;
    if (z == 1 || z == 2) dp = stepped + k->ag_all;
    out->step = maxd(stepped, dp);
    out->busy = busy;
    out->exposed = out->step - busy;
    out->a2a = L * lc->a2a;
    out->ring_wait = L * lc->ring_wait;
    out->tp = L * lc->tp + tk->head + tk->embed + tk->norm; /* kv_rep: off the critical path, beside the next block */
    out->dp_tail = out->step - t;
}

/* ---- pipeline parallelism ---- */

/* One pipeline p2p of a stage boundary: this rank's (T or T/tp, hidden)
 * activations between rank 0 and its match on the next stage. */
static double pp_hop(const config *c, const platform_spec *n)
{
    mesh m = config_mesh(c);
    bool sp = c->tp > 1 && c->sequence_parallel;
    double rows = (double)config_local_tokens(c) / (sp ? c->tp : 1);
    link l = link_between(n, 0, mesh_shift(&m, 0, MESH_PP, 1));
    return flow(&l, rows * c->model.hidden * c->act_bytes);
}

/* The pipeline: every stage's passes (pipeline.h) as a critical-path
 * recurrence, a pass starting when its stage is free and its input has
 * arrived (the producing pass's end plus one hop); then each stage's
 * gradient reduction over DP after its last backward. Passes cost their
 * blocks' layer cost (the same per block on every stage) plus the embedding on
 * virtual stage 0 and the LM head on the last; DP collectives are not
 * overlapped with the passes but for ZeRO-0's, which follow the last
 * micro-batch's backward block by block. */
typedef struct pipe_walk {
    const config *c;
    double f, b;                             /* one block's share of a forward and a backward pass */
    double f_first, b_first, f_last, b_last; /* the extras of the first and last virtual stages */
    double hop;
    double *fdone, *bdone; /* by virtual stage and micro-batch; < 0: not yet */
} pipe_walk;

static double pass_seconds(const pipe_walk *w, int stage, const pipe_op *op)
{
    const config *c = w->c;
    double t = (op->bwd ? w->b : w->f) * pipe_layers(c, stage, op->chunk);
    if (pipe_is_first(c, stage, op->chunk)) t += op->bwd ? w->b_first : w->f_first;
    if (pipe_is_last(c, stage, op->chunk)) t += op->bwd ? w->b_last : w->f_last;
    return t;
}

/* When op's input is ready, or < 0 while its producer has not run. */
static double pass_ready(const pipe_walk *w, int stage, const pipe_op *op)
{
    const config *c = w->c;
    int u = op->chunk * c->pp + stage, m = c->micro_batches;
    if (!op->bwd)
        return pipe_is_first(c, stage, op->chunk)   ? 0
               : w->fdone[(u - 1) * m + op->mb] < 0 ? -1
                                                    : w->fdone[(u - 1) * m + op->mb] + w->hop;
    if (pipe_is_last(c, stage, op->chunk)) return w->fdone[u * m + op->mb];
    double t = w->bdone[(u + 1) * m + op->mb];
    return t < 0 ? -1 : t + w->hop;
}

/* Run every stage's passes; free[s] gets stage s's last pass's end,
 * busy[s] its passes' sum, last_b[s] the start of its last backward. */
static void pipe_run(pipe_walk *w, double *free_at, double *busy, double *last_b)
{
    const config *c = w->c;
    int pp = c->pp, n = pipe_nops(c), *next = xcalloc((size_t)pp, sizeof *next, "the pipeline walk");
    pipe_op *ops = xmalloc_array((size_t)pp * (size_t)n, sizeof *ops, "the pipeline walk");
    for (int s = 0; s < pp; s++)
        pipe_ops(c, s, ops + (size_t)s * (size_t)n);
    for (bool moved = true; moved;) {
        moved = false;
        for (int s = 0; s < pp; s++)
            for (; next[s] < n; next[s]++) {
                const pipe_op *op = &ops[(size_t)s * (size_t)n + (size_t)next[s]];
                double ready = pass_ready(w, s, op), d = pass_seconds(w, s, op);
                if (ready < 0) break;
                double start = maxd(free_at[s], ready);
                if (op->bwd) last_b[s] = start;
                free_at[s] = start + d;
                busy[s] += d;
                int u = op->chunk * pp + s;
                (op->bwd ? w->bdone : w->fdone)[(size_t)u * (size_t)c->micro_batches + (size_t)op->mb] = free_at[s];
                moved = true;
            }
    }
    free(ops);
    free(next);
}

static void pipeline_walk(const config *c, const calib *cb, const platform_spec *n, const layer_cost *lc,
                          const tpcost *tk, analytic_result *out)
{
    const model *m = &c->model;
    int pp = c->pp, nv = pp * c->vpp, mb = c->micro_batches;
    double T = (double)config_local_tokens(c), v = (double)((m->vocab + c->tp - 1) / c->tp);
    head_elementwise he = head_elementwise_of(c, cb);
    double lm_f = gemm(c, cb, T, v, m->hidden, false) + he.last_f,
           lm_b = gemm(c, cb, T, v, m->hidden, true) + he.last_b;
    pipe_walk w = {c,
                   lc->fwd,
                   lc->bwd,
                   tk->embed + he.first_f,
                   he.first_b,
                   lm_f + tk->head_fwd,
                   lm_b + tk->head - tk->head_fwd,
                   pp_hop(c, n),
                   NULL,
                   NULL};
    size_t cells = (size_t)nv * (size_t)mb;
    w.fdone = xmalloc_array(cells, sizeof *w.fdone, "the pipeline walk");
    w.bdone = xmalloc_array(cells, sizeof *w.bdone, "the pipeline walk");
    for (size_t i = 0; i < cells; i++)
        w.fdone[i] = w.bdone[i] = -1;
    double *free_at = xcalloc((size_t)pp * 3, sizeof *free_at, "the pipeline walk"), *busy = free_at + pp,
           *last_b = busy + pp;
    for (int s = 0; s < pp; s++) /* the gradient buffer zeroed before the first pass */
        free_at[s] = busy[s] = elementwise_seconds(c, cb, OP_ZERO_GRAD, false, s);
    pipe_run(&w, free_at, busy, last_b);
    /* the stages' gradient reductions over DP, each over its own parameters */
    mesh msh = config_mesh(c);
    int N = mesh_group_size(&msh, CONFIG_GRAD_DIMS), *g = xmalloc_array((size_t)N, sizeof *g, "the gradient group");
    mesh_group_members(&msh, CONFIG_GRAD_DIMS, 0, g);
    double step = 0, ends = 0, idle = 0;
    double ar_layer = c->zero == 0 ? dp_coll(c, n, g, N, model_layer_params_tp(m, c->tp), true) : 0;
    int worst = 0;
    for (int s = 0; s < pp; s++) {
        double dp = free_at[s];
        int blocks = pipe_stage_layers(c, s);
        if (c->zero == 0) { /* block by block behind the last backward, then the head's */
            dp = last_b[s];
            for (int l = 0; l < blocks; l++)
                dp = maxd(dp, last_b[s] + (l + 1) * lc->bwd) + ar_layer;
            if (pipe_head_params(c, s)) dp = maxd(dp, free_at[s]) + dp_coll(c, n, g, N, pipe_head_params(c, s), true);
        }
        dp = maxd(dp, free_at[s]);
        /* ZeRO-1: the stage's reduce-scatter, the norms, then the all-gather of as many elements */
        double rs_all = c->zero == 1 ? dp_coll(c, n, g, N, pipe_stage_params(c, s), false) : 0;
        dp += rs_all;
        dp += tk->norm;
        dp += elementwise_seconds(c, cb, OP_OPTIM_STEP, false, s); /* the optimizer step, then the all-gather */
        dp += rs_all;
        if (dp > step) step = dp, worst = s;
        ends = maxd(ends, free_at[s]);
        idle = maxd(idle, free_at[s] - busy[s]);
    }
    double blocks = pipe_stage_layers(c, worst);
    double busy_w = (double)mb * (blocks * (lc->fwd_busy + lc->bwd_busy) + (worst == pp - 1 ? lm_f + lm_b : 0) +
                                  (worst == 0 ? he.first_f + he.first_b : 0)) +
                    elementwise_seconds(c, cb, OP_ZERO_GRAD, false, worst) +
                    elementwise_seconds(c, cb, OP_OPTIM_STEP, false, worst);
    out->step = step;
    out->busy = busy_w;
    out->exposed = step - busy_w;
    out->a2a = (double)mb * blocks * lc->a2a;
    out->ring_wait = (double)mb * blocks * lc->ring_wait;
    out->tp = (double)mb * (blocks * lc->tp + tk->head + tk->embed) + tk->norm;
    out->dp_tail = step - ends;
    out->bubble = idle / step;
    free(g);
    free(free_at);
    free(w.fdone);
    free(w.bdone);
}

void analytic_step(const config *c, const calib *cb, const platform_spec *n, analytic_result *out)
{
    ringctx r;
    ring_setup(&r, c, cb, n);
    tpcost tk = tp_costs(c, n);
    tp_overlap_costs(c, cb, n, &tk);
    layer_cost worst = {0};
    int ws = 0;
    for (int s = 0; s < c->p_seq; s = next_s(s, c->p_seq)) {
        layer_cost lc = layer_cost_of(c, cb, n, &r, s, &tk);
        if (lc.fwd + lc.bwd > worst.fwd + worst.bwd) {
            worst = lc;
            ws = s;
        }
    }
    out->bubble = 0;
    if (c->pp > 1 || c->micro_batches > 1) {
        pipeline_walk(c, cb, n, &worst, &tk, out);
    } else {
        dpcost k = dp_costs(c, n);
        step_walk(c, cb, &k, &worst, &tk, out);
    }
    out->worst_s = ws;
    tiles_free(r.tiles);
}

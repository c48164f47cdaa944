/* analytic_ring: the sequence dimension of the analytic step model
 * (analytic_internal.h): one layer's ring attention at a ring index, its
 * hops on the platform's links, and --ring allgather's gathered passes
 * (core/ring.c and core/allgather.c emit the tasks timed here). */
#include "analytic_internal.h"

#include <math.h>
#include <stdlib.h>

#include "core/ringgeo.h"
#include "core/sizes.h"
#include "core/unfused.h"
#include "core/xalloc.h"

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
double analytic_ring_fwd(const ringctx *r, int s, double *busy)
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
double analytic_ring_bwd(const ringctx *r, int s, double *busy)
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
double analytic_gather_pass(const ringctx *r, int s, bool bwd, double *busy)
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

void analytic_ring_setup(ringctx *r, const config *c, const calib *cb, const platform_spec *n)
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

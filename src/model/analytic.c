/* analytic: fast step-time model of the planner. See analytic.h; the
 * parallel dimensions have their own files (analytic_internal.h). */
#include "analytic_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/pipeline.h"
#include "core/recompute.h"
#include "core/sizes.h"
#include "core/xalloc.h"

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

/* ---- the layer and the step ---- */

/* MLA's projections (build.c's qkv_gemms): Q down and up (or one), KV
 * down and up. */
static double mla_gemms(const config *c, const calib *cb, bool bwd)
{
    const model *m = &c->model;
    double T = (double)config_local_tokens(c), hid = m->hidden, H = config_tp_heads(c), ql = m->q_lora;
    double kl = m->kv_lora, dqk = m->qk_nope + m->qk_rope;
    double q =
        ql > 0 ? gemm(c, cb, T, ql, hid, bwd) + gemm(c, cb, T, H * dqk, ql, bwd) : gemm(c, cb, T, H * dqk, hid, bwd);
    return q + gemm(c, cb, T, kl + m->qk_rope, hid, bwd) + gemm(c, cb, T, H * (m->qk_nope + m->v_dim), kl, bwd);
}

/* The block's GEMMs, each with 1/tp of the weights (build.c's shapes), by
 * recompute part: g[0] QKV, g[1] the output projection, g[2] the MLP's. */
static void gemm_parts(const config *c, const calib *cb, const moecost *mc, bool bwd, double g[3])
{
    const model *m = &c->model;
    double T = (double)config_local_tokens(c), hid = m->hidden, d = m->head_dim, ffn = (double)config_tp_ffn(c);
    double qkv = (double)model_tp_qkv_heads(m, c->tp) * d, o = (double)config_tp_attn_width(c);
    g[0] = model_mla(m) ? mla_gemms(c, cb, bwd) : gemm(c, cb, T, qkv, hid, bwd);
    g[1] = gemm(c, cb, T, hid, o, bwd);
    g[2] = mc->on ? (bwd ? mc->bwd : mc->fwd) : 2 * gemm(c, cb, T, ffn, hid, bwd) + gemm(c, cb, T, hid, ffn, bwd);
}

static double gemms(const config *c, const calib *cb, const moecost *mc, bool bwd)
{
    double g[3];
    gemm_parts(c, cb, mc, bwd, g);
    return g[0] + g[1] + g[2];
}

/* The block's memory-bound kernels, forward or backward, that a pass of
 * `parts` runs (build.c; RC_ALL: a whole forward or backward); moe: a
 * block with experts, whose activation is analytic_ep.c's. */
static double block_elementwise(const config *c, const calib *cb, bool bwd, unsigned parts, bool moe)
{
    const task_op *ops;
    double t = 0;
    for (int i = 0, n = elementwise_block_ops(&ops); i < n; i++)
        if (elementwise_reruns(ops[i], parts) && !(ops[i] == OP_ACT && moe))
            t += elementwise_seconds(c, cb, ops[i], bwd, 0);
    if (model_mla(&c->model) && elementwise_reruns(OP_NORM_LATENT, parts))
        t += elementwise_seconds(c, cb, OP_NORM_LATENT, bwd, 0);
    if (c->precision == PRECISION_BF16) return t;
    /* the FP8 casts (build.c): forward attention's output, backward two
     * block gradients and attention's input gradient */
    if (!bwd)
        return elementwise_reruns(OP_QUANT_ATTN_OUT, parts)
                   ? t + elementwise_seconds(c, cb, OP_QUANT_ATTN_OUT, false, 0)
                   : t;
    return t + 2 * elementwise_seconds(c, cb, OP_QUANT_GRAD, true, 0) +
           elementwise_seconds(c, cb, OP_QUANT_DQKV, true, 0);
}

/* One block's cost at ring index s: with experts (moe), or dense (a
 * mixture of experts' leading dense blocks, model_block_moe). */
static layer_cost layer_cost_of(const config *c, const calib *cb, const platform_spec *n, const ringctx *r, int s,
                                const tpcost *tk, bool moe)
{
    double T = (double)config_local_tokens(c);
    uint64_t heads = (uint64_t)config_tp_heads(c), qkv_heads = heads + 2 * (uint64_t)config_kv_heads_total(c);
    double a_qkv = alltoall(c, n, (double)size_a2a_bytes(c, qkv_heads));
    double a_o = alltoall(c, n, (double)size_a2a_bytes(c, heads));
    moecost mc = moe ? analytic_moe_costs(c, cb, n) : (moecost){0};
    double gf = gemms(c, cb, &mc, false) + block_elementwise(c, cb, false, RC_ALL, mc.on);
    double gb = gemms(c, cb, &mc, true) + block_elementwise(c, cb, true, RC_ALL, mc.on);
    double fb, bb;
    bool ag = c->ring == RING_ALLGATHER;
    double rf = ag ? analytic_gather_pass(r, s, false, &fb) : analytic_ring_fwd(r, s, &fb);
    double rb = ag ? analytic_gather_pass(r, s, true, &bb) : analytic_ring_bwd(r, s, &bb);
    double rep = 0;
    if (config_kv_repl(c) > 1)
        rep = calib_seconds(cb, TASK_ACC, 0, (double)size_acc_hbm_bytes(size_kv_rep_sum_elems(c)), T);
    layer_cost lc;
    gf += tk->fwd_busy; /* --tp-overlap's chunked GEMMs and adds */
    gb += tk->bwd_busy;
    /* QKV all-to-all, ring, O all-to-all, TP, the experts' dispatch and combine */
    lc.fwd = gf + a_qkv + rf + a_o + tk->fwd + mc.comm_fwd;
    lc.fwd_busy = gf + fb;
    /* the recompute pass: the policy's parts (core/recompute.h), on the
     * share of a chunk's blocks that re-run (full's block method: N of n) */
    unsigned parts = recompute_parts(c);
    int blocks = pipe_chunk_layers(c, 0), reruns, inputs, group;
    recompute_chunk(c, blocks, &reruns, &inputs, &group);
    double share = (double)reruns / blocks, g[3], re_gemm = 0, re_tp = 0;
    gemm_parts(c, cb, &mc, false, g);
    static const unsigned gemm_part[3] = {RC_QKV, RC_OUT, RC_MLP};
    for (int i = 0; i < 3; i++)
        if (parts & gemm_part[i]) re_gemm += g[i] + tk->part_busy[i], re_tp += tk->part[i];
    if (parts & RC_MLP) re_tp += mc.comm_fwd;
    if (parts) re_gemm += block_elementwise(c, cb, false, parts, mc.on); /* the kernels the pass re-runs with them */
    double re_a2a = parts & RC_A2A ? a_qkv + a_o : 0, re_ring = parts & RC_RING ? rf : 0;
    double re = share * (re_gemm + re_tp + re_a2a + re_ring);
    double re_busy = share * (re_gemm + (parts & RC_RING ? fb : 0));
    lc.tp = tk->fwd + tk->bwd + share * re_tp;
    lc.bwd = re + gb + a_o /* dO */ + rb + a_qkv /* dQKV */ + rep + tk->bwd + mc.comm_bwd;
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

static void step_walk(const config *c, const calib *cb, const dpcost *k, const layer_cost lc[2], const tpcost *tk,
                      analytic_result *out)
{
    const model *m = &c->model;
    int L = m->layers, z = c->zero;
    double T = (double)config_local_tokens(c), f = calib_interference(cb, TASK_GEMM);
    double v = (double)config_tp_vocab(c);
    head_elementwise he = head_elementwise_of(c, cb);
    double lm =
        head_gemm(c, cb, T, v, m->hidden, false) + head_gemm(c, cb, T, v, m->hidden, true) + he.last_f + he.last_b;
    double zero_grad = elementwise_seconds(c, cb, OP_ZERO_GRAD, false, 0) + weight_casts(c, cb, 0);
    double optim = elementwise_seconds(c, cb, OP_OPTIM_STEP, false, 0);
    double t = zero_grad + he.first_f + tk->embed, dp = 0, busy = zero_grad + he.first_f + he.first_b + optim;
    double kv = 0; /* kv: the tp_kv stream (tp > H_kv) */
    /* ZeRO-3 gathers as build_grad.c issues them (bounded prefetch): ready[j]
     * is when block j's parameters are in (j = L: the LM head's) */
    double *ready = z == 3 ? xmalloc_array((size_t)L + 1, sizeof *ready, "the gathers' times") : NULL;
    int n = c->prefetch;
    for (int l = 0; l < L; l++) {
        for (int j = l == 0 ? 0 : l + n; z == 3 && j <= l + n && j <= L; j++)
            ready[j] = dp = maxd(dp, t) + (j < L ? k->ag_layer : k->ag_head); /* after block l-1 */
        if (z == 3) t = maxd(t, ready[l]);
        const layer_cost *b = block_cost(c, lc, l);
        t += b->fwd + beside_dp(b->fwd_busy, t, dp, f);
        busy += b->fwd_busy;
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
        const layer_cost *b = block_cost(c, lc, l);
        t += b->bwd + beside_dp(b->bwd_busy, t, dp, f);
        busy += b->bwd_busy;
        /* a gradient collective beside the next layer's backward shares
         * the NIC with its ring for the part of it the ring is sending:
         * two flows, each at half the link */
        double share = l > 0 && k->multinode ? 1 + mind(1, b->nic_bwd / b->bwd) : 1;
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
     * (build_tp.c's norm gradients, build.c's optimizer) */
    double norm = tk->norm > 0 ? maxd(grads, dp) + tk->norm : 0;
    double stepped = maxd(maxd(dp, grads), norm) + optim;
    if (z == 1 || z == 2) dp = stepped + k->ag_all;
    out->step = maxd(stepped, dp);
    out->busy = busy;
    out->exposed = out->step - busy;
    int Lm = moe_blocks_in(c, 0, L), Ld = L - Lm; /* blocks with experts, dense ones */
    out->a2a = Ld * lc[0].a2a + Lm * lc[1].a2a;
    out->ring_wait = Ld * lc[0].ring_wait + Lm * lc[1].ring_wait;
    out->tp = Ld * lc[0].tp + Lm * lc[1].tp + tk->head + tk->embed + tk->norm; /* kv_rep: off the critical path */
    out->dp_tail = out->step - t;
}

void analytic_step(const config *c, const calib *cb, const platform_spec *n, analytic_result *out)
{
    ringctx r;
    analytic_ring_setup(&r, c, cb, n);
    tpcost tk = analytic_tp_costs(c, n);
    analytic_tp_overlap_costs(c, cb, n, &tk);
    /* the ring index whose blocks, dense and with experts, cost the most */
    layer_cost worst[2];
    memset(worst, 0, sizeof worst);
    int ws = 0, L = c->model.layers, Lm = moe_blocks_in(c, 0, L);
    double most = 0;
    for (int s = 0; s < c->p_seq; s = next_s(s, c->p_seq)) {
        layer_cost lc[2];
        lc[0] = layer_cost_of(c, cb, n, &r, s, &tk, false);
        lc[1] = config_moe(c) ? layer_cost_of(c, cb, n, &r, s, &tk, true) : lc[0];
        const layer_cost *one = &lc[Lm == L]; /* one kind of block: compare a block's cost, as ever */
        double all = Lm == 0 || Lm == L ? one->fwd + one->bwd
                                        : (L - Lm) * (lc[0].fwd + lc[0].bwd) + Lm * (lc[1].fwd + lc[1].bwd);
        if (all > most) {
            most = all;
            worst[0] = lc[0], worst[1] = lc[1];
            ws = s;
        }
    }
    out->bubble = 0;
    if (c->pp > 1 || c->micro_batches > 1) {
        analytic_pp_walk(c, cb, n, worst, &tk, out);
    } else {
        dpcost k = analytic_grad_costs(c, n);
        step_walk(c, cb, &k, worst, &tk, out);
    }
    out->worst_s = ws;
    tiles_free(r.tiles);
}

/*
 * build_ep: a mixture of experts' MLP in dag_build()'s rank program
 * (build_internal.h), as Megatron-Core's MoELayer runs it with the
 * all-to-all token dispatcher (megatron/core/transformer/moe/moe_layer.py,
 * token_dispatcher.py MoEAlltoAllTokenDispatcher, experts.py GroupedMLP):
 *
 * Forward, on the rank's T' = T/tp sequence-parallel rows (T' = T at tp 1):
 *   router GEMM (T', hidden) x (hidden, E); softmax and top-k (T', E);
 *   permute: the T' k routed rows into expert order (T' k, hidden);
 *   dispatch: all-to-all over the EP group, the rows to the ranks of their
 *     experts (config_ep.c: R (1 - share) rows sent);
 *   under TP, the received rows all-gathered over TP (expert TP = TP);
 *   grouped GEMMs gate and up (rows, hidden) x (hidden, F/tp) per local
 *     expert, SwiGLU, down (rows, F/tp) x (F/tp, hidden);
 *   under TP, the output reduce-scattered; combine: the all-to-all back;
 *   unpermute: the k outputs of each token summed, weighted by the router,
 *     into the block output;
 *   the shared experts, if any, as the dense MLP (build.c's TP path) of
 *     width shared_ffn, added in.
 * Backward runs the same in reverse: the combine's gradient goes out as
 * a dispatch, the GEMMs' dgrad and wgrad (2x the FLOPs), the dispatch's
 * gradient back as a combine; the router's GEMM backward adds its input
 * gradient into the MLP input's.
 *
 * Each rank's tasks carry its own EP rank's rows, so under a skewed
 * --routing the hot experts' rank computes more and the others wait for
 * it at the all-to-alls, as on a GPU. The experts' gradients are reduced
 * over the expert-data-parallel group (dp P / ep ranks holding the same
 * experts) on their own stream.
 */
#include <stdlib.h>

#include "build_internal.h"
#include "elementwise.h"
#include "sizes.h"
#include "xalloc.h"

/* An expert group whose members span TP ranks (expert TP below TP):
 * config_ep_members' list, over TP and the context ranks, and dp when it
 * spans replicas (an EP group across them, every expert-data-parallel
 * group). */
static uint32_t group_across_tp(prog *p, stream_kind stream, ep_group_kind kind)
{
    int stride, count, *m = xmalloc_array((size_t)config_ranks(p->c), sizeof *m, "an expert group");
    int n = config_ep_members(p->c, bt_rank(p->b), kind, m, &stride, &count);
    mesh_dims dims = CONFIG_TP_DIMS | MESH_DIMS_CP | (kind == EP_GROUP_EDP || count ? MESH_DIMS_DP : 0);
    int32_t *members = xmalloc_array((size_t)n, sizeof *members, "an expert group");
    for (int i = 0; i < n; i++)
        members[i] = m[i];
    free(m);
    return bt_group_of(p->b, stream, dims, members, n, stride, count);
}

/* At expert TP = TP an EP group within a replica is ep consecutive
 * context ranks, its expert-data-parallel group every ep-th rank of the
 * gradient group; one across replicas (ep = s P) is the context ranks of
 * s consecutive replicas, the expert-data-parallel group the rank itself
 * in every s-th replica (dag_group_replicas). Below TP the groups take
 * the experts' order (config_ep.c), and the routed rows are gathered over
 * etp consecutive TP ranks. */
void build_ep_groups(prog *p)
{
    if (!config_moe(p->c)) return;
    int P = config_cp(p->c), ep = p->c->ep, s = ep / P, etp = config_etp(p->c);
    p->etp_gid = p->tp_gid;
    if (p->c->dispatcher == DISPATCH_ALLGATHER) p->tpep_gid = group_across_tp(p, STREAM_EP, EP_GROUP_TP_EP);
    if (config_ep_spans_tp(p->c)) {
        p->ep_gid = group_across_tp(p, STREAM_EP, EP_GROUP);
        p->edp_gid = group_across_tp(p, STREAM_EP_GRAD, EP_GROUP_EDP);
        if (etp > 1) p->etp_gid = bt_group_split(p->b, STREAM_TP, CONFIG_TP_DIMS, p->c->tp / etp);
    } else if (ep <= P) {
        p->ep_gid = bt_group_split(p->b, STREAM_EP, MESH_DIMS_CP, P / ep);
        p->edp_gid = bt_group_strided(p->b, STREAM_EP_GRAD, CONFIG_GRAD_DIMS, ep);
    } else {
        p->ep_gid = bt_group_replicas(p->b, STREAM_EP, MESH_DIMS_CP, 1, 1, s);
        p->edp_gid = bt_group_replicas(p->b, STREAM_EP_GRAD, MESH_DIMS_CP, P, s, p->c->dp / s);
    }
}

/* This rank's place in its EP group. */
static int ep_rank(const prog *p) { return config_ep_rank(p->c, bt_rank(p->b)); }

/* A memory-bound kernel of `elems` elements (elementwise.h's bytes by op). */
static void kernel(prog *p, task_op op, task_kind kind, task_phase ph, int l, uint64_t rows, uint64_t cols,
                   const int *reads, int nreads, int write)
{
    builder *b = p->b;
    uint32_t id = bt_begin(b, kind, STREAM_COMP, op, ph, l);
    dag_task *t = bt_task(b, id);
    t->dim[0] = rows <= UINT32_MAX ? (uint32_t)rows : 0;
    t->dim[1] = (uint32_t)cols;
    t->dim[2] = (uint32_t)p->c->act_bytes;
    t->flops = rows * cols;
    for (int i = 0; i < nreads; i++)
        bt_reads(b, reads[i]);
    bt_writes(b, write);
    bt_end(b);
}

/* The dispatch or combine all-to-all of `rows` rows of hidden sent. */
static void ep_alltoall(prog *p, task_op op, task_phase ph, int l, uint64_t rows, int read, int write)
{
    if (p->c->ep == 1) return;
    builder *b = p->b;
    uint32_t id = bt_begin(b, TASK_ALLTOALL, STREAM_EP, op, ph, l);
    dag_task *t = bt_task(b, id);
    t->group = p->ep_gid;
    t->dim[0] = rows <= UINT32_MAX ? (uint32_t)rows : 0;
    t->dim[1] = (uint32_t)p->m->hidden;
    t->dim[2] = (uint32_t)p->c->act_bytes;
    t->bytes = rows * (uint64_t)p->m->hidden * (uint64_t)p->c->act_bytes;
    bt_reads(b, read);
    bt_writes(b, write);
    bt_end(b);
}

/* A grouped GEMM over the rank's local experts: `rows` in all, (rows/E_l,
 * n, k) each. */
static void grouped(prog *p, task_op op, task_phase ph, int l, uint64_t rows, uint64_t n, uint64_t k, const int *reads,
                    int nreads, const int *writes, int nwrites)
{
    int local = config_ep_local_experts(p->c);
    uint64_t each = (rows + (uint64_t)local - 1) / (uint64_t)local;
    uint32_t id = build_gemm(p, op, ph, l, each, n, k, reads, nreads, writes, nwrites);
    dag_task *t = bt_task(p->b, id);
    t->step = (uint16_t)local;
    t->flops = size_gemm_flops(rows, n, k, ph == PHASE_BWD);
}

/* The routed rows' expert-TP collective (sequence parallelism): `rows`
 * rows of hidden gathered (all its ranks' rows) or reduce-scattered. */
static void tp_rows(prog *p, task_kind kind, task_phase ph, int l, uint64_t rows, int read, int write)
{
    build_tp_coll_in(p, p->etp_gid, config_etp(p->c), kind, OP_TP_EXPERT, ph, l, rows * (uint64_t)p->m->hidden,
                     p->c->act_bytes, read, write);
}

/* The shared experts: the dense MLP's TP path at width shared_ffn/tp,
 * adding into the block output `out`, in two halves (Megatron's
 * SharedExpertMLP, megatron/core/transformer/moe/shared_experts.py): fc1,
 * the input gathered over TP, gate and up and the activation; fc2, down
 * and its reduce-scatter into `out`. */
static void shared_fc1(prog *p, int l, task_phase ph, int H)
{
    uint64_t hid = (uint64_t)p->m->hidden, f = config_ep_shared_ffn(p->c);
    int W = BUF_LB(l, LB_W), M = BUF_LB(l, LB_M);
    if (!f) return;
    const tp_gemm gate_up[2] = {{OP_MLP_GATE, f, hid, {build_tp_buf(p, l, LB_HG), W}, 2, {M}, 1},
                                {OP_MLP_UP, f, hid, {build_tp_buf(p, l, LB_HG), W}, 2, {M}, 1}};
    build_tp_column(p, OP_TP_H, ph, l, H, build_tp_buf(p, l, LB_HG), gate_up, 2);
    kernel(p, OP_ACT, TASK_ACT, ph, l, p->T, f, READS(M), M);
}

static void shared_fc2(prog *p, int l, task_phase ph, int out)
{
    uint64_t hid = (uint64_t)p->m->hidden, f = config_ep_shared_ffn(p->c);
    int W = BUF_LB(l, LB_W), M = BUF_LB(l, LB_M);
    if (!f) return;
    const tp_gemm down = {OP_MLP_DOWN, hid, f, {M, BUF_LB(l, LB_H), W}, 3, {build_tp_buf(p, l, LB_YP)}, 1};
    build_tp_row(p, OP_TP_Y, ph, l, &down, 1, build_tp_buf(p, l, LB_YP), out);
}

/* The all-gather dispatcher's collective over the expert-TP x EP group
 * (Megatron's MoEAllGatherTokenDispatcher, token_dispatcher.py: the
 * tokens gathered from, and the outputs reduce-scattered to, its etp ep
 * ranks): `rows` rows of hidden on the gathered side, sized for the DAG's
 * members (with one, the replicas', as loong sim counts them). */
static void tpep_coll(prog *p, task_kind kind, task_op op, task_phase ph, int l, uint64_t rows, int read, int write)
{
    builder *b = p->b;
    int members = bt_group_size(b, p->tpep_gid);
    uint64_t n = members > 1 ? (uint64_t)members : (uint64_t)p->c->dp, hid = (uint64_t)p->m->hidden;
    uint32_t id = bt_begin(b, kind, STREAM_EP, op, ph, l);
    dag_task *t = bt_task(b, id);
    t->group = p->tpep_gid;
    t->dim[0] = rows <= UINT32_MAX ? (uint32_t)rows : 0;
    t->dim[1] = (uint32_t)hid;
    t->dim[2] = (uint32_t)p->c->act_bytes;
    t->bytes = size_ring_coll_bytes(rows * hid, p->c->act_bytes, n, false);
    bt_reads(b, read);
    bt_writes(b, write);
    bt_end(b);
}

/* The block's experts with the all-gather dispatcher: every token of the
 * expert-TP x EP group gathered (G = etp ep of them, Ga = G T' rows), the
 * rank's experts' rows picked out and computed (the same rows and widths
 * as the all-to-all dispatcher's: config_ep_expert_rows, F/etp), scattered
 * back into Ga rows and reduce-scattered to the rank's T'; the backward
 * mirrors it. */
static void moe_fwd_allgather(prog *p, int l, task_phase ph)
{
    const config *c = p->c;
    uint64_t hid = (uint64_t)p->m->hidden, E = (uint64_t)p->m->experts, Tsp = config_sp_rows(c, p->T);
    uint64_t f = config_ep_expert_ffn(c), rows = config_ep_expert_rows(c, ep_rank(p));
    uint64_t Ga = Tsp * (uint64_t)config_etp(c) * (uint64_t)c->ep;
    bool gather = Ga > Tsp;
    int W = BUF_LB(l, LB_W), H = BUF_LB(l, LB_H), out = BUF_LB(l + 1, LB_X), R = BUF_LB(l, LB_ROUTE);
    int D = gather ? BUF_LB(l, LB_DISP) : H, P = BUF_LB(l, LB_PERM), EM = BUF_LB(l, LB_EM), EY = BUF_LB(l, LB_EY);
    int C = gather ? BUF_LB(l, LB_COMB) : out;
    uint32_t normed = p->tp_after;
    build_gemm(p, OP_ROUTER, ph, l, Tsp, E, hid, READS(H, W), WRITES(R));
    kernel(p, OP_ROUTE, TASK_SOFTMAX, ph, l, Tsp, E, READS(R), R);
    if (gather) tpep_coll(p, TASK_ALLGATHER, OP_EP_DISPATCH, ph, l, Ga, H, D);
    kernel(p, OP_PERMUTE, TASK_ADD, ph, l, rows, hid, READS(D, R), P);
    grouped(p, OP_EXPERT_GATE, ph, l, rows, f, hid, READS(P, W), WRITES(EM));
    grouped(p, OP_EXPERT_UP, ph, l, rows, f, hid, READS(P, W), WRITES(EM));
    kernel(p, OP_EXPERT_ACT, TASK_ACT, ph, l, rows, f, READS(EM), EM);
    grouped(p, OP_EXPERT_DOWN, ph, l, rows, hid, f, READS(EM, W), WRITES(EY));
    kernel(p, OP_UNPERMUTE, TASK_ADD, ph, l, rows, hid, READS(EY, R), C);
    if (gather) tpep_coll(p, TASK_REDUCESCATTER, OP_EP_COMBINE, ph, l, Ga, C, out);
    p->tp_after = normed;
    shared_fc1(p, l, ph, H);
    shared_fc2(p, l, ph, out);
}

void build_moe_fwd(prog *p, int l, task_phase ph)
{
    const config *c = p->c;
    if (c->dispatcher == DISPATCH_ALLGATHER) {
        moe_fwd_allgather(p, l, ph);
        return;
    }
    uint64_t hid = (uint64_t)p->m->hidden, E = (uint64_t)p->m->experts, Tsp = config_sp_rows(c, p->T);
    uint64_t routed = Tsp * (uint64_t)p->m->top_k, f = config_ep_expert_ffn(c);
    int me = ep_rank(p), W = BUF_LB(l, LB_W), H = BUF_LB(l, LB_H), out = BUF_LB(l + 1, LB_X);
    uint64_t rows = config_ep_expert_rows(c, me);
    bool ep = c->ep > 1, tp = p->tp > 1 && config_etp(c) > 1;
    int R = BUF_LB(l, LB_ROUTE), P = BUF_LB(l, LB_PERM), D = ep ? BUF_LB(l, LB_DISP) : P;
    int DG = tp ? BUF_LB(l, LB_DISPG) : D, EM = BUF_LB(l, LB_EM), EY = BUF_LB(l, LB_EY);
    int EYS = tp ? BUF_LB(l, LB_EYS) : EY, C = ep ? BUF_LB(l, LB_COMB) : EYS;
    uint32_t normed = p->tp_after; /* the norm's output, which the shared experts' TP gather waits for */
    build_gemm(p, OP_ROUTER, ph, l, Tsp, E, hid, READS(H, W), WRITES(R));
    kernel(p, OP_ROUTE, TASK_SOFTMAX, ph, l, Tsp, E, READS(R), R);
    kernel(p, OP_PERMUTE, TASK_ADD, ph, l, routed, hid, READS(H, R), P);
    ep_alltoall(p, OP_EP_DISPATCH, ph, l, config_ep_send_rows(c, me), P, D);
    if (c->shared_overlap) { /* fc1 on the compute stream while the dispatch is in flight */
        p->tp_after = normed;
        shared_fc1(p, l, ph, H);
    }
    if (tp) tp_rows(p, TASK_ALLGATHER, ph, l, rows, D, DG);
    grouped(p, OP_EXPERT_GATE, ph, l, rows, f, hid, READS(DG, W), WRITES(EM));
    grouped(p, OP_EXPERT_UP, ph, l, rows, f, hid, READS(DG, W), WRITES(EM));
    kernel(p, OP_EXPERT_ACT, TASK_ACT, ph, l, rows, f, READS(EM), EM);
    grouped(p, OP_EXPERT_DOWN, ph, l, rows, hid, f, READS(EM, W), WRITES(EY));
    if (tp) tp_rows(p, TASK_REDUCESCATTER, ph, l, rows, EY, EYS);
    ep_alltoall(p, OP_EP_COMBINE, ph, l, config_ep_return_rows(c, me), EYS, C);
    if (c->shared_overlap) /* fc2 while the combine is in flight */
        shared_fc2(p, l, ph, out);
    kernel(p, OP_UNPERMUTE, TASK_ADD, ph, l, routed, hid, READS(C, R), out);
    if (!c->shared_overlap) {
        p->tp_after = normed;
        shared_fc1(p, l, ph, H);
        shared_fc2(p, l, ph, out);
    }
}

/* The shared experts' backward (build.c's dense MLP backward at their
 * width), from the block output's gradient dY into DH, in the halves of
 * the forward: fc2's (dY gathered over TP, down's dgrad and wgrad, the
 * activation's backward), then fc1's (h gathered again, up and gate,
 * their input gradient reduce-scattered into DH). */
static void shared_bwd_fc2(prog *p, int l, int dY)
{
    uint64_t hid = (uint64_t)p->m->hidden, f = config_ep_shared_ffn(p->c);
    int W = BUF_LB(l, LB_W), G = BUF_LB(l, LB_GRAD), DM = BUF_LB(l, LB_DM);
    if (!f) return;
    const tp_gemm down = {OP_MLP_DOWN, hid, f, {build_tp_buf(p, l, LB_DYG), BUF_LB(l, LB_M), W}, 3, {DM, G}, 2};
    build_tp_column(p, OP_TP_Y, PHASE_BWD, l, dY, build_tp_buf(p, l, LB_DYG), &down, 1);
    kernel(p, OP_ACT, TASK_ACT, PHASE_BWD, l, p->T, f, READS(DM, BUF_LB(l, LB_M)), DM);
}

static void shared_bwd_fc1(prog *p, int l)
{
    uint64_t hid = (uint64_t)p->m->hidden, f = config_ep_shared_ffn(p->c);
    int W = BUF_LB(l, LB_W), G = BUF_LB(l, LB_GRAD), DM = BUF_LB(l, LB_DM), DH = BUF_LB(l, LB_DH);
    if (!f) return;
    build_tp_gather(p, OP_TP_H, PHASE_BWD, l, BUF_LB(l, LB_H), build_tp_buf(p, l, LB_HG));
    const tp_gemm up_gate[2] = {
        {OP_MLP_UP, f, hid, {DM, build_tp_buf(p, l, LB_HG), W}, 3, {build_tp_buf(p, l, LB_DHP), G}, 2},
        {OP_MLP_GATE, f, hid, {DM, build_tp_buf(p, l, LB_HG), W}, 3, {build_tp_buf(p, l, LB_DHP), G}, 2}};
    build_tp_row(p, OP_TP_H, PHASE_BWD, l, up_gate, 2, build_tp_buf(p, l, LB_DHP), DH);
}

static void moe_bwd_allgather(prog *p, int l)
{
    const config *c = p->c;
    uint64_t hid = (uint64_t)p->m->hidden, E = (uint64_t)p->m->experts, Tsp = config_sp_rows(c, p->T);
    uint64_t f = config_ep_expert_ffn(c), rows = config_ep_expert_rows(c, ep_rank(p));
    uint64_t Ga = Tsp * (uint64_t)config_etp(c) * (uint64_t)c->ep;
    bool gather = Ga > Tsp;
    int W = BUF_LB(l, LB_W), G = BUF_LB(l, LB_GRAD), H = BUF_LB(l, LB_H), R = BUF_LB(l, LB_ROUTE);
    int dY = BUF_LB(l + 1, LB_DX), DH = BUF_LB(l, LB_DH), DC = gather ? BUF_LB(l, LB_DCOMB) : dY;
    int C = gather ? BUF_LB(l, LB_COMB) : BUF_LB(l + 1, LB_X), DEY = BUF_LB(l, LB_DEY), DEM = BUF_LB(l, LB_DEM);
    int DDP = BUF_LB(l, LB_DDISPP), DD = gather ? BUF_LB(l, LB_DDISP) : DH, P = BUF_LB(l, LB_PERM);
    shared_bwd_fc2(p, l, dY);
    shared_bwd_fc1(p, l);
    if (gather) tpep_coll(p, TASK_ALLGATHER, OP_EP_COMBINE, PHASE_BWD, l, Ga, dY, DC);
    kernel(p, OP_UNPERMUTE, TASK_ADD, PHASE_BWD, l, rows, hid, READS(DC, R, C), DEY);
    grouped(p, OP_EXPERT_DOWN, PHASE_BWD, l, rows, hid, f, READS(DEY, BUF_LB(l, LB_EM), W), WRITES(DEM, G));
    kernel(p, OP_EXPERT_ACT, TASK_ACT, PHASE_BWD, l, rows, f, READS(DEM, BUF_LB(l, LB_EM)), DEM);
    grouped(p, OP_EXPERT_UP, PHASE_BWD, l, rows, f, hid, READS(DEM, P, W), WRITES(DDP, G));
    grouped(p, OP_EXPERT_GATE, PHASE_BWD, l, rows, f, hid, READS(DEM, P, W), WRITES(DDP, G));
    kernel(p, OP_PERMUTE, TASK_ADD, PHASE_BWD, l, rows, hid, READS(DDP), DD);
    if (gather) tpep_coll(p, TASK_REDUCESCATTER, OP_EP_DISPATCH, PHASE_BWD, l, Ga, DD, DH);
    kernel(p, OP_ROUTE, TASK_SOFTMAX, PHASE_BWD, l, Tsp, E, READS(R, DC), R);
    build_gemm(p, OP_ROUTER, PHASE_BWD, l, Tsp, E, hid, READS(R, H, W), WRITES(DH, G));
}

void build_moe_bwd(prog *p, int l)
{
    const config *c = p->c;
    if (c->dispatcher == DISPATCH_ALLGATHER) {
        moe_bwd_allgather(p, l);
        return;
    }
    uint64_t hid = (uint64_t)p->m->hidden, E = (uint64_t)p->m->experts, Tsp = config_sp_rows(c, p->T);
    uint64_t routed = Tsp * (uint64_t)p->m->top_k, f = config_ep_expert_ffn(c);
    int me = ep_rank(p), W = BUF_LB(l, LB_W), G = BUF_LB(l, LB_GRAD), H = BUF_LB(l, LB_H);
    int dY = BUF_LB(l + 1, LB_DX), DH = BUF_LB(l, LB_DH);
    uint64_t rows = config_ep_expert_rows(c, me);
    bool ep = c->ep > 1, tp = p->tp > 1 && config_etp(c) > 1;
    int R = BUF_LB(l, LB_ROUTE), DC = BUF_LB(l, LB_DCOMB), DEYS = ep ? BUF_LB(l, LB_DEYS) : DC;
    int DEY = tp ? BUF_LB(l, LB_DEY) : DEYS, DEM = BUF_LB(l, LB_DEM), DDP = BUF_LB(l, LB_DDISPP);
    int DD = tp ? BUF_LB(l, LB_DDISP) : DDP, DP = ep ? BUF_LB(l, LB_DPERM) : DD;
    int DG = tp ? BUF_LB(l, LB_DISPG) : ep ? BUF_LB(l, LB_DISP) : BUF_LB(l, LB_PERM);
    if (!c->shared_overlap) shared_bwd_fc2(p, l, dY), shared_bwd_fc1(p, l);
    kernel(p, OP_UNPERMUTE, TASK_ADD, PHASE_BWD, l, routed, hid, READS(dY, R, BUF_LB(l, LB_COMB)), DC);
    ep_alltoall(p, OP_EP_COMBINE, PHASE_BWD, l, config_ep_send_rows(c, me), DC, DEYS);
    if (c->shared_overlap) shared_bwd_fc2(p, l, dY); /* while the combine's gradient is in flight */
    if (tp) tp_rows(p, TASK_ALLGATHER, PHASE_BWD, l, rows, DEYS, DEY);
    grouped(p, OP_EXPERT_DOWN, PHASE_BWD, l, rows, hid, f, READS(DEY, BUF_LB(l, LB_EM), W), WRITES(DEM, G));
    kernel(p, OP_EXPERT_ACT, TASK_ACT, PHASE_BWD, l, rows, f, READS(DEM, BUF_LB(l, LB_EM)), DEM);
    grouped(p, OP_EXPERT_UP, PHASE_BWD, l, rows, f, hid, READS(DEM, DG, W), WRITES(DDP, G));
    grouped(p, OP_EXPERT_GATE, PHASE_BWD, l, rows, f, hid, READS(DEM, DG, W), WRITES(DDP, G));
    if (tp) tp_rows(p, TASK_REDUCESCATTER, PHASE_BWD, l, rows, DDP, DD);
    ep_alltoall(p, OP_EP_DISPATCH, PHASE_BWD, l, config_ep_return_rows(c, me), DD, DP);
    if (c->shared_overlap) shared_bwd_fc1(p, l); /* while the dispatch's gradient is in flight */
    kernel(p, OP_PERMUTE, TASK_ADD, PHASE_BWD, l, routed, hid, READS(DP), DH);
    kernel(p, OP_ROUTE, TASK_SOFTMAX, PHASE_BWD, l, Tsp, E, READS(R, DC), R);
    build_gemm(p, OP_ROUTER, PHASE_BWD, l, Tsp, E, hid, READS(R, H, W), WRITES(DH, G));
}

/* A collective over the expert-data-parallel group of `elems` expert
 * parameters' gradients (reduce) or parameters (gather), sized like the
 * gradient group's (build_grad.c): for the DAG's members of it, or with
 * one member for the replicas'. */
static void edp_coll(prog *p, task_kind kind, int layer, uint64_t elems, int first, int last)
{
    int members = bt_group_size(p->b, p->edp_gid); /* the DAG's; with one, the replicas' (loong sim's count) */
    uint64_t n = members > 1 ? (uint64_t)members : (uint64_t)p->c->dp;
    if (config_edp(p->c) == 1 || !elems) return; /* each rank holds its own experts: nothing to reduce */
    task_op op = kind == TASK_ALLGATHER ? OP_PARAM_ALLGATHER : OP_EXPERT_GRAD;
    build_grad_coll_on(p, STREAM_EP_GRAD, p->edp_gid, n, kind, op, layer, elems, first, last, -1);
}

void build_ep_grad_block(prog *p, int l)
{
    if (!model_block_moe(p->m, l)) return;
    uint64_t ep = config_ep_expert_params(p->c);
    if (p->c->zero == 0) edp_coll(p, TASK_ALLREDUCE, l, ep, l, l);
    if (p->c->zero == 2) edp_coll(p, TASK_REDUCESCATTER, l, ep, l, l);
}

/* The experts' parameters of the rank's stage. */
static uint64_t stage_expert_params(const prog *p)
{
    return (uint64_t)pipe_stage_moe_blocks(p->c, p->stage) * config_ep_expert_params(p->c);
}

void build_ep_grad_step_scatter(prog *p)
{
    if (config_moe(p->c) && p->c->zero == 1)
        edp_coll(p, TASK_REDUCESCATTER, -1, stage_expert_params(p), 0, p->m->layers - 1);
}

void build_ep_grad_step_gather(prog *p)
{
    if (config_moe(p->c) && (p->c->zero == 1 || p->c->zero == 2))
        edp_coll(p, TASK_ALLGATHER, -1, stage_expert_params(p), 0, p->m->layers - 1);
}

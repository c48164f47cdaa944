/* analytic_ep: a mixture of experts' MLP in the analytic step model
 * (analytic_internal.h), as core/build_ep.c emits it, on the busiest EP
 * rank (the one whose experts draw the most rows sets the pace at the
 * all-to-alls): its GEMMs and kernels, the dispatch and combine over the
 * EP group, the routed rows' expert-TP collectives, and the experts' gradient
 * collectives over the expert-data-parallel group. */
#include "analytic_internal.h"

#include <math.h>
#include <stdlib.h>

#include "core/xalloc.h"

/* The GPUs of the first `most` members of the rank-0 group over dims,
 * ascending (NCCL's order); *N gets their count. The caller frees them. */
static int *group_gpus(const config *c, mesh_dims dims, int most, int *N)
{
    mesh m = config_mesh(c);
    int n = mesh_group_size(&m, dims), *g = xmalloc_array((size_t)n, sizeof *g, "an expert group"), k;
    mesh_group_members(&m, dims, 0, g);
    k = n < most ? n : most;
    analytic_gpus_of(c, g, k);
    *N = k;
    return g;
}

/* Rank 0's EP group (or expert-data-parallel group) when it spans TP
 * ranks: config_ep_members' list in replica 0, and the same members of
 * the replicas it spans; on their GPUs. The caller frees them. */
static int *members_across_tp(const config *c, ep_group_kind kind, int *N)
{
    mesh m = config_mesh(c);
    int stride, count, *in = xmalloc_array((size_t)config_ranks(c), sizeof *in, "an expert group");
    int k = config_ep_members(c, 0, kind, in, &stride, &count);
    if (!count) stride = 1, count = kind == EP_GROUP_EDP ? c->dp : 1; /* within a replica; an edp group in every one */
    int *g = xmalloc_array((size_t)k * (size_t)count, sizeof *g, "an expert group");
    for (int r = 0; r < count; r++)
        for (int i = 0; i < k; i++)
            g[r * k + i] = mesh_unfold(&m, MESH_DIMS_DP, in[i], r * stride);
    free(in);
    analytic_gpus_of(c, g, k * count);
    *N = k * count;
    return g;
}

/* NCCL's time of op at nccl-tests size `size` over the N GPUs g of an
 * expert group whose every copy runs at once, so a NIC carries its ranks'
 * flows; -1 on a platform without NCCL's model. */
static double expert_group_nccl(const config *c, const platform_spec *n, const int *g, int N, coll_op op, double size)
{
    nccl_group grp;
    if (nccl_group_init(&grp, n, g, N) != 0) return -1;
    int mates[64], share = nic_mates(n, g[0], config_ranks(c), mates);
    if (grp.nnodes > 1 && share > grp.per_nic) grp.per_nic = share;
    double t = nccl_seconds(c, n, &grp, op, size);
    nccl_group_free(&grp);
    return t;
}

/* An all-to-all over EP group 0 sending `bytes` per rank to the others. */
static double ep_alltoall(const config *c, const platform_spec *n, double bytes)
{
    int N, *g = config_ep_spans_tp(c) ? members_across_tp(c, EP_GROUP, &N)
                                      : group_gpus(c, CONFIG_GRAD_DIMS, c->ep, &N); /* the context ranks, then the
                                                                                      replicas' */
    double t = N > 1 && bytes > 0 ? expert_group_nccl(c, n, g, N, COLL_ALLTOALL, bytes * N / (N - 1)) : 0;
    if (t < 0) { /* a platform without NCCL's model: one flow per peer */
        t = 0;
        for (int i = 1; i < N; i++)
            t += flow(&(link){0, link_between(n, g[0], g[i]).bw, false}, bytes / (N - 1));
        t += link_between(n, g[0], g[N - 1]).lat;
    }
    free(g);
    return t;
}

/* The all-gather dispatcher's collective of nccl-tests size `size` over
 * rank 0's expert-TP x EP group. */
static double tp_ep_coll(const config *c, const platform_spec *n, coll_op op, double size)
{
    int N, *g = members_across_tp(c, EP_GROUP_TP_EP, &N);
    double t = N > 1 && size > 0 ? expert_group_nccl(c, n, g, N, op, size) : 0;
    if (t < 0) { /* a platform without NCCL's model: one ring over the members, at its slowest link */
        link worst = link_between(n, g[0], g[1]);
        for (int i = 1; i < N; i++) {
            link l = link_between(n, g[i], g[(i + 1) % N]);
            if (l.bw < worst.bw) worst = l;
        }
        t = flow(&worst, size * (N - 1) / N);
    }
    free(g);
    return t;
}

/* The busiest EP rank and its rows. */
static int busiest(const config *c)
{
    int most = 0;
    for (int i = 1; i < c->ep; i++)
        if (config_ep_expert_rows(c, i) > config_ep_expert_rows(c, most)) most = i;
    return most;
}

/* A grouped GEMM of `rows` over the rank's local experts: one GEMM per
 * expert of the mean rows (build_ep.c's task), as calib times the task. */
static double grouped(const config *c, const calib *cb, double rows, double nn, double k, bool bwd)
{
    int local = config_ep_local_experts(c);
    return calib_grouped_gemm_seconds(cb, c->precision, local, rows / local, nn, k, bwd, c->act_bytes);
}

/* The shared experts' halves (build_ep.c): fc1, gate and up and the
 * activation; fc2, down. */
static void shared_halves(const config *c, const calib *cb, bool bwd, double *fc1, double *fc2)
{
    double hid = c->model.hidden, fs = (double)config_ep_shared_ffn(c), T = (double)config_local_tokens(c);
    *fc1 = *fc2 = 0;
    if (fs <= 0) return;
    *fc1 = 2 * gemm(c, cb, T, fs, hid, bwd) +
           calib_elementwise_seconds(cb, c, OP_ACT, bwd ? PHASE_BWD : PHASE_FWD, (uint64_t)(T * fs));
    *fc2 = gemm(c, cb, T, hid, fs, bwd);
}

/* One block's compute, forward or backward. */
static double moe_compute(const config *c, const calib *cb, int me, bool bwd)
{
    const model *m = &c->model;
    double hid = m->hidden, E = m->experts, Tsp = (double)config_sp_rows(c, config_local_tokens(c));
    double rows = (double)config_ep_expert_rows(c, me), f = (double)config_ep_expert_ffn(c);
    double fs = (double)config_ep_shared_ffn(c), T = (double)config_local_tokens(c), routed = Tsp * m->top_k;
    task_phase ph = bwd ? PHASE_BWD : PHASE_FWD;
    double t =
        gemm(c, cb, Tsp, E, hid, bwd) + 2 * grouped(c, cb, rows, f, hid, bwd) + grouped(c, cb, rows, hid, f, bwd);
    t += calib_elementwise_seconds(cb, c, OP_ROUTE, ph, (uint64_t)(Tsp * E)) +
         2 * calib_elementwise_seconds(cb, c, OP_PERMUTE, ph, (uint64_t)(routed * hid)) +
         calib_elementwise_seconds(cb, c, OP_EXPERT_ACT, ph, (uint64_t)(rows * f));
    if (fs > 0)
        t += 2 * gemm(c, cb, T, fs, hid, bwd) + gemm(c, cb, T, hid, fs, bwd) +
             calib_elementwise_seconds(cb, c, OP_ACT, ph, (uint64_t)(T * fs));
    return t;
}

/* The experts' gradient collective of `elems` over the expert-data-
 * parallel group of rank 0 (build_ep.c's edp_coll), the DAG's members or
 * with one member the replicas'. */
static double edp_coll(const config *c, const platform_spec *n, uint64_t elems, bool allreduce, int bytes)
{
    mesh m = config_mesh(c);
    int k = 0, all = mesh_group_size(&m, CONFIG_GRAD_DIMS), *mem;
    if (config_ep_spans_tp(c))
        mem = members_across_tp(c, EP_GROUP_EDP, &k);
    else {
        mem = xmalloc_array((size_t)all, sizeof *mem, "a group");
        mesh_group_members(&m, CONFIG_GRAD_DIMS, 0, mem);
        for (int i = 0; i < all; i += c->ep) /* member i is at index i of the gradient group */
            mem[k++] = mem[i];
        analytic_gpus_of(c, mem, k);
    }
    double t = elems && k > 1 ? analytic_grad_coll(c, n, mem, k, elems, allreduce, bytes) : 0;
    free(mem);
    return t;
}

double analytic_ep_grad(const config *c, const platform_spec *n, int blocks, bool allreduce, int bytes)
{
    if (!config_moe(c)) return 0;
    return edp_coll(c, n, (uint64_t)blocks * config_ep_expert_params(c), allreduce, bytes);
}

moecost analytic_moe_costs(const config *c, const calib *cb, const platform_spec *n)
{
    moecost k = {0};
    if (!config_moe(c)) return k;
    k.on = true;
    int me = busiest(c);
    double row = (double)c->model.hidden * c->act_bytes, rows = (double)config_ep_expert_rows(c, me);
    k.fwd = moe_compute(c, cb, me, false);
    k.bwd = moe_compute(c, cb, me, true);
    if (c->dispatcher == DISPATCH_ALLGATHER) { /* build_ep.c: gather and reduce-scatter Ga rows, no expert-TP ones */
        double ga = (double)config_sp_rows(c, config_local_tokens(c)) * config_etp(c) * c->ep * row;
        k.comm_fwd = k.comm_bwd = tp_ep_coll(c, n, COLL_ALL_GATHER, ga) + tp_ep_coll(c, n, COLL_REDUCE_SCATTER, ga);
        return k;
    }
    double dispatch = ep_alltoall(c, n, (double)config_ep_send_rows(c, me) * row);
    double combine = ep_alltoall(c, n, (double)config_ep_return_rows(c, me) * row);
    double tp = c->tp > 1 && config_etp(c) > 1 ? analytic_etp_coll(c, n, COLL_ALL_GATHER, rows * row) +
                                                     analytic_etp_coll(c, n, COLL_REDUCE_SCATTER, rows * row)
                                               : 0;
    k.comm_fwd = k.comm_bwd = dispatch + combine + tp;
    if (c->shared_overlap) { /* the halves hide the all-to-alls they run beside (build_ep.c) */
        double f1, f2, b1, b2;
        shared_halves(c, cb, false, &f1, &f2);
        shared_halves(c, cb, true, &b1, &b2);
        k.comm_fwd = fmax(dispatch - f1, 0) + fmax(combine - f2, 0) + tp;
        k.comm_bwd = fmax(combine - b2, 0) + fmax(dispatch - b1, 0) + tp;
    }
    return k;
}

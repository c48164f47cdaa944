/* analytic_grad: the gradient reduction of the analytic step model
 * (analytic_internal.h): the collectives over the gradient group
 * (CONFIG_GRAD_DIMS: the context ranks and the data-parallel replicas)
 * that core/build_grad.c emits, ZeRO stage by stage. */
#include "analytic_internal.h"

#include <stdlib.h>

#include "core/sizes.h"
#include "core/xalloc.h"

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

/* One gradient collective of `elems` elements (DAG sizes) over the
 * gradient group of rank 0, members from the mesh: NCCL's on a GPU
 * platform (as many nodes as they take), else one ring. */
double analytic_grad_coll(const config *c, const platform_spec *n, const int *members, int N, uint64_t elems,
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

dpcost analytic_grad_costs(const config *c, const platform_spec *n)
{
    mesh m = config_mesh(c);
    int N = mesh_group_size(&m, CONFIG_GRAD_DIMS), *g = xmalloc_array((size_t)N, sizeof *g, "the gradient group");
    mesh_group_members(&m, CONFIG_GRAD_DIMS, 0, g);
    const model *md = &c->model;
    uint64_t lp = model_layer_params_tp(md, c->tp), all = model_params_tp(md, c->tp),
             hp = model_head_params_tp(md, c->tp);
    dpcost k = {analytic_grad_coll(c, n, g, N, lp, true),
                analytic_grad_coll(c, n, g, N, lp, false),
                analytic_grad_coll(c, n, g, N, lp, false),
                analytic_grad_coll(c, n, g, N, hp, true),
                analytic_grad_coll(c, n, g, N, hp, false),
                analytic_grad_coll(c, n, g, N, hp, false),
                analytic_grad_coll(c, n, g, N, all, false),
                analytic_grad_coll(c, n, g, N, all, false),
                N > n->gpus_per_node};
    free(g);
    return k;
}

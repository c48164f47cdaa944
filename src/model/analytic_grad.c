/* analytic_grad: the gradient reduction of the analytic step model
 * (analytic_internal.h): the collectives over the gradient group
 * (CONFIG_GRAD_DIMS: the context ranks and the data-parallel replicas)
 * that core/build_grad.c emits, ZeRO stage by stage. */
#include "analytic_internal.h"

#include <stdlib.h>

#include "core/sizes.h"
#include "core/xalloc.h"

/* One pipelined ring collective over `members` (N ranks) in their order:
 * every member sends `bytes` to its successor at once; the slowest hop
 * decides. The members are the gradient group's, which skip the tp and pp
 * ranks between them: the ring's hops are theirs, not ranks 0..N-1's. */
static double dp_ring(const platform_spec *n, const int *members, int N, double bytes)
{
    if (N <= 1) return 0;
    link worst = link_between(n, members[0], members[1]);
    for (int i = 1; i < N; i++) {
        link l = link_between(n, members[i], members[(i + 1) % N]);
        if (l.lat + bytes / l.bw > worst.lat + bytes / worst.bw) worst = l;
    }
    return flow(&worst, bytes);
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The GPUs of loong's ranks members[0..N-1] (config_gpu_of), ascending:
 * NCCL's ring order. */
void analytic_gpus_of(const config *c, int *members, int N)
{
    for (int i = 0; i < N; i++)
        members[i] = config_gpu_of(c, members[i]);
    qsort(members, (size_t)N, sizeof *members, cmp_int);
}

/* One collective of `elems` elements (DAG sizes) of elem_bytes each over
 * the gradient group of rank 0, members from the mesh: NCCL's on a GPU
 * platform (as many nodes as they take), else one ring. */
double analytic_grad_coll(const config *c, const platform_spec *n, const int *members, int N, uint64_t elems,
                          bool allreduce, int elem_bytes)
{
    if (N > 1 && n->nccl) {
        platform_spec big = nccl_spec_holding(n, members[N - 1] + 1, 0);
        nccl_group g;
        if (nccl_group_init(&g, &big, members, N) == 0) {
            double t = nccl_seconds(c, &big, &g, allreduce ? COLL_ALL_REDUCE : COLL_REDUCE_SCATTER,
                                    (double)elems * elem_bytes);
            nccl_group_free(&g);
            return t;
        }
    }
    return dp_ring(n, members, N, (double)size_ring_coll_bytes(elems, elem_bytes, (uint64_t)N, allreduce));
}

dpcost analytic_grad_costs(const config *c, const platform_spec *n)
{
    mesh m = config_mesh(c);
    int N = mesh_group_size(&m, CONFIG_GRAD_DIMS), *g = xmalloc_array((size_t)N, sizeof *g, "the gradient group");
    mesh_group_members(&m, CONFIG_GRAD_DIMS, 0, g);
    analytic_gpus_of(c, g, N);
    placement p = platform_spec_placement(n);
    bool multinode = placement_group_nodes(&p, g, N) > 1;
    const model *md = &c->model;
    /* the experts' gradients go over their own group (analytic_ep.c) */
    uint64_t lp = model_layer_params_tp(md, c->tp),
             all = model_params_tp(md, c->tp) - (uint64_t)model_moe_blocks(md) * model_expert_params_tp(md, c->tp),
             hp = model_head_params_tp(md, c->tp);
    int gb = config_grad_bytes(c), pb = c->act_bytes; /* gradients, parameters */
    dpcost k = {analytic_grad_coll(c, n, g, N, lp, true, gb),
                analytic_grad_coll(c, n, g, N, lp, false, gb),
                analytic_grad_coll(c, n, g, N, lp, false, pb),
                analytic_grad_coll(c, n, g, N, hp, true, gb),
                analytic_grad_coll(c, n, g, N, hp, false, gb),
                analytic_grad_coll(c, n, g, N, hp, false, pb),
                analytic_grad_coll(c, n, g, N, all, false, gb),
                analytic_grad_coll(c, n, g, N, all, false, pb),
                multinode};
    free(g);
    int L = model_moe_blocks(&c->model); /* the blocks with experts */
    k.ar_layer += analytic_ep_grad(c, n, 1, true, gb);
    k.rs_layer += analytic_ep_grad(c, n, 1, false, gb);
    k.rs_all += analytic_ep_grad(c, n, L, false, gb);
    k.ag_all += analytic_ep_grad(c, n, L, false, pb);
    return k;
}

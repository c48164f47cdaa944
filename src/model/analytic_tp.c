/* analytic_tp: tensor parallelism in the analytic step model
 * (analytic_internal.h): the TP collectives of one layer as
 * core/build_tp.c emits them, and --tp-overlap's ring-exchange pairs. */
#include "analytic_internal.h"

#include <stdlib.h>

#include "core/pipeline.h"
#include "core/sizes.h"
#include "core/xalloc.h"

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

double analytic_tp_coll(const config *c, const platform_spec *n, coll_op op, double size)
{
    return tp_coll_of(c, n, c->tp, op, size);
}
#define tp_coll analytic_tp_coll

double analytic_etp_coll(const config *c, const platform_spec *n, coll_op op, double size)
{
    return tp_coll_of(c, n, config_etp(c), op, size); /* the expert-TP group: TP group 0's first etp */
}

tpcost analytic_tp_costs(const config *c, const platform_spec *n)
{
    tpcost k = {0};
    if (c->tp == 1) return k;
    k.kv_rep =
        tp_coll_of(c, n, config_tp_kv_repl(c), COLL_ALL_REDUCE,
                   2.0 * c->model.head_dim * c->model.hidden * c->act_bytes); /* build_tp.c's build_tp_kv_grads */
    double act = (double)config_local_tokens(c) * c->model.hidden * c->act_bytes;
    double loss = tp_coll(c, n, COLL_ALL_REDUCE, 3.0 * (double)config_local_tokens(c) * 4);
    if (c->sequence_parallel) {
        double ag = tp_coll(c, n, COLL_ALL_GATHER, act), rs = tp_coll(c, n, COLL_REDUCE_SCATTER, act);
        /* a mixture of experts without shared experts gathers no MLP
         * input: its routed rows' collectives are analytic_ep.c's */
        double mlp = config_moe(c) && !c->model.shared_ffn ? 0 : ag + rs;
        k.fwd = ag + rs + mlp;
        k.part[0] = ag, k.part[1] = rs, k.part[2] = mlp;
        /* the inputs gathered again for the weight gradients run beside
         * down's backward and attention's (build_tp.c): hidden */
        k.bwd = ag + rs + mlp;
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

/* --tp-overlap: one ring-exchange pair as build_tp.c emits it, tp chunk
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
void analytic_tp_overlap_costs(const config *c, const calib *cb, const platform_spec *n, tpcost *k)
{
    if (!c->tp_overlap) return;
    const model *m = &c->model;
    int tp = c->tp;
    double T = (double)config_local_tokens(c), rows = T / tp, hid = m->hidden, d = m->head_dim;
    double ffn = (double)m->ffn / tp, qkv = (double)model_tp_qkv_heads(m, tp) * d, o = (double)config_tp_attn_width(c);
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

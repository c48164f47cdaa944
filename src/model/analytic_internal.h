/*
 * analytic_internal: what the files of the analytic step model share. The
 * model is cut by parallel dimension, one file each, so that a dimension
 * is read in its file alone:
 *   analytic.c       the layer's cost (GEMMs, kernels, head all-to-alls)
 *                    and the step walk without a pipeline, analytic_step();
 *   analytic_ring.c  the sequence dimension: ring attention (and
 *                    --ring allgather) on one ring index;
 *   analytic_tp.c    tensor parallelism: the TP collectives of a layer and
 *                    --tp-overlap's ring-exchange pairs;
 *   analytic_pp.c    pipeline parallelism: the stages' passes as a
 *                    critical-path recurrence, then their gradient
 *                    reductions;
 *   analytic_grad.c  the gradient reduction over the gradient group
 *                    (data parallelism and the context ranks; ZeRO).
 * The links and small cost helpers below are static inline: every file
 * times a flow or a kernel alike. Only these files include this header.
 *
 * Layer: model.
 */
#ifndef LOONG_ANALYTIC_INTERNAL_H
#define LOONG_ANALYTIC_INTERNAL_H

#include "analytic.h"
#include "nccl.h"
#include "tiles.h"

#include "core/elementwise.h"

static inline double maxd(double a, double b) { return a > b ? a : b; }
static inline double mind(double a, double b) { return a < b ? a : b; }

/* ---- links ---- */

typedef struct link {
    double lat, bw;
    bool nic; /* crosses nodes */
} link;

/* The path between GPUs a and b (platform GPU indices, placed by
 * core/placement.h) for one flow that has the NIC to itself. */
static inline link link_between(const platform_spec *n, int a, int b)
{
    placement p = platform_spec_placement(n);
    int na = placement_node(&p, a), nb = placement_node(&p, b);
    if (na == nb) return (link){2 * n->nvlink_lat, platform_spec_p2p_nvl_bw(n), false};
    bool spine = placement_nic(&p, a) != placement_nic(&p, b) || na / n->nodes_per_leaf != nb / n->nodes_per_leaf;
    int pod = platform_spec_pod_nodes(n);
    bool core = spine && pod && na / pod != nb / pod; /* a rail fabric of three tiers */
    double bw = n->nic_bw / (spine ? n->oversub : 1) / (core ? n->spine_oversub : 1);
    return (link){2 * n->nic_lat + (spine ? 2 * n->uplink_lat : 0) + (core ? 2 * n->uplink_lat : 0), bw, true};
}

/* Divide a NIC link's bandwidth among `share` concurrent flows. */
static inline link shared(link l, int share)
{
    if (l.nic && share > 1) l.bw /= share;
    return l;
}

/* GPUs (ranks < P) on the NIC of rank r, r included. */
static inline int nic_mates(const platform_spec *n, int r, int P, int *mates)
{
    placement p = platform_spec_placement(n);
    int k = 0, node = placement_node(&p, r), nic = placement_nic(&p, r);
    for (int g = 0; g < p.gpus_per_node; g++) {
        int q = placement_rank(&p, node, g);
        if (q < P && placement_nic(&p, q) == nic) mates[k++] = q;
    }
    return k;
}

/* Seconds for one flow of `bytes` on l. */
static inline double flow(const link *l, double bytes) { return bytes > 0 ? l->lat + bytes / l->bw : 0; }

/* A kernel of b seconds alone, with a communication kernel of x seconds
 * beside it from its start, slowed by interference f while they overlap
 * (calib.h: it progresses at 1/(1+f) of its rate meanwhile). */
static inline double overlapped(double b, double x, double f)
{
    if (f <= 0 || x <= 0) return b;
    return x >= b * (1 + f) ? b * (1 + f) : b + x * f / (1 + f);
}

/* The ring attention of one layer (analytic_ring.c). */
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

/* NCCL's time for collective op of `size` (nccl-tests' size) over group g
 * (model/nccl.h), with the config's forced algorithm and protocol. */
static inline double nccl_seconds(const config *c, const platform_spec *n, const nccl_group *g, coll_op op, double size)
{
    nccl_plan p;
    nccl_plan_lenient(n, g, op, size, (int)c->nccl_algo - 1, (int)c->nccl_proto - 1, &p);
    return p.seconds;
}

/* The gradient collectives of the step (ZeRO stages), seconds each. */
typedef struct dpcost {
    double ar_layer, rs_layer, ag_layer, ar_head, rs_head, ag_head, rs_all, ag_all;
    bool multinode; /* the gradient group crosses nodes */
} dpcost;

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

typedef struct layer_cost {
    double fwd, bwd;           /* critical path of one layer, seconds */
    double fwd_busy, bwd_busy; /* compute-stream part */
    double a2a, ring_wait;
    double tp;      /* TP collectives (exposed: the GEMMs wait for them) */
    double nic_bwd; /* seconds of the backward the ring keeps a NIC busy */
} layer_cost;

/* The cost of block l: lc[1] for a block with experts, lc[0] for a dense
 * one (a mixture of experts' leading dense blocks; every block of a dense
 * model). */
static inline const layer_cost *block_cost(const config *c, const layer_cost lc[2], int l)
{
    return &lc[model_block_moe(&c->model, l)];
}

/* Of blocks [first, first + n), how many have experts. */
static inline int moe_blocks_in(const config *c, int first, int n)
{
    int k = 0;
    for (int l = first; l < first + n; l++)
        k += model_block_moe(&c->model, l);
    return k;
}

/* One GEMM task as the DAG's (m, n, k): by FLOPs, or by its shapes when the
 * table has them (a backward: its dgrad and wgrad). */
static inline double gemm(const config *c, const calib *cb, double m, double n, double k, bool bwd)
{
    return calib_gemm_prec_seconds(cb, c->precision, m, n, k, bwd, c->act_bytes);
}

/* The LM head's GEMM, which stays bf16 under the FP8 recipes (Megatron's
 * output layer is not a Transformer Engine module). */
static inline double head_gemm(const config *c, const calib *cb, double m, double n, double k, bool bwd)
{
    return calib_gemm_task_seconds(cb, m, n, k, bwd, c->act_bytes);
}

/* One memory-bound kernel of op (elementwise.h) on a rank of `stage`, as
 * the calibration table times its task. */
static inline double elementwise_seconds(const config *c, const calib *cb, task_op op, bool bwd, int stage)
{
    uint64_t rows, cols;
    elementwise_shape(c, op, stage, &rows, &cols);
    return calib_elementwise_seconds(cb, c, op, bwd ? PHASE_BWD : PHASE_FWD, rows * cols);
}

/* The FP8 weights' cast at the step's start, on `stage` (0 under bf16). */
static inline double weight_casts(const config *c, const calib *cb, int stage)
{
    return c->precision == PRECISION_BF16 ? 0 : elementwise_seconds(c, cb, OP_QUANT_W, false, stage);
}

/* The kernels around the blocks: the embedding's on the first stage, the
 * final norm's and the loss's on the last; forward and backward. */
typedef struct head_elementwise {
    double first_f, first_b, last_f, last_b;
} head_elementwise;

static inline head_elementwise head_elementwise_of(const config *c, const calib *cb)
{
    head_elementwise h;
    h.first_f = elementwise_seconds(c, cb, OP_EMBED, false, 0);
    h.first_b = elementwise_seconds(c, cb, OP_EMBED, true, 0);
    h.last_f = elementwise_seconds(c, cb, OP_NORM_FINAL, false, 0) + elementwise_seconds(c, cb, OP_LOSS, false, 0);
    h.last_b = elementwise_seconds(c, cb, OP_NORM_FINAL, true, 0) + elementwise_seconds(c, cb, OP_LOSS, true, 0);
    return h;
}

/* ---- analytic_ring.c: the sequence dimension ---- */

/* Set r up for c's ring (or all-gather) on platform n. */
void analytic_ring_setup(ringctx *r, const config *c, const calib *cb, const platform_spec *n);
/* One layer's ring attention forward and backward at ring index s:
 * the critical path; *busy gets its compute. */
double analytic_ring_fwd(const ringctx *r, int s, double *busy);
double analytic_ring_bwd(const ringctx *r, int s, double *busy);
/* The same under --ring allgather. */
double analytic_gather_pass(const ringctx *r, int s, bool bwd, double *busy);

/* ---- analytic_tp.c: tensor parallelism ---- */

/* The TP collectives of one layer, the LM head, the embedding and the
 * norm gradients (zero at tp 1). */
tpcost analytic_tp_costs(const config *c, const platform_spec *n);
/* One collective of nccl-tests size `size` over TP group 0. */
double analytic_tp_coll(const config *c, const platform_spec *n, coll_op op, double size);
/* The same over the experts' TP group (config_etp: tp's first etp). */
double analytic_etp_coll(const config *c, const platform_spec *n, coll_op op, double size);

/* ---- analytic_ep.c: mixture of experts, expert parallelism ---- */

/* A mixture of experts' MLP in one block, on the busiest EP rank, as
 * core/build_ep.c emits it (all zero for a dense model). */
typedef struct moecost {
    bool on;                   /* the block has experts (else the dense MLP's costs apply) */
    double fwd, bwd;           /* GEMMs and kernels: router, grouped experts, shared experts */
    double comm_fwd, comm_bwd; /* dispatch and combine all-to-alls, the routed rows' TP collectives */
} moecost;
moecost analytic_moe_costs(const config *c, const calib *cb, const platform_spec *n);
/* The experts' gradient collective (build_ep.c's) over the expert-data-
 * parallel group of rank 0 for `blocks` blocks' experts: an all-reduce of
 * gradients, or a reduce-scatter of gradients (bytes: config_grad_bytes)
 * or all-gather of parameters (bytes: act_bytes). 0 for a dense model. */
double analytic_ep_grad(const config *c, const platform_spec *n, int blocks, bool allreduce, int bytes);
/* --tp-overlap: replace k's per-block costs with the ring-exchange pairs'. */
void analytic_tp_overlap_costs(const config *c, const calib *cb, const platform_spec *n, tpcost *k);

/* ---- analytic_grad.c: the gradient reduction ---- */

/* The GPUs of loong's ranks members[0..N-1] (config_gpu_of), ascending:
 * NCCL's ring order (analytic_grad.c). */
void analytic_gpus_of(const config *c, int *members, int N);
/* One collective of `elems` elements of elem_bytes each over the N members
 * of the gradient group: an all-reduce, else a reduce-scatter (an
 * all-gather costs the same): gradients in config_grad_bytes, parameters
 * in act_bytes. */
double analytic_grad_coll(const config *c, const platform_spec *n, const int *members, int N, uint64_t elems,
                          bool allreduce, int elem_bytes);
/* The step's gradient collectives over rank 0's gradient group. */
dpcost analytic_grad_costs(const config *c, const platform_spec *n);

/* ---- analytic_pp.c: pipeline parallelism ---- */

/* The step of a pipeline (or of micro-batches at pp 1), every block
 * costing lc, into out (bubble included). */
void analytic_pp_walk(const config *c, const calib *cb, const platform_spec *n, const layer_cost lc[2],
                      const tpcost *tk, analytic_result *out);

#endif

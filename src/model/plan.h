/*
 * plan: the layouts behind `loong plan` — enumerate every layout of a GPU
 * count, remove the infeasible ones with a reason each, score the rest
 * (memory model + analytical model), rank them and write the ranked table,
 * CSV and JSON (plan_write.c). The search around it (document draws, the
 * simulations of the best layouts, --robust) is plan_search.h's; running
 * simulations and splitting the work over MPI ranks are the CLI's, behind
 * plan_search.h's runner.
 *
 * A layout is a config (scope step) on a device mesh of the GPUs (mesh.h):
 * dp replicas of pp pipeline stages of tp x P_h x P_s ranks, P = P_h x P_s
 * the head x context-parallel mesh of the attention. The request fixes or
 * searches each dimension's degree (plan_request.degree); every
 * factorisation of the GPUs it takes is enumerated, and for each: the
 * micro-batches of the global batch and, with pp > 1, the schedule; the
 * ZeRO stage and recompute policy when searched; placement (head-first,
 * and context-first when both P_h and P_s exceed 1); partition and ring
 * mode (P_s = 1: one layout; else contiguous with the single ring, the
 * all-gather or the double ring at every window w < P_s dividing P_s, and
 * zigzag with those and the dual ring; with packed documents the same for
 * doc-contiguous, doc-zigzag and balanced); KV replication (on, and off too
 * when P_h > H_kv / tp, where it is infeasible). Layouts that differ only
 * in knobs that change nothing (placement when P_h or P_s is 1,
 * replication when P_h <= H_kv / tp) are one layout.
 *
 * Ranking: the layouts picked for simulation first (simulated, or marked
 * model* when they could not be), then the rest, each by predicted
 * GPU-seconds per sample (plan_per_sample: at one global batch on one GPU
 * count, the order of time per global batch); ties by enumeration order.
 * Speedups are the same throughput ratios. Deterministic, so the
 * serial and MPI sweeps print the same table.
 *
 * Layer: model (uses core only: no SimGrid, no executor, no measurements).
 */
#ifndef LOONG_PLAN_H
#define LOONG_PLAN_H

#include <stdio.h>

#include "analytic.h"
#include "memory.h"
#include "fidelity.h"
#include "whatif.h"

/* The perturbations of `loong plan --robust`, in the order of
 * plan_layout.robust: the worst single straggler (kernels x1.25), the
 * worst single NIC at half speed, jitter of 5 %. */
typedef enum { PLAN_PERT_STRAGGLER, PLAN_PERT_NIC, PLAN_PERT_JITTER, PLAN_PERT_COUNT } plan_pert;
#define PLAN_ROBUST_JITTER 0.05
/* "straggler", "slow NIC", "jitter": the table's column stems. */
const char *plan_pert_name(plan_pert k);

typedef struct plan_layout {
    config c; /* with its data-parallel degree c.dp */
    char name[64];
    bool removed;
    char reason[LOONG_ERRLEN]; /* why it was removed */
    memory_estimate mem;
    analytic_result an;
    double sim_step;    /* seconds, or < 0 when not simulated */
    double sim_exposed; /* mean exposed communication per rank, seconds */
    /* over --doc-dist draws (plan_step is their mean): the fastest and the
     * slowest draw's step; both plan_step with one layout */
    double step_lo, step_hi;
    double model_flops; /* the MFU numerator, averaged like the step (0: stats_model_flops) */
    /* --robust: the step under the worst of each perturbation kind (< 0:
     * not run) and which one that was ("rank 7", "node3-nic7") */
    double robust[PLAN_PERT_COUNT];
    char robust_what[PLAN_PERT_COUNT][WHATIF_NAME];
    /* picked for simulation and not simulated (too large for this machine,
     * over --sim-timeout, the child failed): why; the analytical score
     * stands, marked "model*" in the table */
    char unsimulated[160];
    double sim_tasks; /* picked: the estimated tasks of all its simulation runs (plan_sim_estimate) */
    double sim_units; /* and their work units, for the time they take (ibid.) */
} plan_layout;

/* Bytes a simulation holds per task: the DAG as built (DAG_BYTES_PER_TASK)
 * and SimGrid's activity for it, about as much again (peak RSS of loong sim
 * at 0.19M and 0.45M tasks, docs/plan.md). */
#define PLAN_SIM_BYTES_PER_TASK (2 * DAG_BYTES_PER_TASK)
/* A simulation's time, estimated before it runs, in work units a second
 * on one core. A task is one unit; an all-to-all task adds
 * PLAN_SIM_A2A_PEER_UNITS for each other member of its group, whose two
 * flows it starts (and waits for): SimGrid's cost is its activities, and
 * an all-to-all has two per peer where a kernel run, a p2p or an NCCL ring
 * step has one or two in all. Measured with loong sim --timing on the
 * 2-core VM of docs/plan.md (2026-12-04; docs/plan.md#a-plan-always-finishes):
 * ring and TP steps replay at 0.26-0.47 M tasks a second, DeepSeek-V3's
 * EP 32 all-to-alls at 9-11 us a peer beyond their tasks' 2.5 us. The
 * progress line then uses the rate it measures. */
#define PLAN_SIM_UNITS_PER_S    4e5
#define PLAN_SIM_A2A_PEER_UNITS 4

/* What simulating a configuration costs, estimated: its tasks (which set
 * its memory) and its work units (its time, above). */
typedef struct plan_sim_size {
    double tasks, units;
} plan_sim_size;

/* The tasks and work units of c's DAG simulated with `layers` layers (0:
 * the model's), estimated from DAGs of one and two layers per stage chunk
 * by the fewest and twice the fewest micro-batches its schedule takes (both
 * grow linearly in each), times the replicas when they are simulated in
 * full (`full_dp`), built with the TP and head ranks `folded` as loong
 * sim builds them (dag_build_folded: the representatives' tasks only). INFINITY in both when
 * those small DAGs cannot be built. */
plan_sim_size plan_sim_estimate(const config *c, int layers, bool full_dp, mesh_dims folded);
/* plan_sim_estimate's tasks, every rank built. */
double plan_task_estimate(const config *c, int layers, bool full_dp);

/* A mesh dimension the plan searches rather than fixes (plan_request.degree). */
#define PLAN_SEARCHED 0

typedef struct plan_request {
    config base; /* model, seq, batch, zero, recompute, dtype, gpus per node */
    int gpus;
    /* by mesh dimension (mesh.h): a fixed degree, or PLAN_SEARCHED: every
     * divisor of gpus the dimension can take (tp: those dividing the GPUs
     * per node, as TP stays inside a node; pp: those the layers split over,
     * evenly or as plan_enumerate's uneven split; dp, head, seq: any) */
    int degree[MESH_NDIMS];
    /* samples per step over all replicas: each layout runs global_batch /
     * (dp x batch) micro-batches (equal work); 0: one per replica */
    int global_batch;
    bool global_batch_default; /* global_batch is the default (16M tokens), not --global-batch */
    bool search_schedule;      /* pp > 1: 1F1B and interleaved (v = 2), else base's schedule and vpp */
    double gpu_mem;            /* bytes per GPU (its capacity as nvidia-smi reports it) */
    /* a layout fits when its reserved peak (memory.h) is at most
     * gpu_mem x (1 - margin): --memory-margin, a fraction */
    double margin;
    memory_allocator allocator; /* --allocator: the reserved peak's allocator factor */
    double alloc_factor;        /* --allocator F: a measured factor instead (loong calibrate --kineto); 0: none */
    /* searched (every ZeRO stage, every recompute policy) instead of base's */
    bool search_zero, search_recompute;
    /* a mixture of experts' --ep: 0 searched (every common divisor of a
     * layout's P and the experts), else the degree every layout takes */
    int ep;
    /* and its --expert-tp: 0 searched (every divisor of a layout's tp),
     * else the degree every layout takes */
    int etp;
} plan_request;

/* Every layout of req, removed ones included (with their reason). Returns a
 * malloc'd array and its count in *n (never fails but on OOM, which exits). */
plan_layout *plan_enumerate(const plan_request *req, int *n);

/* PLAN_MARGIN: the default --memory-margin. The allocator's reserved /
 * allocated ratio spans 1.03-1.09 in the published runs behind
 * MEMORY_ALLOC_FACTOR (1.05): 4 % covers the top of that spread
 * (1.09 / 1.05 = 1.038) for a layout right at the limit. */
#define PLAN_MARGIN 0.04
/* The bytes a layout's reserved peak may reach: gpu_mem x (1 - margin). */
double plan_mem_limit(const plan_request *req);
/* Estimate l's memory for req (its allocator) and whether it fits. */
bool plan_mem_fits(plan_layout *l, const plan_request *req);

/* Memory-check and analytically score layouts [from, to) of ls (removed
 * ones are skipped; a predicted OOM removes the layout with "predicted OOM:
 * reserved X GB over the Y GB limit"). */
void plan_score(plan_layout *ls, int from, int to, const plan_request *req, const calib *cb, const platform_spec *net);

/* Ranking order of the feasible layouts: fills idx with their indices, best
 * first; returns their count. */
int plan_rank(const plan_layout *ls, int n, int *idx);

/* Picked for simulation, simulated or not: the ranking's first group,
 * ordered by its predictions (a layout the simulator could not hold keeps
 * its place among those it did). */
bool plan_picked(const plan_layout *l);
/* The table's `by`: "sim", "model", or "model*" (picked for simulation and
 * not simulated: plan_layout.unsimulated says why). */
const char *plan_by(const plan_layout *l);

/* Predicted step of a scored layout: simulated if available, else analytical. */
double plan_step(const plan_layout *l);

/* Index in ls of the best pure-ring (zigzag, P_h = 1, single ring:
 * Megatron-CP) and pure-Ulysses (P_s = 1) layouts, by throughput; -1 if none
 * is feasible. */
int plan_best_ring(const plan_layout *ls, int n);
int plan_best_ulysses(const plan_layout *ls, int n);

/* How the planner's simulations cover the model's layers. */
typedef enum plan_compose {
    PLAN_EVERY_LAYER = 1, /* one simulation of every layer (--full-layers, or no composition applies) */
    PLAN_TWO_LAYERS = 2,  /* ZeRO-1: 1- and 2-layer runs composed to L layers, exact by construction */
    PLAN_PERIOD = 4,      /* ZeRO 0, 2, 3, or several micro-batches: loong sim --compose finds the periods of
                           * the layers and the micro-batches and checks them */
} plan_compose;

typedef struct plan_report {
    const char *platform;
    const char *calib;                /* the calibration table's file (calib_path), or NULL */
    double peak;                      /* GPU peak FLOP/s (MFU) */
    int rows;                         /* table rows to print (0 = all) */
    double analytic_s, sim_s, wall_s; /* time spent, for the footer */
    int simulated, runs, ranks;       /* layouts simulated, loong sim runs, MPI ranks */
    unsigned compose;                 /* how simulations cover the layers: plan_compose bits, one per kind used */
    mesh_dims folded;                 /* the TP and head ranks some simulation ran by symmetry (plan_fold) */
    char *const *commands;            /* [n] the loong sim command of each feasible layout, or NULL */
    bool why_removed;                 /* list every removed layout, not one line per cause */
    int draws;                        /* document packings averaged (1: the given layout) */
    const char *docs;                 /* where the documents came from, or NULL for one */
    double tie;                       /* layouts within this fraction of the best tie with it */
    bool tie_given;                   /* --tie set it; else it is model_error's between-layout error */
    fidelity_error model_error;       /* the fidelity table's error on runs of this kind (fidelity.h) */
    bool robust;                      /* plan_layout.robust was filled for the simulated layouts */
    const char *robust_set;           /* how the perturbations were chosen, for the header */
    const char *perturbed;            /* every simulation's perturbations (whatif_describe), or NULL */
    double robust_s;                  /* of sim_s: the --robust simulations */
    const plan_layout *user;          /* --layout: the user's layout in ls, or NULL */
    bool user_added;                  /* it is not one the search enumerates: appended to ls */
} plan_report;

/* ---- names, and the user's layout (plan_user.c) ---- */

/* The layout column's name of c in req: config_layout_name, then the
 * schedule and micro-batches (pp > 1 or m > 1: "1f1b m8", "il2 m16",
 * "m4"), the ZeRO stage when req searches it ("z1") and the recompute
 * policy when searched ("sel"). Truncated to len. */
void plan_layout_name(const plan_request *req, const config *c, char *buf, size_t len);
/* A fresh layout of config c (copied, its strategy named), with its name
 * and, when config_validate refuses it, removed with that reason. */
void plan_layout_init(plan_layout *l, const plan_request *req, const config *c);
/* `--layout NAME`: parse a name as plan_layout_name writes it (the words
 * after the mesh in any order) into c, req->base with the layout's knobs;
 * the inverse of plan_layout_name on every layout plan_enumerate names.
 * A knob the request fixes (--gpus, --dp, --pp, --tp, --zero, --recompute,
 * --schedule, --global-batch, --sequence-parallel, --tp-overlap) must
 * agree; one it searches must be in the name (the ZeRO stage, the
 * placement, ...). Returns 0, or -1 with err naming the problem and the
 * flag or word that fixes it. Does not validate c (a layout that cannot
 * run is shown with its reason). */
int plan_parse_layout(const plan_request *req, const char *name, config *c, char err[LOONG_ERRLEN]);
/* The index of the layout of ls that is c (same name and micro-batches), or -1. */
int plan_find_layout(const plan_layout *ls, int n, const plan_request *req, const config *c);
/* "# yours (--layout):" the user's layout (rp->user) with its rank among
 * the ranked layouts, how it was predicted and its gap to the
 * recommendation in the ranking's key, or why it is not feasible. Nothing
 * without rp->user. */
void plan_write_user(FILE *f, const plan_layout *ls, int n, const plan_request *req, const plan_report *rp);
/* The same as a new JSON object (user_layout), or JSON null without rp->user. */
struct json_t *plan_user_json(const plan_layout *ls, int n, const plan_report *rp);

/* ---- nothing fits (plan_oom.c) ---- */

/* The layout with the smallest predicted peak among those that were
 * memory-checked (removed for OOM or not), or -1 when none was. */
int plan_leanest(const plan_layout *ls, int n);

/* When no layout of req fits: "#" lines with the leanest layout's memory
 * terms (weights, gradients, optimizer, activations, the transient peak:
 * they sum to its peak), then each change that would fit, cheapest first
 * (a recompute policy, a ZeRO stage, both, 2x to 8x the GPUs: memory
 * model only), with how many layouts fit and the leanest. The first is
 * copied into fix (len bytes). Returns the leanest, or -1 when no layout
 * got as far as its memory check (nothing written). */
int plan_write_oom(FILE *f, const plan_layout *ls, int n, const plan_request *req, char *fix, size_t len);

/* When no layout of req gets past its shape (each removed by the
 * configuration validator or the global batch, before any memory check),
 * the cause in the GPU count: d, the most GPUs dividing req->gpus that some
 * layout splits, leaves r = gpus / d that no dimension takes; writes into
 * why (len bytes) "72 GPUs = 8 x 9, and 9 divides none of ...: use --gpus
 * 64" with the quantities r does not divide (the sequence, the query
 * heads, the global batch) and the most GPUs up to req->gpus that split (a
 * multiple of d). Runs plan_enumerate at most 64 times. Returns 0, or -1
 * (why untouched) when no divisor of the GPUs splits: the cause is not
 * the GPU count. */
int plan_unsplit_reason(const plan_request *req, char *why, size_t len);

/* ---- the recommendation (plan_pick.c) ---- */
/* A layout's worst step over the --robust perturbations, or its clean step
 * when none ran. */
double plan_worst_step(const plan_layout *l);
/* Streams a layout's DAG uses on a rank (compute, all-to-all, rings, KV
 * gradients, data parallelism): the "simpler" of two tied layouts uses
 * fewer, then no KV replication. */
int plan_streams(const plan_layout *l);
/* The layout to recommend among the ranked idx[0..m): the fastest, unless
 * others tie with it (within tie of its GPU-seconds, predicted the same
 * way): then the most robust of them (lowest worst step, when --robust ran
 * and their worst steps do not tie too), then the simplest, then the
 * fastest. Returns an index into ls. */
int plan_recommend(const plan_layout *ls, const int *idx, int m, double tie);
/* GPU-seconds per sample: a step of `step` seconds times the GPUs of all
 * replicas (dp x tp x P x pp), over the samples it processes (dp x m x B).
 * At equal work (one global batch) on equal GPUs its order is the order of
 * time per global batch; with --micro-batches fixed per replica it is still
 * the throughput per GPU. */
double plan_per_sample(const plan_layout *l, double step);
/* plan_per_sample of the layout's predicted step: what the ranking, the
 * ties, "ahead" and every vs_* figure compare. */
double plan_gpu_seconds(const plan_layout *l);
/* l ties with best: predicted the same way (simulated or not) and within
 * tie of its plan_gpu_seconds (plan_pick.c). */
bool plan_tied(const plan_layout *l, const plan_layout *best, double tie);
/* Why `pick` (plan_recommend's) rather than the fastest idx[0] when they
 * differ, and with --robust how the fastest and the most robust fare: "#"
 * lines after the recommendation. */
void plan_write_choice(FILE *f, const plan_layout *ls, const int *idx, int m, int pick, const plan_report *rp);

/* ---- the outputs (plan_write.c) ---- */

/* The #-headed ranked table, the removed layouts with their reasons and the
 * recommendation with one line of why. Returns 0 or -1 on a write error. */
int plan_write_table(FILE *f, const plan_layout *ls, int n, const plan_request *req, const plan_report *rp);

/* Every layout as CSV (feasible ones ranked first, then removed ones with
 * their reason). Returns 0 or -1 on a write error. */
int plan_write_csv(FILE *f, const plan_layout *ls, int n, const plan_report *rp);

/* The plan as one JSON object: the base configuration and the request,
 * every feasible row as the table has it (with its loong sim command when
 * rp->commands has one), the recommendation, the baselines and the causes
 * of removal with their counts. Returns 0, or -1 on a write error. */
int plan_write_json(FILE *f, const plan_layout *ls, int n, const plan_request *req, const plan_report *rp);

#endif

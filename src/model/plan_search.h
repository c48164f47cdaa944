/*
 * plan_search: the planner's search, from a request to scored and
 * simulated layouts. It enumerates the layouts (plan_enumerate), adds the
 * user's (--layout), scores them under every document packing drawn
 * (--draws), picks the ones to simulate (the best K, the baselines, the
 * user's; those a simulation can hold), simulates them under every draw
 * (composed from fewer layers where that is exact) and, with --robust,
 * again under each named perturbation, keeping the worst of each kind.
 *
 * It starts no process and knows no MPI: a simulation, and the split of the
 * work over several processes, are a plan_runner's. The CLI implements one
 * with `loong sim` children and MPI ranks (src/cli/plan_runner.c); every
 * process runs plan_search with its own runner and ends with the same
 * layouts. Progress and notes go to the runner too: this module prints
 * nothing.
 *
 * Layer: model (uses core only: no SimGrid, no MPI, no processes).
 */
#ifndef LOONG_PLAN_SEARCH_H
#define LOONG_PLAN_SEARCH_H

#include "plan.h"

/* One simulation a runner starts: layout l with `layers` layers (0: the
 * model's), the simulator composing the layers from their period
 * (`compose`: loong sim --compose), under the perturbations w. */
typedef struct plan_sim {
    const plan_layout *l;
    int layers;
    bool compose;
    const whatif *w;
} plan_sim;

/* The child-runner interface: how simulations run and how processes that
 * share the search combine their parts. Every function gets `user`. */
typedef struct plan_runner {
    void *user;
    int rank, size; /* this process among those sharing the work: 0 of 1 alone */
    /* Start simulation `id` (ids are 0 .. runs-1 within one batch). Returns
     * 0, or -1 with err when it cannot be started (the search stops). */
    int (*start)(void *user, int id, const plan_sim *sim, char err[LOONG_ERRLEN]);
    /* Wait a short while (the CLI's: 0.1 s) for a started simulation to
     * end. Returns 1 with its id and either 0 in *rc with its step and
     * exposed communication (seconds), or -1 in *rc and why it has none;
     * 0 when none ended yet; -1 when none is running. */
    int (*wait)(void *user, int *id, int *rc, double *step, double *exposed, char why[LOONG_ERRLEN]);
    /* Stop simulation id (over its time limit); wait still reports its end. */
    void (*stop)(void *user, int id);
    /* Seconds on a monotonic clock. */
    double (*now)(void *user);
    /* Give every process all of ls[0..n): each scored its own block
     * [plan_search_block(n, rank, size), plan_search_block(n, rank + 1,
     * size)). Nothing alone. */
    void (*gather_layouts)(void *user, plan_layout *ls, int n);
    /* v[0..n) replaced by its element-wise maximum over the processes. */
    void (*max)(void *user, double *v, int n);
    /* A phase's progress: done of total, about eta seconds left (< 0:
     * unknown). Runs `runs` simulations of about `tasks` tasks in all,
     * `jobs` at once, an estimated eta seconds: said before they start. */
    void (*progress)(void *user, const char *what, int done, int total, double eta);
    void (*begin)(void *user, int runs, double tasks, double eta, int jobs);
    /* One line for the user ("X is not simulated (why); ..."), no newline. */
    void (*note)(void *user, const char *line);
} plan_runner;

/* The first layout of process r's block when n layouts are split over size. */
int plan_search_block(int n, int r, int size);

/* How layouts are searched beyond the request. */
typedef struct plan_search_opts {
    int top;              /* simulate the `top` best layouts (0: none) ... */
    bool exact;           /* ... or every feasible one */
    bool full_layers;     /* simulate all layers instead of composing them */
    bool robust;          /* also under the named perturbations (plan_pert) */
    int jobs;             /* simulations at once, over all processes */
    double sim_timeout;   /* seconds a simulation may run (0: no limit) */
    int draws;            /* document packings (1: the request's documents) */
    const char *doc_dist; /* the length histogram they are drawn from, or NULL */
    uint64_t seed;        /* draw d uses seed + d */
    const whatif *w;      /* the perturbations every simulation runs under */
    mesh_dims foldable;   /* the platform lets TP, head ranks run by symmetry (plan_foldable, plan_fold) */
    const config *user;   /* --layout's, scored beside the search, or NULL */
    const calib *cb;
    const platform_spec *spec;
} plan_search_opts;

/* What the search found. */
typedef struct plan_search_out {
    plan_layout *ls; /* [n] every layout, removed ones included: malloc'd */
    int n, feasible;
    int user;                           /* the user's layout in ls, or -1 */
    bool user_added;                    /* the search does not enumerate it: appended to ls */
    int runs;                           /* simulations run */
    unsigned compose;                   /* plan_compose bits, one per kind used */
    mesh_dims folded;                   /* the TP and head ranks some simulation ran by symmetry (plan_fold) */
    double analytic_s, sim_s, robust_s; /* seconds: scoring (the slowest process's), simulating, of which --robust */
} plan_search_out;

/* Search req: on every process of the runner at once (they exchange their
 * parts through it). Nothing is simulated when no layout is feasible
 * (out->feasible 0). req->base.docs becomes the last draw's documents.
 * Returns 0, or -1 with err (a draw that cannot be read, a simulation
 * that cannot be started, or every simulation failing: the request's
 * fault, such as a perturbation of a link the platform lacks), out->ls
 * then NULL. */
int plan_search(plan_request *req, const plan_search_opts *o, const plan_runner *r, plan_search_out *out,
                char err[LOONG_ERRLEN]);

/* How c's simulations cover its layers (plan_compose): under ZeRO-1, L = 1
 * and L = 2 runs composed as T(L) = T(1) + (L-1)(T(2) - T(1)) (layers are
 * identical; the LM head and ZeRO-1's step-level collectives are not per
 * layer); at the other stages, with several micro-batches (a pipeline's:
 * where they are more than their search costs) or dense leading blocks,
 * loong sim --compose in each run, which finds the layer and micro-batch
 * counts from which one more adds a constant and checks them
 * (docs/sim.md); every layer with full_layers, and recompute policies
 * whose layers differ at one micro-batch. */
plan_compose plan_compose_mode(const config *c, bool full_layers);

/* The copied dimensions (sim.h) platform sp lets a simulation fold: tp,
 * head and seq on an NCCL platform whose GPUs' links are their own (not a
 * PCIe server's shared socket links) and where no rail's traffic can slow
 * another's (platform_spec_rails_shared: a NIC per GPU, pod uplinks that
 * never saturate); else none. */
mesh_dims plan_foldable(const platform_spec *sp);
/* The mesh dimensions c's simulations run by symmetry (loong sim --fold):
 * dp when a replica is whole nodes (smaller replicas share nodes, and are
 * all simulated); in a pipelined layout (the large simulations), without
 * perturbations (which may pick one rank), tp where its TP groups stay
 * inside a node and tp is foldable, without --tp-overlap, where TP rank 0
 * stands exactly for the others; head where head is foldable and no
 * experts' group spans head ranks (approximate: docs/sim.md); seq where
 * seq is foldable and the ring ranks run alike (config_ring_asymmetry;
 * approximate: docs/sim.md). */
mesh_dims plan_fold(const config *c, mesh_dims foldable, bool perturbed);

#endif

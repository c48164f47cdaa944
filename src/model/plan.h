/*
 * plan: the layout search behind `loong plan` — enumerate every layout of a
 * GPU count, remove the infeasible ones with a reason each, score the rest
 * (memory model + analytical model), rank them and write the ranked table.
 * Simulation of the best layouts and the MPI split of the work live in the
 * CLI (src/cli/cmd_plan.c); this module only takes their results.
 *
 * A layout is a config (scope step) plus a data-parallel degree dp: the
 * GPUs are dp replicas of a P = P_h x P_s context-parallel mesh. The knobs
 * enumerated for each (dp, P_h, P_s): placement (head-first, and
 * context-first when both P_h and P_s exceed 1), partition and ring mode
 * (P_s = 1: one layout; else contiguous with the single ring, the
 * all-gather or the double ring at every window w < P_s dividing P_s, and
 * zigzag with those and the dual ring; with packed documents the same for
 * doc-contiguous, doc-zigzag and balanced), KV replication (on, and off too
 * when P_h > H_kv, where it is infeasible). Layouts that differ only in
 * knobs that change nothing (placement when P_h or P_s is 1, replication
 * when P_h <= H_kv) are one layout.
 *
 * Ranking: simulated layouts first, then the rest, each by predicted
 * GPU-seconds per sample (step time x P, i.e. tokens/s/GPU; equal to step
 * time order when dp = 1); ties by enumeration order. Speedups are the
 * same throughput ratios. Deterministic, so the
 * serial and MPI sweeps print the same table.
 *
 * Layer: model (uses core only: no SimGrid, no executor, no measurements).
 */
#ifndef LOONG_PLAN_H
#define LOONG_PLAN_H

#include <stdio.h>

#include "analytic.h"
#include "memory.h"

typedef struct plan_layout {
    config c;
    int dp;
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
} plan_layout;

typedef struct plan_request {
    config base; /* model, seq, batch, zero, recompute, dtype, gpus per node */
    int gpus;
    int dp;         /* data-parallel degree; 0 = every divisor of gpus */
    double gpu_mem; /* bytes per GPU available to the model's tensors */
} plan_request;

/* Every layout of req, removed ones included (with their reason). Returns a
 * malloc'd array and its count in *n (never fails but on OOM, which exits). */
plan_layout *plan_enumerate(const plan_request *req, int *n);

/* Memory-check and analytically score layouts [from, to) of ls (removed
 * ones are skipped; a predicted OOM removes the layout with "predicted OOM
 * at X GB of Y GB"). */
void plan_score(plan_layout *ls, int from, int to, const plan_request *req, const calib *cb, const platform_spec *net);

/* Ranking order of the feasible layouts: fills idx with their indices, best
 * first; returns their count. */
int plan_rank(const plan_layout *ls, int n, int *idx);

/* Predicted step of a scored layout: simulated if available, else analytical. */
double plan_step(const plan_layout *l);

/* Index in ls of the best pure-ring (zigzag, P_h = 1, single ring:
 * Megatron-CP) and pure-Ulysses (P_s = 1) layouts, by throughput; -1 if none
 * is feasible. */
int plan_best_ring(const plan_layout *ls, int n);
int plan_best_ulysses(const plan_layout *ls, int n);

typedef struct plan_report {
    const char *platform;
    double peak;                      /* GPU peak FLOP/s (MFU) */
    int rows;                         /* table rows to print (0 = all) */
    double analytic_s, sim_s, wall_s; /* time spent, for the footer */
    int simulated, runs, ranks;       /* layouts simulated, loong sim runs, MPI ranks */
    bool composed;                    /* simulations composed from 1 and 2 layers */
    int draws;                        /* document packings averaged (1: the given layout) */
    const char *docs;                 /* where the documents came from, or NULL for one */
} plan_report;

/* The #-headed ranked table, the removed layouts with their reasons and the
 * recommendation with one line of why. Returns 0 or -1 on a write error. */
int plan_write_table(FILE *f, const plan_layout *ls, int n, const plan_request *req, const plan_report *rp);

/* Every layout as CSV (feasible ones ranked first, then removed ones with
 * their reason). Returns 0 or -1 on a write error. */
int plan_write_csv(FILE *f, const plan_layout *ls, int n, const plan_report *rp);

#endif

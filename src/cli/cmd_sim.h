/*
 * cmd_sim.h: what the files of `loong sim` share: its options (cmd_sim.c
 * parses them), the memory verdict and the output files (sim_output.c
 * writes them). Not a library interface: only cmd_sim.c and sim_output.c
 * include it.
 *
 * Layer: cli (may use every library).
 */
#ifndef LOONG_CLI_CMD_SIM_H
#define LOONG_CLI_CMD_SIM_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "core/afile.h"
#include "core/dag.h"
#include "core/trace.h"
#include "model/calib.h"
#include "model/whatif.h"
#include "sim/sim.h"
#include "cli.h"

typedef struct sim_args {
    const char *platform, *calib, *trace, *out, *json;
    double trace_max; /* bytes, 0: no limit */
    bool out_given;   /* -o was given: with --json -, the table goes only there */
    int links, layers;
    mesh_dims fold;                /* dimensions run by symmetry (--fold, or --dp-mode / --tp-mode): sim.h */
    const char *fold_text;         /* --fold's argument, NULL: not given */
    const char *dp_mode, *tp_mode; /* --dp-mode / --tp-mode's argument, NULL: not given */
    const char *dp_flag, *tp_flag; /* the option that folded dp / tp, as notes name it; dp_flag NULL: the default */
    bool dp_unfolded, tp_unfolded; /* a perturbation turned that fold off (unfold_for_whatif) */
    mesh_dims approx_unfolded;     /* likewise the head and ring folds (sim_approx_folds) */
    double gpu_mem;                /* --gpu-mem, bytes; 0: the GPU kind's */
    trace_filter flt;
    bool quiet, timing, compose;
    bool one_gpu;   /* --one-gpu: every rank's kernels share the first GPU (sim_platform_share_one_gpu) */
    bool kineto;    /* --trace-format kineto */
    bool trace_mem; /* --trace-memory */
    char **sg_args; /* --cfg= and --log= for SimGrid */
    int nsg;
    whatif w;         /* --straggler, --slow-link, --fail-link, --jitter */
    char where[4096]; /* the platform file --platform names (cli_find_platform) */
} sim_args;

/* The folds by approximate symmetry (sim.h): the dimension and its
 * --fold name, the rank that stands for its group and the groups, the
 * summary header's label, and the bound docs/sim.md holds the fold to. */
typedef struct sim_approx_fold {
    mesh_dim dim;
    const char *name, *rank, *groups, *label, *bound;
} sim_approx_fold;
#define SIM_APPROX_FOLDS 2
extern const sim_approx_fold sim_approx_folds[SIM_APPROX_FOLDS];

/* ---- memory: the memory model's peak per GPU against the GPU's memory ---- */

typedef struct mem_check {
    double peak;     /* predicted per-GPU reserved peak, bytes (memory_estimate_config) */
    double alloc;    /* its allocated peak (the tensors) */
    double gpu_mem;  /* what it is checked against; 0: unknown (no line of verdict) */
    char source[40]; /* where gpu_mem comes from: "--gpu-mem" or the GPU kind */
    bool oom;        /* peak above gpu_mem */
    char fix[80];    /* the cheapest change that fits (oom only) */
    double fix_peak; /* its peak, bytes; 0: none found */
} mem_check;

/* The predicted peak of c against --gpu-mem or the memory of GPU `kind`
 * (a missing memory: gpu_mem 0, no verdict); when it does not fit, the
 * cheapest change that does (as loong plan tries them). */
void simout_memory_check(const sim_args *a, const config *c, const char *kind, mem_check *m);

/* The summary's "# memory:" line (a training step only). */
void simout_memory_line(FILE *f, const config *c, const mem_check *m);

/* One line on stderr when the step does not fit (a training step only). */
void simout_warn_oom(const config *c, const mem_check *m);

/* The memory model's per-rank terms (bytes) of c, as the plan prints them
 * (a new reference), and the verdict beside them in j (a training step of
 * a known GPU memory). */
json_t *simout_json_memory(const config *c);
void simout_json_memory_verdict(json_t *j, const config *c, const mem_check *m);

/* ---- the output files ---- */

/* The output files of one run: opened (as temporaries) before any work, so
 * that an unwritable path fails at once, and committed together at the end:
 * a failure leaves no new file and an existing one untouched. */
typedef struct sim_outputs {
    afile tr, sm, js;
    bool table; /* with --json - and no -o the table is still formatted, in memory, for its # BUG checks */
} sim_outputs;

/* Open every output a's options name, as temporaries (a kineto --trace
 * directory is only checked). Returns 0, or -1 with a message, none left
 * open. */
int simout_open(const sim_args *a, sim_outputs *o, char err[LOONG_ERRLEN]);

/* Drop every output still open: no file is created or changed. */
void simout_abort(sim_outputs *o);

/* Write the trace, the summary (its # BUG count in *bugs) and the JSON
 * summary of a run, then commit them all. Returns 0, or -1 with a message,
 * every output dropped. */
int simout_write(const dag *g, const calib *cb, const sim_result *res, sim_args *a, sim_platform *pf,
                 const mem_check *mc, sim_outputs *o, int *bugs, char err[LOONG_ERRLEN]);

/* ---- --compose (sim_compose.c) ---- */

/* loong sim --compose of c: its step from simulations of a few layers and
 * micro-batches in child processes, written to a's outputs (the table, the
 * JSON) as loong sim writes a simulated step. Refuses (one line, status 2)
 * what cannot compose: a scope other than step, under 3 layers, --trace,
 * or one micro-batch of blocks that re-run different ones. Returns the
 * exit status. */
int sim_compose(const sim_args *a, const cli_config *cc, const config *c);

/* The dimensions run by symmetry, as --fold writes them, into a JSON
 * summary's "fold" (loong sim's and --compose's). */
void simout_json_fold(json_t *j, mesh_dims fold);

/* The header lines saying which dimensions ran by symmetry, and which a
 * perturbation unfolded (sim_output.c; the summary and --compose's). */
void simout_fold_lines(FILE *f, const sim_args *a, const config *c);

#endif

/*
 * plan_cli: the pieces of `loong plan` around the planner library
 * (model/plan.h, model/plan_search.h). cmd_plan.c parses the options and
 * orchestrates; plan_request.c turns the options into a plan_request;
 * plan_runner.c is the planner's child runner (`loong sim` children) and
 * the MPI split; plan_output.c writes the table, CSV, JSON, --show,
 * --emit and --plot outputs.
 *
 * Layer: cli (may use every library).
 */
#ifndef LOONG_CLI_PLAN_CLI_H
#define LOONG_CLI_PLAN_CLI_H

#include "model/plan_search.h"
#include "model/platform_spec.h"
#include "core/afile.h"
#include "cli.h"

#define PLAN_DEFAULT_PLATFORM "topologies/dgx-h100-8n.xml"

typedef struct plan_args {
    const char *platform, *calib, *csv, *out, *gpus, *gpu_mem, *json, *plot;
    const char *margin, *allocator;   /* --memory-margin, --allocator (NULL: the defaults) */
    const char *layout;               /* --layout: the user's layout, scored beside the search */
    const char *from;                 /* --show ROW --from FILE: a plan's JSON, read instead of planning */
    char planning[64];                /* the first option given that plans (refused with --from), or "" */
    int global_batch;                 /* 0: not given */
    mesh_dims foldable;               /* the copied dimensions the platform lets simulations fold (plan_foldable) */
    int top, jobs, rows, draws, show; /* show: a row's command instead of the table (0: the table) */
    double sim_timeout;               /* seconds a simulation may run (0: no limit) */
    bool exact, full_layers, quiet, robust, why_removed;
    const char *emit; /* --emit megatron|torchtitan: the row's framework configuration instead of the table */
    double tie;       /* < 0: the model's error between two layouts (plan_cli_default_tie_pct) */
    cli_config cc;
    whatif w;         /* perturbations every simulation runs under */
    char where[4096]; /* the platform file (cli_find_platform) */
} plan_args;

typedef struct plan_ctx {
    plan_request req;
    platform_spec spec;
    calib *cb;
    int rank, size; /* this MPI rank of size (0 of 1 without mpirun) */
    config user;    /* --layout's, parsed (plan_parse_layout) */
} plan_ctx;

/* ---- the options (plan_request.c) ---- */

/* The default --tie: the model's error between two layouts on training
 * steps (fidelity.h), in %. */
double plan_cli_default_tie_pct(precision_kind p, bool moe, const char *gpu);
/* --sim-timeout's seconds (0 or more) and --tie's percentage (into a
 * fraction). Return 0, or 2 after cli_fail. */
int plan_cli_seconds(const char *s, const char *what, double *out);
int plan_cli_tie(const char *s, double *out);
/* After the option loop: refuse options that contradict each other, and
 * fill the defaults that depend on others (--draws). Returns 0, or 2 after
 * cli_fail. */
int plan_cli_check_args(plan_args *a, bool top_given);
/* The request of a: platform, GPUs, per-dimension degrees, memory, base
 * configuration, --layout's config into x->user, the calibration table.
 * Returns 0, or -1 with err. */
int plan_cli_request(plan_args *a, plan_ctx *x, char err[LOONG_ERRLEN]);

/* ---- the runner and MPI (plan_runner.c) ---- */

/* Under mpirun: MPI_Init and this rank; else rank 0 of 1. */
void plan_cli_mpi_start(int *argc, char ***argv, plan_ctx *x);
/* MPI_Finalize where mpi_start initialised it. Returns rc. */
int plan_cli_mpi_finish(const plan_ctx *x, int rc);
/* Search x->req: the search's options from a, its runner `loong sim`
 * children and x's MPI ranks, progress on stderr. Returns 0, or -1 with err. */
int plan_cli_search(const plan_args *a, plan_ctx *x, plan_search_out *out, char err[LOONG_ERRLEN]);
/* The loong sim command that reproduces layout l's simulated step as the
 * plan computed it: the same configuration, what-if and composition.
 * Malloc'd. */
char *plan_cli_command(const plan_args *a, const plan_layout *l);

/* ---- the outputs (plan_output.c) ---- */

/* The table, the CSV and the JSON: opened (as temporaries) before the
 * search, so that an unwritable path fails at once, and committed together
 * at the end. */
typedef struct plan_outputs {
    afile t, c, j;
} plan_outputs;

/* Open a's outputs (rank 0). Returns 0, or -1 with err (none left open). */
int plan_cli_open(const plan_args *a, plan_outputs *o, char err[LOONG_ERRLEN]);
void plan_cli_abort(plan_outputs *o);
/* Write and commit everything the search s found: the table (or --show's
 * command, or --emit's configuration), the CSV, the JSON and the plot;
 * with no feasible layout, what fits instead. Returns 0, or 2 after
 * cli_fail (outputs aborted). */
int plan_cli_write(const plan_args *a, const plan_ctx *x, plan_outputs *o, const plan_search_out *s);
/* --show ROW --from FILE: row ROW's loong sim command from the JSON that
 * loong plan --json wrote, without planning again. Returns 0, or 2 after
 * cli_fail. */
int plan_cli_show_from(const plan_args *a);

#endif

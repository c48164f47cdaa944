/*
 * loong plan: choose the layout for N GPUs. Enumerates and scores layouts
 * in the core (src/core/plan.h), simulates the best ones with `loong sim`
 * subprocesses (SimGrid initialises once per process), and, under mpirun,
 * splits both the scoring and the simulations across MPI ranks; rank 0
 * prints the same table as a serial run.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/recompute.h"
#include "core/afile.h"
#include "core/docs.h"
#include "core/stats.h"
#include "core/xalloc.h"
#include "model/plan.h"
#include "core/strategy.h"
#include "model/platform_spec.h"
#include "autoconf.h"
#include "cli.h"
#include "plot.h"
#include "sim_child.h"

#ifdef HAVE_MPI
#include <mpi.h>
#endif

#define DEFAULT_PLATFORM "topologies/dgx-h100-8n.xml"

/* The default --tie: the model's error between two layouts on training
 * steps (fidelity.h), in %. */
static double default_tie_pct(void)
{
    fidelity_error e;
    fidelity_for_scope(SCOPE_STEP, &e);
    return e.between_pct;
}

static void plan_usage(FILE *f)
{
    fprintf(f,
            "usage: loong plan [--platform FILE] [--gpus N] [--model M] [--seq S] [--gpu-mem 80GB] [--zero Z]\n"
            "                  [--recompute none|selective|sc++|full] [--top K | --exact] [--csv FILE] [-o FILE]\n"
            "\n"
            "Search every layout of N GPUs (P_h x P_s, placement, partition, ring mode, window,\n"
            "KV replication, data parallelism), remove the infeasible ones with\n"
            "a reason (invalid mesh, predicted out of memory), score the rest with the\n"
            "analytical model, simulate the best K with SimGrid (loong sim) and print the\n"
            "ranked #-table with units and a recommendation. Under mpirun the layouts and\n"
            "the simulations are split across the ranks; the output is the serial one.\n"
            "\n"
            "  --platform FILE       platform from loong topo (its loong_spec gives the links)\n"
            "                                                         [" DEFAULT_PLATFORM "]\n"
            "  --gpus N              GPUs to use                     [all of the platform's]\n"
            "  --pp N|auto           pipeline stages: gpus = dp x pp x tp x P_h x P_s; auto\n"
            "                        searches every divisor the layers split over, with\n"
            "                        1F1B and interleaved (v 2) schedules                [1]\n"
            "  --global-batch G      samples per step over all replicas, with or without\n"
            "                        --pp: every layout runs G / (dp x batch) micro-\n"
            "                        batches, the same work; ranked by time per global\n"
            "                        batch                [16M tokens, Llama 3's, in samples]\n"
            "  --dp N|auto           data-parallel replicas: gpus = dp x pp x tp x P_h x P_s;\n"
            "                        auto searches every divisor                      [auto]\n"
            "  --gpu-mem SIZE        memory per GPU, e.g. 80GB or 74.5GiB (GB = 1e9 bytes,\n"
            "                        GiB = 2^30)   [81559MiB h100, 80GB a100, 141GB h200]\n"
            "  --memory-margin PCT   a layout fits when its reserved peak is at most the\n"
            "                        GPU's memory less PCT %%  (0-50)                    [4]\n"
            "  --allocator default|expandable|F  PyTorch's caching allocator as the reserved\n"
            "                        peak counts it (expandable: expandable_segments; F: a\n"
            "                        measured reserved / allocated factor, 1 to 10, as loong\n"
            "                        calibrate fits it from profile_memory profiler traces)\n"
            "                                                                   [default]\n"
            "  --calib FILE          calibration table               [<platform dir>/<gpu>.calib]\n"
            "  --top K               simulate the K best layouts (0: analytical only)   [10]\n"
            "  --exact               simulate every feasible layout\n"
            "  --full-layers         simulate all L layers instead of composing them (1 and 2\n"
            "                        layers under ZeRO-1, their period otherwise: loong sim\n"
            "                        --compose)\n"
            "  --why-removed         list every removed layout and its reason (default: one\n"
            "                        line per reason, with a count and an example)\n"
            "  --show ROW            print the loong sim command that reproduces table row ROW\n"
            "                        (its rank) instead of the table; the table's recommended\n"
            "                        line gives the pick's\n"
            "  --emit megatron|torchtitan\n"
            "                        print the Megatron-LM arguments or torchtitan job TOML that\n"
            "                        run the pick (with --show ROW: that row's) instead of the\n"
            "                        table (docs/frameworks.md)\n"
            "  --from FILE           with --show ROW: read the row from a plan's --json FILE\n"
            "                        instead of planning again (no other option applies)\n"
            "  --layout NAME         score the layout you run beside the search: its name as\n"
            "                        the layout column writes it (e.g. \"dp2*8x4 hf zz single\n"
            "                        m8 z1 sel\"); marked 'yours' with its rank and its gap\n"
            "                        to the recommendation, simulated when the search\n"
            "                        simulates, shown with its reason when it cannot run\n"
            "  --jobs N              simulations at once, over all MPI ranks             [2]\n"
            "  --sim-timeout S       a simulation running longer is stopped, and its layout\n"
            "                        keeps its analytical score, marked model* (0: no\n"
            "                        limit); so is one estimated to need more memory than\n"
            "                        this machine has, or more time than S            [600]\n"
            "  --rows N              table rows to print (0: all)                         [20]\n"
            "  --csv FILE            write every layout, ranked, as CSV (atomically)\n"
            "  --json FILE           write the plan as JSON: every row with its loong sim\n"
            "                        command, the recommendation, the causes of removal\n"
            "  --plot FILE.png       draw tokens/s/GPU against peak memory for every layout\n"
            "                        and the pick's step split (gnuplot)\n"
            "  -o, --output FILE     write the table there (atomically) instead of stdout\n"
            "  --draws N             with --doc-dist: packings drawn (seeds --seed ..\n"
            "                        --seed + N - 1); the table shows their mean step and\n"
            "                        spread                                           [3]\n"
            "  --robust              also simulate every simulated layout under the worst of two\n"
            "                        stragglers (ranks 0 and P-1, kernels x1.25), the worst of\n"
            "                        two NICs at half speed (node0-nic0 and the last GPU's), and\n"
            "                        5 %% jitter; report the slowdowns, the layout best in the\n"
            "                        worst case, and prefer the more robust among ties\n"
            "  --tie PCT             layouts within PCT %% of the best tie      [%.1f: the\n"
            "                        model's error between two layouts, from its end-to-end\n"
            "                        errors on published runs: docs/validation.md]\n"
            "  --quiet               no progress bar on stderr\n"
            "  -h, --help            this text\n"
            "\n"
            "Configuration options that apply (the mesh and ring knobs are what plan searches:\n"
            "give your own as --layout):\n"
            "  --model, --seq [1M], --batch, --zero [searched: 0-3], --recompute [searched],\n"
            "  --tp [searched: the divisors of the GPUs per node], --sequence-parallel, --dtype,\n"
            "  --micro-batches (instead of --global-batch), --schedule and --vpp [searched\n"
            "  with --pp], --pp-first-layers and --pp-last-layers (with --pp N),\n"
            "  --gpus-per-node (must match the platform), and the documents: --docs,\n"
            "  --docs-file or --doc-dist with --seed (plan then searches the packed-document\n"
            "  partitions too)\n"
            "\n%s"
            "\nExit status: 0; 2 on bad input or when no layout is feasible.\n"
            "\nExample:\n"
            "  loong plan --model llama3-8b --seq 1M --gpus 64 --platform topologies/dgx-h100-8n.xml\n",
            default_tie_pct(), cli_whatif_help());
}

typedef struct plan_args {
    const char *platform, *calib, *csv, *out, *gpus, *dp, *gpu_mem, *json, *plot, *pp;
    const char *margin, *allocator;   /* --memory-margin, --allocator (NULL: the defaults) */
    const char *layout;               /* --layout: the user's layout, scored beside the search */
    const char *from;                 /* --show ROW --from FILE: a plan's JSON, read instead of planning */
    char planning[64];                /* the first option given that plans (refused with --from), or "" */
    int global_batch;                 /* 0: not given */
    bool nccl;                        /* the platform runs NCCL's collectives (what --tp-mode symmetric needs) */
    int top, jobs, rows, draws, show; /* show: a row's command instead of the table (0: the table) */
    double sim_timeout;               /* seconds a simulation may run (0: no limit) */
    bool exact, full_layers, quiet, robust, why_removed;
    const char *emit; /* --emit megatron|torchtitan: the row's framework configuration instead of the table */
    double tie;       /* < 0: the model's error between two layouts (default_tie_pct) */
    cli_config cc;
    whatif w;         /* perturbations every simulation runs under */
    char where[4096]; /* the platform file (cli_find_platform) */
} plan_args;

/* Mesh and ring knobs are what plan searches: refuse them by name. */
static bool searched_option(int opt)
{
    int k = cli_config_knob(opt);
    return k >= 0 && config_knob_get((config_knob)k)->searched;
}

static int parse_count(const char *s, const char *what, int *out, bool zero_ok)
{
    char err[LOONG_ERRLEN];
    if (zero_ok && !strcmp(s, "0")) {
        *out = 0;
        return 0;
    }
    if (units_parse_int(s, what, out, err) < 0) return cli_fail("plan", "%s", err);
    return 0;
}

/* Seconds, 0 or more ("0": no limit). */
static int parse_seconds(const char *s, const char *what, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < 0)
        return cli_fail("plan", "%s '%s' is not a number of seconds, 0 or more (0: no limit)", what, s);
    *out = v;
    return 0;
}

static int parse_tie(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || (*end && strcmp(end, "%")) || !isfinite(v) || v < 0 || v >= 100)
        return cli_fail("plan", "--tie '%s' is not a percentage in [0, 100) (e.g. --tie 3)", s);
    *out = v / 100;
    return 0;
}

static int parse_args(int argc, char **argv, plan_args *a)
{
    static const struct option own[] = {
        {"platform", required_argument, 0, 'p'},
        {"gpus", required_argument, 0, 'g'},
        {"gpu-mem", required_argument, 0, 'm'},
        {"calib", required_argument, 0, 'c'},
        {"top", required_argument, 0, 'k'},
        {"exact", no_argument, 0, 'x'},
        {"full-layers", no_argument, 0, 'F'},
        {"show", required_argument, 0, 'S'},
        {"emit", required_argument, 0, 'E'},
        {"from", required_argument, 0, 'f'},
        {"layout", required_argument, 0, 'L'},
        {"why-removed", no_argument, 0, 'W'},
        {"json", required_argument, 0, 'J'},
        {"plot", required_argument, 0, 'P'},
        {"jobs", required_argument, 0, 'j'},
        {"rows", required_argument, 0, 'r'},
        {"csv", required_argument, 0, 'C'},
        {"output", required_argument, 0, 'o'},
        {"quiet", no_argument, 0, 'q'},
        {"draws", required_argument, 0, 'd'},
        {"robust", no_argument, 0, 'R'},
        {"tie", required_argument, 0, 'T'},
        {"global-batch", required_argument, 0, 'G'},
        {"sim-timeout", required_argument, 0, 'O'},
        {"memory-margin", required_argument, 0, 'M'},
        {"allocator", required_argument, 0, 'A'},
        CLI_WHATIF_OPTIONS,
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const struct option *opts = cli_options(own);
    int opt;
    bool top_given = false;
    opterr = 0;
    int li = -1;
    while ((opt = getopt_long(argc, argv, "o:h", opts, &li)) != -1) {
        char name[64]; /* the option as given, without its value */
        if (li >= 0)
            snprintf(name, sizeof name, "--%s", opts[li].name);
        else
            snprintf(name, sizeof name, "-%c", opt);
        li = -1;
        top_given |= opt == 'k';
        if (!a->planning[0] && opt != 'S' && opt != 'f' && opt != 'o' && opt != 'q' && opt != 'h' && opt != '?')
            snprintf(a->planning, sizeof a->planning, "%s", name);
        if (searched_option(opt))
            return cli_fail("plan",
                            "'%s %s' is a layout knob that loong plan searches: drop it, or score the layout you run "
                            "beside the search with --layout \"NAME\" (its name as the layout column writes it, "
                            "e.g. --layout \"dp2*8x4 hf zz single z1 sel\")",
                            name, optarg ? optarg : "");
        if (cli_config_option(&a->cc, opt, optarg)) continue;
        int wi = cli_whatif_option("plan", &a->w, opt, optarg);
        if (wi < 0) return 2;
        if (wi) continue;
        int rc = 0;
        switch (opt) {
        case 'p': a->platform = optarg; break;
        case 'g': a->gpus = optarg; break;
        case 'm': a->gpu_mem = optarg; break;
        case 'M': a->margin = optarg; break;
        case 'A': a->allocator = optarg; break;
        case 'c': a->calib = optarg; break;
        case 'k': rc = parse_count(optarg, "--top", &a->top, true); break;
        case 'x': a->exact = true; break;
        case 'F': a->full_layers = true; break;
        case 'S': rc = parse_count(optarg, "--show", &a->show, false); break;
        case 'E':
            if (strcmp(optarg, "megatron") && strcmp(optarg, "torchtitan"))
                return cli_fail("plan", "--emit %s: loong emits megatron or torchtitan", optarg);
            a->emit = optarg;
            break;
        case 'f': a->from = optarg; break;
        case 'L': a->layout = optarg; break;
        case 'W': a->why_removed = true; break;
        case 'J': a->json = optarg; break;
        case 'P': a->plot = optarg; break;
        case 'j': rc = parse_count(optarg, "--jobs", &a->jobs, false); break;
        case 'r': rc = parse_count(optarg, "--rows", &a->rows, true); break;
        case 'C': a->csv = optarg; break;
        case 'o': a->out = optarg; break;
        case 'q': a->quiet = true; break;
        case 'd': rc = parse_count(optarg, "--draws", &a->draws, false); break;
        case 'R': a->robust = true; break;
        case 'T': rc = parse_tie(optarg, &a->tie); break;
        case 'G': rc = parse_count(optarg, "--global-batch", &a->global_batch, false); break;
        case 'O': rc = parse_seconds(optarg, "--sim-timeout", &a->sim_timeout); break;
        case 'h': plan_usage(stdout); return -1;
        default: return cli_fail("plan", "unknown or incomplete option '%s': see loong plan --help", argv[optind - 1]);
        }
        if (rc) return rc;
    }
    if (optind < argc) return cli_fail("plan", "unexpected argument '%s': see loong plan --help", argv[optind]);
    if (a->from && a->emit) return cli_fail("plan", "--emit %s plans: drop --from", a->emit);
    if (a->from && !a->show)
        return cli_fail("plan", "--from FILE reads a plan for --show ROW: add --show ROW (the table's rank)");
    if (a->from && a->planning[0])
        return cli_fail("plan",
                        "--show --from reads a finished plan: drop '%s' (it applies when planning), or drop --from "
                        "to plan again",
                        a->planning);
    /* options that would silently override each other */
    if (top_given && a->exact)
        return cli_fail("plan",
                        "--top %d and --exact: --exact simulates every feasible layout, --top N the N best; "
                        "give one",
                        a->top);
    if (a->full_layers && a->top == 0 && !a->exact)
        return cli_fail("plan", "--full-layers and --top 0: --top 0 simulates nothing, so there are no layers to "
                                "simulate in full; drop one");
    if (a->draws && !a->cc.doc_dist)
        return cli_fail("plan", "--draws needs --doc-dist FILE: only a length histogram can be drawn again");
    if (!a->draws) a->draws = a->cc.doc_dist ? 3 : 1;
    char err[LOONG_ERRLEN];
    if (cli_config_seed(&a->cc, &a->w.seed, err) < 0) return cli_fail("plan", "%s", err);
    if (a->robust && a->draws > 1)
        return cli_fail("plan", "--robust compares each layout with itself under one packing: give --draws 1");
    if (a->robust && a->top == 0 && !a->exact)
        return cli_fail("plan", "--robust perturbs the simulated layouts: drop --top 0 (or give --exact)");
    return 0;
}

/* ---- the request: platform, GPUs, memory, base configuration ---- */

typedef struct plan_ctx {
    plan_request req;
    config pk; /* the pipeline knobs given (schedule, vpp, uneven split), for the layouts */
    platform_spec spec;
    calib *cb;
    int rank, size;
    config user;     /* --layout's, parsed (plan_parse_layout) */
    int user_at;     /* its index in the plan's layouts, or -1 without --layout */
    bool user_added; /* the search does not enumerate it: appended */
} plan_ctx;

/* s as a number within [lo, hi] into *out: 0, or -1 (not a number, or
 * outside). */
static int number_in(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

/* --memory-margin (a percentage, 0 to 50) and --allocator into req. */
static int parse_memory_knobs(const plan_args *a, plan_request *req, char err[LOONG_ERRLEN])
{
    req->margin = PLAN_MARGIN;
    req->allocator = MEMORY_ALLOC_CACHING;
    req->alloc_factor = 0;
    double pct;
    if (a->margin) {
        if (number_in(a->margin, 0, 50, &pct) < 0) {
            snprintf(err, LOONG_ERRLEN,
                     "--memory-margin '%s' is not a percentage from 0 to 50 (the share of the GPU's memory kept free, "
                     "e.g. --memory-margin 4)",
                     a->margin);
            return -1;
        }
        req->margin = pct / 100;
    }
    if (a->allocator && memory_allocator_parse(a->allocator, &req->allocator) < 0 &&
        number_in(a->allocator, 1, 10, &req->alloc_factor) < 0) {
        snprintf(err, LOONG_ERRLEN,
                 "--allocator '%s' is not one of default, expandable, or a factor from 1 to 10 (loong calibrate "
                 "--kineto fits one)",
                 a->allocator);
        return -1;
    }
    return 0;
}

/* The GPU kind's memory (platform_spec_gpu_mem), 80 GB for a kind without one (cpu). */
static double default_gpu_mem(const char *kind)
{
    double m = platform_spec_gpu_mem(kind);
    return m > 0 ? m : 80e9;
}

static int read_platform(const plan_args *a, plan_ctx *x, char err[LOONG_ERRLEN])
{
    if (platform_spec_read(a->platform, &x->spec, err) < 0) return -1;
    const platform_spec *sp = &x->spec;
    int have = sp->nodes * sp->gpus_per_node;
    x->req.gpus = have;
    if (a->gpus && units_parse_int(a->gpus, "--gpus", &x->req.gpus, err) < 0) return -1;
    return 0;
}

/* More GPUs than the platform holds: fine when one replica of whole nodes
 * fits it, the other replicas simulated by symmetry (loong sim --dp). */
static int check_gpus(const plan_args *a, const plan_ctx *x, char err[LOONG_ERRLEN])
{
    const platform_spec *sp = &x->spec;
    int have = sp->nodes * sp->gpus_per_node, dp = x->req.dp, P = dp ? x->req.gpus / dp : 0;
    if (x->req.gpus <= have || (dp && P <= have && P % sp->gpus_per_node == 0)) return 0;
    snprintf(err, LOONG_ERRLEN,
             "--gpus %d exceeds the %d GPUs of platform %s: use a larger platform (loong topo), or --dp N with "
             "replicas of whole nodes that fit it (the others by symmetry)",
             x->req.gpus, have, a->platform);
    return -1;
}

/* --pp N|auto and the knobs that go with it: read here (the base config
 * has one stage), applied to the layouts (plan_enumerate). The global
 * batch, with or without --pp, is --global-batch, else 16M tokens (Llama 3
 * 405B's, Dubey et al. 2024, section 3.4.1) in whole samples: every layout
 * does the same work. --micro-batches M instead gives each replica M. */
static int pipeline_knobs(plan_args *a, plan_ctx *x, const char **v, char err[LOONG_ERRLEN])
{
    config_defaults(&x->pk);
    static const config_knob own[] = {KNOB_SCHEDULE,       KNOB_VPP,           KNOB_PP_FIRST_LAYERS,
                                      KNOB_PP_LAST_LAYERS, KNOB_PP_EMBED_SLOT, KNOB_PP_LOSS_SLOT};
    for (int i = 0; i < (int)(sizeof own / sizeof *own); i++) {
        if (v[own[i]] && config_knob_parse(&x->pk, own[i], v[own[i]], err) < 0) return -1;
        if (v[own[i]] && !v[KNOB_PP]) {
            snprintf(err, LOONG_ERRLEN, "--%s applies to pipelined layouts: add --pp N or --pp auto",
                     config_knob_get(own[i])->option);
            return -1;
        }
    }
    bool split = x->pk.pp_first || x->pk.pp_last || x->pk.pp_embed_slot || x->pk.pp_loss_slot;
    x->req.search_schedule = !v[KNOB_SCHEDULE] && !v[KNOB_VPP];
    a->pp = v[KNOB_PP];
    x->req.pp = 1;
    if (a->pp && !strcmp(a->pp, "auto"))
        x->req.pp = PLAN_PP_AUTO;
    else if (a->pp && units_parse_int(a->pp, "--pp", &x->req.pp, err) < 0)
        return -1;
    if (x->req.pp > 1 && x->req.gpus % x->req.pp) {
        snprintf(err, LOONG_ERRLEN, "--pp %d does not divide --gpus %d", x->req.pp, x->req.gpus);
        return -1;
    }
    if (split && (x->req.pp < 2 || x->req.pp == PLAN_PP_AUTO)) {
        snprintf(err, LOONG_ERRLEN,
                 "--pp-first-layers, --pp-last-layers and the slots split a given --pp N of 2 or more: "
                 "give --pp N");
        return -1;
    }
    if (a->global_batch && v[KNOB_MICRO_BATCHES]) {
        snprintf(err, LOONG_ERRLEN, "--global-batch and --micro-batches both set the micro-batches: give one");
        return -1;
    }
    x->req.global_batch = a->global_batch;
    if (!a->global_batch && !v[KNOB_MICRO_BATCHES]) {
        x->req.global_batch_default = true;
        uint64_t seq = 0;
        if (units_parse_count(v[KNOB_SEQ], "--seq", &seq, err) < 0) return -1;
        double g = 16.0 * 1024 * 1024 / (double)seq;
        x->req.global_batch = g < 1 ? 1 : (int)(g + 0.5);
    }
    v[KNOB_PP] = v[KNOB_SCHEDULE] = v[KNOB_VPP] = v[KNOB_PP_FIRST_LAYERS] = v[KNOB_PP_LAST_LAYERS] = NULL;
    v[KNOB_PP_EMBED_SLOT] = v[KNOB_PP_LOSS_SLOT] = NULL;
    return 0;
}

static int make_request(plan_args *a, plan_ctx *x, char err[LOONG_ERRLEN])
{
    /* the source tree's topologies/, else the installed one by name */
    if (!a->platform) a->platform = access(DEFAULT_PLATFORM, F_OK) == 0 ? DEFAULT_PLATFORM : "dgx-h100-8n";
    if (cli_find_platform(a->platform, a->where, sizeof a->where, err) < 0) return -1;
    a->platform = a->where;
    if (read_platform(a, x, err) < 0) return -1;
    a->nccl = x->spec.nccl != 0;
    cli_config cc = a->cc;
    char gpn[16];
    snprintf(gpn, sizeof gpn, "%d", x->spec.gpus_per_node);
    const char **v = cc.val;
    if (v[KNOB_GPUS_PER_NODE] && strcmp(v[KNOB_GPUS_PER_NODE], gpn)) {
        snprintf(err, LOONG_ERRLEN, "--gpus-per-node %s differs from the platform's %s GPUs per node",
                 v[KNOB_GPUS_PER_NODE], gpn);
        return -1;
    }
    v[KNOB_GPUS_PER_NODE] = gpn;
    if (!v[KNOB_SEQ]) v[KNOB_SEQ] = "1M";
    /* what the user does not fix is searched (the base's value is unused then) */
    x->req.search_zero = !v[KNOB_ZERO];
    x->req.search_recompute = !v[KNOB_RECOMPUTE];
    if (!v[KNOB_RECOMPUTE]) v[KNOB_RECOMPUTE] = "selective";
    v[KNOB_MESH] = "1x1"; /* the base config only; every enumerated layout sets its own mesh */
    v[KNOB_STRATEGY] = "ulysses";
    a->dp = v[KNOB_DP]; /* a degree or auto, searched here: the base config has one replica */
    v[KNOB_DP] = NULL;
    const char *tp = v[KNOB_TP]; /* a degree, else searched: the base config has none */
    v[KNOB_TP] = NULL;
    if (pipeline_knobs(a, x, v, err) < 0) return -1;
    /* valid with tp > 1 only: read by the knobs' own parser, applied to
     * the layouts (plan_enumerate) */
    config tpk;
    config_defaults(&tpk);
    if ((v[KNOB_SEQUENCE_PARALLEL] &&
         config_knob_parse(&tpk, KNOB_SEQUENCE_PARALLEL, v[KNOB_SEQUENCE_PARALLEL], err) < 0) ||
        (v[KNOB_TP_OVERLAP] && config_knob_parse(&tpk, KNOB_TP_OVERLAP, v[KNOB_TP_OVERLAP], err) < 0) ||
        (v[KNOB_PREFETCH] && config_knob_parse(&tpk, KNOB_PREFETCH, v[KNOB_PREFETCH], err) < 0))
        return -1;
    bool sp_off = !tpk.sequence_parallel, overlap = tpk.tp_overlap;
    if (sp_off && overlap) {
        snprintf(err, LOONG_ERRLEN,
                 "--tp-overlap on overlaps sequence parallelism's collectives: drop "
                 "--sequence-parallel off");
        return -1;
    }
    v[KNOB_SEQUENCE_PARALLEL] = v[KNOB_TP_OVERLAP] = v[KNOB_PREFETCH] = NULL; /* --prefetch: ZeRO-3 layouts */
    if (cli_config_finish(&cc, &x->req.base, err) < 0) return -1;
    x->req.base.sequence_parallel = !sp_off;
    x->req.base.tp_overlap = overlap;
    x->req.base.prefetch = tpk.prefetch;
    if (config_check_prefetch(tpk.prefetch, err) < 0) return -1;
    x->req.base.schedule = x->pk.schedule;
    x->req.base.vpp = x->pk.vpp;
    x->req.base.pp_first = x->pk.pp_first;
    x->req.base.pp_last = x->pk.pp_last;
    x->req.base.pp_embed_slot = x->pk.pp_embed_slot;
    x->req.base.pp_loss_slot = x->pk.pp_loss_slot;
    x->req.tp = 0;
    if (tp && units_parse_int(tp, "--tp", &x->req.tp, err) < 0) return -1;
    if (x->req.tp && x->req.gpus % x->req.tp) {
        snprintf(err, LOONG_ERRLEN, "--tp %d does not divide --gpus %d", x->req.tp, x->req.gpus);
        return -1;
    }
    x->req.dp = 0; /* searched unless given */
    if (a->dp && !strcmp(a->dp, "auto"))
        x->req.dp = 0;
    else if (a->dp && units_parse_int(a->dp, "--dp", &x->req.dp, err) < 0)
        return -1;
    if (x->req.dp && x->req.gpus % x->req.dp) {
        snprintf(err, LOONG_ERRLEN, "--dp %d does not divide --gpus %d", x->req.dp, x->req.gpus);
        return -1;
    }
    if (check_gpus(a, x, err) < 0) return -1;
    x->req.gpu_mem = default_gpu_mem(x->spec.gpu);
    if (a->gpu_mem && units_parse_mem(a->gpu_mem, "--gpu-mem", &x->req.gpu_mem, err) < 0) return -1;
    if (parse_memory_knobs(a, &x->req, err) < 0) return -1;
    if (a->layout && plan_parse_layout(&x->req, a->layout, &x->user, err) < 0) return -1;
    x->cb = calib_for_platform(a->platform, x->spec.gpu, a->calib, err);
    return x->cb ? calib_check_precision(x->cb, x->req.base.precision, err) : -1;
}

/* The user's layout among the enumerated ones, or appended to them (it is
 * then scored like them, and shown with its reason when it cannot run). */
static plan_layout *find_user(const plan_args *a, plan_ctx *x, plan_layout *ls, int *n)
{
    x->user_at = -1;
    if (!a->layout) return ls;
    x->user_at = plan_find_layout(ls, *n, &x->req, &x->user);
    if (x->user_at >= 0) return ls;
    ls = xrealloc_array(ls, (size_t)*n + 1, sizeof *ls, "the plan's layouts");
    plan_layout_init(&ls[*n], &x->req, &x->user);
    x->user_added = true;
    x->user_at = (*n)++;
    return ls;
}

/* ---- MPI: the split and the gathers (one rank of one without MPI) ---- */

static bool under_mpirun(void) { return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK"); }

static void mpi_start(int *argc, char ***argv, plan_ctx *x)
{
    x->rank = 0;
    x->size = 1;
#ifdef HAVE_MPI
    if (!under_mpirun()) return;
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &x->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &x->size);
    cli_quiet = x->rank != 0;
#else
    (void)argc;
    (void)argv;
#endif
}

static int mpi_finish(const plan_ctx *x, int rc)
{
#ifdef HAVE_MPI
    if (x->size > 1 || under_mpirun()) {
        fflush(stdout);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
    }
#endif
    (void)x;
    return rc;
}

static int range_lo(int n, int r, int size) { return (int)((long long)n * r / size); }

/* After each rank scored its block [lo, hi) of ls, give every rank all. */
static void gather_layouts(const plan_ctx *x, plan_layout *ls, int n)
{
#ifdef HAVE_MPI
    if (x->size == 1) return;
    int *counts = xmalloc_array((size_t)x->size, sizeof *counts, "the MPI gather");
    int *displs = xmalloc_array((size_t)x->size, sizeof *displs, "the MPI gather");
    for (int r = 0; r < x->size; r++) {
        int lo = range_lo(n, r, x->size), hi = range_lo(n, r + 1, x->size);
        displs[r] = lo * (int)sizeof *ls;
        counts[r] = (hi - lo) * (int)sizeof *ls;
    }
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ls, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
    free(counts);
    free(displs);
#else
    (void)x;
    (void)ls;
    (void)n;
#endif
}

/* Every rank simulated some runs (the others are NAN): combine them. */
static void gather_runs(const plan_ctx *x, double *v, int n)
{
#ifdef HAVE_MPI
    if (x->size == 1 || n == 0) return;
    for (int i = 0; i < n; i++)
        if (isnan(v[i])) v[i] = -INFINITY;
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++)
        if (v[i] == -INFINITY) v[i] = NAN;
#else
    (void)x;
    (void)v;
    (void)n;
#endif
}

static double max_over_ranks(const plan_ctx *x, double v)
{
#ifdef HAVE_MPI
    if (x->size > 1) MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
#endif
    (void)x;
    return v;
}

/* ---- simulations: `loong sim` subprocesses ---- */

typedef struct run {
    int layout, layers; /* layers 0 = the model's */
    bool compose;       /* the child composes the layers from their period (loong sim --compose) */
    const whatif *w;    /* the perturbations it runs under */
    sim_child ch;
    double started;       /* cli_now() at its start */
    double tasks;         /* its share of its layout's plan_layout.sim_tasks, for the ETA */
    double step, exposed; /* results, NAN until done; RUN_TIMED_OUT or RUN_FAILED */
    char why[LOONG_ERRLEN];
} run;

/* A run's step when it produced none (negative, to survive gather_runs' max). */
#define RUN_TIMED_OUT (-1.0)
#define RUN_FAILED    (-2.0)

#define PROGRESS_EVERY_S 5.0

/* Progress on stderr: a bar on a terminal; elsewhere (a log, CI) a line
 * every PROGRESS_EVERY_S seconds with what is done, left and an ETA. */
static void progress(const plan_args *a, const plan_ctx *x, const char *what, int done, int total, double eta)
{
    static const char *phase;
    static double start, last;
    static int before;
    if (a->quiet || x->rank != 0 || total == 0) return;
    double now = cli_now();
    if (what != phase || done < before) phase = what, start = last = now; /* a new phase */
    before = done;
    if (isatty(2)) {
        int width = 30, fill = done * width / total;
        fprintf(stderr, "\r%s [%.*s%*s] %d/%d", what, fill, "==============================", width - fill, "", done,
                total);
        if (done == total) fputc('\n', stderr);
    } else if (now - last >= PROGRESS_EVERY_S && done < total) {
        last = now;
        if (eta < 0) eta = done > 0 ? (now - start) / done * (total - done) : -1;
        fprintf(stderr, "loong plan: %s: %d of %d done, %d left, %.0f s so far%s", what, done, total, total - done,
                now - start, eta >= 0 ? "" : "\n");
        if (eta >= 0) fprintf(stderr, ", about %.0f s to go\n", eta);
    }
    fflush(stderr);
}

/* How the simulations cover the layers: under ZeRO-1, L = 1 and L = 2
 * runs composed as T(L) = T(1) + (L-1)(T(2) - T(1)) (layers are identical;
 * the LM head and ZeRO-1's step-level collectives are not per layer); at
 * the other stages, loong sim --compose in each child, which finds the
 * layer count from which one more layer adds a constant and checks it
 * (docs/sim.md); every layer with --full-layers. */
static plan_compose compose_mode(const plan_args *a, const config *c)
{
    if (a->full_layers || c->pp > 1 || c->micro_batches > 1) return PLAN_EVERY_LAYER; /* stages: simulated whole */
    if (!recompute_layers_alike(c)) return PLAN_EVERY_LAYER; /* full's groups or block method: layers differ */
    if (sim_compose_exact(c)) return PLAN_TWO_LAYERS;
    return c->scope == SCOPE_STEP && c->model.layers >= 3 ? PLAN_PERIOD : PLAN_EVERY_LAYER;
}

/* The loong sim command line of run u (sim_child_argv_free it). */
static char **run_argv(const plan_args *a, const plan_layout *ls, const run *u)
{
    const sim_child_spec sp = {a->platform, a->calib, a->cc.val[KNOB_MODEL], u->layers};
    char *wv[WHATIF_MAX * 3 + 2];
    /* the other replicas by symmetry, which needs replicas of whole nodes;
     * smaller ones are all simulated (check_gpus: then they fit) */
    const config *c = &ls[u->layout].c;
    bool whole = config_ranks(c) % c->gpus_per_node == 0;
    const char *extra[WHATIF_MAX * 3 + 5] = {"--links=0", whole ? "--dp-mode=symmetric" : "--dp-mode=full"};
    int ne = c->dp > 1 ? 2 : 1, nw = whatif_argv(u->w, wv);
    if (u->compose) extra[ne++] = "--compose";
    /* a pipelined layout is simulated whole: its TP ranks by symmetry where
     * that is exact (loong sim --tp-mode; no what-if, which may pick one) */
    if (c->pp > 1 && c->tp > 1 && !c->tp_overlap && config_tp_nodes(c) == 1 && a->nccl && nw == 0)
        extra[ne++] = "--tp-mode=symmetric";
    for (int i = 0; i < nw; i++)
        extra[ne++] = wv[i];
    char **v = sim_child_argv(c, &sp, extra, ne);
    for (int i = 0; i < nw; i++)
        free(wv[i]);
    return v;
}

/* Start the loong sim child of run u. */
static int start_run(const plan_args *a, const plan_layout *ls, run *u, char err[LOONG_ERRLEN])
{
    char **v = run_argv(a, ls, u);
    int rc = sim_child_start(&u->ch, v, err);
    sim_child_argv_free(v);
    return rc;
}

/* The loong sim command that reproduces layout i's simulated step as the
 * plan computed it: the same configuration, what-if and composition
 * (ZeRO-1's 1- and 2-layer composition is what loong sim --compose does
 * there). Malloc'd. */
static char *layout_command(const plan_args *a, const plan_layout *ls, int i)
{
    run u = {.layout = i,
             .compose = compose_mode(a, &ls[i].c) != PLAN_EVERY_LAYER,
             .w = &a->w,
             .ch = {0, -1, -1},
             .step = NAN,
             .exposed = NAN};
    char **v = run_argv(a, ls, &u);
    char *cmd = sim_child_command(v);
    sim_child_argv_free(v);
    return cmd;
}

/* Seconds left for runs[i] (i = first, first + stride, ...) not done yet,
 * from their estimated tasks at the rate of those done so far, or at
 * PLAN_SIM_TASKS_PER_S a job before any is done. */
static double sim_eta(const run *runs, int n, int first, int stride, int jobs, double elapsed)
{
    double done = 0, left = 0, now = cli_now();
    for (int i = first; i < n; i += stride)
        if (!isnan(runs[i].step)) done += runs[i].tasks;
    double rate = done > 0 && elapsed > 1 ? done / elapsed : PLAN_SIM_TASKS_PER_S * jobs;
    for (int i = first; i < n; i += stride) /* a running one has done its time at a job's share of the rate */
        if (isnan(runs[i].step))
            left += fmax(0, runs[i].tasks - (runs[i].ch.pid > 0 ? (now - runs[i].started) * rate / jobs : 0));
    return left / rate;
}

/* Stop every running child past --sim-timeout (its run: RUN_TIMED_OUT). */
static void stop_overdue(const plan_args *a, run *runs, int n, int first, int stride)
{
    double now = cli_now();
    for (int i = first; a->sim_timeout > 0 && i < n; i += stride)
        if (runs[i].ch.pid > 0 && isnan(runs[i].step) && now - runs[i].started > a->sim_timeout) {
            kill(runs[i].ch.pid, SIGKILL); /* its own children die with it (sim_child_guard) */
            runs[i].step = RUN_TIMED_OUT;
            snprintf(runs[i].why, sizeof runs[i].why, "stopped at --sim-timeout %g s", a->sim_timeout);
        }
}

/* The child of pid `pid` exited with `status`: its run's result, or why it
 * has none. Returns the run, or NULL when pid is none of ours. */
static run *reap(const plan_layout *ls, run *runs, int n, int first, int stride, pid_t pid, int status)
{
    for (int i = first; i < n; i += stride) {
        run *u = &runs[i];
        if (u->ch.pid != pid) continue;
        u->ch.pid = 0;
        sim_child_result res;
        char why[LOONG_ERRLEN];
        int rc = sim_child_finish(&u->ch, status, ls[u->layout].name, &res, why);
        if (u->step == RUN_TIMED_OUT) return u;
        if (rc < 0) {
            u->step = RUN_FAILED;
            snprintf(u->why, sizeof u->why, "%s", why);
            return u;
        }
        u->step = res.step;
        u->exposed = res.exposed;
        return u;
    }
    return NULL;
}

/* Run runs[i] for i = first, first + stride, ... at most `jobs` at once,
 * each stopped at --sim-timeout. A run that fails or is stopped keeps its
 * reason (run.why); only a child that cannot be started is an error. A
 * child's summary is a few hundred bytes, far below a pipe's buffer, so it
 * is read after the child exits. */
static int run_all(const plan_args *a, const plan_ctx *x, const plan_layout *ls, run *runs, int n, int first,
                   int stride, int jobs, char err[LOONG_ERRLEN])
{
    int next = first, running = 0, done = 0, mine = n > first ? (n - first + stride - 1) / stride : 0, rc = 0;
    double t0 = cli_now(), eta = sim_eta(runs, n, first, stride, jobs, 0);
    /* long work on a terminal: say so at once (a log gets the lines every 5 s,
     * and a run that fails at once keeps its error on one line) */
    if (!a->quiet && x->rank == 0 && mine > 0 && eta >= PROGRESS_EVERY_S && isatty(2))
        fprintf(stderr, "loong plan: simulating: %d run(s) of about %.3g tasks in all, about %.0f s at %d at once\n",
                mine, eta * PLAN_SIM_TASKS_PER_S * jobs, eta, jobs);
    while (done < mine) {
        while (rc == 0 && running < jobs && next < n) {
            if (start_run(a, ls, &runs[next], err) < 0) {
                rc = -1;
                break;
            }
            runs[next].started = cli_now();
            running++;
            next += stride;
        }
        if (running == 0) break;
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid == 0) { /* none done yet: a progress line is due every few seconds, even so */
            nanosleep(&(struct timespec){0, 100000000}, NULL);
            stop_overdue(a, runs, n, first, stride);
            progress(a, x, "simulating", done, mine, sim_eta(runs, n, first, stride, jobs, cli_now() - t0));
            continue;
        }
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) break;
        if (!reap(ls, runs, n, first, stride, pid, status)) continue;
        running--;
        done++;
        progress(a, x, "simulating", done, mine, sim_eta(runs, n, first, stride, jobs, cli_now() - t0));
    }
    return rc;
}

/* ---- which runs: the top K (or all), plus the two baselines ---- */

static int pick_layouts(const plan_args *a, const plan_ctx *x, plan_layout *ls, int n, int *pick)
{
    int *idx = xmalloc_array((size_t)n, sizeof *idx, "the plan's ranking");
    int m = plan_rank(ls, n, idx), k = a->exact ? m : (a->top < m ? a->top : m), np = 0;
    for (int i = 0; i < k; i++)
        pick[np++] = idx[i];
    /* the baselines, and --layout's: compared simulation to simulation */
    int user = x->user_at >= 0 && !ls[x->user_at].removed ? x->user_at : -1;
    int base[3] = {plan_best_ring(ls, n), plan_best_ulysses(ls, n), user};
    for (int b = 0; b < 3 && k > 0; b++) {
        bool have = base[b] < 0;
        for (int i = 0; i < np; i++)
            have |= pick[i] == base[b];
        if (!have) pick[np++] = base[b];
    }
    free(idx);
    return np;
}

/* The layers run k of a layout simulates: 1 or 2 (composed), else all L:
 * loong sim --compose's period search simulates at most L layers in all,
 * and when it finds no period, one run of L. */
static int run_layers(plan_compose m, int k, const config *c) { return m == PLAN_TWO_LAYERS ? 1 + k : c->model.layers; }

/* The replicas are simulated in full when smaller than a node (run_argv). */
static bool full_replicas(const config *c) { return c->dp > 1 && config_ranks(c) % c->gpus_per_node != 0; }

/* Simulates layouts pick[0..np) of this draw into step[] and exposed[],
 * covering the layers as each layout's compose_mode says; ORs the modes
 * used into *used. A layout whose run failed or was stopped gets step
 * RUN_FAILED or RUN_TIMED_OUT and why[i] (a generic one when another MPI
 * rank ran it). Returns the loong sim runs, or -1 when a child could not
 * be started or every layout's simulation failed (a bad request, such as
 * a --slow-link the platform lacks: the first child's error in err). */
static int simulate(const plan_args *a, const plan_ctx *x, const plan_layout *ls, const int *pick, int np,
                    unsigned *used, const whatif *ws, double *step, double *exposed, char (*why)[160],
                    char err[LOONG_ERRLEN])
{
    int L = x->req.base.model.layers, nr = 0;
    int *first = xcalloc((size_t)np + 1, sizeof *first, "the plan's simulations"); /* [np + 1] runs of pick i */
    for (int i = 0; i < np; i++) {
        plan_compose m = compose_mode(a, &ls[pick[i]].c);
        *used |= m;
        first[i] = nr;
        nr += m == PLAN_TWO_LAYERS ? 2 : 1;
    }
    first[np] = nr;
    run *runs = xcalloc((size_t)nr, sizeof *runs, "the plan's simulations");
    for (int i = 0; i < np; i++) {
        const config *c = &ls[pick[i]].c;
        plan_compose m = compose_mode(a, c);
        for (int k = first[i]; k < first[i + 1]; k++)
            runs[k] = (run){.layout = pick[i],
                            .layers = m == PLAN_TWO_LAYERS ? 1 + k - first[i] : 0,
                            .compose = m == PLAN_PERIOD,
                            .w = ws ? &ws[i] : &a->w,
                            .ch = {0, -1, -1},
                            .tasks = ls[pick[i]].sim_tasks / (first[i + 1] - first[i]),
                            .step = NAN,
                            .exposed = NAN};
    }
    int jobs = a->jobs / x->size > 0 ? a->jobs / x->size : 1;
    int rc = run_all(a, x, ls, runs, nr, x->rank, x->size, jobs, err);
    rc = (int)max_over_ranks(x, rc < 0 ? 1 : 0) ? -1 : 0;
    if (rc < 0 && !err[0]) snprintf(err, LOONG_ERRLEN, "a simulation could not be started on another MPI rank");
    double *v = xmalloc_array((size_t)(2 * nr + 1), sizeof *v, "the plan's simulations");
    for (int i = 0; i < nr; i++) {
        v[2 * i] = runs[i].step;
        v[2 * i + 1] = runs[i].exposed;
    }
    gather_runs(x, v, 2 * nr);
    int failed = 0;
    for (int i = 0; rc == 0 && i < np; i++) {
        double *r = &v[2 * first[i]];
        bool two = first[i + 1] - first[i] == 2;
        why[i][0] = '\0';
        for (int k = first[i]; k < first[i + 1]; k++)
            if (v[2 * k] < 0) { /* failed or stopped: the layout has no simulated step */
                step[i] = v[2 * k];
                snprintf(why[i], sizeof why[i], "%.159s",
                         runs[k].why[0] ? runs[k].why : "its simulation failed on another MPI rank");
            }
        if (why[i][0]) {
            failed += step[i] == RUN_FAILED;
            continue;
        }
        step[i] = two ? sim_compose(r[0], r[2], L) : r[0];
        exposed[i] = two ? sim_compose(r[1], r[3], L) : r[1];
    }
    if (rc == 0 && np > 0 && failed == np) { /* the same for every layout: the request's fault, not a layout's */
        rc = -1;
        for (int k = 0; k < nr && !err[0]; k++)
            if (runs[k].why[0]) snprintf(err, LOONG_ERRLEN, "%s", runs[k].why);
        if (!err[0]) snprintf(err, LOONG_ERRLEN, "every simulation failed (on other MPI ranks)");
    }
    free(v);
    free(runs);
    free(first);
    return rc < 0 ? -1 : nr;
}

/* ---- document packings: one layout, or --draws packings of --doc-dist ---- */

/* Give every layout draw d's documents (after an MPI gather too: a layout
 * scored on another rank arrives with that rank's pointer). */
static int use_draw(const plan_args *a, plan_ctx *x, plan_layout *ls, int n, int d, char err[LOONG_ERRLEN])
{
    if (a->cc.doc_dist) {
        uint64_t seed;
        if (cli_config_seed(&a->cc, &seed, err) < 0) return -1;
        x->req.base.docs = docs_draw(a->cc.doc_dist, x->req.base.seq, seed + (uint64_t)d, err);
        if (!x->req.base.docs) return -1;
    }
    for (int i = 0; i < n; i++)
        ls[i].c.docs = x->req.base.docs;
    return 0;
}

/* Running mean, fastest and slowest of a layout's step over the draws. */
static void add_draw(double *mean, double *lo, double *hi, double v, int d)
{
    *mean = d == 0 ? v : *mean + (v - *mean) / (d + 1);
    *lo = d == 0 || v < *lo ? v : *lo;
    *hi = d == 0 || v > *hi ? v : *hi;
}

/* Score every layout under every draw: an = the mean, step_lo/hi the range. */
static int score_draws(const plan_args *a, plan_ctx *x, plan_layout *ls, int n, char err[LOONG_ERRLEN])
{
    analytic_result *mean = xcalloc((size_t)n, sizeof *mean, "the plan's draws");
    double *lo = xcalloc((size_t)n, sizeof *lo, "the plan's draws"),
           *hi = xcalloc((size_t)n, sizeof *hi, "the plan's draws");
    int rc = 0;
    for (int d = 0; rc == 0 && d < a->draws; d++) {
        if ((rc = use_draw(a, x, ls, n, d, err)) < 0) break;
        plan_score(ls, range_lo(n, x->rank, x->size), range_lo(n, x->rank + 1, x->size), &x->req, x->cb, &x->spec);
        gather_layouts(x, ls, n);
        use_draw(a, x, ls, n, d, err);
        for (int i = 0; i < n; i++) {
            if (ls[i].removed) continue;
            analytic_result *m = &mean[i], *v = &ls[i].an;
            add_draw(&m->step, &lo[i], &hi[i], v->step, d);
            double *fm[] = {&m->busy, &m->exposed, &m->a2a, &m->ring_wait, &m->dp_tail, &m->tp, &m->bubble};
            const double fv[] = {v->busy, v->exposed, v->a2a, v->ring_wait, v->dp_tail, v->tp, v->bubble};
            for (int k = 0; k < 7; k++)
                *fm[k] = d == 0 ? fv[k] : *fm[k] + (fv[k] - *fm[k]) / (d + 1);
            m->worst_s = v->worst_s;
            double mf = (double)stats_model_flops(&ls[i].c);
            ls[i].model_flops = d == 0 ? mf : ls[i].model_flops + (mf - ls[i].model_flops) / (d + 1);
        }
        progress(a, x, "scoring draws", d + 1, a->draws > 1 ? a->draws : 0, -1);
    }
    for (int i = 0; rc == 0 && i < n; i++)
        if (!ls[i].removed) ls[i].an = mean[i], ls[i].step_lo = lo[i], ls[i].step_hi = hi[i];
    free(mean);
    free(lo);
    free(hi);
    return rc;
}

/* Keep in pick[0..np) the layouts a simulation can hold: its largest run
 * within this machine's memory over the simulations run at once, and
 * within --sim-timeout at the estimated rate; mark the others
 * (plan_layout.unsimulated). Records each layout's estimated tasks in all
 * its runs (plan_layout.sim_tasks, for the ETA). Returns how many are kept. */
static int simulable(const plan_args *a, const plan_ctx *x, plan_layout *ls, int *pick, int np)
{
    int k = 0, jobs = a->jobs < 1 ? 1 : a->jobs;
    double phys = xalloc_machine_bytes(), mem = phys / (x->size > jobs ? x->size : jobs);
    for (int i = 0; i < np; i++) {
        plan_layout *l = &ls[pick[i]];
        plan_compose m = compose_mode(a, &l->c);
        double tasks = 0;
        l->sim_tasks = 0;
        for (int r = 0; r < (m == PLAN_TWO_LAYERS ? 2 : 1); r++) {
            double t = plan_task_estimate(&l->c, run_layers(m, r, &l->c), full_replicas(&l->c));
            tasks = fmax(tasks, t);
            l->sim_tasks += t;
        }
        double bytes = tasks * PLAN_SIM_BYTES_PER_TASK, secs = tasks / PLAN_SIM_TASKS_PER_S;
        if (mem > 0 && bytes > mem)
            snprintf(l->unsimulated, sizeof l->unsimulated,
                     "about %.3g tasks, ~%.0f GB: more than the %.0f GB a simulation has, this machine's %.0f GB over "
                     "%d at once",
                     tasks, bytes / 1e9, mem / 1e9, phys / 1e9, jobs);
        else if (a->sim_timeout > 0 && secs > a->sim_timeout)
            snprintf(l->unsimulated, sizeof l->unsimulated,
                     "about %.3g tasks, an estimated %.0f s: more than --sim-timeout %g s", tasks, secs,
                     a->sim_timeout);
        else
            pick[k++] = pick[i];
        if (l->unsimulated[0] && !a->quiet && x->rank == 0)
            fprintf(stderr, "loong plan: %s is not simulated (%s); its analytical score stands\n", l->name,
                    l->unsimulated);
    }
    return k;
}

/* Simulate the picks under every draw: sim_step is the mean, step_lo/hi the
 * range. Returns the loong sim runs, or -1. */
static int simulate_draws(const plan_args *a, plan_ctx *x, plan_layout *ls, int n, unsigned *mode,
                          char err[LOONG_ERRLEN])
{
    int *pick = xmalloc_array((size_t)n + 3, sizeof *pick, "the plan's simulations");
    int np = simulable(a, x, ls, pick, pick_layouts(a, x, ls, n, pick)), runs = 0;
    char(*why)[160] = xcalloc((size_t)np + 1, sizeof *why, "the plan's simulations");
    double *step = xcalloc((size_t)np + 1, sizeof *step, "the plan's simulations");
    double *exposed = xcalloc((size_t)np + 1, sizeof *exposed, "the plan's simulations");
    double *mean = xcalloc((size_t)np + 1, sizeof *mean, "the plan's draws"),
           *lo = xcalloc((size_t)np + 1, sizeof *lo, "the plan's draws");
    double *hi = xcalloc((size_t)np + 1, sizeof *hi, "the plan's draws");
    double *mexp = xcalloc((size_t)np + 1, sizeof *mexp, "the plan's draws");
    for (int d = 0; runs >= 0 && d < a->draws; d++) {
        int r =
            use_draw(a, x, ls, n, d, err) < 0 ? -1 : simulate(a, x, ls, pick, np, mode, NULL, step, exposed, why, err);
        runs = r < 0 ? -1 : runs + r;
        for (int i = 0; r >= 0 && i < np; i++) {
            plan_layout *l = &ls[pick[i]];
            if (why[i][0] && !l->unsimulated[0]) {
                snprintf(l->unsimulated, sizeof l->unsimulated, "%s", why[i]);
                if (!a->quiet && x->rank == 0)
                    fprintf(stderr, "loong plan: %s is not simulated (%s); its analytical score stands\n", l->name,
                            why[i]);
            }
            add_draw(&mean[i], &lo[i], &hi[i], step[i], d);
            mexp[i] = d == 0 ? exposed[i] : mexp[i] + (exposed[i] - mexp[i]) / (d + 1);
        }
    }
    for (int i = 0; runs >= 0 && i < np; i++) {
        plan_layout *l = &ls[pick[i]];
        if (l->unsimulated[0]) continue; /* a draw failed: the analytical score stands */
        l->sim_step = mean[i], l->sim_exposed = mexp[i], l->step_lo = lo[i], l->step_hi = hi[i];
    }
    free(pick), free(why), free(step), free(exposed), free(mean), free(lo), free(hi), free(mexp);
    return runs;
}

/* ---- --robust: the simulated layouts under the named perturbations ---- */

#define ROBUST_CANDIDATES 5

/* Candidate c (0..4) for layout l, added to w: stragglers on ranks 0 and
 * P - 1, NICs at half speed (node0-nic0, and the NIC of the last GPU of
 * the simulated ranks), jitter. Returns its kind; `what` names it. */
static plan_pert robust_candidate(const plan_ctx *x, const plan_layout *l, int c, whatif *w, char *what, size_t len)
{
    int P = config_ranks(&l->c), gpn = x->spec.gpus_per_node, nics = x->spec.nics_per_node;
    char arg[64], err[LOONG_ERRLEN];
    if (c < 2) {
        int r = c ? P - 1 : 0;
        snprintf(arg, sizeof arg, "%d:%.17g", r, WHATIF_STRAGGLER_DEFAULT);
        snprintf(what, len, "rank %d", r);
        whatif_add_straggler(w, arg, err);
        return PLAN_PERT_STRAGGLER;
    }
    if (c < 4) {
        int node = c == 2 ? 0 : (P - 1) / gpn, nic = c == 2 ? 0 : (((P - 1) % gpn) * nics) / gpn;
        snprintf(what, len, "node%d-nic%d", node, nic);
        snprintf(arg, sizeof arg, "%s:2", what);
        whatif_add_slow_link(w, arg, err);
        return PLAN_PERT_NIC;
    }
    w->jitter = PLAN_ROBUST_JITTER;
    snprintf(what, len, "seed %llu", (unsigned long long)w->seed);
    return PLAN_PERT_JITTER;
}

/* Simulate every simulated layout under each candidate; keep the worst of
 * each kind. Returns the loong sim runs, or -1. */
static int simulate_robust(const plan_args *a, plan_ctx *x, plan_layout *ls, int n, unsigned *mode,
                           char err[LOONG_ERRLEN])
{
    int *pick = xmalloc_array((size_t)n + 1, sizeof *pick, "the robust runs"), np = 0, runs = 0;
    for (int i = 0; i < n; i++)
        if (ls[i].sim_step >= 0) pick[np++] = i;
    whatif *ws = xcalloc((size_t)np + 1, sizeof *ws, "the robust runs");
    char(*what)[WHATIF_NAME] = xcalloc((size_t)np + 1, sizeof *what, "the robust runs");
    double *step = xcalloc((size_t)np + 1, sizeof *step, "the robust runs");
    double *exposed = xcalloc((size_t)np + 1, sizeof *exposed, "the robust runs");
    char(*why)[160] = xcalloc((size_t)np + 1, sizeof *why, "the robust runs");
    for (int c = 0; runs >= 0 && c < ROBUST_CANDIDATES; c++) {
        plan_pert kind = PLAN_PERT_STRAGGLER;
        for (int i = 0; i < np; i++) {
            ws[i] = a->w;
            kind = robust_candidate(x, &ls[pick[i]], c, &ws[i], what[i], sizeof what[i]);
        }
        int r = simulate(a, x, ls, pick, np, mode, ws, step, exposed, why, err);
        runs = r < 0 ? -1 : runs + r;
        for (int i = 0; r >= 0 && i < np; i++) {
            plan_layout *l = &ls[pick[i]];
            if (why[i][0] && !a->quiet && x->rank == 0)
                fprintf(stderr, "loong plan: warning: %s under %s not simulated (%s): that perturbation is left out\n",
                        l->name, what[i], why[i]);
            if (why[i][0] || step[i] <= l->robust[kind]) continue;
            l->robust[kind] = step[i];
            snprintf(l->robust_what[kind], sizeof l->robust_what[kind], "%s", what[i]);
        }
    }
    free(pick), free(ws), free(what), free(step), free(exposed), free(why);
    return runs;
}

/* ---- the command ---- */

/* The table and the CSV: opened (as temporaries) before the search, so that
 * an unwritable path fails at once, and committed together at the end. */
typedef struct plan_outputs {
    afile t, c, j;
} plan_outputs;

static void abort_outputs(plan_outputs *o)
{
    afile_abort(&o->t);
    afile_abort(&o->c);
    afile_abort(&o->j);
}

static int open_outputs(const plan_args *a, plan_outputs *o, char err[LOONG_ERRLEN])
{
    memset(o, 0, sizeof *o);
    if ((a->csv && afile_open(&o->c, a->csv, err) < 0) || (a->json && afile_open(&o->j, a->json, err) < 0) ||
        afile_open(&o->t, a->out, err) < 0) {
        abort_outputs(o);
        return -1;
    }
    return 0;
}

/* --plot: drawn (atomically) before the text outputs are committed, so that
 * a failed plot leaves none of them. */
static int write_plot(const plan_args *a, const plan_ctx *x, const plan_layout *ls, int n, const plan_report *rp,
                      char err[LOONG_ERRLEN])
{
    int *idx = xmalloc_array((size_t)n + 1, sizeof *idx, "the plan's ranking");
    int m = plan_rank(ls, n, idx), pick = m ? plan_recommend(ls, idx, m, rp->tie) : -1;
    free(idx);
    int points = pick >= 0 ? plot_plan(a->plot, ls, n, pick, x->req.gpu_mem, rp->peak, err) : 0;
    if (points < 0) return -1;
    if (!a->quiet) fprintf(stderr, "loong plan: plotted %d layouts in %s\n", points, a->plot);
    return 0;
}

/* --emit megatron|torchtitan: the Megatron-LM arguments or torchtitan job
 * TOML of the pick, or of the row ranked --show ROW. */
static int write_emit(FILE *f, const plan_args *a, const plan_layout *ls, int n, const plan_report *rp,
                      char err[LOONG_ERRLEN])
{
    int *idx = xmalloc_array((size_t)n + 1, sizeof *idx, "the plan's ranking");
    int m = plan_rank(ls, n, idx);
    int i = a->show ? (a->show <= m ? idx[a->show - 1] : -1) : m ? plan_recommend(ls, idx, m, rp->tie) : -1;
    free(idx);
    if (i < 0) {
        snprintf(err, LOONG_ERRLEN,
                 a->show ? "--show %d: the table has %d rows (feasible layouts): give 1 to %d"
                         : "--emit: no layout fits, so there is no pick to emit",
                 a->show, m, m);
        return -1;
    }
    bool mg = !strcmp(a->emit, "megatron");
    int gaps = mg ? cli_megatron_emit(f, &ls[i].c) : cli_torchtitan_emit(f, &ls[i].c);
    if (gaps < 0) {
        snprintf(err, LOONG_ERRLEN, "write error");
        return -1;
    }
    if (gaps && !a->quiet)
        fprintf(stderr, "loong plan: %d knob(s) of %s are not %s's: see the '#' lines\n", gaps, ls[i].name,
                mg ? "Megatron-LM" : "torchtitan");
    return 0;
}

/* --show ROW: the command of the layout ranked ROW, on one line. */
static int write_show(FILE *f, const plan_args *a, const plan_layout *ls, int n, const plan_report *rp,
                      char err[LOONG_ERRLEN])
{
    int *idx = xmalloc_array((size_t)n + 1, sizeof *idx, "the plan's ranking");
    int m = plan_rank(ls, n, idx), i = a->show <= m ? idx[a->show - 1] : -1;
    free(idx);
    if (i < 0) {
        snprintf(err, LOONG_ERRLEN, "--show %d: the table has %d rows (feasible layouts): give 1 to %d", a->show, m, m);
        return -1;
    }
    if (ls[i].sim_step < 0 && !a->quiet)
        fprintf(stderr, "loong plan: row %d (%s) is the analytical model's; this command simulates it\n", a->show,
                ls[i].name);
    fprintf(f, "%s\n", rp->commands[i]);
    return 0;
}

/* --show ROW --from FILE: row ROW's loong sim command from the JSON that
 * loong plan --json wrote, without planning again; exit 2 (one line) when
 * the file is not such a plan or has no such row. */
static int show_from(const plan_args *a)
{
    json_error_t je;
    json_t *j = json_load_file(a->from, 0, &je);
    if (!j)
        return cli_fail("plan", "--from %s: cannot read it as JSON (%s): give the file loong plan --json FILE wrote",
                        a->from, je.text);
    json_t *rows = json_object_get(j, "rows");
    int rc = 0;
    if (!json_is_array(rows) || !json_is_object(json_object_get(j, "request")))
        rc = cli_fail("plan",
                      "--from %s is not a loong plan JSON (no \"rows\" and \"request\"): give the file "
                      "loong plan --json FILE wrote",
                      a->from);
    else if ((size_t)a->show > json_array_size(rows))
        rc = cli_fail("plan", "--show %d: the plan in %s has %zu rows (feasible layouts): give 1 to %zu", a->show,
                      a->from, json_array_size(rows), json_array_size(rows));
    json_t *r = rc ? NULL : json_array_get(rows, (size_t)a->show - 1);
    const char *cmd = json_string_value(json_object_get(r, "command"));
    const char *name = json_string_value(json_object_get(r, "layout")),
               *by = json_string_value(json_object_get(r, "by"));
    if (!rc && (!cmd || !name || !by))
        rc = cli_fail("plan",
                      "--from %s: row %d has no layout, by and command: write the plan again with loong plan "
                      "--json FILE",
                      a->from, a->show);
    char err[LOONG_ERRLEN];
    afile o = {0};
    if (!rc && (afile_open(&o, a->out, err) < 0 || fprintf(o.f, "%s\n", cmd) < 0 || afile_commit(&o, err) < 0)) {
        afile_abort(&o);
        rc = cli_fail("plan", "%s", err[0] ? err : "write error on the output");
    }
    if (!rc && strcmp(by, "sim") && !a->quiet)
        fprintf(stderr, "loong plan: row %d (%s) is the analytical model's; this command simulates it\n", a->show,
                name);
    json_decref(j);
    return rc;
}

static int write_outputs(const plan_args *a, const plan_ctx *x, plan_outputs *o, const plan_layout *ls, int n,
                         const plan_report *rp, char err[LOONG_ERRLEN])
{
    int rc = 0;
    if (a->csv && plan_write_csv(o->c.f, ls, n, rp) < 0)
        rc = -1, snprintf(err, LOONG_ERRLEN, "write error on '%s'", a->csv);
    if (rc == 0 && a->emit) {
        if (write_emit(o->t.f, a, ls, n, rp, err) < 0) rc = -1;
    } else if (rc == 0 && a->show) {
        if (write_show(o->t.f, a, ls, n, rp, err) < 0) rc = -1;
    } else if (rc == 0 && plan_write_table(o->t.f, ls, n, &x->req, rp) < 0)
        rc = -1, snprintf(err, LOONG_ERRLEN, "write error on '%s'", a->out);
    if (rc == 0 && a->json && plan_write_json(o->j.f, ls, n, &x->req, rp) < 0)
        rc = -1, snprintf(err, LOONG_ERRLEN, "write error on '%s'", a->json);
    if (rc == 0 && a->plot) rc = write_plot(a, x, ls, n, rp, err);
    if (rc == 0 && a->csv) rc = afile_commit(&o->c, err);
    if (rc == 0 && a->json) rc = afile_commit(&o->j, err);
    if (rc == 0) rc = afile_commit(&o->t, err);
    if (rc < 0) abort_outputs(o);
    return rc;
}

/* The most common removal reason, for "nothing fits". */
static const char *common_reason(const plan_layout *ls, int n)
{
    int best = -1, bestc = 0;
    for (int i = 0; i < n; i++) {
        int cnt = 0;
        for (int j = 0; j < n; j++)
            cnt += !strcmp(ls[i].reason, ls[j].reason);
        if (cnt > bestc) {
            bestc = cnt;
            best = i;
        }
    }
    return best >= 0 ? ls[best].reason : "no layout";
}

/* Nothing fits: the memory breakdown of the leanest layout and the fixes
 * in the table output, every layout and its reason in the CSV, both
 * committed (a complete answer: no), then the one-line error, exit 2. A
 * request whose layouts all fail before their memory check (their shape)
 * writes nothing. */
static int write_infeasible(const plan_args *a, const plan_ctx *x, plan_outputs *o, const plan_layout *ls, int n,
                            char err[LOONG_ERRLEN])
{
    char fix[128];
    plan_report rp = {.platform = a->platform};
    if (plan_leanest(ls, n) < 0) { /* no layout got past its shape: the GPU count's fault, when it is */
        char why[LOONG_ERRLEN];
        bool count = plan_unsplit_reason(&x->req, why, sizeof why) == 0;
        return cli_fail("plan", "no feasible layout for %d GPUs: %s", x->req.gpus, count ? why : common_reason(ls, n));
    }
    int lean = plan_write_oom(o->t.f, ls, n, &x->req, fix, sizeof fix);
    if (x->user_at >= 0)
        fprintf(o->t.f, "# yours (--layout): %s is not feasible: %s\n", ls[x->user_at].name, ls[x->user_at].reason);
    if (ferror(o->t.f) || (a->csv && plan_write_csv(o->c.f, ls, n, &rp) < 0) ||
        (a->csv && afile_commit(&o->c, err) < 0) || afile_commit(&o->t, err) < 0) {
        abort_outputs(o);
        return cli_fail("plan", "%s", err[0] ? err : "write error on the plan's output");
    }
    return cli_fail(
        "plan",
        "no feasible layout for %d GPUs: the leanest, %s, reserves %.1f GB, over the %.1f GB limit; %s fits "
        "(the breakdown is in the table output)",
        x->req.gpus, ls[lean].name, ls[lean].mem.reserved / 1e9, plan_mem_limit(&x->req) / 1e9, fix);
}

static int plan_search(plan_args *a, plan_ctx *x, plan_outputs *out, char err[LOONG_ERRLEN]);

static int plan_run(plan_args *a, plan_ctx *x)
{
    char err[LOONG_ERRLEN] = "";
    plan_outputs out = {0};
    if (x->rank == 0 && open_outputs(a, &out, err) < 0) return cli_fail("plan", "%s", err);
    int rc = plan_search(a, x, &out, err);
    if (rc) abort_outputs(&out);
    return rc;
}

static int plan_search(plan_args *a, plan_ctx *x, plan_outputs *out, char err[LOONG_ERRLEN])
{
    double t0 = cli_now();
    int n;
    if (use_draw(a, x, NULL, 0, 0, err) < 0) return cli_fail("plan", "%s", err);
    plan_layout *ls = find_user(a, x, plan_enumerate(&x->req, &n), &n);
    if (score_draws(a, x, ls, n, err) < 0) {
        free(ls);
        return cli_fail("plan", "%s", err);
    }
    double t1 = max_over_ranks(x, cli_now());
    int feasible = 0;
    for (int i = 0; i < n; i++)
        feasible += !ls[i].removed;
    if (!feasible) {
        int rc = x->rank == 0 ? write_infeasible(a, x, out, ls, n, err) : 2;
        free(ls);
        return rc;
    }
    unsigned mode = 0;
    int nruns = a->top > 0 || a->exact ? simulate_draws(a, x, ls, n, &mode, err) : 0, nsim = 0;
    double tr = cli_now();
    if (nruns >= 0 && a->robust) {
        int r = simulate_robust(a, x, ls, n, &mode, err);
        nruns = r < 0 ? -1 : nruns + r;
    }
    double robust_s = a->robust ? cli_now() - tr : 0;
    if (nruns < 0) {
        free(ls);
        return cli_fail("plan", "%s", err);
    }
    double t2 = cli_now();
    for (int i = 0; i < n; i++)
        nsim += ls[i].sim_step >= 0;
    char docs[160] = "";
    if (a->cc.doc_dist || a->cc.docs_file || a->cc.val[KNOB_DOCS])
        snprintf(docs, sizeof docs, "%s%.120s",
                 a->cc.doc_dist    ? "--doc-dist "
                 : a->cc.docs_file ? "--docs-file "
                                   : "",
                 a->cc.doc_dist    ? a->cc.doc_dist
                 : a->cc.docs_file ? a->cc.docs_file
                                   : "--docs");
    plan_report rp = {.platform = a->platform,
                      .peak = calib_peak(x->cb),
                      .rows = a->rows,
                      .analytic_s = t1 - t0,
                      .sim_s = t2 - t1,
                      .wall_s = t2 - t0,
                      .simulated = nsim,
                      .runs = nruns,
                      .ranks = x->size,
                      .compose = mode,
                      .draws = a->draws,
                      .docs = docs[0] ? docs : NULL,
                      .tie = a->tie >= 0 ? a->tie : default_tie_pct() / 100,
                      .tie_given = a->tie >= 0,
                      .robust = a->robust,
                      .robust_set = "the worst straggler of ranks 0 and P-1 (kernels x1.25), the worst of node0-nic0 "
                                    "and the last GPU's NIC at half speed, and 5 % jitter (each vs the clean step_s)",
                      .robust_s = robust_s,
                      .why_removed = a->why_removed,
                      .user = x->user_at >= 0 ? &ls[x->user_at] : NULL,
                      .user_added = x->user_added};
    char what[1024];
    whatif_describe(&a->w, what, sizeof what);
    if (whatif_any(&a->w)) rp.perturbed = what;
    fidelity_for_scope(SCOPE_STEP, &rp.model_error);
    char **commands = xcalloc((size_t)n + 1, sizeof *commands, "the plan's commands");
    for (int i = 0; i < n; i++)
        if (!ls[i].removed) commands[i] = layout_command(a, ls, i);
    rp.commands = commands;
    int rc = 0;
    if (x->rank == 0 && write_outputs(a, x, out, ls, n, &rp, err) < 0) rc = cli_fail("plan", "%s", err);
    for (int i = 0; i < n; i++)
        free(commands[i]);
    free(commands);
    free(ls);
    return rc;
}

int cmd_plan(int argc, char **argv)
{
    plan_args a = {.out = "-", .top = 10, .jobs = 2, .rows = 20, .tie = -1, .sim_timeout = 600};
    plan_ctx x = {.user_at = -1};
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    if (a.from) return show_from(&a);
#ifndef HAVE_SIMGRID
    a.top = 0; /* no loong sim in this build: the analytical ranking only */
    a.exact = false;
#endif
    mpi_start(&argc, &argv, &x);
    char err[LOONG_ERRLEN];
    if (make_request(&a, &x, err) < 0)
        rc = cli_fail("plan", "%s", err);
    else
        rc = plan_run(&a, &x);
    calib_free(x.cb);
    return mpi_finish(&x, rc);
}

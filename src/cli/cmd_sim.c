/* loong sim: replay a configuration's DAG on a SimGrid platform: its
 * options (the fold among them), the run, and --compose's composition of
 * a step from a few layers; what it writes is sim_output.c's. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/afile.h"
#include "core/xalloc.h"
#include "model/calib.h"
#include "core/stats.h"
#include "core/strategy.h"
#include "core/trace.h"
#include "sim/sim.h"
#include "model/platform_spec.h"
#include "cli.h"
#include "cli_opts.h"
#include "cmd_sim.h"
#include "sim_child.h"

static void sim_usage(FILE *f)
{
    fprintf(f,
            "usage: loong sim --platform FILE [configuration] [--trace FILE] [-o FILE] [--cfg=K:V] [--log=...]\n"
            "\n"
            "Replay the task DAG of one configuration on a SimGrid platform (see loong topo\n"
            "and topologies/) and print the predicted step time, per-rank busy / idle /\n"
            "exposed-communication time, tokens/s/GPU, MFU and the busiest links.\n"
            "\n"
            "  --platform FILE       SimGrid platform XML with loong GPU hosts       (required)\n"
            "  --calib FILE          calibration table              [<platform dir>/<gpu>.calib]\n"
            "  --trace FILE          write the predicted Chrome/Perfetto trace there (atomically)\n"
            "  --trace-format F      chrome: loong's trace (one file); kineto: the PyTorch profiler's\n"
            "                        form, --trace DIR then gets DIR/rank<N>.pt.trace.json per rank,\n"
            "                        what loong compare and calibrate read from PyTorch [chrome]\n"
            "  --trace-memory        also write each rank's allocated memory over the step as counter\n"
            "                        tracks (Perfetto draws them under the rank's streams); chrome only\n"
            "  --trace-rank R        only rank R in the trace                           [all]\n"
            "  --trace-layer L       only layer L (and model-level tasks) in the trace   [all]\n"
            "  --trace-max SIZE      refuse, before simulating, a trace estimated above SIZE\n"
            "                        (e.g. 1GB); above 1 GB loong sim warns: Perfetto opens\n"
            "                        no more                                        [no limit]\n"
            "  -o, --output FILE     write the summary there (atomically) instead of stdout\n"
            "  --links N             busiest links to list                              [10]\n"
            "  --json FILE           also write a machine-readable summary (step_s, busy/exposed per rank);\n"
            "                        '-' prints it on stdout, and the table then only goes to -o FILE\n"
            "  --layers N            simulate N transformer blocks instead of the model's (loong plan composes)\n"
            "  --compose             predict the step from simulations of the first layers: under ZeRO-1\n"
            "                        of 1 and 2, else until one more layer adds a constant (three equal\n"
            "                        increments, checked 3 layers on); T(L) = T(k) + (L-k)(T(k) - T(k-1));\n"
            "                        if the search would simulate more layers than L: all L. Leading\n"
            "                        dense blocks (first_k_dense_replace) are kept in every run. With\n"
            "                        --micro-batches M, the same over micro-batches: 1, 2, 3 (with a\n"
            "                        pipeline from pp on; interleaved pp, 2 pp, ...) until two increments\n"
            "                        agree, checked 2 on; a pipeline's layers all run. Scope step\n"
            "  --fold DIMS           mesh dimensions simulated by symmetry, comma-separated, or none:\n"
            "                        dp: one replica, the others copied (replicas of whole nodes; the\n"
            "                        platform needs P GPUs, else dp x P); tp: TP rank 0 of each TP\n"
            "                        group (TP groups inside a node, no --tp-overlap); head: head rank\n"
            "                        0 of each Ulysses group (a NIC per GPU; within 0.5 %% of every\n"
            "                        head rank simulated: docs/sim.md); seq: ring rank 0 of each ring\n"
            "                        (what head needs, the zigzag partition of one document, no dual\n"
            "                        ring; within 1 %% of every ring rank: docs/sim.md). Pp never\n"
            "                        folds                                                    [dp]\n"
            "                        A perturbation that makes the replicas, TP, head or ring ranks differ\n"
            "                        turns their fold off, with a note (see Perturbations below)\n"
            "  --dp-mode M           alias: symmetric is dp in --fold, full is dp left out  [symmetric]\n"
            "  --tp-mode M           alias: symmetric is tp in --fold, full is tp left out       [full]\n"
            "  --one-gpu             every rank's kernels share the platform's first GPU, as\n"
            "                        loong exec --device cuda --transport local runs them: the\n"
            "                        kernels in flight divide its speed; transfers keep the links\n"
            "                        between the ranks' GPUs. Nothing folds; no --compose\n"
            "  --gpu-mem SIZE        reserved peak per GPU is checked against this (scope step;\n"
            "                        above it: predicted OOM, a warning)  [81559MiB h100, 80GB a100, 141GB h200]\n"
            "  --quiet               no progress lines on stderr\n"
            "  --timing              print build/simulate/write times and peak memory to stderr\n"
            "  --cfg=KEY:VALUE       SimGrid setting, after loong's defaults (e.g. --cfg=network/model:LV08)\n"
            "  --log=SPEC            SimGrid logging, e.g. --log=loong.thres:verbose\n"
            "  -h, --help            this text\n"
            "\n%s\n%s"
            "\nExit status: 0; 1 when a prediction exceeds the hardware peak (a # BUG line);\n"
            "2 on bad input.\n"
            "\nExample:\n"
            "  loong sim --platform topologies/dgx-h100-8n.xml --model llama3-8b --seq 1M --mesh 8x8 \\\n"
            "            --strategy loongtrain --window 4 --scope step --recompute sc++ --trace predicted.json\n",
            cli_whatif_help(), cli_config_help());
}

/* Move SimGrid's own --cfg=/--log= out of argv (getopt would reject them). */
static int split_simgrid_args(int argc, char **argv, sim_args *a)
{
    a->sg_args = xcalloc((size_t)argc + 1, sizeof *a->sg_args, "the SimGrid options");
    int k = 0;
    for (int i = 0; i < argc; i++) {
        if (i > 0 && (!strncmp(argv[i], "--cfg=", 6) || !strncmp(argv[i], "--log=", 6)))
            a->sg_args[a->nsg++] = argv[i];
        else
            argv[k++] = argv[i];
    }
    argv[k] = NULL;
    return k;
}

const sim_approx_fold sim_approx_folds[SIM_APPROX_FOLDS] = {
    {MESH_HEAD, "head", "head rank", "head groups", "head parallelism", "0.5 %"},
    {MESH_SEQ, "seq", "ring rank", "rings", "context parallelism", "1 %"},
};

/* One alias (--dp-mode or --tp-mode M) on dimension d of the fold: with
 * --fold given too it must agree. */
static int fold_alias(sim_args *a, mesh_dim d, const char *flag, const char *mode, const char **named)
{
    mesh_dims bit = MESH_BIT(d), want = !strcmp(mode, "symmetric") ? bit : 0;
    if (a->fold_text && (a->fold & bit) != want)
        return cli_fail("sim", "--fold %s contradicts %s %s (%s %s folded): give one of them", a->fold_text, flag, mode,
                        mesh_dim_name(d), want ? "is" : "is not");
    a->fold = (a->fold & ~bit) | want;
    if (want && !*named) *named = d == MESH_DP ? "--dp-mode symmetric" : "--tp-mode symmetric";
    return 0;
}

/* The fold from --fold (default dp) and its aliases, and the option each
 * folded dimension's notes name. */
static int resolve_fold(sim_args *a)
{
    char err[LOONG_ERRLEN];
    a->fold = SIM_FOLD_DEFAULT;
    if (a->fold_text && sim_fold_parse(a->fold_text, &a->fold, err) < 0) return cli_fail("sim", "%s", err);
    if (a->fold_text) {
        a->dp_flag = a->fold & MESH_BIT(MESH_DP) ? "--fold dp" : NULL;
        a->tp_flag = a->fold & MESH_BIT(MESH_TP) ? "--fold tp" : NULL;
    }
    if (a->dp_mode && fold_alias(a, MESH_DP, "--dp-mode", a->dp_mode, &a->dp_flag)) return 2;
    if (a->tp_mode && fold_alias(a, MESH_TP, "--tp-mode", a->tp_mode, &a->tp_flag)) return 2;
    if (!a->one_gpu) return 0;
    /* ranks on one GPU share it: a rank left out would leave it faster */
    const char *folding = a->fold_text && a->fold                          ? "--fold"
                          : a->dp_mode && !strcmp(a->dp_mode, "symmetric") ? "--dp-mode symmetric"
                          : a->tp_mode && !strcmp(a->tp_mode, "symmetric") ? "--tp-mode symmetric"
                                                                           : NULL;
    if (folding)
        return cli_fail("sim", "--one-gpu simulates every rank sharing the GPU: drop %s (nothing folds)", folding);
    if (a->compose)
        return cli_fail("sim", "--one-gpu does not compose layers (the sharing spans the step): drop --compose");
    a->fold = 0;
    a->dp_flag = a->tp_flag = NULL;
    return 0;
}

static int parse_args(int argc, char **argv, sim_args *a, cli_config *cc)
{
    static const struct option own[] = {
        {"platform", required_argument, 0, 'p'},
        {"calib", required_argument, 0, 'c'},
        {"trace", required_argument, 0, 't'},
        {"trace-rank", required_argument, 0, 'R'},
        {"trace-layer", required_argument, 0, 'L'},
        {"trace-max", required_argument, 0, 'X'},
        {"trace-format", required_argument, 0, 'K'},
        {"trace-memory", no_argument, 0, 'W'},
        {"output", required_argument, 0, 'o'},
        {"links", required_argument, 0, 'l'},
        {"json", required_argument, 0, 'j'},
        {"layers", required_argument, 0, 'y'},
        {"quiet", no_argument, 0, 'q'},
        {"timing", no_argument, 0, 'T'},
        {"compose", no_argument, 0, 'C'},
        {"dp-mode", required_argument, 0, 'M'},
        {"tp-mode", required_argument, 0, 'U'},
        {"fold", required_argument, 0, 'F'},
        {"gpu-mem", required_argument, 0, 'G'},
        {"one-gpu", no_argument, 0, '1'},
        CLI_WHATIF_OPTIONS,
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const struct option *opts = cli_options(own);
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        if (cli_config_option(cc, opt, optarg)) continue;
        int wi = cli_whatif_option("sim", &a->w, opt, optarg);
        if (wi < 0) return 2;
        if (wi) continue;
        switch (opt) {
        case 'p': a->platform = optarg; break;
        case 'c': a->calib = optarg; break;
        case 't': a->trace = optarg; break;
        case 'K':
            if (strcmp(optarg, "chrome") && strcmp(optarg, "kineto"))
                return cli_fail("sim", "--trace-format '%s' is not one of: chrome, kineto", optarg);
            a->kineto = !strcmp(optarg, "kineto");
            break;
        case 'W': a->trace_mem = true; break;
        case 'o':
            a->out = optarg;
            a->out_given = true;
            break;
        case 'q': a->quiet = true; break;
        case 'j': a->json = optarg; break;
        case 'y':
            if (cli_opt_count("sim", "--layers", optarg, true, INT_MAX, &a->layers)) return 2;
            if (a->layers < 1) return cli_fail("sim", "--layers must be at least 1, got '%s'", optarg);
            break;
        case 'T': a->timing = true; break;
        case 'C': a->compose = true; break;
        case '1': a->one_gpu = true; break;
        case 'M':
            if (strcmp(optarg, "symmetric") && strcmp(optarg, "full"))
                return cli_fail("sim", "--dp-mode '%s' is not one of: symmetric, full", optarg);
            a->dp_mode = optarg;
            break;
        case 'U':
            if (strcmp(optarg, "symmetric") && strcmp(optarg, "full"))
                return cli_fail("sim", "--tp-mode '%s' is not one of: symmetric, full", optarg);
            a->tp_mode = optarg;
            break;
        case 'F': a->fold_text = optarg; break;
        case 'R':
            if (cli_opt_count("sim", "--trace-rank", optarg, true, INT_MAX, &a->flt.rank)) return 2;
            break;
        case 'G': {
            char err[LOONG_ERRLEN];
            if (units_parse_mem(optarg, "--gpu-mem", &a->gpu_mem, err) < 0) return cli_fail("sim", "%s", err);
            if (!(a->gpu_mem > 0)) return cli_fail("sim", "--gpu-mem '%s' must be above 0 (e.g. 80GB)", optarg);
            break;
        }
        case 'X': {
            char err[LOONG_ERRLEN];
            if (units_parse_mem(optarg, "--trace-max", &a->trace_max, err) < 0) return cli_fail("sim", "%s", err);
            break;
        }
        case 'L':
            if (cli_opt_count("sim", "--trace-layer", optarg, true, INT_MAX, &a->flt.layer)) return 2;
            break;
        case 'l':
            if (cli_opt_count("sim", "--links", optarg, true, INT_MAX, &a->links)) return 2;
            break;
        case 'h':
        default: return cli_opt_tail("sim", "loong sim", opt, argv, sim_usage, -1);
        }
    }
    if (cli_opt_no_operands("sim", "loong sim", argc, argv)) return 2;
    if (resolve_fold(a)) return 2;
    if (!a->platform)
        return cli_fail("sim", "--platform FILE is required: a SimGrid platform, e.g. topologies/dgx-h100-8n.xml");
    if (a->trace_mem && (!a->trace || a->kineto))
        return cli_fail("sim", "--trace-memory adds counter tracks to loong's trace: give --trace FILE (and no "
                               "--trace-format kineto)");
    if (a->json && !strcmp(a->json, "-") && !strcmp(a->out, "-") && a->out_given)
        return cli_fail("sim", "-o - and --json - both name standard output: give one of them a file");
    char err[LOONG_ERRLEN];
    if (cli_find_platform(a->platform, a->where, sizeof a->where, err) < 0) return cli_fail("sim", "%s", err);
    a->platform = a->where;
    return 0;
}

/* A mesh smaller than the platform is legitimate (a slice of a cluster),
 * but say so: the rest of the GPUs stay idle. */
static void note_idle_gpus(const config *c, sim_platform *pf)
{
    int used = config_world(c), have = sim_platform_gpus(pf); /* replicas by symmetry count too */
    if (used >= have) return;
    fprintf(stderr,
            "loong sim: note: the layout uses %d of the platform's %d GPUs, the others idle (a larger mesh or --dp "
            "fills them)\n",
            used, have);
}

/* Folded replicas and a mixture of experts: its expert gradients (and
 * with ep > P its all-to-alls) cross replicas beside the gradient
 * group's collectives, and folding drops their contention: say so. */
static void note_moe_fold(const config *c, unsigned fold)
{
    if (!config_moe(c) || c->dp == 1 || !(fold & MESH_BIT(MESH_DP))) return;
    fprintf(stderr, "loong sim: note: the experts' traffic across the folded replicas runs beside the gradient "
                    "group's without contending for the NICs, so the step may be short (docs/moe.md: 4-16 %%); "
                    "--fold none simulates every replica\n");
}

/* The trace's estimated size against --trace-max (an error) and
 * Perfetto's limit (a warning), before any simulation. */
static int check_trace_size(const sim_args *a, const dag *g, char err[LOONG_ERRLEN])
{
    if (!a->trace) return 0;
    double est = trace_estimate_bytes(g, &a->flt);
    if (a->trace_max > 0 && est > a->trace_max) {
        snprintf(err, LOONG_ERRLEN,
                 "--trace %s would be about %.3g GB, above --trace-max %.3g GB: narrow it with --trace-rank R or "
                 "--trace-layer L, or raise --trace-max",
                 a->trace, est / 1e9, a->trace_max / 1e9);
        return -1;
    }
    if (est > TRACE_PERFETTO_MAX)
        fprintf(stderr,
                "loong sim: warning: --trace %s will be about %.2f GB; Perfetto's UI opens at most 1 GB: give "
                "--trace-rank R or --trace-layer L for a trace it opens\n",
                a->trace, est / 1e9);
    return 0;
}

static int simulate(sim_args *a, const config *c)
{
    char err[LOONG_ERRLEN];
    double t0 = cli_now();
    sim_outputs out;
    if (simout_open(a, &out, err) < 0) return cli_fail("sim", "%s", err);
    sim_platform *pf = sim_platform_open(a->platform, a->nsg, a->sg_args, err);
    if (pf && sim_platform_perturb(pf, &a->w, err) < 0) {
        sim_platform_free(pf);
        pf = NULL;
    }
    if (pf && a->one_gpu) sim_platform_share_one_gpu(pf);
    calib *cb = pf ? calib_for_platform(a->platform, sim_platform_kind(pf), a->calib, err) : NULL;
    if (cb && calib_check_precision(cb, c->precision, err) < 0) {
        calib_free(cb);
        cb = NULL;
    }
    /* TP, head or ring ranks by symmetry: only the representatives' tasks are needed, unless a trace shows
     * every rank (or --tp-overlap's p2p between TP ranks makes the fold fail: sim_run then says why
     * in one line) */
    mesh_dims copied = a->trace ? 0 : a->fold & SIM_FOLD_COPIED;
    if (c->tp_overlap || config_ep_breaks_tp_fold(c)) copied &= ~MESH_BIT(MESH_TP);
    if ((copied & MESH_BIT(MESH_SEQ)) && config_ring_asymmetry(c)) copied &= ~MESH_BIT(MESH_SEQ);
    dag *g = cb ? dag_build_folded(c, copied, err) : NULL;
    if (g && !a->quiet) note_idle_gpus(c, pf), note_moe_fold(c, a->fold);
    mem_check mc = {0};
    if (g) simout_memory_check(a, c, sim_platform_kind(pf), &mc);
    if (!g || check_trace_size(a, g, err) < 0) {
        simout_abort(&out);
        dag_free(g);
        calib_free(cb);
        sim_platform_free(pf);
        return cli_fail("sim", "%s", err);
    }
    double t1 = cli_now();
    sim_result res;
    int bugs = 0, rc = sim_run(pf, g, cb, !a->quiet, a->fold, &res, err);
    double t2 = cli_now();
    if (rc == 0) {
        rc = simout_write(g, cb, &res, a, pf, &mc, &out, &bugs, err);
        sim_result_free(&res);
        if (rc == 0) simout_warn_oom(c, &mc);
    } else {
        simout_abort(&out);
    }
    if (a->timing && rc == 0)
        fprintf(stderr, "# timing: load + build %.3f s (%u tasks), simulate %.3f s, write %.3f s, peak RSS %.1f MB\n",
                t1 - t0, dag_ntasks(g), t2 - t1, cli_now() - t2, cli_peak_rss_mb());
    dag_free(g);
    calib_free(cb);
    sim_platform_free(pf);
    if (rc < 0) return cli_fail("sim", "%s", err);
    if (bugs) {
        fprintf(stderr, "loong sim: error: %d prediction(s) above the hardware peak (see the # BUG lines)\n", bugs);
        return 1;
    }
    return 0;
}

/* A fold is exact only while the copies it skips run alike. A perturbation
 * that makes them differ (whatif_breaks_fold) turns the fold off, with a
 * note on stderr: the default fold of dp, and an explicit --fold (or
 * --dp-mode / --tp-mode symmetric) too (a wrong step is worse than a
 * slower run). Refused when every replica would need GPUs the platform
 * lacks. */
static int unfold_for_whatif(sim_args *a, const config *c)
{
    mesh m = config_mesh(c);
    char why[LOONG_ERRLEN], err[LOONG_ERRLEN];
    int world = config_world(c);
    if (c->dp > 1 && (a->fold & MESH_BIT(MESH_DP)) && whatif_breaks_fold(&a->w, &m, MESH_DP, why, sizeof why)) {
        platform_spec sp;
        if (platform_spec_read(a->platform, &sp, err) == 0 && sp.nodes * sp.gpus_per_node < world) {
            int nodes = (world + sp.gpus_per_node - 1) / sp.gpus_per_node;
            return cli_fail("sim",
                            "%s, so every replica must be simulated (%d GPUs; folded, the step would be "
                            "wrong), and %s has %d: use a platform of %d nodes (loong topo --gpu %s --nodes %d "
                            "--gpus-per-node %d)",
                            why, world, a->platform, sp.nodes * sp.gpus_per_node, nodes, sp.gpu, nodes,
                            sp.gpus_per_node);
        }
        if (a->dp_flag)
            fprintf(stderr,
                    "loong sim: note: %s switched off: %s, so folding would give a wrong step; every replica is "
                    "simulated in full (%d GPUs)\n",
                    a->dp_flag, why, world);
        else
            fprintf(stderr,
                    "loong sim: note: data-parallel replicas not folded (the default --dp-mode symmetric): %s; every "
                    "replica is simulated in full (%d GPUs)\n",
                    why, world);
        a->fold &= ~MESH_BIT(MESH_DP);
        a->dp_unfolded = true;
    }
    if (c->tp > 1 && (a->fold & MESH_BIT(MESH_TP)) && whatif_breaks_fold(&a->w, &m, MESH_TP, why, sizeof why)) {
        fprintf(stderr,
                "loong sim: note: %s switched off: %s, so folding would give a wrong step; every TP rank is "
                "simulated in full\n",
                a->tp_flag, why);
        a->fold &= ~MESH_BIT(MESH_TP);
        a->tp_unfolded = true;
    }
    for (int i = 0; i < SIM_APPROX_FOLDS; i++) {
        const sim_approx_fold *f = &sim_approx_folds[i];
        mesh_dims bit = MESH_BIT(f->dim);
        if (m.degree[f->dim] < 2 || !(a->fold & bit) || !whatif_breaks_fold(&a->w, &m, f->dim, why, sizeof why))
            continue;
        fprintf(stderr,
                "loong sim: note: --fold %s switched off: %s, so folding would give a wrong step; every %s is "
                "simulated in full\n",
                f->name, why, f->rank);
        a->fold &= ~bit;
        a->approx_unfolded |= bit;
    }
    return 0;
}

/* Flags that only make sense against the configuration: checked before any
 * work. A straggler may be any rank of the run, every replica's: one the
 * fold would skip turns the fold off (unfold_for_whatif). */
static int check_against_config(sim_args *a, const config *c)
{
    char err[LOONG_ERRLEN];
    if (whatif_check_ranks(&a->w, config_world(c), err) < 0) return cli_fail("sim", "%s", err);
    if (unfold_for_whatif(a, c)) return 2;
    if ((a->flt.rank >= 0 || a->flt.layer >= 0) && !a->trace)
        return cli_fail("sim", "--trace-rank and --trace-layer select what --trace FILE writes: add --trace FILE");
    if (a->trace_max > 0 && !a->trace)
        return cli_fail("sim",
                        "--trace-max limits what --trace FILE writes, and no --trace was given: add --trace FILE "
                        "or drop --trace-max");
    if (a->flt.rank >= config_ranks(c))
        return cli_fail("sim", "--trace-rank %d is not a rank of mesh %dx%d: use 0..%d", a->flt.rank, c->p_head,
                        c->p_seq, config_ranks(c) - 1);
    if (a->kineto && !a->trace)
        return cli_fail("sim", "--trace-format kineto says how --trace DIR is written, and no --trace was given: add "
                               "--trace DIR");
    if (a->kineto && a->flt.layer >= 0)
        return cli_fail("sim", "--trace-layer cuts a step, and a profiler trace holds whole steps: drop --trace-layer "
                               "with --trace-format kineto");
    if (a->flt.layer >= c->model.layers)
        return cli_fail("sim", "--trace-layer %d is not a layer of the %d simulated: use 0..%d", a->flt.layer,
                        c->model.layers, c->model.layers - 1);
    return 0;
}

/* A `cpu` platform stands for `loong exec`'s CPU ranks, which compute in
 * fp32: without --dtype, a prediction on it takes exec's default, so the
 * two traces compare as they are. */
static void default_dtype(const sim_args *a, cli_config *cc)
{
    platform_spec sp;
    char err[LOONG_ERRLEN];
    if (!cc->val[KNOB_DTYPE] && a->platform && platform_spec_read(a->platform, &sp, err) == 0 && !strcmp(sp.gpu, "cpu"))
        cc->val[KNOB_DTYPE] = "fp32";
}

int cmd_sim(int argc, char **argv)
{
    sim_args a = {.out = "-", .links = 10, .flt = {-1, -1, 0}};
    cli_config cc = {0};
    argc = split_simgrid_args(argc, argv, &a);
    int rc = parse_args(argc, argv, &a, &cc);
    if (rc) {
        free(a.sg_args);
        return rc < 0 ? 0 : rc;
    }
    char err[LOONG_ERRLEN];
    config c;
    default_dtype(&a, &cc);
    if (cli_config_finish(&cc, &c, err) < 0) {
        free(a.sg_args);
        return cli_fail("sim", "%s", err);
    }
    if (a.layers > 0) {
        c.model.layers = a.layers;
        if (config_validate(&c, err) < 0) {
            free(a.sg_args);
            return cli_fail("sim", "%s", err);
        }
    }
    if (cli_config_seed(&cc, &a.w.seed, err) < 0) {
        free(a.sg_args);
        return cli_fail("sim", "%s", err);
    }
    rc = check_against_config(&a, &c);
    if (rc == 0) rc = a.compose ? sim_compose(&a, &cc, &c) : simulate(&a, &c);
    free(a.sg_args);
    return rc;
}

/* loong sim: replay a configuration's DAG on a SimGrid platform. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/afile.h"
#include "model/calib.h"
#include "core/stats.h"
#include "core/strategy.h"
#include "core/timeline.h"
#include "core/trace.h"
#include "sim/sim.h"
#include "model/platform_spec.h"
#include "cli.h"
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
            "  --trace-rank R        only rank R in the trace                           [all]\n"
            "  --trace-layer L       only layer L (and model-level tasks) in the trace   [all]\n"
            "  -o, --output FILE     write the summary there (atomically) instead of stdout\n"
            "  --links N             busiest links to list                              [10]\n"
            "  --json FILE           also write a machine-readable summary (step_s, busy/exposed per rank)\n"
            "  --layers N            simulate N transformer blocks instead of the model's (loong plan composes)\n"
            "  --compose             predict the step from simulations of 1 and 2 layers,\n"
            "                        T(L) = T(1) + (L-1)(T(2) - T(1)); scope step, ZeRO-1, no trace\n"
            "  --quiet               no progress lines on stderr\n"
            "  --timing              print build/simulate/write times and peak memory to stderr\n"
            "  --cfg=KEY:VALUE       SimGrid setting, after loong's defaults (e.g. --cfg=network/model:LV08)\n"
            "  --log=SPEC            SimGrid logging, e.g. --log=loong.thres:verbose\n"
            "  -h, --help            this text\n"
            "\n%s%s"
            "\nExit status: 0; 1 when a prediction exceeds the hardware peak (a # BUG line);\n"
            "2 on bad input.\n"
            "\nExample:\n"
            "  loong sim --platform topologies/dgx-h100-8n.xml --model llama3-8b --seq 1M --mesh 8x8 \\\n"
            "            --strategy loongtrain --window 4 --scope step --trace predicted.json\n",
            cli_config_help, strategy_help());
}

typedef struct sim_args {
    const char *platform, *calib, *trace, *out, *json;
    int links, layers;
    trace_filter flt;
    bool quiet, timing, compose;
    char **sg_args; /* --cfg= and --log= for SimGrid */
    int nsg;
} sim_args;

/* Move SimGrid's own --cfg=/--log= out of argv (getopt would reject them). */
static int split_simgrid_args(int argc, char **argv, sim_args *a)
{
    a->sg_args = calloc((size_t)argc + 1, sizeof *a->sg_args);
    if (!a->sg_args) exit(2);
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

static int parse_int_opt(const char *s, const char *what, int *out)
{
    char err[LOONG_ERRLEN];
    if (!strcmp(s, "0")) {
        *out = 0;
        return 0;
    }
    if (units_parse_int(s, what, out, err) < 0) return cli_fail("sim", "%s", err);
    return 0;
}

static int parse_args(int argc, char **argv, sim_args *a, cli_config *cc)
{
    static const struct option opts[] = {
        CLI_CONFIG_OPTIONS,
        {"platform", required_argument, 0, 'p'},
        {"calib", required_argument, 0, 'c'},
        {"trace", required_argument, 0, 't'},
        {"trace-rank", required_argument, 0, 'R'},
        {"trace-layer", required_argument, 0, 'L'},
        {"output", required_argument, 0, 'o'},
        {"links", required_argument, 0, 'l'},
        {"json", required_argument, 0, 'j'},
        {"layers", required_argument, 0, 'y'},
        {"quiet", no_argument, 0, 'q'},
        {"timing", no_argument, 0, 'T'},
        {"compose", no_argument, 0, 'C'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        if (cli_config_option(cc, opt, optarg)) continue;
        switch (opt) {
        case 'p': a->platform = optarg; break;
        case 'c': a->calib = optarg; break;
        case 't': a->trace = optarg; break;
        case 'o': a->out = optarg; break;
        case 'q': a->quiet = true; break;
        case 'j': a->json = optarg; break;
        case 'y':
            if (parse_int_opt(optarg, "--layers", &a->layers)) return 2;
            break;
        case 'T': a->timing = true; break;
        case 'C': a->compose = true; break;
        case 'R':
            if (parse_int_opt(optarg, "--trace-rank", &a->flt.rank)) return 2;
            break;
        case 'L':
            if (parse_int_opt(optarg, "--trace-layer", &a->flt.layer)) return 2;
            break;
        case 'l':
            if (parse_int_opt(optarg, "--links", &a->links)) return 2;
            break;
        case 'h': sim_usage(stdout); return -1;
        default: return cli_fail("sim", "unknown or incomplete option '%s': see loong sim --help", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_fail("sim", "unexpected argument '%s': see loong sim --help", argv[optind]);
    if (!a->platform)
        return cli_fail("sim", "--platform FILE is required: a SimGrid platform, e.g. topologies/dgx-h100-8n.xml");
    return 0;
}

/* The calibration table: --calib, or the platform's default for its GPU. */
static calib *load_calib(const sim_args *a, sim_platform *pf, char err[LOONG_ERRLEN])
{
    const char *kind = sim_platform_kind(pf);
    char *path = a->calib ? strdup(a->calib) : sim_platform_calib_path(pf);
    if (!path) exit(2);
    if (!a->calib && access(path, R_OK) != 0) {
        snprintf(err, LOONG_ERRLEN, "unknown GPU kind '%s': no calibration table %s (give one with --calib FILE)", kind,
                 path);
        free(path);
        return NULL;
    }
    calib *cb = calib_load(path, err);
    free(path);
    if (cb && strcmp(calib_gpu(cb), kind)) {
        snprintf(err, LOONG_ERRLEN,
                 "calibration table is for GPU kind '%s' but the platform's GPUs are '%s': use a table for %s",
                 calib_gpu(cb), kind, kind);
        calib_free(cb);
        return NULL;
    }
    return cb;
}

static void write_header(FILE *f, const dag *g, const sim_args *a, sim_platform *pf)
{
    char desc[256];
    config_describe(dag_config(g), desc, sizeof desc);
    fprintf(f, "# loong sim: %s\n", desc);
    fprintf(f, "# platform %s: %d %s GPUs, %d per node; %u tasks\n", a->platform, sim_platform_gpus(pf),
            sim_platform_kind(pf), sim_platform_gpus_per_node(pf), dag_ntasks(g));
    fprintf(f, "# network model: CM02, no cross-traffic, no TCP window bound, SPLITDUPLEX links");
    for (int i = 0; i < a->nsg; i++)
        fprintf(f, " %s", a->sg_args[i]);
    fputc('\n', f);
}

/* The --json summary: step time and per-rank busy / exposed means and
 * maxima, for scripts and `loong plan`. */
static int write_json(const dag *g, const sim_result *res, const char *path, char err[LOONG_ERRLEN])
{
    const config *c = dag_config(g);
    int P = config_ranks(c);
    double sum[2] = {0, 0}, mx[2] = {0, 0};
    for (int r = 0; r < P; r++) {
        rank_timeline tl;
        timeline_rank(g, res->start, res->dur, r, res->makespan, &tl);
        double v[2] = {tl.busy, tl.exposed};
        for (int k = 0; k < 2; k++) {
            sum[k] += v[k];
            if (v[k] > mx[k]) mx[k] = v[k];
        }
    }
    json_t *j =
        json_pack("{s:o, s:f, s:f, s:f, s:f, s:f, s:I, s:i, s:f}", "config", config_to_json(c), "step_s", res->makespan,
                  "busy_mean_s", sum[0] / P, "busy_max_s", mx[0], "exposed_mean_s", sum[1] / P, "exposed_max_s", mx[1],
                  "tasks", (json_int_t)dag_ntasks(g), "layers", c->model.layers, "sim_wall_s", res->wall_s);
    afile f = {0};
    if (!j) exit(2);
    int rc = afile_open(&f, path, err);
    if (rc == 0 && json_dumpf(j, f.f, JSON_COMPACT | JSON_REAL_PRECISION(17)) == 0) {
        fputc('\n', f.f);
        rc = afile_commit(&f, err);
    } else if (rc == 0) {
        afile_abort(&f);
        snprintf(err, LOONG_ERRLEN, "write error on '%s'", path);
        rc = -1;
    }
    json_decref(j);
    return rc;
}

/* Write trace then summary to temporaries; commit both only if both succeed. */
static int write_outputs(const dag *g, const calib *cb, const sim_result *res, sim_args *a, sim_platform *pf, int *bugs,
                         char err[LOONG_ERRLEN])
{
    afile tr = {0}, sm = {0};
    if (a->trace && afile_open(&tr, a->trace, err) < 0) return -1;
    if (a->trace && trace_write(tr.f, g, "sim", res->start, res->dur, &a->flt) < 0) {
        afile_abort(&tr);
        snprintf(err, LOONG_ERRLEN, "write error on '%s'", a->trace);
        return -1;
    }
    if (afile_open(&sm, a->out, err) < 0) {
        afile_abort(&tr);
        return -1;
    }
    write_header(sm.f, g, a, pf);
    if (sim_summary_write(sm.f, g, cb, res, a->links, bugs) < 0) {
        afile_abort(&tr);
        afile_abort(&sm);
        snprintf(err, LOONG_ERRLEN, "write error on '%s'", a->out);
        return -1;
    }
    if (a->trace && afile_commit(&tr, err) < 0) {
        afile_abort(&sm);
        return -1;
    }
    return afile_commit(&sm, err);
}

static int simulate(sim_args *a, const config *c)
{
    char err[LOONG_ERRLEN];
    double t0 = cli_now();
    sim_platform *pf = sim_platform_open(a->platform, a->nsg, a->sg_args, err);
    if (!pf) return cli_fail("sim", "%s", err);
    calib *cb = load_calib(a, pf, err);
    if (!cb) {
        sim_platform_free(pf);
        return cli_fail("sim", "%s", err);
    }
    dag *g = dag_build(c, err);
    if (!g) {
        calib_free(cb);
        sim_platform_free(pf);
        return cli_fail("sim", "%s", err);
    }
    double t1 = cli_now();
    sim_result res;
    int bugs = 0, rc = sim_run(pf, g, cb, !a->quiet, &res, err);
    double t2 = cli_now();
    if (rc == 0) {
        rc = write_outputs(g, cb, &res, a, pf, &bugs, err);
        if (rc == 0 && a->json) rc = write_json(g, &res, a->json, err);
        sim_result_free(&res);
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

/* ---- --compose: two small simulations instead of one of every layer ---- */

/* Run this program as `loong sim ARGS --layers=L --json=PATH`, where ARGS
 * are the user's arguments without the options compose replaces; returns
 * the JSON's step and mean exposed communication. SimGrid initialises once
 * per process, hence a child per simulation. */
static int run_layers(char **args, int nargs, char *const *sg, int nsg, int layers, const char *json, double *step,
                      double *exposed, char err[LOONG_ERRLEN])
{
    char **v = calloc((size_t)(nargs + nsg + 8), sizeof *v), lay[32], js[4200];
    int k = 0;
    v[k++] = "loong";
    v[k++] = "sim";
    for (int i = 0; i < nargs; i++)
        v[k++] = args[i];
    for (int i = 0; i < nsg; i++)
        v[k++] = sg[i];
    snprintf(lay, sizeof lay, "--layers=%d", layers);
    snprintf(js, sizeof js, "--json=%s", json);
    v[k++] = lay;
    v[k++] = js;
    v[k++] = "--output=/dev/null";
    v[k++] = "--quiet";
    pid_t pid;
    int status = 0, rc = sim_child_spawn(v, NULL, &pid, err);
    free(v);
    if (rc || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) > 1) {
        snprintf(err, LOONG_ERRLEN, "the %d-layer simulation failed", layers);
        return -1;
    }
    rc = sim_child_result(json, step, exposed);
    if (rc) snprintf(err, LOONG_ERRLEN, "the %d-layer simulation wrote no summary", layers);
    return rc;
}

/* The user's arguments minus --compose, --json, -o/--output (which compose
 * writes itself). */
static int kept_args(int argc, char **argv, char **out)
{
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        bool drop_val = !strcmp(s, "--json") || !strcmp(s, "-o") || !strcmp(s, "--output");
        if (!strcmp(s, "--compose") || !strncmp(s, "--json=", 7) || !strncmp(s, "--output=", 9)) continue;
        if (drop_val) {
            i++;
            continue;
        }
        out[n++] = argv[i];
    }
    return n;
}

static int compose(int argc, char **argv, const sim_args *a, const config *c)
{
    char err[LOONG_ERRLEN] = "", dir[] = "/tmp/loong-compose-XXXXXX", path[2][64];
    int L = c->model.layers;
    if (c->scope != SCOPE_STEP || c->zero != 1 || L < 3 || a->trace)
        return cli_fail("sim", "--compose needs --scope step, --zero 1, a model of 3 or more layers and no --trace "
                               "(the composition is exact only there: README, \"loong sim\")");
    if (!mkdtemp(dir)) return cli_fail("sim", "cannot create a temporary directory");
    char **args = calloc((size_t)argc + 1, sizeof *args);
    int n = kept_args(argc, argv, args);
    double t[2], x[2];
    int rc = 0;
    for (int l = 0; l < 2 && rc == 0; l++) {
        snprintf(path[l], sizeof path[l], "%s/l%d.json", dir, l + 1);
        rc = run_layers(args, n, a->sg_args, a->nsg, l + 1, path[l], &t[l], &x[l], err);
    }
    free(args);
    rmdir(dir);
    if (rc) return cli_fail("sim", "%s", err);
    double step = t[0] + (L - 1) * (t[1] - t[0]), exposed = x[0] + (L - 1) * (x[1] - x[0]);
    double tokens = (double)c->batch * (double)c->seq;
    int P = config_ranks(c);
    char desc[256];
    config_describe(c, desc, sizeof desc);
    afile f;
    if (afile_open(&f, a->out, err) < 0) return cli_fail("sim", "%s", err);
    fprintf(f.f,
            "# loong sim --compose: %s\n# platform %s; composed from simulations of 1 and 2 layers (%.6f s, %.6f s):\n"
            "#   T(L) = T(1) + (L - 1) (T(2) - T(1)) with L = %d\n",
            desc, a->platform, t[0], t[1], L);
    fprintf(f.f, "# step time: %.6f s (training step, step)\n", step);
    fprintf(f.f, "# throughput: %.1f tokens/s/GPU (%.0f tokens per training step on %d GPUs)\n", tokens / (step * P),
            tokens, P);
    platform_spec sp; /* the GPU peak, from the platform's spec, without loading SimGrid here */
    if (platform_spec_read(a->platform, &sp, err) == 0)
        fprintf(f.f, "# MFU: %.2f %% (model FLOPs %.4g TFLOP / (step time x %d GPUs x peak %.1f TFLOP/s))\n",
                100 * stats_mfu(c, step, sp.peak), (double)stats_model_flops(c) / 1e12, P, sp.peak / 1e12);
    fprintf(f.f, "# exposed communication, mean per rank: %.6f s (composed the same way)\n", exposed);
    if (afile_commit(&f, err) < 0) return cli_fail("sim", "%s", err);
    if (a->json) {
        json_t *j = json_pack("{s:o, s:f, s:f, s:b}", "config", config_to_json(c), "step_s", step, "exposed_mean_s",
                              exposed, "composed", 1);
        afile jf;
        rc = afile_open(&jf, a->json, err);
        if (rc == 0 && json_dumpf(j, jf.f, JSON_COMPACT | JSON_REAL_PRECISION(17)) == 0)
            rc = afile_commit(&jf, err);
        else if (rc == 0)
            afile_abort(&jf), rc = -1;
        json_decref(j);
        if (rc) return cli_fail("sim", "%s", err[0] ? err : "cannot write the --json summary");
    }
    return 0;
}

int cmd_sim(int argc, char **argv)
{
    sim_args a = {.out = "-", .links = 10, .flt = {-1, -1}};
    cli_config cc = {0};
    argc = split_simgrid_args(argc, argv, &a);
    int rc = parse_args(argc, argv, &a, &cc);
    if (rc) {
        free(a.sg_args);
        return rc < 0 ? 0 : rc;
    }
    char err[LOONG_ERRLEN];
    config c;
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
    rc = a.compose ? compose(argc, argv, &a, &c) : simulate(&a, &c);
    free(a.sg_args);
    return rc;
}

/* loong compare --kineto: a prediction against PyTorch profiler traces, by
 * kind, rank, collective and step (task ids cannot match). */
#include <jansson.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/kprofile.h"
#include "core/afile.h"
#include "core/infile.h"
#include "core/xalloc.h"
#include "cli.h"
#include "cli_opts.h"
#include "plot.h"
#include "sim_child.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: loong compare --kineto TRACE|DIR ... --predicted PRED.json\n"
            "       loong compare --kineto TRACE|DIR ... --platform FILE [--calib FILE]\n"
            "                     (--config DAG.json | configuration options)\n"
            "                     [--steps N|N-M] [--kernel-names FILE] [--json FILE] [--plot PNG]\n"
            "                     [--max-error PCT] [--top N]\n"
            "\n"
            "Compare a loong prediction with the PyTorch profiler (Kineto) traces of the real\n"
            "run: one trace per rank (.json or .json.gz; a directory: its traces), as\n"
            "torch.profiler writes them (docs/kineto.md says how to profile). Task ids cannot\n"
            "match a profiler trace, so the comparison is by level: kernel time per kind\n"
            "(attention, GEMM, each NCCL collective, p2p, other), per rank (step time and\n"
            "exposed communication), per collective op and size, and the step time. The\n"
            "prediction is a loong trace (--predicted), or the configuration is simulated\n"
            "here (loong sim as a child) from --config (a loong dag --format json file, or a\n"
            "loong trace) or the configuration options.\n"
            "\n"
            "  --kineto            the positional arguments are profiler traces or directories\n"
            "  --predicted FILE    a loong trace of the run (loong sim --trace)\n"
            "  --platform FILE     simulate on this platform (with --config or the options)\n"
            "  --calib FILE        calibration table for the simulation  [<platform dir>/<gpu>.calib]\n"
            "  --config FILE       the configuration: a DAG JSON or a loong trace\n"
            "  --steps N|N-M       the ProfilerStep#N to compare           [every step all ranks have]\n"
            "  --kernel-names FILE rules 'KIND GLOB' ahead of the shipped kernel-name table\n"
            "  --json FILE         the comparison as JSON ('-': stdout)\n"
            "  --plot FILE         bars of predicted and measured time per kind (PNG, gnuplot)\n"
            "  --max-error PCT     exit 1 when |step time error| exceeds PCT percent\n"
            "  --top N             unnamed kernel names to list per rank                    [5]\n"
            "  -h, --help          this text\n"
            "\n%s"
            "\nExit status: 0; 1 above --max-error; 2 on bad input.\n",
            cli_config_help());
}

typedef struct kargs {
    const char *predicted, *platform, *calib, *config, *steps, *names, *json, *plot;
    double max_error;
    int top;
    cli_config cc;
    bool any_knob;
} kargs;

static int parse(int argc, char **argv, kargs *a)
{
    static const struct option own[] = {
        {"kineto", no_argument, 0, 'k'},
        {"predicted", required_argument, 0, 'P'},
        {"platform", required_argument, 0, 'p'},
        {"calib", required_argument, 0, 'c'},
        {"config", required_argument, 0, 'C'},
        {"steps", required_argument, 0, 's'},
        {"kernel-names", required_argument, 0, 'n'},
        {"json", required_argument, 0, 'j'},
        {"plot", required_argument, 0, 'g'},
        {"max-error", required_argument, 0, 'm'},
        {"top", required_argument, 0, 't'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const struct option *opts = cli_options(own);
    int opt;
    char *end;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_config_option(&a->cc, opt, optarg)) {
            a->any_knob = true;
            continue;
        }
        switch (opt) {
        case 'k': break;
        case 'P': a->predicted = optarg; break;
        case 'p': a->platform = optarg; break;
        case 'c': a->calib = optarg; break;
        case 'C': a->config = optarg; break;
        case 's': a->steps = optarg; break;
        case 'n': a->names = optarg; break;
        case 'j': a->json = optarg; break;
        case 'g': a->plot = optarg; break;
        case 'm':
            a->max_error = strtod(optarg, &end);
            if (*end || end == optarg || !(a->max_error >= 0))
                return cli_fail("compare", "--max-error '%s' is not a non-negative percentage", optarg);
            break;
        case 't':
            if (cli_opt_count("compare", "--top", optarg, false, INT_MAX, &a->top)) return 2;
            break;
        case 'h':
        default: return cli_opt_tail("compare", "loong compare --kineto", opt, argv, usage, -1);
        }
    }
    if (optind >= argc)
        return cli_fail("compare", "give the profiler traces: loong compare --kineto TRACE|DIR ... (see --help)");
    if (a->predicted && (a->platform || a->config || a->any_knob))
        return cli_fail("compare", "--predicted is the prediction: drop --platform, --config and the configuration "
                                   "options, or drop --predicted to simulate");
    if (!a->predicted && !a->platform)
        return cli_fail("compare", "give the prediction: --predicted PRED.json, or --platform FILE with --config or "
                                   "the configuration options to simulate it");
    if (a->config && a->any_knob)
        return cli_fail("compare", "--config and configuration options both give the configuration: give one");
    return 0;
}

/* The configuration of --config: a DAG JSON's or a loong trace's
 * "config" (the trace's under its "loong" object). */
static int config_file(const char *path, config *c, char err[LOONG_ERRLEN])
{
    size_t len;
    char *buf = infile_read(path, "configuration", TRACE_MAX_BYTES, &len, err);
    if (!buf) return -1;
    json_error_t je;
    json_t *root = json_loadb(buf, len, 0, &je), *cfg = NULL;
    free(buf);
    if (root) cfg = json_object_get(root, "config");
    if (root && !cfg) cfg = json_object_get(json_object_get(root, "loong"), "config");
    int rc = -1;
    if (!root)
        snprintf(err, LOONG_ERRLEN, "--config '%.100s' is not JSON (line %d): give loong dag --format json's output",
                 path, je.line);
    else if (!json_is_object(cfg))
        snprintf(err, LOONG_ERRLEN,
                 "--config '%.100s' has no \"config\" object: give loong dag --format json's output or a loong trace",
                 path);
    else
        rc = config_from_json(cfg, c, err);
    json_decref(root);
    return rc;
}

/* Simulate c in a child that writes its trace to a temporary; read it. */
static int simulate(const kargs *a, const config *c, trace *t, char err[LOONG_ERRLEN])
{
    char where[4096], tmp[] = "/tmp/loong-compare-pred-XXXXXX";
    if (cli_find_platform(a->platform, where, sizeof where, err) < 0) return -1;
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(err, LOONG_ERRLEN, "cannot create a temporary file for the prediction");
        return -1;
    }
    close(fd);
    char opt[64 + sizeof tmp];
    snprintf(opt, sizeof opt, "--trace=%s", tmp);
    const char *extra[] = {opt};
    const sim_child_spec sp = {where, a->calib, a->cc.val[KNOB_MODEL], 0};
    char **argv = sim_child_argv(c, &sp, extra, 1);
    sim_child_result res;
    if (isatty(2)) fprintf(stderr, "loong compare: simulating the configuration (loong sim on %s)\n", where);
    int rc = sim_child_run(argv, "the prediction", &res, err);
    sim_child_argv_free(argv);
    if (rc == 0) rc = trace_read(tmp, t, err);
    unlink(tmp);
    return rc;
}

static int prediction(const kargs *a, trace *t, dag **g, char err[LOONG_ERRLEN])
{
    if (a->predicted) {
        if (trace_read(a->predicted, t, err) < 0) return -1;
    } else {
        config c;
        if ((a->config ? config_file(a->config, &c, err) : cli_config_finish(&a->cc, &c, err)) < 0) return -1;
        if (simulate(a, &c, t, err) < 0) return -1;
    }
    *g = dag_build(&t->cfg, err);
    if (!*g || trace_check_dag(t, *g, err) < 0) {
        trace_free(t);
        return -1;
    }
    return 0;
}

static int plot(const char *png, const kprof *p, const kprof *m, char err[LOONG_ERRLEN])
{
    const char *names[KINETO_KINDS];
    double pm[KINETO_KINDS], mm[KINETO_KINDS];
    int n = 0;
    for (int k = 0; k < KINETO_KINDS; k++) {
        double pu = kprof_kind_total(p, k) / p->nranks, mu = kprof_kind_total(m, k) / m->nranks;
        if (pu == 0 && mu == 0) continue;
        names[n] = kineto_kind_name(k);
        pm[n] = pu / 1e3;
        mm[n++] = mu / 1e3;
    }
    char title[128];
    snprintf(title, sizeof title, "prediction vs PyTorch profiler: step %.3f ms vs %.3f ms", p->run_step_us / 1e3,
             m->run_step_us / 1e3);
    return plot_pair_bars(png, names, pm, mm, n, title, err);
}

static int report(const kargs *a, const kprof *p, const kprof *m, char err[LOONG_ERRLEN])
{
    kprof_compare_print(stdout, p, m);
    if (a->json) {
        afile f;
        if (afile_open(&f, a->json, err) < 0) return -1;
        json_t *j = kprof_compare_json(p, m);
        int bad = json_dumpf(j, f.f, JSON_INDENT(1) | JSON_REAL_PRECISION(10)) != 0 || fputc('\n', f.f) == EOF;
        json_decref(j);
        if (bad) {
            afile_abort(&f);
            snprintf(err, LOONG_ERRLEN, "write error on '%.100s'", a->json);
            return -1;
        }
        if (afile_commit(&f, err) < 0) return -1;
    }
    if (a->plot && plot(a->plot, p, m, err) < 0) return -1;
    return 0;
}

int cmd_compare_kineto(int argc, char **argv)
{
    kargs a = {.max_error = -1, .top = 5};
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    char err[LOONG_ERRLEN];
    if (a.plot && afile_check(a.plot, err) < 0) return cli_fail("compare", "%s", err);
    kineto_names *names = cli_kernel_names(a.names, err);
    if (!names) return cli_fail("compare", "%s", err);
    kineto_set set;
    rc = kineto_set_open((const char *const *)argv + optind, argc - optind, names, a.steps, &set, err);
    kineto_names_free(names);
    if (rc < 0) return cli_fail("compare", "%s", err);
    trace t;
    dag *g = NULL;
    if (prediction(&a, &t, &g, err) < 0) {
        kineto_set_free(&set);
        return cli_fail("compare", "%s", err);
    }
    kprof p, m;
    kprof_of_trace(&t, g, &p);
    kprof_of_kineto(&set, &m);
    char desc[256];
    config_describe(&t.cfg, desc, sizeof desc);
    printf("# loong compare --kineto: predicted %s (%s) against the profiler traces\n", desc, t.backend);
    kineto_set_print(stdout, &set, a.top);
    rc = report(&a, &p, &m, err) < 0 ? cli_fail("compare", "%s", err) : 0;
    if (rc == 0 && a.max_error >= 0 && p.run_step_us > 0 && m.run_step_us > 0 &&
        fabs(100 * (p.run_step_us - m.run_step_us) / m.run_step_us) > a.max_error) {
        printf("# step time error exceeds --max-error %g %%\n", a.max_error);
        rc = 1;
    }
    kprof_free(&p);
    kprof_free(&m);
    dag_free(g);
    trace_free(&t);
    kineto_set_free(&set);
    return rc;
}

/* loong calibrate: fit compute rates and link alpha/beta from measured
 * traces; write a calibration table and a platform that loong sim reads. */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/afile.h"
#include "core/xalloc.h"
#include "analysis/calibrate.h"
#include "analysis/kineto_calib.h"
#include "analysis/kineto_mem.h"
#include "analysis/kprofile.h"
#include "core/infile.h"
#include "core/pipeline.h"
#include "core/trace.h"
#include "model/memory.h"
#include "analysis/nccl_fit.h"
#include "model/platform_spec.h"
#include "cli.h"
#include "cli_opts.h"

static void calibrate_usage(FILE *f)
{
    fprintf(f,
            "usage: loong calibrate MEASURED.json [MORE.json ...] --platform IN.xml -o OUTDIR [--calib BASE.calib]\n"
            "                       [--strict] [--hold P,...] [--min-r2 X] [--force]\n"
            "       loong calibrate --nccl-tests LOG [LOG ...] --platform IN.xml -o OUTDIR [--hold P,...] [--op OP]\n"
            "                       [--min-r2 X] [--force]\n"
            "       loong calibrate --kineto TRACE|DIR ... --platform IN.xml -o OUTDIR [--calib BASE.calib]\n"
            "                       [--steps N|N-M] [--kernel-names FILE] [--predicted PRED.json] [--strict]\n"
            "                       [--min-r2 X] [--force]\n"
            "\n"
            "Fit per compute kind time = t0 + work / rate (work = FLOPs; HBM bytes for merge\n"
            "and acc) and per link class (same node, other node) alpha and beta from the\n"
            "point-to-point transfers, counting how many transfers shared the link at once.\n"
            "The fits are robust (GSL, bisquare) on relative error. Prints R^2, relative\n"
            "residuals and outliers per fit. Writes OUTDIR/<gpu>.calib (the base table with\n"
            "the fitted kinds replaced) and OUTDIR/<platform name> (IN.xml regenerated with\n"
            "the fitted NVLink / NIC latency and bandwidth); `loong sim --platform\n"
            "OUTDIR/<platform name>` uses both.\n"
            "\n"
            "A kind whose fit fails (too few points, one size, no growth with size) or is\n"
            "not physical (faster than the table's peak or mem_bw, t0 outside [0, 10 ms])\n"
            "keeps the base table's row and gets a '# kept from base:' line with the reason.\n"
            "A rate above a reference that the base table marks 'assumed' raises it.\n"
            "\n"
            "Every fitted parameter is judged before anything is written: one whose fit\n"
            "explains less than --min-r2 of the variance of its data (R^2 of the absolute\n"
            "times), or whose fit is degenerate (no more points than parameters, equal\n"
            "times), is named on stderr with its R^2, and nothing is written (exit 2),\n"
            "unless --force.\n"
            "\n"
            "  --platform FILE   platform written by loong topo (it records its spec)\n"
            "  --calib FILE      base table                 [<platform dir>/<gpu>.calib]\n"
            "  -o, --output DIR  where to write (created if missing)\n"
            "  --strict          any kind that would be kept from base is an error (exit 2)\n"
            "  --nccl-tests      the inputs are nccl-tests logs (all_reduce_perf ... output):\n"
            "                    fit NVLink and NIC latency and bandwidth and NCCL's LL,\n"
            "                    LL128, tree and NVLS efficiencies (GSL nonlinear least\n"
            "                    squares on relative error, NCCL's tuner choosing per size);\n"
            "                    each log's header gives its op, GPUs and nodes. Writes\n"
            "                    OUTDIR/<platform name>; reports R^2 and residuals per log\n"
            "  --hold P[,P...]   keep these parameters at the platform's values (nvlink_bw,\n"
            "                    nic_bw, nvlink_lat, nic_lat; with --nccl-tests also ll_eff,\n"
            "                    ll128_eff, tree_eff, nvls_eff), e.g. a NIC at its line rate;\n"
            "                    from traces a link class is held whole: nvlink_bw with\n"
            "                    nvlink_lat, nic_bw with nic_lat (transfers too noisy to fit)\n"
            "  --op OP           with --nccl-tests: the collective of logs that do not name\n"
            "                    theirs (all_reduce, all_gather, reduce_scatter, alltoall, ...)\n"
            "  --kineto          the inputs are PyTorch profiler traces (one per rank, .json or\n"
            "                    .json.gz, or directories of them): attention and GEMM rates from\n"
            "                    the kernels whose shapes record_shapes gave, memory-bound kinds'\n"
            "                    launch floor and bandwidth from their ops' bytes, interference from\n"
            "                    their overlap with NCCL kernels, and the platform's links from\n"
            "                    the NCCL kernels of known size and group (as nccl-tests logs:\n"
            "                    the fastest instance per size). Says what it fitted and what\n"
            "                    it could not; writes both files\n"
            "  --steps N|N-M     with --kineto: the ProfilerStep#N to use        [every step]\n"
            "  --kernel-names F  with --kineto: rules 'KIND GLOB' ahead of the shipped table\n"
            "                    With --kineto, traces recorded with profile_memory=True also give\n"
            "                    each GPU's peak allocated and reserved memory and the allocator\n"
            "                    factor (mean reserved / allocated peak), printed with the\n"
            "                    option that applies it\n"
            "  --predicted FILE  with --kineto: a loong trace of the run's configuration (loong sim\n"
            "                    --trace): the memory model's peaks beside the measured ones\n"
            "  --min-r2 X        the least R^2 (share of variance explained, 0..1) of a\n"
            "                    parameter's fit for it to be written              [0.5]\n"
            "  --force           write parameters below --min-r2 anyway: a warning each, and\n"
            "                    the files' origin names them\n"
            "  -h, --help        this text\n"
            "\nExit status: 0 (kinds kept from base included); 2 on bad input, on a\n"
            "parameter below --min-r2 (without --force) or, with --strict, on a kind that\n"
            "cannot be fitted.\n");
}

/* Map the link fits onto the platform's spec: a same-node path crosses two
 * NVLink links, another-node path two NIC links (and two leaf-spine links
 * whose latency stays as it is). A measured send within a node moves at
 * NCCL's share of the line rate (platform_spec_p2p_nvl_bw): the line rate
 * is that over the share. */
static void apply_links(const calibrate_result *r, platform_spec *sp)
{
    const fit_line *in = &r->link[LINK_INTRA].line, *out = &r->link[LINK_INTER].line;
    if (r->link[LINK_INTRA].status == CAL_FITTED) {
        sp->nvlink_lat = in->c0 / 2;
        sp->nvlink_bw = 1 / in->c1 * sp->nvlink_bw / platform_spec_p2p_nvl_bw(sp);
    }
    if (r->link[LINK_INTER].status == CAL_FITTED) {
        double lat = (out->c0 - 2 * sp->uplink_lat) / 2;
        sp->nic_lat = lat > 0 ? lat : 0;
        sp->nic_bw = 1 / out->c1;
    }
}

/* Each link class's --hold parameters: latency, bandwidth. */
static const char *const link_params[LINK_CLASSES][2] = {{"nvlink_lat", "nvlink_bw"}, {"nic_lat", "nic_bw"}};

/* The link classes that --hold names whole (a trace fit is one line per
 * class: its latency and bandwidth together); -1 for a half-named class
 * or an NCCL efficiency. */
static int held_classes(unsigned held, char err[LOONG_ERRLEN])
{
    unsigned links = 0;
    for (int c = 0; c < LINK_CLASSES; c++) {
        unsigned lat = 1u << nccl_fit_param_parse(link_params[c][0]),
                 bw = 1u << nccl_fit_param_parse(link_params[c][1]);
        links |= lat | bw;
        if (!(held & lat) != !(held & bw)) {
            snprintf(err, LOONG_ERRLEN, "--hold %s alone: traces fit a link class whole: give %s,%s",
                     link_params[c][!(held & lat) ? 1 : 0], link_params[c][0], link_params[c][1]);
            return -1;
        }
    }
    if (held & ~links) {
        snprintf(err, LOONG_ERRLEN,
                 "--hold: NCCL's efficiencies are fitted from nccl-tests logs only: add "
                 "--nccl-tests, or hold nvlink_bw,nvlink_lat or nic_bw,nic_lat");
        return -1;
    }
    return 0;
}

/* Keep the --hold link classes at the platform's values: their fits are
 * set aside (neither judged nor written), and the report says so. */
static void hold_links(calibrate_result *r, unsigned held)
{
    for (int c = 0; c < LINK_CLASSES; c++)
        if (held & 1u << nccl_fit_param_parse(link_params[c][0])) {
            r->link[c].status = CAL_KEPT;
            snprintf(r->link[c].reason, sizeof r->link[c].reason, "held at the platform's values (--hold)");
        }
}

/* Where the fitted files go and what they record. */
typedef struct cal_out {
    const char *dir;
    char origin[4096]; /* the command line; with --force, then the note */
    char note[1024];   /* with --force: the parameters written below min_r2, or "" */
    double min_r2;
    bool force;
} cal_out;

/* The fit gate (analysis/fit_gate.h), before anything is written: the
 * parameters of g below o->min_r2 (or without an R^2) are named in one
 * error line on stderr, and the calibration writes nothing (-1); with
 * --force they are warnings, one a parameter, and the note goes into the
 * files' origin. */
static int judge(const fit_gate *g, cal_out *o)
{
    if (!fit_gate_failing(g, o->min_r2)) return 0;
    char all[1024] = "";
    for (int i = 0; i < g->n; i++) {
        char d[256];
        if (!fit_gate_fails(&g->item[i], o->min_r2) || cli_quiet) continue;
        fit_gate_describe(&g->item[i], o->min_r2, d, sizeof d);
        if (o->force)
            fprintf(stderr, "loong calibrate: warning: %s: written anyway (--force)\n", d);
        else
            snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", all[0] ? "; " : "", d);
    }
    if (all[0])
        fprintf(stderr,
                "loong calibrate: error: %s: nothing written; fit more or better data, or give --force to write it "
                "anyway\n",
                all);
    if (!o->force) return -1;
    fit_gate_note(g, o->min_r2, o->note, sizeof o->note);
    size_t n = strlen(o->origin);
    snprintf(o->origin + n, sizeof o->origin - n, " (%s)", o->note);
    return 0;
}

/* OUTDIR must be a writable directory, or creatable: checked before the
 * fit, created only when there is something to write. */
static int check_outdir(const char *dir, char err[LOONG_ERRLEN])
{
    struct stat st;
    char *copy = xstrdup(dir, "the output directory"), *parent = dirname(copy);
    const char *bad = NULL;
    if (stat(dir, &st) == 0)
        bad = !S_ISDIR(st.st_mode) ? "exists and is not a directory" : access(dir, W_OK) ? "is not writable" : NULL;
    else if (access(parent, W_OK) != 0)
        bad = "cannot be created (its parent is missing or not writable)";
    if (bad) snprintf(err, LOONG_ERRLEN, "-o '%s' %s: give a directory to write the fitted files into", dir, bad);
    free(copy);
    return bad ? -1 : 0;
}

/* Open dir/<name> through a temporary. */
static int open_in(const char *dir, const char *name, afile *a, char err[LOONG_ERRLEN])
{
    char path[4096], *copy = xstrdup(name, "an output name");
    snprintf(path, sizeof path, "%s/%s", dir, basename(copy));
    free(copy);
    return afile_open(a, path, err);
}

/* Both fitted files are written, then both renamed into place. */
static int write_outputs(const char *platform, const calib *cb, const platform_spec *sp, const cal_out *o,
                         char err[LOONG_ERRLEN])
{
    const char *dir = o->dir;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, LOONG_ERRLEN, "cannot create '%s': %s", dir, strerror(errno));
        return -1;
    }
    char table[64];
    snprintf(table, sizeof table, "%s.calib", sp->gpu);
    afile c = {0}, p = {0};
    int rc = open_in(dir, table, &c, err);
    if (rc == 0) rc = open_in(dir, platform, &p, err);
    if (rc == 0 && o->note[0]) fprintf(c.f, "# %s (loong calibrate --force)\n", o->note);
    if (rc == 0 && (calib_write(c.f, cb) < 0 || platform_spec_write(p.f, sp, o->origin) < 0))
        rc = -1, snprintf(err, LOONG_ERRLEN, "write error in '%s'", dir);
    if (rc == 0) rc = afile_commit(&c, err);
    if (rc == 0) rc = afile_commit(&p, err);
    if (rc < 0) {
        afile_abort(&c);
        afile_abort(&p);
    }
    return rc;
}

static int run(int ntr, char **paths, const char *platform, const char *base, bool strict, unsigned hold, cal_out *o)
{
    const char *dir = o->dir;
    char err[LOONG_ERRLEN] = "";
    platform_spec sp;
    if (check_outdir(dir, err) < 0 || platform_spec_read(platform, &sp, err) < 0)
        return cli_fail("calibrate", "%s", err);
    calib *cb = calib_for_platform(platform, sp.gpu, base, err);
    if (!cb) return cli_fail("calibrate", "%s", err);
    trace *tr = xcalloc((size_t)ntr, sizeof *tr, "the traces");
    const trace **tp = xcalloc((size_t)ntr, sizeof *tp, "the traces");
    int rc = 0, loaded = 0;
    for (; loaded < ntr && rc == 0; loaded++) {
        if (trace_read(paths[loaded], &tr[loaded], err) < 0)
            rc = cli_fail("calibrate", "%s", err);
        else if (tr[loaded].whatif[0])
            rc = cli_fail("calibrate",
                          "trace '%s' is a what-if simulation (perturbed: %.120s): calibrate from measured traces",
                          paths[loaded], tr[loaded].whatif);
        tp[loaded] = &tr[loaded];
    }
    /* traces of loong's executor only: its devices run no elementwise
     * kernel, so the fitted table says so (the simulator then times them
     * at 0 s, as the executor ran them) */
    bool exec_only = rc == 0;
    for (int i = 0; i < loaded && exec_only; i++)
        exec_only = !strncmp(tr[i].backend, "exec-", 5);
    if (exec_only) calib_set_skip(cb, TRACE_EXEC_SKIPS);
    calibrate_result r;
    calibrate_points *pts = calibrate_points_new();
    if (rc == 0 && (calibrate_points_from_traces(pts, tp, ntr, cb, err) < 0 ||
                    calibrate_fit(pts, cb, strict, &r, err) < 0 || calibrate_apply(&r, cb, err) < 0))
        rc = cli_fail("calibrate", "%s", err);
    if (rc == 0) hold_links(&r, hold);
    calibrate_points_free(pts);
    fit_gate g = {0};
    if (rc == 0) {
        apply_links(&r, &sp);
        calibrate_print(stdout, &r);
        if (exec_only) printf("# the executor runs no elementwise kernels: norm .. optim written as 'skip' (0 s)\n");
        calibrate_judge(&r, &g);
        fflush(stdout);
        if (judge(&g, o) < 0)
            rc = 2;
        else if (write_outputs(platform, cb, &sp, o, err) < 0)
            rc = cli_fail("calibrate", "%s", err);
        else
            printf("# wrote %s/%s.calib and %s/ with the fitted platform\n", dir, sp.gpu, dir);
    }
    for (int i = 0; i < loaded; i++)
        trace_free(&tr[i]);
    free(tr);
    free(tp);
    calib_free(cb);
    return rc;
}

static void print_nccl_fit(const nccl_log *logs, int n, const nccl_fit_report *rep)
{
    int nfit = 0;
    for (int k = 0; k < NCCL_FIT_PARAMS; k++)
        nfit += rep->p[k].fitted;
    printf("# loong calibrate --nccl-tests: %d log(s), %d sizes; %d of %d parameters fitted (%d iterations)\n", n,
           rep->all.n, nfit, NCCL_FIT_PARAMS, rep->iterations);
    printf("#%-11s %14s %14s  %s\n", "parameter", "platform", "fitted", "status");
    for (int k = 0; k < NCCL_FIT_PARAMS; k++) {
        const nccl_fit_param *p = &rep->p[k];
        char status[FIT_WHY_LEN + 64];
        if (p->fitted && p->degenerate[0])
            snprintf(status, sizeof status, "fitted; no R^2: %s", p->degenerate);
        else if (p->fitted)
            snprintf(status, sizeof status, "fitted, R^2 %.4f over the %d sizes that depend on it", p->r2, p->n);
        else
            snprintf(status, sizeof status, "%s",
                     p->held ? "held at the platform's value (--hold)"
                             : "kept from the platform: no logged size depends on it");
        printf(" %-11s %14.6g %14.6g  %s\n", p->name, p->base, p->value, status);
    }
    printf("#%-39s %-14s %5s %5s %6s %8s %8s %8s\n", "log", "op", "gpus", "nodes", "sizes", "R^2", "rms_%", "max_%");
    for (int l = 0; l < n; l++) {
        const char *base = strrchr(logs[l].path, '/');
        printf(" %-39.39s %-14s %5d %5d %6d %8.4f %8.2f %8.2f\n", base ? base + 1 : logs[l].path,
               coll_op_name(logs[l].op), logs[l].gpus, logs[l].nodes, rep->logs[l].n, rep->logs[l].r2,
               100 * rep->logs[l].rel_rms, 100 * rep->logs[l].rel_max);
    }
    printf("# all: rms relative residual %.2f %%, largest %.2f %%\n", 100 * rep->all.rel_rms, 100 * rep->all.rel_max);
}

static int write_platform(const char *platform, const platform_spec *sp, const cal_out *o, char err[LOONG_ERRLEN])
{
    const char *dir = o->dir;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, LOONG_ERRLEN, "cannot create '%s': %s", dir, strerror(errno));
        return -1;
    }
    char path[4096], *pcopy = xstrdup(platform, "the platform path");
    snprintf(path, sizeof path, "%s/%s", dir, basename(pcopy));
    free(pcopy);
    afile a;
    if (afile_open(&a, path, err) < 0) return -1;
    if (platform_spec_write(a.f, sp, o->origin) < 0) {
        afile_abort(&a);
        snprintf(err, LOONG_ERRLEN, "write error on '%.200s'", path);
        return -1;
    }
    return afile_commit(&a, err);
}

/* --min-r2 X: a share of variance, in [0, 1]. */
static int parse_min_r2(const char *s, double *out, char err[LOONG_ERRLEN])
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0 && v <= 1)) {
        snprintf(err, LOONG_ERRLEN, "--min-r2 '%.40s' is not a share of variance: give a number in [0, 1] (default %g)",
                 s, FIT_GATE_MIN_R2);
        return -1;
    }
    *out = v;
    return 0;
}

/* --hold NAME[,NAME...]: the parameters kept at the platform's values. */
static int parse_hold(const char *list, unsigned *mask, char err[LOONG_ERRLEN])
{
    char *copy = xstrdup(list, "--hold"), *save = NULL;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) {
        int k = nccl_fit_param_parse(t);
        if (k < 0)
            rc = -1, snprintf(err, LOONG_ERRLEN,
                              "--hold '%.40s' is not a parameter: nvlink_bw, nic_bw, nvlink_lat, nic_lat, ll_eff, "
                              "ll128_eff, tree_eff, nvls_eff",
                              t);
        else
            *mask |= 1u << k;
    }
    free(copy);
    return rc;
}

static int run_nccl_tests(int nlogs, char **paths, const char *platform, cal_out *o, unsigned hold, const char *op)
{
    const char *dir = o->dir;
    char err[LOONG_ERRLEN] = "";
    platform_spec sp, fitted;
    if (check_outdir(dir, err) < 0 || platform_spec_read(platform, &sp, err) < 0)
        return cli_fail("calibrate", "%s", err);
    if (!sp.nccl)
        return cli_fail("calibrate", "%s runs no NCCL collectives (nccl=0): give a GPU platform from loong topo",
                        platform);
    nccl_log *logs = xcalloc((size_t)nlogs, sizeof *logs, "the nccl-tests logs");
    nccl_fit_report rep = {0};
    int rc = 0;
    coll_op forced = COLL_ALL_REDUCE;
    if (op && coll_op_parse(op, &forced) < 0)
        rc = cli_fail("calibrate",
                      "--op '%s' is not one of: all_reduce, all_gather, reduce_scatter, alltoall, "
                      "sendrecv, broadcast",
                      op);
    for (int i = 0; i < nlogs && rc == 0; i++) {
        if (nccl_log_read(paths[i], &logs[i], err) < 0) rc = cli_fail("calibrate", "%s", err);
        if (rc == 0 && op && !logs[i].has_op) logs[i].op = forced, logs[i].has_op = true;
    }
    if (rc == 0 && nccl_fit(&sp, logs, nlogs, hold, &fitted, &rep, err) < 0) rc = cli_fail("calibrate", "%s", err);
    fit_gate g = {0};
    if (rc == 0) {
        print_nccl_fit(logs, nlogs, &rep);
        nccl_fit_judge(&rep, &g);
        fflush(stdout);
        if (judge(&g, o) < 0)
            rc = 2;
        else if (write_platform(platform, &fitted, o, err) < 0)
            rc = cli_fail("calibrate", "%s", err);
        else
            printf("# wrote the fitted platform to %s/\n", dir);
    }
    nccl_fit_report_free(&rep);
    for (int i = 0; i < nlogs; i++)
        nccl_log_free(&logs[i]);
    free(logs);
    return rc;
}

/* The compute fit of --kineto; a set without shaped kernels keeps the
 * table (said), unless --strict. */
static int kineto_compute(const kineto_set *set, calib *cb, bool strict, kineto_calib_counts *cnt, fit_gate *g,
                          char err[LOONG_ERRLEN])
{
    calibrate_points *pts = calibrate_points_new();
    kineto_calib_points(pts, set, cb, cnt);
    int rc = 0;
    if (!cnt->shaped && !cnt->sized_mem) {
        printf("# compute: not fitted: none of the %zu attention and GEMM kernels nor of the %zu memory-bound ones "
               "has its shapes (profile with record_shapes=True; varlen attention has none): the table is kept\n",
               cnt->compute, cnt->membound);
        if (strict) rc = -1, snprintf(err, LOONG_ERRLEN, "--strict: no compute kernel with shapes to fit");
    } else {
        calibrate_result r;
        rc = calibrate_fit(pts, cb, strict, &r, err);
        if (rc == 0) rc = calibrate_apply(&r, cb, err);
        if (rc == 0) {
            printf("# compute: %zu of %zu attention and GEMM kernels have their work from the shapes, %zu of %zu "
                   "memory-bound kernels their bytes\n",
                   cnt->shaped, cnt->compute, cnt->sized_mem, cnt->membound);
            calibrate_print(stdout, &r);
            calibrate_judge(&r, g);
        }
    }
    calibrate_points_free(pts);
    return rc;
}

/* The GEMM shapes of --kineto as `gemm shape` rows of cb, after its
 * compute fit (their efficiencies are against its T0 and peak). */
static int kineto_gemm_shapes(const kineto_set *set, calib *cb, char err[LOONG_ERRLEN])
{
    kineto_gemm_shape *v;
    size_t left, n = kineto_calib_gemm_shapes(set, cb, &v, &left), kernels = 0, clamped = 0;
    for (size_t i = 0; i < n; i++)
        kernels += v[i].kernels, clamped += v[i].clamped;
    if (!n) {
        printf("# gemm shapes: none (no 2-D GEMM with its shapes outside NCCL's kernels): the gemm line times "
               "every shape\n");
        return 0;
    }
    printf("# gemm shapes: %zu from %zu kernels (%zu overlapped by NCCL left out), as `gemm shape` rows: eff = "
           "2mnk / ((median - t0) x peak)\n",
           n, kernels, left);
    printf("#%-6s %8s %8s %8s %8s %11s %7s\n", "layout", "m", "n", "k", "kernels", "median_us", "eff");
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const kineto_gemm_shape *g = &v[i];
        printf(" %-6s %8lld %8lld %8lld %8zu %11.3f %7.4f%s\n", calib_gemm_layout_name(g->layout), (long long)g->m,
               (long long)g->n, (long long)g->k, g->kernels, g->median_s * 1e6, g->eff, g->clamped ? " (clamped)" : "");
        rc = calib_set_gemm_shape(cb, g->layout, (uint64_t)g->m, (uint64_t)g->n, (uint64_t)g->k, g->eff, err);
    }
    if (clamped)
        printf("# gemm shapes: %zu ran faster than the table's gemm t0 and peak allow: their efficiency is clamped "
               "(is the platform's GPU the traced one?)\n",
               clamped);
    free(v);
    return rc;
}

static void print_nccl_fit(const nccl_log *logs, int n, const nccl_fit_report *rep);

/* The link fit of --kineto: sp becomes the fitted platform, or stays. */
static void kineto_links(const kineto_set *set, platform_spec *sp, kineto_calib_counts *cnt, fit_gate *g)
{
    nccl_log *logs;
    int nlogs;
    kineto_calib_logs(set, sp->gpus_per_node, &logs, &nlogs, cnt);
    char err[LOONG_ERRLEN] = "";
    nccl_fit_report rep = {0};
    platform_spec fitted;
    if (!sp->nccl)
        snprintf(err, LOONG_ERRLEN, "the platform runs no NCCL collectives (nccl=0)");
    else if (!nlogs)
        snprintf(err, LOONG_ERRLEN, "none of the %zu NCCL kernels has its size and group (PyTorch >= 2.2 writes them)",
                 cnt->nccl);
    else if (nccl_fit(sp, logs, nlogs, 0, &fitted, &rep, err) == 0) {
        printf("# links: %zu of %zu NCCL kernels have their size and group\n", cnt->sized, cnt->nccl);
        print_nccl_fit(logs, nlogs, &rep);
        nccl_fit_judge(&rep, g);
        *sp = fitted;
    }
    if (err[0]) printf("# links: not fitted: %s: the platform's links are kept\n", err);
    nccl_fit_report_free(&rep);
    for (int i = 0; i < nlogs; i++)
        nccl_log_free(&logs[i]);
    free(logs);
}

/* --kineto with profile_memory: each GPU's peaks, the model's beside them
 * (with --predicted), and the allocator factor. Returns the GPUs. */
static int kineto_memory(const kineto_set *set, const config *cfg)
{
    kineto_mem_fit fit;
    if (!kineto_mem_fit_set(set, &fit)) {
        printf("# memory: no [memory] events of a GPU (profile with profile_memory=True to fit the allocator)\n");
        return 0;
    }
    for (int i = 0; i < set->n; i++)
        for (int j = 0; j < set->r[i].nmem; j++) {
            const kineto_mem_device *d = &set->r[i].mem[j];
            int rank = set->r[i].rank >= 0 ? set->r[i].rank : i;
            printf("# memory: rank %d gpu %lld: peak allocated %.2f GB, reserved %.2f GB (%zu events)", rank,
                   (long long)d->device, d->alloc_peak / 1e9, d->reserved_peak / 1e9, d->events);
            if (cfg && rank < config_world(cfg)) {
                memory_estimate e;
                memory_estimate_stage(cfg, pipe_stage(cfg, rank), &e);
                printf("; model: allocated %.2f GB (%+.1f %%), reserved %.2f GB (%+.1f %%)", e.peak / 1e9,
                       100 * (e.peak - d->alloc_peak) / d->alloc_peak, e.reserved / 1e9,
                       100 * (e.reserved - d->reserved_peak) / d->reserved_peak);
            } else if (cfg) {
                printf("; rank %d is not among --predicted's %d", rank, config_world(cfg));
            }
            printf("\n");
        }
    printf("# memory: allocator factor %.4f (mean reserved / allocated peak of %d GPU%s, %.4f to %.4f); the model's "
           "default is %.2f: loong plan --allocator %.4f applies it\n",
           fit.factor, fit.devices, fit.devices == 1 ? "" : "s", fit.factor_min, fit.factor_max, MEMORY_ALLOC_FACTOR,
           fit.factor);
    return fit.devices;
}

static int run_kineto(int npaths, char **paths, const char *platform, const char *base, bool strict, const char *steps,
                      const char *names_file, const char *predicted, cal_out *o)
{
    const char *dir = o->dir;
    char err[LOONG_ERRLEN] = "";
    platform_spec sp;
    if (check_outdir(dir, err) < 0 || platform_spec_read(platform, &sp, err) < 0)
        return cli_fail("calibrate", "%s", err);
    calib *cb = calib_for_platform(platform, sp.gpu, base, err);
    kineto_names *names = cb ? cli_kernel_names(names_file, err) : NULL;
    if (!names) {
        calib_free(cb);
        return cli_fail("calibrate", "%s", err);
    }
    kineto_set set;
    int rc = kineto_set_open((const char *const *)paths, npaths, names, steps, &set, err);
    kineto_names_free(names);
    if (rc < 0) {
        calib_free(cb);
        return cli_fail("calibrate", "%s", err);
    }
    kineto_set_print(stdout, &set, 5);
    int mem_gpus = 0;
    trace pred;
    bool have_pred = false;
    if (predicted) {
        if (trace_read(predicted, &pred, err) < 0) {
            kineto_set_free(&set);
            calib_free(cb);
            return cli_fail("calibrate", "%s", err);
        }
        have_pred = true;
    }
    mem_gpus = kineto_memory(&set, have_pred ? &pred.cfg : NULL);
    if (have_pred) trace_free(&pred);
    kineto_calib_counts cnt = {0};
    fit_gate g = {0};
    rc = kineto_compute(&set, cb, strict, &cnt, &g, err);
    if (rc == 0 && cnt.shaped) rc = kineto_gemm_shapes(&set, cb, err);
    if (rc == 0) kineto_links(&set, &sp, &cnt, &g);
    if (rc == 0 && !cnt.shaped && !cnt.sized_mem && !cnt.sized && !mem_gpus)
        rc = -1, snprintf(err, LOONG_ERRLEN,
                          "nothing to fit: no attention or GEMM kernel with shapes, no NCCL kernel with a size and no "
                          "memory event (profile with record_shapes=True on PyTorch >= 2.2, profile_memory=True)");
    fflush(stdout);
    if (rc == 0 && judge(&g, o) < 0)
        rc = 2;
    else if (rc == 0 && write_outputs(platform, cb, &sp, o, err) == 0)
        printf("# wrote %s/%s.calib and %s/ with the platform\n", dir, sp.gpu, dir);
    else
        rc = cli_fail("calibrate", "%s", err);
    kineto_set_free(&set);
    calib_free(cb);
    return rc;
}

int cmd_calibrate(int argc, char **argv)
{
    static const struct option opts[] = {
        {"platform", required_argument, 0, 'p'},
        {"calib", required_argument, 0, 'c'},
        {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},
        {"strict", no_argument, 0, 's'},
        {"nccl-tests", no_argument, 0, 'n'},
        {"kineto", no_argument, 0, 'k'},
        {"hold", required_argument, 0, 'H'},
        {"op", required_argument, 0, 'O'},
        {"steps", required_argument, 0, 'S'},
        {"kernel-names", required_argument, 0, 'N'},
        {"predicted", required_argument, 0, 'P'},
        {"min-r2", required_argument, 0, 'R'},
        {"force", no_argument, 0, 'F'},
        {0, 0, 0, 0},
    };
    const char *platform = NULL, *base = NULL, *dir = NULL, *steps = NULL, *names = NULL, *hold = NULL, *op = NULL;
    const char *min_r2 = NULL, *predicted = NULL;
    bool strict = false, nccl_tests = false, kineto = false, force = false;
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'p': platform = optarg; break;
        case 'c': base = optarg; break;
        case 'o': dir = optarg; break;
        case 's': strict = true; break;
        case 'n': nccl_tests = true; break;
        case 'k': kineto = true; break;
        case 'S': steps = optarg; break;
        case 'N': names = optarg; break;
        case 'P': predicted = optarg; break;
        case 'H': hold = optarg; break;
        case 'O': op = optarg; break;
        case 'R': min_r2 = optarg; break;
        case 'F': force = true; break;
        case 'h':
        default: return cli_opt_tail("calibrate", "loong calibrate", opt, argv, calibrate_usage, 0);
        }
    }
    if (nccl_tests && kineto)
        return cli_fail("calibrate", "--nccl-tests and --kineto name two kinds of input: give one");
    if ((steps || names || predicted) && !kineto)
        return cli_fail("calibrate", "--steps, --kernel-names and --predicted go with profiler traces: add --kineto");
    if (op && !nccl_tests) return cli_fail("calibrate", "--op is about nccl-tests logs: add --nccl-tests");
    if (hold && kineto) return cli_fail("calibrate", "--hold goes with traces or nccl-tests logs, not --kineto");
    unsigned held = 0;
    char herr[LOONG_ERRLEN];
    if (hold && parse_hold(hold, &held, herr) < 0) return cli_fail("calibrate", "%s", herr);
    if (hold && !nccl_tests && held_classes(held, herr) < 0) return cli_fail("calibrate", "%s", herr);
    if (optind >= argc)
        return cli_fail("calibrate", "give at least one measured %s: see loong calibrate --help",
                        nccl_tests ? "nccl-tests log"
                        : kineto   ? "profiler trace (or directory)"
                                   : "trace");
    if (!platform) return cli_fail("calibrate", "--platform is required (the platform to fit, written by loong topo)");
    if (!dir) return cli_fail("calibrate", "-o OUTDIR is required");
    char where[4096], err[LOONG_ERRLEN];
    if (cli_find_platform(platform, where, sizeof where, err) < 0) return cli_fail("calibrate", "%s", err);
    platform = where;
    static cal_out o;
    o = (cal_out){.dir = dir, .min_r2 = FIT_GATE_MIN_R2, .force = force};
    if (min_r2 && parse_min_r2(min_r2, &o.min_r2, err) < 0) return cli_fail("calibrate", "%s", err);
    size_t n = (size_t)snprintf(o.origin, sizeof o.origin, "loong");
    for (int i = 0; i < argc && n < sizeof o.origin / 2; i++)
        n += (size_t)snprintf(o.origin + n, sizeof o.origin / 2 - n, " %s", argv[i]);
    if (nccl_tests) return run_nccl_tests(argc - optind, argv + optind, platform, &o, held, op);
    if (kineto) return run_kineto(argc - optind, argv + optind, platform, base, strict, steps, names, predicted, &o);
    return run(argc - optind, argv + optind, platform, base, strict, held, &o);
}

/* calibrate: recovers known rates and link alpha/beta from synthetic traces
 * with noise and with outliers; keeps degenerate kinds from the base table
 * (refuses them under --strict); raises an assumed reference and refuses to
 * beat one that is not; and the round trip sim -> trace -> calibrate ->
 * platform reproduces the platform's own parameters. */
#include <check.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autoconf.h"
#include "check_run.h"
#include "cli_util.h"
#include "analysis/calibrate.h"
#include "dag_util.h"
#include "model/platform_spec.h"

/* rates chosen so that start-up times are a visible part of each task */
static const double T0 = 20e-6, RATE = 10e12, MEM_RATE = 80e9, ALPHA[2] = {3e-6, 9e-6}, BETA[2] = {120e9, 40e9};

static double close_to(double a, double b) { return fabs(a - b) / fabs(b); }

/* Every task in its own second: no two transfers overlap. Each duration
 * has Gaussian relative noise; a share `outliers` of the tasks (drawn from
 * r) runs 3x slower, as a machine shared with other work does. */
static void synthetic_with(const config *c, gsl_rng *r, double noise, double outliers, const char *path)
{
    dag *g = tbuild(c);
    uint32_t n = dag_ntasks(g);
    double *st = calloc(n, sizeof *st), *du = calloc(n, sizeof *du);
    for (uint32_t i = 0; i < n; i++) {
        const dag_task *t = dag_task_get(g, i);
        double e = 1 + (noise > 0 ? gsl_ran_gaussian(r, noise) : 0);
        if (outliers > 0 && gsl_rng_uniform(r) < outliers) e *= 3;
        st[i] = i;
        if (task_is_compute(t)) {
            uint64_t b = calib_task_bytes(c, t);
            du[i] = T0 + (b ? (double)b / MEM_RATE : (double)t->flops / RATE) * e;
        } else if (task_is_p2p(t)) {
            const dag_task *s = t->kind == TASK_SEND ? t : dag_task_get(g, t->match);
            int cls = config_node(c, s->rank) == config_node(c, s->peer) ? 1 : 0;
            cls = !cls;    /* LINK_INTRA = 0 */
            st[i] = s->id; /* send and recv share the interval */
            du[i] = ALPHA[cls] + (double)s->bytes / BETA[cls] * e;
        } else {
            du[i] = 1e-3;
        }
    }
    /* a recv's interval is its send's: make them identical */
    for (uint32_t i = 0; i < n; i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->kind == TASK_RECV) du[i] = du[t->match];
    }
    FILE *f = fopen(path, "w");
    ck_assert_int_eq(trace_write(f, g, "synthetic", st, du, NULL, NULL), 0);
    fclose(f);
    free(st);
    free(du);
    dag_free(g);
}

static void synthetic(const config *c, gsl_rng *r, double noise, const char *path)
{
    synthetic_with(c, r, noise, 0, path);
}

static void load(const char *path, trace *t)
{
    char err[LOONG_ERRLEN];
    ck_assert_msg(trace_read(path, t, err) == 0, "%s", err);
}

static calib *table(const char *text)
{
    char err[LOONG_ERRLEN];
    calib *cb = calib_parse(text, "test.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    return cb;
}

/* A base table whose references are far above the synthetic rates. */
#define ROOMY                                                                                                          \
    "gpu h100\npeak 989T\nmem_bw 3.35TBps\nattn_fwd line 5us 400T\nattn_bwd line 5us 300T\ngemm line 4us 600T\n"       \
    "merge line 3us 2TBps\nacc line 3us 2TBps\n"

/* Fit the traces at paths against base. */
static int fit_paths(const char *const *paths, int n, const calib *base, bool strict, calibrate_result *res,
                     char err[LOONG_ERRLEN])
{
    trace t[4];
    const trace *tp[4];
    for (int i = 0; i < n; i++) {
        load(paths[i], &t[i]);
        tp[i] = &t[i];
    }
    calibrate_points *p = calibrate_points_new();
    int rc = calibrate_points_from_traces(p, tp, n, base, err);
    if (rc == 0) rc = calibrate_fit(p, base, strict, res, err);
    calibrate_points_free(p);
    for (int i = 0; i < n; i++)
        trace_free(&t[i]);
    return rc;
}

/* Two synthetic traces (4K and 8K tokens, zigzag over 4 ranks, 2 per node). */
static void two_traces(gsl_rng *r, double noise, double outliers, char *p1, char *p2)
{
    close(mkstemp(p1));
    close(mkstemp(p2));
    config a = tcfg("tiny", 4096, "zigzag", 1, 4, 0, SCOPE_ATTN), b = tcfg("tiny", 8192, "zigzag", 1, 4, 0, SCOPE_ATTN);
    a.gpus_per_node = b.gpus_per_node = 2; /* ring hops alternate between same and other node */
    synthetic_with(&a, r, noise, outliers, p1);
    synthetic_with(&b, r, noise, outliers, p2);
}

static void expect_recovered(const calibrate_result *res, double tol)
{
    const fit_line *fw = &res->kind[TASK_ATTN_FWD].line, *mg = &res->kind[TASK_MERGE].line;
    ck_assert(res->kind[TASK_ATTN_FWD].status == CAL_FITTED && res->kind[TASK_ATTN_BWD].status == CAL_FITTED);
    ck_assert(res->kind[TASK_MERGE].status == CAL_FITTED);
    ck_assert_msg(close_to(1 / fw->c1, RATE) < tol, "rate %g", 1 / fw->c1);
    ck_assert_msg(close_to(fw->c0, T0) < tol, "t0 %g", fw->c0);
    ck_assert_msg(close_to(1 / mg->c1, MEM_RATE) < tol, "merge rate %g", 1 / mg->c1);
    for (int c = 0; c < LINK_CLASSES; c++) {
        const fit_line *l = &res->link[c].line;
        ck_assert(res->link[c].status == CAL_FITTED);
        ck_assert_msg(close_to(l->c0, ALPHA[c]) < tol, "alpha[%d] %g", c, l->c0);
        ck_assert_msg(close_to(1 / l->c1, BETA[c]) < tol, "beta[%d] %g", c, 1 / l->c1);
    }
}

START_TEST(recovers_known_parameters)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_taus2);
    gsl_rng_set(r, 7);
    char p1[] = "/tmp/loong-cal1-XXXXXX", p2[] = "/tmp/loong-cal2-XXXXXX";
    two_traces(r, 0.01, 0, p1, p2);
    const char *paths[2] = {p1, p2};
    calibrate_result res;
    char err[LOONG_ERRLEN];
    calib *base = table(ROOMY);
    ck_assert_msg(fit_paths(paths, 2, base, true, &res, err) == 0, "%s", err);
    expect_recovered(&res, 0.02);
    for (int c = 0; c < LINK_CLASSES; c++)
        ck_assert(res.link[c].line.r2 > 0.9);
    ck_assert_int_eq(calibrate_kept(&res), 0);
    /* 1 % noise: every fitted parameter passes the gate */
    fit_gate g = {0};
    calibrate_judge(&res, &g);
    ck_assert_int_ge(g.n, 5); /* attn_fwd, attn_bwd, merge and two link classes at least */
    ck_assert_int_eq(fit_gate_failing(&g, FIT_GATE_MIN_R2), 0);
    calib_free(base);
    unlink(p1);
    unlink(p2);
    gsl_rng_free(r);
}
END_TEST

/* 5 % of the tasks 3x slower (a shared machine): the robust fit still
 * recovers every rate within 2 % and sets the slow points aside. */
START_TEST(recovers_despite_outliers)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_taus2);
    gsl_rng_set(r, 11);
    char p1[] = "/tmp/loong-cal4-XXXXXX", p2[] = "/tmp/loong-cal5-XXXXXX";
    two_traces(r, 0.01, 0.05, p1, p2);
    const char *paths[2] = {p1, p2};
    calibrate_result res;
    char err[LOONG_ERRLEN];
    calib *base = table(ROOMY);
    ck_assert_msg(fit_paths(paths, 2, base, true, &res, err) == 0, "%s", err);
    expect_recovered(&res, 0.02);
    ck_assert_int_gt(res.kind[TASK_ATTN_FWD].line.outliers, 0);
    calib_free(base);
    unlink(p1);
    unlink(p2);
    gsl_rng_free(r);
}
END_TEST

/* A fit faster than an assumed reference raises it, and the rows measured
 * against it keep their predictions; faster than one that is not assumed,
 * the kind is kept from base (an error under --strict). */
START_TEST(references)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_taus2);
    gsl_rng_set(r, 13);
    char p1[] = "/tmp/loong-cal6-XXXXXX", p2[] = "/tmp/loong-cal7-XXXXXX";
    two_traces(r, 0.005, 0, p1, p2);
    const char *paths[2] = {p1, p2};
    calibrate_result res;
    char err[LOONG_ERRLEN];
    /* MEM_RATE is 80 GB/s: above both tables' mem_bw */
    calib *assumed = table("gpu h100\npeak 989T\nmem_bw 50GBps assumed\nattn_fwd line 5us 400T\n"
                           "attn_bwd line 5us 300T\ngemm line 4us 600T\nmerge line 3us 40GBps\n"
                           "acc curve bytes 3us 1M:0.5 1G:0.8\n");
    double acc_before = calib_seconds(assumed, TASK_ACC, 0, 1e8, 0);
    ck_assert_msg(fit_paths(paths, 2, assumed, true, &res, err) == 0, "%s", err);
    ck_assert(res.raise_mem_bw > 50e9 && res.raise_peak == 0);
    ck_assert(res.kind[TASK_MERGE].status == CAL_FITTED);
    ck_assert_int_eq(calibrate_apply(&res, assumed, err), 0);
    ck_assert(close_to(calib_mem_bw(assumed), res.raise_mem_bw) < 1e-12);
    ck_assert(calib_assumed(assumed, TASK_MERGE));
    double acc_rate = 1 / res.kind[TASK_ACC].line.c1, merge_rate = 1 / res.kind[TASK_MERGE].line.c1;
    ck_assert(close_to(merge_rate, MEM_RATE) < 0.02);
    /* acc was fitted too; a curve left untouched would keep its speed */
    ck_assert(res.kind[TASK_ACC].status == CAL_FITTED && acc_rate <= calib_mem_bw(assumed) * (1 + 1e-12));
    calib *curve = table("gpu h100\npeak 989T\nmem_bw 50GBps assumed\nattn_fwd line 5us 400T\n"
                         "attn_bwd line 5us 300T\ngemm line 4us 600T\nmerge line 3us 40GBps\n"
                         "acc curve bytes 3us 1M:0.5 1G:0.8\n");
    calib_raise_reference(curve, TASK_MERGE, 80e9);
    ck_assert(close_to(calib_seconds(curve, TASK_ACC, 0, 1e8, 0), acc_before) < 1e-12);
    calib_free(curve);
    calib_free(assumed);
    calib *datasheet = table("gpu h100\npeak 989T\nmem_bw 50GBps\nattn_fwd line 5us 400T\n"
                             "attn_bwd line 5us 300T\ngemm line 4us 600T\nmerge line 3us 40GBps\n"
                             "acc line 3us 40GBps\n");
    ck_assert_int_eq(fit_paths(paths, 2, datasheet, false, &res, err), 0);
    ck_assert(res.kind[TASK_MERGE].status == CAL_KEPT);
    ck_assert_msg(strstr(res.kind[TASK_MERGE].reason, "not marked 'assumed'") != NULL, "%s",
                  res.kind[TASK_MERGE].reason);
    ck_assert(res.kind[TASK_ATTN_FWD].status == CAL_FITTED);
    ck_assert_int_eq(fit_paths(paths, 2, datasheet, true, &res, err), -1);
    ck_assert_msg(strstr(err, "--strict") != NULL, "%s", err);
    calib_free(datasheet);
    unlink(p1);
    unlink(p2);
    gsl_rng_free(r);
}
END_TEST

/* A start-up time above the bound is fixed at it, and the rate is the
 * relative least squares with c0 fixed: c1 = sum(x (y - t0) / y^2) /
 * sum(x^2 / y^2), within 1 % (points on a line through 12 ms: the
 * residuals are smooth, so the bisquare weights stay near 1; 0.13 % off
 * in a replay of the iteration). Within the bound nothing changes. */
START_TEST(bounded_start_up)
{
    double x[6], y[6], num = 0, den = 0;
    const double t0 = 10e-3;
    for (int i = 0; i < 6; i++) {
        x[i] = 1e9 * pow(10, i / 5.0); /* 1e9 .. 1e10 work */
        y[i] = 0.012 + x[i] / 1e11;
        num += x[i] * (y[i] - t0) / (y[i] * y[i]);
        den += x[i] * x[i] / (y[i] * y[i]);
    }
    fit_line f;
    char err[LOONG_ERRLEN];
    ck_assert_msg(fit_linear_bounded(x, y, 6, t0, "bounded", &f, err) == 0, "%s", err);
    ck_assert(f.t0_bounded && !f.through_origin);
    ck_assert_double_eq(f.c0, t0);
    ck_assert_msg(close_to(f.c1, num / den) < 1e-2, "c1 %g against %g", f.c1, num / den);
    ck_assert_msg(fit_linear_bounded(x, y, 6, 0.1, "unbounded", &f, err) == 0, "%s", err);
    ck_assert(!f.t0_bounded);
    ck_assert_msg(close_to(f.c0, 0.012) < 1e-6 && close_to(f.c1, 1e-11) < 1e-6, "c0 %g c1 %g", f.c0, f.c1);
}
END_TEST

/* fit_r2 against closed forms, and its degenerate cases. */
START_TEST(r2_closed_forms)
{
    double y[] = {1, 2, 3, 4}, exact[] = {1, 2, 3, 4}, mean[] = {2.5, 2.5, 2.5, 2.5}, half[] = {1.5, 2, 3, 3.5};
    double r2;
    char why[FIT_WHY_LEN];
    ck_assert_int_eq(fit_r2(y, exact, 4, 2, &r2, why), 0);
    ck_assert_double_eq(r2, 1);
    ck_assert_int_eq(fit_r2(y, mean, 4, 2, &r2, why), 0); /* the mean explains nothing */
    ck_assert_double_eq_tol(r2, 0, 1e-15);
    ck_assert_int_eq(fit_r2(y, half, 4, 2, &r2, why), 0); /* residual 0.25+0+0+0.25 of a variance of 5 */
    ck_assert_double_eq_tol(r2, 1 - 0.5 / 5, 1e-15);
    double flat[] = {3, 3, 3};
    ck_assert_int_eq(fit_r2(flat, flat, 3, 2, &r2, why), -1);
    ck_assert_msg(isnan(r2) && strstr(why, "no variance"), "%s", why);
    ck_assert_int_eq(fit_r2(y, exact, 2, 2, &r2, why), -1);
    ck_assert_msg(isnan(r2) && strstr(why, "2 point(s) for 2 parameter(s)"), "%s", why);
}
END_TEST

/* Noise: two sizes, each with the times 1 and 3 (x 100 us), the larger
 * size 0.2 slower. The least-squares line explains d^2 / (d^2 + 4) =
 * 0.0099 of the variance (between sizes d^2, within them 4), and no line
 * explains more: the robust fit's R^2 is at most that, the gate refuses
 * the kind, and says so by name. */
START_TEST(noise_is_refused)
{
    calibrate_points *p = calibrate_points_new();
    const double t[] = {1e-4, 3e-4};
    for (int rep = 0; rep < 4; rep++)
        for (int i = 0; i < 2; i++) {
            calibrate_add_kind(p, TASK_MERGE, 1e6, t[i], 0);
            calibrate_add_kind(p, TASK_MERGE, 2e6, t[i] + 0.2e-4, 0);
        }
    calib *base = table(ROOMY);
    calibrate_result res;
    char err[LOONG_ERRLEN];
    ck_assert_msg(calibrate_fit(p, base, false, &res, err) == 0, "%s", err);
    ck_assert_msg(res.kind[TASK_MERGE].status == CAL_FITTED, "%s", res.kind[TASK_MERGE].reason);
    ck_assert_msg(res.kind[TASK_MERGE].line.r2 <= 0.04 / 4.04 + 1e-12, "R^2 %g", res.kind[TASK_MERGE].line.r2);
    fit_gate g = {0};
    calibrate_judge(&res, &g);
    ck_assert_int_eq(fit_gate_failing(&g, FIT_GATE_MIN_R2), 1);
    char d[256];
    fit_gate_describe(&g.item[0], FIT_GATE_MIN_R2, d, sizeof d);
    ck_assert_msg(strstr(d, "merge: R^2 = ") == d && strstr(d, "over 16 points, below --min-r2 0.5"), "%s", d);
    calib_free(base);
    calibrate_points_free(p);
}
END_TEST

START_TEST(degenerate_input)
{
    double x1[] = {1}, y1[] = {2}, x2[] = {5, 5, 5, 5}, y2[] = {1, 2, 3, 4};
    fit_line f;
    char err[LOONG_ERRLEN];
    ck_assert_int_eq(fit_linear(x1, y1, 1, "one point", &f, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "at least 3"));
    ck_assert_int_eq(fit_linear(x2, y2, 4, "same size", &f, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "same size"));
    /* one trace whose transfers all have one size (a forward-only ring):
     * the links are kept, the rest is fitted; --strict refuses */
    char p[] = "/tmp/loong-cal3-XXXXXX";
    close(mkstemp(p));
    config c = tcfg("tiny", 4096, "zigzag", 1, 4, 0, SCOPE_ATTN_FWD);
    synthetic(&c, NULL, 0, p);
    const char *paths[1] = {p};
    calibrate_result res;
    calib *base = table(ROOMY);
    ck_assert_int_eq(fit_paths(paths, 1, base, false, &res, err), 0);
    ck_assert(res.link[LINK_INTRA].status == CAL_KEPT);
    ck_assert_msg(strstr(res.link[LINK_INTRA].reason, "same size") != NULL, "%s", res.link[LINK_INTRA].reason);
    ck_assert(calibrate_kept(&res) >= 1);
    ck_assert_int_eq(fit_paths(paths, 1, base, true, &res, err), -1);
    ck_assert_msg(strstr(err, "same size") != NULL, "%s", err);
    calib_free(base);
    /* the command: exit 0 with a "# kept from base:" line, exit 2 with --strict */
    char dir[] = "/tmp/loong-cal-cli-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    run_result r = run_cmd(LOONG_BIN " topo --gpus-per-node 8 -o %s/p.xml", dir);
    ck_assert_msg(r.status == 0, "%s", r.err);
    FILE *tf = fopen("/tmp/loong-cal-cli.calib", "w");
    fputs(ROOMY, tf);
    fclose(tf);
    r = run_cmd(LOONG_BIN " calibrate %s --platform %s/p.xml --calib /tmp/loong-cal-cli.calib -o %s/out", p, dir, dir);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "# kept from base: same-node links:") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "kept from base\n") != NULL, "%s", r.out);
    r = run_cmd(LOONG_BIN " calibrate %s --platform %s/p.xml --calib /tmp/loong-cal-cli.calib -o %s/strict --strict", p,
                dir, dir);
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
    run_cmd("rm -rf %s /tmp/loong-cal-cli.calib", dir);
    unlink(p);
}
END_TEST

#ifdef HAVE_SIMGRID
/* loong sim's own transfers and kernels, fitted back; the same without the
 * traces' flow events. */
START_TEST(round_trip_through_sim)
{
    char dir[] = "/tmp/loong-rt-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    run_result r = run_cmd(LOONG_BIN " topo --nodes 2 --gpus-per-node 2 --nics-per-node 1 --gpu h100 --nvlink 300GBps "
                                     "--nic 25GBps --nvlink-latency 4us --nic-latency 7us -o %s/p.xml",
                           dir);
    ck_assert_msg(r.status == 0, "%s", r.err);
    FILE *f = fopen("/tmp/loong-rt.calib", "w");
    fprintf(f, "gpu h100\npeak 989T\nmem_bw 3.35TBps\nattn_fwd line 5us 400T\nattn_bwd line 5us 300T\n"
               "gemm line 4us 600T\nmerge line 3us 2TBps\nacc line 3us 2TBps\n");
    fclose(f);
    for (int i = 0; i < 2; i++) {
        r = run_cmd(LOONG_BIN
                    " sim --platform %s/p.xml --calib /tmp/loong-rt.calib --model tiny --seq %dK --mesh 4 "
                    "--strategy zigzag --scope attn-fwd --gpus-per-node 2 --quiet --trace %s/t%d.json -o /dev/null",
                    dir, 4 << i, dir, i);
        ck_assert_msg(r.status == 0, "%s", r.err);
    }
    r = run_cmd(LOONG_BIN " calibrate %s/t0.json %s/t1.json --platform %s/p.xml --calib /tmp/loong-rt.calib -o %s/out",
                dir, dir, dir, dir);
    ck_assert_msg(r.status == 0, "%s\n%s", r.out, r.err);
    platform_spec sp;
    char err[LOONG_ERRLEN], path[256];
    snprintf(path, sizeof path, "%s/out/p.xml", dir);
    ck_assert_msg(platform_spec_read(path, &sp, err) == 0, "%s", err);
    ck_assert_msg(close_to(sp.nvlink_bw, 300e9) < 0.01 && close_to(sp.nvlink_lat, 4e-6) < 0.01, "nvlink %g %g",
                  sp.nvlink_bw, sp.nvlink_lat);
    ck_assert_msg(close_to(sp.nic_bw, 25e9) < 0.01 && close_to(sp.nic_lat, 7e-6) < 0.01, "nic %g %g", sp.nic_bw,
                  sp.nic_lat);
    snprintf(path, sizeof path, "%s/out/h100.calib", dir);
    calib *cb = calib_load(path, err);
    ck_assert_msg(cb != NULL, "%s", err);
    ck_assert(close_to(calib_seconds(cb, TASK_ATTN_FWD, 1e12, 0, 4096), 5e-6 + 1e12 / 400e12) < 0.01);
    ck_assert(close_to(calib_seconds(cb, TASK_MERGE, 0, 1e9, 4096), 3e-6 + 1e9 / 2e12) < 0.01);
    calib_free(cb);
    /* the same fit from the same traces without their flow events */
    r = run_cmd("grep -c '\"ph\":\"[sf]\"' %s/t0.json", dir);
    ck_assert_msg(atoi(r.out) > 0, "sim wrote no flow events");
    r = run_cmd("sed -i '/^{\"ph\":\"[sf]\"/d' %s/t0.json %s/t1.json && " LOONG_BIN
                " calibrate %s/t0.json %s/t1.json --platform %s/p.xml --calib /tmp/loong-rt.calib -o %s/out2 && "
                "diff -r -I loong_origin %s/out %s/out2",
                dir, dir, dir, dir, dir, dir, dir, dir);
    ck_assert_msg(r.status == 0, "calibrate differs without flows: %s\n%s", r.out, r.err);
    /* --hold keeps a link class at the platform's values: fitted from the
     * same traces against a platform of other NVLink, it stays that */
    r = run_cmd(LOONG_BIN " topo --nodes 2 --gpus-per-node 2 --nics-per-node 1 --gpu h100 --nvlink 100GBps "
                          "--nic 25GBps --nvlink-latency 2us --nic-latency 7us -o %s/q.xml && " LOONG_BIN
                          " calibrate %s/t0.json %s/t1.json --platform %s/q.xml --calib /tmp/loong-rt.calib -o %s/out4"
                          " --hold nvlink_bw,nvlink_lat",
                dir, dir, dir, dir, dir);
    ck_assert_msg(r.status == 0 && strstr(r.out, "held at the platform's values"), "%s\n%s", r.out, r.err);
    snprintf(path, sizeof path, "%s/out4/q.xml", dir);
    ck_assert_msg(platform_spec_read(path, &sp, err) == 0, "%s", err);
    ck_assert_msg(sp.nvlink_bw == 100e9 && sp.nvlink_lat == 2e-6, "held nvlink %g %g", sp.nvlink_bw, sp.nvlink_lat);
    ck_assert_msg(close_to(sp.nic_bw, 25e9) < 0.01, "nic %g", sp.nic_bw);
    r = run_cmd(LOONG_BIN " calibrate %s/t0.json --platform %s/q.xml -o %s/out5 --hold nic_bw", dir, dir, dir);
    ck_assert_msg(r.status == 2 && strstr(r.err, "nic_lat,nic_bw") && count_lines(r.err) == 1, "%s", r.err);
    /* the same traces as loong's executor writes them: its devices run no
     * elementwise kernel, and the table says so; a simulator's does not */
    r = run_cmd("grep -c ' skip$' %s/out/h100.calib", dir);
    ck_assert_msg(atoi(r.out) == 0, "a table fitted to sim traces has skip rows: %s", r.out);
    r = run_cmd("sed -i 's/\"backend\":\"sim\"/\"backend\":\"exec-cpu\"/' %s/t0.json %s/t1.json && " LOONG_BIN
                " calibrate %s/t0.json %s/t1.json --platform %s/p.xml --calib /tmp/loong-rt.calib -o %s/out3",
                dir, dir, dir, dir, dir, dir);
    ck_assert_msg(r.status == 0 && strstr(r.out, "runs no elementwise kernels"), "%s\n%s", r.out, r.err);
    snprintf(path, sizeof path, "%s/out3/h100.calib", dir);
    cb = calib_load(path, err);
    ck_assert_msg(cb != NULL, "%s", err);
    for (int k = TASK_NORM; k <= TASK_COMPUTE_LAST; k++)
        ck_assert_msg(calib_seconds(cb, k, 1e9, 1e9, 4096) == 0, "kind %s is timed", task_kind_name(k));
    ck_assert(close_to(calib_seconds(cb, TASK_ATTN_FWD, 1e12, 0, 4096), 5e-6 + 1e12 / 400e12) < 0.01);
    calib_free(cb);
    run_cmd("rm -rf %s /tmp/loong-rt.calib", dir);
}
END_TEST
#endif

#ifdef HAVE_SIMGRID
/* Kernels that loong sim slowed by `interference 0.2` beside slow
 * transfers: calibrate finds the factor again from the traces alone. */
START_TEST(interference_round_trip)
{
    char dir[] = "/tmp/loong-rti-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    run_result r = run_cmd(LOONG_BIN " topo --nodes 2 --gpus-per-node 2 --nics-per-node 1 --gpu h100 --nvlink 3GBps "
                                     "--nic 1GBps -o %s/p.xml",
                           dir);
    ck_assert_msg(r.status == 0, "%s", r.err);
    const char *rates = "gpu h100\npeak 989T\nmem_bw 3.35TBps\nattn_fwd line 5us 400T\nattn_bwd line 5us 300T\n"
                        "gemm line 4us 600T\nmerge line 3us 2TBps\nacc line 3us 2TBps\n";
    char path[128];
    snprintf(path, sizeof path, "%s/slow.calib", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "%sinterference 0.2\n", rates);
    fclose(f);
    snprintf(path, sizeof path, "%s/base.calib", dir);
    f = fopen(path, "w");
    fputs(rates, f);
    fclose(f);
    for (int i = 0; i < 2; i++) {
        r = run_cmd(LOONG_BIN
                    " sim --platform %s/p.xml --calib %s/slow.calib --model tiny --seq %dK --mesh 4 "
                    "--strategy zigzag --scope attn --gpus-per-node 2 --quiet --trace %s/t%d.json -o %s/s%d.txt",
                    dir, dir, 16 << i, dir, i, dir, i);
        ck_assert_msg(r.status == 0, "%s", r.err);
    }
    r = run_cmd(LOONG_BIN " calibrate %s/t0.json %s/t1.json --platform %s/p.xml --calib %s -o %s/out", dir, dir, dir,
                path, dir);
    ck_assert_msg(r.status == 0, "%s\n%s", r.out, r.err);
    ck_assert_msg(strstr(r.out, "# interference: kernels run"), "%s", r.out);
    char err[LOONG_ERRLEN];
    snprintf(path, sizeof path, "%s/out/h100.calib", dir);
    calib *cb = calib_load(path, err);
    ck_assert_msg(cb != NULL, "%s", err);
    ck_assert_msg(close_to(calib_interference(cb, TASK_ATTN_FWD), 0.2) < 0.05, "interference %g\n%s",
                  calib_interference(cb, TASK_ATTN_FWD), r.out);
    calib_free(cb);
    run_cmd("rm -rf %s", dir);
}
END_TEST
#endif

START_TEST(bad_input)
{
    run_result r = run_cmd(LOONG_BIN " calibrate");
    ck_assert_int_eq(r.status, 2);
    r = run_cmd(LOONG_BIN " calibrate /nonexistent.json --platform %s/topologies/dgx-h100-1n.xml -o /tmp/x",
                LOONG_SRCDIR);
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
    r = run_cmd(LOONG_BIN " calibrate x.json -o /tmp/x");
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--platform"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("calibrate");
    TCase *tc = tcase_create("calibrate");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, recovers_known_parameters);
    tcase_add_test(tc, recovers_despite_outliers);
    tcase_add_test(tc, references);
    tcase_add_test(tc, bounded_start_up);
    tcase_add_test(tc, degenerate_input);
    tcase_add_test(tc, r2_closed_forms);
    tcase_add_test(tc, noise_is_refused);
#ifdef HAVE_SIMGRID
    tcase_add_test(tc, round_trip_through_sim);
    tcase_add_test(tc, interference_round_trip);
#endif
    tcase_add_test(tc, bad_input);
    suite_add_tcase(s, tc);
    return check_run(s);
}

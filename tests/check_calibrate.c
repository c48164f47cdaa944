/* calibrate: recovers known rates and link alpha/beta from synthetic traces
 * with noise; refuses degenerate input; and the round trip sim -> trace ->
 * calibrate -> platform reproduces the platform's own parameters. */
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

/* Every task in its own second: no two transfers overlap. */
static void synthetic(const config *c, gsl_rng *r, double noise, const char *path)
{
    dag *g = tbuild(c);
    uint32_t n = dag_ntasks(g);
    double *st = calloc(n, sizeof *st), *du = calloc(n, sizeof *du);
    for (uint32_t i = 0; i < n; i++) {
        const dag_task *t = dag_task_get(g, i);
        double e = 1 + (noise > 0 ? gsl_ran_gaussian(r, noise) : 0);
        st[i] = i;
        if (task_is_compute(t)) {
            uint64_t b = calib_task_bytes(c, t);
            du[i] = T0 + (b ? (double)b / MEM_RATE : (double)t->flops / RATE) * e;
        } else if (task_is_p2p(t)) {
            const dag_task *s = t->kind == TASK_SEND ? t : dag_task_get(g, t->match);
            int cls = config_node(c, s->rank) == config_node(c, s->peer) ? 1 : 0;
            cls = !cls; /* LINK_INTRA = 0 */
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
    ck_assert_int_eq(trace_write(f, g, "synthetic", st, du, NULL), 0);
    fclose(f);
    free(st);
    free(du);
    dag_free(g);
}

static void load(const char *path, trace *t)
{
    char err[LOONG_ERRLEN];
    ck_assert_msg(trace_read(path, t, err) == 0, "%s", err);
}

START_TEST(recovers_known_parameters)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_taus2);
    gsl_rng_set(r, 7);
    char p1[] = "/tmp/loong-cal1-XXXXXX", p2[] = "/tmp/loong-cal2-XXXXXX";
    close(mkstemp(p1));
    close(mkstemp(p2));
    config a = tcfg("tiny", 4096, "zigzag", 1, 4, 0, SCOPE_ATTN), b = tcfg("tiny", 8192, "zigzag", 1, 4, 0, SCOPE_ATTN);
    a.gpus_per_node = b.gpus_per_node = 2; /* ring hops alternate between same and other node */
    synthetic(&a, r, 0.01, p1);
    synthetic(&b, r, 0.01, p2);
    trace t[2];
    load(p1, &t[0]);
    load(p2, &t[1]);
    const trace *tp[2] = {&t[0], &t[1]};
    calibrate_result res;
    char err[LOONG_ERRLEN];
    ck_assert_msg(calibrate_fit(tp, 2, &res, err) == 0, "%s", err);
    ck_assert(res.have_kind[TASK_ATTN_FWD] && res.have_kind[TASK_ATTN_BWD] && res.have_kind[TASK_MERGE]);
    ck_assert_msg(close_to(1 / res.kind[TASK_ATTN_FWD].c1, RATE) < 0.02, "rate %g", 1 / res.kind[TASK_ATTN_FWD].c1);
    ck_assert_msg(close_to(res.kind[TASK_ATTN_FWD].c0, T0) < 0.02, "t0 %g", res.kind[TASK_ATTN_FWD].c0);
    ck_assert(close_to(1 / res.kind[TASK_MERGE].c1, MEM_RATE) < 0.02);
    for (int c = 0; c < LINK_CLASSES; c++) {
        ck_assert(res.have_link[c]);
        ck_assert_msg(close_to(res.link[c].c0, ALPHA[c]) < 0.02, "alpha[%d] %g", c, res.link[c].c0);
        ck_assert_msg(close_to(1 / res.link[c].c1, BETA[c]) < 0.02, "beta[%d] %g", c, 1 / res.link[c].c1);
        ck_assert(res.link[c].r2 > 0.9);
    }
    trace_free(&t[0]);
    trace_free(&t[1]);
    unlink(p1);
    unlink(p2);
    gsl_rng_free(r);
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
    /* one trace whose transfers all have one size: a forward-only ring */
    char p[] = "/tmp/loong-cal3-XXXXXX";
    close(mkstemp(p));
    config c = tcfg("tiny", 4096, "zigzag", 1, 4, 0, SCOPE_ATTN_FWD);
    synthetic(&c, NULL, 0, p);
    trace t;
    load(p, &t);
    const trace *tp = &t;
    calibrate_result res;
    ck_assert_int_eq(calibrate_fit(&tp, 1, &res, err), -1);
    ck_assert_msg(strstr(err, "same size") != NULL, "%s", err);
    trace_free(&t);
    unlink(p);
}
END_TEST

#ifdef HAVE_SIMGRID
/* loong sim's own transfers and kernels, fitted back. */
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
        r = run_cmd(LOONG_BIN " sim --platform %s/p.xml --calib /tmp/loong-rt.calib --model tiny --seq %dK --mesh 4 "
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
    run_cmd("rm -rf %s /tmp/loong-rt.calib", dir);
}
END_TEST
#endif

START_TEST(bad_input)
{
    run_result r = run_cmd(LOONG_BIN " calibrate");
    ck_assert_int_eq(r.status, 2);
    r = run_cmd(LOONG_BIN " calibrate /nonexistent.json --platform %s/topologies/dgx-h100-1n.xml -o /tmp/x", LOONG_SRCDIR);
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
    tcase_add_test(tc, degenerate_input);
#ifdef HAVE_SIMGRID
    tcase_add_test(tc, round_trip_through_sim);
#endif
    tcase_add_test(tc, bad_input);
    suite_add_tcase(s, tc);
    return check_run(s);
}

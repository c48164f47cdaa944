/* compare: two traces built by hand with known differences report exactly
 * those errors; different configurations or task sets are refused. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "analysis/compare.h"
#include "dag_util.h"
#include "check_run.h"

/* A trace of g in which every task of a stream runs back to back for
 * `dur(t)` microseconds, starting at 0 (a valid, if naive, schedule), as
 * `backend` writes it through flt (NULL: every task). */
static void make_trace_as(const dag *g, double (*dur)(const dag_task *), const char *path, const char *backend,
                          const trace_filter *flt)
{
    uint32_t n = dag_ntasks(g);
    double *st = calloc(n, sizeof *st), *du = calloc(n, sizeof *du);
    for (int r = 0; r < config_ranks(dag_config(g)); r++)
        for (int s = 0; s < STREAM_COUNT; s++) {
            uint32_t k;
            const uint32_t *ids = dag_stream_tasks(g, r, s, &k);
            double t = 0;
            for (uint32_t i = 0; i < k; i++) {
                const dag_task *x = dag_task_get(g, ids[i]);
                st[ids[i]] = t * 1e-6;
                du[ids[i]] = dur(x) * 1e-6;
                t += dur(x);
            }
        }
    FILE *f = fopen(path, "w");
    ck_assert_int_eq(trace_write(f, g, backend, st, du, flt, NULL), 0);
    fclose(f);
    free(st);
    free(du);
}

static void make_trace(const dag *g, double (*dur)(const dag_task *), const char *path)
{
    make_trace_as(g, dur, path, "hand", NULL);
}

static double base_dur(const dag_task *t) { return 10.0 + t->rank; }
/* the measurement: attention forward 10 % slower than predicted... */
static double slow_attn(const dag_task *t) { return base_dur(t) * (t->kind == TASK_ATTN_FWD ? 1.1 : 1.0); }

static char pred_path[64], meas_path[64];

static void paths(void)
{
    snprintf(pred_path, sizeof pred_path, "/tmp/loong-pred-XXXXXX");
    snprintf(meas_path, sizeof meas_path, "/tmp/loong-meas-XXXXXX");
    close(mkstemp(pred_path));
    close(mkstemp(meas_path));
}

/* checked teardown: each test's two trace files go (a test that fails
 * between paths() and its end leaves none behind either) */
static void unlink_paths(void)
{
    if (pred_path[0]) unlink(pred_path);
    if (meas_path[0]) unlink(meas_path);
}

START_TEST(known_differences)
{
    config c = tcfg("tiny", 4096, "zigzag", 1, 4, 0, SCOPE_ATTN);
    dag *g = tbuild(&c);
    paths();
    make_trace(g, base_dur, pred_path);
    make_trace(g, slow_attn, meas_path);
    trace p, m;
    char err[LOONG_ERRLEN];
    ck_assert_int_eq(trace_read(pred_path, &p, err), 0);
    ck_assert_int_eq(trace_read(meas_path, &m, err), 0);
    ck_assert_int_eq(compare_check(&p, "p", &m, "m", err), 0);
    cmp_summary s;
    compare_summarize(g, &p, &m, CMP_BY_KIND, &s);
    for (int k = 0; k < s.ngroups; k++) {
        const cmp_group *gr = &s.groups[k];
        double want = gr->key == TASK_ATTN_FWD ? 100 * 0.1 / 1.1 : 0; /* |p - m| / m */
        ck_assert_msg(fabs(gr->median_ape - want) < 1e-3 && fabs(gr->mean_ape - want) < 1e-3, "%s: %g vs %g",
                      task_kind_name(gr->key), gr->median_ape, want);
        ck_assert_uint_eq(gr->count, count_tasks(g, -1, (task_kind)gr->key, -1));
    }
    /* step time: the comp stream of the last rank is the longest chain in
     * both; its makespan grows by 0.1 x its attention forward time */
    double pred_end = 0, meas_end = 0;
    for (int r = 0; r < 4; r++) {
        uint32_t k;
        const uint32_t *ids = dag_stream_tasks(g, r, STREAM_COMP, &k);
        double a = 0, b = 0;
        for (uint32_t i = 0; i < k; i++) {
            a += base_dur(dag_task_get(g, ids[i]));
            b += slow_attn(dag_task_get(g, ids[i]));
        }
        for (int st = 1; st < STREAM_COUNT; st++) {
            uint32_t n2;
            const uint32_t *i2 = dag_stream_tasks(g, r, st, &n2);
            double x = 0;
            for (uint32_t i = 0; i < n2; i++)
                x += base_dur(dag_task_get(g, i2[i]));
            if (x > a) a = x;
            if (x > b) b = x;
        }
        if (a > pred_end) pred_end = a;
        if (b > meas_end) meas_end = b;
    }
    ck_assert(fabs(s.pred_step_us - pred_end) < 1e-3 && fabs(s.meas_step_us - meas_end) < 1e-3);
    ck_assert(fabs(s.step_err_pct - 100 * (pred_end - meas_end) / meas_end) < 1e-6);
    free(s.groups);
    trace_free(&p);
    trace_free(&m);
    dag_free(g);
}
END_TEST

START_TEST(refuses_mismatch)
{
    /* two knobs apart: both are named, with both values, on one line */
    config a = tcfg("tiny", 4096, "zigzag", 1, 4, 0, SCOPE_ATTN), b = tcfg("tiny", 8192, "zigzag", 1, 4, 0, SCOPE_ATTN);
    b.act_bytes = 4;
    dag *ga = tbuild(&a), *gb = tbuild(&b);
    paths();
    make_trace(ga, base_dur, pred_path);
    make_trace(gb, base_dur, meas_path);
    run_result r = run_cmd(LOONG_BIN " compare %s %s", pred_path, meas_path);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "seq 4096 vs 8192") && strstr(r.err, "dtype bf16 vs fp32"), "%s", r.err);
    ck_assert_int_eq(count_lines(r.err), 1);
    /* same configuration, a task missing: a rank-filtered trace */
    FILE *f = fopen(meas_path, "w");
    uint32_t n = dag_ntasks(ga);
    double *z = calloc(n, sizeof *z);
    trace_filter flt = {0, -1, 0};
    trace_write(f, ga, "hand", z, z, &flt, NULL);
    fclose(f);
    r = run_cmd(LOONG_BIN " compare %s %s", pred_path, meas_path);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "different tasks: task") != NULL, "%s", r.err);
    free(z);
    dag_free(ga);
    dag_free(gb);
}
END_TEST

/* An executor's trace leaves out the elementwise kernels it does not run
 * (TRACE_EXEC_SKIPS): compare matches the prediction without them and says
 * how many went; a trace of another backend lacking them is refused. */
START_TEST(exec_trace_lacks_elementwise)
{
    config c = tcfg("tiny", 4096, "zigzag", 1, 4, 0, SCOPE_STEP);
    dag *g = tbuild(&c);
    uint32_t skipped = 0;
    for (uint32_t i = 0; i < dag_ntasks(g); i++)
        skipped += (TRACE_EXEC_SKIPS >> dag_task_get(g, i)->kind) & 1u;
    ck_assert_msg(skipped > 0, "a step without elementwise kernels tests nothing");
    const trace_filter exec = {-1, -1, TRACE_EXEC_SKIPS};
    paths();
    make_trace(g, base_dur, pred_path);
    make_trace_as(g, base_dur, meas_path, "exec-cpu", &exec);
    run_result r = run_cmd(LOONG_BIN " compare %s %s", pred_path, meas_path);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    char want[96];
    snprintf(want, sizeof want, "runs no elementwise kernels: %u predicted ones", skipped);
    ck_assert_msg(strstr(r.out, want) != NULL, "want '%s' in:\n%s", want, r.out);
    make_trace_as(g, base_dur, meas_path, "hand", &exec);
    r = run_cmd(LOONG_BIN " compare %s %s", pred_path, meas_path);
    ck_assert_msg(r.status == 2 && strstr(r.err, "different tasks"), "exit %d: %s", r.status, r.err);
    dag_free(g);
}
END_TEST

START_TEST(cli_report)
{
    config c = tcfg("tiny", 4096, "zigzag", 1, 4, 0, SCOPE_ATTN);
    dag *g = tbuild(&c);
    paths();
    make_trace(g, base_dur, pred_path);
    make_trace(g, slow_attn, meas_path);
    run_result r = run_cmd(LOONG_BIN " compare %s %s --by rank --top 3", pred_path, meas_path);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "# step time: predicted"));
    ck_assert_ptr_nonnull(strstr(r.out, "# per-rank makespan"));
    r = run_cmd(LOONG_BIN " compare %s %s --max-error 0.5", pred_path, meas_path);
    ck_assert_int_eq(r.status, 1);
    r = run_cmd(LOONG_BIN " compare %s %s --max-error 50", pred_path, meas_path);
    ck_assert_int_eq(r.status, 0);
    dag_free(g);
}
END_TEST

START_TEST(bad_traces)
{
    static const char *bad[] = {"", "not json", "{\"traceEvents\":[", "{\"traceEvents\":[],\"loong\":{}}"};
    paths();
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *f = fopen(meas_path, "w");
        fputs(bad[i], f);
        fclose(f);
        run_result r = run_cmd(LOONG_BIN " compare %s %s", meas_path, meas_path);
        ck_assert_msg(r.status == 2 && count_lines(r.err) == 1, "'%s': exit %d: %s", bad[i], r.status, r.err);
    }
    run_result r = run_cmd(LOONG_BIN " compare /nonexistent.json %s", meas_path);
    ck_assert_int_eq(r.status, 2);
}
END_TEST

/* Flow events (Perfetto's arrows) change no figure: the same report from
 * traces with them and from the same traces without (the format before). */
START_TEST(flows_change_nothing)
{
    config c = tcfg("tiny", 4096, "loongtrain", 2, 4, 2, SCOPE_STEP);
    dag *g = tbuild(&c);
    paths();
    make_trace(g, base_dur, pred_path);
    make_trace(g, slow_attn, meas_path);
    run_result r = run_cmd("grep -c '\"ph\":\"[sf]\"' %s", meas_path);
    ck_assert_msg(atoi(r.out) > 0, "no flow events in %s", meas_path);
    static const char *opts[] = {"", "--by rank --top 3", "--by layer", "--max-error 0.5"};
    run_result with[4];
    for (int i = 0; i < 4; i++)
        with[i] = run_cmd(LOONG_BIN " compare %s %s %s", pred_path, meas_path, opts[i]);
    r = run_cmd("sed -i '/^{\"ph\":\"[sf]\"/d' %s %s && grep -c '\"ph\":\"[sf]\"' %s", pred_path, meas_path, meas_path);
    ck_assert_int_eq(atoi(r.out), 0);
    for (int i = 0; i < 4; i++) {
        run_result w = run_cmd(LOONG_BIN " compare %s %s %s", pred_path, meas_path, opts[i]);
        ck_assert_int_eq(w.status, with[i].status);
        ck_assert_uint_eq(w.out_len, with[i].out_len);
        ck_assert_msg(!strcmp(w.out, with[i].out), "compare %s differs without flows:\n%s\n---\n%s", opts[i],
                      with[i].out, w.out);
    }
    ck_assert_int_eq(with[3].status, 1);
    dag_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("compare");
    TCase *tc = tcase_create("compare");
    tcase_add_checked_fixture(tc, NULL, unlink_paths);
    tcase_add_test(tc, known_differences);
    tcase_add_test(tc, refuses_mismatch);
    tcase_add_test(tc, cli_report);
    tcase_add_test(tc, exec_trace_lacks_elementwise);
    tcase_add_test(tc, flows_change_nothing);
    tcase_add_test(tc, bad_traces);
    suite_add_tcase(s, tc);
    return check_run(s);
}

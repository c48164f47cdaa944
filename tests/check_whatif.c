/* What-if perturbations (model/whatif.h, src/sim/sim_whatif.c): closed
 * forms for a straggler, a slow link and a failed rail link, the jitter's
 * determinism, and one-line errors on bad perturbations. Each Check test
 * runs in its own process (SimGrid starts once per process). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "dag_util.h"
#include "sim/sim.h"
#include "model/platform_spec.h"
#include "model/whatif.h"
#include "check_run.h"
#include "plat_util.h"

#define K 1024ull

/* Compute at `rate` FLOP/s for attention, everything else free; interference
 * adds an `interference attn_fwd 0` line, so kernels run as SimGrid
 * executions on their host (sim_actor.c) instead of sleeps. */
static calib *compute_at(const char *rate, bool interference)
{
    char text[600], err[LOONG_ERRLEN] = "";
    snprintf(text, sizeof text,
             "gpu h100\npeak 1e18\nmem_bw 1e15Bps\ngemm line 0s 1e18\nattn_fwd line 0s %s\n"
             "attn_bwd line 0s %s\nmerge line 0s 1e15Bps\nacc line 0s 1e15Bps\n%s",
             rate, rate, interference ? "interference attn_fwd 0\n" : "");
    calib *cb = calib_parse(text, "test", err);
    ck_assert_msg(cb != NULL, "%s", err);
    return cb;
}

/* Simulate c on sp under w. */
static dag *simulate(const platform_spec *sp, const config *c, const calib *cb, const whatif *w, sim_result *res)
{
    char path[128], err[LOONG_ERRLEN] = "";
    sim_platform *pf = sim_platform_open(plat_write(sp, "p.xml", path, sizeof path), 0, NULL, err);
    ck_assert_msg(pf != NULL, "%s", err);
    ck_assert_msg(sim_platform_perturb(pf, w, err) == 0, "%s", err);
    dag *g = tbuild(c);
    ck_assert_msg(sim_run(pf, g, cb, false, SIM_FOLD_DEFAULT, res, err) == 0, "%s", err);
    sim_platform_free(pf);
    return g;
}

static void assert_within(double got, double want, double tol, const char *what)
{
    ck_assert_msg(fabs(got - want) <= tol * want, "%s: simulated %.9g s, closed form %.9g s (off by %.4f %%)", what,
                  got, want, 100 * fabs(got - want) / want);
}

/* ---- a straggler: compute-bound ring, links free ----
 * With communication free the step is the slowest rank's compute: max over
 * r of F_r x W_r, W_r = rank r's attention FLOPs / rate, as long as the
 * straggler's slack absorbs it. The contiguous ring is unbalanced (rank r
 * computes r + 1/2 blocks): a straggler on the busiest rank stretches the
 * step by F, one on rank 0 (1/2 block x 1.25 < 7.5) not at all. Zigzag is
 * balanced: every rank computes the same in every step, the straggler is on
 * the critical path in each, and the step becomes F x W. (A light rank of
 * the unbalanced ring slowed beyond the busiest one is not this simple:
 * its neighbours wait for its buffers, and the step exceeds F x W_r.) */
static void straggler_case(const char *strategy, int rank, double factor, bool interference)
{
    const int P = 8;
    const double rate = 1e13;
    platform_spec sp = plat_spec(1, P, P);
    sp.nvlink_bw = 1e15;
    sp.nvlink_lat = 0;
    config c = tcfg("tiny", 64 * K, strategy, 1, P, 0, SCOPE_ATTN_FWD);
    calib *cb = compute_at("1e13", interference);
    whatif w = {0};
    char arg[32], err[LOONG_ERRLEN];
    snprintf(arg, sizeof arg, "%d:%g", rank, factor);
    ck_assert_msg(whatif_add_straggler(&w, arg, err) == 0, "%s", err);
    sim_result res;
    dag *g = simulate(&sp, &c, cb, &w, &res);
    double want = 0;
    for (int r = 0; r < P; r++) {
        double wr = (double)sum_flops(g, r, TASK_ATTN_FWD) / rate * (r == rank ? factor : 1);
        want = wr > want ? wr : want;
    }
    /* the KV transfers at 1e15 B/s add ~0.2 us to 64 ms */
    assert_within(res.makespan, want, 1e-5, "step = max over ranks of F_r x W_r");
    sim_result_free(&res);
    dag_free(g);
    calib_free(cb);
}

START_TEST(straggler_on_the_critical_rank) { straggler_case("ring", 7, 1.25, false); }
END_TEST

START_TEST(straggler_on_a_light_rank) { straggler_case("ring", 0, 1.25, false); }
END_TEST

START_TEST(straggler_balanced_ring) { straggler_case("zigzag", 3, 1.25, false); }
END_TEST

/* The same through SimGrid's speed profile (kernels as executions). */
START_TEST(straggler_by_speed_profile) { straggler_case("zigzag", 3, 1.25, true); }
END_TEST

/* ---- links: one p2p ring on 2 nodes, compute free ---- */

/* Ring 1x(nodes x gpn) with free compute under w: every send within a node
 * takes 2 NVLink latencies + B / NVLink, every send across nodes alpha +
 * B / beta. Returns how many sends crossed nodes. */
static int link_case(const platform_spec *sp, int gpn, const whatif *w, double alpha, double beta)
{
    int P = sp->nodes * gpn, crossed = 0;
    config c = tcfg("tiny", 64 * K, "ring", 1, P, 0, SCOPE_ATTN_FWD);
    c.gpus_per_node = gpn;
    calib *cb = compute_at("1e18", false);
    sim_result res;
    dag *g = simulate(sp, &c, cb, w, &res);
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->kind != TASK_SEND) continue;
        double B = (double)t->bytes;
        if (t->rank / gpn != t->peer / gpn) {
            assert_within(res.dur[i], alpha + B / beta, 1e-6, "a send across nodes");
            crossed++;
        } else {
            assert_within(res.dur[i], 2 * sp->nvlink_lat + B / platform_spec_p2p_nvl_bw(sp), 1e-6,
                          "a send within a node");
        }
    }
    sim_result_free(&res);
    dag_free(g);
    calib_free(cb);
    return crossed;
}

/* A slow link on the only path: 2 nodes x 1 GPU, one NIC each; both sends
 * cross node0-nic0 (one direction each): alpha + B / (beta / F). */
START_TEST(slow_link_alpha_beta)
{
    platform_spec sp = plat_spec(2, 1, 1);
    whatif w = {0};
    char err[LOONG_ERRLEN];
    ck_assert_msg(whatif_add_slow_link(&w, "node0-nic0:3", err) == 0, "%s", err);
    ck_assert_int_eq(link_case(&sp, 1, &w, 2 * sp.nic_lat, sp.nic_bw / 3), 2);
}
END_TEST

/* A failed rail link: 2 nodes x 2 GPUs, a NIC per GPU, PXN on. The ring's
 * cross-node sends 1 -> 2 and 3 -> 0 go node0-gpu1 -> node1-gpu0 and
 * node1-gpu1 -> node0-gpu0, each through its own NVLink and the NIC of
 * rail 0 (PXN). With node0-nic0 down both take the other rail: the NICs of
 * rail 1 (2 NIC latencies), then NVLink in the receiving node (2 NVLink
 * latencies), at the NIC's bandwidth. */
START_TEST(failed_rail_takes_pxn_route)
{
    platform_spec sp = plat_spec(2, 2, 2);
    whatif w = {0};
    char err[LOONG_ERRLEN];
    ck_assert_msg(whatif_add_fail_link(&w, "node0-nic0", err) == 0, "%s", err);
    ck_assert_int_eq(link_case(&sp, 2, &w, 2 * sp.nic_lat + 2 * sp.nvlink_lat, sp.nic_bw), 6); /* 3 steps x 2 */
}
END_TEST

/* The same ring unperturbed: the PXN route over rail 0 (one NVLink, two NIC latencies). */
START_TEST(rail_route_unperturbed)
{
    platform_spec sp = plat_spec(2, 2, 2);
    whatif w = {0};
    ck_assert_int_eq(link_case(&sp, 2, &w, sp.nvlink_lat + 2 * sp.nic_lat, sp.nic_bw), 6);
}
END_TEST

/* ---- through the CLI ---- */

/* The trace of one run with `extra` options, read back. */
static char *trace_of(const char *platform, const char *extra, const char *name)
{
    char out[160];
    snprintf(out, sizeof out, "%s/%s", plat_dir, name);
    run_result r =
        run_cmd("%s sim --quiet --platform %s --calib %s/topologies/h100.calib --model tiny --seq 32K --mesh 2x4 "
                "--layers 2 --trace %s %s",
                LOONG_BIN, platform, LOONG_SRCDIR, out, extra);
    ck_assert_msg(r.status == 0, "loong sim %s: exit %d: %s", extra, r.status, r.err);
    return read_text(out);
}

/* --jitter 0 is no jitter, byte for byte; a seed gives one trace; another
 * seed another. */
START_TEST(jitter_seeds)
{
    char path[128];
    platform_spec sp = plat_spec(1, 8, 8);
    plat_write(&sp, "p.xml", path, sizeof path);
    char *none = trace_of(path, "", "none.json"), *zero = trace_of(path, "--jitter 0", "zero.json");
    char *a1 = trace_of(path, "--jitter 5 --seed 7", "a1.json"), *a2 = trace_of(path, "--jitter 5 --seed 7", "a2.json");
    char *b = trace_of(path, "--jitter 5 --seed 8", "b.json");
    ck_assert_msg(!strcmp(none, zero), "--jitter 0 changed the trace");
    ck_assert_msg(!strcmp(a1, a2), "the same seed gave two traces");
    ck_assert_msg(strcmp(a1, b) != 0, "seeds 7 and 8 gave the same trace");
    ck_assert_msg(strcmp(a1, none) != 0, "--jitter 5 changed nothing");
    ck_assert_ptr_nonnull(strstr(a1, "\"whatif\":{\"jitter\":0.05"));
    ck_assert_ptr_null(strstr(none, "whatif"));
    free(none), free(zero), free(a1), free(a2), free(b);
}
END_TEST

/* Every perturbation shows in the summary's header. */
START_TEST(summary_header)
{
    char path[128];
    platform_spec sp = plat_spec(2, 8, 8);
    plat_write(&sp, "p.xml", path, sizeof path);
    run_result r = run_cmd("%s sim --quiet --platform %s --calib %s/topologies/h100.calib --model tiny --seq 32K "
                           "--mesh 2x8 --layers 1 --straggler 3 --slow-link node1-nic2:4 --fail-link node0-nic1 "
                           "--jitter 2.5 --seed 9",
                           LOONG_BIN, path, LOONG_SRCDIR);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "# PERTURBED (what-if): straggler rank 3 x1.25; slow link node1-nic2 x4; "
                                        "failed link node0-nic1; jitter 2.5 % (lognormal, mean 1, seed 9)\n"));
}
END_TEST

/* A failure that leaves no route is refused in one line, exit 2. */
START_TEST(disconnected_fabric)
{
    char path[128];
    platform_spec sp = plat_spec(1, 8, 8);
    plat_write(&sp, "p.xml", path, sizeof path);
    run_result r = run_cmd("%s sim --quiet --platform %s --calib %s/topologies/h100.calib --model tiny --seq 32K "
                           "--mesh 2x4 --layers 1 --fail-link node0-gpu0-nvlink",
                           LOONG_BIN, path, LOONG_SRCDIR);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(
        r.err,
        "disconnect rank 0 (node0-gpu0) from rank 1 (node0-gpu1): no route through at most one relay GPU is left"));
    /* across nodes the same failure reroutes through the network */
    sp = plat_spec(2, 8, 8);
    plat_write(&sp, "p.xml", path, sizeof path);
    r = run_cmd("%s sim --quiet --platform %s --calib %s/topologies/h100.calib --model tiny --seq 32K --mesh 2x8 "
                "--layers 1 --fail-link node0-gpu0-nvlink",
                LOONG_BIN, path, LOONG_SRCDIR);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
}
END_TEST

/* ---- every perturbation under every fold, against every copy simulated ----
 * A fold simulates one data-parallel replica (--dp-mode symmetric) or TP
 * rank 0 of each TP group (--tp-mode symmetric) and copies it. A
 * perturbation of a copy it skips (or of the representative alone) makes
 * the copies differ, so loong sim must turn the fold off (a note on stderr)
 * and give exactly the full run's step, or refuse (exit 2) when the full run
 * needs GPUs the platform lacks. Each row: a fold, its configuration, a
 * perturbation that changes the full run's step, and the expectation. On 2
 * nodes x 4 H100s, tiny, 8K tokens: a few hundredths of a second a run. */
typedef struct fold_row {
    const char *mode;    /* --dp-mode, --tp-mode, or --head: --fold dp,head against --fold dp */
    const char *layout;  /* the configuration under the fold */
    const char *perturb; /* the what-if options */
    int expect;          /* 0: the fold is switched off (note); 2: refused; 1: the fold stays (invariant) */
} fold_row;

#define DP_LAYOUT   "--mesh 1x4 --dp 2 --zero 1"
#define TP_LAYOUT   "--mesh 1x4 --tp 2"
#define HEAD_LAYOUT "--mesh 4x2 --strategy usp"

static const fold_row fold_rows[] = {
    /* data-parallel replicas: replica 1 is node 1 */
    {"--dp-mode", DP_LAYOUT, "--straggler 5", 0},
    {"--dp-mode", DP_LAYOUT, "--straggler 1", 0}, /* replica 0's GPU alone: the fold would copy it */
    {"--dp-mode", DP_LAYOUT, "--slow-link node1-nic0:4", 0},
    {"--dp-mode", DP_LAYOUT, "--fail-link node1-nic0", 0},
    {"--dp-mode", DP_LAYOUT, "--jitter 5", 0},
    {"--dp-mode", DP_LAYOUT, "--straggler 1 --straggler 5", 1},      /* the same GPU of every replica: exact */
    {"--dp-mode", "--mesh 1x4 --dp 4 --zero 1", "--straggler 5", 2}, /* 16 GPUs on a platform of 8 */
    /* TP ranks: TP rank 1 is every odd GPU, its ring traffic on rail 1 */
    {"--tp-mode", TP_LAYOUT, "--straggler 3", 0},
    {"--tp-mode", TP_LAYOUT, "--straggler 0", 0},
    {"--tp-mode", TP_LAYOUT, "--slow-link node0-nic1:4", 0},
    {"--tp-mode", TP_LAYOUT, "--slow-link node0-gpu1-nvlink:4", 0},
    {"--tp-mode", TP_LAYOUT, "--fail-link node0-nic1", 0},
    {"--tp-mode", TP_LAYOUT, "--jitter 5", 0},
    /* head ranks: head rank 1 is GPU 1 of each node, its ring traffic on rail 1 */
    {"--head", HEAD_LAYOUT, "--straggler 5", 0},
    {"--head", HEAD_LAYOUT, "--slow-link node1-nic1:4", 0},
    {"--head", HEAD_LAYOUT, "--fail-link node0-nic2", 0},
    {"--head", HEAD_LAYOUT, "--jitter 5", 0},
    {"--head", HEAD_LAYOUT, "--straggler 0 --straggler 1 --straggler 2 --straggler 3", 1}, /* a whole group: exact */
};

/* One run's step (its --json - summary), and its exit status and stderr. */
static double fold_step(const char *platform, const fold_row *x, const char *mode, const char *perturb, run_result *r)
{
    bool head = !strcmp(x->mode, "--head");
    *r = run_cmd("%s sim --quiet --platform %s --calib %s/topologies/h100.calib --model tiny --seq 8K "
                 "--gpus-per-node 4 --scope step %s %s %s %s --json -",
                 LOONG_BIN, platform, LOONG_SRCDIR, x->layout, head ? "--fold" : x->mode,
                 head ? (!strcmp(mode, "symmetric") ? "dp,head" : "dp") : mode, perturb);
    const char *p = strstr(r->out, "\"step_s\":");
    return r->status == 0 && p ? atof(p + 9) : -1;
}

/* One row against its full run (and the clean full step of its layout). */
static void fold_case(const char *path, const fold_row *x, double clean)
{
    run_result sym, full;
    double s = fold_step(path, x, "symmetric", x->perturb, &sym);
    if (x->expect == 2) {
        ck_assert_msg(sym.status == 2 && count_lines(sym.err) == 1, "%s %s: exit %d: %s", x->layout, x->perturb,
                      sym.status, sym.err);
        ck_assert_ptr_nonnull(strstr(sym.err, "every replica must be simulated"));
        ck_assert_ptr_nonnull(strstr(sym.err, "loong topo"));
        ck_assert_int_eq(sym.out_len, 0);
        return;
    }
    double f = fold_step(path, x, "full", x->perturb, &full);
    ck_assert_msg(s > 0 && f > 0, "%s %s: exit %d / %d: %s%s", x->layout, x->perturb, sym.status, full.status, sym.err,
                  full.err);
    printf("# %s symmetric %-28s %-30s %.9f s, full %.9f s, clean %.9f s\n", x->mode, x->layout, x->perturb, s, f,
           clean);
    /* the perturbation bites, so a fold left on would have answered otherwise */
    ck_assert_msg(fabs(f - clean) > 1e-3 * clean, "%s: the full step %.9g s is the clean one", x->perturb, f);
    if (x->expect == 0) {
        ck_assert_msg(fabs(s - f) <= 1e-12 * f, "%s %s: folded %.12g s, full %.12g s", x->mode, x->perturb, s, f);
        ck_assert_msg(strstr(sym.err, " switched off") && strstr(sym.err, "simulated in full") &&
                          count_lines(sym.err) == 1,
                      "no one-line note: %s", sym.err);
    } else { /* the fold stays: the copies still run alike (exact to 1e-8 here) */
        ck_assert_msg(fabs(s - f) <= 1e-6 * f, "%s %s: folded %.12g s, full %.12g s", x->mode, x->perturb, s, f);
        ck_assert_msg(sym.err[0] == '\0', "a note for a fold that stays: %s", sym.err);
    }
}

START_TEST(every_kind_under_every_fold)
{
    char path[128];
    platform_spec sp = plat_spec(2, 4, 4);
    plat_write(&sp, "p.xml", path, sizeof path);
    const char *layout = NULL;
    double clean = 0;
    for (size_t i = 0; i < sizeof fold_rows / sizeof fold_rows[0]; i++) {
        const fold_row *x = &fold_rows[i];
        if (x->expect != 2 && (!layout || strcmp(layout, x->layout))) { /* the clean step, once per layout */
            run_result r;
            clean = fold_step(path, x, "full", "", &r);
            ck_assert_msg(clean > 0, "%s: exit %d: %s", x->layout, r.status, r.err);
            layout = x->layout;
        }
        fold_case(path, x, clean);
    }
}
END_TEST

/* The parser: the forms and the refusals. */
START_TEST(parse)
{
    whatif w = {0};
    char err[LOONG_ERRLEN];
    ck_assert_int_eq(whatif_add_straggler(&w, "3", err), 0);
    ck_assert_int_eq(w.strag[0].rank, 3);
    ck_assert(w.strag[0].factor == WHATIF_STRAGGLER_DEFAULT);
    ck_assert_int_eq(whatif_add_slow_link(&w, "node0-nic1", err), 0);
    ck_assert(w.slow[0].factor == WHATIF_SLOW_LINK_DEFAULT);
    const char *bad_strag[] = {"", "x", "-1", "1:", "1:0", "1:-2", "1:nan", "1:inf", "1.5", ":2"};
    for (size_t i = 0; i < sizeof bad_strag / sizeof *bad_strag; i++)
        ck_assert_msg(whatif_add_straggler(&w, bad_strag[i], err) == -1, "--straggler '%s' accepted", bad_strag[i]);
    const char *bad_slow[] = {"", ":2", "l:0", "l:abc", "l:1e999"};
    for (size_t i = 0; i < sizeof bad_slow / sizeof *bad_slow; i++)
        ck_assert_msg(whatif_add_slow_link(&w, bad_slow[i], err) == -1, "--slow-link '%s' accepted", bad_slow[i]);
    ck_assert_int_eq(whatif_add_fail_link(&w, "a:2", err), -1);
    ck_assert_int_eq(whatif_set_jitter(&w, "100", err), -1);
    ck_assert_int_eq(whatif_set_jitter(&w, "-1", err), -1);
    ck_assert_int_eq(whatif_set_jitter(&w, "0", err), 0);
    ck_assert(!whatif_any(&(whatif){.jitter = 0}));
    /* the lognormal has mean 1 and the coefficient of variation asked */
    double mu, sigma;
    whatif_lognormal_params(0.05, &mu, &sigma);
    ck_assert(fabs(exp(mu + sigma * sigma / 2) - 1) < 1e-12);
    ck_assert(fabs(sqrt(exp(sigma * sigma) - 1) - 0.05) < 1e-12);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("whatif");
    TCase *tc = tcase_create("closed forms");
    tcase_add_checked_fixture(tc, plat_setup, plat_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, straggler_on_the_critical_rank);
    tcase_add_test(tc, straggler_on_a_light_rank);
    tcase_add_test(tc, straggler_balanced_ring);
    tcase_add_test(tc, straggler_by_speed_profile);
    tcase_add_test(tc, slow_link_alpha_beta);
    tcase_add_test(tc, failed_rail_takes_pxn_route);
    tcase_add_test(tc, rail_route_unperturbed);
    tcase_add_test(tc, parse);
    suite_add_tcase(s, tc);
    TCase *cli = tcase_create("cli");
    tcase_add_checked_fixture(cli, plat_setup, plat_teardown);
    tcase_set_timeout(cli, 120);
    tcase_add_test(cli, jitter_seeds);
    tcase_add_test(cli, summary_header);
    tcase_add_test(cli, disconnected_fabric);
    tcase_add_test(cli, every_kind_under_every_fold);
    suite_add_tcase(s, cli);
    return check_run(s);
}

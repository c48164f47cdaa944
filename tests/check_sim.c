/* loong sim (SimGrid backend): predictions against closed forms computed
 * here from link latencies/bandwidths and task sizes, determinism, and
 * one-line errors on bad input. Each Check test runs in its own process
 * (SimGrid starts once per process); tests that compare two simulations run
 * the `loong` binary twice. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include <simgrid/actor.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <xbt/dynar.h>

#include "cli_util.h"
#include "dag_util.h"
#include "core/knobs.h"
#include "sim/sim.h"
#include "model/platform_spec.h"
#include "check_run.h"
#include "plat_util.h"

#define K 1024ull

#define dir plat_dir

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* Compute that takes no time (rates far above anything simulated), so
 * communication alone sets the timings; attention at attn_rate if > 0. */
static void free_compute(char *buf, size_t len, const char *attn_rate)
{
    snprintf(buf, len,
             "gpu h100\npeak 1e18\nmem_bw 1e15Bps\ngemm line 0s 1e18\nattn_fwd line 0s %s\n"
             "attn_bwd line 0s %s\nmerge line 0s 1e15Bps\nacc line 0s 1e15Bps\n",
             attn_rate, attn_rate);
}

/* Simulate c on the platform at path with free compute, folding `folded`. */
static dag *simulate_folded(const char *path, config *c, sim_result *res, mesh_dims folded)
{
    char err[LOONG_ERRLEN] = "", text[512];
    free_compute(text, sizeof text, "1e18");
    calib *cb = calib_parse(text, "free", err);
    ck_assert_msg(cb != NULL, "%s", err);
    sim_platform *pf = sim_platform_open(path, 0, NULL, err);
    ck_assert_msg(pf != NULL, "%s", err);
    dag *g = tbuild(c);
    ck_assert_msg(sim_run(pf, g, cb, false, folded, res, err) == 0, "%s", err);
    calib_free(cb);
    sim_platform_free(pf);
    return g;
}

static dag *simulate(const char *path, config *c, sim_result *res)
{
    return simulate_folded(path, c, res, SIM_FOLD_DEFAULT);
}

/* Simulate c on one node of gpn GPUs with free links (NVLink at 1e15 B/s,
 * no latency, no NCCL launch latencies, which are not links) and compute
 * at a fixed rate, 1e13 FLOP/s, so that compute alone sets the timings. */
static dag *simulate_free_links(config *c, int gpn, sim_result *res)
{
    char path[128], err[LOONG_ERRLEN] = "";
    platform_spec sp = plat_spec(1, gpn, gpn);
    sp.nvlink_bw = 1e15;
    sp.nvlink_lat = 0;
    sp.nccl = 0;
    calib *cb = calib_parse("gpu h100\npeak 1e18\nmem_bw 1e15Bps\ngemm line 0s 1e13\nattn_fwd line 0s 1e13\n"
                            "attn_bwd line 0s 1e13\nmerge line 0s 1e15Bps\nacc line 0s 1e15Bps\n",
                            "slow", err);
    ck_assert_msg(cb != NULL, "%s", err);
    sim_platform *pf = sim_platform_open(plat_write(&sp, "p.xml", path, sizeof path), 0, NULL, err);
    ck_assert_msg(pf != NULL, "%s", err);
    dag *g = tbuild(c);
    ck_assert_msg(sim_run(pf, g, cb, false, SIM_FOLD_DEFAULT, res, err) == 0, "%s", err);
    calib_free(cb);
    sim_platform_free(pf);
    return g;
}

static void assert_within(double got, double want, double tol, const char *what)
{
    ck_assert_msg(fabs(got - want) <= tol * want, "%s: simulated %.9g s, closed form %.9g s (off by %.3f %%)", what,
                  got, want, 100 * fabs(got - want) / want);
}

/* One transfer of B bytes over one link class takes alpha + B / beta: alpha
 * the latencies of the route's two links, beta the link bandwidth. */
static void p2p_case(int nodes, int gpn, double lat, double bw)
{
    config c = tcfg("tiny", 64 * K, "ring", 1, 2, 0, SCOPE_ATTN_FWD);
    c.gpus_per_node = gpn;
    sim_result res;
    char path[128];
    platform_spec sp = plat_spec(nodes, gpn, gpn);
    dag *g = simulate(plat_write(&sp, "p.xml", path, sizeof path), &c, &res);
    int sends = 0;
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->kind != TASK_SEND) continue;
        assert_within(res.dur[i], 2 * lat + (double)t->bytes / bw, 0.01, "p2p");
        sends++;
    }
    ck_assert_int_eq(sends, 2);
    sim_result_free(&res);
    dag_free(g);
}

START_TEST(p2p_nvlink)
{
    platform_spec sp = plat_spec(1, 2, 2);
    p2p_case(1, 2, sp.nvlink_lat, platform_spec_p2p_nvl_bw(&sp));
}
END_TEST

START_TEST(p2p_nic)
{
    platform_spec sp = plat_spec(2, 1, 1);
    p2p_case(2, 1, sp.nic_lat, sp.nic_bw);
}
END_TEST

/* 8-GPU all-to-all on NVSwitch: each rank sends B/7 to each of 7 peers; its
 * uplink (and every downlink) carries 7 equal flows, each at beta/7, so
 * every flow ends at alpha + (B/7)/(beta/7) = alpha + B/beta. */
START_TEST(alltoall_nvswitch)
{
    config c = tcfg("tiny", 64 * K, "ulysses", 8, 1, 0, SCOPE_ATTN_FWD);
    sim_result res;
    char path[128];
    platform_spec sp = plat_spec(1, 8, 8);
    dag *g = simulate(plat_write(&sp, "p.xml", path, sizeof path), &c, &res);
    int n = 0;
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->kind != TASK_ALLTOALL) continue;
        assert_within(res.dur[i], 2 * sp.nvlink_lat + (double)t->bytes / platform_spec_p2p_nvl_bw(&sp), 0.02,
                      "all-to-all");
        n++;
    }
    ck_assert_int_eq(n, 16);
    sim_result_free(&res);
    dag_free(g);
}
END_TEST

/* Two flows leaving a node through its one NIC each get half of it: mesh
 * 2x2 head-first on 2 nodes x 2 GPUs with one NIC per node, the ring sends
 * 0->2 and 1->3 share node 0's NIC (and node 1's on arrival). */
START_TEST(nic_shared)
{
    config c = tcfg("tiny", 64 * K, "usp", 2, 2, 0, SCOPE_ATTN_FWD);
    c.gpus_per_node = 2;
    sim_result res;
    char path[128];
    platform_spec sp = plat_spec(2, 2, 1);
    sp.nvlink_lat = 0; /* the all-to-all before the ring is then instantaneous... */
    sp.nvlink_bw = 1e15;
    dag *g = simulate(plat_write(&sp, "p.xml", path, sizeof path), &c, &res);
    int n = 0;
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->kind != TASK_SEND) continue;
        assert_within(res.dur[i], 2 * sp.nic_lat + (double)t->bytes / (sp.nic_bw / 2), 0.01, "shared NIC");
        n++;
    }
    ck_assert_int_eq(n, 4);
    sim_result_free(&res);
    dag_free(g);
}
END_TEST

/* The links of the route between two GPU hosts, space-separated. */
static void route_of(const char *from, const char *to, char *buf, size_t len)
{
    xbt_dynar_t d = xbt_dynar_new(sizeof(sg_link_t), NULL);
    sg_host_get_route(sg_host_by_name(from), sg_host_by_name(to), d);
    buf[0] = '\0';
    for (unsigned i = 0; i < xbt_dynar_length(d); i++) {
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, "%s%s", i ? " " : "", sg_link_get_name(xbt_dynar_get_as(d, i, sg_link_t)));
    }
    xbt_dynar_free(&d);
}

static char routes[3][256];

/* Graph-routed zones resolve routes once sealed: ask from an actor. */
static void route_actor(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    route_of("node0-gpu3", "node1-gpu5", routes[0], sizeof routes[0]);
    route_of("node0-gpu3", "node1-gpu3", routes[1], sizeof routes[1]);
    route_of("node0-gpu3", "node0-gpu5", routes[2], sizeof routes[2]);
}

/* PXN: a send to another rail crosses the sender's NVLink to the GPU on
 * that rail, then that GPU's NIC; same rail goes straight out; inside the
 * node through the switch. */
START_TEST(pxn_routes)
{
    char path[128], err[LOONG_ERRLEN];
    platform_spec sp = plat_spec(2, 8, 8);
    sim_platform *pf = sim_platform_open(plat_write(&sp, "pxn.xml", path, sizeof path), 0, NULL, err);
    ck_assert_msg(pf != NULL, "%s", err);
    sg_actor_create("routes", sg_host_by_name("node0-gpu0"), route_actor, 0, NULL);
    simgrid_run();
    ck_assert_str_eq(routes[0], "node0-gpu3-nvlink_UP node0-nic5_UP node1-nic5_DOWN");
    ck_assert_str_eq(routes[1], "node0-nic3_UP node1-nic3_DOWN");
    ck_assert_str_eq(routes[2], "node0-gpu3-nvlink_UP node0-gpu5-nvlink_DOWN");
    sim_platform_free(pf);
}
END_TEST

/* ---- through the CLI: two simulations to compare ---- */

static double step_time(const char *platform, const char *calib, const char *args)
{
    run_result r = run_cmd("%s sim --quiet --platform %s --calib %s %s", LOONG_BIN, platform, calib, args);
    ck_assert_msg(r.status == 0, "loong sim %s: exit %d: %s", args, r.status, r.err);
    const char *p = strstr(r.out, "# step time: ");
    ck_assert_msg(p != NULL, "no step time in: %s", r.out);
    return atof(p + 13);
}

/* A kernel that a communication kernel overlaps from start to end runs
 * (1 + F) x slower under `interference attn_fwd F`; one that none overlaps
 * runs at its rate. Slow NVLink: each KV transfer outlasts its block. */
START_TEST(interference_slows_overlapped_kernels)
{
    const double f = 0.25, rate = 1e13;
    char path[128], err[LOONG_ERRLEN] = "", text[600];
    platform_spec sp = plat_spec(1, 2, 2);
    sp.nvlink_bw = 1e8;
    free_compute(text, sizeof text, "1e13");
    strcat(text, "interference attn_fwd 0.25\n");
    calib *cb = calib_parse(text, "interference", err);
    ck_assert_msg(cb != NULL, "%s", err);
    sim_platform *pf = sim_platform_open(plat_write(&sp, "p.xml", path, sizeof path), 0, NULL, err);
    ck_assert_msg(pf != NULL, "%s", err);
    config c = tcfg("tiny", 64 * K, "ring", 1, 2, 0, SCOPE_ATTN_FWD);
    c.gpus_per_node = 2;
    dag *g = tbuild(&c);
    sim_result res;
    ck_assert_msg(sim_run(pf, g, cb, false, SIM_FOLD_DEFAULT, &res, err) == 0, "%s", err);
    int covered = 0, alone = 0;
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->kind != TASK_ATTN_FWD) continue;
        double s = res.start[i], e = s + res.dur[i], d = (double)t->flops / rate;
        unsigned over = 0, touch = 0; /* communication streams (one kernel each at a time) */
        for (uint32_t j = 0; j < dag_ntasks(g); j++) {
            const dag_task *u = dag_task_get(g, j);
            if (task_is_compute(u) || u->rank != t->rank || res.dur[j] <= 0) continue;
            double us = res.start[j], ue = us + res.dur[j];
            if (us <= s && ue >= e) over |= 1u << u->stream;
            if (us < e && ue > s) touch |= 1u << u->stream;
        }
        if (__builtin_popcount(over) == 1 && over == touch)
            assert_within(res.dur[i], d * (1 + f), 1e-6, "an overlapped kernel"), covered++;
        if (touch == 0) assert_within(res.dur[i], d, 1e-6, "a kernel alone"), alone++;
    }
    ck_assert_msg(covered > 0 && alone > 0, "kernels overlapped %d, alone %d: the case tests nothing", covered, alone);
    sim_result_free(&res);
    dag_free(g);
    calib_free(cb);
    sim_platform_free(pf);
}
END_TEST

/* A node of P GPUs whose links are all but free (path), and a table of
 * attention at 1e13 FLOP/s with everything else free (cal). */
static void compute_bound_setup(int P, char *path, size_t plen, char *cal, size_t clen)
{
    char text[512];
    platform_spec sp = plat_spec(1, P, P);
    sp.nvlink_bw = 1e15;
    sp.nvlink_lat = 0;
    plat_write(&sp, "p.xml", path, plen);
    snprintf(cal, clen, "%s/c.calib", dir);
    free_compute(text, sizeof text, "1e13");
    write_text(cal, text);
}

/* Compute-bound (links ~infinite): ring's critical rank does (2P-1) of the
 * P half-blocks an average rank does; zigzag runs the average. */
START_TEST(compute_bound_imbalance)
{
    const int P = 8;
    const double rate = 1e13;
    char path[128], cal[160];
    compute_bound_setup(P, path, sizeof path, cal, sizeof cal);
    const char *cfg = "--model tiny --seq 64K --mesh 1x8 --scope attn-fwd";
    char a[256];
    snprintf(a, sizeof a, "%s --strategy ring", cfg);
    double ring = step_time(path, cal, a);
    snprintf(a, sizeof a, "%s --strategy zigzag", cfg);
    double zz = step_time(path, cal, a);
    config c = tcfg("tiny", 64 * K, "zigzag", 1, P, 0, SCOPE_ATTN_FWD);
    dag *g = tbuild(&c);
    double avg = (double)sum_flops(g, -1, TASK_ATTN_FWD) / P / rate;
    assert_within(zz, avg, 0.02, "zigzag = average rank");
    assert_within(ring / zz, (2.0 * P - 1) / P, 0.02, "ring / zigzag = (2P-1)/P");
    dag_free(g);
}
END_TEST

/* --one-gpu: P Ulysses ranks' attention (links ~infinite) shares one GPU,
 * so the step is the work of all P on one GPU, P x an own GPU's; a kernel's
 * T0 is latency, paid once in parallel by the P ranks (T0 more), not P x
 * T0 of the GPU's time (calib_task_t0). */
START_TEST(one_gpu_shares_the_gpu)
{
    const int P = 4;
    const double rate = 1e13, t0 = 0.02;
    char path[128], cal[160], cal0[160], text[512];
    compute_bound_setup(P, path, sizeof path, cal, sizeof cal);
    snprintf(cal0, sizeof cal0, "%s/t0.calib", dir);
    snprintf(text, sizeof text,
             "gpu h100\npeak 1e18\nmem_bw 1e15Bps\ngemm line 0s 1e18\nattn_fwd line %gs 1e13\n"
             "attn_bwd line 0s 1e13\nmerge line 0s 1e15Bps\nacc line 0s 1e15Bps\n",
             t0);
    write_text(cal0, text);
    const char *cfg = "--model tiny --seq 64K --mesh 4x1 --strategy ulysses --scope attn-fwd --gpus-per-node 4";
    config c = tcfg("tiny", 64 * K, "ulysses", P, 1, 0, SCOPE_ATTN_FWD);
    dag *g = tbuild(&c);
    double all = (double)sum_flops(g, -1, TASK_ATTN_FWD) / rate;
    char a[256];
    assert_within(step_time(path, cal, cfg), all / P, 0.01, "own GPUs: a rank's share");
    snprintf(a, sizeof a, "%s --one-gpu", cfg);
    assert_within(step_time(path, cal, a), all, 0.01, "one GPU: every rank's work");
    assert_within(step_time(path, cal0, a), all + t0, 0.01, "one GPU, T0: once, in parallel");
    dag_free(g);
}
END_TEST

/* Communication-bound (compute free, 200 Gb/s NICs): mesh 2x4 head-first on
 * 2 nodes x 4 GPUs. The single ring (usp) puts an inter-node hop in each of
 * its 3 steps: T >= A + 3X. LoongTrain w=2 keeps inner steps on NVLink and
 * overlaps its one outer (inter-node) hop with the first inner step:
 * T <= A + X + 2Y. X, Y: one KV transfer across nodes / within a node; A: the
 * two head all-to-alls inside a node. */
START_TEST(comm_bound_double_ring)
{
    char path[128], cal[160], text[512];
    platform_spec sp = plat_spec(2, 4, 4);
    sp.nic_bw = 25e9;
    plat_write(&sp, "p.xml", path, sizeof path);
    snprintf(cal, sizeof cal, "%s/c.calib", dir);
    free_compute(text, sizeof text, "1e18");
    write_text(cal, text);
    const char *cfg = "--model tiny --seq 256K --mesh 2x4 --placement head-first --gpus-per-node 4 --scope attn-fwd";
    char a[256];
    snprintf(a, sizeof a, "%s --strategy usp", cfg);
    double single = step_time(path, cal, a);
    snprintf(a, sizeof a, "%s --strategy loongtrain --window 2", cfg);
    double dbl = step_time(path, cal, a);

    config c = tcfg("tiny", 256 * K, "loongtrain", 2, 4, 2, SCOPE_ATTN_FWD);
    dag *g = tbuild(&c);
    double B = 0, A = 0;
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->rank != 0) continue;
        if (t->kind == TASK_SEND) B = (double)t->bytes;
        if (t->kind == TASK_ALLTOALL) A += 2 * sp.nvlink_lat + (double)t->bytes / sp.nvlink_bw;
    }
    double X = 2 * sp.nic_lat + B / sp.nic_bw, Y = 2 * sp.nvlink_lat + B / sp.nvlink_bw;
    double lower_single = A + 3 * X, upper_double = A + X + 2 * Y;
    ck_assert_msg(dbl < single, "double ring %.9g s does not beat the single ring %.9g s", dbl, single);
    ck_assert_msg(single >= 0.99 * lower_single, "single ring %.9g s < bound %.9g s", single, lower_single);
    ck_assert_msg(dbl <= 1.01 * upper_double, "double ring %.9g s > bound %.9g s", dbl, upper_double);
    ck_assert_msg(dbl / single <= 1.01 * upper_double / lower_single, "ratio %.4f above the bound %.4f", dbl / single,
                  upper_double / lower_single);
    dag_free(g);
}
END_TEST

/* Tensor parallelism, tp 2 on a 1x1 context mesh (no all-to-all, ring or
 * gradient collective), ZeRO-1, sequence parallelism on, off, and on with
 * --tp-overlap: with free compute the step is the sum of the TP
 * collectives (or ring steps), every one on the critical path; with free
 * links it is the sum of the compute. */
START_TEST(tp_collectives_on_critical_path)
{
    config c = tcfg("tiny", 4 * K, "ulysses", 1, 1, 0, SCOPE_STEP);
    c.tp = 2;
    c.gpus_per_node = 2;
    c.sequence_parallel = _i % 3 != 1;
    c.tp_overlap = _i % 3 == 2;
    bool free_links = _i >= 3; /* one platform per process: SimGrid starts once */
    char path[128];
    platform_spec sp = plat_spec(1, 2, 2);
    sim_result res;
    dag *g;
    if (!free_links) {
        g = simulate(plat_write(&sp, "p.xml", path, sizeof path), &c, &res);
    } else {
        g = simulate_free_links(&c, 2, &res);
    }
    double comm = 0, busy = 0;
    int n = 0;
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->rank != 0) continue;
        if (t->stream == STREAM_TP && t->kind != TASK_RECV) comm += res.dur[i], n++; /* a step: its send */
        if (task_is_compute(t)) busy += res.dur[i];
    }
    /* the embedding's, 2 blocks' forward and backward, the LM head's, the
     * loss's; with sequence parallelism the norm gradients' too */
    ck_assert_int_eq(n, c.sequence_parallel ? 1 + 2 * (4 + 6) + 4 + 1 + 1 : 1 + 2 * (2 + 2) + 2);
    if (!free_links) {
        assert_within(res.makespan, comm, 0.01, "free compute: step = TP collectives");
    } else {
        assert_within(res.makespan, busy, 0.01, "free links: step = compute");
        double flops =
            (double)(sum_flops(g, 0, TASK_GEMM) + sum_flops(g, 0, TASK_ATTN_FWD) + sum_flops(g, 0, TASK_ATTN_BWD));
        assert_within(busy, flops / 1e13, 0.01, "compute = FLOPs / rate");
    }
    sim_result_free(&res);
    dag_free(g);
}
END_TEST

/* The pipeline bubble emerges from the DAG (pipeline.h's schedules), on
 * free links and compute at 1e13 FLOP/s, pp 4 stages of a 32-block model
 * (mesh 1x1: nothing but the stages' p2p, which costs ~1e-8 of a pass).
 * With f and b a stage's forward and backward pass of one micro-batch and
 * h the LM head's passes (vocab 1: ~1e-7 of a pass), the last stage sets
 * the pace and (Narayanan et al. 2021, section 2.2.1) 1F1B and GPipe take
 *   step = (p - 1)(f + b) + m (f + b + h),
 * so stage 0's idle share of the step is (p - 1)/(m + p - 1) at h = 0;
 * interleaved with v chunks per stage, (p - 1)/(v m + p - 1) (section
 * 2.2.2): its h term is checked by its size, below 1e-6. */
START_TEST(pipeline_bubble)
{
    static const struct {
        schedule_kind s;
        int m, v;
    } rows[] = {{SCHED_1F1B, 8, 1},
                {SCHED_GPIPE, 8, 1},
                {SCHED_1F1B, 2, 1},
                {SCHED_INTERLEAVED, 8, 2},
                {SCHED_INTERLEAVED, 4, 4}};
    config c = tcfg("tiny", 4 * K, "ulysses", 1, 1, 0, SCOPE_STEP);
    c.model = (model){"wide", 32, 16384, 128, 8, 128, 53248, 1, .tied = false};
    c.pp = 4;
    c.gpus_per_node = 4;
    c.micro_batches = rows[_i].m;
    c.schedule = rows[_i].s;
    c.vpp = rows[_i].v;
    sim_result res;
    dag *g = simulate_free_links(&c, 4, &res);
    double f = 0, b = 0, h = 0, busy0 = 0, extra = 0;
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (!task_is_compute(t)) continue;
        /* the memory-bound kernels outside the blocks (the embedding, the
         * final norm and the loss, the gradient buffer's zeroing, the
         * optimizer: ~1e-6 of the step here) are not the passes' blocks;
         * all of them together bound what they add to the step */
        if (t->layer < 0 && t->kind >= TASK_NORM) {
            extra += res.dur[i];
            continue;
        }
        if (t->rank == 0) busy0 += res.dur[i];
        if (t->op == OP_LM_HEAD && t->mb == 0) h += res.dur[i];
        if (t->rank == 1 && t->mb == 0) *(t->phase == PHASE_FWD ? &f : &b) += res.dur[i]; /* a middle stage */
    }
    double p = c.pp, m = c.micro_batches, v = c.vpp, idle = 1 - busy0 / res.makespan;
    ck_assert_double_eq_tol(busy0, m * (f + b), 1e-9 * busy0);
    if (c.schedule != SCHED_INTERLEAVED) {
        double want = (p - 1) * (f + b) + m * (f + b + h);
        assert_within(res.makespan, want, 1e-6 + extra / want, "pipeline step");
        ck_assert_double_eq_tol(idle, ((p - 1) * (f + b) + m * h) / res.makespan, 1e-6 + extra / res.makespan);
    } else {
        ck_assert_msg(m * h / res.makespan < 1e-6, "the LM head is not negligible: %g", m * h / res.makespan);
        ck_assert_msg(fabs(idle - (p - 1) / (v * m + p - 1)) < 1e-6 + extra / res.makespan,
                      "interleaved bubble %.9f, closed form %.9f", idle, (p - 1) / (v * m + p - 1));
    }
    sim_result_free(&res);
    dag_free(g);
}
END_TEST

/* Megatron's default rank order tp-cp-ep-dp-pp puts a stage's replicas
 * side by side: pp 2 x dp 4 on two nodes of 4 GPUs places stage 0 on node
 * 0 and stage 1 on node 1, where head-first (dp slowest, _i = 0) puts both
 * stages of a replica on one node. Every replica simulated, free compute:
 * each pipeline send takes the p2p closed form of its link class (NVLink
 * under head-first, the NICs under Megatron's order), and under Megatron's
 * order the NICs carry the pipeline's bytes and nothing else, each
 * transfer twice (the sending and the receiving node's NIC): the
 * gradient groups stay inside the nodes. */
START_TEST(dp_before_pp_places_stages)
{
    static const char *orders[] = {"head-first", "tp-cp-ep-dp-pp"};
    platform_spec sp = plat_spec(2, 4, 4);
    char path[128], err[LOONG_ERRLEN];
    config c = tcfg("tiny", 4 * K, "ulysses", 1, 1, 0, SCOPE_STEP);
    c.pp = 2;
    c.dp = 4;
    c.micro_batches = 1;
    c.gpus_per_node = 4;
    ck_assert_int_eq(config_knob_parse(&c, KNOB_PLACEMENT, orders[_i], err), 0);
    sim_result res;
    dag *g = simulate_folded(plat_write(&sp, "p.xml", path, sizeof path), &c, &res, 0);
    double lat = _i ? sp.nic_lat : sp.nvlink_lat, bw = _i ? sp.nic_bw : platform_spec_p2p_nvl_bw(&sp), pp_bytes = 0,
           nic_bytes = 0;
    int sends = 0;
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->kind != TASK_SEND) continue;
        pp_bytes += (double)t->bytes;
        if (t->op != OP_PP_ACT) continue;
        assert_within(res.dur[i], 2 * lat + (double)t->bytes / bw, 0.01, orders[_i]);
        sends++;
    }
    ck_assert_int_eq(sends, 1);
    for (int i = 0; i < res.nlinks; i++)
        if (strstr(res.links[i].name, "-nic")) nic_bytes += res.links[i].bytes;
    if (_i) ck_assert_double_eq_tol(nic_bytes, 2.0 * c.dp * pp_bytes, 1e-9 * nic_bytes);
    sim_result_free(&res);
    dag_free(g);
}
END_TEST

/* The same input gives a byte-identical trace. */
START_TEST(deterministic_trace)
{
    char path[128];
    platform_spec sp = plat_spec(2, 4, 4);
    plat_write(&sp, "h100x2.xml", path, sizeof path);
    char cal[1024];
    snprintf(cal, sizeof cal, "%s/topologies/h100.calib", LOONG_SRCDIR);
    for (int i = 0; i < 2; i++) {
        run_result r = run_cmd("%s sim --quiet --platform %s --calib %s --model tiny --seq 32K --mesh 2x4 "
                               "--strategy loongtrain --window 2 --gpus-per-node 4 --scope step --trace %s/t%d.json "
                               "-o %s/s%d.txt",
                               LOONG_BIN, path, cal, dir, i, dir, i);
        ck_assert_msg(r.status == 0, "%s", r.err);
    }
    run_result r = run_cmd("cmp %s/t0.json %s/t1.json && cmp %s/s0.txt %s/s1.txt", dir, dir, dir, dir);
    ck_assert_msg(r.status == 0, "traces differ: %s%s", r.out, r.err);
    r = run_cmd("grep -c '\"ph\":\"X\"' %s/t0.json", dir);
    config c = tcfg("tiny", 32 * K, "loongtrain", 2, 4, 2, SCOPE_STEP);
    dag *g = tbuild(&c);
    ck_assert_int_eq(atoi(r.out), (int)dag_ntasks(g));
    dag_free(g);
}
END_TEST

/* The data-parallel degree is part of the recorded configuration: the
 * traces and JSON summaries of --dp 1 and --dp 2 differ in it (dp 1 leaves
 * the key out, as before it existed), and compare refuses to match them. */
START_TEST(dp_is_recorded)
{
    char path[128], cal[1024];
    platform_spec sp = plat_spec(2, 4, 4);
    plat_write(&sp, "h100x2.xml", path, sizeof path);
    snprintf(cal, sizeof cal, "%s/topologies/h100.calib", LOONG_SRCDIR);
    for (int dp = 1; dp <= 2; dp++) {
        run_result r = run_cmd("%s sim --quiet --platform %s --calib %s --model tiny --seq 16K --mesh 2x2 "
                               "--strategy usp --gpus-per-node 4 --scope step --dp %d --trace %s/dp%d.json "
                               "--json %s/dp%d.sum.json -o /dev/null",
                               LOONG_BIN, path, cal, dp, dir, dp, dir, dp);
        ck_assert_msg(r.status == 0, "%s", r.err);
    }
    run_result r = run_cmd("grep -c '\"dp\":2' %s/dp2.json %s/dp2.sum.json", dir, dir);
    ck_assert_msg(r.status == 0, "dp 2 is not recorded: %s", r.out);
    /* and the calibration table the kernel times came from, in the summary and the header */
    r = run_cmd("grep -c '\"calib\":\"%s\"' %s/dp1.sum.json", cal, dir);
    ck_assert_msg(r.status == 0, "the table is not recorded: %s", r.out);
    r = run_cmd("%s sim --platform %s --calib %s --model tiny --seq 16K --mesh 2x2 --strategy usp --gpus-per-node 4",
                LOONG_BIN, path, cal);
    char want[1100];
    snprintf(want, sizeof want, "\n# calibration table: %s\n", cal);
    ck_assert_msg(r.status == 0 && strstr(r.out, want), "%s", r.out);
    /* --compose names it too, in its header and JSON */
    r = run_cmd("%s sim --quiet --compose --platform %s --calib %s --model llama3-8b --seq 16K --mesh 2x2 "
                "--strategy usp --scope step --gpus-per-node 4 --json %s/comp.json",
                LOONG_BIN, path, cal, dir);
    ck_assert_msg(r.status == 0 && strstr(r.out, want), "%s%s", r.out, r.err);
    r = run_cmd("grep -c '\"calib\":\"%s\"' %s/comp.json", cal, dir);
    ck_assert_msg(r.status == 0, "--compose's JSON does not record the table: %s", r.out);
    /* and what ran by symmetry: the default fold, dp */
    r = run_cmd("grep -c '\"fold\":\"dp\"' %s/dp2.sum.json %s/comp.json", dir, dir);
    ck_assert_msg(r.status == 0 && strstr(r.out, "dp2.sum.json:1") && strstr(r.out, "comp.json:1"),
                  "the fold is not recorded: %s", r.out);
    r = run_cmd("grep -l '\"dp\":' %s/dp1.json %s/dp1.sum.json", dir, dir); /* the key, not the dp stream */
    ck_assert_msg(r.status == 1, "dp 1 is recorded: %s", r.out);
    r = run_cmd("%s compare %s/dp1.json %s/dp2.json", LOONG_BIN, dir, dir);
    ck_assert_msg(r.status == 2, "compare of dp 1 and dp 2 exits %d", r.status);
    ck_assert_msg(strstr(r.err, "dp default vs 2") != NULL, "compare does not name dp: %s", r.err);
}
END_TEST

/* The platforms loong topo writes (one PXN edge per node and NIC; Floyd up
 * to PLATFORM_FLOYD_NODES nodes, DijkstraCache beyond) predict exactly
 * what the previous generator's (one PXN edge per GPU and NIC, Floyd;
 * tests/data/floyd) did on the same cluster, under either routing:
 * byte-identical traces for a ring across nodes, an all-to-all across
 * nodes and rails (PXN), a data-parallel all-reduce, a ring around a failed
 * NIC, and two GPUs that share a NIC. */
START_TEST(floyd_and_dijkstra_platforms_agree)
{
    static const struct {
        const char *platform, *calib, *args;
    } rows[] = {
        {"dgx-h100-4n", "h100", "--mesh 1x32 --strategy zigzag --scope attn"},
        {"dgx-h100-4n", "h100", "--mesh 8x4 --strategy usp --placement context-first --scope attn"},
        {"dgx-h100-4n", "h100", "--mesh 4x8 --strategy usp --scope step --zero 0 --dp 2"},
        {"dgx-h100-4n", "h100", "--mesh 1x32 --strategy ring --scope attn --fail-link node1-nic3"},
        {"a100-4n-4nic", "a100", "--mesh 2x16 --strategy loongtrain --window 4 --scope step"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        /* the shipped datasheet file (what loong topo writes), its
         * DijkstraCache form, the previous generator's */
        run_result r =
            run_cmd("sed 's/routing=\"Floyd\"/routing=\"DijkstraCache\"/' %s/topologies/%s-datasheet.xml >%s/dij.xml",
                    LOONG_SRCDIR, rows[i].platform, dir);
        ck_assert_int_eq(r.status, 0);
        char plat[3][1200];
        snprintf(plat[0], sizeof plat[0], "%s/topologies/%s-datasheet.xml", LOONG_SRCDIR, rows[i].platform);
        snprintf(plat[1], sizeof plat[1], "%s/dij.xml", dir);
        snprintf(plat[2], sizeof plat[2], "%s/tests/data/floyd/%s.xml", LOONG_SRCDIR, rows[i].platform);
        for (int k = 0; k < 3; k++) {
            r = run_cmd(
                "%s sim --quiet --platform %s --calib %s/topologies/%s.calib --model tiny --seq 16K --layers 2 %s "
                "--trace %s/agree%d.json -o /dev/null",
                LOONG_BIN, plat[k], LOONG_SRCDIR, rows[i].calib, rows[i].args, dir, k);
            ck_assert_msg(r.status == 0, "%s %s: %s", plat[k], rows[i].args, r.err);
        }
        r = run_cmd("cmp %s/agree0.json %s/agree1.json && cmp %s/agree0.json %s/agree2.json", dir, dir, dir, dir);
        ck_assert_msg(r.status == 0, "%s %s: the descriptions predict differently: %s", rows[i].platform, rows[i].args,
                      r.out);
    }
}
END_TEST

/* The rail fabric: an all-to-all among the nodes of one leaf group (a
 * scalable unit, 32 nodes by default) never crosses a spine, cross-rail
 * pairs included (PXN puts them on the receiver's rail inside the sending
 * node); between units it does. Read from the busiest-links report. */
START_TEST(rail_alltoall_stays_in_its_unit)
{
    char plat[1024];
    /* the fat-tree's leaf groups and the rail fabric's scalable units */
    static const char *fabric[] = {"--nodes-per-leaf 32", "--nodes-per-leaf 2", "--fabric rail --unit-nodes 4",
                                   "--fabric rail --unit-nodes 2"};
    for (int f = 0; f < 4; f++) {
        int split = f % 2;
        snprintf(plat, sizeof plat, "%s/su.xml", dir);
        run_result r = run_cmd("%s topo --nodes 4 --gpu h100 %s -o %s", LOONG_BIN, fabric[f], plat);
        ck_assert_msg(r.status == 0, "%s", r.err);
        /* the links that carried traffic, counted by level */
        r = run_cmd("%s sim --quiet --platform %s --calib %s/topologies/h100.calib --model tiny --seq 16K --mesh 8x4 "
                    "--strategy usp --placement context-first --scope attn --links 1000 -o %s/su.txt && "
                    "grep -c -- '-nic[0-9]*_UP' %s/su.txt; grep -c -- '-up_UP' %s/su.txt",
                    LOONG_BIN, plat, LOONG_SRCDIR, dir, dir, dir);
        int nics = 0, ups = -1;
        ck_assert_int_eq(sscanf(r.out, "%d %d", &nics, &ups), 2);
        ck_assert_msg(nics == 32, "%d NICs carried the all-to-all, not all 32", nics);
        ck_assert_msg((ups > 0) == (split == 1), "%s units: %d leaf uplinks carried traffic", split ? "two" : "one",
                      ups);
    }
}
END_TEST

/* An NVLink domain across nodes (two GB200 NVL72 racks, 18 nodes of 4
 * GPUs each): a 16-way head group's all-to-all and a 4-way ring inside
 * rack 0 (mesh 16x4, 64 GPUs, --gpus-per-node 72: the domain) carry
 * traffic on NVLink links only, never a NIC; the same mesh widened to two
 * racks (16x8, 128 GPUs) does reach the NICs. Read from the busiest-links
 * report. */
START_TEST(nvl72_domain_never_touches_a_nic)
{
    char plat[1024];
    snprintf(plat, sizeof plat, "%s/nvl72x2.xml", dir);
    run_result r = run_cmd("%s topo --preset gb200-superpod --nodes 36 -o %s", LOONG_BIN, plat);
    ck_assert_msg(r.status == 0, "%s", r.err);
    static const char *mesh[] = {"16x4", "16x8"};
    for (int m = 0; m < 2; m++) {
        r = run_cmd("%s sim --quiet --platform %s --calib %s/topologies/gb200.calib --model llama3-8b --layers 1 "
                    "--seq 64K --mesh %s --strategy usp --scope attn --gpus-per-node 72 --links 1000 -o %s/l.txt && "
                    "grep -c -- '-nic[0-9]*_UP' %s/l.txt; grep -c -- '-nvlink_UP' %s/l.txt",
                    LOONG_BIN, plat, LOONG_SRCDIR, mesh[m], dir, dir, dir);
        int nics = -1, nvl = -1;
        ck_assert_msg(sscanf(r.out, "%d %d", &nics, &nvl) == 2, "%s", r.out);
        ck_assert_msg(nvl > 0, "mesh %s: no NVLink link carried traffic", mesh[m]);
        if (m == 0)
            ck_assert_msg(nics == 0, "mesh 16x4 inside one rack: %d NICs carried traffic", nics);
        else
            ck_assert_msg(nics > 0, "mesh 16x8 over two racks: no NIC carried traffic");
    }
}
END_TEST

/* Bad input: one line on stderr, exit 2, no output file. */
static void assert_rejected(const char *platform, const char *extra, const char *needle)
{
    run_result r = run_cmd("%s sim --quiet --platform %s --model tiny --seq 32K --mesh 2x4 --scope attn %s "
                           "--trace %s/bad.json -o %s/bad.txt",
                           LOONG_BIN, platform, extra, dir, dir);
    ck_assert_msg(r.status == 2, "exit %d for %s %s: %s", r.status, platform, extra, r.err);
    ck_assert_msg(count_lines(r.err) == 1, "not one line: %s", r.err);
    ck_assert_msg(strstr(r.err, needle) != NULL, "'%s' lacks '%s'", r.err, needle);
    ck_assert_int_eq(r.out_len, 0);
    char f[128];
    snprintf(f, sizeof f, "%s/bad.json", dir);
    ck_assert_msg(access(f, F_OK) != 0, "a trace was written");
    snprintf(f, sizeof f, "%s/bad.txt", dir);
    ck_assert_msg(access(f, F_OK) != 0, "a summary was written");
    run_result ls = run_cmd("ls %s | grep -c tmp", dir);
    ck_assert_msg(atoi(ls.out) == 0, "temporary files left behind");
}

/* Each case's step with `mode`=symmetric against `mode`=full on platform
 * (llama3-8b blocks x 2): within 1 %. */
static void symmetric_vs_full(const char *platform, const char *mode, const char *const *cases, size_t n)
{
    const char *cal = LOONG_SRCDIR "/topologies/h100.calib";
    for (size_t i = 0; i < n; i++) {
        char args[256];
        snprintf(args, sizeof args, "--model llama3-8b --layers 2 %s %s symmetric", cases[i], mode);
        double sym = step_time(platform, cal, args);
        snprintf(args, sizeof args, "--model llama3-8b --layers 2 %s %s full", cases[i], mode);
        double full = step_time(platform, cal, args);
        printf("# %s symmetric vs full: %-72s %.6f s %.6f s (%+.3f %%)\n", mode, cases[i], sym, full,
               100 * (sym - full) / full);
        assert_within(sym, full, 0.01, cases[i]);
    }
}

/* Data parallelism by symmetry (one replica simulated) against every
 * replica simulated, on up to 256 GPUs: within 1 %; and replicas matter
 * (the gradient collectives span them all). */
START_TEST(dp_symmetric_vs_full)
{
    static const char *cases[] = {
        "--seq 16K --mesh 2x4 --zero 3 --dp 32", "--seq 16K --mesh 2x8 --zero 0 --dp 8 --nccl-algo tree",
        "--seq 128K --mesh 4x8 --zero 1 --dp 8", "--seq 32K --mesh 1x16 --zero 2 --dp 4",
        "--seq 16K --mesh 1x8 --zero 0 --dp 16",
    };
    const char *plat = LOONG_SRCDIR "/topologies/dgx-h100-32n.xml", *cal = LOONG_SRCDIR "/topologies/h100.calib";
    symmetric_vs_full(plat, "--dp-mode", cases, sizeof cases / sizeof cases[0]);
    double one = step_time(plat, cal, "--model llama3-8b --layers 2 --seq 16K --mesh 2x4 --zero 3 --dp 1");
    double many = step_time(plat, cal, "--model llama3-8b --layers 2 --seq 16K --mesh 2x4 --zero 3 --dp 32");
    ck_assert_msg(many > 1.05 * one, "32 replicas' gradient collectives should cost: %.6f vs %.6f s", many, one);
}
END_TEST

/* A mixture of experts with replicas: folded, its expert gradients (and
 * EP across replicas, ep > P) cross replicas beside the gradient group's
 * collectives without contending for the NICs, so the folded step is
 * never longer than every replica simulated, and (docs/moe.md's cases)
 * within 20 % of it; sim says so on stderr. */
START_TEST(moe_fold_is_optimistic)
{
    static const char *cases[] = {
        "--model qwen3-30b-a3b --seq 16K --mesh 1x8 --ep 16 --zero 1 --dp 4",
        "--model qwen3-30b-a3b --seq 16K --mesh 2x4 --ep 8 --zero 0 --dp 4",
        "--model qwen3-30b-a3b --seq 16K --mesh 1x8 --ep 32 --zero 1 --dp 4 --routing zipf:1",
        "--model qwen3-30b-a3b --seq 16K --tp 2 --expert-tp 1 --mesh 1x4 --ep 16 --zero 1 --dp 4",
    };
    const char *plat = LOONG_SRCDIR "/topologies/dgx-h100-32n.xml", *cal = LOONG_SRCDIR "/topologies/h100.calib";
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char args[256];
        snprintf(args, sizeof args, "--layers 2 %s --fold dp", cases[i]);
        double sym = step_time(plat, cal, args);
        snprintf(args, sizeof args, "--layers 2 %s --fold none", cases[i]);
        double full = step_time(plat, cal, args);
        printf("# moe folded vs full: %-72s %.6f s %.6f s (%+.1f %%)\n", cases[i], sym, full,
               100 * (sym - full) / full);
        ck_assert_msg(sym <= full * (1 + 1e-9) && sym >= 0.8 * full, "%s: folded %.6f s, full %.6f s", cases[i], sym,
                      full);
    }
    run_result r =
        run_cmd("%s sim --platform %s --calib %s --layers 2 %s -o /dev/null", LOONG_BIN, plat, cal, cases[0]);
    ck_assert_msg(r.status == 0 && strstr(r.err, "--fold none simulates every replica"), "%s", r.err);
}
END_TEST

/* --shared-expert-overlap: the shared experts' halves run on the compute
 * stream while the dispatch and combine are in flight (core/build_ep.c),
 * so a step with all-to-alls across nodes is shorter with it; the
 * analytical model hides them likewise. */
START_TEST(moe_shared_overlap_hides)
{
    const char *plat = LOONG_SRCDIR "/topologies/dgx-h100-4n.xml", *cal = LOONG_SRCDIR "/topologies/h100.calib";
    const char *a = "--model deepseek-v2 --layers 3 --seq 16K --mesh 1x32 --ep 32";
    char args[256];
    snprintf(args, sizeof args, "%s --shared-expert-overlap off", a);
    double off = step_time(plat, cal, args);
    snprintf(args, sizeof args, "%s --shared-expert-overlap on", a);
    double on = step_time(plat, cal, args);
    printf("# shared experts overlapped: %.6f s, not: %.6f s\n", on, off);
    ck_assert_msg(on < off, "overlapped %.6f s, not %.6f s", on, off);
}
END_TEST

/* TP rank 0 of each TP group simulated, the other TP ranks by symmetry
 * (--tp-mode symmetric), against every TP rank simulated: their programs
 * are the same on GPUs of their own NVLink links and rail NICs, so the
 * step agrees within 1 %, beside CP, PP, DP and sequence parallelism off. */
START_TEST(tp_symmetric_vs_full)
{
    static const char *cases[] = {
        "--seq 16K --tp 2 --mesh 2x2 --zero 1",
        "--seq 16K --tp 4 --mesh 1x4 --pp 2 --micro-batches 2 --zero 0 --dp 2",
        "--seq 32K --tp 8 --mesh 1x4 --zero 3 --recompute selective",
        "--seq 16K --tp 2 --mesh 4x1 --sequence-parallel off --pp 2 --micro-batches 4 --schedule gpipe",
    };
    symmetric_vs_full(LOONG_SRCDIR "/topologies/dgx-h100-4n.xml", "--tp-mode", cases, sizeof cases / sizeof cases[0]);
}
END_TEST

/* Head rank 0 of each Ulysses group simulated, the others by symmetry
 * (--fold dp,head), against every head rank (--fold dp): their programs
 * are the same on GPUs of their own NVLink links and rail NICs, and a
 * collective's flows to the other head ranks run as stand-ins over the
 * same routes (sim.h), so the step agrees within 0.5 % with head groups
 * of 2 to 16, inside a node and across two, seq ranks beside them on a
 * node, TP, PP, DP, ZeRO 0-3 and forced trees (whose chain inside a node
 * is not symmetric: its ends carry half the middle's hops). */
/* A configuration and the fold (--fold) a further dimension joins. */
typedef struct fold_case {
    const char *args, *fold;
} fold_case;

/* Each case's step with dim folded too against without: within bound. */
static void fold_vs_full(const char *dim, const fold_case *cases, size_t n, double bound)
{
    const char *plat = LOONG_SRCDIR "/topologies/dgx-h100-4n.xml", *cal = LOONG_SRCDIR "/topologies/h100.calib";
    for (size_t i = 0; i < n; i++) {
        char args[256];
        snprintf(args, sizeof args, "--model llama3-8b --layers 2 %s --fold %s", cases[i].args, cases[i].fold);
        double full = step_time(plat, cal, args);
        snprintf(args, sizeof args, "--model llama3-8b --layers 2 %s --fold %s,%s", cases[i].args, cases[i].fold, dim);
        double sym = step_time(plat, cal, args);
        printf("# %s folded vs full: %-72s %.6f s %.6f s (%+.4f %%)\n", dim, cases[i].args, sym, full,
               100 * (sym - full) / full);
        assert_within(sym, full, bound, cases[i].args);
    }
}

START_TEST(head_symmetric_vs_full)
{
    static const fold_case cases[] = {
        {"--seq 64K --mesh 8x4 --strategy usp --zero 1", "dp"},
        {"--seq 64K --mesh 4x8 --strategy usp --zero 3 --recompute selective", "dp"},
        {"--seq 64K --mesh 4x4 --strategy loongtrain --window 2 --dp 2 --zero 3", "dp"},
        {"--seq 64K --mesh 2x4 --tp 2 --strategy usp --pp 2 --micro-batches 2 --zero 0", "dp,tp"},
        {"--seq 64K --mesh 8x1 --strategy ulysses --dp 4 --zero 0 --nccl-algo tree", "dp"},
        {"--seq 32K --mesh 16x1 --strategy ulysses --dp 2 --zero 3", "dp"},
        {"--seq 128K --mesh 4x4 --tp 2 --strategy usp --placement context-first --zero 1", "dp,tp"},
    };
    fold_vs_full("head", cases, sizeof cases / sizeof *cases, 0.005);
}
END_TEST

/* Ring rank 0 of each ring simulated, the others by symmetry (--fold
 * dp,seq), against every ring rank (--fold dp): under the zigzag
 * partition the ring ranks run the same tasks, a ring step's block taking
 * the same FLOPs from either half of their chunks, and a ring step to or
 * from a ring rank that does not run is a stand-in over the same route, so
 * the step agrees within 1 % with rings of 4 to 8 inside a node and
 * across nodes, the double ring, the all-gather ring, Ulysses beside them,
 * TP, PP, DP and ZeRO 0-3, and with the head fold on top. A ring that
 * mixes NVLink and network hops, or whose ranks run different programs,
 * is refused with the reason. */
START_TEST(seq_symmetric_vs_full)
{
    static const fold_case cases[] = {
        {"--seq 64K --mesh 1x8 --strategy zigzag --zero 1", "dp"},
        {"--seq 128K --mesh 8x4 --strategy loongtrain --window 2 --zero 3", "dp"},
        {"--seq 128K --mesh 4x4 --strategy usp --placement context-first --recompute full --zero 1", "dp,head"},
        {"--seq 64K --mesh 2x4 --strategy allgather --placement context-first --dp 2 --zero 0", "dp"},
        {"--seq 64K --mesh 2x4 --tp 2 --strategy usp --placement context-first --pp 2 --micro-batches 2 --zero 1",
         "dp,tp"},
    };
    fold_vs_full("seq", cases, sizeof cases / sizeof *cases, 0.01);
    const char *plat = LOONG_SRCDIR "/topologies/dgx-h100-4n.xml";
    /* the summary says which ranks ran by symmetry, --compose's too */
    for (int compose = 0; compose < 2; compose++) {
        run_result r = run_cmd("%s sim --quiet --platform %s --model llama3-8b --layers %d --seq 64K --mesh 4x8 "
                               "--strategy usp --placement context-first --fold dp,seq%s --json %s/seq.json",
                               LOONG_BIN, plat, compose ? 3 : 2, compose ? " --compose" : "", dir);
        ck_assert_msg(r.status == 0 && strstr(r.out, "\n# context parallelism: ring rank 0 of each of the rings "
                                                     "simulated, the other 7 by symmetry (within 1 %"),
                      "%s%s", r.out, r.err);
        r = run_cmd("grep -c '\"fold\":\"dp,seq\"' %s/seq.json", dir);
        ck_assert_msg(r.status == 0, "the ring fold is not recorded in the JSON: %s", r.out);
    }
    static const struct {
        const char *args, *why;
    } refused[] = {
        {"--seq 64K --mesh 1x16 --strategy zigzag", "NVLink and network hops"},
        {"--seq 64K --mesh 1x8 --strategy ring", "only the zigzag partition"},
        {"--seq 64K --mesh 2x4 --strategy dualring", "dual ring"},
        {"--seq 64K --mesh 1x8 --strategy zigzag --docs 16K,48K --partition doc-zigzag", "documents"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        run_result r = run_cmd("%s sim --quiet --platform %s --model llama3-8b --layers 2 %s --fold dp,seq", LOONG_BIN,
                               plat, refused[i].args);
        ck_assert_msg(r.status == 2 && strstr(r.err, refused[i].why) && strstr(r.err, "--fold seq"), "%s: %d %s",
                      refused[i].args, r.status, r.err);
    }
}
END_TEST

/* --fold is one set of folded dimensions, and --dp-mode / --tp-mode its
 * aliases: the same set written either way gives byte-identical traces and
 * summaries (the default is --fold dp); and the set's text reads back as
 * itself, for every set sim_run can fold. */
START_TEST(fold_aliases_are_one_set)
{
    static const struct {
        const char *args, *a, *b; /* the configuration, then two spellings of one fold */
    } cases[] = {
        {"--seq 16K --tp 2 --mesh 2x2 --zero 1", "--fold dp,tp", "--tp-mode symmetric"},
        {"--seq 16K --tp 2 --mesh 2x2 --zero 1", "--fold tp,dp", "--dp-mode symmetric --tp-mode symmetric"},
        {"--seq 16K --tp 2 --mesh 2x2 --zero 1", "--fold dp", ""},
        {"--seq 16K --mesh 2x2 --dp 2 --zero 1", "--fold none", "--dp-mode full"},
        {"--seq 16K --tp 2 --mesh 1x2 --dp 2 --zero 1", "--fold tp", "--dp-mode full --tp-mode symmetric"},
    };
    const char *plat = LOONG_SRCDIR "/topologies/dgx-h100-4n.xml", *cal = LOONG_SRCDIR "/topologies/h100.calib";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *spell[2] = {cases[i].a, cases[i].b};
        for (int k = 0; k < 2; k++) {
            run_result r = run_cmd("%s sim --quiet --platform %s --calib %s --model llama3-8b --layers 2 %s %s "
                                   "--trace %s/f%d.json -o %s/f%d.txt",
                                   LOONG_BIN, plat, cal, cases[i].args, spell[k], dir, k, dir, k);
            ck_assert_msg(r.status == 0, "%s %s: %s", cases[i].args, spell[k], r.err);
        }
        run_result r = run_cmd("cmp %s/f0.json %s/f1.json && cmp %s/f0.txt %s/f1.txt", dir, dir, dir, dir);
        ck_assert_msg(r.status == 0, "%s: '%s' and '%s' differ: %s%s", cases[i].args, cases[i].a, cases[i].b, r.out,
                      r.err);
    }
    char text[32], err[LOONG_ERRLEN];
    for (mesh_dims f = 0; f <= SIM_FOLDABLE; f++) {
        if (f & ~SIM_FOLDABLE) continue;
        mesh_dims back = ~0u;
        sim_fold_text(f, text, sizeof text);
        ck_assert_msg(sim_fold_parse(text, &back, err) == 0, "%s: %s", text, err);
        ck_assert_msg(back == f, "'%s' read back as 0x%x, not 0x%x", text, back, f);
        ck_assert_int_eq(sim_fold_check(f, err), 0);
    }
    ck_assert_int_eq(sim_fold_check(MESH_BIT(MESH_PP), err), -1);
    ck_assert_ptr_nonnull(strstr(err, "pp cannot be folded"));
}
END_TEST

/* One simulation of c (llama3-8b, 2 blocks) on the 4-node DGX H100
 * platform with the shipped H100 table, in a child process (SimGrid
 * starts once per process), with LOONG_SIM_COALESCE=`coalesce`: every
 * task's start and duration, then the compute activities, into path. */
static void simulate_child(const config *c, const char *coalesce, const char *path)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char err[LOONG_ERRLEN] = "";
        setenv("LOONG_SIM_COALESCE", coalesce, 1);
        calib *cb = calib_load(LOONG_SRCDIR "/topologies/h100.calib", err);
        sim_platform *pf = cb ? sim_platform_open(LOONG_SRCDIR "/topologies/dgx-h100-4n.xml", 0, NULL, err) : NULL;
        dag *g = pf ? dag_build(c, err) : NULL;
        sim_result res;
        if (!g || sim_run(pf, g, cb, false, SIM_FOLD_DEFAULT, &res, err) < 0) {
            fprintf(stderr, "coalesce=%s: %s\n", coalesce, err);
            _exit(1);
        }
        FILE *f = fopen(path, "wb");
        uint32_t n = dag_ntasks(g);
        bool ok = f && fwrite(res.start, sizeof *res.start, n, f) == n && fwrite(res.dur, sizeof *res.dur, n, f) == n &&
                  fwrite(&res.compute_runs, sizeof res.compute_runs, 1, f) == 1;
        _exit(ok && fclose(f) == 0 ? 0 : 1);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the simulation with LOONG_SIM_COALESCE=%s failed", coalesce);
}

/* A run of ready kernels slept through in one call (sim_actor.c) times
 * every task as one sleep per kernel does: each task's start and end
 * equal to 1e-9 relative, on ring CP, TP with sequence parallelism, 1F1B,
 * recompute and ZeRO-3 with replicas; and the runs are coalesced (fewer
 * compute activities than compute tasks), so the comparison is not void. */
START_TEST(coalesced_kernels_exact)
{
    static const struct {
        const char *strategy;
        int ph, ps, window, tp, pp, m, zero, dp;
        recompute_kind rc;
    } rows[] = {
        {"loongtrain", 2, 4, 2, 1, 1, 1, 1, 1, RECOMPUTE_NONE}, /* ring CP, double ring */
        {"usp", 2, 2, 0, 2, 1, 1, 1, 1, RECOMPUTE_NONE},        /* TP 2, sequence parallel */
        {"zigzag", 1, 4, 0, 1, 2, 4, 1, 1, RECOMPUTE_NONE},     /* PP 2, 1F1B, 4 micro-batches */
        {"zigzag", 1, 8, 0, 1, 1, 1, 1, 1, RECOMPUTE_FULL},     /* full recompute */
        {"usp", 2, 4, 0, 1, 1, 1, 3, 2, RECOMPUTE_SELECTIVE},   /* ZeRO-3 over 2 replicas */
    };
    config c = tcfg("llama3-8b", 64 * K, rows[_i].strategy, rows[_i].ph, rows[_i].ps, rows[_i].window, SCOPE_STEP);
    c.model.layers = 2;
    c.tp = rows[_i].tp;
    c.pp = rows[_i].pp;
    c.micro_batches = rows[_i].m;
    c.zero = rows[_i].zero;
    c.dp = rows[_i].dp;
    c.recompute = rows[_i].rc;
    char err[LOONG_ERRLEN] = "", on[160], off[160];
    ck_assert_msg(config_validate(&c, err) == 0, "row %d: %s", _i, err);
    snprintf(on, sizeof on, "%s/coalesced.bin", dir);
    snprintf(off, sizeof off, "%s/one-by-one.bin", dir);
    simulate_child(&c, "1", on);
    simulate_child(&c, "0", off);
    dag *g = tbuild(&c);
    uint32_t n = dag_ntasks(g), ncompute = 0;
    size_t len = 2 * (size_t)n * sizeof(double) + sizeof(uint64_t);
    double *a = malloc(len), *b = malloc(len);
    FILE *fa = fopen(on, "rb"), *fb = fopen(off, "rb");
    ck_assert_msg(a && b && fa && fb && fread(a, 1, len, fa) == len && fread(b, 1, len, fb) == len, "short result");
    fclose(fa);
    fclose(fb);
    for (uint32_t i = 0; i < n; i++) {
        double sa = a[i], ea = sa + a[n + i], sb = b[i], eb = sb + b[n + i];
        ck_assert_msg(fabs(sa - sb) <= 1e-9 * fmax(fabs(sb), 1e-12) && fabs(ea - eb) <= 1e-9 * fmax(fabs(eb), 1e-12),
                      "row %d task %u: [%.12f, %.12f] coalesced, [%.12f, %.12f] one by one", _i, i, sa, ea, sb, eb);
        ncompute += task_is_compute(dag_task_get(g, i));
    }
    uint64_t runs_a, runs_b;
    memcpy(&runs_a, (char *)a + len - sizeof runs_a, sizeof runs_a);
    memcpy(&runs_b, (char *)b + len - sizeof runs_b, sizeof runs_b);
    ck_assert_uint_eq(runs_b, ncompute); /* one sleep per kernel */
    ck_assert_msg(runs_a < ncompute, "row %d: %llu compute activities for %u kernels", _i, (unsigned long long)runs_a,
                  ncompute);
    printf("# coalesced kernels, row %d: %u tasks, %u kernels in %llu activities\n", _i, n, ncompute,
           (unsigned long long)runs_a);
    free(a);
    free(b);
    dag_free(g);
}
END_TEST

/* The trace's size, estimated before simulating (--trace-max refuses on
 * it), against the file written: within 10 %, whole and filtered. */
START_TEST(trace_size_estimate)
{
    static const char *filters[] = {"", "--trace-rank 3", "--trace-layer 1"};
    char path[128];
    snprintf(path, sizeof path, "%s/size.json", dir);
    for (int i = 0; i < 3; i++) {
        run_result r = run_cmd("%s sim --quiet --platform %s/topologies/dgx-h100-4n.xml --model llama3-8b --layers 2 "
                               "--seq 64K --mesh 2x16 --strategy usp --trace %s %s --trace-max 1B -o /dev/null",
                               LOONG_BIN, LOONG_SRCDIR, path, filters[i]);
        double est = 0;
        const char *p = strstr(r.err, "would be about ");
        ck_assert_msg(r.status == 2 && p && sscanf(p + 15, "%lf", &est) == 1, "%s", r.err);
        ck_assert_msg(access(path, F_OK) != 0, "--trace-max wrote the trace");
        r = run_cmd("%s sim --quiet --platform %s/topologies/dgx-h100-4n.xml --model llama3-8b --layers 2 --seq 64K "
                    "--mesh 2x16 --strategy usp --trace %s %s -o /dev/null && stat -c %%s %s",
                    LOONG_BIN, LOONG_SRCDIR, path, filters[i], path);
        ck_assert_msg(r.status == 0, "%s", r.err);
        double size = atof(r.out) / 1e9;
        printf("# trace size %-16s estimated %.6f GB, written %.6f GB\n", filters[i], est, size);
        ck_assert_msg(fabs(est - size) <= 0.10 * size, "%s: estimated %g GB, written %g GB", filters[i], est, size);
        unlink(path);
    }
}
END_TEST

/* The predicted peak per GPU against the GPU's memory: above it, a
 * "predicted OOM" in the summary, "oom": true in the JSON and one warning
 * line on stderr, exit 0; below it none of those. The peak is the memory
 * model's reserved one (memory_bytes.reserved), checked against --gpu-mem
 * on either side of it and against the platform's H100s (81559 MiB) by
 * default. */
static run_result sim_mem(const char *platform, const char *extra)
{
    return run_cmd("%s sim --quiet --platform %s --calib %s/topologies/h100.calib --model tiny --seq 32K --mesh 2x4 "
                   "--gpus-per-node 8 --scope step %s",
                   LOONG_BIN, platform, LOONG_SRCDIR, extra);
}

START_TEST(memory_verdict)
{
    char plat[128], arg[64], js[160];
    platform_spec sp = plat_spec(1, 8, 8);
    plat_write(&sp, "p.xml", plat, sizeof plat);
    snprintf(js, sizeof js, "--json %s/s.json", dir);
    run_result r = sim_mem(plat, js);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "# memory: predicted reserved ") && strstr(r.out, "fits in 85.5 GB (h100)"), "%s",
                  r.out);
    ck_assert_msg(!strstr(r.out, "predicted OOM") && !strstr(r.err, "OOM"), "%s%s", r.out, r.err);
    char path[160];
    snprintf(path, sizeof path, "%s/s.json", dir);
    char *text = read_text(path), *p = strstr(text, "\"reserved\":");
    ck_assert_ptr_nonnull(p);
    double peak = atof(p + 11);
    ck_assert_msg(peak > 0 && strstr(text, "\"oom\":false"), "%s", text);
    free(text);
    snprintf(arg, sizeof arg, "--gpu-mem %.0fB", peak * 0.99);
    r = sim_mem(plat, arg);
    ck_assert_msg(r.status == 0, "an OOM exits %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "# memory: predicted OOM: reserved ") && strstr(r.out, "(--gpu-mem); cheapest fix: --"),
                  "%s", r.out);
    ck_assert_msg(count_lines(r.err) == 1 && strstr(r.err, "warning: predicted OOM") && strstr(r.err, "cheapest fix"),
                  "%s", r.err);
    snprintf(arg, sizeof arg, "--gpu-mem %.0fB", peak * 1.01);
    r = sim_mem(plat, arg);
    ck_assert_msg(r.status == 0 && r.err[0] == '\0' && strstr(r.out, "(--gpu-mem)\n"), "%s%s", r.out, r.err);
    ck_assert_ptr_null(strstr(r.out, "OOM"));
}
END_TEST

/* With dp replicas the throughput and MFU lines count every replica's
 * tokens on every replica's GPUs: dp x B x S tokens on dp x P GPUs. */
START_TEST(summary_counts_every_replica)
{
    char plat[128];
    platform_spec sp = plat_spec(2, 4, 4);
    plat_write(&sp, "p.xml", plat, sizeof plat);
    run_result r = run_cmd("%s sim --quiet --platform %s --calib %s/topologies/h100.calib --model tiny --seq 8K "
                           "--mesh 1x4 --gpus-per-node 4 --dp 2 --scope step",
                           LOONG_BIN, plat, LOONG_SRCDIR);
    ck_assert_msg(r.status == 0, "%s", r.err);
    char want[96];
    snprintf(want, sizeof want, "(%d tokens per training step on %d GPUs)", 2 * 8192, 2 * 4);
    ck_assert_msg(strstr(r.out, want) != NULL, "no '%s' in: %s", want, r.out);
    ck_assert_msg(strstr(r.out, "x 8 GPUs x peak") != NULL, "the MFU line: %s", r.out);
}
END_TEST

START_TEST(bad_inputs)
{
    char good[128], small[128], path[160], text[512];
    platform_spec sp = plat_spec(1, 8, 8);
    plat_write(&sp, "good.xml", good, sizeof good);
    assert_rejected("/nonexistent/p.xml", "", "cannot read platform");
    snprintf(path, sizeof path, "%s/broken.xml", dir);
    write_text(path, "<?xml version='1.0'?>\n<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\">\n");
    assert_rejected(path, "", "not a valid SimGrid platform");
    sp.gpus_per_node = 4;
    sp.nics_per_node = 4;
    plat_write(&sp, "small.xml", small, sizeof small);
    assert_rejected(small, "--gpus-per-node 4 --calib " LOONG_SRCDIR "/topologies/h100.calib", "4 GPU hosts");
    platform_spec odd = plat_spec(1, 8, 8);
    strcpy(odd.gpu, "mi300x");
    plat_write(&odd, "mi300x.xml", path, sizeof path);
    assert_rejected(path, "", "unknown GPU kind 'mi300x'");
    free_compute(text, sizeof text, "1e18");
    strcat(text, "gemm curve flops 4us 1G:1.5\n");
    snprintf(path, sizeof path, "%s/bad.calib", dir);
    write_text(path, text);
    char extra[200];
    snprintf(extra, sizeof extra, "--calib %s", path);
    assert_rejected(good, extra, "bad.calib:9:");
    run_result r = run_cmd("%s sim --help", LOONG_BIN);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "--platform"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sim");
    TCase *tc = tcase_create("closed forms");
    tcase_add_checked_fixture(tc, plat_setup, plat_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, p2p_nvlink);
    tcase_add_test(tc, p2p_nic);
    tcase_add_test(tc, alltoall_nvswitch);
    tcase_add_test(tc, nic_shared);
    tcase_add_loop_test(tc, tp_collectives_on_critical_path, 0, 6);
    tcase_add_test(tc, pxn_routes);
    tcase_add_test(tc, interference_slows_overlapped_kernels);
    tcase_add_test(tc, compute_bound_imbalance);
    tcase_add_test(tc, one_gpu_shares_the_gpu);
    tcase_add_test(tc, comm_bound_double_ring);
    tcase_add_loop_test(tc, pipeline_bubble, 0, 5);
    tcase_add_loop_test(tc, dp_before_pp_places_stages, 0, 2);
    suite_add_tcase(s, tc);
    TCase *cli = tcase_create("cli");
    tcase_add_checked_fixture(cli, plat_setup, plat_teardown);
    tcase_set_timeout(cli, 120);
    tcase_add_test(cli, deterministic_trace);
    tcase_add_test(cli, dp_symmetric_vs_full);
    tcase_add_test(cli, tp_symmetric_vs_full);
    tcase_add_test(cli, head_symmetric_vs_full);
    tcase_add_test(cli, seq_symmetric_vs_full);
    tcase_add_test(cli, moe_fold_is_optimistic);
    tcase_add_test(cli, moe_shared_overlap_hides);
    tcase_add_test(cli, fold_aliases_are_one_set);
    tcase_add_test(cli, dp_is_recorded);
    tcase_add_test(cli, floyd_and_dijkstra_platforms_agree);
    tcase_add_test(cli, rail_alltoall_stays_in_its_unit);
    tcase_add_test(cli, nvl72_domain_never_touches_a_nic);
    tcase_add_test(cli, bad_inputs);
    tcase_add_test(cli, memory_verdict);
    tcase_add_test(cli, summary_counts_every_replica);
    tcase_add_test(cli, trace_size_estimate);
    tcase_add_loop_test(cli, coalesced_kernels_exact, 0, 5);
    suite_add_tcase(s, cli);
    return check_run(s);
}

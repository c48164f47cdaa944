/* loong coll: NCCL's collectives on simulated platforms against closed
 * forms written here from NCCL's published model (tuning.cc latencies and
 * protocol factors) and the platform's links: ring all-reduce over k rails,
 * a tree's depth, NVLS in one node, all-to-all across nodes through the
 * NIC per GPU. Each runs the SimGrid engine and the analytical one, which
 * must agree with each other on an idle platform. Then --compare against a
 * log written here, and bad input. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "cli_util.h"
#include "plat_util.h"
#include "analysis/nccl_fit.h"
#include "analysis/nccl_log.h"
#include "model/nccl.h"
#include "model/platform_spec.h"

#define dir plat_dir

/* Write spec as DIR/name; the path (a static buffer, one at a time). */
static const char *write_platform(const platform_spec *sp, const char *name)
{
    static char path[128];
    return plat_write(sp, name, path, sizeof path);
}

typedef struct row {
    double size, us, busbw;
    char algo[16], proto[16];
} row;

/* The first data row of `loong coll ARGS`, with --model when model. */
static row coll_row(const char *platform, const char *args, bool model)
{
    run_result r = run_cmd("%s coll --platform %s %s %s", LOONG_BIN, platform, args, model ? "--model" : "");
    ck_assert_msg(r.status == 0, "loong coll %s: exit %d: %s", args, r.status, r.err);
    row w = {0};
    for (const char *line = r.out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (*line == '#') continue;
        char type[16], redop[16], wrong[16], tail[256];
        double count, root, alg;
        int n = sscanf(line, "%lf %lf %15s %15s %lf %lf %lf %lf %15s %255[^\n]", &w.size, &count, type, redop, &root,
                       &w.us, &alg, &w.busbw, wrong, tail);
        ck_assert_msg(n == 10, "not an nccl-tests row: %s", line);
        ck_assert_int_eq(sscanf(tail, "%*f %*f %*f %*s %15s %15s", w.algo, w.proto), 2);
        return w;
    }
    ck_abort_msg("no data row in: %s", r.out);
    return w;
}

static void assert_close(double got, double want, double tol, const char *what)
{
    ck_assert_msg(fabs(got - want) <= tol * fabs(want), "%s: got %.6g, closed form %.6g (off by %.3f %%)", what, got,
                  want, 100 * (got - want) / want);
}

/* Both engines, one size, against the closed form time in microseconds. */
static row both(const char *platform, const char *args, double want_us, const char *what)
{
    row s = coll_row(platform, args, false), m = coll_row(platform, args, true);
    assert_close(s.us, want_us, 0.005, what);
    assert_close(m.us, want_us, 0.005, what);
    ck_assert_str_eq(s.algo, m.algo);
    ck_assert_str_eq(s.proto, m.proto);
    return s;
}

/* NCCL's ring latency (tuning.cc, microseconds): base + a hop per step,
 * network hops apart; all-reduce on N > 1 nodes counts 2N of them. */
static double ring_alpha_us(double base, double nvl, double net, int n, int N)
{
    int steps = 2 * (n - 1), inter = N > 1 ? 2 * N : 0;
    return base + (steps - inter) * nvl + inter * net;
}

/* Ring all-reduce across 2 nodes leaves through k rails: bus bandwidth
 * k x NIC x protocol efficiency (NVLink made fast so the NICs decide). */
START_TEST(ring_allreduce_on_k_rails)
{
    const double S = 1 << 30, bf = 2.0 * 15 / 16;
    static const int rails[] = {2, 4, 8};
    for (int i = 0; i < 3; i++) {
        platform_spec sp = plat_spec(2, 8, rails[i]);
        sp.nvlink_bw = 1e14;
        const char *p = write_platform(&sp, "rails.xml");
        double bw = rails[i] * sp.nic_bw;
        char what[64];
        snprintf(what, sizeof what, "ring Simple on %d rails", rails[i]);
        both(p, "-b 1G -e 1G --nccl-algo ring --nccl-proto simple",
             ring_alpha_us(8.4, 3.4, 14, 16, 2) + 1e6 * S * bf / bw, what);
        snprintf(what, sizeof what, "ring LL128 on %d rails", rails[i]);
        both(p, "-b 1G -e 1G --nccl-algo ring --nccl-proto ll128",
             ring_alpha_us(14, 1.9, 4.0, 16, 2) + 1e6 * S * bf / (0.92 * bw), what);
    }
}
END_TEST

/* A tree's latency is its depth times the network hop: one GPU per node,
 * 8 bytes, Simple: 2 x floor(log2 N) x 28 us (base 0). */
START_TEST(tree_latency_is_depth)
{
    platform_spec sp = plat_spec(16, 1, 1);
    const char *p = write_platform(&sp, "tree.xml");
    for (int N = 2, depth = 1; N <= 16; N *= 2, depth++) {
        char args[128];
        snprintf(args, sizeof args, "-b 8 -e 8 --gpus %d --nccl-algo tree --nccl-proto simple", N);
        row r = both(p, args, 2 * depth * 28.0, "tree depth");
        ck_assert_str_eq(r.algo, "Tree");
    }
}
END_TEST

/* NVLink SHARP in one H100 node: the switch reduces, each GPU sends and
 * receives the buffer once: 23 us + S / (NVLink x 5/6); the tuner picks
 * it for large buffers. */
START_TEST(nvls_in_one_node)
{
    platform_spec sp = plat_spec(1, 8, 8);
    const char *p = write_platform(&sp, "nvls.xml");
    row r = both(p, "-b 1G -e 1G", 23 + 1e6 * (1 << 30) / (sp.nvlink_bw * 5 / 6), "NVLS");
    ck_assert_str_eq(r.algo, "NVLS");
    assert_close(r.busbw, 2.0 * 7 / 8 * sp.nvlink_bw * 5 / 6 / 1e9, 0.01, "NVLS bus bandwidth");
}
END_TEST

/* A GB200 NVL72 rack (loong topo --preset gb200-nvl72: 18 nodes of 4 GPUs
 * in one 72-GPU NVLink domain): NCCL's MNNVL path makes the domain one
 * node, so a 72-rank all-reduce is a ring over NVLink alone, 8.4 us + 2 x
 * 71 NVLink hops of 3.4 us + S x 2 x 71/72 / NVLink, or NVLS in the rack's
 * switches, 23 us + S / (NVLink x 5/6); across two racks the ring crosses
 * the NICs (2 x 2 network steps) and NVLS no longer runs. */
/* Two platforms of `loong topo ARGS`, in dir as a and b (paths of 256). */
static void topo_pair(const char *a_args, const char *a, char pa[256], const char *b_args, const char *b, char pb[256])
{
    snprintf(pa, 256, "%s/%s", dir, a);
    snprintf(pb, 256, "%s/%s", dir, b);
    run_result r = run_cmd("%s topo %s -o %s && %s topo %s -o %s", LOONG_BIN, a_args, pa, LOONG_BIN, b_args, pb);
    ck_assert_msg(r.status == 0, "%s", r.err);
}

START_TEST(nvl72_allreduce_is_nvlink)
{
    /* NVLink 5's 900 GB/s; rings ride NCCL's 40.1 of a link's 50 (topo.h) */
    const double S = 1 << 30, nvl = 900e9, ring = nvl * 40.1 / 50;
    char p[256], p2[256];
    topo_pair("--preset gb200-nvl72", "nvl72.xml", p, "--preset gb200-superpod --nodes 36", "nvl72x2.xml", p2);
    both(p, "-b 1G -e 1G --gpus 72 --nccl-algo ring --nccl-proto simple",
         ring_alpha_us(8.4, 3.4, 14, 72, 1) + 1e6 * S * 2.0 * 71 / 72 / ring, "NVL72 ring");
    row w = both(p, "-b 1G -e 1G --gpus 72", 23 + 1e6 * S / (nvl * 5 / 6), "NVL72 NVLS");
    ck_assert_str_eq(w.algo, "NVLS");
    /* two racks: the ring's 4 network steps; its channels leave a rack on
     * all 72 rails (72 x 50 GB/s, more than NVLink's 722) */
    both(p2, "-b 1G -e 1G --gpus 144 --nccl-algo ring --nccl-proto simple",
         ring_alpha_us(8.4, 3.4, 14, 144, 2) + 1e6 * S * 2.0 * 143 / 144 / ring, "two racks' ring");
    run_result r = run_cmd("%s coll --platform %s -b 1G -e 1G --gpus 144 --nccl-algo nvls", LOONG_BIN, p2);
    ck_assert_int_eq(r.status, 2);
}
END_TEST

/* Inside one DGX H100, rings and all-to-all move at NCCL's share of the
 * NVLink line rate (topo.h: 20.6 of a link's 25 GB/s); --nvl-eff sets it,
 * is written only where it differs from the kind's, and 1 is the line. */
START_TEST(nvlink_share_of_the_line)
{
    const double S = 1 << 30, line = 450e9, bf = 7.0 / 8;
    char p[256], one[256];
    topo_pair("--gpu h100 --datasheet", "h100.xml", p, "--gpu h100 --datasheet --nvl-eff 1", "h100-line.xml", one);
    run_result r = run_cmd("grep -c 'nvl_eff=' %s %s", p, one);
    ck_assert_msg(strstr(r.out, "h100.xml:0") && strstr(r.out, "h100-line.xml:1"), "nvl_eff written: %s", r.out);
    platform_spec sp;
    char err[LOONG_ERRLEN];
    ck_assert_msg(platform_spec_read(p, &sp, err) == 0, "%s", err);
    ck_assert_double_eq_tol(sp.nvl_eff, 20.6 / 25, 1e-12);
    ck_assert_msg(platform_spec_read(one, &sp, err) == 0, "%s", err);
    ck_assert_double_eq(sp.nvl_eff, 1);
    const char *ag = "-b 1G -e 1G --op all_gather --nccl-algo ring --nccl-proto simple";
    both(p, ag, 8.4 + 7 * 3.4 + 1e6 * S * bf / (line * 20.6 / 25), "ring at NCCL's share"); /* n - 1 hops */
    both(one, ag, 8.4 + 7 * 3.4 + 1e6 * S * bf / line, "ring at the line rate");
}
END_TEST

/* All-to-all across 2 nodes: half of each buffer leaves the node, each GPU
 * through its rail NIC (PXN for other rails), shared when GPUs share NICs. */
START_TEST(alltoall_limited_by_nic_per_gpu)
{
    const double S = 1 << 30;
    static const int nics[] = {8, 4};
    for (int i = 0; i < 2; i++) {
        platform_spec sp = plat_spec(2, 8, nics[i]);
        const char *p = write_platform(&sp, "a2a.xml");
        double per_gpu = sp.nic_bw * nics[i] / 8;
        row r = both(p, "--op alltoall -b 1G -e 1G", 1e6 * (2 * sp.nic_lat + S * 8 / 16 / per_gpu), "all-to-all");
        assert_close(r.busbw, 15.0 / 8 * per_gpu / 1e9, 0.01, "all-to-all bus bandwidth");
    }
}
END_TEST

/* A PCIe server of 2 sockets of 4 GPUs, GPU links 32 GB/s, socket link
 * 16 GB/s per direction: GPUs of one socket ring at their links' 32; a
 * ring of 8 (both engines) crosses the socket link once each way, 16; an all-to-all of 8
 * sends half of each buffer across, 2 buffers per direction, bus
 * bandwidth 7/8 x 16 / 2 = 7. Groups strided over both sockets share the
 * link with their siblings (nccl.c's socket_bound): {0,4} among 4 such
 * pairs gets 16 / 4, {0,2,4,6} beside {1,3,5,7} 16 / 2. */
START_TEST(pcie_sockets_bound)
{
    const double S = 1 << 30, link = 32e9, sock = 16e9;
    char p[256];
    snprintf(p, sizeof p, "%s/pcie.xml", dir);
    run_result r = run_cmd("%s topo --gpu a100-pcie --datasheet --socket-link 16GBps -o %s", LOONG_BIN, p);
    ck_assert_msg(r.status == 0, "%s", r.err);
    platform_spec sp;
    char err[LOONG_ERRLEN];
    ck_assert_msg(platform_spec_read(p, &sp, err) == 0, "%s", err);
    ck_assert_int_eq(sp.sockets, 2);
    double a8 = 1e6 * sp.nvlink_lat * 2 * 7; /* Simple ring all-gather: n-1 hops */
    row w = both(p, "--op all_gather -b 1G -e 1G --gpus 8 --nccl-proto simple", a8 + 1e6 * S * 7 / 8 / sock, "8 GPUs");
    assert_close(w.busbw, sock / 1e9, 0.01, "a ring over both sockets");
    w = coll_row(p, "--op alltoall -b 1G -e 1G --gpus 8", true);
    assert_close(w.busbw, 7.0 / 8 * sock / 2 / 1e9, 0.01, "all-to-all across sockets");
    static const int pair[] = {0, 4}, quad[] = {0, 2, 4, 6}, local[] = {0, 1}, socket[] = {0, 1, 2, 3};
    struct {
        const int *ranks;
        int n;
        double want;
    } g[] = {{pair, 2, sock / 4}, {quad, 4, sock / 2}, {local, 2, link}, {socket, 4, link}};
    for (int i = 0; i < 4; i++) {
        nccl_group grp;
        nccl_plan plan;
        ck_assert_int_eq(nccl_group_init(&grp, &sp, g[i].ranks, g[i].n), 0);
        ck_assert_int_eq(nccl_plan_coll(&sp, &grp, COLL_REDUCE_SCATTER, S, NCCL_RING, NCCL_SIMPLE, &plan, err), 0);
        assert_close(plan.raw_busbw, g[i].want, 1e-9, "a strided group's socket share");
        nccl_group_free(&grp);
    }
}
END_TEST

/* A rail fabric of three tiers, one GPU and one NIC per node, units of one
 * node, 5-port switches: a spine has 4 down ports (4 + 1 up at 4:1), so
 * pods of 4 nodes, the pod uplink 4 x NIC / 4 = one NIC. An all-to-all
 * inside a pod is the NIC's (each member sends (n-1)/n of its buffer);
 * across two pods of 4 each pod sends 4 x 4 / 8 = 2 buffers through its
 * uplink: twice the NIC's time and more. */
START_TEST(alltoall_bounded_by_pod_uplink)
{
    const double S = 1 << 30;
    char path[128];
    snprintf(path, sizeof path, "%s/rail.xml", dir);
    run_result r = run_cmd("%s topo --fabric rail --nodes 8 --gpus-per-node 1 --nics-per-node 1 --unit-nodes 1 "
                           "--switch-ports 5 --spine-oversubscription 4 -o %s",
                           LOONG_BIN, path);
    ck_assert_msg(r.status == 0, "%s", r.err);
    const double nic = 50e9, lat_us = 2 * 11.2;
    both(path, "--op alltoall -b 1G -e 1G --gpus 4 --nodes 4", lat_us + 1e6 * S * 3 / 4 / nic, "inside a pod");
    both(path, "--op alltoall -b 1G -e 1G --gpus 8 --nodes 8", lat_us + 1e6 * 2 * S / nic, "across two pods");
}
END_TEST

/* A log written here: rows (size, time) in nccl-tests' format; rank r on
 * host r / (gpus/nodes), or r % nodes when round_robin. */
static const char *write_log_on(const char *name, const char *op, int gpus, int nodes, bool round_robin,
                                const double *size, const double *us, int n, bool footer)
{
    static char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "# nccl-tests version 2.13.9 nccl-headers=21903 nccl-library=21903\n");
    if (op) fprintf(f, "# Collective test starting: %s_perf\n", op);
    fprintf(f, "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg "
               "iters: 1 validation: 1 graph: 0\n#\n# Using devices\n");
    for (int r = 0; r < gpus; r++)
        fprintf(f, "#  Rank %2d Group  0 Pid %6d on    node-%02d device %2d [0000:18:00] NVIDIA H100 80GB HBM3\n", r,
                1000 + r, round_robin ? r % nodes : r / (gpus / nodes), r % 8);
    fprintf(f, "#\n#                                                              out-of-place                       "
               "in-place          \n#       size         count      type   redop    root     time   algbw   busbw "
               "#wrong     time   algbw   busbw #wrong\n#        (B)    (elements)                               (us) "
               " (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n");
    for (int i = 0; i < n; i++)
        fprintf(f, "%12.0f  %12.0f     float     sum      -1  %7.4f  %6.2f  %6.2f      0  %7.4f  %6.2f  %6.2f      0\n",
                size[i], size[i] / 4, us[i], size[i] / us[i] / 1e3, size[i] / us[i] / 1e3, us[i], size[i] / us[i] / 1e3,
                size[i] / us[i] / 1e3);
    if (footer) fprintf(f, "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.234 \n#\n");
    fclose(f);
    return path;
}

static const char *write_log(const char *name, const char *op, int gpus, int nodes, const double *size,
                             const double *us, int n, bool footer)
{
    return write_log_on(name, op, gpus, nodes, false, size, us, n, footer);
}

/* A log's nodes are its distinct hosts, however many: 128 and 2,048 nodes
 * of 8 GPUs, their ranks listed host by host or round-robin (a reader that
 * kept 64 host names counted 16 GPUs per node at 128 nodes). */
START_TEST(log_of_many_nodes)
{
    const double size[] = {1 << 20, 1 << 26}, us[] = {100, 1000};
    const int nodes[] = {128, 2048};
    for (int i = 0; i < 2; i++)
        for (int rr = 0; rr < 2; rr++) {
            nccl_log log;
            char err[LOONG_ERRLEN];
            const char *path = write_log_on("big.log", "all_reduce", 8 * nodes[i], nodes[i], rr, size, us, 2, true);
            ck_assert_msg(nccl_log_read(path, &log, err) == 0, "%s", err);
            ck_assert_int_eq(log.gpus, 8 * nodes[i]);
            ck_assert_int_eq(log.nodes, nodes[i]);
            ck_assert_int_eq(log.nrows, 2);
            nccl_log_free(&log);
        }
}
END_TEST

/* Logs as they are published: named "allreduce" without the "Collective
 * test starting" line, every line prefixed by srun --label's "N: ", and
 * Open MPI's chatter inside the table: the same rows as the plain log. */
START_TEST(published_log_forms)
{
    const double size[] = {1 << 20, 1 << 22, 1 << 26}, us[] = {100, 180, 1000};
    nccl_log plain, other;
    char err[LOONG_ERRLEN], cmd[1024];
    const char *path = write_log("plain.log", "all_reduce", 16, 2, size, us, 3, true);
    ck_assert_msg(nccl_log_read(path, &plain, err) == 0, "%s", err);
    static const char *forms[] = {
        "grep -v 'Collective test starting' %s > %s/h100-2node-allreduce-1M-64M.log",
        "sed 's/^/ 0: /' %s > %s/all_reduce-srun.log",
        "sed '/^ *4194304/a 8 more processes have sent help message help-mtl-ofi.txt / OFI call fail' %s > "
        "%s/all_reduce-ompi.log",
    };
    static const char *names[] = {"h100-2node-allreduce-1M-64M.log", "all_reduce-srun.log", "all_reduce-ompi.log"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, forms[i], path, dir);
        ck_assert_int_eq(system(cmd), 0);
        char p2[256];
        snprintf(p2, sizeof p2, "%s/%s", dir, names[i]);
        ck_assert_msg(nccl_log_read(p2, &other, err) == 0, "%s: %s", names[i], err);
        ck_assert_msg(other.has_op && other.op == COLL_ALL_REDUCE, "%s", names[i]);
        ck_assert_int_eq(other.gpus, plain.gpus);
        ck_assert_int_eq(other.nodes, plain.nodes);
        ck_assert_int_eq(other.nrows, plain.nrows);
        for (int r = 0; r < plain.nrows; r++)
            ck_assert_double_eq(other.rows[r].time_s, plain.rows[r].time_s);
        nccl_log_free(&other);
    }
    nccl_log_free(&plain);
}
END_TEST

/* --compare takes the log's op, GPUs, nodes and sizes; its simulated column
 * is loong coll's for the same sizes, its error (sim - meas) / meas. */
START_TEST(compare_with_a_log)
{
    platform_spec sp = plat_spec(2, 8, 8);
    char plat[128];
    snprintf(plat, sizeof plat, "%s", write_platform(&sp, "cmp.xml"));
    const double size[] = {1 << 20, 1 << 26}, us[] = {100, 1000};
    const char *log = write_log("ar.log", "all_reduce", 16, 2, size, us, 2, true);
    run_result r = run_cmd("%s coll --platform %s --compare %s", LOONG_BIN, plat, log);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "all_reduce on 16 GPUs (2 nodes)"));
    const char *line = strstr(r.out, "\n ");
    for (int i = 0; i < 2; i++) {
        ck_assert_ptr_nonnull(line);
        double sz, meas, sim, mbus, sbus, err;
        ck_assert_int_eq(sscanf(line + 1, "%lf %lf %lf %lf %lf %lf", &sz, &meas, &sim, &mbus, &sbus, &err), 6);
        ck_assert_double_eq(sz, size[i]);
        ck_assert_double_eq_tol(meas, us[i], 1e-9);
        char args[96];
        snprintf(args, sizeof args, "-b %.0f -e %.0f", size[i], size[i]);
        assert_close(sim, coll_row(plat, args, false).us, 1e-4, "the compared simulated time");
        ck_assert_double_eq_tol(err, 100 * (sim - meas) / meas, 0.01);
        line = strstr(line + 1, "\n ");
    }
}
END_TEST

/* Logs generated from known parameters with the model the fit inverts
 * (one node: all-reduce with NVLS, all-gather on rings; four nodes:
 * all-reduce on rings and trees, all-to-all through the NICs) are
 * recovered within 2 % from the platform's defaults. */
START_TEST(nccl_tests_round_trip)
{
    platform_spec truth = plat_spec(4, 8, 8);
    truth.nvlink_bw = 380e9;
    truth.nic_bw = 46e9;
    truth.nvlink_lat = 5.2e-6;
    truth.nic_lat = 10.5e-6;
    truth.ll128_eff = 0.88;
    truth.tree_eff = 0.85;
    truth.nvls_eff = 0.7;
    static const struct {
        const char *op;
        coll_op cop;
        int gpus, nodes;
    } runs[] = {{"all_reduce", COLL_ALL_REDUCE, 8, 1},
                {"all_gather", COLL_ALL_GATHER, 8, 1},
                {"all_reduce", COLL_ALL_REDUCE, 32, 4},
                {"alltoall", COLL_ALLTOALL, 32, 4}};
    char cmd[2048], plat[128];
    platform_spec base = plat_spec(4, 8, 8);
    snprintf(plat, sizeof plat, "%s", write_platform(&base, "base.xml"));
    int n = snprintf(cmd, sizeof cmd, "%s calibrate --nccl-tests --platform %s -o %s/fit", LOONG_BIN, plat, dir);
    for (int r = 0; r < 4; r++) {
        double size[31], us[31];
        nccl_log log = {.op = runs[r].cop, .has_op = true, .gpus = runs[r].gpus, .nodes = runs[r].nodes};
        for (int i = 0; i < 31; i++) {
            size[i] = 8.0 * (1u << i);
            us[i] = 1e6 * nccl_fit_predict(&truth, &log, size[i]);
        }
        char name[32];
        snprintf(name, sizeof name, "%s-%dn.log", runs[r].op, runs[r].nodes);
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " %s",
                      write_log(name, runs[r].op, runs[r].gpus, runs[r].nodes, size, us, 31, true));
    }
    run_result res = run_cmd("%s", cmd);
    ck_assert_msg(res.status == 0, "%s", res.err);
    printf("%s", res.out);
    /* times the model generated: every fitted parameter explains all of
     * the variance of its sizes (R^2 = 1), and passes the gate silently */
    int judged = 0;
    for (const char *at = strstr(res.out, "fitted, R^2 "); at; at = strstr(at + 1, "fitted, R^2 "), judged++)
        ck_assert_double_eq_tol(atof(at + strlen("fitted, R^2 ")), 1.0, 1e-4);
    ck_assert_int_eq(judged, 8); /* LL too: the 1-node all-gather's small sizes run it */
    ck_assert_msg(!res.err[0], "%s", res.err);
    platform_spec got;
    char path[160], err[LOONG_ERRLEN];
    snprintf(path, sizeof path, "%s/fit/base.xml", dir);
    ck_assert_msg(platform_spec_read(path, &got, err) == 0, "%s", err);
    const double want[] = {truth.nvlink_bw, truth.nic_bw,    truth.nvlink_lat, truth.nic_lat,
                           truth.ll_eff,    truth.ll128_eff, truth.tree_eff,   truth.nvls_eff};
    const double have[] = {got.nvlink_bw, got.nic_bw,    got.nvlink_lat, got.nic_lat,
                           got.ll_eff,    got.ll128_eff, got.tree_eff,   got.nvls_eff};
    static const char *names[] = {"nvlink_bw", "nic_bw",    "nvlink_lat", "nic_lat",
                                  "ll_eff",    "ll128_eff", "tree_eff",   "nvls_eff"};
    for (int k = 0; k < 8; k++)
        assert_close(have[k], want[k], 0.02, names[k]);
    /* --hold keeps a parameter at the platform's value, the others fitted */
    res = run_cmd("%s --hold nic_bw,nvls_eff -o %s/held", cmd, dir);
    ck_assert_msg(res.status == 0, "%s", res.err);
    ck_assert_ptr_nonnull(strstr(res.out, "held at the platform's value"));
    snprintf(path, sizeof path, "%s/held/base.xml", dir);
    ck_assert_msg(platform_spec_read(path, &got, err) == 0, "%s", err);
    ck_assert_double_eq(got.nic_bw, base.nic_bw);
    ck_assert_double_eq(got.nvls_eff, base.nvls_eff);
    assert_close(got.nvlink_lat, truth.nvlink_lat, 0.25, "nvlink_lat with the NIC held");
}
END_TEST

/* A log of noise: 20 sizes whose times alternate 100 and 300 us. Any
 * prediction that does not fall as the size grows (NCCL's model: the
 * fastest of algorithms that each take longer on more bytes) explains at
 * most 1/10 of their variance (the best such prediction pools each
 * falling pair: residual 2 per pair for 9 pairs, against a variance of 20
 * (us/100)^2), so nvlink_lat, on which every size depends, is below the
 * gate. calibrate names it, in one line with any other, and writes
 * nothing; --force writes, a warning per parameter, named in the origin. */
START_TEST(nccl_tests_noise_refused)
{
    platform_spec sp = plat_spec(1, 8, 8);
    char plat[128];
    snprintf(plat, sizeof plat, "%s", write_platform(&sp, "noise.xml"));
    double size[20], us[20];
    for (int i = 0; i < 20; i++)
        size[i] = 8.0 * (1u << i), us[i] = i % 2 ? 300 : 100;
    const char *log = write_log("noise.log", "all_reduce", 8, 1, size, us, 20, true);
    run_result r = run_cmd("%s calibrate --nccl-tests --platform %s -o %s/noise %s", LOONG_BIN, plat, dir, log);
    ck_assert_msg(r.status == 2 && count_lines(r.err) == 1, "exit %d, not one line\n%s", r.status, r.err);
    int failing = 0; /* the parameters the one line names */
    for (const char *at = strstr(r.err, "below --min-r2"); at; at = strstr(at + 1, "below --min-r2"))
        failing++;
    const char *lat = strstr(r.err, "nvlink_lat: R^2 = ");
    ck_assert_msg(lat && strstr(r.err, "--force"), "%s", r.err);
    ck_assert_msg(atof(lat + strlen("nvlink_lat: R^2 = ")) <= 0.1 + 1e-9, "above the bound of 1/10: %s", r.err);
    char path[200], err[LOONG_ERRLEN];
    snprintf(path, sizeof path, "%s/noise", dir);
    ck_assert_msg(access(path, F_OK) != 0, "calibrate wrote a refused fit");
    r = run_cmd("%s calibrate --nccl-tests --platform %s -o %s/noise %s --force", LOONG_BIN, plat, dir, log);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_int_eq(count_lines(r.err), failing); /* a warning each */
    ck_assert_msg(strstr(r.err, "warning: nvlink_lat: R^2 = ") && strstr(r.err, "written anyway"), "%s", r.err);
    snprintf(path, sizeof path, "%s/noise/noise.xml", dir);
    platform_spec got;
    ck_assert_msg(platform_spec_read(path, &got, err) == 0, "%s", err);
    r = run_cmd("grep -c 'loong_origin.*forced past --min-r2 0.5: .*nvlink_lat R^2' %s", path);
    ck_assert_msg(atoi(r.out) == 1, "the origin does not name the forced parameters");
    /* a --min-r2 that is no share of variance is bad input */
    r = run_cmd("%s calibrate --nccl-tests --platform %s -o %s/noise2 --min-r2 1.5 %s", LOONG_BIN, plat, dir, log);
    ck_assert_msg(r.status == 2 && count_lines(r.err) == 1 && strstr(r.err, "--min-r2 '1.5'"), "%s", r.err);
}
END_TEST

static void assert_rejected(const char *args, const char *needle)
{
    run_result r = run_cmd("%s coll %s", LOONG_BIN, args);
    ck_assert_msg(r.status == 2, "%s: exit %d (%s)", args, r.status, r.err);
    ck_assert_msg(count_lines(r.err) == 1, "%s: not one line: %s", args, r.err);
    ck_assert_msg(strstr(r.err, needle) != NULL, "%s: '%s' does not say '%s'", args, r.err, needle);
}

START_TEST(bad_input)
{
    platform_spec sp = plat_spec(2, 8, 8);
    char plat[128], a[512];
    snprintf(plat, sizeof plat, "%s", write_platform(&sp, "bad.xml"));
    const double size[] = {8, 16}, us[] = {10, 11};
    snprintf(a, sizeof a, "--platform %s --compare %s", plat,
             write_log("trunc.log", "all_reduce", 16, 2, size, us, 2, false));
    assert_rejected(a, "truncated");
    snprintf(a, sizeof a, "--platform %s --compare %s", plat, write_log("noop.log", NULL, 16, 2, size, us, 2, true));
    assert_rejected(a, "names no collective");
    run_result c = run_cmd("%s calibrate --nccl-tests --platform %s -o %s/out %s", LOONG_BIN, plat, dir,
                           write_log("cut.log", "all_reduce", 16, 2, size, us, 2, false));
    ck_assert_msg(c.status == 2 && count_lines(c.err) == 1 && strstr(c.err, "truncated"), "%d %s", c.status, c.err);
    snprintf(a, sizeof a, "%s/out/bad.xml", dir);
    ck_assert_msg(access(a, F_OK) != 0, "calibrate wrote a platform from a truncated log");
    snprintf(a, sizeof a, "%s/empty.log", dir);
    fclose(fopen(a, "w"));
    char b[1200];
    snprintf(b, sizeof b, "--platform %s --compare %s", plat, a);
    assert_rejected(b, "is empty");
    snprintf(b, sizeof b, "--platform %s --compare %s", plat, plat); /* XML is no nccl-tests log */
    assert_rejected(b, "not an nccl-tests log");
    snprintf(a, sizeof a, "--platform %s --op all_to_all", plat);
    assert_rejected(a, "--op 'all_to_all'");
    snprintf(a, sizeof a, "--platform %s -b 1M -e 1K", plat);
    assert_rejected(a, "larger than -e");
    snprintf(a, sizeof a, "--platform %s --op all_gather --nccl-algo tree", plat);
    assert_rejected(a, "tree is all-reduce across nodes");
    snprintf(a, sizeof a, "--platform %s --gpus 9", plat);
    assert_rejected(a, "do not fit");
    assert_rejected("--platform /nonexistent.xml", "cannot read platform");
    assert_rejected("--op all_reduce", "--platform FILE is required");
    run_result r = run_cmd("%s coll --help", LOONG_BIN);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "--compare LOG"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("coll");
    TCase *tc = tcase_create("closed forms");
    tcase_add_checked_fixture(tc, plat_setup, plat_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, ring_allreduce_on_k_rails);
    tcase_add_test(tc, tree_latency_is_depth);
    tcase_add_test(tc, nvls_in_one_node);
    tcase_add_test(tc, nvl72_allreduce_is_nvlink);
    tcase_add_test(tc, nvlink_share_of_the_line);
    tcase_add_test(tc, alltoall_limited_by_nic_per_gpu);
    tcase_add_test(tc, alltoall_bounded_by_pod_uplink);
    tcase_add_test(tc, pcie_sockets_bound);
    suite_add_tcase(s, tc);
    TCase *cli = tcase_create("cli");
    tcase_add_checked_fixture(cli, plat_setup, plat_teardown);
    tcase_set_timeout(cli, 120);
    tcase_add_test(tc, log_of_many_nodes);
    tcase_add_test(tc, published_log_forms);
    tcase_add_test(cli, compare_with_a_log);
    tcase_add_test(cli, nccl_tests_round_trip);
    tcase_add_test(cli, nccl_tests_noise_refused);
    tcase_add_test(cli, bad_input);
    suite_add_tcase(s, cli);
    return check_run(s);
}

/* loong topo: the generated platform against the spec (closed forms for
 * bandwidths and latencies), the shipped topologies, and bad input. Needs no
 * SimGrid: it reads the XML as text. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "check_run.h"
#include "model/platform_spec.h"

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The value of attribute `attr` of the element whose id is `id`. */
static double attr_of(const char *xml, const char *id, const char *attr)
{
    char key[128];
    snprintf(key, sizeof key, "id=\"%s\"", id);
    const char *p = strstr(xml, key);
    ck_assert_msg(p != NULL, "no element %s", id);
    snprintf(key, sizeof key, "%s=\"", attr);
    p = strstr(p, key);
    ck_assert_ptr_nonnull(p);
    return atof(p + strlen(key));
}

/* `loong topo ARGS` into a fresh temporary path (/tmp/loong-topo-XXXXXX,
 * filled in): its XML, malloc'd. */
static char *generate(const char *args, char path[])
{
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    run_result r = run_cmd("%s topo %s -o %s", LOONG_BIN, args, path);
    ck_assert_msg(r.status == 0, "%s", r.err);
    return read_text(path);
}

START_TEST(generated_matches_spec)
{
    char path[] = "/tmp/loong-topo-XXXXXX";
    /* 40 nodes, 4 NICs for 8 GPUs, 24 nodes per leaf, 2:1 oversubscribed */
    char *xml = generate("--datasheet --nodes 40 --gpu a100 --nics-per-node 4 --nic 200Gbps --nvlink 300GBps "
                         "--nodes-per-leaf 24 --oversubscription 2",
                         path);
    ck_assert_int_eq(count(xml, "<host "), 40 * 8);
    ck_assert_int_eq(count(xml, "<link "), 40 * 8 + 40 * 4 + 4 * 2);
    ck_assert_int_eq(count(xml, "sharing_policy=\"SPLITDUPLEX\""), count(xml, "<link "));
    ck_assert_int_eq(count(xml, "value=\"a100\""), 320);
    ck_assert(fabs(attr_of(xml, "node3-gpu5-nvlink", "bandwidth") - 300) < 1e-9);
    ck_assert(fabs(attr_of(xml, "node3-nic1", "bandwidth") - 25) < 1e-9); /* 200 Gb/s = 25 GB/s */
    /* leaf 0 of a rail serves 24 nodes, leaf 1 the other 16: uplinks = ports x 25 GB/s / 2 */
    ck_assert(fabs(attr_of(xml, "leaf-r2-0-up", "bandwidth") - 24 * 25.0 / 2) < 1e-9);
    ck_assert(fabs(attr_of(xml, "leaf-r2-1-up", "bandwidth") - 16 * 25.0 / 2) < 1e-9);
    /* NCCL Simple: (8.4 + 3.4) / 2 us per NVLink link, (8.4 + 14) / 2 per NIC link */
    ck_assert(fabs(attr_of(xml, "node0-gpu0-nvlink", "latency") - 5.9) < 1e-9);
    ck_assert(fabs(attr_of(xml, "node0-nic0", "latency") - 11.2) < 1e-9);
    /* GPUs 2 and 3 share NIC 1; the GPUs of other rails reach it by PXN
     * (their own NVLink to the switch, then one one-way edge from the
     * switch over NIC 1): one edge per (node, NIC), not per (GPU, NIC) */
    ck_assert_ptr_nonnull(strstr(xml, "dst=\"leaf-r1-0\"><link_ctn id=\"node0-nic1\""));
    ck_assert_int_eq(count(xml, "<link_ctn id=\"node0-nic1\""), 2 + 1);
    ck_assert_ptr_nonnull(strstr(xml, "<route src=\"node0-nvswitch\" dst=\"leaf-r1-0\" symmetrical=\"NO\"><link_ctn "
                                      "id=\"node0-nic1\" direction=\"UP\"/></route>"));
    ck_assert_int_eq(count(xml, "symmetrical=\"NO\""), 40 * 4);
    ck_assert_int_eq(count(xml, "routing=\"DijkstraCache\""), 1); /* 40 nodes: above PLATFORM_FLOYD_NODES */
    free(xml);
    unlink(path);
}
END_TEST

/* The rail fabric's switch counts against NVIDIA's DGX SuperPOD reference
 * architecture (DGX B200 RA, "Larger DGX SuperPOD component counts"; the
 * DGX H100 RA's SU is the same: 32 nodes, one 64-port NDR leaf per rail):
 * scalable units -> leaf, spine and core switches. */
START_TEST(rail_fabric_counts_match_superpod)
{
    static const struct {
        int units, leaves, spines, cores;
    } ra[] = {{2, 16, 8, 0},      {4, 32, 16, 0},      {8, 64, 32, 0},
              {16, 128, 128, 64}, {32, 256, 256, 128}, {64, 512, 512, 256}};
    for (size_t i = 0; i < sizeof ra / sizeof ra[0]; i++) {
        platform_spec sp;
        platform_fabric fb;
        char err[LOONG_ERRLEN];
        ck_assert_int_eq(platform_spec_defaults("h100", &sp, err), 0);
        sp.fabric = PLATFORM_RAIL;
        sp.nodes = 32 * ra[i].units;
        ck_assert_msg(platform_spec_validate(&sp, err) == 0, "%s", err);
        ck_assert_int_eq(platform_spec_fabric(&sp, &fb, err), 0);
        ck_assert_int_eq(fb.units, ra[i].units);
        ck_assert_int_eq(fb.leaves, ra[i].leaves);
        ck_assert_int_eq(fb.spines, ra[i].spines);
        ck_assert_int_eq(fb.cores, ra[i].cores);
        ck_assert_int_eq(fb.tiers, ra[i].cores ? 3 : 2);
        ck_assert_int_eq(platform_spec_pod_nodes(&sp), ra[i].cores ? 128 : 0); /* 4 units under 32 spines */
    }
}
END_TEST

/* A three-tier rail platform: leaves route to their pod's spine, pods to
 * the core; uplinks carry (ports x NIC) / oversubscription, a pod's its
 * leaves' over the spine's oversubscription; a partial last unit and pod. */
START_TEST(rail_platform_matches_spec)
{
    char path[] = "/tmp/loong-topo-XXXXXX";
    /* 600 nodes: 19 units (the last of 24 nodes), pods of 3 units (the last
     * of 1: 24 nodes), leaves of 16 nodes at 2:1, pod uplinks at 3:1 */
    char *xml = generate("--preset superpod --nodes 600 --leaves-per-rail 2 --oversubscription 2 "
                         "--spine-oversubscription 3",
                         path);
    platform_spec sp;
    platform_fabric fb;
    char err[LOONG_ERRLEN];
    ck_assert_msg(platform_spec_read(path, &sp, err) == 0, "%s", err);
    ck_assert_int_eq(sp.fabric, PLATFORM_RAIL);
    ck_assert_int_eq(sp.nodes_per_leaf, 16);
    ck_assert_int_eq(platform_spec_fabric(&sp, &fb, err), 0);
    /* a leaf: 16 down, 8 up; a spine: 48 down, 16 up (48 + 16 = 64) -> a
     * unit's 16 leaves, 3 units per pod */
    ck_assert_int_eq(fb.tiers, 3);
    ck_assert_int_eq(fb.units_per_pod, 3);
    ck_assert_int_eq(fb.pods, 7);
    ck_assert_int_eq(fb.spines, 7 * 8);
    ck_assert_int_eq(count(xml, "-spine\"/>"), 7);
    ck_assert_int_eq(count(xml, "<router id=\"core\"/>"), 1);
    ck_assert_int_eq(count(xml, "<host "), 600 * 8);
    /* leaf 37 of a rail (nodes 592..599) is in unit 18, pod 6 */
    ck_assert(fabs(attr_of(xml, "leaf-r5-37-up", "bandwidth") - 8 * 50.0 / 2) < 1e-9);
    ck_assert_ptr_nonnull(strstr(xml, "<route src=\"leaf-r5-37\" dst=\"pod6-spine\">"));
    ck_assert_ptr_nonnull(strstr(xml, "<route src=\"leaf-r5-35\" dst=\"pod5-spine\">"));
    ck_assert(fabs(attr_of(xml, "pod0-up", "bandwidth") - 96 * 8 * 50.0 / 2 / 3) < 1e-9);
    ck_assert(fabs(attr_of(xml, "pod6-up", "bandwidth") - 24 * 8 * 50.0 / 2 / 3) < 1e-9);
    ck_assert_ptr_nonnull(strstr(xml, "<route src=\"pod6-spine\" dst=\"core\"><link_ctn id=\"pod6-up\""));
    ck_assert_int_eq(platform_spec_pod_nodes(&sp), 96);
    free(xml);
    unlink(path);
}
END_TEST

/* A rail fabric of two tiers is the fat-tree with its units as leaf
 * groups: the same hosts, links and routes, line for line. */
START_TEST(rail_two_tiers_is_the_fat_tree)
{
    run_result r = run_cmd("cd /tmp && %s topo --nodes 40 --fabric rail --unit-nodes 16 --leaves-per-rail 2 | grep -E "
                           "'^ *<(host|link|route|router) ' > loong-rail.txt && %s topo --nodes 40 --nodes-per-leaf 8 "
                           "| grep -E '^ *<(host|link|route|router) ' > loong-fat.txt && cmp loong-rail.txt "
                           "loong-fat.txt && wc -l < loong-fat.txt; rm -f loong-rail.txt loong-fat.txt",
                           LOONG_BIN, LOONG_BIN);
    ck_assert_msg(r.status == 0 && atoi(r.out) > 40 * 8, "%s%s", r.out, r.err);
}
END_TEST

/* The loong_spec property of a platform's XML, malloc'd. */
static char *spec_of(const char *xml)
{
    const char *p = strstr(xml, "id=\"loong_spec\" value=\"");
    ck_assert_ptr_nonnull(p);
    p += strlen("id=\"loong_spec\" value=\"");
    return strndup(p, strcspn(p, "\""));
}

/* The shipped DGX-H100 datasheet platforms are what loong topo
 * --datasheet generates; the fitted ones beside them are those platforms
 * with the link figures loong calibrate --nccl-tests fitted (NVLink below
 * the datasheet, the NIC held at its line rate), made by calibrate, and
 * what loong topo generates by default (topologies/h100.fit). */
START_TEST(shipped_topologies)
{
    static const int nodes[] = {1, 4, 8, 16, 32};
    for (int i = 0; i < 5; i++) {
        for (int fitted = 0; fitted < 2; fitted++) { /* the spec loong topo writes is the shipped one */
            char tmp[] = "/tmp/loong-topo-XXXXXX", args[64], shipped[1024];
            snprintf(args, sizeof args, "%s--nodes %d --gpu h100", fitted ? "" : "--datasheet ", nodes[i]);
            snprintf(shipped, sizeof shipped, "%s/topologies/dgx-h100-%dn%s.xml", LOONG_SRCDIR, nodes[i],
                     fitted ? "" : "-datasheet");
            char *mine = generate(args, tmp), *theirs = read_text(shipped), *a = spec_of(mine), *b = spec_of(theirs);
            ck_assert_msg(!strcmp(a, b), "loong topo %s: %s\nshipped: %s", args, a, b);
            ck_assert_int_eq(!!strstr(mine, "fitted link values from"), fitted);
            free(a), free(b), free(mine), free(theirs);
            unlink(tmp);
        }
        char path[1024];
        snprintf(path, sizeof path, "%s/topologies/dgx-h100-%dn-datasheet.xml", LOONG_SRCDIR, nodes[i]);
        char *xml = read_text(path);
        ck_assert_int_eq(count(xml, "<host "), 8 * nodes[i]);
        ck_assert_int_eq(count(xml, "sharing_policy=\"SPLITDUPLEX\""), count(xml, "<link "));
        ck_assert(fabs(attr_of(xml, "node0-gpu0-nvlink", "bandwidth") - 450) < 1e-9);
        ck_assert(fabs(attr_of(xml, "node0-nic7", "bandwidth") - 50) < 1e-9);
        free(xml);
        snprintf(path, sizeof path, "%s/topologies/dgx-h100-%dn.xml", LOONG_SRCDIR, nodes[i]);
        xml = read_text(path);
        ck_assert_int_eq(count(xml, "<host "), 8 * nodes[i]);
        /* fitted with NVLink held at its line rate: rings ride NCCL's share */
        ck_assert(fabs(attr_of(xml, "node0-gpu0-nvlink", "bandwidth") - 450) < 1e-9);
        ck_assert(fabs(attr_of(xml, "node0-nic7", "bandwidth") - 50) < 1e-9);
        ck_assert_ptr_nonnull(strstr(xml, "value=\"loong calibrate --nccl-tests"));
        free(xml);
    }
}
END_TEST

START_TEST(bad_input)
{
    static const struct {
        const char *args, *needle;
    } bad[] = {
        {"--gpu mi300x", "unknown GPU kind 'mi300x'"},
        {"--nics-per-node 3", "--nics-per-node"},
        {"--nvlink-domain 12", "--nvlink-domain 12 spans whole nodes of 8 GPUs"},
        {"--preset gb200-nvl72 --nodes 20", "--nodes 20"},
        {"--preset nvl36", "--preset 'nvl36'"},
        {"--nic 400Gb", "--nic"},
        {"--nic fast", "--nic"},
        {"--oversubscription 0.5", "--oversubscription"},
        {"--fabric torus", "--fabric"},
        {"--nodes 0", "--nodes"},
        {"--bogus", "unknown"},
        {"--fabric rail --leaves-per-rail 3", "--leaves-per-rail 3 does not divide --unit-nodes 32"},
        {"--fabric rail --switch-ports 48", "--switch-ports 48"},
        {"--fabric rail --spine-oversubscription 0.5", "--spine-oversubscription"},
        {"--fabric rail --nodes-per-leaf 4", "--unit-nodes"},
        {"--unit-nodes 4", "--fabric rail"},
        {"--preset dgx", "--preset"},
        {"--tree-eff 1.5", "--tree-eff '1.5' must lie in (0, 1]"},
        {"--nvls-eff 0", "--nvls-eff"},
        {"--peak fast", "--peak"},
        /* units of 1 node: its 8 leaves fill a 16-port spine's 8 down
         * ports, 1024 pods for cores of 16 ports */
        {"--fabric rail --nodes 1024 --unit-nodes 1 --switch-ports 16", "a fourth tier"},
        /* a unit's 32 leaves (4 per rail) over spines of 8 down ports */
        {"--fabric rail --nodes 128 --leaves-per-rail 4 --switch-ports 16", "exceed a spine's 8 down ports"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run_result r = run_cmd("%s topo %s -o /tmp/loong-topo-bad.xml", LOONG_BIN, bad[i].args);
        ck_assert_msg(r.status == 2, "%s: exit %d", bad[i].args, r.status);
        ck_assert_msg(count_lines(r.err) == 1, "%s: %s", bad[i].args, r.err);
        ck_assert_msg(strstr(r.err, bad[i].needle) != NULL, "%s: '%s'", bad[i].args, r.err);
        ck_assert_msg(access("/tmp/loong-topo-bad.xml", F_OK) != 0, "%s wrote a file", bad[i].args);
    }
    run_result r = run_cmd("%s topo --help", LOONG_BIN);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "--oversubscription"));
}
END_TEST

/* A GPU kind's fitted values come from <gpu>.fit on the data path, over
 * the datasheet; options override them; a bad file is one line naming
 * file:line, and --datasheet does without it. */
START_TEST(fitted_values_file)
{
    char d[] = "/tmp/loong-fit-XXXXXX", path[64], tmp[] = "/tmp/loong-topo-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(d));
    int fd = mkstemp(tmp);
    ck_assert_int_ge(fd, 0);
    close(fd);
    snprintf(path, sizeof path, "%s/a100.fit", d);
    FILE *f = fopen(path, "w");
    fputs("# a test's fit\ngpu = a100\nnvlink_bw = 200e9 # bytes/s\ntree_eff = 0.5\n", f);
    fclose(f);
    char env[128];
    snprintf(env, sizeof env, "LOONG_DATA_PATH=%s", d);
    run_result r = run_cmd("%s %s topo --gpu a100 --tree-eff 0.25 -o %s && cat %s", env, LOONG_BIN, tmp, tmp);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(strstr(r.out, "nvlink_bw=200000000000 ") && strstr(r.out, "tree_eff=0.25 "));
    ck_assert(fabs(attr_of(r.out, "node0-gpu0-nvlink", "bandwidth") - 200) < 1e-9);
    r = run_cmd("%s %s topo --gpu a100 --datasheet --peak 100T", env, LOONG_BIN);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert(strstr(r.out, "nvlink_bw=300000000000 ") && strstr(r.out, "peak=100000000000000 "));
    static const char *bad[] = {"gpu = h100\n",  "nvlink_bw = fast\n",
                                "peak = 1e15\n", "tree_eff = 0.5\ntree_eff = 0.6\n",
                                "nvlink_bw\n",   "tree_eff = 2\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        f = fopen(path, "w");
        fputs(bad[i], f);
        fclose(f);
        r = run_cmd("%s %s topo --gpu a100 -o /tmp/loong-topo-bad.xml", env, LOONG_BIN);
        ck_assert_msg(r.status == 2 && count_lines(r.err) == 1 && strstr(r.err, "a100.fit"), "%s: %d %s", bad[i],
                      r.status, r.err);
        ck_assert(access("/tmp/loong-topo-bad.xml", F_OK) != 0);
        r = run_cmd("%s %s topo --gpu a100 --datasheet", env, LOONG_BIN);
        ck_assert_int_eq(r.status, 0);
    }
    unlink(path);
    unlink(tmp);
    rmdir(d);
}
END_TEST

START_TEST(spec_round_trip)
{
    platform_spec a, b;
    char err[LOONG_ERRLEN], path[] = "/tmp/loong-topo-spec-XXXXXX";
    ck_assert_int_eq(platform_spec_defaults("a100", &a, err), 0);
    a.nodes = 4;
    a.nics_per_node = 4;
    a.oversub = 2.5;
    a.nic_lat = 1.234567890123e-5;
    a.fabric = PLATFORM_RAIL;
    a.unit_nodes = 4;
    a.nodes_per_leaf = 2;
    a.switch_ports = 32;
    a.spine_oversub = 1.5;
    FILE *f = fdopen(mkstemp(path), "w");
    ck_assert_int_eq(platform_spec_write(f, &a, "test"), 0);
    fclose(f);
    ck_assert_msg(platform_spec_read(path, &b, err) == 0, "%s", err);
    ck_assert_str_eq(a.gpu, b.gpu);
    ck_assert(a.nodes == b.nodes && a.gpus_per_node == b.gpus_per_node && a.nics_per_node == b.nics_per_node &&
              a.nodes_per_leaf == b.nodes_per_leaf);
    ck_assert(a.peak == b.peak && a.nvlink_bw == b.nvlink_bw && a.nic_bw == b.nic_bw && a.oversub == b.oversub &&
              a.nvlink_lat == b.nvlink_lat && a.nic_lat == b.nic_lat && a.uplink_lat == b.uplink_lat);
    ck_assert(a.fabric == b.fabric && a.unit_nodes == b.unit_nodes && a.switch_ports == b.switch_ports &&
              a.spine_oversub == b.spine_oversub);
    f = fopen(path, "w");
    fputs("<platform version=\"4.1\"/>\n", f);
    fclose(f);
    ck_assert_int_eq(platform_spec_read(path, &b, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "loong_spec"));
    unlink(path);
    /* the A100 PCIe: datasheet compute and PCIe Gen4 x16 (64 GB/s both ways),
     * NCCL's PCIe hop (8.4 + 5.7 us over two links), no NVLink: no NVLS, no PXN */
    ck_assert_int_eq(platform_spec_defaults("a100-pcie", &a, err), 0);
    ck_assert(a.peak == 312e12 && a.nvlink_bw == 32e9 && a.nic_bw == 25e9);
    ck_assert(fabs(a.nvlink_lat - (8.4 + 5.7) / 2 * 1e-6) < 1e-15 && a.nccl == 1 && a.nvls == 0 && a.pxn == 0);
    ck_assert(platform_spec_gpu_mem("a100-pcie") == 80e9 && platform_spec_gpu_mem("cpu") == 0);
    /* its 2 sockets of 4 (the datasheet link across them the GPU's) write
     * and read back; a socket link without sockets is refused, one line */
    ck_assert(a.sockets == 2 && a.socket_bw == a.nvlink_bw);
    a.socket_bw = 15.5e9;
    snprintf(path, sizeof path, "/tmp/loong-topo-spec-XXXXXX");
    f = fdopen(mkstemp(path), "w");
    ck_assert_int_eq(platform_spec_write(f, &a, "test"), 0);
    fclose(f);
    ck_assert_msg(platform_spec_read(path, &b, err) == 0, "%s", err);
    ck_assert(b.sockets == 2 && b.socket_bw == 15.5e9);
    unlink(path);
    a.sockets = 1;
    ck_assert_int_eq(platform_spec_validate(&a, err), -1);
    ck_assert_msg(strstr(err, "socket_bw") && !strchr(err, '\n'), "%s", err);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("topo");
    TCase *tc = tcase_create("topo");
    tcase_set_timeout(tc, 60); /* a dozen loong runs; each loads SimGrid and MPI (~0.5 s here) */
    tcase_add_test(tc, generated_matches_spec);
    tcase_add_test(tc, rail_fabric_counts_match_superpod);
    tcase_add_test(tc, rail_platform_matches_spec);
    tcase_add_test(tc, rail_two_tiers_is_the_fat_tree);
    tcase_add_test(tc, shipped_topologies);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, fitted_values_file);
    tcase_add_test(tc, spec_round_trip);
    suite_add_tcase(s, tc);
    return check_run(s);
}

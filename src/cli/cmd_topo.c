/* loong topo: generate a SimGrid platform XML for a GPU cluster. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/afile.h"
#include "core/datapath.h"
#include "core/infile.h"
#include "model/platform_spec.h"
#include "autoconf.h"
#include "cli.h"
#include "cli_opts.h"
#ifdef HAVE_SIMGRID
#include "sim/sim.h"
#endif

static void topo_usage(FILE *f)
{
    fprintf(f,
            "usage: loong topo [options] [-o FILE]\n"
            "\n"
            "Write a SimGrid platform for `loong sim`: NVSwitch as a star of SPLITDUPLEX\n"
            "per-GPU links, one rail NIC per GPU (or shared), a rail-optimised fat-tree:\n"
            "fat-tree has one idealised spine, rail is DGX SuperPOD's wiring of real\n"
            "switches (scalable units, two tiers, or three with pods and a core).\n"
            "Defaults come from --gpu: its datasheet figures and NCCL's latency model, then\n"
            "the values `loong calibrate --nccl-tests` fitted for that GPU kind to published\n"
            "logs, from <gpu>.fit on the data path (the links and NCCL efficiencies the\n"
            "shipped platforms carry; --datasheet skips them). Options override both. GPU\n"
            "kinds run NCCL's collectives (model/nccl.h); --gpu cpu runs MPI's plain rings.\n"
            "\n"
            "  --nodes N               nodes                                          [1]\n"
            "  --gpus-per-node N       GPUs per node (host, compute tray)     [8; gb*: 4]\n"
            "  --nvlink-domain N       GPUs sharing NVSwitch trays, a multiple of\n"
            "                          --gpus-per-node (NCCL's MNNVL: rings, trees\n"
            "                          and NVLS inside it, NICs between domains; dag,\n"
            "                          sim and plan then take --gpus-per-node N)\n"
            "                          [the node; gb200, gb300: 72]\n"
            "  --gpu KIND              %s; sets peak, NVLink, NIC      [h100]\n"
            "  --datasheet             the datasheet figures, without the GPU kind's fit\n"
            "  --peak FLOPS            dense bf16 peak per GPU, e.g. 989T         [by gpu]\n"
            "  --nvlink BW             NVLink per GPU per direction, e.g. 450GBps [by gpu]\n"
            "  --sockets N             PCIe servers: CPU sockets the GPUs split over\n"
            "                          (a100-pcie: 2; 1 = one switch)        [by gpu]\n"
            "  --socket-link BW        per socket per direction, as GPU peer traffic\n"
            "                          crosses it (a100-pcie: fitted)         [by gpu]\n"
            "  --nic BW                per NIC per direction, e.g. 400Gbps        [by gpu]\n"
            "  --nics-per-node N       rail NICs per node, divides GPUs per node      [8]\n"
            "  --fabric fat-tree|rail  the fabric                               [fat-tree]\n"
            "  --oversubscription R    leaf down:up bandwidth ratio, >= 1             [1]\n"
            "  --nodes-per-leaf N      fat-tree: nodes under one rail leaf switch    [32]\n"
            "  --unit-nodes N          rail: nodes in a scalable unit                [32]\n"
            "  --leaves-per-rail N     rail: leaf switches per rail per unit, divides\n"
            "                          --unit-nodes                                   [1]\n"
            "  --switch-ports N        rail: ports per leaf, spine and core switch   [64]\n"
            "  --spine-oversubscription R  rail, three tiers: spine down:up to the core [1]\n"
            "  --preset superpod       NVIDIA DGX H100 SuperPOD: --gpu h100, 8 rails of\n"
            "                          400Gbps, --fabric rail, units of 32 nodes, 64-port\n"
            "                          switches, non-blocking (other options override)\n"
            "  --preset gb200-nvl72    one GB200 NVL72 rack: --gpu gb200, 18 nodes of 4\n"
            "                          GPUs in one 72-GPU NVLink domain, a 400Gbps NIC\n"
            "                          per GPU\n"
            "  --preset gb200-superpod 8 NVL72 racks (144 nodes, 576 GPUs), a rail leaf\n"
            "                          per 8 racks, one non-blocking spine\n"
            "  --nvlink-latency T      per NVLink link (two per GPU-GPU path)    [5.9us]\n"
            "                          (a100-pcie: its PCIe link, NCCL's PCIe hop [7.05us])\n"
            "  --nic-latency T         per NIC link (two per node-node path)    [11.2us]\n"
            "  --uplink-latency T      per leaf-spine link                         [0us]\n"
            "  --nvls on|off           NVLink SHARP all-reduce in the switch [on: NVSwitch 3+]\n"
            "  --pxn on|off            sends to another rail cross NVLink to the GPU on\n"
            "                          that rail first (NCCL's PXN) [on: NVLink GPU kinds]\n"
            "  --ll-eff X, --ll128-eff X, --tree-eff X, --nvls-eff X\n"
            "                          NCCL's protocol and algorithm efficiencies, in\n"
            "                          (0, 1] (docs/network-model.md)            [by gpu]\n"
            "  --nvl-eff X             the share of NVLink's line rate NCCL's rings, trees,\n"
            "                          all-to-all and sends reach (NCCL's topo.h: 0.824\n"
            "                          Hopper, 0.802 Blackwell, 0.8 A100)        [by gpu]\n"
            "  -o, --output FILE       write there (atomically) instead of stdout\n"
            "  --list                  list the installed platforms and calibration tables\n"
            "                          (the data path: $LOONG_DATA_PATH, then the installed\n"
            "                          directory) instead\n"
            "  --list-links FILE       list the links of platform FILE instead (the names that\n"
            "                          loong sim --slow-link and --fail-link take), with\n"
            "                          their level and the fabric's switch counts\n"
            "  -h, --help              this text\n"
            "\nBandwidths take Bps (bytes/s) or bps (bits/s) with k/M/G/T (powers of 10).\n"
            "\nExample:\n"
            "  loong topo --nodes 8 --gpus-per-node 8 --gpu h100 --nvlink 450GBps --nic 400Gbps \\\n"
            "             --nics-per-node 8 --fabric fat-tree --oversubscription 1 -o dgx-h100-8n.xml\n"
            "  loong topo --preset superpod --nodes 512 -o superpod-16su.xml\n",
            platform_spec_kinds());
}

typedef struct topo_args {
    const char *nodes, *gpn, *gpu, *nvlink, *nic, *nics, *fabric, *oversub, *npl, *nvl_lat, *nic_lat, *up_lat;
    const char *nvls, *pxn, *unit, *lpr, *ports, *spine_oversub, *preset;
    const char *peak, *ll_eff, *ll128_eff, *tree_eff, *nvls_eff, *domain, *sockets, *socket_bw, *nvl_eff;
    bool datasheet;
    char fit[4096]; /* the fitted-values file applied ("" none) */
} topo_args;

#ifdef HAVE_SIMGRID
/* A link's level in a platform loong topo wrote, from its name. */
static const char *link_level(const char *name)
{
    size_t n = strlen(name);
    if (n > 7 && !strcmp(name + n - 7, "-nvlink")) return "gpu-nvswitch";
    if (strstr(name, "-socket")) return "socket-switch";
    if (!strncmp(name, "leaf-", 5)) return "leaf-spine";
    if (!strncmp(name, "pod", 3)) return "spine-core";
    if (!strncmp(name, "node", 4) && strstr(name, "-nic")) return "nic-leaf";
    return "-";
}

/* "# fabric ..." for a platform loong topo wrote (nothing for others). */
static void fabric_summary(FILE *f, const char *path)
{
    platform_spec sp;
    platform_fabric fb;
    char err[LOONG_ERRLEN];
    if (platform_spec_read(path, &sp, err) < 0 || platform_spec_fabric(&sp, &fb, err) < 0) return;
    if (sp.fabric == PLATFORM_FAT_TREE) {
        fprintf(f, "# fabric fat-tree: %d leaves (%d per rail), one idealised spine\n", fb.leaves,
                fb.leaves / sp.nics_per_node);
        return;
    }
    fprintf(f, "# fabric rail, %d tiers: %d unit(s) of %d nodes, %d leaves, %d spines", fb.tiers, fb.units,
            sp.unit_nodes, fb.leaves, fb.spines);
    if (fb.tiers == 3) fprintf(f, " in %d pods, %d cores", fb.pods, fb.cores);
    fprintf(f, " (%d-port switches)\n", sp.switch_ports);
}
#endif

/* The platform's links, as SimGrid loaded them: "# link bandwidth latency" rows. */
static int list_installed(const char *out)
{
    char err[LOONG_ERRLEN];
    afile f;
    if (afile_open(&f, out, err) < 0) return cli_fail("topo", "%s", err);
    if (cli_list_data(f.f) < 0) {
        afile_abort(&f);
        return cli_fail("topo", "write error on '%s'", out);
    }
    return afile_commit(&f, err) < 0 ? cli_fail("topo", "%s", err) : 0;
}

static int list_links(const char *given, const char *out)
{
#ifdef HAVE_SIMGRID
    char err[LOONG_ERRLEN], path[4096];
    if (cli_find_platform(given, path, sizeof path, err) < 0) return cli_fail("topo", "%s", err);
    afile f;
    if (afile_open(&f, out, err) < 0) return cli_fail("topo", "%s", err);
    char *args[] = {(char *)"--log=root.thres:critical"};
    sim_platform *pf = sim_platform_open(path, 1, args, err);
    if (!pf) {
        afile_abort(&f);
        return cli_fail("topo", "%s", err);
    }
    int n;
    sim_link_desc *d = sim_platform_links(&n);
    fprintf(f.f, "# links of %s: %d (names for loong sim --slow-link / --fail-link)\n", path, n);
    fabric_summary(f.f, path);
    fprintf(f.f, "# %-30s %-12s %16s %12s  %s\n", "link", "level", "GB/s/direction", "latency_us", "sharing");
    for (int i = 0; i < n; i++)
        fprintf(f.f, "  %-30s %-12s %16.3f %12.3f  %s\n", d[i].name, link_level(d[i].name), d[i].bw / 1e9,
                d[i].lat * 1e6, d[i].duplex ? "full duplex" : "shared");
    free(d);
    sim_platform_free(pf);
    if (ferror(f.f)) {
        afile_abort(&f);
        return cli_fail("topo", "write error on '%s'", out);
    }
    return afile_commit(&f, err) < 0 ? cli_fail("topo", "%s", err) : 0;
#else
    (void)out;
    return cli_fail("topo",
                    "--list-links '%s' needs SimGrid: this loong was built without it (apt-get install "
                    "libsimgrid-dev, then reconfigure)",
                    given);
#endif
}

static int on_off(const char *s, const char *what, int *out, char err[LOONG_ERRLEN])
{
    if (!strcmp(s, "on") || !strcmp(s, "off")) return *out = !strcmp(s, "on"), 0;
    snprintf(err, LOONG_ERRLEN, "%s '%s' is not on or off", what, s);
    return -1;
}

/* The rail fabric's options, over its defaults (or the preset's). */
static int apply_rail(const topo_args *a, platform_spec *sp, char err[LOONG_ERRLEN])
{
    const char *given = a->unit            ? "--unit-nodes"
                        : a->lpr           ? "--leaves-per-rail"
                        : a->ports         ? "--switch-ports"
                        : a->spine_oversub ? "--spine-oversubscription"
                                           : NULL;
    if (sp->fabric == PLATFORM_FAT_TREE) {
        if (!given) return 0;
        snprintf(err, LOONG_ERRLEN, "%s sizes a rail fabric: add --fabric rail", given);
        return -1;
    }
    if (a->npl) {
        snprintf(err, LOONG_ERRLEN,
                 "--nodes-per-leaf is the fat-tree's: a rail fabric takes --unit-nodes and "
                 "--leaves-per-rail");
        return -1;
    }
    int leaves = 1;
    if (a->unit && units_parse_int(a->unit, "--unit-nodes", &sp->unit_nodes, err) < 0) return -1;
    if (a->lpr && units_parse_int(a->lpr, "--leaves-per-rail", &leaves, err) < 0) return -1;
    if (a->ports && units_parse_int(a->ports, "--switch-ports", &sp->switch_ports, err) < 0) return -1;
    if (a->spine_oversub && units_parse_si(a->spine_oversub, "--spine-oversubscription", &sp->spine_oversub, err) < 0)
        return -1;
    int per = sp->tray_gpus ? sp->gpus_per_node / sp->tray_gpus : 1; /* nodes per NVLink domain */
    if (a->unit && sp->unit_nodes % per) {
        snprintf(err, LOONG_ERRLEN, "--unit-nodes %d does not hold whole NVLink domains of %d nodes: give a multiple",
                 sp->unit_nodes, per);
        return -1;
    }
    if (a->unit) sp->unit_nodes /= per; /* the spec counts domains */
    if (leaves < 1 || sp->unit_nodes < 1 || sp->unit_nodes % leaves) {
        snprintf(err, LOONG_ERRLEN, "--leaves-per-rail %d does not divide --unit-nodes %d: give a divisor", leaves,
                 sp->unit_nodes);
        return -1;
    }
    sp->nodes_per_leaf = sp->unit_nodes / leaves;
    return 0;
}

/* Whether --preset names a GB200 NVL72 rack (one, or a multi-rack unit). */
static bool preset_nvl72(const char *preset)
{
    return preset && (!strcmp(preset, "gb200-nvl72") || !strcmp(preset, "gb200-superpod"));
}

/* --preset superpod (NVIDIA DGX SuperPOD reference architecture, DGX H100:
 * RA-11333-001): DGX H100 nodes (the h100 defaults: 8 GPUs, 8 ConnectX-7
 * 400 Gb/s rails), rail-optimised units of 32 nodes on 64-port NDR
 * switches, non-blocking.
 * --preset gb200-nvl72: one GB200 NVL72 rack (the --gpu gb200 defaults:
 * 18 compute trays of 4 GPUs in one 72-GPU NVLink domain, a ConnectX-7
 * per GPU). --preset gb200-superpod: a DGX SuperPOD scalable unit of DGX
 * GB200 systems, 8 NVL72 racks (576 GPUs; NVIDIA DGX SuperPOD with DGX
 * GB200 reference architecture), the racks' rail-k NICs on one leaf per
 * rail (a leaf per 8 racks), one non-blocking spine over the leaves: the
 * fat-tree's idealised spine, not the RA's switch count. *hosts is the
 * preset's node count (trays) unless --nodes gives one. */
static int apply_preset(const topo_args *a, platform_spec *sp, int *hosts, char err[LOONG_ERRLEN])
{
    if (!a->preset) return 0;
    if (!strcmp(a->preset, "superpod")) {
        sp->fabric = PLATFORM_RAIL;
        return 0;
    }
    if (!preset_nvl72(a->preset)) {
        snprintf(err, LOONG_ERRLEN, "--preset '%s' is not one of: superpod, gb200-nvl72, gb200-superpod", a->preset);
        return -1;
    }
    sp->gpus_per_node = 72;
    sp->tray_gpus = 4;
    *hosts = strcmp(a->preset, "gb200-superpod") ? 18 : 8 * 18;
    sp->nodes_per_leaf = 8; /* racks under one rail leaf */
    return 0;
}

/* The GPU kind's fitted values (<gpu>.fit on the data path) over its
 * datasheet figures, unless --datasheet; a kind without a file keeps its
 * datasheet figures (a->fit stays empty). */
static int apply_fit(topo_args *a, platform_spec *sp, char err[LOONG_ERRLEN])
{
    char path[sizeof a->fit], e[LOONG_ERRLEN];
    if (a->datasheet || datapath_find("fitted values", sp->gpu, ".fit", NULL, path, sizeof path, e) < 0) return 0;
    char *text = infile_read(path, "fitted values", INFILE_PLATFORM_MAX, NULL, err);
    if (!text) return -1;
    int rc = platform_spec_apply_fit(sp, text, path, err);
    free(text);
    if (rc == 0) snprintf(a->fit, sizeof a->fit, "%s", path);
    return rc;
}

/* --peak and NCCL's efficiencies. */
static int apply_rates(const topo_args *a, platform_spec *sp, char err[LOONG_ERRLEN])
{
    if (a->peak && units_parse_si(a->peak, "--peak", &sp->peak, err) < 0) return -1;
    struct {
        const char *given, *flag;
        double *to;
    } eff[] = {{a->ll_eff, "--ll-eff", &sp->ll_eff},
               {a->ll128_eff, "--ll128-eff", &sp->ll128_eff},
               {a->tree_eff, "--tree-eff", &sp->tree_eff},
               {a->nvls_eff, "--nvls-eff", &sp->nvls_eff},
               {a->nvl_eff, "--nvl-eff", &sp->nvl_eff}};
    for (size_t i = 0; i < sizeof eff / sizeof eff[0]; i++) {
        if (!eff[i].given) continue;
        if (units_parse_si(eff[i].given, eff[i].flag, eff[i].to, err) < 0) return -1;
        if (!(*eff[i].to > 0 && *eff[i].to <= 1)) {
            snprintf(err, LOONG_ERRLEN, "%s '%.40s' must lie in (0, 1]: give a fraction such as 0.9", eff[i].flag,
                     eff[i].given);
            return -1;
        }
    }
    return 0;
}

/* The nodes (hosts), GPUs and NICs per node and the NVLink domain the user
 * gives, as the spec counts them: a "node" of the spec is an NVLink domain
 * (platform_spec.h), so a domain of several hosts multiplies the GPUs and
 * NICs per node and divides the nodes. Without --nvlink-domain a domain is
 * one node (a GB200/GB300 kind: its rack). */
static int apply_domain(const topo_args *a, platform_spec *sp, int hosts, char err[LOONG_ERRLEN])
{
    int gpn = sp->tray_gpus ? sp->tray_gpus : sp->gpus_per_node, domain, nics, npl = 0;
    bool kind_domain = sp->tray_gpus != 0;
    if (a->nodes && units_parse_int(a->nodes, "--nodes", &hosts, err) < 0) return -1;
    if (a->gpn && units_parse_int(a->gpn, "--gpus-per-node", &gpn, err) < 0) return -1;
    domain = kind_domain ? sp->gpus_per_node : gpn;
    if (a->domain && units_parse_int(a->domain, "--nvlink-domain", &domain, err) < 0) return -1;
    nics = gpn;
    if (a->nics && units_parse_int(a->nics, "--nics-per-node", &nics, err) < 0) return -1;
    if (a->npl && units_parse_int(a->npl, "--nodes-per-leaf", &npl, err) < 0) return -1;
    if (gpn < 1 || domain < 1 || hosts < 1) return 0; /* platform_spec_validate names the option */
    if (domain == gpn) {
        sp->nodes = hosts, sp->gpus_per_node = gpn, sp->nics_per_node = nics, sp->tray_gpus = 0;
        if (npl) sp->nodes_per_leaf = npl;
        return 0;
    }
    int per = domain / gpn;
    if (domain % gpn) {
        snprintf(err, LOONG_ERRLEN,
                 "--nvlink-domain %d spans whole nodes of %d GPUs: give a multiple of --gpus-per-node %d", domain, gpn,
                 gpn);
        return -1;
    }
    if (hosts % per || (npl && npl % per)) {
        snprintf(err, LOONG_ERRLEN,
                 "--nodes %d and --nodes-per-leaf must fill whole NVLink domains of %d nodes (%d GPUs): give "
                 "multiples of %d",
                 hosts, per, domain, per);
        return -1;
    }
    sp->nodes = hosts / per, sp->gpus_per_node = domain, sp->tray_gpus = gpn;
    sp->nics_per_node = nics * per;
    if (npl) sp->nodes_per_leaf = npl / per;
    return 0;
}

/* --sockets N (a PCIe server's CPU sockets; 1: one switch) and
 * --socket-link BW; a new socket count starts its link at the GPU's. */
static int apply_sockets(const topo_args *a, platform_spec *sp, char err[LOONG_ERRLEN])
{
    if (a->sockets) {
        if (units_parse_int(a->sockets, "--sockets", &sp->sockets, err) < 0) return -1;
        if (sp->sockets > 1 && !(sp->socket_bw > 0)) sp->socket_bw = sp->nvlink_bw;
        if (sp->sockets == 1) sp->sockets = 0; /* one socket: the one switch */
        if (sp->sockets <= 1) sp->socket_bw = 0;
    }
    if (!a->socket_bw) return 0;
    if (sp->sockets < 2) {
        snprintf(err, LOONG_ERRLEN, "--socket-link needs CPU sockets to join: add --sockets 2 (a PCIe server)");
        return -1;
    }
    return units_parse_bandwidth(a->socket_bw, "--socket-link", &sp->socket_bw, err);
}

static int apply(topo_args *a, platform_spec *sp, char err[LOONG_ERRLEN])
{
    const char *gpu = a->gpu ? a->gpu : preset_nvl72(a->preset) ? "gb200" : "h100";
    if (platform_spec_defaults(gpu, sp, err) < 0) return -1;
    int hosts = sp->tray_gpus ? sp->gpus_per_node / sp->tray_gpus : 1;
    if (apply_fit(a, sp, err) < 0 || apply_rates(a, sp, err) < 0) return -1;
    if (apply_preset(a, sp, &hosts, err) < 0) return -1;
    if (apply_domain(a, sp, hosts, err) < 0) return -1;
    if (a->nvlink && units_parse_bandwidth(a->nvlink, "--nvlink", &sp->nvlink_bw, err) < 0) return -1;
    if (a->nic && units_parse_bandwidth(a->nic, "--nic", &sp->nic_bw, err) < 0) return -1;
    if (apply_sockets(a, sp, err) < 0) return -1;
    if (a->oversub && units_parse_si(a->oversub, "--oversubscription", &sp->oversub, err) < 0) return -1;
    if (a->nvl_lat && units_parse_time(a->nvl_lat, "--nvlink-latency", &sp->nvlink_lat, err) < 0) return -1;
    if (a->nic_lat && units_parse_time(a->nic_lat, "--nic-latency", &sp->nic_lat, err) < 0) return -1;
    if (a->up_lat && units_parse_time(a->up_lat, "--uplink-latency", &sp->uplink_lat, err) < 0) return -1;
    if (a->nvls && on_off(a->nvls, "--nvls", &sp->nvls, err) < 0) return -1;
    if (a->pxn && on_off(a->pxn, "--pxn", &sp->pxn, err) < 0) return -1;
    if (!sp->nccl && ((a->nvls && sp->nvls) || (a->pxn && sp->pxn))) {
        snprintf(err, LOONG_ERRLEN, "--nvls and --pxn are NCCL's: --gpu %s ranks run plain rings", sp->gpu);
        return -1;
    }
    if (a->fabric && strcmp(a->fabric, "fat-tree") && strcmp(a->fabric, "rail")) {
        snprintf(err, LOONG_ERRLEN, "--fabric '%s' is not one of: fat-tree, rail", a->fabric);
        return -1;
    }
    if (a->fabric) sp->fabric = strcmp(a->fabric, "rail") ? PLATFORM_FAT_TREE : PLATFORM_RAIL;
    if (apply_rail(a, sp, err) < 0) return -1;
    return platform_spec_validate(sp, err);
}

/* The command line, for the generated file's provenance comment, and the
 * fitted-values file it read. */
static void origin_of(int argc, char **argv, const char *fit, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "loong");
    for (int i = 0; i < argc && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, " %s", argv[i]);
    if (fit[0] && n < len) snprintf(buf + n, len - n, "; fitted link values from %s", fit);
}

int cmd_topo(int argc, char **argv)
{
    static const struct option opts[] = {
        {"nodes", required_argument, 0, 1},
        {"gpus-per-node", required_argument, 0, 2},
        {"gpu", required_argument, 0, 3},
        {"nvlink", required_argument, 0, 4},
        {"nic", required_argument, 0, 5},
        {"nics-per-node", required_argument, 0, 6},
        {"fabric", required_argument, 0, 7},
        {"oversubscription", required_argument, 0, 8},
        {"nodes-per-leaf", required_argument, 0, 9},
        {"nvlink-latency", required_argument, 0, 10},
        {"nic-latency", required_argument, 0, 11},
        {"uplink-latency", required_argument, 0, 12},
        {"nvls", required_argument, 0, 13},
        {"pxn", required_argument, 0, 14},
        {"unit-nodes", required_argument, 0, 15},
        {"leaves-per-rail", required_argument, 0, 16},
        {"switch-ports", required_argument, 0, 17},
        {"spine-oversubscription", required_argument, 0, 18},
        {"preset", required_argument, 0, 19},
        {"peak", required_argument, 0, 20},
        {"ll-eff", required_argument, 0, 21},
        {"ll128-eff", required_argument, 0, 22},
        {"tree-eff", required_argument, 0, 23},
        {"nvls-eff", required_argument, 0, 24},
        {"datasheet", no_argument, 0, 25},
        {"nvlink-domain", required_argument, 0, 26},
        {"sockets", required_argument, 0, 27},
        {"socket-link", required_argument, 0, 28},
        {"nvl-eff", required_argument, 0, 29},
        {"list-links", required_argument, 0, 30},
        {"list", no_argument, 0, 31},
        {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    topo_args a = {0};
    const char **slot[] = {
        NULL,        &a.nodes, &a.gpn,           &a.gpu,     &a.nvlink,    &a.nic,    &a.nics,      &a.fabric,
        &a.oversub,  &a.npl,   &a.nvl_lat,       &a.nic_lat, &a.up_lat,    &a.nvls,   &a.pxn,       &a.unit,
        &a.lpr,      &a.ports, &a.spine_oversub, &a.preset,  &a.peak,      &a.ll_eff, &a.ll128_eff, &a.tree_eff,
        &a.nvls_eff, NULL,     &a.domain,        &a.sockets, &a.socket_bw, &a.nvl_eff};
    const int nslots = (int)(sizeof slot / sizeof slot[0]);
    const char *out = "-", *list = NULL;
    bool list_data = false;
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        if (opt >= 1 && opt < nslots && slot[opt]) {
            *slot[opt] = optarg;
            continue;
        }
        switch (opt) {
        case 'o': out = optarg; break;
        case 30: list = optarg; break;
        case 31: list_data = true; break;
        case 25: a.datasheet = true; break;
        case 'h':
        default: return cli_opt_tail("topo", "loong topo", opt, argv, topo_usage, 0);
        }
    }
    if (cli_opt_no_operands("topo", "loong topo", argc, argv)) return 2;
    char err[LOONG_ERRLEN], origin[8192];
    if (list || list_data) {
        bool generator = a.datasheet;
        for (int i = 1; i < nslots; i++)
            generator |= slot[i] && *slot[i] != NULL;
        if (generator)
            return cli_fail("topo", "%s reads platforms: drop the generator's options",
                            list ? "--list-links" : "--list");
        if (list && list_data) return cli_fail("topo", "--list and --list-links: give one of them");
        return list ? list_links(list, out) : list_installed(out);
    }
    platform_spec sp;
    if (apply(&a, &sp, err) < 0) return cli_fail("topo", "%s", err);
    origin_of(argc, argv, a.fit, origin, sizeof origin);
    afile f;
    if (afile_open(&f, out, err) < 0) return cli_fail("topo", "%s", err);
    if (platform_spec_write(f.f, &sp, origin) < 0) {
        afile_abort(&f);
        return cli_fail("topo", "write error on '%s'", out);
    }
    return afile_commit(&f, err) < 0 ? cli_fail("topo", "%s", err) : 0;
}

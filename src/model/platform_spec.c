/* platform_spec: SimGrid platform XML generator and its spec. See platform_spec.h. */
#include "platform_spec.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/infile.h"
#include "core/xalloc.h"

/* NCCL's per-hop latency of the intra-node link, Simple protocol, ring
 * (src/graph/tuning.cc, hwLat): NVLink 3.4 us, PCIe 5.7 us. */
#define NCCL_NVLINK_US 3.4
#define NCCL_PCI_US    5.7

typedef struct gpu_kind {
    const char *name;
    double peak, nvlink_bw, nic_bw; /* nvlink_bw: the intra-node link, whatever it is */
    int nccl, nvls, pxn;            /* NCCL's collectives; NVLink SHARP (NVSwitch 3); PXN (needs NVLink) */
    double intra_hop_us;            /* NCCL's hop latency of that link */
    double mem;                     /* HBM bytes */
    const char *source;
    int sockets; /* PCIe servers: CPU sockets the GPUs split over (0: one switch) */
} gpu_kind;

/* Datasheet figures (REFERENCE.md, "Hardware"). NVLink: per direction, half
 * of the per-GPU total (H100 900 GB/s, A100 600 GB/s). NIC: ConnectX-7 400
 * Gb/s (DGX H100), HDR 200 Gb/s (A100 nodes). The A100 PCIe card (NVIDIA
 * A100 80GB PCIe datasheet: 312 TFLOP/s bf16 dense, HBM2e 1,935 GB/s, PCIe
 * Gen4 64 GB/s, i.e. 32 GB/s per direction) in the server SimuMax measured
 * (github.com/MooreThreads/SimuMax, configs/system/a100_pcie.json:
 * intra_with_pcie, no NVLink bridges, inter_node 25 GB/s): its GPUs talk
 * over PCIe, 4 under each of 2 CPU sockets (what its measured groups
 * show: 2 and 4 adjacent GPUs reach 22 GB/s of bus bandwidth, 8 or a
 * group strided over both sockets far less; a100-pcie.fit), each GPU's
 * x16 link to its socket and the sockets joined by one link, no NVLS, no
 * PXN. Its datasheet socket link is the GPU's (32 GB/s): the fit sets
 * what peer traffic gets across. */
static const gpu_kind kinds[] = {
    /* H100 memory: the 81559 MiB nvidia-smi reports for an H100 80GB HBM3
     * (its total line, in public nvidia-smi logs), the figure a reserved
     * peak is measured against */
    {"h100", 989e12, 450e9, 50e9, 1, 1, 1, NCCL_NVLINK_US, 81559.0 * 1048576,
     "H100 SXM: 989 TFLOP/s bf16 dense, NVLink4 900 GB/s total, ConnectX-7 400 Gb/s", 0},
    /* H200 (https://www.nvidia.com/en-us/data-center/h200/): 989 TFLOP/s
     * bf16 and 1,979 FP8 dense (half the sparse figures), 141 GB HBM3e at
     * 4.8 TB/s, NVLink4 900 GB/s total; DGX H200: ConnectX-7 400 Gb/s. */
    {"h200", 989e12, 450e9, 50e9, 1, 1, 1, NCCL_NVLINK_US, 141e9,
     "H200: the H100's compute and NVLink, ConnectX-7 400 Gb/s", 0},
    /* Blackwell (NVLink 5: 18 links, 1.8 TB/s total per GPU, 900 GB/s per
     * direction; NVLink Switch with SHARP, so NVLS on; PXN on). NVIDIA's
     * spec tables give sparse figures and totals per system: dense = half
     * the sparse figure, per GPU = system / GPUs. FP8 dense peaks are
     * recorded here for the precision work (not used by the platform).
     * B200 (HGX/DGX B200: https://www.nvidia.com/en-us/data-center/dgx-b200/,
     * https://www.nvidia.com/en-us/data-center/hgx/): 72 PF FP8 and 36 PF
     * bf16 sparse per 8 GPUs = 4.5 PF FP8, 2.25 PF bf16 dense per GPU;
     * 1,440 GB HBM3e / 8 = 180 GB (MLCommons systems name it
     * B200-SXM-180GB), 64 TB/s / 8 = 8 TB/s; 8 ConnectX-7 400 Gb/s. */
    {"b200", 2.25e15, 900e9, 50e9, 1, 1, 1, NCCL_NVLINK_US, 180e9,
     "B200 SXM: 2.25 PFLOP/s bf16 dense (4.5 FP8), NVLink5 1.8 TB/s total, ConnectX-7 400 Gb/s", 0},
    /* B300 (HGX B300, https://www.nvidia.com/en-us/data-center/hgx/): 72 PF
     * FP8 and 36 PF bf16 sparse per 8 GPUs, as the B200 = 4.5 PF FP8, 2.25
     * PF bf16 dense per GPU; 2.3 TB HBM3e / 8 = 288 GB, 8 TB/s; ConnectX-8
     * SuperNIC 800 Gb/s per GPU. */
    {"b300", 2.25e15, 900e9, 100e9, 1, 1, 1, NCCL_NVLINK_US, 288e9,
     "B300 SXM (Blackwell Ultra): 2.25 PFLOP/s bf16 dense (4.5 FP8), NVLink5 1.8 TB/s total, ConnectX-8 800 Gb/s", 0},
    /* GB200 NVL72 (https://www.nvidia.com/en-us/data-center/gb200-nvl72/):
     * 720 PF FP8 and 360 PF bf16 sparse per 72 GPUs = 5 PF FP8, 2.5 PF
     * bf16 dense per GPU; 13.4 TB HBM3e / 72 = 186 GB (MLCommons systems:
     * GB200-186GB), 576 TB/s / 72 = 8 TB/s; one ConnectX-7 400 Gb/s per GPU
     * (4 per compute tray). */
    {"gb200", 2.5e15, 900e9, 50e9, 1, 1, 1, NCCL_NVLINK_US, 186e9,
     "GB200 (NVL72): 2.5 PFLOP/s bf16 dense (5 FP8), NVLink5 1.8 TB/s total, ConnectX-7 400 Gb/s", 0},
    /* GB300 NVL72 (https://www.nvidia.com/en-us/data-center/gb300-nvl72/):
     * 720 PF FP8 sparse (360 PF dense) per 72 GPUs = 5 PF FP8 dense, bf16
     * half of it, 2.5 PF; 20.1 TB HBM3e / 72 = 279 GB, 576 TB/s / 72 = 8
     * TB/s; 72 ConnectX-8 SuperNICs, 800 Gb/s each. */
    {"gb300", 2.5e15, 900e9, 100e9, 1, 1, 1, NCCL_NVLINK_US, 279e9,
     "GB300 (NVL72, Blackwell Ultra): 2.5 PFLOP/s bf16 dense (5 FP8), NVLink5 1.8 TB/s total, ConnectX-8 800 Gb/s", 0},
    {"a100", 312e12, 300e9, 25e9, 1, 0, 1, NCCL_NVLINK_US, 80e9,
     "A100 SXM: 312 TFLOP/s bf16, NVLink3 600 GB/s total, HDR 200 Gb/s", 0},
    {"a100-pcie", 312e12, 32e9, 25e9, 1, 0, 0, NCCL_PCI_US, 80e9,
     "A100 PCIe 80GB: 312 TFLOP/s bf16, no NVLink: PCIe Gen4 x16 32 GB/s per direction, HDR 200 Gb/s", 2},
    /* A CPU core standing in for a GPU, for validating against `loong exec`
     * on this kind of machine: peak = OpenBLAS fp32 sgemm on one core
     * (experiments/kernel-bench, about 100 GFLOP/s); links = MPI over shared
     * memory, rough until `loong calibrate` fits them. */
    {"cpu", 100e9, 5e9, 1e9, 0, 0, 0, NCCL_NVLINK_US, 0,
     "CPU cores as ranks: 100 GFLOP/s fp32 per core, MPI over shared memory", 0},
};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

/* NCCL's latency model, Simple protocol (src/graph/tuning.cc): base 8.4 us,
 * +3.4 us per NVLink hop (5.7 us per PCIe hop), +14 us per network hop. A
 * GPU-to-GPU path crosses two intra-node links (GPU->switch->GPU) and a
 * node-to-node path two NIC links, so each link carries half of base + hop.
 * Switches add nothing: NCCL's network hop is end to end. */
#define NCCL_BASE_US 8.4
#define NCCL_NET_US  14.0

const char *platform_spec_kinds(void) { return "h100, h200, b200, b300, gb200, gb300, a100, a100-pcie, cpu"; }

/* GB200/GB300 NVL72 (the rack pages above): 18 compute trays of 4 GPUs
 * (2 superchips of 1 Grace + 2 GPUs; GB300: one board of 2 + 4) and 9
 * NVLink switch trays, one NVLink domain of 72 GPUs. */
void platform_spec_domain_default(const char *gpu, int *domain, int *tray)
{
    bool nvl72 = !strcmp(gpu, "gb200") || !strcmp(gpu, "gb300");
    *domain = nvl72 ? 72 : 8;
    *tray = nvl72 ? 4 : 0;
}

placement platform_spec_placement(const platform_spec *sp)
{
    return placement_make(sp->gpus_per_node, sp->nics_per_node, sp->nodes);
}

double platform_spec_gpu_mem(const char *gpu)
{
    for (int i = 0; i < NKINDS; i++)
        if (!strcmp(gpu, kinds[i].name)) return kinds[i].mem;
    return 0;
}

/* NCCL's protocol and algorithm efficiencies (src/graph/tuning.cc, 2.19:
 * ring LL busBw x 1/4, LL128 x 0.92, tree x 0.92, NVLS ratio 5/6); what a
 * platform without them in its loong_spec reads. nvl_eff depends on the
 * GPU kind: NAN until the spec's kind is known. */
static void spec_collective_defaults(platform_spec *sp)
{
    sp->nccl = sp->pxn = sp->nvls = 0;
    sp->ll_eff = 0.25;
    sp->ll128_eff = 0.92;
    sp->tree_eff = 0.92;
    sp->nvls_eff = 5.0 / 6.0;
    sp->nvl_eff = NAN;
}

/* NVLink 3 and 4 links carry 25 GB/s per direction, NVLink 5's 50
 * (A100: 12 links, 300 GB/s; H100/H200: 18, 450; Blackwell: 18, 900). NCCL's
 * topology gives a link 20.0 (SM80), 20.6 (SM90) and 40.1 GB/s (SM100): what
 * its Simple protocol moves once its framing is paid, the ~20 % protocol
 * overhead NCCL's maintainer quotes (NVIDIA/nccl-tests#212). */
double platform_spec_nvl_eff(const char *gpu)
{
    static const struct {
        const char *gpu;
        double eff;
    } t[] = {{"a100", 20.0 / 25}, {"h100", 20.6 / 25},  {"h200", 20.6 / 25}, {"b200", 40.1 / 50},
             {"b300", 40.1 / 50}, {"gb200", 40.1 / 50}, {"gb300", 40.1 / 50}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(gpu, t[i].gpu)) return t[i].eff;
    return 1;
}

/* NVIDIA's DGX SuperPOD: scalable units of 32 nodes, 64-port NDR switches
 * (QM9700), non-blocking; what a fat-tree platform reads, unused there. */
static void spec_fabric_defaults(platform_spec *sp)
{
    sp->fabric = PLATFORM_FAT_TREE;
    sp->unit_nodes = 32;
    sp->switch_ports = 64;
    sp->spine_oversub = 1;
}

int platform_spec_defaults(const char *gpu, platform_spec *sp, char err[LOONG_ERRLEN])
{
    for (int i = 0; i < NKINDS; i++) {
        if (strcmp(gpu, kinds[i].name)) continue;
        memset(sp, 0, sizeof *sp);
        snprintf(sp->gpu, sizeof sp->gpu, "%s", gpu);
        sp->nodes = 1;
        platform_spec_domain_default(gpu, &sp->gpus_per_node, &sp->tray_gpus);
        sp->nics_per_node = sp->gpus_per_node; /* one rail NIC per GPU */
        sp->nodes_per_leaf = 32;
        sp->peak = kinds[i].peak;
        sp->nvlink_bw = kinds[i].nvlink_bw;
        sp->nic_bw = kinds[i].nic_bw;
        sp->oversub = 1;
        sp->nvlink_lat = (NCCL_BASE_US + kinds[i].intra_hop_us) / 2 * 1e-6;
        sp->nic_lat = (NCCL_BASE_US + NCCL_NET_US) / 2 * 1e-6;
        sp->uplink_lat = 0;
        spec_collective_defaults(sp);
        spec_fabric_defaults(sp);
        sp->nvl_eff = platform_spec_nvl_eff(gpu);
        sp->nccl = kinds[i].nccl;
        sp->pxn = kinds[i].pxn;
        sp->nvls = kinds[i].nvls;
        sp->sockets = kinds[i].sockets; /* 0 or 1: one switch */
        sp->socket_bw = sp->sockets > 1 ? sp->nvlink_bw : 0;
        return 0;
    }
    snprintf(err, LOONG_ERRLEN, "unknown GPU kind '%s': known kinds are %s", gpu, platform_spec_kinds());
    return -1;
}

int platform_spec_validate(const platform_spec *sp, char err[LOONG_ERRLEN])
{
    const char *bad = NULL;
    if (sp->nodes < 1)
        bad = "--nodes must be at least 1";
    else if (sp->gpus_per_node < 1)
        bad = "--gpus-per-node must be at least 1";
    else if (sp->nics_per_node < 1 || sp->gpus_per_node % sp->nics_per_node)
        bad = "--nics-per-node must divide --gpus-per-node (each NIC serves the same number of GPUs)";
    else if (sp->tray_gpus < 0 || (sp->tray_gpus && (sp->gpus_per_node % sp->tray_gpus ||
                                                     sp->nics_per_node % (sp->gpus_per_node / sp->tray_gpus))))
        bad = "--nvlink-domain must be a multiple of --gpus-per-node (whole nodes in a domain)";
    else if ((long long)sp->nodes * sp->gpus_per_node > PLATFORM_MAX_GPUS)
        bad = "--nodes x --gpus-per-node exceeds 65536 GPUs, the most loong simulates: use --dp for replicas";
    else if (sp->nodes_per_leaf < 1)
        bad = "--nodes-per-leaf must be at least 1";
    else if (!(sp->oversub >= 1 && sp->oversub <= 1000))
        bad = "--oversubscription must lie in [1, 1000] (1 = non-blocking fat-tree)";
    else if (!(sp->nvlink_bw >= 1e6 && sp->nvlink_bw <= 1e15))
        bad = "--nvlink (nvlink_bw) must lie in [1 MB/s, 1 PB/s]: give a unit, e.g. 450GBps";
    else if (sp->sockets < 0 || sp->sockets > PLATFORM_MAX_SOCKETS ||
             (sp->sockets > 1 && sp->gpus_per_node % sp->sockets))
        bad = "--sockets must lie in [1, 8] and divide --gpus-per-node (each socket holds the same number of GPUs)";
    else if (sp->sockets > 1 && (sp->tray_gpus || sp->nvls || sp->pxn))
        bad = "--sockets applies to PCIe servers: give --nvls off and --pxn off, and no NVLink domain";
    else if (sp->sockets > 1 && !(sp->socket_bw >= 1e6 && sp->socket_bw <= 1e15))
        bad = "--socket-link (socket_bw) must lie in [1 MB/s, 1 PB/s]: give a unit, e.g. 16GBps";
    else if (sp->sockets <= 1 && sp->socket_bw != 0)
        bad = "socket_bw joins CPU sockets, and this platform has one: give sockets=2 or more, or drop socket_bw";
    else if (!(sp->nic_bw >= 1e6 && sp->nic_bw <= 1e15))
        bad = "--nic (nic_bw) must lie in [1 MB/s, 1 PB/s]: give a unit, e.g. 400Gbps";
    else if (!(sp->peak > 0 && sp->peak <= 1e18))
        bad = "peak must lie in (0, 1e18 FLOP/s]";
    else if (!(sp->nvlink_lat >= 0 && sp->nvlink_lat <= 1) || !(sp->nic_lat >= 0 && sp->nic_lat <= 1) ||
             !(sp->uplink_lat >= 0 && sp->uplink_lat <= 1))
        bad =
            "--nvlink-latency, --nic-latency and --uplink-latency (nvlink_lat, nic_lat, uplink_lat) must lie in [0, 1 "
            "s]";
    else if (!(sp->ll_eff > 0 && sp->ll_eff <= 1) || !(sp->ll128_eff > 0 && sp->ll128_eff <= 1) ||
             !(sp->tree_eff > 0 && sp->tree_eff <= 1) || !(sp->nvls_eff > 0 && sp->nvls_eff <= 1) ||
             !(sp->nvl_eff > 0 && sp->nvl_eff <= 1))
        bad = "protocol efficiencies (ll_eff, ll128_eff, tree_eff, nvls_eff, nvl_eff) must lie in (0, 1]";
    else if ((sp->nccl | sp->pxn | sp->nvls) & ~1)
        bad = "nccl, pxn and nvls are 0 or 1";
    else if (sp->fabric != PLATFORM_FAT_TREE && sp->fabric != PLATFORM_RAIL)
        bad = "fabric is fat-tree or rail";
    if (bad) {
        snprintf(err, LOONG_ERRLEN, "%s", bad);
        return -1;
    }
    if (sp->fabric == PLATFORM_FAT_TREE) return 0;
    platform_fabric fb;
    return platform_spec_fabric(sp, &fb, err);
}

/* ---- the rail fabric's switches ---- */

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* Ports a switch with `down` ports towards its hosts needs up, at down:up
 * ratio r (whole cables). */
static int up_ports(int down, double r) { return (int)ceil(down / r - 1e-9); }

/* The most down ports a switch of `ports` ports has at down:up ratio r. */
static int most_down_ports(int ports, double r)
{
    int d = (int)(ports * r / (r + 1));
    while (d > 0 && d + up_ports(d, r) > ports)
        d--;
    while (d + 1 + up_ports(d + 1, r) <= ports)
        d++;
    return d;
}

static int rail_checks(const platform_spec *sp, char err[LOONG_ERRLEN])
{
    if (sp->unit_nodes < 1 || sp->unit_nodes > PLATFORM_MAX_GPUS)
        snprintf(err, LOONG_ERRLEN, "--unit-nodes must lie in [1, %d] nodes", PLATFORM_MAX_GPUS);
    else if (sp->unit_nodes % sp->nodes_per_leaf)
        snprintf(err, LOONG_ERRLEN,
                 "--leaves-per-rail: a unit of %d nodes does not split into leaves of %d nodes: give a divisor of "
                 "--unit-nodes",
                 sp->unit_nodes, sp->nodes_per_leaf);
    else if (sp->switch_ports < 2 || sp->switch_ports > 4096)
        snprintf(err, LOONG_ERRLEN, "--switch-ports must lie in [2, 4096] (a QM9700 has 64)");
    else if (!(sp->spine_oversub >= 1 && sp->spine_oversub <= 1000))
        snprintf(err, LOONG_ERRLEN, "--spine-oversubscription must lie in [1, 1000] (1 = non-blocking core)");
    else if (sp->nodes_per_leaf + up_ports(sp->nodes_per_leaf, sp->oversub) > sp->switch_ports)
        snprintf(err, LOONG_ERRLEN,
                 "a leaf of %d nodes needs %d down and %d up ports, more than --switch-ports %d: raise "
                 "--leaves-per-rail or --oversubscription",
                 sp->nodes_per_leaf, sp->nodes_per_leaf, up_ports(sp->nodes_per_leaf, sp->oversub), sp->switch_ports);
    else
        return 0;
    return -1;
}

int platform_spec_fabric(const platform_spec *sp, platform_fabric *fb, char err[LOONG_ERRLEN])
{
    int groups = ceil_div(sp->nodes, sp->nodes_per_leaf);
    *fb = (platform_fabric){.tiers = 2,
                            .units = groups,
                            .leaves = sp->nics_per_node * groups,
                            .leaf_up = up_ports(sp->nodes_per_leaf, sp->oversub),
                            .pods = 1,
                            .units_per_pod = groups,
                            .spines = 1};
    if (sp->fabric == PLATFORM_FAT_TREE) return 0;
    if (rail_checks(sp, err) < 0) return -1;
    int P = sp->switch_ports, u = fb->leaf_up;
    fb->units = fb->units_per_pod = ceil_div(sp->nodes, sp->unit_nodes);
    if (fb->leaves <= P) { /* every leaf wires to every spine */
        fb->spines = ceil_div(fb->leaves * u, P);
        return 0;
    }
    /* pods: spine k of a pod takes uplink k of each of its leaves */
    int down = most_down_ports(P, sp->spine_oversub),
        unit_leaves = sp->nics_per_node * (sp->unit_nodes / sp->nodes_per_leaf);
    fb->tiers = 3;
    fb->units_per_pod = down / unit_leaves;
    if (fb->units_per_pod < 1) {
        snprintf(err, LOONG_ERRLEN,
                 "a unit's %d leaves exceed a spine's %d down ports (--switch-ports %d, --spine-oversubscription "
                 "%.6g): lower --unit-nodes or --leaves-per-rail",
                 unit_leaves, down, P, sp->spine_oversub);
        return -1;
    }
    fb->pods = ceil_div(fb->units, fb->units_per_pod);
    if (fb->pods > P) {
        snprintf(err, LOONG_ERRLEN,
                 "%d pods exceed a core switch's %d ports: a fourth tier is beyond loong topo; raise --switch-ports "
                 "or --unit-nodes",
                 fb->pods, P);
        return -1;
    }
    fb->spines = fb->pods * u;
    fb->cores = (int)(((long long)fb->spines * up_ports(down, sp->spine_oversub) + P - 1) / P); /* < 4096^3 */
    return 0;
}

int platform_spec_pod_nodes(const platform_spec *sp)
{
    platform_fabric fb;
    char err[LOONG_ERRLEN];
    if (sp->fabric != PLATFORM_RAIL || platform_spec_fabric(sp, &fb, err) < 0 || fb.tiers == 2) return 0;
    return fb.units_per_pod * sp->unit_nodes;
}

const char *platform_spec_rails_shared(const platform_spec *sp)
{
    if (sp->nics_per_node < sp->gpus_per_node)
        return "GPUs share a rail NIC, which would miss the folded ranks' traffic";
    if (platform_spec_pod_nodes(sp) > 0 && sp->oversub * sp->spine_oversub > 1)
        return "the pods' uplinks to the core carry every rail and are oversubscribed";
    return NULL;
}
static const char *source_of(const char *gpu)
{
    for (int i = 0; i < NKINDS; i++)
        if (!strcmp(gpu, kinds[i].name)) return kinds[i].source;
    return "user-given figures";
}

/* The fabric's line of the header comment. */
static void write_fabric_comment(FILE *f, const platform_spec *sp)
{
    platform_fabric fb;
    char err[LOONG_ERRLEN];
    platform_spec_fabric(sp, &fb, err); /* validated */
    int leaves = ceil_div(sp->nodes, sp->nodes_per_leaf);
    if (sp->fabric == PLATFORM_FAT_TREE) {
        fprintf(f, "     %d leaf switch(es) per rail (%d nodes each), one spine, oversubscription %.6g:1.\n", leaves,
                sp->nodes_per_leaf, sp->oversub);
        return;
    }
    fprintf(f,
            "     DGX SuperPOD-style: %d scalable unit(s) of %d nodes, %d leaf switch(es) per rail per unit\n"
            "     (%d nodes each), %d-port switches: %d leaves (%d uplinks each, oversubscription %.6g:1),\n",
            fb.units, sp->unit_nodes, sp->unit_nodes / sp->nodes_per_leaf, sp->nodes_per_leaf, sp->switch_ports,
            fb.leaves, fb.leaf_up, sp->oversub);
    if (fb.tiers == 2)
        fprintf(f, "     %d spines (two tiers, one router: ECMP over them is one crossbar in a fluid model).\n",
                fb.spines);
    else
        fprintf(f,
                "     %d pods of %d unit(s) with %d spines each (%d spines, router podP-spine), %d core switches\n"
                "     (router core) over pod uplinks oversubscribed %.6g:1 (three tiers).\n",
                fb.pods, fb.units_per_pod, fb.leaf_up, fb.spines, fb.cores, sp->spine_oversub);
}

/* An NVLink domain over several compute trays: what a "node" is here. */
static void write_domain_comment(FILE *f, const platform_spec *sp)
{
    fprintf(f,
            "     NVLink domain: each node above is one NVLink domain of %d compute trays of %d GPUs\n"
            "     (host nodeD-gpuS sits on tray S / %d of domain D: property loong_tray, numbered over\n"
            "     the platform). The domain's NVSwitch is its NVLink switch trays: in a GB200/GB300 NVL72\n"
            "     rack 9 trays of 2 NVLink 5 switch chips, each GPU's 18 links one to each of the 18\n"
            "     chips; NCCL spreads its channels over all 18, so the chips act as one non-blocking\n"
            "     crossbar in a fluid model: one star of per-GPU links of the GPU's whole bandwidth.\n"
            "     NICs (%d per tray) only join domains (NCCL's MNNVL: the domain is one NCCL node).\n",
            sp->gpus_per_node / sp->tray_gpus, sp->tray_gpus, sp->tray_gpus,
            sp->nics_per_node / (sp->gpus_per_node / sp->tray_gpus));
}

static void write_header(FILE *f, const platform_spec *sp)
{
    fprintf(f, "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n");
    fprintf(f, "<!-- Generated by loong topo (the command is in the zone's loong_origin property). -->\n");
    fprintf(f,
            "<!-- %d nodes x %d %s GPUs (%s).\n"
            "     NVSwitch: a star of SPLITDUPLEX per-GPU links, %.6g GB/s per direction.\n"
            "     Fabric: %d rail NIC(s) per node at %.6g GB/s per direction, rail-optimised fat-tree,\n",
            sp->nodes, sp->gpus_per_node, sp->gpu, source_of(sp->gpu), sp->nvlink_bw / 1e9, sp->nics_per_node,
            sp->nic_bw / 1e9);
    if (sp->tray_gpus) write_domain_comment(f, sp);
    if (sp->sockets > 1)
        fprintf(f,
                "     PCIe: the star's GPUs split over %d CPU sockets (routers nodeN-socketK), %d each, each\n"
                "     socket joined to the node's switch router by a link of %.6g GB/s per direction.\n",
                sp->sockets, sp->gpus_per_node / sp->sockets, sp->socket_bw / 1e9);
    write_fabric_comment(f, sp);
    fprintf(f,
            "     Latency per link: NVLink %.6g us, NIC %.6g us, leaf-spine %.6g us; NCCL's Simple\n"
            "     protocol model (src/graph/tuning.cc): base 8.4 us + 3.4 us per NVLink hop + 14 us\n"
            "     per network hop, split over the two links of a path.\n"
            "     Collectives: %s; NVLink SHARP %s; PXN routes %s. -->\n",
            sp->nvlink_lat * 1e6, sp->nic_lat * 1e6, sp->uplink_lat * 1e6,
            sp->nccl ? "NCCL's algorithms and protocols" : "plain rings (MPI)", sp->nvls ? "on" : "off",
            sp->pxn ? "on" : "off");
}

/* The spine router above leaf l of any rail. */
static void spine_of_leaf(const platform_spec *sp, int l, char name[32])
{
    int pod = platform_spec_pod_nodes(sp);
    if (pod)
        snprintf(name, 32, "pod%d-spine", l * sp->nodes_per_leaf / pod);
    else
        snprintf(name, 32, "spine");
}

/* A pod's uplink to the core: its leaves' uplinks (every rail) over the
 * spines' down:up ratio. */
static void write_pod_uplinks(FILE *f, const platform_spec *sp, int pod, int pods)
{
    for (int p = 0; p < pods; p++) {
        int nodes = sp->nodes - p * pod;
        if (nodes > pod) nodes = pod;
        double bw = (double)nodes * sp->nics_per_node * sp->nic_bw / sp->oversub / sp->spine_oversub;
        fprintf(
            f, "    <link id=\"pod%d-up\" bandwidth=\"%.9gGBps\" latency=\"%.9gus\" sharing_policy=\"SPLITDUPLEX\"/>\n",
            p, bw / 1e9, sp->uplink_lat * 1e6);
    }
}

static void write_elements(FILE *f, const platform_spec *sp)
{
    int leaves = (sp->nodes + sp->nodes_per_leaf - 1) / sp->nodes_per_leaf;
    for (int n = 0; n < sp->nodes; n++)
        for (int g = 0; g < sp->gpus_per_node; g++) {
            fprintf(f,
                    "    <host id=\"node%d-gpu%d\" speed=\"%.6gTf\"><prop id=\"loong_gpu\" value=\"%s\"/>"
                    "<prop id=\"loong_node\" value=\"%d\"/><prop id=\"loong_slot\" value=\"%d\"/>",
                    n, g, sp->peak / 1e12, sp->gpu, n, g);
            if (sp->tray_gpus)
                fprintf(f, "<prop id=\"loong_tray\" value=\"%d\"/>",
                        n * (sp->gpus_per_node / sp->tray_gpus) + g / sp->tray_gpus);
            fputs("</host>\n", f);
        }
    for (int n = 0; n < sp->nodes; n++) {
        fprintf(f, "    <router id=\"node%d-nvswitch\"/>\n", n);
        for (int k = 0; sp->sockets > 1 && k < sp->sockets; k++)
            fprintf(f, "    <router id=\"node%d-socket%d\"/>\n", n, k);
    }
    for (int r = 0; r < sp->nics_per_node; r++)
        for (int l = 0; l < leaves; l++)
            fprintf(f, "    <router id=\"leaf-r%d-%d\"/>\n", r, l);
    int pod = platform_spec_pod_nodes(sp), pods = pod ? ceil_div(sp->nodes, pod) : 0;
    if (!pods) fprintf(f, "    <router id=\"spine\"/>\n");
    for (int p = 0; p < pods; p++)
        fprintf(f, "    <router id=\"pod%d-spine\"/>\n", p);
    if (pods) fprintf(f, "    <router id=\"core\"/>\n");
    for (int n = 0; n < sp->nodes; n++) {
        for (int g = 0; g < sp->gpus_per_node; g++)
            fprintf(f,
                    "    <link id=\"node%d-gpu%d-nvlink\" bandwidth=\"%.9gGBps\" latency=\"%.9gus\" "
                    "sharing_policy=\"SPLITDUPLEX\"/>\n",
                    n, g, sp->nvlink_bw / 1e9, sp->nvlink_lat * 1e6);
        for (int k = 0; k < sp->nics_per_node; k++)
            fprintf(f,
                    "    <link id=\"node%d-nic%d\" bandwidth=\"%.9gGBps\" latency=\"%.9gus\" "
                    "sharing_policy=\"SPLITDUPLEX\"/>\n",
                    n, k, sp->nic_bw / 1e9, sp->nic_lat * 1e6);
        for (int k = 0; sp->sockets > 1 && k < sp->sockets; k++) /* no latency: NCCL's PCIe hop is the GPU's */
            fprintf(f,
                    "    <link id=\"node%d-socket%d-link\" bandwidth=\"%.9gGBps\" latency=\"0us\" "
                    "sharing_policy=\"SPLITDUPLEX\"/>\n",
                    n, k, sp->socket_bw / 1e9);
    }
    for (int r = 0; r < sp->nics_per_node; r++)
        for (int l = 0; l < leaves; l++) {
            int ports = sp->nodes - l * sp->nodes_per_leaf;
            if (ports > sp->nodes_per_leaf) ports = sp->nodes_per_leaf;
            fprintf(f,
                    "    <link id=\"leaf-r%d-%d-up\" bandwidth=\"%.9gGBps\" latency=\"%.9gus\" "
                    "sharing_policy=\"SPLITDUPLEX\"/>\n",
                    r, l, ports * sp->nic_bw / sp->oversub / 1e9, sp->uplink_lat * 1e6);
        }
    write_pod_uplinks(f, sp, pod, pods);
}

/* PXN (NCCL 2.12+): a GPU sends to another rail through the GPU of its
 * node on that rail, over NVLink, then that GPU's NIC. One one-way edge
 * from each node's NVSwitch to each rail's leaf, over that rail's NIC:
 * shortest paths (SimGrid counts links) then take GPU -> NVSwitch -> leaf
 * for every cross-rail send (the sender's NVLink, then the NIC: 2 links,
 * against 3 or more through the spine), and nothing else, since the
 * rail's own GPU reaches its leaf in one link and no edge leads back from
 * a leaf to a switch. The proxy GPU's NVLink receive is not charged: it has
 * 9x the NIC's bandwidth. One edge per (node, NIC), not per (GPU, NIC):
 * the platform file and its parse grow with the nodes only. */
static void write_pxn_routes(FILE *f, const platform_spec *sp)
{
    if (sp->nodes < 2 || sp->nics_per_node < 2) return;
    for (int n = 0; n < sp->nodes; n++)
        for (int nic = 0; nic < sp->nics_per_node; nic++)
            fprintf(f,
                    "    <route src=\"node%d-nvswitch\" dst=\"leaf-r%d-%d\" symmetrical=\"NO\"><link_ctn "
                    "id=\"node%d-nic%d\" direction=\"UP\"/></route>\n",
                    n, nic, n / sp->nodes_per_leaf, n, nic);
}

/* Every NVSwitch route before any NIC route: SimGrid's Dijkstra settles
 * equal-cost vertices in the order they were first named, so where two
 * GPUs share a NIC (gpu -> leaf -> gpu is as short as gpu -> nvswitch ->
 * gpu) the switch, named first, carries their traffic, as NCCL's NVLink
 * path does. */
static void write_routes(FILE *f, const platform_spec *sp)
{
    int per_nic = sp->gpus_per_node / sp->nics_per_node;
    for (int n = 0; n < sp->nodes; n++)
        for (int g = 0; g < sp->gpus_per_node; g++) {
            char to[32];
            if (sp->sockets > 1)
                snprintf(to, sizeof to, "socket%d", g / (sp->gpus_per_node / sp->sockets));
            else
                snprintf(to, sizeof to, "nvswitch");
            fprintf(f,
                    "    <route src=\"node%d-gpu%d\" dst=\"node%d-%s\"><link_ctn id=\"node%d-gpu%d-nvlink\" "
                    "direction=\"UP\"/></route>\n",
                    n, g, n, to, n, g);
        }
    for (int n = 0; n < sp->nodes; n++) /* sockets meet at the node's switch router */
        for (int k = 0; sp->sockets > 1 && k < sp->sockets; k++)
            fprintf(f,
                    "    <route src=\"node%d-socket%d\" dst=\"node%d-nvswitch\"><link_ctn id=\"node%d-socket%d-link\" "
                    "direction=\"UP\"/></route>\n",
                    n, k, n, n, k);
    for (int n = 0; n < sp->nodes; n++)
        for (int g = 0; g < sp->gpus_per_node; g++)
            fprintf(f,
                    "    <route src=\"node%d-gpu%d\" dst=\"leaf-r%d-%d\"><link_ctn id=\"node%d-nic%d\" "
                    "direction=\"UP\"/></route>\n",
                    n, g, g / per_nic, n / sp->nodes_per_leaf, n, g / per_nic);
    if (sp->pxn) write_pxn_routes(f, sp);
    int leaves = (sp->nodes + sp->nodes_per_leaf - 1) / sp->nodes_per_leaf;
    char spine[32];
    for (int r = 0; r < sp->nics_per_node; r++)
        for (int l = 0; l < leaves; l++) {
            spine_of_leaf(sp, l, spine);
            fprintf(f,
                    "    <route src=\"leaf-r%d-%d\" dst=\"%s\"><link_ctn id=\"leaf-r%d-%d-up\" "
                    "direction=\"UP\"/></route>\n",
                    r, l, spine, r, l);
        }
    int pod = platform_spec_pod_nodes(sp);
    for (int p = 0, pods = pod ? ceil_div(sp->nodes, pod) : 0; p < pods; p++)
        fprintf(f, "    <route src=\"pod%d-spine\" dst=\"core\"><link_ctn id=\"pod%d-up\" direction=\"UP\"/></route>\n",
                p, p);
}

/* The generating command as a property (XML comments may not hold "--"). */
static void write_origin(FILE *f, const char *origin)
{
    fputs("    <prop id=\"loong_origin\" value=\"", f);
    for (const char *p = origin; *p; p++) {
        if (*p == '"')
            fputs("&quot;", f);
        else if (*p == '&')
            fputs("&amp;", f);
        else if (*p == '<')
            fputs("&lt;", f);
        else
            fputc(*p, f);
    }
    fputs("\"/>\n", f);
}

/* The spec, exactly (%.17g), so that tools without SimGrid (the planner's
 * analytical model, `loong calibrate`) read the link parameters back. A
 * fat-tree's spec is what it was before rail fabrics existed. */
static void write_spec(FILE *f, const platform_spec *sp)
{
    fprintf(f,
            "    <prop id=\"loong_spec\" value=\"gpu=%s nodes=%d gpus_per_node=%d nics_per_node=%d nodes_per_leaf=%d "
            "peak=%.17g nvlink_bw=%.17g nic_bw=%.17g oversub=%.17g nvlink_lat=%.17g nic_lat=%.17g uplink_lat=%.17g "
            "nccl=%d pxn=%d nvls=%d ll_eff=%.17g ll128_eff=%.17g tree_eff=%.17g nvls_eff=%.17g",
            sp->gpu, sp->nodes, sp->gpus_per_node, sp->nics_per_node, sp->nodes_per_leaf, sp->peak, sp->nvlink_bw,
            sp->nic_bw, sp->oversub, sp->nvlink_lat, sp->nic_lat, sp->uplink_lat, sp->nccl, sp->pxn, sp->nvls,
            sp->ll_eff, sp->ll128_eff, sp->tree_eff, sp->nvls_eff);
    if (sp->fabric == PLATFORM_RAIL)
        fprintf(f, " fabric=rail unit_nodes=%d switch_ports=%d spine_oversub=%.17g", sp->unit_nodes, sp->switch_ports,
                sp->spine_oversub);
    if (sp->tray_gpus) fprintf(f, " tray_gpus=%d", sp->tray_gpus); /* absent: a node is one host, as before */
    if (sp->sockets > 1) fprintf(f, " sockets=%d socket_bw=%.17g", sp->sockets, sp->socket_bw); /* absent: one */
    /* absent: the GPU kind's */
    if (sp->nvl_eff != platform_spec_nvl_eff(sp->gpu)) fprintf(f, " nvl_eff=%.17g", sp->nvl_eff);
    fputs("\"/>\n", f);
}

int platform_spec_write(FILE *f, const platform_spec *sp, const char *origin)
{
    write_header(f, sp);
    /* graph routing: only the edges are written, and SimGrid finds the
     * shortest paths (fewest links). Floyd computes all pairs at load time,
     * cubic in the vertices (11 s at 256 nodes), then answers each message's
     * route lookup from a table; DijkstraCache computes a source's routes
     * the first time it sends (no load-time step) but each lookup walks the
     * path again (a 2.8M-task step on 32 nodes: 28.6 s against 22.5 s).
     * Floyd while its table is cheap, Dijkstra beyond: both pick the same
     * paths (check_sim: floyd_and_dijkstra_platforms_agree). */
    fprintf(f, "<platform version=\"4.1\">\n  <zone id=\"cluster\" routing=\"%s\">\n",
            sp->nodes <= PLATFORM_FLOYD_NODES ? "Floyd" : "DijkstraCache");
    if (origin) write_origin(f, origin);
    write_spec(f, sp);
    write_elements(f, sp);
    write_routes(f, sp);
    fprintf(f, "  </zone>\n</platform>\n");
    return ferror(f) ? -1 : 0;
}

/* One key=value of loong_spec; each key once (bit i of *seen; gpu is the
 * last bit). Returns 0, or -1 for an unknown key, a repeated one, or a value
 * that is not a number of its type (an int outside int's range included). */
static int spec_field(platform_spec *sp, const char *key, const char *val, uint32_t *seen)
{
    char *end;
    struct {
        const char *k;
        int *i;
        double *d;
    } f[] = {{"nodes", &sp->nodes, NULL},
             {"gpus_per_node", &sp->gpus_per_node, NULL},
             {"nics_per_node", &sp->nics_per_node, NULL},
             {"nodes_per_leaf", &sp->nodes_per_leaf, NULL},
             {"peak", NULL, &sp->peak},
             {"nvlink_bw", NULL, &sp->nvlink_bw},
             {"nic_bw", NULL, &sp->nic_bw},
             {"oversub", NULL, &sp->oversub},
             {"nvlink_lat", NULL, &sp->nvlink_lat},
             {"nic_lat", NULL, &sp->nic_lat},
             {"uplink_lat", NULL, &sp->uplink_lat},
             {"nccl", &sp->nccl, NULL},
             {"pxn", &sp->pxn, NULL},
             {"nvls", &sp->nvls, NULL},
             {"ll_eff", NULL, &sp->ll_eff},
             {"ll128_eff", NULL, &sp->ll128_eff},
             {"tree_eff", NULL, &sp->tree_eff},
             {"nvls_eff", NULL, &sp->nvls_eff},
             {"nvl_eff", NULL, &sp->nvl_eff},
             {"unit_nodes", &sp->unit_nodes, NULL},
             {"switch_ports", &sp->switch_ports, NULL},
             {"spine_oversub", NULL, &sp->spine_oversub},
             {"tray_gpus", &sp->tray_gpus, NULL},
             {"sockets", &sp->sockets, NULL},
             {"socket_bw", NULL, &sp->socket_bw}};
    const size_t nf = sizeof f / sizeof f[0];
    if (!strcmp(key, "gpu")) {
        if (*seen & (1u << nf)) return -1;
        *seen |= 1u << nf;
        snprintf(sp->gpu, sizeof sp->gpu, "%s", val);
        return 0;
    }
    if (!strcmp(key, "fabric")) {
        if (*seen & (1u << (nf + 1))) return -1;
        *seen |= 1u << (nf + 1);
        if (!strcmp(val, "rail")) return sp->fabric = PLATFORM_RAIL, 0;
        return strcmp(val, "fat-tree") ? -1 : (sp->fabric = PLATFORM_FAT_TREE, 0);
    }
    for (size_t i = 0; i < nf; i++)
        if (!strcmp(key, f[i].k)) {
            if (*seen & (1u << i)) return -1;
            *seen |= 1u << i;
            errno = 0;
            if (f[i].i) {
                long v = strtol(val, &end, 10);
                if (errno || v < INT_MIN || v > INT_MAX) return -1;
                *f[i].i = (int)v;
            } else {
                *f[i].d = strtod(val, &end);
            }
            return *end || end == val ? -1 : 0;
        }
    return -1;
}

/* The keys a fitted-values file may set: what `loong calibrate
 * --nccl-tests` fits, and the link figures beside them. */
static bool fit_key(const char *key)
{
    static const char *const keys[] = {"nvlink_bw", "nic_bw",   "nvlink_lat", "nic_lat", "uplink_lat", "ll_eff",
                                       "ll128_eff", "tree_eff", "nvls_eff",   "nvl_eff", "socket_bw"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(key, keys[i])) return true;
    return false;
}

/* One "key = value" line of a fitted-values file into sp. */
static int fit_line(platform_spec *sp, char *line, uint32_t *seen, char *why, size_t len)
{
    char *eq = strchr(line, '='), *key = line, *val;
    if (!eq) return snprintf(why, len, "expected 'key = value'"), -1;
    *eq = '\0', val = eq + 1;
    key[strcspn(key, " \t")] = '\0';
    val += strspn(val, " \t");
    val[strcspn(val, " \t\r")] = '\0';
    if (!strcmp(key, "gpu")) {
        if (strcmp(val, sp->gpu)) return snprintf(why, len, "it is for gpu '%.16s', not '%s'", val, sp->gpu), -1;
        return 0;
    }
    if (!fit_key(key))
        return snprintf(why, len,
                        "'%.40s' is not a fitted value (nvlink_bw, nic_bw, nvlink_lat, nic_lat, uplink_lat, ll_eff, "
                        "ll128_eff, tree_eff, nvls_eff, nvl_eff, socket_bw)",
                        key),
               -1;
    if (spec_field(sp, key, val, seen) < 0)
        return snprintf(why, len, "'%.40s' is repeated or '%.40s' is not a number", key, val), -1;
    return 0;
}

int platform_spec_apply_fit(platform_spec *sp, const char *text, const char *path, char err[LOONG_ERRLEN])
{
    char *copy = xstrdup(text, "a fitted-values file"), why[LOONG_ERRLEN];
    uint32_t seen = 0;
    int rc = 0, no = 0;
    for (char *line = copy, *next; line && rc == 0; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        no++;
        line[strcspn(line, "#")] = '\0';
        line += strspn(line, " \t\r");
        if (!*line) continue;
        if (fit_line(sp, line, &seen, why, sizeof why) < 0) {
            snprintf(err, LOONG_ERRLEN, "%.80s:%d: %.120s: fix the line or give --datasheet", path, no, why);
            rc = -1;
        }
    }
    free(copy);
    if (rc == 0 && platform_spec_validate(sp, why) < 0)
        snprintf(err, LOONG_ERRLEN, "%.80s: %.120s: fix the file or give --datasheet", path, why), rc = -1;
    return rc;
}

int platform_spec_parse(const char *text, const char *path, platform_spec *sp, char err[LOONG_ERRLEN])
{
    static const char tag[] = "id=\"loong_spec\" value=\"";
    memset(sp, 0, sizeof *sp);
    spec_collective_defaults(sp);
    spec_fabric_defaults(sp);
    const char *v = strstr(text, tag);
    if (!v) {
        snprintf(err, LOONG_ERRLEN, "platform '%s' has no loong_spec property: regenerate it with loong topo", path);
        return -1;
    }
    v += sizeof tag - 1;
    const char *q = strchr(v, '"');
    if (!q || q - v > 4096) {
        snprintf(err, LOONG_ERRLEN,
                 "platform '%s': the loong_spec property is not closed: regenerate it with loong topo", path);
        return -1;
    }
    char *val = xstrndup(v, (size_t)(q - v), "a platform's loong_spec"), *save = NULL;
    int rc = 0;
    uint32_t seen = 0;
    for (char *tok = strtok_r(val, " ", &save); tok && rc == 0; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || (*eq = '\0', spec_field(sp, tok, eq + 1, &seen) < 0)) {
            if (eq) *eq = '=';
            snprintf(err, LOONG_ERRLEN,
                     "platform '%s': malformed or repeated loong_spec entry '%.40s': regenerate it with loong topo",
                     path, tok);
            rc = -1;
        }
    }
    free(val);
    platform_spec fat;
    spec_fabric_defaults(&fat);
    if (rc == 0 && sp->fabric == PLATFORM_FAT_TREE &&
        (sp->unit_nodes != fat.unit_nodes || sp->switch_ports != fat.switch_ports ||
         sp->spine_oversub != fat.spine_oversub)) {
        snprintf(err, LOONG_ERRLEN,
                 "platform '%s': unit_nodes, switch_ports and spine_oversub belong to fabric=rail: regenerate it with "
                 "loong topo",
                 path);
        rc = -1;
    }
    /* SimGrid aborts on a platform without hosts: say so first */
    if (rc == 0 && !strstr(text, "<host ")) {
        snprintf(err, LOONG_ERRLEN, "platform '%s' has no <host> element: regenerate it with loong topo", path);
        rc = -1;
    }
    if (isnan(sp->nvl_eff)) sp->nvl_eff = platform_spec_nvl_eff(sp->gpu); /* not in the spec: the kind's */
    if (sp->sockets == 1) sp->sockets = 0;     /* one socket is one switch: written without sockets=, read back as 0 */
    if (sp->socket_bw == 0) sp->socket_bw = 0; /* -0 (e.g. 1e-999 underflowing) is not written back: read as +0 */
    return rc < 0 ? -1 : platform_spec_validate(sp, err);
}

int platform_spec_read(const char *path, platform_spec *sp, char err[LOONG_ERRLEN])
{
    char *text = infile_read(path, "platform", INFILE_PLATFORM_MAX, NULL, err);
    if (!text) {
        memset(sp, 0, sizeof *sp);
        return -1;
    }
    int rc = platform_spec_parse(text, path, sp, err);
    free(text);
    return rc;
}

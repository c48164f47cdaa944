/*
 * platform_spec: a GPU cluster as loong models it, and its SimGrid platform
 * XML. A spec is the GPU kind with its datasheet defaults (peak, memory,
 * NVLink and NIC figures), the nodes (NVLink domains: one 8-GPU node, or a
 * GB200/GB300 NVL72 rack of compute trays), NICs, the fabric (fat-tree, or
 * a DGX SuperPOD rail fabric with its switch counts) and NCCL's model
 * parameters; `.fit` files override the link and NCCL figures. `loong
 * topo` writes a spec as platform XML with the spec itself in a loong_spec
 * property (platform_spec_write: platforms live in XML, never in code, and
 * this is the only place that writes them), which sim, plan and the NCCL
 * model read back (platform_spec_read). Needs no SimGrid at build time.
 *
 * Model (one graph-routed zone): each GPU is a host with properties
 * loong_gpu/loong_node/loong_slot. NVSwitch is a star: every GPU has its own
 * SPLITDUPLEX NVLink link to its node's switch router. Each GPU reaches the
 * fabric through its rail NIC (GPUs share a NIC when a node has fewer NICs
 * than GPUs), a SPLITDUPLEX link to the leaf switch of its rail (one leaf per
 * rail per group of nodes_per_leaf nodes: rail-optimised). Leaves reach the
 * spine through an aggregated SPLITDUPLEX uplink of (ports x NIC bandwidth)
 * / oversubscription: the spines a leaf spreads its uplinks over (ECMP) act
 * as one non-blocking crossbar in a fluid model. Two fabrics:
 *   fat-tree  one idealised spine over every leaf, whatever its port count;
 *   rail      DGX SuperPOD's: scalable units of unit_nodes nodes, switches
 *             of switch_ports ports; two tiers while the spines can reach
 *             every leaf, else pods of units under their own spines, the
 *             pods joined by a core through uplinks oversubscribed by
 *             spine_oversub (platform_spec_fabric counts the switches).
 * Latencies follow NCCL's model (docs/network-model.md).
 *
 * Layer: model (uses core only: no SimGrid, no executor, no measurements).
 */
#ifndef LOONG_PLATFORM_SPEC_H
#define LOONG_PLATFORM_SPEC_H

#include <stdio.h>

#include "core/placement.h"
#include "core/units.h"

typedef struct platform_spec {
    char gpu[16];      /* GPU kind: h100, h200, b200, b300, gb200, gb300, a100, a100-pcie, cpu */
    int nodes;         /* nodes in the cluster: NVLink domains (below) */
    int gpus_per_node; /* GPUs on one NVSwitch: one NVLink domain */
    int nics_per_node; /* rail NICs per node (domain); divides gpus_per_node */
    /* GPUs per compute tray (host) where an NVLink domain spans several
     * (GB200/GB300 NVL72: 4 per tray, 18 trays); 0 where the domain is one
     * host. A "node" of this spec is the NVLink domain, as NCCL's MNNVL
     * path makes it (src/graph/topo.cc, ncclTopoGetSystem: with
     * comm->MNNVL the topologies fused into one system are the clique's
     * ranks, comm->clique, not the host's), so that rings, trees and NVLS
     * run inside the domain and NICs only join domains. */
    int tray_gpus;
    /* PCIe servers (no NVLink): CPU sockets (root complexes) per node, the
     * node's GPUs split evenly over them in slot order, each GPU's link
     * (nvlink_bw) to its socket and each socket's link to the others
     * (socket_bw per direction: UPI / xGMI as GPU peer traffic gets it).
     * 0 or 1 (socket_bw 0): one switch joins every GPU of the node. */
    int sockets;
    double socket_bw;
    int nodes_per_leaf;   /* nodes whose rail-k NICs share one leaf switch */
    int fabric;           /* PLATFORM_FAT_TREE or PLATFORM_RAIL */
    int unit_nodes;       /* rail: nodes in a scalable unit (a multiple of nodes_per_leaf) */
    int switch_ports;     /* rail: ports of every leaf, spine and core switch */
    double spine_oversub; /* rail, three tiers: a spine's down:up ports to the core (>= 1) */
    double peak;          /* dense bf16 FLOP/s per GPU (host speed) */
    double nvlink_bw;     /* bytes/s per direction per GPU */
    double nic_bw;        /* bytes/s per direction per NIC */
    double oversub;       /* fabric oversubscription (>= 1) */
    double nvlink_lat;    /* seconds per NVLink link (two per GPU-to-GPU path) */
    double nic_lat;       /* seconds per NIC link (two per node-to-node path) */
    double uplink_lat;    /* seconds per leaf-spine link */
    /* How collectives run (model/nccl.h). Platforms written before these
     * existed read as nccl = pxn = nvls = 0 and NCCL's efficiencies. */
    int nccl;         /* 1: NCCL's algorithms and protocols; 0: one ring of p2p flows (CPU ranks, MPI) */
    int pxn;          /* 1: traffic to another rail crosses NVLink to the GPU on that rail first */
    int nvls;         /* 1: NVLink SHARP in the node's switch (H100/H200 NVSwitch 3) */
    double ll_eff;    /* LL bus bandwidth / Simple's (NCCL: 1/4) */
    double ll128_eff; /* LL128's (NCCL: 0.92) */
    double tree_eff;  /* a tree's bus bandwidth / the ring's (NCCL: 0.92) */
    double nvls_eff;  /* NVLS algorithm bandwidth / NVLink bandwidth (NCCL: 5/6) */
    /* The share of an NVLink's line rate that NCCL's other transfers reach
     * (rings, trees, all-to-all, send/recv): NCCL's topology model's per-
     * link figure over the line rate (platform_spec_nvl_eff); what a spec
     * without nvl_eff reads. NVLS keeps nvls_eff, measured against the line. */
    double nvl_eff;
} platform_spec;

enum { PLATFORM_FAT_TREE, PLATFORM_RAIL };

/* The switches a spec's fabric is built of. */
typedef struct platform_fabric {
    int tiers;         /* 2: leaves, spines; 3: leaves, spines in pods, a core */
    int units;         /* scalable units (the last may be partial) */
    int leaves;        /* leaf switches: rails x leaves per rail x units */
    int leaf_up;       /* uplink ports per full leaf: ceil(nodes_per_leaf / oversub) */
    int pods;          /* spine groups (1 with two tiers) */
    int units_per_pod; /* every unit with two tiers */
    int spines;        /* spine switches (fat-tree: 1, the idealised one) */
    int cores;         /* core switches (0 with two tiers) */
} platform_fabric;

/* Count the switches of a validated spec's fabric: a rail fabric has two
 * tiers while its leaves fit one spine's ports (each leaf one link to every
 * spine), else pods of leaf_up spines, each spine one port per leaf of its
 * pod, and cores for the spines' uplinks (NVIDIA's DGX SuperPOD reference
 * architecture counts: docs/network-model.md). Returns 0, or -1 with a
 * message when switches of switch_ports ports cannot build it. */
int platform_spec_fabric(const platform_spec *sp, platform_fabric *fb, char err[LOONG_ERRLEN]);

/* Nodes under one pod's spines (the last pod may hold fewer); 0 where
 * no core joins pods (a fat-tree, a rail fabric of two tiers). */
int platform_spec_pod_nodes(const platform_spec *sp);
/* Why one rail's traffic could slow another's on a validated spec: a NIC
 * that GPUs share, or a three-tier fabric's pod uplinks (every rail's)
 * oversubscribed; NULL when each rail's traffic runs on links of its own
 * or on links that never carry more than they can (the TP and head folds
 * need NULL: the ranks they leave unsimulated have traffic of their own,
 * which such a link would miss). */
const char *platform_spec_rails_shared(const platform_spec *sp);

/* Fill sp with the defaults of GPU kind `gpu` (datasheet figures; README
 * lists the sources) for one node. Returns 0, or -1 with a message listing
 * the known kinds. */
int platform_spec_defaults(const char *gpu, platform_spec *sp, char err[LOONG_ERRLEN]);

/* GPUs of one NVLink domain of GPU kind `gpu` by default, and per compute
 * tray: GB200/GB300 NVL72 racks 72 and 4; every other kind one 8-GPU
 * node (*tray 0). Unknown kinds: 8 and 0. */
void platform_spec_domain_default(const char *gpu, int *domain, int *tray);

/* Comma-separated known GPU kinds, for --help. */
const char *platform_spec_kinds(void);

/* Memory of one GPU of kind `gpu`, in bytes (H100: the 81559 MiB
 * nvidia-smi reports; datasheet: 80 GB A100 SXM and PCIe, 141 GB H200,
 * Blackwell's in platform_spec.c); 0 for a kind without one (cpu,
 * unknown). */
double platform_spec_gpu_mem(const char *gpu);

/* Check a spec (positive sizes, NICs dividing GPUs, oversubscription >= 1,
 * a rail fabric its switches can build). Returns 0 or -1 with a message
 * naming the option. */
int platform_spec_validate(const platform_spec *sp, char err[LOONG_ERRLEN]);

/* NCCL's Simple-protocol share of a `gpu` kind's NVLink line rate: the
 * per-link bandwidth NCCL's topology assigns (src/graph/topo.h,
 * SM80/SM90/SM100_NVLINK_BW: 20.0, 20.6 and 40.1 GB/s) over the link's 25
 * or 50 GB/s per direction; 1 for a kind without NVLink or unknown. */
double platform_spec_nvl_eff(const char *gpu);

/* Bytes/s one NCCL send/recv gets over a GPU's NVLinks: nvlink_bw x
 * nvl_eff on a platform that runs NCCL, the line rate elsewhere (MPI). */
static inline double platform_spec_p2p_nvl_bw(const platform_spec *sp)
{
    return sp->nccl ? sp->nvlink_bw * sp->nvl_eff : sp->nvlink_bw;
}

/* Where a validated spec's ranks run (core/placement.h): its nodes (NVLink
 * domains), GPUs and rail NICs per node. A domain of several compute
 * trays is one node of the placement, as it is of the spec. */
placement platform_spec_placement(const platform_spec *sp);

/* Platforms of at most this many nodes are routed by Floyd (all pairs at
 * load time, a table lookup per message), larger ones by DijkstraCache (a
 * source's routes on first use): platform_spec_write. */
#define PLATFORM_FLOYD_NODES 32

/* Apply a fitted-values file (`<gpu>.fit`, what `loong topo` reads by
 * default) to sp: "key = value" lines ('#' comments), `gpu` naming sp's
 * kind, and any of the link and NCCL parameters nvlink_bw, nic_bw,
 * nvlink_lat, nic_lat, uplink_lat, ll_eff, ll128_eff, tree_eff, nvls_eff,
 * nvl_eff (units as loong_spec's: bytes/s, seconds, fractions), each once.
 * Returns 0, or -1 with "path:line: ..." for a malformed line, an unknown
 * or repeated key, or a gpu line naming another kind. */
int platform_spec_apply_fit(platform_spec *sp, const char *text, const char *path, char err[LOONG_ERRLEN]);

/* Write the platform XML of a validated spec; `origin` (may be NULL) is
 * recorded in a comment, e.g. the generating command line. Returns 0, or -1
 * on a write error. */
int platform_spec_write(FILE *f, const platform_spec *sp, const char *origin);

/* Read back the spec a platform was generated from (its loong_spec
 * property). Returns 0, or -1 with a message for unreadable files and
 * platforms that loong topo did not write. */
int platform_spec_read(const char *path, platform_spec *sp, char err[LOONG_ERRLEN]);

/* The same from a platform file's text (path names it in messages). */
int platform_spec_parse(const char *text, const char *path, platform_spec *sp, char err[LOONG_ERRLEN]);

/* The largest platform loong generates or simulates (the rank limit). */
#define PLATFORM_MAX_GPUS 65536
/* CPU sockets per node (--sockets), at most */
#define PLATFORM_MAX_SOCKETS 8

#endif

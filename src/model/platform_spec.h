/*
 * sim_topo: the platform generator behind `loong topo`. Writes SimGrid
 * platform XML for a GPU cluster; platforms live in XML, never in code, and
 * this is the only place that writes them. Needs no SimGrid at build time.
 *
 * Model (one graph-routed zone): each GPU is a host with properties
 * loong_gpu/loong_node/loong_slot. NVSwitch is a star: every GPU has its own
 * SPLITDUPLEX NVLink link to its node's switch router. Each GPU reaches the
 * fabric through its rail NIC (GPUs share a NIC when a node has fewer NICs
 * than GPUs), a SPLITDUPLEX link to the leaf switch of its rail (one leaf per
 * rail per group of nodes_per_leaf nodes: rail-optimised). Leaves reach one
 * spine through an aggregated SPLITDUPLEX uplink of (ports x NIC bandwidth)
 * / oversubscription. Latencies follow NCCL's model (docs/network-model.md).
 *
 * Layer: model (uses core only: no SimGrid, no executor, no measurements).
 */
#ifndef LOONG_PLATFORM_SPEC_H
#define LOONG_PLATFORM_SPEC_H

#include <stdio.h>

#include "core/units.h"

typedef struct platform_spec {
    char gpu[16];      /* GPU kind: h100, h200, a100 */
    int nodes;         /* nodes in the cluster */
    int gpus_per_node; /* GPUs on one NVSwitch */
    int nics_per_node; /* rail NICs per node; divides gpus_per_node */
    int nodes_per_leaf;
    double peak;       /* dense bf16 FLOP/s per GPU (host speed) */
    double nvlink_bw;  /* bytes/s per direction per GPU */
    double nic_bw;     /* bytes/s per direction per NIC */
    double oversub;    /* fabric oversubscription (>= 1) */
    double nvlink_lat; /* seconds per NVLink link (two per GPU-to-GPU path) */
    double nic_lat;    /* seconds per NIC link (two per node-to-node path) */
    double uplink_lat; /* seconds per leaf-spine link */
    /* How collectives run (model/nccl.h). Platforms written before these
     * existed read as nccl = pxn = nvls = 0 and NCCL's efficiencies. */
    int nccl;         /* 1: NCCL's algorithms and protocols; 0: one ring of p2p flows (CPU ranks, MPI) */
    int pxn;          /* 1: traffic to another rail crosses NVLink to the GPU on that rail first */
    int nvls;         /* 1: NVLink SHARP in the node's switch (H100/H200 NVSwitch 3) */
    double ll_eff;    /* LL bus bandwidth / Simple's (NCCL: 1/4) */
    double ll128_eff; /* LL128's (NCCL: 0.92) */
    double tree_eff;  /* a tree's bus bandwidth / the ring's (NCCL: 0.92) */
    double nvls_eff;  /* NVLS algorithm bandwidth / NVLink bandwidth (NCCL: 5/6) */
} platform_spec;

/* Fill sp with the defaults of GPU kind `gpu` (datasheet figures; README
 * lists the sources) for one node. Returns 0, or -1 with a message listing
 * the known kinds. */
int platform_spec_defaults(const char *gpu, platform_spec *sp, char err[LOONG_ERRLEN]);

/* Comma-separated known GPU kinds, for --help. */
const char *platform_spec_kinds(void);

/* Check a spec (positive sizes, NICs dividing GPUs, oversubscription >= 1).
 * Returns 0 or -1 with a message naming the option. */
int platform_spec_validate(const platform_spec *sp, char err[LOONG_ERRLEN]);

/* Platforms of at most this many nodes are routed by Floyd (all pairs at
 * load time, a table lookup per message), larger ones by DijkstraCache (a
 * source's routes on first use): platform_spec_write. */
#define PLATFORM_FLOYD_NODES 32

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

#endif

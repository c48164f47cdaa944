/*
 * placement: the one home of rank -> hardware. The mesh (mesh.h) says which
 * coordinates a rank has and which ranks form a group; this says where a
 * rank runs: its node, its GPU slot in the node and the rail NIC it leaves
 * the node through, and so which ranks share an NVLink domain and how many
 * nodes a group spans. Every backend and predictor asks here instead of
 * dividing by the GPUs per node itself.
 *
 * Ranks are laid out node-major, as `loong topo` numbers GPU hosts (rank r
 * is host nodeN-gpuS of the platform with N = r / gpus_per_node): the
 * mesh's first dimensions, adjacent ranks, share a node.
 *
 * A node is an NVLink domain: the GPUs on one NVSwitch fabric, which NCCL
 * fuses into one node (platform_spec.h, tray_gpus: a GB200/GB300 NVL72
 * domain of 72 GPUs over 18 compute trays is one node of 72 GPUs and 72
 * NICs, as `loong topo --nvlink-domain` writes it). So "share an NVLink
 * domain" and "share a node" are the same question here, asked by
 * placement_same_domain.
 *
 * Not to be confused with config.h's placement_kind (head-first,
 * context-first), which names an order of the mesh's dimensions.
 *
 * Pure functions on a small value; a placement passed to any function but
 * placement_validate must be valid, and ranks must be >= 0 (and below
 * placement_gpus where that is not 0).
 *
 * Layer: core (libc only).
 */
#ifndef LOONG_PLACEMENT_H
#define LOONG_PLACEMENT_H

#include <stdbool.h>

#include "units.h"

typedef struct placement {
    int nodes;         /* nodes (NVLink domains) of the platform; 0: as many as the ranks fill */
    int gpus_per_node; /* GPUs of one node (one NVLink domain) */
    int nics_per_node; /* rail NICs of one node; divides gpus_per_node (each serves as many GPUs) */
} placement;

/* A placement of this shape: nodes of gpus_per_node GPUs and nics_per_node
 * rail NICs, `nodes` of them (0: unbounded, for a configuration that names
 * no platform). Does not validate. */
placement placement_make(int gpus_per_node, int nics_per_node, int nodes);

/* At least one GPU and one NIC per node, NICs dividing GPUs, nodes >= 0
 * and nodes x GPUs fitting an int. Returns 0, or -1 with a message naming
 * the problem. */
int placement_validate(const placement *p, char err[LOONG_ERRLEN]);

/* GPUs of the platform, nodes x gpus_per_node; 0 when unbounded. */
int placement_gpus(const placement *p);

/* The node (NVLink domain) rank runs on, and its GPU slot there,
 * 0 .. gpus_per_node - 1. */
int placement_node(const placement *p, int rank);
int placement_gpu(const placement *p, int rank);

/* The rail NIC rank leaves its node through, 0 .. nics_per_node - 1: GPUs
 * share NICs in consecutive slots (gpus_per_node / nics_per_node each), as
 * `loong topo` wires them. */
int placement_nic(const placement *p, int rank);

/* The rank on GPU slot gpu (0 .. gpus_per_node - 1) of node `node`: the
 * inverse of placement_node and placement_gpu. */
int placement_rank(const placement *p, int node, int gpu);

/* Whether ranks a and b share an NVLink domain (one node: NVLink reaches
 * from one to the other without a NIC). */
bool placement_same_domain(const placement *p, int a, int b);

/* Distinct nodes that the n ranks of a group run on (any order, repeats
 * allowed; 0 for n = 0). */
int placement_group_nodes(const placement *p, const int *ranks, int n);

/* The same for the group start + i x stride, i = 0 .. n - 1 (stride > 0),
 * as PyTorch's traces describe a process group; computed without
 * overflow for any int start and stride. */
int placement_strided_nodes(const placement *p, int start, int stride, int n);

#endif

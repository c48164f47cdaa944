/*
 * chakra: a DAG as MLCommons Chakra execution traces, the workload input of
 * ASTRA-sim 2.x (`loong dag --format chakra`; docs/dag.md, "Chakra execution
 * traces"). One file per rank, DIR/workload.<rank>.et: a stream of
 * length-delimited protobuf messages (proto/chakra_et.proto), a
 * GlobalMetadata then one Node per task of the rank, in id order; and
 * DIR/workload.json, the communicator groups (pg_name -> ranks) that
 * ASTRA-sim's --comm-group-configuration reads.
 *
 * It is not a reader, and it knows no simulator: it only encodes.
 * Built with protobuf-c when configure found it; without it every call
 * fails with a message saying what to install.
 *
 * Layer: cli (uses core and model; protobuf-c stays out of the libraries).
 */
#ifndef LOONG_CLI_CHAKRA_H
#define LOONG_CLI_CHAKRA_H

#include <stdbool.h>

#include "core/dag.h"
#include "model/calib.h"
#include "model/platform_spec.h"

/* File names inside the output directory: PREFIX.<rank>.et, PREFIX.json. */
#define CHAKRA_PREFIX "workload"
/* The pg_name of the DAG's group g is g + CHAKRA_FIRST_GROUP: ASTRA-sim
 * reserves 0 for "all ranks" (Workload.cc extract_comm_group) and asserts
 * that a group it reads has an id above 0 (CommunicatorGroup.cc set_id). */
#define CHAKRA_FIRST_GROUP 1

/* The all-to-all algorithm ASTRA-sim is to run: comm_size is sized so that
 * each member sends the DAG's bytes under it, and system.json names it. */
typedef enum { CHAKRA_A2A_DIRECT, CHAKRA_A2A_RING } chakra_a2a;

/* The order of network.yml's two dimensions (docs/dag.md, "Ranks and
 * NPUs"): the rails first (the default: a transfer between nodes pays the
 * rail, as loong's PXN route does), or each node's NVSwitch first (ASTRA-
 * sim's collectives, which run dimension by dimension in this order, then
 * cross the rails with 1/gpus_per_node of their size, as NCCL's rings do,
 * but a transfer between nodes whose GPU slots differ pays NVLink). */
typedef enum { CHAKRA_RAIL_FIRST, CHAKRA_NVLINK_FIRST } chakra_dims;

typedef struct chakra_opts {
    chakra_a2a a2a;
    chakra_dims dims;
    /* The platform the DAG was built for (network.yml, system.json), with the
     * path it came from for their comments; NULL path: datasheet defaults. */
    const platform_spec *platform;
    const char *platform_path;
} chakra_opts;

/* Whether this build writes Chakra traces. When it does not, *why gets a
 * one-line message naming the packages to install (else it is untouched). */
bool chakra_available(const char **why);

/* Write the traces of a validated DAG into the new directory `dir`, which
 * must not exist or be an empty directory, and whose parent must exist:
 * the traces, workload.json, and for ASTRA-sim's analytical backends
 * network.yml (the platform as an NVSwitch x rail-switch network, with the
 * rank -> NPU note) and system.json (collective implementations, the
 * compute roofline). Everything is written into a temporary sibling
 * directory renamed into place at the end, so that `dir` appears whole or
 * not at all. `cb` may be NULL; when given, compute nodes carry their
 * duration under that calibration (duration_micros, what ASTRA-sim replays
 * without its roofline model) and system.json turns the roofline off.
 * Returns 0, or -1 with a one-line message and nothing left behind. */
int chakra_write_dir(const dag *g, const calib *cb, const chakra_opts *o, const char *dir, char err[LOONG_ERRLEN]);

#endif

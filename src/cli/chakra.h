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

/* File names inside the output directory: PREFIX.<rank>.et, PREFIX.json. */
#define CHAKRA_PREFIX "workload"

/* Whether this build writes Chakra traces. When it does not, *why gets a
 * one-line message naming the packages to install (else it is untouched). */
bool chakra_available(const char **why);

/* Write the traces of a validated DAG into the new directory `dir`, which
 * must not exist or be an empty directory, and whose parent must exist.
 * Everything is written into a temporary sibling directory renamed into
 * place at the end, so that `dir` appears whole or not at all. `cb` may be
 * NULL; when given, compute nodes carry their duration under that
 * calibration (duration_micros, what ASTRA-sim replays without its roofline
 * model). Returns 0, or -1 with a one-line message and nothing left behind. */
int chakra_write_dir(const dag *g, const calib *cb, const char *dir, char err[LOONG_ERRLEN]);

#endif

/*
 * exec: runs the core's DAG on real ranks (one MPI process per rank) over a
 * device (device.h). Every rank builds the same DAG, walks its own tasks in
 * id order and launches each on its stream after waiting the events of its
 * deps — the schedule the simulator predicts, for real.
 *
 * Layering: exec depends on the core and on device.h; devices know nothing
 * of the DAG.
 *
 * Layer: exec (uses core; MPI and CBLAS only in the CPU device).
 */
#ifndef LOONG_EXEC_EXEC_H
#define LOONG_EXEC_EXEC_H

#include "core/dag.h"
#include "device.h"
#include "fault.h"
#include "world.h"

typedef struct exec_opts {
    uint64_t seed;
    int iters, warmup;
    bool trace_fastest; /* --trace-iter fastest: trace the fastest timed iteration, not the median */
    bool check;
    const char *trace_path;   /* NULL: none */
    const char *dump_dir;     /* NULL: none */
    int fail_rank;            /* fault injection (fault.h): this rank fails; -1: none */
    fault_at fail_at;         /* where it fails */
    int fail_task;            /* FAULT_TASK: the task id */
    fault_signal fail_signal; /* how: exit, kill or stop */
    double timeout_s;         /* a rank with no progress for this long aborts all */
    double tol;               /* --check tolerance; 0: the fp32 default */
} exec_opts;

/* Run on this MPI rank (MPI already initialised with THREAD_MULTIPLE).
 * Returns 0, 1 when --check found errors above tolerance, 2 on bad input
 * or a device/communication error (message already printed by rank 0 or by
 * the failing rank). */
int exec_run(const config *c, const dev_ops *ops, const exec_opts *o);

/* The same over any world (world.h): exec_run is exec_run_world over
 * world_mpi(); the CUDA device's --transport local calls it from P threads
 * of one process over world_local_rank(). */
int exec_run_world(const config *c, const dev_ops *ops, const exec_opts *o, const world *w);

#endif

/*
 * sim: the SimGrid backend — replays the core's DAG on a SimGrid platform
 * and predicts every task's start and duration (DESIGN.md, "Backends").
 *
 * Flow of a run: sim_platform_open() initialises SimGrid once per process
 * (with loong's network-model defaults, then the user's --cfg=/--log=) and
 * loads a platform XML whose GPU hosts carry loong_* properties (written by
 * `loong topo`); sim_run() maps ranks to GPU hosts by (node, gpu), spawns one
 * actor per (rank, stream) and runs the simulation; sim_summary_write()
 * prints the #-headed report. The trace is written by the core's
 * trace_write() from sim_result's start/dur arrays.
 *
 * SimGrid can be initialised only once per process, so one process runs at
 * most one simulation.
 *
 * Layer: sim (uses core, model and SimGrid).
 */
#ifndef LOONG_SIM_H
#define LOONG_SIM_H

#include <stdio.h>

#include "model/calib.h"
#include "model/nccl.h"
#include "model/whatif.h"
#include "core/dag.h"
#include "core/mesh.h"
#include "core/placement.h"

/* The SimGrid settings loong applies before the user's --cfg= options:
 * CM02 (no TCP-tuned factors), no cross-traffic, no TCP window bound. */
extern const char *const sim_default_cfg[];

typedef struct sim_platform sim_platform;

/* Initialise SimGrid with the --cfg=/--log= strings in args (nargs of them;
 * loong's defaults come first so the user's win), check the platform in a
 * child process (SimGrid aborts on a malformed file) and load it. Returns a
 * platform, or NULL with a one-line message: missing or unreadable file,
 * malformed XML, no GPU hosts, GPUs of several kinds, or nodes with
 * different GPU counts. */
sim_platform *sim_platform_open(const char *path, int nargs, char **args, char err[LOONG_ERRLEN]);

/* Apply the perturbations w to pf (sim_whatif.c says how): resolves the
 * link names and the straggler ranks against the platform. Call once,
 * before sim_run or sim_coll_bench. Returns 0, or -1 with a message that
 * says how to list the platform's links. */
int sim_platform_perturb(sim_platform *pf, const whatif *w, char err[LOONG_ERRLEN]);

/* Run every rank's kernels on the platform's first GPU, shared: loong exec
 * --device cuda --transport local's P ranks on one GPU. Kernels become
 * SimGrid executions on that host, which divides its speed among those in
 * flight (max-min fairness); transfers keep the links between the ranks'
 * own GPUs. Call before sim_run; sim_run then needs every rank simulated
 * (no fold). */
void sim_platform_share_one_gpu(sim_platform *pf);

/* A link as the platform's XML declares it. */
typedef struct sim_link_desc {
    char name[96]; /* the XML's id: a full-duplex link's two directions are one entry */
    double bw;     /* bytes/s, per direction */
    double lat;    /* seconds */
    bool duplex;
} sim_link_desc;

/* Every link of the loaded platform, sorted by name: n of them, malloc'd. */
sim_link_desc *sim_platform_links(int *n);

/* Release pf (SimGrid's own objects live until the process exits). */
void sim_platform_free(sim_platform *pf);

/* GPU hosts, their kind (the loong_gpu property) and GPUs per node. */
int sim_platform_gpus(const sim_platform *pf);
const char *sim_platform_kind(const sim_platform *pf);
int sim_platform_gpus_per_node(const sim_platform *pf);
/* Where ranks run on pf (core/placement.h): rank r on GPU host
 * (placement_node(r), placement_gpu(r)); its nodes, the last possibly
 * partial, and the NICs of its loong_spec (one per GPU, `loong topo`'s
 * default, for a platform without one). */
placement sim_platform_placement(const sim_platform *pf);

typedef struct sim_link {
    const char *name; /* SimGrid link name (owned by SimGrid) */
    double bytes;     /* bytes that crossed it */
    double bw;        /* bytes/s */
} sim_link;

typedef struct sim_result {
    double *start, *dur; /* per task id, seconds from the step's start */
    double makespan;     /* seconds */
    sim_link *links;     /* every link that carried traffic, busiest first */
    int nlinks;
    double wall_s;         /* wall-clock seconds of the simulation itself */
    uint64_t compute_runs; /* SimGrid activities the compute tasks took: runs of ready kernels, one sleep each */
} sim_result;

/* ---- folding: dimensions run by symmetry (sim_fold.c) ----
 * A folded dimension's ranks run identical programs, so only the ranks
 * whose coordinate in it is 0 run (mesh.h: mesh_fold), and every other
 * rank's tasks take their representative's times. Three dimensions fold:
 *   dp  replica 0 runs; its gradient collectives take the whole group's
 *       NCCL shape and latency, and the flows that would reach another
 *       replica reach the same GPU of this one (every replica's NICs carry
 *       the same traffic). Unfolded, every replica runs on its own GPUs
 *       (a platform of dp x P GPUs).
 *   tp  TP rank 0 of each TP group runs, as every TP rank runs the same
 *       program on its own GPU, NVLink links and rail NIC; its TP
 *       collectives take NCCL's time on the idle group (their flows all
 *       fold onto the sender). Needs NCCL's collectives, TP groups inside
 *       a node, GPUs with links of their own (not a PCIe server's socket
 *       link, which every TP rank's traffic shares, nor a NIC shared by
 *       GPUs, nor oversubscribed pod uplinks: platform_spec_rails_shared)
 *       and no --tp-overlap
 *       (whose ring steps are p2p between TP ranks); the links report then
 *       counts the representatives' flows.
 *   head  head rank 0 of each head (Ulysses) group runs, as every head
 *       rank runs the same program on its own GPU, NVLink link and rail
 *       NIC, and its ring and pipeline peers are of the same head rank.
 *       A collective over head ranks (the all-to-all, a gradient
 *       collective) runs its flows between representatives as such, and
 *       each flow to or from a head rank that does not run as a stand-in:
 *       a host-to-host transfer over the same route that the
 *       representative alone issues, so that its own links carry what they
 *       would. Approximate where the head ranks are not quite symmetric
 *       (the ends of a tree's chain in a node carry half the middle's
 *       hops): within 0.5 % of every head rank simulated in the tests,
 *       most cases to the printed digit (docs/sim.md). Needs NCCL's
 *       collectives, a NIC per GPU, rails that share no link that can
 *       saturate (a three-tier fabric's pod uplinks oversubscribed), no
 *       PCIe socket links and no expert groups across head ranks.
 *   seq: ring rank 0 of each ring runs; the other ring ranks take its
 *       times as above. Under the zigzag partition of one document every
 *       ring rank runs the same tasks in the same order, differing only in
 *       which half of its chunks a ring step's attention block takes (the
 *       same FLOPs, its queries or its keys halved) and so in the block's
 *       and its merge's time. A ring step to or from a ring rank that does
 *       not run is a stand-in (as above), started when the representative
 *       posts its own step, as by symmetry the other rank does; the
 *       collectives over ring ranks (the all-gather strategy's, the
 *       gradients') take stand-ins as the head fold's. Approximate by
 *       those half-block differences: within 1 % of every ring rank
 *       simulated in the tests (docs/sim.md). Needs what head needs, the
 *       zigzag partition, one document and no dual ring (its two rings
 *       give the ring ranks different programs).
 * Pipeline stages differ (their layers), and never fold. */

/* The dimensions sim_run can fold, and what loong sim folds by default
 * (the replicas, not the TP or head ranks: `--fold dp`). The copied ones
 * are not run at all: their ranks take their representative's times. */
#define SIM_FOLD_COPIED  DAG_FOLDABLE
#define SIM_FOLDABLE     (MESH_BIT(MESH_DP) | SIM_FOLD_COPIED)
#define SIM_FOLD_DEFAULT MESH_BIT(MESH_DP)

/* `--fold`'s text: "none", or a comma-separated list of dimension names
 * ("dp,tp,head", each once). Returns 0 with the set in *out, or -1 with
 * a message for a name that is not a mesh dimension, one that cannot fold
 * (pp), or one named twice. */
int sim_fold_parse(const char *s, mesh_dims *out, char err[LOONG_ERRLEN]);

/* The text sim_fold_parse reads for a set: "none", "dp", "tp", "dp,tp,head,seq", ... */
void sim_fold_text(mesh_dims folded, char *buf, size_t len);

/* 0 when every dimension of `folded` can fold, else -1 with a message. */
int sim_fold_check(mesh_dims folded, char err[LOONG_ERRLEN]);

/* Simulate g on pf with compute durations from cb, with the config's
 * data-parallel replicas (its dp: each runs g on its own P GPUs, ranks
 * from config_mesh; the gradient collectives span their gradient groups)
 * and the dimensions `folded` run by symmetry (above; SIM_FOLD_DEFAULT is
 * what loong sim does unasked). A fold that the platform's perturbations
 * break (whatif_breaks_fold: the skipped copies would no longer run
 * alike) is not taken: those replicas, TP, head or ring ranks are simulated in full,
 * and every replica then needs its GPUs on the platform. Checks that the
 * platform has enough GPU hosts and the same GPUs per node as the config.
 * `progress` prints a line to stderr every few seconds of wall time on long
 * runs. Returns 0, or -1 with a message (a dimension that cannot fold, a TP
 * or head fold without what it needs, mapping errors, or a deadlock, which would
 * be a core bug). res covers replica 0's tasks and the makespan of all; free
 * it with sim_result_free(). Call at most once per process. */
int sim_run(sim_platform *pf, const dag *g, const calib *cb, bool progress, mesh_dims folded, sim_result *res,
            char err[LOONG_ERRLEN]);
void sim_result_free(sim_result *res);

/* Write the #-headed summary with units: step time; per-rank busy, idle and
 * exposed-communication time; tokens/s/GPU; MFU; the `top` busiest links
 * with utilisation. Checks every figure against the hardware (MFU <= 1,
 * per-rank FLOP/s <= peak, link utilisation <= 1) and prints a "# BUG:" line
 * for each violation; *bugs gets their count. Returns 0, or -1 on a write
 * error. */
int sim_summary_write(FILE *f, const dag *g, const calib *cb, const sim_result *res, int top, int *bugs);

/* `loong coll`: the sweep's collectives (model/nccl.h) back to back on
 * `gpus` GPUs over `nodes` nodes (the first GPUs of the first nodes);
 * seconds[k] and plans[k] get each size's time
 * and the algorithm and protocol that ran. Returns 0, or -1 with a message
 * (a platform without NCCL collectives, GPUs that do not fit). Call at most
 * once per process, like sim_run. */
int sim_coll_bench(sim_platform *pf, const nccl_sweep *a, double *seconds, nccl_plan *plans, char err[LOONG_ERRLEN]);

#endif

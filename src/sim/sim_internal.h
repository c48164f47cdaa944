/*
 * sim_internal: state shared by the backend's files during one run. The
 * simulation is single-threaded (SimGrid runs actors one at a time, and
 * loong never enables parallel contexts), so actors share this state
 * without locks.
 *
 * Layer: sim (uses core, model and SimGrid).
 */
#ifndef LOONG_SIM_INTERNAL_H
#define LOONG_SIM_INTERNAL_H

#include <simgrid/forward.h>
#include <xbt/asserts.h>
#include <xbt/log.h>

#include "model/nccl.h"
#include "model/tiles.h"
#include "model/whatif.h"
#include "sim.h"

/* The root of loong's log categories (sim_platform.c); `--log=loong.thres:debug`. */
XBT_LOG_EXTERNAL_CATEGORY(loong);

/* A waiter parked on a stream until that stream has completed `need` tasks. */
typedef struct sim_waiter {
    uint32_t need;
    sg_sem_t sem;
} sim_waiter;

/* Mailbox cache entry: the channel to or from one peer. */
typedef struct sim_chan {
    int peer;
    sg_mailbox_t mb;
} sim_chan;

/* A cross-stream dependency of a stream's task, resolved in its replica
 * when the actors are spawned: the stream it waits on (an index into
 * sim_state's streams) and how many of that stream's tasks must have
 * completed (the awaited task is that stream's ids[need - 1]). The actors
 * read these in stream order instead of chasing each dependency's task. */
typedef struct sim_dep {
    uint32_t mate, need;
} sim_dep;

/* One (rank, stream): an actor walking the stream's tasks in order. With
 * data-parallel replicas simulated in full, rank is the global one (the
 * mesh's: mesh_unfold of the DAG's rank over dp into replica rep) and the
 * stream's task times live at off. */
typedef struct sim_stream {
    struct sim_state *S;
    int rank, stream;
    int rep;      /* replica */
    uint32_t off; /* rep * ntasks: this replica's entries of start/dur */
    const uint32_t *ids;
    uint32_t n;
    sim_dep *deps;    /* every task's dependencies, in stream order */
    uint32_t *dep_at; /* n + 1 offsets: task i's are deps[dep_at[i] .. dep_at[i + 1]) */
    uint32_t done;    /* tasks completed, in order (an event = a prefix count) */
    uint32_t sched;   /* tasks whose end time is already fixed (>= done): a batch of compute in flight */
    sg_sem_t sem;     /* this actor parks here while it waits on another stream */
    sim_waiter waiters[STREAM_COUNT];
    int nwaiters;
    sim_chan *out, *in; /* mailbox caches */
    int nout, nin, capout, capin;
} sim_stream;

typedef struct sim_links sim_links;

/* The perturbations applied to a platform (sim_whatif.c). */
typedef struct sim_faults {
    whatif w;       /* as given: the jitter and its seed are drawn per run */
    double *kscale; /* per GPU host: its kernels' time factor (stragglers); NULL: none */
    sg_link_t *off; /* the failed links, each direction */
    int noff;
} sim_faults;

typedef struct sim_state {
    const dag *g;
    const config *c;
    const calib *cb;
    tiles *tiles;          /* attention work at the kernels' tile granularity (NULL: exact pairs) */
    sg_host_t *hosts;      /* per GPU (config_gpu_of of a global rank: sim_host_of) */
    sim_stream *streams;   /* reps * P * STREAM_COUNT, index rank * STREAM_COUNT + stream */
    uint32_t *pos;         /* per task: position in its stream (until the dependencies are resolved) */
    double *start, *dur;   /* per (replica, task), [rep * ntasks + id] */
    int P;                 /* ranks of one replica (the DAG's) */
    int *grank;            /* per (replica, DAG rank), rep * P + r: the global rank (mesh_unfold over dp) */
    mesh mesh;             /* the config's: every replica's ranks */
    int reps;              /* replicas simulated: dp in full, 1 by symmetry */
    mesh_dims folded;      /* the dimensions simulated by symmetry: dp (one replica), tp (TP rank 0) */
    int dp;                /* replicas the gradient collectives span */
    platform_spec dp_spec; /* the platform, with nodes for all dp * P ranks */
    bool interference;     /* the table slows kernels that overlap communication (calib.h) */
    sg_host_t one_gpu;     /* every rank's kernels share this host (sim_platform_share_one_gpu); NULL: own GPUs */
    int *comm_active;      /* per global rank: communication kernels in flight */
    sg_exec_t *comm_share; /* per global rank: their share of the GPU while any runs */
    sim_links *links;
    const sim_faults *faults;  /* the platform's perturbations */
    double *jitter;            /* per (replica, task): the kernel's jitter factor; NULL: none */
    const platform_spec *spec; /* the platform's, when it runs NCCL's collectives (spec->nccl); else NULL */
    nccl_group *groups;        /* per (replica, DAG group), shaped on first use (n == 0: not yet) */
    bool coalesce;             /* runs of ready kernels in one sleep (LOONG_SIM_COALESCE=0: one per kernel) */
    uint64_t compute_runs;     /* the sleeps (or executions) the compute tasks took */
    uint64_t completed;        /* tasks done, for progress */
    bool progress;
    double wall0, last_report;
} sim_state;

/* SimGrid ignores durations under its precision (surf/precision, 1e-9 s)
 * and complains; sleeps shorter than this are skipped (the trace keeps the
 * exact times, rounded to the nanosecond anyway). */
#define SIM_MIN_SLEEP 1e-9

static inline sim_stream *sim_stream_of(sim_state *S, int rank, int stream)
{
    return &S->streams[rank * STREAM_COUNT + stream];
}

/* The folds whose flows to the ranks they do not run become stand-ins
 * (sim_flow.c); the others' fold into their representatives. */
#define SIM_FOLD_STANDIN (MESH_BIT(MESH_HEAD) | MESH_BIT(MESH_SEQ))

/* Whether global rank g runs: a TP, head or ring rank other than 0 runs
 * by symmetry under their folds (sim.h, "folding"). */
static inline bool sim_rank_runs(const struct sim_state *S, int g)
{
    mesh_dims copied = S->folded & SIM_FOLD_COPIED;
    return !copied || mesh_fold(&S->mesh, copied, g) == g;
}

/* The global rank of the DAG's rank r in replica rep. */
static inline int sim_rank_of(const struct sim_state *S, int r, int rep) { return S->grank[rep * S->P + r]; }

/* The GPU global rank `rank` runs on (loong's ranks keep dp slowest; the
 * GPUs take the configuration's order: config_gpu_of), the rank on a GPU,
 * and a rank's host. `loong coll` has no configuration: its ranks are
 * GPUs. */
static inline int sim_gpu(const struct sim_state *S, int rank) { return S->c ? config_gpu_of(S->c, rank) : rank; }
static inline int sim_rank_on(const struct sim_state *S, int gpu) { return S->c ? config_rank_of_gpu(S->c, gpu) : gpu; }
static inline sg_host_t sim_host_of(const struct sim_state *S, int rank) { return S->hosts[sim_gpu(S, rank)]; }

/* sim_platform.c: the GPU host of each rank (index = rank). */
sg_host_t *sim_platform_hosts(sim_platform *pf);
const char *sim_platform_path(const sim_platform *pf);
sim_faults *sim_platform_faults(sim_platform *pf);
/* sim_platform_share_one_gpu was called */
bool sim_platform_one_gpu(const sim_platform *pf);

/* ---- sim_whatif.c ---- */
/* True when l is one of the failed links. */
bool sim_faults_link_off(const sim_faults *F, sg_link_t l);
void sim_faults_free(sim_faults *F);
/* The platform's loong_spec when it has one that runs NCCL's collectives;
 * NULL for hand-written platforms and CPU ranks (plain rings). */
const platform_spec *sim_platform_nccl_spec(const sim_platform *pf);

/* ---- sim_actor.c ---- */
/* Run the simulation: start(arg) spawns its actors at time 0, after a
 * check of every pair of the first n GPU hosts when links failed (an
 * actor on `where` runs it). Returns 0, or -1 with the check's message. */
int sim_start_checked(sim_state *S, sg_host_t where, int n, void (*start)(void *), void *arg, char err[LOONG_ERRLEN]);

/* ---- sim_event.c: cross-stream events ---- */
/* Resolve the cross-stream dependencies of every task of st (its deps and
 * dep_at; S's positions and global ranks filled). */
void sim_event_resolve(sim_stream *st);
/* Block the calling actor (stream me) until every cross-stream dependency
 * of its task at position i has completed. */
void sim_event_wait_deps(sim_stream *me, uint32_t i);
/* True if every cross-stream dependency of me's task at position i will
 * have completed by time `at` as far as is known now (completed, or
 * scheduled to end by then). */
bool sim_event_ready_by(const sim_stream *me, uint32_t i, double at);
/* Stream st fixed the end times of its tasks up to sched (exclusive): wake
 * the waiters now covered, which then sleep until their task's end. */
void sim_event_scheduled(sim_stream *st, uint32_t sched);
/* Record that `count` more tasks of st completed; wake waiters now due. */
void sim_event_done(sim_stream *st, uint32_t count);

/* ---- sim_flow.c: point-to-point and collective flows ---- */
/* Run the p2p tasks ids[0..n-1] of stream me as one NCCL group: issue every
 * send and recv, then wait for all, recording each task's end. */
void sim_flow_p2p_group(sim_stream *me, const uint32_t *ids, int n);
/* Run one collective task as concurrent point-to-point flows the way NCCL
 * does (all-to-all: pairwise, rotating; ring collectives: to the next
 * member). Records the task's end when all its flows are done. */
void sim_flow_collective(sim_stream *me, const dag_task *t);
/* Run the flows of one collective of `size` bytes (nccl-tests' size) over
 * group g as NCCL would (model/nccl.h): the tuner's or the forced algorithm
 * and protocol, a sleep for the latency its flows do not carry, then every
 * flow of member `me_i` at once. Returns the plan. Used by the DAG's
 * collectives and by `loong coll`. fold: the dimensions run by symmetry
 * that the group spans (0: none): a flow goes to the representative of
 * its peer (mesh_fold: the same GPU of this replica, TP or head rank 0;
 * nccl_member_flows' symmetric pattern), under the head fold none to the
 * sender's own node, and the collective takes at least its idle-platform
 * time. */
nccl_plan sim_flow_nccl(sim_stream *me, const nccl_group *g, int me_i, coll_op op, double size, int algo, int proto,
                        mesh_dims fold);
/* Free the mailbox caches of st. */
void sim_flow_release(sim_stream *st);

/* ---- sim_links.c: routes (around failed links) and per-link byte accounting ---- */
/* Routes between the GPU hosts of pf, around its failed links. */
sim_links *sim_links_new(sim_platform *pf);
/* A pair's path: direct (via < 0), or through GPU host `via` when the
 * direct route crosses a failed link (lat1, lat2: each leg's latency). */
typedef struct sim_path {
    int via;
    double lat1, lat2;
} sim_path;
/* Add `bytes` sent from rank `from` to rank `to` to every link of its
 * path, and return the path (resolved once per pair; call from an actor,
 * after sealing). */
sim_path sim_links_add(sim_links *L, int from, int to, double bytes);
/* With failed links: 0 when every pair of the first n GPU hosts still has
 * a path, else -1 with a message naming a pair left without one (call from
 * an actor). */
int sim_links_check(sim_links *L, int n, char err[LOONG_ERRLEN]);
/* Move the per-link totals into res (busiest first by utilisation). */
void sim_links_collect(sim_links *L, sim_result *res);
void sim_links_free(sim_links *L);

#endif

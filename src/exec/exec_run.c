/*
 * exec_run: one rank's run — start-up checks (rank count, configuration
 * hash), communicators, clock offsets, the timed iterations, the watchdog,
 * the report, --check and --dump, and last the measured trace.
 *
 * Outputs: rank 0 stages the --dump files and the trace in temporaries and
 * commits them together once every rank has come through, so that a run
 * that fails anywhere leaves none of them (where afile has unnamed
 * temporaries, not even when a rank is killed).
 *
 * Faults (fault.h, --fail-rank/--fail-at/--fail-signal): the points are
 * here (start-up, the trace write), in exec_check.c (the --check gather)
 * and in the stream queue (a task). A rank that dies is noticed by mpirun,
 * which ends the others and names it; a rank that stops is noticed by the
 * others' watchdogs, armed over every phase that waits on peers, which name
 * the stopped rank when it runs on their host.
 *
 * Clocks: each rank stamps tasks with CLOCK_MONOTONIC. At start-up rank 0
 * estimates every other rank's offset with ping-pongs (Cristian's method:
 * offset = t_peer - (t_send + t_recv)/2 from the round trip with the
 * smallest delay), and every stamp is moved onto rank 0's clock, relative to
 * rank 0's start of the iteration. Ranks on rank 0's host share its clock:
 * their offset is 0.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/afile.h"
#include "core/stats.h"
#include "core/timeline.h"
#include "core/trace.h"
#include "core/xalloc.h"
#include "exec_state.h"

/* ---- start-up ---- */

static int agree(const world *w, int rc) { return w->max_int(w, rc); }

static int check_world(const world *w, const config *c, int rank, int size)
{
    if (size != config_ranks(c)) {
        char with[40] = "", dims[40] = "";
        if (c->tp > 1 || c->pp > 1)
            snprintf(with, sizeof with, " with%s%s", c->tp > 1 ? " --tp" : "", c->pp > 1 ? " --pp" : "");
        snprintf(dims, sizeof dims, "%s%s", c->tp > 1 ? "tp x " : "", c->pp > 1 ? "pp x " : "");
        if (rank == 0)
            fprintf(stderr,
                    "loong exec: error: mpirun started %d ranks but mesh %dx%d%s needs %sP_h x P_s = %d: use mpirun "
                    "-np %d\n",
                    size, c->p_head, c->p_seq, with, dims, config_ranks(c), config_ranks(c));
        return 2;
    }
    unsigned long long h = config_hash(c),
                       *all = xmalloc_array((size_t)size, sizeof *all, "the ranks' configuration hashes");
    w->allgather(w, &h, sizeof h, all);
    int bad = -1;
    for (int r = 0; r < size && bad < 0; r++)
        if (all[r] != all[0]) bad = r;
    if (bad >= 0 && rank == 0)
        fprintf(stderr,
                "loong exec: error: rank %d has a different configuration than rank 0 (hash %016llx vs %016llx): give "
                "every rank the same flags\n",
                bad, all[bad], all[0]);
    free(all);
    return bad >= 0 ? 2 : 0;
}

/* Offset of this rank's clock from rank 0's (seconds to subtract). */
static double now_of(void *arg)
{
    const xr *x = arg;
    return x->ops->now(x->dev);
}

static double clock_offset(xr *x) { return x->w->clock_offset(x->w, now_of, x); }

/* The group of this rank on stream s among the DAG's communicators, or -1
 * (a stream of point-to-point tasks only). */
static int stream_group(const xr *x, int s)
{
    for (uint32_t gid = 0; gid < dag_ngroups(x->g); gid++) {
        int n;
        const int32_t *mem = dag_group(x->g, gid, &n);
        if (dag_group_stream(x->g, gid) != s) continue;
        for (int i = 0; i < n; i++)
            if (mem[i] == x->rank) return (int)gid;
    }
    return -1;
}

/* One communicator per stream, in stream order on every rank: the DAG's
 * group of this rank on it, else every rank (point-to-point peers are
 * world ranks). */
static int make_comms(xr *x, char err[LOONG_ERRLEN])
{
    int *all = xmalloc_array((size_t)x->P, sizeof *all, "the world communicator");
    for (int r = 0; r < x->P; r++)
        all[r] = r;
    int rc = 0;
    for (int s = 0; s < STREAM_COUNT && rc == 0; s++) {
        int gid = stream_group(x, s), n = x->P;
        const int32_t *mem = gid >= 0 ? dag_group(x->g, (uint32_t)gid, &n) : all;
        x->comm[s] = x->ops->comm(x->dev, s, mem, n, err);
        if (!x->comm[s]) rc = -1;
    }
    free(all);
    return rc;
}

/* ---- watchdog ---- */

/* Where a rank runs: the watchdog looks up the peers on its own host. */
typedef struct peer {
    int pid;
    char host[64];
} peer;

struct watchdog {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    double deadline; /* CLOCK_REALTIME seconds; 0: idle */
    char phase[64];  /* what is armed, for the message */
    bool stop;
    int rank;
    double timeout;
    const world *w;
    const peer *peers; /* every rank's, by rank */
};

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The state letter of process pid from /proc/PID/stat (R, S, D, T stopped,
 * t traced, Z zombie, ...), 'G' when there is no such process, '?' when
 * unknown (no /proc). */
static char proc_state(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return kill(pid, 0) != 0 && errno == ESRCH ? 'G' : '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    return p && p[1] == ' ' && p[2] ? p[2] : '?';
}

/* The peers on this host that are stopped or gone, e.g. "rank 1 (pid 4242)
 * is stopped"; peers on other hosts cannot be seen from here. */
static void suspects(const struct watchdog *w, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    const peer *me = &w->peers[w->rank];
    for (int r = 0; r < w->w->size; r++) {
        const peer *p = &w->peers[r];
        if (r == w->rank || p->pid == me->pid || strcmp(p->host, me->host)) continue;
        char st = proc_state(p->pid);
        const char *what = st == 'T'                             ? "is stopped"
                           : st == 't'                           ? "is stopped by a debugger"
                           : st == 'Z' || st == 'X' || st == 'G' ? "is gone"
                                                                 : NULL;
        if (what && n + 64 < cap)
            n += (size_t)snprintf(out + n, cap - n, "%srank %d (pid %d) %s", n ? ", " : "", r, p->pid, what);
    }
    if (!n) snprintf(out, cap, "a peer may have died or hung");
}

static void *watch(void *arg)
{
    struct watchdog *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec ts;
        double until = w->deadline > 0 ? w->deadline : wall_now() + 1;
        ts.tv_sec = (time_t)until;
        ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        if (!w->stop && w->deadline > 0 && wall_now() > w->deadline) {
            char who[256];
            suspects(w, who, sizeof who);
            fprintf(stderr,
                    "loong exec: rank %d: no progress in %s within %g s (%s): aborting all ranks (raise --timeout "
                    "for long runs)\n",
                    w->rank, w->phase, w->timeout, who);
            fflush(stderr);
            w->w->abort(w->w, 3);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Arm the watchdog for `phase` (NULL: disarm). */
static void watch_arm(struct watchdog *w, const char *phase)
{
    pthread_mutex_lock(&w->mu);
    w->deadline = phase ? wall_now() + w->timeout : 0;
    if (phase) snprintf(w->phase, sizeof w->phase, "%s", phase);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void xr_watch(xr *x, const char *phase)
{
    if (x->wd) watch_arm(x->wd, phase);
}

void xr_fault(const xr *x, fault_at at)
{
    if (x->o->fail_rank == x->rank && x->o->fail_at == at) fault_fire(x->rank, fault_at_name(at), x->o->fail_signal);
}

/* ---- one iteration ---- */

static int wait_deps(xr *x, const dag_task *t, int stream)
{
    const uint32_t *d = dag_deps(x->g, t);
    for (uint16_t k = 0; k < t->ndeps; k++)
        if (devq_wait(x->q, stream, (int)(d[k] - x->base))) return -1;
    return 0;
}

static int launch_all(xr *x)
{
    for (uint32_t i = 0; i < x->ntasks; i++) {
        const dag_task *t = dag_task_get(x->g, x->base + i);
        if (t->kind == TASK_RECV && (t->flags & DAG_F_GROUPED)) continue; /* issued with its send */
        const dag_task *r = t->kind == TASK_SEND && i + 1 < x->ntasks ? dag_task_get(x->g, t->id + 1) : NULL;
        bool grouped = r && r->kind == TASK_RECV && (r->flags & DAG_F_GROUPED) && r->stream == t->stream;
        bool pp = t->stream == STREAM_PP || t->stream == STREAM_PP_GRAD; /* a pipeline send or recv may be alone */
        if (!grouped) r = NULL;
        if ((t->kind == TASK_SEND && !grouped && !pp) || (t->kind == TASK_RECV && !pp)) return -1;
        if (wait_deps(x, t, t->stream) || (r && wait_deps(x, r, t->stream))) return -1;
        if (xr_launch_task(x, t, r)) return -1;
        if (devq_record(x->q, t->stream, (int)i)) return -1;
        if (r && devq_record(x->q, t->stream, (int)(r->id - x->base))) return -1;
    }
    return 0;
}

static void zero_grads(xr *x)
{
    if (x->c->scope != SCOPE_STEP) return;
    float *z = calloc(x->wpad > x->epad ? x->wpad : x->epad, sizeof *z);
    if (z) x->ops->put(x->dev, x->gbuf, z, x->wpad);
    if (z && x->egbuf) x->ops->put(x->dev, x->egbuf, z, x->epad);
    free(z);
}

/* Run one iteration; fills start/end (seconds from rank 0's start, on rank
 * 0's clock) of this rank's tasks and returns the step time (max over
 * ranks), or a negative value on error. */
static double iteration(xr *x, int it, double offset, double *start, double *end, char err[LOONG_ERRLEN])
{
    char phase[32];
    snprintf(phase, sizeof phase, "iteration %d", it);
    xr_watch(x, phase);
    x->ops->reset_events(x->dev);
    zero_grads(x);
    memset(x->o_init, 0, sizeof x->o_init);
    x->cur_layer_o[0] = x->cur_layer_o[1] = x->cur_layer_o[2] = -1;
    x->cur_layer_dq = -1;
    x->w->barrier(x->w);
    double epoch = x->ops->now(x->dev) - offset;
    x->w->bcast(x->w, &epoch, sizeof epoch);
    int rc = launch_all(x);
    if (rc) snprintf(err, LOONG_ERRLEN, "rank %d: could not launch the schedule", x->rank);
    if (x->ops->sync(x->dev, err)) rc = -1;
    if (agree(x->w, rc ? 1 : 0)) {
        xr_watch(x, NULL);
        return -1;
    }
    double last = 0;
    for (uint32_t i = 0; i < x->ntasks; i++) {
        double s, e;
        x->ops->stamps(x->dev, (int)i, &s, &e);
        start[i] = s - offset - epoch;
        end[i] = e - offset - epoch;
        if (end[i] > last) last = end[i];
    }
    double step = last;
    x->w->max_double(x->w, &step, 1);
    xr_watch(x, NULL);
    return step;
}

/* ---- report ---- */

/* Rank 0 gets every task's start and duration (seconds), in id order. */
static int gather_stamps(xr *x, const double *start, const double *end, double **gs, double **gd)
{
    uint32_t n = dag_ntasks(x->g);
    double *s = calloc(n, sizeof *s), *d = calloc(n, sizeof *d);
    *gs = *gd = NULL;
    if (x->rank == 0) {
        *gs = malloc(n * sizeof **gs);
        *gd = malloc(n * sizeof **gd);
    }
    if (!s || !d || (x->rank == 0 && (!*gs || !*gd))) return -1;
    for (uint32_t i = 0; i < x->ntasks; i++) {
        s[x->base + i] = start[i];
        d[x->base + i] = end[i] - start[i];
    }
    x->w->sum_double(x->w, s, *gs, (int)n);
    x->w->sum_double(x->w, d, *gd, (int)n);
    free(s);
    free(d);
    return 0;
}

/* The measured trace, written last: rank 0 writes it to a temporary (an
 * unnamed one where afile can, which even a killed rank leaves no trace
 * of), every rank passes the trace fault point, and all agree. The file
 * is committed with the other outputs (commit_outputs). The step's
 * elementwise kernels (core/elementwise.h) are not run (xr_launch_task)
 * and not written: a duration of nothing would read as a measurement. */
static const trace_filter exec_trace_filter = {-1, -1, TRACE_EXEC_SKIPS};

static int write_trace(xr *x, const double *gs, const double *gd, char err[LOONG_ERRLEN])
{
    int bad = 0;
    xr_watch(x, "the trace write");
    if (x->rank == 0) {
        char backend[64];
        snprintf(backend, sizeof backend, "exec-%s", x->ops->name);
        if (afile_open(&x->trace_out, x->o->trace_path, err) < 0)
            bad = 1;
        else if (trace_write(x->trace_out.f, x->g, backend, gs, gd, &exec_trace_filter, NULL) < 0 ||
                 fflush(x->trace_out.f) != 0) {
            snprintf(err, LOONG_ERRLEN, "write error on '%s'", x->o->trace_path);
            bad = 1;
        }
    }
    xr_fault(x, FAULT_TRACE);
    bad = agree(x->w, bad);
    xr_watch(x, NULL);
    return bad ? -1 : 0;
}

/* Every rank got here (the step before ended in an agreement): rank 0
 * commits the staged outputs (--dump files, then the trace), and all agree
 * on how that went. */
static int commit_outputs(xr *x, int iter, char err[LOONG_ERRLEN])
{
    xr_watch(x, "the output commit");
    int bad = 0;
    if (x->rank == 0) {
        bad = xr_dump_commit(x, err) < 0;
        if (!bad && x->o->trace_path && afile_commit(&x->trace_out, err) < 0) bad = 1;
        if (!bad && x->o->trace_path) printf("# trace: iteration %d -> %s\n", iter, x->o->trace_path);
    }
    bad = agree(x->w, bad);
    xr_watch(x, NULL);
    return bad ? -1 : 0;
}

/* Per rank: compute busy, communication in flight, and how much of it was
 * hidden behind compute, in the reported iteration. */
static void report_overlap(const xr *x, const double *gs, const double *gd, double step)
{
    printf("# %5s %10s %10s %12s %9s\n", "rank", "busy_ms", "comm_ms", "exposed_ms", "hidden_%");
    double comm = 0, exposed = 0;
    for (int r = 0; r < x->P; r++) {
        rank_timeline tl;
        timeline_rank(x->g, gs, gd, r, step, &tl);
        comm += tl.comm;
        exposed += tl.exposed;
        printf("  %5d %10.3f %10.3f %12.3f %9.1f\n", r, tl.busy * 1e3, tl.comm * 1e3, tl.exposed * 1e3,
               tl.comm > 0 ? 100 * (1 - tl.exposed / tl.comm) : 100.0);
    }
    printf("# communication hidden behind compute: %.1f %% (all ranks)\n",
           comm > 0 ? 100 * (1 - exposed / comm) : 100.0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The per-iteration table, then the median and the fastest timed
 * iteration: scripts read both lines. */
static void report(const xr *x, const double *steps, int n, int median_iter, int fastest_iter)
{
    if (x->rank != 0) return;
    char desc[256];
    config_describe(x->c, desc, sizeof desc);
    printf("# loong exec: %s\n# device %s, %d ranks, seed %llu\n", desc, x->ops->name, x->P,
           (unsigned long long)x->o->seed);
    printf("# %5s %12s\n", "iter", "step_ms");
    for (int i = 0; i < n; i++)
        printf("  %5d %12.3f%s\n", i, steps[i] * 1e3, i < x->o->warmup ? "  (warm-up)" : "");
    double tok = config_step_tokens(x->c);
    printf("# median step %.3f ms (iteration %d); %.0f tokens/s/rank\n", steps[median_iter] * 1e3, median_iter,
           tok / steps[median_iter] / x->P);
    printf("# fastest step %.3f ms (iteration %d)\n", steps[fastest_iter] * 1e3, fastest_iter);
}

/* The timed iteration whose step is `v`. */
static int iteration_of(const xr *x, const double *steps, double v)
{
    int i = x->o->warmup;
    while (steps[i] != v)
        i++;
    return i;
}

/* The reported iteration's stamps, on rank 0, for the trace (written last). */
typedef struct measured {
    double *gs, *gd; /* every task's start and duration (rank 0; NULL elsewhere) */
    int iter;
} measured;

static int run_iterations(xr *x, double offset, measured *m, char err[LOONG_ERRLEN])
{
    int total = x->o->warmup + x->o->iters;
    double *st = calloc((size_t)total * x->ntasks + 1, sizeof *st),
           *en = calloc((size_t)total * x->ntasks + 1, sizeof *en);
    double *steps = calloc((size_t)total, sizeof *steps), *sorted = calloc((size_t)total, sizeof *sorted);
    if (!st || !en || !steps || !sorted) return -1;
    int rc = 0;
    for (int i = 0; i < total && rc == 0; i++) {
        steps[i] = iteration(x, i, offset, st + (size_t)i * x->ntasks, en + (size_t)i * x->ntasks, err);
        if (steps[i] < 0) rc = -1;
    }
    if (rc == 0) {
        memcpy(sorted, steps + x->o->warmup, (size_t)x->o->iters * sizeof *sorted);
        qsort(sorted, (size_t)x->o->iters, sizeof *sorted, cmp_double);
        int median = iteration_of(x, steps, sorted[(x->o->iters - 1) / 2]);
        int fastest = iteration_of(x, steps, sorted[0]);
        int mi = x->o->trace_fastest ? fastest : median;
        report(x, steps, total, median, fastest);
        xr_watch(x, "the report");
        rc = agree(x->w,
                   gather_stamps(x, st + (size_t)mi * x->ntasks, en + (size_t)mi * x->ntasks, &m->gs, &m->gd) ? 1 : 0)
                 ? -1
                 : 0;
        xr_watch(x, NULL);
        m->iter = mi;
        if (rc == 0 && x->rank == 0) report_overlap(x, m->gs, m->gd, steps[mi]);
    }
    free(st);
    free(en);
    free(steps);
    free(sorted);
    return rc;
}

/* The layouts P_h = 1 leaves unchanged until a consumer asks (attn scopes
 * have none after the ring), for --check and --dump. */
static int finish_layouts(xr *x, char err[LOONG_ERRLEN])
{
    if (x->c->p_head == 1 && x->c->scope != SCOPE_STEP) {
        if (xr_local_layout(x, STREAM_COMP, OP_A2A_O, 0)) return -1;
        if (x->c->scope == SCOPE_ATTN && xr_local_layout(x, STREAM_COMP, OP_A2A_DQKV, 0)) return -1;
    }
    if (x->c->scope == SCOPE_STEP && xr_gather_grads(x)) return -1;
    return x->ops->sync(x->dev, err) ? -1 : 0;
}

/* With P_h = 1 and an attn scope, the inputs go straight to the head-sharded
 * layouts the ring reads (no all-to-all task does it). */
static int prepare_inputs(xr *x, char err[LOONG_ERRLEN])
{
    if (x->c->p_head > 1 || x->c->scope == SCOPE_STEP) return 0;
    if (xr_local_layout(x, STREAM_COMP, OP_A2A_QKV, 0) || xr_local_layout(x, STREAM_COMP, OP_A2A_DO, 0)) return -1;
    return x->ops->sync(x->dev, err) ? -1 : 0;
}

/* A fault must fire: --fail-rank R names a rank of the mesh, task:T a task
 * of rank R, and check and trace a phase this run has. */
static int check_fault(const dag *g, const exec_opts *o, char err[LOONG_ERRLEN])
{
    if (o->fail_rank < 0) return 0;
    int P = config_ranks(dag_config(g));
    uint32_t n = dag_ntasks(g);
    if (o->fail_rank >= P) {
        snprintf(err, LOONG_ERRLEN, "--fail-rank %d is not a rank of this mesh (ranks 0..%d): choose one below %d",
                 o->fail_rank, P - 1, P);
        return -1;
    }
    if (o->fail_at == FAULT_CHECK && !o->check) {
        snprintf(err, LOONG_ERRLEN,
                 "--fail-at check fires in the --check gather, and this run has no --check: add "
                 "--check or choose another point");
        return -1;
    }
    if (o->fail_at == FAULT_TRACE && !o->trace_path) {
        snprintf(err, LOONG_ERRLEN,
                 "--fail-at trace fires while the trace is written, and this run has no --trace: "
                 "add --trace FILE or choose another point");
        return -1;
    }
    if (o->fail_at != FAULT_TASK) return 0;
    if (o->fail_task < 0 || (uint32_t)o->fail_task >= n) {
        snprintf(err, LOONG_ERRLEN,
                 "--fail-at task:%d is not a task of this configuration (ids 0..%u): pick one from loong dag "
                 "--format json",
                 o->fail_task, n - 1);
        return -1;
    }
    int owner = dag_task_get(g, (uint32_t)o->fail_task)->rank;
    if (owner != o->fail_rank) {
        snprintf(err, LOONG_ERRLEN,
                 "--fail-at task:%d runs on rank %d, not on --fail-rank %d: use --fail-rank %d or a task of rank %d",
                 o->fail_task, owner, o->fail_rank, owner, o->fail_rank);
        return -1;
    }
    return 0;
}

int exec_run(const config *c, const dev_ops *ops, const exec_opts *o)
{
    world w = world_mpi();
    return exec_run_world(c, ops, o, &w);
}

/* Start-up after the checks: the device, buffers, communicators, inputs
 * and clock offsets, the last three under the watchdog. Returns 0, or 2
 * on every rank (the failing ones print). */
static int start_up(xr *x, double *offset, char err[LOONG_ERRLEN])
{
    x->dev = x->ops->open(x->rank, STREAM_COUNT, (int)x->ntasks, err);
    if (x->dev) x->q = x->ops->queue(x->dev);
    int rc = x->dev && xr_alloc(x, err) == 0 ? 0 : 2, any = agree(x->w, rc);
    if (!any) { /* every rank makes the communicators, or none */
        xr_watch(x, "start-up");
        xr_fault(x, FAULT_START);
        if (make_comms(x, err) || xr_inputs(x) || prepare_inputs(x, err)) rc = 2;
        any = agree(x->w, rc);
        if (!any) *offset = clock_offset(x);
        /* the stamps are CLOCK_MONOTONIC (dev_ops.now), one clock per host:
         * a rank on rank 0's host is exactly on rank 0's clock, where the
         * estimate errs by up to half a round trip (on 2 busy cores, enough
         * to stamp a task before the iteration's start) */
        if (!any && x->wd && !strcmp(x->wd->peers[x->rank].host, x->wd->peers[0].host)) *offset = 0;
        xr_watch(x, NULL);
    }
    if (!any) return 0;
    if (rc) fprintf(stderr, "loong exec: error: %s\n", err[0] ? err : "start-up failed");
    return 2;
}

int exec_run_world(const config *c, const dev_ops *ops, const exec_opts *o, const world *wd)
{
    int rank = wd->rank, size = wd->size;
    int rc = agree(wd, check_world(wd, c, rank, size));
    if (rc) return rc;
    char err[LOONG_ERRLEN] = "";
    xr x;
    memset(&x, 0, sizeof x);
    x.c = c;
    x.ops = ops;
    x.o = o;
    x.w = wd;
    x.rank = rank;
    dag *g = dag_build(c, err);
    x.g = g;
    if (agree(wd, g && check_fault(g, o, err) == 0 ? 0 : 2)) {
        if (rank == 0) fprintf(stderr, "loong exec: error: %s\n", err);
        dag_free(g);
        return 2;
    }
    uint32_t n;
    x.base = UINT32_MAX;
    for (int s = 0; s < STREAM_COUNT; s++) {
        const uint32_t *ids = dag_stream_tasks(x.g, rank, s, &n);
        for (uint32_t k = 0; k < n; k++) {
            if (ids[k] < x.base) x.base = ids[k];
            x.ntasks++;
        }
    }
    peer *peers = calloc((size_t)size, sizeof *peers), me = {.pid = (int)getpid()};
    if (agree(wd, peers ? 0 : 2)) {
        if (!peers)
            fprintf(stderr, "loong exec: error: rank %d: out of memory for the table of %d ranks\n", rank, size);
        free(peers);
        dag_free(g);
        return 2;
    }
    gethostname(me.host, sizeof me.host - 1);
    wd->allgather(wd, &me, sizeof me, peers);
    struct watchdog w = {.rank = rank, .timeout = o->timeout_s, .w = wd, .peers = peers};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    pthread_create(&w.th, NULL, watch, &w);
    x.wd = &w;
    double offset = 0;
    measured m = {NULL, NULL, 0};
    rc = start_up(&x, &offset, err);
    if (rc == 0) {
        rc = run_iterations(&x, offset, &m, err) ? 2 : 0;
        if (rc == 0 && (o->check || o->dump_dir)) {
            xr_watch(&x, "the --check/--dump layouts");
            rc = agree(wd, finish_layouts(&x, err) ? 2 : 0);
            xr_watch(&x, NULL);
        }
        if (rc == 0 && o->check) rc = agree(wd, xr_check(&x));
        if (rc == 0 && o->dump_dir) {
            xr_watch(&x, "the --dump gather");
            rc = agree(wd, xr_dump(&x, o->dump_dir, err) ? 2 : 0);
            xr_watch(&x, NULL);
        }
        /* last, so that a run that fails before leaves none; a --check above
         * tolerance (1) still gets its trace */
        if (rc <= 1 && o->trace_path && write_trace(&x, m.gs, m.gd, err)) rc = 2;
        if (rc <= 1 && (o->trace_path || o->dump_dir) && commit_outputs(&x, m.iter, err)) rc = 2;
        if (rc == 2 && err[0]) fprintf(stderr, "loong exec: error: %s\n", err);
    }
    afile_abort(&x.trace_out); /* what was not committed */
    for (int i = 0; i < x.ndump; i++)
        afile_abort(&x.dump_out[i]);
    pthread_mutex_lock(&w.mu);
    w.stop = true;
    pthread_cond_signal(&w.cv);
    pthread_mutex_unlock(&w.mu);
    pthread_join(w.th, NULL);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    free(m.gs);
    free(m.gd);
    free(peers);
    if (x.dev) ops->close(x.dev);
    xr_free(&x);
    dag_free(g);
    return rc;
}

/*
 * sim_actor: one SimGrid actor per (rank, stream) with tasks, walking
 * dag_stream_tasks() in order like a CUDA stream. Before a task it waits
 * for the task's cross-stream events (sim_event.c); a compute task then
 * sleeps for its calibrated duration (the GPU runs one kernel stream, so a
 * sleep is exact and cheaper than a SimGrid exec). Compute durations are
 * fixed, so the compute stream schedules a whole run of kernels whose
 * events are already satisfied and sleeps through it in one call: the same
 * timings with a fraction of the SimGrid activities. Communication goes
 * through sim_flow.c. A task flagged DAG_F_GROUPED joins the task before it
 * in one NCCL group.
 */
#include <simgrid/actor.h>
#include <simgrid/engine.h>
#include <simgrid/exec.h>
#include <simgrid/host.h>
#include <simgrid/semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "sim_internal.h"
#include "sim_s4u.h"
#include "core/xalloc.h"

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(loong_sim_actor, loong, "loong sim: stream actors");

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A line on stderr every 2 s of wall time, so long runs show life. */
static void progress(sim_state *S, uint32_t k)
{
    uint64_t before = S->completed;
    S->completed += k;
    if (!S->progress || (before >> 15) == (S->completed >> 15)) return;
    double now = wall_now();
    if (now - S->last_report < 2.0) return;
    S->last_report = now;
    uint64_t n = (uint64_t)dag_ntasks(S->g) * (uint64_t)S->reps;
    /* the representatives' tasks run (a folded DAG holds only theirs) */
    n /= (uint64_t)mesh_group_size(&S->mesh, S->folded & SIM_FOLD_COPIED & ~dag_folded(S->g));
    fprintf(stderr, "loong sim: %llu of %llu tasks (%.0f%%), simulated %.3f s, wall %.1f s\n",
            (unsigned long long)S->completed, (unsigned long long)n, 100.0 * (double)S->completed / (double)n,
            simgrid_get_clock(), now - S->wall0);
}

/* A kernel's calibrated time, times its jitter draw (sim_run). */
static double kernel_seconds(const sim_stream *me, const dag_task *x)
{
    double d = calib_task_seconds(me->S->cb, me->S->c, me->S->tiles, x);
    return me->S->jitter ? d * me->S->jitter[me->off + x->id] : d;
}

/* Run the compute task at position i and every following compute task
 * that is ready when its predecessor ends (with S->coalesce); returns how
 * many ran. Exact: without interference a kernel's duration does not
 * depend on when it starts (its calibrated time, times its jitter draw and
 * its host's straggler factor, all fixed per task), and a kernel whose
 * events are all due by its predecessor's end starts at that end, as it
 * would after a sleep of its own. Tasks of other streams that wait on a
 * kernel of the run sleep until its known end (sim_event_scheduled). */
static uint32_t run_compute(sim_stream *me, uint32_t i)
{
    sim_state *S = me->S;
    double t = simgrid_get_clock();
    uint32_t k = i;
    do {
        const dag_task *x = dag_task_get(S->g, me->ids[k]);
        double d = kernel_seconds(me, x) * (S->faults->kscale ? S->faults->kscale[sim_gpu(S, me->rank)] : 1);
        S->start[me->off + x->id] = t;
        S->dur[me->off + x->id] = d;
        t += d;
        k++;
    } while (S->coalesce && k < me->n && task_is_compute(dag_task_get(S->g, me->ids[k])) &&
             sim_event_ready_by(me, k, t));
    sim_event_scheduled(me, k);
    S->compute_runs++;
    if (t - simgrid_get_clock() >= SIM_MIN_SLEEP) sg_actor_sleep_until(t);
    return k - i;
}

/* With interference (calib.h) kernels are SimGrid executions on the GPU
 * host, one at a time, weighted 1/F against one unit-weight execution that
 * runs while any communication kernel is in flight on that GPU: a kernel
 * runs (1 + F) slower while communication overlaps it, at full speed
 * otherwise. On one shared GPU (S->one_gpu) every rank's kernels run
 * there, dividing its speed; the actors stay on their own GPUs, where
 * their transfers start. */
static uint32_t run_compute_shared(sim_stream *me, uint32_t i)
{
    sim_state *S = me->S;
    const dag_task *x = dag_task_get(S->g, me->ids[i]);
    /* a straggler's host runs slower by its speed profile (sim_whatif.c) */
    double d = kernel_seconds(me, x), f = calib_interference(S->cb, x->kind);
    double t0 = simgrid_get_clock();
    S->start[me->off + x->id] = t0;
    S->compute_runs++;
    double prio = f > 0 ? 1 / f : 1e12;
    if (d > 0 && S->one_gpu) { /* T0 is latency; only the work shares the GPU (calib_task_t0) */
        double lat = calib_task_t0(S->cb, S->c, x);
        if (lat > d) lat = d;
        if (lat >= SIM_MIN_SLEEP) sg_actor_sleep_for(lat);
        if (d - lat > 0) sim_s4u_execute_on(S->one_gpu, (d - lat) * sg_host_get_speed(S->one_gpu), prio);
    } else if (d > 0)
        sg_actor_execute_with_priority(d * sg_host_get_speed(sim_host_of(S, me->rank)), prio);
    S->dur[me->off + x->id] = simgrid_get_clock() - t0;
    return 1;
}

/* Communication's share of its GPU from its first kernel in flight to its
 * last (an execution without end, cancelled then). */
static void comm_kernel_begin(const sim_stream *me)
{
    sim_state *S = me->S;
    if (!S->interference || S->comm_active[me->rank]++) return;
    S->comm_share[me->rank] = sg_actor_exec_init(1e300);
    if (S->one_gpu) sg_exec_set_host(S->comm_share[me->rank], S->one_gpu);
    sg_exec_start(S->comm_share[me->rank]);
}

static void comm_kernel_end(const sim_stream *me)
{
    sim_state *S = me->S;
    if (S->interference && --S->comm_active[me->rank] == 0) sg_exec_cancel(S->comm_share[me->rank]);
}

static void stream_main(int argc, char **argv)
{
    xbt_assert(argc <= 1, "stream actors take no arguments (their stream is in the actor data)");
    (void)argv;
    sim_stream *me = sg_actor_self_get_data();
    sim_state *S = me->S;
    for (uint32_t i = 0; i < me->n;) {
        const dag_task *t = dag_task_get(S->g, me->ids[i]);
        uint32_t k = 1;
        while (i + k < me->n && (dag_task_get(S->g, me->ids[i + k])->flags & DAG_F_GROUPED))
            k++;
        for (uint32_t j = 0; j < k; j++)
            sim_event_wait_deps(me, i + j);
        if (task_is_compute(t)) {
            k = S->interference || S->one_gpu ? run_compute_shared(me, i) : run_compute(me, i);
        } else {
            comm_kernel_begin(me);
            if (task_is_p2p(t))
                sim_flow_p2p_group(me, &me->ids[i], (int)k);
            else
                sim_flow_collective(me, t);
            comm_kernel_end(me);
        }
        sim_event_done(me, k);
        progress(S, k);
        i += k;
    }
    XBT_VERB("rank %d %s: %u tasks done at %.9f s", me->rank, stream_name(me->stream), me->n, simgrid_get_clock());
}

/* GPU hosts the simulated ranks reach: every replica's, or replica 0's
 * (its ranks' GPUs: config_gpu_of, beyond P when dp varies faster than pp). */
static int gpus_needed(const config *c, bool every_replica)
{
    int P = config_ranks(c), need = every_replica ? config_world(c) : P;
    for (int r = 0; !every_replica && r < P; r++)
        if (config_gpu_of(c, r) >= need) need = config_gpu_of(c, r) + 1;
    return need;
}

static int check_mapping(sim_platform *pf, const config *c, bool every_replica, char err[LOONG_ERRLEN])
{
    int P = config_ranks(c), have = sim_platform_gpus(pf), gpn = sim_platform_gpus_per_node(pf);
    int need = gpus_needed(c, every_replica);
    mesh gm = config_gpu_mesh(c);
    if (have < need) {
        snprintf(err, LOONG_ERRLEN,
                 "the platform has %d GPU hosts but the configuration needs %d ranks: use a larger topology "
                 "(loong topo --nodes %d) or a smaller --mesh%s",
                 have, need, (need + gpn - 1) / gpn, every_replica ? " or --fold dp (alias --dp-mode symmetric)" : "");
        return -1;
    }
    if (c->dp > 1 && !sim_platform_nccl_spec(pf)) {
        snprintf(err, LOONG_ERRLEN,
                 "--dp needs a platform that runs NCCL's collectives (loong topo --gpu "
                 "h100|h200|b200|b300|gb200|gb300|a100|a100-pcie): its gradient collectives span every replica");
        return -1;
    }
    int block = mesh_stride(&gm, MESH_DP); /* the GPUs one replica holds side by side */
    if (c->dp > 1 && !every_replica && block % gpn) {
        snprintf(err, LOONG_ERRLEN,
                 "folding dp (--fold dp, alias --dp-mode symmetric) needs whole nodes per replica%s (%d rank(s) on "
                 "%d-GPU nodes): use --fold none (--dp-mode full) on a platform of %d GPUs",
                 block == P ? "" : "'s stage (dp before pp puts a stage's replicas side by side)", block, gpn,
                 config_world(c));
        return -1;
    }
    if (gpn != c->gpus_per_node) {
        snprintf(err, LOONG_ERRLEN,
                 "the platform has %d GPUs per node but --gpus-per-node is %d: they must agree for rank placement", gpn,
                 c->gpus_per_node);
        return -1;
    }
    return 0;
}

/* Every stream's tasks and every task's position, then the actors: an
 * actor started from another actor (sim_start_checked, with failed links)
 * may run before the spawning loop ends, and its first cross-stream wait
 * reads the positions of tasks on streams spawned after it. */
static void spawn(sim_state *S)
{
    for (int g = 0; g < S->reps * S->P; g++)
        for (int s = 0; s < STREAM_COUNT && sim_rank_runs(S, g); s++) {
            sim_stream *st = sim_stream_of(S, g, s);
            int r = mesh_fold(&S->mesh, MESH_BIT(MESH_DP), g);
            st->S = S;
            st->rank = g;
            st->rep = mesh_group_index(&S->mesh, MESH_BIT(MESH_DP), g);
            st->off = (uint32_t)st->rep * dag_ntasks(S->g);
            st->stream = s;
            st->ids = dag_stream_tasks(S->g, r, s, &st->n);
            for (uint32_t i = 0; i < st->n; i++)
                S->pos[st->ids[i]] = i;
            if (st->n) st->sem = sg_sem_init(0);
        }
    for (int g = 0; g < S->reps * S->P; g++)
        for (int s = 0; s < STREAM_COUNT && sim_rank_runs(S, g); s++)
            if (sim_stream_of(S, g, s)->n) sim_event_resolve(sim_stream_of(S, g, s));
    free(S->pos); /* resolved: the largest array but two, no longer read */
    S->pos = NULL;
    for (int g = 0; g < S->reps * S->P; g++)
        for (int s = 0; s < STREAM_COUNT && sim_rank_runs(S, g); s++) {
            sim_stream *st = sim_stream_of(S, g, s);
            if (!st->n) continue;
            char name[48];
            snprintf(name, sizeof name, "r%d.%s", g, stream_name(s));
            sg_actor_t a = sg_actor_init(name, sim_host_of(S, g));
            sg_actor_set_data(a, st);
            sg_actor_start(a, stream_main, 0, NULL);
        }
}

/* With failed links, the pairs' paths are checked from an actor (routes
 * exist once the platform is sealed) before anything starts. */
typedef struct checked_start {
    sim_state *S;
    int n;
    void (*start)(void *);
    void *arg;
    char *err;
} checked_start;

static void check_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    checked_start *cs = sg_actor_self_get_data();
    if (sim_links_check(cs->S->links, cs->n, cs->err) == 0) cs->start(cs->arg);
}

int sim_start_checked(sim_state *S, sg_host_t where, int n, void (*start)(void *), void *arg, char err[LOONG_ERRLEN])
{
    err[0] = '\0';
    if (!S->faults || !S->faults->noff) {
        start(arg);
        simgrid_run();
        return 0;
    }
    checked_start cs = {S, n, start, arg, err};
    sg_actor_t a = sg_actor_init("route-check", where);
    sg_actor_set_data(a, &cs);
    sg_actor_start(a, check_main, 0, NULL);
    simgrid_run();
    return err[0] ? -1 : 0;
}

static void spawn_streams(void *S) { spawn(S); }

/* Per (replica, task): lognormal factors of mean 1 (whatif.h), drawn in
 * task order from the seed, so a run is the same whatever SimGrid's
 * actor order. */
static double *draw_jitter(const sim_state *S, size_t n)
{
    const whatif *w = &S->faults->w;
    if (!(w->jitter > 0)) return NULL;
    double mu, sigma, *f = xmalloc_array(n ? n : 1, sizeof *f, "the jitter draws");
    whatif_lognormal_params(w->jitter, &mu, &sigma);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (!r) xalloc_die(0, "the jitter's generator");
    gsl_rng_set(r, (unsigned long)w->seed);
    for (size_t i = 0; i < n; i++)
        f[i] = gsl_ran_lognormal(r, mu, sigma);
    gsl_rng_free(r);
    return f;
}

/* After the run: every stream must have finished, else the DAG deadlocked. */
static int check_finished(sim_state *S, char err[LOONG_ERRLEN])
{
    for (int i = 0; i < S->reps * S->P * STREAM_COUNT; i++) {
        sim_stream *st = &S->streams[i];
        if (st->done < st->n) {
            snprintf(err, LOONG_ERRLEN,
                     "simulation deadlocked: rank %d stream %s stopped before task %u (%u of %u done); this is a "
                     "bug in the DAG or the backend",
                     st->rank, stream_name(st->stream), st->ids[st->done], st->done, st->n);
            return -1;
        }
    }
    return 0;
}

static void release(sim_state *S)
{
    for (int i = 0; S->streams && i < S->reps * S->P * STREAM_COUNT; i++) {
        if (S->streams[i].sem) sg_sem_destroy(S->streams[i].sem);
        sim_flow_release(&S->streams[i]);
        free(S->streams[i].deps);
        free(S->streams[i].dep_at);
    }
    free(S->grank);
    free(S->streams);
    tiles_free(S->tiles);
    free(S->pos);
    for (uint32_t i = 0; S->groups && i < (uint32_t)S->reps * dag_ngroups(S->g); i++)
        nccl_group_free(&S->groups[i]);
    free(S->groups);
    free(S->comm_active);
    free(S->comm_share);
    free(S->jitter);
    sim_links_free(S->links);
}

/* The replicas: their mesh, how many run, and the platform their
 * gradient groups take (with as many nodes as every replica's ranks; by
 * symmetry they need not exist); the dimensions run by symmetry; and
 * each (replica, DAG rank)'s global rank, looked up by every flow and
 * dependency. */
static void dp_setup(sim_state *S, bool every_replica, mesh_dims copied)
{
    S->mesh = config_mesh(S->c);
    S->dp = S->c->dp;
    S->reps = every_replica ? S->dp : 1;
    S->folded = (S->reps < S->dp ? MESH_BIT(MESH_DP) : 0) | copied;
    if (S->spec) S->dp_spec = nccl_spec_holding(S->spec, mesh_size(&S->mesh), 0);
    S->grank = xmalloc_array((size_t)S->reps * (size_t)S->P, sizeof *S->grank, "the simulation's ranks");
    for (int rep = 0; rep < S->reps; rep++)
        for (int r = 0; r < S->P; r++)
            S->grank[rep * S->P + r] = mesh_unfold(&S->mesh, MESH_BIT(MESH_DP), r, rep);
}

/* TP by symmetry: what it needs (sim.h, "folding"). */
static int check_tp_fold(const sim_state *S, char err[LOONG_ERRLEN])
{
    const config *c = S->c;
    const char *why = c->tp < 2                ? "there is no TP group (--tp 1)"
                      : !S->spec               ? "it takes NCCL's time of a collective, and this platform runs none"
                      : c->tp_overlap          ? "--tp-overlap's ring steps are p2p between the TP ranks"
                      : config_tp_nodes(c) > 1 ? "a TP group spans nodes, whose NICs its members share"
                      : config_ep_breaks_tp_fold(c)
                          ? "the experts' groups span TP ranks (--expert-tp below --tp, or "
                            "--dispatcher allgather), which then run different expert programs"
                      : S->spec->sockets > 1 ? "the GPUs of a socket share its link to the others, so the folded TP "
                                               "ranks' traffic would be missing there"
                                             : platform_spec_rails_shared(S->spec);
    if (!why) return 0;
    snprintf(err, LOONG_ERRLEN,
             "folding tp (--fold tp, alias --tp-mode symmetric): %s; leave tp out of --fold (--tp-mode full)", why);
    return -1;
}

/* Head (Ulysses) ranks by symmetry: what it needs (sim.h, "folding"). */
static int check_head_fold(const sim_state *S, char err[LOONG_ERRLEN])
{
    const config *c = S->c;
    const char *why = c->p_head < 2          ? "there is no head group (P_head 1)"
                      : !S->spec             ? "it takes NCCL's time of the all-to-all, and this platform runs none"
                      : S->spec->sockets > 1 ? "the GPUs of a socket share its link to the others"
                      : config_moe(c) && c->ep > 1
                          ? "the experts' groups span head ranks, which then hold different experts"
                          : platform_spec_rails_shared(S->spec);
    if (!why) return 0;
    snprintf(err, LOONG_ERRLEN, "folding head (--fold head): %s; leave head out of --fold", why);
    return -1;
}

/* Ring (seq) ranks by symmetry: what it needs (sim.h, "folding"). */
static int check_seq_fold(const sim_state *S, char err[LOONG_ERRLEN])
{
    const char *why = config_ring_asymmetry(S->c);
    if (!why)
        why = !S->spec               ? "it takes NCCL's time of a collective, and this platform runs none"
              : S->spec->sockets > 1 ? "the GPUs of a socket share its link to the others"
                                     : platform_spec_rails_shared(S->spec);
    if (!why) return 0;
    snprintf(err, LOONG_ERRLEN, "folding seq (--fold seq): %s; leave seq out of --fold", why);
    return -1;
}

/* Every folded TP, head or ring rank's tasks take its representative's times,
 * task for task along each stream (their programs are the same). */
static void unfold_copies(sim_state *S, uint32_t n)
{
    mesh_dims copied = S->folded & SIM_FOLD_COPIED;
    if (!copied) return;
    for (int rep = 0; rep < S->reps; rep++)
        for (int r = 0; r < S->P; r++) {
            int r0 = mesh_fold(&S->mesh, copied, r);
            if (r0 == r) continue;
            size_t off = (size_t)rep * n;
            for (int s = 0; s < STREAM_COUNT; s++) {
                uint32_t k, k0;
                const uint32_t *ids = dag_stream_tasks(S->g, r, s, &k), *ids0 = dag_stream_tasks(S->g, r0, s, &k0);
                for (uint32_t i = 0; i < k && i < k0; i++) {
                    S->start[off + ids[i]] = S->start[off + ids0[i]];
                    S->dur[off + ids[i]] = S->dur[off + ids0[i]];
                }
            }
        }
}

/* A fold is exact only while the copies it skips run alike; a perturbation
 * that makes them differ (whatif_breaks_fold) turns it off, so a folded run
 * never returns the clean step for a perturbed cluster. loong sim decides
 * this first and says so (or refuses); this keeps every caller right. */
static mesh_dims unfold_perturbed(const sim_faults *F, const config *c, mesh_dims folded)
{
    mesh m = config_mesh(c);
    char why[LOONG_ERRLEN];
    if ((folded & MESH_BIT(MESH_DP)) && whatif_breaks_fold(&F->w, &m, MESH_DP, why, sizeof why)) {
        XBT_VERB("data-parallel replicas simulated in full: %s", why);
        folded &= ~MESH_BIT(MESH_DP);
    }
    if ((folded & MESH_BIT(MESH_TP)) && whatif_breaks_fold(&F->w, &m, MESH_TP, why, sizeof why)) {
        XBT_VERB("TP ranks simulated in full: %s", why);
        folded &= ~MESH_BIT(MESH_TP);
    }
    if ((folded & MESH_BIT(MESH_HEAD)) && whatif_breaks_fold(&F->w, &m, MESH_HEAD, why, sizeof why)) {
        XBT_VERB("head ranks simulated in full: %s", why);
        folded &= ~MESH_BIT(MESH_HEAD);
    }
    if ((folded & MESH_BIT(MESH_SEQ)) && whatif_breaks_fold(&F->w, &m, MESH_SEQ, why, sizeof why)) {
        XBT_VERB("ring ranks simulated in full: %s", why);
        folded &= ~MESH_BIT(MESH_SEQ);
    }
    return folded;
}

/* Runs of ready kernels are slept through in one call unless the
 * environment says LOONG_SIM_COALESCE=0 (docs/sim.md: for the test that
 * proves them exact, and to debug the simulator one kernel at a time). */
static bool coalesce_on(void)
{
    const char *v = getenv("LOONG_SIM_COALESCE");
    return !v || strcmp(v, "0") != 0;
}

/* Keep replica 0's times (the trace's and the summary's; every replica
 * runs the same program) and the makespan over all replicas. */
static void collect_times(sim_state *S, uint32_t n, sim_result *res)
{
    for (uint64_t i = 0; i < (uint64_t)n * (uint64_t)S->reps; i++)
        if (S->start[i] + S->dur[i] > res->makespan) res->makespan = S->start[i] + S->dur[i];
    res->start = xrealloc_array(S->start, n ? n : 1, sizeof *res->start, "the simulated start times");
    res->dur = xrealloc_array(S->dur, n ? n : 1, sizeof *res->dur, "the simulated durations");
}

int sim_run(sim_platform *pf, const dag *g, const calib *cb, bool progress_on, mesh_dims folded, sim_result *res,
            char err[LOONG_ERRLEN])
{
    memset(res, 0, sizeof *res);
    if (sim_fold_check(folded, err) < 0) return -1;
    const config *c = dag_config(g);
    folded = unfold_perturbed(sim_platform_faults(pf), c, folded);
    bool every_replica = !(folded & MESH_BIT(MESH_DP));
    if (dag_folded(g) & ~folded) {
        snprintf(err, LOONG_ERRLEN,
                 "the DAG holds the representatives' tasks only (built folded over %s), and those ranks are not "
                 "folded here: build it whole (dag_build)",
                 dag_folded(g) & ~folded & MESH_BIT(MESH_TP)     ? "tp"
                 : dag_folded(g) & ~folded & MESH_BIT(MESH_HEAD) ? "head"
                                                                 : "seq");
        return -1;
    }
    if (check_mapping(pf, c, every_replica, err) < 0) return -1;
    uint32_t n = dag_ntasks(g);
    int P = config_ranks(c);
    sim_state S = {.g = g, .c = c, .cb = cb, .hosts = sim_platform_hosts(pf), .progress = progress_on, .P = P};
    S.spec = sim_platform_nccl_spec(pf);
    S.tiles = tiles_new(cb, c);
    S.interference = calib_has_interference(cb);
    if (sim_platform_one_gpu(pf)) {
        if (folded) {
            snprintf(err, LOONG_ERRLEN, "ranks sharing one GPU are simulated in full: fold none");
            tiles_free(S.tiles);
            return -1;
        }
        S.one_gpu = S.hosts[0];
    }
    S.coalesce = coalesce_on();
    dp_setup(&S, every_replica, folded & SIM_FOLD_COPIED);
    if (((folded & MESH_BIT(MESH_TP)) && check_tp_fold(&S, err) < 0) ||
        ((folded & MESH_BIT(MESH_HEAD)) && check_head_fold(&S, err) < 0) ||
        ((folded & MESH_BIT(MESH_SEQ)) && check_seq_fold(&S, err) < 0)) {
        tiles_free(S.tiles);
        free(S.grank);
        return -1;
    }
    size_t reps = (size_t)S.reps;
    if (S.interference) {
        S.comm_active = xcalloc(reps * (size_t)P, sizeof *S.comm_active, "the communication kernels");
        S.comm_share = xcalloc(reps * (size_t)P, sizeof *S.comm_share, "the communication kernels");
    }
    S.streams = xcalloc(reps * (size_t)P * STREAM_COUNT, sizeof *S.streams, "the simulation's streams");
    S.pos = xmalloc_array(n, sizeof *S.pos, "the simulation's tasks");
    S.start = xcalloc(reps * n, sizeof *S.start, "the simulated start times");
    S.dur = xcalloc(reps * n, sizeof *S.dur, "the simulated durations");
    S.links = sim_links_new(pf);
    S.faults = sim_platform_faults(pf);
    S.jitter = draw_jitter(&S, reps * n);
    if (S.spec) S.groups = xcalloc(reps * dag_ngroups(g) + 1, sizeof *S.groups, "the collective groups");
    S.wall0 = S.last_report = wall_now();
    int rc = sim_start_checked(&S, S.hosts[0], gpus_needed(c, every_replica), spawn_streams, &S, err);
    res->wall_s = wall_now() - S.wall0;
    res->compute_runs = S.compute_runs;
    if (rc == 0) rc = check_finished(&S, err);
    unfold_copies(&S, n);
    collect_times(&S, n, res);
    if (rc == 0) sim_links_collect(S.links, res);
    release(&S);
    if (rc < 0) sim_result_free(res);
    return rc;
}

void sim_result_free(sim_result *res)
{
    free(res->start);
    free(res->dur);
    free(res->links);
    memset(res, 0, sizeof *res);
}

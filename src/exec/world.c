/* world: MPI and in-process (threads) implementations; see world.h. */
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/xalloc.h"
#include "world.h"

/* ---- MPI ---- */

bool world_oversubscribed(void)
{
    static int known = -1;
    if (known < 0) {
        const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        known = local && cores > 0 && atol(local) > cores;
    }
    return known;
}

/* Wait for a nonblocking control-plane operation. Oversubscribed, a rank
 * waiting (for rank 0's float64 reference in --check, say) must not
 * busy-poll inside MPI, or it takes the cores from the ranks that compute
 * (on 8 ranks over 2 cores, several times the work itself): as the CPU
 * device's waits (device_cpu.c), poll and yield for a while, then sleep from
 * 10 us doubling to 1 ms between polls. With a core per rank, MPI_Wait: it
 * ends a short wait (the barrier that starts an iteration) soonest. */
static void wait_idle(MPI_Request *rq)
{
    if (!world_oversubscribed()) {
        MPI_Wait(rq, MPI_STATUS_IGNORE);
        return;
    }
    long ns = 10000;
    for (int polls = 0, done = 0;; polls++) {
        MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (done) return;
        if (polls < 64) {
            sched_yield();
            continue;
        }
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 1000000) ns *= 2;
    }
}

static void mpi_barrier(const world *w)
{
    (void)w;
    MPI_Request rq;
    MPI_Ibarrier(MPI_COMM_WORLD, &rq);
    wait_idle(&rq);
}

static int mpi_max_int(const world *w, int v)
{
    (void)w;
    int all;
    MPI_Request rq;
    MPI_Iallreduce(&v, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &rq);
    wait_idle(&rq);
    return all;
}

static void mpi_max_double(const world *w, double *v, int n)
{
    (void)w;
    MPI_Request rq;
    MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &rq);
    wait_idle(&rq);
}

static void mpi_sum_double(const world *w, const double *in, double *out, int n)
{
    (void)w;
    MPI_Request rq;
    MPI_Ireduce(in, out, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD, &rq);
    wait_idle(&rq);
}

static void mpi_gather(const world *w, const void *in, size_t bytes, void *out)
{
    (void)w;
    MPI_Request rq;
    MPI_Igather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &rq);
    wait_idle(&rq);
}

static void mpi_allgather(const world *w, const void *in, size_t bytes, void *out)
{
    (void)w;
    MPI_Request rq;
    MPI_Iallgather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, &rq);
    wait_idle(&rq);
}

static void mpi_bcast(const world *w, void *buf, size_t bytes)
{
    (void)w;
    MPI_Request rq;
    MPI_Ibcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &rq);
    wait_idle(&rq);
}

/* Cristian's method: offset = t_peer - (t_send + t_recv)/2 from the round
 * trip with the smallest delay, 16 tries per rank (the first, after the
 * rank slept through the others' turns, is never the smallest). */
static double mpi_clock_offset(const world *w, double (*now)(void *), void *arg)
{
    double off = 0, msg[2];
    for (int r = 1; r < w->size; r++) {
        if (w->rank == 0) {
            double best_rtt = INFINITY, best = 0;
            for (int k = 0; k < 16; k++) {
                double t0 = now(arg), tr;
                MPI_Send(&t0, 1, MPI_DOUBLE, r, 7, MPI_COMM_WORLD);
                MPI_Recv(&tr, 1, MPI_DOUBLE, r, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                double t1 = now(arg);
                if (t1 - t0 < best_rtt) best_rtt = t1 - t0, best = tr - (t0 + t1) / 2;
            }
            msg[0] = best;
            msg[1] = best_rtt;
            MPI_Send(msg, 2, MPI_DOUBLE, r, 8, MPI_COMM_WORLD);
        } else if (w->rank == r) {
            for (int k = 0; k < 16; k++) {
                double t;
                if (k == 0) { /* the long wait for this rank's turn (asleep when oversubscribed) */
                    MPI_Request rq;
                    MPI_Irecv(&t, 1, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD, &rq);
                    wait_idle(&rq);
                } else {
                    MPI_Recv(&t, 1, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
                t = now(arg);
                MPI_Send(&t, 1, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD);
            }
            MPI_Recv(msg, 2, MPI_DOUBLE, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            off = msg[0];
        }
    }
    return off;
}

static void mpi_abort(const world *w, int code)
{
    (void)w;
    MPI_Abort(MPI_COMM_WORLD, code);
}

world world_mpi(void)
{
    world w = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w.size);
    w.barrier = mpi_barrier;
    w.max_int = mpi_max_int;
    w.max_double = mpi_max_double;
    w.sum_double = mpi_sum_double;
    w.gather = mpi_gather;
    w.allgather = mpi_allgather;
    w.bcast = mpi_bcast;
    w.clock_offset = mpi_clock_offset;
    w.abort = mpi_abort;
    return w;
}

/* ---- threads of one process ---- */

struct world_local_shared {
    int size;
    pthread_barrier_t bar;
    const void **in; /* per rank: what it posted for the current collective */
};

static world_local_shared *sh_of(const world *w) { return (world_local_shared *)w->impl; }

static void loc_barrier(const world *w) { pthread_barrier_wait(&sh_of(w)->bar); }

/* Post `p`, wait for everyone; the caller reads the posts, then calls
 * loc_barrier before anything a post points to may change. */
static const void **loc_post(const world *w, const void *p)
{
    world_local_shared *sh = sh_of(w);
    sh->in[w->rank] = p;
    pthread_barrier_wait(&sh->bar);
    return sh->in;
}

static int loc_max_int(const world *w, int v)
{
    const void **in = loc_post(w, &v);
    int m = v;
    for (int r = 0; r < w->size; r++)
        if (*(const int *)in[r] > m) m = *(const int *)in[r];
    loc_barrier(w);
    return m;
}

static void loc_max_double(const world *w, double *v, int n)
{
    double *mine = xmalloc_array((size_t)n, sizeof *mine, "a local collective");
    memcpy(mine, v, (size_t)n * sizeof *v);
    const void **in = loc_post(w, mine);
    for (int r = 0; r < w->size; r++)
        for (int i = 0; i < n; i++)
            if (((const double *)in[r])[i] > v[i]) v[i] = ((const double *)in[r])[i];
    loc_barrier(w);
    free(mine);
}

static void loc_sum_double(const world *w, const double *in_, double *out, int n)
{
    const void **in = loc_post(w, in_);
    if (w->rank == 0)
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int r = 0; r < w->size; r++)
                s += ((const double *)in[r])[i];
            out[i] = s;
        }
    loc_barrier(w);
}

static void loc_gather(const world *w, const void *p, size_t bytes, void *out)
{
    const void **in = loc_post(w, p);
    if (w->rank == 0)
        for (int r = 0; r < w->size; r++)
            memcpy((char *)out + (size_t)r * bytes, in[r], bytes);
    loc_barrier(w);
}

static void loc_allgather(const world *w, const void *p, size_t bytes, void *out)
{
    const void **in = loc_post(w, p);
    for (int r = 0; r < w->size; r++)
        memcpy((char *)out + (size_t)r * bytes, in[r], bytes);
    loc_barrier(w);
}

static void loc_bcast(const world *w, void *buf, size_t bytes)
{
    const void **in = loc_post(w, buf);
    if (w->rank != 0) memcpy(buf, in[0], bytes);
    loc_barrier(w);
}

static double loc_clock_offset(const world *w, double (*now)(void *), void *arg)
{
    (void)w;
    (void)now;
    (void)arg;
    return 0; /* one process, one clock */
}

static void loc_abort(const world *w, int code)
{
    (void)w;
    fflush(stdout);
    fflush(stderr);
    _exit(code); /* every rank is a thread of this process */
}

world_local_shared *world_local_new(int size)
{
    world_local_shared *sh = calloc(1, sizeof *sh);
    if (!sh) return NULL;
    sh->size = size;
    sh->in = calloc((size_t)size, sizeof *sh->in);
    if (!sh->in || pthread_barrier_init(&sh->bar, NULL, (unsigned)size) != 0) {
        free(sh->in);
        free(sh);
        return NULL;
    }
    return sh;
}

world world_local_rank(world_local_shared *sh, int rank)
{
    world w = {0};
    w.rank = rank;
    w.size = sh->size;
    w.same_clock = 1;
    w.impl = sh;
    w.barrier = loc_barrier;
    w.max_int = loc_max_int;
    w.max_double = loc_max_double;
    w.sum_double = loc_sum_double;
    w.gather = loc_gather;
    w.allgather = loc_allgather;
    w.bcast = loc_bcast;
    w.clock_offset = loc_clock_offset;
    w.abort = loc_abort;
    return w;
}

void world_local_free(world_local_shared *sh)
{
    if (!sh) return;
    pthread_barrier_destroy(&sh->bar);
    free(sh->in);
    free(sh);
}

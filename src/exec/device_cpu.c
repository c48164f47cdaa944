/*
 * device_cpu: the executor's device on the CPU. Each stream is a worker
 * thread draining a FIFO of ops, so streams overlap like CUDA streams;
 * events are flags under one mutex; kernels are kernels_cpu.c and CBLAS;
 * communication is MPI (MPI_THREAD_MULTIPLE), one communicator per stream
 * and group, so concurrent streams never share one.
 */
#include <cblas.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device.h"

typedef enum { ITEM_OP, ITEM_RECORD, ITEM_WAIT } item_kind;

typedef struct item {
    item_kind kind;
    int event;
    dev_op op;
} item;

typedef struct stream {
    struct dev *d;
    int id;
    pthread_t th;
    item *q;
    size_t head, tail, cap;
    bool stop;
} stream;

struct dev_comm {
    MPI_Comm comm;
    int n;
    int *ranks;
};

struct dev {
    int rank, nstreams, nslots;
    stream *s;
    pthread_mutex_t mu; /* guards queues, events, pending, error */
    pthread_cond_t cv;
    uint8_t *ev;
    size_t pending;
    int error;
    char errmsg[LOONG_ERRLEN];
    double *t0, *t1;
    dev_comm **comms;
    int ncomms;
    void **mem; /* every allocation, freed at close */
    size_t nmem, memcap;
};

static double cpu_now(dev *d)
{
    (void)d;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fail_dev(dev *d, const char *msg)
{
    pthread_mutex_lock(&d->mu);
    if (!d->error) {
        d->error = DEV_ERR_COMM;
        snprintf(d->errmsg, sizeof d->errmsg, "%s", msg);
    }
    memset(d->ev, 1, (size_t)d->nslots); /* release every waiter */
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static int mpi_check(dev *d, int rc, const char *what)
{
    if (rc == MPI_SUCCESS) return 0;
    char s[MPI_MAX_ERROR_STRING], msg[LOONG_ERRLEN];
    int n;
    MPI_Error_string(rc, s, &n);
    snprintf(msg, sizeof msg, "rank %d: %s failed: %.150s", d->rank, what, s);
    fail_dev(d, msg);
    return -1;
}

/* ---- ops ---- */

/* Wait for requests without spinning: MPI's blocking waits busy-poll, and
 * on a CPU shared by ranks and their stream threads a spinning
 * communication thread steals the core a kernel runs on. Poll, yield for a
 * while, then sleep 50 us between polls. slots[i] (if >= 0) gets the time
 * request i completed. */
static int wait_quietly(dev *d, MPI_Request *rq, int n, const int *slots, const char *what)
{
    int left = 0;
    for (int i = 0; i < n; i++) left += rq[i] != MPI_REQUEST_NULL;
    for (int polls = 0; left > 0; polls++) {
        int idx, done;
        if (mpi_check(d, MPI_Testany(n, rq, &idx, &done, MPI_STATUS_IGNORE), what) < 0) return -1;
        if (done && idx != MPI_UNDEFINED) {
            if (slots && slots[idx] >= 0) d->t1[slots[idx]] = cpu_now(d);
            left--;
            polls = 0;
            continue;
        }
        if (polls < 64) {
            sched_yield();
        } else {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    return 0;
}

static void run_sendrecv(dev *d, const dev_op *op)
{
    MPI_Request rq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Comm c = op->u.p2p.comm->comm;
    if (op->u.p2p.from >= 0 &&
        mpi_check(d, MPI_Irecv(op->u.p2p.rbuf, (int)op->u.p2p.rbytes, MPI_BYTE, op->u.p2p.from, 0, c, &rq[1]),
                  "MPI_Irecv") < 0)
        return;
    if (op->u.p2p.to >= 0 &&
        mpi_check(d, MPI_Isend(op->u.p2p.sbuf, (int)op->u.p2p.sbytes, MPI_BYTE, op->u.p2p.to, 0, c, &rq[0]),
                  "MPI_Isend") < 0)
        return;
    int slots[2] = {op->stamp_end, op->stamp_end2};
    wait_quietly(d, rq, 2, slots, "MPI_Testany");
}

/* Part i of `count` floats over n members: count / n, the first count % n
 * members one more. */
static void part_of(size_t count, int n, int i, int *cnt, int *off)
{
    size_t base = count / (size_t)n, rem = count % (size_t)n;
    *cnt = (int)(base + ((size_t)i < rem));
    *off = (int)(base * (size_t)i + ((size_t)i < rem ? (size_t)i : rem));
}

static void run_collective(dev *d, const dev_op *op)
{
    dev_comm *dc = op->u.coll.comm;
    MPI_Comm c = dc->comm;
    int n = dc->n, me, cnt, off, rc = MPI_SUCCESS;
    MPI_Request rq = MPI_REQUEST_NULL;
    float *tmp = NULL;
    MPI_Comm_rank(c, &me);
    float *r = op->u.coll.rbuf;
    int *counts = malloc((size_t)n * sizeof *counts), *displs = malloc((size_t)n * sizeof *displs);
    if (!counts || !displs) {
        fail_dev(d, "out of memory in a collective");
        goto out;
    }
    for (int i = 0; i < n; i++)
        part_of(op->u.coll.count, n, i, &counts[i], &displs[i]);
    cnt = counts[me];
    off = displs[me];
    switch (op->kind) {
    case DOP_ALLTOALL:
        rc = MPI_Ialltoall(op->u.coll.sbuf, (int)op->u.coll.count, MPI_FLOAT, r, (int)op->u.coll.count, MPI_FLOAT, c,
                           &rq);
        break;
    case DOP_ALLREDUCE: rc = MPI_Iallreduce(MPI_IN_PLACE, r, (int)op->u.coll.count, MPI_FLOAT, MPI_SUM, c, &rq); break;
    case DOP_REDUCESCATTER:
        tmp = malloc(((size_t)cnt + 1) * sizeof *tmp);
        rc = tmp ? MPI_Ireduce_scatter(r, tmp, counts, MPI_FLOAT, MPI_SUM, c, &rq) : MPI_ERR_NO_MEM;
        break;
    case DOP_ALLGATHER: rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, r, counts, displs, MPI_FLOAT, c, &rq); break;
    default: break;
    }
    if (mpi_check(d, rc, "a collective") == 0 && wait_quietly(d, &rq, 1, NULL, "a collective") == 0 && tmp)
        memcpy(r + off, tmp, (size_t)cnt * sizeof *tmp);
    free(tmp);
out:
    free(counts);
    free(displs);
}

static void run_gemm(const dev_op *op)
{
    const __typeof__(op->u.gemm) *g = &op->u.gemm;
    cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans, g->trans_b ? CblasTrans : CblasNoTrans, g->m,
                g->n, g->k, g->alpha, g->a, g->lda, g->b, g->ldb, g->beta, g->c, g->ldc);
}

static void run_swiglu(const dev_op *op)
{
    const __typeof__(op->u.swiglu) *s = &op->u.swiglu;
    for (size_t i = 0; i < s->n; i++) {
        float g = s->g[i], sig = 1.0f / (1.0f + expf(-g)), silu = g * sig;
        if (!s->backward) {
            s->m[i] = silu * s->u[i];
        } else {
            s->du[i] = s->dm[i] * silu;
            s->dg[i] = s->dm[i] * s->u[i] * (sig + g * sig * (1.0f - sig));
        }
    }
}

static void run_small(const dev_op *op)
{
    switch (op->kind) {
    case DOP_AXPY:
        for (size_t i = 0; i < op->u.axpy.n; i++)
            op->u.axpy.y[i] += op->u.axpy.x[i];
        break;
    case DOP_ZERO: memset(op->u.axpy.y, 0, op->u.axpy.n * sizeof(float)); break;
    case DOP_COPY2D:
        for (size_t r = 0; r < op->u.copy.rows; r++)
            memcpy(op->u.copy.dst + r * op->u.copy.dst_ld, op->u.copy.src + r * op->u.copy.src_ld,
                   op->u.copy.cols * sizeof(float));
        break;
    case DOP_SUM_GROUPS: {
        const __typeof__(op->u.sum) *s = &op->u.sum;
        for (size_t r = 0; r < s->rows; r++)
            for (int g = 0; g < s->groups; g++) {
                float *dst = s->dst + r * s->dst_ld + (size_t)g * (size_t)s->d;
                const float *src = s->src + r * s->src_ld + (size_t)g * (size_t)s->gs * (size_t)s->d;
                memcpy(dst, src, (size_t)s->d * sizeof(float));
                for (int j = 1; j < s->gs; j++)
                    for (int x = 0; x < s->d; x++)
                        dst[x] += src[(size_t)j * (size_t)s->d + (size_t)x];
            }
        break;
    }
    default: break;
    }
}

static void run_op(dev *d, const dev_op *op)
{
    if (op->fail) {
        fprintf(stderr, "loong exec: rank %d: injected failure at task %d (--fail-rank/--fail-at-task): exiting\n",
                d->rank, op->fail - 1);
        fflush(stderr);
        _exit(3);
    }
    double t = cpu_now(d);
    if (op->stamp_start >= 0) d->t0[op->stamp_start] = t;
    if (op->stamp_start2 >= 0) d->t0[op->stamp_start2] = t;
    switch (op->kind) {
    case DOP_ATTN_FWD:
        attn_block_fwd(op->u.attn.o, op->u.attn.lse, op->u.attn.q, op->u.attn.k, op->u.attn.v, op->u.attn.qpos,
                       op->u.attn.kpos, &op->u.attn.s);
        break;
    case DOP_ATTN_BWD:
        attn_block_bwd(op->u.attn.dq, op->u.attn.dk, op->u.attn.dv, op->u.attn.q, op->u.attn.k, op->u.attn.v,
                       op->u.attn.o_in, op->u.attn.lse_in, op->u.attn.do_, op->u.attn.qpos, op->u.attn.kpos,
                       &op->u.attn.s);
        break;
    case DOP_MERGE:
        attn_merge(op->u.merge.o, op->u.merge.lse, op->u.merge.ob, op->u.merge.lseb, op->u.merge.nq, op->u.merge.hq,
                   op->u.merge.d);
        break;
    case DOP_GEMM: run_gemm(op); break;
    case DOP_SWIGLU: run_swiglu(op); break;
    case DOP_SENDRECV: run_sendrecv(d, op); break;
    case DOP_ALLTOALL:
    case DOP_ALLREDUCE:
    case DOP_REDUCESCATTER:
    case DOP_ALLGATHER: run_collective(d, op); break;
    default: run_small(op); break;
    }
    if (op->stamp_end >= 0 && op->kind != DOP_SENDRECV) d->t1[op->stamp_end] = cpu_now(d);
}

/* ---- streams ---- */

static void *worker(void *arg)
{
    stream *s = arg;
    dev *d = s->d;
    for (;;) {
        pthread_mutex_lock(&d->mu);
        while (s->head == s->tail && !s->stop)
            pthread_cond_wait(&d->cv, &d->mu);
        if (s->head == s->tail && s->stop) {
            pthread_mutex_unlock(&d->mu);
            return NULL;
        }
        item it = s->q[s->head % s->cap];
        if (it.kind == ITEM_WAIT) {
            while (!d->ev[it.event])
                pthread_cond_wait(&d->cv, &d->mu);
        }
        bool skip = d->error != 0;
        pthread_mutex_unlock(&d->mu);
        if (it.kind == ITEM_OP && !skip) run_op(d, &it.op);
        pthread_mutex_lock(&d->mu);
        if (it.kind == ITEM_RECORD) d->ev[it.event] = 1;
        s->head++;
        d->pending--;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
    }
}

static int enqueue(dev *d, int sid, const item *it)
{
    if (sid < 0 || sid >= d->nstreams) return DEV_ERR_ARG;
    stream *s = &d->s[sid];
    pthread_mutex_lock(&d->mu);
    if (s->tail - s->head == s->cap) {
        size_t nc = s->cap * 2;
        item *q = malloc(nc * sizeof *q);
        if (!q) {
            pthread_mutex_unlock(&d->mu);
            return DEV_ERR_MEM;
        }
        for (size_t i = s->head; i < s->tail; i++)
            q[i % nc] = s->q[i % s->cap];
        free(s->q);
        s->q = q;
        s->cap = nc;
    }
    s->q[s->tail % s->cap] = *it;
    s->tail++;
    d->pending++;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    return DEV_OK;
}

static int cpu_launch(dev *d, int sid, const dev_op *op)
{
    item it = {ITEM_OP, 0, *op};
    return enqueue(d, sid, &it);
}

static int cpu_record(dev *d, int sid, int ev)
{
    if (ev < 0 || ev >= d->nslots) return DEV_ERR_ARG;
    item it = {.kind = ITEM_RECORD, .event = ev};
    return enqueue(d, sid, &it);
}

static int cpu_wait(dev *d, int sid, int ev)
{
    if (ev < 0 || ev >= d->nslots) return DEV_ERR_ARG;
    item it = {.kind = ITEM_WAIT, .event = ev};
    return enqueue(d, sid, &it);
}

static void cpu_reset_events(dev *d)
{
    pthread_mutex_lock(&d->mu);
    memset(d->ev, 0, (size_t)d->nslots);
    pthread_mutex_unlock(&d->mu);
}

static int cpu_sync(dev *d, char err[LOONG_ERRLEN])
{
    pthread_mutex_lock(&d->mu);
    while (d->pending)
        pthread_cond_wait(&d->cv, &d->mu);
    int rc = d->error;
    if (rc) snprintf(err, LOONG_ERRLEN, "%s", d->errmsg);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static void cpu_stamps(dev *d, int i, double *start, double *end)
{
    *start = d->t0[i];
    *end = d->t1[i];
}

/* ---- memory and communicators ---- */

static void *cpu_alloc(dev *d, size_t bytes)
{
    if (d->nmem == d->memcap) {
        size_t nc = d->memcap ? 2 * d->memcap : 64;
        void **m = realloc(d->mem, nc * sizeof *m);
        if (!m) return NULL;
        d->mem = m;
        d->memcap = nc;
    }
    void *p = calloc(1, bytes ? bytes : 1);
    if (p) d->mem[d->nmem++] = p;
    return p;
}

static void cpu_release(dev *d, void *p)
{
    for (size_t i = 0; i < d->nmem; i++)
        if (d->mem[i] == p) {
            d->mem[i] = d->mem[--d->nmem];
            break;
        }
    free(p);
}

static int cpu_put(dev *d, void *dst, const float *src, size_t n)
{
    (void)d;
    memcpy(dst, src, n * sizeof(float));
    return DEV_OK;
}

static int cpu_get(dev *d, float *dst, const void *src, size_t n)
{
    (void)d;
    memcpy(dst, src, n * sizeof(float));
    return DEV_OK;
}

/* Split MPI_COMM_WORLD so the members (in order) form one communicator;
 * every rank calls this collectively (non-members get MPI_COMM_NULL). */
static dev_comm *cpu_comm(dev *d, int sid, const int *ranks, int n, char err[LOONG_ERRLEN])
{
    (void)sid;
    int me = -1;
    for (int i = 0; i < n; i++)
        if (ranks[i] == d->rank) me = i;
    MPI_Comm c;
    int rc = MPI_Comm_split(MPI_COMM_WORLD, me >= 0 ? ranks[0] : MPI_UNDEFINED, me, &c);
    dev_comm *dc = calloc(1, sizeof *dc);
    int *rk = malloc((size_t)n * sizeof *rk);
    dev_comm **cs = realloc(d->comms, (size_t)(d->ncomms + 1) * sizeof *cs);
    if (rc != MPI_SUCCESS || !dc || !rk || !cs) {
        snprintf(err, LOONG_ERRLEN, "rank %d: cannot create a communicator of %d ranks", d->rank, n);
        free(dc);
        free(rk);
        if (cs) d->comms = cs;
        return NULL;
    }
    if (c != MPI_COMM_NULL) MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    memcpy(rk, ranks, (size_t)n * sizeof *rk);
    *dc = (dev_comm){c, n, rk};
    d->comms = cs;
    d->comms[d->ncomms++] = dc;
    return dc;
}

static int cpu_comm_rank(dev_comm *c, int r)
{
    for (int i = 0; i < c->n; i++)
        if (c->ranks[i] == r) return i;
    return -1;
}

static dev *cpu_open(int rank, int nstreams, int nslots, char err[LOONG_ERRLEN])
{
    dev *d = calloc(1, sizeof *d);
    if (!d) goto oom;
    d->rank = rank;
    d->nstreams = nstreams;
    d->nslots = nslots > 0 ? nslots : 1;
    d->s = calloc((size_t)nstreams, sizeof *d->s);
    d->ev = calloc((size_t)d->nslots, 1);
    d->t0 = calloc((size_t)d->nslots, sizeof *d->t0);
    d->t1 = calloc((size_t)d->nslots, sizeof *d->t1);
    if (!d->s || !d->ev || !d->t0 || !d->t1) goto oom;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    openblas_set_num_threads(1); /* ranks share the host's cores */
    for (int i = 0; i < nstreams; i++) {
        stream *s = &d->s[i];
        s->d = d;
        s->id = i;
        s->cap = 256;
        s->q = malloc(s->cap * sizeof *s->q);
        if (!s->q || pthread_create(&s->th, NULL, worker, s) != 0) goto oom;
    }
    return d;
oom:
    snprintf(err, LOONG_ERRLEN, "rank %d: cannot start the CPU device (out of memory or threads)", rank);
    return NULL;
}

static void cpu_close(dev *d)
{
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    for (int i = 0; i < d->nstreams; i++)
        d->s[i].stop = true;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    for (int i = 0; i < d->nstreams; i++) {
        pthread_join(d->s[i].th, NULL);
        free(d->s[i].q);
    }
    for (int i = 0; i < d->ncomms; i++) {
        if (d->comms[i]->comm != MPI_COMM_NULL) MPI_Comm_free(&d->comms[i]->comm);
        free(d->comms[i]->ranks);
        free(d->comms[i]);
    }
    free(d->comms);
    for (size_t i = 0; i < d->nmem; i++)
        free(d->mem[i]);
    free(d->mem);
    free(d->s);
    free(d->ev);
    free(d->t0);
    free(d->t1);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
}

const dev_ops dev_cpu = {
    .name = "cpu",
    .open = cpu_open,
    .close = cpu_close,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .put = cpu_put,
    .get = cpu_get,
    .comm = cpu_comm,
    .comm_rank = cpu_comm_rank,
    .launch = cpu_launch,
    .record = cpu_record,
    .wait = cpu_wait,
    .reset_events = cpu_reset_events,
    .sync = cpu_sync,
    .stamps = cpu_stamps,
    .now = cpu_now,
};

/*
 * device_cpu: the executor's device on the CPU. Its streams are devq's
 * worker threads (devq.h); it supplies the kernels (kernels_cpu.c and
 * CBLAS), host memory, and communication over MPI (MPI_THREAD_MULTIPLE),
 * one communicator per stream and group, so concurrent streams never
 * share one. Every error carries the file:line of the failing call.
 */
#include <cblas.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devq.h"
#include "world.h"

struct dev_comm {
    MPI_Comm comm;
    int n;
    int *ranks;
};

struct dev {
    int rank, nslots;
    devq *q;
    double *t0, *t1; /* timestamp slots */
    dev_comm **comms;
    int ncomms;
    atomic_int computing; /* this rank's stream threads inside a kernel now */
    bool shared_cores;    /* more ranks than cores on this node */
};

static double cpu_now(dev *d)
{
    (void)d;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* An MPI error fails the device with what failed, where, and MPI's words;
 * running out of memory inside MPI is DEV_ERR_MEM, not a communication
 * error. */
static int mpi_check(dev *d, int rc, const char *what, const char *file, int line)
{
    if (rc == MPI_SUCCESS) return 0;
    char s[MPI_MAX_ERROR_STRING];
    int n, cls = MPI_ERR_OTHER;
    MPI_Error_string(rc, s, &n);
    MPI_Error_class(rc, &cls);
    devq_fail(d->q, cls == MPI_ERR_NO_MEM ? DEV_ERR_MEM : DEV_ERR_COMM, file, line, "%s failed: %.150s", what, s);
    return -1;
}
#define MPI_CHECK(d, call) mpi_check((d), (call), #call, __FILE__, __LINE__)

/* ---- ops ---- */

/* Wait for requests. Open MPI's nonblocking collectives and its shared
 * memory transport advance only inside an MPI call, so a wait that sleeps
 * between polls stretches a transfer to its fragments times the sleep (a
 * 2-rank gradient reduce-scatter at the end of a step: 48-53 ms against
 * 3-6 ms). A busy-polling wait, though, steals the core a kernel runs on.
 * So, with a core per rank and no stream thread of this rank inside a
 * kernel, the communication is all the rank waits for, and the wait polls
 * back to back, yielding in between; otherwise (a kernel runs, or ranks
 * share cores and an idle rank's polls would take a computing rank's
 * core) it polls between 50 us sleeps after 64 yields. slots[i] (if >= 0)
 * gets the time request i completed. */
static int wait_quietly(dev *d, MPI_Request *rq, int n, const int *slots)
{
    int left = 0;
    for (int i = 0; i < n; i++)
        left += rq[i] != MPI_REQUEST_NULL;
    for (int polls = 0; left > 0; polls++) {
        int idx, done;
        if (MPI_CHECK(d, MPI_Testany(n, rq, &idx, &done, MPI_STATUS_IGNORE)) < 0) return -1;
        if (done && idx != MPI_UNDEFINED) {
            if (slots && slots[idx] >= 0) d->t1[slots[idx]] = cpu_now(d);
            left--;
            polls = 0;
            continue;
        }
        if (polls < 64 || (!d->shared_cores && atomic_load_explicit(&d->computing, memory_order_relaxed) == 0)) {
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
    const __typeof__(op->u.p2p) *p = &op->u.p2p;
    if (p->from >= 0 && MPI_CHECK(d, MPI_Irecv(p->rbuf, (int)p->rbytes, MPI_BYTE, p->from, 0, c, &rq[1])) < 0) return;
    if (p->to >= 0 && MPI_CHECK(d, MPI_Isend(p->sbuf, (int)p->sbytes, MPI_BYTE, p->to, 0, c, &rq[0])) < 0) return;
    int slots[2] = {op->stamp_end, op->stamp_end2};
    wait_quietly(d, rq, 2, slots);
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
        DEVQ_FAIL(d->q, DEV_ERR_MEM, "out of host memory for a collective of %d ranks", n);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        size_t ci, oi;
        dev_part_of(op->u.coll.count, n, i, &ci, &oi);
        counts[i] = (int)ci;
        displs[i] = (int)oi;
    }
    cnt = counts[me];
    off = displs[me];
    if (op->kind == DOP_REDUCESCATTER && !(tmp = malloc(((size_t)cnt + 1) * sizeof *tmp))) {
        DEVQ_FAIL(d->q, DEV_ERR_MEM, "out of host memory for a reduce-scatter of %d floats", cnt);
        goto out;
    }
    const char *what = "?";
    switch (op->kind) {
    case DOP_ALLTOALL:
        what = "MPI_Ialltoall";
        rc = MPI_Ialltoall(op->u.coll.sbuf, (int)op->u.coll.count, MPI_FLOAT, r, (int)op->u.coll.count, MPI_FLOAT, c,
                           &rq);
        break;
    case DOP_ALLREDUCE:
        what = "MPI_Iallreduce";
        rc = MPI_Iallreduce(MPI_IN_PLACE, r, (int)op->u.coll.count, MPI_FLOAT, MPI_SUM, c, &rq);
        break;
    case DOP_REDUCESCATTER:
        what = "MPI_Ireduce_scatter";
        rc = MPI_Ireduce_scatter(r, tmp, counts, MPI_FLOAT, MPI_SUM, c, &rq);
        break;
    case DOP_ALLGATHER:
        what = "MPI_Iallgatherv";
        rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, r, counts, displs, MPI_FLOAT, c, &rq);
        break;
    default: break;
    }
    if (mpi_check(d, rc, what, __FILE__, __LINE__) == 0 && wait_quietly(d, &rq, 1, NULL) == 0 && tmp)
        memcpy(r + off, tmp, (size_t)cnt * sizeof *tmp);
out:
    free(tmp);
    free(counts);
    free(displs);
}

/* An all-to-all-v: the counts and displacements of every member, in floats. */
static void run_alltoallv(dev *d, const dev_op *op)
{
    const __typeof__(op->u.a2av) *a = &op->u.a2av;
    MPI_Request rq = MPI_REQUEST_NULL;
    if (MPI_CHECK(d, MPI_Ialltoallv(a->sbuf, a->scounts, a->sdispls, MPI_FLOAT, a->rbuf, a->rcounts, a->rdispls,
                                    MPI_FLOAT, a->comm->comm, &rq)) == 0)
        wait_quietly(d, &rq, 1, NULL);
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
    case DOP_FILL:
        for (size_t i = 0; i < op->u.fill.n; i++)
            op->u.fill.y[i] = op->u.fill.value;
        break;
    case DOP_COPY2D:
        for (size_t r = 0; r < op->u.copy.rows; r++)
            memcpy(op->u.copy.dst + r * op->u.copy.dst_ld, op->u.copy.src + r * op->u.copy.src_ld,
                   op->u.copy.cols * sizeof(float));
        break;
    case DOP_ROWDOT: {
        const __typeof__(op->u.rowdot) *s = &op->u.rowdot;
        for (size_t r = 0; r < s->rows; r++) {
            const float *a = s->a + r * s->lda, *b = s->b + r * s->ldb;
            float acc = 0.0f;
            for (size_t j = 0; j < s->n; j++)
                acc += a[j] * b[j];
            s->dst[r * s->dst_ld] = acc;
        }
        break;
    }
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
    case DOP_MOVE_ROWS: {
        const __typeof__(op->u.rows) *m = &op->u.rows;
        moe_move_rows(m->dst, m->dst_idx, m->src, m->src_idx, m->scale, m->rows, m->width, m->add);
        break;
    }
    case DOP_ROUTE: {
        const __typeof__(op->u.route) *r = &op->u.route;
        if (r->backward)
            moe_route_bwd(r->dlogits, r->gates, r->dgates, r->dg_idx, r->sel, r->n, r->experts, r->k);
        else
            moe_route_fwd(r->gates, r->logits, r->sel, r->n, r->experts, r->k);
        break;
    }
    default: break;
    }
}

/* MPI's ops; every other op (the all-to-all's pack and unpack copies
 * included) computes on the core, and the wait rule counts it a kernel. */
static bool communicates(dev_op_kind k)
{
    return k == DOP_SENDRECV || k == DOP_ALLTOALL || k == DOP_ALLREDUCE || k == DOP_REDUCESCATTER ||
           k == DOP_ALLGATHER || k == DOP_ALLTOALLV;
}

/* devq's run hook: one op on the calling stream thread. */
static void cpu_run(void *ctx, int stream, const dev_op *op)
{
    dev *d = ctx;
    (void)stream;
    double t = cpu_now(d);
    if (op->stamp_start >= 0) d->t0[op->stamp_start] = t;
    if (op->stamp_start2 >= 0) d->t0[op->stamp_start2] = t;
    bool kernel = !communicates(op->kind);
    if (kernel) atomic_fetch_add_explicit(&d->computing, 1, memory_order_relaxed);
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
    case DOP_ALLTOALLV: run_alltoallv(d, op); break;
    default: run_small(op); break;
    }
    if (kernel) atomic_fetch_sub_explicit(&d->computing, 1, memory_order_relaxed);
    if (op->stamp_end >= 0 && op->kind != DOP_SENDRECV) d->t1[op->stamp_end] = cpu_now(d);
}

/* ---- the stream queue ---- */

static devq *cpu_queue(dev *d) { return d->q; }
static void cpu_reset_events(dev *d) { devq_reset_events(d->q); }
static dev_result cpu_sync(dev *d, char err[LOONG_ERRLEN]) { return devq_drain(d->q, err); }

static void cpu_stamps(dev *d, int i, double *start, double *end)
{
    *start = d->t0[i];
    *end = d->t1[i];
}

/* ---- memory and communicators ---- */

static void free_host(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static void *cpu_alloc(dev *d, size_t bytes) { return devq_own(d->q, calloc(1, bytes ? bytes : 1)); }

static void cpu_release(dev *d, void *p)
{
    devq_disown(d->q, p);
    free(p);
}

static dev_result cpu_put(dev *d, void *dst, const float *src, size_t n)
{
    (void)d;
    memcpy(dst, src, n * sizeof(float));
    return DEV_OK;
}

static dev_result cpu_get(dev *d, float *dst, const void *src, size_t n)
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

static void cpu_close(dev *d)
{
    if (!d) return;
    devq_close(d->q); /* the streams first: nothing may still use a communicator */
    for (int i = 0; i < d->ncomms; i++) {
        if (d->comms[i]->comm != MPI_COMM_NULL) MPI_Comm_free(&d->comms[i]->comm);
        free(d->comms[i]->ranks);
        free(d->comms[i]);
    }
    free(d->comms);
    free(d->t0);
    free(d->t1);
    free(d);
}

static dev *cpu_open(int rank, int nstreams, int nslots, char err[LOONG_ERRLEN])
{
    dev *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, LOONG_ERRLEN, "rank %d: cannot start the CPU device: out of memory", rank);
        return NULL;
    }
    d->rank = rank;
    d->shared_cores = world_oversubscribed();
    d->nslots = nslots > 0 ? nslots : 1;
    d->t0 = calloc((size_t)d->nslots, sizeof *d->t0);
    d->t1 = calloc((size_t)d->nslots, sizeof *d->t1);
    openblas_set_num_threads(1); /* ranks share the host's cores */
    devq_hooks h = {.ctx = d, .run = cpu_run, .release = free_host};
    if (d->t0 && d->t1) d->q = devq_open(rank, nstreams, d->nslots, &h, err);
    if (!d->q) {
        if (!d->t0 || !d->t1) snprintf(err, LOONG_ERRLEN, "rank %d: cannot start the CPU device: out of memory", rank);
        cpu_close(d);
        return NULL;
    }
    return d;
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
    .queue = cpu_queue,
    .reset_events = cpu_reset_events,
    .sync = cpu_sync,
    .stamps = cpu_stamps,
    .now = cpu_now,
};

/*
 * device_cuda: the executor's device on NVIDIA GPUs (see device_cuda.h).
 *
 * Per rank: one CUDA stream and one cuBLAS handle per DAG stream, fed by
 * the executor's shared stream queue (exec/devq.h: one host worker thread
 * per stream, as for the CPU device). Here a worker only ISSUES work:
 * kernels, cuBLAS, NCCL or device-to-device copies go onto its CUDA stream
 * asynchronously. An event record puts a cudaEvent on the stream before
 * devq raises the host flag; an event wait makes the stream wait for that
 * cudaEvent once the flag is up (the record has been issued).
 *
 * This file holds the streams, kernels, events and memory, and the NCCL
 * transport (dev_cuda); the local transport (dev_cuda_local) is
 * local_cuda.cu, behind local_cuda.h.
 *
 * Not verified on a GPU yet: everything in this file compiles here (CI has
 * nvcc but no GPU); tests/check_cuda.c and tests/device/run.sh exercise it
 * on a GPU machine.
 */
#define OMPI_SKIP_MPICXX 1
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device_cuda.h"
#include "exec/devq.h"
#include "exec/plugin.h"
#include "kernels_cuda.h"
#include "local_cuda.h"

/* ---- state ---- */

typedef struct stream {
    struct dev *d;
    int id;
    cudaStream_t cs;
    cublasHandle_t blas;
    float *scratch; /* attention backward's D = rowsum(dO * O) */
    size_t scratch_n;
} stream;

struct dev_comm {
    int n, me;
    int *ranks;
    ncclComm_t nccl; /* dev_cuda */
    MPI_Comm mpi;    /* dev_cuda: the members, for the bootstrap */
    lcomm *lc;       /* dev_cuda_local */
};

typedef struct pos_entry {
    const int64_t *host;
    int n;
    int64_t *dev;
} pos_entry;

struct dev {
    int rank, nstreams, nslots, gpu;
    bool local;
    devq *q; /* the host side of the streams: workers, event flags, errors */
    stream *s;
    cudaEvent_t *sync_ev; /* per event id (no timing) */
    cudaEvent_t *t0, *t1; /* per timestamp slot */
    uint8_t *has0, *has1; /* slot recorded this iteration */
    cudaEvent_t ref;      /* recorded at a known host time per iteration */
    double ref_host;
    dev_comm **comms;
    int ncomms;
    pthread_mutex_t pos_mu;
    pos_entry *pos;
    int npos, poscap;
};

static double host_now(dev *d)
{
    (void)d;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- checks: file:line at the call site, the rank in the message (devq) ---- */

static int cuda_check(dev *d, cudaError_t e, const char *what, const char *file, int line)
{
    if (e == cudaSuccess) return 0;
    dev_result code = e == cudaErrorMemoryAllocation ? DEV_ERR_MEM : DEV_ERR_FAULT;
    devq_fail(d->q, code, file, line, "CUDA error: %s: %s", what, cudaGetErrorString(e));
    return -1;
}
#define CU(d, call) cuda_check((d), (call), #call, __FILE__, __LINE__)

static int nccl_check(dev *d, ncclResult_t r, const char *what, const char *file, int line)
{
    if (r == ncclSuccess) return 0;
    devq_fail(d->q, DEV_ERR_COMM, file, line, "NCCL error: %s: %s", what, ncclGetErrorString(r));
    return -1;
}
#define NC(d, call) nccl_check((d), (call), #call, __FILE__, __LINE__)

static int blas_check(dev *d, cublasStatus_t r, const char *what, const char *file, int line)
{
    if (r == CUBLAS_STATUS_SUCCESS) return 0;
    dev_result code = r == CUBLAS_STATUS_ALLOC_FAILED ? DEV_ERR_MEM : DEV_ERR_FAULT;
    devq_fail(d->q, code, file, line, "cuBLAS error: %s: status %d", what, (int)r);
    return -1;
}
#define CB(d, call) blas_check((d), (call), #call, __FILE__, __LINE__)

/* ---- GPU discovery ---- */

extern "C" int cuda_gpu_count(char err[LOONG_ERRLEN])
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(err, LOONG_ERRLEN, "no CUDA GPU is usable here (%s)", cudaGetErrorString(e));
        return 0;
    }
    if (n == 0) snprintf(err, LOONG_ERRLEN, "no CUDA GPU is visible on this machine");
    return n;
}

extern "C" int cuda_select_gpu(int local_rank, int local_size, char err[LOONG_ERRLEN])
{
    int n = cuda_gpu_count(err);
    if (n == 0) return -1;
    if (local_size > n) {
        snprintf(err, LOONG_ERRLEN,
                 "%d ranks on this node but only %d GPU%s: the NCCL transport needs one GPU per rank; use "
                 "--transport local to run all ranks of the mesh in one process on one GPU",
                 local_size, n, n == 1 ? "" : "s");
        return -1;
    }
    cudaError_t e = cudaSetDevice(local_rank % n);
    if (e != cudaSuccess) {
        snprintf(err, LOONG_ERRLEN, "cannot use GPU %d: %s", local_rank % n, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

/* ---- positions: the executor's qpos/kpos are host arrays filled once at
 * start-up; each (pointer, length) is copied to the device on first use
 * and reused (they never change during a run) ---- */

static const int64_t *pos_dev(dev *d, const int64_t *host, int n)
{
    if (!host || n <= 0) return NULL;
    pthread_mutex_lock(&d->pos_mu);
    const int64_t *r = NULL;
    for (int i = 0; i < d->npos && !r; i++)
        if (d->pos[i].host == host && d->pos[i].n == n) r = d->pos[i].dev;
    if (!r && d->npos == d->poscap) {
        int nc = d->poscap ? 2 * d->poscap : 32;
        pos_entry *p = (pos_entry *)realloc(d->pos, (size_t)nc * sizeof *p);
        if (p) {
            d->pos = p;
            d->poscap = nc;
        }
    }
    if (!r && d->npos < d->poscap) {
        int64_t *p = NULL;
        if (CU(d, cudaMalloc((void **)&p, (size_t)n * sizeof *p)) == 0 &&
            CU(d, cudaMemcpy(p, host, (size_t)n * sizeof *p, cudaMemcpyHostToDevice)) == 0) {
            d->pos[d->npos++] = (pos_entry){host, n, p};
            r = p;
        } else if (p) {
            cudaFree(p);
        }
    }
    pthread_mutex_unlock(&d->pos_mu);
    return r;
}

/* ---- NCCL transport ---- */

static void nccl_sendrecv(stream *st, const dev_op *op)
{
    dev *d = st->d;
    ncclComm_t c = op->u.p2p.comm->nccl;
    if (NC(d, ncclGroupStart())) return;
    if (op->u.p2p.to >= 0) NC(d, ncclSend(op->u.p2p.sbuf, op->u.p2p.sbytes, ncclChar, op->u.p2p.to, c, st->cs));
    if (op->u.p2p.from >= 0) NC(d, ncclRecv(op->u.p2p.rbuf, op->u.p2p.rbytes, ncclChar, op->u.p2p.from, c, st->cs));
    NC(d, ncclGroupEnd());
}

static void nccl_collective(stream *st, const dev_op *op)
{
    dev *d = st->d;
    dev_comm *dc = op->u.coll.comm;
    ncclComm_t c = dc->nccl;
    float *r = op->u.coll.rbuf;
    size_t count = op->u.coll.count, n = (size_t)dc->n, me = (size_t)dc->me;
    switch (op->kind) {
    case DOP_ALLTOALL:
        if (NC(d, ncclGroupStart())) return;
        for (size_t j = 0; j < n; j++) {
            if (j == me) {
                CU(d, cudaMemcpyAsync(r + j * count, op->u.coll.sbuf + j * count, count * sizeof(float),
                                      cudaMemcpyDeviceToDevice, st->cs));
                continue;
            }
            NC(d, ncclSend(op->u.coll.sbuf + j * count, count, ncclFloat, (int)j, c, st->cs));
            NC(d, ncclRecv(r + j * count, count, ncclFloat, (int)j, c, st->cs));
        }
        NC(d, ncclGroupEnd());
        break;
    case DOP_REDUCESCATTER:
        if (count % n == 0) { /* in place: my part is at rbuf + me * count / n */
            NC(d, ncclReduceScatter(r, r + me * (count / n), count / n, ncclFloat, ncclSum, c, st->cs));
            break;
        }
        /* uneven parts: an all-reduce fills every part, a superset of the contract */
        NC(d, ncclAllReduce(r, r, count, ncclFloat, ncclSum, c, st->cs));
        break;
    case DOP_ALLREDUCE: NC(d, ncclAllReduce(r, r, count, ncclFloat, ncclSum, c, st->cs)); break;
    case DOP_ALLGATHER:
        if (count % n == 0) {
            NC(d, ncclAllGather(r + me * (count / n), r, count / n, ncclFloat, c, st->cs));
            break;
        }
        if (NC(d, ncclGroupStart())) return;
        for (int j = 0; j < (int)n; j++) {
            size_t cj, oj;
            dev_part_of(count, (int)n, j, &cj, &oj);
            if (cj) NC(d, ncclBroadcast(r + oj, r + oj, cj, ncclFloat, j, c, st->cs));
        }
        NC(d, ncclGroupEnd());
        break;
    default: break;
    }
}

/* ---- ops ---- */

static float *scratch(stream *st, size_t n)
{
    if (st->scratch_n >= n) return st->scratch;
    if (st->scratch) cudaFree(st->scratch);
    st->scratch = NULL;
    st->scratch_n = 0;
    if (CU(st->d, cudaMalloc((void **)&st->scratch, n * sizeof(float)))) return NULL;
    st->scratch_n = n;
    return st->scratch;
}

static void run_gemm(stream *st, const dev_op *op)
{
    /* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T */
    const __typeof__(op->u.gemm) *g = &op->u.gemm;
    CB(st->d, cublasSgemm(st->blas, g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                          g->n, g->m, g->k, &g->alpha, g->b, g->ldb, g->a, g->lda, &g->beta, g->c, g->ldc));
}

/* devq's run hook: issue one op on the stream's CUDA stream. */
static void cu_run(void *ctx, int sid, const dev_op *op)
{
    dev *d = (dev *)ctx;
    stream *st = &d->s[sid];
    if (op->stamp_start >= 0 && CU(d, cudaEventRecord(d->t0[op->stamp_start], st->cs)) == 0)
        d->has0[op->stamp_start] = 1;
    if (op->stamp_start2 >= 0 && CU(d, cudaEventRecord(d->t0[op->stamp_start2], st->cs)) == 0)
        d->has0[op->stamp_start2] = 1;
    /* op->u is a union: read it as attention only for the attention ops
     * (other kinds' bytes there would be taken for host pointers) */
    const __typeof__(op->u.attn) *a = &op->u.attn;
    attn_shape ds{};
    if (op->kind == DOP_ATTN_FWD || op->kind == DOP_ATTN_BWD) {
        ds = a->s; /* the document starts, like the positions, on the device */
        ds.qstart = pos_dev(d, a->s.qstart, a->s.nq);
    }
    switch (op->kind) {
    case DOP_ATTN_FWD:
        CU(d, (cudaError_t)cuda_attn_fwd(a->o, a->lse, a->q, a->k, a->v, pos_dev(d, a->qpos, a->s.nq),
                                         pos_dev(d, a->kpos, a->s.nk), &ds, st->cs));
        break;
    case DOP_ATTN_BWD: {
        float *di = scratch(st, (size_t)a->s.nq * (size_t)a->s.hq + 1);
        if (di)
            CU(d,
               (cudaError_t)cuda_attn_bwd(a->dq, a->dk, a->dv, a->q, a->k, a->v, a->o_in, a->lse_in, a->do_,
                                          pos_dev(d, a->qpos, a->s.nq), pos_dev(d, a->kpos, a->s.nk), &ds, di, st->cs));
        break;
    }
    case DOP_MERGE:
        CU(d, (cudaError_t)cuda_attn_merge(op->u.merge.o, op->u.merge.lse, op->u.merge.ob, op->u.merge.lseb,
                                           op->u.merge.nq, op->u.merge.hq, op->u.merge.d, st->cs));
        break;
    case DOP_AXPY: CU(d, (cudaError_t)cuda_axpy(op->u.axpy.y, op->u.axpy.x, op->u.axpy.n, st->cs)); break;
    case DOP_FILL: CU(d, (cudaError_t)cuda_fill(op->u.fill.y, op->u.fill.n, op->u.fill.value, st->cs)); break;
    case DOP_COPY2D:
        if (op->u.copy.rows && op->u.copy.cols)
            CU(d, cudaMemcpy2DAsync(op->u.copy.dst, op->u.copy.dst_ld * sizeof(float), op->u.copy.src,
                                    op->u.copy.src_ld * sizeof(float), op->u.copy.cols * sizeof(float), op->u.copy.rows,
                                    cudaMemcpyDeviceToDevice, st->cs));
        break;
    case DOP_SUM_GROUPS:
        CU(d, (cudaError_t)cuda_sum_groups(op->u.sum.dst, op->u.sum.src, op->u.sum.rows, op->u.sum.dst_ld,
                                           op->u.sum.src_ld, op->u.sum.groups, op->u.sum.gs, op->u.sum.d, st->cs));
        break;
    case DOP_GEMM: run_gemm(st, op); break;
    case DOP_ROWDOT:
        CU(d,
           (cudaError_t)cuda_rowdot(op->u.rowdot.dst, op->u.rowdot.a, op->u.rowdot.b, op->u.rowdot.rows, op->u.rowdot.n,
                                    op->u.rowdot.dst_ld, op->u.rowdot.lda, op->u.rowdot.ldb, st->cs));
        break;
    case DOP_SWIGLU:
        CU(d, (cudaError_t)cuda_swiglu(op->u.swiglu.backward, op->u.swiglu.m, op->u.swiglu.dg, op->u.swiglu.du,
                                       op->u.swiglu.g, op->u.swiglu.u, op->u.swiglu.dm, op->u.swiglu.n, st->cs));
        break;
    case DOP_SENDRECV:
        d->local ? local_sendrecv(d->q, st->cs, op->u.p2p.comm->lc, op->u.p2p.comm->me, op) : nccl_sendrecv(st, op);
        break;
    case DOP_ALLTOALL:
    case DOP_ALLREDUCE:
    case DOP_REDUCESCATTER:
    case DOP_ALLGATHER:
        d->local ? local_collective(d->q, st->cs, op->u.coll.comm->lc, op->u.coll.comm->me, op)
                 : nccl_collective(st, op);
        break;
    case DOP_MOVE_ROWS: /* a mixture of experts': loong exec refuses MoE on this device (cmd_exec.c) */
    case DOP_ROUTE:
    case DOP_ALLTOALLV:
        DEVQ_FAIL(d->q, DEV_ERR_ARG, "the CUDA device has no mixture-of-experts kernels (op %d): use --device cpu",
                  (int)op->kind);
        break;
    }
    if (op->stamp_end >= 0 && CU(d, cudaEventRecord(d->t1[op->stamp_end], st->cs)) == 0) d->has1[op->stamp_end] = 1;
    if (op->stamp_end2 >= 0 && CU(d, cudaEventRecord(d->t1[op->stamp_end2], st->cs)) == 0) d->has1[op->stamp_end2] = 1;
}

/* ---- the stream queue's hooks ---- */

/* The current device is per host thread. */
static void cu_thread_start(void *ctx, int sid)
{
    (void)sid;
    cudaSetDevice(((dev *)ctx)->gpu);
}

static void cu_record(void *ctx, int sid, int ev)
{
    dev *d = (dev *)ctx;
    CU(d, cudaEventRecord(d->sync_ev[ev], d->s[sid].cs));
}

static void cu_wait(void *ctx, int sid, int ev)
{
    dev *d = (dev *)ctx;
    CU(d, cudaStreamWaitEvent(d->s[sid].cs, d->sync_ev[ev], 0));
}

static void cu_free(void *ctx, void *p)
{
    cudaSetDevice(((dev *)ctx)->gpu);
    cudaFree(p);
}

static devq *cu_queue(dev *d) { return d->q; }

/* Between iterations (every stream idle): forget the events and put a
 * reference event on the host clock. Its GPU time lies between the host
 * readings around its record and completion; the midpoint is used. */
static void cu_reset_events(dev *d)
{
    devq_reset_events(d->q);
    memset(d->has0, 0, (size_t)d->nslots);
    memset(d->has1, 0, (size_t)d->nslots);
    cudaSetDevice(d->gpu);
    for (int i = 0; i < d->nstreams; i++)
        CU(d, cudaStreamSynchronize(d->s[i].cs));
    double a = host_now(d);
    CU(d, cudaEventRecord(d->ref, d->s[0].cs));
    CU(d, cudaEventSynchronize(d->ref));
    d->ref_host = (a + host_now(d)) / 2;
}

/* Wait for the workers to issue everything, then for the GPU, polling
 * NCCL's asynchronous errors: a failed or vanished peer ends this rank's
 * wait with a message instead of a hang (the executor's watchdog bounds the
 * rest). */
static dev_result cu_sync(dev *d, char err[LOONG_ERRLEN])
{
    devq_drain(d->q, err);
    cudaSetDevice(d->gpu);
    for (int i = 0; i < d->nstreams && !devq_failed(d->q); i++) {
        for (;;) {
            cudaError_t e = cudaStreamQuery(d->s[i].cs);
            if (e == cudaSuccess) break;
            if (e != cudaErrorNotReady) {
                CU(d, e);
                break;
            }
            for (int k = 0; k < d->ncomms && !d->local; k++) {
                ncclResult_t ar = ncclSuccess;
                if (d->comms[k]->nccl && ncclCommGetAsyncError(d->comms[k]->nccl, &ar) == ncclSuccess &&
                    ar != ncclSuccess) {
                    DEVQ_FAIL(d->q, DEV_ERR_COMM, "NCCL asynchronous error: %s (a peer failed or timed out)",
                              ncclGetErrorString(ar));
                    for (int j = 0; j < d->ncomms; j++)
                        if (d->comms[j]->nccl) ncclCommAbort(d->comms[j]->nccl), d->comms[j]->nccl = NULL;
                    break;
                }
            }
            if (devq_failed(d->q)) break;
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    return devq_drain(d->q, err); /* nothing is pending: the first error, if any */
}

static void cu_stamps(dev *d, int i, double *start, double *end)
{
    float ms0 = 0, ms1 = 0;
    if (!d->has0[i] || cudaEventElapsedTime(&ms0, d->ref, d->t0[i]) != cudaSuccess) ms0 = 0;
    if (!d->has1[i] || cudaEventElapsedTime(&ms1, d->ref, d->t1[i]) != cudaSuccess) ms1 = ms0;
    *start = d->ref_host + ms0 * 1e-3;
    *end = d->ref_host + ms1 * 1e-3;
}

/* ---- memory ---- */

static void *cu_alloc(dev *d, size_t bytes)
{
    void *p = NULL;
    cudaSetDevice(d->gpu);
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError(); /* clear it: out of memory is a NULL, not a sticky error */
        return NULL;
    }
    if (cudaMemset(p, 0, bytes ? bytes : 1) != cudaSuccess) {
        cudaFree(p);
        return NULL;
    }
    return devq_own(d->q, p);
}

static void cu_release(dev *d, void *p)
{
    devq_disown(d->q, p);
    cu_free(d, p);
}

static dev_result cu_put(dev *d, void *dst, const float *src, size_t n)
{
    cudaSetDevice(d->gpu);
    return CU(d, cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyHostToDevice)) ? DEV_ERR_FAULT : DEV_OK;
}

static dev_result cu_get(dev *d, float *dst, const void *src, size_t n)
{
    cudaSetDevice(d->gpu);
    return CU(d, cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost)) ? DEV_ERR_FAULT : DEV_OK;
}

/* ---- communicators ---- */

static dev_comm *cu_comm(dev *d, int sid, const int *ranks, int n, char err[LOONG_ERRLEN])
{
    int me = -1;
    for (int i = 0; i < n; i++)
        if (ranks[i] == d->rank) me = i;
    dev_comm *dc = (dev_comm *)calloc(1, sizeof *dc);
    int *rk = (int *)malloc((size_t)n * sizeof *rk);
    dev_comm **cs = (dev_comm **)realloc(d->comms, (size_t)(d->ncomms + 1) * sizeof *cs);
    if (cs) d->comms = cs;
    if (!dc || !rk || !cs) {
        snprintf(err, LOONG_ERRLEN, "rank %d: out of memory creating a communicator", d->rank);
        free(dc);
        free(rk);
        return NULL;
    }
    memcpy(rk, ranks, (size_t)n * sizeof *rk);
    dc->n = n;
    dc->me = me;
    dc->ranks = rk;
    dc->mpi = MPI_COMM_NULL;
    d->comms[d->ncomms++] = dc;
    if (d->local) {
        dc->lc = me >= 0 ? lcomm_get(sid, ranks, n) : NULL;
        if (me >= 0 && !dc->lc) {
            snprintf(err, LOONG_ERRLEN, "rank %d: out of memory creating a local communicator", d->rank);
            return NULL;
        }
        return dc;
    }
    /* NCCL: MPI splits out the members, member 0's unique id is broadcast,
     * and the members initialise one NCCL communicator for this stream. */
    if (MPI_Comm_split(MPI_COMM_WORLD, me >= 0 ? ranks[0] : MPI_UNDEFINED, me, &dc->mpi) != MPI_SUCCESS) {
        snprintf(err, LOONG_ERRLEN, "rank %d: MPI_Comm_split failed for a communicator of %d ranks", d->rank, n);
        return NULL;
    }
    if (me < 0) return dc;
    ncclUniqueId id;
    ncclResult_t r = ncclSuccess;
    if (me == 0) r = ncclGetUniqueId(&id);
    int ok = r == ncclSuccess, all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, dc->mpi);
    if (all_ok) {
        MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, dc->mpi);
        cudaSetDevice(d->gpu);
        r = ncclCommInitRank(&dc->nccl, n, id, me);
    }
    if (!all_ok || r != ncclSuccess) {
        snprintf(err, LOONG_ERRLEN, "rank %d: cannot create an NCCL communicator of %d ranks for stream %d: %s",
                 d->rank, n, sid, ncclGetErrorString(r));
        dc->nccl = NULL;
        return NULL;
    }
    return dc;
}

static int cu_comm_rank(dev_comm *c, int r)
{
    for (int i = 0; i < c->n; i++)
        if (c->ranks[i] == r) return i;
    return -1;
}

/* ---- open / close ---- */

static void cu_close(dev *d);

static dev *open_common(int rank, int nstreams, int nslots, bool local, char err[LOONG_ERRLEN])
{
    char why[LOONG_ERRLEN];
    if (cuda_gpu_count(why) == 0) {
        snprintf(err, LOONG_ERRLEN, "rank %d: %.200s", rank, why);
        return NULL;
    }
    devq_hooks h;
    memset(&h, 0, sizeof h);
    dev *d = (dev *)calloc(1, sizeof *d);
    if (!d) goto oom;
    d->rank = rank;
    d->local = local;
    d->nstreams = nstreams;
    d->nslots = nslots > 0 ? nslots : 1;
    if (cudaGetDevice(&d->gpu) != cudaSuccess) d->gpu = 0;
    pthread_mutex_init(&d->pos_mu, NULL);
    d->s = (stream *)calloc((size_t)nstreams, sizeof *d->s);
    d->has0 = (uint8_t *)calloc((size_t)d->nslots, 1);
    d->has1 = (uint8_t *)calloc((size_t)d->nslots, 1);
    d->sync_ev = (cudaEvent_t *)calloc((size_t)d->nslots, sizeof *d->sync_ev);
    d->t0 = (cudaEvent_t *)calloc((size_t)d->nslots, sizeof *d->t0);
    d->t1 = (cudaEvent_t *)calloc((size_t)d->nslots, sizeof *d->t1);
    if (!d->s || !d->has0 || !d->has1 || !d->sync_ev || !d->t0 || !d->t1) goto oom;
    h.ctx = d;
    h.thread_start = cu_thread_start;
    h.run = cu_run;
    h.record = cu_record;
    h.wait = cu_wait;
    h.release = cu_free;
    d->q = devq_open(rank, nstreams, d->nslots, &h, err);
    if (!d->q) {
        cu_close(d);
        return NULL;
    }
    if (CU(d, cudaEventCreate(&d->ref))) goto fail;
    for (int i = 0; i < d->nslots; i++)
        if (CU(d, cudaEventCreateWithFlags(&d->sync_ev[i], cudaEventDisableTiming)) ||
            CU(d, cudaEventCreate(&d->t0[i])) || CU(d, cudaEventCreate(&d->t1[i])))
            goto fail;
    for (int i = 0; i < nstreams; i++) {
        stream *s = &d->s[i];
        s->d = d;
        s->id = i;
        if (CU(d, cudaStreamCreateWithFlags(&s->cs, cudaStreamNonBlocking))) goto fail;
        if (CB(d, cublasCreate(&s->blas)) || CB(d, cublasSetStream(s->blas, s->cs))) goto fail;
    }
    return d;
oom:
    snprintf(err, LOONG_ERRLEN, "rank %d: cannot start the CUDA device (out of host memory)", rank);
    cu_close(d);
    return NULL;
fail:
    devq_drain(d->q, err);
    cu_close(d);
    return NULL;
}

static dev *cu_open(int rank, int nstreams, int nslots, char err[LOONG_ERRLEN])
{
    return open_common(rank, nstreams, nslots, false, err);
}

static dev *cu_open_local(int rank, int nstreams, int nslots, char err[LOONG_ERRLEN])
{
    return open_common(rank, nstreams, nslots, true, err);
}

static void cu_close(dev *d)
{
    if (!d) return;
    char ignored[LOONG_ERRLEN];
    if (d->q) devq_drain(d->q, ignored); /* every op issued ... */
    for (int i = 0; d->s && i < d->nstreams; i++)
        if (d->s[i].cs) cudaStreamSynchronize(d->s[i].cs); /* ... and done */
    devq_close(d->q);                                      /* the workers, and the device memory still owned */
    for (int i = 0; d->s && i < d->nstreams; i++) {
        stream *s = &d->s[i];
        if (s->blas) cublasDestroy(s->blas);
        if (s->cs) cudaStreamDestroy(s->cs);
        if (s->scratch) cudaFree(s->scratch);
    }
    for (int i = 0; i < d->ncomms; i++) {
        dev_comm *c = d->comms[i];
        if (c->nccl) ncclCommDestroy(c->nccl);
        if (c->mpi != MPI_COMM_NULL) MPI_Comm_free(&c->mpi);
        if (c->lc) lcomm_put(c->lc);
        free(c->ranks);
        free(c);
    }
    free(d->comms);
    for (int i = 0; i < d->npos; i++)
        cudaFree(d->pos[i].dev);
    free(d->pos);
    for (int i = 0; i < d->nslots; i++) {
        if (d->sync_ev && d->sync_ev[i]) cudaEventDestroy(d->sync_ev[i]);
        if (d->t0 && d->t0[i]) cudaEventDestroy(d->t0[i]);
        if (d->t1 && d->t1[i]) cudaEventDestroy(d->t1[i]);
    }
    if (d->ref) cudaEventDestroy(d->ref);
    free(d->s);
    free(d->has0);
    free(d->has1);
    free(d->sync_ev);
    free(d->t0);
    free(d->t1);
    pthread_mutex_destroy(&d->pos_mu);
    free(d);
}

extern "C" const dev_ops dev_cuda = {
    "cuda",  cu_open,      cu_close, cu_alloc,        cu_release, cu_put,    cu_get,
    cu_comm, cu_comm_rank, cu_queue, cu_reset_events, cu_sync,    cu_stamps, host_now,
};

extern "C" const dev_ops dev_cuda_local = {
    "cuda",  cu_open_local, cu_close, cu_alloc,        cu_release, cu_put,    cu_get,
    cu_comm, cu_comm_rank,  cu_queue, cu_reset_events, cu_sync,    cu_stamps, host_now,
};

/* What loong-cuda.so offers the loader (exec/plugin.h): loong dlopens it
 * only for --device cuda, so no other process maps the CUDA libraries. */
extern "C" const dev_plugin loong_device_plugin = {
    DEV_PLUGIN_ABI, "cuda", &dev_cuda, &dev_cuda_local, cuda_gpu_count, cuda_select_gpu,
};

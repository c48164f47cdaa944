/*
 * local_cuda: the CUDA device's local transport (see local_cuda.h): all
 * ranks of a mesh as threads of one process on one GPU. Members meet on the
 * host (a mutex and a condition variable per communicator), exchange
 * buffer pointers and cudaEvents, and every copy or reduction is then
 * device work on the ranks' own CUDA streams, ordered by those events.
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/devq.h"
#include "kernels_cuda.h"
#include "local_cuda.h"

/* A failed CUDA call fails the rank's queue with file:line (devq), as
 * device_cuda.cu's CU does. */
static int cuda_check(devq *q, cudaError_t e, const char *what, const char *file, int line)
{
    if (e == cudaSuccess) return 0;
    dev_result code = e == cudaErrorMemoryAllocation ? DEV_ERR_MEM : DEV_ERR_FAULT;
    devq_fail(q, code, file, line, "CUDA error: %s: %s", what, cudaGetErrorString(e));
    return -1;
}
#define CU(q, call) cuda_check((q), (call), #call, __FILE__, __LINE__)

typedef struct lmsg {
    const void *sbuf;
    size_t bytes;
    cudaEvent_t ready, done;
    bool done_set;
    struct lmsg *next;
} lmsg;

typedef struct xslot {
    const void *s;
    void *r;
    cudaEvent_t ev;
} xslot;

struct lcomm {
    int stream, n, refs;
    int *ranks;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    lmsg **head, **tail; /* FIFO per ordered pair (src * n + dst) */
    unsigned long gen;
    int arrived;
    xslot *slot[2]; /* double-buffered by generation parity */
    /* each member's barrier event per generation parity, created on first
     * use and kept: a member re-records its parity-p event two generations
     * later, when every other member has long issued its wait on it (all
     * arrived at the generation between). An event destroyed right after
     * the exchange could be destroyed before a slower member waited on it,
     * which crashed the driver on an H200. */
    cudaEvent_t *ev[2];
};

static pthread_mutex_t g_lmu = PTHREAD_MUTEX_INITIALIZER;
static lcomm **g_lc;
static int g_nlc;

lcomm *lcomm_get(int stream, const int *ranks, int n)
{
    pthread_mutex_lock(&g_lmu);
    lcomm *lc = NULL;
    for (int i = 0; i < g_nlc && !lc; i++)
        if (g_lc[i]->stream == stream && g_lc[i]->n == n && !memcmp(g_lc[i]->ranks, ranks, (size_t)n * sizeof *ranks))
            lc = g_lc[i];
    if (!lc) {
        lcomm **a = (lcomm **)realloc(g_lc, (size_t)(g_nlc + 1) * sizeof *a);
        lc = (lcomm *)calloc(1, sizeof *lc);
        if (a) g_lc = a;
        if (lc) {
            lc->ranks = (int *)malloc((size_t)n * sizeof *ranks);
            lc->head = (lmsg **)calloc((size_t)n * (size_t)n, sizeof *lc->head);
            lc->tail = (lmsg **)calloc((size_t)n * (size_t)n, sizeof *lc->tail);
            lc->slot[0] = (xslot *)calloc((size_t)n, sizeof(xslot));
            lc->slot[1] = (xslot *)calloc((size_t)n, sizeof(xslot));
            lc->ev[0] = (cudaEvent_t *)calloc((size_t)n, sizeof(cudaEvent_t));
            lc->ev[1] = (cudaEvent_t *)calloc((size_t)n, sizeof(cudaEvent_t));
        }
        if (!a || !lc || !lc->ranks || !lc->head || !lc->tail || !lc->slot[0] || !lc->slot[1] || !lc->ev[0] ||
            !lc->ev[1]) {
            if (lc) {
                free(lc->ranks);
                free(lc->head);
                free(lc->tail);
                free(lc->slot[0]);
                free(lc->slot[1]);
                free(lc->ev[0]);
                free(lc->ev[1]);
                free(lc);
            }
            pthread_mutex_unlock(&g_lmu);
            return NULL;
        }
        memcpy(lc->ranks, ranks, (size_t)n * sizeof *ranks);
        lc->stream = stream;
        lc->n = n;
        pthread_mutex_init(&lc->mu, NULL);
        pthread_cond_init(&lc->cv, NULL);
        g_lc[g_nlc++] = lc;
    }
    lc->refs++;
    pthread_mutex_unlock(&g_lmu);
    return lc;
}

void lcomm_put(lcomm *lc)
{
    pthread_mutex_lock(&g_lmu);
    if (--lc->refs == 0) {
        for (int i = 0; i < g_nlc; i++)
            if (g_lc[i] == lc) g_lc[i] = g_lc[--g_nlc];
        free(lc->ranks);
        free(lc->head);
        free(lc->tail);
        free(lc->slot[0]);
        free(lc->slot[1]);
        for (int p = 0; p < 2; p++) {
            for (int i = 0; i < lc->n; i++)
                if (lc->ev[p][i]) cudaEventDestroy(lc->ev[p][i]);
            free(lc->ev[p]);
        }
        pthread_mutex_destroy(&lc->mu);
        pthread_cond_destroy(&lc->cv);
        free(lc);
    }
    pthread_mutex_unlock(&g_lmu);
}

/* Every member posts (s, r, ev) and gets all members' posts in out[n]. */
static void lcomm_xchg(lcomm *lc, int me, const void *s, void *r, cudaEvent_t ev, xslot *out)
{
    pthread_mutex_lock(&lc->mu);
    unsigned long g = lc->gen;
    xslot *buf = lc->slot[g & 1];
    buf[me] = (xslot){s, r, ev};
    if (++lc->arrived == lc->n) {
        lc->arrived = 0;
        lc->gen++;
        pthread_cond_broadcast(&lc->cv);
    } else {
        while (lc->gen == g)
            pthread_cond_wait(&lc->cv, &lc->mu);
    }
    memcpy(out, buf, (size_t)lc->n * sizeof *out);
    pthread_mutex_unlock(&lc->mu);
}

static int new_event(devq *q, cudaEvent_t *e) { return CU(q, cudaEventCreateWithFlags(e, cudaEventDisableTiming)); }

/* Record an event on this stream, exchange it with every member, and make
 * this stream wait for all members' events: a device-side barrier. With
 * bufs, also returns every member's (s, r) pointers. */
static int local_barrier(devq *q, cudaStream_t cs, lcomm *lc, int me, const void *s, void *r, xslot *all)
{
    pthread_mutex_lock(&lc->mu);
    cudaEvent_t *e = &lc->ev[lc->gen & 1][me]; /* gen moves on only once this member has arrived too */
    pthread_mutex_unlock(&lc->mu);
    if (!*e && new_event(q, e)) return -1;
    if (CU(q, cudaEventRecord(*e, cs))) return -1;
    lcomm_xchg(lc, me, s, r, *e, all);
    int rc = 0;
    for (int j = 0; j < lc->n && rc == 0; j++)
        if (j != me) rc = CU(q, cudaStreamWaitEvent(cs, all[j].ev, 0));
    return rc;
}

void local_sendrecv(devq *q, cudaStream_t cs, lcomm *lc, int me, const dev_op *op)
{
    lmsg *m = NULL;
    if (op->u.p2p.to >= 0) { /* post the send */
        m = (lmsg *)calloc(1, sizeof *m);
        if (!m) {
            DEVQ_FAIL(q, DEV_ERR_MEM, "out of host memory in a local send");
            return;
        }
        m->sbuf = op->u.p2p.sbuf;
        m->bytes = op->u.p2p.sbytes;
        if (new_event(q, &m->ready) || CU(q, cudaEventRecord(m->ready, cs))) return;
        pthread_mutex_lock(&lc->mu);
        size_t k = (size_t)me * (size_t)lc->n + (size_t)op->u.p2p.to;
        if (lc->tail[k])
            lc->tail[k]->next = m;
        else
            lc->head[k] = m;
        lc->tail[k] = m;
        pthread_cond_broadcast(&lc->cv);
        pthread_mutex_unlock(&lc->mu);
    }
    if (op->u.p2p.from >= 0) { /* take the matching send and copy on this stream */
        size_t k = (size_t)op->u.p2p.from * (size_t)lc->n + (size_t)me;
        pthread_mutex_lock(&lc->mu);
        while (!lc->head[k] && !devq_failed(q))
            pthread_cond_wait(&lc->cv, &lc->mu);
        lmsg *in = lc->head[k];
        if (in) {
            lc->head[k] = in->next;
            if (!lc->head[k]) lc->tail[k] = NULL;
        }
        pthread_mutex_unlock(&lc->mu);
        if (!in) return;
        int rc = 0;
        if (in->bytes != op->u.p2p.rbytes) {
            DEVQ_FAIL(q, DEV_ERR_COMM, "local recv of %zu bytes matched a send of %zu bytes", op->u.p2p.rbytes,
                      in->bytes);
            rc = -1;
        }
        if (rc == 0) rc = CU(q, cudaStreamWaitEvent(cs, in->ready, 0));
        if (rc == 0) rc = CU(q, cudaMemcpyAsync(op->u.p2p.rbuf, in->sbuf, in->bytes, cudaMemcpyDeviceToDevice, cs));
        if (rc == 0) rc = new_event(q, &in->done);
        if (rc == 0) rc = CU(q, cudaEventRecord(in->done, cs));
        pthread_mutex_lock(&lc->mu);
        in->done_set = true; /* the sender destroys in->done (or sees the error) */
        pthread_cond_broadcast(&lc->cv);
        pthread_mutex_unlock(&lc->mu);
    }
    if (m) { /* the send buffer is reusable once the receiver's copy is done */
        pthread_mutex_lock(&lc->mu);
        while (!m->done_set && !devq_failed(q))
            pthread_cond_wait(&lc->cv, &lc->mu);
        pthread_mutex_unlock(&lc->mu);
        if (m->done_set && m->done) CU(q, cudaStreamWaitEvent(cs, m->done, 0));
        if (m->done) cudaEventDestroy(m->done);
        if (m->ready) cudaEventDestroy(m->ready);
        if (m->done_set) free(m);
    }
}

void local_collective(devq *q, cudaStream_t cs, lcomm *lc, int me, const dev_op *op)
{
    int n = lc->n;
    xslot *all = (xslot *)calloc((size_t)n, sizeof *all);
    if (!all) {
        DEVQ_FAIL(q, DEV_ERR_MEM, "out of host memory in a local collective of %d ranks", n);
        return;
    }
    size_t cnt, off;
    dev_part_of(op->u.coll.count, n, me, &cnt, &off);
    if (local_barrier(q, cs, lc, me, op->u.coll.sbuf, op->u.coll.rbuf, all)) goto out;
    if (op->kind == DOP_ALLTOALL) {
        size_t b = op->u.coll.count;
        for (int j = 0; j < n; j++)
            if (CU(q, cudaMemcpyAsync(op->u.coll.rbuf + (size_t)j * b, (const float *)all[j].s + (size_t)me * b,
                                      b * sizeof(float), cudaMemcpyDeviceToDevice, cs)))
                goto out;
    }
    if (op->kind == DOP_ALLREDUCE || op->kind == DOP_REDUCESCATTER) {
        /* phase 1: my part summed from every member (nobody writes it) */
        for (int j = 0; j < n; j++)
            if (j != me && cnt &&
                CU(q, (cudaError_t)cuda_axpy(op->u.coll.rbuf + off, (float *)all[j].r + off, cnt, cs)))
                goto out;
    }
    if (op->kind == DOP_ALLREDUCE && local_barrier(q, cs, lc, me, NULL, op->u.coll.rbuf, all)) goto out;
    if (op->kind == DOP_ALLREDUCE || op->kind == DOP_ALLGATHER) {
        /* phase 2: every other member's own part copied here */
        for (int j = 0; j < n; j++) {
            size_t cj, oj;
            dev_part_of(op->u.coll.count, n, j, &cj, &oj);
            if (j != me && cj &&
                CU(q, cudaMemcpyAsync(op->u.coll.rbuf + oj, (float *)all[j].r + oj, cj * sizeof(float),
                                      cudaMemcpyDeviceToDevice, cs)))
                goto out;
        }
    }
    local_barrier(q, cs, lc, me, NULL, NULL, all); /* nobody reuses a buffer others still read */
out:
    free(all);
}

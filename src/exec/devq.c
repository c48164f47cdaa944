/* devq: stream workers, event flags, the first error. See devq.h. */
#include "devq.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"

typedef enum { ITEM_OP, ITEM_RECORD, ITEM_WAIT } item_kind;

typedef struct item {
    item_kind kind;
    int event;
    dev_op op;
} item;

typedef struct wstream {
    struct devq *q;
    int id;
    pthread_t th;
    bool started, stop;
    item *fifo;
    size_t head, tail, cap;
} wstream;

struct devq {
    int rank, nstreams, nevents;
    devq_hooks h;
    wstream *s;
    pthread_mutex_t mu; /* guards the FIFOs, the flags, pending and the error */
    pthread_cond_t cv;
    uint8_t *ev;
    size_t pending;
    dev_result error;
    char errmsg[LOONG_ERRLEN];
    pthread_mutex_t mem_mu;
    void **mem;
    size_t nmem, memcap;
};

void devq_fail(devq *q, dev_result code, const char *file, int line, const char *fmt, ...)
{
    char msg[LOONG_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&q->mu);
    if (!q->error) {
        q->error = code;
        snprintf(q->errmsg, sizeof q->errmsg, "rank %d: %.180s (%s:%d)", q->rank, msg, file, line);
    }
    memset(q->ev, 1, (size_t)q->nevents); /* release every waiter */
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

bool devq_failed(devq *q)
{
    pthread_mutex_lock(&q->mu);
    bool failed = q->error != DEV_OK;
    pthread_mutex_unlock(&q->mu);
    return failed;
}

/* --fail-rank/--fail-at task:T: the rank dies at the op, as a crash would. */
static void inject_failure(const devq *q, const dev_op *op)
{
    char where[32];
    snprintf(where, sizeof where, "task %d", op->fail - 1);
    fault_fire(q->rank, where, (fault_signal)op->fail_signal);
}

static void run_item(devq *q, wstream *s, const item *it)
{
    switch (it->kind) {
    case ITEM_OP:
        if (it->op.fail) inject_failure(q, &it->op);
        q->h.run(q->h.ctx, s->id, &it->op);
        break;
    case ITEM_RECORD:
        if (q->h.record) q->h.record(q->h.ctx, s->id, it->event);
        break;
    case ITEM_WAIT:
        if (q->h.wait) q->h.wait(q->h.ctx, s->id, it->event);
        break;
    }
}

static void *worker(void *arg)
{
    wstream *s = arg;
    devq *q = s->q;
    if (q->h.thread_start) q->h.thread_start(q->h.ctx, s->id);
    for (;;) {
        pthread_mutex_lock(&q->mu);
        while (s->head == s->tail && !s->stop)
            pthread_cond_wait(&q->cv, &q->mu);
        if (s->head == s->tail && s->stop) {
            pthread_mutex_unlock(&q->mu);
            return NULL;
        }
        item it = s->fifo[s->head % s->cap];
        if (it.kind == ITEM_WAIT)
            while (!q->ev[it.event])
                pthread_cond_wait(&q->cv, &q->mu);
        bool skip = q->error != DEV_OK;
        pthread_mutex_unlock(&q->mu);
        if (!skip) run_item(q, s, &it);
        pthread_mutex_lock(&q->mu);
        if (it.kind == ITEM_RECORD) q->ev[it.event] = 1;
        s->head++;
        q->pending--;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
    }
}

/* Double a full FIFO, keeping the order of what is queued. */
static bool grow_fifo(wstream *s)
{
    size_t nc = s->cap * 2;
    item *f = malloc(nc * sizeof *f);
    if (!f) return false;
    for (size_t i = s->head; i < s->tail; i++)
        f[i % nc] = s->fifo[i % s->cap];
    free(s->fifo);
    s->fifo = f;
    s->cap = nc;
    return true;
}

static dev_result enqueue(devq *q, int sid, const item *it)
{
    if (sid < 0 || sid >= q->nstreams) return DEV_ERR_ARG;
    if (it->kind != ITEM_OP && (it->event < 0 || it->event >= q->nevents)) return DEV_ERR_ARG;
    wstream *s = &q->s[sid];
    pthread_mutex_lock(&q->mu);
    if (s->tail - s->head == s->cap && !grow_fifo(s)) {
        pthread_mutex_unlock(&q->mu);
        return DEV_ERR_MEM;
    }
    s->fifo[s->tail % s->cap] = *it;
    s->tail++;
    q->pending++;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return DEV_OK;
}

dev_result devq_launch(devq *q, int stream, const dev_op *op)
{
    item it;
    memset(&it, 0, sizeof it);
    it.kind = ITEM_OP;
    it.op = *op;
    return enqueue(q, stream, &it);
}

dev_result devq_record(devq *q, int stream, int event)
{
    item it = {.kind = ITEM_RECORD, .event = event};
    return enqueue(q, stream, &it);
}

dev_result devq_wait(devq *q, int stream, int event)
{
    item it = {.kind = ITEM_WAIT, .event = event};
    return enqueue(q, stream, &it);
}

void devq_reset_events(devq *q)
{
    pthread_mutex_lock(&q->mu);
    memset(q->ev, 0, (size_t)q->nevents);
    pthread_mutex_unlock(&q->mu);
}

dev_result devq_drain(devq *q, char err[LOONG_ERRLEN])
{
    pthread_mutex_lock(&q->mu);
    while (q->pending)
        pthread_cond_wait(&q->cv, &q->mu);
    dev_result rc = q->error;
    if (rc) snprintf(err, LOONG_ERRLEN, "%s", q->errmsg);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

void *devq_own(devq *q, void *p)
{
    if (!p) return NULL;
    pthread_mutex_lock(&q->mem_mu);
    if (q->nmem == q->memcap) {
        size_t nc = q->memcap ? 2 * q->memcap : 64;
        void **m = realloc(q->mem, nc * sizeof *m);
        if (!m) {
            pthread_mutex_unlock(&q->mem_mu);
            q->h.release(q->h.ctx, p);
            return NULL;
        }
        q->mem = m;
        q->memcap = nc;
    }
    q->mem[q->nmem++] = p;
    pthread_mutex_unlock(&q->mem_mu);
    return p;
}

void devq_disown(devq *q, void *p)
{
    pthread_mutex_lock(&q->mem_mu);
    for (size_t i = 0; i < q->nmem; i++)
        if (q->mem[i] == p) {
            q->mem[i] = q->mem[--q->nmem];
            break;
        }
    pthread_mutex_unlock(&q->mem_mu);
}

devq *devq_open(int rank, int nstreams, int nevents, const devq_hooks *h, char err[LOONG_ERRLEN])
{
    devq *q = calloc(1, sizeof *q);
    if (!q) goto fail;
    q->rank = rank;
    q->nstreams = nstreams;
    q->nevents = nevents > 0 ? nevents : 1;
    q->h = *h;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    pthread_mutex_init(&q->mem_mu, NULL);
    q->s = calloc((size_t)nstreams, sizeof *q->s);
    q->ev = calloc((size_t)q->nevents, 1);
    if (!q->s || !q->ev) goto fail;
    for (int i = 0; i < nstreams; i++) {
        wstream *s = &q->s[i];
        s->q = q;
        s->id = i;
        s->cap = 256;
        s->fifo = malloc(s->cap * sizeof *s->fifo);
        if (!s->fifo || pthread_create(&s->th, NULL, worker, s) != 0) goto fail;
        s->started = true;
    }
    return q;
fail:
    snprintf(err, LOONG_ERRLEN, "rank %d: cannot start the device's streams (out of memory or threads)", rank);
    devq_close(q);
    return NULL;
}

void devq_close(devq *q)
{
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    for (int i = 0; q->s && i < q->nstreams; i++)
        q->s[i].stop = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; q->s && i < q->nstreams; i++) {
        if (q->s[i].started) pthread_join(q->s[i].th, NULL);
        free(q->s[i].fifo);
    }
    for (size_t i = 0; i < q->nmem; i++)
        q->h.release(q->h.ctx, q->mem[i]);
    free(q->mem);
    free(q->s);
    free(q->ev);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mem_mu);
    free(q);
}

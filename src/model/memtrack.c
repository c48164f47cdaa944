/* memtrack: the memory timeline of a timed DAG. See memtrack.h. */
#include "memtrack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mesh.h"
#include "core/pipeline.h"
#include "core/recompute.h"
#include "core/xalloc.h"
#include "memory.h"

static const char *const term_names[MT_TERMS] = {"weights",     "grads",     "optimizer", "workspace", "gathered",
                                                 "activations", "recompute", "gradients", "attention", "lm_head"};

const char *memtrack_term_name(int term) { return term >= 0 && term < MT_TERMS ? term_names[term] : "?"; }

typedef struct span {
    double a, b;
} span;

static void span_add(span *s, double a, double b)
{
    if (a < s->a) s->a = a;
    if (b > s->b) s->b = b;
}

static bool span_set(const span *s) { return s->a <= s->b; }

/* An allocation (delta > 0) or a release at time t. */
typedef struct mt_event {
    double t, delta;
    int term;
} mt_event;

typedef struct evlist {
    mt_event *e;
    size_t n, cap;
} evlist;

static void ev_push(evlist *l, double t, int term, double delta)
{
    if (delta == 0) return;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->e = xrealloc_array(l->e, l->cap, sizeof *l->e, "the memory timeline");
    }
    l->e[l->n++] = (mt_event){t, delta, term};
}

/* Bytes held over [a, b]. */
static void ev_live(evlist *l, double a, double b, int term, double bytes)
{
    ev_push(l, a, term, bytes);
    ev_push(l, b, term, -bytes);
}

/* Time order; at one instant releases first (a task that ends frees its
 * tensors before the next one, starting then, allocates). */
static int cmp_event(const void *pa, const void *pb)
{
    const mt_event *a = pa, *b = pb;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return (a->delta > 0) - (b->delta > 0);
}

enum { PH_FWD, PH_RC, PH_BWD, PH_N };

static int phase_index(int phase)
{
    return phase == PHASE_FWD ? PH_FWD : phase == PHASE_RECOMPUTE ? PH_RC : phase == PHASE_BWD ? PH_BWD : -1;
}

/* The tasks of an attention pass: its kernels (blocks, merges, dK/dV
 * accumulations; unfused, the softmax and its dropout) and its head
 * all-to-alls. The ring's p2p are left out:
 * a recv may be posted before the previous pass ends, while its slot is
 * the same buffer. */
static bool attention_task(const dag_task *t)
{
    switch (t->op) {
    case OP_ATTN:
    case OP_DKV_ACC:
    case OP_KV_REP_SUM:
    case OP_SOFTMAX:
    case OP_ATTN_DROPOUT:
    case OP_A2A_QKV:
    case OP_A2A_O:
    case OP_A2A_DO:
    case OP_A2A_DQKV: return true;
    default: return false;
    }
}

/* What block l of `stage` keeps for its backward, what its re-run
 * regenerates, and its gradients (as much as it keeps without recompute),
 * per memory.h: under full recompute the group's first block keeps its
 * input and the others nothing; blocks not re-run keep all. */
static void block_terms(const config *c, int stage, double *kept, double *regen, double *grad)
{
    int L = c->model.layers;
    char *rerun = xcalloc((size_t)L, 2, "the memory timeline"), *keeper = rerun + L;
    for (int l = 0; l < L; l++) {
        int first, n = pipe_holds(c, stage, l) ? recompute_span(c, stage, l, &first) : 0;
        for (int j = 0; j < n; j++)
            rerun[first + j] = 1;
        if (n > 0) keeper[first] = 1;
    }
    for (int l = 0; l < L; l++) {
        double none = memory_block_activations(c, l, RECOMPUTE_NONE),
               policy = memory_block_activations(c, l, c->recompute);
        kept[l] = !rerun[l] ? none : c->recompute == RECOMPUTE_FULL && !keeper[l] ? 0 : policy;
        regen[l] = rerun[l] ? none - kept[l] : 0;
        grad[l] = none;
    }
    free(rerun);
}

/* The events of rank r. */
static void rank_events(const dag *g, const double *start, const double *dur, int r, evlist *ev)
{
    const config *c = dag_config(g);
    int L = c->model.layers, M = c->micro_batches, stage = pipe_stage(c, r);
    size_t nk = (size_t)L * (size_t)M;
    span *pass = xmalloc_array(nk * 2 * PH_N, sizeof *pass, "the memory timeline"), *attn = pass + nk * PH_N;
    span *head = xmalloc_array((size_t)M, sizeof *head, "the memory timeline");
    for (size_t i = 0; i < nk * 2 * PH_N; i++)
        pass[i] = (span){INFINITY, -INFINITY};
    for (int k = 0; k < M; k++)
        head[k] = (span){INFINITY, -INFINITY};
    for (int s = 0; s < STREAM_COUNT; s++) {
        uint32_t n;
        const uint32_t *ids = dag_stream_tasks(g, r, s, &n);
        for (uint32_t i = 0; i < n; i++) {
            const dag_task *t = dag_task_get(g, ids[i]);
            double a = start[t->id], b = a + dur[t->id];
            int ph = phase_index(t->phase);
            if (t->op == OP_LM_HEAD && ph == PH_FWD) span_add(&head[t->mb], a, a);
            if (t->op == OP_LM_HEAD && ph == PH_BWD) span_add(&head[t->mb], b, b);
            if (t->layer < 0 || ph < 0) continue;
            size_t key = ((size_t)t->mb * (size_t)L + (size_t)t->layer) * PH_N + (size_t)ph;
            if (s == STREAM_COMP) span_add(&pass[key], a, b);
            if (attention_task(t)) span_add(&attn[key], a, b);
        }
    }
    memory_estimate e;
    memory_estimate_stage(c, stage, &e);
    ev_push(ev, 0, MT_WEIGHTS, e.weights - e.gathered + e.fp8_weights); /* with TE's FP8 copies, as the model */
    ev_push(ev, 0, MT_GRADS, e.grads);
    ev_push(ev, 0, MT_OPTIMIZER, e.optimizer);
    ev_push(ev, 0, MT_WORKSPACE, e.workspace);
    double *kept = xmalloc_array(3 * (size_t)L, sizeof *kept, "the memory timeline"), *regen = kept + L,
           *grad = regen + L;
    block_terms(c, stage, kept, regen, grad);
    double sp = memory_sp_gathered(c);
    double buffers = memory_attention_buffers(c), logits = memory_lm_head_bytes(c);
    for (int k = 0; k < M; k++) {
        if (span_set(&head[k])) ev_live(ev, head[k].a, head[k].b, MT_LM_HEAD, logits);
        for (int l = 0; l < L; l++) {
            const span *p = &pass[((size_t)k * (size_t)L + (size_t)l) * PH_N];
            const span *at = &attn[((size_t)k * (size_t)L + (size_t)l) * PH_N];
            if (!span_set(&p[PH_FWD]) || !span_set(&p[PH_BWD])) continue; /* not a block of this rank's program */
            double end = p[PH_BWD].b;
            ev_live(ev, p[PH_FWD].a, end, MT_ACTIVATIONS, kept[l]);
            if (span_set(&p[PH_RC])) ev_live(ev, p[PH_RC].a, end, MT_RECOMPUTE, regen[l]);
            ev_live(ev, p[PH_BWD].a, end, MT_GRADIENTS, grad[l] + sp);
            for (int ph = 0; ph < PH_N; ph++)
                if (span_set(&at[ph])) ev_live(ev, at[ph].a, at[ph].b, MT_ATTENTION, buffers);
        }
    }
    /* ZeRO-3's gathers: held until the end of the pass that reads them */
    uint32_t n;
    const uint32_t *ids = dag_stream_tasks(g, r, STREAM_DP, &n);
    for (uint32_t i = 0; c->zero == 3 && i < n; i++) {
        const dag_task *t = dag_task_get(g, ids[i]);
        if (t->op != OP_PARAM_ALLGATHER) continue;
        double a = start[t->id], b = a + dur[t->id];
        if (t->layer < 0) {
            if (span_set(&head[t->mb]) && head[t->mb].b > b) b = head[t->mb].b;
        } else {
            const span *p = &pass[((size_t)t->mb * (size_t)L + (size_t)t->layer) * PH_N];
            double end = a < p[PH_FWD].b ? p[PH_FWD].b : p[PH_BWD].b;
            if (end > b) b = end;
        }
        ev_live(ev, a, b, MT_GATHERED, 2 * memory_block_params(c, t->layer < 0));
    }
    free(kept);
    free(pass);
    free(head);
}

/* Sweep the sorted events into points, one per instant. */
static void rank_points(evlist *ev, memtrack_rank *out)
{
    qsort(ev->e, ev->n, sizeof *ev->e, cmp_event);
    memset(out, 0, sizeof *out);
    out->t = xmalloc_array(ev->n + 1, sizeof *out->t, "the memory timeline");
    out->total = xmalloc_array(ev->n + 1, sizeof *out->total, "the memory timeline");
    out->v = xmalloc_array((ev->n + 1) * MT_TERMS, sizeof *out->v, "the memory timeline");
    double cur[MT_TERMS] = {0};
    for (size_t i = 0; i < ev->n;) {
        double t = ev->e[i].t;
        for (; i < ev->n && ev->e[i].t == t; i++)
            cur[ev->e[i].term] += ev->e[i].delta;
        double total = 0;
        for (int k = 0; k < MT_TERMS; k++)
            total += cur[k];
        size_t j = out->n++;
        out->t[j] = t;
        out->total[j] = total;
        memcpy(&out->v[j * MT_TERMS], cur, sizeof cur);
        if (j == 0 || total > out->peak) out->peak = total, out->peak_t = t;
    }
}

void memtrack_build(const dag *g, const double *start, const double *dur, memtrack *out)
{
    out->nranks = config_ranks(dag_config(g));
    out->r = xcalloc((size_t)out->nranks, sizeof *out->r, "the memory timeline");
    evlist ev = {0};
    for (int r = 0; r < out->nranks; r++) {
        ev.n = 0;
        rank_events(g, start, dur, r, &ev);
        rank_points(&ev, &out->r[r]);
    }
    free(ev.e);
}

void memtrack_free(memtrack *m)
{
    for (int r = 0; r < m->nranks; r++) {
        free(m->r[r].t);
        free(m->r[r].v);
        free(m->r[r].total);
    }
    free(m->r);
    memset(m, 0, sizeof *m);
}

/* kprofile: a run by kind, rank, collective and step. See kprofile.h. */
#include "kprofile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/timeline.h"
#include "core/xalloc.h"
#include "model/nccl.h"

typedef struct slice {
    double ts, end, bytes;
    int rank, step, stream, kind;
    bool coll; /* counts in the collective table (a p2p pair's send; every NCCL kernel) */
} slice;

typedef struct slices {
    slice *v;
    size_t n, cap;
} slices;

static void add(slices *s, slice x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->v = xrealloc_array(s->v, s->cap, sizeof *s->v, "a profile's slices");
    }
    s->v[s->n++] = x;
}

static int by_group(const void *a, const void *b)
{
    const slice *x = a, *y = b;
    if (x->rank != y->rank) return x->rank - y->rank;
    if (x->step != y->step) return x->step - y->step;
    if (x->kind != y->kind) return x->kind - y->kind;
    if (x->stream != y->stream) return x->stream - y->stream;
    return (x->ts > y->ts) - (x->ts < y->ts);
}

/* Exposed communication of one (rank, step): v[0..n) are its slices. */
static double exposed_of(const slice *v, size_t n)
{
    tl_span *c = xmalloc_array(n + 1, sizeof *c, "a profile's spans");
    tl_span *o = xmalloc_array(n + 1, sizeof *o, "a profile's spans");
    size_t nc = 0, no = 0;
    for (size_t i = 0; i < n; i++) {
        tl_span s = {v[i].ts, v[i].end};
        if (kineto_kind_is_comm(v[i].kind))
            c[nc++] = s;
        else
            o[no++] = s;
    }
    nc = tl_merge(c, nc);
    no = tl_merge(o, no);
    double e = tl_length(c, nc) - tl_overlap(c, nc, o, no);
    free(c);
    free(o);
    return e;
}

static void add_coll(kprof *p, int kind, double bytes, double us)
{
    for (int i = 0; i < p->ncoll; i++)
        if (p->coll[i].kind == kind && p->coll[i].bytes == bytes) {
            p->coll[i].us += us;
            p->coll[i].n += 1;
            return;
        }
    p->coll = xrealloc_array(p->coll, (size_t)p->ncoll + 1, sizeof *p->coll, "a profile's collectives");
    p->coll[p->ncoll++] = (kprof_coll){kind, bytes, us, 1};
}

static int by_coll(const void *a, const void *b)
{
    const kprof_coll *x = a, *y = b;
    if (x->kind != y->kind) return x->kind - y->kind;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

/* The profile of slices s over nranks ranks and nsteps steps (slices
 * outside them are ignored). */
static void build(slices *s, int nranks, int nsteps, kprof *p)
{
    memset(p, 0, sizeof *p);
    p->nranks = nranks;
    p->nsteps = nsteps;
    size_t nk = (size_t)nranks * KINETO_KINDS;
    p->kind_us = xcalloc(nk + 1, sizeof *p->kind_us, "a profile");
    p->kind_n = xcalloc(nk + 1, sizeof *p->kind_n, "a profile");
    p->step_us = xcalloc((size_t)nranks + 1, sizeof *p->step_us, "a profile");
    p->exposed_us = xcalloc((size_t)nranks + 1, sizeof *p->exposed_us, "a profile");
    double *slowest = xcalloc((size_t)nsteps + 1, sizeof *slowest, "a profile");
    if (s->n > 1) qsort(s->v, s->n, sizeof *s->v, by_group);
    double per = 1.0 / nsteps;
    for (size_t i = 0; i < s->n;) {
        size_t j = i; /* [i, j): one (rank, step) */
        double lo = INFINITY, hi = -INFINITY;
        while (j < s->n && s->v[j].rank == s->v[i].rank && s->v[j].step == s->v[i].step) {
            lo = fmin(lo, s->v[j].ts);
            hi = fmax(hi, s->v[j].end);
            j++;
        }
        const slice *g = &s->v[i];
        if (g->rank >= 0 && g->rank < nranks && g->step >= 0 && g->step < nsteps) {
            p->step_us[g->rank] += (hi - lo) * per;
            slowest[g->step] = fmax(slowest[g->step], hi - lo);
            p->exposed_us[g->rank] += exposed_of(g, j - i) * per;
            for (size_t a = i; a < j;) { /* one (kind, stream): the union of its slices */
                size_t b = a;
                double len = 0, end = -INFINITY;
                while (b < j && s->v[b].kind == s->v[a].kind && s->v[b].stream == s->v[a].stream) {
                    const slice *x = &s->v[b++];
                    double from = fmax(x->ts, end);
                    if (x->end > from) len += x->end - from;
                    end = fmax(end, x->end);
                    p->kind_n[(size_t)g->rank * KINETO_KINDS + (size_t)x->kind] += per;
                    if (x->coll) add_coll(p, x->kind, x->bytes, x->end - x->ts);
                }
                p->kind_us[(size_t)g->rank * KINETO_KINDS + (size_t)s->v[a].kind] += len * per;
                a = b;
            }
        }
        i = j;
    }
    for (int k = 0; k < nsteps; k++)
        p->run_step_us += slowest[k] * per;
    for (int i = 0; i < p->ncoll; i++) {
        p->coll[i].us *= per;
        p->coll[i].n *= per;
    }
    if (p->ncoll > 1) qsort(p->coll, (size_t)p->ncoll, sizeof *p->coll, by_coll);
    free(slowest);
}

void kprof_of_kineto(const kineto_set *set, kprof *p)
{
    slices s = {0};
    for (int i = 0; i < set->n; i++) {
        const kineto_rank *r = &set->r[i];
        for (size_t j = 0; j < r->nk; j++) {
            const kineto_kernel *k = &r->k[j];
            if (k->step < 0) continue;
            add(&s,
                (slice){k->ts, k->ts + k->dur, k->bytes, i, k->step, k->stream, k->kind, kineto_kind_is_comm(k->kind)});
        }
    }
    build(&s, set->n, set->nsteps, p);
    p->rank0 = set->r[0].rank;
    free(s.v);
}

static const trace_ev *event_of(const trace *t, uint32_t id)
{
    size_t lo = 0, hi = t->n; /* t->ev is sorted by id */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->ev[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n && t->ev[lo].id == id ? &t->ev[lo] : NULL;
}

/* One task's slice: a collective at its nccl-tests size, p2p at the bytes
 * its send moves. */
static slice slice_of(const dag *g, const dag_task *d, const trace_ev *e)
{
    double bytes = 0;
    if (task_is_collective(d)) {
        int n;
        dag_group(g, d->group, &n);
        bytes = nccl_size_of_task(d->kind, (double)d->bytes, n);
    } else if (task_is_p2p(d)) {
        bytes = (double)dag_task_bytes_moved(g, d);
    }
    return (slice){e->ts,
                   e->ts + e->dur,
                   bytes,
                   e->rank,
                   0,
                   e->stream,
                   task_is_p2p(d) ? KINETO_P2P : d->kind,
                   !task_is_compute(d)};
}

void kprof_of_trace(const trace *t, const dag *g, kprof *p)
{
    slices s = {0};
    int ranks = config_ranks(dag_config(g));
    for (int r = 0; r < ranks; r++)
        for (int st = 0; st < STREAM_COUNT; st++) {
            uint32_t n;
            const uint32_t *ids = dag_stream_tasks(g, r, st, &n);
            for (uint32_t i = 0; i < n; i++) {
                const dag_task *d = dag_task_get(g, ids[i]), *next = i + 1 < n ? dag_task_get(g, ids[i + 1]) : NULL;
                const trace_ev *e = event_of(t, d->id);
                if (!e) continue; /* a trace of some ranks or layers */
                slice x = slice_of(g, d, e);
                /* a ring step's grouped send and recv are one SendRecv kernel */
                const trace_ev *pe = next && task_is_p2p(d) && task_is_p2p(next) && (next->flags & DAG_F_GROUPED)
                                         ? event_of(t, next->id)
                                         : NULL;
                if (pe) {
                    slice y = slice_of(g, next, pe);
                    x.ts = fmin(x.ts, y.ts);
                    x.end = fmax(x.end, y.end);
                    if (next->kind == TASK_SEND) x.bytes = y.bytes;
                    i++;
                }
                add(&s, x);
            }
        }
    build(&s, ranks, 1, p);
    free(s.v);
}

void kprof_free(kprof *p)
{
    free(p->kind_us);
    free(p->kind_n);
    free(p->step_us);
    free(p->exposed_us);
    free(p->coll);
    memset(p, 0, sizeof *p);
}

double kprof_kind_total(const kprof *p, int kind)
{
    double s = 0;
    for (int r = 0; r < p->nranks; r++)
        s += p->kind_us[(size_t)r * KINETO_KINDS + (size_t)kind];
    return s;
}

double kprof_exposed_total(const kprof *p)
{
    double s = 0;
    for (int r = 0; r < p->nranks; r++)
        s += p->exposed_us[r];
    return s;
}

/* ---- the report ---- */

static double err_pct(double pred, double meas) { return meas > 0 ? 100 * (pred - meas) / meas : NAN; }

/* The ranks both profiles hold: [*lo, *hi). */
static int common_ranks(const kprof *a, const kprof *b, int *lo, int *hi)
{
    *lo = a->rank0 > b->rank0 ? a->rank0 : b->rank0;
    int ea = a->rank0 + a->nranks, eb = b->rank0 + b->nranks;
    *hi = ea < eb ? ea : eb;
    if (*hi < *lo) *hi = *lo;
    return *hi - *lo;
}

/* Per-rank mean over ranks [lo, hi) of kind k. */
static double kind_mean(const kprof *p, int k, int lo, int hi, bool count)
{
    const double *v = count ? p->kind_n : p->kind_us;
    double s = 0;
    for (int r = lo; r < hi; r++)
        s += v[(size_t)(r - p->rank0) * KINETO_KINDS + (size_t)k];
    return hi > lo ? s / (hi - lo) : 0;
}

static const kprof_coll *find_coll(const kprof *p, int kind, double bytes)
{
    for (int i = 0; i < p->ncoll; i++)
        if (p->coll[i].kind == kind && p->coll[i].bytes == bytes) return &p->coll[i];
    return NULL;
}

static void print_err(FILE *f, double e)
{
    if (isnan(e))
        fprintf(f, " %9s", "-");
    else
        fprintf(f, " %+9.2f", e);
}

static void print_kinds(FILE *f, const kprof *pred, const kprof *meas, int lo, int hi)
{
    fprintf(f, "# per kind: kernel time per rank and step (mean over the %d ranks compared)\n", hi - lo);
    fprintf(f, "#%-14s %12s %12s %9s %10s %10s\n", "kind", "predicted_ms", "measured_ms", "error_%", "pred_n",
            "meas_n");
    for (int k = 0; k < KINETO_KINDS; k++) {
        double pu = kind_mean(pred, k, lo, hi, false), mu = kind_mean(meas, k, lo, hi, false);
        double pn = kind_mean(pred, k, lo, hi, true), mn = kind_mean(meas, k, lo, hi, true);
        if (pn == 0 && mn == 0) continue;
        fprintf(f, " %-14s %12.3f %12.3f", kineto_kind_name(k), pu / 1e3, mu / 1e3);
        print_err(f, err_pct(pu, mu));
        fprintf(f, " %10.1f %10.1f\n", pn, mn);
    }
}

static void print_ranks(FILE *f, const kprof *pred, const kprof *meas, int lo, int hi)
{
    fprintf(f, "# per rank (per step)\n#%5s %13s %13s %9s %13s %13s\n", "rank", "pred_step_ms", "meas_step_ms",
            "error_%", "pred_exp_ms", "meas_exp_ms");
    for (int r = lo; r < hi; r++) {
        int p = r - pred->rank0, m = r - meas->rank0;
        fprintf(f, " %5d %13.3f %13.3f", r, pred->step_us[p] / 1e3, meas->step_us[m] / 1e3);
        print_err(f, err_pct(pred->step_us[p], meas->step_us[m]));
        fprintf(f, " %13.3f %13.3f\n", pred->exposed_us[p] / 1e3, meas->exposed_us[m] / 1e3);
    }
}

static void print_colls(FILE *f, const kprof *pred, const kprof *meas)
{
    fprintf(f, "# collectives by op and size (nccl-tests' size; per step, all ranks; '-': that side has none)\n");
    fprintf(f, "#%-14s %14s %13s %13s %9s %9s %9s\n", "op", "size_bytes", "pred_us_each", "meas_us_each", "error_%",
            "pred_n", "meas_n");
    const kprof *side[2] = {pred, meas};
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < side[s]->ncoll; i++) {
            const kprof_coll *c = &side[s]->coll[i];
            const kprof_coll *o = find_coll(side[!s], c->kind, c->bytes);
            if (s == 1 && o) continue; /* printed with the prediction */
            const kprof_coll *pc = s ? o : c, *mc = s ? c : o;
            double pe = pc && pc->n ? pc->us / pc->n : NAN, me = mc && mc->n ? mc->us / mc->n : NAN;
            fprintf(f, " %-14s %14.0f", kineto_kind_name(c->kind), c->bytes);
            if (isnan(pe))
                fprintf(f, " %13s", "-");
            else
                fprintf(f, " %13.2f", pe);
            if (isnan(me))
                fprintf(f, " %13s", "-");
            else
                fprintf(f, " %13.2f", me);
            print_err(f, isnan(pe) || isnan(me) ? NAN : err_pct(pe, me));
            fprintf(f, " %9.1f %9.1f\n", pc ? pc->n : 0, mc ? mc->n : 0);
        }
}

void kprof_compare_print(FILE *f, const kprof *pred, const kprof *meas)
{
    int lo, hi, ranks = common_ranks(pred, meas, &lo, &hi);
    fprintf(f, "# task ids cannot match a profiler trace: compared by kind, by rank, by collective and size, and the "
               "step\n");
    if (pred->nranks != meas->nranks || pred->rank0 != meas->rank0)
        fprintf(f, "# the prediction holds ranks %d..%d and the measurement %d..%d: %d rank%s compared\n", pred->rank0,
                pred->rank0 + pred->nranks - 1, meas->rank0, meas->rank0 + meas->nranks - 1, ranks,
                ranks == 1 ? "" : "s");
    fprintf(f, "# step time: predicted %.3f ms, measured %.3f ms (the slowest rank, mean over %d step%s), error ",
            pred->run_step_us / 1e3, meas->run_step_us / 1e3, meas->nsteps, meas->nsteps == 1 ? "" : "s");
    double e = err_pct(pred->run_step_us, meas->run_step_us);
    fprintf(f, isnan(e) ? "-\n" : "%+.2f %%\n", e);
    double pe = 0, me = 0;
    for (int r = lo; r < hi; r++)
        pe += pred->exposed_us[r - pred->rank0], me += meas->exposed_us[r - meas->rank0];
    fprintf(f, "# exposed communication per rank and step: predicted %.3f ms, measured %.3f ms\n",
            ranks ? pe / ranks / 1e3 : 0, ranks ? me / ranks / 1e3 : 0);
    print_kinds(f, pred, meas, lo, hi);
    print_ranks(f, pred, meas, lo, hi);
    print_colls(f, pred, meas);
}

static json_t *num_or_null(double x) { return isnan(x) ? json_null() : json_real(x); }

json_t *kprof_compare_json(const kprof *pred, const kprof *meas)
{
    int lo, hi;
    common_ranks(pred, meas, &lo, &hi);
    json_t *kinds = json_array(), *rk = json_array(), *cl = json_array();
    for (int k = 0; k < KINETO_KINDS; k++) {
        double pu = kind_mean(pred, k, lo, hi, false), mu = kind_mean(meas, k, lo, hi, false);
        double pn = kind_mean(pred, k, lo, hi, true), mn = kind_mean(meas, k, lo, hi, true);
        if (pn == 0 && mn == 0) continue;
        json_array_append_new(kinds, json_pack("{s:s, s:f, s:f, s:o, s:f, s:f}", "kind", kineto_kind_name(k),
                                               "predicted_ms", pu / 1e3, "measured_ms", mu / 1e3, "error_pct",
                                               num_or_null(err_pct(pu, mu)), "predicted_n", pn, "measured_n", mn));
    }
    for (int r = lo; r < hi; r++) {
        int p = r - pred->rank0, m = r - meas->rank0;
        json_array_append_new(rk, json_pack("{s:i, s:f, s:f, s:f, s:f}", "rank", r, "predicted_step_ms",
                                            pred->step_us[p] / 1e3, "measured_step_ms", meas->step_us[m] / 1e3,
                                            "predicted_exposed_ms", pred->exposed_us[p] / 1e3, "measured_exposed_ms",
                                            meas->exposed_us[m] / 1e3));
    }
    const kprof *side[2] = {pred, meas};
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < side[s]->ncoll; i++) {
            const kprof_coll *c = &side[s]->coll[i], *o = find_coll(side[!s], c->kind, c->bytes);
            if (s == 1 && o) continue;
            const kprof_coll *pc = s ? o : c, *mc = s ? c : o;
            json_array_append_new(cl, json_pack("{s:s, s:f, s:o, s:o, s:f, s:f}", "op", kineto_kind_name(c->kind),
                                                "size_bytes", c->bytes, "predicted_us_each",
                                                num_or_null(pc && pc->n ? pc->us / pc->n : NAN), "measured_us_each",
                                                num_or_null(mc && mc->n ? mc->us / mc->n : NAN), "predicted_n",
                                                pc ? pc->n : 0.0, "measured_n", mc ? mc->n : 0.0));
        }
    return json_pack("{s:f, s:f, s:o, s:i, s:i, s:i, s:o, s:o, s:o}", "predicted_step_ms", pred->run_step_us / 1e3,
                     "measured_step_ms", meas->run_step_us / 1e3, "step_error_pct",
                     num_or_null(err_pct(pred->run_step_us, meas->run_step_us)), "predicted_ranks", pred->nranks,
                     "measured_ranks", meas->nranks, "steps", meas->nsteps, "kinds", kinds, "ranks", rk, "collectives",
                     cl);
}

/* ---- what the traces mapped ---- */

typedef struct named {
    int i;
    uint32_t n;
} named;

static int by_count(const void *a, const void *b)
{
    uint32_t x = ((const named *)a)->n, y = ((const named *)b)->n;
    return (x < y) - (x > y);
}

static void print_unknown(FILE *f, const kineto_rank *r, int top)
{
    double us = 0;
    named *v = xmalloc_array((size_t)r->nnames + 1, sizeof *v, "the unknown kernels");
    int nv = 0;
    for (size_t j = 0; j < r->nk; j++)
        if (r->k[j].kind == KINETO_OTHER) us += r->k[j].dur;
    bool *other = xcalloc((size_t)r->nnames + 1, sizeof *other, "the unknown kernels");
    for (size_t j = 0; j < r->nk; j++)
        if (r->k[j].kind == KINETO_OTHER) other[r->k[j].name] = true;
    for (int i = 0; i < r->nnames; i++)
        if (other[i]) v[nv++] = (named){i, r->name_count[i]};
    if (nv > 1) qsort(v, (size_t)nv, sizeof *v, by_count);
    fprintf(f,
            "# rank %d: %zu of %zu kernels (%.3f ms, %d names) named by no rule: kind 'other' (--kernel-names adds "
            "rules)\n",
            r->rank, r->unknown, r->nk, us / 1e3, nv);
    for (int i = 0; i < nv && i < top; i++)
        fprintf(f, "#   %8u  %.110s\n", v[i].n, r->names[v[i].i]);
    free(v);
    free(other);
}

void kineto_set_print(FILE *f, const kineto_set *s, int top)
{
    fprintf(f, "# measured: %d PyTorch profiler trace%s (world %d), step%s", s->n, s->n == 1 ? "" : "s", s->r[0].world,
            s->nsteps == 1 ? "" : "s");
    for (int i = 0; i < s->nsteps; i++)
        fprintf(f, i ? ",%d" : " %d", s->steps[i]);
    fprintf(f, s->steps[0] < 0 ? " (no ProfilerStep annotation: the whole trace is one step)\n" : "\n");
    fprintf(f, "#%5s %10s %-12s %12s %12s  %s\n", "rank", "stream", "role", "compute_ms", "nccl_ms", "process group");
    for (int i = 0; i < s->n; i++) {
        const kineto_rank *r = &s->r[i];
        for (int j = 0; j < r->nstreams; j++) {
            const kineto_stream *st = &r->streams[j];
            const char *role = st->comm_us > 0 && st->compute_us > 0 ? "mixed" : st->comm_us > 0 ? "comm" : "compute";
            fprintf(f, " %5d %10lld %-12s %12.3f %12.3f  %s\n", r->rank, (long long)st->id, role, st->compute_us / 1e3,
                    st->comm_us / 1e3,
                    st->pg_mixed ? "several (not mapped to one communicator)"
                    : st->pg[0]  ? st->pg
                                 : "-");
        }
    }
    size_t shaped = 0, compute = 0;
    for (int i = 0; i < s->n; i++) {
        shaped += s->r[i].shaped;
        for (size_t j = 0; j < s->r[i].nk; j++)
            compute += s->r[i].k[j].kind == TASK_GEMM || s->r[i].k[j].kind == TASK_ATTN_FWD ||
                       s->r[i].k[j].kind == TASK_ATTN_BWD;
    }
    fprintf(f, "# shapes: %zu of %zu attention and GEMM kernels have their work from record_shapes\n", shaped, compute);
    for (int i = 0; i < s->n; i++)
        if (s->r[i].unknown) print_unknown(f, &s->r[i], top);
}

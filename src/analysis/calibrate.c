/* calibrate: least-squares fits of compute rates and link alpha/beta from
 * measured traces. See calibrate.h. */
#include "calibrate.h"

#include "model/tiles.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_fit.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"

/* Start-up times above this are not a kernel's or a link's latency. */
#define MAX_T0 10e-3

typedef struct points {
    double *x, *y;
    double *phi;                /* compute points: the fraction of the kernel that communication overlapped */
    double *cand[CAL_TILES];    /* attention points: the work at each candidate tile */
    int n, cap, ncand, candcap; /* ncand: points that came with candidates */
} points;

const int calibrate_tile_shapes[CAL_TILES][2] = {{0, 0},     {64, 64},   {64, 128}, {128, 64},
                                                 {128, 128}, {128, 256}, {256, 128}};

/* A kernel counts as overlapped (an interference point) above this
 * fraction, and as clean (a point of its kind's line) below the other. */
#define PHI_OVERLAPPED 0.5
#define PHI_CLEAN      0.05

struct calibrate_points {
    points kind[TASK_KIND_COUNT], link[LINK_CLASSES];
    int ninputs;
};

static void push(points *p, double x, double y, double phi)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 256;
        p->x = xrealloc_array(p->x, (size_t)p->cap, sizeof *p->x, "the calibration's points");
        p->y = xrealloc_array(p->y, (size_t)p->cap, sizeof *p->y, "the calibration's points");
        p->phi = xrealloc_array(p->phi, (size_t)p->cap, sizeof *p->phi, "the calibration's points");
    }
    p->x[p->n] = x;
    p->phi[p->n] = phi;
    p->y[p->n++] = y;
}

calibrate_points *calibrate_points_new(void)
{
    return xcalloc(1, sizeof(calibrate_points), "the calibration's points");
}

void calibrate_points_free(calibrate_points *p)
{
    if (!p) return;
    points *all[TASK_KIND_COUNT + LINK_CLASSES];
    for (int k = 0; k < TASK_KIND_COUNT; k++)
        all[k] = &p->kind[k];
    for (int c = 0; c < LINK_CLASSES; c++)
        all[TASK_KIND_COUNT + c] = &p->link[c];
    for (int i = 0; i < TASK_KIND_COUNT + LINK_CLASSES; i++) {
        free(all[i]->x), free(all[i]->y), free(all[i]->phi);
        for (int c = 0; c < CAL_TILES; c++)
            free(all[i]->cand[c]);
    }
    free(p);
}

void calibrate_add_kind(calibrate_points *p, int kind, double work, double seconds, double overlapped)
{
    if (kind >= 0 && kind < TASK_KIND_COUNT) push(&p->kind[kind], work, seconds, overlapped);
}

void calibrate_add_attn(calibrate_points *p, int kind, const double work[1 + CAL_TILES], double seconds,
                        double overlapped)
{
    if (kind != TASK_ATTN_FWD && kind != TASK_ATTN_BWD) return;
    points *pt = &p->kind[kind];
    push(pt, work[0], seconds, overlapped);
    if (pt->candcap < pt->cap) { /* the candidates' arrays follow the points' */
        for (int c = 0; c < CAL_TILES; c++)
            pt->cand[c] = xrealloc_array(pt->cand[c], (size_t)pt->cap, sizeof *pt->cand[c], "the calibration's points");
        pt->candcap = pt->cap;
    }
    for (int c = 0; c < CAL_TILES; c++)
        pt->cand[c][pt->n - 1] = work[1 + c];
    pt->ncand++;
}

void calibrate_add_link(calibrate_points *p, link_class c, double bytes, double seconds)
{
    push(&p->link[c], bytes, seconds, 0);
}

/* ---- points of measured traces ---- */

typedef struct span {
    int rank;
    double a, b;
} span;

static int by_rank_start(const void *x, const void *y)
{
    const span *u = x, *v = y;
    if (u->rank != v->rank) return u->rank - v->rank;
    return (u->a > v->a) - (u->a < v->a);
}

/* Each rank's communication kernels (every non-compute task) as sorted,
 * merged intervals: when any of them ran. */
static span *comm_spans(const trace *t, const dag *g, size_t *n)
{
    span *s = xmalloc_array(t->n + 1, sizeof *s, "the communication intervals");
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        const dag_task *d = dag_task_get(g, t->ev[i].id);
        if (d && !task_is_compute(d) && t->ev[i].dur > 0)
            s[k++] = (span){d->rank, t->ev[i].ts, t->ev[i].ts + t->ev[i].dur};
    }
    qsort(s, k, sizeof *s, by_rank_start);
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m && s[m - 1].rank == s[i].rank && s[i].a <= s[m - 1].b)
            s[m - 1].b = fmax(s[m - 1].b, s[i].b);
        else
            s[m++] = s[i];
    }
    *n = m;
    return s;
}

/* Fraction of [a, b) on `rank` that communication overlapped. */
static double overlap_of(const span *s, size_t n, int rank, double a, double b)
{
    size_t lo = 0, hi = n; /* first span of rank ending after a */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s[mid].rank < rank || (s[mid].rank == rank && s[mid].b <= a))
            lo = mid + 1;
        else
            hi = mid;
    }
    double ov = 0;
    for (size_t i = lo; i < n && s[i].rank == rank && s[i].a < b; i++)
        ov += fmin(b, s[i].b) - fmax(a, s[i].a);
    return b > a ? ov / (b - a) : 0;
}

static void compute_points(const trace *t, const dag *g, const calib *base, calibrate_points *p)
{
    size_t ns;
    span *s = comm_spans(t, g, &ns);
    tiles *tl = tiles_new(base, &t->cfg), *cand[CAL_TILES];
    for (int c = 0; c < CAL_TILES; c++)
        cand[c] = tiles_new_shape(&t->cfg, calibrate_tile_shapes[c][0], calibrate_tile_shapes[c][1]);
    for (size_t i = 0; i < t->n; i++) {
        const trace_ev *e = &t->ev[i];
        const dag_task *k = dag_task_get(g, e->id);
        if (!k || !task_is_compute(k) || e->dur <= 0) continue;
        uint64_t bytes = calib_task_bytes(&t->cfg, k);
        double work[1 + CAL_TILES] = {bytes ? (double)bytes : tiles_task_flops(tl, k)};
        double phi = overlap_of(s, ns, k->rank, e->ts, e->ts + e->dur);
        if (work[0] <= 0) continue;
        if (k->kind != TASK_ATTN_FWD && k->kind != TASK_ATTN_BWD) {
            calibrate_add_kind(p, k->kind, work[0], e->dur * 1e-6, phi);
            continue;
        }
        for (int c = 0; c < CAL_TILES; c++)
            work[1 + c] = tiles_task_flops(cand[c], k);
        calibrate_add_attn(p, k->kind, work, e->dur * 1e-6, phi);
    }
    tiles_free(tl);
    for (int c = 0; c < CAL_TILES; c++)
        tiles_free(cand[c]);
    free(s);
}

typedef struct xfer {
    double a, b, bytes; /* transfer interval (µs) and size */
    int from, to;
    link_class cls;
} xfer;

static int by_start(const void *x, const void *y)
{
    double a = ((const xfer *)x)->a, b = ((const xfer *)y)->a;
    return (a > b) - (a < b);
}

/* Overlap-weighted count of transfers sharing x's sender or receiver link. */
static double sharing(const xfer *v, size_t n, size_t i)
{
    double len = v[i].b - v[i].a, out = 0, in = 0;
    if (len <= 0) return 1;
    for (size_t j = 0; j < n && v[j].a < v[i].b; j++) {
        if (j == i || v[j].b <= v[i].a || v[j].cls != v[i].cls) continue;
        double ov = (fmin(v[i].b, v[j].b) - fmax(v[i].a, v[j].a)) / len;
        if (v[j].from == v[i].from) out += ov;
        if (v[j].to == v[i].to) in += ov;
    }
    return 1 + fmax(out, in);
}

static void link_points(const trace *t, const dag *g, calibrate_points *p)
{
    const config *c = &t->cfg;
    xfer *v = xmalloc_array(t->n + 1, sizeof *v, "the calibration's transfers");
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) {
        const trace_ev *s = &t->ev[i];
        const dag_task *k = dag_task_get(g, s->id);
        if (!k || k->kind != TASK_SEND || k->match >= t->n || t->ev[k->match].id != k->match) continue;
        const trace_ev *r = &t->ev[k->match];
        double a = fmax(s->ts, r->ts), b = r->ts + r->dur;
        if (b <= a) continue;
        link_class cls = config_node(c, k->rank) == config_node(c, k->peer) ? LINK_INTRA : LINK_INTER;
        v[n++] = (xfer){a, b, (double)k->bytes, k->rank, k->peer, cls};
    }
    qsort(v, n, sizeof *v, by_start);
    for (size_t i = 0; i < n; i++)
        calibrate_add_link(p, v[i].cls, sharing(v, n, i) * v[i].bytes, (v[i].b - v[i].a) * 1e-6);
    free(v);
}

void calibrate_count_input(calibrate_points *p) { p->ninputs++; }

int calibrate_points_from_traces(calibrate_points *p, const trace *const *traces, int n, const calib *base,
                                 char err[LOONG_ERRLEN])
{
    for (int i = 0; i < n; i++) {
        dag *g = dag_build(&traces[i]->cfg, err);
        if (!g) return -1;
        if (trace_check_dag(traces[i], g, err) < 0) {
            char pre[48];
            snprintf(pre, sizeof pre, "trace %d: ", i + 1);
            loong_err_prefix(err, pre);
            dag_free(g);
            return -1;
        }
        compute_points(traces[i], g, base, p);
        link_points(traces[i], g, p);
        dag_free(g);
        p->ninputs++;
    }
    return 0;
}

/* ---- the policy ---- */

static const char *link_name(int c) { return c == LINK_INTRA ? "same-node" : "other-node"; }

/* Fit one kind or class; its status and, when kept, the reason. */
static void fit_one(const points *pt, const char *what, calibrate_fit_of *f)
{
    char err[LOONG_ERRLEN];
    if (!pt->n) return;
    if (fit_linear_bounded(pt->x, pt->y, pt->n, MAX_T0, what, &f->line, err) < 0) {
        f->status = CAL_KEPT;
        snprintf(f->reason, sizeof f->reason, "%.150s", err);
        return;
    }
    f->status = CAL_FITTED;
}

/* A fitted compute rate against the kind's reference in base: within it;
 * above an assumed one (raised); above one that is not (kept). */
static void bound_rate(const calib *base, int k, calibrate_fit_of *f, calibrate_result *r)
{
    if (f->status != CAL_FITTED) return;
    double rate = 1 / f->line.c1, ref = calib_reference(base, k);
    bool mem = calib_memory_bound(k);
    if (rate <= ref) return;
    if (calib_assumed(base, k)) {
        double *raise = mem ? &r->raise_mem_bw : &r->raise_peak;
        if (rate > *raise) *raise = rate;
        return;
    }
    f->status = CAL_KEPT;
    snprintf(f->reason, sizeof f->reason,
             "calibrate %s: fitted rate %.4g exceeds the table's %s %.4g, which is not marked 'assumed': check the "
             "measurement or the table",
             task_kind_name(k), rate, mem ? "mem_bw" : "peak", ref);
}

/* The first kept kind or class, as an error for --strict. */
static int strict_error(const calibrate_result *r, char err[LOONG_ERRLEN])
{
    for (int k = 0; k < TASK_KIND_COUNT; k++)
        if (r->kind[k].status == CAL_KEPT) {
            snprintf(err, LOONG_ERRLEN, "%s (--strict)", r->kind[k].reason);
            return -1;
        }
    for (int c = 0; c < LINK_CLASSES; c++)
        if (r->link[c].status == CAL_KEPT) {
            snprintf(err, LOONG_ERRLEN, "%s (--strict)", r->link[c].reason);
            return -1;
        }
    return 0;
}

/* A kind's line, from its kernels' times with the interference g =
 * F/(1+F) divided out (g = 0: as measured). */
static void fit_kind(const points *all, int k, double g, calibrate_fit_of *o)
{
    char what[64];
    snprintf(what, sizeof what, "calibrate %s", task_kind_name(k));
    points c = {0};
    for (int i = 0; i < all->n; i++)
        push(&c, all->x[i], all->y[i] * (1 - g * all->phi[i]), 0);
    memset(o, 0, sizeof *o);
    fit_one(&c, what, o);
    free(c.x), free(c.y), free(c.phi);
}

/* A kind's line from its kernels that nothing overlapped, if 3 or more. */
static bool clean_line(const points *all, int k, calibrate_fit_of *o)
{
    points c = {0};
    for (int i = 0; i < all->n; i++)
        if (all->phi[i] < PHI_CLEAN) push(&c, all->x[i], all->y[i], 0);
    bool ok = false;
    if (c.n >= 3) {
        char what[64];
        snprintf(what, sizeof what, "calibrate %s", task_kind_name(k));
        memset(o, 0, sizeof *o);
        fit_one(&c, what, o);
        ok = o->status == CAL_FITTED;
    }
    free(c.x), free(c.y), free(c.phi);
    return ok;
}

/* The mostly overlapped kernels of the kinds that also have clean ones:
 * their overlap phi, time t and clean line's time l. */
typedef struct overlapped {
    double *phi, *t, *l;
    int n, cap;
} overlapped;

static void overlapped_push(overlapped *o, double phi, double t, double l)
{
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 64;
        o->phi = xrealloc_array(o->phi, (size_t)o->cap, sizeof *o->phi, "the overlapped kernels");
        o->t = xrealloc_array(o->t, (size_t)o->cap, sizeof *o->t, "the overlapped kernels");
        o->l = xrealloc_array(o->l, (size_t)o->cap, sizeof *o->l, "the overlapped kernels");
    }
    o->phi[o->n] = phi, o->t[o->n] = t, o->l[o->n++] = l;
}

static void overlapped_collect(const calibrate_points *p, overlapped *o)
{
    for (int k = 0; k < TASK_KIND_COUNT; k++) {
        const points *pt = &p->kind[k];
        calibrate_fit_of c;
        if (!clean_line(pt, k, &c)) continue;
        for (int i = 0; i < pt->n; i++)
            if (pt->phi[i] >= PHI_OVERLAPPED)
                overlapped_push(o, pt->phi[i], pt->y[i], c.line.c0 + c.line.c1 * pt->x[i]);
    }
}

/* g = F/(1+F) from the overlapped kernels against their clean lines: a
 * kernel progresses at 1/(1+F) of its rate while overlapped, so its time
 * is line / (1 - g phi): least squares through the origin on
 * 1 - line/time = g phi (gsl_fit_mul). */
static double estimate_g(const overlapped *o)
{
    if (o->n < 1) return 0;
    double *z = xmalloc_array((size_t)o->n, sizeof *z, "the overlapped kernels"), g = 0, cov, ss;
    for (int i = 0; i < o->n; i++)
        z[i] = 1 - o->l[i] / o->t[i];
    if (gsl_fit_mul(o->phi, 1, z, 1, (size_t)o->n, &g, &cov, &ss) != GSL_SUCCESS) g = 0;
    free(z);
    return g;
}

/* R^2 of the overlapped kernels' times under their clean lines slowed by
 * g (the data F was fitted to, one parameter). */
static void interference_r2(const overlapped *o, double g, calibrate_result *r)
{
    double *pred = xmalloc_array((size_t)o->n + 1, sizeof *pred, "the overlapped kernels");
    for (int i = 0; i < o->n; i++)
        pred[i] = o->l[i] / (1 - g * o->phi[i]);
    fit_r2(o->t, pred, o->n, 1, &r->interference_r2, r->interference_degenerate);
    free(pred);
}

/* The interference, then every kind's line from all its kernels with it
 * divided out (with none measured: the plain fit of every kernel). */
static void fit_kinds(const calibrate_points *p, calibrate_result *r)
{
    overlapped o = {0};
    overlapped_collect(p, &o);
    int n = o.n;
    double g = estimate_g(&o);
    r->interference_points = n;
    r->interference_fitted = n >= 5 && g < 0.95;
    if (n < 5)
        snprintf(r->interference_reason, sizeof r->interference_reason,
                 "%d kernels overlapped by communication beside clean ones of their kind (5 needed)", n);
    else if (!r->interference_fitted)
        snprintf(r->interference_reason, sizeof r->interference_reason,
                 "a slowdown of more than 20x is not physical: check the traces");
    if (g < 0) g = 0;
    if (!r->interference_fitted) g = 0;
    r->interference = g / (1 - g);
    if (r->interference_fitted) interference_r2(&o, g, r);
    free(o.phi), free(o.t), free(o.l);
    for (int k = 0; k < TASK_KIND_COUNT; k++)
        fit_kind(&p->kind[k], k, g, &r->kind[k]);
}

/* The relative rms residual of a robust line through the clean points
 * (x[i], y[i]) (no communication beside them: interference would blur
 * the shape), the line in *l; infinite when no line fits. */
static double clean_rms(const double *x, const points *pt, fit_line *l)
{
    double *cx = xmalloc_array((size_t)pt->n + 1, sizeof *cx, "a tile candidate's points");
    double *cy = xmalloc_array((size_t)pt->n + 1, sizeof *cy, "a tile candidate's points");
    int n = 0;
    for (int i = 0; i < pt->n; i++)
        if (pt->phi[i] < PHI_CLEAN) cx[n] = x[i], cy[n++] = pt->y[i];
    char err[LOONG_ERRLEN];
    double rms =
        n >= 3 && fit_linear_bounded(cx, cy, n, MAX_T0, "a tile candidate", l, err) == 0 ? l->rel_rms : INFINITY;
    free(cx);
    free(cy);
    return rms;
}

/* Measure kind's tile (calibrate_tile_of): q's points of that kind then
 * carry the chosen shape's work. */
static void choose_tile(calibrate_points *q, int kind, calibrate_tile_of *o)
{
    points *pt = &q->kind[kind];
    o->chosen = o->ambiguous = -1;
    if (pt->n < 3 || pt->ncand != pt->n) return;
    fit_line line[CAL_TILES], base;
    o->base_rms = clean_rms(pt->x, pt, &base);
    if (!isfinite(o->base_rms)) return; /* fewer than 3 clean kernels */
    o->measured = true;
    int best = -1;
    for (int c = 0; c < CAL_TILES; c++) {
        o->rms[c] = clean_rms(pt->cand[c], pt, &line[c]);
        if (best < 0 || o->rms[c] < o->rms[best]) best = c;
    }
    if (!(o->rms[best] < 0.9 * o->base_rms && o->base_rms - o->rms[best] > 1e-3)) return;
    /* shapes that fit as well as the best: the points cannot tell them
     * apart (too few block geometries), so none is taken */
    for (int c = 0; c < CAL_TILES; c++)
        if (c != best && o->rms[c] <= fmax(1.1 * o->rms[best], o->rms[best] + 1e-4)) {
            o->ambiguous = c;
            return;
        }
    o->chosen = best;
    o->line = line[best];
    pt->x = pt->cand[best]; /* q is a shallow copy: p's arrays stay as they were */
}

int calibrate_fit(const calibrate_points *p, const calib *base, bool strict, calibrate_result *r,
                  char err[LOONG_ERRLEN])
{
    memset(r, 0, sizeof *r);
    r->ninputs = p->ninputs;
    char what[64];
    bool any = false;
    calibrate_points q = *p;
    choose_tile(&q, TASK_ATTN_FWD, &r->tile[0]);
    choose_tile(&q, TASK_ATTN_BWD, &r->tile[1]);
    p = &q;
    fit_kinds(p, r);
    for (int k = 0; k < TASK_KIND_COUNT; k++) {
        bound_rate(base, k, &r->kind[k], r);
        any |= p->kind[k].n > 0;
    }
    for (int c = 0; c < LINK_CLASSES; c++) {
        snprintf(what, sizeof what, "calibrate %s links", link_name(c));
        fit_one(&p->link[c], what, &r->link[c]);
        any |= p->link[c].n > 0;
    }
    if (!any) {
        snprintf(err, LOONG_ERRLEN, "the traces hold no compute task or transfer to fit");
        return -1;
    }
    return strict ? strict_error(r, err) : 0;
}

int calibrate_apply(const calibrate_result *r, calib *cb, char err[LOONG_ERRLEN])
{
    if (r->raise_peak > 0) calib_raise_reference(cb, TASK_GEMM, r->raise_peak);
    if (r->raise_mem_bw > 0) calib_raise_reference(cb, TASK_MERGE, r->raise_mem_bw);
    for (int i = 0; i < 2; i++)
        if (r->tile[i].chosen >= 0)
            calib_set_tile(cb, i ? TASK_ATTN_BWD : TASK_ATTN_FWD, calibrate_tile_shapes[r->tile[i].chosen][0],
                           calibrate_tile_shapes[r->tile[i].chosen][1]);
    for (int k = 0; k < TASK_KIND_COUNT; k++)
        if (r->kind[k].status == CAL_FITTED &&
            calib_set_line(cb, k, r->kind[k].line.c0, 1 / r->kind[k].line.c1, err) < 0)
            return -1;
    if (r->interference_fitted) calib_set_interference(cb, -1, r->interference);
    return 0;
}

static void judge_line(fit_gate *g, const char *name, const fit_line *l)
{
    fit_gate_add(g, name, l->r2, l->n, l->degenerate);
}

void calibrate_judge(const calibrate_result *r, fit_gate *g)
{
    char name[64];
    for (int k = 0; k < TASK_KIND_COUNT; k++)
        if (r->kind[k].status == CAL_FITTED) judge_line(g, task_kind_name(k), &r->kind[k].line);
    for (int c = 0; c < LINK_CLASSES; c++)
        if (r->link[c].status == CAL_FITTED) {
            snprintf(name, sizeof name, "%s links (%s)", link_name(c),
                     c == LINK_INTRA ? "nvlink_lat, nvlink_bw" : "nic_lat, nic_bw");
            judge_line(g, name, &r->link[c].line);
        }
    for (int i = 0; i < 2; i++)
        if (r->tile[i].chosen >= 0) {
            snprintf(name, sizeof name, "tile %s", i ? "attn_bwd" : "attn_fwd");
            judge_line(g, name, &r->tile[i].line);
        }
    if (r->interference_fitted)
        fit_gate_add(g, "interference", r->interference_r2, r->interference_points, r->interference_degenerate);
}

int calibrate_kept(const calibrate_result *r)
{
    int n = 0;
    for (int k = 0; k < TASK_KIND_COUNT; k++)
        n += r->kind[k].status == CAL_KEPT;
    for (int c = 0; c < LINK_CLASSES; c++)
        n += r->link[c].status == CAL_KEPT;
    return n;
}

/* ---- the report ---- */

static void print_line(FILE *f, const char *name, const fit_line *l, double rate, const char *unit)
{
    char note[FIT_WHY_LEN + 64] = "", r2[16] = "-";
    if (l->through_origin) snprintf(note, sizeof note, "  (t0 < 0 came out: fitted through 0)");
    if (l->t0_bounded)
        snprintf(note, sizeof note, "  (t0 > %g ms came out: fitted with t0 = %g ms)", MAX_T0 * 1e3, MAX_T0 * 1e3);
    if (l->degenerate[0])
        snprintf(note + strlen(note), sizeof note - strlen(note), "  (no R^2: %s)", l->degenerate);
    else
        snprintf(r2, sizeof r2, "%9.5f", l->r2);
    fprintf(f, " %-11s %8d %11.3f %11.3f %-4s %9s %9.2f %9.2f %8d%s\n", name, l->n, l->c0 * 1e6, rate, unit, r2,
            100 * l->rel_rms, 100 * l->rel_max, l->outliers, note);
}

static const char header[] = "#%-11s %8s %11s %16s %9s %9s %9s %8s\n";

/* Each measured tile: the candidates' rms, the one taken. */
static void print_tiles(FILE *f, const calibrate_result *r)
{
    for (int i = 0; i < 2; i++) {
        const calibrate_tile_of *o = &r->tile[i];
        if (!o->measured) continue;
        fprintf(f, "# tile %s: rms_rel_%% of a line through each shape's work: base table %.3f",
                i ? "attn_bwd" : "attn_fwd", 100 * o->base_rms);
        for (int c = 0; c < CAL_TILES; c++) {
            if (calibrate_tile_shapes[c][0])
                fprintf(f, ", %dx%d %.3f", calibrate_tile_shapes[c][0], calibrate_tile_shapes[c][1], 100 * o->rms[c]);
            else
                fprintf(f, ", exact pairs %.3f", 100 * o->rms[c]);
        }
        if (o->ambiguous >= 0)
            fprintf(f,
                    ": the base table's kept (the shapes that fit best fit alike, %dx%d among them: measure "
                    "blocks of more sizes)\n",
                    calibrate_tile_shapes[o->ambiguous][0], calibrate_tile_shapes[o->ambiguous][1]);
        else if (o->chosen < 0)
            fprintf(f, ": the base table's kept (none fits 10 %% and 0.1 points better)\n");
        else if (calibrate_tile_shapes[o->chosen][0])
            fprintf(f, ": %dx%d taken\n", calibrate_tile_shapes[o->chosen][0], calibrate_tile_shapes[o->chosen][1]);
        else
            fprintf(f, ": exact pairs taken (no tile)\n");
    }
}

void calibrate_print(FILE *f, const calibrate_result *r)
{
    fprintf(f,
            "# loong calibrate: %d input(s); time = t0 + work / rate (robust least squares on relative error, GSL)\n",
            r->ninputs);
    fprintf(f, header, "kind", "points", "t0_us", "rate", "R^2", "rms_rel_%", "max_rel_%", "outliers");
    for (int k = 0; k < TASK_KIND_COUNT; k++) {
        const calibrate_fit_of *o = &r->kind[k];
        bool mem = calib_memory_bound(k);
        if (o->status == CAL_FITTED)
            print_line(f, task_kind_name(k), &o->line, 1 / o->line.c1 / 1e9, mem ? "GB/s" : "GF/s");
    }
    fprintf(f, "# links: time = alpha + k * bytes / beta (k: transfers sharing the link)\n");
    fprintf(f, header, "class", "points", "alpha_us", "beta_GB/s", "R^2", "rms_rel_%", "max_rel_%", "outliers");
    for (int c = 0; c < LINK_CLASSES; c++) {
        const calibrate_fit_of *o = &r->link[c];
        if (o->status == CAL_FITTED)
            print_line(f, link_name(c), &o->line, 1 / o->line.c1 / 1e9, "    ");
        else if (o->status == CAL_ABSENT)
            fprintf(f, " %-11s %8d %11s %16s   (no transfer of this class in the inputs: left as is)\n", link_name(c),
                    0, "-", "-");
    }
    print_tiles(f, r);
    if (r->interference_fitted && r->interference_degenerate[0])
        fprintf(f,
                "# interference: kernels run %.2f %% slower while communication overlaps them (%d overlapped "
                "kernels; no R^2: %s)\n",
                100 * r->interference, r->interference_points, r->interference_degenerate);
    else if (r->interference_fitted)
        fprintf(f,
                "# interference: kernels run %.2f %% slower while communication overlaps them (%d overlapped "
                "kernels, R^2 %.5f of their times)\n",
                100 * r->interference, r->interference_points, r->interference_r2);
    else
        fprintf(f, "# interference: kept from base: %s\n", r->interference_reason);
    for (int k = 0; k < TASK_KIND_COUNT; k++)
        if (r->kind[k].status == CAL_KEPT)
            fprintf(f, "# kept from base: %s: %s\n", task_kind_name(k), r->kind[k].reason);
    for (int c = 0; c < LINK_CLASSES; c++)
        if (r->link[c].status == CAL_KEPT)
            fprintf(f, "# kept from base: %s links: %s\n", link_name(c), r->link[c].reason);
    if (r->raise_peak > 0)
        fprintf(f, "# raised the assumed peak to %.4g FLOP/s: a fitted rate beat it (docs/validation.md)\n",
                r->raise_peak);
    if (r->raise_mem_bw > 0)
        fprintf(f, "# raised the assumed mem_bw to %.4g B/s: a fitted rate beat it (docs/validation.md)\n",
                r->raise_mem_bw);
    int fitted = 0;
    for (int k = 0; k < TASK_KIND_COUNT; k++)
        fitted += r->kind[k].status == CAL_FITTED;
    for (int c = 0; c < LINK_CLASSES; c++)
        fitted += r->link[c].status == CAL_FITTED;
    fprintf(f, "# summary: %d fitted, %d kept from base\n", fitted, calibrate_kept(r));
}

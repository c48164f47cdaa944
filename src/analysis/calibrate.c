/* calibrate: least-squares fits of compute rates and link alpha/beta from
 * measured traces. See calibrate.h. */
#include "calibrate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"

typedef struct points {
    double *x, *y;
    int n, cap;
} points;

static void push(points *p, double x, double y)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 256;
        p->x = xrealloc_array(p->x, (size_t)p->cap, sizeof *p->x, "the calibration's points");
        p->y = xrealloc_array(p->y, (size_t)p->cap, sizeof *p->y, "the calibration's points");
    }
    p->x[p->n] = x;
    p->y[p->n++] = y;
}

static void compute_points(const trace *t, const dag *g, points *kinds)
{
    for (size_t i = 0; i < t->n; i++) {
        const trace_ev *e = &t->ev[i];
        const dag_task *k = dag_task_get(g, e->id);
        if (!k || !task_is_compute(k) || e->dur <= 0) continue;
        uint64_t bytes = calib_task_bytes(&t->cfg, k);
        double work = bytes ? (double)bytes : (double)k->flops;
        if (work > 0) push(&kinds[k->kind], work, e->dur * 1e-6);
    }
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

static void link_points(const trace *t, const dag *g, points *links)
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
        push(&links[v[i].cls], sharing(v, n, i) * v[i].bytes, (v[i].b - v[i].a) * 1e-6);
    free(v);
}

static const char *link_name(int c) { return c == LINK_INTRA ? "same-node" : "other-node"; }

static int fit_all(points *kinds, points *links, calibrate_result *r, char err[LOONG_ERRLEN])
{
    char what[64];
    for (int k = 0; k < TASK_KIND_COUNT; k++) {
        if (!kinds[k].n) continue;
        snprintf(what, sizeof what, "calibrate %s", task_kind_name(k));
        if (fit_linear(kinds[k].x, kinds[k].y, kinds[k].n, what, &r->kind[k], err) < 0) return -1;
        r->have_kind[k] = true;
    }
    for (int c = 0; c < LINK_CLASSES; c++) {
        if (!links[c].n) continue;
        snprintf(what, sizeof what, "calibrate %s links", link_name(c));
        if (fit_linear(links[c].x, links[c].y, links[c].n, what, &r->link[c], err) < 0) return -1;
        r->have_link[c] = true;
    }
    return 0;
}

int calibrate_fit(const trace *const *traces, int n, calibrate_result *r, char err[LOONG_ERRLEN])
{
    memset(r, 0, sizeof *r);
    r->ntraces = n;
    points kinds[TASK_KIND_COUNT] = {{0}}, links[LINK_CLASSES] = {{0}};
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        dag *g = dag_build(&traces[i]->cfg, err);
        if (!g) {
            rc = -1;
            break;
        }
        compute_points(traces[i], g, kinds);
        link_points(traces[i], g, links);
        dag_free(g);
    }
    if (rc == 0) rc = fit_all(kinds, links, r, err);
    for (int k = 0; k < TASK_KIND_COUNT; k++)
        free(kinds[k].x), free(kinds[k].y);
    for (int c = 0; c < LINK_CLASSES; c++)
        free(links[c].x), free(links[c].y);
    if (rc == 0 && !r->have_link[LINK_INTRA] && !r->have_link[LINK_INTER]) {
        bool any = false;
        for (int k = 0; k < TASK_KIND_COUNT; k++)
            any |= r->have_kind[k];
        if (!any) {
            snprintf(err, LOONG_ERRLEN, "the traces hold no compute task or transfer to fit");
            rc = -1;
        }
    }
    return rc;
}

int calibrate_apply(const calibrate_result *r, calib *cb, char err[LOONG_ERRLEN])
{
    for (int k = 0; k < TASK_KIND_COUNT; k++)
        if (r->have_kind[k] && calib_set_line(cb, k, r->kind[k].c0, 1 / r->kind[k].c1, err) < 0) return -1;
    return 0;
}

void calibrate_print(FILE *f, const calibrate_result *r)
{
    fprintf(f, "# loong calibrate: %d trace(s); time = t0 + work / rate (least squares, GSL)\n", r->ntraces);
    fprintf(f, "#%-11s %8s %11s %16s %9s %15s %15s\n", "kind", "points", "t0_us", "rate", "R^2", "rms_resid_us",
            "max_resid_us");
    for (int k = 0; k < TASK_KIND_COUNT; k++) {
        if (!r->have_kind[k]) continue;
        const fit_line *l = &r->kind[k];
        bool mem = k == TASK_MERGE || k == TASK_ACC;
        fprintf(f, " %-11s %8d %11.3f %11.3f %-4s %9.5f %15.3f %15.3f%s\n", task_kind_name(k), l->n, l->c0 * 1e6,
                1 / l->c1 / 1e9, mem ? "GB/s" : "GF/s", l->r2, l->rms * 1e6, l->max_abs * 1e6,
                l->through_origin ? "  (t0 < 0 came out: fitted through 0)" : "");
    }
    fprintf(f, "# links: time = alpha + k * bytes / beta (k: transfers sharing the link)\n");
    fprintf(f, "#%-11s %8s %11s %16s %9s %15s %15s\n", "class", "points", "alpha_us", "beta_GB/s", "R^2",
            "rms_resid_us", "max_resid_us");
    for (int c = 0; c < LINK_CLASSES; c++) {
        if (!r->have_link[c]) {
            fprintf(f, " %-11s %8d %11s %16s   (no transfer of this class in the traces: left as is)\n", link_name(c),
                    0, "-", "-");
            continue;
        }
        const fit_line *l = &r->link[c];
        fprintf(f, " %-11s %8d %11.3f %16.3f %9.5f %15.3f %15.3f%s\n", link_name(c), l->n, l->c0 * 1e6, 1 / l->c1 / 1e9,
                l->r2, l->rms * 1e6, l->max_abs * 1e6, l->through_origin ? "  (fitted through 0)" : "");
    }
}

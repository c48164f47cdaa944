/* compare: prediction vs measurement by task id. See compare.h. */
#include "compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"

#include "core/timeline.h"

/* A knob's value as text (a string without its quotes), or "default" for
 * a knob left at its unset default (absent from that side's JSON). */
static void knob_text(json_t *v, char *out, size_t len)
{
    char *s = v && !json_is_string(v) ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    snprintf(out, len, "%.40s", json_is_string(v) ? json_string_value(v) : s ? s : "default");
    free(s);
}

/* Append text to the message at *at (len bytes in all), as far as it fits. */
static void append(char *out, size_t len, size_t *at, const char *text)
{
    size_t n = strlen(text);
    if (*at + 1 >= len) return;
    if (n > len - 1 - *at) n = len - 1 - *at;
    memcpy(out + *at, text, n);
    *at += n;
    out[*at] = '\0';
}

/* Every key whose values differ, a's keys then b's, appended to out as
 * "key x vs y" entries; returns how many. */
static int differences(json_t *ja, json_t *jb, char *out, size_t len, size_t *at)
{
    const char *key;
    json_t *v;
    int n = 0;
    for (int side = 0; side < 2; side++)
        json_object_foreach(side ? jb : ja, key, v)
        {
            json_t *va = json_object_get(ja, key), *vb = json_object_get(jb, key);
            if (side ? va != NULL : json_equal(va, vb)) continue;
            char x[48], y[48], e[160];
            knob_text(va, x, sizeof x);
            knob_text(vb, y, sizeof y);
            snprintf(e, sizeof e, "%s%.40s %s vs %s", n++ ? ", " : "", key, x, y);
            append(out, len, at, e);
        }
    return n;
}

static int config_diff(const trace *a, const char *an, const trace *b, const char *bn, char err[LOONG_ERRLEN])
{
    json_t *ja = config_to_json(&a->cfg), *jb = config_to_json(&b->cfg);
    size_t at = (size_t)snprintf(err, LOONG_ERRLEN, "%.50s and %.50s come from different configurations (", an, bn);
    int n = differences(ja, jb, err, LOONG_ERRLEN - 40, &at);
    append(err, LOONG_ERRLEN, &at, "): run both with the same options");
    if (!n) err[0] = '\0';
    json_decref(ja);
    json_decref(jb);
    return n ? -1 : 0;
}

int compare_check(const trace *pred, const char *pn, const trace *meas, const char *mn, char err[LOONG_ERRLEN])
{
    if (config_diff(pred, pn, meas, mn, err) < 0) return -1;
    size_t n = pred->n < meas->n ? pred->n : meas->n;
    for (size_t i = 0; i < n; i++)
        if (pred->ev[i].id != meas->ev[i].id || pred->ev[i].kind != meas->ev[i].kind ||
            pred->ev[i].rank != meas->ev[i].rank) {
            uint32_t id = pred->ev[i].id < meas->ev[i].id ? pred->ev[i].id : meas->ev[i].id;
            snprintf(err, LOONG_ERRLEN, "the traces hold different tasks: task %u is in %s but not in %s (or differs)",
                     id, pred->ev[i].id == id ? pn : mn, pred->ev[i].id == id ? mn : pn);
            return -1;
        }
    if (pred->n != meas->n) {
        const trace *longer = pred->n > meas->n ? pred : meas;
        snprintf(err, LOONG_ERRLEN, "the traces hold different tasks: task %u is in %s but not in %s", longer->ev[n].id,
                 longer == pred ? pn : mn, longer == pred ? mn : pn);
        return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int group_key(const trace_ev *e, cmp_by by)
{
    return by == CMP_BY_KIND ? e->kind : by == CMP_BY_RANK ? e->rank : e->layer;
}

/* Exposed communication summed over ranks (the traces' units: µs). */
static double exposed(const dag *g, const trace *t, double makespan)
{
    uint32_t n = dag_ntasks(g);
    double *st = xcalloc(n, sizeof *st, "a trace's timeline"), *du = xcalloc(n, sizeof *du, "a trace's timeline");
    double sum = 0;
    for (size_t i = 0; i < t->n; i++) {
        st[t->ev[i].id] = t->ev[i].ts;
        du[t->ev[i].id] = t->ev[i].dur;
    }
    for (int r = 0; r < config_ranks(dag_config(g)); r++) {
        rank_timeline tl;
        timeline_rank(g, st, du, r, makespan, &tl);
        sum += tl.exposed;
    }
    free(st);
    free(du);
    return sum;
}

void compare_summarize(const dag *g, const trace *p, const trace *m, cmp_by by, cmp_summary *s)
{
    memset(s, 0, sizeof *s);
    s->pred_step_us = trace_makespan(p);
    s->meas_step_us = trace_makespan(m);
    s->step_err_pct = s->meas_step_us > 0 ? 100 * (s->pred_step_us - s->meas_step_us) / s->meas_step_us : 0;
    s->pred_exposed_us = exposed(g, p, s->pred_step_us);
    s->meas_exposed_us = exposed(g, m, s->meas_step_us);
    int maxkey = -1;
    for (size_t i = 0; i < p->n; i++)
        if (group_key(&p->ev[i], by) > maxkey) maxkey = group_key(&p->ev[i], by);
    int ng = maxkey + 2; /* slot 0 holds key -1 (model-level layer) */
    s->groups = xcalloc((size_t)ng, sizeof *s->groups, "the comparison's groups");
    double *ape = xmalloc_array(p->n + 1, sizeof *ape, "the comparison's errors");
    for (int k = 0; k < ng; k++) {
        size_t n = 0;
        cmp_group *gr = &s->groups[s->ngroups];
        gr->key = k - 1;
        for (size_t i = 0; i < p->n; i++) {
            if (group_key(&p->ev[i], by) != k - 1) continue;
            gr->pred_us += p->ev[i].dur;
            gr->meas_us += m->ev[i].dur;
            gr->count++;
            if (m->ev[i].dur > 0) ape[n++] = 100 * fabs(p->ev[i].dur - m->ev[i].dur) / m->ev[i].dur;
        }
        if (!gr->count) continue;
        qsort(ape, n, sizeof *ape, cmp_double);
        for (size_t i = 0; i < n; i++)
            gr->mean_ape += ape[i] / (double)n;
        gr->median_ape = n ? (n % 2 ? ape[n / 2] : (ape[n / 2 - 1] + ape[n / 2]) / 2) : 0;
        s->ngroups++;
    }
    free(ape);
}

static const char *key_name(cmp_by by, int key, char *buf, size_t len)
{
    if (by == CMP_BY_KIND) return task_kind_name(key);
    if (by == CMP_BY_LAYER && key < 0) return "model";
    snprintf(buf, len, "%d", key);
    return buf;
}

static void print_rank_makespans(FILE *f, const trace *p, const trace *m, int ranks)
{
    double *pe = xcalloc((size_t)ranks, sizeof *pe, "the comparison's ranks");
    double *me = xcalloc((size_t)ranks, sizeof *me, "the comparison's ranks");
    for (size_t i = 0; i < p->n; i++) {
        int r = p->ev[i].rank;
        if (r < 0 || r >= ranks) continue;
        if (p->ev[i].ts + p->ev[i].dur > pe[r]) pe[r] = p->ev[i].ts + p->ev[i].dur;
        if (m->ev[i].ts + m->ev[i].dur > me[r]) me[r] = m->ev[i].ts + m->ev[i].dur;
    }
    fprintf(f, "# per-rank makespan\n#%5s %14s %14s %9s\n", "rank", "predicted_ms", "measured_ms", "error_%");
    for (int r = 0; r < ranks; r++)
        fprintf(f, " %5d %14.3f %14.3f %+9.2f\n", r, pe[r] / 1e3, me[r] / 1e3,
                me[r] > 0 ? 100 * (pe[r] - me[r]) / me[r] : 0);
    free(pe);
    free(me);
}

typedef struct off {
    size_t i;
    double err;
} off;

static int by_err(const void *a, const void *b)
{
    double x = fabs(((const off *)a)->err), y = fabs(((const off *)b)->err);
    return (x < y) - (x > y);
}

static void print_top(FILE *f, const dag *g, const trace *p, const trace *m, int top)
{
    off *o = xmalloc_array(p->n + 1, sizeof *o, "the comparison's errors");
    for (size_t i = 0; i < p->n; i++)
        o[i] = (off){i, p->ev[i].dur - m->ev[i].dur};
    qsort(o, p->n, sizeof *o, by_err);
    fprintf(f, "# the %d tasks with the largest absolute error\n#%9s %5s %-11s %-26s %13s %13s %13s\n", top, "id",
            "rank", "stream", "task", "predicted_us", "measured_us", "error_us");
    char label[96];
    for (int k = 0; k < top && (size_t)k < p->n; k++) {
        const trace_ev *e = &p->ev[o[k].i];
        dag_task_label(dag_task_get(g, e->id), label, sizeof label);
        fprintf(f, " %9u %5d %-11s %-26s %13.3f %13.3f %+13.3f\n", e->id, e->rank, stream_name(e->stream), label,
                e->dur, m->ev[o[k].i].dur, o[k].err);
    }
    free(o);
}

void compare_print(FILE *f, const dag *g, const trace *p, const trace *m, cmp_by by, int top)
{
    cmp_summary s;
    compare_summarize(g, p, m, by, &s);
    char desc[256], buf[32];
    config_describe(&p->cfg, desc, sizeof desc);
    fprintf(f, "# loong compare: %s (predicted, %s) vs (measured, %s)\n", desc, p->backend, m->backend);
    if (p->whatif[0]) fprintf(f, "# PERTURBED prediction (what-if): %s\n", p->whatif);
    if (m->whatif[0]) fprintf(f, "# PERTURBED \"measurement\" (a what-if simulation): %s\n", m->whatif);
    fprintf(f, "# step time: predicted %.3f ms, measured %.3f ms, error %+.2f %% ((predicted - measured) / measured)\n",
            s.pred_step_us / 1e3, s.meas_step_us / 1e3, s.step_err_pct);
    fprintf(f, "# exposed communication, summed over ranks: predicted %.3f ms, measured %.3f ms\n",
            s.pred_exposed_us / 1e3, s.meas_exposed_us / 1e3);
    static const char *by_names[] = {"kind", "rank", "layer"};
    fprintf(f, "#%-14s %8s %14s %12s %14s %14s\n", by_names[by], "count", "median_APE_%", "mean_APE_%", "predicted_ms",
            "measured_ms");
    for (int k = 0; k < s.ngroups; k++) {
        const cmp_group *gr = &s.groups[k];
        fprintf(f, " %-14s %8u %14.2f %12.2f %14.3f %14.3f\n", key_name(by, gr->key, buf, sizeof buf), gr->count,
                gr->median_ape, gr->mean_ape, gr->pred_us / 1e3, gr->meas_us / 1e3);
    }
    print_rank_makespans(f, p, m, config_ranks(&p->cfg));
    print_top(f, g, p, m, top);
    free(s.groups);
}

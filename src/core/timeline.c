/* timeline: busy / communication / exposed time of one rank. See timeline.h. */
#include "timeline.h"

#include <stdlib.h>

#include "xalloc.h"

static int by_start(const void *x, const void *y)
{
    double a = ((const tl_span *)x)->a, b = ((const tl_span *)y)->a;
    return (a > b) - (a < b);
}

size_t tl_merge(tl_span *s, size_t n)
{
    if (n > 1) qsort(s, n, sizeof *s, by_start);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && s[i].a <= s[m - 1].b) {
            if (s[i].b > s[m - 1].b) s[m - 1].b = s[i].b;
        } else {
            s[m++] = s[i];
        }
    }
    return m;
}

double tl_length(const tl_span *s, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += s[i].b - s[i].a;
    return sum;
}

double tl_overlap(const tl_span *u, size_t nu, const tl_span *c, size_t nc)
{
    double sum = 0;
    size_t i = 0, j = 0;
    while (i < nu && j < nc) {
        double a = u[i].a > c[j].a ? u[i].a : c[j].a, b = u[i].b < c[j].b ? u[i].b : c[j].b;
        if (b > a) sum += b - a;
        if (u[i].b < c[j].b)
            i++;
        else
            j++;
    }
    return sum;
}

/* Spans of the rank's compute stream (comp) or of all its other streams. */
static tl_span *collect(const dag *g, const double *start, const double *dur, int r, bool comp, size_t *n)
{
    size_t cap = 0, m = 0;
    for (int s = 0; s < STREAM_COUNT; s++) {
        uint32_t k;
        dag_stream_tasks(g, r, s, &k);
        if ((s == STREAM_COMP) == comp) cap += k;
    }
    tl_span *v = xmalloc_array(cap, sizeof *v, "a rank's timeline");
    for (int s = 0; s < STREAM_COUNT; s++) {
        if ((s == STREAM_COMP) != comp) continue;
        uint32_t k;
        const uint32_t *ids = dag_stream_tasks(g, r, s, &k);
        for (uint32_t i = 0; i < k; i++)
            if (dur[ids[i]] > 0) v[m++] = (tl_span){start[ids[i]], start[ids[i]] + dur[ids[i]]};
    }
    *n = tl_merge(v, m);
    return v;
}

void timeline_rank(const dag *g, const double *start, const double *dur, int rank, double makespan, rank_timeline *out)
{
    size_t nc, nu;
    tl_span *c = collect(g, start, dur, rank, true, &nc), *u = collect(g, start, dur, rank, false, &nu);
    out->busy = tl_length(c, nc);
    out->comm = tl_length(u, nu);
    out->exposed = out->comm - tl_overlap(u, nu, c, nc);
    out->idle = makespan - out->busy - out->exposed;
    if (out->idle < 0) out->idle = 0;
    free(c);
    free(u);
}

/* kineto_calib: calibration points and nccl-tests logs from profiler
 * traces. See kineto_calib.h. */
#include "kineto_calib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/placement.h"
#include "core/timeline.h"
#include "core/xalloc.h"

/* The rank's NCCL kernels of the chosen steps as disjoint sorted spans. */
static tl_span *comm_spans(const kineto_rank *r, size_t *n)
{
    tl_span *v = xmalloc_array(r->nk + 1, sizeof *v, "a rank's communication spans");
    size_t m = 0;
    for (size_t j = 0; j < r->nk; j++)
        if (r->k[j].step >= 0 && kineto_kind_is_comm(r->k[j].kind))
            v[m++] = (tl_span){r->k[j].ts, r->k[j].ts + r->k[j].dur};
    *n = tl_merge(v, m);
    return v;
}

/* The fraction of [a, b) that the spans cover. */
static double covered(const tl_span *v, size_t n, double a, double b)
{
    if (b <= a) return 0;
    size_t lo = 0, hi = n; /* the first span ending after a */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].b <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    double s = 0;
    for (size_t i = lo; i < n && v[i].a < b; i++)
        s += fmin(b, v[i].b) - fmax(a, v[i].a);
    return s / (b - a);
}

void kineto_calib_points(calibrate_points *p, const kineto_set *s, const calib *base, kineto_calib_counts *n)
{
    for (int i = 0; i < s->n; i++) {
        const kineto_rank *r = &s->r[i];
        size_t nc;
        tl_span *comm = comm_spans(r, &nc);
        for (size_t j = 0; j < r->nk; j++) {
            const kineto_kernel *k = &r->k[j];
            if (k->step >= 0 && k->kind >= 0 && k->kind < TASK_KIND_COUNT && calib_memory_bound(k->kind)) {
                n->membound++;
                if (k->hbm <= 0 || k->dur <= 0) continue;
                n->sized_mem++;
                calibrate_add_kind(p, k->kind, k->hbm, k->dur / 1e6, covered(comm, nc, k->ts, k->ts + k->dur));
                continue;
            }
            if (k->step < 0 || (k->kind != TASK_GEMM && k->kind != TASK_ATTN_FWD && k->kind != TASK_ATTN_BWD)) continue;
            n->compute++;
            if (k->flops <= 0 || k->dur <= 0) continue;
            n->shaped++;
            double phi = covered(comm, nc, k->ts, k->ts + k->dur);
            double work[1 + CAL_TILES] = {kineto_kernel_work(k, base)};
            if (k->kind == TASK_GEMM) {
                calibrate_add_kind(p, k->kind, work[0], k->dur / 1e6, phi);
                continue;
            }
            for (int c = 0; c < CAL_TILES; c++)
                work[1 + c] = kineto_kernel_work_at(k, calibrate_tile_shapes[c][0], calibrate_tile_shapes[c][1]);
            calibrate_add_attn(p, k->kind, work, k->dur / 1e6, phi);
        }
        free(comm);
    }
    calibrate_count_input(p);
}

/* ---- GEMM shapes ---- */

typedef struct gemm_point {
    int layout;
    int64_t m, n, k;
    double dur_s;
} gemm_point;

static int by_shape(const void *a, const void *b)
{
    const gemm_point *x = a, *y = b;
    if (x->layout != y->layout) return x->layout - y->layout;
    if (x->m != y->m) return (x->m > y->m) - (x->m < y->m);
    if (x->n != y->n) return (x->n > y->n) - (x->n < y->n);
    if (x->k != y->k) return (x->k > y->k) - (x->k < y->k);
    return (x->dur_s > y->dur_s) - (x->dur_s < y->dur_s);
}

static bool same_shape(const gemm_point *x, const gemm_point *y)
{
    return x->layout == y->layout && x->m == y->m && x->n == y->n && x->k == y->k;
}

/* The rank's measured 2-D GEMMs that no NCCL kernel overlapped, appended
 * to v (grown by xrealloc); returns the new count. */
static size_t rank_gemms(const kineto_rank *r, gemm_point **v, size_t m, size_t *cap, size_t *left)
{
    size_t nc;
    tl_span *comm = comm_spans(r, &nc);
    for (size_t j = 0; j < r->nk; j++) {
        const kineto_kernel *k = &r->k[j];
        if (k->step < 0 || k->kind != TASK_GEMM || k->gm <= 0 || k->dur <= 0) continue;
        if (covered(comm, nc, k->ts, k->ts + k->dur) > 0) {
            (*left)++;
            continue;
        }
        if (m == *cap) *v = xrealloc_array(*v, *cap = *cap ? 2 * *cap : 256, sizeof **v, "the GEMM kernels");
        (*v)[m++] = (gemm_point){k->layout, k->gm, k->gn, k->gk, k->dur / 1e6};
    }
    free(comm);
    return m;
}

/* The efficiency that times 2mnk FLOPs at t seconds with cb's T0 and peak. */
static double shape_eff(const calib *cb, const kineto_gemm_shape *g, bool *clamped)
{
    double busy = g->median_s - calib_t0(cb, TASK_GEMM);
    double eff = busy > 0 ? 2.0 * (double)g->m * (double)g->n * (double)g->k / (busy * calib_peak(cb)) : 1;
    *clamped = !(eff <= 1) || eff < 1e-9;
    return fmin(1, fmax(1e-9, eff));
}

size_t kineto_calib_gemm_shapes(const kineto_set *s, const calib *cb, kineto_gemm_shape **out, size_t *left)
{
    size_t m = 0, cap = 0, n = 0;
    gemm_point *v = NULL;
    *left = 0;
    for (int i = 0; i < s->n; i++)
        m = rank_gemms(&s->r[i], &v, m, &cap, left);
    if (m > 1) qsort(v, m, sizeof *v, by_shape);
    *out = NULL;
    for (size_t i = 0; i < m;) {
        size_t j = i;
        while (j < m && same_shape(&v[j], &v[i]))
            j++;
        *out = xrealloc_array(*out, n + 1, sizeof **out, "the GEMM shapes");
        kineto_gemm_shape *g = &(*out)[n++];
        /* sorted by duration within the shape: the median */
        double med =
            (j - i) % 2 ? v[i + (j - i) / 2].dur_s : (v[i + (j - i) / 2 - 1].dur_s + v[i + (j - i) / 2].dur_s) / 2;
        *g = (kineto_gemm_shape){v[i].layout, v[i].m, v[i].n, v[i].k, j - i, med, 0, false};
        g->eff = shape_eff(cb, g, &g->clamped);
        i = j;
    }
    free(v);
    return n;
}

/* ---- NCCL kernels as nccl-tests logs ---- */

static coll_op op_of_kind(int kind)
{
    switch (kind) {
    case TASK_ALLREDUCE: return COLL_ALL_REDUCE;
    case TASK_ALLGATHER: return COLL_ALL_GATHER;
    case TASK_REDUCESCATTER: return COLL_REDUCE_SCATTER;
    case TASK_ALLTOALL: return COLL_ALLTOALL;
    default: return COLL_SENDRECV;
    }
}

/* Nodes that hold the group of k: its ranks from the args, else
 * consecutive ranks. */
static int nodes_of(const kineto_kernel *k, const placement *pl)
{
    int start = k->pg_stride ? k->pg_start : 0, stride = k->pg_stride ? k->pg_stride : 1;
    return placement_strided_nodes(pl, start, stride, k->group);
}

typedef struct sample {
    int op, gpus, nodes;
    double size, time;
} sample;

static int by_log(const void *a, const void *b)
{
    const sample *x = a, *y = b;
    if (x->op != y->op) return x->op - y->op;
    if (x->gpus != y->gpus) return x->gpus - y->gpus;
    if (x->nodes != y->nodes) return x->nodes - y->nodes;
    return (x->size > y->size) - (x->size < y->size);
}

void kineto_calib_logs(const kineto_set *s, int gpn, nccl_log **logs, int *nlogs, kineto_calib_counts *n)
{
    size_t cap = 0, m = 0;
    sample *v = NULL;
    placement pl = placement_make(gpn, 1, 0); /* the nodes' NICs play no part here */
    for (int i = 0; i < s->n; i++)
        for (size_t j = 0; j < s->r[i].nk; j++) {
            const kineto_kernel *k = &s->r[i].k[j];
            if (k->step < 0 || !kineto_kind_is_comm(k->kind)) continue;
            n->nccl++;
            bool p2p = k->kind == KINETO_P2P;
            if (k->kind == KINETO_NCCL_OTHER || k->bytes <= 0 || k->dur <= 0 || (!p2p && k->group < 2)) continue;
            n->sized++;
            if (m == cap) v = xrealloc_array(v, cap = cap ? 2 * cap : 256, sizeof *v, "the NCCL kernels");
            /* a p2p's peer is not in the trace: assume the other node when
             * nodes hold one GPU, else the same node */
            int gpus = p2p ? 2 : k->group, nodes = p2p ? (gpn == 1 ? 2 : 1) : nodes_of(k, &pl);
            v[m++] = (sample){op_of_kind(k->kind), gpus, nodes, k->bytes, k->dur / 1e6};
        }
    if (m > 1) qsort(v, m, sizeof *v, by_log);
    *logs = NULL;
    *nlogs = 0;
    for (size_t i = 0; i < m;) {
        size_t j = i;
        while (j < m && v[j].op == v[i].op && v[j].gpus == v[i].gpus && v[j].nodes == v[i].nodes)
            j++;
        *logs = xrealloc_array(*logs, (size_t)*nlogs + 1, sizeof **logs, "the NCCL logs");
        nccl_log *l = &(*logs)[(*nlogs)++];
        memset(l, 0, sizeof *l);
        snprintf(l->path, sizeof l->path, "kineto %s, %d GPUs, %d nodes", coll_op_name(v[i].op), v[i].gpus, v[i].nodes);
        l->op = v[i].op;
        l->has_op = true;
        l->gpus = v[i].gpus;
        l->nodes = v[i].nodes;
        l->rows = xmalloc_array(j - i, sizeof *l->rows, "an NCCL log's rows");
        for (size_t a = i; a < j;) { /* one size: its fastest instance */
            size_t b = a;
            double t = INFINITY;
            while (b < j && v[b].size == v[a].size)
                t = fmin(t, v[b++].time);
            l->rows[l->nrows++] = (nccl_log_row){v[a].size, t, 0};
            a = b;
        }
        i = j;
    }
    free(v);
}

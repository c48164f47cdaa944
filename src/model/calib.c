/* calib: the calibration table's cost rules: what a task, a GEMM, a
 * memory-bound kernel takes on the table's GPU. Its file format is
 * calib_file.c's. See calib.h. */
#include "calib_table.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tiles.h"

#include "core/elementwise.h"
#include "core/fusion.h"
#include "core/sizes.h"

/* merge, acc and the step's elementwise kernels (elementwise.h) */
bool calib_memory_bound(int kind) { return kind == TASK_MERGE || (kind >= TASK_ACC && kind <= TASK_COMPUTE_LAST); }

const char *calib_gpu(const calib *cb) { return cb->gpu; }
const char *calib_path(const calib *cb) { return cb->path; }
double calib_peak(const calib *cb) { return cb->peak; }

double calib_peak_of(const calib *cb, precision_kind p)
{
    return p == PRECISION_BF16 ? cb->peak : p == PRECISION_MXFP8 ? cb->peak_mxfp8 : cb->peak_fp8;
}
double calib_mem_bw(const calib *cb) { return cb->mem_bw; }

double calib_reference(const calib *cb, int kind) { return memory_bound(kind) ? cb->mem_bw : cb->peak; }
bool calib_assumed(const calib *cb, int kind) { return memory_bound(kind) ? cb->mem_bw_assumed : cb->peak_assumed; }

void calib_raise_reference(calib *cb, int kind, double rate)
{
    double *ref = memory_bound(kind) ? &cb->mem_bw : &cb->peak;
    if (!(rate > *ref)) return;
    for (int k = 0; k < NKINDS; k++) { /* curves relative to it keep their absolute speed */
        row *r = &cb->rows[k];
        if (!r->curve || memory_bound(k) != memory_bound(kind)) continue;
        for (int i = 0; i < r->npts; i++)
            r->eff[i] *= *ref / rate;
    }
    for (int i = 0; !memory_bound(kind) && i < cb->nshape; i++) /* and so do the GEMM shapes */
        cb->shape[i].eff *= *ref / rate;
    for (int i = 0; memory_bound(kind) && i < cb->bw.npts; i++) /* and the membw rows */
        cb->bw.eff[i] *= *ref / rate;
    *ref = rate;
}

/* ---- evaluation ---- */

uint64_t calib_task_bytes(const config *c, const dag_task *t)
{
    if (t->kind == TASK_MERGE) return size_merge_hbm_bytes(c, t->dim[0]);
    if (t->kind == TASK_ACC) return size_acc_hbm_bytes(t->flops); /* an ACC's FLOPs are its elements */
    if (t->kind > TASK_ACC && t->kind <= TASK_COMPUTE_LAST) {     /* so are the elementwise kernels' */
        uint64_t b[FUSION_MAX_KERNELS], sum = 0;
        for (int i = 0, n = fusion_kernels(c, (task_op)t->op, (task_phase)t->phase, t->flops, b); i < n; i++)
            sum += b[i];
        return sum;
    }
    return 0;
}

static double efficiency(const row *r, double x)
{
    if (x <= 0) return r->eff[0];
    double lx = log(x);
    if (lx <= r->lx[0]) return r->eff[0];
    for (int i = 1; i < r->npts; i++)
        if (lx <= r->lx[i]) {
            double f = (lx - r->lx[i - 1]) / (r->lx[i] - r->lx[i - 1]);
            return r->eff[i - 1] + f * (r->eff[i] - r->eff[i - 1]);
        }
    return r->eff[r->npts - 1];
}

double calib_bandwidth(const calib *cb, double bytes)
{
    if (!cb->bw.npts) return cb->mem_bw; /* no rows: the roofline's bound, the datasheet figure */
    return efficiency(&cb->bw, bytes) * cb->mem_bw;
}

double calib_seconds(const calib *cb, int kind, double flops, double bytes, double tokens)
{
    if (kind < 0 || kind >= NKINDS) return 0;
    const row *r = &cb->rows[kind];
    double work = memory_bound(kind) ? bytes : flops;
    if (work <= 0 || r->skip) return 0;
    if (r->membw) return r->t0 + bytes / calib_bandwidth(cb, bytes);
    if (!r->curve) return r->t0 + work / r->rate;
    double x = r->x == X_FLOPS ? flops : r->x == X_BYTES ? bytes : tokens;
    double ref = memory_bound(kind) ? cb->mem_bw : cb->peak;
    return r->t0 + work / (efficiency(r, x) * ref);
}

bool calib_tile(const calib *cb, int kind, int *br, int *bc)
{
    if (kind < 0 || kind >= NKINDS || !cb->tile[kind][0]) return false;
    *br = cb->tile[kind][0];
    *bc = cb->tile[kind][1];
    return true;
}

void calib_set_tile(calib *cb, int kind, int br, int bc)
{
    if (kind != TASK_ATTN_FWD && kind != TASK_ATTN_BWD) return;
    cb->tile[kind][0] = br > 0 && bc > 0 ? br : 0;
    cb->tile[kind][1] = br > 0 && bc > 0 ? bc : 0;
}

double calib_task_seconds(const calib *cb, const config *c, tiles *tl, const dag_task *t)
{
    if (!task_is_compute(t)) return 0;
    if (t->kind == TASK_GEMM && t->dim[0] && t->dim[1] && t->dim[2]) /* one GEMM, or the experts' grouped one */
        return calib_grouped_gemm_seconds(cb, t->op == OP_LM_HEAD ? PRECISION_BF16 : c->precision, dag_gemm_groups(t),
                                          t->dim[0], t->dim[1], t->dim[2], t->phase == PHASE_BWD, c->act_bytes);
    if ((t->kind == TASK_ATTN_FWD || t->kind == TASK_ATTN_BWD) && c->attention == ATTN_UNFUSED)
        return calib_unfused_attn_seconds(cb, c, t->dim[0], t->dim[1], t->dim[2], t->kind == TASK_ATTN_BWD);
    if (t->kind > TASK_ACC && t->kind <= TASK_COMPUTE_LAST)
        return calib_elementwise_seconds(cb, c, (task_op)t->op, (task_phase)t->phase, t->flops);
    double flops = tl ? tiles_task_flops(tl, t) : (double)t->flops;
    return calib_seconds(cb, t->kind, flops, (double)calib_task_bytes(c, t), (double)t->dim[0]);
}

double calib_task_t0(const calib *cb, const config *c, const dag_task *t)
{
    if (!task_is_compute(t) || t->kind >= NKINDS) return 0;
    double launches = 1;
    int kind = t->kind;
    if (t->kind == TASK_GEMM && t->dim[0] && t->dim[1] && t->dim[2]) /* one launch with grouped rows */
        launches = calib_has_grouped_gemms(cb) ? 1 : dag_gemm_groups(t);
    if (t->kind > TASK_ACC && t->kind <= TASK_COMPUTE_LAST) { /* as calib_task_seconds times them */
        uint64_t b[FUSION_MAX_KERNELS];
        kind = elementwise_kind((task_op)t->op);
        launches = fusion_kernels(c, (task_op)t->op, (task_phase)t->phase, t->flops, b);
    }
    return kind >= 0 && kind < NKINDS ? launches * cb->rows[kind].t0 : 0;
}

double calib_elementwise_seconds(const calib *cb, const config *c, task_op op, task_phase ph, uint64_t elems)
{
    uint64_t b[FUSION_MAX_KERNELS];
    int kind = elementwise_kind(op), n = fusion_kernels(c, op, ph, elems, b);
    double rows = elems, t = 0; /* a curve over tokens: the task's elements stand in (none ships one) */
    for (int i = 0; i < n; i++)
        t += calib_seconds(cb, kind, 0, (double)b[i], rows);
    return t;
}

void calib_set_skip(calib *cb, unsigned kinds)
{
    for (int k = TASK_ACC + 1; k <= TASK_COMPUTE_LAST && k < 32; k++)
        if (kinds & (1u << k)) cb->rows[k] = (row){.set = true, .skip = true};
}

double calib_interference(const calib *cb, int kind) { return kind >= 0 && kind < NKINDS ? cb->interference[kind] : 0; }

bool calib_has_interference(const calib *cb)
{
    for (int k = 0; k < NKINDS; k++)
        if (cb->interference[k] > 0) return true;
    return false;
}

void calib_set_interference(calib *cb, int kind, double f)
{
    for (int k = 0; k < NKINDS; k++)
        if (kind < 0 || k == kind) cb->interference[k] = f;
}

/* ---- GEMM shapes (calib.h, "GEMM shapes") ---- */

static const char *const layout_names[GEMM_LAYOUTS] = {"tn",  "nn",         "nt",         "any",
                                                       "fp8", "grouped-tn", "grouped-nn", "grouped-nt"};

const char *calib_gemm_layout_name(int layout)
{
    return layout >= 0 && layout < GEMM_LAYOUTS ? layout_names[layout] : "?";
}

bool calib_has_gemm_shapes(const calib *cb) { return cb->nshape > 0; }

double calib_t0(const calib *cb, int kind) { return kind >= 0 && kind < NKINDS ? cb->rows[kind].t0 : 0; }

/* The layout whose rows time `layout`: its own, else any's (fp8: its own
 * only); -1: none. */
static int rows_for(const calib *cb, int layout) { return cb->shape_set[layout]; }

void calib_index_shapes(calib *cb)
{
    bool own[GEMM_LAYOUTS] = {false};
    for (int i = 0; i < cb->nshape; i++)
        own[cb->shape[i].layout] = true;
    for (int l = 0; l < GEMM_LAYOUTS; l++) {
        cb->shape_set[l] = own[l] ? l : own[GEMM_ANY] && l < GEMM_ANY ? GEMM_ANY : -1;
        for (int a = 0; a < 3; a++)
            cb->shape_lo[l][a] = INFINITY, cb->shape_hi[l][a] = -INFINITY;
    }
    for (int i = 0; i < cb->nshape; i++) /* each layout's own rows' range: a set's is its layout's */
        for (int a = 0; a < 3; a++) {
            int l = cb->shape[i].layout;
            cb->shape_lo[l][a] = fmin(cb->shape_lo[l][a], cb->shape[i].lg[a]);
            cb->shape_hi[l][a] = fmax(cb->shape_hi[l][a], cb->shape[i].lg[a]);
        }
}

/* Whether the table has a bf16 `gemm shape` row of a single GEMM (tn,
 * nn, nt or any). */
static bool bf16_shapes(const calib *cb)
{
    for (int i = 0; i < cb->nshape; i++)
        if (cb->shape[i].layout <= GEMM_ANY) return true;
    return false;
}

bool calib_has_grouped_gemms(const calib *cb) { return rows_for(cb, GEMM_GROUPED_TN) >= 0; }

/* Inverse-distance weighting, power 4, in log2 space: a row's weight is
 * 1 / d^4, so the nearest rows dominate (power above the 3 dimensions)
 * and the result is a convex combination of the rows' efficiencies. */
double calib_gemm_eff(const calib *cb, int layout, double m, double n, double k)
{
    int set = layout >= 0 && layout < GEMM_LAYOUTS ? rows_for(cb, layout) : -1;
    if (set < 0 || !(m >= 1 && n >= 1 && k >= 1)) return -1;
    double q[3] = {log2(m), log2(n), log2(k)};
    for (int a = 0; a < 3; a++) /* flat beyond the measured range */
        q[a] = fmin(fmax(q[a], cb->shape_lo[set][a]), cb->shape_hi[set][a]);
    double sw = 0, swe = 0;
    for (int i = 0; i < cb->nshape; i++) {
        const gemm_shape *g = &cb->shape[i];
        if (g->layout != set) continue;
        double d2 = 0;
        for (int a = 0; a < 3; a++)
            d2 += (q[a] - g->lg[a]) * (q[a] - g->lg[a]);
        if (d2 == 0) return g->eff; /* a measured shape: its own figure */
        double w = 1 / (d2 * d2);
        sw += w;
        swe += w * g->eff;
    }
    return swe / sw;
}

/* How a GEMM's operands are stored and how fast its tensor cores run:
 * its compute time is scaled by `slow` (the bf16 peak over its
 * precision's), X and W take in_bytes per element and Y out_bytes. */
typedef struct gemm_io {
    double slow, in_bytes, out_bytes;
} gemm_io;

static gemm_io io_of(double elem_bytes) { return (gemm_io){1, elem_bytes, elem_bytes}; }

static double batched_rule(const calib *cb, double flops, double eff, double count, double m, double n, double k,
                           gemm_io io);

/* The cost rule (calib.h): T0 + max(compute, memory). compute is the
 * GEMM's FLOPs at its shape's rate (or the gemm curve or line without
 * shape rows, less its T0), memory its operand bytes, X m x k and W k x
 * n read and Y m x n written at elem_bytes each, over the bandwidth a
 * transfer of that size reaches. */
static double gemm_rule(const calib *cb, double flops, double eff, double m, double n, double k, gemm_io io)
{
    return batched_rule(cb, flops, eff, 1, m, n, k, io);
}

/* gemm_rule of `count` GEMMs of one shape in one launch (a strided
 * batched GEMM): their FLOPs and operand bytes, one T0. */
static double batched_rule(const calib *cb, double flops, double eff, double count, double m, double n, double k,
                           gemm_io io)
{
    const row *r = &cb->rows[TASK_GEMM];
    if (!(flops > 0)) return 0;
    double compute = eff >= 0 ? flops / (eff * cb->peak) : calib_seconds(cb, TASK_GEMM, flops, 0, m) - r->t0;
    compute *= io.slow;
    double bytes = io.in_bytes == io.out_bytes ? count * io.in_bytes * (m * k + k * n + m * n)
                                               : count * (io.in_bytes * (m * k + k * n) + io.out_bytes * m * n);
    double memory = bytes > 0 ? bytes / calib_bandwidth(cb, bytes) : 0;
    return r->t0 + (compute > memory ? compute : memory);
}

static double gemm_seconds_io(const calib *cb, int layout, double m, double n, double k, gemm_io io)
{
    return gemm_rule(cb, 2 * m * n * k, calib_gemm_eff(cb, layout, m, n, k), m, n, k, io);
}

double calib_gemm_seconds(const calib *cb, int layout, double m, double n, double k, double elem_bytes)
{
    return gemm_seconds_io(cb, layout, m, n, k, io_of(elem_bytes));
}

/* A task's GEMMs by shape: forward (m, n, k) in layout fwd; backward the
 * dgrad (m, k, n) in dgrad and the wgrad (n, k, m) in wgrad. */
static double shaped_task_io(const calib *cb, int fwd, int dgrad, int wgrad, double m, double n, double k, bool bwd,
                             gemm_io io)
{
    if (!bwd) return gemm_seconds_io(cb, fwd, m, n, k, io);
    return gemm_seconds_io(cb, dgrad, m, k, n, io) + gemm_seconds_io(cb, wgrad, n, k, m, io);
}

static double gemm_task_io(const calib *cb, double m, double n, double k, bool bwd, gemm_io io)
{
    if (!bf16_shapes(cb)) { /* by FLOPs: one kernel's worth of T0, as before; a backward moves both GEMMs' bytes */
        gemm_io both = {io.slow, (bwd ? 2 : 1) * io.in_bytes, (bwd ? 2 : 1) * io.out_bytes};
        return gemm_rule(cb, (bwd ? 4 : 2) * m * n * k, -1, m, n, k, both);
    }
    return shaped_task_io(cb, GEMM_TN, GEMM_NN, GEMM_NT, m, n, k, bwd, io);
}

double calib_gemm_task_seconds(const calib *cb, double m, double n, double k, bool bwd, double elem_bytes)
{
    return gemm_task_io(cb, m, n, k, bwd, io_of(elem_bytes));
}

/* How precision p's GEMMs run: bf16 (or a table without p's peak) at
 * peak with act_bytes operands; FP8 at p's peak with FP8 operands
 * (MXFP8: with an E8M0 scale per 32), the output in the activations'
 * width. */
static gemm_io prec_io(const calib *cb, precision_kind p, double act_bytes)
{
    double peak = calib_peak_of(cb, p);
    if (p == PRECISION_BF16 || !(peak > 0)) return io_of(act_bytes);
    return (gemm_io){cb->peak / peak, p == PRECISION_MXFP8 ? 1 + 1.0 / 32 : 1, act_bytes};
}

double calib_gemm_prec_seconds(const calib *cb, precision_kind p, double m, double n, double k, bool bwd,
                               double act_bytes)
{
    double peak = calib_peak_of(cb, p);
    if (p == PRECISION_BF16 || !(peak > 0)) return calib_gemm_task_seconds(cb, m, n, k, bwd, act_bytes);
    gemm_io io = prec_io(cb, p, act_bytes);
    if (p != PRECISION_MXFP8 && rows_for(cb, GEMM_FP8) >= 0) /* one measured layout for all three */
        return shaped_task_io(cb, GEMM_FP8, GEMM_FP8, GEMM_FP8, m, n, k, bwd, io);
    return gemm_task_io(cb, m, n, k, bwd, io);
}

/* One launch of `groups` GEMMs of (m, n, k) at the grouped layout's
 * efficiency of one group's shape. */
static double grouped_launch(const calib *cb, int layout, double groups, double m, double n, double k, gemm_io io)
{
    return batched_rule(cb, groups * 2 * m * n * k, calib_gemm_eff(cb, layout, m, n, k), groups, m, n, k, io);
}

double calib_grouped_gemm_seconds(const calib *cb, precision_kind p, double groups, double m, double n, double k,
                                  bool bwd, double act_bytes)
{
    if (groups <= 1 || !calib_has_grouped_gemms(cb))
        return groups * calib_gemm_prec_seconds(cb, p, m, n, k, bwd, act_bytes);
    gemm_io io = prec_io(cb, p, act_bytes);
    if (!bwd) return grouped_launch(cb, GEMM_GROUPED_TN, groups, m, n, k, io);
    return grouped_launch(cb, GEMM_GROUPED_NN, groups, m, k, n, io) +
           grouped_launch(cb, GEMM_GROUPED_NT, groups, n, k, m, io);
}

int calib_check_precision(const calib *cb, precision_kind p, char err[LOONG_ERRLEN])
{
    if (p == PRECISION_BF16 || calib_peak_of(cb, p) > 0) return 0;
    snprintf(err, LOONG_ERRLEN,
             "--precision %s: the %s calibration table gives no %s peak (%s): choose a GPU with %s, or give a table "
             "with that line",
             p == PRECISION_MXFP8         ? "mxfp8"
             : p == PRECISION_FP8_CURRENT ? "fp8-current"
                                          : "fp8-delayed",
             cb->gpu, p == PRECISION_MXFP8 ? "MXFP8" : "FP8", p == PRECISION_MXFP8 ? "peak_mxfp8" : "peak_fp8",
             p == PRECISION_MXFP8 ? "Blackwell's MXFP8 tensor cores" : "FP8 tensor cores (Hopper, Ada, Blackwell)");
    return -1;
}

/* One batched GEMM of count (m, n, k) products at the forward layout's
 * efficiency of one product's shape. */
static double bmm_seconds(const calib *cb, double count, double m, double n, double k, double elem_bytes)
{
    return batched_rule(cb, count * 2 * m * n * k, calib_gemm_eff(cb, GEMM_TN, m, n, k), count, m, n, k,
                        io_of(elem_bytes));
}

double calib_unfused_attn_seconds(const calib *cb, const config *c, double q, double kv, double heads, bool bwd)
{
    double count = heads * c->batch, d = c->model.head_dim, a = c->act_bytes;
    if (!bwd) /* QK^T, then PV */
        return bmm_seconds(cb, count, q, kv, d, a) + bmm_seconds(cb, count, q, d, kv, a);
    /* dP = dO V^T and dV = P^T dO, then dQ = dS K and dK = dS^T Q */
    return bmm_seconds(cb, count, q, kv, d, a) + 2 * bmm_seconds(cb, count, kv, d, q, a) +
           bmm_seconds(cb, count, q, d, kv, a);
}

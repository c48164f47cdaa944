/*
 * kineto_calib: what `loong calibrate --kineto` fits from profiler traces.
 *
 *   - Compute: every attention and GEMM kernel of the chosen steps whose
 *     work the shapes gave (kineto.h) is one point of calibrate.h's fit,
 *     its work at the base table's tile granularity, with the fraction of
 *     it that NCCL kernels on the same rank overlapped (the interference
 *     fit). The fit, its bounds and its report are the traces' own.
 *   - Memory-bound kernels: every kernel of a memory-bound kind (norm,
 *     rope, add, act, embed, loss, softmax, dropout, optim) whose op's
 *     shapes gave its bytes is a point of its kind's line, time = T0 +
 *     bytes / rate: the kind's launch floor (T0, with the HBM latency a
 *     kernel waits) and the bandwidth it streams at, written as `KIND line
 *     T0 RATE` rows in place of the membw curve.
 *   - GEMM shapes: each 2-D GEMM shape the traces ran (record_shapes) is
 *     one `gemm shape` row of the fitted table, at its kernels' median
 *     time (calib.h "GEMM shapes"), its layout from the operands' strides.
 *   - Links: the NCCL kernels of known size and group become nccl-tests
 *     logs, one per (collective, group size, nodes), a row per size: the
 *     fastest instance over ranks and steps, since a collective kernel
 *     starts when its rank launches it and waits there for the others (the
 *     last to arrive waits least); nccl_fit.h then fits the platform as it
 *     fits nccl-tests' own logs.
 *
 * Layer: analysis (uses core, model and GSL).
 */
#ifndef LOONG_KINETO_CALIB_H
#define LOONG_KINETO_CALIB_H

#include "analysis/calibrate.h"
#include "analysis/kineto.h"
#include "analysis/nccl_log.h"

typedef struct kineto_calib_counts {
    size_t compute, shaped;     /* attention and GEMM kernels; those with work */
    size_t membound, sized_mem; /* memory-bound kernels (norm, add, ...); those with their bytes */
    size_t nccl, sized;         /* NCCL kernels; those with size and group */
} kineto_calib_counts;

/* Add the compute points of s's chosen steps to p. */
void kineto_calib_points(calibrate_points *p, const kineto_set *s, const calib *base, kineto_calib_counts *n);

/* One measured GEMM shape: its kernels' median time (those not
 * overlapped by NCCL on their rank) and the efficiency that times it. */
typedef struct kineto_gemm_shape {
    int layout;      /* calib.h's gemm_layout */
    int64_t m, n, k; /* output m x n, reduction k */
    size_t kernels;  /* instances measured */
    double median_s; /* their median duration */
    double eff;      /* 2mnk / ((median - T0) x peak), clamped to [1e-9, 1] */
    bool clamped;    /* faster than the table's T0 or its peak allow */
} kineto_gemm_shape;

/* The 2-D GEMM kernels of s's chosen steps with their shapes, one entry
 * per (layout, m, n, k), sorted; the efficiency of each is against cb's
 * gemm T0 and peak, so that cb with the shape added as a `gemm shape` row
 * times that GEMM at its median. Kernels that NCCL overlapped on their
 * rank are left out (their slowdown is the interference fit's): *left
 * counts them. Returns the count; *out malloc'd (NULL when none). */
size_t kineto_calib_gemm_shapes(const kineto_set *s, const calib *cb, kineto_gemm_shape **out, size_t *left);

/* The NCCL kernels of s's chosen steps as nccl-tests logs, for a platform
 * of gpus_per_node GPUs per node (*logs malloc'd; free each with
 * nccl_log_free). Sizes seen once are kept: a fit weighs every size. */
void kineto_calib_logs(const kineto_set *s, int gpus_per_node, nccl_log **logs, int *nlogs, kineto_calib_counts *n);

#endif

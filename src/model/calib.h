/*
 * calib: the calibration table that turns a compute task into a duration —
 * read by `loong sim`, the analytical planner, and written by `loong
 * calibrate`. Backend-agnostic (no SimGrid, no CUDA).
 *
 * File format (docs/sim.md, "Calibration tables"): one directive per line, '#'
 * starts a comment, tokens separated by blanks.
 *
 *   gpu     h100            GPU kind the table describes
 *   peak    989T            dense bf16 FLOP/s per GPU (decimal SI prefixes)
 *   mem_bw  3.35TBps        HBM bandwidth, bytes/s (or bits/s with "bps")
 *   mem_bw  20GBps assumed  a reference that is a guess, not a datasheet or
 *                           measured figure: `loong calibrate` may raise it
 *   KIND curve X T0 x:eff ...   efficiency vs block size, interpolated
 *   KIND line  T0 RATE          time = T0 + work / RATE (what calibrate fits)
 *   interference F          a compute kernel runs (1 + F) x slower while
 *   interference KIND F     communication kernels (NCCL's SMs and HBM
 *                           traffic) run beside it on the same GPU [0: none]
 *   tile KIND BRxBC         attn_fwd or attn_bwd: the kernel computes tiles
 *                           of BR query rows x BC key columns, a partly
 *                           masked tile in full [none: exact pairs]
 *   membw   BYTES FRACTION  a kernel moving BYTES through HBM reaches
 *                           FRACTION of mem_bw; rows in increasing BYTES
 *                           (see "The cost rule" below) [none: 1]
 *   KIND membw T0           a memory-bound kind timed by the membw rows:
 *                           T0 + bytes / (mem_bw x membw(bytes))
 *   gemm shape LAYOUT M N K EFF
 *                           one measured GEMM: output M x N, reduction K,
 *                           at EFF of `peak`; LAYOUT tn (forward), nn
 *                           (dgrad), nt (wgrad) as Transformer Engine calls
 *                           cuBLAS, or any (a source that measured one
 *                           layout for all), fp8, or grouped-tn, grouped-nn,
 *                           grouped-nt (one group's shape of the experts'
 *                           grouped GEMM); see "GEMM shapes" below
 *
 * KIND is a compute task kind: gemm, attn_fwd, attn_bwd (compute-bound:
 * work = FLOPs, efficiency relative to `peak`, RATE in FLOP/s) or merge, acc,
 * norm, rope, add, act, embed, loss, optim (memory-bound: work = bytes moved,
 * calib_task_bytes(); efficiency relative to `mem_bw`, RATE a bandwidth such
 * as 2.7TBps). A table without a row for norm .. optim times them with acc's
 * row (and does not write it back). X, the curve's abscissa,
 * is `flops`, `bytes` or `tokens` (the task's first dimension: GEMM m, or
 * the query tokens of an attention block; token points take binary K/M
 * like --seq, FLOPs and bytes decimal SI prefixes). Curves interpolate linearly in
 * log(x) between points and are flat beyond the first and last; a curve's
 * time is T0 + work / (eff(x) * reference). Every kind needs exactly one row,
 * efficiencies lie in [1e-9, 1], rates and references are at least 1 per
 * second and a line's RATE may not exceed the reference: a table can never
 * predict faster than the hardware peak, nor an infinite time.
 *
 * GEMM shapes. A table with `gemm shape` rows times a GEMM by its shape:
 * T0 + 2MNK / (eff(M, N, K) x peak), T0 the gemm row's. eff is inverse-
 * distance weighted (power 4) over the layout's rows in (log2 M, log2 N,
 * log2 K), the query first clamped to the rows' range on each axis: exact
 * at a row, between the rows' extremes everywhere, flat beyond the
 * measured range. A layout without rows of its own takes the `any` rows,
 * and without those the gemm curve or line (at 2MNK FLOPs). `gemm shape
 * fp8` rows time the GEMMs of --precision fp8-delayed and fp8-current, all
 * three of a layer, at their efficiency of peak_fp8; without them an FP8
 * GEMM takes its bf16 shape's efficiency of peak_fp8 (and MXFP8 always
 * does: no measured sweep). A forward task
 * (m, n, k) is one tn GEMM; a backward task (4mnk FLOPs) is two, timed
 * each by its own shape: dgrad nn (m, k, n) and wgrad nt (n, k, m). A table
 * without shape rows times GEMMs exactly as before: by FLOPs alone.
 *
 * The cost rule. Every compute task takes its launch floor, its row's T0,
 * plus the longer of its compute time and its memory time:
 *   T0 + max(FLOPs / rate(shape), bytes / bandwidth(bytes)).
 * A GEMM's rate is its shape row's efficiency x peak (or the gemm curve or
 * line), its bytes its operands' (X m x k, W k x n, Y m x n at the
 * activation's bytes each). A memory-bound kind has no FLOPs term; its
 * bandwidth is its row's: a line's RATE, a curve's eff x mem_bw, or
 * membw's mem_bw x membw(bytes), the membw rows interpolated linearly
 * in log(bytes) and flat beyond the first and last. Without membw rows
 * membw(bytes) = 1: the datasheet bandwidth, the roofline's bound. An
 * attention kernel's memory term is left out: FlashAttention's
 * arithmetic intensity grows with its block's tokens and is far above
 * the ridge point at the block sizes loong builds. An elementwise task
 * pays T0 per kernel it launches (fusion.h: --fusions).
 *
 * Low-level: depends on units and dag (for task kinds and shapes).
 *
 * Layer: model (uses core only: no SimGrid, no executor, no measurements).
 */
#ifndef LOONG_CALIB_H
#define LOONG_CALIB_H

#include <stdio.h>

#include "core/dag.h"

typedef struct calib calib;

/* Parse a calibration table from text; `name` labels messages ("file:line:
 * ..."). Returns a new table, or NULL with a one-line message for any
 * malformed row, missing kind, duplicate kind or rate above peak. */
calib *calib_parse(const char *text, const char *name, char err[LOONG_ERRLEN]);

/* calib_parse on the contents of path. NULL with a message if unreadable. */
calib *calib_load(const char *path, char err[LOONG_ERRLEN]);

/* The table for a platform's GPUs of kind `gpu`: `path` when given (e.g.
 * --calib), else <directory of platform>/<gpu>.calib, the shipped layout of
 * topologies/. The table's gpu line must name `gpu`. Returns the table, or
 * NULL with a one-line message naming the file and the fix. */
calib *calib_for_platform(const char *platform, const char *gpu, const char *path, char err[LOONG_ERRLEN]);

void calib_free(calib *cb);

/* GPU kind (e.g. "h100"), peak FLOP/s and HBM bytes/s of the table. */
const char *calib_gpu(const calib *cb);
/* The file the table was read from (calib_load, calib_for_platform), or
 * NULL for one parsed from text. */
const char *calib_path(const calib *cb);
double calib_peak(const calib *cb);
/* The dense peak of precision p's GEMMs: peak (bf16), `peak_fp8` (the
 * per-tensor FP8 recipes) or `peak_mxfp8`; 0 when the table gives none. */
double calib_peak_of(const calib *cb, precision_kind p);
double calib_mem_bw(const calib *cb);

/* Whether a compute kind is timed by the bytes it moves (merge, acc and
 * the elementwise kernels) rather than by its FLOPs. */
bool calib_memory_bound(int kind);

/* The reference a compute kind's rate is bounded by: mem_bw for merge and
 * acc, peak for the others; and whether the table marks it assumed. */
double calib_reference(const calib *cb, int kind);
bool calib_assumed(const calib *cb, int kind);

/* Raise kind's reference to `rate` when rate is above it (calibrate does
 * so for an assumed reference that a fit beats). The efficiencies of the
 * curve rows measured against that reference are scaled down by the same
 * ratio, so that no row other than the one refitted predicts differently. */
void calib_raise_reference(calib *cb, int kind, double rate);

/* Bytes a memory-bound task moves through HBM (core/sizes.h): a merge
 * size_merge_hbm_bytes() of its query tokens, an acc size_acc_hbm_bytes()
 * of its elements, the elementwise kernels elementwise_hbm_bytes() of
 * theirs (core/elementwise.h). 0 for compute-bound kinds. */
uint64_t calib_task_bytes(const config *c, const dag_task *t);

/* The slowdown factor F of kind's kernels while communication runs beside
 * them (0 when the table has none), whether any kind has one, and set it
 * (kind -1: every kind; what `loong calibrate` fits). */
double calib_interference(const calib *cb, int kind);
bool calib_has_interference(const calib *cb);
void calib_set_interference(calib *cb, int kind, double f);

/* Mark the elementwise kinds (after acc) in the mask `kinds` (bit 1 <<
 * kind) as run by no kernel on this device: 0 s, written `KIND skip`.
 * What `loong calibrate` does for a table fitted to executor traces,
 * whose devices run them as empty ops (core/trace.h: TRACE_EXEC_SKIPS). */
void calib_set_skip(calib *cb, unsigned kinds);

/* The attention kernel's tile for kind (attn_fwd, attn_bwd), query rows x
 * key columns, from the table's `tile` line; false when it has none (the
 * kernel's work is then its exact (query, key) pairs). */
bool calib_tile(const calib *cb, int kind, int *br, int *bc);

/* Set kind's tile (attn_fwd, attn_bwd) to br x bc; 0 x 0 removes it
 * (exact pairs). What `loong calibrate` does with a tile it measured. */
void calib_set_tile(calib *cb, int kind, int br, int bc);

/* Seconds a compute task takes (0 for communication tasks). tl (NULL:
 * exact pairs) gives an attention task's work at its kernel's tile
 * granularity (tiles.h). */
typedef struct tiles tiles;
double calib_task_seconds(const calib *cb, const config *c, tiles *tl, const dag_task *t);

/* The fixed part of calib_task_seconds: its kind's T0 for each kernel the
 * task launches (a grouped GEMM's groups, an elementwise task's fused
 * kernels). On a GPU that ranks share (loong sim
 * --one-gpu) it is latency, not a share of the GPU: P ranks' launches of a
 * quarter of the work each took what one rank's launches of all of it did
 * on an H200 (docs/exec.md, "The CUDA device"). */
double calib_task_t0(const calib *cb, const config *c, const dag_task *t);

/* The bandwidth, bytes/s, a kernel moving `bytes` through HBM reaches:
 * mem_bw x membw(bytes) (see "The cost rule"). */
double calib_bandwidth(const calib *cb, double bytes);

/* Seconds of an elementwise task of op in phase ph over `elems` elements
 * (elementwise.h): each kernel fusion_kernels() says it launches, its
 * kind's T0 plus its bytes over its kind's bandwidth. The simulator
 * (through calib_task_seconds) and the analytical model both time the
 * elementwise kernels with it. */
double calib_elementwise_seconds(const calib *cb, const config *c, task_op op, task_phase ph, uint64_t elems);

/* Seconds for `kind` given its work (FLOPs or bytes, by kind) and abscissa
 * values, for callers without a dag_task (the planner). */
double calib_seconds(const calib *cb, int kind, double flops, double bytes, double tokens);

/* Replace kind's row by the line T0 + work / rate (for `loong calibrate`);
 * for gemm the shape rows go too (the line is then the whole model).
 * Returns 0, or -1 with a message if rate is not positive or exceeds the
 * reference peak. */
int calib_set_line(calib *cb, int kind, double t0, double rate, char err[LOONG_ERRLEN]);

/* ---- GEMM shapes (see "GEMM shapes" above) ---- */

/* A GEMM's layout as Transformer Engine calls cuBLAS for Y = X W^T:
 * forward tn, dgrad nn, wgrad nt; any: rows that stand for every layout.
 * fp8: FP8 GEMMs (e4m3 operands, bf16 out), every layout, their
 * efficiency of peak_fp8; bf16 GEMMs never take them, nor they any's.
 * grouped-tn, grouped-nn, grouped-nt: the experts' grouped GEMM (one
 * launch over a rank's local experts), indexed by one group's M, N, K,
 * the efficiency the whole launch reaches; only grouped GEMMs take them,
 * and a table has all three or none (calib_grouped_gemm_seconds). */
typedef enum {
    GEMM_TN,
    GEMM_NN,
    GEMM_NT,
    GEMM_ANY,
    GEMM_FP8,
    GEMM_GROUPED_TN,
    GEMM_GROUPED_NN,
    GEMM_GROUPED_NT,
    GEMM_LAYOUTS
} gemm_layout;

/* The layout's name in the table ("tn", ...). */
const char *calib_gemm_layout_name(int layout);

/* Whether the table has any `gemm shape` row. */
bool calib_has_gemm_shapes(const calib *cb);

/* The efficiency (of peak) of one GEMM of output m x n and reduction k in
 * `layout`, interpolated over the rows that layout uses; -1 when no row
 * applies (the gemm curve or line times it). */
double calib_gemm_eff(const calib *cb, int layout, double m, double n, double k);

/* Seconds of one GEMM (2mnk FLOPs) of that shape and layout by the cost
 * rule: T0 + max(its FLOPs at its shape rows' rate (else the gemm curve
 * or line), its operands' bytes at elem_bytes each over calib_bandwidth);
 * elem_bytes 0 leaves the memory term out. */
double calib_gemm_seconds(const calib *cb, int layout, double m, double n, double k, double elem_bytes);

/* Seconds of a DAG GEMM task of shape (m, n, k) (Y = X W, X m x k, W k x n):
 * forward one tn GEMM; backward (bwd) its dgrad nn (m, k, n) plus its
 * wgrad nt (n, k, m), each by calib_gemm_seconds. A table without shape
 * rows: one T0 plus the max of the gemm row's time at the task's
 * (bwd ? 4 : 2) mnk FLOPs and its (bwd ? 2 : 1) GEMMs' operand bytes. */
double calib_gemm_task_seconds(const calib *cb, double m, double n, double k, bool bwd, double elem_bytes);

/* calib_gemm_task_seconds in precision p (--precision): bf16 as that;
 * the FP8 recipes run at calib_peak_of(p) with the efficiency of the
 * shape's bf16 rows (no FP8 per-shape sweep is shipped: an assumption)
 * and read FP8 operands (MXFP8 with one E8M0 scale byte per 32),
 * writing act_bytes. A table without p's peak times it as bf16
 * (calib_check_precision refuses that first). */
double calib_gemm_prec_seconds(const calib *cb, precision_kind p, double m, double n, double k, bool bwd,
                               double act_bytes);

/* Seconds of a grouped GEMM task: `groups` GEMMs of shape (m, n, k) in
 * one launch (the experts' grouped GEMM, dim[0] each expert's mean rows),
 * forward, or backward (bwd) its grouped dgrad and wgrad. With the
 * table's grouped-* rows: one T0 per launch plus the max of the groups'
 * FLOPs at the grouped rows' efficiency of one group's shape (at
 * calib_peak_of(p), FP8 operands as calib_gemm_prec_seconds) and the
 * groups' operand bytes over calib_bandwidth. Without them, groups
 * separate GEMMs: groups x calib_gemm_prec_seconds. */
double calib_grouped_gemm_seconds(const calib *cb, precision_kind p, double groups, double m, double n, double k,
                                  bool bwd, double act_bytes);

/* Whether the table has grouped-* GEMM rows (one launch per grouped GEMM). */
bool calib_has_grouped_gemms(const calib *cb);

/* 0 when cb can time p's GEMMs (bf16, or its peak line is there), else -1
 * with the one-line error naming the missing line and the fix. */
int calib_check_precision(const calib *cb, precision_kind p, char err[LOONG_ERRLEN]);

/* Seconds of an attention block's batched GEMMs under --attention
 * unfused (core/unfused.h): q queries against kv keys over `heads` query
 * heads and c's B samples, one launch per product. Forward QK^T (q, kv,
 * d) and PV (q, d, kv); backward (bwd) dP (q, kv, d), dV and dK (kv, d,
 * q) and dQ (q, d, kv). Each by the cost rule over all its products: the
 * FLOPs at the efficiency of one product's shape in the tn rows (no
 * batched-GEMM sweep was found: an assumption; without shape rows the
 * gemm curve at the launch's FLOPs), the operands' bytes of every
 * product over calib_bandwidth, one T0. */
double calib_unfused_attn_seconds(const calib *cb, const config *c, double q, double kv, double heads, bool bwd);

/* Add (or replace) the shape row (layout, m, n, k) at efficiency eff, for
 * a caller that measured the shape. Returns 0, or -1 with a message
 * when eff is outside [1e-9, 1], a dimension outside [1, 2^32), or the
 * table already holds the most rows it may. */
int calib_set_gemm_shape(calib *cb, int layout, uint64_t m, uint64_t n, uint64_t k, double eff, char err[LOONG_ERRLEN]);

/* The fixed cost T0 of kind's row (a line's or a curve's), seconds. */
double calib_t0(const calib *cb, int kind);

/* Write the table in the format calib_parse reads (round-trips exactly up
 * to %.17g). Returns 0, or -1 on a write error. */
int calib_write(FILE *f, const calib *cb);

#endif

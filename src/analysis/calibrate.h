/*
 * calibrate: fit the simulator's model to measurements. Every input
 * reduces to points (calibrate_points): per compute kind, time against
 * work (FLOPs, or HBM bytes for merge and acc); per link class (same node,
 * other node), time against bytes times the number of transfers that
 * shared the link. Measured traces fill them today
 * (calibrate_points_from_traces); any other source fills them the same way
 * and shares one fitting, policy and report path:
 *
 *   - each kind and class is fitted with fit_linear_bounded() (robust,
 *     relative), its start-up time within [0, 10 ms]: one that comes out
 *     outside is fixed at the bound and the rate refitted;
 *   - a fit must be physical: a positive rate no faster than the base
 *     table's reference for the kind (peak, or mem_bw for merge and acc);
 *   - a rate above a reference the base table marks `assumed` raises that
 *     reference (calib_raise_reference: the other rows keep their speed),
 *     and the report says so;
 *   - a kind whose fit fails (too few points, one size, a slope that is not
 *     positive) or leaves the bounds keeps the base table's row, with one
 *     "# kept from base:" line giving the reason. With `strict` any of
 *     these is an error instead.
 *
 * Layer: analysis (uses core, model and GSL).
 */
#ifndef LOONG_CALIBRATE_H
#define LOONG_CALIBRATE_H

#include <stdio.h>

#include "core/trace.h"
#include "fit.h"
#include "fit_gate.h"
#include "model/calib.h"

typedef enum { LINK_INTRA, LINK_INTER, LINK_CLASSES } link_class;

typedef struct calibrate_points calibrate_points;

calibrate_points *calibrate_points_new(void);
void calibrate_points_free(calibrate_points *p);
/* One measurement of compute kind `kind`: `work` FLOPs or bytes in
 * `seconds`, `overlapped` the fraction of it that communication on the same
 * rank overlapped (0..1). The interference factor F (calib.h: a kernel
 * progresses at 1/(1+F) of its rate while overlapped) comes from the
 * overlapped kernels of the kinds that also have clean ones, against the
 * clean ones' lines; every kind's line then from all its kernels with F
 * divided out. */
void calibrate_add_kind(calibrate_points *p, int kind, double work, double seconds, double overlapped);
/* The attention kernels' tile shapes calibrate chooses among (calib.h's
 * `tile` line), rows x columns: exact pairs (0 x 0), then the shapes
 * FlashAttention-2 and -3 launch for head dimensions up to 128
 * (csrc/flash_attn/src/flash_{fwd,bwd}_launch_template.h,
 * hopper/tile_size.h). */
enum { CAL_TILES = 7 };
extern const int calibrate_tile_shapes[CAL_TILES][2];

/* One attention kernel (attn_fwd, attn_bwd): work[0] its FLOPs at the
 * base table's tile (exact pairs without one), work[1 + i] at
 * calibrate_tile_shapes[i]; seconds and overlapped as calibrate_add_kind.
 * A kind whose every point came this way has its tile measured: the shape
 * whose work fits a line best. */
void calibrate_add_attn(calibrate_points *p, int kind, const double work[1 + CAL_TILES], double seconds,
                        double overlapped);
/* One more input (a trace, a profiler trace set) the points came from,
 * for the report. */
void calibrate_count_input(calibrate_points *p);
/* One transfer of link class c: `bytes` (times its sharing) in `seconds`. */
void calibrate_add_link(calibrate_points *p, link_class c, double bytes, double seconds);
/* The points of n measured traces: every compute task, and every transfer
 * from the later of its send's and recv's starts to the recv's end (waiting
 * for a late peer is not transfer time), weighted by the overlap-weighted
 * count of transfers sharing its sender's or receiver's link. An attention
 * task's work is the tiles of base's tile lines (model/tiles.h), so that
 * the fitted rate times what the table's users time; without them, its
 * exact FLOPs. Returns 0 or -1 with a message (a trace whose configuration
 * does not build). */
int calibrate_points_from_traces(calibrate_points *p, const trace *const *traces, int n, const calib *base,
                                 char err[LOONG_ERRLEN]);

typedef enum { CAL_ABSENT, CAL_FITTED, CAL_KEPT } calibrate_status;

typedef struct calibrate_fit_of {
    calibrate_status status; /* no points; fitted; kept from the base table */
    fit_line line;           /* seconds = c0 + work * c1 (links: c0 = alpha, c1 = 1 / beta) */
    char reason[160];        /* why it was kept */
} calibrate_fit_of;

/* The tile measured for one attention kind, from its kernels without
 * communication beside them: each candidate's relative rms residual
 * against its own line; `chosen` is the index of the shape taken, or -1
 * when the base table's stays: no candidate fits clearly better (10 %
 * lower rms and 0.1 points), or two fit alike (`ambiguous`: the other). */
typedef struct calibrate_tile_of {
    bool measured;
    int chosen, ambiguous;
    double base_rms, rms[CAL_TILES];
    fit_line line; /* the chosen shape's line through the clean kernels */
} calibrate_tile_of;

typedef struct calibrate_result {
    calibrate_fit_of kind[TASK_KIND_COUNT];
    calibrate_tile_of tile[2]; /* attn_fwd, attn_bwd */
    calibrate_fit_of link[LINK_CLASSES];
    double raise_peak, raise_mem_bw; /* an assumed reference raised to this rate, else 0 */
    double interference;             /* fitted F */
    bool interference_fitted;        /* else kept from the base table, for interference_reason */
    double interference_r2;          /* R^2 of the overlapped kernels' times under their clean lines slowed by F */
    char interference_degenerate[FIT_WHY_LEN]; /* why interference_r2 means nothing, or "" */
    int interference_points;                   /* overlapped kernels it came from */
    char interference_reason[120];
    int ninputs; /* traces (or other inputs) the points came from */
} calibrate_result;

/* Fit the points against the bounds of `base` under the policy above.
 * Returns 0, or -1 with a message: under `strict` the first kind that would
 * be kept, and always when the points hold nothing to fit. */
int calibrate_fit(const calibrate_points *p, const calib *base, bool strict, calibrate_result *r,
                  char err[LOONG_ERRLEN]);

/* Raise the references r noted, set the tiles it measured, then replace
 * the fitted kinds' rows of cb by their lines. Returns 0, or -1 with a
 * message. */
int calibrate_apply(const calibrate_result *r, calib *cb, char err[LOONG_ERRLEN]);

/* Every parameter r would write (fitted kinds and link classes, a fitted
 * interference, a chosen tile) with its R^2, into g. */
void calibrate_judge(const calibrate_result *r, fit_gate *g);

/* Kinds and link classes kept from the base table. */
int calibrate_kept(const calibrate_result *r);

/* The #-headed report: per fit the points, parameters, R^2, relative
 * residuals and outliers; a "# kept from base:" line per kept kind; the
 * raised references; a summary line. */
void calibrate_print(FILE *f, const calibrate_result *r);

#endif

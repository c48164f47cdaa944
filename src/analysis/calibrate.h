/*
 * calibrate: fit the simulator's model to measured traces (GSL least
 * squares, fit.h). Per compute kind, time = t0 + work / rate (work = FLOPs,
 * or HBM bytes for merge and acc). Per link class (same node, other node),
 * time = alpha + k * bytes / beta over the point-to-point transfers, where a
 * transfer runs from the later of its send's and recv's starts to the
 * recv's end, and k counts the transfers that shared the sender's or the
 * receiver's link meanwhile (overlap-weighted). `loong calibrate` turns the
 * result into a calibration table and a platform that `loong sim` reads.
 *
 * Layer: analysis (uses core, model and GSL).
 */
#ifndef LOONG_CALIBRATE_H
#define LOONG_CALIBRATE_H

#include <stdio.h>

#include "model/calib.h"
#include "fit.h"
#include "core/trace.h"

typedef enum { LINK_INTRA, LINK_INTER, LINK_CLASSES } link_class;

typedef struct calibrate_result {
    bool have_kind[TASK_KIND_COUNT];
    fit_line kind[TASK_KIND_COUNT]; /* seconds = c0 + work * c1 */
    bool have_link[LINK_CLASSES];
    fit_line link[LINK_CLASSES]; /* seconds = c0 (alpha) + k * bytes * c1 (1 / beta) */
    int ntraces;
} calibrate_result;

/* Fit everything the n traces measure. A kind or link class without any
 * point is left out (have_* false); one with too few points or a degenerate
 * fit is an error naming it. Returns 0 or -1 with a message. */
int calibrate_fit(const trace *const *traces, int n, calibrate_result *r, char err[LOONG_ERRLEN]);

/* Replace the fitted kinds' rows of cb by their lines. Returns 0 or -1
 * (a rate above the table's peak). */
int calibrate_apply(const calibrate_result *r, calib *cb, char err[LOONG_ERRLEN]);

/* The #-headed report: per fit the points, parameters, R^2 and residuals. */
void calibrate_print(FILE *f, const calibrate_result *r);

#endif

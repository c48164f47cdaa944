/*
 * fit: the straight line time = c0 + c1 * size that every calibration input
 * is fitted with (measured traces today; nccl-tests logs and micro-
 * benchmarks tomorrow go through the same function). Times span three
 * orders of magnitude and a shared machine adds outliers, so the fit is
 * robust and in relative terms: iteratively reweighted least squares on
 * the relative error (GSL's gsl_multifit_wlinear, weight = bisquare weight
 * / y^2, the scale the MAD of the relative residuals, gsl_stats_mad). A
 * negative c0 (noise around a tiny start-up time) is refitted through the
 * origin. It reports R^2 of the
 * absolute times (fit_r2: none when it would mean nothing), the rms and
 * largest relative residual, and how many points the bisquare weights set
 * aside as outliers.
 *
 * Layer: analysis (uses core, model and GSL).
 */
#ifndef LOONG_FIT_H
#define LOONG_FIT_H

#include "core/units.h"

/* Why a fit has no meaningful R^2 (fit_r2), "" when it has one. */
enum { FIT_WHY_LEN = 112 };

typedef struct fit_line {
    double c0, c1;                /* y = c0 + c1 x */
    double r2;                    /* coefficient of determination of the absolute times; NAN when degenerate */
    char degenerate[FIT_WHY_LEN]; /* why r2 means nothing, or "" */
    double rel_rms, rel_max;      /* relative residuals (prediction - y) / y */
    int n;                        /* points */
    int outliers;                 /* points the robust fit weighted below 1/2 */
    bool through_origin;          /* c0 came out negative: refitted as y = c1 x */
    bool t0_bounded;              /* c0 came out above fit_linear_bounded's t0_max: refitted with c0 = t0_max */
} fit_line;

/* Fit y = c0 + c1 x. `what` names the data in messages. Returns 0, or -1
 * with a message when there are fewer than 3 points, all x are equal
 * (degenerate: the slope is undetermined), a y is not positive, or the
 * slope is not positive. */
int fit_linear(const double *x, const double *y, int n, const char *what, fit_line *out, char err[LOONG_ERRLEN]);
/* The same with c0 within [0, t0_max]: a c0 above it (a slow spell on the
 * small sizes, or a curve that is not a line) is fixed at t0_max and the
 * slope refitted, the least squares within the bound. */
int fit_linear_bounded(const double *x, const double *y, int n, double t0_max, const char *what, fit_line *out,
                       char err[LOONG_ERRLEN]);

/* The coefficient of determination of a fit of `nparams` free parameters
 * whose predictions `pred` stand against the n data `y` it was fitted to:
 * 1 - (residual sum of squares) / (total sum of squares about y's mean,
 * gsl_stats_tss), the share of y's variance the fit explains (negative
 * when it explains less than y's mean would). Returns 0 with *r2, or -1
 * with *r2 = NAN and `why` saying why a value would mean nothing: no more
 * points than parameters (the fit passes through them whatever they
 * are), or y without variance (all values equal to 1e-9). */
int fit_r2(const double *y, const double *pred, int n, int nparams, double *r2, char why[FIT_WHY_LEN]);

#endif

/*
 * fit: straight-line least squares through GSL (gsl_fit_linear), with the
 * checks a calibration needs: enough points, more than one abscissa, and a
 * positive slope. Reports R^2 and residuals.
 *
 * Layer: analysis (uses core, model and GSL).
 */
#ifndef LOONG_FIT_H
#define LOONG_FIT_H

#include "core/units.h"

typedef struct fit_line {
    double c0, c1;       /* y = c0 + c1 x */
    double r2;           /* coefficient of determination */
    double rms, max_abs; /* residuals */
    int n;
    bool through_origin; /* c0 came out negative: refitted as y = c1 x */
} fit_line;

/* Fit y = c0 + c1 x. `what` names the data in messages. Returns 0, or -1
 * with a message when there are fewer than 3 points, all x are equal
 * (degenerate: the slope is undetermined), or the slope is not positive. */
int fit_linear(const double *x, const double *y, int n, const char *what, fit_line *out, char err[LOONG_ERRLEN]);

#endif

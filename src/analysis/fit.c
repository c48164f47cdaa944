/* fit: least squares lines through GSL. See fit.h. */
#include "fit.h"

#include <gsl/gsl_fit.h>
#include <math.h>
#include <stdio.h>

static void residuals(const double *x, const double *y, int n, fit_line *f)
{
    double mean = 0, ss_tot = 0, ss_res = 0;
    for (int i = 0; i < n; i++)
        mean += y[i] / n;
    f->max_abs = 0;
    for (int i = 0; i < n; i++) {
        double r = y[i] - (f->c0 + f->c1 * x[i]);
        ss_res += r * r;
        ss_tot += (y[i] - mean) * (y[i] - mean);
        if (fabs(r) > f->max_abs) f->max_abs = fabs(r);
    }
    f->rms = sqrt(ss_res / n);
    f->r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1;
}

int fit_linear(const double *x, const double *y, int n, const char *what, fit_line *out, char err[LOONG_ERRLEN])
{
    if (n < 3) {
        snprintf(err, LOONG_ERRLEN, "%s: %d point(s), a fit needs at least 3: measure more configurations", what, n);
        return -1;
    }
    double lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    if (!(hi > lo * (1 + 1e-9))) {
        snprintf(err, LOONG_ERRLEN,
                 "%s: all %d points have the same size, so the rate is undetermined: measure at least two sizes", what,
                 n);
        return -1;
    }
    double cov00, cov01, cov11, ss;
    *out = (fit_line){0};
    out->n = n;
    gsl_fit_linear(x, 1, y, 1, (size_t)n, &out->c0, &out->c1, &cov00, &cov01, &cov11, &ss);
    if (out->c0 < 0) { /* a negative start-up time is noise: fit the slope alone */
        gsl_fit_mul(x, 1, y, 1, (size_t)n, &out->c1, &cov11, &ss);
        out->c0 = 0;
        out->through_origin = true;
    }
    if (!(out->c1 > 0)) {
        snprintf(err, LOONG_ERRLEN, "%s: time does not grow with size (slope %.3g): the fit is degenerate", what,
                 out->c1);
        return -1;
    }
    residuals(x, y, n, out);
    return 0;
}

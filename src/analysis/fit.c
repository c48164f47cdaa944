/* fit: robust relative least squares through GSL. See fit.h. */
#include "fit.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/xalloc.h"

int fit_r2(const double *y, const double *pred, int n, int nparams, double *r2, char why[FIT_WHY_LEN])
{
    *r2 = NAN;
    why[0] = 0;
    if (n <= nparams) {
        snprintf(why, FIT_WHY_LEN, "%d point(s) for %d parameter(s): the fit passes through them whatever they are", n,
                 nparams);
        return -1;
    }
    double mean = gsl_stats_mean(y, 1, (size_t)n), ss_tot = gsl_stats_tss_m(y, 1, (size_t)n, mean), ss_res = 0;
    if (!(ss_tot > n * (1e-9 * mean) * (1e-9 * mean))) {
        snprintf(why, FIT_WHY_LEN, "all %d measured values are equal: there is no variance to explain", n);
        return -1;
    }
    for (int i = 0; i < n; i++)
        ss_res += (y[i] - pred[i]) * (y[i] - pred[i]);
    *r2 = 1 - ss_res / ss_tot;
    return 0;
}

/* R^2 of the absolute times (2 parameters, or 1 with c0 fixed), relative
 * residuals. */
static void residuals(const double *x, const double *y, int n, fit_line *f)
{
    double rel2 = 0, *p = xmalloc_array((size_t)n, sizeof *p, "a fit's predictions");
    f->rel_max = 0;
    for (int i = 0; i < n; i++) {
        double pi = f->c0 + f->c1 * x[i], rel = (pi - y[i]) / y[i];
        p[i] = pi;
        rel2 += rel * rel;
        if (fabs(rel) > f->rel_max) f->rel_max = fabs(rel);
    }
    f->rel_rms = sqrt(rel2 / n);
    fit_r2(y, p, n, f->through_origin || f->t0_bounded ? 1 : 2, &f->r2, f->degenerate);
    free(p);
}

/* Tukey's bisquare weight of a residual u standardised by tune * scale. */
static double bisquare(double u) { return fabs(u) < 1 ? (1 - u * u) * (1 - u * u) : 0; }
#define BISQUARE_TUNE 4.685 /* 95 % efficiency under Gaussian noise */

/* Weighted least squares of y = c0 + c1 x (or off + c1 x, c0 fixed at off,
 * when fixed_c0) on x and y scaled to at most 1 by xs and ys, weights w. */
static int wls(const double *x, const double *y, const double *w, int n, bool fixed_c0, double off, double xs,
               double ys, fit_line *f)
{
    size_t p = fixed_c0 ? 1 : 2, m = (size_t)n;
    gsl_matrix *X = gsl_matrix_alloc(m, p), *cov = gsl_matrix_alloc(p, p);
    gsl_vector *t = gsl_vector_alloc(m), *c = gsl_vector_alloc(p), *wv = gsl_vector_alloc(m);
    gsl_multifit_linear_workspace *lw = gsl_multifit_linear_alloc(m, p);
    int rc = -1;
    if (X && cov && t && c && wv && lw) {
        for (size_t i = 0; i < m; i++) {
            if (!fixed_c0) gsl_matrix_set(X, i, 0, 1.0);
            gsl_matrix_set(X, i, p - 1, x[i] / xs);
            gsl_vector_set(t, i, (y[i] - (fixed_c0 ? off : 0)) / ys);
            gsl_vector_set(wv, i, w[i]);
        }
        double chisq;
        if (gsl_multifit_wlinear(X, wv, t, c, cov, &chisq, lw) == GSL_SUCCESS) {
            f->c0 = fixed_c0 ? off : gsl_vector_get(c, 0) * ys;
            f->c1 = gsl_vector_get(c, p - 1) * ys / xs;
            rc = 0;
        }
    }
    if (lw) gsl_multifit_linear_free(lw);
    if (wv) gsl_vector_free(wv);
    if (c) gsl_vector_free(c);
    if (t) gsl_vector_free(t);
    if (cov) gsl_matrix_free(cov);
    if (X) gsl_matrix_free(X);
    return rc;
}

/* Robust least squares on relative error: iteratively reweighted, each
 * point weighted by its bisquare weight / y^2, the scale being the MAD of
 * the relative residuals (gsl_stats_mad). GSL's gsl_multifit_robust takes
 * no prior weights, and on the row-scaled relative equations its bisquare
 * weights did not set outliers aside (GSL 2.7, checked on synthetic data),
 * so its weighted solver and its MAD are driven here. With fixed_c0, c0 is
 * fixed at off. Returns 0, or -1 when GSL fails. */
static int robust_relative(const double *x, const double *y, int n, bool fixed_c0, double off, fit_line *f)
{
    double xs = 0, ys = 0;
    for (int i = 0; i < n; i++) {
        xs = fmax(xs, x[i]);
        ys = fmax(ys, y[i]);
    }
    double *rob = malloc((size_t)n * sizeof *rob), *w = malloc((size_t)n * sizeof *w);
    double *r = malloc((size_t)n * sizeof *r), *work = malloc((size_t)n * sizeof *work);
    int rc = rob && w && r && work ? 0 : -1;
    for (int i = 0; rc == 0 && i < n; i++) {
        rob[i] = 1;
        w[i] = ys * ys / (y[i] * y[i]);
    }
    if (rc == 0) rc = wls(x, y, w, n, fixed_c0, off, xs, ys, f);
    for (int it = 0; rc == 0 && it < 50; it++) {
        for (int i = 0; i < n; i++)
            r[i] = (y[i] - (f->c0 + f->c1 * x[i])) / y[i];
        double scale = gsl_stats_mad(r, 1, (size_t)n, work);
        if (!(scale > 1e-12)) break; /* an exact fit: nothing to reweight */
        for (int i = 0; i < n; i++) {
            rob[i] = bisquare(r[i] / (BISQUARE_TUNE * scale));
            w[i] = rob[i] * ys * ys / (y[i] * y[i]);
        }
        double c0 = f->c0, c1 = f->c1;
        rc = wls(x, y, w, n, fixed_c0, off, xs, ys, f);
        if (fabs(f->c1 - c1) <= 1e-9 * fabs(c1) && fabs(f->c0 - c0) <= 1e-9 * ys) break;
    }
    f->outliers = 0;
    for (int i = 0; rc == 0 && i < n; i++)
        f->outliers += rob[i] < 0.5;
    free(rob);
    free(w);
    free(r);
    free(work);
    return rc;
}

int fit_linear(const double *x, const double *y, int n, const char *what, fit_line *out, char err[LOONG_ERRLEN])
{
    return fit_linear_bounded(x, y, n, INFINITY, what, out, err);
}

int fit_linear_bounded(const double *x, const double *y, int n, double t0_max, const char *what, fit_line *out,
                       char err[LOONG_ERRLEN])
{
    gsl_set_error_handler_off(); /* GSL's default handler aborts; errors are return values here */
    if (n < 3) {
        snprintf(err, LOONG_ERRLEN, "%s: %d point(s), a fit needs at least 3: measure more configurations", what, n);
        return -1;
    }
    double lo = x[0], hi = x[0];
    for (int i = 0; i < n; i++) {
        if (!(y[i] > 0)) {
            snprintf(err, LOONG_ERRLEN, "%s: a duration of %.3g s is not positive", what, y[i]);
            return -1;
        }
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    if (!(hi > lo * (1 + 1e-9))) {
        snprintf(err, LOONG_ERRLEN,
                 "%s: all %d points have the same size, so the rate is undetermined: measure at least two sizes", what,
                 n);
        return -1;
    }
    *out = (fit_line){0};
    out->n = n;
    int rc = robust_relative(x, y, n, false, 0, out);
    /* c0 outside [0, t0_max]: the least squares within the bounds has c0 on
     * the nearer one (the residual's minimum over c1 is convex in c0), so
     * the slope is refitted with c0 fixed there */
    if (rc == 0 && out->c0 < 0) { /* a negative start-up time is noise: fit the slope alone */
        rc = robust_relative(x, y, n, true, 0, out);
        out->through_origin = true;
    } else if (rc == 0 && out->c0 > t0_max) {
        rc = robust_relative(x, y, n, true, t0_max, out);
        out->t0_bounded = true;
    }
    if (rc < 0) {
        snprintf(err, LOONG_ERRLEN, "%s: the robust fit did not converge on %d points", what, n);
        return -1;
    }
    if (!(out->c1 > 0)) {
        snprintf(err, LOONG_ERRLEN, "%s: time does not grow with size (slope %.3g): the fit is degenerate", what,
                 out->c1);
        return -1;
    }
    residuals(x, y, n, out);
    return 0;
}

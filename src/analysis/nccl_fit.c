/* nccl_fit: a platform from nccl-tests logs. See nccl_fit.h. */
#include "nccl_fit.h"

#include <gsl/gsl_blas.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"

/* The unknowns, fitted as logarithms so that they stay positive. */
static double *field(platform_spec *sp, int k)
{
    double *f[NCCL_FIT_PARAMS] = {&sp->nvlink_bw, &sp->nic_bw,    &sp->nvlink_lat, &sp->nic_lat,
                                  &sp->ll_eff,    &sp->ll128_eff, &sp->tree_eff,   &sp->nvls_eff};
    return f[k];
}
static const char *const names[NCCL_FIT_PARAMS] = {"nvlink_bw", "nic_bw",    "nvlink_lat", "nic_lat",
                                                   "ll_eff",    "ll128_eff", "tree_eff",   "nvls_eff"};

int nccl_fit_param_parse(const char *name)
{
    for (int k = 0; k < NCCL_FIT_PARAMS; k++)
        if (!strcmp(name, names[k])) return k;
    return -1;
}

double nccl_fit_predict(const platform_spec *sp, const nccl_log *log, double size)
{
    platform_spec s = nccl_spec_holding(sp, log->gpus, log->nodes);
    nccl_group g;
    if (nccl_group_uniform(&g, &s, log->gpus, log->nodes) < 0) return NAN;
    nccl_plan p;
    char err[LOONG_ERRLEN];
    double t = nccl_plan_coll(&s, &g, log->op, size, NCCL_AUTO, NCCL_AUTO, &p, err) == 0 ? p.seconds : NAN;
    nccl_group_free(&g);
    return t;
}

typedef struct problem {
    platform_spec base;
    const nccl_log *logs;
    int nlogs, npoints;
    int free_k[NCCL_FIT_PARAMS], nfree; /* the fitted parameters' indices */
    unsigned char *dep;                 /* [npoints]: bit k when the point's time moves with parameter k */
} problem;

static platform_spec spec_at(const problem *pb, const gsl_vector *x)
{
    platform_spec s = pb->base;
    for (int i = 0; i < pb->nfree; i++)
        *field(&s, pb->free_k[i]) = exp(gsl_vector_get(x, (size_t)i));
    return s;
}

/* Relative residuals of every point at spec s. */
static void residuals(const problem *pb, const platform_spec *s, double *r)
{
    int k = 0;
    for (int l = 0; l < pb->nlogs; l++)
        for (int i = 0; i < pb->logs[l].nrows; i++, k++) {
            const nccl_log_row *row = &pb->logs[l].rows[i];
            r[k] = (nccl_fit_predict(s, &pb->logs[l], row->size) - row->time_s) / row->time_s;
        }
}

/* f may be a strided view (a column of the finite-difference Jacobian). */
static int fit_f(const gsl_vector *x, void *data, gsl_vector *f)
{
    const problem *pb = data;
    platform_spec s = spec_at(pb, x);
    double *r = xmalloc_array((size_t)pb->npoints, sizeof *r, "the residuals");
    residuals(pb, &s, r);
    for (int i = 0; i < pb->npoints; i++)
        gsl_vector_set(f, (size_t)i, r[i]);
    free(r);
    return GSL_SUCCESS;
}

/* A parameter is free when it is not held and some point's time moves
 * with it; pb->dep records which points do. */
static void find_free(problem *pb, unsigned hold, double *r0, double *r1)
{
    residuals(pb, &pb->base, r0);
    pb->nfree = 0;
    for (int k = 0; k < NCCL_FIT_PARAMS; k++) {
        if (hold >> k & 1) continue;
        platform_spec s = pb->base;
        *field(&s, k) *= k >= 4 ? 0.9 : 1.1; /* efficiencies stay <= 1 */
        residuals(pb, &s, r1);
        bool moves = false;
        for (int i = 0; i < pb->npoints; i++)
            if (fabs(r1[i] - r0[i]) > 1e-9) {
                pb->dep[i] |= (unsigned char)(1u << k);
                moves = true;
            }
        if (moves) pb->free_k[pb->nfree++] = k;
    }
}

/* Parameter k's R^2: over the logged times that move with it, at the
 * fitted spec s. Degenerate with one such time: the other parameters are
 * pinned by the whole fit (at least two points more than parameters), so
 * k alone answers to these times. */
static void param_r2(const problem *pb, const platform_spec *s, int k, nccl_fit_param *o)
{
    double *y = xmalloc_array((size_t)pb->npoints, sizeof *y, "the fit's R^2");
    double *p = xmalloc_array((size_t)pb->npoints, sizeof *p, "the fit's R^2");
    int n = 0, i = 0;
    for (int l = 0; l < pb->nlogs; l++)
        for (int j = 0; j < pb->logs[l].nrows; j++, i++) {
            if (!(pb->dep[i] >> k & 1)) continue;
            y[n] = pb->logs[l].rows[j].time_s;
            p[n++] = nccl_fit_predict(s, &pb->logs[l], pb->logs[l].rows[j].size);
        }
    o->n = n;
    fit_r2(y, p, n, 1, &o->r2, o->degenerate);
    free(y);
    free(p);
}

static int check_logs(const platform_spec *base, const nccl_log *logs, int nlogs, char err[LOONG_ERRLEN])
{
    for (int l = 0; l < nlogs; l++) {
        const nccl_log *g = &logs[l];
        const char *why = NULL;
        if (!g->has_op)
            why = "names no collective: keep its '# Collective test starting: ..._perf' line or name the file "
                  "after the test (all_reduce_perf.log)";
        else if (g->gpus < 2 || g->nodes < 1)
            why = "lists no ranks ('#  Rank N Group G Pid P on HOST device D' lines): keep nccl-tests' header";
        else if (g->gpus % g->nodes || g->gpus / g->nodes > base->gpus_per_node)
            why = "has more GPUs per node (or an uneven spread) than the platform: give a platform with as many "
                  "GPUs per node";
        if (why) {
            snprintf(err, LOONG_ERRLEN, "%.100s %s", g->path, why);
            return -1;
        }
    }
    return 0;
}

static void report_logs(const problem *pb, const platform_spec *s, nccl_fit_report *rep)
{
    rep->logs = xcalloc((size_t)pb->nlogs, sizeof *rep->logs, "the fit report");
    double sa = 0, ma = 0;
    int na = 0;
    for (int l = 0; l < pb->nlogs; l++) {
        const nccl_log *g = &pb->logs[l];
        nccl_fit_log *o = &rep->logs[l];
        double mean = 0, ss = 0, sr = 0, s2 = 0;
        for (int i = 0; i < g->nrows; i++)
            mean += g->rows[i].time_s / g->nrows;
        for (int i = 0; i < g->nrows; i++) {
            double y = g->rows[i].time_s, p = nccl_fit_predict(s, g, g->rows[i].size), e = (p - y) / y;
            ss += (y - mean) * (y - mean);
            sr += (p - y) * (p - y);
            s2 += e * e;
            if (fabs(e) > o->rel_max) o->rel_max = fabs(e);
        }
        o->n = g->nrows;
        o->r2 = ss > 0 ? 1 - sr / ss : 1;
        o->rel_rms = sqrt(s2 / g->nrows);
        sa += s2;
        na += g->nrows;
        if (o->rel_max > ma) ma = o->rel_max;
    }
    rep->all = (nccl_fit_log){0, sqrt(sa / na), ma, na};
}

static int solve(problem *pb, gsl_vector *x, int *iters, char err[LOONG_ERRLEN])
{
    gsl_multifit_nlinear_fdf fdf = {.f = fit_f, .df = NULL, .fvv = NULL};
    fdf.n = (size_t)pb->npoints;
    fdf.p = (size_t)pb->nfree;
    fdf.params = pb;
    gsl_multifit_nlinear_parameters par = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_workspace *w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &par, fdf.n, fdf.p);
    gsl_multifit_nlinear_init(x, &fdf, w);
    int info, rc = gsl_multifit_nlinear_driver(300, 1e-10, 1e-10, 1e-12, NULL, NULL, &info, w);
    if (rc == GSL_SUCCESS || rc == GSL_EMAXITER) gsl_vector_memcpy(x, w->x);
    *iters = (int)gsl_multifit_nlinear_niter(w);
    gsl_multifit_nlinear_free(w);
    if (rc != GSL_SUCCESS && rc != GSL_EMAXITER) {
        snprintf(err, LOONG_ERRLEN,
                 "the nccl-tests fit did not converge (%s): check that the logs are of this "
                 "platform's kind",
                 gsl_strerror(rc));
        return -1;
    }
    return 0;
}

int nccl_fit(const platform_spec *base, const nccl_log *logs, int nlogs, unsigned hold, platform_spec *out,
             nccl_fit_report *rep, char err[LOONG_ERRLEN])
{
    memset(rep, 0, sizeof *rep);
    if (check_logs(base, logs, nlogs, err) < 0) return -1;
    problem pb = {.base = *base, .logs = logs, .nlogs = nlogs};
    for (int l = 0; l < nlogs; l++)
        pb.npoints += logs[l].nrows;
    double *r0 = xmalloc_array((size_t)pb.npoints, sizeof *r0, "the residuals");
    double *r1 = xmalloc_array((size_t)pb.npoints, sizeof *r1, "the residuals");
    pb.dep = xcalloc((size_t)pb.npoints, sizeof *pb.dep, "the residuals");
    find_free(&pb, hold, r0, r1);
    free(r0);
    free(r1);
    if (pb.nfree == 0 || pb.npoints < pb.nfree + 2) {
        snprintf(err, LOONG_ERRLEN, "%d logged sizes cannot fit %d parameters: give longer sweeps (-b 8 -e 8G -f 2)",
                 pb.npoints, pb.nfree);
        free(pb.dep);
        return -1;
    }
    gsl_vector *x = gsl_vector_alloc((size_t)pb.nfree);
    for (int i = 0; i < pb.nfree; i++)
        gsl_vector_set(x, (size_t)i, log(*field(&pb.base, pb.free_k[i])));
    gsl_set_error_handler_off();
    int rc = solve(&pb, x, &rep->iterations, err);
    if (rc == 0) {
        *out = spec_at(&pb, x);
        for (int k = 4; k < NCCL_FIT_PARAMS; k++) /* an efficiency above 1 is not physical */
            if (*field(out, k) > 1) *field(out, k) = 1;
        for (int k = 0; k < NCCL_FIT_PARAMS; k++)
            rep->p[k] = (nccl_fit_param){
                .name = names[k], .base = *field(&pb.base, k), .value = *field(out, k), .held = hold >> k & 1};
        for (int i = 0; i < pb.nfree; i++) {
            rep->p[pb.free_k[i]].fitted = true;
            param_r2(&pb, out, pb.free_k[i], &rep->p[pb.free_k[i]]);
        }
        report_logs(&pb, out, rep);
    }
    gsl_vector_free(x);
    free(pb.dep);
    return rc;
}

void nccl_fit_judge(const nccl_fit_report *rep, fit_gate *g)
{
    for (int k = 0; k < NCCL_FIT_PARAMS; k++)
        if (rep->p[k].fitted) fit_gate_add(g, rep->p[k].name, rep->p[k].r2, rep->p[k].n, rep->p[k].degenerate);
}

void nccl_fit_report_free(nccl_fit_report *rep)
{
    free(rep->logs);
    rep->logs = NULL;
}

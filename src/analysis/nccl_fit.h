/*
 * nccl_fit: calibrate a platform from nccl-tests logs. The model is
 * model/nccl.h's (the simulator's and the planner's), the unknowns the
 * platform's NVLink and NIC latency and bandwidth and NCCL's protocol and
 * algorithm efficiencies (LL, LL128, tree, NVLS). GSL's nonlinear least
 * squares (gsl_multifit_nlinear, trust region) minimises the relative
 * error of every logged time, the tuner choosing the algorithm and
 * protocol per size as NCCL would. A parameter that no logged point
 * depends on (NIC figures from a one-node log, NVLS without an all-reduce
 * inside one node) keeps the platform's value and is reported as kept.
 *
 * Layer: analysis (uses core, model and GSL).
 */
#ifndef LOONG_NCCL_FIT_H
#define LOONG_NCCL_FIT_H

#include "analysis/fit.h"
#include "analysis/fit_gate.h"
#include "analysis/nccl_log.h"

enum { NCCL_FIT_PARAMS = 8 };

typedef struct nccl_fit_param {
    const char *name; /* the loong_spec key */
    double base, value;
    bool fitted; /* false: kept from the platform (held, or no point depends on it) */
    bool held;   /* the caller held it at the platform's value */
    /* fitted: R^2 of the logged times that depend on it (move with it) at
     * the fitted platform, over n of them; degenerate says why there is
     * none (one such time, or equal times) */
    double r2;
    int n;
    char degenerate[FIT_WHY_LEN];
} nccl_fit_param;

/* The parameter named `name` (nvlink_bw, nic_bw, nvlink_lat, nic_lat,
 * ll_eff, ll128_eff, tree_eff, nvls_eff), or -1. */
int nccl_fit_param_parse(const char *name);

typedef struct nccl_fit_log {
    double r2;               /* of the absolute times */
    double rel_rms, rel_max; /* relative residuals (model - measured) / measured */
    int n;
} nccl_fit_log;

typedef struct nccl_fit_report {
    nccl_fit_param p[NCCL_FIT_PARAMS];
    nccl_fit_log *logs; /* per log, [nlogs] */
    nccl_fit_log all;
    int iterations;
} nccl_fit_report;

/* Fit `base` to the logs, the parameters of the `hold` mask (bit k:
 * parameter k) kept at base's values (a figure the logs would pull past a
 * physical bound, such as a NIC above its line rate where NCCL runs an
 * algorithm the model lacks); *out gets the fitted platform (base with the
 * fitted fields replaced). Returns 0, or -1 with a one-line message: a log
 * without ranks or op, more GPUs per node than the platform has, fewer
 * points than parameters to fit, a fit that does not converge. Free the
 * report with nccl_fit_report_free. */
int nccl_fit(const platform_spec *base, const nccl_log *logs, int nlogs, unsigned hold, platform_spec *out,
             nccl_fit_report *rep, char err[LOONG_ERRLEN]);
void nccl_fit_report_free(nccl_fit_report *rep);

/* Every fitted parameter of rep with its R^2, into g. */
void nccl_fit_judge(const nccl_fit_report *rep, fit_gate *g);

/* The time model/nccl.h predicts for one logged size on spec sp (the log's
 * GPUs over its nodes, the tuner's algorithm and protocol). */
double nccl_fit_predict(const platform_spec *sp, const nccl_log *log, double size);

#endif

/*
 * sim_compose: `loong sim --compose`, a step predicted from a few small
 * simulations instead of one of every layer and micro-batch. Each runs in
 * a child process (sim_child.h); the layers compose past their period (by
 * construction under ZeRO-1), the micro-batches past theirs, and the
 * composed step is written as loong sim writes a simulated one. Why it is
 * exact, or how close, is docs/sim.md's "Composed simulations".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pipeline.h"
#include "core/recompute.h"
#include "core/stats.h"
#include "core/xalloc.h"
#include "model/calib.h"
#include "model/platform_spec.h"
#include "cli.h"
#include "cmd_sim.h"
#include "sim_child.h"

/* ---- --compose: a few small simulations instead of one of every layer ---- */

/* Simulate c with `layers` layers in a child (sim_child.h). The child gets
 * the configuration from the knob table, and the platform, calibration,
 * data parallelism and SimGrid settings the user gave. */
static int run_layers(const sim_args *a, const cli_config *cc, const config *c, int layers, sim_child_result *res,
                      char err[LOONG_ERRLEN])
{
    const sim_child_spec sp = {a->platform, a->calib, cc->val[KNOB_MODEL], layers};
    int nw = whatif_argc(&a->w);
    const char **extra = xcalloc((size_t)(a->nsg + 1 + nw), sizeof *extra, "a child's options");
    char mode[32], fold[24], **wv = xcalloc((size_t)nw, sizeof *wv, "a child's options");
    sim_fold_text(a->fold, fold, sizeof fold); /* the parent's: the children differ only in layers and micro-batches */
    snprintf(mode, sizeof mode, "--fold=%s", fold);
    for (int i = 0; i < a->nsg; i++)
        extra[i] = a->sg_args[i];
    extra[a->nsg] = mode;
    nw = whatif_argv(&a->w, wv);
    for (int i = 0; i < nw; i++)
        extra[a->nsg + 1 + i] = wv[i];
    char **v = sim_child_argv(c, &sp, extra, a->nsg + 1 + nw), what[48];
    snprintf(what, sizeof what, "the %d-layer step", layers);
    int rc = sim_child_run(v, what, res, err);
    sim_child_argv_free(v);
    for (int i = 0; i < nw; i++)
        free(wv[i]);
    free(wv);
    free(extra);
    return rc;
}

/* The step of k layers, simulated once (runs[k].step < 0: not yet). */
typedef struct layer_runs {
    const sim_args *a;
    const cli_config *cc;
    const config *c;
    sim_child_result *r; /* [L + 1] */
    double started;      /* cli_now() when the composition began */
    double said;         /* cli_now() of the last progress line */
    char why[200];       /* why no period was found ("" while none is) */
} layer_runs;

/* Layers simulated so far (runs up to `upto` layers). */
static int layers_spent(const layer_runs *lr, int upto)
{
    int n = 0;
    for (int i = 1; i <= upto; i++)
        n += lr->r[i].step >= 0 ? i : 0;
    return n;
}

/* A line on stderr after a child, once the composition has run 5 s and
 * every 5 s from then (a quick one prints none; --quiet none at all). */
static void compose_progress(layer_runs *lr, int k)
{
    double now = cli_now();
    if (lr->a->quiet || now - lr->started < 5 || now - lr->said < 5) return;
    lr->said = now;
    int L = lr->c->model.layers, m = lr->c->micro_batches;
    char mbs[48] = "";
    if (m > 1) snprintf(mbs, sizeof mbs, " of %d micro-batches", m);
    fprintf(stderr,
            "loong sim --compose: the %d-layer step%s simulated (%.6f s); %d of the step's %d layers simulated so "
            "far, %.0f s elapsed\n",
            k, mbs, lr->r[k].step, layers_spent(lr, L), L, now - lr->started);
}

static const sim_child_result *at_layers(layer_runs *lr, int k, char err[LOONG_ERRLEN])
{
    if (lr->r[k].step >= 0) return &lr->r[k];
    if (run_layers(lr->a, lr->cc, lr->c, k, &lr->r[k], err) < 0) return NULL;
    compose_progress(lr, k);
    return &lr->r[k];
}

/* Increments that agree to COMPOSE_TOL count as equal: under ZeRO 0, 2 and
 * 3 the data-parallel collectives share links with the ring, and the two
 * drift against each other, so one layer's increment wanders by ~2e-4 of
 * itself (llama3-70b, 512K, 1x256 zigzag, ZeRO-3: 0.215043 to 0.215092 s)
 * without settling; composing with their mean then lands within about that
 * of the full simulation (tests/check_plan_sim.c). */
#define COMPOSE_TOL 1e-3

static bool same(double x, double y) { return fabs(x - y) <= COMPOSE_TOL * fmax(fabs(x), fabs(y)) + 1e-12; }

#define COMPOSE_MAX_K 16

/* The blocks one step of the composition adds: 1, or the period of a
 * mixture whose expert blocks alternate with dense ones (moe_layer_freq). */
static int period_blocks(const config *c) { return model_moe_interleaved(&c->model) ? c->model.moe_freq : 1; }

/* The layer count k from which one more layer adds a constant: three equal
 * increments ending at k, confirmed by the prediction of k + 3 layers.
 * Under ZeRO-1 k = 2 by construction (sim_child.h). A model whose first d
 * blocks are dense before its experts (first_k_dense_replace) composes
 * over the expert blocks: every count then keeps the d dense ones, and k
 * is d + 2, or from d + 4 on. With experts every N-th block past them
 * (moe_layer_freq, ZeRO-1 only) one period of N blocks adds a constant:
 * k = d + 2N + r, where r = (L - d) % N blocks close the step as they
 * close each run (a block's kind follows its index). The search never
 * simulates more layers in all than the full step has. 0 when no period
 * is found within that, below COMPOSE_MAX_K past the dense blocks; -1 on
 * a failed child. */
static int find_period(layer_runs *lr, int L, char err[LOONG_ERRLEN])
{
    const model *md = &lr->c->model;
    int d = md->experts > 0 ? md->dense_layers : 0, N = period_blocks(lr->c), r = (L - d) % N;
    if (lr->c->zero == 1) {
        if (d + 2 * N + r >= L) /* composing would simulate more layers than the step has */
            return snprintf(lr->why, sizeof lr->why, "%d dense and %d expert blocks are too few", d, L - d), 0;
        return at_layers(lr, d + N + r, err) && at_layers(lr, d + 2 * N + r, err) ? d + 2 * N + r : -1;
    }
    snprintf(lr->why, sizeof lr->why,
             "a period is looked for from 4 layers on, confirmed 3 layers further: %d layers "
             "are too few",
             L - d);
    for (int k = d + 4; k <= d + COMPOSE_MAX_K && k + 3 < L; k++) {
        if (layers_spent(lr, L) + k + (k + 3) > L) {
            snprintf(lr->why, sizeof lr->why,
                     "the increments had not settled by %d layers, and looking further would simulate more layers "
                     "than the step's %d",
                     k - 1, L);
            return 0;
        }
        double t[4];
        for (int i = 0; i < 4; i++) {
            const sim_child_result *r = at_layers(lr, k - 3 + i, err);
            if (!r) return -1;
            t[i] = r->step;
        }
        double d = (t[3] - t[0]) / 3;
        snprintf(lr->why, sizeof lr->why,
                 "one layer's increments up to %d layers (last %.6f, %.6f, %.6f s) never agreed to 0.1 %% over 3 "
                 "layers",
                 k, t[1] - t[0], t[2] - t[1], t[3] - t[2]);
        if (!same(t[1] - t[0], d) || !same(t[2] - t[1], d) || !same(t[3] - t[2], d)) continue;
        const sim_child_result *v = at_layers(lr, k + 3, err);
        if (!v) return -1;
        if (same(v->step - t[3], 3 * d)) return lr->why[0] = '\0', k;
        snprintf(lr->why, sizeof lr->why,
                 "the increments agreed at %d layers (%.6f s) but %d layers did not confirm them (%.6f s)", k, d, k + 3,
                 (v->step - t[3]) / 3);
    }
    return 0;
}

/* Layers over which the composition averages one layer's increment: one
 * period under ZeRO-1 (exact), the three equal ones of the period search. */
static int period_span(const config *c) { return c->zero == 1 ? period_blocks(c) : 3; }

/* One step composed over its layers (at a given micro-batch count): the
 * step, its exposed communication, the layer k of its period (0: every
 * layer simulated), the k-layer step, and why no period was found. */
typedef struct layer_step {
    double step, exposed, tk;
    int k;
    char why[200];
} layer_step;

/* The step of c (any micro-batch count, one stage) from simulations of its
 * first layers (find_period), or of all of them when no period is found.
 * Returns 0, or -1 with a message from a failed child. */
static int compose_layers(const sim_args *a, const cli_config *cc, const config *c, layer_step *ls,
                          char err[LOONG_ERRLEN])
{
    int L = c->model.layers;
    layer_runs lr = {a, cc, c, xcalloc((size_t)L + 1, sizeof *lr.r, "the layer runs"), cli_now(), 0, ""};
    for (int i = 0; i <= L; i++)
        lr.r[i].step = -1;
    /* stages, or blocks that re-run different ones: nothing to compose over the layers, all simulated */
    const char *differ =
        c->pp > 1 ? "the pipeline's stages hold different layers"
        : model_moe_interleaved(&c->model) && c->zero != 1
            ? "the expert blocks alternate with dense ones (moe_layer_freq): composed under ZeRO-1 only"
        : recompute_layers_alike(c) ? NULL
                                    : "full recompute's uniform groups of N > 1 or block method on "
                                      "part of the layers re-run different blocks";
    int k = differ ? 0 : find_period(&lr, L, err), rc = 0;
    if (differ) snprintf(lr.why, sizeof lr.why, "%s", differ);
    if (k == 0 && !differ && !a->quiet && cli_now() - lr.started >= 5)
        fprintf(stderr, "loong sim --compose: no period found (%s): simulating all %d layers\n", lr.why, L);
    const sim_child_result *full = k == 0 ? at_layers(&lr, L, err) : NULL;
    *ls = (layer_step){.k = k};
    snprintf(ls->why, sizeof ls->why, "%s", lr.why);
    if (k < 0 || (k == 0 && !full)) {
        rc = -1;
    } else if (k == 0) {
        ls->step = full->step, ls->exposed = full->exposed;
    } else {
        int j = period_span(c);
        const sim_child_result *p = &lr.r[k - j], *q = &lr.r[k];
        ls->step = q->step + (L - k) * (q->step - p->step) / j;
        ls->exposed = q->exposed + (L - k) * (q->exposed - p->exposed) / j;
        ls->tk = q->step;
    }
    free(lr.r);
    return rc;
}

/* ---- micro-batches: past the pipeline's fill, each adds a constant ----
 * Without a pipeline the m micro-batches of a replica run back to back and
 * alike: only the first (nothing in flight before it) and the last (the
 * gradient collectives after it) differ. With one, once the schedule has
 * filled (pp micro-batches; the interleaved one runs groups of pp), each
 * further micro-batch (group) adds one steady-state period. So, once one
 * adds a constant, T(m) = T(k) + (m - k) d / stride. The search simulates
 * the points of the lattice (pipe_mb_lattice: 1, 2, 3, ... without a
 * pipeline, each composed over the layers; pp, pp + 1, ... with one) until
 * two increments in a row agree (COMPOSE_TOL), checks that two points on
 * add 2d, and never simulates more micro-batches in all than the step has. */

/* The composed steps at 1 .. m micro-batches (done[m]: simulated). */
typedef struct mb_runs {
    const sim_args *a;
    const cli_config *cc;
    const config *c;
    layer_step *r; /* [m + 1] */
    bool *done;    /* [m + 1] */
    char why[200]; /* why no period was found ("" once one is) */
} mb_runs;

static int mbs_spent(const mb_runs *mr)
{
    int n = 0;
    for (int i = 1; i <= mr->c->micro_batches; i++)
        n += mr->done[i] ? i : 0;
    return n;
}

static const layer_step *at_mbs(mb_runs *mr, int m, char err[LOONG_ERRLEN])
{
    if (mr->done[m]) return &mr->r[m];
    config cm = *mr->c;
    cm.micro_batches = m;
    if (compose_layers(mr->a, mr->cc, &cm, &mr->r[m], err) < 0) return NULL;
    mr->done[m] = true;
    return &mr->r[m];
}

/* The micro-batch count k from which one more (group) adds a constant, or
 * 0 when none is found without simulating more micro-batches than the step
 * has; -1 on a failed child. *stride gets the lattice's step. */
static int find_mb_period(mb_runs *mr, int *stride, char err[LOONG_ERRLEN])
{
    int m = mr->c->micro_batches, f, s;
    pipe_mb_lattice(mr->c, &f, &s);
    *stride = s;
    snprintf(mr->why, sizeof mr->why,
             "%d micro-batches are too few to look for a period (%d, %d and %d, checked at %d)", m, f, f + s, f + 2 * s,
             f + 4 * s);
    for (int k = f + 2 * s; k + 2 * s < m; k += s) {
        int need = 0;
        for (int i = k - 2 * s; i <= k + 2 * s; i += s)
            need += i != k + s && !mr->done[i] ? i : 0;
        if (mbs_spent(mr) + need > m) {
            if (mbs_spent(mr) == 0)
                snprintf(mr->why, sizeof mr->why,
                         "the search (%d, %d and %d micro-batches, checked at %d) would simulate more than the step's "
                         "%d",
                         f, f + s, f + 2 * s, f + 4 * s, m);
            else
                snprintf(mr->why, sizeof mr->why,
                         "the increments had not settled by %d micro-batches, and looking further would simulate "
                         "more than the step's %d",
                         k - s, m);
            return 0;
        }
        double t[3];
        for (int i = 0; i < 3; i++) {
            const layer_step *r = at_mbs(mr, k - (2 - i) * s, err);
            if (!r) return -1;
            t[i] = r->step;
        }
        double d = t[2] - t[1];
        snprintf(mr->why, sizeof mr->why,
                 "the increments up to %d micro-batches (%.6f, %.6f s) did not agree to 0.1 %%", k, t[1] - t[0], d);
        if (!same(t[1] - t[0], d)) continue;
        const layer_step *v = at_mbs(mr, k + 2 * s, err);
        if (!v) return -1;
        if (same(v->step - t[2], 2 * d)) return mr->why[0] = '\0', k;
        snprintf(mr->why, sizeof mr->why,
                 "the increments agreed at %d micro-batches (%.6f s) but %d did not confirm them (%.6f s)", k, d,
                 k + 2 * s, (v->step - t[2]) / 2);
    }
    return 0;
}

/* What the composition did, for its outputs. */
typedef struct composition {
    layer_step ls;    /* over the layers, at km micro-batches (or at the step's, km 0) */
    int km;           /* the micro-batch period's k, or 0: the step's m simulated (composed over its layers) */
    int stride;       /* the micro-batches one increment adds (pipe_mb_lattice) */
    double tkm;       /* the km-micro-batch step */
    char mb_why[200]; /* km 0 with m > 1: why no micro-batch period was found */
    double step, exposed;
} composition;

static void write_compose_table(FILE *f, const sim_args *a, const config *c, const mem_check *mc, const composition *cp,
                                const char *calib)
{
    char desc[256], err[LOONG_ERRLEN];
    config_describe(c, desc, sizeof desc);
    double tokens = config_step_tokens(c) * c->dp; /* every replica's, on all their GPUs */
    int P = config_world(c), k = cp->ls.k, L = c->model.layers;
    fprintf(f, "# loong sim --compose: %s\n", desc);
    whatif_write_header(f, &a->w);
    simout_memory_line(f, c, mc);
    if (calib) fprintf(f, "# calibration table: %s\n", calib);
    simout_fold_lines(f, a, c);
    fprintf(f, "# platform %s; ", a->platform);
    int j = period_span(c);      /* the increments averaged */
    char mbs[48] = "", over[16]; /* the layers composed at the micro-batch period's count; the span */
    snprintf(over, sizeof over, " / %d", j);
    if (cp->km > 0) snprintf(mbs, sizeof mbs, " at %d micro-batches", cp->km);
    if (k > 0)
        fprintf(f,
                "composed from simulations of %d and %d layers (%.6f s%s), one %s adding a constant from there%s:\n"
                "#   T(L) = T(%d) + (L - %d) (T(%d) - T(%d))%s with L = %d\n",
                k - j, k, cp->ls.tk, mbs, period_blocks(c) > 1 ? "period of dense and expert blocks" : "layer",
                c->zero == 1 ? " (ZeRO-1: by construction)" : " (3 increments equal to 0.1 %, checked 3 layers on)", k,
                k, k, k - j, j > 1 ? over : "", L);
    else
        fprintf(f, "no period found (%s): all %d layers simulated\n", cp->ls.why, L);
    if (cp->km > 0) {
        int s = cp->stride;
        char per[16] = "";
        if (s > 1) snprintf(per, sizeof per, " / %d", s);
        fprintf(
            f,
            "# micro-batches: composed from steps of %d and %d (%.6f s), %d more adding a constant from there (2 "
            "increments equal to 0.1 %%, checked 2 on):\n#   T(m) = T(%d) + (m - %d)%s (T(%d) - T(%d)) with m = %d%s\n",
            cp->km - s, cp->km, cp->tkm, s, cp->km, cp->km, per, cp->km, cp->km - s, c->micro_batches,
            k > 0 ? ", each T composed over the layers as above" : "");
    } else if (c->micro_batches > 1)
        fprintf(f, "# micro-batches: no period found (%s): all %d simulated\n", cp->mb_why, c->micro_batches);
    fprintf(f, "# step time: %.6f s (training step, step)\n", cp->step);
    fprintf(f, "# throughput: %.1f tokens/s/GPU (%.0f tokens per training step on %d GPUs)\n", tokens / (cp->step * P),
            tokens, P);
    platform_spec sp; /* the GPU peak, from the platform's spec, without loading SimGrid here */
    if (platform_spec_read(a->platform, &sp, err) == 0)
        fprintf(f, "# MFU: %.2f %% (model FLOPs %.4g TFLOP / (step time x %d GPUs x peak %.1f TFLOP/s))\n",
                100 * stats_mfu(c, cp->step, sp.peak), (double)stats_model_flops(c) * c->dp / 1e12, P, sp.peak / 1e12);
    fprintf(f, "# exposed communication, mean per rank: %.6f s (composed the same way)\n", cp->exposed);
}

static int write_compose(const sim_args *a, const config *c, sim_outputs *o, const composition *cp)
{
    char err[LOONG_ERRLEN] = "";
    int rc = 0;
    platform_spec ps; /* the GPU kind, without loading SimGrid here */
    mem_check mc;
    bool spec = platform_spec_read(a->platform, &ps, err) == 0;
    simout_memory_check(a, c, spec ? ps.gpu : "unknown", &mc);
    /* the table the simulations read (they succeeded), named as loong sim names it */
    calib *cb = spec ? calib_for_platform(a->platform, ps.gpu, a->calib, err) : NULL;
    err[0] = '\0';
    if (o->table) write_compose_table(o->sm.f, a, c, &mc, cp, cb ? calib_path(cb) : NULL);
    if (a->json) {
        platform_spec sp; /* the GPU peak, as the table's MFU line takes it */
        double peak = platform_spec_read(a->platform, &sp, err) == 0 ? sp.peak : 0, tokens = config_step_tokens(c);
        int k = cp->ls.k;
        json_t *j = json_pack("{s:o, s:f, s:f, s:f, s:f, s:o, s:b, s:i, s:i}", "config", config_to_json(c), "step_s",
                              cp->step, "tokens_per_s_per_gpu", tokens / (cp->step * config_ranks(c)), "mfu_pct",
                              peak > 0 ? 100 * stats_mfu(c, cp->step, peak) : 0, "exposed_mean_s", cp->exposed,
                              "memory_bytes", simout_json_memory(c), "composed", k > 0 || cp->km > 0,
                              "period_from_layers", k, "period_from_micro_batches", cp->km);
        if (j && whatif_any(&a->w)) json_object_set_new(j, "whatif", whatif_to_json(&a->w));
        if (j && k == 0) json_object_set_new(j, "no_period_why", json_string(cp->ls.why));
        if (j && cp->km == 0 && c->micro_batches > 1)
            json_object_set_new(j, "no_micro_batch_period_why", json_string(cp->mb_why));
        if (j) json_object_set_new(j, "calib", cb && calib_path(cb) ? json_string(calib_path(cb)) : json_null());
        if (j) simout_json_fold(j, a->fold);
        if (j) simout_json_memory_verdict(j, c, &mc);
        if (!j || json_dumpf(j, o->js.f, JSON_COMPACT | JSON_REAL_PRECISION(17)) != 0)
            rc = -1, snprintf(err, LOONG_ERRLEN, "write error on '%s'", a->json);
        json_decref(j);
    }
    calib_free(cb);
    if (rc == 0 && o->table) rc = afile_commit(&o->sm, err);
    if (rc == 0 && a->json) rc = afile_commit(&o->js, err);
    if (rc < 0) {
        simout_abort(o);
        return cli_fail("sim", "%s", err);
    }
    simout_warn_oom(c, &mc);
    return 0;
}

/* The step over its micro-batches: by their period (find_mb_period), each
 * point composed over the layers, or the step's m composed over its layers
 * alone. Returns 0, or -1 with a message. */
static int compose_step(const sim_args *a, const cli_config *cc, const config *c, composition *cp,
                        char err[LOONG_ERRLEN])
{
    int m = c->micro_batches;
    mb_runs mr = {a,
                  cc,
                  c,
                  xcalloc((size_t)m + 1, sizeof *mr.r, "the micro-batch runs"),
                  xcalloc((size_t)m + 1, sizeof *mr.done, "the micro-batch runs"),
                  ""};
    int stride = 1, km = m > 1 ? find_mb_period(&mr, &stride, err) : 0, rc = 0;
    *cp = (composition){.km = km > 0 ? km : 0, .stride = stride};
    snprintf(cp->mb_why, sizeof cp->mb_why, "%s", mr.why);
    if (km < 0) {
        rc = -1;
    } else if (km > 0) {
        const layer_step *p = &mr.r[km - stride], *q = &mr.r[km];
        double n = (double)(m - km) / stride; /* increments from km to m */
        cp->ls = *q;
        cp->tkm = q->step;
        cp->step = q->step + n * (q->step - p->step);
        cp->exposed = q->exposed + n * (q->exposed - p->exposed);
    } else {
        if (m > 1 && !a->quiet && mbs_spent(&mr) > 0)
            fprintf(stderr, "loong sim --compose: no micro-batch period found (%s): simulating all %d\n", mr.why, m);
        rc = compose_layers(a, cc, c, &cp->ls, err);
        cp->step = cp->ls.step, cp->exposed = cp->ls.exposed;
    }
    free(mr.r);
    free(mr.done);
    return rc;
}

int sim_compose(const sim_args *a, const cli_config *cc, const config *c)
{
    char err[LOONG_ERRLEN] = "";
    int L = c->model.layers;
    if (c->scope != SCOPE_STEP || L < 3 || a->trace)
        return cli_fail("sim", "--compose needs --scope step, a model of 3 or more layers and no --trace (a composed "
                               "run has no full trace)");
    if (c->micro_batches == 1 && !recompute_layers_alike(c))
        return cli_fail("sim", "--compose learns a step from identical layers or micro-batches, and full recompute's "
                               "uniform groups of N > 1 or block method on part of the layers differ: drop --compose, "
                               "or give --micro-batches M > 1 (they compose)");
    if (c->micro_batches == 1 && model_moe_interleaved(&c->model) && c->zero != 1)
        return cli_fail("sim", "--compose learns a step from identical layers or micro-batches, and this model's "
                               "expert blocks alternate with dense ones (moe_layer_freq), which compose under "
                               "--zero 1 only: drop --compose, give --zero 1, or --micro-batches M > 1 (they compose)");
    sim_outputs out;
    if (simout_open(a, &out, err) < 0) return cli_fail("sim", "%s", err);
    composition cp;
    if (compose_step(a, cc, c, &cp, err) < 0) {
        simout_abort(&out);
        return cli_fail("sim", "%s", err);
    }
    return write_compose(a, c, &out, &cp);
}

/* plan_search: draws, picks, simulations through a runner, --robust. See plan_search.h. */
#include "plan_search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/docs.h"
#include "core/pipeline.h"
#include "core/recompute.h"
#include "core/stats.h"
#include "core/xalloc.h"

int plan_search_block(int n, int r, int size) { return (int)((long long)n * r / size); }

/* ---- composition ---- */

/* The dense blocks before a mixture of experts' expert blocks
 * (first_k_dense_replace): loong sim --compose composes over the others. */
static int dense_blocks(const config *c) { return c->model.experts > 0 ? c->model.dense_layers : 0; }

/* Whether the expert blocks interleave with dense ones (moe_layer_freq):
 * loong sim --compose then composes periods of moe_freq blocks, under
 * ZeRO-1 only. */
static bool interleaved(const config *c) { return model_moe_interleaved(&c->model); }

/* Whether c's step composes exactly from 1- and 2-layer runs: scope step,
 * ZeRO-1, L >= 3, one stage, one micro-batch, identical layers. Under ZeRO
 * 0, 2 and 3 the per-layer gradient collectives overlap a number of layers
 * that depends on L, so this two-run composition is not exact there. */
static bool compose_exact(const config *c)
{
    return c->scope == SCOPE_STEP && c->zero == 1 && c->model.layers >= 3 && c->pp == 1 && c->micro_batches == 1 &&
           recompute_layers_alike(c) && dense_blocks(c) == 0 && !interleaved(c);
}

/* T(L) from T(1) = one and T(2) = two. */
static double compose_layers(double one, double two, int layers) { return one + (layers - 1) * (two - one); }

plan_compose plan_compose_mode(const config *c, bool full_layers)
{
    if (full_layers || c->scope != SCOPE_STEP || c->model.layers < 3) return PLAN_EVERY_LAYER;
    /* stages: every layer, and the micro-batches composed where their search costs less than the step's */
    if (c->pp > 1) return c->micro_batches > pipe_mb_search_cost(c) ? PLAN_PERIOD : PLAN_EVERY_LAYER;
    if (compose_exact(c)) return PLAN_TWO_LAYERS;
    /* blocks that re-run different ones (full's groups), or alternate dense
     * and expert MLPs beside per-layer gradient collectives: only
     * micro-batches compose */
    bool layers = recompute_layers_alike(c) && (!interleaved(c) || c->zero == 1);
    return layers || c->micro_batches > 1 ? PLAN_PERIOD : PLAN_EVERY_LAYER;
}

/* The layers run k of a layout simulates: 1 or 2 (composed); under
 * loong sim --compose, at ZeRO-1 the d dense blocks and 1, then 2 expert
 * or other blocks (2 d + 3 in all; with experts every N-th block, 1 then 2
 * periods and the r = (L - d) % N blocks left, 2 d + 3 N + 2 r), else at
 * most all L (its period search simulates at most L layers in all, and
 * when it finds no period, one run of L); else all L. */
static int run_layers(plan_compose m, int k, const config *c)
{
    if (m == PLAN_TWO_LAYERS) return 1 + k;
    int d = dense_blocks(c), L = c->model.layers, N = interleaved(c) ? c->model.moe_freq : 1, r = (L - d) % N;
    bool layers = m == PLAN_PERIOD && c->pp == 1 && c->zero == 1 && recompute_layers_alike(c);
    return layers && 2 * d + 3 * N + 2 * r < L ? 2 * d + 3 * N + 2 * r : L;
}

/* The micro-batch counts a layout's run simulates, one child each: under
 * loong sim --compose with more micro-batches than their search costs,
 * the search's points when it finds the period at once (pipe_mb_lattice:
 * first, + s, + 2 s, checked at + 4 s); else the step's m (a search that
 * finds none then simulates them all, which --sim-timeout bounds).
 * Returns how many, into pts. */
static int run_micro_batches(plan_compose m, const config *c, int pts[4])
{
    if (m != PLAN_PERIOD || c->micro_batches <= pipe_mb_search_cost(c)) return pts[0] = c->micro_batches, 1;
    int f, s;
    pipe_mb_lattice(c, &f, &s);
    pts[0] = f, pts[1] = f + s, pts[2] = f + 2 * s, pts[3] = f + 4 * s;
    return 4;
}

/* The replicas are simulated in full when smaller than a node (the CLI's
 * runner folds them by symmetry otherwise). */
static bool full_replicas(const config *c) { return c->dp > 1 && config_ranks(c) % c->gpus_per_node != 0; }

mesh_dims plan_foldable(const platform_spec *sp)
{
    if (!sp->nccl || sp->sockets > 1 || platform_spec_rails_shared(sp)) return 0;
    return DAG_FOLDABLE;
}

mesh_dims plan_fold(const config *c, mesh_dims foldable, bool perturbed)
{
    mesh_dims f = 0;
    if (c->dp > 1 && !full_replicas(c)) f |= MESH_BIT(MESH_DP);
    if (c->pp < 2 || perturbed) return f;
    if (c->tp > 1 && !c->tp_overlap && config_tp_nodes(c) == 1 && !config_ep_breaks_tp_fold(c) &&
        (foldable & MESH_BIT(MESH_TP)))
        f |= MESH_BIT(MESH_TP);
    if (c->p_head > 1 && !(config_moe(c) && c->ep > 1) && (foldable & MESH_BIT(MESH_HEAD))) f |= MESH_BIT(MESH_HEAD);
    if ((foldable & MESH_BIT(MESH_SEQ)) && !config_ring_asymmetry(c)) f |= MESH_BIT(MESH_SEQ);
    return f;
}

/* ---- running simulations ---- */

typedef struct run {
    plan_sim sim;
    bool running;
    double started;       /* runner now() at its start */
    double tasks, units;  /* its share of its layout's plan_layout.sim_tasks and sim_units, for the ETA */
    double step, exposed; /* results, NAN until done; RUN_TIMED_OUT or RUN_FAILED */
    char why[LOONG_ERRLEN];
} run;

/* A run's step when it produced none (negative, to survive the max over processes). */
#define RUN_TIMED_OUT (-1.0)
#define RUN_FAILED    (-2.0)

/* Seconds left for runs[i] (i = first, first + stride, ...) not done yet,
 * from their estimated work units at the rate of those done so far, or at
 * PLAN_SIM_UNITS_PER_S a job before any is done. */
static double sim_eta(const plan_runner *r, const run *runs, int n, int first, int stride, int jobs, double elapsed)
{
    double done = 0, left = 0, now = r->now(r->user);
    for (int i = first; i < n; i += stride)
        if (!isnan(runs[i].step)) done += runs[i].units;
    double rate = done > 0 && elapsed > 1 ? done / elapsed : PLAN_SIM_UNITS_PER_S * jobs;
    for (int i = first; i < n; i += stride) /* a running one has done its time at a job's share of the rate */
        if (isnan(runs[i].step))
            left += fmax(0, runs[i].units - (runs[i].running ? (now - runs[i].started) * rate / jobs : 0));
    return left / rate;
}

/* Stop every running simulation past the time limit (its run: RUN_TIMED_OUT). */
static void stop_overdue(const plan_runner *r, double limit, run *runs, int n, int first, int stride)
{
    double now = r->now(r->user);
    for (int i = first; limit > 0 && i < n; i += stride)
        if (runs[i].running && isnan(runs[i].step) && now - runs[i].started > limit) {
            r->stop(r->user, i);
            runs[i].step = RUN_TIMED_OUT;
            snprintf(runs[i].why, sizeof runs[i].why, "stopped at --sim-timeout %g s", limit);
        }
}

/* Run runs[i] for i = first, first + stride, ... at most `jobs` at once,
 * each stopped at the time limit. A run that fails or is stopped keeps its
 * reason (run.why); only one that cannot be started is an error. */
static int run_all(const plan_search_opts *o, const plan_runner *r, run *runs, int n, int first, int stride, int jobs,
                   char err[LOONG_ERRLEN])
{
    int next = first, running = 0, done = 0, mine = n > first ? (n - first + stride - 1) / stride : 0, rc = 0;
    double t0 = r->now(r->user), eta = sim_eta(r, runs, n, first, stride, jobs, 0), tasks = 0;
    for (int i = first; i < n; i += stride)
        tasks += runs[i].tasks;
    if (mine > 0) r->begin(r->user, mine, tasks, eta, jobs);
    while (done < mine) {
        while (rc == 0 && running < jobs && next < n) {
            if (r->start(r->user, next, &runs[next].sim, err) < 0) {
                rc = -1;
                break;
            }
            runs[next].started = r->now(r->user);
            runs[next].running = true;
            running++;
            next += stride;
        }
        if (running == 0) break;
        int id, res;
        double step, exposed;
        char why[LOONG_ERRLEN];
        int w = r->wait(r->user, &id, &res, &step, &exposed, why);
        if (w == 0) { /* none done yet: a progress line is due every few seconds, even so */
            stop_overdue(r, o->sim_timeout, runs, n, first, stride);
            r->progress(r->user, "simulating", done, mine,
                        sim_eta(r, runs, n, first, stride, jobs, r->now(r->user) - t0));
            continue;
        }
        if (w < 0) break;
        run *u = &runs[id];
        u->running = false;
        if (u->step != RUN_TIMED_OUT && res < 0) {
            u->step = RUN_FAILED;
            snprintf(u->why, sizeof u->why, "%s", why);
        } else if (u->step != RUN_TIMED_OUT) {
            u->step = step;
            u->exposed = exposed;
        }
        running--;
        done++;
        r->progress(r->user, "simulating", done, mine, sim_eta(r, runs, n, first, stride, jobs, r->now(r->user) - t0));
    }
    return rc;
}

/* ---- which runs: the top K (or all), plus the two baselines ---- */

static int pick_layouts(const plan_search_opts *o, int user, plan_layout *ls, int n, int *pick)
{
    int *idx = xmalloc_array((size_t)n, sizeof *idx, "the plan's ranking");
    int m = plan_rank(ls, n, idx), k = o->exact ? m : (o->top < m ? o->top : m), np = 0;
    for (int i = 0; i < k; i++)
        pick[np++] = idx[i];
    /* the baselines, and --layout's: compared simulation to simulation */
    int mine = user >= 0 && !ls[user].removed ? user : -1;
    int base[3] = {plan_best_ring(ls, n), plan_best_ulysses(ls, n), mine};
    for (int b = 0; b < 3 && k > 0; b++) {
        bool have = base[b] < 0;
        for (int i = 0; i < np; i++)
            have |= pick[i] == base[b];
        if (!have) pick[np++] = base[b];
    }
    free(idx);
    return np;
}

/* Simulates layouts pick[0..np) of this draw into step[] and exposed[],
 * covering the layers as each layout's plan_compose_mode says; ORs the
 * modes used into *used. A layout whose run failed or was stopped gets step
 * RUN_FAILED or RUN_TIMED_OUT and why[i] (a generic one when another
 * process ran it). Returns the simulations run, or -1 when one could not
 * be started or every layout's simulation failed (a bad request, such as a
 * --slow-link the platform lacks: the first run's error in err). */
static int simulate(const plan_request *req, const plan_search_opts *o, const plan_runner *r, const plan_layout *ls,
                    const int *pick, int np, unsigned *used, const whatif *ws, double *step, double *exposed,
                    char (*why)[160], char err[LOONG_ERRLEN])
{
    int L = req->base.model.layers, nr = 0;
    int *first = xcalloc((size_t)np + 1, sizeof *first, "the plan's simulations"); /* [np + 1] runs of pick i */
    for (int i = 0; i < np; i++) {
        plan_compose m = plan_compose_mode(&ls[pick[i]].c, o->full_layers);
        *used |= m;
        first[i] = nr;
        nr += m == PLAN_TWO_LAYERS ? 2 : 1;
    }
    first[np] = nr;
    run *runs = xcalloc((size_t)nr, sizeof *runs, "the plan's simulations");
    for (int i = 0; i < np; i++) {
        const config *c = &ls[pick[i]].c;
        plan_compose m = plan_compose_mode(c, o->full_layers);
        for (int k = first[i]; k < first[i + 1]; k++)
            runs[k] = (run){.sim = {.l = &ls[pick[i]],
                                    .layers = m == PLAN_TWO_LAYERS ? 1 + k - first[i] : 0,
                                    .compose = m == PLAN_PERIOD,
                                    .w = ws ? &ws[i] : o->w},
                            .tasks = ls[pick[i]].sim_tasks / (first[i + 1] - first[i]),
                            .units = ls[pick[i]].sim_units / (first[i + 1] - first[i]),
                            .step = NAN,
                            .exposed = NAN};
    }
    int jobs = o->jobs / r->size > 0 ? o->jobs / r->size : 1;
    int rc = run_all(o, r, runs, nr, r->rank, r->size, jobs, err);
    double failed_any = rc < 0 ? 1 : 0;
    r->max(r->user, &failed_any, 1);
    rc = (int)failed_any ? -1 : 0;
    if (rc < 0 && !err[0]) snprintf(err, LOONG_ERRLEN, "a simulation could not be started on another MPI rank");
    double *v = xmalloc_array((size_t)(2 * nr + 1), sizeof *v, "the plan's simulations");
    for (int i = 0; i < nr; i++) {
        v[2 * i] = runs[i].step;
        v[2 * i + 1] = runs[i].exposed;
    }
    /* every process simulated some runs (the others are NAN): combine them */
    if (r->size > 1 && nr > 0) {
        for (int i = 0; i < 2 * nr; i++)
            if (isnan(v[i])) v[i] = -INFINITY;
        r->max(r->user, v, 2 * nr);
        for (int i = 0; i < 2 * nr; i++)
            if (v[i] == -INFINITY) v[i] = NAN;
    }
    int failed = 0;
    for (int i = 0; rc == 0 && i < np; i++) {
        double *x = &v[2 * first[i]];
        bool two = first[i + 1] - first[i] == 2;
        why[i][0] = '\0';
        for (int k = first[i]; k < first[i + 1]; k++)
            if (v[2 * k] < 0) { /* failed or stopped: the layout has no simulated step */
                step[i] = v[2 * k];
                snprintf(why[i], sizeof why[i], "%.159s",
                         runs[k].why[0] ? runs[k].why : "its simulation failed on another MPI rank");
            }
        if (why[i][0]) {
            failed += step[i] == RUN_FAILED;
            continue;
        }
        step[i] = two ? compose_layers(x[0], x[2], L) : x[0];
        exposed[i] = two ? compose_layers(x[1], x[3], L) : x[1];
    }
    if (rc == 0 && np > 0 && failed == np) { /* the same for every layout: the request's fault, not a layout's */
        rc = -1;
        for (int k = 0; k < nr && !err[0]; k++)
            if (runs[k].why[0]) snprintf(err, LOONG_ERRLEN, "%s", runs[k].why);
        if (!err[0]) snprintf(err, LOONG_ERRLEN, "every simulation failed (on other MPI ranks)");
    }
    free(v);
    free(runs);
    free(first);
    return rc < 0 ? -1 : nr;
}

/* ---- document packings: one layout, or --draws packings of --doc-dist ---- */

/* Give every layout draw d's documents (after a gather too: a layout
 * scored by another process arrives with that process's pointer). */
static int use_draw(plan_request *req, const plan_search_opts *o, plan_layout *ls, int n, int d, char err[LOONG_ERRLEN])
{
    if (o->doc_dist) {
        req->base.docs = docs_draw(o->doc_dist, req->base.seq, o->seed + (uint64_t)d, err);
        if (!req->base.docs) return -1;
    }
    for (int i = 0; i < n; i++)
        ls[i].c.docs = req->base.docs;
    return 0;
}

/* Running mean, fastest and slowest of a layout's step over the draws. */
static void add_draw(double *mean, double *lo, double *hi, double v, int d)
{
    *mean = d == 0 ? v : *mean + (v - *mean) / (d + 1);
    *lo = d == 0 || v < *lo ? v : *lo;
    *hi = d == 0 || v > *hi ? v : *hi;
}

/* Score every layout under every draw: an = the mean, step_lo/hi the range. */
static int score_draws(plan_request *req, const plan_search_opts *o, const plan_runner *r, plan_layout *ls, int n,
                       char err[LOONG_ERRLEN])
{
    analytic_result *mean = xcalloc((size_t)n, sizeof *mean, "the plan's draws");
    double *lo = xcalloc((size_t)n, sizeof *lo, "the plan's draws"),
           *hi = xcalloc((size_t)n, sizeof *hi, "the plan's draws");
    int rc = 0;
    for (int d = 0; rc == 0 && d < o->draws; d++) {
        if ((rc = use_draw(req, o, ls, n, d, err)) < 0) break;
        plan_score(ls, plan_search_block(n, r->rank, r->size), plan_search_block(n, r->rank + 1, r->size), req, o->cb,
                   o->spec);
        r->gather_layouts(r->user, ls, n);
        use_draw(req, o, ls, n, d, err);
        for (int i = 0; i < n; i++) {
            if (ls[i].removed) continue;
            analytic_result *m = &mean[i], *v = &ls[i].an;
            add_draw(&m->step, &lo[i], &hi[i], v->step, d);
            double *fm[] = {&m->busy, &m->exposed, &m->a2a, &m->ring_wait, &m->dp_tail, &m->tp, &m->bubble};
            const double fv[] = {v->busy, v->exposed, v->a2a, v->ring_wait, v->dp_tail, v->tp, v->bubble};
            for (int k = 0; k < 7; k++)
                *fm[k] = d == 0 ? fv[k] : *fm[k] + (fv[k] - *fm[k]) / (d + 1);
            m->worst_s = v->worst_s;
            double mf = (double)stats_model_flops(&ls[i].c);
            ls[i].model_flops = d == 0 ? mf : ls[i].model_flops + (mf - ls[i].model_flops) / (d + 1);
        }
        r->progress(r->user, "scoring draws", d + 1, o->draws > 1 ? o->draws : 0, -1);
    }
    for (int i = 0; rc == 0 && i < n; i++)
        if (!ls[i].removed) ls[i].an = mean[i], ls[i].step_lo = lo[i], ls[i].step_hi = hi[i];
    free(mean);
    free(lo);
    free(hi);
    return rc;
}

/* "X is not simulated (why); its analytical score stands" to the runner. */
static void note_unsimulated(const plan_runner *r, const plan_layout *l, const char *why)
{
    char line[LOONG_ERRLEN + 256];
    snprintf(line, sizeof line, "%s is not simulated (%s); its analytical score stands", l->name, why);
    r->note(r->user, line);
}

/* Keep in pick[0..np) the layouts a simulation can hold: its largest run
 * within this machine's memory over the simulations run at once, and
 * within the time limit at the estimated rate; mark the others
 * (plan_layout.unsimulated). Records each layout's estimated tasks in all
 * its runs and their work units (plan_layout.sim_tasks, sim_units: the
 * ETA). Returns how many are kept. */
static int simulable(const plan_search_opts *o, const plan_runner *r, plan_layout *ls, int *pick, int np)
{
    int k = 0, jobs = o->jobs < 1 ? 1 : o->jobs;
    double phys = xalloc_machine_bytes(), mem = phys / (r->size > jobs ? r->size : jobs);
    for (int i = 0; i < np; i++) {
        plan_layout *l = &ls[pick[i]];
        plan_compose m = plan_compose_mode(&l->c, o->full_layers);
        double tasks = 0, units = 0;
        l->sim_tasks = l->sim_units = 0;
        config c = l->c;
        int pts[4], np = run_micro_batches(m, &l->c, pts);
        mesh_dims folded = plan_fold(&l->c, o->foldable, o->w && whatif_any(o->w));
        for (int k2 = 0; k2 < (m == PLAN_TWO_LAYERS ? 2 : 1); k2++) {
            double run_units = 0; /* a run's children simulate one after the other; each holds its own DAG */
            for (int j = 0; j < np; j++) {
                c.micro_batches = pts[j];
                plan_sim_size z = plan_sim_estimate(&c, run_layers(m, k2, &l->c), full_replicas(&l->c), folded);
                tasks = fmax(tasks, z.tasks);
                run_units += z.units;
                l->sim_tasks += z.tasks;
                l->sim_units += z.units;
            }
            units = fmax(units, run_units);
        }
        double bytes = tasks * PLAN_SIM_BYTES_PER_TASK, secs = units / PLAN_SIM_UNITS_PER_S;
        if (mem > 0 && bytes > mem)
            snprintf(l->unsimulated, sizeof l->unsimulated,
                     "about %.3g tasks, ~%.0f GB: more than the %.0f GB a simulation has, this machine's %.0f GB over "
                     "%d at once",
                     tasks, bytes / 1e9, mem / 1e9, phys / 1e9, jobs);
        else if (o->sim_timeout > 0 && secs > o->sim_timeout)
            snprintf(l->unsimulated, sizeof l->unsimulated,
                     "about %.3g tasks, an estimated %.0f s: more than --sim-timeout %g s", tasks, secs,
                     o->sim_timeout);
        else
            pick[k++] = pick[i];
        if (l->unsimulated[0]) note_unsimulated(r, l, l->unsimulated);
    }
    return k;
}

/* Simulate the picks under every draw: sim_step is the mean, step_lo/hi the
 * range. Returns the simulations run, or -1. */
static int simulate_draws(plan_request *req, const plan_search_opts *o, const plan_runner *r, int user, plan_layout *ls,
                          int n, unsigned *mode, char err[LOONG_ERRLEN])
{
    int *pick = xmalloc_array((size_t)n + 3, sizeof *pick, "the plan's simulations");
    int np = simulable(o, r, ls, pick, pick_layouts(o, user, ls, n, pick)), runs = 0;
    char(*why)[160] = xcalloc((size_t)np + 1, sizeof *why, "the plan's simulations");
    double *step = xcalloc((size_t)np + 1, sizeof *step, "the plan's simulations");
    double *exposed = xcalloc((size_t)np + 1, sizeof *exposed, "the plan's simulations");
    double *mean = xcalloc((size_t)np + 1, sizeof *mean, "the plan's draws"),
           *lo = xcalloc((size_t)np + 1, sizeof *lo, "the plan's draws");
    double *hi = xcalloc((size_t)np + 1, sizeof *hi, "the plan's draws");
    double *mexp = xcalloc((size_t)np + 1, sizeof *mexp, "the plan's draws");
    for (int d = 0; runs >= 0 && d < o->draws; d++) {
        int k = use_draw(req, o, ls, n, d, err) < 0
                    ? -1
                    : simulate(req, o, r, ls, pick, np, mode, NULL, step, exposed, why, err);
        runs = k < 0 ? -1 : runs + k;
        for (int i = 0; k >= 0 && i < np; i++) {
            plan_layout *l = &ls[pick[i]];
            if (why[i][0] && !l->unsimulated[0]) {
                snprintf(l->unsimulated, sizeof l->unsimulated, "%s", why[i]);
                note_unsimulated(r, l, why[i]);
            }
            add_draw(&mean[i], &lo[i], &hi[i], step[i], d);
            mexp[i] = d == 0 ? exposed[i] : mexp[i] + (exposed[i] - mexp[i]) / (d + 1);
        }
    }
    for (int i = 0; runs >= 0 && i < np; i++) {
        plan_layout *l = &ls[pick[i]];
        if (l->unsimulated[0]) continue; /* a draw failed: the analytical score stands */
        l->sim_step = mean[i], l->sim_exposed = mexp[i], l->step_lo = lo[i], l->step_hi = hi[i];
    }
    free(pick), free(why), free(step), free(exposed), free(mean), free(lo), free(hi), free(mexp);
    return runs;
}

/* ---- --robust: the simulated layouts under the named perturbations ---- */

#define ROBUST_CANDIDATES 5

/* Candidate c (0..4) for layout l, added to w: stragglers on ranks 0 and
 * P - 1, NICs at half speed (node0-nic0, and the NIC of the last GPU of
 * the simulated ranks), jitter. Returns its kind; `what` names it. */
static plan_pert robust_candidate(const platform_spec *spec, const plan_layout *l, int c, whatif *w, char *what,
                                  size_t len)
{
    int P = config_ranks(&l->c);
    char arg[64], err[LOONG_ERRLEN];
    if (c < 2) {
        int r = c ? P - 1 : 0;
        snprintf(arg, sizeof arg, "%d:%.17g", r, WHATIF_STRAGGLER_DEFAULT);
        snprintf(what, len, "rank %d", r);
        whatif_add_straggler(w, arg, err);
        return PLAN_PERT_STRAGGLER;
    }
    if (c < 4) {
        placement pl = platform_spec_placement(spec);
        int last = c == 2 ? 0 : P - 1, node = placement_node(&pl, last), nic = placement_nic(&pl, last);
        snprintf(what, len, "node%d-nic%d", node, nic);
        snprintf(arg, sizeof arg, "%s:2", what);
        whatif_add_slow_link(w, arg, err);
        return PLAN_PERT_NIC;
    }
    w->jitter = PLAN_ROBUST_JITTER;
    snprintf(what, len, "seed %llu", (unsigned long long)w->seed);
    return PLAN_PERT_JITTER;
}

/* Simulate every simulated layout under each candidate; keep the worst of
 * each kind. Returns the simulations run, or -1. */
static int simulate_robust(const plan_request *req, const plan_search_opts *o, const plan_runner *r, plan_layout *ls,
                           int n, unsigned *mode, char err[LOONG_ERRLEN])
{
    int *pick = xmalloc_array((size_t)n + 1, sizeof *pick, "the robust runs"), np = 0, runs = 0;
    for (int i = 0; i < n; i++)
        if (ls[i].sim_step >= 0) pick[np++] = i;
    whatif *ws = xcalloc((size_t)np + 1, sizeof *ws, "the robust runs");
    char(*what)[WHATIF_NAME] = xcalloc((size_t)np + 1, sizeof *what, "the robust runs");
    double *step = xcalloc((size_t)np + 1, sizeof *step, "the robust runs");
    double *exposed = xcalloc((size_t)np + 1, sizeof *exposed, "the robust runs");
    char(*why)[160] = xcalloc((size_t)np + 1, sizeof *why, "the robust runs");
    for (int c = 0; runs >= 0 && c < ROBUST_CANDIDATES; c++) {
        plan_pert kind = PLAN_PERT_STRAGGLER;
        for (int i = 0; i < np; i++) {
            ws[i] = *o->w;
            kind = robust_candidate(o->spec, &ls[pick[i]], c, &ws[i], what[i], sizeof what[i]);
        }
        int k = simulate(req, o, r, ls, pick, np, mode, ws, step, exposed, why, err);
        runs = k < 0 ? -1 : runs + k;
        for (int i = 0; k >= 0 && i < np; i++) {
            plan_layout *l = &ls[pick[i]];
            if (why[i][0]) {
                char line[LOONG_ERRLEN + 256];
                snprintf(line, sizeof line, "warning: %s under %s not simulated (%s): that perturbation is left out",
                         l->name, what[i], why[i]);
                r->note(r->user, line);
            }
            if (why[i][0] || step[i] <= l->robust[kind]) continue;
            l->robust[kind] = step[i];
            snprintf(l->robust_what[kind], sizeof l->robust_what[kind], "%s", what[i]);
        }
    }
    free(pick), free(ws), free(what), free(step), free(exposed), free(why);
    return runs;
}

/* ---- the search ---- */

/* The user's layout among the enumerated ones, or appended to them (it is
 * then scored like them, and shown with its reason when it cannot run). */
static void find_user(const plan_request *req, const config *user, plan_search_out *out)
{
    out->user = -1;
    if (!user) return;
    out->user = plan_find_layout(out->ls, out->n, req, user);
    if (out->user >= 0) return;
    out->ls = xrealloc_array(out->ls, (size_t)out->n + 1, sizeof *out->ls, "the plan's layouts");
    plan_layout_init(&out->ls[out->n], req, user);
    out->user_added = true;
    out->user = out->n++;
}

int plan_search(plan_request *req, const plan_search_opts *o, const plan_runner *r, plan_search_out *out,
                char err[LOONG_ERRLEN])
{
    memset(out, 0, sizeof *out);
    double t0 = r->now(r->user);
    if (use_draw(req, o, NULL, 0, 0, err) < 0) return -1;
    out->ls = plan_enumerate(req, &out->n);
    find_user(req, o->user, out);
    plan_layout *ls = out->ls;
    int n = out->n;
    if (score_draws(req, o, r, ls, n, err) < 0) goto fail;
    double t1 = r->now(r->user);
    r->max(r->user, &t1, 1);
    out->analytic_s = t1 - t0;
    for (int i = 0; i < n; i++)
        out->feasible += !ls[i].removed;
    if (!out->feasible) return 0;
    int runs = o->top > 0 || o->exact ? simulate_draws(req, o, r, out->user, ls, n, &out->compose, err) : 0;
    for (int i = 0; runs > 0 && i < n; i++) /* the TP and head ranks the clean runs folded */
        if (ls[i].sim_step >= 0)
            out->folded |= plan_fold(&ls[i].c, o->foldable, o->w && whatif_any(o->w)) & DAG_FOLDABLE;
    double tr = r->now(r->user);
    if (runs >= 0 && o->robust) {
        int k = simulate_robust(req, o, r, ls, n, &out->compose, err);
        runs = k < 0 ? -1 : runs + k;
    }
    double t2 = r->now(r->user);
    out->robust_s = o->robust ? t2 - tr : 0;
    out->sim_s = t2 - t1;
    out->runs = runs;
    if (runs >= 0) return 0;
fail:
    free(out->ls);
    out->ls = NULL;
    return -1;
}

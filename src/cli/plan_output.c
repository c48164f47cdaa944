/*
 * plan_output: what `loong plan` writes: the table (model/plan.h's
 * writers), the CSV, the JSON, --plot, --show ROW's command (also from a
 * plan's JSON: --from), --emit's framework configuration, and when nothing
 * fits, the leanest layout's memory and the fixes. Every file is written
 * atomically (afile) and all are committed together, so an error leaves
 * none half-written.
 *
 * Layer: cli (may use every library).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"
#include "plan_cli.h"
#include "plot.h"

double plan_cli_default_tie_pct(precision_kind p, bool moe, const char *gpu)
{
    fidelity_error e;
    fidelity_for_run(SCOPE_STEP, p, moe, gpu, &e);
    return e.between_pct;
}

void plan_cli_abort(plan_outputs *o)
{
    afile_abort(&o->t);
    afile_abort(&o->c);
    afile_abort(&o->j);
}

int plan_cli_open(const plan_args *a, plan_outputs *o, char err[LOONG_ERRLEN])
{
    memset(o, 0, sizeof *o);
    if ((a->csv && afile_open(&o->c, a->csv, err) < 0) || (a->json && afile_open(&o->j, a->json, err) < 0) ||
        afile_open(&o->t, a->out, err) < 0) {
        plan_cli_abort(o);
        return -1;
    }
    return 0;
}

/* --plot: drawn (atomically) before the text outputs are committed, so that
 * a failed plot leaves none of them. */
static int write_plot(const plan_args *a, const plan_ctx *x, const plan_layout *ls, int n, const plan_report *rp,
                      char err[LOONG_ERRLEN])
{
    int *idx = xmalloc_array((size_t)n + 1, sizeof *idx, "the plan's ranking");
    int m = plan_rank(ls, n, idx), pick = m ? plan_recommend(ls, idx, m, rp->tie) : -1;
    free(idx);
    int points = pick >= 0 ? plot_plan(a->plot, ls, n, pick, x->req.gpu_mem, rp->peak, err) : 0;
    if (points < 0) return -1;
    if (!a->quiet) fprintf(stderr, "loong plan: plotted %d layouts in %s\n", points, a->plot);
    return 0;
}

/* --emit megatron|torchtitan: the Megatron-LM arguments or torchtitan job
 * TOML of the pick, or of the row ranked --show ROW. */
static int write_emit(FILE *f, const plan_args *a, const plan_layout *ls, int n, const plan_report *rp,
                      char err[LOONG_ERRLEN])
{
    int *idx = xmalloc_array((size_t)n + 1, sizeof *idx, "the plan's ranking");
    int m = plan_rank(ls, n, idx);
    int i = a->show ? (a->show <= m ? idx[a->show - 1] : -1) : m ? plan_recommend(ls, idx, m, rp->tie) : -1;
    free(idx);
    if (i < 0) {
        snprintf(err, LOONG_ERRLEN,
                 a->show ? "--show %d: the table has %d rows (feasible layouts): give 1 to %d"
                         : "--emit: no layout fits, so there is no pick to emit",
                 a->show, m, m);
        return -1;
    }
    bool mg = !strcmp(a->emit, "megatron");
    int gaps = mg ? cli_megatron_emit(f, &ls[i].c) : cli_torchtitan_emit(f, &ls[i].c);
    if (gaps < 0) {
        snprintf(err, LOONG_ERRLEN, "write error");
        return -1;
    }
    if (gaps && !a->quiet)
        fprintf(stderr, "loong plan: %d knob(s) of %s are not %s's: see the '#' lines\n", gaps, ls[i].name,
                mg ? "Megatron-LM" : "torchtitan");
    return 0;
}

/* --show ROW: the command of the layout ranked ROW, on one line. */
static int write_show(FILE *f, const plan_args *a, const plan_layout *ls, int n, const plan_report *rp,
                      char err[LOONG_ERRLEN])
{
    int *idx = xmalloc_array((size_t)n + 1, sizeof *idx, "the plan's ranking");
    int m = plan_rank(ls, n, idx), i = a->show <= m ? idx[a->show - 1] : -1;
    free(idx);
    if (i < 0) {
        snprintf(err, LOONG_ERRLEN, "--show %d: the table has %d rows (feasible layouts): give 1 to %d", a->show, m, m);
        return -1;
    }
    if (ls[i].sim_step < 0 && !a->quiet)
        fprintf(stderr, "loong plan: row %d (%s) is the analytical model's; this command simulates it\n", a->show,
                ls[i].name);
    fprintf(f, "%s\n", rp->commands[i]);
    return 0;
}

/* --show ROW --from FILE: row ROW's loong sim command from the JSON that
 * loong plan --json wrote, without planning again; exit 2 (one line) when
 * the file is not such a plan or has no such row. */
int plan_cli_show_from(const plan_args *a)
{
    json_error_t je;
    json_t *j = json_load_file(a->from, 0, &je);
    if (!j)
        return cli_fail("plan", "--from %s: cannot read it as JSON (%s): give the file loong plan --json FILE wrote",
                        a->from, je.text);
    json_t *rows = json_object_get(j, "rows");
    int rc = 0;
    if (!json_is_array(rows) || !json_is_object(json_object_get(j, "request")))
        rc = cli_fail("plan",
                      "--from %s is not a loong plan JSON (no \"rows\" and \"request\"): give the file "
                      "loong plan --json FILE wrote",
                      a->from);
    else if ((size_t)a->show > json_array_size(rows))
        rc = cli_fail("plan", "--show %d: the plan in %s has %zu rows (feasible layouts): give 1 to %zu", a->show,
                      a->from, json_array_size(rows), json_array_size(rows));
    json_t *r = rc ? NULL : json_array_get(rows, (size_t)a->show - 1);
    const char *cmd = json_string_value(json_object_get(r, "command"));
    const char *name = json_string_value(json_object_get(r, "layout")),
               *by = json_string_value(json_object_get(r, "by"));
    if (!rc && (!cmd || !name || !by))
        rc = cli_fail("plan",
                      "--from %s: row %d has no layout, by and command: write the plan again with loong plan "
                      "--json FILE",
                      a->from, a->show);
    char err[LOONG_ERRLEN];
    afile o = {0};
    if (!rc && (afile_open(&o, a->out, err) < 0 || fprintf(o.f, "%s\n", cmd) < 0 || afile_commit(&o, err) < 0)) {
        afile_abort(&o);
        rc = cli_fail("plan", "%s", err[0] ? err : "write error on the output");
    }
    if (!rc && strcmp(by, "sim") && !a->quiet)
        fprintf(stderr, "loong plan: row %d (%s) is the analytical model's; this command simulates it\n", a->show,
                name);
    json_decref(j);
    return rc;
}

static int write_outputs(const plan_args *a, const plan_ctx *x, plan_outputs *o, const plan_layout *ls, int n,
                         const plan_report *rp, char err[LOONG_ERRLEN])
{
    int rc = 0;
    if (a->csv && plan_write_csv(o->c.f, ls, n, rp) < 0)
        rc = -1, snprintf(err, LOONG_ERRLEN, "write error on '%s'", a->csv);
    if (rc == 0 && a->emit) {
        if (write_emit(o->t.f, a, ls, n, rp, err) < 0) rc = -1;
    } else if (rc == 0 && a->show) {
        if (write_show(o->t.f, a, ls, n, rp, err) < 0) rc = -1;
    } else if (rc == 0 && plan_write_table(o->t.f, ls, n, &x->req, rp) < 0)
        rc = -1, snprintf(err, LOONG_ERRLEN, "write error on '%s'", a->out);
    if (rc == 0 && a->json && plan_write_json(o->j.f, ls, n, &x->req, rp) < 0)
        rc = -1, snprintf(err, LOONG_ERRLEN, "write error on '%s'", a->json);
    if (rc == 0 && a->plot) rc = write_plot(a, x, ls, n, rp, err);
    if (rc == 0 && a->csv) rc = afile_commit(&o->c, err);
    if (rc == 0 && a->json) rc = afile_commit(&o->j, err);
    if (rc == 0) rc = afile_commit(&o->t, err);
    if (rc < 0) plan_cli_abort(o);
    return rc;
}

/* The most common removal reason, for "nothing fits". */
static const char *common_reason(const plan_layout *ls, int n)
{
    int best = -1, bestc = 0;
    for (int i = 0; i < n; i++) {
        int cnt = 0;
        for (int j = 0; j < n; j++)
            cnt += !strcmp(ls[i].reason, ls[j].reason);
        if (cnt > bestc) {
            bestc = cnt;
            best = i;
        }
    }
    return best >= 0 ? ls[best].reason : "no layout";
}

/* Nothing fits: the memory breakdown of the leanest layout and the fixes
 * in the table output, every layout and its reason in the CSV, both
 * committed (a complete answer: no), then the one-line error, exit 2. A
 * request whose layouts all fail before their memory check (their shape)
 * writes nothing. */
static int write_infeasible(const plan_args *a, const plan_ctx *x, plan_outputs *o, const plan_layout *ls, int n,
                            int user, char err[LOONG_ERRLEN])
{
    char fix[128];
    plan_report rp = {.platform = a->platform};
    if (plan_leanest(ls, n) < 0) { /* no layout got past its shape: the GPU count's fault, when it is */
        char why[LOONG_ERRLEN];
        bool count = plan_unsplit_reason(&x->req, why, sizeof why) == 0;
        return cli_fail("plan", "no feasible layout for %d GPUs: %s", x->req.gpus, count ? why : common_reason(ls, n));
    }
    int lean = plan_write_oom(o->t.f, ls, n, &x->req, fix, sizeof fix);
    if (user >= 0) fprintf(o->t.f, "# yours (--layout): %s is not feasible: %s\n", ls[user].name, ls[user].reason);
    if (ferror(o->t.f) || (a->csv && plan_write_csv(o->c.f, ls, n, &rp) < 0) ||
        (a->csv && afile_commit(&o->c, err) < 0) || afile_commit(&o->t, err) < 0) {
        plan_cli_abort(o);
        return cli_fail("plan", "%s", err[0] ? err : "write error on the plan's output");
    }
    return cli_fail(
        "plan",
        "no feasible layout for %d GPUs: the leanest, %s, reserves %.1f GB, over the %.1f GB limit; %s fits "
        "(the breakdown is in the table output)",
        x->req.gpus, ls[lean].name, ls[lean].mem.reserved / 1e9, plan_mem_limit(&x->req) / 1e9, fix);
}

int plan_cli_write(const plan_args *a, const plan_ctx *x, plan_outputs *o, const plan_search_out *s)
{
    const plan_layout *ls = s->ls;
    int n = s->n, nsim = 0;
    char err[LOONG_ERRLEN] = "";
    if (!s->feasible) return x->rank == 0 ? write_infeasible(a, x, o, ls, n, s->user, err) : 2;
    for (int i = 0; i < n; i++)
        nsim += ls[i].sim_step >= 0;
    char docs[160] = "";
    if (a->cc.doc_dist || a->cc.docs_file || a->cc.val[KNOB_DOCS])
        snprintf(docs, sizeof docs, "%s%.120s",
                 a->cc.doc_dist    ? "--doc-dist "
                 : a->cc.docs_file ? "--docs-file "
                                   : "",
                 a->cc.doc_dist    ? a->cc.doc_dist
                 : a->cc.docs_file ? a->cc.docs_file
                                   : "--docs");
    plan_report rp = {
        .platform = a->platform,
        .calib = calib_path(x->cb),
        .peak = calib_peak(x->cb),
        .rows = a->rows,
        .analytic_s = s->analytic_s,
        .sim_s = s->sim_s,
        .wall_s = s->analytic_s + s->sim_s,
        .simulated = nsim,
        .runs = s->runs,
        .ranks = x->size,
        .compose = s->compose,
        .folded = s->folded,
        .draws = a->draws,
        .docs = docs[0] ? docs : NULL,
        .tie = a->tie >= 0
                   ? a->tie
                   : plan_cli_default_tie_pct(x->req.base.precision, config_moe(&x->req.base), x->spec.gpu) / 100,
        .tie_given = a->tie >= 0,
        .robust = a->robust,
        .robust_set = "the worst straggler of ranks 0 and P-1 (kernels x1.25), the worst of node0-nic0 "
                      "and the last GPU's NIC at half speed, and 5 % jitter (each vs the clean step_s)",
        .robust_s = s->robust_s,
        .why_removed = a->why_removed,
        .user = s->user >= 0 ? &ls[s->user] : NULL,
        .user_added = s->user_added};
    char what[1024];
    whatif_describe(&a->w, what, sizeof what);
    if (whatif_any(&a->w)) rp.perturbed = what;
    fidelity_for_run(SCOPE_STEP, x->req.base.precision, config_moe(&x->req.base), x->spec.gpu, &rp.model_error);
    char **commands = xcalloc((size_t)n + 1, sizeof *commands, "the plan's commands");
    for (int i = 0; i < n; i++)
        if (!ls[i].removed) commands[i] = plan_cli_command(a, &ls[i]);
    rp.commands = commands;
    int rc = 0;
    if (x->rank == 0 && write_outputs(a, x, o, ls, n, &rp, err) < 0) rc = cli_fail("plan", "%s", err);
    for (int i = 0; i < n; i++)
        free(commands[i]);
    free(commands);
    return rc;
}

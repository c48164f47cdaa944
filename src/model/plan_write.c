/* plan_write: the plan's table, CSV and JSON. See plan.h. */
#include "plan.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/docs.h"
#include "core/pipeline.h"
#include "core/recompute.h"
#include "core/stats.h"
#include "core/strategy.h"
#include "core/xalloc.h"

/* ---- output ---- */

typedef struct row {
    double step, tps, mfu, mem_gb, exposed, vs_ring, vs_uly;
    double tp_pct; /* exposed TP communication, % of the step (analytical) */
} row;

static row row_of(const plan_layout *ls, int i, int ring, int uly, double peak)
{
    const plan_layout *l = &ls[i];
    const config *c = &l->c;
    row r;
    r.step = plan_step(l);
    r.tps = config_step_tokens(c) / (r.step * config_ranks(c));
    r.mfu = l->model_flops > 0 ? 100 * l->model_flops / (r.step * config_ranks(c) * peak)
                               : 100 * stats_mfu(c, r.step, peak);
    r.mem_gb = l->mem.reserved / 1e9;
    r.exposed = l->sim_step >= 0 ? l->sim_exposed : l->an.exposed;
    r.vs_ring = ring >= 0 ? plan_gpu_seconds(&ls[ring]) / plan_gpu_seconds(l) : NAN; /* throughput ratios */
    r.vs_uly = uly >= 0 ? plan_gpu_seconds(&ls[uly]) / plan_gpu_seconds(l) : NAN;
    r.tp_pct = 100 * l->an.tp / l->an.step;
    return r;
}

static void fmt_speedup(char *buf, size_t len, double v)
{
    if (isnan(v))
        snprintf(buf, len, "n/a");
    else
        snprintf(buf, len, "%.3fx", v);
}

/* The baseline columns a table has: only those with a feasible baseline. */
typedef struct table_cols {
    bool ring, uly;
    bool tp;                 /* some layout has tp > 1 */
    bool pp;                 /* some layout has pipeline stages: the bubble column */
    int name_w;              /* the layout column's width */
    const plan_layout *user; /* --layout's, marked "<- yours" */
} table_cols;

/* "# work:" the global batch every layout processes, or the micro-batches
 * per replica (--micro-batches), and the data-parallel degrees searched. */
static void write_work(FILE *f, const plan_request *req)
{
    const config *b = &req->base;
    char dp[48] = "dp searched";
    if (req->degree[MESH_DP] != PLAN_SEARCHED) snprintf(dp, sizeof dp, "dp %d", req->degree[MESH_DP]);
    if (!req->global_batch) {
        fprintf(f,
                "# work: %d micro-batch(es) of %d sample(s) per replica (--micro-batches), %s; ranked by "
                "GPU-seconds per sample\n",
                b->micro_batches, b->batch, dp);
        return;
    }
    fprintf(f,
            "# work: global batch %d samples (%.3g M tokens%s) per step for every layout, m = %d / (dp x %d) "
            "micro-batches, %s; ranked by time per global batch\n",
            req->global_batch, req->global_batch * (double)b->seq / (1 << 20),
            req->global_batch_default ? ", the default: Llama 3's 16M-token batch" : "", req->global_batch, b->batch,
            dp);
}

/* The error the plan quotes (fidelity.h) and the tie it makes of it. */
static void write_model_error(FILE *f, const plan_report *rp)
{
    const fidelity_error *e = &rp->model_error;
    if (e->rows)
        fprintf(f,
                "# model error: %+.1f to %+.1f %% on %s%s%s (mean |error| %.1f %%, %d published runs: "
                "docs/validation.md#the-fidelity-table); a bias common to two layouts cancels, their run-to-run "
                "spread does not: %.1f %% between two layouts\n",
                e->lo_pct, e->hi_pct, e->what, e->gpu ? " on " : "", e->gpu ? e->gpu : "", e->mean_abs_pct, e->rows,
                e->between_pct);
    fprintf(f,
            "# tie: '=' marks a layout within %.2f %% of the best's GPU-seconds, predicted the same way: %s, not a "
            "ranking\n",
            100 * rp->tie, rp->tie_given ? "--tie" : "the model's error between two layouts");
}

static void write_header(FILE *f, int n, int feasible, const plan_request *req, const plan_report *rp,
                         const table_cols *cols)
{
    const config *b = &req->base;
    char seq[32];
    units_fmt_count(b->seq, seq, sizeof seq);
    char zero[48], rec[80];
    snprintf(zero, sizeof zero, req->search_zero ? "ZeRO 0-3 searched (zN)" : "ZeRO-%d", b->zero);
    char brc[24];
    recompute_abbrev(b, brc, sizeof brc);
    snprintf(rec, sizeof rec,
             req->search_recompute ? "recompute searched (none/sel/sel+mlp/sc++/full/full-bN)" : "recompute %s", brc);
    fprintf(f, "# loong plan: %s S=%s B=%d on %d GPUs (%s), %s, %s, %s, GPU memory %.1f GB\n", b->model.name, seq,
            b->batch, req->gpus, rp->platform, zero, rec, b->act_bytes == 2 ? "bf16" : "fp32", req->gpu_mem / 1e9);
    if (rp->calib) fprintf(f, "# calibration table: %s\n", rp->calib);
    fprintf(f,
            "# memory: a layout fits when its reserved peak (allocated x allocator + CUDA context + NCCL buffers) "
            "is at most %.1f GB: %.1f GB less the %g %% margin; mem_GB is the reserved peak\n",
            plan_mem_limit(req) / 1e9, req->gpu_mem / 1e9, 100 * req->margin);
    write_work(f, req);
    if (req->degree[MESH_PP] != 1) {
        char pp[32] = "searched";
        if (req->degree[MESH_PP] != PLAN_SEARCHED) snprintf(pp, sizeof pp, "%d", req->degree[MESH_PP]);
        fprintf(f, "# pipeline: pp %s, schedule %s\n", pp,
                req->search_schedule ? "searched (1f1b, il2: interleaved v 2)" : schedule_name(b->schedule));
    }
    bool two = rp->compose & PLAN_TWO_LAYERS, period = rp->compose & PLAN_PERIOD;
    char how[160] = "";
    if (two || period)
        snprintf(how, sizeof how, " (%s%s%s)", two ? "ZeRO-1: 1- and 2-layer runs composed to L layers" : "",
                 two && period ? "; " : "",
                 period ? "others: loong sim --compose, from the periods of layers and micro-batches" : "");
    fprintf(f, "# %d layouts enumerated, %d removed, %d feasible; %d simulated with SimGrid%s, the rest analytical\n",
            n, n - feasible, feasible, rp->simulated, how);
    bool tp = rp->folded & MESH_BIT(MESH_TP), head = rp->folded & MESH_BIT(MESH_HEAD),
         ring = rp->folded & MESH_BIT(MESH_SEQ);
    if (tp || head || ring)
        fprintf(f,
                "# symmetry: in the pipelined picks, %s%s%s%s%s of each group simulated for the others (loong sim "
                "--fold)\n",
                tp ? "TP rank 0 (exact)" : "", tp && (head || ring) ? (head && ring ? ", " : " and ") : "",
                head ? "head rank 0 (within 0.5 %: docs/sim.md)" : "", head && ring ? " and " : "",
                ring ? "ring rank 0 (within 1 %: docs/sim.md)" : "");
    if (rp->docs && rp->draws > 1)
        fprintf(f, "# documents: %s, %d packings drawn; step_s is their mean, spread_%% = (slowest - fastest) / mean\n",
                rp->docs, rp->draws);
    else if (rp->docs)
        fprintf(f, "# documents: %s (%d in the sample)\n", rp->docs, docs_count(b->docs));
    if (rp->perturbed)
        fprintf(f,
                "# PERTURBED (what-if): the 'sim' rows ran under %s; the 'model' rows are the analytical model's clean "
                "prediction (it has no what-if), and the layouts to simulate were chosen from it\n",
                rp->perturbed);
    write_model_error(f, rp);
    if (rp->robust) fprintf(f, "# robust: slowdown of the step under %s; worst_%% the largest\n", rp->robust_set);
    fprintf(f, "#%4s %3s %-*s %6s %11s %11s %9s %12s %7s %10s %12s", "rank", "tie", cols->name_w, "layout", "by",
            "analytic_s", "step_s", "spread_%", "tok/s/GPU", "MFU_%", "mem_GB", "exposed_s");
    if (cols->tp) fprintf(f, " %6s", "tp_%");
    if (cols->pp) fprintf(f, " %8s", "bubble_%");
    if (cols->ring) fprintf(f, " %8s", "vs_ring");
    if (cols->uly) fprintf(f, " %8s", "vs_uly");
    if (rp->robust) fprintf(f, " %11s %10s %10s %9s", "straggler_%", "slowNIC_%", "jitter_%", "worst_%");
    fputc('\n', f);
}

/* "=" when l ties with the best (same prediction kind, within tie). */
static bool ties_best(const plan_layout *l, const plan_layout *best, double tie)
{
    return l != best && plan_tied(l, best, tie);
}

static void write_robust(FILE *f, const plan_layout *l)
{
    double clean = plan_step(l);
    for (int k = 0; k < PLAN_PERT_COUNT; k++)
        if (l->robust[k] >= 0)
            fprintf(f, " %*.2f", k == 0 ? 11 : 10, 100 * (l->robust[k] / clean - 1));
        else
            fprintf(f, " %*s", k == 0 ? 11 : 10, "-");
    if (l->robust[0] >= 0)
        fprintf(f, " %9.2f", 100 * (plan_worst_step(l) / clean - 1));
    else
        fprintf(f, " %9s", "-");
}

static void write_row(FILE *f, int rank, const plan_layout *l, const row *r, bool tie, bool robust,
                      const table_cols *cols)
{
    char a[16], b[16];
    fmt_speedup(a, sizeof a, r->vs_ring);
    fmt_speedup(b, sizeof b, r->vs_uly);
    fprintf(f, " %4d %3s %-*s %6s %11.3f %11.3f %9.2f %12.1f %7.2f %10.1f %12.3f", rank, tie ? "=" : "", cols->name_w,
            l->name, plan_by(l), l->an.step, r->step, 100 * (l->step_hi - l->step_lo) / r->step, r->tps, r->mfu,
            r->mem_gb, r->exposed);
    if (cols->tp) fprintf(f, " %6.2f", r->tp_pct);
    if (cols->pp) fprintf(f, " %8.2f", 100 * l->an.bubble);
    if (cols->ring) fprintf(f, " %8s", a);
    if (cols->uly) fprintf(f, " %8s", b);
    if (robust) write_robust(f, l);
    fputs(l == cols->user ? "  <- yours\n" : "\n", f);
}

/* "# experts:" a mixture of experts' EP x CP choice and its routing's
 * imbalance, the same in every block (one draw over the experts). */
static void write_experts(FILE *f, const config *c)
{
    if (!config_moe(c)) return;
    char routing[64];
    config_routing_text(c, routing, sizeof routing);
    int P = config_cp(c);
    fprintf(f,
            "# experts: ep %d beside cp %d (%dx%d) and dp %d: %d of the %d experts per rank, EP groups %s; routing "
            "%s: the busiest EP rank computes %.2fx the mean rows in every MoE block (1.00: even)\n",
            c->ep, P, c->p_head, c->p_seq, c->dp, config_ep_local_experts(c), c->model.experts,
            c->ep == 1   ? "of one rank (no expert parallelism)"
            : c->ep <= P ? "inside the context ranks"
                         : "across replicas",
            routing, config_ep_imbalance(c));
}

static void write_why(FILE *f, const plan_layout *ls, const int *idx, int m, int ring, int uly, const plan_report *rp,
                      const plan_request *req)
{
    int pick = plan_recommend(ls, idx, m, rp->tie);
    const plan_layout *best = &ls[pick];
    row r = row_of(ls, pick, ring, uly, rp->peak);
    char place[64];
    config_placement_text(&best->c, place, sizeof place);
    if (rp->commands && rp->commands[pick]) {
        fprintf(f, "# recommended: %s; reproduce it with:\n#   %s\n", best->name, rp->commands[pick]);
    } else {
        fprintf(f, "# recommended: %s (loong sim --mesh %dx%d --strategy %s --placement %s --partition %s --ring %s",
                best->name, best->c.p_head, best->c.p_seq, best->c.strategy, place, partition_name(best->c.partition),
                ring_name(best->c.ring));
        if (best->c.tp > 1) fprintf(f, " --tp %d", best->c.tp);
        if (best->c.ring == RING_DOUBLE) fprintf(f, " --window %d", best->c.window);
        fprintf(f, ")\n");
    }
    double share = 100 * r.exposed / r.step;
    fprintf(f, "# why: %s, %.1f tokens/s/GPU (step %.3f s, %.2f %% MFU, %.1f %% of the step exposed communication)",
            pick == idx[0] ? "highest predicted throughput" : "tied with the fastest (below)", r.tps, r.step, r.mfu,
            share);
    if (m > 1 && pick == idx[0] && plan_picked(&ls[idx[1]]) == plan_picked(best))
        fprintf(f, ", %.2f %% ahead of the runner-up %s",
                100 * (plan_gpu_seconds(&ls[idx[1]]) / plan_gpu_seconds(best) - 1), ls[idx[1]].name);
    if (best->unsimulated[0]) fprintf(f, "; the analytical model's step: not simulated (%s)", best->unsimulated);
    if (ring >= 0 && ring != pick) fprintf(f, "; %.3fx Megatron-CP (%s)", r.vs_ring, ls[ring].name);
    fprintf(f, "; memory: reserved %.1f GB (allocated %.1f GB), %.1f GB under the %.1f GB limit\n", r.mem_gb,
            ls[pick].mem.peak / 1e9, plan_mem_limit(req) / 1e9 - r.mem_gb, plan_mem_limit(req) / 1e9);
    write_experts(f, &best->c);
    plan_write_choice(f, ls, idx, m, pick, rp);
}

/* "# model*:" a line for each layout picked for simulation and not
 * simulated, with why: its analytical score stands. */
static void write_unsimulated(FILE *f, const plan_layout *ls, const int *idx, int m)
{
    for (int k = 0; k < m; k++)
        if (ls[idx[k]].unsimulated[0])
            fprintf(f, "# model*: rank %d, %s, not simulated (%s): the analytical model's step stands\n", k + 1,
                    ls[idx[k]].name, ls[idx[k]].unsimulated);
}

/* A reason with its numbers as '#': layouts removed for the same cause
 * with other figures (another mesh, another peak) share it. */
static void reason_class(const char *reason, char *out, size_t len)
{
    size_t k = 0;
    for (const char *p = reason; *p && k + 1 < len; p++) {
        bool digit =
            (*p >= '0' && *p <= '9') || (*p == '.' && k > 0 && out[k - 1] == '#' && p[1] >= '0' && p[1] <= '9');
        if (!digit)
            out[k++] = *p;
        else if (k == 0 || out[k - 1] != '#')
            out[k++] = '#';
    }
    out[k] = '\0';
}

/* The causes of removal, most common first: example[k] is the first
 * layout of cause k, count[k] its layouts (both [n]); returns the causes. */
static int removed_causes(const plan_layout *ls, int n, int *example, int *count)
{
    char(*cls)[LOONG_ERRLEN] = xcalloc((size_t)n + 1, sizeof *cls, "the removed layouts");
    int *per = xcalloc((size_t)n + 1, sizeof *per, "the removed layouts"), causes = 0;
    int *firsts = xcalloc((size_t)n + 1, sizeof *firsts, "the removed layouts"); /* each cause's first layout */
    for (int i = 0; i < n; i++) { /* per[first]: the layouts of a cause, on its first layout */
        if (!ls[i].removed) continue;
        reason_class(ls[i].reason, cls[i], sizeof cls[i]);
        int first = i;
        for (int k = 0; k < causes && first == i; k++) /* the causes seen so far, not every layout: a few */
            if (!strcmp(cls[firsts[k]], cls[i])) first = firsts[k];
        if (first == i) firsts[causes++] = i;
        per[first]++;
    }
    free(firsts);
    for (int k = 0; k < causes; k++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (per[i] > 0 && (best < 0 || per[i] > per[best])) best = i;
        example[k] = best;
        count[k] = per[best];
        per[best] = 0;
    }
    free(cls);
    free(per);
    return causes;
}

/* "# removed:" lines: every layout with --why-removed, else one per cause
 * (most common first) with its count and its first layout as the example. */
static void write_removed(FILE *f, const plan_layout *ls, int n, bool all)
{
    if (all) {
        for (int i = 0; i < n; i++)
            if (ls[i].removed) fprintf(f, "# removed: %-34s %s\n", ls[i].name, ls[i].reason);
        return;
    }
    int *example = xcalloc((size_t)n + 1, sizeof *example, "the removed layouts");
    int *count = xcalloc((size_t)n + 1, sizeof *count, "the removed layouts");
    int causes = removed_causes(ls, n, example, count);
    for (int k = 0; k < causes; k++)
        fprintf(f, "# removed: %d layout(s): %s (e.g. %s)\n", count[k], ls[example[k]].reason, ls[example[k]].name);
    if (causes) fprintf(f, "# removed: --why-removed lists every layout\n");
    free(example);
    free(count);
}

int plan_write_table(FILE *f, const plan_layout *ls, int n, const plan_request *req, const plan_report *rp)
{
    int *idx = xmalloc_array((size_t)n, sizeof *idx, "the plan's ranking");
    int m = plan_rank(ls, n, idx), ring = plan_best_ring(ls, n), uly = plan_best_ulysses(ls, n);
    table_cols cols = {ring >= 0, uly >= 0, false, false, 34, rp->user};
    for (int i = 0; i < n; i++) {
        cols.tp |= ls[i].c.tp > 1 && !ls[i].removed;
        cols.pp |= ls[i].c.pp > 1 && !ls[i].removed;
    }
    for (int i = 0; i < n; i++) { /* the longest name of a feasible layout */
        int w = (int)strlen(ls[i].name);
        if (!ls[i].removed && w > cols.name_w) cols.name_w = w;
    }
    write_header(f, n, m, req, rp, &cols);
    int rows = rp->rows > 0 && rp->rows < m ? rp->rows : m;
    for (int k = 0; k < rows; k++) {
        row r = row_of(ls, idx[k], ring, uly, rp->peak);
        write_row(f, k + 1, &ls[idx[k]], &r, ties_best(&ls[idx[k]], &ls[idx[0]], rp->tie), rp->robust, &cols);
    }
    if (rows < m) fprintf(f, "# ... %d more feasible layouts (--rows 0 or --csv for all)\n", m - rows);
    for (int k = rows; rp->user && k < m; k++) /* the user's layout, below the rows shown */
        if (&ls[idx[k]] == rp->user) {
            row r = row_of(ls, idx[k], ring, uly, rp->peak);
            write_row(f, k + 1, rp->user, &r, ties_best(rp->user, &ls[idx[0]], rp->tie), rp->robust, &cols);
        }
    write_unsimulated(f, ls, idx, m);
    fprintf(f, "# baselines: best pure ring (Megatron-CP, %s P_s = P): %s; best pure Ulysses (P_s = 1): %s%s\n",
            req->base.docs ? "doc-zigzag (TransformerEngine's THD)" : "zigzag",
            ring >= 0 ? ls[ring].name : "none feasible", uly >= 0 ? ls[uly].name : "none feasible",
            ring < 0 || uly < 0 ? " (a baseline that is not feasible has no column)" : "");
    write_removed(f, ls, n, rp->why_removed);
    fprintf(f, "# time: analytical %.3f s (%d layouts), SimGrid %.3f s (%d runs), wall %.3f s on %d MPI rank(s)\n",
            rp->analytic_s, m, rp->sim_s, rp->runs, rp->wall_s, rp->ranks);
    if (rp->robust)
        fprintf(f, "# time: --robust's simulations %.3f s of the SimGrid time, %.2fx the clean ones' %.3f s\n",
                rp->robust_s, rp->robust_s / fmax(rp->sim_s - rp->robust_s, 1e-9), rp->sim_s - rp->robust_s);
    plan_write_user(f, ls, n, req, rp);
    if (m) write_why(f, ls, idx, m, ring, uly, rp, req); /* last: what the user acts on */
    free(idx);
    return ferror(f) ? -1 : 0;
}

/* A CSV field: empty, or quoted with its quotes made single. */
static void csv_text(FILE *f, const char *s)
{
    if (!s[0]) return;
    fputc('"', f);
    for (; *s; s++)
        fputc(*s == '"' ? '\'' : *s, f);
    fputc('"', f);
}

static void csv_layout(FILE *f, const plan_layout *l)
{
    const config *c = &l->c;
    char place[64];
    config_placement_text(c, place, sizeof place);
    fprintf(f, "\"%s\",%d,%d,%d,%s,%s,%s,%d,%s", l->name, c->dp, c->p_head, c->p_seq, place,
            partition_name(c->partition), ring_name(c->ring), c->window, c->kv_replication ? "on" : "off");
}

int plan_write_csv(FILE *f, const plan_layout *ls, int n, const plan_report *rp)
{
    int *idx = xmalloc_array((size_t)n, sizeof *idx, "the plan's ranking");
    int m = plan_rank(ls, n, idx), ring = plan_best_ring(ls, n), uly = plan_best_ulysses(ls, n);
    fprintf(f, "rank,layout,dp,p_head,p_seq,placement,partition,ring,window,kv_replication,status,reason,by,"
               "analytic_s,step_s,tokens_per_s_per_gpu,mfu_pct,peak_mem_GB,exposed_comm_s,speedup_vs_ring,"
               "speedup_vs_ulysses,step_min_s,step_max_s,tie,straggler_step_s,straggler_on,slow_nic_step_s,"
               "slow_nic_on,jitter_step_s,worst_step_s,zero,recompute,tp,tp_comm_pct,not_simulated\n");
    for (int k = 0; k < m; k++) {
        const plan_layout *l = &ls[idx[k]];
        row r = row_of(ls, idx[k], ring, uly, rp->peak);
        fprintf(f, "%d,", k + 1);
        csv_layout(f, l);
        fprintf(f, ",feasible,,%s,%.6f,%.6f,%.3f,%.4f,%.3f,%.6f,%.4f,%.4f,%.6f,%.6f,%s",
                l->sim_step >= 0 ? "sim" : "model", l->an.step, r.step, r.tps, r.mfu, r.mem_gb, r.exposed, r.vs_ring,
                r.vs_uly, l->step_lo, l->step_hi, ties_best(l, &ls[idx[0]], rp->tie) ? "yes" : "no");
        for (int k = 0; k < PLAN_PERT_COUNT; k++)
            if (l->robust[k] >= 0)
                fprintf(f, k < PLAN_PERT_JITTER ? ",%.9g,%s" : ",%.9g", l->robust[k], l->robust_what[k]);
            else
                fprintf(f, k < PLAN_PERT_JITTER ? ",," : ",");
        if (l->robust[0] >= 0)
            fprintf(f, ",%.9g", plan_worst_step(l));
        else
            fprintf(f, ",");
        fprintf(f, ",%d,%s,%d,%.3f,", l->c.zero, recompute_name(l->c.recompute), l->c.tp, r.tp_pct);
        csv_text(f, l->unsimulated);
        fputc('\n', f);
    }
    for (int i = 0; i < n; i++) {
        if (!ls[i].removed) continue;
        fprintf(f, ",");
        csv_layout(f, &ls[i]);
        char reason[LOONG_ERRLEN];
        snprintf(reason, sizeof reason, "%s", ls[i].reason);
        for (char *p = reason; *p; p++)
            if (*p == '"') *p = '\'';
        fprintf(f, ",removed,\"%s\",,,,,,,,,,,,,,,,,,,,%d,%s,%d,,\n", reason, ls[i].c.zero,
                recompute_name(ls[i].c.recompute), ls[i].c.tp);
    }
    free(idx);
    return ferror(f) ? -1 : 0;
}

/* ---- JSON ---- */

static json_t *json_model_error(const plan_report *rp)
{
    const fidelity_error *e = &rp->model_error;
    return json_pack("{s:s, s:s, s:o, s:i, s:f, s:f, s:f, s:f, s:s}", "kind", e->kind ? e->kind : "", "what",
                     e->what ? e->what : "", "gpu", e->gpu ? json_string(e->gpu) : json_null(), "rows", e->rows,
                     "mean_abs_pct", e->mean_abs_pct, "lo_pct", e->lo_pct, "hi_pct", e->hi_pct, "between_layouts_pct",
                     e->between_pct, "source", "docs/validation.md#the-fidelity-table");
}

static json_t *json_ratio(double v) { return isnan(v) ? json_null() : json_real(v); }

/* Every term of a layout's memory (memory.h), bytes per GPU. */
static json_t *json_memory_terms(const memory_estimate *m)
{
    double layer = m->working + m->attn_buffers;
    json_t *j = json_pack(
        "{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "weights", m->weights,
        "gradients", m->grads, "optimizer", m->optimizer, "workspace", m->workspace, "activations", m->activations,
        "transient", layer > m->lm_head ? layer : m->lm_head, "allocated", m->peak, "alloc_factor", m->alloc_factor,
        "allocator", m->allocator, "context", m->context, "nccl_tp", m->nccl_tp, "nccl_cp", m->nccl_cp, "nccl_ulysses",
        m->nccl_ulysses, "nccl_grad", m->nccl_grad, "nccl_pp", m->nccl_pp, "nccl", m->nccl, "reserved", m->reserved);
    if (j && m->fp8_weights > 0) json_object_set_new(j, "fp8_weights", json_real(m->fp8_weights));
    return j;
}

static json_t *json_row(const plan_layout *ls, int i, int rank, const row *r, const plan_report *rp, bool tie)
{
    const plan_layout *l = &ls[i];
    const config *c = &l->c;
    char place[64];
    config_placement_text(c, place, sizeof place);
    json_t *j =
        json_pack("{s:i, s:s, s:s, s:i, s:i, s:i, s:s, s:s, s:s, s:i, s:b, s:i, s:s, s:f, s:f, s:f, s:f, s:f, "
                  "s:f, s:o, s:o, s:b}",
                  "rank", rank, "layout", l->name, "by", l->sim_step >= 0 ? "sim" : "model", "dp", c->dp, "p_head",
                  c->p_head, "p_seq", c->p_seq, "placement", place, "partition", partition_name(c->partition), "ring",
                  ring_name(c->ring), "window", c->window, "kv_replication", c->kv_replication, "zero", c->zero,
                  "recompute", recompute_name(c->recompute), "analytic_s", l->an.step, "step_s", r->step,
                  "tokens_per_s_per_gpu", r->tps, "mfu_pct", r->mfu, "peak_mem_GB", r->mem_gb, "exposed_s", r->exposed,
                  "speedup_vs_ring", json_ratio(r->vs_ring), "speedup_vs_ulysses", json_ratio(r->vs_uly), "tie", tie);
    json_object_set_new(j, "tp", json_integer(c->tp));
    json_object_set_new(j, "tp_comm_pct", json_real(r->tp_pct));
    json_object_set_new(j, "memory_bytes", json_memory_terms(&l->mem));
    if (rp->commands && rp->commands[i]) json_object_set_new(j, "command", json_string(rp->commands[i]));
    json_object_set_new(j, "not_simulated", l->unsimulated[0] ? json_string(l->unsimulated) : json_null());
    return j;
}

static json_t *json_removed(const plan_layout *ls, int n)
{
    int *example = xcalloc((size_t)n + 1, sizeof *example, "the removed layouts");
    int *count = xcalloc((size_t)n + 1, sizeof *count, "the removed layouts");
    int causes = removed_causes(ls, n, example, count);
    json_t *a = json_array();
    for (int k = 0; k < causes; k++)
        json_array_append_new(a, json_pack("{s:s, s:i, s:s}", "reason", ls[example[k]].reason, "count", count[k],
                                           "example", ls[example[k]].name));
    free(example);
    free(count);
    return a;
}

int plan_write_json(FILE *f, const plan_layout *ls, int n, const plan_request *req, const plan_report *rp)
{
    int *idx = xmalloc_array((size_t)n + 1, sizeof *idx, "the plan's ranking");
    int m = plan_rank(ls, n, idx), ring = plan_best_ring(ls, n), uly = plan_best_ulysses(ls, n);
    json_t *rows = json_array();
    for (int k = 0; k < m; k++) {
        row r = row_of(ls, idx[k], ring, uly, rp->peak);
        json_array_append_new(rows, json_row(ls, idx[k], k + 1, &r, rp, ties_best(&ls[idx[k]], &ls[idx[0]], rp->tie)));
    }
    json_t *rec = json_null();
    if (m) {
        int pick = plan_recommend(ls, idx, m, rp->tie), rank = 0;
        while (idx[rank] != pick)
            rank++;
        rec = json_pack("{s:i, s:s, s:s}", "rank", rank + 1, "layout", ls[pick].name, "why",
                        pick == idx[0] ? "highest predicted throughput"
                                       : "tied with the fastest, and simpler or more robust");
        if (rp->commands && rp->commands[pick]) json_object_set_new(rec, "command", json_string(rp->commands[pick]));
    }
    json_t *j = json_pack("{s:o, s:{s:s, s:i, s:i, s:f, s:b, s:b}, s:o, s:o, s:{s:o, s:o}, s:o, s:i, s:i, s:i}",
                          "config", config_to_json(&req->base), "request", "platform", rp->platform, "gpus", req->gpus,
                          "dp", req->degree[MESH_DP], "gpu_mem_bytes", req->gpu_mem, "zero_searched", req->search_zero,
                          "recompute_searched", req->search_recompute, "rows", rows, "recommended", rec, "baselines",
                          "ring", ring >= 0 ? json_string(ls[ring].name) : json_null(), "ulysses",
                          uly >= 0 ? json_string(ls[uly].name) : json_null(), "removed", json_removed(ls, n),
                          "enumerated", n, "simulated", rp->simulated, "runs", rp->runs);
    if (!j) xalloc_die(0, "the plan's JSON");
    json_t *jr = json_object_get(j, "request");
    json_object_set_new(jr, "calib", rp->calib ? json_string(rp->calib) : json_null());
    json_object_set_new(jr, "memory_margin", json_real(req->margin));
    json_object_set_new(jr, "memory_limit_bytes", json_real(plan_mem_limit(req)));
    json_object_set_new(jr, "allocator", json_string(memory_allocator_name(req->allocator)));
    if (req->alloc_factor > 0) json_object_set_new(jr, "allocator_factor", json_real(req->alloc_factor));
    json_object_set_new(jr, "global_batch", req->global_batch ? json_integer(req->global_batch) : json_null());
    json_object_set_new(jr, "global_batch_tokens",
                        req->global_batch ? json_real((double)req->global_batch * (double)req->base.seq) : json_null());
    json_object_set_new(jr, "global_batch_default", json_boolean(req->global_batch_default));
    json_object_set_new(jr, "micro_batches_per_replica",
                        req->global_batch ? json_null() : json_integer(req->base.micro_batches));
    json_object_set_new(jr, "tie_pct", json_real(100 * rp->tie));
    json_object_set_new(jr, "tie_from", json_string(rp->tie_given ? "--tie" : "model_error.between_layouts_pct"));
    json_object_set_new(jr, "model_error", json_model_error(rp));
    json_object_set_new(jr, "ranked_by",
                        json_string(req->global_batch ? "time per global batch" : "GPU-seconds per sample"));
    if (rp->perturbed) json_object_set_new(j, "perturbed", json_string(rp->perturbed));
    json_object_set_new(j, "user_layout", plan_user_json(ls, n, rp));
    int rc = json_dumpf(j, f, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) == 0 && fputc('\n', f) != EOF ? 0 : -1;
    json_decref(j);
    free(idx);
    return rc < 0 || ferror(f) ? -1 : 0;
}

/*
 * sim_output: what `loong sim` writes: the memory verdict, the summary's
 * header, the JSON summary, the trace (loong's, with memory counters, or
 * PyTorch's per rank) and the all-or-nothing commit of every output file
 * (cmd_sim.h). The simulation itself and --compose are cmd_sim.c's.
 *
 * Layer: cli (may use every library).
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/kineto_write.h"
#include "core/recompute.h"
#include "core/stats.h"
#include "core/timeline.h"
#include "core/xalloc.h"
#include "model/memory.h"
#include "model/memtrack.h"
#include "model/platform_spec.h"
#include "cli.h"
#include "cmd_sim.h"

/* ---- memory: the memory model's peak per GPU against the GPU's memory ---- */

/* c with one change applied, if it is still a valid configuration. */
typedef struct mem_fix {
    int recompute, zero, dp_times; /* -1 / 0: unchanged */
} mem_fix;

/* The changes tried, cheapest to the user first (as loong plan tries them):
 * a recompute policy (costs compute), a ZeRO stage (costs communication),
 * both, then more data-parallel replicas under ZeRO-3 (costs GPUs). */
static const mem_fix mem_fixes[] = {
    {RECOMPUTE_SELECTIVE, -1, 0},
    {RECOMPUTE_SCPP, -1, 0},
    {RECOMPUTE_FULL, -1, 0},
    {-1, 1, 0},
    {-1, 2, 0},
    {-1, 3, 0},
    {RECOMPUTE_FULL, 3, 0},
    {-1, 3, 2},
    {-1, 3, 4},
    {-1, 3, 8},
};

/* The first change of mem_fixes that fits gpu_mem: 0 with its options and
 * peak, or -1. */
static int cheapest_fix(const config *c, double gpu_mem, char *what, size_t len, double *peak)
{
    char err[LOONG_ERRLEN];
    for (size_t i = 0; i < sizeof mem_fixes / sizeof *mem_fixes; i++) {
        const mem_fix *x = &mem_fixes[i];
        if ((x->recompute >= 0 && x->recompute <= (int)c->recompute) ||
            (!x->dp_times && x->zero >= 0 && x->zero <= c->zero))
            continue;
        config t = *c;
        if (x->recompute >= 0) recompute_set(&t, (recompute_kind)x->recompute);
        if (x->zero >= 0) t.zero = x->zero;
        if (x->dp_times) t.dp = c->dp * x->dp_times;
        if (config_validate(&t, err) < 0) continue;
        memory_estimate m;
        memory_estimate_config(&t, &m);
        if (m.reserved > gpu_mem) continue;
        int n = 0;
        if (x->recompute >= 0) n += snprintf(what + n, len - (size_t)n, "--recompute %s", recompute_name(t.recompute));
        if (x->zero >= 0 && t.zero != c->zero)
            n += snprintf(what + n, len - (size_t)n, "%s--zero %d", n ? " " : "", t.zero);
        if (x->dp_times) /* more GPUs */
            snprintf(what + n, len - (size_t)n, "%s--dp %d (%d GPUs)", n ? " " : "", t.dp, config_world(&t));
        *peak = m.reserved;
        return 0;
    }
    return -1;
}

/* The predicted peak of c against --gpu-mem or the memory of GPU `kind`. */
void simout_memory_check(const sim_args *a, const config *c, const char *kind, mem_check *m)
{
    memset(m, 0, sizeof *m);
    memory_estimate e;
    memory_estimate_config(c, &e);
    m->peak = e.reserved;
    m->alloc = e.peak;
    m->gpu_mem = a->gpu_mem > 0 ? a->gpu_mem : platform_spec_gpu_mem(kind);
    snprintf(m->source, sizeof m->source, "%s", a->gpu_mem > 0 ? "--gpu-mem" : kind);
    m->oom = m->gpu_mem > 0 && m->peak > m->gpu_mem;
    if (m->oom && cheapest_fix(c, m->gpu_mem, m->fix, sizeof m->fix, &m->fix_peak) < 0)
        snprintf(m->fix, sizeof m->fix, "a smaller --seq, or more context-parallel ranks (a larger --mesh)");
}

/* The summary's memory line (a training step only: the model counts a
 * step's tensors, not one attention layer's). */
void simout_memory_line(FILE *f, const config *c, const mem_check *m)
{
    if (c->scope != SCOPE_STEP) return;
    if (!(m->gpu_mem > 0))
        fprintf(f,
                "# memory: predicted reserved %.1f GB per GPU, allocated %.1f GB (%s: no GPU memory known; --gpu-mem "
                "SIZE checks it)\n",
                m->peak / 1e9, m->alloc / 1e9, m->source);
    else if (m->oom)
        fprintf(f,
                "# memory: predicted OOM: reserved %.1f GB per GPU (allocated %.1f GB), above %.1f GB (%s); cheapest "
                "fix: %s\n",
                m->peak / 1e9, m->alloc / 1e9, m->gpu_mem / 1e9, m->source, m->fix);
    else
        fprintf(f, "# memory: predicted reserved %.1f GB per GPU (allocated %.1f GB), fits in %.1f GB (%s)\n",
                m->peak / 1e9, m->alloc / 1e9, m->gpu_mem / 1e9, m->source);
}

/* One line on stderr when the step does not fit; the run goes on (its
 * timing may still be wanted), and the summary says predicted OOM too. */
void simout_warn_oom(const config *c, const mem_check *m)
{
    if (c->scope != SCOPE_STEP || !m->oom) return;
    fprintf(stderr, "loong sim: warning: predicted OOM: reserved %.1f GB of %.1f GB per GPU; cheapest fix: %s",
            m->peak / 1e9, m->gpu_mem / 1e9, m->fix);
    if (m->fix_peak > 0) fprintf(stderr, " (%.1f GB)", m->fix_peak / 1e9);
    fputc('\n', stderr);
}

/* What ran by symmetry (--fold) and what a perturbation unfolded: the
 * header lines of loong sim's summary and of --compose's. */
void simout_fold_lines(FILE *f, const sim_args *a, const config *c)
{
    if (c->dp > 1)
        fprintf(f, "# data parallelism: %d replicas (%d GPUs), %s; the gradient collectives span all of them\n", c->dp,
                config_world(c),
                a->dp_unfolded ? "every replica simulated (the perturbation makes them differ: not folded)"
                : !(a->fold & MESH_BIT(MESH_DP)) ? "every replica simulated"
                                                 : "one replica simulated, the others by symmetry");
    if (a->fold & MESH_BIT(MESH_TP))
        fprintf(f, "# tensor parallelism: TP rank 0 of each of the TP groups simulated, the other %d by symmetry\n",
                c->tp - 1);
    if (a->tp_unfolded)
        fprintf(f, "# tensor parallelism: every TP rank simulated (the perturbation makes them differ: %s off)\n",
                a->tp_flag);
    mesh m = config_mesh(c);
    for (int i = 0; i < SIM_APPROX_FOLDS; i++) {
        const sim_approx_fold *af = &sim_approx_folds[i];
        if (a->fold & MESH_BIT(af->dim))
            fprintf(f, "# %s: %s 0 of each of the %s simulated, the other %d by symmetry (within %s: docs/sim.md)\n",
                    af->label, af->rank, af->groups, m.degree[af->dim] - 1, af->bound);
        if (a->approx_unfolded & MESH_BIT(af->dim))
            fprintf(f, "# %s: every %s simulated (the perturbation makes them differ: --fold %s off)\n", af->label,
                    af->rank, af->name);
    }
}

static void write_header(FILE *f, const dag *g, const calib *cb, const sim_args *a, sim_platform *pf,
                         const mem_check *mc)
{
    char desc[256];
    config_describe(dag_config(g), desc, sizeof desc);
    fprintf(f, "# loong sim: %s\n", desc);
    fprintf(f, "# platform %s: %d %s GPUs, %d per node; %llu tasks\n", a->platform, sim_platform_gpus(pf),
            sim_platform_kind(pf), sim_platform_gpus_per_node(pf), (unsigned long long)dag_ntasks_whole(g));
    if (calib_path(cb)) fprintf(f, "# calibration table: %s\n", calib_path(cb));
    const config *c = dag_config(g);
    simout_fold_lines(f, a, c);
    whatif_write_header(f, &a->w);
    fprintf(f, "# network model: CM02, no cross-traffic, no TCP window bound, SPLITDUPLEX links");
    for (int i = 0; i < a->nsg; i++)
        fprintf(f, " %s", a->sg_args[i]);
    fputc('\n', f);
    simout_memory_line(f, c, mc);
}

/* The memory model's per-rank terms (bytes) of c, as the plan prints them. */
json_t *simout_json_memory(const config *c)
{
    memory_estimate m;
    memory_estimate_config(c, &m);
    double layer = m.working + m.attn_buffers;
    json_t *j = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "weights", m.weights,
                          "gradients", m.grads, "optimizer", m.optimizer, "workspace", m.workspace, "activations",
                          m.activations, "transient", layer > m.lm_head ? layer : m.lm_head, "peak", m.peak,
                          "allocated", m.peak, "allocator", m.allocator, "context", m.context, "nccl", m.nccl,
                          "reserved", m.reserved, "alloc_factor", m.alloc_factor);
    if (j && c->pp > 1) json_object_set_new(j, "stage", json_integer(m.stage)); /* the tightest */
    if (j && m.fp8_weights > 0) json_object_set_new(j, "fp8_weights", json_real(m.fp8_weights));
    return j;
}

/* The --json summary: step time, throughput, MFU, the memory model's
 * terms, per-rank busy / idle / exposed (and their means and maxima), for
 * scripts and `loong plan`. */
static json_t *json_summary(const dag *g, const sim_result *res, const calib *cb)
{
    const config *c = dag_config(g);
    int P = config_ranks(c);
    double sum[2] = {0, 0}, mx[2] = {0, 0};
    json_t *ranks = json_array();
    for (int r = 0; r < P; r++) {
        rank_timeline tl; /* a folded DAG's unbuilt rank: its representative's */
        timeline_rank(g, res->start, res->dur, dag_rank_source(g, r), res->makespan, &tl);
        double v[2] = {tl.busy, tl.exposed};
        for (int k = 0; k < 2; k++) {
            sum[k] += v[k];
            if (v[k] > mx[k]) mx[k] = v[k];
        }
        json_array_append_new(ranks, json_pack("{s:i, s:f, s:f, s:f}", "rank", r, "busy_s", tl.busy, "idle_s", tl.idle,
                                               "exposed_s", tl.exposed));
    }
    double T = res->makespan, tokens = config_step_tokens(c);
    json_t *j = json_pack("{s:o, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:o, s:o, s:I, s:i, s:f}", "config",
                          config_to_json(c), "step_s", T, "tokens_per_s_per_gpu", T > 0 ? tokens / (T * P) : 0,
                          "mfu_pct", 100 * stats_mfu(c, T, calib_peak(cb)), "busy_mean_s", sum[0] / P, "busy_max_s",
                          mx[0], "exposed_mean_s", sum[1] / P, "exposed_max_s", mx[1], "memory_bytes",
                          simout_json_memory(c), "ranks", ranks, "tasks", (json_int_t)dag_ntasks_whole(g), "layers",
                          c->model.layers, "sim_wall_s", res->wall_s);
    if (!j) xalloc_die(0, "the JSON summary");
    return j;
}

void simout_json_fold(json_t *j, mesh_dims fold)
{
    char text[32];
    sim_fold_text(fold, text, sizeof text);
    json_object_set_new(j, "fold", json_string(text));
}

/* The memory verdict beside memory_bytes (a training step, a known GPU memory). */
void simout_json_memory_verdict(json_t *j, const config *c, const mem_check *m)
{
    if (c->scope != SCOPE_STEP || !(m->gpu_mem > 0)) return;
    json_object_set_new(j, "gpu_mem_bytes", json_real(m->gpu_mem));
    json_object_set_new(j, "oom", json_boolean(m->oom));
}

/* The summary with the perturbations it ran under, if any, and the memory verdict. */
static json_t *json_summary_of(const dag *g, const sim_result *res, const calib *cb, const sim_args *a,
                               const mem_check *m)
{
    const whatif *w = &a->w;
    json_t *j = json_summary(g, res, cb);
    simout_json_fold(j, a->fold);
    json_object_set_new(j, "calib", calib_path(cb) ? json_string(calib_path(cb)) : json_null());
    if (whatif_any(w)) json_object_set_new(j, "whatif", whatif_to_json(w));
    simout_json_memory_verdict(j, dag_config(g), m);
    return j;
}

/* A JSON summary as loong writes them: compact, 17 digits, one line. */
static int dump_json(FILE *f, json_t *j)
{
    int rc = json_dumpf(j, f, JSON_COMPACT | JSON_REAL_PRECISION(17)) == 0 && fputc('\n', f) != EOF ? 0 : -1;
    json_decref(j);
    return rc;
}

/* --trace-format kineto: DIR must be a directory to write into, or
 * creatable; checked before the work, created only at the end. */
static int kineto_dir_check(const char *dir, char err[LOONG_ERRLEN])
{
    struct stat st;
    char *copy = xstrdup(dir, "the trace directory");
    const char *bad = NULL;
    if (stat(dir, &st) == 0)
        bad = !S_ISDIR(st.st_mode) ? "exists and is not a directory" : access(dir, W_OK) ? "is not writable" : NULL;
    else if (access(dirname(copy), W_OK) != 0)
        bad = "cannot be created (its parent is missing or not writable)";
    free(copy);
    if (bad)
        snprintf(err, LOONG_ERRLEN,
                 "--trace '%.100s' %s: with --trace-format kineto give a directory for the per-rank files", dir, bad);
    return bad ? -1 : 0;
}

/* DIR/rank<N>.pt.trace.json for every rank (or only `rank`), each written
 * whole; a failure removes the ones already written. */
static int kineto_dir_write(const char *dir, const dag *g, const calib *cb, const sim_result *res, int rank,
                            char err[LOONG_ERRLEN])
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, LOONG_ERRLEN, "cannot create '%.150s': %s", dir, strerror(errno));
        return -1;
    }
    int ranks = config_ranks(dag_config(g)), r = rank >= 0 ? rank : 0, last = rank >= 0 ? rank : ranks - 1, rc = 0;
    char path[4200];
    for (; r <= last && rc == 0; r++) {
        snprintf(path, sizeof path, "%s/rank%d.pt.trace.json", dir, r);
        afile f;
        rc = afile_open(&f, path, err);
        if (rc == 0 && kineto_write_rank(f.f, g, cb, r, res->start, res->dur) < 0) {
            afile_abort(&f);
            rc = -1, snprintf(err, LOONG_ERRLEN, "write error on '%.150s'", path);
        } else if (rc == 0) {
            rc = afile_commit(&f, err);
        }
    }
    if (rc < 0)
        for (int q = rank >= 0 ? rank : 0; q < r - 1; q++) {
            snprintf(path, sizeof path, "%s/rank%d.pt.trace.json", dir, q);
            unlink(path);
        }
    return rc;
}

int simout_open(const sim_args *a, sim_outputs *o, char err[LOONG_ERRLEN])
{
    memset(o, 0, sizeof *o);
    o->table = !(a->json && !strcmp(a->json, "-") && !a->out_given);
    int rc = a->trace ? (a->kineto ? kineto_dir_check(a->trace, err) : afile_open(&o->tr, a->trace, err)) : 0;
    if (rc == 0 && o->table) rc = afile_open(&o->sm, a->out, err);
    if (rc == 0 && a->json) rc = afile_open(&o->js, a->json, err);
    if (rc < 0) {
        afile_abort(&o->tr);
        afile_abort(&o->sm);
    }
    return rc;
}

void simout_abort(sim_outputs *o)
{
    afile_abort(&o->tr);
    afile_abort(&o->sm);
    afile_abort(&o->js);
}

/* The trace, with --trace-memory each rank's memory timeline (memtrack.h)
 * as two counter tracks: "memory" {allocated}, the total, and "memory by
 * term" with one series per term of the memory model. */
static int write_trace(FILE *f, const dag *g, const sim_result *res, const sim_args *a)
{
    json_t *w = whatif_any(&a->w) ? whatif_to_json(&a->w) : NULL;
    if (!a->trace_mem) return trace_write(f, g, "sim", res->start, res->dur, &a->flt, w);
    memtrack mt;
    memtrack_build(g, res->start, res->dur, &mt);
    static const char *const total[] = {"allocated"};
    const char *terms[MT_TERMS];
    for (int k = 0; k < MT_TERMS; k++)
        terms[k] = memtrack_term_name(k);
    trace_counter *cnt = xmalloc_array(2 * (size_t)mt.nranks, sizeof *cnt, "the memory counters");
    for (int r = 0; r < mt.nranks; r++) {
        const memtrack_rank *m = &mt.r[r];
        cnt[2 * r] = (trace_counter){r, "memory", 1, total, m->n, m->t, m->total};
        cnt[2 * r + 1] = (trace_counter){r, "memory by term", MT_TERMS, terms, m->n, m->t, m->v};
    }
    int rc = trace_write_counters(f, g, "sim", res->start, res->dur, &a->flt, w, cnt, 2 * (size_t)mt.nranks);
    free(cnt);
    memtrack_free(&mt);
    return rc;
}

/* Write every output, then commit them all. */
int simout_write(const dag *g, const calib *cb, const sim_result *res, sim_args *a, sim_platform *pf,
                 const mem_check *mc, sim_outputs *o, int *bugs, char err[LOONG_ERRLEN])
{
    char *mem = NULL;
    size_t memlen = 0;
    int rc = 0;
    if (a->trace && !a->kineto && write_trace(o->tr.f, g, res, a) < 0)
        rc = -1, snprintf(err, LOONG_ERRLEN, "write error on '%s'", a->trace);
    FILE *f = o->table ? o->sm.f : open_memstream(&mem, &memlen);
    if (rc == 0 && !f) xalloc_die(0, "the summary");
    if (rc == 0) {
        write_header(f, g, cb, a, pf, mc);
        if (sim_summary_write(f, g, cb, res, a->links, bugs) < 0)
            rc = -1, snprintf(err, LOONG_ERRLEN, "write error on '%s'", a->out);
    }
    if (!o->table && f) fclose(f);
    free(mem);
    if (rc == 0 && a->json && dump_json(o->js.f, json_summary_of(g, res, cb, a, mc)) < 0)
        rc = -1, snprintf(err, LOONG_ERRLEN, "write error on '%s'", a->json);
    if (rc == 0 && a->trace && !a->kineto) rc = afile_commit(&o->tr, err);
    if (rc == 0 && a->trace && a->kineto) rc = kineto_dir_write(a->trace, g, cb, res, a->flt.rank, err);
    if (rc == 0 && o->table) rc = afile_commit(&o->sm, err);
    if (rc == 0 && a->json) rc = afile_commit(&o->js, err);
    if (rc < 0) simout_abort(o);
    return rc;
}

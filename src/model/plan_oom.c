/* plan_oom: when no layout fits, why, and the smallest change that does.
 * See plan.h. */
#include <stdio.h>
#include <stdlib.h>

#include "core/model.h"
#include "core/recompute.h"
#include "core/xalloc.h"
#include "plan.h"

int plan_leanest(const plan_layout *ls, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (ls[i].mem.reserved > 0 && (best < 0 || ls[i].mem.reserved < ls[best].mem.reserved)) best = i;
    return best;
}

/* Layouts of req that fit its memory: their count, and the leanest. */
static int fitting(const plan_request *req, double *lean_peak, char lean_name[64])
{
    int n, fit = 0;
    plan_layout *ls = plan_enumerate(req, &n);
    for (int i = 0; i < n; i++) {
        if (ls[i].removed) continue;
        if (!plan_mem_fits(&ls[i], req)) continue;
        if (fit++ == 0 || ls[i].mem.reserved < *lean_peak) {
            *lean_peak = ls[i].mem.reserved;
            snprintf(lean_name, 64, "%s", ls[i].name);
        }
    }
    free(ls);
    return fit;
}

/* The changes tried, cheapest to the user first: a recompute policy (costs
 * compute), a ZeRO stage (costs communication), both, tensor parallelism
 * when --tp fixed it, then more GPUs. */
#define FIX_MAX 16

typedef struct fix {
    char what[64];
    plan_request req;
} fix;

static int candidate_fixes(const plan_request *req, fix *f)
{
    int k = 0;
    const config *b = &req->base;
    for (int r = b->recompute + 1; !req->search_recompute && r <= RECOMPUTE_FULL; r++) {
        f[k] = (fix){"", *req};
        recompute_set(&f[k].req.base, (recompute_kind)r);
        snprintf(f[k++].what, sizeof f->what, "--recompute %s", recompute_name((recompute_kind)r));
    }
    for (int z = b->zero + 1; !req->search_zero && z <= 3; z++) {
        f[k] = (fix){"", *req};
        f[k].req.base.zero = z;
        snprintf(f[k++].what, sizeof f->what, "--zero %d", z);
    }
    if (!req->search_zero && !req->search_recompute && b->zero < 3 && b->recompute != RECOMPUTE_FULL) {
        f[k] = (fix){"", *req};
        f[k].req.base.zero = 3;
        recompute_set(&f[k].req.base, RECOMPUTE_FULL);
        snprintf(f[k++].what, sizeof f->what, "--zero 3 --recompute full");
    }
    if (req->degree[MESH_TP] != PLAN_SEARCHED) {
        f[k] = (fix){"", *req};
        f[k].req.degree[MESH_TP] = PLAN_SEARCHED;
        snprintf(f[k++].what, sizeof f->what, "tensor parallelism (drop --tp %d: plan searches it)",
                 req->degree[MESH_TP]);
    }
    for (int m = 2; m <= 8; m *= 2)
        for (int z3 = 0; z3 <= (b->zero < 3 && !req->search_zero); z3++) {
            f[k] = (fix){"", *req};
            f[k].req.gpus = req->gpus * m;
            f[k].req.degree[MESH_DP] = PLAN_SEARCHED;
            if (z3) f[k].req.base.zero = 3;
            snprintf(f[k++].what, sizeof f->what, "%d GPUs%s", req->gpus * m, z3 ? " with --zero 3" : "");
        }
    return k;
}

/* One memory term's line. */
static void term(FILE *f, const char *name, double bytes, const char *why)
{
    fprintf(f, "#   %-12s %9.1f GB  %s\n", name, bytes / 1e9, why);
}

static void write_breakdown(FILE *f, const plan_layout *l, const plan_request *req)
{
    const memory_estimate *m = &l->mem;
    const config *c = &l->c;
    char why[160];
    fprintf(f,
            "# out of memory: no layout fits in %.1f GB per GPU (%.1f GB less the %g %% margin); the leanest, %s, "
            "reserves %.1f GB:\n",
            plan_mem_limit(req) / 1e9, req->gpu_mem / 1e9, 100 * req->margin, l->name, m->reserved / 1e9);
    double params = (double)model_params_tp(&c->model, c->tp) / 1e9;
    char shard[40] = "";
    if (c->tp > 1) snprintf(shard, sizeof shard, " (a 1/%d TP shard)", c->tp);
    snprintf(why, sizeof why, "bf16, %.2fB parameters%s%s", params, shard, c->zero >= 3 ? ", sharded (ZeRO-3)" : "");
    term(f, "weights", m->weights, why);
    term(f, "gradients", m->grads,
         c->zero >= 2 ? "fp32 main gradients, sharded (ZeRO-2 and up)"
                      : "fp32 main gradients, not sharded below ZeRO-2");
    if (m->fp8_weights > 0)
        term(f, "fp8 weights", m->fp8_weights,
             "Transformer Engine's FP8 copies of the block weights and their transposes");
    term(f, "optimizer", m->optimizer,
         c->zero >= 1 ? "fp32 master, momentum, variance: sharded (ZeRO-1 and up)" : "fp32 master, momentum, variance");
    snprintf(why, sizeof why, "%d layers x %.3f GB kept for the backward, recompute %s", c->model.layers,
             m->act_per_layer / 1e9, recompute_name(c->recompute));
    term(f, "activations", m->activations, why);
    double layer = m->working + m->attn_buffers;
    snprintf(why, sizeof why, "the larger of the LM head's logits (%.1f GB) and one layer's backward (%.1f GB)",
             m->lm_head / 1e9, layer / 1e9);
    term(f, "transient", layer > m->lm_head ? layer : m->lm_head, why);
    term(f, "workspaces", m->workspace, "cuBLAS and TransformerEngine GEMM workspaces");
    term(f, "allocated", m->peak, "their sum: the tensors' peak");
    snprintf(why, sizeof why, "allocated x %.2f, the %s caching allocator's reserve", m->alloc_factor,
             req->alloc_factor > 0                       ? "measured"
             : req->allocator == MEMORY_ALLOC_EXPANDABLE ? "expandable-segments"
                                                         : "default");
    term(f, "allocator", m->allocator, why);
    term(f, "CUDA context", m->context, "lazy module loading");
    snprintf(why, sizeof why, "buffers of its communicators: tp %.2f, cp %.2f, ulysses %.2f, grads %.2f, pp %.2f GB",
             m->nccl_tp / 1e9, m->nccl_cp / 1e9, m->nccl_ulysses / 1e9, m->nccl_grad / 1e9, m->nccl_pp / 1e9);
    term(f, "NCCL", m->nccl, why);
    term(f, "reserved", m->reserved, "what the GPU reports in use");
}

int plan_write_oom(FILE *f, const plan_layout *ls, int n, const plan_request *req, char *fix_out, size_t len)
{
    int lean = plan_leanest(ls, n);
    snprintf(fix_out, len, "nothing that loong plan tries");
    if (lean < 0) return -1;
    write_breakdown(f, &ls[lean], req);
    fix *fx = xcalloc(FIX_MAX, sizeof *fx, "the plan's fixes");
    int nf = candidate_fixes(req, fx), first = 1;
    for (int i = 0; i < nf; i++) {
        double peak = 0;
        char name[64] = "";
        int fit = fitting(&fx[i].req, &peak, name);
        if (!fit) continue;
        fprintf(f, "# %s: %s (%d layout(s) fit; the leanest, %s, reserves %.1f GB)\n",
                first ? "smallest change that fits" : "also fits", fx[i].what, fit, name, peak / 1e9);
        if (first) snprintf(fix_out, len, "%s", fx[i].what);
        first = 0;
    }
    if (first)
        fprintf(f,
                "# no single change tried fits (recompute, ZeRO stage, up to 8x the GPUs): a smaller model or --seq\n");
    free(fx);
    return lean;
}

/* ---- nothing splits: the GPU count ---- */

/* Some layout of req on g GPUs gets past its shape (config_validate and
 * the global batch); *budget counts the enumerations left. */
static bool splits(const plan_request *req, int g, int *budget)
{
    if (--*budget < 0) return false;
    plan_request r = *req;
    r.gpus = g;
    int n;
    plan_layout *ls = plan_enumerate(&r, &n);
    bool any = false;
    for (int i = 0; i < n && !any; i++)
        any = !ls[i].removed;
    free(ls);
    return any;
}

/* Enumerations the diagnosis may run: each takes milliseconds. */
#define SPLIT_BUDGET 64

int plan_unsplit_reason(const plan_request *req, char *why, size_t len)
{
    int N = req->gpus, budget = SPLIT_BUDGET, d = 0, g = 0;
    for (int k = 2; k <= N && !d; k++) /* d = N / k: the largest divisor first */
        if (N % k == 0 && splits(req, N / k, &budget)) d = N / k;
    if (!d) return -1;
    for (int k = N / d - 1; k > 1 && !g; k--)
        if (splits(req, k * d, &budget)) g = k * d;
    if (!g) g = d;
    int r = N / d;
    const config *b = &req->base;
    char seq[32], none[LOONG_ERRLEN] = "";
    units_fmt_count(b->seq, seq, sizeof seq);
    size_t k = 0;
    /* the quantities the rest would have to divide: say those it does not */
    if (b->seq % (uint64_t)r) k += (size_t)snprintf(none + k, sizeof none - k, ", the %s-token sequence (P_s)", seq);
    if (b->model.heads % r && k < sizeof none)
        k += (size_t)snprintf(none + k, sizeof none - k, ", the %d query heads (tp, P_h)", b->model.heads);
    if (req->global_batch && (req->global_batch / b->batch) % r && k < sizeof none)
        snprintf(none + k, sizeof none - k, ", the global batch of %d samples (dp)", req->global_batch / b->batch);
    if (none[0])
        snprintf(why, len,
                 "%d GPUs = %d x %d, and %d divides none of%s: no layout splits the %d over its dimensions; "
                 "use --gpus %d, the most GPUs up to %d that split",
                 N, d, r, r, none + 1, r, g, N);
    else
        snprintf(why, len,
                 "%d GPUs = %d x %d, and no layout splits the %d over its dimensions; use --gpus %d, the most "
                 "GPUs up to %d that split",
                 N, d, r, r, g, N);
    return 0;
}

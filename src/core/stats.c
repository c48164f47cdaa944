/* stats: FLOP/byte accounting, model FLOPs and MFU. See stats.h. */
#include "stats.h"

#include <string.h>

#include "docs.h"
#include "shard.h"

static void add_bytes(const config *c, rank_stats *st, int from, int to, uint64_t bytes)
{
    if (config_node(c, from) == config_node(c, to))
        st->bytes_intra += bytes;
    else
        st->bytes_inter += bytes;
}

static void collective_bytes(const dag *g, const dag_task *t, rank_stats *st)
{
    const config *c = dag_config(g);
    int n;
    const int32_t *mem = dag_group(g, t->group, &n);
    if (n < 2) return;
    int me = 0;
    while (mem[me] != t->rank)
        me++;
    if (t->kind == TASK_ALLTOALL) {
        for (int k = 0; k < n; k++)
            if (k != me) add_bytes(c, st, t->rank, mem[k], t->bytes / (uint64_t)(n - 1));
    } else {
        add_bytes(c, st, t->rank, mem[(me + 1) % n], t->bytes);
    }
}

void stats_compute(const dag *g, rank_stats *out)
{
    const config *c = dag_config(g);
    memset(out, 0, (size_t)config_ranks(c) * sizeof *out);
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        rank_stats *st = &out[t->rank];
        st->tasks++;
        st->by_kind[t->kind]++;
        if (t->kind <= TASK_ACC) st->flops += t->flops; /* the elementwise kernels' field holds elements */
        if (t->kind == TASK_ATTN_FWD || t->kind == TASK_ATTN_BWD) st->flops_attn += t->flops;
        if (t->kind == TASK_ATTN_FWD) st->flops_attn_fwd += t->flops;
        if (t->kind == TASK_GEMM) st->flops_gemm += t->flops;
        if (t->kind == TASK_SEND) add_bytes(c, st, t->rank, t->peer, t->bytes);
        if (task_is_collective(t)) collective_bytes(g, t, st);
    }
}

/* One block's weights at tp 1, dense or a mixture of experts' (0 when the
 * model has no block of that kind). */
static uint64_t block_params(const model *m, bool moe)
{
    if (!model_moe(m)) return moe ? 0 : model_block_params_tp(m, 1, 0);
    int l = model_first_block(m, moe);
    return l < 0 ? 0 : model_block_params_tp(m, 1, l);
}

double stats_model_flops(const config *c)
{
    const model *m = &c->model;
    double B = c->batch, S = (double)c->seq, H = m->heads, d = m->head_dim;
    double sq = S * S; /* with documents, the same half-square per document */
    if (c->docs) {
        sq = 0;
        for (int i = 0; i < docs_count(c->docs); i++)
            sq += (double)docs_length(c->docs, i) * (double)docs_length(c->docs, i);
    }
    double attn_fwd = 2 * B * sq * H * d;
    if (c->scope == SCOPE_ATTN_FWD) return attn_fwd;
    if (c->scope == SCOPE_ATTN) return 3 * attn_fwd;
    /* the GEMM weights a token goes through in a dense block and in a
     * mixture of experts' (its top-k experts) */
    double hid = m->hidden, norms = (double)(2 * (uint64_t)m->hidden + model_layer_bias_params_tp(m, 1));
    double wd = (double)block_params(m, false) - norms;
    double wm = (double)block_params(m, true) - norms + (double)m->top_k * 3 * hid * m->expert_ffn;
    int nm = model_moe_blocks(m), nd = m->layers - nm;
    /* in floating point: m micro-batches of a 405B model pass 2^64 */
    return c->micro_batches *
           (nd * (6 * B * S * wd + 3 * attn_fwd) + nm * (6 * B * S * wm + 3 * attn_fwd) + 6 * B * S * hid * m->vocab);
}

double stats_mfu(const config *c, double step_seconds, double peak_flops_per_gpu)
{
    if (step_seconds <= 0 || peak_flops_per_gpu <= 0) return 0;
    return (double)stats_model_flops(c) / (step_seconds * config_ranks(c) * peak_flops_per_gpu);
}

static void print_summary(FILE *f, const dag *g, const rank_stats *rs)
{
    const config *c = dag_config(g);
    int P = config_ranks(c);
    double amin = (double)rs[0].flops_attn, amax = 0;
    double total = 0, sum_attn = 0; /* over every rank: beyond 2^64 at scale */
    for (int r = 0; r < P; r++) {
        double a = (double)rs[r].flops_attn;
        amin = a < amin ? a : amin;
        amax = a > amax ? a : amax;
        total += (double)rs[r].flops;
        sum_attn += (double)rs[r].flops_attn;
    }
    fprintf(f, "# attention per rank: min %.3f max %.3f mean %.3f GFLOP; max/min %.4f, max/mean %.4f (1 = balanced)\n",
            amin / 1e9, amax / 1e9, sum_attn / 1e9 / P, amin ? amax / amin : 0.0, sum_attn ? amax * P / sum_attn : 0.0);
    const shard_map *m = shard_map_of(c);
    uint64_t pmax = 0, ptotal = 0;
    for (int s = 0; s < c->p_seq; s++) {
        uint64_t n = shard_query_pairs(m, s);
        pmax = n > pmax ? n : pmax;
        ptotal += n;
    }
    fprintf(f,
            "# unmasked (query, key) pairs per sample: %.6g over %d document(s), partition %s; per ring index "
            "max/mean %.4f\n",
            (double)ptotal, docs_count(c->docs), partition_name(c->partition),
            ptotal ? (double)pmax * c->p_seq / (double)ptotal : 0.0);
    fprintf(f, "# model FLOPs (MFU numerator): %.3f TFLOP; task FLOPs, all ranks: %.3f TFLOP\n",
            stats_model_flops(c) / 1e12, total / 1e12);
}

void stats_print(FILE *f, const dag *g, const rank_stats *rs)
{
    const config *c = dag_config(g);
    char desc[256];
    config_describe(c, desc, sizeof desc);
    fprintf(f, "# loong dag: %s\n", desc);
    fprintf(f, "# %u tasks on %d ranks; KV heads per rank %d (replication x%d), query heads per rank %d\n",
            dag_ntasks(g), config_ranks(c), config_kv_heads(c), config_kv_repl(c) * config_tp_kv_repl(c),
            config_q_heads(c));
    bool tp = c->tp > 1; /* a tp column only when there is TP */
    fprintf(f, "#%5s %5s %4s %s%5s %5s %8s %8s %8s %12s %13s %13s %14s %14s %15s\n", "rank", "node", "gpu",
            tp ? "   tp " : "", "head", "ring", "tasks", "p2p", "colls", "pairs_M", "attn_GFLOP", "gemm_GFLOP",
            "total_GFLOP", "intra_MB", "inter_MB");
    const shard_map *m = shard_map_of(c);
    for (int r = 0; r < config_ranks(c); r++) {
        int h, s;
        config_coords(c, r, &h, &s);
        const rank_stats *st = &rs[r];
        uint32_t p2p = st->by_kind[TASK_SEND] + st->by_kind[TASK_RECV];
        uint32_t coll = st->tasks - p2p;
        for (int k = 0; k <= TASK_COMPUTE_LAST; k++)
            coll -= st->by_kind[k];
        char tpc[16] = "";
        if (tp) snprintf(tpc, sizeof tpc, "%5d ", config_tp_rank(c, r));
        fprintf(f, " %5d %5d %4d %s%5d %5d %8u %8u %8u %12.3f %13.3f %13.3f %14.3f %14.3f %15.3f\n", r,
                config_node(c, r), config_gpu(c, r), tpc, h, s, st->tasks, p2p, coll, shard_query_pairs(m, s) / 1e6,
                (double)st->flops_attn / 1e9, (double)st->flops_gemm / 1e9, (double)st->flops / 1e9,
                (double)st->bytes_intra / 1e6, (double)st->bytes_inter / 1e6);
    }
    print_summary(f, g, rs);
}

/* DAG builder: load balance, conservation, byte counts against closed forms,
 * structure and determinism. Expected values are computed here from the
 * formulas of DESIGN.md, never copied from the program's output. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/pipeline.h"
#include "core/elementwise.h"
#include "core/recompute.h"
#include "dag_util.h"
#include "check_run.h"

#define K 1024ull

/* ---- load balance ---- */

START_TEST(zigzag_balanced)
{
    static const int ps[] = {2, 4, 8, 16, 32, 64};
    int P = ps[_i];
    for (int sc = SCOPE_ATTN_FWD; sc <= SCOPE_ATTN; sc++) {
        config c = tcfg("tiny", 64 * K, "zigzag", 1, P, 0, (scope_kind)sc);
        dag *g = tbuild(&c);
        uint64_t f0 = sum_flops(g, 0, TASK_ATTN_FWD), b0 = sum_flops(g, 0, TASK_ATTN_BWD);
        ck_assert_uint_gt(f0, 0);
        for (int r = 1; r < P; r++) {
            ck_assert_uint_eq(sum_flops(g, r, TASK_ATTN_FWD), f0);
            ck_assert_uint_eq(sum_flops(g, r, TASK_ATTN_BWD), b0);
        }
        dag_free(g);
    }
}
END_TEST

START_TEST(contiguous_imbalance)
{
    static const int ps[] = {2, 4, 8, 16, 32, 64};
    int P = ps[_i];
    config c = tcfg("tiny", 64 * K, "ring", 1, P, 0, SCOPE_ATTN);
    dag *g = tbuild(&c);
    /* rank r holds r full c x c blocks and one causal diagonal of
     * c(c+1)/2 (query, key) pairs; 4*d FLOPs per pair and head */
    uint64_t ch = c.seq / (uint64_t)P, per_pair = 4 * (uint64_t)c.model.head_dim * (uint64_t)c.model.heads;
    for (int r = 0; r < P; r++) {
        uint64_t pairs = (uint64_t)r * ch * ch + ch * (ch + 1) / 2;
        ck_assert_uint_eq(sum_flops(g, r, TASK_ATTN_FWD), pairs * per_pair);
        ck_assert_uint_eq(sum_flops(g, r, TASK_ATTN_BWD), pairs * per_pair * 5 / 2);
    }
    dag_free(g);
}
END_TEST

/* ---- conservation over the strategy x mesh matrix ---- */

typedef struct layout {
    const char *model, *strategy;
    int ph, ps, w;
} layout;

static const layout matrix[] = {
    {"tiny", "ulysses", 8, 1, 0},      {"tiny", "ring", 1, 8, 0},       {"tiny", "zigzag", 1, 8, 0},
    {"tiny", "usp", 2, 4, 0},          {"tiny", "usp", 4, 2, 0},        {"tiny", "loongtrain", 2, 4, 1},
    {"tiny", "loongtrain", 2, 4, 2},   {"tiny", "loongtrain", 2, 4, 4}, {"tiny", "loongtrain", 4, 2, 2},
    {"tiny", "dualring", 2, 4, 0},     {"tiny", "dualring", 4, 2, 0},   {"tiny", "loongtrain", 8, 2, 1},
    {"7b-mha", "loongtrain", 4, 8, 2}, {"llama3-8b", "usp", 16, 2, 0},  {"llama3-8b", "loongtrain", 8, 8, 4},
    {"llama3-8b", "ring", 1, 16, 0},   {"tiny", "allgather", 2, 4, 0},  {"llama3-8b", "allgather", 8, 4, 0},
};
#define NMATRIX ((int)(sizeof matrix / sizeof matrix[0]))

START_TEST(attention_conserved)
{
    const layout *L = &matrix[_i];
    config c = tcfg(L->model, 16 * K, L->strategy, L->ph, L->ps, L->w, SCOPE_ATTN);
    dag *g = tbuild(&c);
    const model *m = &c.model;
    uint64_t S = c.seq, H = (uint64_t)m->heads, d = (uint64_t)m->head_dim;
    /* single-device causal attention: S(S+1)/2 (query, key) pairs of 4*H*d
     * FLOPs forward; FA2 backward 2.5x */
    ck_assert_uint_eq(sum_flops(g, -1, TASK_ATTN_FWD), 2 * S * (S + 1) * H * d);
    ck_assert_uint_eq(sum_flops(g, -1, TASK_ATTN_BWD), 5 * S * (S + 1) * H * d);
    dag_free(g);
}
END_TEST

/* MLA (Megatron-Core's MultiLatentAttention, build.c's qkv_gemms) on a
 * tiny MLA model: H = 8 heads, hidden 256, q_lora 64, kv_lora 32, nope
 * 32, rope 16, v 32 (head_dim = the mean, (48 + 32) / 2 = 40), S = 8K on
 * a ring of 4 (T = N = 2K tokens a rank). Per layer:
 *   the four projections forward, over all ranks: 2 S (hid ql + ql H
 *   (nope + rope) + hid (kl + rope) + kl H (nope + v));
 *   the latents' RMSNorms, forward and backward: S (ql + kl) elements;
 *   attention forward: S(S+1)/2 pairs of 2 H (d_qk + d_v) FLOPs (QK^T
 *   at d_qk, PV at d_v), backward 2.5x;
 *   the ring's KV block, K at d_qk and V at d_v for every head, expanded
 *   as Megatron's CP passes it: N H (d_qk + d_v) x 2 bytes (bf16). */
START_TEST(mla_closed_forms)
{
    config c = tcfg("tiny", 8 * K, "ring", 1, 4, 0, SCOPE_STEP);
    model *m = &c.model;
    m->layers = 1, m->kv_heads = m->heads, m->head_dim = 40;
    m->q_lora = 64, m->kv_lora = 32, m->qk_nope = 32, m->qk_rope = 16, m->v_dim = 32;
    dag *g = tbuild(&c);
    uint64_t S = c.seq, H = 8, hid = 256, N = S / 4, dqk = 48, dv = 32;
    uint64_t proj = 2 * S * (hid * 64 + 64 * H * dqk + hid * (32 + 16) + 32 * H * (32 + dv)), qkv = 0;
    uint64_t latent[2] = {0, 0}; /* the latents' norms, forward and backward: S (q_lora + kv_lora) elements each */
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->op == OP_QKV && t->phase == PHASE_FWD) qkv += t->flops;
        if (t->op == OP_NORM_LATENT) latent[t->phase == PHASE_BWD] += t->flops;
        if (t->op == OP_KV && t->kind == TASK_SEND && t->phase == PHASE_FWD)
            ck_assert_uint_eq(t->bytes, N * H * (dqk + dv) * 2);
    }
    ck_assert_uint_eq(qkv, proj);
    ck_assert_uint_eq(latent[0], S * (64 + 32));
    ck_assert_uint_eq(latent[1], S * (64 + 32));
    ck_assert_uint_eq(sum_flops(g, -1, TASK_ATTN_FWD), S * (S + 1) * H * (dqk + dv));
    ck_assert_uint_eq(sum_flops(g, -1, TASK_ATTN_BWD), 5 * S * (S + 1) * H * (dqk + dv) / 2);
    dag_free(g);
}
END_TEST

START_TEST(step_gemms_conserved)
{
    config c = tcfg("llama3-8b", 32 * K, "loongtrain", 8, 4, 2, SCOPE_STEP);
    c.model.layers = 2; /* the per-layer closed form does not depend on L */
    dag *g = tbuild(&c);
    const model *m = &c.model;
    uint64_t S = c.seq, hid = (uint64_t)m->hidden, d = (uint64_t)m->head_dim;
    uint64_t wl =
        hid * (uint64_t)(m->heads + 2 * m->kv_heads) * d + (uint64_t)m->heads * d * hid + 3 * hid * (uint64_t)m->ffn;
    uint64_t fwd = 2 * S * (wl * (uint64_t)m->layers + hid * (uint64_t)m->vocab);
    uint64_t gemm = sum_flops(g, -1, TASK_GEMM);
    ck_assert_uint_eq(gemm, 3 * fwd); /* forward + backward at 2x */
    ck_assert_double_eq(stats_model_flops(&c),
                        (double)(3 * fwd + (uint64_t)m->layers * 6 * S * S * (uint64_t)m->heads * d));
    dag_free(g);
}
END_TEST

/* Experts every other block past a dense first one (DeepSeek's
 * first_k_dense_replace 1, moe_layer_freq 2: experts in blocks 2 and 4 of
 * 6): a block runs the router, the experts' grouped GEMMs and the
 * dispatch all-to-alls where model_block_moe says, the dense MLP's gate
 * elsewhere, on every rank and both passes, over two pipeline stages. */
START_TEST(moe_interleaved_blocks)
{
    config c = tcfg("tiny-moe", 4 * K, "loongtrain", 2, 2, 2, SCOPE_STEP);
    c.model.layers = 6, c.model.dense_layers = 1, c.model.moe_freq = 2;
    c.ep = 2, c.pp = 2, c.micro_batches = 2;
    char err[LOONG_ERRLEN] = "";
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    dag *g = tbuild(&c);
    int n = config_ranks(&c), seen[6][4] = {{0}}; /* per block: router, expert GEMM, dispatch, dense gate */
    for (uint32_t id = 0; id < dag_ntasks(g); id++) {
        const dag_task *t = dag_task_get(g, id);
        if (t->layer < 0) continue;
        seen[t->layer][0] += t->op == OP_ROUTER;
        seen[t->layer][1] += t->op == OP_EXPERT_GATE;
        seen[t->layer][2] += t->op == OP_EP_DISPATCH;
        seen[t->layer][3] += t->op == OP_MLP_GATE;
    }
    for (int l = 0; l < 6; l++) {
        bool moe = l == 2 || l == 4;
        ck_assert_int_eq(model_block_moe(&c.model, l), moe);
        /* each rank's stage holds the block: its micro-batches, forward and backward */
        for (int k = 0; k < 3; k++)
            ck_assert_msg(moe ? seen[l][k] >= n / c.pp * c.micro_batches : seen[l][k] == 0, "block %d, kind %d: %d", l,
                          k, seen[l][k]);
        ck_assert_msg(moe ? seen[l][3] == 0 : seen[l][3] >= n / c.pp * c.micro_batches, "block %d: %d dense gates", l,
                      seen[l][3]);
    }
    dag_free(g);
}
END_TEST

/* Mixture of experts (build_ep.c, config_ep.c), tiny-moe (E = 8 experts,
 * top-2, width F = 128) on a 2x2 context mesh, T = S/P tokens per rank,
 * T' = T/tp under sequence parallelism, R = T' k routed rows per rank:
 *   dispatch bytes per rank, balanced: R (ep-1)/ep rows of hidden;
 *   grouped-GEMM FLOPs per rank and block, forward: the T k rows its
 *   experts compute (ep R / ep gathered over tp) through gate, up and
 *   down, 3 x 2 T k hidden F/tp; backward twice that;
 *   under zipf:1 the EP rank i's share is the sum over its experts e of
 *   1/(e+1) over H_8 = 761/280, its experts' rows ep R share(i) tp, and
 *   the imbalance ep x max share = 4 (1 + 1/2) 280/761 at ep 4;
 *   every rank's dispatch goes to someone's combine: the group's total
 *   dispatched rows equal its total combined rows (any routing);
 *   the EP group is ep consecutive context ranks of one TP rank; the
 *   experts' all-reduce (ZeRO 0) runs over the P/ep ranks at the same
 *   place of each EP group, 2(n-1) ceil(E/ep 3 hidden F/tp 4 / n) bytes. */
START_TEST(moe_closed_forms)
{
    int ep = _i % 2 ? 4 : 2, tp = _i / 2 % 2 ? 2 : 1;
    bool zipf = _i >= 4 && _i < 8, across = _i >= 8; /* across: EP over 2 of 4 replicas of P = 2 (ep 4) */
    config c = tcfg("tiny-moe", 4 * K, "loongtrain", 2, 2, 2, SCOPE_STEP);
    if (across) c.p_head = 1, c.dp = 4, c.window = 2, ep = 4;
    c.ep = ep, c.tp = tp, c.zero = 0;
    if (zipf) c.routing_zipf = 1;
    char err[LOONG_ERRLEN] = "";
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    dag *g = tbuild(&c);
    const model *m = &c.model;
    int P = config_cp(&c);
    uint64_t T = c.seq / (uint64_t)P, Tsp = T / (uint64_t)tp, k = (uint64_t)m->top_k, hid = (uint64_t)m->hidden;
    uint64_t F = (uint64_t)m->expert_ffn / (uint64_t)tp, L = (uint64_t)m->layers, R = Tsp * k, a = 2;
    double H8 = 761.0 / 280;
    if (zipf && ep == 4) ck_assert_double_eq_tol(config_ep_imbalance(&c), 4 * 1.5 / H8, 1e-12);
    uint64_t dispatched = 0, combined = 0;
    for (int r = 0; r < config_ranks(&c); r++) {
        int i = config_ep_rank(&c, r);
        double share = 0;
        for (int e = i * m->experts / ep; e < (i + 1) * m->experts / ep; e++)
            share += 1.0 / (e + 1) / H8;
        if (!zipf) share = 1.0 / ep;
        uint64_t rows = (uint64_t)ep * (uint64_t)llround((double)R * share) * (uint64_t)tp, gemm_f = 0, gemm_b = 0;
        for (uint32_t id = 0; id < dag_ntasks(g); id++) {
            const dag_task *t = dag_task_get(g, id);
            if (t->rank != r) continue;
            bool expert = t->op == OP_EXPERT_GATE || t->op == OP_EXPERT_UP || t->op == OP_EXPERT_DOWN;
            if (expert && t->phase == PHASE_FWD) gemm_f += t->flops;
            if (expert && t->phase == PHASE_BWD) gemm_b += t->flops;
            if (expert) ck_assert_int_eq(dag_gemm_groups(t), m->experts / ep);
            if (t->stream == STREAM_EP && t->phase == PHASE_FWD) {
                int n, stride, count;
                const int32_t *mem = dag_group(g, t->group, &n);
                dag_group_replicas(g, t->group, &stride, &count);
                ck_assert_int_eq(n * count, ep); /* across replicas: the DAG's P members in ep / P replicas */
                ck_assert_int_eq(stride, 1);
                for (int j = 0; j < n; j++)
                    ck_assert_int_eq(config_ep_rank(&c, mem[j]), j);
                if (t->op == OP_EP_DISPATCH) dispatched += t->bytes;
                if (t->op == OP_EP_COMBINE) combined += t->bytes;
                if (t->op == OP_EP_DISPATCH && !zipf)
                    ck_assert_uint_eq(t->bytes, R * (uint64_t)(ep - 1) / (uint64_t)ep * hid * a);
            }
            if (t->stream == STREAM_EP_GRAD) { /* dp P / ep ranks; sized for the DAG's, or dp with one */
                uint64_t size = (uint64_t)m->experts / (uint64_t)ep * 3 * hid * F * 4;
                int members, stride, count;
                dag_group(g, t->group, &members);
                dag_group_replicas(g, t->group, &stride, &count);
                ck_assert_int_gt(c.dp * P / ep, 1); /* none when each rank holds its own experts */
                ck_assert_int_eq(members * count, c.dp * P / ep);
                uint64_t n = members > 1 ? (uint64_t)members : (uint64_t)c.dp;
                ck_assert_uint_eq(t->bytes, 2 * (n - 1) * ((size + n - 1) / n));
            }
        }
        ck_assert_uint_eq(gemm_f, L * 3 * 2 * rows * hid * F);
        ck_assert_uint_eq(gemm_b, 2 * gemm_f);
        if (!zipf) ck_assert_uint_eq(rows, T * k);
    }
    ck_assert_uint_eq(dispatched, combined);
    dag_free(g);
}
END_TEST

/* Expert TP below TP (Megatron's MoE parallel folding, --expert-tp):
 * the expert layers number a stage's ranks g = e + etp (j + ep d) where
 * attention numbers them g = t + tp i, so with u = t / etp + (tp / etp) i
 * an EP group is ep consecutive u at one e = t mod etp. Checked: every EP
 * group (its replicas' members included) holds ep ranks of one e, EP
 * ranks 0 .. ep-1 in member order, consecutive u; the groups cover each
 * (rank, replica) once; balanced dispatch bytes R (ep-1)/ep rows of
 * hidden, R = (T/tp) k; the experts' GEMM FLOPs over all ranks of a
 * replica 6 L P T k hidden F (each routed row once, at full width F: the
 * rows gathered over etp, the width split by it); expert-TP collectives
 * over etp ranks (none at etp 1); the expert-data-parallel group of
 * tp P dp / (etp ep) ranks; and ep etp ranks holding every expert's
 * weights once. */
START_TEST(moe_expert_tp)
{
    static const struct {
        const char *model;
        int ph, ps, tp, etp, ep, dp;
    } cases[] = {{"tiny-moe", 2, 2, 2, 1, 8, 1},
                 {"tiny-moe", 2, 2, 2, 1, 4, 1},
                 {"tiny-moe", 1, 2, 2, 1, 8, 4},
                 {"mixtral-8x7b", 1, 2, 4, 2, 4, 1},
                 {"mixtral-8x7b", 1, 2, 4, 1, 2, 2}};
    const int i = _i;
    config c = tcfg(cases[i].model, 4 * K, "loongtrain", cases[i].ph, cases[i].ps, cases[i].ps, SCOPE_STEP);
    c.model.layers = 2;
    c.tp = cases[i].tp, c.etp = cases[i].etp, c.ep = cases[i].ep, c.dp = cases[i].dp, c.zero = 0;
    char err[LOONG_ERRLEN] = "";
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    ck_assert(config_ep_spans_tp(&c));
    dag *g = tbuild(&c);
    const model *m = &c.model;
    mesh msh = config_mesh(&c);
    int P = config_cp(&c), tp = c.tp, etp = c.etp, ep = c.ep, world = config_ranks(&c) * c.dp;
    uint64_t T = c.seq / (uint64_t)P, R = T / (uint64_t)tp * (uint64_t)m->top_k, hid = (uint64_t)m->hidden;
    uint64_t F = (uint64_t)m->expert_ffn, L = (uint64_t)m->layers, expert_flops = 0;
    int *covered = calloc((size_t)world, sizeof *covered);
    for (uint32_t id = 0; id < dag_ntasks(g); id++) {
        const dag_task *t = dag_task_get(g, id);
        if (t->op == OP_EXPERT_GATE || t->op == OP_EXPERT_UP || t->op == OP_EXPERT_DOWN)
            expert_flops += t->phase == PHASE_FWD ? t->flops : 0;
        if (t->op == OP_TP_EXPERT) {
            int n;
            dag_group(g, t->group, &n);
            ck_assert_int_eq(n, etp);
        }
        if (t->stream == STREAM_EP_GRAD) {
            int n, stride, count;
            dag_group(g, t->group, &n);
            dag_group_replicas(g, t->group, &stride, &count);
            ck_assert_int_eq(n * (count ? count : c.dp), tp * P * c.dp / (etp * ep));
        }
        if (t->stream != STREAM_EP || t->op != OP_EP_DISPATCH || t->phase != PHASE_FWD || t->layer != 0) continue;
        ck_assert_uint_eq(t->bytes, R * (uint64_t)(ep - 1) / (uint64_t)ep * hid * 2);
        int n, stride, count;
        const int32_t *mem = dag_group(g, t->group, &n);
        dag_group_replicas(g, t->group, &stride, &count);
        int reps = count ? count : 1, base = mesh_group_index(&msh, MESH_DIMS_DP, t->rank) / reps * reps, prev = -1;
        ck_assert_int_eq(n * reps, ep);
        for (int r = 0; r < reps; r++)
            for (int j = 0; j < n; j++) {
                int gr = mesh_unfold(&msh, MESH_DIMS_DP, mem[j], base + r * (count ? stride : 0));
                int tr = mesh_group_index(&msh, CONFIG_TP_DIMS, gr);
                int u = tr / etp + tp / etp * mesh_group_index(&msh, CONFIG_GRAD_DIMS, gr);
                ck_assert_int_eq(tr % etp, mesh_group_index(&msh, CONFIG_TP_DIMS, t->rank) % etp);
                ck_assert_int_eq(config_ep_rank(&c, gr), r * n + j);
                ck_assert(prev < 0 || u == prev + 1);
                prev = u;
                if (mem[0] == t->rank) covered[gr]++; /* once per group: its first member's task */
            }
    }
    for (int r = 0; r < world; r++) /* the DAG's replica 0 and the replicas its groups span */
        ck_assert_int_le(covered[r], 1);
    ck_assert_uint_eq(expert_flops, L * 3 * 2 * (uint64_t)P * T * (uint64_t)m->top_k * hid * F);
    ck_assert_uint_eq((uint64_t)ep * (uint64_t)etp * config_ep_expert_params(&c), (uint64_t)m->experts * 3 * hid * F);
    ck_assert_int_eq(config_edp(&c), tp * P * c.dp / (etp * ep));
    free(covered);
    dag_free(g);
}
END_TEST

/* --shared-expert-overlap (Megatron's --moe-shared-expert-overlap, the
 * shared experts on their own stream beside the all-to-alls): the same
 * tasks, kind by kind in count and FLOPs, as without; on each rank's
 * compute stream the shared experts' gate and up of a block come after
 * its dispatch is issued and before its first expert GEMM, their down
 * after the combine and before the unpermute; without, all three after
 * the unpermute. At tp 1 and 2. */
static int position(const dag *g, const uint32_t *ids, uint32_t n, int layer, task_phase ph, task_op op)
{
    for (uint32_t i = 0; i < n; i++) {
        const dag_task *t = dag_task_get(g, ids[i]);
        if (t->layer == layer && t->phase == ph && t->op == op) return (int)i;
    }
    return -1;
}

/* The compute-stream position of the first task of rank 0's block 0 that
 * an EP-stream task of op follows: the compute tasks issued before it. */
static int after_a2a(const dag *g, task_op op)
{
    uint32_t n, m;
    const uint32_t *comp = dag_stream_tasks(g, 0, STREAM_COMP, &n), *ep = dag_stream_tasks(g, 0, STREAM_EP, &m);
    uint32_t id = DAG_NONE;
    for (uint32_t i = 0; i < m && id == DAG_NONE; i++)
        if (dag_task_get(g, ep[i])->op == op && dag_task_get(g, ep[i])->phase == PHASE_FWD &&
            dag_task_get(g, ep[i])->layer == 0)
            id = ep[i];
    ck_assert_uint_ne(id, DAG_NONE);
    for (uint32_t i = 0; i < n; i++)
        if (comp[i] > id) return (int)i; /* a rank's tasks are numbered in issue order */
    return (int)n;
}

START_TEST(moe_shared_overlap)
{
    config c = tcfg("tiny-moe", 4 * K, "loongtrain", 2, 2, 2, SCOPE_STEP);
    c.model.shared_ffn = 256, c.ep = 4, c.tp = 1 + _i, c.zero = 0;
    char err[LOONG_ERRLEN] = "";
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    config o = c;
    o.shared_overlap = true;
    ck_assert_msg(config_validate(&o, err) == 0, "%s", err);
    dag *a = tbuild(&c), *b = tbuild(&o);
    for (int k = 0; k < TASK_KIND_COUNT; k++) {
        ck_assert_uint_eq(count_tasks(a, -1, (task_kind)k, -1), count_tasks(b, -1, (task_kind)k, -1));
        ck_assert_uint_eq(sum_flops(a, -1, (task_kind)k), sum_flops(b, -1, (task_kind)k));
    }
    for (int w = 0; w < 2; w++) {
        const dag *g = w ? b : a;
        uint32_t n;
        const uint32_t *comp = dag_stream_tasks(g, 0, STREAM_COMP, &n);
        int gate = position(g, comp, n, 0, PHASE_FWD, OP_MLP_GATE),
            down = position(g, comp, n, 0, PHASE_FWD, OP_MLP_DOWN);
        int expert = position(g, comp, n, 0, PHASE_FWD, OP_EXPERT_GATE),
            unperm = position(g, comp, n, 0, PHASE_FWD, OP_UNPERMUTE);
        ck_assert(gate >= 0 && down >= 0 && expert >= 0 && unperm >= 0);
        if (w) {
            ck_assert_int_ge(gate, after_a2a(g, OP_EP_DISPATCH));
            ck_assert_int_lt(gate, expert);
            ck_assert_int_ge(down, after_a2a(g, OP_EP_COMBINE));
            ck_assert_int_lt(down, unperm);
        } else {
            ck_assert_int_gt(gate, unperm);
            ck_assert_int_gt(down, unperm);
        }
    }
    dag_free(a);
    dag_free(b);
}
END_TEST

/* The all-gather dispatcher (--dispatcher allgather; Megatron's
 * MoEAllGatherTokenDispatcher): no all-to-all; per block and rank one
 * all-gather and one reduce-scatter on the ep stream each way, over the
 * expert-TP x EP group of etp ep ranks (its replicas' members included:
 * the EP group's ranks at every expert-TP rank), of Ga = etp ep T/tp rows
 * of hidden on the gathered side (ring bytes (G-1) ceil(Ga hidden a / n)
 * for the DAG's n members); no expert-TP collectives; the experts' GEMMs
 * the all-to-all dispatcher's, FLOP for FLOP on every rank. Expert TP at
 * and below TP, EP inside a replica and across two. */
START_TEST(moe_allgather_dispatch)
{
    static const struct {
        int ph, ps, tp, etp, ep, dp;
    } cases[] = {{2, 2, 1, 0, 4, 1}, {1, 2, 2, 0, 2, 1}, {1, 2, 2, 1, 4, 1}, {1, 2, 2, 0, 4, 2}};
    config c = tcfg("tiny-moe", 4 * K, "loongtrain", cases[_i].ph, cases[_i].ps, cases[_i].ps, SCOPE_STEP);
    c.tp = cases[_i].tp, c.etp = cases[_i].etp, c.ep = cases[_i].ep, c.dp = cases[_i].dp, c.zero = 0;
    config g2a = c;
    c.dispatcher = DISPATCH_ALLGATHER;
    char err[LOONG_ERRLEN] = "";
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    dag *g = tbuild(&c), *a2a = tbuild(&g2a);
    const model *m = &c.model;
    mesh msh = config_mesh(&c);
    int P = config_cp(&c), etp = config_etp(&c), G = etp * c.ep, blocks = m->layers;
    uint64_t Ga = c.seq / (uint64_t)P / (uint64_t)c.tp * (uint64_t)G, hid = (uint64_t)m->hidden;
    for (int r = 0; r < config_ranks(&c); r++) {
        ck_assert_uint_eq(sum_flops(g, r, TASK_GEMM), sum_flops(a2a, r, TASK_GEMM));
        int ag = 0, rs = 0;
        for (uint32_t id = 0; id < dag_ntasks(g); id++) {
            const dag_task *t = dag_task_get(g, id);
            if (t->rank != r) continue;
            ck_assert_int_ne(t->op, OP_TP_EXPERT);
            if (t->stream != STREAM_EP || t->phase == PHASE_REDUCE) continue;
            ck_assert_int_ne(t->kind, TASK_ALLTOALL);
            int n, stride, count, at[8] = {0};
            const int32_t *mem = dag_group(g, t->group, &n);
            dag_group_replicas(g, t->group, &stride, &count);
            ck_assert_int_eq(n * (count ? count : 1), G);
            for (int k = 0; k < (count ? count : 1); k++) /* the replicas' members: etp at each EP rank */
                for (int j = 0; j < n; j++)
                    at[config_ep_rank(&c, mesh_unfold(&msh, MESH_DIMS_DP, mem[j], k * (count ? stride : 0)))]++;
            for (int j = 0; j < c.ep; j++)
                ck_assert_int_eq(at[j], etp);
            uint64_t nn = n > 1 ? (uint64_t)n : (uint64_t)c.dp;
            ck_assert_uint_eq(t->bytes, (nn - 1) * ((Ga * hid * 2 + nn - 1) / nn));
            ag += t->kind == TASK_ALLGATHER, rs += t->kind == TASK_REDUCESCATTER;
        }
        ck_assert_int_eq(ag, 2 * blocks);
        ck_assert_int_eq(rs, 2 * blocks);
    }
    dag_free(g);
    dag_free(a2a);
}
END_TEST

/* A capacity factor C (Megatron's --moe-expert-capacity-factor): each
 * expert takes at most ceil(C R / E) of a rank's R routed rows, so under
 * zipf:1 (E = 8, top-2) EP rank j draws sum over its experts of
 * min(R (1/(e+1)) / H_8, ceil(C R / 8)); balanced routing drops nothing
 * at C = 1, nor any routing at C = E; and the DAG's expert GEMMs follow
 * the kept rows. */
/* The executor's routing (config_ep_route): balanced, token p's choice j
 * is expert (p k + j) mod E, so a sample of S tokens (E | S k) gives every
 * expert exactly S k / E rows; under zipf:1 each token's k experts are
 * distinct, the same for the same seed, another draw for another seed,
 * another block's draw another, and each expert's count within 5
 * binomial deviations of its expectation
 * under two draws without replacement, S (p_e + sum_{f != e} p_f p_e /
 * (1 - p_f)), p_e = 1/(e+1) / H_8. */
START_TEST(moe_routing_draw)
{
    config c = tcfg("tiny-moe", 64 * K, "loongtrain", 2, 2, 2, SCOPE_STEP);
    int E = c.model.experts, k = c.model.top_k, e[2], f[2];
    int *n = calloc((size_t)E, sizeof *n);
    for (uint64_t p = 0; p < c.seq; p++) {
        config_ep_route(&c, 7, 0, p, e);
        for (int j = 0; j < k; j++) {
            ck_assert_int_eq(e[j], (int)((p * (uint64_t)k + (uint64_t)j) % (uint64_t)E));
            n[e[j]]++;
        }
    }
    for (int x = 0; x < E; x++)
        ck_assert_int_eq(n[x], (int)(c.seq * (uint64_t)k / (uint64_t)E));
    c.routing_zipf = 1;
    memset(n, 0, (size_t)E * sizeof *n);
    int differ = 0;
    for (uint64_t p = 0; p < c.seq; p++) {
        config_ep_route(&c, 7, 0, p, e);
        config_ep_route(&c, 8, 0, p, f);
        ck_assert_int_ne(e[0], e[1]);
        for (int j = 0; j < k; j++) {
            ck_assert(e[j] >= 0 && e[j] < E);
            n[e[j]]++;
            differ += e[j] != f[j];
        }
        int again[2];
        config_ep_route(&c, 7, 0, p, again);
        ck_assert(again[0] == e[0] && again[1] == e[1]);
    }
    ck_assert_int_gt(differ, (int)c.seq / 2);
    differ = 0; /* another block, another draw */
    for (uint64_t p = 0; p < 4096; p++) {
        config_ep_route(&c, 7, 0, p, e);
        config_ep_route(&c, 7, 1, p, f);
        differ += e[0] != f[0] || e[1] != f[1];
    }
    ck_assert_int_gt(differ, 4096 / 2);
    double H8 = 761.0 / 280, S = (double)c.seq;
    for (int x = 0; x < E; x++) {
        double px = 1.0 / (x + 1) / H8, q = px;
        for (int y = 0; y < E; y++)
            if (y != x) q += 1.0 / (y + 1) / H8 * px / (1 - 1.0 / (y + 1) / H8);
        double mean = S * q, sd = sqrt(S * q * (1 - q));
        ck_assert_msg(fabs(n[x] - mean) < 5 * sd, "expert %d: %d rows, expected %.0f +- %.0f", x, n[x], mean, sd);
    }
    free(n);
}
END_TEST

/* A routing histogram (--routing hist:W,... or FILE): EP rank i's share is
 * the sum of its experts' weights over all of them, the imbalance ep x
 * the largest share; for 8,4,2,1,1,1,1,1 (19 in all) at ep 4 the shares
 * are 12, 3, 2, 2 / 19 and the imbalance 48/19; the rows every rank sends
 * EP rank i are R share(i) rounded; a file of the same weights (spaces,
 * newlines, a comment) is the same histogram, and the draw of the
 * executor's routing follows it (expert 0 most often). */
START_TEST(moe_routing_histogram)
{
    config c = tcfg("tiny-moe", 4 * K, "loongtrain", 2, 2, 2, SCOPE_STEP), f = c;
    char err[LOONG_ERRLEN], path[] = "/tmp/loong-hist-XXXXXX";
    c.ep = 4;
    ck_assert_int_eq(config_routing_parse(&c, "hist:8,4,2,1,1,1,1,1", err), 0);
    ck_assert(config_routing_skewed(&c));
    double share[4] = {12.0 / 19, 3.0 / 19, 2.0 / 19, 2.0 / 19}, R = (double)(c.seq / 4) * c.model.top_k;
    for (int j = 0; j < 4; j++) {
        ck_assert_double_eq_tol(config_ep_share(&c, j), share[j], 1e-12);
        ck_assert_uint_eq(config_ep_pair_rows(&c, j), (uint64_t)llround(R * share[j]));
    }
    ck_assert_double_eq_tol(config_ep_imbalance(&c), 48.0 / 19, 1e-12);
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char text[] = "# tokens per expert\n8 4\t2\n1,1 1 1 1 # the cold ones\n";
    ck_assert_int_eq(write(fd, text, sizeof text - 1), (int)sizeof text - 1);
    close(fd);
    ck_assert_int_eq(config_routing_parse(&f, path, err), 0);
    ck_assert_ptr_eq(f.routing_hist, c.routing_hist); /* interned: the same weights, one histogram */
    unlink(path);
    int n[8] = {0}, e[2];
    for (uint64_t p = 0; p < 4096; p++) {
        config_ep_route(&c, 1, 0, p, e);
        n[e[0]]++, n[e[1]]++;
    }
    for (int x = 1; x < 8; x++)
        ck_assert_int_gt(n[0], n[x]);
    ck_assert_int_eq(config_routing_parse(&c, "balanced", err), 0);
    ck_assert(!config_routing_skewed(&c) && !c.routing_hist);
}
END_TEST

START_TEST(moe_capacity)
{
    config c = tcfg("tiny-moe", 4 * K, "loongtrain", 2, 2, 2, SCOPE_STEP);
    c.ep = 4;
    c.routing_zipf = 1;
    config dropless = c;
    double R = (double)(c.seq / 4) * c.model.top_k, H8 = 761.0 / 280;
    c.capacity = 1;
    double cap = ceil(R / 8);
    for (int j = 0; j < 4; j++) {
        double rows = 0;
        for (int e = 2 * j; e < 2 * j + 2; e++)
            rows += fmin(R / (e + 1) / H8, cap);
        ck_assert_uint_eq(config_ep_pair_rows(&c, j), (uint64_t)llround(rows));
    }
    ck_assert_uint_lt(config_ep_pair_rows(&c, 0), config_ep_pair_rows(&dropless, 0)); /* the hot experts drop */
    dag *g = tbuild(&c);
    uint64_t F = (uint64_t)c.model.expert_ffn, hid = (uint64_t)c.model.hidden;
    for (int r = 0; r < config_ranks(&c); r++) {
        uint64_t f = 0, rows = 4 * config_ep_pair_rows(&c, config_ep_rank(&c, r));
        for (uint32_t i = 0; i < dag_ntasks(g); i++) {
            const dag_task *t = dag_task_get(g, i);
            bool expert = t->op == OP_EXPERT_GATE || t->op == OP_EXPERT_UP || t->op == OP_EXPERT_DOWN;
            if (t->rank == r && expert && t->phase == PHASE_FWD) f += t->flops;
        }
        ck_assert_uint_eq(f, (uint64_t)c.model.layers * 3 * 2 * rows * hid * F);
    }
    dag_free(g);
    c.capacity = 8; /* C = E: never below a share */
    for (int j = 0; j < 4; j++)
        ck_assert_uint_eq(config_ep_pair_rows(&c, j), config_ep_pair_rows(&dropless, j));
    c.routing_zipf = dropless.routing_zipf = 0, c.capacity = 1;
    for (int j = 0; j < 4; j++)
        ck_assert_uint_eq(config_ep_pair_rows(&c, j), config_ep_pair_rows(&dropless, j));
}
END_TEST

/* Published parameter counts of the mixture-of-experts presets (their
 * model cards: Qwen3-30B-A3B 30.5B total, 3.3B activated; Qwen3-235B-A22B
 * 235B, 22B; Mixtral 8x7B 46.7B, 12.9B; DeepSeek-V2 236B, 21B;
 * DeepSeek-V3 671B, 37B, its MTP module apart), the totals within 1 % and
 * the activated within 5 %: model_params counts every expert (and MLA's
 * projections, Megatron-Core's), the activated the top-k of the blocks
 * past the dense ones. */
START_TEST(moe_params)
{
    static const struct {
        const char *name;
        double total, active;
    } want[] = {{"qwen3-30b-a3b", 30.5e9, 3.3e9}, {"qwen3-235b-a22b", 235e9, 22e9}, {"mixtral-8x7b", 46.7e9, 12.9e9},
                {"deepseek-v2", 236e9, 21e9},     {"deepseek-v3", 671e9, 37e9},     {"kimi-k2", 1.04e12, 32.6e9}};
    model m;
    char err[LOONG_ERRLEN];
    ck_assert_int_eq(model_preset(want[_i].name, &m, err), 0);
    double total = (double)model_params(&m);
    double active = total - (double)(m.layers - m.dense_layers) * (m.experts - m.top_k) * 3.0 * m.hidden * m.expert_ffn;
    /* Kimi K2's report gives 1.04T where its config.json's shapes (no
     * multi-token prediction layer) give 1.026T: 1.3 % */
    double tol = strcmp(want[_i].name, "kimi-k2") ? 0.01 : 0.015;
    ck_assert_msg(fabs(total / want[_i].total - 1) < tol, "%s: %.4g params", want[_i].name, total);
    ck_assert_msg(fabs(active / want[_i].active - 1) < 0.05, "%s: %.4g active", want[_i].name, active);
}
END_TEST

/* Tensor parallelism (Megatron's layer, docs/parallelism.md): every GEMM
 * of a rank carries 1/tp of tp = 1's weights over the same T tokens, so a
 * rank's GEMM FLOPs are 1/tp of tp = 1's and the tp times as many ranks
 * do tp = 1's total (llama3-8b: tp divides H, H_kv, ffn and V). The TP
 * collectives move the (T, hidden) activations of act_bytes: a ring
 * all-reduce sends 2(tp-1) chunks of ceil(size/tp) per rank, an all-gather
 * or a reduce-scatter (sequence parallelism) tp-1; the loss all-reduce
 * 3T fp32. Per rank and step, with sequence parallelism: per block 2
 * all-gathers and 2 reduce-scatters forward, 4 all-gathers and 2
 * reduce-scatters backward; the embedding's reduce-scatter and gather;
 * the LM head's 2 gathers and 1 reduce-scatter. Without: 2 all-reduces per
 * block each way, the embedding's and the LM head's input gradient's. */
START_TEST(tp_closed_forms)
{
    int tp = _i / 2 ? 4 : 2;
    bool sp = _i % 2 == 0;
    config c1 = tcfg("llama3-8b", 16 * K, "loongtrain", 2, 2, 2, SCOPE_STEP);
    c1.model.layers = 2;
    config c = c1;
    c.tp = tp;
    c.sequence_parallel = sp;
    char err[LOONG_ERRLEN] = "";
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    dag *g1 = tbuild(&c1), *g = tbuild(&c);
    const model *m = &c.model;
    uint64_t L = (uint64_t)m->layers, S = c.seq, T = S / 4, hid = (uint64_t)m->hidden, d = (uint64_t)m->head_dim;
    uint64_t wl =
        hid * (uint64_t)(m->heads + 2 * m->kv_heads) * d + (uint64_t)m->heads * d * hid + 3 * hid * (uint64_t)m->ffn;
    uint64_t per_rank1 = 3 * 2 * T * (wl * L + hid * (uint64_t)m->vocab), n = (uint64_t)tp;
    ck_assert_int_eq(config_ranks(&c), 4 * tp);
    for (int r = 0; r < config_ranks(&c); r++) {
        ck_assert_uint_eq(sum_flops(g, r, TASK_GEMM) * n, per_rank1);
        if (r < 4) ck_assert_uint_eq(sum_flops(g1, r, TASK_GEMM), per_rank1);
    }
    ck_assert_uint_eq(sum_flops(g, -1, TASK_GEMM), sum_flops(g1, -1, TASK_GEMM));
    uint64_t act = T * hid * (uint64_t)c.act_bytes, loss = 3 * T * 4, norm = (2 * L + 1) * hid * (uint64_t)c.act_bytes;
    for (int r = 0; r < config_ranks(&c); r++) {
        uint64_t ag = 0, rs = 0, ar = 0, bytes = 0;
        for (uint32_t i = 0; i < dag_ntasks(g); i++) {
            const dag_task *t = dag_task_get(g, i);
            if (t->rank != r || t->stream != STREAM_TP) continue;
            uint64_t size = t->op == OP_TP_LOSS ? loss : t->op == OP_TP_NORM_GRAD ? norm : act;
            uint64_t chunks = (t->kind == TASK_ALLREDUCE ? 2 : 1) * (n - 1);
            ck_assert_uint_eq(t->bytes, chunks * ((size + n - 1) / n)); /* the ring's ceil chunks */
            ck_assert_uint_eq(t->bytes * n, chunks * size);             /* here size % tp == 0 */
            int members;
            ck_assert_uint_ne(t->group, DAG_NONE);
            const int32_t *mem = dag_group(g, t->group, &members);
            ck_assert_int_eq(members, tp);
            for (int k = 0; k < members; k++) /* tp innermost: adjacent ranks of one node */
                ck_assert_int_eq(mem[k], mem[0] + k);
            ck_assert_int_eq(config_node(&c, mem[0]), config_node(&c, mem[members - 1]));
            ag += t->kind == TASK_ALLGATHER;
            rs += t->kind == TASK_REDUCESCATTER;
            ar += t->kind == TASK_ALLREDUCE;
            bytes += t->bytes;
        }
        ck_assert_uint_eq(ag, sp ? 6 * L + 3 : 0);
        ck_assert_uint_eq(rs, sp ? 4 * L + 2 : 0);
        ck_assert_uint_eq(ar, sp ? 2 : 4 * L + 3); /* sp: the loss's and the norm gradients' */
        uint64_t want =
            sp ? (10 * L + 5) * (n - 1) * act / n + 2 * (n - 1) * norm / n : (4 * L + 2) * 2 * (n - 1) * act / n;
        ck_assert_uint_eq(bytes, want + 2 * (n - 1) * loss / n);
    }
    ck_assert_uint_eq(count_tasks(g1, -1, TASK_ALLGATHER, OP_TP_X) + count_tasks(g1, -1, TASK_ALLREDUCE, OP_TP_H), 0);
    dag_free(g);
    dag_free(g1);
}
END_TEST

/* Megatron-Core's finalize_model_grads order (build.c's norm_grads): per
 * rank one all-reduce of the (2L+1) x hidden norm gradients over TP under
 * sequence parallelism, after the last gradient collective over DP and
 * before ZeRO-1/2's gather of the updated parameters; none without. */
START_TEST(tp_norm_grads_after_sync)
{
    config c = tcfg("llama3-8b", 16 * K, "loongtrain", 2, 2, 2, SCOPE_STEP);
    c.model.layers = 2;
    c.tp = 2;
    c.zero = _i % 4;
    c.sequence_parallel = _i < 4;
    dag *g = tbuild(&c);
    for (int r = 0; r < config_ranks(&c); r++) {
        uint32_t n, norm = DAG_NONE, sync = DAG_NONE, gather = DAG_NONE;
        const uint32_t *ids = dag_stream_tasks(g, r, STREAM_TP, &n);
        for (uint32_t i = 0; i < n; i++)
            if (dag_task_get(g, ids[i])->op == OP_TP_NORM_GRAD) norm = ids[i];
        ids = dag_stream_tasks(g, r, STREAM_DP, &n);
        for (uint32_t i = 0; i < n; i++) {
            const dag_task *t = dag_task_get(g, ids[i]);
            if (t->kind != TASK_ALLGATHER) sync = ids[i];
            if (t->op == OP_PARAM_ALLGATHER && t->layer == -1 && c.zero != 3) gather = ids[i]; /* ZeRO-1/2's */
        }
        if (!c.sequence_parallel) {
            ck_assert_uint_eq(norm, DAG_NONE);
            continue;
        }
        ck_assert_uint_ne(norm, DAG_NONE);
        const dag_task *t = dag_task_get(g, norm);
        ck_assert_uint_eq(t->bytes, 2 * (2 - 1) * (2 * 2 + 1) * 4096 * (uint64_t)c.act_bytes / 2);
        bool after_sync = false, before_gather = gather == DAG_NONE;
        for (uint32_t k = 0; k < t->ndeps; k++)
            after_sync |= dag_deps(g, t)[k] == sync;
        ck_assert(after_sync);
        /* the gather waits for the optimizer step, which waits for the norms */
        for (uint32_t k = 0; gather != DAG_NONE && k < dag_task_get(g, gather)->ndeps; k++) {
            const dag_task *d = dag_task_get(g, dag_deps(g, dag_task_get(g, gather))[k]);
            for (uint32_t j = 0; d->op == OP_OPTIM_STEP && j < d->ndeps; j++)
                before_gather |= dag_deps(g, d)[j] == norm;
        }
        ck_assert(before_gather);
        ck_assert_int_eq(gather != DAG_NONE, c.zero == 1 || c.zero == 2);
    }
    dag_free(g);
}
END_TEST

/* Meta's published parameter counts: Llama 3 8B 8,030,261,248; Llama 3.1
 * 405B 405,853,388,800 (the model cards' safetensors totals). */
START_TEST(llama3_params)
{
    static const struct {
        const char *name;
        uint64_t params;
    } published[] = {{"llama3-8b", 8030261248ull}, {"llama3-405b", 405853388800ull}};
    model m;
    char err[LOONG_ERRLEN];
    ck_assert_int_eq(model_preset(published[_i].name, &m, err), 0);
    ck_assert_uint_eq(model_params(&m), published[_i].params);
}
END_TEST

/* ---- tensor parallelism (Megatron's layer, build.c) ---- */

/* The TP cases: tp 2 and 4, sequence parallelism on and off, on a 2x2
 * context mesh of 7b-mha (H = H_kv = 32: no replication at any tp). */
static config tp_case(int i)
{
    config c = tcfg("7b-mha", 16 * K, "loongtrain", 2, 2, 2, SCOPE_STEP);
    c.model.layers = 2;
    c.tp = i / 2 ? 4 : 2;
    c.sequence_parallel = i % 2 == 0;
    return c;
}

/* A rank's attention FLOPs are exactly 1/tp of the same context rank's
 * without TP (H/tp heads; the GEMMs: tp_closed_forms), on a model with no
 * KV replication at any tp. */
START_TEST(tp_attention_shard)
{
    config c = tp_case(_i), c1 = c;
    c1.tp = 1;
    c1.sequence_parallel = true;
    dag *g = tbuild(&c), *g1 = tbuild(&c1);
    uint64_t tp = (uint64_t)c.tp;
    for (int r = 0; r < config_ranks(&c); r++) {
        int h, s;
        config_coords(&c, r, &h, &s);
        int r1 = config_rank_of(&c1, h, s);
        ck_assert_uint_eq(sum_flops(g, r, TASK_ATTN_FWD) * tp, sum_flops(g1, r1, TASK_ATTN_FWD));
        ck_assert_uint_eq(sum_flops(g, r, TASK_ATTN_BWD) * tp, sum_flops(g1, r1, TASK_ATTN_BWD));
    }
    dag_free(g);
    dag_free(g1);
}
END_TEST

/* KV replication over TP (tiny: H = 8, H_kv = 2, d = 32, hidden 256) at
 * tp 4 and 8: each shard holds H/tp query heads and one KV head, head
 * t*H_kv/tp, so its QKV GEMM has (H/tp + 2) d columns; each block's
 * backward adds one all-reduce of that head's (hidden, 2d) K and V weight
 * gradient over its tp/H_kv shards, consecutive TP ranks, sending
 * 2(r-1) ring chunks of ceil(size/r); the DP gradient collective of the
 * block waits for it. _i = 1: beside P_h = 2 (replicated over P_h too). */
START_TEST(tp_kv_replication)
{
    int tp = _i == 2 ? 8 : 4, ph = _i == 1 ? 2 : 1, r = tp / 2;
    config c = tcfg("tiny", 16 * K, ph > 1 ? "usp" : "zigzag", ph, 2, 0, SCOPE_STEP);
    c.tp = tp;
    c.zero = 0;
    char err[LOONG_ERRLEN] = "";
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    ck_assert_int_eq(config_tp_kv_heads(&c), 1);
    ck_assert_int_eq(config_tp_kv_repl(&c), r);
    dag *g = tbuild(&c);
    const model *m = &c.model;
    uint64_t hid = 256, d = 32, L = (uint64_t)m->layers;
    uint64_t size = hid * 2 * d * (uint64_t)c.act_bytes, chunk = (size + (uint64_t)r - 1) / (uint64_t)r;
    for (int rank = 0; rank < config_ranks(&c); rank++) {
        uint64_t n = 0;
        for (uint32_t i = 0; i < dag_ntasks(g); i++) {
            const dag_task *t = dag_task_get(g, i);
            if (t->rank != rank) continue;
            if (t->op == OP_QKV && t->phase == PHASE_FWD) ck_assert_uint_eq(t->dim[1], (8 / (uint64_t)tp + 2) * d);
            if (t->op != OP_TP_KV_GRAD) continue;
            n++;
            ck_assert_int_eq(t->stream, STREAM_TP_KV);
            ck_assert_int_eq(t->kind, TASK_ALLREDUCE);
            ck_assert_uint_eq(t->bytes, 2 * (uint64_t)(r - 1) * chunk);
            int members;
            const int32_t *mem = dag_group(g, t->group, &members);
            ck_assert_int_eq(members, r);
            int t0 = config_tp_rank(&c, mem[0]);
            ck_assert_int_eq(t0 % r, 0);
            for (int k = 0; k < members; k++) { /* r consecutive shards of one KV head, this rank's among them */
                ck_assert_int_eq(mem[k], mem[0] + k);
                ck_assert_int_eq(config_tp_kv_head0(&c, config_tp_rank(&c, mem[k])), t0 / r);
            }
            ck_assert_int_eq(config_tp_kv_head0(&c, config_tp_rank(&c, rank)), t0 / r);
            uint32_t nx;
            const uint32_t *dp = dag_stream_tasks(g, rank, STREAM_DP, &nx);
            bool waited = false;
            for (uint32_t k = 0; k < nx; k++) {
                const dag_task *u = dag_task_get(g, dp[k]);
                if (u->layer != t->layer) continue;
                for (uint32_t q = 0; q < u->ndeps; q++)
                    waited |= dag_deps(g, u)[q] == i;
            }
            ck_assert_msg(waited, "block %d's gradient all-reduce does not wait for its KV replicas' sum", t->layer);
        }
        ck_assert_uint_eq(n, L);
    }
    dag_free(g);
}
END_TEST

/* --tp-overlap (build.c's ring-exchange): each block's 8 all-gather/GEMM
 * and GEMM/reduce-scatter pairs become tp-1 ring steps of T/tp rows, so a
 * rank sends the same TP bytes as without overlap and its GEMMs do the
 * same FLOPs in tp chunks; every send goes to the next TP rank. */
START_TEST(tp_overlap_ring_exchange)
{
    config c = tp_case(2 * _i), c0 = c; /* tp 2 and 4, sequence parallelism on */
    c.tp_overlap = true;
    dag *g = tbuild(&c), *g0 = tbuild(&c0);
    mesh m = config_mesh(&c);
    uint64_t T = config_local_tokens(&c), row_bytes = T / (uint64_t)c.tp * (uint64_t)c.model.hidden * 2;
    for (int r = 0; r < config_ranks(&c); r++) {
        uint64_t bytes[2] = {0, 0}, sends = 0;
        for (int k = 0; k < 2; k++) {
            const dag *d = k ? g0 : g;
            for (uint32_t i = 0; i < dag_ntasks(d); i++) {
                const dag_task *t = dag_task_get(d, i);
                if (t->rank != r || t->stream != STREAM_TP) continue;
                bytes[k] += t->bytes;
                if (t->kind != TASK_SEND) continue;
                ck_assert_int_eq(t->peer, mesh_shift(&m, r, MESH_TP, 1));
                ck_assert_uint_eq(t->bytes, row_bytes);
                sends++;
            }
        }
        ck_assert_uint_eq(bytes[0], bytes[1]);
        ck_assert_uint_eq(sends, 8 * (uint64_t)(c.tp - 1) * (uint64_t)c.model.layers);
        ck_assert_uint_eq(sum_flops(g, r, TASK_GEMM), sum_flops(g0, r, TASK_GEMM));
    }
    dag_free(g);
    dag_free(g0);
}
END_TEST

/* A replica of one context rank (P = 1, here tp 2) beside dp = 4 still
 * reduces its gradients: ZeRO-0's all-reduce per block, sized for the 4
 * members of the gradient group, 2(4-1)/4 of the TP shard's gradients, in
 * fp32 (Megatron's reduction of bf16 runs) or, with --grad-reduce bf16, in
 * bf16 (loop iteration _i). */
START_TEST(dp_of_single_context_rank)
{
    config c = tp_case(0);
    c.p_head = c.p_seq = 1;
    c.window = 1;
    c.dp = 4;
    c.zero = 0;
    c.grad_reduce = _i ? GRAD_REDUCE_BF16 : GRAD_REDUCE_FP32;
    dag *g = tbuild(&c);
    uint64_t eb = _i ? 2 : 4, lp = model_layer_params_tp(&c.model, c.tp),
             want = 2 * 3 * ((lp * eb + 3) / 4); /* ring chunks */
    int n = 0;
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->stream != STREAM_DP || t->layer < 0) continue;
        ck_assert_int_eq(t->kind, TASK_ALLREDUCE);
        ck_assert_uint_eq(t->bytes, want);
        n++;
    }
    ck_assert_int_eq(n, c.tp * c.model.layers);
    dag_free(g);
}
END_TEST

/* ---- bytes against closed forms ---- */

START_TEST(alltoall_bytes)
{
    const layout *L = &matrix[_i];
    config c = tcfg(L->model, 16 * K, L->strategy, L->ph, L->ps, L->w, SCOPE_ATTN);
    dag *g = tbuild(&c);
    const model *m = &c.model;
    uint64_t ph = (uint64_t)c.p_head, T = c.seq / (uint64_t)(c.p_head * c.p_seq), d = (uint64_t)m->head_dim;
    uint64_t kv_total = (uint64_t)(m->kv_heads > c.p_head ? m->kv_heads : c.p_head);
    uint64_t qkv_buf = T * ((uint64_t)m->heads + 2 * kv_total) * d * 2, o_buf = T * (uint64_t)m->heads * d * 2;
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->kind != TASK_ALLTOALL) continue;
        uint64_t buf = (t->op == OP_A2A_QKV || t->op == OP_A2A_DQKV) ? qkv_buf : o_buf;
        ck_assert_uint_eq(t->bytes * ph, buf * (ph - 1));
    }
    ck_assert_uint_eq(count_tasks(g, -1, TASK_ALLTOALL, -1), ph > 1 ? 4 * ph * (uint64_t)c.p_seq : 0);
    dag_free(g);
}
END_TEST

static uint64_t kv_chunk_bytes(const config *c, int elem)
{
    const model *m = &c->model;
    uint64_t kvh = (uint64_t)(m->kv_heads > c->p_head ? m->kv_heads : c->p_head) / (uint64_t)c->p_head;
    return 2 * (c->seq / (uint64_t)c->p_seq) * kvh * (uint64_t)m->head_dim * (uint64_t)elem;
}

START_TEST(ring_kv_bytes)
{
    const layout *L = &matrix[_i];
    config c = tcfg(L->model, 16 * K, L->strategy, L->ph, L->ps, L->w, SCOPE_ATTN);
    dag *g = tbuild(&c);
    uint64_t chunk = kv_chunk_bytes(&c, 2), P_s = (uint64_t)c.p_seq;
    for (int r = 0; r < config_ranks(&c); r++) {
        uint64_t fwd = 0, bwd_kv = 0, dkv = 0;
        for (uint32_t i = 0; i < dag_ntasks(g); i++) {
            const dag_task *t = dag_task_get(g, i);
            bool kv = t->op == OP_KV || t->op == OP_KV_GATHER;
            if (t->rank != r || (t->kind != TASK_SEND && !task_is_collective(t))) continue;
            if (kv && t->phase == PHASE_FWD) fwd += t->bytes;
            if (kv && t->phase == PHASE_BWD) bwd_kv += t->bytes;
            if (t->op == OP_DKV || t->op == OP_DKV_REDUCE) dkv += t->bytes;
        }
        /* P_s - 1 chunks forward and again backward; the dual ring splits
         * each chunk over two rings, which sums to the same bytes; a ring
         * all-gather sends the P_s - 1 other chunks too */
        ck_assert_uint_eq(fwd, (P_s - 1) * chunk);
        ck_assert_uint_eq(bwd_kv, (P_s - 1) * chunk);
        /* dK/dV travel in fp32: twice the bf16 bytes, one extra hop per
         * window to return partial sums (P_s single ring, P_s + P_s/w double) */
        uint64_t hops = P_s == 1                                                      ? 0
                        : c.ring == RING_DOUBLE && c.window < c.p_seq && c.window > 1 ? P_s + P_s / (uint64_t)c.window
                        : c.ring == RING_ALLGATHER                                    ? P_s - 1 /* a reduce-scatter */
                                                                                      : P_s;
        ck_assert_uint_eq(dkv, hops * 2 * chunk);
    }
    dag_free(g);
}
END_TEST

/* --kv-stride N: kvh/N gathers and reduce-scatters per pass, the same bytes
 * and FLOPs in all; a stride that does not divide kvh is refused. */
START_TEST(allgather_kv_stride)
{
    static const int strides[] = {1, 2, 4};
    config base = tcfg("llama3-8b", 16 * K, "allgather", 2, 4, 0, SCOPE_ATTN); /* 4 KV heads per rank */
    dag *g0 = tbuild(&base);
    uint64_t bytes0 = sum_bytes(g0, 0, TASK_ALLGATHER, OP_KV_GATHER), flops0 = sum_flops(g0, -1, TASK_ATTN_FWD);
    for (int i = 0; i < 3; i++) {
        config c = base;
        c.kv_stride = strides[i];
        dag *g = tbuild(&c);
        uint64_t groups = 4 / (uint64_t)strides[i];
        ck_assert_uint_eq(count_tasks(g, 0, TASK_ALLGATHER, OP_KV_GATHER), 2 * groups); /* forward and backward */
        ck_assert_uint_eq(count_tasks(g, 0, TASK_REDUCESCATTER, OP_DKV_REDUCE), groups);
        ck_assert_uint_eq(count_tasks(g, 0, TASK_ATTN_FWD, -1), groups);
        ck_assert_uint_eq(sum_bytes(g, 0, TASK_ALLGATHER, OP_KV_GATHER), bytes0);
        ck_assert_uint_eq(sum_flops(g, -1, TASK_ATTN_FWD), flops0);
        dag_free(g);
    }
    dag_free(g0);
    char err[LOONG_ERRLEN];
    base.kv_stride = 3;
    ck_assert_int_eq(config_validate(&base, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "--kv-stride 3 does not divide the 4 KV heads"));
    config u = tcfg("llama3-8b", 16 * K, "usp", 2, 4, 0, SCOPE_ATTN);
    u.kv_stride = 2;
    ck_assert_int_eq(config_validate(&u, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "--ring allgather"));
}
END_TEST

START_TEST(double_ring_transfers)
{
    static const int ws[] = {1, 2, 4, 8};
    int w = ws[_i], P_s = 8;
    config c = tcfg("tiny", 16 * K, "loongtrain", 2, P_s, w, SCOPE_ATTN_FWD);
    dag *g = tbuild(&c);
    for (int r = 0; r < config_ranks(&c); r++) {
        uint64_t outer = 0, inner = 0;
        for (uint32_t i = 0; i < dag_ntasks(g); i++) {
            const dag_task *t = dag_task_get(g, i);
            if (t->rank != r || t->kind != TASK_SEND) continue;
            if (t->stream == STREAM_RING_OUTER) outer++;
            if (t->stream == STREAM_RING) inner++;
        }
        ck_assert_uint_eq(outer, (uint64_t)(P_s / w - 1));
        ck_assert_uint_eq(inner, (uint64_t)((P_s / w) * (w - 1)));
    }
    dag_free(g);
}
END_TEST

START_TEST(kv_replication)
{
    config c = tcfg("llama3-8b", 16 * K, "usp", 16, 2, 0, SCOPE_ATTN);
    ck_assert_int_eq(config_kv_repl(&c), 2);
    ck_assert_int_eq(config_kv_heads(&c), 1);
    dag *g = tbuild(&c);
    /* one replica-gradient sum per rank, after the dQKV all-to-all */
    ck_assert_uint_eq(count_tasks(g, -1, TASK_ACC, OP_KV_REP_SUM), 32);
    dag_free(g);
    config off;
    char err[LOONG_ERRLEN];
    config_defaults(&off);
    off.kv_replication = false;
    ck_assert_int_eq(model_preset("llama3-8b", &off.model, err), 0);
    ck_assert_int_eq(strategy_apply("usp", 16, 2, 0, &off, err), 0);
    ck_assert_int_eq(config_validate(&off, err), -1);
    ck_assert_msg(strstr(err, "KV replication is off") != NULL, "%s", err);
}
END_TEST

/* ---- structure ---- */

START_TEST(deterministic_ids)
{
    const layout *L = &matrix[_i];
    config c = tcfg(L->model, 16 * K, L->strategy, L->ph, L->ps, L->w, SCOPE_ATTN);
    dag *a = tbuild(&c), *b = tbuild(&c);
    ck_assert_uint_eq(dag_ntasks(a), dag_ntasks(b));
    for (uint32_t i = 0; i < dag_ntasks(a); i++) {
        const dag_task *x = dag_task_get(a, i), *y = dag_task_get(b, i);
        ck_assert_int_eq(memcmp(x, y, sizeof *x), 0);
        ck_assert_int_eq(memcmp(dag_deps(a, x), dag_deps(b, y), x->ndeps * sizeof(uint32_t)), 0);
    }
    dag_free(a);
    dag_free(b);
}
END_TEST

/* The step's memory-bound kernels (elementwise.h) against closed forms,
 * with and without sequence parallelism: per block, forward and backward,
 * two norms and two residual adds over (T/tp or T, h), rotary over Q and
 * K's (T, (H + H_kv) d / tp), SwiGLU over (T, ffn / tp); the embedding,
 * final norm and loss once; the gradient buffer zeroed and the optimizer
 * stepped once, over every local parameter and the rank's ZeRO shard. */
START_TEST(elementwise_closed_forms)
{
    config c = tcfg("llama3-8b", 16 * K, "loongtrain", 2, 2, 2, SCOPE_STEP);
    c.model.layers = 2;
    c.tp = 2;
    c.zero = 1;
    c.recompute = RECOMPUTE_NONE;
    c.sequence_parallel = _i == 0;
    dag *g = tbuild(&c);
    const model *m = &c.model;
    uint64_t T = config_local_tokens(&c), h = (uint64_t)m->hidden, d = (uint64_t)m->head_dim, a = c.act_bytes;
    uint64_t rows = c.sequence_parallel ? T / 2 : T, L = (uint64_t)m->layers;
    uint64_t qk = ((uint64_t)m->heads + (uint64_t)m->kv_heads) / 2 * d, ffn = (uint64_t)m->ffn / 2;
    uint64_t vocab = ((uint64_t)m->vocab + 1) / 2, params = pipe_stage_params(&c, 0);
    uint64_t shard = (params + 4 * (uint64_t)c.dp - 1) / (4 * (uint64_t)c.dp); /* cp 4 */
    /* [kind - TASK_NORM][bwd]: elements and HBM bytes expected on rank 0
     * (no softmax or dropout: FlashAttention; no quant: bf16) */
    uint64_t want_e[10][2] = {{(2 * L + 1) * rows * h, (2 * L + 1) * rows * h},
                              {L * T * qk, L * T * qk},
                              {2 * L * rows * h, 2 * L * rows * h},
                              {L * T * ffn, L * T * ffn},
                              {T * h, T * h},
                              {T * vocab, T * vocab},
                              {0, 0},
                              {0, 0},
                              {0, 0},
                              {params + shard, 0}};
    uint64_t want_b[10][2] = {{(2 * L + 1) * rows * h * 2 * a, (2 * L + 1) * rows * h * 3 * a},
                              {L * T * qk * 2 * a, L * T * qk * 2 * a},
                              {2 * L * rows * h * 3 * a, 2 * L * rows * h * 3 * a},
                              {L * T * ffn * 3 * a, L * T * ffn * 5 * a},
                              {T * h * 2 * a, vocab * h * 12 + T * h * 2 * a},
                              {T * vocab * 38, T * vocab * 14},
                              {0, 0},
                              {0, 0},
                              {0, 0},
                              {params * 4 + shard * 38, 0}};
    uint64_t got_e[10][2] = {{0}}, got_b[10][2] = {{0}};
    uint32_t n;
    const uint32_t *ids = dag_stream_tasks(g, 0, STREAM_COMP, &n);
    for (uint32_t i = 0; i < n; i++) {
        const dag_task *t = dag_task_get(g, ids[i]);
        if (t->kind < TASK_NORM || t->kind > TASK_OPTIM) continue;
        int k = t->kind - TASK_NORM, b = t->phase == PHASE_BWD;
        got_e[k][b] += t->flops;
        got_b[k][b] += elementwise_hbm_bytes(&c, (task_op)t->op, (task_phase)t->phase, t->flops);
    }
    for (int k = 0; k < 10; k++)
        for (int b = 0; b < 2; b++) {
            ck_assert_msg(got_e[k][b] == want_e[k][b], "%s %s: %llu elements, want %llu", task_kind_name(TASK_NORM + k),
                          b ? "bwd" : "fwd", (unsigned long long)got_e[k][b], (unsigned long long)want_e[k][b]);
            ck_assert_msg(got_b[k][b] == want_b[k][b], "%s %s: %llu bytes, want %llu", task_kind_name(TASK_NORM + k),
                          b ? "bwd" : "fwd", (unsigned long long)got_b[k][b], (unsigned long long)want_b[k][b]);
        }
    dag_free(g);
}
END_TEST

/* --attention unfused against closed forms (unfused.h, elementwise.h), on
 * a 4x1 Ulysses mesh with TP 2 and the three recompute policies: per
 * layer and pass, the softmax and the dropout each process the B x hq x
 * S x S scores (hq = H / (tp P_h) query heads), the attention block's
 * batched GEMMs count 4 S^2 d hq B forward and twice that backward, and
 * the residual adds move 3a + 1 bytes per element forward and 5a + 1
 * backward under --hidden-dropout. Selective (core attention) and full
 * re-run the softmax and dropout once more per layer; none does not. */
START_TEST(unfused_closed_forms)
{
    static const recompute_kind policy[] = {RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL};
    config c = tcfg("llama3-8b", 4 * K, "ulysses", 4, 1, 0, SCOPE_STEP);
    c.model.layers = 2;
    c.tp = 2;
    c.batch = 2;
    c.attention = ATTN_UNFUSED;
    c.attention_dropout = c.hidden_dropout = 0.1;
    recompute_set(&c, policy[_i]);
    char err[LOONG_ERRLEN];
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    dag *g = tbuild(&c);
    const model *m = &c.model;
    uint64_t L = (uint64_t)m->layers, S = c.seq, B = (uint64_t)c.batch, d = (uint64_t)m->head_dim, a = c.act_bytes;
    uint64_t hq = (uint64_t)m->heads / 2 / 4, E = B * hq * S * S, rows = config_local_tokens(&c) / 2;
    uint64_t passes = _i == 0 ? 2 : 3; /* forward, backward, and the re-run */
    uint64_t sm = 0, dr = 0, attn_f = 0, attn_b = 0, add_f = 0, add_b = 0;
    uint32_t n;
    const uint32_t *ids = dag_stream_tasks(g, 0, STREAM_COMP, &n);
    for (uint32_t i = 0; i < n; i++) {
        const dag_task *t = dag_task_get(g, ids[i]);
        bool bwd = t->phase == PHASE_BWD;
        if (t->kind == TASK_SOFTMAX) sm += t->flops;
        if (t->kind == TASK_DROPOUT) dr += t->flops;
        if (t->kind == TASK_ATTN_FWD) attn_f += t->flops;
        if (t->kind == TASK_ATTN_BWD) attn_b += t->flops;
        if (t->kind == TASK_ADD && t->phase == PHASE_FWD)
            add_f += elementwise_hbm_bytes(&c, (task_op)t->op, PHASE_FWD, t->flops);
        if (t->kind == TASK_ADD && bwd) add_b += elementwise_hbm_bytes(&c, (task_op)t->op, PHASE_BWD, t->flops);
    }
    ck_assert_msg(sm == passes * L * E, "softmax: %llu elements, want %llu", (unsigned long long)sm,
                  (unsigned long long)(passes * L * E));
    ck_assert_msg(dr == passes * L * E, "dropout: %llu elements, want %llu", (unsigned long long)dr,
                  (unsigned long long)(passes * L * E));
    ck_assert_msg(attn_f == (passes - 1) * L * 4 * S * S * d * hq * B, "attention forward FLOPs %llu",
                  (unsigned long long)attn_f);
    ck_assert_msg(attn_b == L * 8 * S * S * d * hq * B, "attention backward FLOPs %llu", (unsigned long long)attn_b);
    ck_assert_msg(add_f == 2 * L * rows * c.model.hidden * (3 * a + 1), "residual adds forward: %llu bytes",
                  (unsigned long long)add_f);
    ck_assert_msg(add_b == 2 * L * rows * c.model.hidden * (5 * a + 1), "residual adds backward: %llu bytes",
                  (unsigned long long)add_b);
    dag_free(g);
}
END_TEST

/* --precision's FP8 casts against closed forms (elementwise.h's quant), on
 * a 2x2 mesh with TP 2 and sequence parallelism, for the three recipes:
 * per layer the attention output forward (T x H d / tp), two block
 * gradients (T/tp x hidden) and attention's input gradient (T x (H + 2
 * H_kv) d / tp) backward; once per step the block weights. Bytes per
 * element: the input (a; a weight's 2) in, FP8 data and transpose (2)
 * out, current scaling's amax pass reading the input again, MXFP8's
 * scales (1/16). */
START_TEST(fp8_casts_closed_forms)
{
    static const precision_kind rec[] = {PRECISION_FP8_DELAYED, PRECISION_FP8_CURRENT, PRECISION_MXFP8};
    config c = tcfg("llama3-8b", 16 * K, "usp", 2, 2, 0, SCOPE_STEP);
    c.model.layers = 2;
    c.tp = 2;
    c.precision = rec[_i];
    char err[LOONG_ERRLEN];
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    dag *g = tbuild(&c);
    const model *m = &c.model;
    uint64_t L = 2, T = config_local_tokens(&c), a = 2, h = (uint64_t)m->hidden, d = (uint64_t)m->head_dim;
    uint64_t o = (uint64_t)m->heads * d / 2, qkv = ((uint64_t)m->heads + 2 * (uint64_t)m->kv_heads) / 2 * d;
    uint64_t want[4] = {L * T * o, L * 2 * (T / 2) * h, L * T * qkv, L * model_layer_params_tp(m, 2)};
    uint64_t got[4] = {0}, bytes[4] = {0};
    uint32_t n;
    const uint32_t *ids = dag_stream_tasks(g, 0, STREAM_COMP, &n);
    for (uint32_t i = 0; i < n; i++) {
        const dag_task *t = dag_task_get(g, ids[i]);
        if (t->kind != TASK_QUANT) continue;
        int k = t->op - OP_QUANT_ATTN_OUT;
        ck_assert(k >= 0 && k < 4);
        ck_assert_int_eq(t->phase, k == 0 || k == 3 ? PHASE_FWD : PHASE_BWD);
        got[k] += t->flops;
        bytes[k] += elementwise_hbm_bytes(&c, (task_op)t->op, (task_phase)t->phase, t->flops);
    }
    for (int k = 0; k < 4; k++) {
        uint64_t in = k == 3 ? 2 : a, per = in + 2 + (rec[_i] == PRECISION_FP8_CURRENT ? in : 0);
        uint64_t wb = want[k] * per + (rec[_i] == PRECISION_MXFP8 ? want[k] / 16 : 0);
        ck_assert_msg(got[k] == want[k], "%s: %llu elements, want %llu", task_op_name(OP_QUANT_ATTN_OUT + k),
                      (unsigned long long)got[k], (unsigned long long)want[k]);
        /* MXFP8's scales round per task: within one byte per task */
        ck_assert_msg(bytes[k] <= wb && bytes[k] + 2 * L >= wb, "%s: %llu bytes, want %llu",
                      task_op_name(OP_QUANT_ATTN_OUT + k), (unsigned long long)bytes[k], (unsigned long long)wb);
    }
    dag_free(g);
}
END_TEST

/* Every collective group is a communicator over mesh dimensions, with the
 * members of the closed forms: the head group of ring index s is
 * {s*P_h + h} head-first and {h*P_s + s} context-first, the context group
 * of head h {h*P_s + s} / {s*P_h + h} over s, the gradient group ranks
 * 0..P-1 (and the replicas: dimensions {head, seq, dp}). A DAG holds one
 * replica: dp 2 builds the same tasks as dp 1, but for the optimizer step's
 * shard of the parameters. */
START_TEST(communicators_are_mesh_groups)
{
    for (int cf = 0; cf < 2; cf++) {
        config c = tcfg("tiny", 8 * K, "allgather", 2, 4, 0, SCOPE_STEP);
        config_set_placement(&c, cf ? PLACE_CONTEXT_FIRST : PLACE_HEAD_FIRST);
        c.dp = 1 + cf;
        char err[LOONG_ERRLEN];
        ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
        dag *g = tbuild(&c);
        int P = config_ranks(&c), ph = c.p_head, ps = c.p_seq, seen[STREAM_COUNT] = {0};
        for (uint32_t gid = 0; gid < dag_ngroups(g); gid++) {
            int n, st = dag_group_stream(g, gid);
            const int32_t *m = dag_group(g, gid, &n);
            mesh_dims dims = dag_group_dims(g, gid);
            seen[st] += n;
            if (st == STREAM_A2A) {
                ck_assert_uint_eq(dims, MESH_BIT(MESH_HEAD));
                int s = cf ? m[0] % ps : m[0] / ph;
                for (int h = 0; h < ph; h++)
                    ck_assert_int_eq(m[h], cf ? h * ps + s : s * ph + h);
            } else if (st == STREAM_RING || st == STREAM_DKV) {
                ck_assert_uint_eq(dims, MESH_BIT(MESH_SEQ));
                int h = cf ? m[0] / ps : m[0] % ph;
                for (int s = 0; s < ps; s++)
                    ck_assert_int_eq(m[s], cf ? h * ps + s : s * ph + h);
            } else {
                ck_assert_int_eq(st, STREAM_DP);
                ck_assert_uint_eq(dims, CONFIG_GRAD_DIMS);
                for (int r = 0; r < n; r++)
                    ck_assert_int_eq(m[r], r);
            }
        }
        /* each rank in one group per stream */
        ck_assert_int_eq(seen[STREAM_A2A], P);
        ck_assert_int_eq(seen[STREAM_RING], P);
        ck_assert_int_eq(seen[STREAM_DKV], P);
        ck_assert_int_eq(seen[STREAM_DP], P);
        config one = c;
        one.dp = 1;
        dag *g1 = tbuild(&one);
        ck_assert_uint_eq(dag_ntasks(g), dag_ntasks(g1));
        for (uint32_t i = 0; i < dag_ntasks(g); i++) {
            dag_task a = *dag_task_get(g, i), b = *dag_task_get(g1, i);
            if (a.op == OP_OPTIM_STEP) { /* the one task dp sizes: the optimizer's shard, 1 / (cp x dp) */
                uint64_t all = pipe_stage_params(&c, 0), n = c.zero ? (uint64_t)config_cp(&c) : 1;
                uint64_t d = c.zero ? (uint64_t)c.dp : 1;
                ck_assert_uint_eq(a.flops, (all + n * d - 1) / (n * d));
                ck_assert_uint_eq(b.flops, (all + n - 1) / n);
                a.flops = b.flops;
            }
            ck_assert_int_eq(memcmp(&a, &b, sizeof(dag_task)), 0);
        }
        dag_free(g1);
        dag_free(g);
    }
}
END_TEST

START_TEST(step_scopes_validate)
{
    static const int zero[] = {0, 1, 2, 3};
    for (int rc = RECOMPUTE_NONE; rc <= RECOMPUTE_FULL; rc++) {
        config c = tcfg("tiny", 4 * K, _i % 2 ? "dualring" : "loongtrain", 2, 4, _i % 2 ? 0 : 2, SCOPE_STEP);
        c.zero = zero[_i];
        c.recompute = (recompute_kind)rc;
        dag *g = tbuild(&c);
        /* full recompute re-runs the ring forward, and so does Megatron's
         * selective (core attention); Selective Checkpoint++ never does */
        uint64_t fwd = sum_flops(g, -1, TASK_ATTN_FWD), once = 2 * c.seq * (c.seq + 1) * 8 * 32 * 2;
        ck_assert_uint_eq(fwd, rc == RECOMPUTE_FULL || rc == RECOMPUTE_SELECTIVE ? 2 * once : once);
        dag_free(g);
    }
}
END_TEST

START_TEST(every_p2p_has_src)
{
    /* matched sends and recvs name the same KV origin (checked by the
     * validator); here: a rank receives every other ring rank's KV once */
    config c = tcfg("tiny", 16 * K, "loongtrain", 2, 8, 2, SCOPE_ATTN_FWD);
    dag *g = tbuild(&c);
    for (int r = 0; r < config_ranks(&c); r++) {
        int seen[8] = {0}, h, s;
        config_coords(&c, r, &h, &s);
        for (uint32_t i = 0; i < dag_ntasks(g); i++) {
            const dag_task *t = dag_task_get(g, i);
            if (t->rank == r && t->kind == TASK_ATTN_FWD) seen[t->src]++;
        }
        for (int k = 0; k < 8; k++)
            ck_assert_int_eq(seen[k], 1);
    }
    dag_free(g);
}
END_TEST

static Suite *dag_suite(void)
{
    Suite *s = suite_create("dag");
    TCase *tc = tcase_create("balance");
    tcase_add_loop_test(tc, zigzag_balanced, 0, 6);
    tcase_add_loop_test(tc, contiguous_imbalance, 0, 6);
    suite_add_tcase(s, tc);
    tc = tcase_create("conservation");
    tcase_add_loop_test(tc, attention_conserved, 0, NMATRIX);
    tcase_add_test(tc, step_gemms_conserved);
    tcase_add_test(tc, mla_closed_forms);
    tcase_add_loop_test(tc, elementwise_closed_forms, 0, 2);
    tcase_add_loop_test(tc, unfused_closed_forms, 0, 3);
    tcase_add_loop_test(tc, fp8_casts_closed_forms, 0, 3);
    tcase_add_loop_test(tc, tp_closed_forms, 0, 4);
    tcase_add_loop_test(tc, tp_norm_grads_after_sync, 0, 8);
    tcase_add_loop_test(tc, llama3_params, 0, 2);
    tcase_add_loop_test(tc, moe_closed_forms, 0, 10);
    tcase_add_test(tc, moe_interleaved_blocks);
    tcase_add_loop_test(tc, moe_params, 0, 6);
    tcase_add_loop_test(tc, moe_expert_tp, 0, 5);
    tcase_add_loop_test(tc, moe_shared_overlap, 0, 2);
    tcase_add_loop_test(tc, moe_allgather_dispatch, 0, 4);
    tcase_add_test(tc, moe_capacity);
    tcase_add_test(tc, moe_routing_draw);
    tcase_add_test(tc, moe_routing_histogram);
    suite_add_tcase(s, tc);
    tc = tcase_create("bytes");
    tcase_add_loop_test(tc, alltoall_bytes, 0, NMATRIX);
    tcase_add_loop_test(tc, ring_kv_bytes, 0, NMATRIX);
    tcase_add_loop_test(tc, double_ring_transfers, 0, 4);
    tcase_add_test(tc, allgather_kv_stride);
    tcase_add_test(tc, kv_replication);
    suite_add_tcase(s, tc);
    tc = tcase_create("structure");
    tcase_add_loop_test(tc, deterministic_ids, 0, NMATRIX);
    tcase_add_loop_test(tc, step_scopes_validate, 0, 4);
    tcase_add_test(tc, every_p2p_has_src);
    tcase_add_test(tc, communicators_are_mesh_groups);
    tcase_add_loop_test(tc, tp_attention_shard, 0, 4);
    tcase_add_loop_test(tc, tp_kv_replication, 0, 3);
    tcase_add_loop_test(tc, tp_overlap_ring_exchange, 0, 2);
    tcase_add_loop_test(tc, dp_of_single_context_rank, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return check_run(dag_suite()); }

/*
 * build: dag_build() — one program per rank, ranks 0..P-1 in turn — and
 * the program of a scope: the layers around attention, the head
 * all-to-alls, the LM head and the gradient reduction (ZeRO stages). The
 * ring itself is ring.c; task storage and dependency inference are dag.c.
 *
 * Per block, forward: QKV GEMM, head all-to-all, ring attention, all-to-all
 * back, output projection, SwiGLU (gate, up, down). Backward runs the same in
 * reverse at 2x the GEMM FLOPs, optionally after a recompute pass (full:
 * everything, ring included; selective, LoongTrain's Selective Checkpoint++:
 * GEMMs and all-to-alls, the ring's (O, LSE) being kept). With P_h = 1 there
 * is no all-to-all and head-sharded buffers are the sequence-sharded ones.
 *
 * Gradient reduction over the gradient group (the dp stream; CONFIG_GRAD_DIMS:
 * the DAG's P ranks and their replicas), by ZeRO stage:
 *   0: all-reduce each block's gradients after its backward;
 *   1: one reduce-scatter of all gradients after the backward, then one
 *      all-gather of the updated parameters;
 *   2: reduce-scatter each block's gradients after its backward, then one
 *      all-gather of all parameters;
 *   3: all-gather each block's parameters before its forward and again
 *      before its backward, reduce-scatter its gradients after.
 * Ring collectives move chunks of ceil(size/P): an all-reduce sends
 * 2(P-1) chunks per rank, reduce-scatter and all-gather P-1.
 */
#include "dag_internal.h"
#include "ring.h"
#include "ringgeo.h"
#include "sizes.h"
#include "xalloc.h"

typedef struct prog {
    builder *b;
    const config *c;
    const model *m;
    uint64_t T; /* tokens per rank, sequence-sharded (B*S/P) */
    uint32_t head_gid, dp_gid;
} prog;

/* With P_h = 1 head-sharded and sequence-sharded buffers are the same. */
static int lbuf(const prog *p, int layer, int k)
{
    if (p->c->p_head == 1) {
        if (k == LB_QKV) k = LB_QKVH;
        if (k == LB_OS) k = LB_O;
        if (k == LB_DOS) k = LB_DOH;
        if (k == LB_DQKV) k = LB_DQKVH;
    }
    return BUF_LB(layer, k);
}

static void gemm(prog *p, task_op op, task_phase ph, int layer, uint64_t m, uint64_t n, uint64_t k, const int *reads,
                 int nreads, const int *writes, int nwrites)
{
    builder *b = p->b;
    uint32_t id = bt_begin(b, TASK_GEMM, STREAM_COMP, op, ph, op == OP_LM_HEAD ? -1 : layer);
    dag_task *t = bt_task(b, id);
    t->dim[0] = (uint32_t)m;
    t->dim[1] = (uint32_t)n;
    t->dim[2] = (uint32_t)k;
    t->flops = size_gemm_flops(m, n, k, ph == PHASE_BWD);
    for (int i = 0; i < nreads; i++)
        bt_reads(b, reads[i]);
    for (int i = 0; i < nwrites; i++)
        bt_writes(b, writes[i]);
    bt_end(b);
}
#define READS(...) (const int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))
#define WRITES     READS

/* Head all-to-all of `heads` heads of d (all ranks' buffers T x heads x d). */
static void a2a(prog *p, task_op op, task_phase ph, int layer, uint64_t heads, const int *reads, int nreads, int write)
{
    if (p->c->p_head == 1) return;
    builder *b = p->b;
    uint32_t id = bt_begin(b, TASK_ALLTOALL, STREAM_A2A, op, ph, layer);
    dag_task *t = bt_task(b, id);
    t->group = p->head_gid;
    t->dim[0] = (uint32_t)p->T;
    t->dim[1] = (uint32_t)heads;
    t->dim[2] = (uint32_t)p->m->head_dim;
    t->bytes = size_a2a_bytes(p->c, heads);
    for (int i = 0; i < nreads; i++)
        bt_reads(b, reads[i]);
    bt_writes(b, write);
    bt_end(b);
}

/* A ring collective over all P ranks moving `elems` elements. */
static void dp_coll(prog *p, task_kind kind, task_op op, int layer, uint64_t elems, int first, int last)
{
    uint64_t n = (uint64_t)config_ranks(p->c);
    if (n == 1) return;
    builder *b = p->b;
    uint32_t id = bt_begin(b, kind, STREAM_DP, op, PHASE_REDUCE, layer);
    dag_task *t = bt_task(b, id);
    t->group = p->dp_gid;
    t->bytes = size_ring_coll_bytes(elems, p->c->act_bytes, n, kind == TASK_ALLREDUCE);
    for (int l = first; l <= last; l++) {
        if (kind == TASK_ALLGATHER)
            bt_writes(b, BUF_LB(l, LB_W));
        else
            bt_reads(b, BUF_LB(l, LB_GRAD));
    }
    bt_end(b);
}

/* Heads the QKV all-to-all moves: H query heads, and K and V of every KV
 * head including the replicas. */
static uint64_t a2a_qkv_heads(const config *c)
{
    return (uint64_t)c->model.heads + 2 * (uint64_t)config_kv_heads_total(c);
}

static void attention_fwd_part(prog *p, int l, task_phase ph, bool with_ring)
{
    uint64_t qkv_heads = a2a_qkv_heads(p->c);
    a2a(p, OP_A2A_QKV, ph, l, qkv_heads, READS(lbuf(p, l, LB_QKV)), lbuf(p, l, LB_QKVH));
    if (with_ring) (p->c->ring == RING_ALLGATHER ? allgather_attention_fwd : ring_attention_fwd)(p->b, l, ph);
    a2a(p, OP_A2A_O, ph, l, (uint64_t)p->m->heads, READS(lbuf(p, l, LB_O)), lbuf(p, l, LB_OS));
}

static void attention_bwd_part(prog *p, int l)
{
    const config *c = p->c;
    uint64_t qkv_heads = a2a_qkv_heads(c);
    a2a(p, OP_A2A_DO, PHASE_BWD, l, (uint64_t)p->m->heads, READS(lbuf(p, l, LB_DOS)), lbuf(p, l, LB_DOH));
    (c->ring == RING_ALLGATHER ? allgather_attention_bwd : ring_attention_bwd)(p->b, l);
    int finals[3] = {lbuf(p, l, LB_DQKVH), BUF_DKV + DKV_FINAL, BUF_DKV + DAG_SLOTS_PER_LANE + DKV_FINAL};
    a2a(p, OP_A2A_DQKV, PHASE_BWD, l, qkv_heads, finals, 1 + ringgeo_lanes(c), lbuf(p, l, LB_DQKV));
    int repl = config_kv_repl(c);
    if (repl == 1) return;
    /* sum the P_h/H_kv replicas of each KV head's gradient */
    builder *b = p->b;
    uint32_t id = bt_begin(b, TASK_ACC, STREAM_COMP, OP_KV_REP_SUM, PHASE_BWD, l);
    dag_task *t = bt_task(b, id);
    t->dim[0] = (uint32_t)p->T;
    t->dim[1] = (uint32_t)config_kv_heads_total(c);
    t->dim[2] = 4;
    t->flops = size_kv_rep_sum_elems(c);
    bt_reads(b, lbuf(p, l, LB_DQKV));
    bt_writes(b, lbuf(p, l, LB_DQKV));
    bt_end(b);
}

static void layer_fwd(prog *p, int l, task_phase ph, bool with_ring)
{
    const model *m = p->m;
    uint64_t T = p->T, hid = (uint64_t)m->hidden, d = (uint64_t)m->head_dim, ffn = (uint64_t)m->ffn;
    int W = BUF_LB(l, LB_W);
    if (p->c->zero == 3 && ph == PHASE_FWD)
        dp_coll(p, TASK_ALLGATHER, OP_PARAM_ALLGATHER, l, model_layer_params(m), l, l);
    gemm(p, OP_QKV, ph, l, T, (uint64_t)model_qkv_heads(m) * d, hid, READS(BUF_LB(l, LB_X), W),
         WRITES(lbuf(p, l, LB_QKV)));
    attention_fwd_part(p, l, ph, with_ring);
    gemm(p, OP_OUT_PROJ, ph, l, T, hid, (uint64_t)m->heads * d, READS(lbuf(p, l, LB_OS), BUF_LB(l, LB_X), W),
         WRITES(BUF_LB(l, LB_H)));
    gemm(p, OP_MLP_GATE, ph, l, T, ffn, hid, READS(BUF_LB(l, LB_H), W), WRITES(BUF_LB(l, LB_M)));
    gemm(p, OP_MLP_UP, ph, l, T, ffn, hid, READS(BUF_LB(l, LB_H), W), WRITES(BUF_LB(l, LB_M)));
    gemm(p, OP_MLP_DOWN, ph, l, T, hid, ffn, READS(BUF_LB(l, LB_M), BUF_LB(l, LB_H), W), WRITES(BUF_LB(l + 1, LB_X)));
}

static void layer_bwd(prog *p, int l)
{
    const config *c = p->c;
    const model *m = p->m;
    uint64_t T = p->T, hid = (uint64_t)m->hidden, d = (uint64_t)m->head_dim, ffn = (uint64_t)m->ffn;
    int W = BUF_LB(l, LB_W), G = BUF_LB(l, LB_GRAD);
    if (c->zero == 3) dp_coll(p, TASK_ALLGATHER, OP_PARAM_ALLGATHER, l, model_layer_params(m), l, l);
    if (c->recompute != RECOMPUTE_NONE) layer_fwd(p, l, PHASE_RECOMPUTE, c->recompute == RECOMPUTE_FULL);
    gemm(p, OP_MLP_DOWN, PHASE_BWD, l, T, hid, ffn, READS(BUF_LB(l + 1, LB_DX), BUF_LB(l, LB_M), W),
         WRITES(BUF_LB(l, LB_DM), G));
    gemm(p, OP_MLP_UP, PHASE_BWD, l, T, ffn, hid, READS(BUF_LB(l, LB_DM), BUF_LB(l, LB_H), W),
         WRITES(BUF_LB(l, LB_DH), G));
    gemm(p, OP_MLP_GATE, PHASE_BWD, l, T, ffn, hid, READS(BUF_LB(l, LB_DM), BUF_LB(l, LB_H), W),
         WRITES(BUF_LB(l, LB_DH), G));
    gemm(p, OP_OUT_PROJ, PHASE_BWD, l, T, hid, (uint64_t)m->heads * d, READS(BUF_LB(l, LB_DH), lbuf(p, l, LB_OS), W),
         WRITES(lbuf(p, l, LB_DOS), G));
    attention_bwd_part(p, l);
    /* with P_h = 1 this GEMM reads dK/dV straight from the ring's final slots */
    int dkv_a = p->c->p_head == 1 ? BUF_DKV + DKV_FINAL : W;
    int dkv_b = p->c->p_head == 1 && ringgeo_lanes(c) == 2 ? BUF_DKV + DAG_SLOTS_PER_LANE + DKV_FINAL : W;
    gemm(p, OP_QKV, PHASE_BWD, l, T, (uint64_t)model_qkv_heads(m) * d, hid,
         READS(lbuf(p, l, LB_DQKV), BUF_LB(l, LB_X), W, dkv_a, dkv_b), WRITES(BUF_LB(l, LB_DX), G));
    if (c->zero == 0) dp_coll(p, TASK_ALLREDUCE, OP_GRAD_ALLREDUCE, l, model_layer_params(m), l, l);
    if (c->zero >= 2) dp_coll(p, TASK_REDUCESCATTER, OP_GRAD_REDUCESCATTER, l, model_layer_params(m), l, l);
}

/* LM head forward and backward; its buffers live at index L. */
static void lm_head(prog *p)
{
    const config *c = p->c;
    const model *m = p->m;
    int L = m->layers, W = BUF_LB(L, LB_W), G = BUF_LB(L, LB_GRAD);
    uint64_t T = p->T, hid = (uint64_t)m->hidden, v = (uint64_t)m->vocab;
    if (c->zero == 3) dp_coll(p, TASK_ALLGATHER, OP_PARAM_ALLGATHER, -1, model_head_params(m), L, L);
    gemm(p, OP_LM_HEAD, PHASE_FWD, L, T, v, hid, READS(BUF_LB(L, LB_X), W), WRITES(BUF_LB(L, LB_M)));
    gemm(p, OP_LM_HEAD, PHASE_BWD, L, T, v, hid, READS(BUF_LB(L, LB_M), BUF_LB(L, LB_X), W),
         WRITES(BUF_LB(L, LB_DX), G));
    if (c->zero == 0) dp_coll(p, TASK_ALLREDUCE, OP_GRAD_ALLREDUCE, -1, model_head_params(m), L, L);
    if (c->zero >= 2) dp_coll(p, TASK_REDUCESCATTER, OP_GRAD_REDUCESCATTER, -1, model_head_params(m), L, L);
}

static void training_step(prog *p)
{
    const config *c = p->c;
    int L = p->m->layers;
    for (int l = 0; l < L; l++)
        layer_fwd(p, l, PHASE_FWD, true);
    lm_head(p);
    for (int l = L - 1; l >= 0; l--)
        layer_bwd(p, l);
    uint64_t all = model_params(p->m);
    if (c->zero == 1) dp_coll(p, TASK_REDUCESCATTER, OP_GRAD_REDUCESCATTER, -1, all, 0, L);
    if (c->zero == 1 || c->zero == 2) dp_coll(p, TASK_ALLGATHER, OP_PARAM_ALLGATHER, -1, all, 0, L);
}

/* The program of this rank for the config's scope. */
static void build_rank(builder *b)
{
    const config *c = bt_config(b);
    prog p = {b, c, &c->model, config_local_tokens(c), DAG_NONE, DAG_NONE};
    p.head_gid = bt_group(b, STREAM_A2A, MESH_BIT(MESH_HEAD));
    p.dp_gid = bt_group(b, STREAM_DP, CONFIG_GRAD_DIMS);
    switch (c->scope) {
    case SCOPE_ATTN_FWD: attention_fwd_part(&p, 0, PHASE_FWD, true); break;
    case SCOPE_ATTN:
        attention_fwd_part(&p, 0, PHASE_FWD, true);
        attention_bwd_part(&p, 0);
        break;
    case SCOPE_STEP: training_step(&p); break;
    }
}

dag *dag_build(const config *c, char err[LOONG_ERRLEN])
{
    if (config_validate(c, err) < 0) return NULL;
    builder *b = bt_new(c);
    int ranks = config_ranks(c);
    for (int r = 0; r < ranks; r++) {
        bt_start_rank(b, r);
        build_rank(b);
        /* ranks run near-identical programs: size the arrays once from rank 0 */
        if (r == 0 && ranks > 1 && bt_reserve(b, ranks, err) < 0) {
            bt_abort(b);
            return NULL;
        }
    }
    return bt_finish(b, err);
}

/*
 * build: dag_build() — one program per rank, ranks 0..P-1 in turn — and
 * the layer program of a scope: the layers around attention, the head
 * all-to-alls, the LM head and the optimizer. The parallel dimensions
 * have their own files (build_internal.h): tensor parallelism build_tp.c,
 * the pipeline's passes build_pp.c, the gradient reduction (ZeRO stages)
 * build_grad.c, the ring itself ring.c (allgather.c); task storage and
 * dependency inference are dag.c.
 *
 * Per block, forward: QKV GEMM, head all-to-all, ring attention, all-to-all
 * back, output projection, SwiGLU (gate, up, down). Backward runs the same in
 * reverse at 2x the GEMM FLOPs, optionally after a recompute pass that
 * re-runs the parts of the block (or of its group of blocks) that the
 * policy names (recompute.h: Megatron's selective, core attention with its
 * all-to-alls and ring, and/or the MLP; LoongTrain's Selective Checkpoint++,
 * GEMMs and all-to-alls, the ring's (O, LSE) being kept; full, everything).
 * With P_h = 1 there is no all-to-all and head-sharded buffers are the
 * sequence-sharded ones.
 */
#include <string.h>

#include "build_internal.h"
#include "elementwise.h"
#include "recompute.h"
#include "ring.h"
#include "ringgeo.h"
#include "sizes.h"

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

/* End the current task once it reads `reads` and writes `writes`. */
static void end_with_buffers(builder *b, const int *reads, int nreads, const int *writes, int nwrites)
{
    for (int i = 0; i < nreads; i++)
        bt_reads(b, reads[i]);
    for (int i = 0; i < nwrites; i++)
        bt_writes(b, writes[i]);
    bt_end(b);
}

uint32_t build_gemm(prog *p, task_op op, task_phase ph, int layer, uint64_t m, uint64_t n, uint64_t k, const int *reads,
                    int nreads, const int *writes, int nwrites)
{
    builder *b = p->b;
    uint32_t id = bt_begin(b, TASK_GEMM, STREAM_COMP, op, ph, op == OP_LM_HEAD ? -1 : layer);
    bt_after(b, p->after);
    p->after = DAG_NONE;
    dag_task *t = bt_task(b, id);
    t->dim[0] = (uint32_t)m;
    t->dim[1] = (uint32_t)n;
    t->dim[2] = (uint32_t)k;
    t->flops = size_gemm_flops(m, n, k, ph == PHASE_BWD);
    end_with_buffers(b, reads, nreads, writes, nwrites);
    return id;
}

/* A memory-bound kernel of op (elementwise.h) on the compute stream: it
 * reads the buffers `reads` and writes `writes`, the tensors it updates as
 * far as the DAG's dependencies go. Its FLOPs field holds the elements it
 * processes (dim[0] x dim[1]; dims of 2^32 and more are 0). */
static uint32_t elementwise(prog *p, task_op op, task_phase ph, int layer, const int *reads, int nreads,
                            const int *writes, int nwrites)
{
    builder *b = p->b;
    uint64_t rows, cols;
    elementwise_shape(p->c, op, p->stage, &rows, &cols);
    /* the final norm and the loss, beside the LM head, are model-level (-1) like it */
    uint32_t id = bt_begin(b, elementwise_kind(op), STREAM_COMP, op, ph, layer < p->m->layers ? layer : -1);
    dag_task *t = bt_task(b, id);
    t->dim[0] = rows <= UINT32_MAX ? (uint32_t)rows : 0;
    t->dim[1] = (uint32_t)cols;
    t->dim[2] = (uint32_t)p->c->act_bytes;
    t->flops = rows * cols;
    end_with_buffers(b, reads, nreads, writes, nwrites);
    return id;
}

/* Whether the block GEMMs run in FP8 (--precision; elementwise.h's quant). */
static bool fp8(const prog *p) { return p->c->precision != PRECISION_BF16; }

/* The common case: a kernel updating one tensor in place. */
static void inplace(prog *p, task_op op, task_phase ph, int layer, int buf)
{
    elementwise(p, op, ph, layer, &buf, 1, &buf, 1);
}

/* A norm of block `layer` (L: the final one) on buf: it reads the block's
 * weights too, so under ZeRO-3 it waits for their gather like the GEMMs.
 * Forward, its output is a new tensor that the next TP collective (the
 * sequence-parallel all-gather) waits for: writing buf would make it wait
 * for buf's other readers (ZeRO-3's gathers wait for the block input).
 * Backward, it updates the gradient in place and writes the norm weight's
 * gradient, which the gradient collectives wait for. */
static void norm(prog *p, task_op op, task_phase ph, int layer, int buf)
{
    const int writes[2] = {buf, BUF_LB(layer, LB_GRAD)};
    bool bwd = ph == PHASE_BWD;
    uint32_t id = elementwise(p, op, ph, layer, READS(buf, BUF_LB(layer, LB_W)), writes, bwd ? 2 : 0);
    if (!bwd) p->tp_after = id;
}

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

/* Heads the QKV all-to-all moves: H query heads, and K and V of every KV
 * head including the replicas. */
static uint64_t a2a_qkv_heads(const config *c)
{
    return (uint64_t)config_tp_heads(c) + 2 * (uint64_t)config_kv_heads_total(c);
}

/* The QKV projection's GEMMs into g (reads and writes as given), their
 * count: one, or MLA's (Megatron-Core's MultiLatentAttention) Q down and
 * up (or one Q projection without q_lora), and KV down, to the latent and
 * the shared rope key, and up. The down projections are replicated over
 * TP, the up projections column-parallel. */
static int qkv_gemms(const prog *p, tp_gemm g[4], const int *reads, int nreads, const int *writes, int nwrites)
{
    const model *m = p->m;
    uint64_t hid = (uint64_t)m->hidden, H = (uint64_t)config_tp_heads(p->c), n = 0;
    uint64_t shape[4][2];
    if (!model_mla(m)) {
        shape[n][0] = (uint64_t)model_tp_qkv_heads(m, p->tp) * (uint64_t)m->head_dim, shape[n++][1] = hid;
    } else {
        uint64_t ql = (uint64_t)m->q_lora, kl = (uint64_t)m->kv_lora, dqk = (uint64_t)(m->qk_nope + m->qk_rope);
        if (ql) shape[n][0] = ql, shape[n++][1] = hid;
        shape[n][0] = H * dqk, shape[n++][1] = ql ? ql : hid;
        shape[n][0] = kl + (uint64_t)m->qk_rope, shape[n++][1] = hid;
        shape[n][0] = H * (uint64_t)(m->qk_nope + m->v_dim), shape[n++][1] = kl;
    }
    for (uint64_t i = 0; i < n; i++) {
        g[i] = (tp_gemm){OP_QKV, shape[i][0], shape[i][1], {0}, nreads, {0}, nwrites};
        memcpy(g[i].reads, reads, (size_t)nreads * sizeof *reads);
        memcpy(g[i].writes, writes, (size_t)nwrites * sizeof *writes);
    }
    return (int)n;
}

/* Attention's forward: the parts of RC_A2A | RC_RING in `parts`. */
static void attention_fwd_part(prog *p, int l, task_phase ph, unsigned parts)
{
    uint64_t qkv_heads = a2a_qkv_heads(p->c);
    if (parts & RC_A2A) a2a(p, OP_A2A_QKV, ph, l, qkv_heads, READS(lbuf(p, l, LB_QKV)), lbuf(p, l, LB_QKVH));
    if (parts & RC_RING) (p->c->ring == RING_ALLGATHER ? allgather_attention_fwd : ring_attention_fwd)(p->b, l, ph);
    if (parts & RC_A2A)
        a2a(p, OP_A2A_O, ph, l, (uint64_t)config_tp_heads(p->c), READS(lbuf(p, l, LB_O)), lbuf(p, l, LB_OS));
}

static void attention_bwd_part(prog *p, int l)
{
    const config *c = p->c;
    uint64_t qkv_heads = a2a_qkv_heads(c);
    a2a(p, OP_A2A_DO, PHASE_BWD, l, (uint64_t)config_tp_heads(c), READS(lbuf(p, l, LB_DOS)), lbuf(p, l, LB_DOH));
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

static void dense_mlp_fwd(prog *p, int l, task_phase ph);
static void dense_mlp_bwd(prog *p, int l);

/* Forward of block l, the parts of it in `parts` (recompute.h's RC_*: all
 * of them in the forward, the policy's in a recompute pass). Tensor shapes
 * per rank (T tokens, tp shards):
 *   QKV (T, hid) x (hid, (H+2H_kv)d/tp); output projection (T, Hd/tp) x
 *   (Hd/tp, hid); gate and up (T, hid) x (hid, ffn/tp); down (T, ffn/tp) x
 *   (ffn/tp, hid). */
void build_layer_fwd(prog *p, int l, task_phase ph, unsigned parts)
{
    const model *m = p->m;
    uint64_t hid = (uint64_t)m->hidden, o = config_tp_attn_width(p->c);
    int W = BUF_LB(l, LB_W), X = BUF_LB(l, LB_X), H = BUF_LB(l, LB_H);
    if (p->c->zero == 3 && ph == PHASE_FWD) build_grad_fwd_gathers(p, l);
    if (elementwise_reruns(OP_NORM_ATTN, parts)) norm(p, OP_NORM_ATTN, ph, l, X);
    tp_gemm qkv[4];
    int nq = qkv_gemms(p, qkv, READS(build_tp_buf(p, l, LB_XG), W), WRITES(lbuf(p, l, LB_QKV)));
    if (parts & RC_QKV) build_tp_column(p, OP_TP_X, ph, l, X, build_tp_buf(p, l, LB_XG), qkv, nq);
    if (model_mla(m) && elementwise_reruns(OP_NORM_LATENT, parts)) /* after the projections, not between: one cost */
        elementwise(p, OP_NORM_LATENT, ph, l, READS(lbuf(p, l, LB_QKV), W), WRITES(lbuf(p, l, LB_QKV)));
    if (elementwise_reruns(OP_ROPE, parts)) inplace(p, OP_ROPE, ph, l, lbuf(p, l, LB_QKV));
    attention_fwd_part(p, l, ph, parts);
    const tp_gemm out = {OP_OUT_PROJ, hid, o, {lbuf(p, l, LB_OS), X, W}, 3, {build_tp_buf(p, l, LB_HP)}, 1};
    if (fp8(p) && elementwise_reruns(OP_QUANT_ATTN_OUT, parts)) inplace(p, OP_QUANT_ATTN_OUT, ph, l, lbuf(p, l, LB_OS));
    if (parts & RC_OUT) build_tp_row(p, OP_TP_H, ph, l, &out, 1, build_tp_buf(p, l, LB_HP), H);
    if (elementwise_reruns(OP_ADD_ATTN, parts)) inplace(p, OP_ADD_ATTN, ph, l, H);
    if (!(parts & RC_MLP)) return;
    norm(p, OP_NORM_MLP, ph, l, H); /* TE's LayerNormMLP: the MLP's recompute re-runs its norm */
    if (model_block_moe(m, l))
        build_moe_fwd(p, l, ph);
    else
        dense_mlp_fwd(p, l, ph);
    if (elementwise_reruns(OP_ADD_MLP, parts)) inplace(p, OP_ADD_MLP, ph, l, BUF_LB(l + 1, LB_X));
}

/* The dense MLP's SwiGLU, from the normed H into the block output. */
static void dense_mlp_fwd(prog *p, int l, task_phase ph)
{
    uint64_t hid = (uint64_t)p->m->hidden, ffn = config_tp_ffn(p->c);
    int W = BUF_LB(l, LB_W), H = BUF_LB(l, LB_H), M = BUF_LB(l, LB_M);
    const tp_gemm gate_up[2] = {{OP_MLP_GATE, ffn, hid, {build_tp_buf(p, l, LB_HG), W}, 2, {M}, 1},
                                {OP_MLP_UP, ffn, hid, {build_tp_buf(p, l, LB_HG), W}, 2, {M}, 1}};
    build_tp_column(p, OP_TP_H, ph, l, H, build_tp_buf(p, l, LB_HG), gate_up, 2);
    inplace(p, OP_ACT, ph, l, M);
    const tp_gemm down = {OP_MLP_DOWN, hid, ffn, {M, H, W}, 3, {build_tp_buf(p, l, LB_YP)}, 1};
    build_tp_row(p, OP_TP_Y, ph, l, &down, 1, build_tp_buf(p, l, LB_YP), BUF_LB(l + 1, LB_X));
}

void build_layer_bwd(prog *p, int l)
{
    const config *c = p->c;
    const model *m = p->m;
    uint64_t hid = (uint64_t)m->hidden, o = config_tp_attn_width(p->c);
    int W = BUF_LB(l, LB_W), G = BUF_LB(l, LB_GRAD), DH = BUF_LB(l, LB_DH);
    if (c->zero == 3) build_grad_bwd_gathers(p, l);
    int first, rerun = recompute_span(c, p->stage, l, &first); /* the policy's blocks, in forward order */
    unsigned late = rerun ? recompute_parts_late(c) : 0;
    for (int j = 0; j < rerun; j++)
        build_layer_fwd(p, first + j, PHASE_RECOMPUTE, recompute_parts(c) & ~late);
    if (fp8(p)) inplace(p, OP_QUANT_GRAD, PHASE_BWD, l, BUF_LB(l + 1, LB_DX));
    if (model_block_moe(m, l))
        build_moe_bwd(p, l);
    else
        dense_mlp_bwd(p, l);
    norm(p, OP_NORM_MLP, PHASE_BWD, l, DH);
    inplace(p, OP_ADD_MLP, PHASE_BWD, l, DH); /* the residual's gradient joins the MLP's */
    const tp_gemm out = {
        OP_OUT_PROJ, hid, o, {build_tp_buf(p, l, LB_DHG), lbuf(p, l, LB_OS), W}, 3, {lbuf(p, l, LB_DOS), G}, 2};
    if (fp8(p)) inplace(p, OP_QUANT_GRAD, PHASE_BWD, l, DH);
    build_tp_column(p, OP_TP_H, PHASE_BWD, l, DH, build_tp_buf(p, l, LB_DHG), &out, 1);
    if (late) attention_fwd_part(p, l, PHASE_RECOMPUTE, late); /* checkpointed core attention */
    attention_bwd_part(p, l);
    /* with P_h = 1 this GEMM reads dK/dV straight from the ring's final slots */
    int dkv_a = p->c->p_head == 1 ? BUF_DKV + DKV_FINAL : W;
    int dkv_b = p->c->p_head == 1 && ringgeo_lanes(c) == 2 ? BUF_DKV + DAG_SLOTS_PER_LANE + DKV_FINAL : W;
    elementwise(p, OP_ROPE, PHASE_BWD, l, READS(lbuf(p, l, LB_DQKV), dkv_a, dkv_b), WRITES(lbuf(p, l, LB_DQKV)));
    if (model_mla(m)) /* the latents' norms, their weights' gradients too */
        elementwise(p, OP_NORM_LATENT, PHASE_BWD, l, READS(lbuf(p, l, LB_DQKV), W), WRITES(lbuf(p, l, LB_DQKV), G));
    build_tp_gather(p, OP_TP_X, PHASE_BWD, l, BUF_LB(l, LB_X),
                    build_tp_buf(p, l, LB_XG)); /* x again, beside attention */
    tp_gemm qkv[4];
    int nq = qkv_gemms(p, qkv, READS(lbuf(p, l, LB_DQKV), build_tp_buf(p, l, LB_XG), W, dkv_a, dkv_b),
                       WRITES(build_tp_buf(p, l, LB_DXP), G));
    for (int i = 0; i < nq / 2; i++) { /* MLA's backward: the up projections' before their down's, as autograd */
        tp_gemm swap = qkv[i];
        qkv[i] = qkv[nq - 1 - i], qkv[nq - 1 - i] = swap;
    }
    if (fp8(p)) inplace(p, OP_QUANT_DQKV, PHASE_BWD, l, lbuf(p, l, LB_DQKV));
    build_tp_row(p, OP_TP_X, PHASE_BWD, l, qkv, nq, build_tp_buf(p, l, LB_DXP), BUF_LB(l, LB_DX));
    norm(p, OP_NORM_ATTN, PHASE_BWD, l, BUF_LB(l, LB_DX));
    inplace(p, OP_ADD_ATTN, PHASE_BWD, l, BUF_LB(l, LB_DX));
    if (!p->last_mb) return; /* the gradients accumulate over the micro-batches */
    build_tp_kv_grads(p, l);
    build_grad_block(p, l);
    build_ep_grad_block(p, l);
}

/* The dense MLP's backward, from the block output's gradient into DH. */
static void dense_mlp_bwd(prog *p, int l)
{
    uint64_t hid = (uint64_t)p->m->hidden, ffn = config_tp_ffn(p->c);
    int W = BUF_LB(l, LB_W), G = BUF_LB(l, LB_GRAD), DM = BUF_LB(l, LB_DM), DH = BUF_LB(l, LB_DH);
    const tp_gemm down = {OP_MLP_DOWN, hid, ffn, {build_tp_buf(p, l, LB_DYG), BUF_LB(l, LB_M), W}, 3, {DM, G}, 2};
    build_tp_column(p, OP_TP_Y, PHASE_BWD, l, BUF_LB(l + 1, LB_DX), build_tp_buf(p, l, LB_DYG), &down, 1);
    inplace(p, OP_ACT, PHASE_BWD, l, DM);
    build_tp_gather(p, OP_TP_H, PHASE_BWD, l, BUF_LB(l, LB_H), build_tp_buf(p, l, LB_HG)); /* h again, beside down */
    const tp_gemm up_gate[2] = {
        {OP_MLP_UP, ffn, hid, {DM, build_tp_buf(p, l, LB_HG), W}, 3, {build_tp_buf(p, l, LB_DHP), G}, 2},
        {OP_MLP_GATE, ffn, hid, {DM, build_tp_buf(p, l, LB_HG), W}, 3, {build_tp_buf(p, l, LB_DHP), G}, 2}};
    build_tp_row(p, OP_TP_H, PHASE_BWD, l, up_gate, 2, build_tp_buf(p, l, LB_DHP), DH);
}

/* The vocab-parallel embedding: each TP rank looks up the tokens of its
 * vocabulary shard and the partial rows are reduced (forward; the lookup
 * itself is not a task); the gradient is gathered back for the scatter-add
 * into the embedding rows (backward, after block 0). */
void build_embedding(prog *p, task_phase ph)
{
    int rows = BUF_LB(0, p->tp > 1 ? LB_XG : LB_X); /* the lookup's output, reduced over TP */
    if (ph == PHASE_FWD) {
        elementwise(p, OP_EMBED, ph, -1, NULL, 0, &rows, 1);
        build_tp_reduce(p, OP_TP_EMBED, ph, -1, BUF_LB(0, LB_XG), BUF_LB(0, LB_X));
        return;
    }
    build_tp_gather(p, OP_TP_EMBED, ph, -1, BUF_LB(0, LB_DX), BUF_LB(0, LB_DYG));
    int grad = p->tp > 1 && p->sp ? BUF_LB(0, LB_DYG) : BUF_LB(0, LB_DX);
    uint32_t id = elementwise(p, OP_EMBED, ph, -1, &grad, 1, NULL, 0);
    /* pipelined, the first stage reduces the embedding's gradient itself
     * (else the LM head's reduction covers it) */
    p->after = id;
    if (p->c->pp > 1) build_grad_head(p, grad);
    p->after = DAG_NONE;
}

/* LM head forward, then backward; its buffers live at index L. Vocab-
 * parallel: (T, hid) x (hid, ceil(V/tp)), then the cross-entropy's
 * statistics reduced over TP. */
void build_lm_head_fwd(prog *p)
{
    const config *c = p->c;
    const model *m = p->m;
    int L = m->layers, W = BUF_LB(L, LB_W);
    uint64_t T = p->T, hid = (uint64_t)m->hidden, v = config_tp_vocab(p->c);
    if (c->zero == 3 && c->prefetch == 0) build_grad_param_gather(p, L, BUF_LB(L, LB_X)); /* else prefetched */
    norm(p, OP_NORM_FINAL, PHASE_FWD, L, BUF_LB(L, LB_X));
    build_tp_gather(p, OP_TP_X, PHASE_FWD, L, BUF_LB(L, LB_X), build_tp_buf(p, L, LB_XG));
    build_gemm(p, OP_LM_HEAD, PHASE_FWD, L, T, v, hid, READS(build_tp_buf(p, L, LB_XG), W), WRITES(BUF_LB(L, LB_M)));
    inplace(p, OP_LOSS, PHASE_FWD, L, BUF_LB(L, LB_M));
    build_tp_coll_sized(p, TASK_ALLREDUCE, OP_TP_LOSS, PHASE_FWD, L, 3 * T, 4, BUF_LB(L, LB_M), BUF_LB(L, LB_M));
}

void build_lm_head_bwd(prog *p)
{
    const model *m = p->m;
    int L = m->layers, W = BUF_LB(L, LB_W), G = BUF_LB(L, LB_GRAD);
    uint64_t T = p->T, hid = (uint64_t)m->hidden, v = config_tp_vocab(p->c);
    inplace(p, OP_LOSS, PHASE_BWD, L, BUF_LB(L, LB_M));
    build_tp_gather(p, OP_TP_X, PHASE_BWD, L, BUF_LB(L, LB_X), build_tp_buf(p, L, LB_XG));
    build_gemm(p, OP_LM_HEAD, PHASE_BWD, L, T, v, hid, READS(BUF_LB(L, LB_M), build_tp_buf(p, L, LB_XG), W),
               WRITES(build_tp_buf(p, L, LB_DXP), G));
    build_tp_reduce(p, OP_TP_X, PHASE_BWD, L, build_tp_buf(p, L, LB_DXP), BUF_LB(L, LB_DX));
    norm(p, OP_NORM_FINAL, PHASE_BWD, L, BUF_LB(L, LB_DX));
    build_grad_head(p, -1);
}

/* The optimizer's kernels (elementwise.h): the gradient buffer zeroed
 * before the first pass (grad = false), or the step over the rank's shard
 * once every gradient collective so far and the norm weights' reduction
 * (`after`) are done (true). Returns the step's id. */
static uint32_t optimizer(prog *p, bool step, uint32_t after)
{
    builder *b = p->b;
    int L = p->m->layers;
    uint64_t rows, cols;
    task_op op = step ? OP_OPTIM_STEP : OP_ZERO_GRAD;
    elementwise_shape(p->c, op, p->stage, &rows, &cols);
    uint32_t id = bt_begin(b, TASK_OPTIM, STREAM_COMP, op, PHASE_REDUCE, -1);
    bt_after(b, p->grad_sync);
    bt_after(b, after);
    dag_task *t = bt_task(b, id);
    t->dim[2] = (uint32_t)p->c->act_bytes;
    t->flops = rows * cols;
    for (int l = 0; l <= L; l++) {
        if (!build_stage_holds(p, l)) continue;
        if (step) bt_reads(b, BUF_LB(l, LB_GRAD));
        bt_writes(b, BUF_LB(l, step ? LB_W : LB_GRAD));
    }
    bt_end(b);
    return id;
}

static void training_step(prog *p)
{
    optimizer(p, false, DAG_NONE);
    if (fp8(p)) elementwise(p, OP_QUANT_W, PHASE_FWD, -1, NULL, 0, NULL, 0); /* the FP8 weights of the step */
    build_pp_passes(p);
    build_grad_step_scatter(p);
    build_ep_grad_step_scatter(p);
    /* the gather of the optimizer step's result waits for it */
    p->after = optimizer(p, true, build_tp_norm_grads(p));
    uint32_t step = p->after;
    build_grad_step_gather(p);
    p->after = step;
    build_ep_grad_step_gather(p);
    p->after = DAG_NONE;
}

/* The program of this rank for the config's scope. */
static void build_rank(builder *b)
{
    const config *c = bt_config(b);
    prog p = {b,
              c,
              &c->model,
              config_local_tokens(c),
              DAG_NONE,
              DAG_NONE,
              DAG_NONE,
              DAG_NONE,
              c->tp,
              c->sequence_parallel,
              c->tp_overlap,
              DAG_NONE,
              DAG_NONE,
              DAG_NONE,
              pipe_stage(c, bt_rank(b)),
              true,
              DAG_NONE,
              DAG_NONE,
              DAG_NONE,
              DAG_NONE};
    p.head_gid = bt_group(b, STREAM_A2A, MESH_DIMS_HEAD);
    build_grad_groups(&p);
    build_tp_groups(&p);
    build_ep_groups(&p);
    switch (c->scope) {
    case SCOPE_ATTN_FWD: attention_fwd_part(&p, 0, PHASE_FWD, RC_A2A | RC_RING); break;
    case SCOPE_ATTN:
        attention_fwd_part(&p, 0, PHASE_FWD, RC_A2A | RC_RING);
        attention_bwd_part(&p, 0);
        break;
    case SCOPE_STEP: training_step(&p); break;
    }
}

dag *dag_build(const config *c, char err[LOONG_ERRLEN]) { return dag_build_folded(c, 0, err); }

dag *dag_build_folded(const config *c, mesh_dims folded, char err[LOONG_ERRLEN])
{
    if (config_validate(c, err) < 0) return NULL;
    if (folded & ~DAG_FOLDABLE) {
        snprintf(err, LOONG_ERRLEN, "internal: a DAG folds tp, head and seq only, not the dimensions 0x%x", folded);
        return NULL;
    }
    builder *b = bt_new(c);
    bt_fold(b, folded);
    mesh m = config_mesh(c);
    int ranks = config_ranks(c), built = ranks / mesh_group_size(&m, folded);
    for (int r = 0, first = 1; r < ranks; r++) {
        if (folded && mesh_fold(&m, folded, r) != r) continue; /* its representative's tasks stand for it */
        bt_start_rank(b, r);
        build_rank(b);
        /* ranks run near-identical programs: size the arrays once from the first */
        if (first && built > 1 && bt_reserve(b, built, err) < 0) {
            bt_abort(b);
            return NULL;
        }
        first = 0;
    }
    return bt_finish(b, err);
}

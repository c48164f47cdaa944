/*
 * build: dag_build() — one program per rank, ranks 0..P-1 in turn — and
 * the program of a scope: the layers around attention, the head
 * all-to-alls, the LM head and the gradient reduction (ZeRO stages). The
 * ring itself is ring.c; task storage and dependency inference are dag.c.
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
 *
 * Tensor parallelism (tp > 1) is Megatron-Core's layer
 * (megatron/core/tensor_parallel/layers.py, mappings.py): QKV, gate and
 * up are column-parallel (n / tp), the output projection and down
 * row-parallel (k / tp), the LM head and the embedding vocab-parallel.
 * The TP collectives (the tp stream, over (T, hidden) of the layer):
 *   sequence parallelism on (the default): forward, an all-gather before
 *     each column-parallel GEMM and a reduce-scatter after each
 *     row-parallel one; backward, an all-gather of the output gradient
 *     before each row-parallel GEMM, an all-gather of the saved input
 *     again before each column-parallel one (its weight gradient needs the
 *     whole input, and Megatron keeps only the shard:
 *     LinearWithGradAccumulationAndAsyncCommunication.backward) and a
 *     reduce-scatter of its input gradient;
 *   off: an all-reduce after each row-parallel GEMM forward and after each
 *     column-parallel GEMM's backward.
 * The vocab-parallel cross-entropy all-reduces three fp32 values per token
 * (max, target logit, sum of exponentials: VocabParallelCrossEntropy).
 * A GEMM waits for its collective: TP communication is on the critical
 * path, unless --tp-overlap (below, "ring-exchange"). The norm weights,
 * replicated over TP, have their gradients all-reduced over TP once per
 * step under sequence parallelism (norm_grads, below).
 */
#include <string.h>

#include "dag_internal.h"
#include "elementwise.h"
#include "pipeline.h"
#include "recompute.h"
#include "ring.h"
#include "ringgeo.h"
#include "sizes.h"
#include "xalloc.h"

typedef struct prog {
    builder *b;
    const config *c;
    const model *m;
    uint64_t T; /* tokens per rank, sequence-sharded (B*S/P) */
    uint32_t head_gid, dp_gid, tp_gid, kv_gid;
    int tp;
    bool sp;            /* sequence parallelism */
    bool overlap;       /* --tp-overlap: the ring-exchange pipelines below */
    uint32_t after;     /* a task the next GEMM or DP collective waits for besides its buffers (DAG_NONE: none) */
    uint32_t tp_after;  /* a task the next TP collective waits for besides its buffers (DAG_NONE: none) */
    uint32_t grad_sync; /* the last gradient collective over the gradient group so far (DAG_NONE: none) */
    int stage;          /* pipeline stage (pipeline.h) */
    bool last_mb;       /* the pass being emitted is of the last micro-batch: the gradients are complete */
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

/* The tp = 1 buffer of a TP-side buffer, and with sequence parallelism off
 * the gathered inputs are the replicated ones. */
static int tbuf(const prog *p, int layer, int k)
{
    static const int base[] = {[LB_XG] = LB_X,   [LB_HG] = LB_H,   [LB_HP] = LB_H,   [LB_YP] = LB_X,
                               [LB_DYG] = LB_DX, [LB_DHG] = LB_DH, [LB_DHP] = LB_DH, [LB_DXP] = LB_DX};
    bool gathered = k == LB_XG || k == LB_HG || k == LB_DYG || k == LB_DHG;
    if (p->tp == 1 || (gathered && !p->sp)) {
        if (k == LB_YP || k == LB_DYG) layer++; /* the next block's input */
        k = base[k];
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

static uint32_t gemm(prog *p, task_op op, task_phase ph, int layer, uint64_t m, uint64_t n, uint64_t k,
                     const int *reads, int nreads, const int *writes, int nwrites)
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
#define READS(...) (const int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))
#define WRITES     READS

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

/* Whether a per-layer buffer holds a gradient (LB_DX, LB_DH). */
static bool is_grad_buf(int buf)
{
    int k = (buf - BUF_LAYER0) % LB_COUNT;
    return buf >= BUF_LAYER0 && (k == LB_DX || k == LB_DH);
}

/* A TP collective of `elems` elements of `elem_bytes`; nothing at tp = 1.
 * kinds: all-gather, reduce-scatter, all-reduce (ring chunks as below).
 * Its buf says whether it moves a gradient (dag.h, DAG_TP_GRAD): the two
 * backward gathers of OP_TP_H, h again and dh, differ only there. */
static void tp_coll_sized(prog *p, task_kind kind, task_op op, task_phase ph, int layer, uint64_t elems, int elem_bytes,
                          int read, int write)
{
    if (p->tp == 1) return;
    builder *b = p->b;
    uint32_t id = bt_begin(b, kind, STREAM_TP, op, ph, layer);
    bt_after(b, p->tp_after);
    p->tp_after = DAG_NONE;
    dag_task *t = bt_task(b, id);
    t->group = p->tp_gid;
    t->dim[0] = (uint32_t)p->T;
    t->dim[1] = (uint32_t)(elems / p->T);
    t->dim[2] = (uint32_t)elem_bytes;
    t->bytes = size_ring_coll_bytes(elems, elem_bytes, (uint64_t)p->tp, kind == TASK_ALLREDUCE);
    t->buf = ph == PHASE_BWD && (kind != TASK_ALLGATHER || is_grad_buf(read)) ? DAG_TP_GRAD : 0;
    bt_reads(b, read);
    bt_writes(b, write);
    bt_end(b);
}

/* A TP collective of the layer's (T, hidden) activations. */
static void tp_coll(prog *p, task_kind kind, task_op op, task_phase ph, int layer, int read, int write)
{
    uint64_t elems = p->T * (uint64_t)p->m->hidden;
    tp_coll_sized(p, kind, op, ph, layer, elems, p->c->act_bytes, read, write);
}

/* Before a column-parallel GEMM: gather its input (sequence parallelism). */
static void tp_gather(prog *p, task_op op, task_phase ph, int layer, int from, int to)
{
    if (p->sp) tp_coll(p, TASK_ALLGATHER, op, ph, layer, from, to);
}

/* After a row-parallel GEMM (or a column-parallel backward): reduce the
 * partial sums, scattered over TP under sequence parallelism. */
static void tp_reduce(prog *p, task_op op, task_phase ph, int layer, int from, int to)
{
    tp_coll(p, p->sp ? TASK_REDUCESCATTER : TASK_ALLREDUCE, op, ph, layer, from, to);
}

/* ---- --tp-overlap: TransformerEngine's ring-exchange comm-GEMM overlap ----
 * (transformer_engine/pytorch/module/base.py, ub_overlap_ag / ub_overlap_rs
 * with the ring-exchange method; userbuffers.cu). The all-gather before a
 * column-parallel GEMM becomes tp-1 steps around the TP ring, step j
 * passing on the T/tp rows received at step j-1 (the own rows at j = 0),
 * while the GEMM runs in tp chunks of T/tp rows, chunk j on the rows held
 * after step j-1. The reduce-scatter after a row-parallel GEMM becomes the
 * ring reduce-scatter: GEMM chunk 0 computes the partial sum of the rows
 * the first step sends on; chunk j's partial is added (an fp32 ACC) to the
 * partial received at step j-1 and sent on at step j, and the last add
 * leaves the rank's own rows reduced (with the residual). Bytes per rank
 * are the collective's, (tp-1)/tp of the activations; the rows a GEMM
 * multiplies are the same, in tp pieces. The rows themselves (what an
 * executor needs; the chunk GEMMs and adds carry j as their step): TP rank
 * t's chunk j multiplies part (t - j) mod tp of the tokens on the gather
 * side, and computes part (t - j - 1) mod tp on the scatter side, so the
 * last add is of part t. */

/* A GEMM of build.c's shapes for chunked emission: m = T/tp per chunk. */
typedef struct tp_gemm {
    task_op op;
    uint64_t n, k;
    int reads[5], nreads;
    int writes[2], nwrites;
} tp_gemm;

/* Chunk j of g (m = T/tp rows; its step is j) waiting for `after`,
 * reading `also` too (its ungathered input; -1: none). */
static uint32_t tp_gemm_chunk(prog *p, const tp_gemm *g, task_phase ph, int layer, int j, uint32_t after, int also)
{
    int reads[6];
    memcpy(reads, g->reads, (size_t)g->nreads * sizeof *reads);
    reads[g->nreads] = also;
    p->after = after;
    uint32_t id = gemm(p, g->op, ph, layer, p->T / (uint64_t)p->tp, g->n, g->k, reads, g->nreads + (also >= 0),
                       g->writes, g->nwrites);
    bt_task(p->b, id)->step = (uint16_t)j;
    return id;
}

/* One step of the TP ring: T/tp rows to the next TP rank, as many from the
 * previous, one group; after: the task whose result the send carries;
 * scatter: of a reduce-scatter's partial sums (DAG_F_TP_SCATTER), else of
 * an all-gather. Returns the recv's id. */
static uint32_t tp_step(prog *p, task_op op, task_phase ph, int layer, int step, bool grad, bool scatter, int read,
                        uint32_t after)
{
    builder *b = p->b;
    mesh m = config_mesh(p->c);
    int r = bt_rank(b);
    uint64_t rows = p->T / (uint64_t)p->tp, hid = (uint64_t)p->m->hidden;
    for (int recv = 0; recv < 2; recv++) {
        uint32_t id = bt_begin(b, recv ? TASK_RECV : TASK_SEND, STREAM_TP, op, ph, layer);
        if (!recv) bt_after(b, p->tp_after);
        p->tp_after = recv ? DAG_NONE : p->tp_after;
        dag_task *t = bt_task(b, id);
        t->peer = mesh_shift(&m, r, MESH_TP, recv ? -1 : 1);
        t->dim[0] = (uint32_t)rows;
        t->dim[1] = (uint32_t)hid;
        t->dim[2] = (uint32_t)p->c->act_bytes;
        t->step = (uint16_t)step;
        t->buf = grad ? DAG_TP_GRAD : 0;
        if (scatter) t->flags |= DAG_F_TP_SCATTER;
        if (recv) t->flags |= DAG_F_GROUPED;
        if (!recv) {
            t->bytes = rows * hid * (uint64_t)p->c->act_bytes;
            if (read >= 0) bt_reads(b, read);
            bt_after(b, after);
        }
        bt_end(b);
        if (recv) return id;
    }
    return DAG_NONE;
}

/* All-gather of `from` overlapped with the column-parallel GEMMs g[0..ng). */
static void tp_gather_gemms(prog *p, task_op op, task_phase ph, int layer, int from, const tp_gemm *g, int ng)
{
    bool grad = ph == PHASE_BWD && is_grad_buf(from);
    uint32_t recv = DAG_NONE;
    for (int j = 0; j < p->tp; j++) {
        uint32_t held = recv; /* the rows chunk j multiplies arrived with it (j = 0: own) */
        if (j + 1 < p->tp) recv = tp_step(p, op, ph, layer, j, grad, false, j == 0 ? from : -1, DAG_NONE);
        for (int i = 0; i < ng; i++)
            tp_gemm_chunk(p, &g[i], ph, layer, j, held, from);
    }
}

/* The row-parallel GEMMs g[0..ng) (their partial sums) overlapped with the
 * reduce-scatter into `to`, the residual added by the last add. */
static void tp_gemms_scatter(prog *p, task_op op, task_phase ph, int layer, const tp_gemm *g, int ng, int to)
{
    builder *b = p->b;
    uint64_t rows = p->T / (uint64_t)p->tp, hid = (uint64_t)p->m->hidden;
    uint32_t recv = DAG_NONE, ready = DAG_NONE;
    for (int j = 0; j < p->tp; j++) {
        for (int i = 0; i < ng; i++)
            ready = tp_gemm_chunk(p, &g[i], ph, layer, j, DAG_NONE, -1);
        if (j > 0) { /* the partial received + this chunk's */
            uint32_t id = bt_begin(b, TASK_ACC, STREAM_COMP, op, ph, layer);
            dag_task *t = bt_task(b, id);
            t->dim[0] = (uint32_t)rows;
            t->dim[1] = (uint32_t)hid;
            t->dim[2] = 4;
            t->flops = rows * hid;
            t->step = (uint16_t)j;
            bt_after(b, recv);
            if (j + 1 == p->tp) bt_writes(b, to);
            bt_end(b);
            ready = id;
        }
        if (j + 1 < p->tp) recv = tp_step(p, op, ph, layer, j, ph == PHASE_BWD, true, -1, ready);
    }
}

/* Whether the rank's stage holds block l (l = L: the weights outside). */
static bool stage_holds(const prog *p, int l) { return pipe_holds(p->c, p->stage, l); }

/* A ring collective over the gradient group moving `elems` elements,
 * sized for the DAG's P members of it; with P = 1 beside dp > 1 replicas
 * (a tp-only replica) for the whole group, the replicas' members, since a
 * one-member ring moves nothing (the simulator sizes it back alike). It
 * reads buffer wait_buf too (-1: none) and waits for task p->after (then
 * cleared); a gradient collective becomes p->grad_sync. */
static void dp_coll_after(prog *p, task_kind kind, task_op op, int layer, uint64_t elems, int first, int last,
                          int wait_buf)
{
    uint64_t n = (uint64_t)config_cp(p->c);
    if (n == 1) n = (uint64_t)p->c->dp;
    if (n == 1) return;
    builder *b = p->b;
    uint32_t id = bt_begin(b, kind, STREAM_DP, op, PHASE_REDUCE, layer);
    bt_after(b, p->after);
    p->after = DAG_NONE;
    if (kind != TASK_ALLGATHER) p->grad_sync = id;
    dag_task *t = bt_task(b, id);
    t->group = p->dp_gid;
    t->bytes = size_ring_coll_bytes(elems, p->c->act_bytes, n, kind == TASK_ALLREDUCE);
    if (wait_buf >= 0) bt_reads(b, wait_buf);
    for (int l = first; l <= last; l++) {
        if (!stage_holds(p, l)) continue;
        if (kind == TASK_ALLGATHER)
            bt_writes(b, BUF_LB(l, LB_W));
        else
            bt_reads(b, BUF_LB(l, LB_GRAD));
    }
    bt_end(b);
}

static void dp_coll(prog *p, task_kind kind, task_op op, int layer, uint64_t elems, int first, int last)
{
    dp_coll_after(p, kind, op, layer, elems, first, last, -1);
}

/* ZeRO-3's all-gather of block j's parameters (j = L: the LM head's),
 * issued after buffer `after` is written (-1: in stream order only). */
static void param_gather(prog *p, int j, int after)
{
    int L = p->m->layers;
    if (j < L)
        dp_coll_after(p, TASK_ALLGATHER, OP_PARAM_ALLGATHER, j, model_layer_params_tp(p->m, p->tp), j, j, after);
    else
        dp_coll_after(p, TASK_ALLGATHER, OP_PARAM_ALLGATHER, -1, model_head_params_tp(p->m, p->tp), L, L, after);
}

/* ZeRO-3 forward as FSDP runs it (reshard after forward, forward prefetch
 * bounded to c->prefetch blocks): on entering block l, once its input is
 * ready (block l-1 done, its parameters resharded), the gather of block
 * l + prefetch is issued, so at most prefetch + 1 blocks' parameters are
 * gathered at once; block 0 issues its own and the prefetched ones. The
 * LM head is block L. (FSDP1's limit_all_gathers keeps two blocks'
 * gathers in flight; FSDP2 prefetches the modules given to
 * set_modules_to_forward_prefetch, torchtitan one block ahead.) */
static void fwd_gathers(prog *p, int l)
{
    int L = p->m->layers, n = p->c->prefetch;
    for (int j = l == 0 ? 0 : l + n; j <= l + n && j <= L; j++)
        param_gather(p, j, BUF_LB(l, LB_X));
}

/* ZeRO-3 backward with FSDP's backward prefetch (BACKWARD_PRE; FSDP2's
 * FSDPParamGroup._backward_prefetch in torch/distributed/fsdp/_fully_shard/
 * _fsdp_param_group.py unshards the previous module in forward order): entering
 * block l's backward, the gather of block l - prefetch is issued before
 * block l's gradient collective, so it runs beside block l's backward; it
 * follows block l+1's reduce-scatter on the stream, which waits for block
 * l+1's backward, so again at most prefetch + 1 blocks are gathered. The
 * first block of the backward (L-1) issues its own and the prefetched. */
static void bwd_gathers(prog *p, int l)
{
    int L = p->m->layers, n = p->c->prefetch;
    for (int j = l == L - 1 ? l : l - n; j >= l - n && j >= 0; j--)
        param_gather(p, j, -1);
}

/* Heads the QKV all-to-all moves: H query heads, and K and V of every KV
 * head including the replicas. */
static uint64_t a2a_qkv_heads(const config *c)
{
    return (uint64_t)config_tp_heads(c) + 2 * (uint64_t)config_kv_heads_total(c);
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

/* A column-parallel GEMM, or gate and up on one input: `from` gathered
 * into `gathered` for g (sequence parallelism), or that all-gather
 * overlapped with g's chunks (--tp-overlap). */
static void column(prog *p, task_op op, task_phase ph, int layer, int from, int gathered, const tp_gemm *g, int ng)
{
    if (p->overlap) {
        tp_gather_gemms(p, op, ph, layer, from, g, ng);
        return;
    }
    tp_gather(p, op, ph, layer, from, gathered);
    for (int i = 0; i < ng; i++)
        gemm(p, g[i].op, ph, layer, p->T, g[i].n, g[i].k, g[i].reads, g[i].nreads, g[i].writes, g[i].nwrites);
}

/* Row-parallel GEMMs (or column-parallel backwards) writing `partial`,
 * reduced into `to`; or that reduce-scatter overlapped (--tp-overlap). */
static void row(prog *p, task_op op, task_phase ph, int layer, const tp_gemm *g, int ng, int partial, int to)
{
    if (p->overlap) {
        tp_gemms_scatter(p, op, ph, layer, g, ng, to);
        return;
    }
    for (int i = 0; i < ng; i++)
        gemm(p, g[i].op, ph, layer, p->T, g[i].n, g[i].k, g[i].reads, g[i].nreads, g[i].writes, g[i].nwrites);
    tp_reduce(p, op, ph, layer, partial, to);
}

/* Forward of block l, the parts of it in `parts` (recompute.h's RC_*: all
 * of them in the forward, the policy's in a recompute pass). Tensor shapes
 * per rank (T tokens, tp shards):
 *   QKV (T, hid) x (hid, (H+2H_kv)d/tp); output projection (T, Hd/tp) x
 *   (Hd/tp, hid); gate and up (T, hid) x (hid, ffn/tp); down (T, ffn/tp) x
 *   (ffn/tp, hid). */
static void layer_fwd(prog *p, int l, task_phase ph, unsigned parts)
{
    const model *m = p->m;
    uint64_t hid = (uint64_t)m->hidden, d = (uint64_t)m->head_dim, tp = (uint64_t)p->tp, ffn = (uint64_t)m->ffn / tp;
    int W = BUF_LB(l, LB_W), X = BUF_LB(l, LB_X), H = BUF_LB(l, LB_H), M = BUF_LB(l, LB_M);
    if (p->c->zero == 3 && ph == PHASE_FWD) fwd_gathers(p, l);
    if (elementwise_reruns(OP_NORM_ATTN, parts)) norm(p, OP_NORM_ATTN, ph, l, X);
    const tp_gemm qkv = {
        OP_QKV, (uint64_t)model_tp_qkv_heads(m, p->tp) * d, hid, {tbuf(p, l, LB_XG), W}, 2, {lbuf(p, l, LB_QKV)}, 1};
    if (parts & RC_QKV) column(p, OP_TP_X, ph, l, X, tbuf(p, l, LB_XG), &qkv, 1);
    if (elementwise_reruns(OP_ROPE, parts)) inplace(p, OP_ROPE, ph, l, lbuf(p, l, LB_QKV));
    attention_fwd_part(p, l, ph, parts);
    const tp_gemm out = {OP_OUT_PROJ,         hid, (uint64_t)m->heads * d / tp, {lbuf(p, l, LB_OS), X, W}, 3,
                         {tbuf(p, l, LB_HP)}, 1};
    if (fp8(p) && elementwise_reruns(OP_QUANT_ATTN_OUT, parts)) inplace(p, OP_QUANT_ATTN_OUT, ph, l, lbuf(p, l, LB_OS));
    if (parts & RC_OUT) row(p, OP_TP_H, ph, l, &out, 1, tbuf(p, l, LB_HP), H);
    if (elementwise_reruns(OP_ADD_ATTN, parts)) inplace(p, OP_ADD_ATTN, ph, l, H);
    if (!(parts & RC_MLP)) return;
    norm(p, OP_NORM_MLP, ph, l, H); /* TE's LayerNormMLP: the MLP's recompute re-runs its norm */
    const tp_gemm gate_up[2] = {{OP_MLP_GATE, ffn, hid, {tbuf(p, l, LB_HG), W}, 2, {M}, 1},
                                {OP_MLP_UP, ffn, hid, {tbuf(p, l, LB_HG), W}, 2, {M}, 1}};
    column(p, OP_TP_H, ph, l, H, tbuf(p, l, LB_HG), gate_up, 2);
    inplace(p, OP_ACT, ph, l, M);
    const tp_gemm down = {OP_MLP_DOWN, hid, ffn, {M, H, W}, 3, {tbuf(p, l, LB_YP)}, 1};
    row(p, OP_TP_Y, ph, l, &down, 1, tbuf(p, l, LB_YP), BUF_LB(l + 1, LB_X));
    if (elementwise_reruns(OP_ADD_MLP, parts)) inplace(p, OP_ADD_MLP, ph, l, BUF_LB(l + 1, LB_X));
}

/* tp > H_kv: the tp/H_kv shards holding one KV head (config_tp_kv_head0)
 * each computed its K and V weights' gradient from their own query heads'
 * dK/dV; an all-reduce among them (the tp_kv stream, a run of the TP
 * group) sums those (hidden, 2d) columns before the gradient reduction
 * over DP reads them. The input gradient needs nothing: each replica's
 * part of it is in the partial sums TP reduces anyway. */
static void kv_grad_replicas(prog *p, int l)
{
    int r = config_tp_kv_repl(p->c);
    if (r == 1) return;
    builder *b = p->b;
    uint64_t hid = (uint64_t)p->m->hidden, cols = 2 * (uint64_t)p->m->head_dim; /* one KV head's K and V */
    uint32_t id = bt_begin(b, TASK_ALLREDUCE, STREAM_TP_KV, OP_TP_KV_GRAD, PHASE_BWD, l);
    dag_task *t = bt_task(b, id);
    t->group = p->kv_gid;
    t->dim[0] = (uint32_t)hid;
    t->dim[1] = (uint32_t)cols;
    t->dim[2] = (uint32_t)p->c->act_bytes;
    t->bytes = size_ring_coll_bytes(hid * cols, p->c->act_bytes, (uint64_t)r, true);
    bt_reads(b, BUF_LB(l, LB_GRAD));
    bt_writes(b, BUF_LB(l, LB_GRAD));
    bt_end(b);
}

static void layer_bwd(prog *p, int l)
{
    const config *c = p->c;
    const model *m = p->m;
    uint64_t hid = (uint64_t)m->hidden, d = (uint64_t)m->head_dim, tp = (uint64_t)p->tp, ffn = (uint64_t)m->ffn / tp;
    uint64_t lp = model_layer_params_tp(m, p->tp);
    int W = BUF_LB(l, LB_W), G = BUF_LB(l, LB_GRAD), DM = BUF_LB(l, LB_DM), DH = BUF_LB(l, LB_DH);
    if (c->zero == 3) bwd_gathers(p, l);
    int first, rerun = recompute_span(c, p->stage, l, &first); /* the policy's blocks, in forward order */
    unsigned late = rerun ? recompute_parts_late(c) : 0;
    for (int j = 0; j < rerun; j++)
        layer_fwd(p, first + j, PHASE_RECOMPUTE, recompute_parts(c) & ~late);
    const tp_gemm down = {OP_MLP_DOWN, hid, ffn, {tbuf(p, l, LB_DYG), BUF_LB(l, LB_M), W}, 3, {DM, G}, 2};
    if (fp8(p)) inplace(p, OP_QUANT_GRAD, PHASE_BWD, l, BUF_LB(l + 1, LB_DX));
    column(p, OP_TP_Y, PHASE_BWD, l, BUF_LB(l + 1, LB_DX), tbuf(p, l, LB_DYG), &down, 1);
    inplace(p, OP_ACT, PHASE_BWD, l, DM);
    tp_gather(p, OP_TP_H, PHASE_BWD, l, BUF_LB(l, LB_H), tbuf(p, l, LB_HG)); /* h again, beside down */
    const tp_gemm up_gate[2] = {{OP_MLP_UP, ffn, hid, {DM, tbuf(p, l, LB_HG), W}, 3, {tbuf(p, l, LB_DHP), G}, 2},
                                {OP_MLP_GATE, ffn, hid, {DM, tbuf(p, l, LB_HG), W}, 3, {tbuf(p, l, LB_DHP), G}, 2}};
    row(p, OP_TP_H, PHASE_BWD, l, up_gate, 2, tbuf(p, l, LB_DHP), DH);
    norm(p, OP_NORM_MLP, PHASE_BWD, l, DH);
    inplace(p, OP_ADD_MLP, PHASE_BWD, l, DH); /* the residual's gradient joins the MLP's */
    const tp_gemm out = {OP_OUT_PROJ,
                         hid,
                         (uint64_t)m->heads * d / tp,
                         {tbuf(p, l, LB_DHG), lbuf(p, l, LB_OS), W},
                         3,
                         {lbuf(p, l, LB_DOS), G},
                         2};
    if (fp8(p)) inplace(p, OP_QUANT_GRAD, PHASE_BWD, l, DH);
    column(p, OP_TP_H, PHASE_BWD, l, DH, tbuf(p, l, LB_DHG), &out, 1);
    if (late) attention_fwd_part(p, l, PHASE_RECOMPUTE, late); /* checkpointed core attention */
    attention_bwd_part(p, l);
    /* with P_h = 1 this GEMM reads dK/dV straight from the ring's final slots */
    int dkv_a = p->c->p_head == 1 ? BUF_DKV + DKV_FINAL : W;
    int dkv_b = p->c->p_head == 1 && ringgeo_lanes(c) == 2 ? BUF_DKV + DAG_SLOTS_PER_LANE + DKV_FINAL : W;
    elementwise(p, OP_ROPE, PHASE_BWD, l, READS(lbuf(p, l, LB_DQKV), dkv_a, dkv_b), WRITES(lbuf(p, l, LB_DQKV)));
    tp_gather(p, OP_TP_X, PHASE_BWD, l, BUF_LB(l, LB_X), tbuf(p, l, LB_XG)); /* x again, beside attention */
    const tp_gemm qkv = {OP_QKV, (uint64_t)model_tp_qkv_heads(m, p->tp) * d,
                         hid,    {lbuf(p, l, LB_DQKV), tbuf(p, l, LB_XG), W, dkv_a, dkv_b},
                         5,      {tbuf(p, l, LB_DXP), G},
                         2};
    if (fp8(p)) inplace(p, OP_QUANT_DQKV, PHASE_BWD, l, lbuf(p, l, LB_DQKV));
    row(p, OP_TP_X, PHASE_BWD, l, &qkv, 1, tbuf(p, l, LB_DXP), BUF_LB(l, LB_DX));
    norm(p, OP_NORM_ATTN, PHASE_BWD, l, BUF_LB(l, LB_DX));
    inplace(p, OP_ADD_ATTN, PHASE_BWD, l, BUF_LB(l, LB_DX));
    if (!p->last_mb) return; /* the gradients accumulate over the micro-batches */
    kv_grad_replicas(p, l);
    if (c->zero == 0) dp_coll(p, TASK_ALLREDUCE, OP_GRAD_ALLREDUCE, l, lp, l, l);
    if (c->zero >= 2) dp_coll(p, TASK_REDUCESCATTER, OP_GRAD_REDUCESCATTER, l, lp, l, l);
}

/* The head's gradient reduction (ZeRO 0, 2), once its gradient is
 * complete; wait_buf: the buffer that says so. */
static void head_grads(prog *p, int wait_buf)
{
    int L = p->m->layers;
    uint64_t hp = pipe_head_params(p->c, p->stage); /* in the gradient slot of index L */
    if (!p->last_mb) return;
    if (p->c->zero == 0) dp_coll_after(p, TASK_ALLREDUCE, OP_GRAD_ALLREDUCE, -1, hp, L, L, wait_buf);
    if (p->c->zero >= 2) dp_coll_after(p, TASK_REDUCESCATTER, OP_GRAD_REDUCESCATTER, -1, hp, L, L, wait_buf);
}

/* The vocab-parallel embedding: each TP rank looks up the tokens of its
 * vocabulary shard and the partial rows are reduced (forward; the lookup
 * itself is not a task); the gradient is gathered back for the scatter-add
 * into the embedding rows (backward, after block 0). */
static void embedding(prog *p, task_phase ph)
{
    int rows = BUF_LB(0, p->tp > 1 ? LB_XG : LB_X); /* the lookup's output, reduced over TP */
    if (ph == PHASE_FWD) {
        elementwise(p, OP_EMBED, ph, -1, NULL, 0, &rows, 1);
        tp_reduce(p, OP_TP_EMBED, ph, -1, BUF_LB(0, LB_XG), BUF_LB(0, LB_X));
        return;
    }
    tp_gather(p, OP_TP_EMBED, ph, -1, BUF_LB(0, LB_DX), BUF_LB(0, LB_DYG));
    int grad = p->tp > 1 && p->sp ? BUF_LB(0, LB_DYG) : BUF_LB(0, LB_DX);
    uint32_t id = elementwise(p, OP_EMBED, ph, -1, &grad, 1, NULL, 0);
    /* pipelined, the first stage reduces the embedding's gradient itself
     * (else the LM head's reduction covers it) */
    p->after = id;
    if (p->c->pp > 1) head_grads(p, grad);
    p->after = DAG_NONE;
}

/* LM head forward, then backward; its buffers live at index L. Vocab-
 * parallel: (T, hid) x (hid, ceil(V/tp)), then the cross-entropy's
 * statistics reduced over TP. */
static void lm_head_fwd(prog *p)
{
    const config *c = p->c;
    const model *m = p->m;
    int L = m->layers, W = BUF_LB(L, LB_W);
    uint64_t T = p->T, hid = (uint64_t)m->hidden, tp = (uint64_t)p->tp;
    uint64_t v = ((uint64_t)m->vocab + tp - 1) / tp;
    if (c->zero == 3 && c->prefetch == 0) param_gather(p, L, BUF_LB(L, LB_X)); /* else prefetched */
    norm(p, OP_NORM_FINAL, PHASE_FWD, L, BUF_LB(L, LB_X));
    tp_gather(p, OP_TP_X, PHASE_FWD, L, BUF_LB(L, LB_X), tbuf(p, L, LB_XG));
    gemm(p, OP_LM_HEAD, PHASE_FWD, L, T, v, hid, READS(tbuf(p, L, LB_XG), W), WRITES(BUF_LB(L, LB_M)));
    inplace(p, OP_LOSS, PHASE_FWD, L, BUF_LB(L, LB_M));
    tp_coll_sized(p, TASK_ALLREDUCE, OP_TP_LOSS, PHASE_FWD, L, 3 * T, 4, BUF_LB(L, LB_M), BUF_LB(L, LB_M));
}

static void lm_head_bwd(prog *p)
{
    const model *m = p->m;
    int L = m->layers, W = BUF_LB(L, LB_W), G = BUF_LB(L, LB_GRAD);
    uint64_t T = p->T, hid = (uint64_t)m->hidden, tp = (uint64_t)p->tp;
    uint64_t v = ((uint64_t)m->vocab + tp - 1) / tp;
    inplace(p, OP_LOSS, PHASE_BWD, L, BUF_LB(L, LB_M));
    tp_gather(p, OP_TP_X, PHASE_BWD, L, BUF_LB(L, LB_X), tbuf(p, L, LB_XG));
    gemm(p, OP_LM_HEAD, PHASE_BWD, L, T, v, hid, READS(BUF_LB(L, LB_M), tbuf(p, L, LB_XG), W),
         WRITES(tbuf(p, L, LB_DXP), G));
    tp_reduce(p, OP_TP_X, PHASE_BWD, L, tbuf(p, L, LB_DXP), BUF_LB(L, LB_DX));
    norm(p, OP_NORM_FINAL, PHASE_BWD, L, BUF_LB(L, LB_DX));
    head_grads(p, -1);
}

/* The norm weights' gradients over TP (Megatron-Core's finalize_model_grads,
 * megatron/core/distributed/finalize_model_grads.py: after the gradient
 * reduction over DP, finish_grad_sync, it all-reduces the gradients of the
 * parameters replicated over TP, _allreduce_non_tensor_model_parallel_grads,
 * formerly _allreduce_layernorm_grads, in one coalesced buffer). Under
 * sequence parallelism a rank's norm gradients cover its T/tp tokens only:
 * the (2L+1) x hidden of them (two RMSNorms per block and the final one,
 * at the gradients' precision) are summed over the TP group, once per step,
 * before the optimizer step. Returns its id (DAG_NONE: none). */
static uint32_t norm_grads(prog *p)
{
    if (p->tp == 1 || !p->sp) return DAG_NONE;
    builder *b = p->b;
    int L = p->m->layers, last = p->stage == p->c->pp - 1;
    uint64_t blocks = (uint64_t)pipe_stage_layers(p->c, p->stage);
    uint64_t rows = 2 * blocks + (uint64_t)last, hid = (uint64_t)p->m->hidden;
    uint32_t id = bt_begin(b, TASK_ALLREDUCE, STREAM_TP, OP_TP_NORM_GRAD, PHASE_REDUCE, -1);
    dag_task *t = bt_task(b, id);
    t->group = p->tp_gid;
    t->dim[0] = (uint32_t)rows;
    t->dim[1] = (uint32_t)hid;
    t->dim[2] = (uint32_t)p->c->act_bytes;
    t->bytes = size_ring_coll_bytes(rows * hid, p->c->act_bytes, (uint64_t)p->tp, true);
    t->buf = DAG_TP_GRAD;
    bt_after(b, p->grad_sync);
    for (int l = 0; l <= L; l++)
        if (stage_holds(p, l)) bt_reads(b, BUF_LB(l, LB_GRAD));
    bt_end(b);
    return id;
}

/* The pipeline p2p of one virtual-stage boundary (pipeline.h): a send to
 * or a recv from the matching rank of the stage `dir` away, of the hidden
 * states of this rank's tokens (T/tp of them under sequence parallelism:
 * Megatron sends the sequence-parallel shard), out of or into buffer
 * buf; layer: the first block of the later virtual stage; grouped: with
 * the task before it on its stream. */
static void pp_p2p(prog *p, bool grad, bool recv, int dir, int layer, int buf, bool grouped)
{
    builder *b = p->b;
    mesh m = config_mesh(p->c);
    uint64_t rows = p->sp && p->tp > 1 ? p->T / (uint64_t)p->tp : p->T, hid = (uint64_t)p->m->hidden;
    uint32_t id = bt_begin(b, recv ? TASK_RECV : TASK_SEND, grad ? STREAM_PP_GRAD : STREAM_PP,
                           grad ? OP_PP_GRAD : OP_PP_ACT, grad ? PHASE_BWD : PHASE_FWD, layer);
    dag_task *t = bt_task(b, id);
    t->peer = mesh_shift(&m, bt_rank(b), MESH_PP, dir);
    t->dim[0] = (uint32_t)rows;
    t->dim[1] = (uint32_t)hid;
    t->dim[2] = (uint32_t)p->c->act_bytes;
    if (grouped) t->flags |= DAG_F_GROUPED;
    if (recv) {
        bt_writes(b, buf);
    } else {
        t->bytes = rows * hid * (uint64_t)p->c->act_bytes;
        bt_reads(b, buf);
    }
    bt_end(b);
}

/* The recv of pass op's input, unless its chunk starts the model (a
 * forward) or ends it (a backward): activations from the previous virtual
 * stage into its first block's input, or gradients from the next into
 * its last block's output gradient, in op's micro-batch. */
static bool pass_recv(prog *p, const pipe_op *op, bool grouped)
{
    const config *c = p->c;
    int first = pipe_first_layer(c, p->stage, op->chunk), end = first + pipe_layers(c, p->stage, op->chunk);
    if (op->bwd ? pipe_is_last(c, p->stage, op->chunk) : pipe_is_first(c, p->stage, op->chunk)) return false;
    bt_set_micro_batch(p->b, op->mb);
    if (op->bwd)
        pp_p2p(p, true, true, 1, end, BUF_LB(end, LB_DX), grouped);
    else
        pp_p2p(p, false, true, -1, first, BUF_LB(first, LB_X), grouped);
    return true;
}

/* One pass (a forward or backward of one chunk and micro-batch): its
 * blocks, from the embedding or its input recv to the LM head or its
 * output send. As Megatron's schedules batch a pass's output send with
 * the next pass's input recv in one batch_isend_irecv
 * (send_forward_recv_forward and the like, p2p_communication.py), the
 * send is grouped with the recv of the next pass in the same direction,
 * `next` (NULL: none): the ring of the interleaved schedule's last stage
 * back to stage 0 deadlocks on blocking sends otherwise. */
static void pass(prog *p, const pipe_op *op, const pipe_op *next, bool recv_first)
{
    const config *c = p->c;
    int first = pipe_first_layer(c, p->stage, op->chunk), end = first + pipe_layers(c, p->stage, op->chunk);
    if (recv_first) pass_recv(p, op, false);
    bt_set_micro_batch(p->b, op->mb);
    p->last_mb = op->mb == c->micro_batches - 1;
    bool sent = false;
    if (!op->bwd) {
        if (pipe_is_first(c, p->stage, op->chunk)) embedding(p, PHASE_FWD);
        for (int l = first; l < end; l++)
            layer_fwd(p, l, PHASE_FWD, RC_ALL);
        if (pipe_is_last(c, p->stage, op->chunk))
            lm_head_fwd(p);
        else
            pp_p2p(p, false, false, 1, end, BUF_LB(end, LB_X), false), sent = true;
    } else {
        if (pipe_is_last(c, p->stage, op->chunk)) lm_head_bwd(p);
        for (int l = end - 1; l >= first; l--)
            layer_bwd(p, l);
        if (pipe_is_first(c, p->stage, op->chunk))
            embedding(p, PHASE_BWD);
        else
            pp_p2p(p, true, false, -1, first, BUF_LB(first, LB_DX), false), sent = true;
    }
    if (next) pass_recv(p, next, sent);
}

/* The passes of the rank's stage in the schedule's order (pipeline.h);
 * a chunk's backward of the last micro-batch completes its gradients. */
static void pipeline_passes(prog *p)
{
    const config *c = p->c;
    int n = pipe_nops(c);
    pipe_op *ops = xmalloc_array((size_t)n, sizeof *ops, "a pipeline schedule");
    pipe_ops(c, p->stage, ops);
    bool seen[2] = {false, false}; /* a forward, a backward emitted: its successor's recv went with it */
    for (int i = 0; i < n; i++) {
        const pipe_op *next = NULL;
        for (int j = i + 1; j < n && !next; j++)
            if (ops[j].bwd == ops[i].bwd) next = &ops[j];
        pass(p, &ops[i], next, !seen[ops[i].bwd]);
        seen[ops[i].bwd] = true;
    }
    free(ops);
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
        if (!stage_holds(p, l)) continue;
        if (step) bt_reads(b, BUF_LB(l, LB_GRAD));
        bt_writes(b, BUF_LB(l, step ? LB_W : LB_GRAD));
    }
    bt_end(b);
    return id;
}

static void training_step(prog *p)
{
    const config *c = p->c;
    int L = p->m->layers;
    optimizer(p, false, DAG_NONE);
    if (fp8(p)) elementwise(p, OP_QUANT_W, PHASE_FWD, -1, NULL, 0, NULL, 0); /* the FP8 weights of the step */
    pipeline_passes(p);
    uint64_t all = pipe_stage_params(c, p->stage);
    if (c->zero == 1) dp_coll(p, TASK_REDUCESCATTER, OP_GRAD_REDUCESCATTER, -1, all, 0, L);
    /* the gather of the optimizer step's result waits for it */
    p->after = optimizer(p, true, norm_grads(p));
    if (c->zero == 1 || c->zero == 2) dp_coll(p, TASK_ALLGATHER, OP_PARAM_ALLGATHER, -1, all, 0, L);
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
              true};
    p.head_gid = bt_group(b, STREAM_A2A, MESH_BIT(MESH_HEAD));
    p.dp_gid = bt_group(b, STREAM_DP, CONFIG_GRAD_DIMS);
    if (c->tp > 1) p.tp_gid = bt_group(b, STREAM_TP, CONFIG_TP_DIMS);
    if (config_tp_kv_repl(c) > 1) p.kv_gid = bt_group_split(b, STREAM_TP_KV, CONFIG_TP_DIMS, c->model.kv_heads);
    switch (c->scope) {
    case SCOPE_ATTN_FWD: attention_fwd_part(&p, 0, PHASE_FWD, RC_A2A | RC_RING); break;
    case SCOPE_ATTN:
        attention_fwd_part(&p, 0, PHASE_FWD, RC_A2A | RC_RING);
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

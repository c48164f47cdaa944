/*
 * build_tp: tensor parallelism in dag_build()'s rank program
 * (build_internal.h).
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
 * step under sequence parallelism (build_tp_norm_grads, below).
 */
#include <string.h>

#include "build_internal.h"
#include "sizes.h"

void build_tp_groups(prog *p)
{
    const config *c = p->c;
    if (c->tp > 1) p->tp_gid = bt_group(p->b, STREAM_TP, CONFIG_TP_DIMS);
    if (config_tp_kv_repl(c) > 1) p->kv_gid = bt_group_split(p->b, STREAM_TP_KV, CONFIG_TP_DIMS, c->model.kv_heads);
}

int build_tp_buf(const prog *p, int layer, int k)
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

/* A TP collective of `elems` elements of `elem_bytes`; nothing at tp = 1.
 * kinds: all-gather, reduce-scatter, all-reduce (ring chunks as below).
 * Its buf says whether it moves a gradient (dag.h, DAG_TP_GRAD): the two
 * backward gathers of OP_TP_H, h again and dh, differ only there. */
void build_tp_coll_sized(prog *p, task_kind kind, task_op op, task_phase ph, int layer, uint64_t elems, int elem_bytes,
                         int read, int write)
{
    if (p->tp > 1) build_tp_coll_in(p, p->tp_gid, p->tp, kind, op, ph, layer, elems, elem_bytes, read, write);
}

void build_tp_coll_in(prog *p, uint32_t gid, int degree, task_kind kind, task_op op, task_phase ph, int layer,
                      uint64_t elems, int elem_bytes, int read, int write)
{
    builder *b = p->b;
    uint32_t id = bt_begin(b, kind, STREAM_TP, op, ph, layer);
    bt_after(b, p->tp_after);
    p->tp_after = DAG_NONE;
    dag_task *t = bt_task(b, id);
    t->group = gid;
    t->dim[0] = (uint32_t)p->T;
    t->dim[1] = (uint32_t)(elems / p->T);
    t->dim[2] = (uint32_t)elem_bytes;
    t->bytes = size_ring_coll_bytes(elems, elem_bytes, (uint64_t)degree, kind == TASK_ALLREDUCE);
    t->buf = ph == PHASE_BWD && (kind != TASK_ALLGATHER || build_is_grad_buf(read)) ? DAG_TP_GRAD : 0;
    bt_reads(b, read);
    bt_writes(b, write);
    bt_end(b);
}

/* A TP collective of the layer's (T, hidden) activations. */
static void tp_coll(prog *p, task_kind kind, task_op op, task_phase ph, int layer, int read, int write)
{
    uint64_t elems = p->T * (uint64_t)p->m->hidden;
    build_tp_coll_sized(p, kind, op, ph, layer, elems, p->c->act_bytes, read, write);
}

void build_tp_gather(prog *p, task_op op, task_phase ph, int layer, int from, int to)
{
    if (p->sp) tp_coll(p, TASK_ALLGATHER, op, ph, layer, from, to);
}

/* After a row-parallel GEMM (or a column-parallel backward): reduce the
 * partial sums, scattered over TP under sequence parallelism. */
void build_tp_reduce(prog *p, task_op op, task_phase ph, int layer, int from, int to)
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

/* Chunk j of g (m = T/tp rows; its step is j) waiting for `after`,
 * reading `also` too (its ungathered input; -1: none). */
static uint32_t tp_gemm_chunk(prog *p, const tp_gemm *g, task_phase ph, int layer, int j, uint32_t after, int also)
{
    int reads[6];
    memcpy(reads, g->reads, (size_t)g->nreads * sizeof *reads);
    reads[g->nreads] = also;
    p->after = after;
    uint32_t id = build_gemm(p, g->op, ph, layer, p->T / (uint64_t)p->tp, g->n, g->k, reads, g->nreads + (also >= 0),
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
    bool grad = ph == PHASE_BWD && build_is_grad_buf(from);
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

/* A column-parallel GEMM, or gate and up on one input: `from` gathered
 * into `gathered` for g (sequence parallelism), or that all-gather
 * overlapped with g's chunks (--tp-overlap). */
void build_tp_column(prog *p, task_op op, task_phase ph, int layer, int from, int gathered, const tp_gemm *g, int ng)
{
    if (p->overlap) {
        tp_gather_gemms(p, op, ph, layer, from, g, ng);
        return;
    }
    build_tp_gather(p, op, ph, layer, from, gathered);
    for (int i = 0; i < ng; i++)
        build_gemm(p, g[i].op, ph, layer, p->T, g[i].n, g[i].k, g[i].reads, g[i].nreads, g[i].writes, g[i].nwrites);
}

/* Row-parallel GEMMs (or column-parallel backwards) writing `partial`,
 * reduced into `to`; or that reduce-scatter overlapped (--tp-overlap). */
void build_tp_row(prog *p, task_op op, task_phase ph, int layer, const tp_gemm *g, int ng, int partial, int to)
{
    if (p->overlap) {
        tp_gemms_scatter(p, op, ph, layer, g, ng, to);
        return;
    }
    for (int i = 0; i < ng; i++)
        build_gemm(p, g[i].op, ph, layer, p->T, g[i].n, g[i].k, g[i].reads, g[i].nreads, g[i].writes, g[i].nwrites);
    build_tp_reduce(p, op, ph, layer, partial, to);
}

/* tp > H_kv: the tp/H_kv shards holding one KV head (config_tp_kv_head0)
 * each computed its K and V weights' gradient from their own query heads'
 * dK/dV; an all-reduce among them (the tp_kv stream, a run of the TP
 * group) sums those (hidden, 2d) columns before the gradient reduction
 * over DP reads them. The input gradient needs nothing: each replica's
 * part of it is in the partial sums TP reduces anyway. */
void build_tp_kv_grads(prog *p, int l)
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

/* The norm weights' gradients over TP (Megatron-Core's finalize_model_grads,
 * megatron/core/distributed/finalize_model_grads.py: after the gradient
 * reduction over DP, finish_grad_sync, it all-reduces the gradients of the
 * parameters replicated over TP, _allreduce_non_tensor_model_parallel_grads,
 * formerly _allreduce_layernorm_grads, in one coalesced buffer). Under
 * sequence parallelism a rank's norm gradients cover its T/tp tokens only:
 * the (2L+1) x hidden of them (two RMSNorms per block and the final one,
 * at the gradients' precision) are summed over the TP group, once per step,
 * before the optimizer step. Returns its id (DAG_NONE: none). */
uint32_t build_tp_norm_grads(prog *p)
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
        if (build_stage_holds(p, l)) bt_reads(b, BUF_LB(l, LB_GRAD));
    bt_end(b);
    return id;
}

/*
 * build_grad: the gradient reduction of dag_build()'s rank program
 * (build_internal.h), the data-parallel dimension and the context ranks
 * that hold the same parameters.
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
#include "build_internal.h"
#include "sizes.h"

void build_grad_groups(prog *p) { p->dp_gid = bt_group(p->b, STREAM_DP, CONFIG_GRAD_DIMS); }

/* A ring collective over the gradient group moving `elems` elements,
 * sized for the DAG's P members of it; with P = 1 beside dp > 1 replicas
 * (a tp-only replica) for the whole group, the replicas' members, since a
 * one-member ring moves nothing (the simulator sizes it back alike). It
 * reads buffer wait_buf too (-1: none) and waits for task p->after (then
 * cleared); a gradient collective becomes p->grad_sync. */
static void grad_coll_after(prog *p, task_kind kind, task_op op, int layer, uint64_t elems, int first, int last,
                            int wait_buf)
{
    uint64_t n = (uint64_t)config_cp(p->c);
    if (n == 1) n = (uint64_t)p->c->dp;
    if (n == 1) return;
    build_grad_coll_on(p, STREAM_DP, p->dp_gid, n, kind, op, layer, elems, first, last, wait_buf);
}

void build_grad_coll_on(prog *p, stream_kind stream, uint32_t gid, uint64_t n, task_kind kind, task_op op, int layer,
                        uint64_t elems, int first, int last, int wait_buf)
{
    builder *b = p->b;
    uint32_t id = bt_begin(b, kind, stream, op, PHASE_REDUCE, layer);
    bt_after(b, p->after);
    p->after = DAG_NONE;
    if (kind != TASK_ALLGATHER) p->grad_sync = id;
    dag_task *t = bt_task(b, id);
    t->group = gid;
    int elem = kind == TASK_ALLGATHER ? p->c->act_bytes : config_grad_bytes(p->c); /* bf16 parameters, fp32 grads */
    t->bytes = size_ring_coll_bytes(elems, elem, n, kind == TASK_ALLREDUCE);
    if (wait_buf >= 0) bt_reads(b, wait_buf);
    for (int l = first; l <= last; l++) {
        if (!build_stage_holds(p, l)) continue;
        if (kind == TASK_ALLGATHER)
            bt_writes(b, BUF_LB(l, LB_W));
        else
            bt_reads(b, BUF_LB(l, LB_GRAD));
    }
    bt_end(b);
}

static void grad_coll(prog *p, task_kind kind, task_op op, int layer, uint64_t elems, int first, int last)
{
    grad_coll_after(p, kind, op, layer, elems, first, last, -1);
}

void build_grad_param_gather(prog *p, int j, int after)
{
    int L = p->m->layers;
    if (j < L)
        grad_coll_after(p, TASK_ALLGATHER, OP_PARAM_ALLGATHER, j, model_layer_params_tp(p->m, p->tp), j, j, after);
    else
        grad_coll_after(p, TASK_ALLGATHER, OP_PARAM_ALLGATHER, -1, model_head_params_tp(p->m, p->tp), L, L, after);
}

/* ZeRO-3 forward as FSDP runs it (reshard after forward, forward prefetch
 * bounded to c->prefetch blocks): on entering block l, once its input is
 * ready (block l-1 done, its parameters resharded), the gather of block
 * l + prefetch is issued, so at most prefetch + 1 blocks' parameters are
 * gathered at once; block 0 issues its own and the prefetched ones. The
 * LM head is block L. (FSDP1's limit_all_gathers keeps two blocks'
 * gathers in flight; FSDP2 prefetches the modules given to
 * set_modules_to_forward_prefetch, torchtitan one block ahead.) */
void build_grad_fwd_gathers(prog *p, int l)
{
    int L = p->m->layers, n = p->c->prefetch;
    for (int j = l == 0 ? 0 : l + n; j <= l + n && j <= L; j++)
        build_grad_param_gather(p, j, BUF_LB(l, LB_X));
}

/* ZeRO-3 backward with FSDP's backward prefetch (BACKWARD_PRE; FSDP2's
 * FSDPParamGroup._backward_prefetch in torch/distributed/fsdp/_fully_shard/
 * _fsdp_param_group.py unshards the previous module in forward order): entering
 * block l's backward, the gather of block l - prefetch is issued before
 * block l's gradient collective, so it runs beside block l's backward; it
 * follows block l+1's reduce-scatter on the stream, which waits for block
 * l+1's backward, so again at most prefetch + 1 blocks are gathered. The
 * first block of the backward (L-1) issues its own and the prefetched. */
void build_grad_bwd_gathers(prog *p, int l)
{
    int L = p->m->layers, n = p->c->prefetch;
    for (int j = l == L - 1 ? l : l - n; j >= l - n && j >= 0; j--)
        build_grad_param_gather(p, j, -1);
}

void build_grad_head(prog *p, int wait_buf)
{
    int L = p->m->layers;
    uint64_t hp = pipe_head_params(p->c, p->stage); /* in the gradient slot of index L */
    if (!p->last_mb) return;
    if (p->c->zero == 0) grad_coll_after(p, TASK_ALLREDUCE, OP_GRAD_ALLREDUCE, -1, hp, L, L, wait_buf);
    if (p->c->zero >= 2) grad_coll_after(p, TASK_REDUCESCATTER, OP_GRAD_REDUCESCATTER, -1, hp, L, L, wait_buf);
}

void build_grad_block(prog *p, int l)
{
    uint64_t lp = model_block_params_tp(p->m, p->tp, l);
    if (p->c->zero == 0) grad_coll(p, TASK_ALLREDUCE, OP_GRAD_ALLREDUCE, l, lp, l, l);
    if (p->c->zero >= 2) grad_coll(p, TASK_REDUCESCATTER, OP_GRAD_REDUCESCATTER, l, lp, l, l);
}

void build_grad_step_scatter(prog *p)
{
    uint64_t all = pipe_stage_params(p->c, p->stage);
    if (p->c->zero == 1) grad_coll(p, TASK_REDUCESCATTER, OP_GRAD_REDUCESCATTER, -1, all, 0, p->m->layers);
}

void build_grad_step_gather(prog *p)
{
    uint64_t all = pipe_stage_params(p->c, p->stage);
    if (p->c->zero == 1 || p->c->zero == 2) grad_coll(p, TASK_ALLGATHER, OP_PARAM_ALLGATHER, -1, all, 0, p->m->layers);
}

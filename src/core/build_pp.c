/*
 * build_pp: pipeline parallelism in dag_build()'s rank program
 * (build_internal.h): the passes of the rank's stage in the schedule's
 * order (pipeline.h computes the schedule), their p2p with the
 * neighbouring stages and the grouping of sends with the next recvs.
 */
#include "build_internal.h"
#include "recompute.h"
#include "xalloc.h"

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
    uint64_t rows = p->sp && mesh_on(&m, MESH_TP) ? p->T / (uint64_t)p->tp : p->T, hid = (uint64_t)p->m->hidden;
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
        if (pipe_is_first(c, p->stage, op->chunk)) build_embedding(p, PHASE_FWD);
        for (int l = first; l < end; l++)
            build_layer_fwd(p, l, PHASE_FWD, RC_ALL);
        if (pipe_is_last(c, p->stage, op->chunk))
            build_lm_head_fwd(p);
        else
            pp_p2p(p, false, false, 1, end, BUF_LB(end, LB_X), false), sent = true;
    } else {
        if (pipe_is_last(c, p->stage, op->chunk)) build_lm_head_bwd(p);
        for (int l = end - 1; l >= first; l--)
            build_layer_bwd(p, l);
        if (pipe_is_first(c, p->stage, op->chunk))
            build_embedding(p, PHASE_BWD);
        else
            pp_p2p(p, true, false, -1, first, BUF_LB(first, LB_DX), false), sent = true;
    }
    if (next) pass_recv(p, next, sent);
}

/* The passes of the rank's stage in the schedule's order (pipeline.h);
 * a chunk's backward of the last micro-batch completes its gradients. */
void build_pp_passes(prog *p)
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

/*
 * exec_grad: the gradient reduction's collectives on the device
 * (exec_tasks.h): over the gradient group (the dp communicator: the
 * context ranks and the data-parallel replicas), each block's
 * parameters or gradients in place, or the whole model's (ZeRO 1, 2).
 */
#include "exec_tasks.h"

/* Block l's weights in wbuf (a mixture of experts': but its experts). */
static size_t layer_weights(const xr *x, int l) { return x->boff[l + 1] - x->boff[l]; }

/* Model-level (layer -1) reductions: the LM head's own collective, or the
 * whole model at once (ZeRO 1 gradients; ZeRO 1/2 parameters). See build_grad.c. */
static bool lm_head_only(const xr *x, const dag_task *t)
{
    if (t->op == OP_GRAD_ALLREDUCE) return true;
    if (t->op == OP_GRAD_REDUCESCATTER) return x->c->zero >= 2;
    return x->c->zero == 3;
}

void xt_grad_collective(emit *e, const dag_task *t)
{
    xr *x = e->x;
    dev_op op = op_new(t->kind == TASK_ALLREDUCE       ? DOP_ALLREDUCE
                       : t->kind == TASK_REDUCESCATTER ? DOP_REDUCESCATTER
                                                       : DOP_ALLGATHER);
    bool params = t->op == OP_PARAM_ALLGATHER;
    float *buf;
    size_t n;
    if (t->layer >= 0) {
        buf = params ? x->ly[t->layer].w.qkv : x->ly[t->layer].gw.qkv;
        n = layer_weights(x, t->layer);
    } else if (lm_head_only(x, t)) {
        buf = params ? x->lm_w : x->lm_gw;
        n = (size_t)x->c->model.hidden * (size_t)x->vocab;
    } else {
        buf = params ? x->wbuf : x->gbuf;
        n = x->wcount;
    }
    op.u.coll = (__typeof__(op.u.coll)){x->comm[STREAM_DP], buf, buf, n};
    emit_op(e, &op);
}

/* After a timed step, gather every reduce-scattered gradient, the
 * experts' too, so that each rank holds the full reduced gradients (for
 * --check; not timed). */
int xr_gather_grads(xr *x)
{
    for (uint32_t i = 0; i < x->ntasks; i++) {
        dag_task t = *dag_task_get(x->g, x->base + i);
        if (t.kind != TASK_REDUCESCATTER || (t.stream != STREAM_DP && t.stream != STREAM_EP_GRAD)) continue;
        t.kind = TASK_ALLGATHER; /* the experts' (ep_grad) over their group, exec_ep.c */
        emit e = {x, t.stream, -1, 0, true, {0}, false, 0};
        (t.stream == STREAM_DP ? xt_grad_collective : xt_ep_task)(&e, &t);
        if (emit_end(&e)) return -1;
    }
    return 0;
}

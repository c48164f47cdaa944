/*
 * exec_pp: the pipeline's p2p on the device (exec_tasks.h; STREAM_PP,
 * STREAM_PP_GRAD). The boundary block's input x (activations) or its gradient dx, of the
 * task's own micro-batch: this rank's rows, its part under sequence
 * parallelism (the DAG's dim[0] rows).
 */
#include "exec_tasks.h"

static float *pp_buf(const xr *x, const dag_task *t)
{
    /* its own micro-batch's: a send's grouped recv is the next pass's */
    const layer_t *ly = &x->ly_all[(size_t)t->mb * ((size_t)x->L + 1) + (size_t)t->layer];
    float *buf = t->op == OP_PP_ACT ? ly->x : ly->dx;
    size_t off, n, count = (size_t)x->T * (size_t)x->c->model.hidden;
    xt_tp_own_part(x, count, &off, &n);
    return buf + off;
}

void xt_pp_sendrecv(emit *e, const dag_task *s, const dag_task *r)
{
    xr *x = e->x;
    dev_comm *c = x->comm[(s ? s : r)->stream];
    dev_op op = op_new(DOP_SENDRECV);
    op.u.p2p = (__typeof__(op.u.p2p)){c, NULL, NULL, 0, 0, -1, -1};
    if (s) {
        op.u.p2p.sbuf = pp_buf(x, s);
        op.u.p2p.sbytes = s->bytes;
        op.u.p2p.to = x->ops->comm_rank(c, s->peer);
        op.stamp_end = e->slot;
    }
    if (r) {
        op.u.p2p.rbuf = pp_buf(x, r);
        op.u.p2p.rbytes = dag_task_bytes_moved(x->g, r);
        op.u.p2p.from = x->ops->comm_rank(c, r->peer);
        op.stamp_start2 = op.stamp_end2 = (int)(r->id - x->base);
    }
    emit_op(e, &op);
}

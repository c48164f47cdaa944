/* analytic_pp: pipeline parallelism in the analytic step model
 * (analytic_internal.h): the stages' passes of the schedule
 * (core/pipeline.h) as a critical-path recurrence, then each stage's
 * gradient reduction. */
#include "analytic_internal.h"

#include <stdlib.h>

#include "core/pipeline.h"
#include "core/xalloc.h"

/* One pipeline p2p of a stage boundary: this rank's (T or T/tp, hidden)
 * activations between rank 0 and its match on the next stage, on their
 * GPUs (config_gpu_of: dp may sit between the stages). */
static double pp_hop(const config *c, const platform_spec *n)
{
    mesh m = config_mesh(c);
    bool sp = mesh_on(&m, MESH_TP) && c->sequence_parallel;
    double rows = (double)config_local_tokens(c) / (sp ? c->tp : 1);
    link l = link_between(n, config_gpu_of(c, 0), config_gpu_of(c, mesh_shift(&m, 0, MESH_PP, 1)));
    return flow(&l, rows * c->model.hidden * c->act_bytes);
}

/* The pipeline: every stage's passes (pipeline.h) as a critical-path
 * recurrence, a pass starting when its stage is free and its input has
 * arrived (the producing pass's end plus one hop); then each stage's
 * gradient reduction over DP after its last backward. Passes cost their
 * blocks' layer cost (the same per block on every stage) plus the embedding on
 * virtual stage 0 and the LM head on the last; DP collectives are not
 * overlapped with the passes but for ZeRO-0's, which follow the last
 * micro-batch's backward block by block. */
typedef struct pipe_walk {
    const config *c;
    double f[2], b[2];                       /* one block's forward and backward: dense, with experts */
    double f_first, b_first, f_last, b_last; /* the extras of the first and last virtual stages */
    double hop;
    double *fdone, *bdone; /* by virtual stage and micro-batch; < 0: not yet */
} pipe_walk;

static double pass_seconds(const pipe_walk *w, int stage, const pipe_op *op)
{
    const config *c = w->c;
    const double *per = op->bwd ? w->b : w->f;
    int n = pipe_layers(c, stage, op->chunk), moe = moe_blocks_in(c, pipe_first_layer(c, stage, op->chunk), n);
    double t = moe == 0 ? per[0] * n : moe == n ? per[1] * n : per[0] * (n - moe) + per[1] * moe;
    if (pipe_is_first(c, stage, op->chunk)) t += op->bwd ? w->b_first : w->f_first;
    if (pipe_is_last(c, stage, op->chunk)) t += op->bwd ? w->b_last : w->f_last;
    return t;
}

/* When op's input is ready, or < 0 while its producer has not run. */
static double pass_ready(const pipe_walk *w, int stage, const pipe_op *op)
{
    const config *c = w->c;
    int u = op->chunk * c->pp + stage, m = c->micro_batches;
    if (!op->bwd)
        return pipe_is_first(c, stage, op->chunk)   ? 0
               : w->fdone[(u - 1) * m + op->mb] < 0 ? -1
                                                    : w->fdone[(u - 1) * m + op->mb] + w->hop;
    if (pipe_is_last(c, stage, op->chunk)) return w->fdone[u * m + op->mb];
    double t = w->bdone[(u + 1) * m + op->mb];
    return t < 0 ? -1 : t + w->hop;
}

/* Run every stage's passes; free[s] gets stage s's last pass's end,
 * busy[s] its passes' sum, last_b[s] the start of its last backward. */
static void pipe_run(pipe_walk *w, double *free_at, double *busy, double *last_b)
{
    const config *c = w->c;
    int pp = c->pp, n = pipe_nops(c), *next = xcalloc((size_t)pp, sizeof *next, "the pipeline walk");
    pipe_op *ops = xmalloc_array((size_t)pp * (size_t)n, sizeof *ops, "the pipeline walk");
    for (int s = 0; s < pp; s++)
        pipe_ops(c, s, ops + (size_t)s * (size_t)n);
    for (bool moved = true; moved;) {
        moved = false;
        for (int s = 0; s < pp; s++)
            for (; next[s] < n; next[s]++) {
                const pipe_op *op = &ops[(size_t)s * (size_t)n + (size_t)next[s]];
                double ready = pass_ready(w, s, op), d = pass_seconds(w, s, op);
                if (ready < 0) break;
                double start = maxd(free_at[s], ready);
                if (op->bwd) last_b[s] = start;
                free_at[s] = start + d;
                busy[s] += d;
                int u = op->chunk * pp + s;
                (op->bwd ? w->bdone : w->fdone)[(size_t)u * (size_t)c->micro_batches + (size_t)op->mb] = free_at[s];
                moved = true;
            }
    }
    free(ops);
    free(next);
}

void analytic_pp_walk(const config *c, const calib *cb, const platform_spec *n, const layer_cost lc[2],
                      const tpcost *tk, analytic_result *out)
{
    const model *m = &c->model;
    int pp = c->pp, nv = pp * c->vpp, mb = c->micro_batches;
    double T = (double)config_local_tokens(c), v = (double)config_tp_vocab(c);
    head_elementwise he = head_elementwise_of(c, cb);
    double lm_f = head_gemm(c, cb, T, v, m->hidden, false) + he.last_f,
           lm_b = head_gemm(c, cb, T, v, m->hidden, true) + he.last_b;
    pipe_walk w = {c,
                   {lc[0].fwd, lc[1].fwd},
                   {lc[0].bwd, lc[1].bwd},
                   tk->embed + he.first_f,
                   he.first_b,
                   lm_f + tk->head_fwd,
                   lm_b + tk->head - tk->head_fwd,
                   pp_hop(c, n),
                   NULL,
                   NULL};
    size_t cells = (size_t)nv * (size_t)mb;
    w.fdone = xmalloc_array(cells, sizeof *w.fdone, "the pipeline walk");
    w.bdone = xmalloc_array(cells, sizeof *w.bdone, "the pipeline walk");
    for (size_t i = 0; i < cells; i++)
        w.fdone[i] = w.bdone[i] = -1;
    double *free_at = xcalloc((size_t)pp * 3, sizeof *free_at, "the pipeline walk"), *busy = free_at + pp,
           *last_b = busy + pp;
    for (int s = 0; s < pp; s++) /* the gradient buffer zeroed before the first pass */
        free_at[s] = busy[s] = elementwise_seconds(c, cb, OP_ZERO_GRAD, false, s) + weight_casts(c, cb, s);
    pipe_run(&w, free_at, busy, last_b);
    /* the stages' gradient reductions over DP, each over its own parameters */
    mesh msh = config_mesh(c);
    int N = mesh_group_size(&msh, CONFIG_GRAD_DIMS), *g = xmalloc_array((size_t)N, sizeof *g, "the gradient group");
    mesh_group_members(&msh, CONFIG_GRAD_DIMS, 0, g);
    double step = 0, ends = 0, idle = 0;
    int gb = config_grad_bytes(c);
    double ar_layer = c->zero == 0 ? analytic_grad_coll(c, n, g, N, model_layer_params_tp(m, c->tp), true, gb) +
                                         analytic_ep_grad(c, n, 1, true, gb)
                                   : 0;
    int worst = 0;
    for (int s = 0; s < pp; s++) {
        double dp = free_at[s];
        int blocks = pipe_stage_layers(c, s), moe = pipe_stage_moe_blocks(c, s);
        if (c->zero ==
            0) { /* block by block behind the last backward (experts' blocks last in the model, first here) */
            dp = last_b[s];
            double done = last_b[s];
            for (int l = 0; l < blocks; l++) {
                done += l < moe ? lc[1].bwd : lc[0].bwd;
                dp =
                    maxd(dp, moe == 0 || moe == blocks ? last_b[s] + (l + 1) * lc[moe == blocks].bwd : done) + ar_layer;
            }
            if (pipe_head_params(c, s))
                dp = maxd(dp, free_at[s]) + analytic_grad_coll(c, n, g, N, pipe_head_params(c, s), true, gb);
        }
        dp = maxd(dp, free_at[s]);
        /* ZeRO-1: the stage's reduce-scatter of gradients, the norms, then
         * the all-gather of as many parameters */
        uint64_t sp = pipe_stage_params(c, s);
        dp += c->zero == 1 ? analytic_grad_coll(c, n, g, N, sp, false, gb) +
                                 analytic_ep_grad(c, n, pipe_stage_moe_blocks(c, s), false, gb)
                           : 0;
        dp += tk->norm;
        dp += elementwise_seconds(c, cb, OP_OPTIM_STEP, false, s); /* the optimizer step, then the all-gather */
        dp += c->zero == 1 ? analytic_grad_coll(c, n, g, N, sp, false, c->act_bytes) +
                                 analytic_ep_grad(c, n, pipe_stage_moe_blocks(c, s), false, c->act_bytes)
                           : 0;
        if (dp > step) step = dp, worst = s;
        ends = maxd(ends, free_at[s]);
        idle = maxd(idle, free_at[s] - busy[s]);
    }
    /* the worst stage's blocks: of one kind (as ever), or dense and with experts */
    double moe = pipe_stage_moe_blocks(c, worst), blocks = pipe_stage_layers(c, worst), dense = blocks - moe;
    const layer_cost *u = moe == 0 || moe == blocks ? &lc[moe > 0] : NULL;
    double busy_b = u ? blocks * (u->fwd_busy + u->bwd_busy)
                      : dense * (lc[0].fwd_busy + lc[0].bwd_busy) + moe * (lc[1].fwd_busy + lc[1].bwd_busy);
    double busy_w =
        (double)mb * (busy_b + (worst == pp - 1 ? lm_f + lm_b : 0) + (worst == 0 ? he.first_f + he.first_b : 0)) +
        elementwise_seconds(c, cb, OP_ZERO_GRAD, false, worst) +
        elementwise_seconds(c, cb, OP_OPTIM_STEP, false, worst);
    out->step = step;
    out->busy = busy_w;
    out->exposed = step - busy_w;
    out->a2a = u ? (double)mb * blocks * u->a2a : (double)mb * (dense * lc[0].a2a + moe * lc[1].a2a);
    out->ring_wait =
        u ? (double)mb * blocks * u->ring_wait : (double)mb * (dense * lc[0].ring_wait + moe * lc[1].ring_wait);
    out->tp = (double)mb * ((u ? blocks * u->tp : dense * lc[0].tp + moe * lc[1].tp) + tk->head + tk->embed) + tk->norm;
    out->dp_tail = step - ends;
    out->bubble = idle / step;
    free(g);
    free(free_at);
    free(w.fdone);
    free(w.bdone);
}

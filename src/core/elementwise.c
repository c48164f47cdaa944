/* elementwise: the step's memory-bound kernels. See elementwise.h. */
#include "elementwise.h"

#include "pipeline.h"
#include "recompute.h"

task_kind elementwise_kind(task_op op)
{
    switch (op) {
    case OP_NORM_ATTN:
    case OP_NORM_MLP:
    case OP_NORM_FINAL:
    case OP_NORM_LATENT: return TASK_NORM;
    case OP_ROPE: return TASK_ROPE;
    case OP_ADD_ATTN:
    case OP_ADD_MLP:
    case OP_PERMUTE:
    case OP_UNPERMUTE: return TASK_ADD;
    case OP_ACT:
    case OP_EXPERT_ACT: return TASK_ACT;
    case OP_ROUTE: return TASK_SOFTMAX;
    case OP_EMBED: return TASK_EMBED;
    case OP_LOSS: return TASK_LOSS;
    case OP_SOFTMAX: return TASK_SOFTMAX;
    case OP_ATTN_DROPOUT: return TASK_DROPOUT;
    case OP_QUANT_ATTN_OUT:
    case OP_QUANT_GRAD:
    case OP_QUANT_DQKV:
    case OP_QUANT_W: return TASK_QUANT;
    default: return TASK_OPTIM;
    }
}

/* Rows of the (T, hidden) tensors norms and residual adds run on: the
 * sequence shard under sequence parallelism. */
static uint64_t hidden_rows(const config *c) { return config_sp_rows(c, config_local_tokens(c)); }

/* The stage's parameters (one TP shard, its E/ep experts), or the rank's
 * shard of them when ZeRO shards what is counted from stage `from` on (1:
 * the optimizer state, 2: the gradients too): the experts' over the
 * expert-data-parallel group, the rest over the gradient group. */
static uint64_t local_params(const config *c, int stage, int from)
{
    uint64_t n = pipe_stage_params(c, stage), g = (uint64_t)config_cp(c) * (uint64_t)c->dp;
    uint64_t e = (uint64_t)pipe_stage_moe_blocks(c, stage) * config_ep_expert_params(c), ge = (uint64_t)config_edp(c);
    return c->zero >= from ? (n + g - 1) / g + (e + ge - 1) / ge : n + e;
}

void elementwise_shape(const config *c, task_op op, int stage, uint64_t *rows, uint64_t *cols)
{
    const model *m = &c->model;
    uint64_t T = config_local_tokens(c), h = (uint64_t)m->hidden, d = (uint64_t)m->head_dim;
    *rows = hidden_rows(c);
    *cols = h;
    switch (op) {
    case OP_ROPE: /* Q and K of the rank's heads: the QKV columns but V's */
        *rows = T;
        *cols = ((uint64_t)model_tp_qkv_heads(m, c->tp) - (uint64_t)model_tp_kv_heads(m, c->tp)) * d;
        break;
    case OP_ACT: *rows = T, *cols = config_tp_ffn(c); break;
    case OP_NORM_LATENT: /* both latents of the rank's T tokens (build.c runs MLA's down projections on all T) */
        *rows = T, *cols = (uint64_t)m->q_lora + (uint64_t)m->kv_lora;
        break;
    case OP_EMBED: *rows = T; break;
    case OP_LOSS: *rows = T, *cols = config_tp_vocab(c); break;
    case OP_ZERO_GRAD: *rows = local_params(c, stage, 2), *cols = 1; break;
    case OP_OPTIM_STEP: *rows = local_params(c, stage, 1), *cols = 1; break;
    case OP_QUANT_ATTN_OUT: *rows = T, *cols = config_tp_attn_width(c); break;
    case OP_QUANT_GRAD: break; /* (T', hidden) */
    case OP_QUANT_DQKV: *rows = T, *cols = (uint64_t)model_tp_qkv_heads(m, c->tp) * d; break;
    case OP_QUANT_W: /* the block weights, the experts' included */
        *rows =
            pipe_stage_block_params(c, stage) + (uint64_t)pipe_stage_moe_blocks(c, stage) * config_ep_expert_params(c);
        *cols = 1;
        break;
    case OP_SOFTMAX:
    case OP_ATTN_DROPOUT: /* the scores: every query row of every head, a column per key */
        *rows = (uint64_t)c->batch * (c->seq / (uint64_t)c->p_seq) * (uint64_t)config_q_heads(c);
        *cols = c->seq;
        break;
    default: break;
    }
}

uint64_t elementwise_hbm_bytes(const config *c, task_op op, task_phase ph, uint64_t elems)
{
    uint64_t a = (uint64_t)c->act_bytes;
    bool bwd = ph == PHASE_BWD;
    switch (elementwise_kind(op)) {
    case TASK_NORM: return elems * (bwd ? 3 : 2) * a;
    case TASK_ROPE: return elems * 2 * a;
    case TASK_ADD:
        if (op == OP_PERMUTE || op == OP_UNPERMUTE) return elems * 2 * a; /* a row copied (and weighted) */
        return elems * (3 * a + (c->hidden_dropout > 0 ? (bwd ? 2 * a + 1 : 1) : 0));
    case TASK_ACT: return elems * (bwd ? 5 : 3) * a;
    case TASK_EMBED: {
        if (!bwd) return elems * 2 * a;
        return config_tp_vocab(c) * (uint64_t)c->model.hidden * (2 + 10) + elems * 2 * a;
    }
    case TASK_LOSS: return elems * (bwd ? 14 : 38);
    case TASK_SOFTMAX: return elems * (bwd ? 3 : 2) * a;
    case TASK_DROPOUT: return elems * (2 * a + 1);
    case TASK_QUANT: { /* read the high-precision tensor, write FP8 data and its transpose (and MXFP8's scales) */
        uint64_t in = op == OP_QUANT_W ? 2 : a, amax = c->precision == PRECISION_FP8_CURRENT ? in : 0;
        return elems * (in + 2 + amax) + (c->precision == PRECISION_MXFP8 ? elems / 16 : 0);
    }
    default: return elems * (op == OP_ZERO_GRAD ? 4 : 38);
    }
}

int elementwise_block_ops(const task_op **ops)
{
    static const task_op block[] = {OP_NORM_ATTN, OP_ROPE, OP_ADD_ATTN, OP_NORM_MLP, OP_ACT, OP_ADD_MLP};
    *ops = block;
    return (int)(sizeof block / sizeof block[0]);
}

bool elementwise_reruns(task_op op, unsigned parts)
{
    unsigned need = op == OP_NORM_ATTN || op == OP_ROPE || op == OP_NORM_LATENT ? RC_QKV
                    : op == OP_ADD_ATTN || op == OP_QUANT_ATTN_OUT              ? RC_OUT
                    : op == OP_ADD_MLP                                          ? RC_OUT | RC_MLP
                                                                                : RC_MLP;
    return (parts & need) == need;
}

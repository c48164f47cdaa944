/* unfused: materialised-softmax attention's kernels. See unfused.h. */
#include "unfused.h"

#include "dag_internal.h"

uint64_t unfused_scores(const config *c, uint64_t q, uint64_t kv, uint64_t heads)
{
    return q * kv * heads * (uint64_t)c->batch;
}

uint64_t unfused_attn_flops(const config *c, uint64_t q, uint64_t kv, uint64_t heads, bool bwd)
{
    return (bwd ? 8 : 4) * unfused_scores(c, q, kv, heads) * (uint64_t)c->model.head_dim;
}

static void scores_task(builder *b, task_kind kind, task_op op, int layer, task_phase ph, const uint32_t dim[3],
                        uint64_t elems, int reads)
{
    dag_task *t = bt_task(b, bt_begin(b, kind, STREAM_COMP, op, ph, layer));
    for (int i = 0; i < 3; i++)
        t->dim[i] = dim[i];
    t->flops = elems;
    bt_reads(b, reads);
    bt_end(b);
}

void unfused_block_kernels(builder *b, int layer, task_phase ph, uint64_t q, uint64_t kv, uint64_t heads, int reads)
{
    const config *c = bt_config(b);
    if (c->attention != ATTN_UNFUSED) return;
    uint32_t dim[3] = {(uint32_t)q, (uint32_t)kv, (uint32_t)heads};
    uint64_t elems = unfused_scores(c, q, kv, heads);
    bool dropout = c->attention_dropout > 0;
    if (ph != PHASE_BWD) {
        scores_task(b, TASK_SOFTMAX, OP_SOFTMAX, layer, ph, dim, elems, reads);
        if (dropout) scores_task(b, TASK_DROPOUT, OP_ATTN_DROPOUT, layer, ph, dim, elems, reads);
        return;
    }
    if (dropout) scores_task(b, TASK_DROPOUT, OP_ATTN_DROPOUT, layer, ph, dim, elems, reads);
    scores_task(b, TASK_SOFTMAX, OP_SOFTMAX, layer, ph, dim, elems, reads);
}

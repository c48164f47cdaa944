/*
 * allgather: Llama 3's context parallelism for one rank (Dubey et al. 2024,
 * "The Llama 3 Herd of Models", section 3.3.2; ring-flash-attention's
 * llama3_flash_attn_varlen_func). The P_s context ranks that share this
 * rank's heads all-gather K and V, each computes its own queries against
 * every key in one block under the mask, and the backward gathers again,
 * computes dQ and the whole sequence's dK/dV, and reduce-scatters dK/dV
 * back to the ranks that own those tokens.
 *
 * With --kv-stride N the rank gathers N of its KV heads at a time (and
 * their query heads attend before the next gather): the gathered buffer
 * holds S x N heads instead of S x all, which is what bounds memory at long
 * S; the gathers of group g+1 overlap the attention of group g through two
 * slots. No merge: every group writes its own heads of O in one block.
 *
 * Streams: the gathers run on STREAM_RING, the reduce-scatters on
 * STREAM_DKV, both in the group of the P_s context ranks.
 */
#include "ring.h"

#include "ringgeo.h"
#include "sizes.h"
#include "unfused.h"
#include "xalloc.h"

typedef struct ctx {
    builder *b;
    const config *c;
    int s, layer, groups, stride;
    task_phase phase;
    uint32_t kv_gid, dkv_gid;
} ctx;

static ctx ctx_of(builder *b, int layer, task_phase phase)
{
    const config *c = bt_config(b);
    ctx x = {b, c, 0, layer, 1, config_kv_heads(c), phase, DAG_NONE, DAG_NONE};
    int h;
    config_coords(c, bt_rank(b), &h, &x.s);
    if (c->kv_stride) x.stride = c->kv_stride, x.groups = config_kv_heads(c) / c->kv_stride;
    x.kv_gid = bt_group(b, STREAM_RING, MESH_DIMS_SEQ);
    x.dkv_gid = bt_group(b, STREAM_DKV, MESH_DIMS_SEQ);
    return x;
}

/* Elements of K and V (or dK and dV) of one group over the whole sequence. */
static uint64_t group_elems(const ctx *x)
{
    return 2 * x->c->seq * (uint64_t)x->stride * (uint64_t)x->c->model.head_dim * (uint64_t)x->c->batch;
}

/* The KV slot group g attends from: its gathered copy, or the own KV. */
static int kv_slot(const ctx *x, int g) { return x->c->p_seq == 1 ? KV_OWN : KV_IN0 + g % 2; }
static int kv_buffer(const ctx *x, int g)
{
    return x->c->p_seq == 1 ? BUF_LB(x->layer, LB_QKVH) : BUF_KV + kv_slot(x, g);
}

static void gather(const ctx *x, int g)
{
    if (x->c->p_seq == 1) return;
    builder *b = x->b;
    dag_task *t = bt_task(b, bt_begin(b, TASK_ALLGATHER, STREAM_RING, OP_KV_GATHER, x->phase, x->layer));
    t->group = x->kv_gid;
    t->bytes = size_ring_coll_bytes(group_elems(x), x->c->act_bytes, (uint64_t)x->c->p_seq, false);
    t->dim[0] = (uint32_t)x->c->seq;
    t->dim[1] = (uint32_t)x->stride;
    t->dim[2] = (uint32_t)x->c->act_bytes;
    t->buf = (uint8_t)kv_slot(x, g);
    t->step = (uint16_t)g;
    bt_reads(b, BUF_LB(x->layer, LB_QKVH));
    bt_writes(b, kv_buffer(x, g));
    bt_end(b);
}

/* This rank's queries (of group g's heads) against every key. */
static dag_task *block(const ctx *x, task_kind kind, int g)
{
    builder *b = x->b;
    uint64_t pairs = ringgeo_query_pairs(x->c, x->s);
    unsigned parts = ringgeo_parts(x->c);
    uint64_t q = (uint64_t)ringgeo_count(parts) * config_chunk_tokens(x->c), heads = config_q_heads(x->c) / x->groups;
    bool bwd = kind == TASK_ATTN_BWD;
    unfused_block_kernels(b, x->layer, x->phase, q, x->c->seq, heads, BUF_LB(x->layer, bwd ? LB_DOH : LB_QKVH));
    dag_task *t = bt_task(b, bt_begin(b, kind, STREAM_COMP, OP_ATTN, x->phase, x->layer));
    uint64_t fwd = size_attn_fwd_flops(x->c, pairs) / (uint64_t)x->groups; /* the group's share of the heads */
    t->flops = bwd ? size_attn_bwd_flops(fwd) : fwd;
    if (x->c->attention == ATTN_UNFUSED) t->flops = unfused_attn_flops(x->c, q, x->c->seq, heads, bwd);
    t->dim[0] = (uint32_t)q;
    t->dim[1] = (uint32_t)x->c->seq;
    t->dim[2] = (uint32_t)heads;
    t->sel = (uint8_t)(parts | parts << 2);
    t->src = x->s;
    t->step = (uint16_t)g;
    t->buf = (uint8_t)kv_slot(x, g);
    t->flags |= DAG_F_MASKED;
    bt_reads(b, BUF_LB(x->layer, LB_QKVH));
    bt_reads(b, kv_buffer(x, g));
    return t;
}

void allgather_attention_fwd(builder *b, int layer, task_phase phase)
{
    ctx x = ctx_of(b, layer, phase);
    for (int g = 0; g < x.groups; g++) {
        gather(&x, g);
        if (!ringgeo_query_pairs(x.c, x.s)) continue;
        block(&x, TASK_ATTN_FWD, g);
        bt_writes(b, BUF_LB(layer, LB_O));
        bt_end(b);
    }
}

static void reduce_scatter(const ctx *x, int g, int dkv_slot)
{
    builder *b = x->b;
    dag_task *t = bt_task(b, bt_begin(b, TASK_REDUCESCATTER, STREAM_DKV, OP_DKV_REDUCE, PHASE_BWD, x->layer));
    t->group = x->dkv_gid;
    t->bytes = size_ring_coll_bytes(group_elems(x), 4, (uint64_t)x->c->p_seq, false);
    t->dim[0] = (uint32_t)x->c->seq;
    t->dim[1] = (uint32_t)x->stride;
    t->dim[2] = 4;
    t->buf = (uint8_t)DKV_FINAL;
    t->buf2 = (uint8_t)dkv_slot;
    t->step = (uint16_t)g;
    bt_reads(b, BUF_DKV + dkv_slot);
    bt_writes(b, BUF_DKV + DKV_FINAL);
    bt_end(b);
}

void allgather_attention_bwd(builder *b, int layer)
{
    ctx x = ctx_of(b, layer, PHASE_BWD);
    bool local = x.c->p_seq == 1;
    for (int g = 0; g < x.groups; g++) {
        gather(&x, g);
        int out = local ? DKV_FINAL : DKV_BLK0 + g % 2;
        if (ringgeo_query_pairs(x.c, x.s)) {
            dag_task *t = block(&x, TASK_ATTN_BWD, g);
            t->buf2 = (uint8_t)out;
            bt_reads(b, BUF_LB(layer, LB_O));
            bt_reads(b, BUF_LB(layer, LB_DOH));
            bt_writes(b, BUF_LB(layer, LB_DQKVH));
            bt_writes(b, BUF_DKV + out);
            bt_end(b);
        }
        if (!local) reduce_scatter(&x, g, out); /* every member takes part, work or not */
    }
}

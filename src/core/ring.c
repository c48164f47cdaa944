/*
 * ring: ring attention forward and backward for one rank, after the head
 * all-to-all (the rank holds S/P_s tokens of H/P_h query heads).
 *
 * One generic algorithm covers every ring mode. The P_s ring ranks form
 * P_s/w windows of w consecutive ring ranks (DESIGN.md, LoongTrain's double
 * ring): for each window o, the KV held on entering it is sent to the same
 * position of the next window on the outer stream, and overlaps the whole
 * inner loop of w steps, whose w-1 transfers stay inside the window. A
 * single ring is w = P_s (no outer transfers); w = 1 is all-outer. The dual
 * ring runs two single-ring lanes: chunk A and chunk B, each on its own
 * streams.
 *
 * Forward: the first block writes (O, LSE); later ones go through a merge.
 * Backward: KV travel the same way, and fp32 dK/dV accumulators travel with
 * them: within a window like a single ring (w transfers, the last returning
 * the window's partial to the rank that entered the KV), then between
 * windows along the outer ring, summed at each hop, the last hop returning
 * the total to the owner. Blocks with no unmasked pair are skipped.
 *
 * Buffers are double-buffered (prefetch), and the hazards declared here
 * become the DAG's cross-stream events.
 */
#include "ring.h"

#include "ringgeo.h"
#include "sizes.h"
#include "unfused.h"

typedef struct lane {
    int id;
    uint8_t kv_parts; /* bits: parts of a ring rank's KV this lane carries */
    stream_kind kv_in, kv_out, dkv_in, dkv_out;
} lane;

typedef struct geo {
    const config *c;
    const ringgeo_blocks *blocks;
    int h, s;  /* this rank's mesh coordinates */
    int w, nw; /* window, windows */
    int layer;
    task_phase phase;
    uint64_t chunk; /* tokens per chunk */
    lane lanes[2];
    int nlanes;
    int rank;        /* this rank (its TP coordinate and replica place the peers) */
    bool o_init;     /* forward: O already written this layer */
    int blk_turn[2]; /* backward: alternating dKV block scratch */
} geo;

static void geo_init(geo *g, builder *b, int layer, task_phase phase)
{
    const config *c = bt_config(b);
    g->c = c;
    g->blocks = bt_blocks(b);
    g->rank = bt_rank(b);
    config_coords(c, g->rank, &g->h, &g->s);
    g->w = c->window;
    g->nw = ringgeo_windows(c);
    g->layer = layer;
    g->phase = phase;
    g->chunk = config_chunk_tokens(c);
    g->o_init = false;
    g->blk_turn[0] = g->blk_turn[1] = 0;
    g->nlanes = ringgeo_lanes(c);
    g->lanes[0] =
        (lane){0, (uint8_t)ringgeo_lane_parts(c, 0), STREAM_RING, STREAM_RING_OUTER, STREAM_DKV, STREAM_DKV_OUTER};
    g->lanes[1] =
        (lane){1, (uint8_t)ringgeo_lane_parts(c, 1), STREAM_RING_B, STREAM_RING_OUTER, STREAM_DKV_B, STREAM_DKV_OUTER};
}

/* Ring index whose KV this rank holds at outer step o, inner step i. */
static int src_at(const geo *g, int o, int i) { return ringgeo_src_at(g->c, g->s, o, i); }

/* The rank this one sends to / receives from on the inner or outer ring. */
static int next_rank(const geo *g, bool outer)
{
    return config_rank_at(g->c, g->rank, g->h, ringgeo_next(g->c, g->s, outer));
}
static int prev_rank(const geo *g, bool outer)
{
    return config_rank_at(g->c, g->rank, g->h, ringgeo_prev(g->c, g->s, outer));
}

static int kv_buf(const geo *g, const lane *ln, int slot)
{
    return slot == KV_OWN ? BUF_LB(g->layer, LB_QKVH) : BUF_KV + ln->id * DAG_SLOTS_PER_LANE + slot;
}
static int dkv_buf(const lane *ln, int slot) { return BUF_DKV + ln->id * DAG_SLOTS_PER_LANE + slot; }
static uint8_t slot_id(const lane *ln, int slot) { return (uint8_t)(ln->id * DAG_SLOTS_PER_LANE + slot); }

/* ---- blocks ---- */

/* Unmasked work of this rank's queries against the lane's part of src's KV. */
static ringgeo_block block_of(const geo *g, const lane *ln, int src)
{
    return *ringgeo_blocks_get(g->blocks, g->s, src, ln->kv_parts);
}

static void set_block(const geo *g, dag_task *t, const ringgeo_block *bl, int src, int step)
{
    t->dim[0] = (uint32_t)(ringgeo_count(bl->q_sel) * g->chunk);
    t->dim[1] = (uint32_t)(ringgeo_count(bl->kv_sel) * g->chunk);
    t->dim[2] = (uint32_t)config_q_heads(g->c);
    t->sel = (uint8_t)(bl->q_sel | bl->kv_sel << 2);
    t->src = src;
    t->step = (uint16_t)step;
    if (bl->masked) t->flags |= DAG_F_MASKED;
}

static void attn_fwd_block(builder *b, geo *g, const lane *ln, int slot, int src, int step)
{
    ringgeo_block bl = block_of(g, ln, src);
    if (!bl.pairs) return;
    uint64_t q = ringgeo_count(bl.q_sel) * g->chunk, kv = ringgeo_count(bl.kv_sel) * g->chunk;
    uint64_t heads = (uint64_t)config_q_heads(g->c);
    unfused_block_kernels(b, g->layer, g->phase, q, kv, heads, BUF_LB(g->layer, LB_QKVH));
    uint32_t id = bt_begin(b, TASK_ATTN_FWD, STREAM_COMP, OP_ATTN, g->phase, g->layer);
    dag_task *t = bt_task(b, id);
    set_block(g, t, &bl, src, step);
    t->flops = g->c->attention == ATTN_UNFUSED ? unfused_attn_flops(g->c, q, kv, heads, false)
                                               : size_attn_fwd_flops(g->c, bl.pairs);
    t->buf = slot_id(ln, slot);
    bt_reads(b, BUF_LB(g->layer, LB_QKVH));
    bt_reads(b, kv_buf(g, ln, slot));
    bt_writes(b, g->o_init ? BUF_OBLK : BUF_LB(g->layer, LB_O));
    bt_end(b);
    if (!g->o_init) {
        g->o_init = true;
        return;
    }
    id = bt_begin(b, TASK_MERGE, STREAM_COMP, OP_ATTN, g->phase, g->layer);
    t = bt_task(b, id);
    set_block(g, t, &bl, src, step);
    t->dim[1] = 0;
    t->flags &= (uint8_t)~DAG_F_MASKED;
    t->flops = size_merge_flops(g->c, t->dim[0]);
    bt_reads(b, BUF_OBLK);
    bt_writes(b, BUF_LB(g->layer, LB_O));
    bt_end(b);
}

/* Returns the dKV slot the block wrote, or -1 when the block is empty. */
static int attn_bwd_block(builder *b, geo *g, const lane *ln, int slot, int src, int step)
{
    ringgeo_block bl = block_of(g, ln, src);
    if (!bl.pairs) return -1;
    int out = g->c->p_seq == 1 ? DKV_FINAL : DKV_BLK0 + g->blk_turn[ln->id];
    g->blk_turn[ln->id] ^= 1;
    uint64_t q = ringgeo_count(bl.q_sel) * g->chunk, kv = ringgeo_count(bl.kv_sel) * g->chunk;
    uint64_t heads = (uint64_t)config_q_heads(g->c);
    unfused_block_kernels(b, g->layer, PHASE_BWD, q, kv, heads, BUF_LB(g->layer, LB_DOH));
    uint32_t id = bt_begin(b, TASK_ATTN_BWD, STREAM_COMP, OP_ATTN, PHASE_BWD, g->layer);
    dag_task *t = bt_task(b, id);
    set_block(g, t, &bl, src, step);
    t->flops = g->c->attention == ATTN_UNFUSED ? unfused_attn_flops(g->c, q, kv, heads, true)
                                               : size_attn_bwd_flops(size_attn_fwd_flops(g->c, bl.pairs));
    t->buf = slot_id(ln, slot);
    t->buf2 = slot_id(ln, out);
    bt_reads(b, BUF_LB(g->layer, LB_QKVH));
    bt_reads(b, kv_buf(g, ln, slot));
    bt_reads(b, BUF_LB(g->layer, LB_O));
    bt_reads(b, BUF_LB(g->layer, LB_DOH));
    bt_writes(b, BUF_LB(g->layer, LB_DQKVH));
    bt_writes(b, dkv_buf(ln, out));
    bt_end(b);
    return out;
}

/* ---- transfers ---- */

static uint64_t lane_tokens(const geo *g, const lane *ln) { return ringgeo_lane_tokens(g->c, ln->id); }

static void set_xfer(const geo *g, const lane *ln, dag_task *t, int elem_bytes, int src, int step)
{
    uint64_t tok = lane_tokens(g, ln);
    t->dim[0] = (uint32_t)tok;
    t->dim[1] = (uint32_t)config_kv_heads(g->c);
    t->dim[2] = (uint32_t)elem_bytes;
    t->src = src;
    t->step = (uint16_t)step;
    t->sel = (uint8_t)(ln->kv_parts << 2);
    if (t->kind == TASK_SEND) t->bytes = size_kv_bytes(g->c, tok, elem_bytes);
}

typedef struct xfer {
    stream_kind stream;
    task_op op;
    int to, from; /* peer ranks */
    int send_slot, recv_slot;
    int send_src, recv_src; /* KV origins of what moves */
    int step;
    bool zero; /* dKV accumulator without contribution yet */
} xfer;

/* One ring step's send and recv, issued as one group. */
static void ring_xfer(builder *b, const geo *g, const lane *ln, const xfer *x)
{
    bool dkv = x->op == OP_DKV;
    int elem = dkv ? 4 : g->c->act_bytes;
    task_phase ph = dkv ? PHASE_BWD : g->phase;
    uint32_t id = bt_begin(b, TASK_SEND, x->stream, x->op, ph, g->layer);
    dag_task *t = bt_task(b, id);
    t->peer = x->to;
    set_xfer(g, ln, t, elem, x->send_src, x->step);
    if (x->zero) {
        t->flags |= DAG_F_ZERO;
        t->buf = DAG_NO_SLOT;
    } else {
        t->buf = slot_id(ln, x->send_slot);
        bt_reads(b, dkv ? dkv_buf(ln, x->send_slot) : kv_buf(g, ln, x->send_slot));
    }
    bt_end(b);
    id = bt_begin(b, TASK_RECV, x->stream, x->op, ph, g->layer);
    t = bt_task(b, id);
    t->peer = x->from;
    t->flags |= DAG_F_GROUPED;
    set_xfer(g, ln, t, elem, x->recv_src, x->step);
    t->buf = slot_id(ln, x->recv_slot);
    bt_writes(b, dkv ? dkv_buf(ln, x->recv_slot) : kv_buf(g, ln, x->recv_slot));
    bt_end(b);
}

/* dst += src on the compute stream (fp32 dK/dV). */
static void dkv_acc(builder *b, const geo *g, const lane *ln, int dst, int src, int kvsrc, int step)
{
    uint32_t id = bt_begin(b, TASK_ACC, STREAM_COMP, OP_DKV_ACC, PHASE_BWD, g->layer);
    dag_task *t = bt_task(b, id);
    set_xfer(g, ln, t, 4, kvsrc, step);
    t->flops = size_kv_elems(g->c, lane_tokens(g, ln));
    t->buf = slot_id(ln, dst);
    t->buf2 = slot_id(ln, src);
    bt_reads(b, dkv_buf(ln, src));
    bt_writes(b, dkv_buf(ln, dst));
    bt_end(b);
}

/* The outer KV transfer of window o, if there is a next window. */
static void outer_kv(builder *b, const geo *g, const lane *ln, int o, int entering)
{
    if (o >= g->nw - 1) return;
    xfer x = {ln->kv_out,      OP_KV,           next_rank(g, true),  prev_rank(g, true), entering,
              KV_OUT0 + o % 2, src_at(g, o, 0), src_at(g, o + 1, 0), o * g->w,           false};
    ring_xfer(b, g, ln, &x);
}

/* The inner KV transfer of step (o, i); returns the slot received into. */
static int inner_kv(builder *b, const geo *g, const lane *ln, int o, int i, int cur)
{
    int nxt = KV_IN0 + i % 2;
    xfer x = {ln->kv_in, OP_KV,           next_rank(g, false), prev_rank(g, false), cur,
              nxt,       src_at(g, o, i), src_at(g, o, i + 1), o * g->w + i,        false};
    ring_xfer(b, g, ln, &x);
    return nxt;
}

void ring_attention_fwd(builder *b, int layer, task_phase phase)
{
    geo g;
    geo_init(&g, b, layer, phase);
    int entering[2] = {KV_OWN, KV_OWN}, cur[2], nxt[2];
    for (int o = 0; o < g.nw; o++) {
        for (int k = 0; k < g.nlanes; k++)
            outer_kv(b, &g, &g.lanes[k], o, entering[k]);
        for (int k = 0; k < g.nlanes; k++)
            cur[k] = entering[k];
        for (int i = 0; i < g.w; i++) {
            for (int k = 0; k < g.nlanes; k++)
                nxt[k] = i < g.w - 1 ? inner_kv(b, &g, &g.lanes[k], o, i, cur[k]) : -1;
            for (int k = 0; k < g.nlanes; k++)
                attn_fwd_block(b, &g, &g.lanes[k], cur[k], src_at(&g, o, i), o * g.w + i);
            for (int k = 0; k < g.nlanes; k++)
                cur[k] = nxt[k];
        }
        for (int k = 0; k < g.nlanes; k++)
            entering[k] = KV_OUT0 + o % 2;
    }
}

typedef struct acc {
    int slot;
    bool zero;
} acc;

/* Inner dKV chain at step (o, i): fold the block into the accumulator that
 * arrived from the previous rank and pass it on. */
static void inner_dkv(builder *b, geo *g, const lane *ln, int o, int i, int blk)
{
    if (g->w == 1) return;
    acc a = {blk, blk < 0};
    if (i > 0) {
        int din = DKV_IN0 + (i - 1) % 2;
        if (blk >= 0) dkv_acc(b, g, ln, din, blk, src_at(g, o, i), o * g->w + i);
        a = (acc){din, false};
    }
    int last = g->nw > 1 ? DKV_WIN0 + o % 2 : DKV_FINAL;
    xfer x = {ln->dkv_in,
              OP_DKV,
              next_rank(g, false),
              prev_rank(g, false),
              a.slot,
              i == g->w - 1 ? last : DKV_IN0 + i % 2,
              src_at(g, o, i),
              src_at(g, o, i + 1),
              o * g->w + i,
              a.zero};
    ring_xfer(b, g, ln, &x);
}

/* Outer dKV chain after window o: add the window's partial to the sum that
 * arrived from the previous window and pass it on (the last hop reaches the
 * owner). */
static void outer_dkv(builder *b, geo *g, const lane *ln, int o, acc wpart)
{
    if (g->nw == 1) return;
    acc a = wpart;
    if (o > 0) {
        int oin = DKV_OIN0 + (o - 1) % 2;
        if (!wpart.zero) dkv_acc(b, g, ln, oin, wpart.slot, src_at(g, o, 0), o * g->w);
        a = (acc){oin, false};
    }
    xfer x = {ln->dkv_out,
              OP_DKV,
              next_rank(g, true),
              prev_rank(g, true),
              a.slot,
              o == g->nw - 1 ? DKV_FINAL : DKV_OIN0 + o % 2,
              src_at(g, o, 0),
              src_at(g, o + 1, 0),
              o * g->w,
              a.zero};
    ring_xfer(b, g, ln, &x);
}

void ring_attention_bwd(builder *b, int layer)
{
    geo g;
    geo_init(&g, b, layer, PHASE_BWD);
    int entering[2] = {KV_OWN, KV_OWN}, cur[2], nxt[2];
    for (int o = 0; o < g.nw; o++) {
        for (int k = 0; k < g.nlanes; k++)
            outer_kv(b, &g, &g.lanes[k], o, entering[k]);
        for (int k = 0; k < g.nlanes; k++)
            cur[k] = entering[k];
        acc wpart[2];
        for (int i = 0; i < g.w; i++) {
            for (int k = 0; k < g.nlanes; k++)
                nxt[k] = i < g.w - 1 ? inner_kv(b, &g, &g.lanes[k], o, i, cur[k]) : -1;
            for (int k = 0; k < g.nlanes; k++) {
                const lane *ln = &g.lanes[k];
                int blk = attn_bwd_block(b, &g, ln, cur[k], src_at(&g, o, i), o * g.w + i);
                inner_dkv(b, &g, ln, o, i, blk);
                if (g.w == 1) wpart[k] = (acc){blk, blk < 0};
            }
            for (int k = 0; k < g.nlanes; k++)
                cur[k] = nxt[k];
        }
        for (int k = 0; k < g.nlanes; k++) {
            if (g.w > 1) wpart[k] = (acc){DKV_WIN0 + o % 2, false};
            outer_dkv(b, &g, &g.lanes[k], o, wpart[k]);
            entering[k] = KV_OUT0 + o % 2;
        }
    }
}

/* exec_data: one rank's buffers and its seeded inputs. See exec_state.h. */
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ringgeo.h"
#include "core/shard.h"
#include "exec_state.h"

static float *dalloc(xr *x, size_t n, bool *ok)
{
    if (!n) return NULL;
    float *p = x->ops->alloc(x->dev, n * sizeof(float));
    if (!p) *ok = false;
    return p;
}

/* Two RMSNorms per block and the final one, hidden each. */
static size_t norm_grad_count(const xr *x) { return (2 * (size_t)x->c->model.layers + 1) * (size_t)x->c->model.hidden; }

static void geometry(xr *x)
{
    const config *c = x->c;
    const model *m = &c->model;
    x->P = config_ranks(c);
    config_coords(c, x->rank, &x->h, &x->s);
    x->tp = c->tp;
    x->t = config_tp_rank(c, x->rank);
    x->sp = config_sp(c);
    x->T = (int)(c->seq / (uint64_t)config_cp(c));
    x->N = (int)(c->seq / (uint64_t)c->p_seq);
    x->ctok = (int)config_chunk_tokens(c);
    x->H = config_tp_heads(c);
    x->Hkv = config_tp_kv_heads(c);
    x->ffn = (int)config_tp_ffn(c);
    x->vocab = (int)config_tp_vocab(c);
    x->Hkv_eff = config_kv_heads_total(c);
    x->hq = config_q_heads(c);
    x->kvh = config_kv_heads(c);
    x->d = model_mla(m) ? m->qk_nope + m->qk_rope : m->head_dim;
    x->dv = model_v_dim(m);
    x->R = config_kv_repl(c);
    x->lanes = ringgeo_lanes(c);
    x->lane_tok = (int)ringgeo_lane_tokens(c, 0);
    x->lane_parts[0] = (int)ringgeo_lane_parts(c, 0);
    x->lane_parts[1] = (int)ringgeo_lane_parts(c, 1);
    x->L = c->scope == SCOPE_STEP ? m->layers : 1;
    x->mbs = c->micro_batches;
}

void xr_select_mb(xr *x, int mb)
{
    size_t T = (size_t)x->T, k = (size_t)mb;
    x->ly = x->ly_all + k * ((size_t)x->L + 1);
    x->row0 = (int64_t)mb * (int64_t)x->c->seq;
    if (!x->r_lm_all) return; /* attention scopes */
    x->r_lm = x->r_lm_all + k * T * (size_t)x->vocab;
    x->logits = x->logits_all + k * T * (size_t)x->vocab;
    x->loss = x->loss_all + k * T * 3;
    if (x->embed_all) x->embed_part = x->embed_all + k * T * (size_t)x->c->model.hidden;
}

int64_t xr_pos(const xr *x, int s, int part, int i)
{
    return (int64_t)shard_pos(shard_map_of(x->c), s, part, (uint64_t)i);
}

int64_t xr_seq_pos_of(const xr *x, int rank, int i)
{
    int h, s;
    config_coords(x->c, rank, &h, &s);
    int idx = h * x->T + i;
    return xr_pos(x, s, idx / x->ctok, idx % x->ctok);
}

int64_t xr_seq_pos(const xr *x, int i)
{
    int idx = x->h * x->T + i;
    return xr_pos(x, x->s, idx / x->ctok, idx % x->ctok);
}

static void positions(xr *x)
{
    for (int r = 0; r < x->N; r++) {
        x->qpos[r] = xr_pos(x, x->s, r / x->ctok, r % x->ctok);
        if (x->qstart) x->qstart[r] = (int64_t)docs_window_start(x->c->docs, x->c->seq, (uint64_t)x->qpos[r]);
    }
    for (int s = 0; s < x->c->p_seq; s++)
        for (int k = 0; k < x->lanes; k++) {
            int64_t *kp = x->kpos + ((size_t)s * (size_t)x->lanes + (size_t)k) * (size_t)x->lane_tok;
            int row = 0;
            for (int p = 0; p < 2; p++)
                if (x->lane_parts[k] >> p & 1)
                    for (int i = 0; i < x->ctok; i++)
                        kp[row++] = xr_pos(x, s, p, i);
        }
}

/* Floats of one lane's KV slot: [K (lane_tok, kvh, d) | V (lane_tok, kvh, dv)]. */
static size_t slot_size(const xr *x) { return (size_t)x->lane_tok * (xr_kd(x) + xr_vd(x)); }

static void alloc_layer(xr *x, layer_t *l, bool *ok)
{
    size_t T = (size_t)x->T, N = (size_t)x->N, d = (size_t)x->d;
    size_t w3 = xr_qkv_width(x), hd = (size_t)x->H * (size_t)x->dv, slot = slot_size(x);
    l->qkv_s = dalloc(x, T * w3, ok);
    l->o_s = dalloc(x, T * hd, ok);
    l->do_s = dalloc(x, T * hd, ok);
    l->dqkv_s = dalloc(x, T * w3, ok);
    if (x->R > 1) l->dkv_eff = dalloc(x, T * 2 * (size_t)x->Hkv_eff * d, ok);
    size_t hqd = N * (size_t)x->hq * d, hqv = N * (size_t)x->hq * (size_t)x->dv;
    l->q_h = dalloc(x, hqd, ok);
    l->o_h = dalloc(x, hqv, ok);
    l->do_h = dalloc(x, hqv, ok);
    l->dq_h = dalloc(x, hqd, ok);
    l->lse = dalloc(x, N * (size_t)x->hq, ok);
    for (int k = 0; k < x->lanes; k++)
        l->kv_own[k] = dalloc(x, slot, ok);
}

/* tp > 1: the TP side of block l (or, l = L, of the LM head: its gathered
 * input and partial input gradient). */
static void alloc_tp_layer(xr *x, layer_t *l, bool head, bool *ok)
{
    if (x->tp == 1) return;
    size_t n = (size_t)x->T * (size_t)x->c->model.hidden;
    l->xg = dalloc(x, n, ok);
    l->dxp = dalloc(x, n, ok);
    if (head) return;
    float **more[] = {&l->hg, &l->hp, &l->yp, &l->dyg, &l->dhg, &l->dhp};
    for (size_t k = 0; k < sizeof more / sizeof more[0]; k++)
        *more[k] = dalloc(x, n, ok);
}

static void alloc_step_layer(xr *x, layer_t *l, bool *ok)
{
    size_t T = (size_t)x->T, hid = (size_t)x->c->model.hidden, ffn = (size_t)l->ffn;
    l->h = dalloc(x, T * hid, ok);
    l->dh = dalloc(x, T * hid, ok);
    l->g = dalloc(x, T * ffn, ok);
    l->u = dalloc(x, T * ffn, ok);
    l->m = dalloc(x, T * ffn, ok);
    l->dg = dalloc(x, T * ffn, ok);
    l->du = dalloc(x, T * ffn, ok);
    l->dm = dalloc(x, T * ffn, ok);
}

/* Floats of a block's QKV projection (MLA's four, at tp = 1). */
static size_t qkv_floats(const xr *x, int H, int Hkv)
{
    if (model_mla(&x->c->model)) return xr_mla_floats(x);
    return (size_t)x->c->model.hidden * (size_t)(H + 2 * Hkv) * (size_t)x->d;
}

size_t xr_block_floats(const xr *x, int l, int H, int Hkv, int ffn)
{
    const model *m = &x->c->model;
    size_t hid = (size_t)m->hidden, attn = qkv_floats(x, H, Hkv) + (size_t)H * (size_t)x->dv * hid;
    if (!model_block_moe(m, l)) return attn + 3 * hid * (size_t)ffn;
    return attn + hid * (size_t)m->experts + 3 * hid * (size_t)m->shared_ffn; /* tp = 1 */
}

size_t xr_expert_floats(const xr *x) { return 3 * (size_t)x->c->model.hidden * (size_t)x->c->model.expert_ffn; }

size_t xr_full_off(const xr *x, int l)
{
    const model *m = &x->c->model;
    size_t off = 0;
    for (int i = 0; i < l && i < x->L; i++)
        off += xr_block_floats(x, i, m->heads, m->kv_heads, m->ffn);
    return off + (l > x->L ? (size_t)m->hidden * (size_t)m->vocab : 0);
}

/* Block l's weights from w on (its dense part; a mixture of experts' also
 * its router and shared experts), in the order of xr_block_floats. */
static void point_block(const xr *x, layer_w *w, int l, float *p)
{
    size_t hid = (size_t)x->c->model.hidden, f = (size_t)x->ly[l].ffn;
    w->qkv = p;
    w->o = w->qkv + qkv_floats(x, x->H, x->Hkv);
    float *mlp = w->o + (size_t)x->H * (size_t)x->dv * hid;
    if (model_block_moe(&x->c->model, l)) {
        w->router = mlp;
        mlp += hid * (size_t)x->c->model.experts;
    }
    w->g = f ? mlp : NULL;
    w->u = f ? w->g + hid * f : NULL;
    w->dn = f ? w->u + hid * f : NULL;
}

/* Every expert block's local experts, one after another, in one buffer
 * padded like wbuf. */
static void alloc_experts(xr *x, bool *ok)
{
    size_t each = (size_t)config_ep_local_experts(x->c) * xr_expert_floats(x), P = (size_t)x->P;
    x->ecount = each * (size_t)model_moe_blocks_below(&x->c->model, x->L);
    x->epad = (x->ecount + P - 1) / P * P;
    x->ebuf = dalloc(x, x->epad, ok);
    x->egbuf = dalloc(x, x->epad, ok);
    for (int l = x->c->model.dense_layers, i = 0; *ok && l < x->L; l++) {
        if (!model_block_moe(&x->c->model, l)) continue;
        x->ly[l].w.experts = x->ebuf + (size_t)i * each;
        x->ly[l].gw.experts = x->egbuf + (size_t)i++ * each;
    }
}

/* Weights of every layer then the LM head, in one buffer padded to a
 * multiple of P so reduce-scatter and all-gather split it evenly. */
static void alloc_weights(xr *x, bool *ok)
{
    const model *m = &x->c->model;
    size_t hid = (size_t)m->hidden, P = (size_t)x->P, total = 0;
    x->boff = malloc(((size_t)x->L + 1) * sizeof *x->boff);
    if (!x->boff) {
        *ok = false;
        return;
    }
    for (int l = 0; l < x->L; l++) {
        x->boff[l] = total;
        total += xr_block_floats(x, l, x->H, x->Hkv, x->ffn);
    }
    x->boff[x->L] = total;
    total += hid * (size_t)x->vocab;
    x->wfull = xr_full_off(x, x->L + 1) +
               (config_moe(x->c) ? x->ecount / (size_t)config_ep_local_experts(x->c) * (size_t)m->experts : 0);
    x->wcount = total;
    x->wpad = (total + P - 1) / P * P;
    x->wbuf = dalloc(x, x->wpad, ok);
    x->gbuf = dalloc(x, x->wpad, ok);
    if (!*ok) return;
    for (int l = 0; l < x->L; l++) {
        point_block(x, &x->ly[l].w, l, x->wbuf + x->boff[l]);
        point_block(x, &x->ly[l].gw, l, x->gbuf + x->boff[l]);
    }
    x->lm_w = x->wbuf + x->boff[x->L];
    x->lm_gw = x->gbuf + x->boff[x->L];
    size_t mbs = (size_t)x->mbs;
    x->r_lm_all = dalloc(x, mbs * (size_t)x->T * (size_t)x->vocab, ok);
    x->logits_all = dalloc(x, mbs * (size_t)x->T * (size_t)x->vocab, ok);
    x->loss_all = dalloc(x, mbs * (size_t)x->T * 3, ok);
    if (x->tp > 1) x->embed_all = dalloc(x, mbs * (size_t)x->T * hid, ok);
    for (int k = 1; *ok && k < x->mbs; k++) /* one set of weights: every micro-batch's views of it */
        for (int l = 0; l < x->L; l++) {
            x->ly_all[(size_t)k * ((size_t)x->L + 1) + (size_t)l].w = x->ly[l].w;
            x->ly_all[(size_t)k * ((size_t)x->L + 1) + (size_t)l].gw = x->ly[l].gw;
        }
    if (x->sp) x->norm_grad = dalloc(x, norm_grad_count(x), ok);
    if (x->c->tp_overlap) x->tp_recv = dalloc(x, (size_t)x->T / (size_t)x->tp * hid, ok);
    if (config_tp_kv_repl(x->c) > 1) x->kv_grad = dalloc(x, hid * 2 * (size_t)x->Hkv * (size_t)x->d, ok);
}

int xr_alloc(xr *x, char err[LOONG_ERRLEN])
{
    geometry(x);
    bool ok = true;
    bool step = x->c->scope == SCOPE_STEP;
    x->ly_all = calloc((size_t)x->mbs * ((size_t)x->L + 1), sizeof *x->ly_all);
    x->ly = x->ly_all;
    x->qpos = malloc((size_t)x->N * sizeof *x->qpos);
    if (x->c->docs && !(x->qstart = malloc((size_t)x->N * sizeof *x->qstart))) ok = false;
    x->kpos = malloc((size_t)x->c->p_seq * (size_t)x->lanes * (size_t)x->lane_tok * sizeof *x->kpos);
    if (!x->ly || !x->qpos || !x->kpos) ok = false;
    for (int k = 0; ok && k < x->mbs; k++)
        for (int l = 0; ok && l < x->L; l++)
            alloc_layer(x, &x->ly_all[(size_t)k * ((size_t)x->L + 1) + (size_t)l], &ok);
    size_t slot = slot_size(x);
    for (int k = 0; ok && k < x->lanes; k++) {
        for (int i = KV_IN0; i < KV_SLOTS; i++)
            x->kv_slot[k][i] = dalloc(x, slot, &ok);
        for (int i = 0; i < DKV_SLOTS; i++)
            x->dkv_slot[k][i] = dalloc(x, slot, &ok);
    }
    for (int k = 0; ok && x->c->ring == RING_ALLGATHER && k < 2; k++) {
        x->ag_kv[k] = dalloc(x, slot * (size_t)x->c->p_seq, &ok);
        x->ag_dkv[k] = dalloc(x, slot * (size_t)x->c->p_seq, &ok);
    }
    x->ob = dalloc(x, (size_t)x->N * (size_t)x->hq * (size_t)x->dv, &ok);
    x->lseb = dalloc(x, (size_t)x->N * (size_t)x->hq, &ok);
    x->zeros = dalloc(x, slot, &ok);
    size_t a2a = (size_t)x->T * ((size_t)(x->H + x->Hkv_eff) * (size_t)x->d + (size_t)x->Hkv_eff * (size_t)x->dv);
    x->a2a_send = dalloc(x, a2a, &ok);
    x->a2a_recv = dalloc(x, a2a, &ok);
    if (step && ok) {
        size_t hid = (size_t)x->c->model.hidden;
        for (int k = 0; ok && k < x->mbs; k++)
            for (int l = 0; ok && l <= x->L; l++) {
                layer_t *y = &x->ly_all[(size_t)k * ((size_t)x->L + 1) + (size_t)l];
                y->ffn = !model_block_moe(&x->c->model, l) ? x->ffn : (int)config_ep_shared_ffn(x->c);
                y->x = dalloc(x, (size_t)x->T * hid, &ok);
                y->dx = dalloc(x, (size_t)x->T * hid, &ok);
                if (l < x->L) alloc_step_layer(x, y, &ok);
                if (l < x->L && model_mla(&x->c->model)) xr_mla_alloc(x, y, &ok);
                alloc_tp_layer(x, y, l == x->L, &ok);
            }
        if (ok && config_moe(x->c)) {
            if (xr_ep_alloc(x, err) < 0) return -1;
            alloc_experts(x, &ok);
        }
        if (ok) alloc_weights(x, &ok);
        if (ok) xr_select_mb(x, 0);
    }
    if (!ok) {
        snprintf(err, LOONG_ERRLEN,
                 "rank %d: out of device memory for the executor's buffers: use a smaller --seq or model", x->rank);
        return -1;
    }
    positions(x);
    return 0;
}

void xr_free(xr *x)
{
    /* the device releases everything it allocated when it closes; host-side
     * arrays are ours */
    xr_ep_free(x);
    for (size_t i = 0; x->ly_all && i < (size_t)x->mbs * ((size_t)x->L + 1); i++)
        xr_mla_free(&x->ly_all[i]);
    free(x->boff);
    free(x->ly_all);
    free(x->qpos);
    free(x->qstart);
    free(x->kpos);
}

/* ---- inputs ---- */

void xr_gen_row(uint64_t seed, int tensor, int64_t row, float *out, int n, float scale)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_taus2);
    uint64_t h = seed * 0x9E3779B97F4A7C15ull ^ ((uint64_t)tensor << 56) ^ (uint64_t)row * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    gsl_rng_set(r, (unsigned long)(h ? h : 1));
    for (int i = 0; i < n; i++)
        out[i] = (float)((2.0 * gsl_rng_uniform(r) - 1.0) * scale);
    gsl_rng_free(r);
}

/* Fill rows of a host staging buffer and copy it to the device. */
static int gen_rows(xr *x, float *dst, int tensor, int rows, int width, int64_t (*pos)(const xr *, int), float scale)
{
    float *host = malloc((size_t)rows * (size_t)width * sizeof *host);
    if (!host) return -1;
    for (int i = 0; i < rows; i++)
        xr_gen_row(x->o->seed, tensor, x->row0 + (pos ? pos(x, i) : i), host + (size_t)i * (size_t)width, width,
                   scale); /* row0: the micro-batch's sample */
    int rc = x->ops->put(x->dev, dst, host, (size_t)rows * (size_t)width);
    free(host);
    return rc;
}

/* Q, K, V of this rank's tokens in the GEMM layout [Q | K | V], of its TP
 * shard's heads (t * H/tp.. and config_tp_kv_head0(t).. of the model's rows). */
static int gen_qkv(xr *x, float *qkv)
{
    const model *m = &x->c->model;
    int d = x->d, wq = x->H * d, wk = x->Hkv * d, wv = x->Hkv * x->dv, w3 = wq + wk + wv, fq = m->heads * d;
    int fk = m->kv_heads * d, fv = m->kv_heads * x->dv; /* V: dv wide under MLA (tp 1) */
    size_t k0 = (size_t)config_tp_kv_head0(x->c, x->t) * (size_t)d;
    float *host = malloc((size_t)x->T * (size_t)w3 * sizeof *host),
          *full = malloc((size_t)(fq > fv ? fq : fv) * sizeof *full);
    int rc = -1;
    for (int i = 0; host && full && i < x->T; i++) {
        float *row = host + (size_t)i * (size_t)w3;
        int64_t p = xr_seq_pos(x, i);
        xr_gen_row(x->o->seed, GEN_Q, p, full, fq, 1.0f);
        memcpy(row, full + (size_t)x->t * (size_t)wq, (size_t)wq * sizeof *row);
        xr_gen_row(x->o->seed, GEN_K, p, full, fk, 1.0f);
        memcpy(row + wq, full + k0, (size_t)wk * sizeof *row);
        xr_gen_row(x->o->seed, GEN_V, p, full, fv, 1.0f);
        memcpy(row + wq + wk, full + (fv == fk ? k0 : 0), (size_t)wv * sizeof *row);
    }
    if (host && full) rc = x->ops->put(x->dev, qkv, host, (size_t)x->T * (size_t)w3);
    free(host);
    free(full);
    return rc;
}

/* dO of this rank's tokens, of its TP shard's query heads. */
static int gen_do(xr *x, float *dst)
{
    int w = x->H * x->dv, fw = x->c->model.heads * x->dv;
    float *host = malloc((size_t)x->T * (size_t)w * sizeof *host), *full = malloc((size_t)fw * sizeof *full);
    int rc = -1;
    for (int i = 0; host && full && i < x->T; i++) {
        xr_gen_row(x->o->seed, GEN_DO, xr_seq_pos(x, i), full, fw, 1.0f);
        memcpy(host + (size_t)i * (size_t)w, full + (size_t)x->t * (size_t)w, (size_t)w * sizeof *host);
    }
    if (host && full) rc = x->ops->put(x->dev, dst, host, (size_t)x->T * (size_t)w);
    free(host);
    free(full);
    return rc;
}

/* Columns [c0, c0 + n) of a (rows, full_ld) matrix <-> a (rows, shard_ld)
 * one at column s0; to_shard: full -> shard. */
static void cols(float *full, size_t full_ld, size_t c0, float *shard, size_t shard_ld, size_t s0, size_t rows,
                 size_t n, bool to_shard)
{
    for (size_t r = 0; r < rows; r++) {
        float *f = full + r * full_ld + c0, *h = shard + r * shard_ld + s0;
        memcpy(to_shard ? h : f, to_shard ? f : h, n * sizeof *f);
    }
}

void xr_tp_shard(const xr *x, int t, float *full, float *shard, bool to_shard)
{
    const model *m = &x->c->model;
    size_t hid = (size_t)m->hidden, d = (size_t)x->d, tp = (size_t)x->tp, tt = (size_t)t;
    /* K and V: the shard's KV heads from config_tp_kv_head0 (tp > H_kv: the one it replicates) */
    size_t fq = (size_t)m->heads * d, fk = (size_t)m->kv_heads * d, sq = fq / tp, sk = (size_t)x->Hkv * d;
    size_t k0 = (size_t)config_tp_kv_head0(x->c, t) * d;
    size_t fw3 = fq + 2 * fk, sw3 = sq + 2 * sk, fffn = (size_t)m->ffn, sffn = (size_t)x->ffn;
    for (int l = 0; l < x->L; l++) {
        /* QKV (hid, (H+2Hkv)d): t's Q heads, then its K and V heads */
        cols(full, fw3, tt * sq, shard, sw3, 0, hid, sq, to_shard);
        cols(full, fw3, fq + k0, shard, sw3, sq, hid, sk, to_shard);
        cols(full, fw3, fq + fk + k0, shard, sw3, sq + sk, hid, sk, to_shard);
        full += hid * fw3;
        shard += hid * sw3;
        /* output projection (Hd, hid): t's rows */
        cols(full + tt * sq * hid, hid, 0, shard, hid, 0, sq, hid, to_shard);
        full += fq * hid;
        shard += sq * hid;
        /* gate and up (hid, ffn): t's columns; down (ffn, hid): t's rows */
        for (int k = 0; k < 2; k++) {
            cols(full, fffn, tt * sffn, shard, sffn, 0, hid, sffn, to_shard);
            full += hid * fffn;
            shard += hid * sffn;
        }
        cols(full + tt * sffn * hid, hid, 0, shard, hid, 0, sffn, hid, to_shard);
        full += fffn * hid;
        shard += sffn * hid;
    }
    /* LM head (hid, V): t's ceil(V/tp) columns, those past V zero */
    size_t V = (size_t)m->vocab, sv = (size_t)x->vocab, v0 = tt * sv, n = v0 >= V ? 0 : V - v0 < sv ? V - v0 : sv;
    cols(full, V, v0, shard, sv, 0, hid, n, to_shard);
    if (to_shard && n < sv)
        for (size_t r = 0; r < hid; r++)
            memset(shard + r * sv + n, 0, (sv - n) * sizeof *shard);
}

/* The loss weights R (T, vocab shard): t's columns of each row, the
 * vocabulary padding zero. */
static int gen_loss_weights(xr *x)
{
    const model *m = &x->c->model;
    size_t V = (size_t)m->vocab, sv = (size_t)x->vocab, v0 = (size_t)x->t * sv, T = (size_t)x->T;
    size_t n = v0 >= V ? 0 : V - v0 < sv ? V - v0 : sv;
    float *row = malloc(V * sizeof *row), *host = calloc(T * sv, sizeof *host);
    int rc = -1;
    if (row && host) {
        for (size_t i = 0; i < T; i++) {
            xr_gen_row(x->o->seed, GEN_R, x->row0 + xr_seq_pos(x, (int)i), row, (int)V, 1.0f / (float)V);
            memcpy(host + i * sv, row + v0, n * sizeof *row);
        }
        rc = x->ops->put(x->dev, x->r_lm, host, T * sv);
    }
    free(row);
    free(host);
    return rc;
}

/* tp > 1: the vocab-parallel embedding's partial rows, this rank's
 * lookups (the rows of its vocabulary shard, xr_embed_owner) and zeros;
 * the TP group's partials sum to x_0 exactly. */
static int gen_embed_part(xr *x)
{
    size_t hid = (size_t)x->c->model.hidden, T = (size_t)x->T;
    float *host = calloc(T * hid, sizeof *host);
    if (!host) return -1;
    for (int i = 0; i < x->T; i++)
        if (xr_embed_owner(x, i) == x->t)
            xr_gen_row(x->o->seed, GEN_X, x->row0 + xr_seq_pos(x, i), host + (size_t)i * hid, (int)hid, 1.0f);
    int rc = x->ops->put(x->dev, x->embed_part, host, T * hid);
    free(host);
    return rc;
}

/* Every expert block's local experts (EP rank i's: [i E/ep, (i+1) E/ep))
 * out of the whole model's weights into ebuf. */
static int put_local_experts(xr *x, const float *full)
{
    int local = config_ep_local_experts(x->c), first = config_ep_rank(x->c, x->rank) * local;
    size_t each = (size_t)local * xr_expert_floats(x), E = (size_t)x->c->model.experts;
    int rc = 0;
    const float *experts = full + xr_full_off(x, x->L + 1);
    for (int l = x->c->model.dense_layers, i = 0; rc == 0 && l < x->L; l++)
        if (model_block_moe(&x->c->model, l))
            rc = (int)x->ops->put(x->dev, x->ly[l].w.experts,
                                  experts + ((size_t)i++ * E + (size_t)first) * xr_expert_floats(x), each);
    return rc;
}

/* The weights: the whole model's, row-wise from one stream of rows scaled
 * by 1/sqrt(fan-in), then this rank's TP shard of them. */
void xr_gen_weights(const xr *x, float *full)
{
    size_t hid = (size_t)x->c->model.hidden;
    float scale = 1.0f / sqrtf((float)hid);
    for (size_t r = 0; r * hid < x->wfull; r++) /* the last row may be partial (MLA's widths) */
        xr_gen_row(x->o->seed, GEN_W, (int64_t)r, full + r * hid,
                   (int)(x->wfull - r * hid < hid ? x->wfull - r * hid : hid), scale);
}

static int gen_weights(xr *x)
{
    float *full = malloc(x->wfull * sizeof *full), *shard = x->tp > 1 ? malloc(x->wcount * sizeof *shard) : full;
    int rc = -1;
    if (full && shard) {
        xr_gen_weights(x, full);
        if (x->tp > 1) xr_tp_shard(x, x->t, full, shard, true);
        rc = x->ops->put(x->dev, x->wbuf, shard, x->wcount);
        if (rc == 0 && x->ebuf) rc = put_local_experts(x, full);
    }
    if (shard != full) free(shard);
    free(full);
    return rc;
}

/* Zeros for the norm gradients (xr.norm_grad). */
static int zero_norm_grads(xr *x)
{
    if (!x->norm_grad) return 0;
    size_t n = norm_grad_count(x);
    float *z = calloc(n, sizeof *z);
    int rc = z ? (int)x->ops->put(x->dev, x->norm_grad, z, n) : -1;
    free(z);
    return rc;
}

int xr_inputs(xr *x)
{
    if (x->c->scope != SCOPE_STEP) {
        if (gen_qkv(x, x->ly[0].qkv_s) < 0) return -1;
        return gen_do(x, x->ly[0].do_s);
    }
    const model *m = &x->c->model;
    /* micro-batch k is sample k: its input rows from k * S on; tp > 1: x_0
     * is the embedding's reduction (a task) of the partial rows */
    for (int k = 0; k < x->mbs; k++) {
        xr_select_mb(x, k);
        if (x->tp > 1 ? gen_embed_part(x) < 0 : gen_rows(x, x->ly[0].x, GEN_X, x->T, m->hidden, xr_seq_pos, 1.0f) < 0)
            return -1;
        if (gen_loss_weights(x) < 0) return -1;
    }
    xr_select_mb(x, 0);
    if (zero_norm_grads(x) != 0) return -1;
    return gen_weights(x);
}

/*
 * exec_check: --check and --dump. Rank 0 gathers the distributed results in
 * global token order and compares them with a single-rank float64
 * reference over the whole sequence, computed from the same seeded inputs:
 * attention O (and dQ, dK, dV for scope attn, KV-replica gradients summed
 * back), or, for scope step, every weight gradient after the reduction.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>

#include "core/hash.h"
#include "core/pipeline.h"
#include "core/xalloc.h"
#include "exec_ref.h"
#include "exec_state.h"
#include "npy.h"

/* fp32 kernels against float64: max|a-b| / max|b|. Attention sums at most S
 * terms per output with fp32 rounding 6e-8, well under 1e-5 for the test
 * sizes; the step chains 5 GEMMs and attention per layer through L layers,
 * each adding the same order of error; observed ~1e-6. */
#define TOL_FP32 1e-5
/* A device that computes in lower precision (the CUDA device's bf16 tensor
 * cores) sets exec_opts.tol (1e-2 there); x is the xr in scope. */
#define TOL_ATTN (x->o->tol > 0 ? x->o->tol : TOL_FP32)
#define TOL_STEP (x->o->tol > 0 ? x->o->tol : TOL_FP32)

/* ---- gathering ---- */

/* (T, width) sequence-sharded rows of every rank -> (S, tp, width) on
 * rank 0: TP rank t's rows (its shard's heads) at column t * width of the
 * token's row; tp = 1: (S, width). */
static float *gather_seq(xr *x, const float *dptr, int width)
{
    size_t T = (size_t)x->T, w = (size_t)width, S = (size_t)x->c->seq, P = (size_t)x->P, tp = (size_t)x->tp;
    float *mine = xmalloc(T * w * sizeof *mine, "the --check reference"), *all = NULL, *out = NULL;
    int64_t *pos = xmalloc(T * sizeof *pos, "the --check reference"), *allpos = NULL;
    x->ops->get(x->dev, mine, dptr, T * w);
    for (int i = 0; i < x->T; i++)
        pos[i] = xr_seq_pos(x, i);
    if (x->rank == 0) {
        all = xmalloc(P * T * w * sizeof *all, "the --check reference");
        allpos = xmalloc(P * T * sizeof *allpos, "the --check reference");
        out = xmalloc(S * tp * w * sizeof *out, "the --check reference");
    }
    x->w->gather(x->w, mine, T * w * sizeof *mine, all);
    x->w->gather(x->w, pos, T * sizeof *pos, allpos);
    if (x->rank == 0)
        for (size_t k = 0; k < P * T; k++) {
            size_t t = (size_t)config_tp_rank(x->c, (int)(k / T));
            memcpy(out + ((size_t)allpos[k] * tp + t) * w, all + k * w, w * sizeof *out);
        }
    free(mine);
    free(pos);
    free(all);
    free(allpos);
    return out;
}

/* Columns [c0, c0 + n) of every TP rank's block of a (rows, tp, ld)
 * matrix, as a new (rows, tp * n) array: a tensor of the whole model from
 * its TP shards' columns (tp = 1: those columns). */
static float *columns(const xr *x, const float *a, size_t rows, size_t ld, size_t c0, size_t n)
{
    size_t tp = (size_t)x->tp;
    float *o = xmalloc(rows * tp * n * sizeof *o, "the --check reference");
    for (size_t r = 0; r < rows * tp; r++)
        memcpy(o + r * n, a + r * ld + c0, n * sizeof *o);
    return o;
}

/* The model's K or V (rows, H_kv d) from columns [c0, c0 + Hkv d) of
 * every TP rank's block of a (rows, tp, ld) matrix: rank t's KV heads from
 * config_tp_kv_head0(t). The shards of a replicated head (tp > H_kv) hold
 * the same K and V, but each only the part of their gradient from its own
 * query heads: grad sums them. */
static float *kv_columns(const xr *x, const float *a, size_t rows, size_t ld, size_t c0, bool grad, size_t d)
{
    size_t tp = (size_t)x->tp, n = (size_t)x->Hkv * d, full = (size_t)x->c->model.kv_heads * d;
    float *o = xcalloc(rows * full, sizeof *o, "the --check reference");
    for (size_t r = 0; r < rows; r++)
        for (size_t t = 0; t < tp; t++) {
            float *dst = o + r * full + (size_t)config_tp_kv_head0(x->c, (int)t) * d;
            const float *src = a + (r * tp + t) * ld + c0;
            for (size_t i = 0; i < n; i++)
                dst[i] = grad ? dst[i] + src[i] : src[i];
        }
    return o;
}

static double rel_err(const float *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= num)) num = e; /* NaN propagates */
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return den > 0 ? num / den : num;
}

/* ---- references (rank 0) ---- */

/* The (S, width) rows of `tensor` of the sample whose first row is row0. */
static double *gen_sample(const xr *x, int tensor, int width, float scale, int64_t row0)
{
    size_t S = (size_t)x->c->seq;
    double *o = xmalloc(S * (size_t)width * sizeof *o, "the --check reference");
    float *row = xmalloc((size_t)width * sizeof *row, "the --check reference");
    for (size_t p = 0; p < S; p++) {
        xr_gen_row(x->o->seed, tensor, row0 + (int64_t)p, row, width, scale);
        for (int k = 0; k < width; k++)
            o[p * (size_t)width + (size_t)k] = row[k];
    }
    free(row);
    return o;
}

static double *gen_seq(const xr *x, int tensor, int width, float scale)
{
    return gen_sample(x, tensor, width, scale, 0);
}

/* Split (S, H d + Hkv (d + dv)) rows of the whole model into Q (S,H,d),
 * K (S,Hkv,d), V (S,Hkv,dv) and back (dv = d but under MLA). */
static void split_qkv(const xr *x, const double *qkv, double *q, double *k, double *v, bool join)
{
    const model *m = &x->c->model;
    size_t S = (size_t)x->c->seq, d = (size_t)x->d, wq = (size_t)m->heads * d, wk = (size_t)m->kv_heads * d;
    size_t wv = (size_t)m->kv_heads * (size_t)x->dv;
    for (size_t p = 0; p < S; p++) {
        double *row = (double *)qkv + p * (wq + wk + wv);
        double *parts[3] = {q + p * wq, k + p * wk, v + p * wv};
        size_t off[3] = {0, wq, wq + wk}, len[3] = {wq, wk, wv};
        for (int i = 0; i < 3; i++)
            memcpy(join ? row + off[i] : parts[i], join ? parts[i] : row + off[i], len[i] * sizeof(double));
    }
}

/* One block's activations that its backward reads (x: its input), and
 * its MLP's: the dense SwiGLU's or the mixture of experts'. */
typedef struct ref_layer {
    double *x, *qkv, *o, *h;
    ref_mla mla; /* MLA's latents (unused under GQA) */
    ref_mlp mlp;
    ref_moe *moe; /* NULL: dense */
} ref_layer;

/* One block's attention parameters (or their gradients) in the
 * executor's whole-model layout (xr_full_off): QKV (hid, w3), output
 * projection (hd, hid); then its MLP's: gate, up (hid, ffn) and down (ffn,
 * hid), or a mixture of experts' router and shared experts. */
typedef struct ref_block {
    double *qkv, *o, *mlp;
} ref_block;

/* The float64 reference of one sample's step: the model's shapes, its
 * weights and gradients, the forward's activations and the scratch both
 * passes share. ref_step_forward then ref_step_backward fill it, as llm.c
 * pairs each layer's forward with its backward. */
typedef struct ref_model {
    const xr *x;
    int S, hid, ffn, d, dvh, L, V, hd, w3, wk, wv; /* d: Q's and K's head dim; dvh, V's and O's; hd = H dvh */
    double *wts, *grad;                            /* the whole model's (wfull floats each) */
    ref_layer *ly;                                 /* L + 1: block l's activations; ly[L].x the LM head's input */
    double *R;                                     /* the loss weights (S, V) */
    int64_t *starts;                               /* the attention mask's document starts (NULL: one document) */
    double *q, *k, *v, *lse;                       /* attention's operands, per block */
    double *dx, *dh, *dO, *dqkv, *dq, *dk, *dv;    /* the backward's gradients */
} ref_model;

/* The document start of every position of the sequence, for the
 * reference's mask; NULL for one document. */
static int64_t *doc_starts(const xr *x)
{
    if (!x->c->docs) return NULL;
    int64_t *st = xmalloc((size_t)x->c->seq * sizeof *st, "the --check reference");
    for (uint64_t p = 0; st && p < x->c->seq; p++)
        st[p] = (int64_t)docs_window_start(x->c->docs, x->c->seq, p);
    return st;
}

/* Per token of logits z (S, V) and loss weights R: sum(z * R), sum(z),
 * sum(z^2) into stats (S, 3). */
static void ref_loss_stats(double *stats, const double *z, const double *R, size_t S, size_t V)
{
    for (size_t p = 0; p < S; p++) {
        double a = 0, b = 0, c = 0;
        for (size_t j = 0; j < V; j++) {
            double zj = z[p * V + j];
            a += zj * R[p * V + j];
            b += zj;
            c += zj * zj;
        }
        stats[3 * p] = a, stats[3 * p + 1] = b, stats[3 * p + 2] = c;
    }
}

/* Block l's parameters within a buffer of the whole model's (weights or
 * gradients). */
static ref_block ref_block_at(const ref_model *r, double *base, int l)
{
    ref_block b;
    b.qkv = base + xr_full_off(r->x, l);
    b.o = b.qkv + (model_mla(&r->x->c->model) ? xr_mla_floats(r->x) : (size_t)r->hid * (size_t)r->w3);
    b.mlp = b.o + (size_t)r->hd * (size_t)r->hid;
    return b;
}

/* Expert block l's E experts within a buffer of the whole model's. */
static double *ref_experts_at(const ref_model *r, double *base, int l)
{
    const model *m = &r->x->c->model;
    return base + xr_full_off(r->x, r->L + 1) +
           (size_t)model_moe_blocks_below(m, l) * (size_t)m->experts * xr_expert_floats(r->x);
}

static double *ref_alloc(size_t n) { return xmalloc(n * sizeof(double), "the --check reference"); }

/* Set r up for the sample whose inputs start at row row0: the weights
 * from the seed, the block input and loss weights of the sample, the
 * scratch; the gradients zeroed. */
static void ref_model_init(ref_model *r, const xr *x, int64_t row0)
{
    const model *m = &x->c->model;
    *r = (ref_model){.x = x,
                     .S = (int)x->c->seq,
                     .hid = m->hidden,
                     .ffn = m->ffn,
                     .d = x->d,
                     .dvh = x->dv,
                     .L = x->L,
                     .V = m->vocab};
    r->hd = m->heads * r->dvh, r->wk = m->kv_heads * r->d, r->wv = m->kv_heads * r->dvh;
    r->w3 = m->heads * r->d + r->wk + r->wv;
    size_t Sz = (size_t)r->S;
    r->wts = ref_alloc(x->wfull);
    r->grad = xcalloc(x->wfull, sizeof *r->grad, "the --check reference");
    float *w = xmalloc(x->wfull * sizeof *w, "the --check reference");
    xr_gen_weights(x, w);
    for (size_t i = 0; i < x->wfull; i++)
        r->wts[i] = w[i];
    free(w);
    r->ly = xcalloc((size_t)r->L + 1, sizeof *r->ly, "the --check reference");
    r->ly[0].x = gen_sample(x, GEN_X, r->hid, 1.0f, row0);
    r->R = gen_sample(x, GEN_R, r->V, 1.0f / (float)r->V, row0);
    r->q = ref_alloc(Sz * (size_t)m->heads * (size_t)r->d), r->k = ref_alloc(Sz * (size_t)r->wk);
    r->v = ref_alloc(Sz * (size_t)r->wv);
    r->lse = ref_alloc(Sz * (size_t)m->heads);
    r->starts = doc_starts(x);
}

static void ref_model_free(ref_model *r)
{
    for (ref_layer *y = r->ly; y <= r->ly + r->L; y++) {
        free(y->x), free(y->qkv), free(y->o), free(y->h), free(y->mlp.g), free(y->mlp.u), free(y->mlp.m);
        ref_mla_free(&y->mla);
        if (y->moe) ref_moe_free(y->moe);
        free(y->moe);
    }
    free(r->ly);
    free(r->R);
    free(r->q), free(r->k), free(r->v), free(r->lse), free(r->dx), free(r->dh);
    free(r->dO), free(r->dqkv), free(r->dq), free(r->dk), free(r->dv), free(r->wts), free(r->starts);
}

/* Block l's MLP forward from y->h into out (S, hid): out = h + MLP(h). */
static void ref_mlp_block_fwd(ref_model *r, int l, double *out)
{
    const xr *x = r->x;
    ref_layer *y = &r->ly[l];
    ref_block W = ref_block_at(r, r->wts, l), G = ref_block_at(r, r->grad, l);
    if (!model_block_moe(&x->c->model, l)) {
        memcpy(out, y->h, (size_t)r->S * (size_t)r->hid * sizeof(double));
        y->mlp = (ref_mlp){.S = r->S, .hid = r->hid, .f = r->ffn, .w = W.mlp, .gw = G.mlp};
        ref_mlp_fwd(&y->mlp, y->h, out);
        return;
    }
    y->moe = xmalloc(sizeof *y->moe, "the --check reference");
    ref_moe_init(y->moe, x->c, x->o->seed, l, r->S, W.mlp, G.mlp, ref_experts_at(r, r->wts, l),
                 ref_experts_at(r, r->grad, l));
    ref_moe_fwd(y->moe, y->h, out);
}

/* Block l forward: h = x + attn(x Wqkv) Wo; x' = h + MLP(h) into
 * ly[l + 1].x, keeping what the backward reads. */
static void ref_block_forward(ref_model *r, int l)
{
    const model *m = &r->x->c->model;
    int S = r->S, hid = r->hid, hd = r->hd, w3 = r->w3;
    size_t Sz = (size_t)S;
    ref_block W = ref_block_at(r, r->wts, l);
    ref_layer *y = &r->ly[l];
    y->qkv = ref_alloc(Sz * (size_t)w3), y->o = ref_alloc(Sz * (size_t)hd), y->h = ref_alloc(Sz * (size_t)hid);
    if (model_mla(m)) {
        y->mla = (ref_mla){.m = m, .S = S, .w = W.qkv, .gw = ref_block_at(r, r->grad, l).qkv};
        ref_mla_fwd(&y->mla, y->x, y->qkv);
    } else {
        ref_dgemm(0, 0, S, w3, hid, y->x, hid, W.qkv, w3, 0, y->qkv, w3);
    }
    split_qkv(r->x, y->qkv, r->q, r->k, r->v, false);
    attn_ref_fwd_v(y->o, r->lse, r->q, r->k, r->v, r->starts, S, m->heads, m->kv_heads, r->d, r->dvh);
    memcpy(y->h, y->x, Sz * (size_t)hid * sizeof(double));
    ref_dgemm(0, 0, S, hid, hd, y->o, hd, W.o, hid, 1, y->h, hid);
    ref_mlp_block_fwd(r, l, r->ly[l + 1].x = ref_alloc(Sz * (size_t)hid));
}

/* Block l backward: from dx, the gradient of its output, the gradients of
 * its parameters, and dx becomes the gradient of its input. */
static void ref_block_backward(ref_model *r, int l)
{
    const model *m = &r->x->c->model;
    int S = r->S, hid = r->hid, hd = r->hd, w3 = r->w3;
    size_t Sz = (size_t)S;
    ref_block W = ref_block_at(r, r->wts, l), G = ref_block_at(r, r->grad, l);
    const ref_layer *y = &r->ly[l];
    if (y->moe) {
        ref_moe_bwd(y->moe, y->h, r->dx, r->dh);
    } else {
        memcpy(r->dh, r->dx, Sz * (size_t)hid * sizeof *r->dh);
        ref_mlp_bwd(&y->mlp, y->h, r->dx, r->dh);
    }
    ref_dgemm(0, 1, S, hd, hid, r->dh, hid, W.o, hid, 0, r->dO, hd);
    ref_dgemm(1, 0, hd, hid, S, y->o, hd, r->dh, hid, 0, G.o, hid);
    split_qkv(r->x, y->qkv, r->q, r->k, r->v, false);
    attn_ref_bwd_v(r->dq, r->dk, r->dv, r->q, r->k, r->v, r->dO, r->starts, S, m->heads, m->kv_heads, r->d, r->dvh);
    split_qkv(r->x, r->dqkv, r->dq, r->dk, r->dv, true);
    memcpy(r->dx, r->dh, Sz * (size_t)hid * sizeof *r->dx);
    if (model_mla(m)) {
        ref_mla_bwd(&y->mla, y->x, r->dqkv, r->dx);
        return;
    }
    ref_dgemm(0, 1, S, hid, w3, r->dqkv, w3, W.qkv, w3, 1, r->dx, hid);
    ref_dgemm(1, 0, hid, w3, S, y->x, hid, r->dqkv, w3, 0, G.qkv, w3);
}

/* The LM head forward: logits z = x_L Wlm, their loss statistics (S, 3)
 * into a new *stats (the loss is sum(z * R)). */
static void ref_head_forward(ref_model *r, double **stats)
{
    int S = r->S, hid = r->hid, V = r->V;
    size_t Sz = (size_t)S;
    const double *Wlm = r->wts + xr_full_off(r->x, r->L);
    double *z = ref_alloc(Sz * (size_t)V);
    *stats = xmalloc(Sz * 3 * sizeof **stats, "the --check reference");
    ref_dgemm(0, 0, S, V, hid, r->ly[r->L].x, hid, Wlm, V, 0, z, V);
    ref_loss_stats(*stats, z, r->R, Sz, (size_t)V);
    free(z);
}

/* The LM head backward: dL/dz = R, so dx = R Wlm^T and dWlm = x_L^T R. */
static void ref_head_backward(ref_model *r)
{
    int S = r->S, hid = r->hid, V = r->V;
    const double *Wlm = r->wts + xr_full_off(r->x, r->L);
    double *gWlm = r->grad + xr_full_off(r->x, r->L);
    ref_dgemm(0, 1, S, hid, V, r->R, V, Wlm, V, 0, r->dx, hid);
    ref_dgemm(1, 0, hid, V, S, r->ly[r->L].x, hid, r->R, V, 0, gWlm, V);
}

/* The step's forward: every block, then the LM head (statistics into
 * *stats). */
static void ref_step_forward(ref_model *r, double **stats)
{
    for (int l = 0; l < r->L; l++)
        ref_block_forward(r, l);
    ref_head_forward(r, stats);
}

/* The step's backward: the LM head, then every block in reverse, the
 * gradients into r->grad. */
static void ref_step_backward(ref_model *r)
{
    size_t Sz = (size_t)r->S, hid = (size_t)r->hid, hd = (size_t)r->hd;
    r->dx = ref_alloc(Sz * hid), r->dh = ref_alloc(Sz * hid);
    r->dO = ref_alloc(Sz * hd), r->dqkv = ref_alloc(Sz * (size_t)r->w3);
    r->dq = ref_alloc(Sz * (size_t)r->x->c->model.heads * (size_t)r->d), r->dk = ref_alloc(Sz * (size_t)r->wk);
    r->dv = ref_alloc(Sz * (size_t)r->wv);
    ref_head_backward(r);
    for (int l = r->L - 1; l >= 0; l--)
        ref_block_backward(r, l);
}

/* The executor's step model in float64 on the whole sequence of one
 * sample (the micro-batch whose inputs start at row row0): its forward
 * then its backward. Returns the weight gradients of the whole model
 * (tp = 1's layout of the executor's gradient buffer, wfull floats), and
 * the per-token loss statistics (S, 3) in *stats. */
static double *ref_step(const xr *x, int64_t row0, double **stats)
{
    ref_model r;
    ref_model_init(&r, x, row0);
    ref_step_forward(&r, stats);
    ref_step_backward(&r);
    double *grad = r.grad;
    ref_model_free(&r);
    return grad;
}

/* ---- checks ---- */

typedef struct row {
    const char *name;
    double err, tol;
} row;

static int print_rows(const row *r, int n)
{
    int bad = 0, w = 12; /* the names' column: 12, or the longest name */
    for (int i = 0; i < n; i++)
        if ((int)strlen(r[i].name) > w) w = (int)strlen(r[i].name);
    printf("# check against the float64 single-rank reference over the whole sequence\n");
    printf("# %-*s %14s %10s %7s\n", w, "tensor", "max_rel_err", "tolerance", "status");
    for (int i = 0; i < n; i++) {
        bool ok = r[i].err <= r[i].tol; /* false for NaN */
        bad |= !ok;
        printf("  %-*s %14.3e %10.0e %7s\n", w, r[i].name, r[i].err, r[i].tol, ok ? "ok" : "FAILED");
    }
    return bad;
}

/* End of the --check gather, under the watchdog: every rank is past it.
 * From here rank 0 alone computes the float64 reference (no watchdog: it
 * may take longer than --timeout) while the others wait for its verdict. */
static void gathered(xr *x)
{
    x->w->barrier(x->w);
    xr_watch(x, NULL);
}

/* The float64 attention reference of the last --check in this process,
 * kept for the next one: it depends on the inputs alone (seed, S, heads,
 * head dim, the document mask), never on the mesh or the strategy, so a
 * --cases table over one model and sequence computes it once. Only rank 0
 * computes references (one thread, also under --transport local). */
typedef struct attn_ref_memo {
    uint64_t key;             /* 0: empty */
    double *o, *dq, *dk, *dv; /* dq == NULL: forward only */
} attn_ref_memo;
static attn_ref_memo memo;

static uint64_t ref_key(const xr *x, const int64_t *starts, bool bwd)
{
    int64_t dims[7] = {
        (int64_t)x->o->seed, (int64_t)x->c->seq, x->c->model.heads, x->c->model.kv_heads, x->d, bwd, x->dv};
    uint64_t h = hash_fnv1a(HASH_FNV1A_BASIS, dims, sizeof dims);
    if (starts) h = hash_fnv1a(h, starts, (size_t)x->c->seq * sizeof *starts);
    return h ? h : 1;
}

/* The reference O (and dQ, dK, dV when bwd) of x's inputs, in memo: all
 * H and H_kv heads of the model. */
static void attn_reference(const xr *x, bool bwd)
{
    int H = x->c->model.heads, Hkv = x->c->model.kv_heads;
    size_t S = (size_t)x->c->seq, d = (size_t)x->d, hq = (size_t)H * d, wk = (size_t)Hkv * d;
    size_t hd = (size_t)H * (size_t)x->dv, wv = (size_t)Hkv * (size_t)x->dv; /* O's and V's (MLA: dv wide) */
    int64_t *starts = doc_starts(x);
    uint64_t key = ref_key(x, starts, bwd);
    if (memo.key == key) {
        free(starts);
        return;
    }
    free(memo.o), free(memo.dq), free(memo.dk), free(memo.dv);
    memo = (attn_ref_memo){0};
    double *q = gen_seq(x, GEN_Q, (int)hq, 1.0f), *k = gen_seq(x, GEN_K, (int)wk, 1.0f),
           *v = gen_seq(x, GEN_V, (int)wv, 1.0f), *lse = xmalloc(S * (size_t)H * sizeof *lse, "the --check reference");
    memo.o = xmalloc(S * hd * sizeof *memo.o, "the --check reference");
    attn_ref_fwd_v(memo.o, lse, q, k, v, starts, (int)S, H, Hkv, (int)d, x->dv);
    if (bwd) {
        double *dO = gen_seq(x, GEN_DO, (int)hd, 1.0f);
        memo.dq = xmalloc(S * hq * sizeof *memo.dq, "the --check reference");
        memo.dk = xmalloc(S * wk * sizeof *memo.dk, "the --check reference");
        memo.dv = xmalloc(S * wv * sizeof *memo.dv, "the --check reference");
        attn_ref_bwd_v(memo.dq, memo.dk, memo.dv, q, k, v, dO, starts, (int)S, H, Hkv, (int)d, x->dv);
        free(dO);
    }
    memo.key = key;
    free(q), free(k), free(v), free(lse), free(starts);
}

static int check_attn(xr *x)
{
    layer_t *ly = &x->ly[0];
    /* hd, wk, w3: of the TP shard; the gathered tensors are the model's, tp times wider */
    size_t S = (size_t)x->c->seq, d = (size_t)x->d, dv = (size_t)x->dv, hq = (size_t)x->H * d, hd = (size_t)x->H * dv;
    size_t wk = (size_t)x->Hkv * d, w3 = xr_qkv_width(x), tp = (size_t)x->tp; /* hd: O's (dv wide under MLA) */
    xr_watch(x, "the --check gather");
    float *o = gather_seq(x, ly->o_s, (int)hd);
    xr_fault(x, FAULT_CHECK);
    float *dqkv = x->c->scope == SCOPE_ATTN ? gather_seq(x, ly->dqkv_s, (int)w3) : NULL;
    gathered(x);
    int bad = 0;
    if (x->rank == 0) {
        attn_reference(x, dqkv != NULL);
        row r[4] = {{"O", rel_err(o, memo.o, S * tp * hd), TOL_ATTN}};
        int n = 1;
        if (dqkv) {
            size_t wkm = (size_t)x->c->model.kv_heads * d, wvm = (size_t)x->c->model.kv_heads * dv; /* the model's */
            float *a[3] = {columns(x, dqkv, S, w3, 0, hq), kv_columns(x, dqkv, S, w3, hq, true, d),
                           kv_columns(x, dqkv, S, w3, hq + wk, true, dv)};
            r[1] = (row){"dQ", rel_err(a[0], memo.dq, S * tp * hq), TOL_ATTN};
            r[2] = (row){"dK", rel_err(a[1], memo.dk, S * wkm), TOL_ATTN};
            r[3] = (row){"dV", rel_err(a[2], memo.dv, S * wvm), TOL_ATTN};
            n = 4;
            for (int i = 0; i < 3; i++)
                free(a[i]);
        }
        bad = print_rows(r, n);
    }
    free(o);
    free(dqkv);
    return bad;
}

/* Every rank's (T, 3) loss statistics with the positions of its tokens,
 * on rank 0 (NULL elsewhere). Every rank calls it. */
typedef struct loss_rows {
    float *stats;
    int64_t *pos; /* mb * S + the token's position */
} loss_rows;

/* Every rank's loss statistics of its tokens, every micro-batch's, on
 * rank 0 (those of the last pipeline stage's ranks count). */
static loss_rows gather_loss(xr *x)
{
    size_t T = (size_t)x->T, P = (size_t)x->P, n = T * (size_t)x->mbs;
    float *mine = xmalloc(n * 3 * sizeof *mine, "the --check reference");
    int64_t *pos = xmalloc(n * sizeof *pos, "the --check reference");
    loss_rows all = {NULL, NULL};
    x->ops->get(x->dev, mine, x->loss_all, n * 3);
    for (int k = 0; k < x->mbs; k++)
        for (int i = 0; i < x->T; i++)
            pos[(size_t)k * T + (size_t)i] = (int64_t)k * (int64_t)x->c->seq + xr_seq_pos(x, i);
    if (x->rank == 0) {
        all.stats = xmalloc(P * n * 3 * sizeof *all.stats, "the --check reference");
        all.pos = xmalloc(P * n * sizeof *all.pos, "the --check reference");
    }
    x->w->gather(x->w, mine, n * 3 * sizeof *mine, all.stats);
    x->w->gather(x->w, pos, n * sizeof *pos, all.pos);
    free(mine);
    free(pos);
    return all;
}

/* The last stage's ranks' loss statistics against the reference's rows
 * (m S, 3) of their tokens: the worst column, each relative to its
 * largest value. */
static double loss_err(const xr *x, const loss_rows *a, const double *ref)
{
    size_t per = (size_t)x->T * (size_t)x->mbs, all = (size_t)x->mbs * (size_t)x->c->seq;
    double worst = 0;
    for (size_t c = 0; c < 3; c++) {
        double num = 0, den = 0;
        for (int r = 0; r < x->P; r++) {
            if (pipe_stage(x->c, r) != x->c->pp - 1) continue; /* the LM head's stage */
            for (size_t k = (size_t)r * per; k < (size_t)(r + 1) * per; k++) {
                double e = fabs((double)a->stats[3 * k + c] - ref[3 * (size_t)a->pos[k] + c]);
                if (!(e <= num)) num = e; /* NaN propagates */
            }
        }
        for (size_t p = 0; p < all; p++)
            if (fabs(ref[3 * p + c]) > den) den = fabs(ref[3 * p + c]);
        double err = den > 0 ? num / den : num;
        if (!(err <= worst)) worst = err;
    }
    return worst;
}

/* Rank r's weight gradients (its TP shard, wcount floats at shard) into
 * full (tp = 1's layout), for the blocks its pipeline stage holds and the
 * LM head's on the last stage; full's other blocks and other TP ranks'
 * columns are kept (KV replicas over TP write the same columns alike).
 * Over the ranks of every (stage, TP rank) this rebuilds the model's.
 * tmp: wfull floats of scratch. */
static void put_stage_grads(const xr *x, int r, const float *shard, float *full, float *tmp)
{
    int s = pipe_stage(x->c, r);
    memcpy(tmp, full, x->wfull * sizeof *tmp);
    if (x->tp == 1)
        memcpy(tmp, shard, x->wcount * sizeof *tmp);
    else
        xr_tp_shard(x, config_tp_rank(x->c, r), tmp, (float *)shard, false);
    for (int l = 0; l <= x->L; l++) {
        bool held = l < x->L ? pipe_holds(x->c, s, l) : s == x->c->pp - 1;
        size_t o = xr_full_off(x, l), n = xr_full_off(x, l + 1) - o;
        if (held) memcpy(full + o, tmp + o, n * sizeof *full);
    }
}

/* Rank r's local experts' gradients (ecount floats at mine) into full,
 * for the expert blocks its stage holds. */
static void put_stage_experts(const xr *x, int r, const float *mine, float *full)
{
    const model *m = &x->c->model;
    int s = pipe_stage(x->c, r), local = config_ep_local_experts(x->c), first = config_ep_rank(x->c, r) * local;
    size_t ef = xr_expert_floats(x), at = xr_full_off(x, x->L + 1);
    for (int l = m->dense_layers, i = 0; l < x->L; i += model_block_moe(m, l), l++)
        if (model_block_moe(m, l) && pipe_holds(x->c, s, l))
            memcpy(full + at + ((size_t)i * (size_t)m->experts + (size_t)first) * ef,
                   mine + (size_t)i * (size_t)local * ef, (size_t)local * ef * sizeof *full);
}

/* Every rank's local experts' gradients into full on rank 0. */
static void model_expert_grads(xr *x, float *full)
{
    float *mine = xmalloc(x->ecount * sizeof *mine, "the --check reference"), *all = NULL;
    x->ops->get(x->dev, mine, x->egbuf, x->ecount);
    if (x->rank == 0) all = xmalloc((size_t)x->P * x->ecount * sizeof *all, "the --check reference");
    x->w->gather(x->w, mine, x->ecount * sizeof *mine, all);
    for (int r = 0; x->rank == 0 && r < x->P; r++)
        put_stage_experts(x, r, all + (size_t)r * x->ecount, full);
    free(mine);
    free(all);
}

/* The reduced weight gradients of the whole model on rank 0 (wfull floats,
 * tp = 1's layout; NULL elsewhere): every rank holds its TP shard's of its
 * stage's blocks (the reduce-scattered ones gathered, finish_layouts),
 * and the first rank of each (stage, TP rank) gives them. Every rank
 * calls it. */
static float *model_grads(xr *x)
{
    float *mine = xmalloc(x->wcount * sizeof *mine, "the --check reference"), *all = NULL, *full = NULL, *tmp = NULL;
    x->ops->get(x->dev, mine, x->gbuf, x->wcount);
    if (x->tp == 1 && x->c->pp == 1 && !x->ept) {
        if (x->rank == 0) return mine;
        free(mine);
        return NULL;
    }
    if (x->rank == 0) {
        all = xmalloc((size_t)x->P * x->wcount * sizeof *all, "the --check reference");
        full = xcalloc(x->wfull, sizeof *full, "the --check reference");
        tmp = xmalloc(x->wfull * sizeof *tmp, "the --check reference");
    }
    x->w->gather(x->w, mine, x->wcount * sizeof *mine, all);
    mesh msh = config_mesh(x->c);
    for (int r = 0; x->rank == 0 && r < x->P; r++) {
        int co[MESH_NDIMS];
        mesh_coords(&msh, r, co);
        if (co[MESH_HEAD] == 0 && co[MESH_SEQ] == 0) put_stage_grads(x, r, all + (size_t)r * x->wcount, full, tmp);
    }
    if (x->ept) model_expert_grads(x, full);
    free(mine);
    free(all);
    free(tmp);
    return full;
}

/* The float64 reference of the whole step: every micro-batch's sample,
 * the weight gradients summed over them (as the DAG accumulates them) and
 * their loss statistics (m S, 3) into *stats. */
static double *ref_steps(const xr *x, double **stats)
{
    size_t S = (size_t)x->c->seq;
    double *sum = NULL;
    *stats = xmalloc((size_t)x->mbs * S * 3 * sizeof **stats, "the --check reference");
    for (int k = 0; k < x->mbs; k++) {
        double *st, *g = ref_step(x, (int64_t)k * (int64_t)S, &st);
        memcpy(*stats + (size_t)k * S * 3, st, S * 3 * sizeof *st);
        free(st);
        if (!sum) {
            sum = g;
            continue;
        }
        for (size_t i = 0; i < x->wfull; i++)
            sum[i] += g[i];
        free(g);
    }
    return sum;
}

/* The rows of the step's check: each weight of the model by name, its
 * worst block; a mixture of experts' router, shared experts and every
 * routed expert (its three matrices together). */
enum { MAX_ROWS = 80 };
typedef struct step_rows {
    row r[MAX_ROWS];
    char names[MAX_ROWS][24];
    int n;
} step_rows;

/* Fold the error of the n floats at offset o under `name` into its row. */
static void step_row(step_rows *t, const char *name, const float *g, const double *ref, size_t o, size_t n, double tol)
{
    double e = rel_err(g + o, ref + o, n);
    int i = 0;
    while (i < t->n && strcmp(t->names[i], name))
        i++;
    if (i == t->n) {
        if (t->n == MAX_ROWS) return;
        snprintf(t->names[t->n], sizeof t->names[0], "%s", name);
        t->r[t->n++] = (row){t->names[i], 0, tol};
    }
    if (!(e <= t->r[i].err)) t->r[i].err = e; /* NaN propagates */
}

/* The QKV projection's rows of the block at o: one, or MLA's four (three
 * without q_lora). Returns where the output projection starts. */
static size_t attn_rows(const xr *x, size_t o, const float *g, const double *ref, step_rows *t)
{
    const model *m = &x->c->model;
    size_t hid = (size_t)m->hidden, H = (size_t)m->heads, ql = (size_t)m->q_lora, kl = (size_t)m->kv_lora;
    if (!model_mla(m)) {
        size_t w3 = (size_t)model_qkv_heads(m) * (size_t)m->head_dim;
        step_row(t, "dW_qkv", g, ref, o, hid * w3, TOL_STEP);
        return o + hid * w3;
    }
    size_t dqk = (size_t)(m->qk_nope + m->qk_rope),
           n[4] = {hid * ql, (ql ? ql : hid) * H * dqk, hid * (kl + (size_t)m->qk_rope),
                   kl * H * (size_t)(m->qk_nope + m->v_dim)};
    const char *names[4] = {"dW_q_down", ql ? "dW_q_up" : "dW_q", "dW_kv_down", "dW_kv_up"};
    for (int i = 0; i < 4; o += n[i], i++)
        if (n[i]) step_row(t, names[i], g, ref, o, n[i], TOL_STEP);
    return o;
}

/* Block l's rows: attention's, then its SwiGLU's or its experts'. */
static void block_rows(const xr *x, int l, const float *g, const double *ref, step_rows *t)
{
    const model *m = &x->c->model;
    size_t hid = (size_t)m->hidden, hd = (size_t)m->heads * (size_t)x->dv, o = xr_full_off(x, l), f = (size_t)m->ffn;
    o = attn_rows(x, o, g, ref, t);
    step_row(t, "dW_o", g, ref, o, hd * hid, TOL_STEP);
    o += hd * hid;
    const char *mlp[3] = {"dW_gate", "dW_up", "dW_down"};
    if (model_block_moe(m, l)) {
        static const char *shared[3] = {"dW_shared_gate", "dW_shared_up", "dW_shared_down"};
        step_row(t, "dW_router", g, ref, o, hid * (size_t)m->experts, TOL_STEP);
        o += hid * (size_t)m->experts;
        f = (size_t)m->shared_ffn;
        memcpy(mlp, shared, sizeof mlp);
        size_t ef = xr_expert_floats(x),
               at = xr_full_off(x, x->L + 1) + (size_t)model_moe_blocks_below(m, l) * (size_t)m->experts * ef;
        for (int e = 0; e < m->experts; e++) {
            char name[24];
            snprintf(name, sizeof name, "dW_expert%d", e);
            step_row(t, name, g, ref, at + (size_t)e * ef, ef, TOL_STEP);
        }
    }
    for (int k = 0; k < 3 && f; k++, o += hid * f)
        step_row(t, mlp[k], g, ref, o, hid * f, TOL_STEP);
}

static int check_step(xr *x)
{
    xr_watch(x, "the --check gather"); /* the gradients were all-gathered before (finish_layouts) */
    xr_fault(x, FAULT_CHECK);
    float *g = model_grads(x);
    loss_rows lr = gather_loss(x);
    gathered(x);
    if (x->rank != 0) return 0;
    double *ref_loss, *ref = ref_steps(x, &ref_loss);
    const model *m = &x->c->model;
    step_rows t = {.n = 0};
    for (int l = 0; l < x->L; l++)
        block_rows(x, l, g, ref, &t);
    size_t o = xr_full_off(x, x->L);
    step_row(&t, "dW_lm_head", g, ref, o, (size_t)m->hidden * (size_t)m->vocab, TOL_STEP);
    t.r[t.n++] = (row){"loss_stats", loss_err(x, &lr, ref_loss), TOL_STEP};
    int bad = print_rows(t.r, t.n);
    free(g);
    free(ref);
    free(ref_loss);
    free(lr.stats);
    free(lr.pos);
    return bad;
}

int xr_check(xr *x)
{
    int bad = x->c->scope == SCOPE_STEP ? check_step(x) : check_attn(x);
    x->w->bcast(x->w, &bad, sizeof bad);
    return bad ? 1 : 0;
}

/* ---- dump ---- */

/* Rank 0 stages every file as an unnamed temporary (afile_open_staged) in
 * the --dump directory, or in its parent while the directory does not
 * exist (it is made at commit), so that a run that fails before the commit
 * leaves neither files nor a directory. Where the file system has no
 * unnamed temporaries, the directory is made at once and the files go
 * through named ones. `stage` gets the staging directory; x->dump_mkdir
 * says whether the directory is still to be made. */
static int dump_stage(xr *x, const char *dir, char *stage, size_t cap, char err[LOONG_ERRLEN])
{
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            snprintf(err, LOONG_ERRLEN, "--dump '%s' is not a directory: name a new or an existing directory", dir);
            return -1;
        }
        snprintf(stage, cap, "%s", dir);
        return 0;
    }
    int e = errno; /* ENOENT: to be made in its parent */
    const char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(stage, cap, ".");
    else
        snprintf(stage, cap, "%.*s", slash == dir ? 1 : (int)(slash - dir), dir);
    if (e == ENOENT && stat(stage, &st) != 0)
        e = errno;
    else if (e == ENOENT && !S_ISDIR(st.st_mode))
        e = ENOTDIR;
    else if (e == ENOENT) {
        x->dump_mkdir = true;
        return 0;
    }
    snprintf(err, LOONG_ERRLEN, "cannot create --dump directory '%s': %s", dir, strerror(e));
    return -1;
}

/* Open dir/name.npy for writing, staged (see dump_stage). */
static FILE *dump_open(xr *x, const char *dir, const char *stage, const char *name, char err[LOONG_ERRLEN])
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    afile *a = &x->dump_out[x->ndump];
    if (afile_open_staged(a, path, stage, err) != 0) {
        if (x->dump_mkdir && mkdir(dir, 0777) != 0 && errno != EEXIST) {
            snprintf(err, LOONG_ERRLEN, "cannot create --dump directory '%s': %s", dir, strerror(errno));
            return NULL;
        }
        x->dump_mkdir = false;
        if (afile_open(a, path, err) < 0) return NULL;
    }
    x->ndump++;
    return a->f;
}

static int dump_write(xr *x, const char *dir, const char *stage, const char *name, const float *a, const size_t *shape,
                      int ndim, char err[LOONG_ERRLEN])
{
    FILE *f = dump_open(x, dir, stage, name, err);
    if (!f) return -1;
    if (npy_write_to(f, a, shape, ndim) == 0) return 0;
    snprintf(err, LOONG_ERRLEN, "write error on '%s/%s.npy'", dir, name);
    return -1;
}

/* kv: 0 query heads (tp shards of `heads`), 1 K or V, 2 their gradient
 * (kv_columns); every tensor with the model's heads, of head dim d. */
static int dump_seq(xr *x, const char *dir, const char *stage, const char *name, const float *dptr, int heads, int kv,
                    size_t col0, size_t ld, size_t d, char err[LOONG_ERRLEN])
{
    float *all = gather_seq(x, dptr, (int)ld);
    int rc = 0;
    if (x->rank == 0) {
        size_t S = (size_t)x->c->seq, w = (size_t)heads * d;
        float *a = kv ? kv_columns(x, all, S, ld, col0, kv == 2, d) : columns(x, all, S, ld, col0, w);
        size_t shape[3] = {S, kv ? (size_t)x->c->model.kv_heads : (size_t)x->tp * (size_t)heads, d};
        rc = dump_write(x, dir, stage, name, a, shape, 3, err);
        free(a);
    }
    free(all);
    return rc;
}

int xr_dump(xr *x, const char *dir, char err[LOONG_ERRLEN])
{
    char stage[4096] = "";
    int rc = x->rank == 0 ? dump_stage(x, dir, stage, sizeof stage, err) : 0;
    x->w->bcast(x->w, &rc, sizeof rc);
    if (rc) return -1;
    layer_t *ly = &x->ly[0];
    int H = x->H, Hkv = x->Hkv;
    size_t d = (size_t)x->d, dv = (size_t)x->dv, hq = (size_t)H * d, hd = (size_t)H * dv, wk = (size_t)Hkv * d;
    size_t w3 = xr_qkv_width(x);
    if (x->c->scope == SCOPE_STEP) {
        float *g = model_grads(x);
        if (x->rank != 0) return 0;
        size_t shape[1] = {x->wfull};
        rc = dump_write(x, dir, stage, "grads", g, shape, 1, err);
        free(g);
        return rc;
    }
    /* every rank takes part in every gather, whatever rank 0's writes do */
    const struct {
        const char *name;
        const float *p;
        int heads, kv;
        size_t col, ld, d;
    } t[] = {
        {"q", ly->qkv_s, H, 0, 0, w3, d},          {"k", ly->qkv_s, Hkv, 1, hq, w3, d},
        {"v", ly->qkv_s, Hkv, 1, hq + wk, w3, dv}, {"o", ly->o_s, H, 0, 0, hd, dv},
        {"do", ly->do_s, H, 0, 0, hd, dv},         {"dq", ly->dqkv_s, H, 0, 0, w3, d},
        {"dk", ly->dqkv_s, Hkv, 2, hq, w3, d},     {"dv", ly->dqkv_s, Hkv, 2, hq + wk, w3, dv},
    };
    int n = x->c->scope == SCOPE_ATTN ? 8 : 4;
    for (int i = 0; i < n; i++)
        if (dump_seq(x, dir, stage, t[i].name, t[i].p, t[i].heads, t[i].kv, t[i].col, t[i].ld, t[i].d, err)) rc = -1;
    return rc;
}

int xr_dump_commit(xr *x, char err[LOONG_ERRLEN])
{
    const char *dir = x->o->dump_dir;
    if (x->ndump && x->dump_mkdir && mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, LOONG_ERRLEN, "cannot create --dump directory '%s': %s", dir, strerror(errno));
        return -1;
    }
    for (int i = 0; i < x->ndump; i++)
        if (afile_commit(&x->dump_out[i], err) < 0) return -1;
    return 0;
}

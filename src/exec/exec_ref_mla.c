/*
 * exec_ref_mla: multi-head latent attention's projections in float64 for
 * --check (exec_ref.h), the same math as exec_mla.c on the whole sample:
 * Q through the q latent, K and V expanded per head from the kv latent,
 * every head's K sharing the rope part k_pe (the executor has no RoPE).
 */
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"
#include "exec_ref.h"

typedef struct dims {
    int S, hid, H, ql, kl, dn, dr, dv, dqk, w3;
} dims;

static dims dims_of(const ref_mla *r)
{
    const model *m = r->m;
    int dqk = m->qk_nope + m->qk_rope;
    return (dims){r->S,       m->hidden,  m->heads, m->q_lora, m->kv_lora,
                  m->qk_nope, m->qk_rope, m->v_dim, dqk,       2 * m->heads * dqk + m->heads * m->v_dim};
}

/* The weights' parts from the block's first value: Wqa (NULL without
 * q_lora), Wqb (or Wq), Wkva, Wkvb. */
static void parts(const dims *d, const double *w, const double **p)
{
    p[0] = d->ql ? w : NULL;
    p[1] = d->ql ? w + (size_t)d->hid * (size_t)d->ql : w;
    p[2] = p[1] + (size_t)(d->ql ? d->ql : d->hid) * (size_t)d->H * (size_t)d->dqk;
    p[3] = p[2] + (size_t)d->hid * (size_t)(d->kl + d->dr);
}

static double *ref_new(size_t n) { return xcalloc(n ? n : 1, sizeof(double), "the --check reference"); }

void ref_mla_fwd(ref_mla *r, const double *x, double *qkv)
{
    dims d = dims_of(r);
    const double *W[4];
    parts(&d, r->w, W);
    size_t S = (size_t)d.S, ckw = (size_t)(d.kl + d.dr), kvw = (size_t)d.H * (size_t)(d.dn + d.dv);
    r->qc = ref_new(S * (size_t)d.ql), r->ckv = ref_new(S * ckw);
    double *kv = ref_new(S * kvw);
    int qw = d.H * d.dqk;
    if (d.ql) ref_dgemm(0, 0, d.S, d.ql, d.hid, x, d.hid, W[0], d.ql, 0, r->qc, d.ql);
    ref_dgemm(0, 0, d.S, qw, d.ql ? d.ql : d.hid, d.ql ? r->qc : x, d.ql ? d.ql : d.hid, W[1], qw, 0, qkv, d.w3);
    ref_dgemm(0, 0, d.S, (int)ckw, d.hid, x, d.hid, W[2], (int)ckw, 0, r->ckv, (int)ckw);
    ref_dgemm(0, 0, d.S, (int)kvw, d.kl, r->ckv, (int)ckw, W[3], (int)kvw, 0, kv, (int)kvw);
    for (size_t p = 0; p < S; p++)
        for (int h = 0; h < d.H; h++) {
            double *row = qkv + p * (size_t)d.w3, *k = row + qw + (size_t)h * (size_t)d.dqk;
            const double *src = kv + p * kvw + (size_t)h * (size_t)(d.dn + d.dv);
            memcpy(k, src, (size_t)d.dn * sizeof *k);
            memcpy(k + d.dn, r->ckv + p * ckw + d.kl, (size_t)d.dr * sizeof *k);
            memcpy(row + 2 * (size_t)qw + (size_t)h * (size_t)d.dv, src + d.dn, (size_t)d.dv * sizeof *k);
        }
    free(kv);
}

void ref_mla_bwd(const ref_mla *r, const double *x, const double *dqkv, double *dx)
{
    dims d = dims_of(r);
    const double *W[4], *G0[4];
    parts(&d, r->w, W);
    parts(&d, r->gw, G0);
    double *G[4];
    for (int i = 0; i < 4; i++)
        G[i] = (double *)G0[i];
    size_t S = (size_t)d.S, ckw = (size_t)(d.kl + d.dr), kvw = (size_t)d.H * (size_t)(d.dn + d.dv);
    int qw = d.H * d.dqk;
    double *dkv = ref_new(S * kvw), *dckv = ref_new(S * ckw), *dqc = ref_new(S * (size_t)d.ql);
    for (size_t p = 0; p < S; p++)
        for (int h = 0; h < d.H; h++) {
            const double *row = dqkv + p * (size_t)d.w3, *dk = row + qw + (size_t)h * (size_t)d.dqk;
            double *dst = dkv + p * kvw + (size_t)h * (size_t)(d.dn + d.dv);
            memcpy(dst, dk, (size_t)d.dn * sizeof *dst);
            memcpy(dst + d.dn, row + 2 * (size_t)qw + (size_t)h * (size_t)d.dv, (size_t)d.dv * sizeof *dst);
            for (int c = 0; c < d.dr; c++) /* every head's k_pe is the latent's: their gradients sum */
                dckv[p * ckw + (size_t)d.kl + (size_t)c] += dk[d.dn + c];
        }
    ref_dgemm(0, 1, d.S, d.kl, (int)kvw, dkv, (int)kvw, W[3], (int)kvw, 0, dckv, (int)ckw);
    ref_dgemm(1, 0, d.kl, (int)kvw, d.S, r->ckv, (int)ckw, dkv, (int)kvw, 1, G[3], (int)kvw);
    ref_dgemm(0, 1, d.S, d.hid, (int)ckw, dckv, (int)ckw, W[2], (int)ckw, 1, dx, d.hid);
    ref_dgemm(1, 0, d.hid, (int)ckw, d.S, x, d.hid, dckv, (int)ckw, 1, G[2], (int)ckw);
    int in = d.ql ? d.ql : d.hid;
    ref_dgemm(0, 1, d.S, in, qw, dqkv, d.w3, W[1], qw, d.ql ? 0 : 1, d.ql ? dqc : dx, in);
    ref_dgemm(1, 0, in, qw, d.S, d.ql ? r->qc : x, in, dqkv, d.w3, 1, G[1], qw);
    if (d.ql) {
        ref_dgemm(0, 1, d.S, d.hid, d.ql, dqc, d.ql, W[0], d.ql, 1, dx, d.hid);
        ref_dgemm(1, 0, d.hid, d.ql, d.S, x, d.hid, dqc, d.ql, 1, G[0], d.ql);
    }
    free(dkv), free(dckv), free(dqc);
}

void ref_mla_free(ref_mla *r)
{
    free(r->qc), free(r->ckv);
    r->qc = r->ckv = NULL;
}

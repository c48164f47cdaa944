/*
 * kernels_cpu: the CPU attention kernels of the executor (see kernels.h for
 * layouts and contracts). fp32 storage, fp32 accumulation, FlashAttention-2
 * math: the forward streams KV tiles through an online softmax; the backward
 * recomputes P from the final LSE. Every matrix product goes through
 * cblas_sgemm on tiles; one head of a (tokens, heads, d) tensor is addressed
 * in place with the leading dimension heads*d, so nothing is copied.
 *
 * This file is not a fast attention implementation: it is the numerically
 * faithful CPU device that proves schedules right. Scratch is bounded by the
 * tile size (a few hundred KiB), allocated per call; there is no global
 * mutable state, so the kernels are reentrant and may run on several threads.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "kernels.h"

/* Tile sizes: BR query rows x BC key rows. 128 x 128 keeps the fp32 tile
 * (64 KiB) in L2 and the GEMMs large enough for OpenBLAS to run near peak. */
enum { BR = 128, BC = 128 };

/* ---- helpers ---- */

static void *malloc_check(size_t n, const char *file, int line)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "%s:%d: out of memory allocating %zu bytes of kernel scratch\n", file, line, n);
        abort();
    }
    return p;
}
#define mallocCheck(n) malloc_check((n), __FILE__, __LINE__)

/* Min and max of pos[0..n). */
static void pos_range(int64_t *lo, int64_t *hi, const int64_t *pos, int n)
{
    int64_t a = pos[0], b = pos[0];
    for (int i = 1; i < n; i++) {
        if (pos[i] < a) a = pos[i];
        if (pos[i] > b) b = pos[i];
    }
    *lo = a;
    *hi = b;
}

/* The rows of a query tile: positions and document starts (qstart may be NULL). */
typedef struct qrows {
    const int64_t *pos, *start;
} qrows;

/* Relation of a (query tile, key tile) pair under the mask qstart <= kpos <= qpos. */
enum { TILE_FULL, TILE_PARTIAL, TILE_MASKED };
static int tile_mask(qrows r, int br, const int64_t *kpos, int bc, int causal)
{
    if (!causal) return TILE_FULL;
    int64_t qlo, qhi, klo, khi, slo = 0, shi = 0;
    pos_range(&qlo, &qhi, r.pos, br);
    pos_range(&klo, &khi, kpos, bc);
    if (r.start) pos_range(&slo, &shi, r.start, br);
    if (klo > qhi || khi < slo) return TILE_MASKED; /* every key after every query, or before every document */
    if (khi <= qlo && klo >= shi) return TILE_FULL; /* every key in every row's window */
    return TILE_PARTIAL;
}

/* s (br, bc) <- scale * Q_tile K_tile^T, with masked entries set to -inf.
 * q points at row 0 of the tile of one head (leading dim ldq), k likewise. */
static void tile_logits(float *s, const float *q, int ldq, const float *k, int ldk, qrows r, const int64_t *kpos,
                        int br, int bc, int d, float scale, int mask)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, br, bc, d, scale, q, ldq, k, ldk, 0.0f, s, bc);
    if (mask != TILE_PARTIAL) return;
    for (int i = 0; i < br; i++) {
        int64_t lo = r.start ? r.start[i] : 0;
        for (int j = 0; j < bc; j++)
            if (kpos[j] > r.pos[i] || kpos[j] < lo) s[(size_t)i * bc + j] = -INFINITY;
    }
}

/* The rows i0.. of a block. */
static qrows rows_at(const int64_t *qpos, const attn_shape *sh, int i0)
{
    return (qrows){qpos + i0, sh->qstart ? sh->qstart + i0 : NULL};
}

/* ---- forward ---- */

void attn_block_fwd(float *o, float *lse, const float *q, const float *k, const float *v, const int64_t *qpos,
                    const int64_t *kpos, const attn_shape *sh)
{
    const int nq = sh->nq, nk = sh->nk, hq = sh->hq, hkv = sh->hkv, d = sh->d, dv = sh->dv ? sh->dv : d;
    const int ldq = hq * d, ldk = hkv * d, ldo = hq * dv, ldv = hkv * dv, group = hq / hkv;
    const float scale = 1.0f / sqrtf((float)d);

    /* o is the PV accumulator (rescaled in place); start from zero */
    memset(o, 0, (size_t)nq * hq * dv * sizeof *o);
    if (nq == 0) return;
    float *s = mallocCheck(((size_t)BR * BC + 2 * BR) * sizeof *s); /* s (BR,BC), m (BR), l (BR) */
    float *m = s + (size_t)BR * BC, *l = m + BR;

    for (int h = 0; h < hq; h++) {
        const int g = h / group;
        for (int i0 = 0; i0 < nq; i0 += BR) {
            const int br = nq - i0 < BR ? nq - i0 : BR;
            const float *qt = q + ((size_t)i0 * hq + h) * d; /* (br, d), ld ldq */
            float *ot = o + ((size_t)i0 * hq + h) * dv;      /* (br, dv), ld ldo */
            for (int i = 0; i < br; i++) {
                m[i] = -INFINITY;
                l[i] = 0.0f;
            }
            for (int j0 = 0; j0 < nk; j0 += BC) {
                const int bc = nk - j0 < BC ? nk - j0 : BC;
                const int mask = tile_mask(rows_at(qpos, sh, i0), br, kpos + j0, bc, sh->causal);
                if (mask == TILE_MASKED) continue;
                const float *kt = k + ((size_t)j0 * hkv + g) * d;  /* (bc, d), ld ldk */
                const float *vt = v + ((size_t)j0 * hkv + g) * dv; /* (bc, dv), ld ldv */
                tile_logits(s, qt, ldq, kt, ldk, rows_at(qpos, sh, i0), kpos + j0, br, bc, d, scale, mask);
                /* online softmax: s <- exp(s - m_new), l and o rescaled by exp(m_old - m_new) */
                for (int i = 0; i < br; i++) {
                    float *si = s + (size_t)i * bc;
                    float mx = m[i];
                    for (int j = 0; j < bc; j++)
                        if (si[j] > mx) mx = si[j];
                    if (mx == -INFINITY) { /* row fully masked so far: contributes nothing */
                        memset(si, 0, (size_t)bc * sizeof *si);
                        continue;
                    }
                    const float alpha = expf(m[i] - mx); /* 0 when m[i] = -inf */
                    float sum = 0.0f;
                    for (int j = 0; j < bc; j++) {
                        si[j] = expf(si[j] - mx);
                        sum += si[j];
                    }
                    l[i] = l[i] * alpha + sum;
                    m[i] = mx;
                    if (alpha != 1.0f) {
                        float *oi = ot + (size_t)i * ldo;
                        for (int c = 0; c < dv; c++)
                            oi[c] *= alpha;
                    }
                }
                /* o_tile (br, dv) += P (br, bc) V_tile (bc, dv) */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, br, dv, bc, 1.0f, s, bc, vt, ldv, 1.0f, ot, ldo);
            }
            for (int i = 0; i < br; i++) {
                float *oi = ot + (size_t)i * ldo;
                float *li = lse + (size_t)(i0 + i) * hq + h;
                if (l[i] == 0.0f) { /* fully masked row: o stays 0 */
                    *li = -INFINITY;
                    continue;
                }
                const float inv = 1.0f / l[i];
                for (int c = 0; c < dv; c++)
                    oi[c] *= inv;
                *li = m[i] + logf(l[i]);
            }
        }
    }
    free(s);
}

/* ---- backward ---- */

void attn_block_bwd(float *dq, float *dk, float *dv, const float *q, const float *k, const float *v, const float *o,
                    const float *lse, const float *do_, const int64_t *qpos, const int64_t *kpos, const attn_shape *sh)
{
    const int nq = sh->nq, nk = sh->nk, hq = sh->hq, hkv = sh->hkv, d = sh->d, e = sh->dv ? sh->dv : d;
    const int ldq = hq * d, ldk = hkv * d, ldo = hq * e, ldv = hkv * e, group = hq / hkv;
    const float scale = 1.0f / sqrtf((float)d);

    /* dk, dv are overwritten: the query heads of a group accumulate into them */
    memset(dk, 0, (size_t)nk * hkv * d * sizeof *dk);
    memset(dv, 0, (size_t)nk * hkv * e * sizeof *dv);
    if (nq == 0 || nk == 0) return;
    /* p (BR,BC): S then P; ds (BR,BC): dP then dS; D (BR) = rowsum(dO*O) */
    float *p = mallocCheck(((size_t)2 * BR * BC + BR) * sizeof *p);
    float *ds = p + (size_t)BR * BC, *D = ds + (size_t)BR * BC;

    for (int h = 0; h < hq; h++) {
        const int g = h / group;
        for (int i0 = 0; i0 < nq; i0 += BR) {
            const int br = nq - i0 < BR ? nq - i0 : BR;
            const size_t qoff = ((size_t)i0 * hq + h) * d, ooff = ((size_t)i0 * hq + h) * e;
            const float *qt = q + qoff, *ot = o + ooff, *dot = do_ + ooff; /* (br, d), ld ldq; (br, e), ld ldo */
            float *dqt = dq + qoff;
            for (int i = 0; i < br; i++) {
                const float *oi = ot + (size_t)i * ldo, *doi = dot + (size_t)i * ldo;
                float acc = 0.0f;
                for (int c = 0; c < e; c++)
                    acc += doi[c] * oi[c];
                D[i] = acc;
            }
            for (int j0 = 0; j0 < nk; j0 += BC) {
                const int bc = nk - j0 < BC ? nk - j0 : BC;
                const int mask = tile_mask(rows_at(qpos, sh, i0), br, kpos + j0, bc, sh->causal);
                if (mask == TILE_MASKED) continue;
                const size_t koff = ((size_t)j0 * hkv + g) * d, voff = ((size_t)j0 * hkv + g) * e;
                const float *kt = k + koff, *vt = v + voff; /* (bc, d), ld ldk; (bc, e), ld ldv */
                float *dkt = dk + koff, *dvt = dv + voff;
                tile_logits(p, qt, ldq, kt, ldk, rows_at(qpos, sh, i0), kpos + j0, br, bc, d, scale, mask);
                /* P = exp(S - lse); a row with lse = -inf (fully masked in the whole row) is 0 */
                for (int i = 0; i < br; i++) {
                    float *pi = p + (size_t)i * bc;
                    const float li = lse[(size_t)(i0 + i) * hq + h];
                    if (li == -INFINITY) {
                        memset(pi, 0, (size_t)bc * sizeof *pi);
                        continue;
                    }
                    for (int j = 0; j < bc; j++)
                        pi[j] = expf(pi[j] - li);
                }
                /* dV_tile (bc, e) += P^T (bc, br) dO_tile (br, e) */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bc, e, br, 1.0f, p, bc, dot, ldo, 1.0f, dvt, ldv);
                /* dP (br, bc) = dO_tile (br, e) V_tile^T (e, bc) */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, br, bc, e, 1.0f, dot, ldo, vt, ldv, 0.0f, ds, bc);
                /* dS = P * (dP - D) */
                for (int i = 0; i < br; i++) {
                    float *dsi = ds + (size_t)i * bc;
                    const float *pi = p + (size_t)i * bc;
                    for (int j = 0; j < bc; j++)
                        dsi[j] = pi[j] * (dsi[j] - D[i]);
                }
                /* dQ_tile (br, d) += scale * dS (br, bc) K_tile (bc, d) */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, br, d, bc, scale, ds, bc, kt, ldk, 1.0f, dqt,
                            ldq);
                /* dK_tile (bc, d) += scale * dS^T (bc, br) Q_tile (br, d) */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bc, d, br, scale, ds, bc, qt, ldq, 1.0f, dkt, ldk);
            }
        }
    }
    free(p);
}

/* ---- merge ---- */

void attn_merge(float *o, float *lse, const float *ob, const float *lseb, int nq, int hq, int d)
{
    for (size_t r = 0; r < (size_t)nq * hq; r++) {
        const float a = lse[r], b = lseb[r];
        float *oa = o + r * d;
        const float *obr = ob + r * d;
        if (b == -INFINITY) continue; /* nothing to add (both -inf: o stays 0) */
        if (a == -INFINITY) {         /* nothing held yet: take b */
            memcpy(oa, obr, (size_t)d * sizeof *oa);
            lse[r] = b;
            continue;
        }
        /* t = exp(min - max) in [0, 1]; lse' = max + log1p(t); the weights are
         * 1/(1+t) and t/(1+t), computed from t rather than as exp(lse - lse'),
         * which would round lse' (ulp 6e-5 at |lse| = 1e3) into the weights. */
        const float t = expf(-fabsf(a - b)), wmax = 1.0f / (1.0f + t), wmin = t * wmax;
        const float wa = a >= b ? wmax : wmin, wb = a >= b ? wmin : wmax;
        const float lnew = (a >= b ? a : b) + log1pf(t);
        for (int c = 0; c < d; c++)
            oa[c] = oa[c] * wa + obr[c] * wb;
        lse[r] = lnew;
    }
}

/*
 * attn_ref: the float64 whole-sequence causal attention reference (forward
 * and backward) that the CPU kernels and `loong exec --check` compare
 * against. Plain loops written for clarity, not speed: O(n^2 d) time per
 * head and no O(n^2) memory. Positions are 0..n-1; query i sees keys
 * start[i] <= j <= i (its document; start NULL: 0), none when start[i] > i.
 * Layouts as in kernels.h: q, o, dq, do_ (n, hq, d); k, v, dk, dv (n, hkv, d);
 * lse (n, hq); with d_v (MLA), v, dv (n, hkv, d_v) and o, do_ (n, hq, d_v).
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

static double dot(const double *a, const double *b, int d)
{
    double acc = 0.0;
    for (int c = 0; c < d; c++)
        acc += a[c] * b[c];
    return acc;
}

/* Scaled logit of query row qi against key row kj (both length d). */
static double logit(const double *qi, const double *kj, int d, double scale) { return scale * dot(qi, kj, d); }

/* The first key query i sees. */
static int first_key(const int64_t *start, int i) { return start ? (int)start[i] : 0; }

/* lse of query row i of head h over keys j0..i (of KV head g); -inf when
 * there is none. */
static double row_lse(const double *qi, const double *k, int j0, int i, int hkv, int g, int d, double scale)
{
    double mx = -INFINITY;
    for (int j = j0; j <= i; j++) {
        double s = logit(qi, k + ((size_t)j * hkv + g) * d, d, scale);
        if (s > mx) mx = s;
    }
    if (mx == -INFINITY) return -INFINITY;
    double sum = 0.0;
    for (int j = j0; j <= i; j++)
        sum += exp(logit(qi, k + ((size_t)j * hkv + g) * d, d, scale) - mx);
    return mx + log(sum);
}

void attn_ref_fwd_v(double *o, double *lse, const double *q, const double *k, const double *v, const int64_t *start,
                    int n, int hq, int hkv, int d, int d_v)
{
    const double scale = 1.0 / sqrt((double)d);
    const int group = hq / hkv;
    for (int h = 0; h < hq; h++) {
        const int g = h / group;
        for (int i = 0; i < n; i++) {
            const double *qi = q + ((size_t)i * hq + h) * d;
            double *oi = o + ((size_t)i * hq + h) * d_v;
            const int j0 = first_key(start, i);
            const double li = row_lse(qi, k, j0, i, hkv, g, d, scale);
            /* o_i = sum_j softmax_j * v_j */
            memset(oi, 0, (size_t)d_v * sizeof *oi);
            for (int j = j0; j <= i; j++) {
                const double p = exp(logit(qi, k + ((size_t)j * hkv + g) * d, d, scale) - li);
                const double *vj = v + ((size_t)j * hkv + g) * d_v;
                for (int c = 0; c < d_v; c++)
                    oi[c] += p * vj[c];
            }
            lse[(size_t)i * hq + h] = li;
        }
    }
}

void attn_ref_bwd_v(double *dq, double *dk, double *dv, const double *q, const double *k, const double *v,
                    const double *do_, const int64_t *start, int n, int hq, int hkv, int d, int d_v)
{
    const double scale = 1.0 / sqrt((double)d);
    const int group = hq / hkv;
    memset(dq, 0, (size_t)n * hq * d * sizeof *dq);
    memset(dk, 0, (size_t)n * hkv * d * sizeof *dk);
    memset(dv, 0, (size_t)n * hkv * d_v * sizeof *dv);
    for (int h = 0; h < hq; h++) {
        const int g = h / group;
        for (int i = 0; i < n; i++) {
            const double *qi = q + ((size_t)i * hq + h) * d;
            const double *doi = do_ + ((size_t)i * hq + h) * d_v;
            double *dqi = dq + ((size_t)i * hq + h) * d;
            const int j0 = first_key(start, i);
            const double li = row_lse(qi, k, j0, i, hkv, g, d, scale);
            /* D_i = dO_i . O_i = sum_j p_ij (dO_i . v_j) */
            double Di = 0.0;
            for (int j = j0; j <= i; j++) {
                const double *vj = v + ((size_t)j * hkv + g) * d_v;
                const double p = exp(logit(qi, k + ((size_t)j * hkv + g) * d, d, scale) - li);
                Di += p * dot(doi, vj, d_v);
            }
            for (int j = j0; j <= i; j++) {
                const double *kj = k + ((size_t)j * hkv + g) * d;
                const double *vj = v + ((size_t)j * hkv + g) * d_v;
                double *dkj = dk + ((size_t)j * hkv + g) * d;
                double *dvj = dv + ((size_t)j * hkv + g) * d_v;
                const double p = exp(logit(qi, kj, d, scale) - li);
                const double dp = dot(doi, vj, d_v);
                const double ds = p * (dp - Di);
                for (int c = 0; c < d_v; c++)
                    dvj[c] += p * doi[c];
                for (int c = 0; c < d; c++) {
                    dqi[c] += scale * ds * kj[c];
                    dkj[c] += scale * ds * qi[c];
                }
            }
        }
    }
}

void attn_ref_fwd(double *o, double *lse, const double *q, const double *k, const double *v, const int64_t *start,
                  int n, int hq, int hkv, int d)
{
    attn_ref_fwd_v(o, lse, q, k, v, start, n, hq, hkv, d, d);
}

void attn_ref_bwd(double *dq, double *dk, double *dv, const double *q, const double *k, const double *v,
                  const double *do_, const int64_t *start, int n, int hq, int hkv, int d)
{
    attn_ref_bwd_v(dq, dk, dv, q, k, v, do_, start, n, hq, hkv, d, d);
}

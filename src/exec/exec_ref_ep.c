/*
 * exec_ref_ep: the float64 MLP references of --check (exec_ref.h): the
 * SwiGLU MLP and a mixture of experts' block, computed per expert on the
 * rows routed to it, the way the executor's grouped GEMMs do, but on one
 * rank over the whole sample.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"
#include "exec_ref.h"

void ref_dgemm(int ta, int tb, int m, int n, int k, const double *a, int lda, const double *b, int ldb, double beta,
               double *c, int ldc)
{
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0, a, lda, b,
                ldb, beta, c, ldc);
}

static double *ref_new(size_t n) { return xcalloc(n ? n : 1, sizeof(double), "the --check reference"); }

void ref_mlp_fwd(ref_mlp *r, const double *h, double *out)
{
    int S = r->S, hid = r->hid, f = r->f;
    size_t n = (size_t)S * (size_t)f, wf = (size_t)hid * (size_t)f;
    r->g = ref_new(n), r->u = ref_new(n), r->m = ref_new(n);
    if (!S) return;
    ref_dgemm(0, 0, S, f, hid, h, hid, r->w, f, 0, r->g, f);
    ref_dgemm(0, 0, S, f, hid, h, hid, r->w + wf, f, 0, r->u, f);
    for (size_t i = 0; i < n; i++)
        r->m[i] = r->g[i] / (1 + exp(-r->g[i])) * r->u[i];
    ref_dgemm(0, 0, S, hid, f, r->m, f, r->w + 2 * wf, hid, 1, out, hid);
}

void ref_mlp_bwd(const ref_mlp *r, const double *h, const double *dy, double *dh)
{
    int S = r->S, hid = r->hid, f = r->f;
    size_t n = (size_t)S * (size_t)f, wf = (size_t)hid * (size_t)f;
    if (!S) return;
    double *dm = ref_new(n), *dg = ref_new(n), *du = ref_new(n);
    ref_dgemm(0, 1, S, f, hid, dy, hid, r->w + 2 * wf, hid, 0, dm, f);
    ref_dgemm(1, 0, f, hid, S, r->m, f, dy, hid, 1, r->gw + 2 * wf, hid);
    for (size_t i = 0; i < n; i++) {
        double g = r->g[i], sig = 1 / (1 + exp(-g));
        du[i] = dm[i] * g * sig;
        dg[i] = dm[i] * r->u[i] * (sig + g * sig * (1 - sig));
    }
    ref_dgemm(0, 1, S, hid, f, du, f, r->w + wf, f, 1, dh, hid);
    ref_dgemm(1, 0, hid, f, S, h, hid, du, f, 1, r->gw + wf, f);
    ref_dgemm(0, 1, S, hid, f, dg, f, r->w, f, 1, dh, hid);
    ref_dgemm(1, 0, hid, f, S, h, hid, dg, f, 1, r->gw, f);
    free(dm), free(dg), free(du);
}

static void ref_mlp_free(ref_mlp *r) { free(r->g), free(r->u), free(r->m); }

void ref_moe_init(ref_moe *r, const config *c, uint64_t seed, int layer, int S, const double *w, double *gw,
                  const double *we, double *gwe)
{
    const model *m = &c->model;
    *r = (ref_moe){.c = c, .S = S, .hid = m->hidden, .E = m->experts, .k = m->top_k, .fe = m->expert_ffn};
    r->fs = m->shared_ffn;
    size_t hid = (size_t)r->hid, E = (size_t)r->E, n = (size_t)S * (size_t)r->k;
    r->router = w, r->grouter = gw;
    r->shared = r->fs ? w + hid * E : NULL, r->gshared = r->fs ? gw + hid * E : NULL;
    r->experts = we, r->gexperts = gwe;
    r->sel = xmalloc(n * sizeof *r->sel, "the --check reference");
    int *e = xmalloc((size_t)r->k * sizeof *e, "the --check reference");
    for (int p = 0; p < S; p++) {
        config_ep_route(c, seed, layer, (uint64_t)p, e);
        for (int j = 0; j < r->k; j++)
            r->sel[(size_t)p * (size_t)r->k + (size_t)j] = e[j];
    }
    free(e);
    r->nrows = xcalloc(E, sizeof *r->nrows, "the --check reference");
    r->rows = xcalloc(E, sizeof *r->rows, "the --check reference");
    for (size_t i = 0; i < n; i++)
        r->nrows[r->sel[i]]++;
    for (size_t x = 0; x < E; x++) {
        r->rows[x] = xmalloc(((size_t)r->nrows[x] + 1) * sizeof **r->rows, "the --check reference");
        r->nrows[x] = 0;
    }
    for (size_t i = 0; i < n; i++)
        r->rows[r->sel[i]][r->nrows[r->sel[i]]++] = (int32_t)i;
    r->each = xcalloc(E, sizeof *r->each, "the --check reference");
}

/* The rows of token-indexed `src` (S, hid) of expert x's entries. */
static double *gather_tokens(const ref_moe *r, int x, const double *src)
{
    size_t hid = (size_t)r->hid;
    double *o = ref_new((size_t)r->nrows[x] * hid);
    for (int i = 0; i < r->nrows[x]; i++)
        memcpy(o + (size_t)i * hid, src + (size_t)(r->rows[x][i] / r->k) * hid, hid * sizeof *o);
    return o;
}

void ref_moe_fwd(ref_moe *r, const double *h, double *out)
{
    int S = r->S, hid = r->hid, E = r->E, k = r->k;
    size_t hz = (size_t)hid, n = (size_t)S * (size_t)k, ef = 3 * hz * (size_t)r->fe;
    r->z = ref_new((size_t)S * (size_t)E), r->gates = ref_new(n), r->ey = ref_new(n * hz);
    ref_dgemm(0, 0, S, E, hid, h, hid, r->router, E, 0, r->z, E);
    for (int p = 0; p < S; p++) { /* softmax over the chosen experts' logits */
        const double *z = r->z + (size_t)p * (size_t)E;
        double *g = r->gates + (size_t)p * (size_t)k, most = -INFINITY, sum = 0;
        const int32_t *e = r->sel + (size_t)p * (size_t)k;
        for (int j = 0; j < k; j++)
            most = fmax(most, z[e[j]]);
        for (int j = 0; j < k; j++)
            sum += g[j] = exp(z[e[j]] - most);
        for (int j = 0; j < k; j++)
            g[j] /= sum;
    }
    memcpy(out, h, (size_t)S * hz * sizeof *out);
    for (int x = 0; x < E; x++) {
        double *in = gather_tokens(r, x, h), *y = ref_new((size_t)r->nrows[x] * hz);
        r->each[x] = (ref_mlp){.S = r->nrows[x],
                               .hid = hid,
                               .f = r->fe,
                               .w = r->experts + (size_t)x * ef,
                               .gw = r->gexperts + (size_t)x * ef};
        ref_mlp_fwd(&r->each[x], in, y);
        for (int i = 0; i < r->nrows[x]; i++) {
            size_t at = (size_t)r->rows[x][i], tok = at / (size_t)k;
            memcpy(r->ey + at * hz, y + (size_t)i * hz, hz * sizeof *y);
            for (size_t c = 0; c < hz; c++)
                out[tok * hz + c] += r->gates[at] * y[(size_t)i * hz + c];
        }
        free(in), free(y);
    }
    if (r->fs) {
        r->shared_mlp = (ref_mlp){.S = S, .hid = hid, .f = r->fs, .w = r->shared, .gw = r->gshared};
        ref_mlp_fwd(&r->shared_mlp, h, out);
    }
}

void ref_moe_bwd(ref_moe *r, const double *h, const double *dy, double *dh)
{
    int S = r->S, hid = r->hid, E = r->E, k = r->k;
    size_t hz = (size_t)hid, n = (size_t)S * (size_t)k;
    double *dgate = ref_new(n), *dz = ref_new((size_t)S * (size_t)E);
    memcpy(dh, dy, (size_t)S * hz * sizeof *dh);
    if (r->fs) ref_mlp_bwd(&r->shared_mlp, h, dy, dh);
    for (int x = 0; x < E; x++) {
        int m = r->nrows[x];
        double *in = gather_tokens(r, x, h), *dye = ref_new((size_t)m * hz), *dx = ref_new((size_t)m * hz);
        for (int i = 0; i < m; i++) {
            size_t at = (size_t)r->rows[x][i], tok = at / (size_t)k;
            for (size_t c = 0; c < hz; c++) {
                dye[(size_t)i * hz + c] = r->gates[at] * dy[tok * hz + c];
                dgate[at] += dy[tok * hz + c] * r->ey[at * hz + c];
            }
        }
        ref_mlp_bwd(&r->each[x], in, dye, dx);
        for (int i = 0; i < m; i++) {
            size_t tok = (size_t)r->rows[x][i] / (size_t)k;
            for (size_t c = 0; c < hz; c++)
                dh[tok * hz + c] += dx[(size_t)i * hz + c];
        }
        free(in), free(dye), free(dx);
    }
    for (int p = 0; p < S; p++) { /* the softmax's backward at the chosen experts */
        const double *g = r->gates + (size_t)p * (size_t)k, *dg = dgate + (size_t)p * (size_t)k;
        double dot = 0;
        for (int j = 0; j < k; j++)
            dot += g[j] * dg[j];
        for (int j = 0; j < k; j++)
            dz[(size_t)p * (size_t)E + (size_t)r->sel[(size_t)p * (size_t)k + (size_t)j]] = g[j] * (dg[j] - dot);
    }
    ref_dgemm(0, 1, S, hid, E, dz, E, r->router, E, 1, dh, hid);
    ref_dgemm(1, 0, hid, E, S, h, hid, dz, E, 1, r->grouter, E);
    free(dgate), free(dz);
}

void ref_moe_free(ref_moe *r)
{
    for (int x = 0; r->each && x < r->E; x++)
        ref_mlp_free(&r->each[x]);
    for (int x = 0; r->rows && x < r->E; x++)
        free(r->rows[x]);
    if (r->fs) ref_mlp_free(&r->shared_mlp);
    free(r->each), free(r->rows), free(r->nrows), free(r->sel), free(r->z), free(r->gates), free(r->ey);
}

/*
 * exec_ref: the float64 references of the executor's MLPs that --check
 * (exec_check.c) runs over a whole sample: the SwiGLU MLP (a dense block's,
 * a shared expert's, each routed expert's) and a mixture of experts' block,
 * routed as the executor routes (config_ep_route). Row-major; S tokens.
 *
 * Layer: exec (CBLAS only).
 */
#ifndef LOONG_EXEC_REF_H
#define LOONG_EXEC_REF_H

#include <stdint.h>

#include "core/config.h"

/* C = op(A) op(B) + beta C in float64. */
void ref_dgemm(int ta, int tb, int m, int n, int k, const double *a, int lda, const double *b, int ldb, double beta,
               double *c, int ldc);

/* A SwiGLU MLP of width f over S rows: weights w = [gate (hid, f) | up
 * (hid, f) | down (f, hid)], their gradients gw alike. Forward: out +=
 * (silu(h Wg) * (h Wu)) Wd, keeping g, u, m (S, f). Backward from dy (S,
 * hid): gw += the weights' gradients, dh += the input's. */
typedef struct ref_mlp {
    int S, hid, f;
    const double *w;
    double *gw;
    double *g, *u, *m; /* the forward's, (S, f) each */
} ref_mlp;
void ref_mlp_fwd(ref_mlp *r, const double *h, double *out);
void ref_mlp_bwd(const ref_mlp *r, const double *h, const double *dy, double *dh);

/* A mixture of experts' block: out = h + sum_j gate_j expert_{e_j}(h) +
 * shared(h) per token, the experts e_j of config_ep_route (seed), the
 * gates a softmax over their router logits z = h Wr (kernels.h's
 * moe_route_fwd). Weights: router (hid, E), the E experts' [gate | up |
 * down] one after another, the shared experts' (NULL: none); gradients
 * alike (accumulated). ref_moe_bwd: dh = dy + every term's input gradient. */
typedef struct ref_moe {
    const config *c;
    int S, hid, E, k, fe, fs;
    const double *router, *experts, *shared;
    double *grouter, *gexperts, *gshared;
    int32_t *sel;           /* (S, k) */
    double *z, *gates, *ey; /* (S, E), (S, k), each entry's expert output (S k, hid) */
    ref_mlp *each;          /* per expert: its forward's activations of its rows */
    int32_t **rows;         /* per expert: its entries i k + j */
    int *nrows;
    ref_mlp shared_mlp;
} ref_moe;
/* Set up r for block `layer`, whose weights and gradients start at w and
 * gw (xr_full_off's layout: router then shared experts) and whose experts
 * at we and gwe; seed, the block and the sample's S tokens route. */
void ref_moe_init(ref_moe *r, const config *c, uint64_t seed, int layer, int S, const double *w, double *gw,
                  const double *we, double *gwe);
void ref_moe_fwd(ref_moe *r, const double *h, double *out);
void ref_moe_bwd(ref_moe *r, const double *h, const double *dy, double *dh);
void ref_moe_free(ref_moe *r);

/* Multi-head latent attention's projections (exec_ref_mla.c; exec_mla.c's
 * layout and math, tp = 1): from x (S, hid) into qkv (S, w3) = [Q (H dqk)
 * | K (H dqk) | V (H dv)], keeping the latents qc (S, q_lora) and ckv (S,
 * kv_lora + rope); backward from dqkv, the weights' gradients into gw
 * (accumulated) and dx += the input's. w: the block's [Wqa | Wqb | Wkva |
 * Wkvb] (or [Wq | Wkva | Wkvb]). */
typedef struct ref_mla {
    const model *m;
    int S;
    const double *w;
    double *gw;
    double *qc, *ckv; /* the forward's */
} ref_mla;
void ref_mla_fwd(ref_mla *r, const double *x, double *qkv);
void ref_mla_bwd(const ref_mla *r, const double *x, const double *dqkv, double *dx);
void ref_mla_free(ref_mla *r);

#endif

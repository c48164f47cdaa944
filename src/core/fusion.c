/* fusion: the kernels each elementwise task launches. See fusion.h. */
#include "fusion.h"

#include "elementwise.h"

/* none's kernels of one tensor: bytes per element as fixed + act x a, both
 * doubled so that the neg over half of rope's columns stays whole. */
typedef struct unfused {
    int n;                          /* kernels */
    int fixed2[FUSION_MAX_KERNELS]; /* bytes per element, x 2, independent of a */
    int act2[FUSION_MAX_KERNELS];   /* multiples of a per element, x 2 */
} unfused;

/* none's kernels of one tensor (fusion.h's table); NULL: as te. */
static const unfused *unfused_of(task_kind kind, bool bwd)
{
    /* norm: to(fp32), pow, mean, add_, rsqrt, mul, mul weight, type_as */
    static const unfused norm = {8, {8, 16, 8, 0, 0, 16, 16, 8}, {2, 0, 0, 0, 0, 0, 0, 2}};
    /* rope on one of Q, K: neg (half the columns), cat, mul cos, mul sin, add */
    static const unfused rope = {5, {0}, {2, 4, 4, 4, 6}};
    static const unfused act_f = {2, {0}, {4, 6}};       /* silu, mul */
    static const unfused act_b = {4, {0}, {6, 6, 6, 8}}; /* mul's two grads, silu bwd, cat */
    /* softmax: the scale's mul, masked_fill_ (the bool mask read), softmax;
     * backward softmax's (y, dy in), masked_fill's, the scale's */
    static const unfused softmax_f = {3, {0, 2, 0}, {4, 4, 4}};
    static const unfused softmax_b = {3, {0, 2, 0}, {6, 4, 4}};
    switch (kind) {
    case TASK_NORM: return &norm;
    case TASK_ROPE: return &rope;
    case TASK_ACT: return bwd ? &act_b : &act_f;
    case TASK_SOFTMAX: return bwd ? &softmax_b : &softmax_f;
    default: return NULL;
    }
}

/* A residual add under --hidden-dropout: the dropout's own kernel (2a + 1
 * bytes per element) beside the add's 3a, but in te's fused forward. */
static int dropout_add_kernels(const config *c, bool bwd, uint64_t elems, uint64_t bytes[FUSION_MAX_KERNELS])
{
    uint64_t a = (uint64_t)c->act_bytes;
    if (!bwd && c->fusions == FUSIONS_TE) {
        bytes[0] = elems * (3 * a + 1);
        return 1;
    }
    bytes[0] = elems * 3 * a;
    bytes[1] = elems * (2 * a + 1);
    return 2;
}

static int add_kernels(const unfused *u, uint64_t elems, uint64_t a, uint64_t *bytes)
{
    for (int i = 0; i < u->n; i++)
        bytes[i] = elems * ((uint64_t)u->fixed2[i] + (uint64_t)u->act2[i] * a) / 2;
    return u->n;
}

/* --cross-entropy eager: F.cross_entropy(logits.float()) on the (T, V/tp)
 * logits, bytes per element of each kernel. Forward: the fp32 copy (a in,
 * 4 out); log_softmax over a row longer than shared memory holds (a
 * 128K-entry vocabulary), a max pass, a sum-of-exp pass and the writing
 * pass: 3 reads and a write of fp32. nll_loss reads T entries, nothing
 * per element. Backward: nll_loss's dense fp32 gradient written; the
 * log-softmax gradient, a sum pass over it, then it and the saved output
 * read and the input's gradient written; the cast back (4 in, a out). */
static int eager_loss_kernels(const config *c, bool bwd, uint64_t elems, uint64_t bytes[FUSION_MAX_KERNELS])
{
    uint64_t a = (uint64_t)c->act_bytes;
    if (!bwd) {
        bytes[0] = elems * (a + 4), bytes[1] = elems * 16;
        return 2;
    }
    bytes[0] = elems * 4, bytes[1] = elems * 16, bytes[2] = elems * (4 + a);
    return 3;
}

int fusion_kernels(const config *c, task_op op, task_phase ph, uint64_t elems, uint64_t bytes[FUSION_MAX_KERNELS])
{
    task_kind kind = elementwise_kind(op);
    if (op == OP_PERMUTE || op == OP_UNPERMUTE || op == OP_ROUTE) { /* the experts' own kernels, fused or not */
        bytes[0] = elementwise_hbm_bytes(c, op, ph, elems);
        return 1;
    }
    if (kind == TASK_LOSS && c->cross_entropy == CE_EAGER) return eager_loss_kernels(c, ph == PHASE_BWD, elems, bytes);
    if (kind == TASK_ADD && c->hidden_dropout > 0) return dropout_add_kernels(c, ph == PHASE_BWD, elems, bytes);
    if (kind == TASK_QUANT && c->precision == PRECISION_FP8_CURRENT) { /* the amax pass, then the cast */
        uint64_t total = elementwise_hbm_bytes(c, op, ph, elems);
        bytes[0] = elems * (op == OP_QUANT_W ? 2 : (uint64_t)c->act_bytes);
        bytes[1] = total - bytes[0];
        return 2;
    }
    const unfused *u = c->fusions == FUSIONS_NONE ? unfused_of(kind, ph == PHASE_BWD) : NULL;
    if (!u) {
        bytes[0] = elementwise_hbm_bytes(c, op, ph, elems);
        return 1;
    }
    uint64_t a = (uint64_t)c->act_bytes;
    if (kind != TASK_ROPE) return add_kernels(u, elems, a, bytes);
    /* Q and K each get their own five: split the elements by heads */
    uint64_t q = (uint64_t)config_tp_heads(c), k = (uint64_t)config_tp_kv_heads(c);
    uint64_t eq = elems * q / (q + k);
    int n = add_kernels(u, eq, a, bytes);
    return n + add_kernels(u, elems - eq, a, bytes + n);
}

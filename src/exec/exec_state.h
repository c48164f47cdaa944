/*
 * exec_state: one rank's executor state, shared by the exec_*.c files.
 *
 * Layouts (one sample; row-major; fp32 on the CPU device):
 *   sequence-sharded, T = S/P rows (this rank's tokens before the all-to-all):
 *     qkv_s[l]  (T, (H + 2*H_kv) * d)   [Q | K | V] per row, the GEMM layout
 *     o_s[l], do_s[l]  (T, H*d)         dqkv_s[l] like qkv_s
 *   head-sharded, N = S/P_s rows (the ring rank's tokens, part A then B):
 *     q_h[l], o_h[l], do_h[l], dq_h[l]  (N, hq, d);  lse[l] (N, hq)
 *   KV and dK/dV slots, one set per ring lane, "slot layout"
 *     [K (nt, kvh, d) | V (nt, kvh, dv)], nt = the lane's tokens (MLA:
 *     d = nope + rope, dv = v_head_dim; O, dO and V are dv wide
 *     throughout, Q and K d wide; else dv = d)
 *     kv_own[l][lane] is the layer's own KV; dkv[lane][DKV_FINAL] the result.
 *   --ring allgather: gathered KV per slot KV_IN0/1, [K (P_s lane_tok, kvh,
 *     d) | V (likewise)], ring index j's rows at j * lane_tok (the kpos
 *     order); the whole sequence's dK/dV per slot DKV_BLK0/1, same layout.
 *   step scope: x[l] (T, hidden) for l = 0..L, h, g, u, m per layer, and
 *     weights/grads per layer in one contiguous buffer each.
 *   pipeline parallelism and micro-batches (m > 1): the activations above
 *     (ly, and the LM head's logits, loss, loss weights and embedding rows)
 *     once per micro-batch, ly_all[mb * (L+1) + l]; xr_select_mb points
 *     ly and those at a task's micro-batch; the weights and their
 *     gradients are one set (the gradients accumulate). Every rank holds
 *     every layer's weights; a stage computes, and reduces, its own.
 *   tensor parallelism (tp > 1, TP rank t of the TP group): every width
 *     above is the TP shard's: H/tp query heads and H_kv/tp KV heads (Q, K,
 *     V of heads t*H/tp.. in qkv_s), ffn/tp, vocab ceil(V/tp); weights are
 *     Megatron's shards (xr_tp_shard). With sequence parallelism, x, h, dx
 *     and dh are (T, hidden) buffers of which only rows [t*T/tp,
 *     (t+1)*T/tp) are this rank's (the TP collectives' part t); without,
 *     all T rows, replicated over TP.
 *
 * Layer: exec (uses core; MPI and CBLAS only in the CPU device).
 */
#ifndef LOONG_EXEC_STATE_H
#define LOONG_EXEC_STATE_H

#include "core/afile.h"
#include "devq.h"
#include "exec.h"

typedef struct layer_w {
    float *qkv, *o, *g, *u, *dn; /* (hid, (H+2Hkv)d), (Hd, hid), (hid, ffn) x2, (ffn, hid); TP shards */
    /* a mixture of experts' block: g, u, dn are its shared experts' (of
     * width shared_ffn; NULL: none); router (hid, E); experts: the rank's
     * E/ep local experts, each [gate (hid, fe) | up (hid, fe) | down (fe, hid)] */
    float *router, *experts;
} layer_w;

/* A mixture of experts' block on one rank (exec_ep.c), tp = 1: its T k
 * routed rows ("entries", token i's choice j at i k + j) in "slot" order
 * (by destination EP rank, local expert, token) and the `recv` rows its
 * experts take, ordered by source EP rank then local expert. With ep = 1
 * perm and disp, ey and comb, dcomb and dey, ddisp and dperm are the same. */
typedef struct ep_route ep_route; /* exec_ep.c: one block's routing tables */
typedef struct layer_ep {
    const ep_route *rt;                                   /* the block's routing (every micro-batch's) */
    float *z, *gates;                                     /* router logits (T, E); gates (T, k) */
    float *perm, *disp;                                   /* (T k, hid) sent; (recv, hid) received */
    float *eg, *eu, *em, *ey;                             /* (recv, fe) gate, up, SwiGLU; (recv, hid) down */
    float *comb;                                          /* (T k, hid) the experts' outputs back, slot order */
    float *dcomb, *dey, *deg, *deu, *dem, *ddisp, *dperm; /* their gradients */
    float *dgs, *dz; /* the gates' gradient (T k, slot order); the logits' (T, E) */
} layer_ep;

typedef struct layer_t {
    float *qkv_s, *o_s, *do_s, *dqkv_s, *dkv_eff; /* dkv_eff: (T, 2 * Hkv_eff * d) before the replica sum */
    float *q_h, *o_h, *do_h, *dq_h, *lse;
    float *kv_own[2];
    /* step scope */
    float *x, *dx, *h, *dh, *g, *u, *m, *dg, *du, *dm;
    /* tp > 1: the GEMMs' side of the TP collectives (dag_internal.h's
     * LB_XG..LB_DXP), each (T, hidden): gathered inputs, partial sums */
    float *xg, *hg, *hp, *yp, *dyg, *dhg, *dhp, *dxp;
    layer_w w, gw;         /* weights and their gradients (views into one buffer) */
    int ffn;               /* the SwiGLU's width of g, u, m: ffn/tp, or a mixture of experts' shared_ffn (0: none) */
    layer_ep *ep;          /* a mixture of experts' block; NULL: dense */
    struct layer_mla *mla; /* MLA's latents (exec_mla.c); NULL: GQA */
} layer_t;

struct xr_ep; /* exec_ep.c: the routing tables */

struct watchdog; /* exec_run.c */

typedef struct xr {
    const config *c;
    const dag *g;
    const dev_ops *ops;
    dev *dev;
    devq *q; /* dev's stream queue */
    const exec_opts *o;
    const world *w;
    int rank, P, h, s;
    int tp, t;                          /* TP degree and this rank's TP rank */
    bool sp;                            /* tp > 1 with sequence parallelism */
    int T, N, ctok;                     /* tokens: per rank (a TP group shares them), per ring rank, per chunk */
    int H, Hkv, Hkv_eff, hq, kvh, d, R; /* H, Hkv: of the TP shard; d: Q's and K's head dim */
    int dv;                             /* V's and O's head dim: d, or MLA's v_head_dim (d: nope + rope) */
    int ffn, vocab;                     /* of the TP shard: ffn/tp, ceil(V/tp) */
    int lanes, lane_tok, lane_parts[2];
    int L;           /* layers with buffers: 1 for attn scopes */
    int mbs;         /* micro-batches with buffers (c->micro_batches) */
    layer_t *ly_all; /* [mbs * (L+1)]: every micro-batch's layers; ly is the selected one's */
    float *r_lm_all, *logits_all, *loss_all, *embed_all; /* [mbs] of r_lm, logits, loss, embed_part */
    int64_t row0;          /* the selected micro-batch's first input row, mb * S (its sample) */
    uint32_t base, ntasks; /* this rank's task ids: [base, base + ntasks) */
    layer_t *ly;
    float *kv_slot[2][KV_SLOTS];
    float *dkv_slot[2][DKV_SLOTS];
    float *ob, *lseb, *zeros;
    float *ag_kv[2], *ag_dkv[2]; /* --ring allgather, by slot parity (see above) */
    float *a2a_send, *a2a_recv;
    float *wbuf, *gbuf;         /* all weights / all grads, contiguous */
    size_t wcount, wpad;        /* floats in wbuf (padded to a multiple of P) */
    size_t wfull;               /* floats of the whole model's weights (xr_full_off's layout) */
    size_t *boff;               /* [L + 1]: block l's weights (its dense part) in wbuf; [L]: the LM head */
    float *ebuf, *egbuf;        /* a mixture of experts: every block's local experts / their gradients */
    size_t ecount, epad;        /* floats in ebuf (padded to a multiple of P) */
    struct xr_ep *ept;          /* the routing (NULL: dense) */
    float *lm_w, *lm_gw, *r_lm; /* LM head weight/grad (hid, vocab), loss weights (T, vocab) */
    float *logits;
    float *loss;       /* (T, 3): per token sum(z*R) (the loss), sum(z), sum(z^2) over the vocabulary (shard) */
    float *embed_part; /* tp > 1: (T, hidden), the vocab-parallel lookup's rows (xr_inputs) */
    float *tp_recv;    /* --tp-overlap: (T/tp, hidden), the partial sum a reduce-scatter's ring step receives */
    float *kv_grad;    /* tp > H_kv: (hidden, 2 Hkv d), the QKV gradient's K and V columns the replicas sum */
    float *norm_grad;  /* sequence parallelism: ((2L+1), hidden), the norm gradients OP_TP_NORM_GRAD sums; the
                        * executor has no norms, so they are zeros: the collective runs for its time, no check */
    int64_t *qpos;     /* (N) */
    int64_t *qstart;   /* (N): each query row's document start (docs.h); NULL for one document */
    int64_t *kpos;     /* (P_s, lanes, lane_tok): positions of each origin's lane rows */
    dev_comm *comm[STREAM_COUNT];
    bool o_init[3]; /* per phase, reset per layer: first forward block writes O */
    int cur_layer_o[3];
    int cur_layer_dq;
    struct watchdog *wd; /* NULL: none */
    /* rank 0's outputs, staged, then committed together when the run has
     * succeeded (exec_run.c), so that a failure leaves none of them */
    afile trace_out;
    afile dump_out[8];
    int ndump;
    bool dump_mkdir; /* the --dump directory is made at commit */
} xr;

/* Floats of one row of the GEMM layout [Q | K | V] (of the TP shard),
 * and of one token's K and V of the head-sharded heads. */
static inline size_t xr_qkv_width(const xr *x)
{
    return (size_t)(x->H + x->Hkv) * (size_t)x->d + (size_t)x->Hkv * (size_t)x->dv;
}
static inline size_t xr_kd(const xr *x) { return (size_t)x->kvh * (size_t)x->d; }
static inline size_t xr_vd(const xr *x) { return (size_t)x->kvh * (size_t)x->dv; }

/* exec_run.c */
/* Arm this rank's watchdog for `phase`, named in its message ("the --check
 * gather"), or disarm it with NULL: armed, a phase that makes no progress
 * for --timeout seconds aborts every rank. */
void xr_watch(xr *x, const char *phase);
/* The fault point `at`: fires the injected fault when this rank is
 * --fail-rank and `at` is --fail-at (fault.h); else returns. */
void xr_fault(const xr *x, fault_at at);

/* exec_data.c */
int xr_alloc(xr *x, char err[LOONG_ERRLEN]);
void xr_free(xr *x);
/* Global token position of row i of ring index s's lane rows (lane parts). */
int64_t xr_pos(const xr *x, int s, int part, int i);
/* Global position of sequence-sharded row i of this rank. */
int64_t xr_seq_pos(const xr *x, int i);
/* Position of sequence-sharded row i of rank `rank` (tp = 1's layout for
 * a mixture of experts' routing of its EP peers' rows). */
int64_t xr_seq_pos_of(const xr *x, int rank, int i);
/* The whole model's weights, tp = 1 (the --check reference's and
 * gen_weights' layout, wfull floats): every block's dense part (QKV,
 * output projection, then the SwiGLU, or a mixture of experts' router and
 * shared experts), the LM head, then every expert block's E experts.
 * xr_full_off(x, l): block l's dense part, l = L: the LM head, l = L + 1:
 * the experts; xr_expert_floats: one expert's [gate | up | down]. */
size_t xr_full_off(const xr *x, int l);
size_t xr_expert_floats(const xr *x);
/* Floats of block l's dense part for heads H, H_kv and ffn (whole model
 * or one TP shard; a mixture of experts' block: router and shared experts). */
size_t xr_block_floats(const xr *x, int l, int H, int Hkv, int ffn);
/* Point x's activations (ly, logits, loss, r_lm, embed_part, row0) at
 * micro-batch mb's. */
void xr_select_mb(xr *x, int mb);
/* Fill the inputs of this rank from the seed (mesh-independent slices). */
int xr_inputs(xr *x);
/* Weights in the executor's layout: the whole model (tp = 1's wbuf, wfull
 * floats) and TP rank t's shard of it (wcount floats): to_shard copies
 * t's columns (QKV's per Q/K/V part, gate, up, LM head; the vocabulary
 * padding zero) and rows (output projection, down) out of full, else back. */
void xr_tp_shard(const xr *x, int t, float *full, float *shard, bool to_shard);
/* Which TP rank's vocabulary shard the token of sequence-sharded row i
 * falls in (the emulated vocab-parallel lookup: i % tp). */
static inline int xr_embed_owner(const xr *x, int i) { return i % x->tp; }
/* The whole model's weights (wfull floats, xr_full_off's layout): rows
 * of `hidden` floats of tensor GEN_W scaled by 1/sqrt(hidden), the last
 * one possibly partial. */
void xr_gen_weights(const xr *x, float *full);
/* Deterministic fp32 value of tensor `tensor`, global row `row`, column col. */
void xr_gen_row(uint64_t seed, int tensor, int64_t row, float *out, int n, float scale);
enum { GEN_Q, GEN_K, GEN_V, GEN_DO, GEN_X, GEN_W, GEN_R };

/* exec_tasks.c: launch the ops of task t and of recv, the recv grouped
 * with it (NULL: none; t itself may be a pipeline recv on its own). */
int xr_launch_task(xr *x, const dag_task *t, const dag_task *recv);
/* P_h = 1 has no all-to-all tasks: launch the layout change of all-to-all
 * `which` on stream (untimed), e.g. for --check after an attn scope. */
int xr_local_layout(xr *x, int stream, task_op which, int layer);
/* exec_grad.c: all-gather every reduce-scattered gradient (for --check). */
int xr_gather_grads(xr *x);
/* exec_ep.c: the routing tables of a mixture of experts (step scope; x's
 * buffers allocated); its per-layer buffers. 0, or -1 with err. */
int xr_ep_alloc(xr *x, char err[LOONG_ERRLEN]);
void xr_ep_free(xr *x);
/* exec_mla.c: multi-head latent attention's projections, tp = 1: the
 * floats of one block's (its "QKV" weights: [Wqa | Wqb | Wkva | Wkvb], or
 * [Wq | Wkva | Wkvb] without q_lora), and a block's latent buffers. */
size_t xr_mla_floats(const xr *x);
void xr_mla_alloc(xr *x, layer_t *l, bool *ok);
void xr_mla_free(layer_t *l);

/* exec_check.c */
/* Rank 0 gathers the results, compares them with the float64 reference and
 * prints the table; returns 1 on every rank when an error is above
 * tolerance, else 0. */
int xr_check(xr *x);
/* Gather the --dump arrays; rank 0 stages their files (xr.dump_out). */
int xr_dump(xr *x, const char *dir, char err[LOONG_ERRLEN]);
/* Rank 0: make the --dump directory if needed and commit the staged files.
 * Returns 0 or -1 with err. */
int xr_dump_commit(xr *x, char err[LOONG_ERRLEN]);

#endif

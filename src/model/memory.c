/* memory: per-rank peak memory model. See memory.h for every formula. */
#include "memory.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dag.h"
#include "core/pipeline.h"
#include "core/recompute.h"
#include "core/ringgeo.h"
#include "core/sizes.h"

/* Per rank: H, qkv and ffn are the TP shard's (H/tp; H/tp + 2 x its KV
 * heads, H_kv/tp or the one it replicates: model_tp_qkv_heads; ffn/tp); Tr is the tokens of the activations between the
 * GEMMs (T/tp under sequence parallelism, else T). */
typedef struct dims {
    double T, Tr, Ns, hid, H, qkv, d, ffn, hq, kvh, a;
} dims;

static dims dims_of(const config *c)
{
    const model *m = &c->model;
    double BS = (double)c->batch * (double)c->seq, tp = c->tp, T = BS / config_cp(c);
    return (dims){T,
                  c->sequence_parallel ? T / tp : T,
                  BS / c->p_seq,
                  m->hidden,
                  m->heads / tp,
                  model_tp_qkv_heads(m, c->tp),
                  m->head_dim,
                  m->ffn / tp,
                  config_q_heads(c),
                  config_kv_heads(c),
                  c->act_bytes};
}

/* --attention unfused: the s x s scores' elements of one layer (every
 * query row of the rank's heads against the whole sequence). */
static double scores(const config *c)
{
    dims k = dims_of(c);
    return c->attention == ATTN_UNFUSED ? k.Ns * k.hq * (double)c->seq : 0;
}

/* The most rows any EP rank's experts compute (config_ep.c). */
static double most_expert_rows(const config *c)
{
    uint64_t most = 0;
    for (int i = 0; i < c->ep; i++)
        if (config_ep_expert_rows(c, i) > most) most = config_ep_expert_rows(c, i);
    return (double)most;
}

/* A mixture of experts' MLP, what its backward reads (build_ep.c), on the
 * busiest EP rank: the router's fp32 probabilities (T', E), the experts'
 * input rows and their SwiGLU's gate, up and product (as the dense MLP's,
 * FP8 or not), the rows back from the experts that the router's gradient
 * reads (T' k, hidden), and the shared experts' SwiGLU as a dense MLP's. */
static double moe_activations(const config *c, const dims *k, double swiglu)
{
    const model *m = &c->model;
    double rows = most_expert_rows(c), Tsp = k->Tr, f = (double)config_ep_expert_ffn(c);
    double probs = Tsp * m->experts * 4, in = rows * k->hid * k->a, back = Tsp * m->top_k * k->hid * k->a;
    return probs + in + swiglu * rows * f + back + swiglu * k->T * (double)config_ep_shared_ffn(c);
}

/* A block's activations under policy: an expert block's (moe) or a dense
 * one's. */
static double block_activations(const config *c, bool moe, recompute_kind policy)
{
    dims k = dims_of(c);
    double x = k.Tr * k.hid * k.a;
    /* unfused attention keeps no LSE but the softmax's output, and with
     * its dropout the bool mask and the dropped probabilities PV reads */
    bool unfused = c->attention == ATTN_UNFUSED;
    double o = k.Ns * k.hq * k.d * k.a, lse = unfused ? 0 : k.Ns * k.hq * 4;
    double sc = scores(c) * (k.a + (c->attention_dropout > 0 ? 1 + k.a : 0));
    double masks = c->hidden_dropout > 0 ? 2 * k.Tr * k.hid : 0; /* the two residual dropouts' bool masks */
    /* FP8 (Transformer Engine): the GEMMs save their inputs as FP8, 1 byte:
     * the two norms' outputs, attention's output (a copy beside O at P_h =
     * 1) and the SwiGLU product */
    bool fp8 = c->precision != PRECISION_BF16;
    double xq = fp8 ? k.Tr * k.hid : x;
    if (policy == RECOMPUTE_FULL) return x;
    if (policy == RECOMPUTE_SCPP) return x + o + lse;
    double swiglu = fp8 ? 2 * k.a + 1 : 3 * k.a;
    double qkv = k.T * k.qkv * k.d * k.a, mlp = moe ? moe_activations(c, &k, swiglu) : swiglu * k.T * k.ffn;
    double os = c->p_head > 1 || fp8 ? k.T * k.H * k.d * (fp8 ? 1 : k.a) : 0; /* P_h = 1 aliases O */
    double qh = c->p_head > 1 ? k.Ns * (k.hq + 2 * k.kvh) * k.d * k.a : 0;    /* head-sharded q|kv */
    /* MLA's latents (Megatron-Core's multi_latent_attention.py): the Q and
     * KV down projections' outputs, which their norms keep, and the norms'
     * outputs, which the up projections keep (FP8 under TE), on the rank's
     * T_r tokens */
    const model *m = &c->model;
    double lat = model_mla(m) ? k.Tr * (m->q_lora + m->kv_lora) * (k.a + (fp8 ? 1 : k.a)) : 0;
    /* x and h, and the two RMSNorms' outputs that QKV and gate/up keep
     * for their weight gradients */
    double none = 2 * x + 2 * xq + qkv + qh + os + o + lse + sc + masks + mlp + lat;
    if (policy == RECOMPUTE_NONE) return none;
    double kept = none;
    /* core attention keeps its input (qkv) and its output (the output
     * projection's input: O sequence-sharded, or O itself at P_h = 1) */
    if (c->recompute_modules & RECOMPUTE_MOD_CORE_ATTN) kept -= qh + lse + sc + (c->p_head > 1 ? o : 0);
    /* the MLP keeps its input h; its fused norm's output and SwiGLU go */
    if (c->recompute_modules & RECOMPUTE_MOD_MLP) kept -= xq + mlp;
    return kept;
}

double memory_layer_activations(const config *c, recompute_kind policy)
{
    return block_activations(c, config_moe(c), policy);
}

double memory_block_activations(const config *c, int l, recompute_kind policy)
{
    return block_activations(c, model_block_moe(&c->model, l), policy);
}

/* The mean over the blocks `stage` holds of their activations under
 * policy, and (*most) the largest block's: a mixture of experts' dense
 * blocks keep less than its expert blocks. */
static double stage_block_activations(const config *c, int stage, recompute_kind policy, double *most)
{
    double moe = block_activations(c, config_moe(c), policy), dense = block_activations(c, false, policy);
    int n = pipe_stage_layers(c, stage), e = config_moe(c) ? pipe_stage_moe_blocks(c, stage) : n;
    *most = e > 0 ? moe : dense;
    if (e == n || n == 0) return moe; /* every block alike: as it is, not a mean that rounds */
    return e == 0 ? dense : (e * moe + (n - e) * dense) / n;
}

double memory_attention_buffers(const config *c)
{
    dims k = dims_of(c);
    int lanes = ringgeo_lanes(c);
    bool outer = ringgeo_windows(c) > 1;
    uint64_t t = ringgeo_lane_tokens(c, 0);
    double kv_slot = (double)size_kv_bytes(c, t, c->act_bytes), dkv_slot = (double)size_kv_bytes(c, t, 4);
    double bytes = 0;
    if (c->ring == RING_ALLGATHER && c->p_seq > 1) {
        /* two slots of gathered K/V and of the whole sequence's fp32 dK/dV,
         * for one group of --kv-stride heads, and the final dK/dV */
        double groups = c->kv_stride ? (double)config_kv_heads(c) / c->kv_stride : 1;
        bytes += 2 * (double)size_kv_bytes(c, c->seq, c->act_bytes) / groups;
        bytes += 2 * (double)size_kv_bytes(c, c->seq, 4) / groups + dkv_slot;
    } else if (c->p_seq > 1) {
        bytes += lanes * kv_slot * (2 + (outer ? 2 : 0));
        bytes += lanes * dkv_slot * (5 + (outer ? 4 : 0));
    } else {
        bytes += lanes * dkv_slot; /* DKV_FINAL only: no ring traffic */
    }
    bytes += k.Ns * k.hq * k.d * k.a + (c->attention == ATTN_UNFUSED ? 0 : k.Ns * k.hq * 4);
    /* unfused: the backward's gradients of the probabilities and of the
     * scores, each s x s, alive together around the softmax's backward */
    bytes += 2 * scores(c) * k.a;
    if (c->p_head > 1) bytes += 2 * k.T * (k.H + 2.0 * config_kv_heads_total(c)) * k.d * k.a;
    return bytes;
}

double memory_block_params(const config *c, bool head)
{
    return (double)(head ? model_head_params_tp(&c->model, c->tp) : model_layer_params_tp(&c->model, c->tp));
}

/* ZeRO-3: the most parameters gathered at once, as build.c's bounded
 * prefetch leaves them: prefetch + 1 consecutive blocks of the L layers
 * and the LM head (block L). */
double memory_gathered_params(const config *c)
{
    int L = c->model.layers, w = c->prefetch + 1 < L + 1 ? c->prefetch + 1 : L + 1;
    double lp = memory_block_params(c, false), hp = memory_block_params(c, true);
    /* w blocks without the head, or w - 1 and the head */
    return (w - 1) * lp + (w > L ? hp : hp > lp ? hp : lp);
}

/* ---- reserved: allocator, context, NCCL ---- */

int memory_allocator_parse(const char *s, memory_allocator *out)
{
    if (!strcmp(s, "default"))
        *out = MEMORY_ALLOC_CACHING;
    else if (!strcmp(s, "expandable"))
        *out = MEMORY_ALLOC_EXPANDABLE;
    else
        return -1;
    return 0;
}

const char *memory_allocator_name(memory_allocator a)
{
    return a == MEMORY_ALLOC_EXPANDABLE ? "expandable" : "default";
}

double memory_nccl_collective(int n, bool across_nodes)
{
    if (n <= 1) return 0;
    int conns = 1 + (across_nodes ? 2 : 0); /* ring; tree: parent and child */
    return (double)MEMORY_NCCL_COLL_CHANNELS * conns * MEMORY_NCCL_CONN_BYTES;
}

double memory_nccl_p2p(int nvl, int net)
{
    return ((double)nvl * MEMORY_NCCL_NVL_PEER_CHANNELS + (double)net * MEMORY_NCCL_NET_PEER_CHANNELS) *
           MEMORY_NCCL_CONN_BYTES;
}

void memory_reserve(memory_estimate *e, memory_allocator a)
{
    memory_reserve_factor(e, a == MEMORY_ALLOC_EXPANDABLE ? MEMORY_ALLOC_FACTOR_EXPANDABLE : MEMORY_ALLOC_FACTOR);
}

void memory_reserve_factor(memory_estimate *e, double factor)
{
    e->alloc_factor = factor;
    e->allocator = e->peak * (e->alloc_factor - 1);
    e->context = MEMORY_CONTEXT_BYTES;
    e->reserved = e->peak + e->allocator + e->context + e->nccl;
}

/* The group of `rank` over dims spans more than one node. */
static bool across_nodes(const config *c, const mesh *m, mesh_dims dims, int rank)
{
    /* member by member (mesh_unfold), stopping at the first on another
     * node: a gradient group has thousands, and every layout asks */
    int n = mesh_group_size(m, dims), rep = mesh_fold(m, dims, rank),
        node = config_node(c, mesh_unfold(m, dims, rep, 0));
    for (int i = 1; i < n; i++)
        if (config_node(c, mesh_unfold(m, dims, rep, i)) != node) return true;
    return false;
}

/* p2p bytes to the distinct neighbours k = +-1 (and +-w for the outer
 * ring, w > 1) of rank along d. */
static double p2p_neighbours(const config *c, const mesh *m, mesh_dim d, int rank, int w)
{
    int peers[4], np = 0, nvl = 0, net = 0;
    int steps[4] = {1, -1, w, -w};
    for (int i = 0; i < (w > 1 ? 4 : 2); i++) {
        int p = mesh_shift(m, rank, d, steps[i]);
        bool seen = p == rank;
        for (int j = 0; j < np; j++)
            seen |= peers[j] == p;
        if (seen) continue;
        peers[np++] = p;
        if (config_node(c, p) == config_node(c, rank))
            nvl++;
        else
            net++;
    }
    return memory_nccl_p2p(nvl, net);
}

/* NCCL's buffers of the communicators the first rank of `stage` joins. */
static void nccl_terms(const config *c, int stage, memory_estimate *out)
{
    mesh m = config_mesh(c);
    int coord[MESH_NDIMS] = {0};
    coord[MESH_PP] = stage;
    int r = mesh_rank(&m, coord);
    mesh_dims tp = MESH_DIMS_TP, seq = MESH_DIMS_SEQ;
    out->nccl_tp = memory_nccl_collective(c->tp, across_nodes(c, &m, tp, r));
    /* the ring's send/recv to its neighbours (the outer ring's too); the
     * all-gather ring mode gathers with a collective instead */
    if (c->ring == RING_ALLGATHER)
        out->nccl_cp = memory_nccl_collective(c->p_seq, across_nodes(c, &m, seq, r));
    else
        out->nccl_cp = mesh_on(&m, MESH_SEQ) ? p2p_neighbours(c, &m, MESH_SEQ, r, c->window) : 0;
    /* Ulysses' all-to-all connects every other member of its group */
    out->nccl_ulysses = 0;
    if (mesh_on(&m, MESH_HEAD)) {
        int n = c->p_head, nvl = 0;
        for (int k = 1; k < n; k++)
            nvl += config_node(c, mesh_shift(&m, r, MESH_HEAD, k)) == config_node(c, r);
        out->nccl_ulysses = memory_nccl_p2p(nvl, n - 1 - nvl);
    }
    int ng = mesh_group_size(&m, CONFIG_GRAD_DIMS);
    out->nccl_grad = memory_nccl_collective(ng, across_nodes(c, &m, CONFIG_GRAD_DIMS, r));
    out->nccl_pp = mesh_on(&m, MESH_PP) ? p2p_neighbours(c, &m, MESH_PP, r, 1) : 0;
    out->nccl = out->nccl_tp + out->nccl_cp + out->nccl_ulysses + out->nccl_grad + out->nccl_pp;
}

/* The routed experts' weights of the stage's blocks on one rank (E/ep of
 * them, TP shards), sharded by ZeRO over the expert-data-parallel group. */
static double stage_expert_params(const config *c, int stage)
{
    return (double)pipe_stage_moe_blocks(c, stage) * (double)config_ep_expert_params(c);
}

static void model_states(const config *c, int stage, memory_estimate *out)
{
    mesh m = config_mesh(c);
    double psi = (double)pipe_stage_params(c, stage), n = (double)mesh_group_size(&m, CONFIG_GRAD_DIMS);
    double psi_e = stage_expert_params(c, stage), n_e = config_edp(c);
    out->weights = 2 * (psi + psi_e);
    /* Megatron's main-gradient buffer, in the reduction's dtype */
    out->grads = config_grad_bytes(c) * (c->zero >= 2 ? psi / n + psi_e / n_e : psi + psi_e);
    out->optimizer = 12 * (c->zero >= 1 ? psi / n + psi_e / n_e : psi + psi_e);
    out->gathered = c->zero >= 3 ? 2 * memory_gathered_params(c) : 0;
    if (c->zero >= 3) out->weights = 2 * psi / n + out->gathered;
    out->fp8_weights = memory_fp8_weight_bytes(c, stage);
}

double memory_fp8_weight_bytes(const config *c, int stage)
{
    if (c->precision == PRECISION_BF16) return 0;
    double blocks = (double)pipe_stage_block_params(c, stage) + stage_expert_params(c, stage);
    if (c->zero >= 3 && memory_gathered_params(c) < blocks) blocks = memory_gathered_params(c);
    return blocks * (c->precision == PRECISION_MXFP8 ? 2 + 2.0 / 32 : 2);
}

double memory_sp_gathered(const config *c)
{
    return config_sp(c) ? 2 * dims_of(c).T * c->model.hidden * c->act_bytes : 0;
}

double memory_lm_head_bytes(const config *c)
{
    double vocab = (double)config_tp_vocab(c);
    /* fused: the logits + one fp32 buffer, the softmax and then its
     * gradient computed in place (Megatron's VocabParallelCrossEntropy)
     * and cast back. eager: forward, the logits, their fp32 copy and the
     * log-probabilities log_softmax saves; backward (torchtitan deletes the
     * logits first), the saved log-probabilities, nll_loss's dense fp32
     * gradient and log_softmax's gradient of its input, 12 bytes */
    double per = c->cross_entropy == CE_EAGER ? fmax(c->act_bytes + 8.0, 12.0) : c->act_bytes + 4.0;
    return dims_of(c).T * vocab * per;
}

void memory_estimate_stage(const config *c, int stage, memory_estimate *out)
{
    model_states(c, stage, out);
    out->stage = stage;
    int n = pipe_chunk_layers(c, stage), reruns, inputs, group;
    recompute_chunk(c, n, &reruns, &inputs, &group);
    double none_most, kept_most;
    double none = stage_block_activations(c, stage, RECOMPUTE_NONE, &none_most),
           kept = stage_block_activations(c, stage, c->recompute, &kept_most);
    /* full: the checkpointed inputs and the blocks not re-run (block method) */
    double chunk = c->recompute == RECOMPUTE_FULL ? inputs * kept + (n - reruns) * none : n * kept;
    out->act_per_layer = chunk / n;
    out->in_flight = pipe_peak_in_flight(c, stage);
    out->activations = pipe_peak_layers_in_flight(c, stage) * out->act_per_layer;
    /* the gradients of one block, and what a re-run regenerates beside what
     * it kept: group blocks' activations at once (uniform's N) */
    out->working = none_most + (group > 0 ? group * none_most - kept_most : 0);
    /* sequence parallelism: a layer's backward holds two gathered (T, hidden)
     * tensors at once (the input re-gathered and the output gradient) */
    out->working += memory_sp_gathered(c);
    out->attn_buffers = memory_attention_buffers(c);
    bool head = c->pp == 1 || stage == c->pp - 1;
    out->lm_head = head ? memory_lm_head_bytes(c) : 0;
    double transient = out->working + out->attn_buffers;
    if (out->lm_head > transient) transient = out->lm_head;
    out->workspace = MEMORY_WORKSPACE_BYTES;
    out->peak =
        out->weights + out->fp8_weights + out->grads + out->optimizer + out->workspace + out->activations + transient;
    nccl_terms(c, stage, out);
    memory_reserve(out, MEMORY_ALLOC_CACHING);
}

void memory_estimate_config(const config *c, memory_estimate *out)
{
    memory_estimate_stage(c, 0, out);
    for (int s = 1; s < c->pp; s++) {
        memory_estimate e;
        memory_estimate_stage(c, s, &e);
        if (e.reserved > out->reserved) *out = e;
    }
}

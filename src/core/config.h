/*
 * config: everything that determines a DAG — model, sequence, mesh,
 * placement, partition, ring mode, scope, training knobs — plus the rank
 * geometry derived from it (rank <-> (head index, ring index) <-> (node, gpu))
 * and the token chunks each ring rank owns.
 *
 * A config is a plain value. config_validate() is the single place that
 * rejects invalid combinations; every other module may assume a validated
 * config. Serialisation (JSON, hash) is declared here too so that all
 * backends describe a run identically. One interface, a file per concern:
 *   config.c           defaults, the placement orders, geometry
 *   config_validate.c  config_validate (reads pipeline.h's layer split)
 *   config_json.c      config_to_json, config_from_json, config_hash
 *   config_describe.c  config_describe, config_layout_name
 *   knobs.c            the knobs (knobs.h) and the enums' spellings
 *
 * Layer: core (libc and jansson only: it knows no predictor, measurement or backend).
 */
#ifndef LOONG_CONFIG_H
#define LOONG_CONFIG_H

#include <jansson.h>

#include "docs.h"
#include "mesh.h"
#include "model.h"
#include "placement.h"

/* The two named mesh orders (config_set_placement): head-first is
 * tp-head-seq-pp-dp (a ring index's P_h ranks adjacent), context-first
 * tp-seq-head-pp-dp (a head group's P_s ring ranks adjacent). */
typedef enum { PLACE_HEAD_FIRST, PLACE_CONTEXT_FIRST } placement_kind;
/* How the ring indices share the tokens (shard.h says which positions). */
typedef enum { PART_CONTIGUOUS, PART_ZIGZAG, PART_DOC_CONTIGUOUS, PART_DOC_ZIGZAG, PART_BALANCED } partition_kind;
/* How KV moves between the P_s context ranks: rings (single, dual, double)
 * or one all-gather per layer (allgather, Llama 3's context parallelism). */
typedef enum { RING_SINGLE, RING_DUAL, RING_DOUBLE, RING_ALLGATHER } ring_kind;
typedef enum { SCOPE_ATTN_FWD, SCOPE_ATTN, SCOPE_STEP } scope_kind;
/* Which elementwise kernels fuse (fusion.h): Megatron-Core with Transformer
 * Engine's fused kernels, or none (the unfused PyTorch path). */
typedef enum { FUSIONS_TE, FUSIONS_NONE } fusions_kind;
/* The dtype of the gradient reduction over the gradient group: fp32, as
 * Megatron-LM reduces bf16 runs' gradients unless --grad-reduce-in-bf16
 * (megatron/training/arguments.py sets accumulate_allreduce_grads_in_fp32;
 * NeMo's bf16_mixed grad_reduce_in_fp32, torchtitan's
 * mixed_precision_reduce "float32"), or the activations' dtype. */
typedef enum { GRAD_REDUCE_FP32, GRAD_REDUCE_BF16 } grad_reduce_kind;
/* The loss's cross-entropy: fused (Megatron's vocab-parallel kernel, in
 * place on one fp32 copy of the logits; TE's fused one; a torch.compile'd
 * loss), or eager, PyTorch's F.cross_entropy on an fp32 copy without the
 * compiler (torchtitan's before it compiled the loss), whose autograd
 * keeps the log-probabilities and, backward, their gradient and the
 * logits' apart. */
typedef enum { CE_FUSED, CE_EAGER } cross_entropy_kind;
/* The attention kernel (elementwise.h): FlashAttention (the scores never
 * leave the chip), or unfused, the materialised-softmax attention of
 * Megatron's CoreAttention before FlashAttention: QK^T and PV batched
 * GEMMs, the scaled masked softmax and the attention dropout over the
 * s x s scores. */
typedef enum { ATTN_FLASH, ATTN_UNFUSED } attention_kind;
/* The GEMMs' precision (Transformer Engine's recipes; quant.h): bf16, or
 * FP8 with delayed or current per-tensor scaling, or MXFP8's 1 x 32 block
 * scaling (Blackwell). */
typedef enum { PRECISION_BF16, PRECISION_FP8_DELAYED, PRECISION_FP8_CURRENT, PRECISION_MXFP8 } precision_kind;
/* Activation recompute (recompute.h): none; Megatron-Core's selective (of
 * the recompute modules); LoongTrain's Selective Checkpoint++; full. In
 * this order each keeps fewer activations than the one before. */
typedef enum { RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_SCPP, RECOMPUTE_FULL } recompute_kind;
/* A mixture of experts' token dispatcher (Megatron's --moe-token-dispatcher-type):
 * all-to-alls over the EP group, or an all-gather and a reduce-scatter over
 * the expert-TP x EP group (build_ep.c). */
typedef enum { DISPATCH_ALLTOALL, DISPATCH_ALLGATHER } dispatcher_kind;
/* Megatron-Core's --recompute-modules that loong models (bits). */
#define RECOMPUTE_MOD_CORE_ATTN 1
#define RECOMPUTE_MOD_MLP       2
/* Megatron's --recompute-method of full recompute. */
typedef enum { RECOMPUTE_UNIFORM, RECOMPUTE_BLOCK } recompute_method_kind;
/* A forced NCCL algorithm and protocol for the collectives (NCCL_ALGO,
 * NCCL_PROTO; model/nccl.h numbers them from 0 in this order, auto = -1). */
typedef enum { COLL_ALGO_AUTO, COLL_ALGO_RING, COLL_ALGO_TREE, COLL_ALGO_NVLS } coll_algo_kind;
/* The pipeline schedule (pipeline.h says each one's order). */
typedef enum { SCHED_1F1B, SCHED_GPIPE, SCHED_INTERLEAVED } schedule_kind;
typedef enum { COLL_PROTO_AUTO, COLL_PROTO_SIMPLE, COLL_PROTO_LL, COLL_PROTO_LL128 } coll_proto_kind;

/* The bound of m x v, a stage's passes each way (2^20: a schedule stays small). */
#define CONFIG_MAX_MICRO_BATCHES (1 << 20)

/* --prefetch's bound (a model has fewer blocks; more gathers everything). */
#define CONFIG_MAX_PREFETCH 1024

/* The most ranks of a mesh, all replicas: a bound that keeps every task
 * field and rank index in range. */
#define CONFIG_MAX_RANKS 65536

typedef struct routing_hist routing_hist; /* config_ep.c */

typedef struct config {
    model model;
    uint64_t seq; /* S: tokens per sample */
    int batch;    /* B: samples per micro-batch */
    /* The degrees of the device mesh by name (torchtitan's ParallelDims);
     * config_mesh() builds the mesh from them and the order. */
    int tp;                     /* tensor-parallel degree (Megatron's TP; 1: none) */
    bool sequence_parallel;     /* tp > 1: Megatron's sequence parallelism (norm/residual on S/(cp*tp)) */
    bool tp_overlap;            /* tp > 1: TP collectives overlap their GEMMs (TE's ring-exchange) */
    int p_head;                 /* P_h: head-parallel degree (all-to-all group) */
    int p_seq;                  /* P_s: sequence-parallel degree (ring) */
    int dp;                     /* data-parallel replicas; the DAG holds one (ranks 0..P-1) */
    int pp;                     /* pipeline stages (1: none) */
    int ep;                     /* expert parallelism: ranks a block's experts are spread over (1: none; config_ep.c) */
    int etp;                    /* expert TP, Megatron's --expert-tensor-parallel-size (0: tp, its default) */
    bool shared_overlap;        /* the shared experts overlap the dispatch and combine (--moe-shared-expert-overlap) */
    dispatcher_kind dispatcher; /* the experts' token dispatcher */
    double routing_zipf;        /* the routed tokens' draw over the experts: 0 balanced, else Zipf's exponent */
    const routing_hist *routing_hist; /* or a per-expert histogram (config_ep.c; NULL: none) */
    double capacity;            /* an expert's capacity, x its mean tokens (Megatron's capacity factor); 0: dropless */
    int micro_batches;          /* m: micro-batches per step and pipeline (gradient accumulation at pp 1) */
    schedule_kind schedule;     /* the pipeline schedule */
    int vpp;                    /* v: model chunks per stage (interleaved; else 1) */
    int pp_first, pp_last;      /* layers of the first and last stage (0: an even share; pipeline.h) */
    bool pp_embed_slot;         /* the embedding counts as a layer in the pipeline split (pipeline.h) */
    bool pp_loss_slot;          /* the LM head and loss count as a layer in the pipeline split */
    mesh_dim order[MESH_NDIMS]; /* the mesh's order, fastest first (the placement knob) */
    char strategy[32];          /* preset name the knobs came from (informational) */
    partition_kind partition;
    ring_kind ring;
    int window;          /* w: double-ring window; == p_seq for a single ring */
    int kv_stride;       /* allgather: KV heads per gather (0: all of the rank's) */
    bool kv_replication; /* replicate KV heads when P_h > H_kv (head all-to-all) or tp > H_kv (TP shards) */
    scope_kind scope;
    int gpus_per_node;
    recompute_kind recompute;
    int recompute_modules;                  /* selective: RECOMPUTE_MOD_* bits (core_attn) */
    recompute_method_kind recompute_method; /* full: uniform or block (uniform) */
    int recompute_layers;                   /* full: --recompute-num-layers N (1) */
    int zero;                               /* ZeRO stage 0..3 for the gradient reduction */
    int prefetch;         /* ZeRO-3: blocks gathered ahead of the computing one (FSDP's: 1), <= CONFIG_MAX_PREFETCH */
    int act_bytes;        /* bytes per activation element: 2 (bf16) or 4 (fp32) */
    fusions_kind fusions; /* which elementwise kernels fuse (fusion.h): te */
    grad_reduce_kind grad_reduce;     /* the gradient collectives' dtype: fp32 */
    cross_entropy_kind cross_entropy; /* the loss's kernel and its saved tensors: fused */
    attention_kind attention;         /* the attention kernel: flash */
    double attention_dropout;         /* Megatron's --attention-dropout, on the softmax's output (unfused only): 0 */
    double hidden_dropout;            /* Megatron's --hidden-dropout, in each residual's bias-dropout-add: 0 */
    precision_kind precision;         /* the block GEMMs' precision: bf16 */
    coll_algo_kind nccl_algo;         /* forced NCCL algorithm, or auto (the tuner's) */
    coll_proto_kind nccl_proto;       /* forced NCCL protocol, or auto */
    const doc_layout *docs;           /* the documents packed into each sample (docs.h); NULL: one */
} config;

/* Defaults: llama3-8b, S=128K, B=1, loongtrain 8x8 head-first, dp 1, scope
 * step, 8 GPUs per node, no recompute, ZeRO 1, bf16. */
void config_defaults(config *c);

/* 0 when --prefetch's value is within [0, CONFIG_MAX_PREFETCH], else -1
 * with the one-line error (config_validate and plan's ZeRO-3 layouts). */
int config_check_prefetch(int prefetch, char err[LOONG_ERRLEN]);

/* Reject any invalid combination with a message naming the constraint and a
 * fix. Also proves that the largest FLOP and byte totals of the DAG fit in 64
 * bits, so builders may use plain arithmetic afterwards. Returns 0 or -1. */
int config_validate(const config *c, char err[LOONG_ERRLEN]);

/* Peak bytes per task while a DAG is built (tasks, dependencies, stream
 * index; how it was measured: docs/reliability.md, "Limits"): the memory
 * estimate of config_validate's task bound and of dag_build. */
#define DAG_BYTES_PER_TASK 112

/* ---- enum <-> name (names are the CLI and JSON spellings; knobs.c) ---- */
const char *placement_name(placement_kind p);
const char *partition_name(partition_kind p);
const char *ring_name(ring_kind r);
const char *scope_name(scope_kind s);
const char *recompute_name(recompute_kind r);
int placement_parse(const char *s, placement_kind *out);
int partition_parse(const char *s, partition_kind *out);
int ring_parse(const char *s, ring_kind *out);
int scope_parse(const char *s, scope_kind *out);
int recompute_parse(const char *s, recompute_kind *out);
const char *schedule_name(schedule_kind s);
/* The short spellings of config_layout_name ("hf", "zz", "ag"): static
 * strings, never NULL for a valid value. */
const char *placement_abbrev(placement_kind p);
const char *partition_abbrev(partition_kind p);
const char *ring_abbrev(ring_kind r);

/* ---- the mesh ---- */
/* The order a placement name stands for, fastest first ("tp-head-seq-pp-dp"). */
const char *placement_order(placement_kind p);
/* Set the order to a named one. */
void config_set_placement(config *c, placement_kind p);
/* The named order nearest c's: head-first when head varies faster than seq. */
placement_kind config_placement(const config *c);
/* The placement as the knob spells it: the order's name ("head-first",
 * "context-first") or, for another order, the order ("seq-tp-head-pp-dp"). */
void config_placement_text(const config *c, char *buf, size_t len);
/* loong's ranks: degrees tp, head P_h, seq P_s, pp, dp, in c's order with
 * dp moved last. A DAG holds replica 0 as ranks 0..P-1 and replica k as
 * k*P..(k+1)*P-1, whatever order the GPUs take (config_gpu_of). */
mesh config_mesh(const config *c);
/* The GPUs' mesh: the same degrees in c's order as given, so that a rank
 * of it is a GPU's index (node-major, placement.h). It differs from
 * config_mesh only when dp is not the slowest dimension (Megatron-Core's
 * default order tp-cp-ep-dp-pp puts a stage's replicas side by side). */
mesh config_gpu_mesh(const config *c);
/* The GPU loong's rank (any replica's: config_mesh) runs on, a rank of
 * config_gpu_mesh; the rank itself unless dp varies faster than pp. And
 * its inverse. */
int config_gpu_of(const config *c, int rank);
int config_rank_of_gpu(const config *c, int gpu);
/* The TP group: the ranks that share one layer's weights as shards. */
#define CONFIG_TP_DIMS MESH_DIMS_TP
/* The dimensions the gradients are reduced over and ZeRO shards over: the
 * ranks that hold the same parameters (not tp's or pp's, which hold
 * different ones). The DAG's gradient groups span them; their dp part
 * lies outside the DAG, which holds one replica. */
#define CONFIG_GRAD_DIMS MESH_DIMS_GRAD

/* ---- geometry (valid config assumed) ---- */
/* Context-parallel ranks, the ranks a sample's tokens are shared over:
 * P = P_h * P_s. */
static inline int config_cp(const config *c) { return c->p_head * c->p_seq; }
/* Ranks of the DAG, one data-parallel replica: tp * P * pp. */
static inline int config_ranks(const config *c) { return c->tp * config_cp(c) * c->pp; }
/* Ranks of the whole mesh: dp * tp * P * pp. */
static inline int config_world(const config *c) { return c->dp * config_ranks(c); }
/* Rank of mesh coordinates (head index h in [0,P_h), ring index s in
 * [0,P_s)) in replica 0, TP rank 0. */
int config_rank_of(const config *c, int h, int s);
/* The rank at head index h and ring index s that shares rank's other
 * coordinates (its TP rank and replica): a ring or all-to-all peer. */
int config_rank_at(const config *c, int rank, int h, int s);
/* Mesh coordinates of rank (of any replica). */
void config_coords(const config *c, int rank, int *h, int *s);
/* ---- tensor parallelism (config_tp.c) ---- */
/* The TP rank of rank (0 .. tp-1). */
int config_tp_rank(const config *c, int rank);
/* Nodes the TP group of rank 0 spans: 1 when TP stays on NVLink. */
int config_tp_nodes(const config *c);
/* Heads of one TP shard (Megatron's column-parallel QKV): H / tp query
 * heads; H_kv / tp KV heads, or 1 when tp > H_kv (KV replication over TP:
 * tp a multiple of H_kv, config_validate). */
int config_tp_heads(const config *c);
int config_tp_kv_heads(const config *c);
/* Shards holding each KV head: tp / H_kv when tp > H_kv, else 1. */
int config_tp_kv_repl(const config *c);
/* The first KV head of TP rank t's shard: t * H_kv / tp (floor). */
int config_tp_kv_head0(const config *c, int t);
/* Megatron's sequence parallelism in effect: tp > 1 with it on, so the
 * norms, dropouts and residual adds run on 1/tp of the rows. */
bool config_sp(const config *c);
/* The rows of T tokens one TP rank holds outside the TP region: T / tp
 * under sequence parallelism, else T. */
uint64_t config_sp_rows(const config *c, uint64_t T);
/* The MLP's width on one shard (column-parallel up/gate): ffn / tp
 * (config_validate: tp divides ffn). */
uint64_t config_tp_ffn(const config *c);
/* The attention output's width on one shard (the row-parallel output
 * projection's input): H d / tp (config_validate: tp divides H). */
uint64_t config_tp_attn_width(const config *c);
/* The vocabulary rows of one shard (vocab-parallel embedding and LM head):
 * ceil(V / tp). */
uint64_t config_tp_vocab(const config *c);
/* ---- expert parallelism (config_ep.c) ---- */
/* Whether the blocks' MLPs are mixtures of experts (model.h). */
bool config_moe(const config *c);
/* --routing: balanced, zipf:S, hist:W0,W1,... (a weight per expert, in
 * expert order: counts or shares, each >= 0, some > 0) or FILE, a text
 * file of those weights (whitespace or newlines apart, # comments), e.g.
 * the tokens each expert received in a measured step. A histogram is
 * interned for the process (one pointer per distinct list of weights).
 * config_routing_text: a short spelling for tables ("balanced",
 * "zipf:1.2", "hist:8 experts"); config_routing_spec: the full one that
 * --routing parses back (malloc'd); config_routing_parse: 0, or -1 with
 * the one-line error. */
void config_routing_text(const config *c, char *buf, size_t len);
char *config_routing_spec(const config *c);
int config_routing_parse(config *c, const char *text, char err[LOONG_ERRLEN]);
/* Whether the routing is skewed (zipf or a histogram), and the experts a
 * histogram weighs (0: none). */
bool config_routing_skewed(const config *c);
int config_routing_hist_experts(const config *c);
/* --capacity-factor's spelling ("none", or C) and its parser. */
void config_capacity_text(const config *c, char *buf, size_t len);
int config_capacity_parse(config *c, const char *text, char err[LOONG_ERRLEN]);
/* Expert TP (--expert-tp; Megatron's --expert-tensor-parallel-size): etp,
 * which divides tp, or tp when not given. Whether the experts' groups
 * span TP ranks (etp < tp on a mixture of experts: the TP ranks then run
 * different expert programs, so loong sim cannot fold tp), and the
 * experts' ranks of one replica's stage, span = (tp / etp) P. */
int config_etp(const config *c);
bool config_ep_spans_tp(const config *c);
int config_ep_span(const config *c);
/* Why the ring ranks of a context group run different programs, or NULL
 * when they run the same tasks in the same order, differing only in which
 * half of their chunks a ring step's attention block takes (its queries
 * or its keys: the same FLOPs): the zigzag partition of one document, on
 * a single, double or all-gather ring, no experts' groups over the
 * context ranks, and every ring's hops alike (its ranks all on one node,
 * or each on its own). What loong sim's ring fold (--fold seq) needs. */
const char *config_ring_asymmetry(const config *c);
/* Whether loong sim cannot fold tp: a mixture of experts under TP whose
 * expert groups span TP ranks (expert TP below TP, or the all-gather
 * dispatcher's expert-TP x EP group). */
bool config_ep_breaks_tp_fold(const config *c);
/* The EP group: ep consecutive ranks in the experts' order (Megatron-
 * Core's expert rank generator, order tp-ep-dp: config_ep.c), at one
 * expert-TP rank: within a replica when ep divides span, else across
 * ep / span replicas. At expert TP = TP, ep consecutive ranks of the
 * gradient group (the context ranks, then the replicas). Rank's index in
 * it, 0 .. ep-1, which holds experts [i E/ep, (i+1) E/ep). */
int config_ep_rank(const config *c, int rank);
/* Rank's EP group, expert-data-parallel group, or expert-TP x EP group
 * (the all-gather dispatcher's: the EP group's ranks at every expert-TP
 * rank): its members in rank's replica into out (config_ranks(c) long at
 * most), in the experts' order, their count returned; the replicas it
 * spans as dag_group_replicas gives them (0, 0: its own replica for a
 * group within one, every replica for an expert-data-parallel group). */
typedef enum { EP_GROUP, EP_GROUP_EDP, EP_GROUP_TP_EP } ep_group_kind;
int config_ep_members(const config *c, int rank, ep_group_kind kind, int *out, int *rep_stride, int *rep_count);
/* Experts one rank holds: E / ep (config_validate: ep divides E). */
int config_ep_local_experts(const config *c);
/* Expert-data-parallel ranks, all replicas: dp span / ep, the ranks
 * holding the same experts, over which their gradients are reduced. */
int config_edp(const config *c);
/* One expert's SwiGLU width on an expert-TP shard: expert_ffn / etp; the
 * shared experts' together (a dense MLP on attention's TP): shared_ffn /
 * tp. */
uint64_t config_ep_expert_ffn(const config *c);
uint64_t config_ep_shared_ffn(const config *c);
/* The routed experts' weights one rank holds of one block: E/ep experts
 * x 3 x hidden x expert_ffn / etp. */
uint64_t config_ep_expert_params(const config *c);
/* The share of the routed tokens that EP rank i's experts draw: 1/ep when
 * balanced; under zipf:S, sum over its experts e of (e+1)^-S over the sum
 * over all experts. */
double config_ep_share(const config *c, int ep_rank);
/* Per micro-batch and block, with R = T' k routed rows per rank (T' =
 * config_sp_rows of the rank's tokens, k = top-k), every rank drawing
 * alike: the rows EP rank i receives in the dispatch, ep R share(i)
 * (its own included); the rows it sends to the others, R (1 - share(i));
 * and the rows its experts compute, the received ones gathered over
 * expert TP under sequence parallelism (x etp). Each pair's R share(j) is rounded
 * once to whole rows, so the group's dispatched rows are its combined. */
uint64_t config_ep_recv_rows(const config *c, int ep_rank);
/* The rows every rank sends EP rank i's experts, R share(i), rounded once
 * per pair, so that what the group dispatches is what it combines. With
 * a capacity factor C each expert e takes at most ceil(C R / E) of a
 * rank's rows (Megatron's capacity, per rank), the rest dropped: the sum
 * over i's experts of min(R share(e), that). */
uint64_t config_ep_pair_rows(const config *c, int ep_rank);
uint64_t config_ep_send_rows(const config *c, int ep_rank);
/* The rows EP rank i sends back in the combine: the received ones but its
 * own, ep R share(i) - R share(i). */
uint64_t config_ep_return_rows(const config *c, int ep_rank);
uint64_t config_ep_expert_rows(const config *c, int ep_rank);
/* The experts of the token at position pos of a sample in block layer,
 * top_k distinct ones into experts[], as the executor routes (loong exec;
 * the DAG and the simulator use the shares' expected rows): balanced,
 * choice j goes to expert (pos k + j + layer) mod E, so a sample of S
 * tokens sends every expert exactly S k / E rows when E divides S k;
 * skewed (zipf:S or a histogram), k experts drawn without replacement
 * with probability proportional to their shares, from a hash of (seed,
 * layer, pos, j): the same on every rank and run, another in every block. */
void config_ep_route(const config *c, uint64_t seed, int layer, uint64_t pos, int *experts);
/* The slowest EP rank's rows over the mean: ep x max share (1: balanced;
 * with a capacity factor, of the rows kept). */
double config_ep_imbalance(const config *c);

/* Where loong's rank runs (placement.h, on its GPU config_gpu_of), on
 * nodes of c->gpus_per_node GPUs: its node and its GPU slot there; and the
 * placement itself (one NIC per node: a config names no platform, so no
 * NIC question is asked of it). */
static inline placement config_hw_placement(const config *c) { return placement_make(c->gpus_per_node, 1, 0); }
static inline int config_node(const config *c, int rank)
{
    placement p = config_hw_placement(c);
    return placement_node(&p, config_gpu_of(c, rank));
}
static inline int config_gpu(const config *c, int rank)
{
    placement p = config_hw_placement(c);
    return placement_gpu(&p, config_gpu_of(c, rank));
}
/* Query heads and KV heads held per rank after the head all-to-all, of its
 * TP shard's H/tp and H_kv/tp; KV heads count replicas
 * (max(H_kv/tp, P_h) / P_h). */
int config_q_heads(const config *c);
int config_kv_heads(const config *c);
/* KV heads of the whole head group, replicas included: max(H_kv/tp, P_h). */
int config_kv_heads_total(const config *c);
/* KV replication factor: P_h / (H_kv/tp) when replicating, else 1. */
int config_kv_repl(const config *c);
/* Tokens per chunk (S / nchunks): every part of every ring index holds this many. */
uint64_t config_chunk_tokens(const config *c);
/* Parts a ring index owns: 2 (A and B) under zigzag, doc-zigzag and
 * balanced, else 1. Which positions a part holds: shard.h. */
int config_parts(const config *c);
/* Tokens per rank for the sequence-sharded GEMMs: B * S / P (a TP group
 * shares them: each GEMM takes all T with 1/tp of the weights). */
uint64_t config_local_tokens(const config *c);

/* Bytes per element of a gradient collective (reduce-scatter, all-reduce
 * over the gradient group): 4 with --grad-reduce fp32, else the
 * activations' act_bytes. Parameter all-gathers move act_bytes. */
int config_grad_bytes(const config *c);
/* Tokens of one training step of the DAG's replica: B * S * m. */
static inline double config_step_tokens(const config *c)
{
    return (double)c->batch * (double)c->seq * (double)c->micro_batches;
}

/* ---- serialisation ---- */
/* New JSON object describing c, one member per knob (caller owns it). */
json_t *config_to_json(const config *c);
/* Parse what config_to_json wrote, then config_validate(). Returns 0 or -1
 * with a message naming the knob. */
int config_from_json(const json_t *j, config *c, char err[LOONG_ERRLEN]);
/* 64-bit FNV-1a hash of the canonical JSON; equal configs hash equal. */
uint64_t config_hash(const config *c);
/* One line for table headers: "llama3-8b S=128K B=1 mesh 8x8 loongtrain ...". */
void config_describe(const config *c, char *buf, size_t len);
/* The short layout name of `loong plan`: "[dpN*]PhxPs [hf|cf] zz|ct RING
 * [w=W] [kv-repl|no-repl]", e.g. "8x8 hf zz double w=4". */
void config_layout_name(const config *c, char *buf, size_t len);

#endif

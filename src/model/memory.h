/*
 * memory: the planner's per-rank peak memory model (OOM prediction). It
 * counts what a training step of a validated config holds on one GPU, in
 * bytes, from closed forms — it never builds a DAG — as two peaks, the two
 * a user reads off a real run:
 *
 *   allocated  the tensors (torch.cuda.max_memory_allocated): the terms
 *              below, with Megatron's buffers (fp32 main gradients, fp32
 *              master weights, the cuBLAS and TE workspaces, the fp32 loss);
 *   reserved   what the GPU reports in use (nvidia-smi, gpustat): allocated
 *              x the caching allocator's factor + the CUDA context + NCCL's
 *              buffers of every communicator the rank joins (memory_reserve).
 *
 * The planner decides fit on reserved (plan.h). memtrack.h places these
 * terms on a timed DAG: the memory timeline of `loong sim --trace-memory`.
 *
 * Notation: Ψ = model_params_tp(), the parameters of one TP rank's shard
 * (Megatron: weights, gradients and optimizer state divided by tp, norms
 * replicated), N ranks over which ZeRO shards: the size
 * of the gradient group (CONFIG_GRAD_DIMS of the mesh: the P context-
 * parallel ranks of each of the dp replicas), a = act_bytes, T = B*S/P
 * tokens per rank (sequence-sharded), N_s = B*S/P_s tokens per ring rank
 * (head-sharded), hq = H/P_h query heads and kvh = config_kv_heads() KV
 * heads (replicas included) per rank.
 *
 *   model states (mixed precision, Adam, as Megatron keeps them: bf16
 *   weights 2Ψ, the DDP buffer of fp32 main gradients 4Ψ
 *   (--accumulate-allreduce-grads-in-fp32, the default with --bf16; 2Ψ
 *   with --grad-reduce bf16, config_grad_bytes; its buckets are views of
 *   the one buffer, so they add no bytes), fp32
 *   master weights + momentum + variance 12Ψ: 18 bytes per parameter, the
 *   table of Megatron-LM's docs/source/api-guide/dist_optimizer.md; Ψ of the
 *   rank's pipeline stage). Stage 1 (Megatron's distributed optimizer)
 *   shards the optimizer (12Ψ/N: its 6 + 12/d), stage 2 also the gradients
 *   (4Ψ/N), stage 3 also the weights (2Ψ/N plus the gathered blocks,
 *   memory_gathered_params).
 *
 *   workspaces: cuBLAS's on the compute stream, 32 MiB on Hopper (PyTorch's
 *   default CUBLAS_WORKSPACE_CONFIG :4096:8, CUDA semantics docs), and
 *   TransformerEngine's GEMM workspace, 32 MiB on sm90+
 *   (transformer_engine/pytorch/module/base.py
 *   get_cublas_workspace_size_bytes): MEMORY_WORKSPACE_BYTES.
 *
 *   Tensor parallelism (Korthikanti et al. 2022, arXiv 2205.05198, Table 2,
 *   with S replaced by the T tokens a rank holds under CP): every tensor
 *   inside attention and the MLP holds the TP shard's heads or ffn/tp
 *   columns; x and h (the block and MLP inputs) and their norms' outputs
 *   (the paper's replicated "10 sbh", less its dropout masks but
 *   under --hidden-dropout) are T/tp rows under sequence parallelism and all T without
 *   it, so with sequence parallelism every term below is divided by tp
 *   (the paper's 34/t) and without it x and h are not (10 + 24/t). H, qkv
 *   and ffn below are the shard's: H/tp, (H + 2H_kv)/tp, ffn/tp.
 *
 *   activations kept per layer for the backward, by recompute policy
 *   (core/recompute.h says what each re-runs):
 *     none:      x (T*hidden), its RMSNorm's output (QKV's input, T*hidden),
 *                qkv (T*(H+2H_kv)*d), the head-sharded q|kv
 *                (N_s*(hq+2kvh)*d), O (N_s*hq*d) and its fp32 LSE (N_s*hq*4),
 *                O sequence-sharded (T*H*d), h (T*hidden) and its RMSNorm's
 *                output (gate's and up's input, T*hidden), SwiGLU gate, up
 *                and product (3*T*ffn); with P_h = 1 the head-sharded
 *                buffers are the sequence-sharded ones (counted once);
 *                Under --attention unfused there is no LSE; the
 *                softmax's output (E*a, E = N_s*hq*S scores) is kept, and
 *                with --attention-dropout its bool mask and the dropped
 *                probabilities (E*(1 + a)): Korthikanti's 5as^2b at a = 2.
 *                With --hidden-dropout the two residual dropouts' bool
 *                masks (2*T*hidden bytes, the paper's "2sbh") too;
 *                With --precision fp8-delayed, fp8-current or mxfp8 the
 *                GEMMs keep their inputs in FP8, 1 byte: the two norms'
 *                outputs, attention's output (a copy beside O at P_h =
 *                1) and the SwiGLU product (layernorm_linear.py, linear.py
 *                and layernorm_mlp.py save the quantized inputs);
 *                under MLA the Q and KV latents and their norms' outputs
 *                (2*T*(q_lora + kv_lora); the norms' outputs in FP8 in FP8 runs);
 *                a mixture of experts' dense blocks keep the dense
 *                MLP's, its expert blocks memory.c's moe_activations;
 *     selective: the "none" set less, for core_attn, what core attention
 *                holds inside (the head-sharded q|kv, O and the LSE; at
 *                P_h = 1 the LSE alone, O being the output projection's
 *                input), and for mlp, the MLP's (its norm's output and the
 *                three SwiGLU tensors);
 *sc++ : x, O and LSE(Selective Checkpoint++ keeps the ring's *output so the recompute pass never re - runs the ring);
 *full : x only;
 per chunk of n blocks, uniform keeps ceil(n / N) * inputs, block keeps min(N, n) inputs and the "none" set of
 *                the other blocks (act_per_layer: the chunk's mean).
 *   working set of the layer being differentiated: its gradient tensors
 *   (as large as the "none" set) plus, under recompute, what the re-run
 *   regenerates beside what was kept: the "none" set of the blocks re-run
 *   together (N under uniform, else 1) less the kept part.

 *   attention working buffers (the DAG's slots, dag.h; the executor
 *   allocates exactly these): per ring lane, KV slots of 2*t*kvh*d*a bytes
 *   with t the lane's tokens (N_s, or N_s/2 per lane of the dual ring): the
 *   prefetch double buffer KV_IN0/1, and KV_OUT0/1 for the double ring's
 *   outer transfer when P_s/w > 1; fp32 dK/dV slots of 2*t*kvh*d*4 bytes:
 *   the block double buffer DKV_BLK0/1, the travelling DKV_IN0/1 and the
 *   result DKV_FINAL, plus DKV_WIN0/1 and DKV_OIN0/1 when P_s/w > 1; one
 *   block output (N_s*hq*d*a + fp32 LSE; unfused: no LSE, and the
 *   backward's two s x s gradients, 2*E*a); and, when P_h > 1, the all-to-all
 *   send and receive staging buffers, each T*(H + 2*max(H_kv, P_h))*d*a. The
 *   dual ring's lanes carry half the tokens each, so its extra is slot
 *   count, not bytes. --ring allgather replaces the ring slots with two
 *   gathered K/V buffers of 2*B*S*(kvh/G)*d*a and two whole-sequence fp32
 *   dK/dV buffers of 2*B*S*(kvh/G)*d*4, G = kvh / --kv-stride groups, plus
 *   the final dK/dV slot.
 *
 *   sequence parallelism also holds two gathered (T, hidden) tensors in
 *   the layer's backward (its input re-gathered, its output's gradient).
 *
 *   LM head (the loss): T*ceil(vocab/tp) logits times a + 4 bytes
 *   (--cross-entropy fused: the logits and one fp32 buffer, the softmax
 *   and its gradient in place) or max(a + 8, 12) (eager: PyTorch's
 *   F.cross_entropy on an fp32 copy, autograd keeping the log-probabilities
 *   and, backward, two more fp32 tensors of the logits' size).
 *
 *   peak = model states + L * kept per layer
 *          + max(LM head, working set + attention buffers).
 *
 *   Pipeline parallelism (pp stages of v chunks, m micro-batches): a
 *   stage's model states are those of its blocks and, on the first, the
 *   embedding, on the last the LM head and final norm (Ψ_stage,
 *   pipe_stage_params); its activations are those of the chunk passes its
 *   schedule holds at once, pipe_peak_in_flight (1F1B: pp - stage passes
 *   of L/pp layers, the 1F1B bound of Narayanan et al. 2021; interleaved:
 *   stage 0 holds (1 + (pp-1)/(pp v)) times that; GPipe: m), each of
 *   L/(pp v) layers kept; the LM head's logits live on the last stage.
 *   So "L * kept per layer" above is in_flight * L/(pp v) * kept.
 *
 * Layer: model (uses core only: no SimGrid, no executor, no measurements).
 */
#ifndef LOONG_MEMORY_H
#define LOONG_MEMORY_H

#include "core/config.h"

typedef enum { MEMORY_ALLOC_CACHING, MEMORY_ALLOC_EXPANDABLE } memory_allocator;

/* --allocator: "default" (PyTorch's caching allocator) | "expandable"
 * (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True). 0, or -1. */
int memory_allocator_parse(const char *s, memory_allocator *out);
const char *memory_allocator_name(memory_allocator a);

/* reserved / allocated of PyTorch's caching allocator: the mean of the six
 * measured ratios real_reserved_gib / real_alloc_gib of SimuMax's B200
 * Megatron runs (MooreThreads/SimuMax docs/b200/b200_release_v1.2_summary
 * .json, Llama3-70B TP 1-8 and DeepSeek-V2 rows: 1.065, 1.030, 1.028,
 * 1.029, 1.069, 1.053; 1.03-1.09 over the file). Expandable segments map
 * physical pages into a segment as it grows (PyTorch CUDA semantics,
 * "expandable_segments"), so blocks are not stranded between segments
 * of fixed sizes: factor 1. */
#define MEMORY_ALLOC_FACTOR            1.05
#define MEMORY_ALLOC_FACTOR_EXPANDABLE 1.0
/* The CUDA context with lazy module loading (CUDA_MODULE_LOADING=LAZY,
 * PyTorch's default since 1.13): 287 MB, against 667 MB eager (measured in
 * pytorch/pytorch PR 86509). */
#define MEMORY_CONTEXT_BYTES 287e6
/* cuBLAS (32 MiB) and TransformerEngine (32 MiB) GEMM workspaces. */
#define MEMORY_WORKSPACE_BYTES (64.0 * 1048576)

/* NCCL's device buffers, per connection: Simple 4 MiB (DEFAULT_BUFFSIZE),
 * LL 8 lines x 512 threads x 8 steps x 16 B = 512 KiB, LL128 120 x 640 x 8
 * x 8 B = 4 800 KiB (src/init.cc defaults): 9.19 MiB, allocated through
 * cuMem in 2 MiB granules, so 10 MiB (the 10485760-byte allocations of
 * NVIDIA/nccl#1685's NCCL_DEBUG_SUBSYS=ALLOC log). */
#define MEMORY_NCCL_CONN_BYTES (10.0 * 1048576)
/* Channels: 16 collective channels on a DGX H100 ("16 coll channels",
 * NVIDIA/nccl#1453's init log); send/recv channels per peer: 32 over
 * NVLink (#1685: channels 00-31 per GPU pair of an all-to-all on 8 H100)
 * and 2 over the network (NCCL_NCHANNELS_PER_NET_PEER, "2 p2p channels per
 * peer" in #1453's log). */
#define MEMORY_NCCL_COLL_CHANNELS     16
#define MEMORY_NCCL_NVL_PEER_CHANNELS 32
#define MEMORY_NCCL_NET_PEER_CHANNELS 2

/* NCCL bytes of one collective communicator (ring: a connection per
 * channel; a group across nodes also connects the double binary tree, a
 * parent and a child per channel): 0 for n <= 1. */
double memory_nccl_collective(int n, bool across_nodes);
/* NCCL bytes of send/recv to `nvl` peers over NVLink and `net` over the
 * network: a connection per channel per peer. */
double memory_nccl_p2p(int nvl, int net);

typedef struct memory_estimate {
    double weights, grads, optimizer; /* model states, bytes per rank */
    double fp8_weights;               /* --precision fp8: TE's FP8 weight copies (memory_fp8_weight_bytes) */
    double gathered;                  /* ZeRO-3: the gathered blocks (part of weights), else 0 */
    double workspace;                 /* cuBLAS + TE GEMM workspaces */
    double act_per_layer;             /* kept for the backward, one layer (a chunk's mean) */
    double in_flight;                 /* chunk passes whose activations the stage keeps at once */
    double activations;               /* in_flight * L/(pp v) * act_per_layer */
    double working;                   /* gradients (+ recompute) of one layer */
    double attn_buffers;              /* ring slots, block output, all-to-all staging */
    double lm_head;                   /* logits, their fp32 copy / gradient */
    double peak;                      /* allocated: the tensors' peak */
    /* reserved = peak x alloc_factor + context + nccl (memory_reserve) */
    double alloc_factor, allocator;                            /* the factor, and peak x (factor - 1) */
    double context;                                            /* the CUDA context */
    double nccl;                                               /* NCCL buffers of the rank's communicators */
    double nccl_tp, nccl_cp, nccl_ulysses, nccl_grad, nccl_pp; /* nccl by communicator */
    double reserved;                                           /* what nvidia-smi reports in use */
    int stage;                                                 /* the pipeline stage it is of */
} memory_estimate;

/* Recompute e's reserved terms for allocator a (memory_estimate_* use the
 * caching allocator): reserved = peak x factor + context + nccl. */
void memory_reserve(memory_estimate *e, memory_allocator a);
/* The same with a measured factor (loong calibrate --kineto fits one from
 * profile_memory traces: loong plan --allocator F). */
void memory_reserve_factor(memory_estimate *e, double factor);

/* Per-rank peak memory of a validated config (ZeRO shards over its
 * gradient group, c->dp * P ranks): of its tightest pipeline stage (the
 * first, usually: it holds the most micro-batches in flight). Never fails. */
void memory_estimate_config(const config *c, memory_estimate *out);
/* The same for the ranks of one stage (0 .. pp-1). */
void memory_estimate_stage(const config *c, int stage, memory_estimate *out);

/* Bytes of the activations one re-run layer keeps under `policy` with
 * c's recompute modules (the table above; full: its input), exposed for
 * tests. */
double memory_layer_activations(const config *c, recompute_kind policy);
/* The same for block l: a mixture of experts' dense blocks
 * (first_k_dense_replace, moe_layer_freq) keep a dense MLP's. */
double memory_block_activations(const config *c, int l, recompute_kind policy);

/* --precision fp8-*, mxfp8: the FP8 copies Transformer Engine keeps of the
 * stage's block weights for the step (its weight cache over the
 * micro-batches): rowwise and columnwise, 1 byte each per parameter, and
 * MXFP8's E8M0 scale per 32 of each (transformer_engine/pytorch/module/
 * base.py, get_weight_workspace; Float8Tensor's data and transpose); the
 * LM head stays bf16. Under ZeRO-3 the gathered blocks' only. 0 under
 * bf16. */
double memory_fp8_weight_bytes(const config *c, int stage);
/* The terms above that the memory timeline (memtrack.h) places on a
 * timed DAG, exposed so that it counts with the same formulas:
 *   memory_attention_buffers  ring slots, block output, all-to-all staging;
 *   memory_sp_gathered        the two gathered (T, hidden) tensors of a
 *                             layer's backward under sequence parallelism
 *                             (0 without);
 *   memory_lm_head_bytes      the loss's transient: the LM head's logits
 *                             and the cross-entropy's fp32 tensors;
 *   memory_block_params       the parameters of one block (head: of the
 *                             weights outside the blocks), one TP shard. */
double memory_attention_buffers(const config *c);
double memory_sp_gathered(const config *c);
double memory_lm_head_bytes(const config *c);
double memory_block_params(const config *c, bool head);
/* ZeRO-3: the most parameter elements gathered at once per rank, the
 * largest prefetch + 1 consecutive blocks of the layers and the LM head
 * (the DAG's bounded prefetch, core/build.c). */
double memory_gathered_params(const config *c);

#endif

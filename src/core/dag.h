/*
 * dag: the deterministic task graph of one configuration — the contract
 * between the core and every backend (DESIGN.md, "The DAG contract").
 *
 * A task runs on one (rank, stream). Tasks on one stream run in id order,
 * like a CUDA stream; `deps` lists the cross-stream events a task waits for
 * (same-stream predecessors are implicit and never listed). A task flagged
 * DAG_F_GROUPED is issued together with the task before it on its stream (an
 * NCCL group: a ring step's send and recv), and the stream moves on when
 * both complete. A send and its recv name each other in `match`; every task
 * of one collective instance carries, in `match`, the id of the instance's
 * first task.
 *
 * Tensor parallelism (tp > 1, Megatron's layer; build.c): GEMMs carry 1/tp
 * of the weight columns (column-parallel QKV, gate, up, LM head) or rows
 * (row-parallel output projection, down) and all T tokens; the TP
 * collectives on STREAM_TP move (T, hidden) activations between the
 * sequence-sharded (T/tp rows, sequence parallelism) or replicated form
 * and the GEMMs'. A reduction of a row-parallel GEMM's partial output
 * (OP_TP_H, OP_TP_Y forward; OP_TP_X, OP_TP_H backward) also adds the
 * residual, which the GEMM adds itself at tp = 1.
 *
 * Sizes: compute tasks carry FLOPs, communication tasks the bytes this rank
 * sends (a recv carries 0; its size is its send's). Attention blocks count
 * 4*q*k*d per head for a full block and half that for a causal diagonal
 * block; their backward counts 2.5x (recompute of P plus four GEMMs, the
 * FlashAttention-2 backward). Under --attention unfused a block is the
 * two batched GEMMs of every (query, key) pair, masked or not (4*q*k*d),
 * and its backward their four (2x; unfused.h). GEMMs count 2*m*n*k, their
 * backward 4*m*n*k.
 *
 * Pipeline parallelism (pp > 1, pipeline.h): a rank runs its stage's
 * layers for m micro-batches in the schedule's order; each task carries
 * its micro-batch, and a stage's activations and their gradients move to
 * the matching rank of the next and previous stage by p2p on STREAM_PP
 * and STREAM_PP_GRAD (T tokens' hidden states, T/tp under sequence
 * parallelism). Gradient collectives follow the last micro-batch.
 *
 * Building is deterministic: the same config gives the same ids.
 * The dag owns all memory; task pointers stay valid until dag_free().
 *
 * Layer: core (libc and jansson only: it knows no predictor, measurement or backend).
 */
#ifndef LOONG_DAG_H
#define LOONG_DAG_H

#include "config.h"

#define DAG_NONE UINT32_MAX

typedef enum {
    TASK_GEMM,
    TASK_ATTN_FWD,
    TASK_ATTN_BWD,
    TASK_MERGE, /* LSE combine of a block's (O, LSE) into the running output */
    TASK_ACC,   /* elementwise fp32 add (travelling dKV, KV-replica gradient sum) */
    /* the step's other memory-bound kernels (elementwise.h): their FLOPs
     * field holds the elements they process, like ACC's */
    TASK_NORM,  /* RMSNorm forward or backward */
    TASK_ROPE,  /* rotary embedding of Q and K */
    TASK_ADD,   /* a residual add (forward) or the sum of a residual's two gradients (backward) */
    TASK_ACT,   /* the MLP's activation (SwiGLU) */
    TASK_EMBED, /* the embedding lookup (forward) or its gradient into the fp32 main grad (backward) */
    TASK_LOSS,  /* the vocab-parallel cross-entropy over the logits */
    /* --attention unfused (unfused.h): the s x s scores' kernels; dims as
     * an attention block's (q tokens, kv tokens, q heads), FLOPs field the
     * scores' elements (all B samples) */
    TASK_SOFTMAX, /* the scaled masked softmax over the scores (forward or backward) */
    TASK_DROPOUT, /* the attention dropout on the softmax's output (forward or backward) */
    TASK_QUANT,   /* --precision fp8-*, mxfp8: a tensor cast to FP8 for a GEMM (quant.h) */
    TASK_OPTIM,   /* the optimizer step over the local shard, or the zeroing of the gradient buffer */
    TASK_SEND,
    TASK_RECV,
    TASK_ALLTOALL,
    TASK_ALLREDUCE,
    TASK_REDUCESCATTER,
    TASK_ALLGATHER,
    TASK_KIND_COUNT
} task_kind;

/* Per-rank streams. Each communication stream is one communicator. */
typedef enum {
    STREAM_COMP,       /* kernels */
    STREAM_A2A,        /* head all-to-all in the P_h group */
    STREAM_RING,       /* KV ring (inner ring of the double ring; ring A of the dual ring) */
    STREAM_RING_OUTER, /* double ring: KV between windows */
    STREAM_DKV,        /* travelling dK/dV (inner; ring A) */
    STREAM_DKV_OUTER,  /* double ring: dK/dV between windows */
    STREAM_RING_B,     /* dual ring: KV of chunk B */
    STREAM_DKV_B,      /* dual ring: dK/dV of chunk B */
    STREAM_DP,         /* gradient reduction / parameter gathering over the gradient group */
    STREAM_TP,         /* tensor-parallel activation collectives in the TP group */
    STREAM_TP_KV,      /* tp > H_kv: the replicas of a KV head sum its weights' gradients */
    STREAM_PP,         /* pipeline: activations to the next stage, from the previous */
    STREAM_PP_GRAD,    /* pipeline: activation gradients to the previous stage, from the next */
    STREAM_EP,         /* mixture of experts: the tokens' dispatch and combine all-to-alls in the EP group */
    STREAM_EP_GRAD,    /* mixture of experts: the experts' gradient reduction over the expert-data-parallel group */
    STREAM_COUNT
} stream_kind;

/* What a task computes or moves, so that executors know which tensors. */
typedef enum {
    OP_QKV,
    OP_OUT_PROJ,
    OP_MLP_GATE,
    OP_MLP_UP,
    OP_MLP_DOWN,
    OP_LM_HEAD, /* GEMMs */
    OP_ATTN,    /* attention block (fwd or bwd), merge */
    OP_A2A_QKV,
    OP_A2A_O,
    OP_A2A_DO,
    OP_A2A_DQKV,
    OP_KV,         /* KV on the ring */
    OP_DKV,        /* dK/dV accumulator on the ring (fp32) */
    OP_DKV_ACC,    /* dK/dV accumulator += block or window partial */
    OP_KV_REP_SUM, /* sum of replicated KV-head gradients */
    OP_GRAD_ALLREDUCE,
    OP_GRAD_REDUCESCATTER,
    OP_PARAM_ALLGATHER,
    OP_KV_GATHER,  /* allgather: K and V of the P_s context ranks */
    OP_DKV_REDUCE, /* allgather: dK/dV reduce-scattered back to their owners (fp32) */
    /* TP collectives (STREAM_TP), named by the tensor, (T, hidden) of the
     * layer's tokens; build.c lists which kind runs in which phase */
    OP_TP_X,         /* the block input: gathered for QKV; its gradient reduced */
    OP_TP_H,         /* the MLP input: out-proj output reduced; gathered for gate/up; gradients likewise */
    OP_TP_Y,         /* the block output: MLP-down output reduced; its gradient gathered */
    OP_TP_EMBED,     /* the vocab-parallel embedding's output reduced; its gradient gathered */
    OP_TP_LOSS,      /* the vocab-parallel cross-entropy's per-token max, target logit and sum (3T fp32) */
    OP_TP_NORM_GRAD, /* the norm weights' gradients ((2L+1), hidden), summed over TP under sequence parallelism */
    OP_TP_KV_GRAD,   /* tp > H_kv: a KV head's QKV weight-gradient columns (hidden, 2d), summed over its replicas */
    OP_PP_ACT,       /* pipeline p2p: a virtual stage's output activations (T/tp, hidden) to the next */
    OP_PP_GRAD,      /* pipeline p2p: their gradient back */
    /* memory-bound kernels (elementwise.h) */
    OP_NORM_ATTN,    /* the norm before attention (input_layernorm) */
    OP_NORM_MLP,     /* the norm before the MLP (pre_mlp_layernorm) */
    OP_NORM_FINAL,   /* the final norm before the LM head */
    OP_ROPE,         /* rotary embedding */
    OP_ADD_ATTN,     /* the residual add after attention */
    OP_ADD_MLP,      /* the residual add after the MLP */
    OP_ACT,          /* SwiGLU */
    OP_EMBED,        /* the embedding */
    OP_LOSS,         /* the cross-entropy */
    OP_ZERO_GRAD,    /* the gradient buffer zeroed at the step's start */
    OP_OPTIM_STEP,   /* Adam over the local shard: gradient norm, update, parameter copy */
    OP_SOFTMAX,      /* --attention unfused: the scaled masked softmax */
    OP_ATTN_DROPOUT, /* --attention unfused: the dropout on the attention probabilities */
    /* --precision fp8-*, mxfp8 (elementwise.h): casts Transformer Engine does not fuse */
    OP_QUANT_ATTN_OUT, /* attention's output, the output projection's input */
    OP_QUANT_GRAD,     /* a block gradient (T', hidden) entering the MLP's down or the output projection's backward */
    OP_QUANT_DQKV,     /* attention's input gradient entering the QKV projection's backward */
    OP_QUANT_W,        /* the stage's block weights, once per step */
    /* mixture of experts (build_ep.c; rows are routed token copies) */
    OP_ROUTER,      /* the router's GEMM (T', hidden) x (hidden, experts) */
    OP_ROUTE,       /* the router's softmax and top-k over (T', experts) (a softmax kernel) */
    OP_PERMUTE,     /* the tokens copied into expert order, (T' k, hidden) (a copy kernel, kind add) */
    OP_UNPERMUTE,   /* the experts' outputs back in token order, weighted by the router (kind add) */
    OP_EP_DISPATCH, /* all-to-all over EP: the routed rows to their experts' ranks */
    OP_EP_COMBINE,  /* all-to-all over EP: the experts' outputs back */
    OP_TP_EXPERT,   /* the experts' rows gathered over TP, their output reduce-scattered (TP collectives) */
    OP_EXPERT_GATE, /* grouped GEMMs over the rank's experts: dim m is one expert's mean rows */
    OP_EXPERT_UP,
    OP_EXPERT_DOWN,
    OP_EXPERT_ACT,  /* SwiGLU over the experts' rows */
    OP_EXPERT_GRAD, /* the experts' gradients reduced over the expert-data-parallel group */
    OP_NORM_LATENT, /* MLA: the RMSNorms of the Q and KV latents (q_layernorm, kv_layernorm; elementwise.h) */
    OP_COUNT
} task_op;

typedef enum { PHASE_FWD, PHASE_BWD, PHASE_RECOMPUTE, PHASE_REDUCE } task_phase;

enum {
    DAG_F_GROUPED = 1,    /* issued in one group with the previous task of its stream */
    DAG_F_MASKED = 2,     /* attention block has masked (query, key) pairs: the kernel applies the mask */
    DAG_F_ZERO = 4,       /* dKV send whose accumulator has no contribution yet: send zeros */
    DAG_F_TP_SCATTER = 8, /* --tp-overlap: a ring step of a reduce-scatter's partial sums (else of an all-gather) */
};

/* KV and dKV buffer slots a ring task reads (attn, send, acc src) or writes
 * (recv, acc dst). Two namespaces: ops OP_KV/attention use kv slots, ops
 * OP_DKV/OP_DKV_ACC and the attention backward's output use dkv slots. Dual
 * ring lanes add DAG_SLOTS_PER_LANE for chunk B. */
enum { KV_OWN, KV_IN0, KV_IN1, KV_OUT0, KV_OUT1, KV_SLOTS };
enum { DKV_BLK0, DKV_BLK1, DKV_IN0, DKV_IN1, DKV_WIN0, DKV_WIN1, DKV_OIN0, DKV_OIN1, DKV_FINAL, DKV_SLOTS };
#define DAG_SLOTS_PER_LANE 10
#define DAG_NO_SLOT        0xff
/* A TP collective's buf: of the activation its op names (0), or of its
 * gradient (the backward's reductions, and its gathers of gradients). */
#define DAG_TP_GRAD 1

/* Chunk selection bits in dag_task.sel: low 2 bits query chunks, next 2 bits
 * KV chunks; bit 0/2 = part A (the rank's first chunk), bit 1/3 = part B. */
#define SEL_Q(sel)  ((sel)&3)
#define SEL_KV(sel) (((sel) >> 2) & 3)

typedef struct dag_task {
    uint64_t flops; /* compute: FLOPs (all B samples); communication: 0 */
    uint64_t bytes; /* bytes this rank sends; 0 for compute and recv */
    uint32_t id;
    uint32_t match;   /* p2p: the matching send/recv; collective: first task of the instance */
    uint32_t group;   /* collective: group index (dag_group); else DAG_NONE */
    uint32_t dep_off; /* private: offset of deps */
    int32_t rank;
    int32_t peer; /* p2p partner rank, else -1 */
    /* GEMM: m, n, k (a grouped GEMM, dag_gemm_groups() > 1: one GEMM's
     * m, the mean over its groups). Attention/merge: q tokens, kv tokens (per sample), q heads.
     * KV/dKV p2p and dK/dV ACC: tokens, kv heads, element bytes. KV-replica
     * sum (ACC, OP_KV_REP_SUM): tokens, KV heads with replicas, 4. All-to-all:
     * this rank's tokens (all samples), heads moved, head dim. */
    uint32_t dim[3];
    int32_t src;   /* ring tasks: ring index whose KV this is; else -1 */
    int16_t layer; /* transformer block; -1 for model-level tasks */
    uint16_t ndeps;
    uint16_t step;  /* ring step (outer*w + inner) of ring tasks; a grouped GEMM's GEMMs (dag_gemm_groups) */
    uint16_t mb;    /* micro-batch (0 .. m-1; the step's collectives: the last) */
    uint8_t stream; /* stream_kind */
    uint8_t kind;   /* task_kind */
    uint8_t op;     /* task_op */
    uint8_t phase;  /* task_phase */
    uint8_t flags;  /* DAG_F_* */
    uint8_t buf;    /* lane * DAG_SLOTS_PER_LANE + slot (see above); ACC: destination; TP: DAG_TP_GRAD or 0 */
    uint8_t buf2;   /* ACC: source slot; attention backward: its dKV output slot */
    uint8_t sel;    /* chunk selection (see SEL_Q/SEL_KV) */
} dag_task;

typedef struct dag dag;

/* The GEMMs of a GEMM task launched together: the experts' grouped GEMM
 * holds one per local expert of dim[0] rows each (their mean), FLOPs
 * their sum; every other GEMM task one. */
static inline int dag_gemm_groups(const dag_task *t) { return t->kind == TASK_GEMM && t->step > 1 ? t->step : 1; }

/* Build the DAG of a validated config. Returns NULL with a message on
 * failure (out of memory, or an internal inconsistency). */
dag *dag_build(const config *c, char err[LOONG_ERRLEN]);
/* dag_build with the ranks of the `folded` dimensions (tp, head, seq or
 * several) other than coordinate 0 left unbuilt: a simulation that runs
 * TP, head or ring ranks by symmetry (sim.h) needs only rank 0's program
 * of each group, 1/tp (1/P_head, 1/P_seq) of the tasks. The unbuilt ranks
 * have no tasks; dag_rank_source names the rank whose tasks stand for
 * theirs; collective instances hold their built members only, and a send
 * or recv whose peer is unbuilt (a ring step's, under seq) has no match
 * (DAG_NONE; dag_task_bytes_moved gives what it moves). */
dag *dag_build_folded(const config *c, mesh_dims folded, char err[LOONG_ERRLEN]);
/* The dimensions dag_build_folded can leave unbuilt. */
#define DAG_FOLDABLE (MESH_BIT(MESH_TP) | MESH_BIT(MESH_HEAD) | MESH_BIT(MESH_SEQ))
/* The dimensions a DAG was built folded in (0: every rank built). */
mesh_dims dag_folded(const dag *g);
/* The tasks of every rank, the unbuilt ones' included: dag_ntasks times the
 * folded groups' size (their ranks run the same program). */
uint64_t dag_ntasks_whole(const dag *g);
/* The rank whose tasks are rank r's: r, or in a folded DAG its
 * representative (coordinate 0 in the folded dimensions). */
int dag_rank_source(const dag *g, int r);
void dag_free(dag *g);

const config *dag_config(const dag *g);
uint32_t dag_ntasks(const dag *g);
const dag_task *dag_task_get(const dag *g, uint32_t id);
/* The cross-stream dependencies of t: t->ndeps ids of earlier tasks of the
 * same rank on other streams, at most one per stream. */
const uint32_t *dag_deps(const dag *g, const dag_task *t);
/* Ids of the tasks of (rank, stream) in execution order; *n gets the count. */
const uint32_t *dag_stream_tasks(const dag *g, int rank, int stream, uint32_t *n);
/* ---- communicators: a stream and the mesh dimensions it spans ----
 * Group gid is the communicator of its stream among the ranks that share
 * every mesh coordinate outside dag_group_dims() (config_mesh). Its
 * members here are those of the DAG's ranks (replica 0, dp coordinate 0)
 * in mesh order; a group whose dimensions include dp spans the same
 * members of every replica too, which a backend widens to through
 * mesh_group_members() on config_mesh(). The tp_kv stream's groups are
 * runs of consecutive TP-group members (the shards of one KV head). */
/* Members of collective group gid in the DAG; *n gets the size. */
const int32_t *dag_group(const dag *g, uint32_t gid, int *n);
uint32_t dag_ngroups(const dag *g);
mesh_dims dag_group_dims(const dag *g, uint32_t gid);
/* The replicas group gid spans, whose same members it holds: `count` of
 * them `stride` apart, from the first of their run that holds a given
 * replica (replica r's: r mod stride + r / (stride count) stride count).
 * Every replica (1, dp) for a group over dp, as the gradient group; only
 * its own (1, 1) without dp; a mixture of experts' EP group across
 * replicas a run of them (1, ep / P), its expert-data-parallel group
 * every (ep / P)-th (ep / P, dp P / ep). */
void dag_group_replicas(const dag *g, uint32_t gid, int *stride, int *count);
int dag_group_stream(const dag *g, uint32_t gid);

/* Check the contract: acyclic (deadlock-free under group semantics), every
 * recv has exactly one matching send (same stream, peers, bytes), every
 * collective instance has each member of its group exactly once, deps point
 * to tasks on the same rank and another stream. Returns 0 or -1 with the
 * first violation. */
int dag_validate(const dag *g, char err[LOONG_ERRLEN]);

/* ---- names (JSON spellings) ---- */
const char *task_kind_name(int kind);
int task_kind_parse(const char *s);
const char *stream_name(int stream);
const char *task_op_name(int op);
const char *task_phase_name(int phase);
#define TASK_COMPUTE_LAST TASK_OPTIM /* compute kinds are gemm .. optim */
static inline bool task_is_compute(const dag_task *t) { return t->kind <= TASK_COMPUTE_LAST; }
static inline bool task_is_p2p(const dag_task *t) { return t->kind == TASK_SEND || t->kind == TASK_RECV; }
static inline bool task_is_collective(const dag_task *t) { return t->kind >= TASK_ALLTOALL; }

/* Bytes moved by t for a recv (its send's bytes; a folded DAG's ring
 * step from an unbuilt peer: the K and V its sender sizes alike), else
 * t->bytes. */
uint64_t dag_task_bytes_moved(const dag *g, const dag_task *t);

/* Human-readable task name, e.g. "attn_fwd L3 s5" (for traces). */
void dag_task_label(const dag_task *t, char *buf, size_t len);

#endif

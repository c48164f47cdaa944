/*
 * build_internal: what the files of dag_build()'s rank program share. The
 * program is cut by parallel dimension, one file each, so that a
 * dimension is read in its file alone:
 *   build.c       the layer program (GEMMs, norms, head all-to-alls,
 *                 attention, embedding, LM head, optimizer), the step and
 *                 dag_build();
 *   build_tp.c    tensor parallelism: the TP collectives around the
 *                 column- and row-parallel GEMMs, --tp-overlap's
 *                 ring-exchange, the KV replicas' and norm weights'
 *                 gradients over TP;
 *   build_pp.c    pipeline parallelism: the passes of the rank's stage in
 *                 the schedule's order and their p2p;
 *   build_grad.c  the gradient reduction over the gradient group (data
 *                 parallelism and the context ranks; ZeRO stages 0-3);
 *   ring.c, allgather.c  the sequence dimension's attention.
 * Only these files include this header.
 *
 * Layer: core (libc only).
 */
#ifndef LOONG_BUILD_INTERNAL_H
#define LOONG_BUILD_INTERNAL_H

#include "dag_internal.h"
#include "pipeline.h"

/* One rank's program under construction. */
typedef struct prog {
    builder *b;
    const config *c;
    const model *m;
    uint64_t T; /* tokens per rank, sequence-sharded (B*S/P) */
    uint32_t head_gid, dp_gid, tp_gid, kv_gid;
    int tp;
    bool sp;                  /* sequence parallelism */
    bool overlap;             /* --tp-overlap: the ring-exchange pipelines (build_tp.c) */
    uint32_t after;           /* a task the next GEMM or DP collective waits for besides its buffers (DAG_NONE: none) */
    uint32_t tp_after;        /* a task the next TP collective waits for besides its buffers (DAG_NONE: none) */
    uint32_t grad_sync;       /* the last gradient collective over the gradient group so far (DAG_NONE: none) */
    int stage;                /* pipeline stage (pipeline.h) */
    bool last_mb;             /* the pass being emitted is of the last micro-batch: the gradients are complete */
    uint32_t ep_gid, edp_gid; /* mixture of experts: the EP group and the expert-data-parallel group */
    uint32_t etp_gid;         /* and its expert-TP group (tp_gid at expert TP = TP) */
    uint32_t tpep_gid;        /* the all-gather dispatcher's expert-TP x EP group */
} prog;

/* A buffer list and its length, for the functions taking (reads, nreads). */
#define READS(...) (const int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))
#define WRITES     READS

/* Whether a per-layer buffer holds a gradient (LB_DX, LB_DH). */
static inline bool build_is_grad_buf(int buf)
{
    int k = (buf - BUF_LAYER0) % LB_COUNT;
    return buf >= BUF_LAYER0 && (k == LB_DX || k == LB_DH);
}

/* Whether the rank's stage holds block l (l = L: the weights outside). */
static inline bool build_stage_holds(const prog *p, int l) { return pipe_holds(p->c, p->stage, l); }

/* ---- build.c: the layer program ---- */

/* A GEMM task (m, n, k) on the compute stream, waiting for p->after (then
 * cleared) besides its buffers. Returns its id. */
uint32_t build_gemm(prog *p, task_op op, task_phase ph, int layer, uint64_t m, uint64_t n, uint64_t k, const int *reads,
                    int nreads, const int *writes, int nwrites);
/* Block l's forward, the parts of it in `parts` (recompute.h's RC_*), and
 * its backward with the policy's recompute and the block's gradient
 * reduction once its gradients are complete. */
void build_layer_fwd(prog *p, int l, task_phase ph, unsigned parts);
void build_layer_bwd(prog *p, int l);
/* The vocab-parallel embedding, forward or backward. */
void build_embedding(prog *p, task_phase ph);
/* The final norm, LM head and loss, forward and backward. */
void build_lm_head_fwd(prog *p);
void build_lm_head_bwd(prog *p);

/* ---- build_tp.c: tensor parallelism ---- */

/* A GEMM of build.c's shapes for chunked emission: m = T/tp per chunk. */
typedef struct tp_gemm {
    task_op op;
    uint64_t n, k;
    int reads[5], nreads;
    int writes[2], nwrites;
} tp_gemm;

/* The TP group and the KV replicas' run of it (build_rank's groups, after
 * the head and gradient groups). */
void build_tp_groups(prog *p);
/* The tp = 1 buffer of a TP-side buffer (LB_XG ...), and with sequence
 * parallelism off the gathered inputs are the replicated ones. */
int build_tp_buf(const prog *p, int layer, int k);
/* A TP collective of `elems` elements of `elem_bytes`; nothing at tp = 1. */
void build_tp_coll_sized(prog *p, task_kind kind, task_op op, task_phase ph, int layer, uint64_t elems, int elem_bytes,
                         int read, int write);
/* The same over group gid of `degree` members (the experts' TP group,
 * build_ep.c). */
void build_tp_coll_in(prog *p, uint32_t gid, int degree, task_kind kind, task_op op, task_phase ph, int layer,
                      uint64_t elems, int elem_bytes, int read, int write);
/* Before a column-parallel GEMM: gather its input (sequence parallelism). */
void build_tp_gather(prog *p, task_op op, task_phase ph, int layer, int from, int to);
/* After a row-parallel GEMM (or a column-parallel backward): reduce the
 * partial sums, scattered over TP under sequence parallelism. */
void build_tp_reduce(prog *p, task_op op, task_phase ph, int layer, int from, int to);
/* Column-parallel GEMMs g[0..ng) on `from` gathered into `gathered`, and
 * row-parallel ones writing `partial` reduced into `to`; with
 * --tp-overlap the collective is overlapped with the GEMMs' chunks. */
void build_tp_column(prog *p, task_op op, task_phase ph, int layer, int from, int gathered, const tp_gemm *g, int ng);
void build_tp_row(prog *p, task_op op, task_phase ph, int layer, const tp_gemm *g, int ng, int partial, int to);
/* tp > H_kv: the all-reduce of block l's K and V weight gradients among
 * the shards holding one KV head. */
void build_tp_kv_grads(prog *p, int l);
/* The norm weights' gradients over TP, once per step. Returns its id
 * (DAG_NONE: none). */
uint32_t build_tp_norm_grads(prog *p);

/* ---- build_ep.c: mixture of experts, expert parallelism ---- */

/* The EP and expert-data-parallel groups (build_rank's, after TP's). */
void build_ep_groups(prog *p);
/* Block l's MLP as a mixture of experts, forward (a forward or recompute
 * pass that re-runs the MLP) and backward, from the norm's output H to
 * the block's output; the backward ends with the MLP input's gradient in
 * DH. */
void build_moe_fwd(prog *p, int l, task_phase ph);
void build_moe_bwd(prog *p, int l);
/* The experts' gradient reduction over the expert-data-parallel group:
 * block l's after its last backward (ZeRO 0, 2), and the stage's before
 * the optimizer step (ZeRO 1) with the parameters' gather after it. */
void build_ep_grad_block(prog *p, int l);
void build_ep_grad_step_scatter(prog *p);
void build_ep_grad_step_gather(prog *p);

/* ---- build_pp.c: pipeline parallelism ---- */

/* The passes of the rank's stage in the schedule's order (pipeline.h). */
void build_pp_passes(prog *p);

/* ---- build_grad.c: the gradient reduction (ZeRO) ---- */

/* The gradient group (build_rank's second group). */
void build_grad_groups(prog *p);
/* One ring collective of grad_coll_after's (build_grad.c) on `stream` over
 * group gid, sized for n members: its gradients' reduction (reads their
 * LB_GRAD of blocks first..last held) or its parameters' gather (writes
 * their LB_W), after p->after (then cleared) and buffer wait_buf (-1:
 * none); a reduction becomes p->grad_sync. The experts' collectives over
 * their expert-data-parallel group (build_ep.c) are the same. */
void build_grad_coll_on(prog *p, stream_kind stream, uint32_t gid, uint64_t n, task_kind kind, task_op op, int layer,
                        uint64_t elems, int first, int last, int wait_buf);
/* ZeRO-3's all-gather of block j's parameters (j = L: the LM head's),
 * issued after buffer `after` is written (-1: in stream order only). */
void build_grad_param_gather(prog *p, int j, int after);
/* ZeRO-3's gathers entering block l's forward and its backward. */
void build_grad_fwd_gathers(prog *p, int l);
void build_grad_bwd_gathers(prog *p, int l);
/* Block l's gradient reduction (ZeRO 0, 2) after its last backward. */
void build_grad_block(prog *p, int l);
/* The head's gradient reduction (ZeRO 0, 2), once its gradient is
 * complete; wait_buf: the buffer that says so. */
void build_grad_head(prog *p, int wait_buf);
/* ZeRO 1's reduce-scatter of all the stage's gradients before the
 * optimizer step, and ZeRO 1 and 2's all-gather of the parameters after
 * it (waiting for p->after). */
void build_grad_step_scatter(prog *p);
void build_grad_step_gather(prog *p);

#endif

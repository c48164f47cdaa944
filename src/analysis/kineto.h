/*
 * kineto: PyTorch profiler traces (Kineto's Chrome-trace JSON, plain or
 * gzip, one file per rank), the measurements every Megatron, torchtitan,
 * TransformerEngine, InternEvo or DeepSpeed run can write
 * (docs/kineto.md).
 *
 * From each rank's file it keeps the GPU kernels ("cat":"kernel"), each
 * classified into loong's kinds by the kernel-name table (kineto_names.c:
 * "KIND GLOB" rules, first match wins; unknown names are "other" and
 * counted, never guessed), with:
 *   - its stream, start and duration (µs, from the rank's first event);
 *   - the profiler step it belongs to: the "ProfilerStep#N" annotation
 *     whose CPU span holds the kernel's launch (the cuda_runtime call of
 *     the same correlation id), or the kernel itself when the launch is
 *     not in the trace;
 *   - NCCL kernels: the op, algorithm, protocol and type their name says
 *     (ncclDevKernel_AllReduce_Sum_bf16_RING_LL, ncclKernel_SendRecv_...),
 *     the size in nccl-tests' terms and the group size from the kernel's
 *     collective args or its record_param_comms operator;
 *   - compute kernels: their work from the launching operator's "Input
 *     Dims" (record_shapes), through the runtime call's "External id":
 *     2mnk for aten::mm/addmm/bmm (a 2-D GEMM keeps its m, n, k, and its
 *     layout when the trace has "Input Strides"), and for attention (SDPA's flash and
 *     cuDNN ops, aten::_flash_attention_*, flash_attn's ops) the block's
 *     (batch, heads, query and key tokens, head dim, causal): loong's FLOPs
 *     of it (core/sizes.h), and its tiles for a table that declares them.
 *
 * Layer: analysis (uses core, model and zlib).
 */
#ifndef LOONG_KINETO_H
#define LOONG_KINETO_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dag.h"
#include "model/calib.h"

/* A Kineto kernel's kind: one of loong's task kinds (dag.h), or one of
 * these. A NCCL SendRecv kernel carries a ring step's send and recv
 * together, so p2p is one kind. */
enum {
    KINETO_P2P = TASK_KIND_COUNT, /* ncclDevKernel_SendRecv, ncclKernel_SendRecv_* */
    KINETO_NCCL_OTHER,            /* broadcast, reduce, and NCCL kernels whose op is not named */
    KINETO_OTHER,                 /* every kernel no rule names */
    KINETO_KINDS
};
const char *kineto_kind_name(int kind); /* loong's names, "p2p", "nccl_other", "other" */
int kineto_kind_parse(const char *s);   /* -1 when unknown */
static inline bool kineto_kind_is_comm(int kind)
{
    return (kind >= TASK_SEND && kind < TASK_KIND_COUNT) || kind == KINETO_P2P || kind == KINETO_NCCL_OTHER;
}

/* ---- the kernel-name table (kineto_names.c) ---- */
typedef struct kineto_names kineto_names;
/* The shipped rules (docs/kineto.md lists them). */
kineto_names *kineto_names_default(void);
/* Add the rules of `text` ("KIND GLOB" per line, '#' comments; KIND a
 * loong kind, p2p, nccl (the op read from NCCL's name) or other), ahead of
 * the ones t has. Returns 0, or -1 with "name:line: ..." for a bad line. */
int kineto_names_add(kineto_names *t, const char *text, const char *name, char err[LOONG_ERRLEN]);
void kineto_names_free(kineto_names *t);
/* The kind of a kernel named `name` (KINETO_OTHER when no rule matches). */
int kineto_names_classify(const kineto_names *t, const char *name);

/* What an NCCL kernel's name says: ncclDevKernel_AllReduce_Sum_bf16_RING_LL
 * (NCCL >= 2.19) or ncclKernel_AllReduce_RING_LL_Sum_float (older). The
 * kind is a loong kind, KINETO_P2P or KINETO_NCCL_OTHER; algo and proto
 * are model/nccl.h's (-1 when not named; NVLS_TREE and CollNet read as
 * NVLS and TREE's neighbours are not modelled: -1); dtype is "" when not
 * named. Returns false when the name is not an NCCL kernel's. */
typedef struct kineto_nccl_name {
    int kind, algo, proto;
    char dtype[16];
} kineto_nccl_name;
bool kineto_nccl_name_parse(const char *name, kineto_nccl_name *out);

/* ---- one rank's trace ---- */
typedef struct kineto_kernel {
    double ts, dur; /* µs from the rank's first event */
    double launch;  /* µs: the launching runtime call's start, else ts */
    double flops;   /* work from the shapes in loong's convention (sizes.h); 0: unknown */
    double bytes;   /* NCCL: nccl-tests' size (the buffer; all-to-all: all a rank sends); 0: unknown */
    int kind;
    int stream; /* index into kineto_rank.streams */
    int name;   /* index into kineto_rank.names */
    int step;   /* index into the set's chosen steps, -1 outside them (kineto_set_open) */
    int algo, proto;
    int group;               /* NCCL group size, 0 unknown */
    int pg_start, pg_stride; /* its global ranks start + i x stride; stride 0: unknown */
    /* attention shapes (flops > 0 and an attention kind): one call's block */
    int batch, heads, head_dim;
    int64_t sq, sk;
    bool causal;
    /* GEMM shape (a 2-D aten::mm, addmm or _scaled_mm with its shapes):
     * output gm x gn, reduction gk, and the layout (calib.h's gemm_layout)
     * its "Input Strides" tell; GEMM_ANY without them. gm 0: none (bmm). */
    int64_t gm, gn, gk;
    int layout;
    /* memory-bound kinds (calib_memory_bound): the HBM bytes of its op as
     * record_shapes gives them, each input once and the output as large
     * as its largest input (an elementwise op's); 0 unknown */
    double hbm;
} kineto_kernel;

typedef struct kineto_stream {
    int64_t id;        /* the trace's stream (kernel args "stream", else tid) */
    int64_t device;    /* kernel args "device", else pid */
    double compute_us; /* kernel time of compute kinds and other */
    double comm_us;    /* kernel time of NCCL kinds */
    char pg[48];       /* the process group of its NCCL kernels ("" none or several) */
    bool pg_mixed;     /* NCCL kernels of several process groups */
} kineto_stream;

typedef struct kineto_step {
    int number;     /* N of ProfilerStep#N; -1: the whole trace (no annotations) */
    double ts, end; /* CPU span, µs from the rank's first event */
} kineto_step;

/* One GPU's "[memory]" events (profile_memory=True): PyTorch's profiler
 * writes an instant event per allocation and free of its caching
 * allocator, with the allocator's totals after it, "Total Allocated" and
 * "Total Reserved" (bytes), and the device ("Device Type" 1: CUDA, as
 * ROCm builds report theirs too; "Device Id"). */
typedef struct kineto_mem_device {
    int64_t device;
    size_t events;                    /* its [memory] events with both totals */
    double alloc_peak, reserved_peak; /* bytes: the largest of each total */
} kineto_mem_device;

typedef struct kineto_rank {
    char path[256];
    int rank, world; /* distributedInfo; -1 when absent */
    char nccl_version[24];
    double t0_us; /* the first event's absolute time stamp */
    kineto_kernel *k;
    size_t nk;
    kineto_step *steps; /* in time order */
    int nsteps;
    kineto_stream *streams;
    int nstreams;
    char **names; /* distinct kernel names */
    uint32_t *name_count;
    int nnames;
    size_t events;          /* trace events read */
    size_t unknown;         /* kernels no rule named */
    size_t shaped;          /* compute kernels whose work the shapes gave */
    kineto_mem_device *mem; /* the GPUs of its [memory] events, in order of first event (kineto_mem.c) */
    int nmem;
} kineto_rank;

/* Parse one rank's trace from memory: plain JSON, or gzip (by its magic
 * bytes). Returns 0, or -1 with a one-line message naming the problem and
 * the fix: gzip that does not inflate, a file named .gz that is not gzip,
 * invalid JSON, JSON without a "traceEvents" array of a Kineto trace,
 * no GPU kernel at all (a CPU-only trace), events without ts or dur. */
int kineto_parse(const void *buf, size_t len, const char *path, const kineto_names *names, kineto_rank *out,
                 char err[LOONG_ERRLEN]);
/* The same from a file (at most KINETO_MAX_BYTES, inflated too). */
int kineto_read(const char *path, const kineto_names *names, kineto_rank *out, char err[LOONG_ERRLEN]);
void kineto_rank_free(kineto_rank *r);
#define KINETO_MAX_BYTES ((size_t)4 << 30)

/* ---- the ranks of one run ---- */
typedef struct kineto_set {
    kineto_rank *r; /* ordered by rank */
    int n;
    int *steps; /* the chosen step numbers, ascending */
    int nsteps;
} kineto_set;

/* Read every path (a directory: its *.json and *.json.gz files), order
 * them by rank and choose the steps: `steps` "N", "N-M" or NULL for every
 * step all ranks have. Returns 0, or -1 with a message: no trace in a
 * directory, traces of different runs mixed (world sizes or NCCL versions
 * differ, or one rank twice), a rank missing, a rank without distributed
 * info among several, steps that do not match across ranks, a chosen step
 * a rank lacks. */
int kineto_set_open(const char *const *paths, int npaths, const kineto_names *names, const char *steps, kineto_set *s,
                    char err[LOONG_ERRLEN]);
void kineto_set_free(kineto_set *s);

/* The FLOPs a kernel's tile-granular work amounts to under cb's tile
 * shape for its kind (model/tiles.h's convention: flops x tiles x area /
 * exact pairs); k->flops when cb declares none or k is not attention. */
double kineto_kernel_work(const kineto_kernel *k, const calib *cb);
/* The same at a br x bc tile (0 x 0: k->flops). */
double kineto_kernel_work_at(const kineto_kernel *k, int br, int bc);

/* The exact unmasked (query, key) pairs and the br x bc tiles of one
 * FlashAttention call of sq queries against sk keys; causal aligns the
 * last query with the last key (FlashAttention >= 2.1). */
uint64_t kineto_attn_pairs(int64_t sq, int64_t sk, bool causal);
uint64_t kineto_attn_tiles(int64_t sq, int64_t sk, bool causal, int br, int bc);

#endif

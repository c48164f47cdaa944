/*
 * device: what the executor needs from a device, as one plug-in struct
 * (in the manner of nccl-tests): memory, communicators, a stream queue,
 * and per-task timestamps. The CPU device (device_cpu.c: CPU kernels, MPI)
 * fills it here; the CUDA device (src/cuda: CUDA streams, NCCL) fills the
 * same struct. Both share the host side of their streams, devq.h.
 *
 * Everything launched on a stream runs in order, asynchronously to the
 * caller, exactly like a CUDA stream; cross-stream order is expressed with
 * devq_record/devq_wait on integer event ids. Errors are values
 * (dev_result): calls return DEV_OK or an error code, and asynchronous
 * failures surface at sync, with file:line of the failing call.
 *
 * Layer: exec (device-independent: no MPI, no CUDA here).
 */
#ifndef LOONG_EXEC_DEVICE_H
#define LOONG_EXEC_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "core/units.h"
#include "kernels.h"

/* What went wrong: out of memory (host or device), a communication
 * failure (MPI, NCCL, a peer), a bad argument, a device fault (CUDA). */
typedef enum { DEV_OK = 0, DEV_ERR_MEM, DEV_ERR_COMM, DEV_ERR_ARG, DEV_ERR_FAULT } dev_result;

typedef struct dev dev;
typedef struct dev_comm dev_comm;
typedef struct devq devq;

typedef enum {
    DOP_ATTN_FWD,   /* o, lse = attn(q, k, v) */
    DOP_ATTN_BWD,   /* dq += ..., dk, dv = ... */
    DOP_MERGE,      /* (o, lse) <- merge((o, lse), (ob, lseb)) */
    DOP_AXPY,       /* y[i] += x[i], n floats */
    DOP_FILL,       /* y[i] = value, n floats */
    DOP_COPY2D,     /* rows x cols floats, strided */
    DOP_SUM_GROUPS, /* dst[r][g][:] = sum_j src[r][g*gs + j][:] */
    DOP_GEMM,       /* C = alpha * op(A) op(B) + beta * C, row-major */
    DOP_SWIGLU,     /* fwd: m = silu(g) * u; bwd: dg, du from dm */
    DOP_ROWDOT,     /* dst[r * dst_ld] = sum_j a[r * lda + j] * b[r * ldb + j], r < rows, j < n */
    DOP_SENDRECV,   /* an NCCL-style group of one send and/or one recv */
    DOP_ALLTOALL,   /* equal blocks of `count` floats to/from each member */
    /* In place on `count` floats of rbuf, split over the n members as NCCL
     * would: member i owns part i (dev_part_of). ALLREDUCE: every part summed everywhere;
     * REDUCESCATTER: member i's own part holds the sum (the others are left
     * unspecified); ALLGATHER: every member's own part copied to all. */
    DOP_ALLREDUCE,
    DOP_REDUCESCATTER,
    DOP_ALLGATHER,
    /* A mixture of experts' (exec_ep.c): */
    DOP_MOVE_ROWS, /* dst[di(r)] (+)= scale[r] * src[si(r)], r < rows, rows of `width` floats */
    DOP_ROUTE,     /* fwd: the top-k gates from the router's logits; bwd: the logits' gradient */
    DOP_ALLTOALLV, /* per-member counts and displacements (floats), as MPI_Alltoallv */
} dev_op_kind;

typedef struct dev_op {
    dev_op_kind kind;
    int stamp_start, stamp_end;   /* timestamp slots to fill (-1: none) */
    int stamp_start2, stamp_end2; /* SENDRECV: slots of the recv */
    int fail;                     /* fault injection: die when this op starts (task id + 1) */
    int fail_signal;              /* ... as fault_signal (exec/fault.h) says: exit, kill or stop */
    union {
        struct {
            float *o, *lse, *dq, *dk, *dv;
            const float *q, *k, *v, *o_in, *lse_in, *do_;
            const int64_t *qpos, *kpos;
            attn_shape s;
        } attn;
        struct {
            float *o, *lse;
            const float *ob, *lseb;
            int nq, hq, d;
        } merge;
        struct {
            float *y;
            const float *x;
            size_t n;
        } axpy;
        struct {
            float *y;
            size_t n;
            float value;
        } fill;
        struct {
            float *dst;
            const float *src;
            size_t rows, cols, dst_ld, src_ld;
        } copy;
        struct {
            float *dst;
            const float *src;
            size_t rows, dst_ld, src_ld;
            int groups, gs, d;
        } sum;
        struct {
            int trans_a, trans_b, m, n, k, lda, ldb, ldc;
            float alpha, beta;
            const float *a, *b;
            float *c;
        } gemm;
        struct {
            int backward;
            float *m, *dg, *du;
            const float *g, *u, *dm;
            size_t n;
        } swiglu;
        struct {
            float *dst;
            const float *a, *b;
            size_t rows, n, dst_ld, lda, ldb;
        } rowdot;
        struct {
            dev_comm *comm;
            const void *sbuf;
            void *rbuf;
            size_t sbytes, rbytes;
            int to, from; /* ranks in comm; -1: none */
        } p2p;
        struct {
            dev_comm *comm;
            const float *sbuf;
            float *rbuf;
            size_t count; /* all-to-all: floats per member block; others: total */
        } coll;
        struct {
            dev_comm *comm;
            const float *sbuf;
            float *rbuf;
            const int *scounts, *sdispls, *rcounts, *rdispls; /* host arrays of the comm's size */
        } a2av;
        struct {
            float *dst;
            const float *src;
            const int32_t *dst_idx, *src_idx; /* device arrays of `rows`; NULL: row r itself */
            const float *scale;               /* per r; NULL: 1 */
            size_t rows, width;
            int add; /* accumulate into dst */
        } rows;
        struct {
            int backward;
            const float *logits; /* (n, experts) */
            const int32_t *sel;  /* (n, k): each token's experts */
            float *gates;        /* (n, k): fwd out; bwd in */
            const float *dgates; /* bwd: entry i k + j's gradient at dgates[dg_idx[i k + j]] */
            const int32_t *dg_idx;
            float *dlogits; /* bwd: (n, experts), overwritten */
            size_t n;
            int experts, k;
        } route;
    } u;
} dev_op;

/* Part i of `count` floats over n members: count / n floats, the first
 * count % n members one more; *off is where it starts. */
static inline void dev_part_of(size_t count, int n, int i, size_t *cnt, size_t *off)
{
    size_t base = count / (size_t)n, rem = count % (size_t)n;
    *cnt = base + ((size_t)i < rem);
    *off = base * (size_t)i + ((size_t)i < rem ? (size_t)i : rem);
}

typedef struct dev_ops {
    const char *name;
    /* Open the device of `rank` with `nstreams` streams and `nslots`
     * timestamp slots (and as many event ids). Returns NULL with a message. */
    dev *(*open)(int rank, int nstreams, int nslots, char err[LOONG_ERRLEN]);
    /* Drain the streams and release everything. Safe on NULL. */
    void (*close)(dev *d);
    /* Zeroed device memory of `bytes`, released at close; NULL when out of
     * memory. */
    void *(*alloc)(dev *d, size_t bytes);
    void (*release)(dev *d, void *p);
    /* Host fp32 <-> device copies (synchronous). */
    dev_result (*put)(dev *d, void *dst, const float *src, size_t n);
    dev_result (*get)(dev *d, float *dst, const void *src, size_t n);
    /* A communicator over `ranks` (global ranks, in order) for stream;
     * every member calls it collectively in the same order. */
    dev_comm *(*comm)(dev *d, int stream, const int *ranks, int n, char err[LOONG_ERRLEN]);
    /* The member index of global rank r in comm, or -1. */
    int (*comm_rank)(dev_comm *c, int r);
    /* The device's stream queue: the executor launches ops and records and
     * waits events through devq.h. */
    devq *(*queue)(dev *d);
    /* Between iterations, every stream idle: forget all recorded events
     * (a GPU also re-anchors the clock of its stamps). */
    void (*reset_events)(dev *d);
    /* Wait for every stream; returns DEV_OK or the first error, with err. */
    dev_result (*sync)(dev *d, char err[LOONG_ERRLEN]);
    /* Start and end (seconds, this rank's clock) of timestamp slot i. */
    void (*stamps)(dev *d, int i, double *start, double *end);
    /* Now, on the clock of the stamps: the host's CLOCK_MONOTONIC (exec_run.c
     * takes ranks on one host to share it). */
    double (*now)(dev *d);
} dev_ops;

extern const dev_ops dev_cpu;

#endif

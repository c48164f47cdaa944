/*
 * kineto_write: a loong trace in the PyTorch profiler's form (`loong sim
 * --trace-format kineto`), one file per rank, so that everything that
 * reads profiler traces (loong's Kineto reader, HolisticTraceAnalysis,
 * Perfetto) reads a prediction too, and `loong calibrate --kineto` can be
 * checked on a prediction whose calibration is known (the round trip).
 *
 * Each task becomes what a PyTorch run would record: a cpu_op, its
 * cudaLaunchKernel and the kernel on stream 7 + loong's stream index,
 * linked by correlation and External id, inside one ProfilerStep#1:
 *   - a GEMM: aten::mm with its Input Dims and Input Strides (the layout
 *     as Megatron runs it: forward X W^T, dgrad dY W, wgrad dY^T X), a
 *     cuBLAS kernel name; a backward GEMM as its two kernels, dX then dW,
 *     its time split as the table times their shapes (halves without
 *     shape rows);
 *   - attention: flash_attn::_flash_attn_forward/_backward with Input Dims
 *     and the causal flag in Concrete Inputs, FlashAttention-2's kernel
 *     names, when the block is one FlashAttention call (a full or causal
 *     block, zigzag's steps); a packed document's block goes without shapes;
 *   - merge and acc: loong_merge_kernel, loong_acc_kernel;
 *   - collectives: NCCL's kernel names with PyTorch's collective args
 *     (size, group, process group = loong's stream); all-to-all and p2p as
 *     ncclDevKernel_SendRecv, a ring step's grouped send and recv as one.
 *
 * Layer: analysis (uses core, model).
 */
#ifndef LOONG_KINETO_WRITE_H
#define LOONG_KINETO_WRITE_H

#include <stdio.h>

#include "kineto.h"

/* Write rank's trace of g, with task start_s[id] and dur_s[id] in
 * seconds; cb (may be NULL) is the table that timed it, which splits a
 * backward GEMM's time between its two kernels. Returns 0, or -1 on a
 * write error. */
int kineto_write_rank(FILE *f, const dag *g, const calib *cb, int rank, const double *start_s, const double *dur_s);

#endif

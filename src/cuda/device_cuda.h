/*
 * device_cuda: the executor's device (exec/device.h) on NVIDIA GPUs.
 *
 * Two transports over the same streams, kernels and events:
 *   dev_cuda        one MPI rank per GPU; communication is NCCL, one
 *                   communicator per (stream, group) created with a unique id
 *                   broadcast over MPI (MPI only bootstraps; NCCL moves data).
 *   dev_cuda_local  all P ranks of a mesh as threads of ONE process on one
 *                   GPU (--transport local); a send/recv or collective
 *                   becomes device-to-device cudaMemcpyAsync / kernels on the
 *                   ranks' streams, ordered with CUDA events after a host
 *                   rendezvous of the members. No MPI, no NCCL.
 * Each DAG stream is a CUDA stream fed by one host worker thread (as the CPU
 * device's streams), so a blocking rendezvous on one stream never holds
 * another. Events are cudaEvents; task times are cudaEvent pairs placed on
 * the host clock through a reference event recorded per iteration.
 * Storage is fp32 on the device; see kernels_cuda.h for the bf16 tensor-core
 * attention.
 *
 * Layer: cuda (fills exec's device interface; uses exec and core).
 */
#ifndef LOONG_CUDA_DEVICE_CUDA_H
#define LOONG_CUDA_DEVICE_CUDA_H

#include "exec/device.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const dev_ops dev_cuda;
extern const dev_ops dev_cuda_local;

/* How many GPUs this process sees: >= 1, or 0 with a one-line reason in err
 * ("no CUDA GPU is visible ..."). Never aborts. */
int cuda_gpu_count(char err[LOONG_ERRLEN]);

/* Pick the GPU of node-local rank `local_rank` of `local_size` ranks on this
 * node (NCCL transport). Returns 0, or -1 with a message that points to
 * --transport local when the node has fewer GPUs than ranks. */
int cuda_select_gpu(int local_rank, int local_size, char err[LOONG_ERRLEN]);

#ifdef __cplusplus
}
#endif

#endif

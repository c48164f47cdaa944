/*
 * local_cuda: the local transport of the CUDA device (dev_cuda_local,
 * device_cuda.h): all ranks of a mesh as threads of ONE process on one GPU
 * (--transport local). A send/recv or a collective becomes device-to-device
 * cudaMemcpyAsync and kernels on the ranks' own CUDA streams, ordered with
 * CUDA events after a host rendezvous of the members. No MPI, no NCCL:
 * device_cuda.cu's NCCL transport is the other one.
 *
 * Layer: cuda (uses exec's device queue and core).
 */
#ifndef LOONG_CUDA_LOCAL_CUDA_H
#define LOONG_CUDA_LOCAL_CUDA_H

#include <cuda_runtime.h>

#include "exec/devq.h"

/* One communicator of the process: the members' host rendezvous. */
typedef struct lcomm lcomm;

/* The communicator of `ranks` (n of them, in member order) on DAG stream
 * `stream`, shared by every member that asks for the same one (one more
 * reference each); NULL when out of host memory. */
lcomm *lcomm_get(int stream, const int *ranks, int n);

/* Drop one reference; the last frees it. */
void lcomm_put(lcomm *lc);

/* DOP_SENDRECV of member `me` of lc, issued on cs: the send is posted for
 * its receiver; the receive takes the matching send and copies it on cs.
 * Returns once the send buffer is reusable on cs. Errors fail q. */
void local_sendrecv(devq *q, cudaStream_t cs, lcomm *lc, int me, const dev_op *op);

/* DOP_ALLTOALL, DOP_ALLREDUCE, DOP_REDUCESCATTER or DOP_ALLGATHER of
 * member `me` of lc, issued on cs, with exec/device.h's contract (member i
 * owns part i, dev_part_of). Errors fail q. */
void local_collective(devq *q, cudaStream_t cs, lcomm *lc, int me, const dev_op *op);

#endif

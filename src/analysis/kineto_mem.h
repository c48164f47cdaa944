/*
 * kineto_mem: the caching allocator's peaks in PyTorch profiler traces
 * recorded with profile_memory=True, and the allocator factor they give
 * (model/memory.h: reserved = allocated x factor + context + NCCL).
 *
 * The profiler writes one instant event ("ph":"i", "name":"[memory]") per
 * allocation and free, with the allocator's totals after it (PyTorch's
 * torch/csrc/autograd/profiler_kineto.cpp, reportMemoryUsage: "Total
 * Allocated", "Total Reserved"), so the largest of each over the trace are
 * what torch.cuda.max_memory_allocated() and max_memory_reserved() read
 * over the profiled window.
 *
 * Layer: analysis (uses core, model).
 */
#ifndef LOONG_KINETO_MEM_H
#define LOONG_KINETO_MEM_H

#include <jansson.h>

#include "kineto.h"

/* Collect the GPU "[memory]" events of `events` (a trace's traceEvents)
 * into r->mem, per device: those of other devices (the CPU's, "Device
 * Type" 0) or without both totals are skipped. Never fails. */
void kineto_mem_scan(const json_t *events, kineto_rank *r);

typedef struct kineto_mem_fit {
    int devices;                      /* GPUs with memory events and an allocated peak, over the ranks */
    double alloc_peak, reserved_peak; /* bytes: the largest over them */
    /* the allocator factor as memory.h defines MEMORY_ALLOC_FACTOR: the
     * mean over the GPUs of reserved peak / allocated peak; and its range */
    double factor, factor_min, factor_max;
} kineto_mem_fit;

/* Fit the factor over the set's ranks. Returns the GPUs it used (0: no
 * memory events, *out zeroed). */
int kineto_mem_fit_set(const kineto_set *s, kineto_mem_fit *out);

#endif

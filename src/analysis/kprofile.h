/*
 * kprofile: a run reduced to what a prediction and a profiler trace can
 * both say, when their task ids cannot match: per rank and step, the
 * kernel time of each kind (kineto.h's kinds), the step time, the exposed
 * communication, and the collectives by op and size. A loong trace (any
 * backend's) and a set of PyTorch profiler traces reduce the same way,
 * through one function on time slices, so that the two sides are measured
 * by one rule:
 *
 *   - a kind's time is, per stream, the length of the union of its
 *     slices (a ring step's grouped send and recv count once, as NCCL's one
 *     SendRecv kernel does), summed over streams;
 *   - exposed communication is the length of the union of communication
 *     slices minus its overlap with the union of every other slice;
 *   - a step's time is, per rank, its last slice's end minus its first
 *     slice's start; the run's is the slowest rank's;
 *   - per-rank figures are means over the steps.
 *
 * Layer: analysis (uses core, model).
 */
#ifndef LOONG_KPROFILE_H
#define LOONG_KPROFILE_H

#include <jansson.h>
#include <stdio.h>

#include "core/trace.h"
#include "kineto.h"

/* One collective op and size: time and count per step, summed over ranks. */
typedef struct kprof_coll {
    int kind;
    double bytes; /* nccl-tests' size; 0: unknown */
    double us, n;
} kprof_coll;

typedef struct kprof {
    int nranks, nsteps;
    int rank0;       /* the first rank: index i is rank rank0 + i */
    double *kind_us; /* [rank * KINETO_KINDS + kind], per step */
    double *kind_n;
    double *step_us;    /* [rank], per step */
    double *exposed_us; /* [rank], per step */
    double run_step_us; /* mean over steps of the slowest rank's step */
    kprof_coll *coll;
    int ncoll;
} kprof;

/* The profile of the chosen steps of a profiler trace set. */
void kprof_of_kineto(const kineto_set *s, kprof *p);
/* The profile of a loong trace of g's configuration (one step). */
void kprof_of_trace(const trace *t, const dag *g, kprof *p);
void kprof_free(kprof *p);

/* Kind totals over ranks (per step), for plots and tests. */
double kprof_kind_total(const kprof *p, int kind);
double kprof_exposed_total(const kprof *p);

/* The #-headed report of pred against meas: step time, per kind, per
 * rank, per collective op and size (sizes matched exactly; the rest
 * listed on one side). The ranks compared are those both have; the step
 * time is the slowest rank's of each side. */
void kprof_compare_print(FILE *f, const kprof *pred, const kprof *meas);
/* The same as JSON (the caller owns the reference). */
json_t *kprof_compare_json(const kprof *pred, const kprof *meas);

/* What the trace set could and could not map: per rank the streams with
 * their role (compute, or the process group of their NCCL kernels), the
 * kernels no rule named (count, time, the most frequent names) and the
 * compute kernels whose work the shapes gave. */
void kineto_set_print(FILE *f, const kineto_set *s, int top_names);

#endif

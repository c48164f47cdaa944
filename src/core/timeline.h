/*
 * timeline: what a timed DAG (simulated or measured) says about one rank —
 * how long its compute stream was busy, how long communication was in
 * flight, and how much of that was exposed (not hidden behind compute).
 * Shared by `loong sim`, `loong exec` and `loong compare`.
 *
 * Layer: core (libc and jansson only: it knows no predictor, measurement or backend).
 */
#ifndef LOONG_TIMELINE_H
#define LOONG_TIMELINE_H

#include "dag.h"

typedef struct rank_timeline {
    double busy;    /* union of compute-stream task intervals */
    double comm;    /* union of communication task intervals (all comm streams) */
    double exposed; /* comm minus its overlap with busy */
    double idle;    /* makespan - busy - exposed (never negative) */
} rank_timeline;

/* A time interval [a, b), and sets of them as sorted disjoint unions: what
 * timeline_rank computes with, shared with the analyses of traces that
 * have no DAG (profiler traces). */
typedef struct tl_span {
    double a, b;
} tl_span;
/* Sort s and merge it in place into its disjoint union; returns the count. */
size_t tl_merge(tl_span *s, size_t n);
/* The summed length of n disjoint spans. */
double tl_length(const tl_span *s, size_t n);
/* The length of the intersection of two disjoint sorted span lists. */
double tl_overlap(const tl_span *u, size_t nu, const tl_span *c, size_t nc);

/* start[id], dur[id] in any one unit (seconds or microseconds), indexed by
 * task id; makespan in the same unit. Zero-length tasks are ignored. */
void timeline_rank(const dag *g, const double *start, const double *dur, int rank, double makespan, rank_timeline *out);

#endif

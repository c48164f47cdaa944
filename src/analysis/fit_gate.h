/*
 * fit_gate: the fitted parameters a calibration is about to write, each
 * with the R^2 of the fit that produced it (on the data it was fitted to,
 * fit_r2) or the reason it has none, judged against a minimum share of
 * the variance explained. `loong calibrate` collects every parameter of
 * every mode here before writing anything: a parameter below the minimum
 * (or without an R^2) stops the write, unless forced.
 *
 * Layer: analysis (uses core).
 */
#ifndef LOONG_FIT_GATE_H
#define LOONG_FIT_GATE_H

#include <stdbool.h>
#include <stddef.h>

#include "fit.h"

/* The default minimum R^2: a fit must explain at least half of the
 * variance of its data, more than it leaves unexplained
 * (docs/validation.md). */
#define FIT_GATE_MIN_R2 0.5

enum { FIT_GATE_MAX = 32 };

typedef struct fit_gate_item {
    char name[64];                /* the parameter(s), as the report names them */
    double r2;                    /* NAN when degenerate */
    int n;                        /* points of the fit */
    char degenerate[FIT_WHY_LEN]; /* why there is no R^2, or "" */
} fit_gate_item;

typedef struct fit_gate {
    int n;
    fit_gate_item item[FIT_GATE_MAX];
} fit_gate;

/* Record a parameter about to be written: its R^2 over n points, or (a
 * non-empty `degenerate`) why it has none. Beyond FIT_GATE_MAX items the
 * last one is overwritten (the callers add at most 12). */
void fit_gate_add(fit_gate *g, const char *name, double r2, int n, const char *degenerate);

/* Whether the item fails at min_r2: degenerate, or R^2 below it. */
bool fit_gate_fails(const fit_gate_item *it, double min_r2);

/* Items of g that fail at min_r2. */
int fit_gate_failing(const fit_gate *g, double min_r2);

/* One phrase about item it at min_r2 into buf: "nvlink_bw: R^2 = -0.943
 * over 5 points, below the minimum 0.5" or "X: no R^2 (why)". */
void fit_gate_describe(const fit_gate_item *it, double min_r2, char *buf, size_t len);

/* The failing items as one note for a written file's origin:
 * "forced past --min-r2 0.5: nvlink_bw R^2 -0.943; ..." ("" if none). */
void fit_gate_note(const fit_gate *g, double min_r2, char *buf, size_t len);

#endif

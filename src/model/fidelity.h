/*
 * fidelity: the model's error on the kind of run being planned, from the
 * fidelity table (experiments/fidelity/recorded.txt, compiled in at build
 * time: docs/validation.md, "The fidelity table").
 *
 * Each recorded row is loong's signed error (%) against one published
 * figure, named KIND.SOURCE.ROW (attn, coll, e2e, mem). A plan of training
 * steps quotes the e2e rows, a plan of attention alone the attn rows.
 *
 * What a ranking needs from those errors is not their mean: a bias common
 * to two layouts cancels in their comparison. What does not cancel is how
 * much the error varies from one run to the next. With r = ln(1 + e/100)
 * per row and s the rows' sample standard deviation, the error of the
 * ratio of two independent predictions has standard deviation sqrt(2) s;
 * two layouts closer than exp(sqrt(2) s) - 1 are within the model's error
 * of each other (the plan's default tie).
 *
 * Layer: model (no backend, no measurement at run time).
 */
#ifndef LOONG_FIDELITY_H
#define LOONG_FIDELITY_H

#include "core/config.h"

typedef struct fidelity_row {
    const char *name; /* e.g. "e2e.megatron.gpt-1.7b" */
    double error_pct; /* signed: predicted vs published, % */
} fidelity_row;

typedef struct fidelity_error {
    const char *kind; /* the rows' prefix: "e2e", "attn" */
    const char *what; /* "end-to-end training steps", "attention" */
    int rows;
    double mean_abs_pct;   /* mean |error| */
    double lo_pct, hi_pct; /* the signed range */
    double between_pct;    /* exp(sqrt(2) s) - 1, in % (0 with one row) */
} fidelity_error;

/* Summarize the rows of `rows` whose name starts with "<kind>." into *out,
 * but for those of a source that also gave a shipped calib file its
 * kernels (fidelity.c's shared_sources: not an independent validation).
 * Returns the number of such rows (0: *out holds zeros). */
int fidelity_summarize(const fidelity_row *rows, int n, const char *kind, fidelity_error *out);

/* The compiled-in fidelity table's summary for a plan of scope s: the e2e
 * rows for training steps, the attn rows for attention scopes. Returns
 * its row count (0 when the table has none for that kind). */
int fidelity_for_scope(scope_kind s, fidelity_error *out);

/* The compiled-in table itself, for tests and `--help` texts. */
const fidelity_row *fidelity_table(int *n);

#endif

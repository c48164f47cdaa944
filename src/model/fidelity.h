/*
 * fidelity: the model's error on the kind of run being planned, from the
 * fidelity table (experiments/fidelity/recorded.txt, compiled in at build
 * time: docs/validation.md, "The fidelity table").
 *
 * Each recorded row is loong's signed error (%) against one published
 * figure, named KIND.SOURCE.ROW (attn, coll, e2e, mem). A plan of training
 * steps quotes the e2e rows of its precision (bf16 or FP8: a source's runs
 * are one or the other, fidelity.c's fp8_sources), a plan of attention
 * alone the attn rows (attention is bf16 in every FP8 recipe). When the
 * table holds at least FIDELITY_GPU_MIN_ROWS such rows of the planned
 * GPU kind, the plan quotes those alone: a model's error on B200s is not
 * its error on A100s (fidelity.c's source_gpus says which GPU each
 * source ran on).
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

#include <stdbool.h>
#include <stddef.h>

#include "core/config.h"

typedef struct fidelity_row {
    const char *name; /* e.g. "e2e.megatron.gpt-1.7b" */
    double error_pct; /* signed: predicted vs published, % */
} fidelity_row;

/* Which runs' rows: any, or those of bf16 or of FP8 (any of the FP8
 * recipes) training steps. */
typedef enum { FIDELITY_ANY, FIDELITY_BF16, FIDELITY_FP8 } fidelity_precision;

typedef struct fidelity_error {
    const char *kind; /* the rows' prefix: "e2e", "attn" */
    const char *what; /* "end-to-end bf16 training steps", "attention" */
    const char *gpu;  /* the GPU kind the rows ran on, or NULL: every kind */
    int rows;
    double mean_abs_pct;   /* mean |error| */
    double lo_pct, hi_pct; /* the signed range */
    double between_pct;    /* exp(sqrt(2) s) - 1, in % (0 with one row) */
} fidelity_error;

/* Summarize the rows of `rows` whose name starts with "<kind>." and whose
 * source ran precision p into *out, but for those of a source that also
 * gave a shipped calib file its kernels (fidelity.c's shared_sources: not
 * an independent validation). Returns the number of such rows (0: *out
 * holds zeros). */
int fidelity_summarize(const fidelity_row *rows, int n, const char *kind, fidelity_precision p, fidelity_error *out);

/* fidelity_summarize of the rows that ran on GPUs of kind `gpu` (e.g.
 * "b200"; NULL: every kind). */
int fidelity_summarize_gpu(const fidelity_row *rows, int n, const char *kind, fidelity_precision p, const char *gpu,
                           fidelity_error *out);

/* The GPU kind row `name` ran on ("a100", "b200", ...) into gpu (len
 * bytes); false when its source does not say (the attention and
 * collective rows) or it does not fit. */
bool fidelity_row_gpu(const char *name, char *gpu, size_t len);

/* A plan quotes its GPU kind's rows alone from this many on. */
#define FIDELITY_GPU_MIN_ROWS 3

/* The compiled-in fidelity table's summary for a plan of scope s in
 * precision p (--precision) on GPUs of kind `gpu` (the platform's; NULL:
 * any): the e2e rows of p's kind (bf16 or FP8) for training steps, or for
 * a mixture of experts (moe) the moe rows when there are any; the attn
 * rows for attention scopes. Of those, the rows of `gpu` alone when there
 * are at least FIDELITY_GPU_MIN_ROWS (out->gpu says so). Returns its row
 * count (0 when the table has none for that kind). */
int fidelity_for_run(scope_kind s, precision_kind p, bool moe, const char *gpu, fidelity_error *out);

/* The compiled-in table itself, for tests and `--help` texts. */
const fidelity_row *fidelity_table(int *n);

#endif

/*
 * compare: a prediction against a measurement, task by task (matched by
 * id). Both traces must describe the same configuration and the same tasks;
 * the report then says how far the step time, each task kind (or rank, or
 * layer), each rank's makespan and the exposed communication are apart, and
 * which tasks are off the most. Used by `loong compare` and the validation
 * experiments.
 *
 * Layer: analysis (uses core, model and GSL).
 */
#ifndef LOONG_COMPARE_H
#define LOONG_COMPARE_H

#include <stdio.h>

#include "core/trace.h"

typedef enum { CMP_BY_KIND, CMP_BY_RANK, CMP_BY_LAYER } cmp_by;

typedef struct cmp_group {
    int key; /* kind, rank or layer (-1: model-level) */
    uint32_t count;
    double median_ape; /* median absolute percentage error of durations, % */
    double mean_ape;
    double pred_us, meas_us; /* summed durations */
} cmp_group;

typedef struct cmp_summary {
    double pred_step_us, meas_step_us, step_err_pct; /* (pred - meas) / meas */
    double pred_exposed_us, meas_exposed_us;         /* summed over ranks */
    cmp_group *groups;
    int ngroups;
} cmp_summary;

/* 0 when the traces come from the same configuration and task set; else -1
 * with a message naming the first difference (a config key, or a task id
 * present in one and not the other). */
int compare_check(const trace *pred, const char *pred_name, const trace *meas, const char *meas_name,
                  char err[LOONG_ERRLEN]);

/* Compute the summary (caller frees s->groups). g is the DAG of the
 * traces' configuration. */
void compare_summarize(const dag *g, const trace *pred, const trace *meas, cmp_by by, cmp_summary *s);

/* Print the #-headed report: step times, groups, per-rank makespans,
 * exposed communication and the `top` tasks with the largest error. */
void compare_print(FILE *f, const dag *g, const trace *pred, const trace *meas, cmp_by by, int top);

#endif

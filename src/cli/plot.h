/*
 * plot: PNG charts through gnuplot (Debian's gnuplot-nox), written
 * atomically. A missing gnuplot is a one-line error, never a crash.
 *
 * Layer: cli (may use every library).
 */
#ifndef LOONG_CLI_PLOT_H
#define LOONG_CLI_PLOT_H

#include "analysis/compare.h"
#include "model/plan.h"

/* Gantt charts of n traces of the same DAG, stacked top to bottom: one row
 * per (rank, stream), one box per task, coloured by task kind. */
int plot_gantt(const char *png, const dag *g, const trace *const *traces, const char *const *titles, int n,
               char err[LOONG_ERRLEN]);

/* A plan's picture: tokens/s/GPU against peak memory for every feasible
 * layout (filled: simulated, open: analytical), coloured by family (the
 * layout's strategy), the GPU memory as a line and the pick (`pick`, an
 * index of ls) marked; beside it, the pick's step split into compute and
 * exposed communication by kind (the analytical model's split, scaled to
 * the pick's step). Returns the points drawn, or -1. */
int plot_plan(const char *png, const plan_layout *ls, int n, int pick, double gpu_mem, double peak,
              char err[LOONG_ERRLEN]);

/* Bars of the median and mean absolute percentage error per group. */
int plot_error_bars(const char *png, const cmp_summary *s, cmp_by by, char err[LOONG_ERRLEN]);

/* Bars of predicted and measured time per group (n groups named
 * names[i], milliseconds), side by side, under `title`. */
int plot_pair_bars(const char *png, const char *const *names, const double *pred_ms, const double *meas_ms, int n,
                   const char *title, char err[LOONG_ERRLEN]);

#endif

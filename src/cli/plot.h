/*
 * plot: PNG charts through gnuplot (Debian's gnuplot-nox), written
 * atomically. A missing gnuplot is a one-line error, never a crash.
 *
 * Layer: cli (may use every library).
 */
#ifndef LOONG_CLI_PLOT_H
#define LOONG_CLI_PLOT_H

#include "analysis/compare.h"

/* Gantt charts of n traces of the same DAG, stacked top to bottom: one row
 * per (rank, stream), one box per task, coloured by task kind. */
int plot_gantt(const char *png, const dag *g, const trace *const *traces, const char *const *titles, int n,
               char err[LOONG_ERRLEN]);

/* Bars of the median and mean absolute percentage error per group. */
int plot_error_bars(const char *png, const cmp_summary *s, cmp_by by, char err[LOONG_ERRLEN]);

#endif

/*
 * strategy: the named strategies of DESIGN.md as presets over the config
 * knobs (mesh split, partition, ring mode, window). Adding a strategy means
 * adding one row to the table in strategy.c: the CLI's --help and errors,
 * the presets and the names `loong plan` gives layouts follow from it.
 *
 * Layer: core (libc and jansson only: it knows no predictor, measurement or backend).
 */
#ifndef LOONG_STRATEGY_H
#define LOONG_STRATEGY_H

#include "config.h"

/* Apply the preset `name` to c. The mesh is given either as both p_head and
 * p_seq (> 0), or as a total rank count in p_total with p_head = p_seq = 0,
 * in which case the preset splits it. Sets c->strategy, mesh, partition,
 * ring and window (the preset's default window; see strategy_default_window).
 * Returns 0, or -1 with a message naming the conflict. */
int strategy_apply(const char *name, int p_head, int p_seq, int p_total, config *c, char err[LOONG_ERRLEN]);

/* Default double-ring window: the largest divisor of P_s whose ring ranks
 * share one node under the placement; when ring neighbours never share a
 * node, the largest divisor of P_s not above sqrt(P_s). A heuristic; `loong
 * plan` searches w instead. */
int strategy_default_window(const config *c);

/* Multi-line "  name  summary" list for --help. */
const char *strategy_help(void);

/* The preset a config's knobs correspond to, for naming (the knobs rule,
 * not the name): the first row whose mesh split fits and whose ring mode
 * is c's, preferring one whose partition is c's too. */
const char *strategy_name_of(const config *c);

#endif

/* Test helpers: configs by strategy, and per-rank sums over a DAG. */
#ifndef LOONG_TEST_DAG_UTIL_H
#define LOONG_TEST_DAG_UTIL_H

#include "core/dag.h"
#include "core/stats.h"
#include "core/strategy.h"

/* A validated config; aborts the test (ck_assert) when invalid. */
config tcfg(const char *model, uint64_t seq, const char *strategy, int ph, int ps, int window, scope_kind scope);
/* Same, returning -1 (with err) instead of asserting. */
int tcfg_try(config *c, const char *model, uint64_t seq, const char *strategy, int ph, int ps, int window,
             scope_kind scope, char err[LOONG_ERRLEN]);
/* Build and validate; asserts. */
dag *tbuild(const config *c);

/* Sum of t->flops over tasks of `rank` (-1: all) with kind k. */
uint64_t sum_flops(const dag *g, int rank, task_kind k);
/* Count and bytes of tasks of rank (-1: all) of kind k on op (-1: any). */
uint64_t count_tasks(const dag *g, int rank, task_kind k, int op);
uint64_t sum_bytes(const dag *g, int rank, task_kind k, int op);

#endif

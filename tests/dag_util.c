#include "dag_util.h"

#include <check.h>
#include <stdio.h>

int tcfg_try(config *c, const char *model, uint64_t seq, const char *strategy, int ph, int ps, int window,
             scope_kind scope, char err[LOONG_ERRLEN])
{
    config_defaults(c);
    if (model_preset(model, &c->model, err) < 0) return -1;
    c->seq = seq;
    if (strategy_apply(strategy, ph, ps, 0, c, err) < 0) return -1;
    if (window > 0) c->window = window;
    c->scope = scope;
    return config_validate(c, err);
}

config tcfg(const char *model, uint64_t seq, const char *strategy, int ph, int ps, int window, scope_kind scope)
{
    config c;
    char err[LOONG_ERRLEN] = "";
    int rc = tcfg_try(&c, model, seq, strategy, ph, ps, window, scope, err);
    ck_assert_msg(rc == 0, "config %s %dx%d w=%d: %s", strategy, ph, ps, window, err);
    return c;
}

dag *tbuild(const config *c)
{
    char err[LOONG_ERRLEN] = "";
    dag *g = dag_build(c, err);
    ck_assert_msg(g != NULL, "build: %s", err);
    ck_assert_msg(dag_validate(g, err) == 0, "validate: %s", err);
    return g;
}

uint64_t sum_flops(const dag *g, int rank, task_kind k)
{
    uint64_t s = 0;
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if ((rank < 0 || t->rank == rank) && t->kind == k) s += t->flops;
    }
    return s;
}

static uint64_t tally(const dag *g, int rank, task_kind k, int op, bool bytes)
{
    uint64_t s = 0;
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if ((rank < 0 || t->rank == rank) && t->kind == k && (op < 0 || t->op == op)) s += bytes ? t->bytes : 1;
    }
    return s;
}

uint64_t count_tasks(const dag *g, int rank, task_kind k, int op) { return tally(g, rank, k, op, false); }
uint64_t sum_bytes(const dag *g, int rank, task_kind k, int op) { return tally(g, rank, k, op, true); }

/*
 * sim_coll: the engine of `loong coll`, nccl-tests on a simulated
 * platform. One actor per GPU of the group runs the collective of every
 * size in turn, exactly as a DAG's collective task runs (sim_flow_nccl),
 * between two barriers so that sizes never overlap; the time of a size is
 * from the first barrier's release to the second's.
 */
#include <simgrid/actor.h>
#include <simgrid/barrier.h>
#include <simgrid/engine.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"
#include "core/xalloc.h"

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(loong_sim_coll, loong, "loong coll: collectives on a simulated platform");

typedef struct coll_bench {
    sim_state S; /* first: an actor's stream points here */
    nccl_group g;
    nccl_sweep a;
    double *seconds;
    nccl_plan *plans;
    sg_bar_t bar;
    sim_stream *members;
} coll_bench;

static void member_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    sim_stream *me = sg_actor_self_get_data();
    coll_bench *B = (coll_bench *)me->S;
    int i = (int)(me - B->members);
    for (int k = 0; k < B->a.nsizes; k++) {
        sg_barrier_wait(B->bar);
        double t0 = simgrid_get_clock();
        nccl_plan p = sim_flow_nccl(me, &B->g, i, B->a.op, B->a.sizes[k], B->a.algo, B->a.proto, 0);
        sg_barrier_wait(B->bar);
        if (i) continue;
        B->seconds[k] = simgrid_get_clock() - t0;
        B->plans[k] = p;
        XBT_VERB("%s %.0f B: %.3f us (%s/%s)", coll_op_name(B->a.op), B->a.sizes[k], 1e6 * B->seconds[k],
                 nccl_algo_name(p.algo), nccl_proto_name(p.proto));
    }
}

static void start_members(void *arg)
{
    coll_bench *B = arg;
    for (int i = 0; i < B->a.gpus; i++) {
        sim_stream *st = &B->members[i];
        st->S = &B->S;
        st->rank = B->g.rank[i];
        char name[32];
        snprintf(name, sizeof name, "gpu%d", st->rank);
        sg_actor_t act = sg_actor_init(name, B->S.hosts[st->rank]);
        sg_actor_set_data(act, st);
        sg_actor_start(act, member_main, 0, NULL);
    }
}

int sim_coll_bench(sim_platform *pf, const nccl_sweep *a, double *seconds, nccl_plan *plans, char err[LOONG_ERRLEN])
{
    const platform_spec *sp = sim_platform_nccl_spec(pf);
    if (!sp) {
        snprintf(err, LOONG_ERRLEN,
                 "platform has no loong_spec with NCCL collectives (nccl=1): generate it with loong topo --gpu "
                 "h100|h200|b200|b300|gb200|gb300|a100|a100-pcie");
        return -1;
    }
    coll_bench B = {.a = *a, .seconds = seconds, .plans = plans};
    if (nccl_group_uniform(&B.g, sp, a->gpus, a->nodes) < 0) {
        snprintf(err, LOONG_ERRLEN, "%d GPUs do not spread evenly over %d of the platform's %d nodes x %d GPUs",
                 a->gpus, a->nodes, sp->nodes, sp->gpus_per_node);
        return -1;
    }
    B.S.spec = sp;
    B.S.P = B.S.reps = B.S.dp = 1;
    B.S.hosts = sim_platform_hosts(pf);
    B.S.links = sim_links_new(pf);
    B.S.faults = sim_platform_faults(pf);
    B.members = xcalloc((size_t)a->gpus, sizeof *B.members, "the collective's members");
    B.bar = sg_barrier_init((unsigned)a->gpus);
    int last = 0;
    for (int i = 0; i < a->gpus; i++)
        last = B.g.rank[i] > last ? B.g.rank[i] : last;
    int rc = sim_start_checked(&B.S, B.S.hosts[0], last + 1, start_members, &B, err);
    for (int i = 0; i < a->gpus; i++)
        sim_flow_release(&B.members[i]);
    sg_barrier_destroy(B.bar);
    free(B.members);
    sim_links_free(B.S.links);
    nccl_group_free(&B.g);
    return rc;
}

/*
 * sim_flow: communication as SimGrid flows. One flow per NCCL transfer
 * (never per channel), over a mailbox per (stream, sender, receiver): each
 * stream is its own communicator and issues its transfers in stream order,
 * so FIFO matching on such a channel pairs every send with its recv exactly
 * as the DAG's `match` does.
 *
 * - p2p: a send puts its bytes, a recv gets; a send and the grouped recv
 *   after it are issued together and waited together (NCCL group).
 * - all-to-all: each member sends bytes/(n-1) to every other member and
 *   receives as much, all flows concurrent, issued in NCCL's rotating order
 *   (send to me+k while receiving from me-k, k = 1..n-1).
 * - all-reduce / reduce-scatter / all-gather on a platform that runs
 *   NCCL's collectives (its loong_spec says nccl=1): the flows of the
 *   algorithm NCCL's tuner picks (model/nccl.h: rings over every rail,
 *   double binary trees, NVLS), after a sleep for the latency they do not
 *   carry themselves. All-to-all the same way, so that it pays NCCL's
 *   latency too.
 * - elsewhere (CPU ranks, hand-written platforms): one pipelined ring flow
 *   per member to its successor carrying everything the member sends (the
 *   task's bytes: 2(n-1) or n-1 chunks), as MPI's ring does.
 */
#include <simgrid/actor.h>
#include <simgrid/host.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/mailbox.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <xbt/log.h>

#include "sim_internal.h"
#include "sim_s4u.h"
#include "core/xalloc.h"

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(loong_sim_flow, loong, "loong sim: point-to-point and collective flows");

/* Only the byte count is simulated, but SimGrid refuses a NULL payload. */
static char payload;

static sg_mailbox_t channel(sim_chan **cache, int *n, int *cap, int stream, int from, int to, int peer)
{
    for (int i = 0; i < *n; i++)
        if ((*cache)[i].peer == peer) return (*cache)[i].mb;
    char name[48];
    snprintf(name, sizeof name, "%d.%d>%d", stream, from, to);
    sg_mailbox_t mb = sg_mailbox_by_name(name);
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 4;
        *cache = xrealloc_array(*cache, (size_t)*cap, sizeof **cache, "a stream's mailboxes");
    }
    (*cache)[(*n)++] = (sim_chan){peer, mb};
    return mb;
}

/* A transfer rerouted around a failed link (sim_links.c) through GPU `via`:
 * a relay actor runs both legs at once, each a SimGrid flow over its own
 * route, and holds the transfer's end until max over legs k of (end_k +
 * the other leg's latency): cut-through, so on idle links it ends at
 * lat1 + lat2 + bytes / (the slower leg's bandwidth), the whole path's
 * alpha-beta. It then takes the sender's zero-byte put (on the sender's
 * host) and, moved to the receiver's host, makes the zero-byte put the
 * receiver's get matches: both ends see the transfer end when it does. */
typedef struct relay_job {
    sg_host_t src, via, dst;
    uint64_t bytes;
    double lat[2];
    sg_mailbox_t ack, chan;
} relay_job;

static void relay_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    relay_job *j = sg_actor_self_get_data();
    sg_comm_t legs[2] = {sim_s4u_sendto_async(j->src, j->via, j->bytes),
                         sim_s4u_sendto_async(j->via, j->dst, j->bytes)};
    int who[2] = {0, 1};
    double until = 0;
    for (int left = 2; left > 0; left--) {
        ssize_t k = sg_comm_wait_any(legs, (size_t)left);
        xbt_assert(k >= 0, "loong sim: a rerouted transfer failed");
        double end = simgrid_get_clock() + j->lat[1 - who[k]];
        if (end > until) until = end;
        legs[k] = legs[left - 1];
        who[k] = who[left - 1];
    }
    if (until - simgrid_get_clock() >= SIM_MIN_SLEEP) sg_actor_sleep_until(until);
    sg_mailbox_get(j->ack);
    sg_actor_set_host(sg_actor_self(), j->dst);
    sg_mailbox_put(j->chan, &payload, 0);
    free(j);
}

static sg_comm_t put_relayed(sim_stream *me, sg_mailbox_t chan, int peer, uint64_t bytes, const sim_path *p)
{
    sim_state *S = me->S;
    char name[64];
    snprintf(name, sizeof name, "%s/ack", sg_mailbox_get_name(chan));
    relay_job *j = xmalloc_array(1, sizeof *j, "a rerouted transfer");
    *j = (relay_job){sim_host_of(S, me->rank),
                     S->hosts[p->via],
                     sim_host_of(S, peer),
                     bytes,
                     {p->lat1, p->lat2},
                     sg_mailbox_by_name(name),
                     chan};
    sg_actor_t a = sg_actor_init("relay", j->src);
    sg_actor_set_data(a, j);
    sg_actor_start(a, relay_main, 0, NULL);
    return sg_mailbox_put_async(j->ack, &payload, 0);
}

static sg_comm_t put(sim_stream *me, int peer, uint64_t bytes)
{
    sg_mailbox_t mb = channel(&me->out, &me->nout, &me->capout, me->stream, me->rank, peer, peer);
    sim_path p = sim_links_add(me->S->links, sim_gpu(me->S, me->rank), sim_gpu(me->S, peer), (double)bytes);
    if (p.via >= 0) return put_relayed(me, mb, peer, bytes, &p);
    return sg_mailbox_put_async(mb, &payload, (long)bytes);
}

static sg_comm_t get(sim_stream *me, int peer)
{
    static void *sink;
    sg_mailbox_t mb = channel(&me->in, &me->nin, &me->capin, me->stream, peer, me->rank, peer);
    return sg_mailbox_get_async(mb, &sink);
}

/* A flow between the representative and rank `other`, a head or ring rank
 * the fold does not run, as a host-to-host transfer the representative's
 * actor alone issues and waits for, over the same route: from it (an
 * out-flow) or to it (an in-flow). By symmetry the folded rank's links
 * carry what the representative's do, so the representative's own links,
 * which the stand-ins load as the real flows would, set its share
 * (docs/sim.md). */
static sg_comm_t stand_in(const sim_stream *me, int other, bool out, double bytes)
{
    sim_state *S = me->S;
    sg_host_t mine = sim_host_of(S, me->rank), theirs = sim_host_of(S, other);
    return sim_s4u_sendto_async(out ? mine : theirs, out ? theirs : mine, (uint64_t)llround(bytes < 1 ? 1 : bytes));
}

/* What a send/recv puts on the wire: NCCL moves nvl_eff of NVLink's line
 * rate (platform_spec.h), so a transfer inside an NVLink domain carries
 * 1/nvl_eff of its bytes over the links it crosses, as a collective's
 * flows do (nccl_member_flows). */
static double p2p_wire(const sim_state *S, int rank, int peer, double bytes)
{
    const platform_spec *sp = S->spec;
    if (!sp || !sp->nccl || sp->nvl_eff == 1) return bytes;
    placement pl = platform_spec_placement(sp);
    bool nvlink = placement_node(&pl, sim_gpu(S, rank)) == placement_node(&pl, sim_gpu(S, peer));
    return nvlink ? bytes / sp->nvl_eff : bytes;
}

void sim_flow_p2p_group(sim_stream *me, const uint32_t *ids, int n)
{
    sim_state *S = me->S;
    double *start = S->start + me->off, *dur = S->dur + me->off;
    sg_comm_t comms[8];
    uint32_t who[8];
    double now = simgrid_get_clock();
    xbt_assert(n <= 8, "loong sim: NCCL group of %d p2p tasks (at most 8 supported)", n);
    for (int i = 0; i < n; i++) {
        const dag_task *t = dag_task_get(S->g, ids[i]);
        int peer = sim_rank_of(S, t->peer, me->rep);
        bool send = t->kind == TASK_SEND;
        if (!sim_rank_runs(S, peer)) /* a ring rank run by symmetry posts its step as this one does: now */
            comms[i] = stand_in(me, peer, send, p2p_wire(S, me->rank, peer, (double)dag_task_bytes_moved(S->g, t)));
        else
            comms[i] =
                send ? put(me, peer, (uint64_t)llround(p2p_wire(S, me->rank, peer, (double)t->bytes))) : get(me, peer);
        who[i] = ids[i];
        start[ids[i]] = now;
    }
    /* wait_any so each task ends when its own transfer does */
    for (int left = n; left > 0; left--) {
        ssize_t k = sg_comm_wait_any(comms, (size_t)left);
        xbt_assert(k >= 0, "loong sim: wait_any failed");
        dur[who[k]] = simgrid_get_clock() - start[who[k]];
        XBT_DEBUG("rank %d %s: task %u done after %.9f s", me->rank, stream_name(me->stream), who[k], dur[who[k]]);
        comms[k] = comms[left - 1];
        who[k] = who[left - 1];
    }
}

static int member_index(const int32_t *mem, int n, int rank)
{
    for (int i = 0; i < n; i++)
        if (mem[i] == rank) return i;
    return -1;
}

static int cmp_rank(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The rank a flow reaches: the member's (g holds GPUs), or under a fold
 * the member's representative (the same GPU of this replica, TP rank 0 of
 * its group); -1 when that is the sender itself (its share is in the
 * collective's model time). Under the head or seq fold, a member that is
 * not a representative (in this replica) has no simulated actor to pair with:
 * -2, and *stand the rank whose GPU a stand-in reaches (stand_in). */
static int flow_peer(const sim_stream *me, const nccl_group *g, int member, mesh_dims fold, int *stand)
{
    const mesh *m = &me->S->mesh;
    int r = sim_rank_on(me->S, g->rank[member]);
    if (fold & SIM_FOLD_STANDIN) {
        int here = fold & MESH_BIT(MESH_DP) ? mesh_fold(m, MESH_BIT(MESH_DP), r) : r;
        if (mesh_fold(m, me->S->folded & SIM_FOLD_COPIED, here) != here) return *stand = here, -2;
    }
    if (fold) r = mesh_fold(m, me->S->folded, r);
    return r == me->rank ? -1 : r;
}

/* Issue every flow of member me_i and wait for them. */
static void run_flows(sim_stream *me, const nccl_group *g, const nccl_plan *p, coll_op op, double size, int me_i,
                      mesh_dims fold)
{
    int cap = nccl_max_flows(g, op), nout, nin, k = 0;
    nccl_flow *out = xmalloc_array((size_t)cap, sizeof *out, "a collective's flows");
    nccl_flow *in = xmalloc_array((size_t)cap, sizeof *in, "a collective's flows");
    nccl_member_flows(g, p, op, size, me_i, fold != 0, out, &nout, in, &nin);
    sg_comm_t *comms = xmalloc_array((size_t)(nout + nin) + 1, sizeof *comms, "a collective's flows");
    for (int i = 0; i < nout; i++) {
        int other, peer = flow_peer(me, g, out[i].peer, fold, &other);
        if (peer >= 0) comms[k++] = put(me, peer, (uint64_t)llround(out[i].bytes < 1 ? 1 : out[i].bytes));
        if (peer == -2) comms[k++] = stand_in(me, other, true, out[i].bytes);
    }
    for (int i = 0; i < nin; i++) {
        int other, peer = flow_peer(me, g, in[i].peer, fold, &other);
        if (peer >= 0) comms[k++] = get(me, peer);
        if (peer == -2) comms[k++] = stand_in(me, other, false, in[i].bytes);
    }
    if (k) sg_comm_wait_all(comms, (size_t)k);
    XBT_DEBUG("rank %d: %s of %.0f B over %d ranks on %d nodes: %s/%s, %d of %d+%d flows", me->rank, coll_op_name(op),
              size, g->n, g->nnodes, nccl_algo_name(p->algo), nccl_proto_name(p->proto), k, nout, nin);
    free(comms);
    free(out);
    free(in);
}

nccl_plan sim_flow_nccl(sim_stream *me, const nccl_group *g, int me_i, coll_op op, double size, int algo, int proto,
                        mesh_dims fold)
{
    const platform_spec *sp = me->S->spec;
    double t0 = simgrid_get_clock();
    nccl_plan p;
    nccl_plan_lenient(sp, g, op, size, algo, proto, &p);
    if (g->n < 2) return p;
    double extra = p.alpha - nccl_flow_latency(sp, g);
    if (extra >= SIM_MIN_SLEEP) sg_actor_sleep_for(extra);
    run_flows(me, g, &p, op, size, me_i, fold);
    /* by symmetry: no faster than on an idle platform, the NIC shares of
     * dropped self-flows included (the head and seq folds drop none: stand-ins) */
    if ((fold & ~SIM_FOLD_STANDIN) && t0 + p.seconds - simgrid_get_clock() >= SIM_MIN_SLEEP)
        sg_actor_sleep_until(t0 + p.seconds);
    return p;
}

/* Whether group gid spans the data-parallel replicas (the gradient group). */
static bool spans_dp(const sim_state *S, uint32_t gid) { return dag_group_dims(S->g, gid) & MESH_BIT(MESH_DP); }

/* The GPUs of group gid in replica rep: the DAG's members unfolded into
 * rep, or for a group over dp the same members of every replica (dag.h),
 * each on its GPU (config_gpu_of), which NCCL's shape of the group needs.
 * The caller frees *out. */
/* The first replica of the run of group gid's replicas that holds
 * replica rep (dag_group_replicas), and their stride and count. */
static int replica_base(const sim_state *S, uint32_t gid, int rep, int *stride, int *count)
{
    dag_group_replicas(S->g, gid, stride, count);
    int run = *stride * *count;
    return rep % *stride + rep / run * run;
}

static int group_ranks(const sim_state *S, uint32_t gid, int rep, int **out)
{
    int n, stride, count;
    const int32_t *mem = dag_group(S->g, gid, &n);
    bool dp = spans_dp(S, gid);
    int base = dp ? replica_base(S, gid, rep, &stride, &count) : rep, reps = dp ? count : 1;
    *out = xmalloc_array((size_t)n * (size_t)reps, sizeof **out, "a collective group");
    for (int k = 0; k < reps; k++) /* every replica's, simulated or not */
        for (int i = 0; i < n; i++)
            (*out)[k * n + i] = sim_gpu(S, dp ? mesh_unfold(&S->mesh, MESH_DIMS_DP, mem[i], base + k * stride)
                                              : sim_rank_of(S, mem[i], rep));
    return n * reps;
}

/* The NCCL shape of the task's group in me's replica, built on first use;
 * a group over dp, the same for its run of replicas, once (at the run's
 * first replica's index), on the platform that holds every replica. */
static const nccl_group *task_group(const sim_stream *me, const dag_task *t)
{
    sim_state *S = me->S;
    int stride, count, rep = spans_dp(S, t->group) ? replica_base(S, t->group, me->rep, &stride, &count) : me->rep;
    nccl_group *g = &S->groups[(size_t)rep * dag_ngroups(S->g) + t->group];
    if (g->n) return g;
    int *ranks, n = group_ranks(S, t->group, rep, &ranks);
    const platform_spec *sp = spans_dp(S, t->group) ? &S->dp_spec : S->spec;
    xbt_assert(nccl_group_init(g, sp, ranks, n) == 0, "loong sim: group %u is off the platform", t->group);
    free(ranks);
    return g;
}

/* The experts' all-to-all-v (core/build_ep.c) under a skewed routing:
 * each member sends member j the rows j's experts draw (the dispatch, and
 * the combine's gradient) or gives back what it drew from each (the
 * combine, the dispatch's gradient), config_ep_pair_rows, so the hot
 * experts' rank receives, then sends back, the most. NCCL's latency and
 * protocol factor are those of the group's mean all-to-all (plan p). */
static void ep_alltoallv(sim_stream *me, const nccl_group *g, const nccl_plan *p, const dag_task *t, int me_i,
                         mesh_dims fold)
{
    const config *c = me->S->c;
    bool spread = (t->op == OP_EP_DISPATCH) == (t->phase != PHASE_BWD);
    double row = (double)c->model.hidden * c->act_bytes *
                 (p->busbw > 0 && p->raw_busbw < HUGE_VAL ? p->raw_busbw / p->busbw : 1);
    int mine = config_ep_rank(c, config_rank_of_gpu(c, g->rank[me_i]));
    sg_comm_t *comms = xmalloc_array(2 * (size_t)g->n, sizeof *comms, "an all-to-all's flows");
    int k = 0;
    for (int j = 0; j < g->n; j++) {
        int other, peer = j == me_i ? -1 : flow_peer(me, g, j, fold, &other);
        if (peer < 0) continue;
        int theirs = config_ep_rank(c, config_rank_of_gpu(c, g->rank[j]));
        double rows = (double)config_ep_pair_rows(c, spread ? theirs : mine);
        comms[k++] = put(me, peer, (uint64_t)llround(rows * row < 1 ? 1 : rows * row));
        comms[k++] = get(me, peer);
    }
    if (k) sg_comm_wait_all(comms, (size_t)k);
    free(comms);
}

/* A collective as NCCL runs it. A group over dp folds when the other
 * replicas are simulated by symmetry, a TP group when the TP ranks are. */
static void nccl_collective(sim_stream *me, const dag_task *t)
{
    sim_state *S = me->S;
    const config *c = S->c;
    const nccl_group *g = task_group(me, t);
    int gpu = sim_gpu(S, me->rank);
    const int *at = bsearch(&gpu, g->rank, (size_t)g->n, sizeof *g->rank, cmp_rank);
    xbt_assert(at, "loong sim: rank %d is not in the group of task %u", me->rank, t->id);
    int n; /* the DAG's members, whose count sized the task; one member: the replicas' (build.c) */
    dag_group(S->g, t->group, &n);
    if (n == 1) n = S->dp;
    if (t->kind == TASK_ALLTOALL) n = g->n; /* its bytes are what the rank sends: the whole group's */
    mesh_dims fold = dag_group_dims(S->g, t->group) & S->folded; /* the dimensions run by symmetry it spans */
    double size = nccl_size_of_task(t->kind, (double)t->bytes, n);
    nccl_plan p;
    if (t->kind == TASK_ALLTOALL && t->stream == STREAM_EP && config_routing_skewed(c)) { /* an all-to-all-v */
        double t0 = simgrid_get_clock();
        nccl_plan_lenient(S->spec, g, COLL_ALLTOALL, size, (int)c->nccl_algo - 1, (int)c->nccl_proto - 1, &p);
        double extra = p.alpha - nccl_flow_latency(S->spec, g);
        if (extra >= SIM_MIN_SLEEP) sg_actor_sleep_for(extra);
        ep_alltoallv(me, g, &p, t, (int)(at - g->rank), fold);
        /* by symmetry (folded replicas' flows dropped): no faster than the mean all-to-all alone */
        if (fold && t0 + p.seconds - simgrid_get_clock() >= SIM_MIN_SLEEP) sg_actor_sleep_until(t0 + p.seconds);
    } else {
        p = sim_flow_nccl(me, g, (int)(at - g->rank), nccl_op_of_task(t->kind), size, (int)c->nccl_algo - 1,
                          (int)c->nccl_proto - 1, fold);
    }
    double *dur = S->dur + me->off, *start = S->start + me->off;
    dur[t->id] = simgrid_get_clock() - start[t->id];
    XBT_DEBUG("rank %d %s: %s task %u, %s/%s, %.9f s", me->rank, stream_name(me->stream), task_kind_name(t->kind),
              t->id, nccl_algo_name(p.algo), nccl_proto_name(p.proto), dur[t->id]);
}

void sim_flow_collective(sim_stream *me, const dag_task *t)
{
    sim_state *S = me->S;
    double *dur = S->dur + me->off, *start = S->start + me->off;
    int n;
    const int32_t *mem = dag_group(S->g, t->group, &n);
    int me_i = member_index(mem, n, mesh_fold(&S->mesh, MESH_BIT(MESH_DP), me->rank));
    xbt_assert(me_i >= 0, "loong sim: rank %d is not in the group of task %u", me->rank, t->id);
    start[t->id] = simgrid_get_clock();
    if (n < 2 && !(spans_dp(S, t->group) && S->dp > 1)) {
        dur[t->id] = 0;
        return;
    }
    if (S->spec) {
        nccl_collective(me, t);
        return;
    }
    bool a2a = t->kind == TASK_ALLTOALL;
    int nflows = a2a ? n - 1 : 1;
    sg_comm_t *comms = xmalloc_array((size_t)(2 * nflows), sizeof *comms, "a collective's flows");
    uint64_t bytes = a2a ? t->bytes / (uint64_t)(n - 1) : t->bytes;
    for (int k = 1; k <= nflows; k++) {
        comms[2 * (k - 1)] = put(me, sim_rank_of(S, mem[(me_i + k) % n], me->rep), bytes);
        comms[2 * (k - 1) + 1] = get(me, sim_rank_of(S, mem[(me_i - k + n) % n], me->rep));
    }
    sg_comm_wait_all(comms, (size_t)(2 * nflows));
    free(comms);
    dur[t->id] = simgrid_get_clock() - start[t->id];
    XBT_DEBUG("rank %d %s: %s task %u, %d flows of %llu B over %d ranks, %.9f s", me->rank, stream_name(me->stream),
              task_kind_name(t->kind), t->id, nflows, (unsigned long long)bytes, n, dur[t->id]);
}

void sim_flow_release(sim_stream *st)
{
    free(st->out);
    free(st->in);
    st->out = st->in = NULL;
    st->nout = st->nin = st->capout = st->capin = 0;
}

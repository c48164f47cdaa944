/*
 * validate: prove a DAG keeps the contract of dag.h — deps well-formed, p2p
 * pairs matched, collectives complete, and no cycle.
 *
 * Deadlock freedom is acyclicity of the graph whose nodes are tasks, with a
 * collective instance and an NCCL-style group (send + recv of one ring step)
 * each contracted to one node, and whose edges are deps, stream order and
 * send -> recv. Kahn's algorithm decides it in linear time.
 */
#include "dag_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bad(char err[LOONG_ERRLEN], const dag *g, uint32_t id, const char *what)
{
    char label[96];
    const dag_task *t = dag_task_get(g, id);
    dag_task_label(t, label, sizeof label);
    snprintf(err, LOONG_ERRLEN, "invalid DAG: task %u (%s, rank %d, stream %s): %s", id, label, t->rank,
             stream_name(t->stream), what);
    return -1;
}

static int check_deps(const dag *g, const dag_task *t, char err[LOONG_ERRLEN])
{
    const uint32_t *d = dag_deps(g, t);
    for (uint16_t k = 0; k < t->ndeps; k++) {
        const dag_task *u = dag_task_get(g, d[k]);
        if (!u || d[k] >= t->id) return bad(err, g, t->id, "depends on a later or missing task");
        if (u->rank != t->rank) return bad(err, g, t->id, "depends on another rank's task");
        if (u->stream == t->stream) return bad(err, g, t->id, "lists a same-stream dependency");
    }
    return 0;
}

static int check_p2p(const dag *g, const dag_task *t, char err[LOONG_ERRLEN])
{
    if (dag_rank_source(g, t->peer) != t->peer) { /* an unbuilt peer (dag.h): no match, the ring's data */
        if (t->match != DAG_NONE) return bad(err, g, t->id, "is matched with a rank the folded DAG did not build");
        if (t->kind == TASK_SEND ? !t->bytes : t->bytes != 0)
            return bad(err, g, t->id, "a send must carry bytes, a recv 0");
        if (t->op != OP_KV && t->op != OP_DKV) return bad(err, g, t->id, "crosses a fold but is not a ring step");
        return 0;
    }
    const dag_task *m = dag_task_get(g, t->match);
    int want = t->kind == TASK_SEND ? TASK_RECV : TASK_SEND;
    if (!m || m->kind != want || m->match != t->id) return bad(err, g, t->id, "has no matching send/recv");
    if (m->rank != t->peer || m->peer != t->rank) return bad(err, g, t->id, "its match names other peers");
    if (m->stream != t->stream || m->op != t->op || m->src != t->src)
        return bad(err, g, t->id, "its match is on another stream or moves other data");
    if (memcmp(m->dim, t->dim, sizeof t->dim)) return bad(err, g, t->id, "its match has another shape");
    if (t->kind == TASK_RECV && t->bytes) return bad(err, g, t->id, "a recv must carry 0 bytes");
    if (t->kind == TASK_SEND && !t->bytes) return bad(err, g, t->id, "a send must carry bytes");
    return 0;
}

static int check_member(const dag *g, const dag_task *t, char err[LOONG_ERRLEN])
{
    const dag_task *root = dag_task_get(g, t->match);
    if (t->group >= dag_ngroups(g) || !root || root->match != root->id)
        return bad(err, g, t->id, "collective without a valid group or instance");
    /* the experts' all-to-alls are all-to-all-v: each member sends its own rows */
    bool v = t->kind == TASK_ALLTOALL && t->stream == STREAM_EP;
    if (root->kind != t->kind || root->op != t->op || root->group != t->group || (root->bytes != t->bytes && !v) ||
        root->stream != t->stream)
        return bad(err, g, t->id, "differs from the other members of its collective");
    int gn;
    const int32_t *mem = dag_group(g, t->group, &gn);
    for (int k = 0; k < gn; k++)
        if (mem[k] == t->rank) return 0;
    return bad(err, g, t->id, "rank is not a member of its collective's group");
}

/* Members of each collective instance: exactly its group, once each. The
 * instance's tasks are gathered by root id (counting sort), then each
 * member rank is stamped. */
static int check_collectives(const dag *g, char err[LOONG_ERRLEN])
{
    uint32_t n = dag_ntasks(g);
    int ranks = config_ranks(dag_config(g));
    uint32_t *off = dag_big_alloc((size_t)n + 2, sizeof *off, true);
    uint32_t *ids = dag_big_alloc((size_t)n + 1, sizeof *ids, false);
    uint32_t *stamp = dag_big_alloc((size_t)ranks, sizeof *stamp, false);
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        const dag_task *t = dag_task_get(g, i);
        if (!task_is_collective(t)) continue;
        rc = check_member(g, t, err);
        if (rc == 0) off[t->match + 1]++;
    }
    for (uint32_t i = 0; i < n; i++)
        off[i + 1] += off[i];
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        const dag_task *t = dag_task_get(g, i);
        if (task_is_collective(t)) ids[off[t->match]++] = i;
    }
    for (uint32_t i = n; i > 0; i--)
        off[i] = off[i - 1];
    off[0] = 0;
    for (int r = 0; r < ranks; r++)
        stamp[r] = DAG_NONE;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        const dag_task *t = dag_task_get(g, i);
        if (!task_is_collective(t) || t->match != i) continue;
        int gn, built = 0;
        const int32_t *mem = dag_group(g, t->group, &gn);
        for (int k = 0; k < gn; k++) /* a folded DAG's unbuilt members take part by symmetry */
            built += dag_rank_source(g, mem[k]) == mem[k];
        if (off[i + 1] - off[i] != (uint32_t)built) rc = bad(err, g, i, "collective instance lacks group members");
        for (uint32_t k = off[i]; k < off[i + 1] && rc == 0; k++) {
            int r = dag_task_get(g, ids[k])->rank;
            if (stamp[r] == i) rc = bad(err, g, ids[k], "rank appears twice in one collective instance");
            stamp[r] = i;
        }
    }
    free(off);
    free(ids);
    free(stamp);
    return rc;
}

/* ---- acyclicity ----
 * Each contracted node R (a task, a send+recv group, or a collective
 * instance) becomes two vertices: its issue 2R and its completion 2R+1.
 * Edges: issue -> completion; completion of a dep or of the stream
 * predecessor -> issue; issue of a send -> completion of its recv. A cycle
 * in this graph is exactly a schedule that cannot complete. */

static void contract(const dag *g, uint32_t *rep)
{
    uint32_t n = dag_ntasks(g);
    for (uint32_t i = 0; i < n; i++) {
        const dag_task *t = dag_task_get(g, i);
        rep[i] = task_is_collective(t) ? t->match : i;
    }
    for (int r = 0; r < config_ranks(dag_config(g)); r++)
        for (int s = 0; s < STREAM_COUNT; s++) {
            uint32_t cnt;
            const uint32_t *ids = dag_stream_tasks(g, r, s, &cnt);
            for (uint32_t k = 1; k < cnt; k++)
                if (dag_task_get(g, ids[k])->flags & DAG_F_GROUPED) rep[ids[k]] = rep[ids[k - 1]];
        }
}

typedef struct graph {
    const dag *g;
    uint32_t *rep;
    uint32_t *off, *adj, *indeg, *fill;
    bool filling;
} graph;

static void edge(graph *G, uint32_t u, uint32_t v)
{
    if (G->filling) {
        G->adj[G->fill[u]++] = v;
    } else {
        G->off[u + 1]++;
        G->indeg[v]++;
    }
}

/* One pass over all edges: counting (sizes) or filling (adjacency). */
static void edges_pass(graph *G, uint32_t *prev_of_stream)
{
    const dag *g = G->g;
    size_t ns = (size_t)config_ranks(dag_config(g)) * STREAM_COUNT;
    for (size_t k = 0; k < ns; k++)
        prev_of_stream[k] = DAG_NONE;
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        uint32_t R = G->rep[i], *prev = &prev_of_stream[(size_t)t->rank * STREAM_COUNT + t->stream];
        if (R == i) edge(G, 2 * R, 2 * R + 1);
        const uint32_t *d = dag_deps(g, t);
        for (uint16_t k = 0; k < t->ndeps; k++)
            edge(G, 2 * G->rep[d[k]] + 1, 2 * R);
        if (*prev != DAG_NONE && !(t->flags & DAG_F_GROUPED)) edge(G, 2 * G->rep[*prev] + 1, 2 * R);
        if (t->kind == TASK_RECV && t->match != DAG_NONE) edge(G, 2 * G->rep[t->match], 2 * R + 1);
        *prev = i;
    }
}

static int check_acyclic(const dag *g, char err[LOONG_ERRLEN])
{
    uint32_t n = dag_ntasks(g), V = 2 * n;
    size_t ns = (size_t)config_ranks(dag_config(g)) * STREAM_COUNT;
    graph G = {g,
               dag_big_alloc((size_t)n + 1, sizeof(uint32_t), false),
               dag_big_alloc((size_t)V + 2, sizeof(uint32_t), true),
               NULL,
               dag_big_alloc((size_t)V + 1, sizeof(uint32_t), true),
               dag_big_alloc((size_t)V + 1, sizeof(uint32_t), false),
               false};
    uint32_t *prev = dag_big_alloc(ns, sizeof *prev, false);
    contract(g, G.rep);
    edges_pass(&G, prev);
    for (uint32_t v = 0; v < V; v++)
        G.off[v + 1] += G.off[v];
    G.adj = dag_big_alloc((size_t)G.off[V] + 1, sizeof *G.adj, false);
    memcpy(G.fill, G.off, (size_t)V * sizeof *G.fill);
    G.filling = true;
    edges_pass(&G, prev);
    /* Kahn's algorithm; fill doubles as the queue */
    uint32_t head = 0, tail = 0, nodes = 0;
    for (uint32_t i = 0; i < n; i++)
        if (G.rep[i] == i) {
            nodes += 2;
            if (!G.indeg[2 * i]) G.fill[tail++] = 2 * i;
        }
    while (head < tail) {
        uint32_t u = G.fill[head++];
        for (uint32_t e = G.off[u]; e < G.off[u + 1]; e++)
            if (--G.indeg[G.adj[e]] == 0) G.fill[tail++] = G.adj[e];
    }
    int rc = 0;
    if (tail != nodes) {
        uint32_t stuck = 0;
        while (stuck < n && (G.rep[stuck] != stuck || !G.indeg[2 * stuck]))
            stuck++;
        rc = bad(err, g, stuck < n ? stuck : 0, "lies on a dependency cycle (the schedule would deadlock)");
    }
    free(G.rep);
    free(G.off);
    free(G.indeg);
    free(G.adj);
    free(G.fill);
    free(prev);
    return rc;
}

int dag_validate(const dag *g, char err[LOONG_ERRLEN])
{
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (check_deps(g, t, err) < 0) return -1;
        if (task_is_p2p(t) && check_p2p(g, t, err) < 0) return -1;
        if ((t->flags & DAG_F_GROUPED) && i == 0) return bad(err, g, i, "grouped with nothing");
    }
    if (check_collectives(g, err) < 0) return -1;
    return check_acyclic(g, err);
}

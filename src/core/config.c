/* config: a run's defaults and its rank geometry. See config.h (the knobs:
 * knobs.c; validation: config_validate.c; JSON and hash: config_json.c;
 * one-line descriptions: config_describe.c; tensor parallelism's shards:
 * config_tp.c). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

void config_defaults(config *c)
{
    memset(c, 0, sizeof *c);
    char err[LOONG_ERRLEN];
    model_preset("llama3-8b", &c->model, err);
    c->seq = 128 * 1024;
    c->batch = 1;
    c->tp = 1;
    c->sequence_parallel = true;
    c->p_head = 8;
    c->p_seq = 8;
    c->dp = 1;
    c->pp = 1;
    c->ep = 1;
    c->micro_batches = 1;
    c->schedule = SCHED_1F1B;
    c->vpp = 1;
    snprintf(c->strategy, sizeof c->strategy, "loongtrain");
    config_set_placement(c, PLACE_HEAD_FIRST);
    c->partition = PART_ZIGZAG;
    c->ring = RING_DOUBLE;
    c->window = 2;
    c->kv_replication = true;
    c->scope = SCOPE_STEP;
    c->gpus_per_node = 8;
    c->recompute = RECOMPUTE_NONE;
    c->recompute_modules = RECOMPUTE_MOD_CORE_ATTN;
    c->recompute_method = RECOMPUTE_UNIFORM;
    c->recompute_layers = 1;
    c->zero = 1;
    c->prefetch = 1;
    c->act_bytes = 2;
}

/* The orders the placement names stand for. */
static const char *const placement_orders[] = {"tp-head-seq-pp-dp", "tp-seq-head-pp-dp"};

const char *placement_order(placement_kind p) { return placement_orders[p]; }

/* ---- geometry ---- */

void config_set_placement(config *c, placement_kind p)
{
    mesh m = config_gpu_mesh(c);
    char err[LOONG_ERRLEN];
    mesh_set_order(&m, placement_orders[p], err); /* a constant that parses */
    memcpy(c->order, m.order, sizeof c->order);
}

placement_kind config_placement(const config *c)
{
    for (int i = 0; i < MESH_NDIMS; i++) {
        if (c->order[i] == MESH_HEAD) return PLACE_HEAD_FIRST;
        if (c->order[i] == MESH_SEQ) return PLACE_CONTEXT_FIRST;
    }
    return PLACE_HEAD_FIRST;
}

void config_placement_text(const config *c, char *buf, size_t len)
{
    mesh m = config_gpu_mesh(c);
    mesh_order_text(&m, buf, len);
    for (int p = PLACE_HEAD_FIRST; p <= PLACE_CONTEXT_FIRST; p++)
        if (!strcmp(buf, placement_orders[p])) snprintf(buf, len, "%s", placement_name((placement_kind)p));
}

mesh config_gpu_mesh(const config *c)
{
    mesh m;
    memset(&m, 0, sizeof m);
    for (int d = 0; d < MESH_NDIMS; d++)
        m.degree[d] = 1;
    m.degree[MESH_TP] = c->tp;
    m.degree[MESH_HEAD] = c->p_head;
    m.degree[MESH_SEQ] = c->p_seq;
    m.degree[MESH_PP] = c->pp;
    m.degree[MESH_DP] = c->dp;
    memcpy(m.order, c->order, sizeof m.order);
    return m;
}

mesh config_mesh(const config *c)
{
    mesh m = config_gpu_mesh(c);
    int k = 0;
    for (int i = 0; i < MESH_NDIMS; i++)
        if (c->order[i] != MESH_DP) m.order[k++] = c->order[i];
    m.order[k] = MESH_DP;
    return m;
}

/* Whether loong's ranks are the GPUs' (dp slowest, or no replicas). */
static bool gpus_are_ranks(const config *c) { return c->dp == 1 || c->order[MESH_NDIMS - 1] == MESH_DP; }

/* The rank of `from`'s rank r in mesh `to` (the same coordinates). */
static int renumber(const mesh *from, const mesh *to, int r)
{
    int co[MESH_NDIMS];
    mesh_coords(from, r, co);
    return mesh_rank(to, co);
}

int config_gpu_of(const config *c, int rank)
{
    if (gpus_are_ranks(c)) return rank;
    mesh m = config_mesh(c), g = config_gpu_mesh(c);
    return renumber(&m, &g, rank);
}

int config_rank_of_gpu(const config *c, int gpu)
{
    if (gpus_are_ranks(c)) return gpu;
    mesh m = config_mesh(c), g = config_gpu_mesh(c);
    return renumber(&g, &m, gpu);
}

int config_rank_of(const config *c, int h, int s)
{
    mesh m = config_mesh(c);
    int co[MESH_NDIMS] = {0};
    co[MESH_HEAD] = h;
    co[MESH_SEQ] = s;
    return mesh_rank(&m, co);
}

int config_rank_at(const config *c, int rank, int h, int s)
{
    mesh m = config_mesh(c);
    int co[MESH_NDIMS];
    mesh_coords(&m, rank, co);
    co[MESH_HEAD] = h;
    co[MESH_SEQ] = s;
    return mesh_rank(&m, co);
}

void config_coords(const config *c, int rank, int *h, int *s)
{
    mesh m = config_mesh(c);
    int co[MESH_NDIMS];
    mesh_coords(&m, rank, co);
    *h = co[MESH_HEAD];
    *s = co[MESH_SEQ];
}

int config_q_heads(const config *c) { return config_tp_heads(c) / c->p_head; }

int config_kv_heads_total(const config *c)
{
    int kv = config_tp_kv_heads(c);
    return kv > c->p_head ? kv : c->p_head;
}

int config_kv_heads(const config *c) { return config_kv_heads_total(c) / c->p_head; }

int config_kv_repl(const config *c)
{
    int kv = config_tp_kv_heads(c);
    return c->p_head > kv ? c->p_head / kv : 1;
}

int config_parts(const config *c)
{
    return c->partition == PART_CONTIGUOUS || c->partition == PART_DOC_CONTIGUOUS ? 1 : 2;
}

/* Token chunks of the sequence: 2*P_s under a two-part partition, else P_s. */
static int config_nchunks(const config *c) { return c->p_seq * config_parts(c); }

uint64_t config_chunk_tokens(const config *c) { return c->seq / (uint64_t)config_nchunks(c); }

uint64_t config_local_tokens(const config *c) { return (uint64_t)c->batch * c->seq / (uint64_t)config_cp(c); }

int config_grad_bytes(const config *c) { return c->grad_reduce == GRAD_REDUCE_FP32 ? 4 : c->act_bytes; }

/* Whether some ring hops stay inside a node and others cross nodes: a
 * ring group on more than one node but fewer nodes than ranks. Its ranks
 * then wait differently (those downstream of a network hop lag the
 * others at every ring pass), which one rank cannot stand for: 1 % short
 * on two nodes of 8 (docs/sim.md). */
static bool ring_hops_mixed(const config *c)
{
    mesh m = config_mesh(c);
    int n = c->p_seq, *mem = xmalloc_array((size_t)n, sizeof *mem, "a ring group");
    bool mixed = false;
    for (int gid = 0; gid < mesh_group_count(&m, MESH_BIT(MESH_SEQ)) && !mixed; gid++) {
        mesh_group_members(&m, MESH_BIT(MESH_SEQ), gid, mem);
        int on_first = 0;
        bool distinct = true;
        for (int i = 0; i < n; i++) {
            on_first += config_node(c, mem[i]) == config_node(c, mem[0]);
            for (int j = 0; j < i && distinct; j++)
                distinct = config_node(c, mem[i]) != config_node(c, mem[j]);
        }
        mixed = on_first != n && !distinct;
    }
    free(mem);
    return mixed;
}

const char *config_ring_asymmetry(const config *c)
{
    if (c->p_seq < 2) return "there is no ring (P_seq 1)";
    if (c->docs && docs_count(c->docs) > 1)
        return "the documents are split over the ring ranks in pieces of different lengths";
    if (c->partition != PART_ZIGZAG) return "only the zigzag partition gives every ring rank the same work";
    if (c->ring == RING_DUAL) return "the dual ring's two rings give the ring ranks different programs";
    if (config_moe(c) && c->ep > 1)
        return "the experts' groups span the context ranks, which then hold different experts";
    if (ring_hops_mixed(c))
        return "a ring spans nodes with some of its ranks side by side on one, so its NVLink and network hops make "
               "its ranks wait differently (place every ring rank on its own node, or all on one)";
    return NULL;
}

/* dag: task storage, the builder's dependency inference, p2p matching,
 * collective instances and the per-stream index. See dag.h, dag_internal.h.
 * What the tasks are is decided by the programs in build.c and ring.c. */
#include "dag_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ringgeo.h"
#include "sizes.h"
#include "xalloc.h"

/* ---- names ---- */

static const char *const kind_names[TASK_KIND_COUNT] = {
    "gemm",  "attn_fwd", "attn_bwd", "merge",      "acc",        "norm",           "rope",
    "add",   "act",      "embed",    "loss",       "softmax",    "dropout",        "quant",
    "optim", "send",     "recv",     "all_to_all", "all_reduce", "reduce_scatter", "all_gather"};
static const char *const stream_names[STREAM_COUNT] = {"comp",      "a2a",    "ring",    "ring_outer", "dkv",
                                                       "dkv_outer", "ring_b", "dkv_b",   "dp",         "tp",
                                                       "tp_kv",     "pp",     "pp_grad", "ep",         "ep_grad"};
/* task_op's names, five to a row */
/* clang-format off */
static const char *const op_names[OP_COUNT] = {
    "qkv",                "out_proj",           "mlp_gate",           "mlp_up",             "mlp_down",
    "lm_head",            "attn",               "a2a_qkv",            "a2a_o",              "a2a_do",
    "a2a_dqkv",           "kv",                 "dkv",                "dkv_acc",            "kv_rep_sum",
    "grad_allreduce",     "grad_reducescatter", "param_allgather",    "kv_gather",          "dkv_reduce",
    "tp_x",               "tp_h",               "tp_y",               "tp_embed",           "tp_loss",
    "tp_norm_grad",       "tp_kv_grad",         "pp_act",             "pp_grad",            "norm_attn",
    "norm_mlp",           "norm_final",         "rope",               "add_attn",           "add_mlp",
    "act",                "embed",              "loss",               "zero_grad",          "optim_step",
    "softmax",            "attn_dropout",       "quant_attn_out",     "quant_grad",         "quant_dqkv",
    "quant_w",            "router",             "route",              "permute",            "unpermute",
    "ep_dispatch",        "ep_combine",         "tp_expert",          "expert_gate",        "expert_up",
    "expert_down",        "expert_act",         "expert_grad",        "norm_latent"};
/* clang-format on */
static const char *const phase_names[] = {"fwd", "bwd", "recompute", "reduce"};

const char *task_kind_name(int kind) { return kind >= 0 && kind < TASK_KIND_COUNT ? kind_names[kind] : "?"; }
const char *stream_name(int s) { return s >= 0 && s < STREAM_COUNT ? stream_names[s] : "?"; }
const char *task_op_name(int op) { return op >= 0 && op < OP_COUNT ? op_names[op] : "?"; }
const char *task_phase_name(int p) { return p >= 0 && p <= PHASE_REDUCE ? phase_names[p] : "?"; }

static int lookup(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], s)) return i;
    return -1;
}
int task_kind_parse(const char *s) { return lookup(kind_names, TASK_KIND_COUNT, s); }

/* ---- storage ---- */

typedef struct group_rec {
    uint32_t off; /* into members */
    int n;
    uint8_t stream;
    mesh_dims dims;            /* the mesh dimensions the communicator spans */
    int rep_stride, rep_count; /* with dp in dims: the replicas it spans (0: every one; dag.h) */
    uint32_t *inst;            /* first task id of each instance, in order */
    uint32_t ninst, instcap;
} group_rec;

struct dag {
    config cfg;
    dag_task *tasks;
    uint32_t n, cap;
    uint32_t *deps;
    uint32_t ndeps, dcap;
    int32_t *members;
    uint32_t nmembers, mcap;
    group_rec *groups;
    uint32_t ngroups, gcap;
    uint32_t *sidx;   /* task ids grouped by (rank, stream) */
    uint32_t *soff;   /* ranks*STREAM_COUNT + 1 offsets into sidx */
    mesh_dims folded; /* dimensions whose ranks other than coordinate 0 were not built (dag_build_folded) */
    mesh mesh;        /* config_mesh(&cfg), when folded */
};

/* Grow *p (element size sz) to hold at least need elements. */
static void grow(void **p, uint32_t *cap, size_t need, size_t sz)
{
    if (need <= *cap) return;
    size_t nc = *cap ? (size_t)*cap * 2 : 64;
    if (nc < need) nc = need;
    if (nc > UINT32_MAX) nc = UINT32_MAX;
    *p = xrealloc_array(*p, nc, sz, "the DAG's task arrays");
    *cap = (uint32_t)nc;
}

/* Large task arrays are written once, front to back: transparent huge pages
 * cut the page faults of the first touch by 512x where the kernel allows. */
static void advise_huge(void *p, size_t bytes)
{
    const uintptr_t huge = 2u << 20;
    uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1), hi = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}

void *dag_big_alloc(size_t n, size_t size, bool zero)
{
    size_t bytes = (n ? n : 1) * size;
    void *p = xmalloc_array(n ? n : 1, size, "a per-task array of the DAG");
    advise_huge(p, bytes);
    if (zero) memset(p, 0, bytes);
    return p;
}

/* ---- builder ---- */

typedef struct chan {
    uint8_t stream, dir; /* dir: TASK_SEND or TASK_RECV of the pending tasks */
    int32_t peer;
    uint32_t *q;
    uint32_t head, len, cap;
} chan;

typedef struct chanlist {
    chan *v;
    uint32_t n, cap;
} chanlist;

typedef struct bufstate {
    uint32_t gen; /* the rank it was last touched for (builder.gen): older is untouched */
    uint32_t writer;
    uint32_t reader[STREAM_COUNT];
} bufstate;

struct builder {
    dag *g;
    int rank;
    uint32_t cur;
    uint32_t cand[STREAM_COUNT];
    int *pend_r, npr, *pend_w, npw, npend; /* buffers of the open task (capacity npend) */
    bufstate *bufs;
    int nbufs;
    uint32_t gen;         /* bumped per rank: bufs of another generation are untouched */
    int mb;               /* the micro-batch of the tasks begun now */
    int mb_stride;        /* buffers of one micro-batch's layers */
    chanlist *chans;      /* per rank */
    uint32_t *coll_count; /* per group: collectives the current rank issued */
    uint32_t ccap;
    ringgeo_blocks *blocks;
};

const config *bt_config(const builder *b) { return &b->g->cfg; }
int bt_rank(const builder *b) { return b->rank; }
const ringgeo_blocks *bt_blocks(const builder *b) { return b->blocks; }
dag_task *bt_task(builder *b, uint32_t id) { return &b->g->tasks[id]; }

uint32_t bt_begin(builder *b, task_kind kind, stream_kind stream, task_op op, task_phase phase, int layer)
{
    dag *g = b->g;
    grow((void **)&g->tasks, &g->cap, (size_t)g->n + 1, sizeof *g->tasks);
    uint32_t id = g->n++;
    dag_task *t = &g->tasks[id];
    memset(t, 0, sizeof *t);
    t->id = id;
    t->rank = b->rank;
    t->peer = -1;
    t->src = -1;
    t->match = DAG_NONE;
    t->group = DAG_NONE;
    t->kind = (uint8_t)kind;
    t->stream = (uint8_t)stream;
    t->op = (uint8_t)op;
    t->phase = (uint8_t)phase;
    t->layer = (int16_t)layer;
    t->mb = (uint16_t)b->mb;
    b->cur = id;
    for (int s = 0; s < STREAM_COUNT; s++)
        b->cand[s] = DAG_NONE;
    b->npr = b->npw = 0;
    return id;
}

void bt_after(builder *b, uint32_t id)
{
    if (id == DAG_NONE) return;
    const dag_task *d = &b->g->tasks[id];
    const dag_task *t = &b->g->tasks[b->cur];
    if (d->rank != t->rank || d->stream == t->stream) return;
    if (b->cand[d->stream] == DAG_NONE || b->cand[d->stream] < id) b->cand[d->stream] = id;
}

void bt_set_micro_batch(builder *b, int mb) { b->mb = mb; }

/* The buffer of the current micro-batch: activations are per micro-batch,
 * a layer's weights and gradients (accumulated) shared; and its state,
 * reset on its first touch for this rank. */
static int mb_buf(const builder *b, int buf)
{
    if (buf < BUF_LAYER0) return buf;
    int k = (buf - BUF_LAYER0) % LB_COUNT;
    return k == LB_W || k == LB_GRAD ? buf : buf + b->mb * b->mb_stride;
}

static bufstate *buf_state(builder *b, int buf)
{
    bufstate *st = &b->bufs[buf];
    if (st->gen != b->gen) {
        st->gen = b->gen;
        st->writer = DAG_NONE;
        for (int s = 0; s < STREAM_COUNT; s++)
            st->reader[s] = DAG_NONE;
    }
    return st;
}

void bt_reads(builder *b, int buf)
{
    buf = mb_buf(b, buf);
    bt_after(b, buf_state(b, buf)->writer);
    if (b->npr < b->npend) b->pend_r[b->npr++] = buf;
}

void bt_writes(builder *b, int buf)
{
    buf = mb_buf(b, buf);
    bufstate *st = buf_state(b, buf);
    bt_after(b, st->writer);
    for (int s = 0; s < STREAM_COUNT; s++)
        bt_after(b, st->reader[s]);
    if (b->npw < b->npend) b->pend_w[b->npw++] = buf;
}

static chan *chan_find(chanlist *cl, int stream, int peer, int dir, bool create)
{
    for (uint32_t i = 0; i < cl->n; i++) {
        chan *c = &cl->v[i];
        if (c->stream == stream && c->peer == peer && c->dir == dir) return c;
    }
    if (!create) return NULL;
    grow((void **)&cl->v, &cl->cap, (size_t)cl->n + 1, sizeof *cl->v);
    chan *c = &cl->v[cl->n++];
    memset(c, 0, sizeof *c);
    c->stream = (uint8_t)stream;
    c->peer = peer;
    c->dir = (uint8_t)dir;
    return c;
}

/* FIFO matching per (stream, sender, receiver), like MPI and NCCL. A
 * folded DAG's transfer with an unbuilt peer stays unmatched (dag.h). */
static void match_p2p(builder *b, dag_task *t)
{
    if (dag_rank_source(b->g, t->peer) != t->peer) return;
    int other = t->kind == TASK_SEND ? TASK_RECV : TASK_SEND;
    chan *c = chan_find(&b->chans[t->peer], t->stream, t->rank, other, false);
    if (c && c->head < c->len) {
        dag_task *m = &b->g->tasks[c->q[c->head++]];
        m->match = t->id;
        t->match = m->id;
        return;
    }
    c = chan_find(&b->chans[t->rank], t->stream, t->peer, t->kind, true);
    grow((void **)&c->q, &c->cap, (size_t)c->len + 1, sizeof *c->q);
    c->q[c->len++] = t->id;
}

static void match_collective(builder *b, dag_task *t)
{
    group_rec *gr = &b->g->groups[t->group];
    uint32_t k = b->coll_count[t->group]++;
    if (k < gr->ninst) {
        t->match = gr->inst[k];
        return;
    }
    grow((void **)&gr->inst, &gr->instcap, (size_t)gr->ninst + 1, sizeof *gr->inst);
    gr->inst[gr->ninst++] = t->id;
    t->match = t->id;
}

void bt_end(builder *b)
{
    dag *g = b->g;
    dag_task *t = &g->tasks[b->cur];
    t->dep_off = g->ndeps;
    for (int s = 0; s < STREAM_COUNT; s++) {
        if (b->cand[s] == DAG_NONE) continue;
        grow((void **)&g->deps, &g->dcap, (size_t)g->ndeps + 1, sizeof *g->deps);
        g->deps[g->ndeps++] = b->cand[s];
        t->ndeps++;
    }
    for (int i = 0; i < b->npr; i++) {
        bufstate *st = &b->bufs[b->pend_r[i]];
        st->reader[t->stream] = t->id;
    }
    for (int i = 0; i < b->npw; i++) {
        bufstate *st = &b->bufs[b->pend_w[i]];
        st->writer = t->id;
        for (int s = 0; s < STREAM_COUNT; s++)
            st->reader[s] = DAG_NONE;
    }
    if (task_is_p2p(t))
        match_p2p(b, t);
    else if (task_is_collective(t))
        match_collective(b, t);
}

/* The group of stream over dims with these members, spanning the
 * replicas (stride, count) (0: all, or none without dp), interned. */
static uint32_t intern_group_over(builder *b, stream_kind stream, mesh_dims dims, int32_t *members, int n, int stride,
                                  int count)
{
    dag *g = b->g;
    for (uint32_t i = 0; i < g->ngroups; i++) {
        group_rec *gr = &g->groups[i];
        if (gr->stream == stream && gr->dims == dims && gr->n == n && gr->rep_stride == stride &&
            gr->rep_count == count && !memcmp(g->members + gr->off, members, (size_t)n * sizeof *members)) {
            free(members);
            return i;
        }
    }
    grow((void **)&g->groups, &g->gcap, (size_t)g->ngroups + 1, sizeof *g->groups);
    grow((void **)&g->members, &g->mcap, (size_t)g->nmembers + (size_t)n, sizeof *g->members);
    grow((void **)&b->coll_count, &b->ccap, (size_t)g->ngroups + 1, sizeof *b->coll_count);
    group_rec *gr = &g->groups[g->ngroups];
    memset(gr, 0, sizeof *gr);
    gr->off = g->nmembers;
    gr->n = n;
    gr->stream = (uint8_t)stream;
    gr->dims = dims;
    gr->rep_stride = stride;
    gr->rep_count = count;
    memcpy(g->members + g->nmembers, members, (size_t)n * sizeof *members);
    free(members);
    g->nmembers += (uint32_t)n;
    b->coll_count[g->ngroups] = 0;
    return g->ngroups++;
}

static uint32_t intern_group(builder *b, stream_kind stream, mesh_dims dims, int32_t *members, int n)
{
    return intern_group_over(b, stream, dims, members, n, 0, 0);
}

/* The current rank's group over dims (in mesh order) and its size. */
static int32_t *rank_group(builder *b, mesh_dims dims, int *n)
{
    mesh m = config_mesh(&b->g->cfg);
    mesh_dims in_dag = dims & ~MESH_DIMS_DP; /* the DAG holds replica 0 */
    *n = mesh_group_size(&m, in_dag);
    int32_t *members = xmalloc_array((size_t)*n, sizeof *members, "a collective group");
    mesh_group_members(&m, in_dag, mesh_group_id(&m, in_dag, b->rank), members);
    return members;
}

uint32_t bt_group(builder *b, stream_kind stream, mesh_dims dims)
{
    int n;
    int32_t *members = rank_group(b, dims, &n);
    return intern_group(b, stream, dims, members, n);
}

/* The current rank's place in its group over dims (*n members). */
static int32_t *rank_group_at(builder *b, mesh_dims dims, int *n, int *at)
{
    int32_t *members = rank_group(b, dims, n);
    *at = 0;
    while (members[*at] != b->rank)
        (*at)++;
    return members;
}

/* The run of the group over dims split in `parts` that holds the rank,
 * moved to the front of its members; *size gets its length. */
static int32_t *rank_run(builder *b, mesh_dims dims, int parts, int *size)
{
    int n, k;
    int32_t *members = rank_group_at(b, dims, &n, &k);
    *size = n / parts;
    memmove(members, members + k / *size * *size, (size_t)*size * sizeof *members);
    return members;
}

uint32_t bt_group_replicas(builder *b, stream_kind stream, mesh_dims dims, int parts, int rep_stride, int rep_count)
{
    int size;
    int32_t *members = rank_run(b, dims, parts, &size);
    return intern_group_over(b, stream, dims | MESH_DIMS_DP, members, size, rep_stride, rep_count);
}

uint32_t bt_group_strided(builder *b, stream_kind stream, mesh_dims dims, int stride)
{
    int n, k, j = 0;
    int32_t *members = rank_group_at(b, dims, &n, &k);
    for (int i = k % stride; i < n; i += stride)
        members[j++] = members[i];
    return intern_group(b, stream, dims, members, j);
}

uint32_t bt_group_of(builder *b, stream_kind stream, mesh_dims dims, int32_t *members, int n, int rep_stride,
                     int rep_count)
{
    return intern_group_over(b, stream, dims, members, n, rep_stride, rep_count);
}

int bt_group_size(const builder *b, uint32_t gid) { return b->g->groups[gid].n; }

uint32_t bt_group_split(builder *b, stream_kind stream, mesh_dims dims, int parts)
{
    int size;
    int32_t *members = rank_run(b, dims, parts, &size);
    return intern_group(b, stream, dims, members, size);
}

builder *bt_new(const config *c)
{
    builder *b = xcalloc(1, sizeof *b, "the DAG builder");
    dag *g = xcalloc(1, sizeof *g, "the DAG");
    int ranks = config_ranks(c);
    g->cfg = *c;
    b->g = g;
    b->mb_stride = (c->model.layers + 1) * LB_COUNT;
    b->nbufs = BUF_LAYER0 + c->micro_batches * b->mb_stride;
    b->npend = 2 * BUF_LB(c->model.layers + 1, 0);
    b->bufs = xcalloc((size_t)b->nbufs, sizeof *b->bufs, "the DAG builder's buffers");
    b->chans = xcalloc((size_t)ranks, sizeof *b->chans, "the DAG builder's channels");
    b->pend_r = xmalloc_array((size_t)b->npend, sizeof *b->pend_r, "the DAG builder's buffers");
    b->pend_w = xmalloc_array((size_t)b->npend, sizeof *b->pend_w, "the DAG builder's buffers");
    b->blocks = ringgeo_blocks_new(c);
    return b;
}

void bt_start_rank(builder *b, int rank)
{
    b->rank = rank;
    b->gen++; /* from 1: xcalloc'd states (gen 0) are untouched */
    b->mb = 0;
    if (b->ccap) memset(b->coll_count, 0, b->ccap * sizeof *b->coll_count);
}

int bt_reserve(builder *b, int ranks, char err[LOONG_ERRLEN])
{
    dag *g = b->g;
    /* rank 0's tasks times the ranks, at the bytes a task costs while the DAG
     * is built (docs/reliability.md): refuse before allocating what this machine
     * does not have, rather than be OOM-killed */
    double need = (double)g->n * ranks * DAG_BYTES_PER_TASK;
    double phys = xalloc_machine_bytes();
    if (phys > 0 && need > phys) {
        snprintf(err, LOONG_ERRLEN,
                 "this configuration would need ~%.0f GB of task memory (%.3g tasks), more than this machine's %.0f "
                 "GB: use --compose, --layers, --scope attn or a smaller mesh",
                 need / 1e9, (double)g->n * ranks, phys / 1e9);
        return -1;
    }
    grow((void **)&g->tasks, &g->cap, (size_t)g->n * (size_t)ranks * 17 / 16, sizeof *g->tasks);
    grow((void **)&g->deps, &g->dcap, (size_t)g->ndeps * (size_t)ranks * 17 / 16 + 1, sizeof *g->deps);
    advise_huge(g->tasks, (size_t)g->cap * sizeof *g->tasks);
    advise_huge(g->deps, (size_t)g->dcap * sizeof *g->deps);
    return 0;
}

/* Every send found its recv: anything left pending is a builder bug. */
static int check_channels(builder *b, int ranks, char err[LOONG_ERRLEN])
{
    for (int r = 0; r < ranks; r++)
        for (uint32_t i = 0; i < b->chans[r].n; i++) {
            chan *c = &b->chans[r].v[i];
            if (c->head < c->len) {
                const dag_task *t = &b->g->tasks[c->q[c->head]];
                snprintf(err, LOONG_ERRLEN, "internal: task %u (%s rank %d -> %d on %s) has no matching %s", t->id,
                         task_kind_name(t->kind), t->rank, t->peer, stream_name(t->stream),
                         t->kind == TASK_SEND ? "recv" : "send");
                return -1;
            }
        }
    return 0;
}

static void builder_free(builder *b, int ranks)
{
    for (int r = 0; r < ranks; r++) {
        for (uint32_t i = 0; i < b->chans[r].n; i++)
            free(b->chans[r].v[i].q);
        free(b->chans[r].v);
    }
    free(b->chans);
    free(b->bufs);
    free(b->pend_r);
    free(b->pend_w);
    free(b->coll_count);
    ringgeo_blocks_free(b->blocks);
    free(b);
}

/* Counting sort of ids by (rank, stream); ids are rank-major already. */
static void index_streams(dag *g)
{
    size_t ns = (size_t)config_ranks(&g->cfg) * STREAM_COUNT;
    g->soff = xcalloc(ns + 1, sizeof *g->soff, "the DAG's stream index");
    g->sidx = xmalloc_array(g->n ? g->n : 1, sizeof *g->sidx, "the DAG's stream index");
    for (uint32_t i = 0; i < g->n; i++)
        g->soff[(size_t)g->tasks[i].rank * STREAM_COUNT + g->tasks[i].stream + 1]++;
    for (size_t i = 0; i < ns; i++)
        g->soff[i + 1] += g->soff[i];
    uint32_t *fill = xmalloc_array(ns, sizeof *fill, "the DAG's stream index");
    memcpy(fill, g->soff, ns * sizeof *fill);
    for (uint32_t i = 0; i < g->n; i++)
        g->sidx[fill[(size_t)g->tasks[i].rank * STREAM_COUNT + g->tasks[i].stream]++] = i;
    free(fill);
}

dag *bt_finish(builder *b, char err[LOONG_ERRLEN])
{
    dag *g = b->g;
    int ranks = config_ranks(&g->cfg);
    int rc = check_channels(b, ranks, err);
    builder_free(b, ranks);
    if (rc < 0) {
        dag_free(g);
        return NULL;
    }
    index_streams(g);
    return g;
}

void bt_abort(builder *b)
{
    dag *g = b->g;
    builder_free(b, config_ranks(&g->cfg));
    dag_free(g);
}

void dag_free(dag *g)
{
    if (!g) return;
    for (uint32_t i = 0; i < g->ngroups; i++)
        free(g->groups[i].inst);
    free(g->groups);
    free(g->members);
    free(g->tasks);
    free(g->deps);
    free(g->sidx);
    free(g->soff);
    free(g);
}

/* ---- accessors ---- */

const config *dag_config(const dag *g) { return &g->cfg; }
uint32_t dag_ntasks(const dag *g) { return g->n; }
const dag_task *dag_task_get(const dag *g, uint32_t id) { return id < g->n ? &g->tasks[id] : NULL; }
const uint32_t *dag_deps(const dag *g, const dag_task *t) { return g->deps + t->dep_off; }
uint32_t dag_ngroups(const dag *g) { return g->ngroups; }

mesh_dims dag_group_dims(const dag *g, uint32_t gid) { return g->groups[gid].dims; }

void dag_group_replicas(const dag *g, uint32_t gid, int *stride, int *count)
{
    const group_rec *gr = &g->groups[gid];
    bool dp = gr->dims & MESH_DIMS_DP;
    *stride = dp && gr->rep_stride ? gr->rep_stride : 1;
    *count = !dp ? 1 : gr->rep_count ? gr->rep_count : g->cfg.dp;
}

int dag_group_stream(const dag *g, uint32_t gid) { return g->groups[gid].stream; }

mesh_dims dag_folded(const dag *g) { return g->folded; }

uint64_t dag_ntasks_whole(const dag *g)
{
    return (uint64_t)g->n * (uint64_t)(g->folded ? mesh_group_size(&g->mesh, g->folded) : 1);
}

void bt_fold(builder *b, mesh_dims folded)
{
    b->g->folded = folded;
    b->g->mesh = config_mesh(&b->g->cfg);
}

int dag_rank_source(const dag *g, int r) { return g->folded ? mesh_fold(&g->mesh, g->folded, r) : r; }

const uint32_t *dag_stream_tasks(const dag *g, int rank, int stream, uint32_t *n)
{
    size_t k = (size_t)rank * STREAM_COUNT + (size_t)stream;
    *n = g->soff[k + 1] - g->soff[k];
    return g->sidx + g->soff[k];
}

const int32_t *dag_group(const dag *g, uint32_t gid, int *n)
{
    *n = g->groups[gid].n;
    return g->members + g->groups[gid].off;
}

uint64_t dag_task_bytes_moved(const dag *g, const dag_task *t)
{
    if (t->kind == TASK_RECV && t->match != DAG_NONE) return g->tasks[t->match].bytes;
    /* a folded DAG's ring step from an unbuilt peer: what its sender's
     * set_xfer (ring.c) sizes, K and V (or fp32 dK/dV) of its tokens */
    if (t->kind == TASK_RECV && (t->op == OP_KV || t->op == OP_DKV))
        return size_kv_bytes(&g->cfg, t->dim[0], (int)t->dim[2]);
    return t->bytes;
}

void dag_task_label(const dag_task *t, char *buf, size_t len)
{
    const char *what = task_op_name(t->op);
    int n;
    if (t->kind == TASK_ATTN_FWD || t->kind == TASK_ATTN_BWD || t->kind == TASK_MERGE)
        n = snprintf(buf, len, "%s", task_kind_name(t->kind));
    else if (t->kind == TASK_GEMM)
        n = snprintf(buf, len, "%s %s", what, task_phase_name(t->phase));
    else
        n = snprintf(buf, len, "%s %s", task_kind_name(t->kind), what);
    if (n < 0 || (size_t)n >= len) return;
    if (t->layer >= 0) n += snprintf(buf + n, len - (size_t)n, " L%d", t->layer);
    if (t->src >= 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, " s%u", t->step);
}

/* nccl: NCCL's collectives as a model. See nccl.h. */
#include "nccl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/dag.h"
#include "core/xalloc.h"

/* ---- names ---- */

static const char *const op_names[COLL_OP_COUNT] = {"all_reduce", "all_gather", "reduce_scatter",
                                                    "alltoall",   "sendrecv",   "broadcast"};
static const char *const algo_names[NCCL_ALGO_COUNT] = {"Ring", "Tree", "NVLS"};
static const char *const proto_names[NCCL_PROTO_COUNT] = {"Simple", "LL", "LL128"};

const char *coll_op_name(coll_op op) { return op_names[op]; }
const char *nccl_algo_name(int algo) { return algo == NCCL_AUTO ? "auto" : algo_names[algo]; }
const char *nccl_proto_name(int proto) { return proto == NCCL_AUTO ? "auto" : proto_names[proto]; }

int coll_op_parse(const char *s, coll_op *out)
{
    for (int i = 0; i < COLL_OP_COUNT; i++)
        if (!strcmp(s, op_names[i])) return *out = (coll_op)i, 0;
    return -1;
}

static int parse_name(const char *s, const char *const *names, int n, int *out)
{
    if (!strcasecmp(s, "auto")) return *out = NCCL_AUTO, 0;
    for (int i = 0; i < n; i++)
        if (!strcasecmp(s, names[i])) return *out = i, 0;
    return -1;
}

int nccl_algo_parse(const char *s, int *out) { return parse_name(s, algo_names, NCCL_ALGO_COUNT, out); }
int nccl_proto_parse(const char *s, int *out) { return parse_name(s, proto_names, NCCL_PROTO_COUNT, out); }

double coll_bus_factor(coll_op op, int n)
{
    if (n < 2) return 1;
    switch (op) {
    case COLL_ALL_REDUCE: return 2.0 * (n - 1) / n;
    case COLL_ALL_GATHER:
    case COLL_REDUCE_SCATTER:
    case COLL_ALLTOALL: return (double)(n - 1) / n;
    default: return 1;
    }
}

/* ---- the group ---- */

static void group_alloc(nccl_group *g, int n)
{
    memset(g, 0, sizeof *g);
    g->n = n;
    g->rank = xmalloc_array((size_t)n, sizeof *g->rank, "a collective group");
    g->node = xmalloc_array((size_t)n, sizeof *g->node, "a collective group");
    g->pos = xmalloc_array((size_t)n, sizeof *g->pos, "a collective group");
    g->node_first = xmalloc_array((size_t)n + 1, sizeof *g->node_first, "a collective group");
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Fill node/pos/node_first and the node statistics from rank[] sorted by
 * GPU (node-major), which is NCCL's ring order. */
static void group_shape(nccl_group *g, const platform_spec *sp)
{
    placement pl = platform_spec_placement(sp);
    g->nnodes = 0;
    g->ppn = 0;
    g->per_nic = 0;
    g->rails = sp->nics_per_node;
    for (int i = 0; i < g->n; i++) {
        if (i == 0 || !placement_same_domain(&pl, g->rank[i], g->rank[i - 1])) g->node_first[g->nnodes++] = i;
        g->node[i] = g->nnodes - 1;
        g->pos[i] = i - g->node_first[g->nnodes - 1];
    }
    g->node_first[g->nnodes] = g->n;
    int *nic_cnt = xmalloc_array((size_t)sp->nics_per_node, sizeof *nic_cnt, "a collective group");
    for (int a = 0; a < g->nnodes; a++) {
        int cnt = g->node_first[a + 1] - g->node_first[a], rails = 0;
        if (cnt > g->ppn) g->ppn = cnt;
        memset(nic_cnt, 0, (size_t)sp->nics_per_node * sizeof *nic_cnt);
        for (int i = g->node_first[a]; i < g->node_first[a + 1]; i++) {
            int nic = placement_nic(&pl, g->rank[i]);
            if (nic_cnt[nic]++ == 0) rails++;
            if (nic_cnt[nic] > g->per_nic) g->per_nic = nic_cnt[nic];
        }
        if (rails < g->rails) g->rails = rails;
    }
    free(nic_cnt);
}

int nccl_group_init(nccl_group *g, const platform_spec *sp, const int *ranks, int n)
{
    group_alloc(g, n);
    placement pl = platform_spec_placement(sp);
    int total = placement_gpus(&pl);
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= total) {
            nccl_group_free(g);
            return -1;
        }
        g->rank[i] = ranks[i];
    }
    qsort(g->rank, (size_t)n, sizeof *g->rank, cmp_int);
    group_shape(g, sp);
    return 0;
}

platform_spec nccl_spec_holding(const platform_spec *sp, int gpus, int nodes)
{
    platform_spec s = *sp;
    int need = (gpus + sp->gpus_per_node - 1) / sp->gpus_per_node;
    if (need < nodes) need = nodes;
    if (s.nodes < need) s.nodes = need;
    return s;
}

int nccl_group_uniform(nccl_group *g, const platform_spec *sp, int n, int nnodes)
{
    if (nnodes < 1 || n % nnodes || n / nnodes > sp->gpus_per_node || nnodes > sp->nodes) return -1;
    group_alloc(g, n);
    placement pl = platform_spec_placement(sp);
    for (int i = 0; i < n; i++)
        g->rank[i] = placement_rank(&pl, i / (n / nnodes), i % (n / nnodes));
    group_shape(g, sp);
    return 0;
}

void nccl_group_free(nccl_group *g)
{
    free(g->rank);
    free(g->node);
    free(g->pos);
    free(g->node_first);
    memset(g, 0, sizeof *g);
}

static int node_count(const nccl_group *g, int a) { return g->node_first[a + 1] - g->node_first[a]; }

/* ---- the double binary tree over the group's nodes ---- */

/* Tree 0 is a binary heap over node indices, tree 1 its mirror, so that a
 * node is interior in at most one of them (NCCL's double binary tree has
 * the same property and depth floor(log2 N)). */
static int tree_id(int t, int a, int N) { return t ? N - 1 - a : a; }
static int tree_parent(int t, int a, int N)
{
    int k = tree_id(t, a, N);
    return k == 0 ? -1 : tree_id(t, (k - 1) / 2, N);
}
static int tree_children(int t, int a, int N, int kids[2])
{
    int k = tree_id(t, a, N), n = 0;
    for (int c = 2 * k + 1; c <= 2 * k + 2 && c < N; c++)
        kids[n++] = tree_id(t, c, N);
    return n;
}

/* The most data any node sends (= receives) over the network in a tree
 * all-reduce, in units of the buffer: half of it per tree edge. */
static double tree_node_volume(int N)
{
    double worst = 0;
    for (int a = 0; a < N; a++) {
        double v = 0;
        int kids[2];
        for (int t = 0; t < 2; t++)
            v += 0.5 * ((tree_parent(t, a, N) >= 0) + tree_children(t, a, N, kids));
        if (v > worst) worst = v;
    }
    return worst;
}

static int log2_floor(int n)
{
    int k = 0;
    while (n >>= 1)
        k++;
    return k;
}

/* ---- latency: NCCL's model (src/graph/tuning.cc, 2.19), microseconds ---- */

/* base latency and per-hop latency, [algo][proto] with proto Simple, LL, LL128 */
static const double base_us[NCCL_ALGO_COUNT][NCCL_PROTO_COUNT] = {{8.4, 6.6, 14.0}, {0, 6.8, 14.0}, {0, 0, 0}};
static const double nvl_hop_us[NCCL_ALGO_COUNT][NCCL_PROTO_COUNT] = {{3.4, 0.6, 1.9}, {28, 0.6, 1.25}, {23, 0, 0}};
static const double net_hop_us[NCCL_ALGO_COUNT][NCCL_PROTO_COUNT] = {{14, 2.7, 4.0}, {28, 5.0, 8.5}, {18, 0, 0}};

/* The platform's own hop latencies scale NCCL's: a loong platform's links
 * carry half of (base + hop) of the ring's Simple protocol each. */
static double nvl_scale(const platform_spec *sp)
{
    double hop = 2 * sp->nvlink_lat * 1e6 - base_us[NCCL_RING][NCCL_SIMPLE];
    return hop > 0 ? hop / nvl_hop_us[NCCL_RING][NCCL_SIMPLE] : 0;
}
static double net_scale(const platform_spec *sp)
{
    double hop = 2 * sp->nic_lat * 1e6 - base_us[NCCL_RING][NCCL_SIMPLE];
    return hop > 0 ? hop / net_hop_us[NCCL_RING][NCCL_SIMPLE] : 0;
}

double nccl_flow_latency(const platform_spec *sp, const nccl_group *g)
{
    return g->nnodes > 1 ? 2 * sp->nic_lat : 2 * sp->nvlink_lat;
}

static double alpha_of(const platform_spec *sp, const nccl_group *g, coll_op op, int a, int p)
{
    if (op == COLL_ALLTOALL || op == COLL_SENDRECV) return nccl_flow_latency(sp, g);
    int n = g->n, N = g->nnodes;
    double intra = nvl_hop_us[a][p] * nvl_scale(sp), inter = net_hop_us[a][p] * net_scale(sp);
    if (N > 1 && p == NCCL_LL) intra *= 1.8;
    double us = base_us[a][p];
    if (a == NCCL_RING) {
        int steps = op == COLL_ALL_REDUCE ? 2 * (n - 1) : n - 1;
        int isteps = op == COLL_ALL_REDUCE ? (N > 1 ? 2 * N : 0) : N - 1;
        us += (steps - isteps) * intra + isteps * inter;
    } else if (a == NCCL_TREE) {
        us += 2 * ((g->ppn - 1) * intra + log2_floor(N) * inter);
    } else {
        us = intra + (N > 1 ? inter : 0);
    }
    return us * 1e-6;
}

/* ---- bandwidth ---- */

static double mind(double a, double b) { return a < b ? a : b; }

/* The all-to-all's bound (buffer bytes per second per member) from the
 * uplinks of the members' leaf groups of `span` nodes: the m members under
 * one send m (n - m) / n of a buffer out of it, over the uplinks of every
 * rail there, (nodes x NICs x NIC bandwidth) / oversubscription. */
static double uplink_alltoall_bw(const platform_spec *sp, const nccl_group *g, int span, double oversub)
{
    placement pl = platform_spec_placement(sp);
    double best = HUGE_VAL;
    for (int i = 0, j; i < g->n; i = j) { /* members sorted by GPU: one run per group */
        int grp = placement_node(&pl, g->rank[i]) / span;
        for (j = i; j < g->n && placement_node(&pl, g->rank[j]) / span == grp; j++)
            ;
        int m = j - i, nodes = sp->nodes - grp * span;
        if (m == g->n) return HUGE_VAL;
        double out = (double)m * (g->n - m) / g->n,
               cap = (nodes < span ? nodes : span) * sp->nics_per_node * sp->nic_bw / oversub;
        best = mind(best, cap / out);
    }
    return best;
}

/* A node whose GPUs share one switch bounds a collective's bus bandwidth
 * at min(NVLink bandwidth / nvl_div, other) x bf: nvl_div the buffers
 * NVLink carries per buffer (0: none), other the NICs' and uplinks'. */
typedef struct flat_bound {
    double nvl_div, other, bf;
} flat_bound;

static double flat_at(const flat_bound *b, double nvl_bw)
{
    return mind(b->nvl_div > 0 ? nvl_bw / b->nvl_div : HUGE_VAL, b->other) * b->bf;
}

static flat_bound flat_busbw(const platform_spec *sp, const nccl_group *g, coll_op op, int a)
{
    int n = g->n, N = g->nnodes, ppn = g->ppn;
    double nic = sp->nic_bw * ppn / g->per_nic; /* a node's rails, spread over its members */
    double bf = coll_bus_factor(op, n), inf = HUGE_VAL;
    switch (op) {
    case COLL_ALLTOALL: {
        /* per byte of the buffer: NVLink carries the node's peers and, with
         * PXN, what goes to other rails; the NIC of each rail its share */
        double nvl = (ppn - 1.0) / n + (sp->pxn ? (n - ppn) * (1.0 - 1.0 / g->rails) / n : 0);
        double net = (double)(n - ppn) / n * g->per_nic;
        double t = mind(net > 0 ? sp->nic_bw / net : inf, uplink_alltoall_bw(sp, g, sp->nodes_per_leaf, sp->oversub));
        int pod = platform_spec_pod_nodes(sp);
        if (pod) t = mind(t, uplink_alltoall_bw(sp, g, pod, sp->oversub * sp->spine_oversub));
        return (flat_bound){nvl > 0 ? nvl : 0, t, bf};
    }
    case COLL_SENDRECV: return (flat_bound){ppn > 1 ? 1 : 0, N > 1 ? sp->nic_bw : inf, 1};
    default: break;
    }
    if (a == NCCL_NVLS) return (flat_bound){1, inf, bf};
    if (a == NCCL_TREE) return (flat_bound){ppn > 2 ? 2 : ppn == 2 ? 1 : 0, nic / tree_node_volume(N), bf};
    return (flat_bound){ppn > 1 ? 1 : 0, N > 1 ? nic : inf, 1}; /* a ring's link rate is its bus bandwidth */
}

/* The bound of a PCIe server's socket links (platform_spec.h: sockets),
 * in bus bandwidth, on the members of each node that span sockets. Every
 * GPU of a socket is taken to be in a group like g running the same
 * collective at once (the mesh's groups tile the GPUs: the DP groups of a
 * TP layout, the TP groups of a DP one), so a socket holding m of g's
 * members carries G/m such groups (G: its GPUs). A ring leaves and enters
 * each socket once: socket_bw m / G per ring. All-to-all: each member
 * sends 1/n of its buffer to each of the node's members in other sockets,
 * (c - m) of them with c on the node, so the link carries G (c - m) / n
 * buffers per member's one. HUGE_VAL without sockets or where no node's
 * members span two. */
static double socket_bound(const platform_spec *sp, const nccl_group *g, coll_op op)
{
    if (sp->sockets < 2) return HUGE_VAL;
    placement pl = platform_spec_placement(sp);
    int G = sp->gpus_per_node / sp->sockets, m[PLATFORM_MAX_SOCKETS];
    double best = HUGE_VAL;
    for (int a = 0; a < g->nnodes; a++) {
        int c = node_count(g, a), used = 0;
        memset(m, 0, sizeof m);
        for (int i = g->node_first[a]; i < g->node_first[a + 1]; i++)
            used += m[placement_gpu(&pl, g->rank[i]) / G]++ == 0;
        if (used < 2) continue;
        for (int k = 0; k < sp->sockets; k++) {
            if (!m[k]) continue;
            double b = op == COLL_ALLTOALL ? sp->socket_bw * g->n / ((double)G * (c - m[k])) * coll_bus_factor(op, g->n)
                                           : sp->socket_bw * m[k] / G;
            best = mind(best, b);
        }
    }
    return best;
}

/* Bus bandwidth of the algorithm's flows on an idle platform (nccl.h),
 * *raw, and what NCCL rides of it, *ridden: NVLink at its share of the
 * line (nvl_eff) but under NVLS, whose efficiency is against the line. */
static void raw_busbw(const platform_spec *sp, const nccl_group *g, coll_op op, int a, double *raw, double *ridden)
{
    flat_bound b = flat_busbw(sp, g, op, a);
    double sockets = socket_bound(sp, g, op);
    *raw = mind(flat_at(&b, sp->nvlink_bw), sockets);
    *ridden = a == NCCL_NVLS ? *raw : mind(flat_at(&b, sp->nvlink_bw * sp->nvl_eff), sockets);
}

/* NCCL's LL bus bandwidth ceilings (tuning.cc llMaxBws: Hopper/Ampere one
 * node, Intel hosts on 2 and more nodes), bytes/s. */
static double ll_cap(int N) { return (N == 1 ? 87.7 : N <= 2 ? 39.0 : 20.4) * 1e9; }

static double effective(const platform_spec *sp, const nccl_group *g, coll_op op, int a, int p, double raw)
{
    int N = g->nnodes;
    if (a == NCCL_NVLS) return raw * sp->nvls_eff;
    if (a == NCCL_TREE) {
        double t = raw * sp->tree_eff;
        if (p == NCCL_LL) return mind(t / 3.8, ll_cap(N));
        return p == NCCL_LL128 ? t * (120.0 / 128.0) : t;
    }
    if (p == NCCL_LL) {
        bool quarter = N > 1 || op == COLL_ALL_REDUCE;
        return mind(raw * sp->ll_eff * (quarter ? 1 : 4.0 / 3.0), ll_cap(N));
    }
    if (p == NCCL_LL128) return raw * sp->ll128_eff * (g->ppn < 2 ? 0.7 / 0.92 : 1);
    return raw;
}

/* ---- the tuner ---- */

static bool runs(const platform_spec *sp, const nccl_group *g, coll_op op, int a, int p)
{
    if (op == COLL_ALLTOALL || op == COLL_SENDRECV) return a == NCCL_RING && p == NCCL_SIMPLE;
    if (a == NCCL_TREE) return op == COLL_ALL_REDUCE && g->nnodes > 1;
    if (a == NCCL_NVLS) return op == COLL_ALL_REDUCE && g->nnodes == 1 && sp->nvls && g->n > 1 && p == NCCL_SIMPLE;
    return true;
}

static void evaluate(const platform_spec *sp, const nccl_group *g, coll_op op, double bytes, int a, int p,
                     nccl_plan *out)
{
    out->algo = a;
    out->proto = p;
    out->bus_factor = coll_bus_factor(op, g->n);
    out->alpha = alpha_of(sp, g, op, a, p);
    double ridden; /* the flows carry raw/busbw more bytes, nvl_eff's share included */
    raw_busbw(sp, g, op, a, &out->raw_busbw, &ridden);
    out->busbw = effective(sp, g, op, a, p, ridden);
    out->seconds = out->alpha + bytes * out->bus_factor / out->busbw;
}

static int refuse(int algo, int proto, coll_op op, char err[LOONG_ERRLEN])
{
    snprintf(err, LOONG_ERRLEN,
             "NCCL runs %s with neither algorithm %s nor protocol %s here: tree is all-reduce across nodes, NVLS "
             "all-reduce inside one node with NVLink SHARP (Simple only), all-to-all and sendrecv are p2p (Simple); "
             "drop --nccl-algo/--nccl-proto or pick another",
             op_names[op], nccl_algo_name(algo), nccl_proto_name(proto));
    return -1;
}

int nccl_plan_coll(const platform_spec *sp, const nccl_group *g, coll_op op, double bytes, int algo, int proto,
                   nccl_plan *out, char err[LOONG_ERRLEN])
{
    memset(out, 0, sizeof *out);
    out->algo = NCCL_RING;
    out->bus_factor = 1;
    out->busbw = out->raw_busbw = HUGE_VAL;
    if (g->n < 2) return 0;
    bool p2p = op == COLL_ALLTOALL || op == COLL_SENDRECV, found = false;
    for (int a = 0; a < NCCL_ALGO_COUNT; a++)
        for (int p = 0; p < NCCL_PROTO_COUNT; p++) {
            if (!runs(sp, g, op, a, p)) continue;
            if (!p2p && ((algo != NCCL_AUTO && a != algo) || (proto != NCCL_AUTO && p != proto))) continue;
            nccl_plan t;
            evaluate(sp, g, op, bytes, a, p, &t);
            if (!found || t.seconds < out->seconds) *out = t;
            found = true;
        }
    return found ? 0 : refuse(algo, proto, op, err);
}

void nccl_plan_lenient(const platform_spec *sp, const nccl_group *g, coll_op op, double bytes, int algo, int proto,
                       nccl_plan *out)
{
    char err[LOONG_ERRLEN];
    if (nccl_plan_coll(sp, g, op, bytes, algo, proto, out, err) < 0)
        nccl_plan_coll(sp, g, op, bytes, NCCL_AUTO, NCCL_AUTO, out, err);
}

coll_op nccl_op_of_task(int task_kind)
{
    switch (task_kind) {
    case TASK_ALLTOALL: return COLL_ALLTOALL;
    case TASK_REDUCESCATTER: return COLL_REDUCE_SCATTER;
    case TASK_ALLGATHER: return COLL_ALL_GATHER;
    default: return COLL_ALL_REDUCE;
    }
}

double nccl_size_of_task(int task_kind, double member_bytes, int n)
{
    return member_bytes / coll_bus_factor(nccl_op_of_task(task_kind), n);
}

/* ---- the flows ---- */

int nccl_max_flows(const nccl_group *g, coll_op op)
{
    int m = 2 + 6 * g->ppn;
    return (op == COLL_ALLTOALL && g->n > m ? g->n : m) + 1;
}

typedef struct flows {
    nccl_flow *f;
    int n;
} flows;

static void add(flows *fl, int peer, double bytes)
{
    if (bytes > 0) fl->f[fl->n++] = (nccl_flow){peer, bytes};
}

/* Member at position `pos` (mod its size) of node a. */
static int at(const nccl_group *g, int a, int pos) { return g->node_first[a] + pos % node_count(g, a); }

/* A ring's network share, a channel per rail: the node's 1/cnt share over
 * the member's own rail to the same position in the next node. */
static void ring_flows_net(const nccl_group *g, double B, int i, flows *out, flows *in)
{
    int a = g->node[i], cnt = node_count(g, a), N = g->nnodes, pos = g->pos[i];
    if (N < 2) return;
    add(out, at(g, (a + 1) % N, pos), B / cnt);
    int prev = (a + N - 1) % N, pc = node_count(g, prev);
    for (int q = 0; q < pc; q++)
        if (q % cnt == pos) add(in, g->node_first[prev] + q, B / pc);
}

/* A ring channel per rail: NVLink to the next member of the node, and the
 * network share. */
static void ring_flows(const nccl_group *g, double B, int i, flows *out, flows *in)
{
    int a = g->node[i], cnt = node_count(g, a), pos = g->pos[i];
    if (cnt > 1) {
        add(out, at(g, a, pos + 1), B);
        add(in, at(g, a, pos + cnt - 1), B);
    }
    ring_flows_net(g, B, i, out, in);
}

/* Chain both ways inside the node, half the buffer per tree edge spread
 * over the members by position. */
static void tree_flows(const nccl_group *g, double S, int i, flows *out, flows *in)
{
    int a = g->node[i], cnt = node_count(g, a), N = g->nnodes, pos = g->pos[i];
    if (pos + 1 < cnt) add(out, i + 1, S), add(in, i + 1, S);
    if (pos > 0) add(out, i - 1, S), add(in, i - 1, S);
    for (int t = 0; t < 2; t++) {
        int nb[3], k = tree_children(t, a, N, nb), par = tree_parent(t, a, N);
        if (par >= 0) nb[k++] = par;
        for (int e = 0; e < k; e++) {
            int b = nb[e], bc = node_count(g, b);
            add(out, at(g, b, pos), S / 2 / cnt);
            for (int q = 0; q < bc; q++)
                if (q % cnt == pos) add(in, g->node_first[b] + q, S / 2 / bc);
        }
    }
}

/* The tree's loads in a shift-invariant pattern: the chain, and to the
 * next node what the busiest node of the double tree sends. */
static void tree_flows_symmetric(const nccl_group *g, double S, int i, flows *out, flows *in)
{
    int a = g->node[i], cnt = node_count(g, a), pos = g->pos[i];
    if (pos + 1 < cnt) add(out, i + 1, S), add(in, i + 1, S);
    if (pos > 0) add(out, i - 1, S), add(in, i - 1, S);
    ring_flows_net(g, S * tree_node_volume(g->nnodes), i, out, in);
}

void nccl_member_flows(const nccl_group *g, const nccl_plan *p, coll_op op, double bytes, int i, bool symmetric,
                       nccl_flow *out, int *nout, nccl_flow *in, int *nin)
{
    flows o = {out, 0}, r = {in, 0};
    int n = g->n;
    double wire = p->busbw > 0 && p->raw_busbw < HUGE_VAL ? bytes * p->raw_busbw / p->busbw : bytes;
    if (n > 1) switch (op) {
        case COLL_ALLTOALL:
            for (int k = 1; k < n; k++) {
                add(&o, (i + k) % n, wire / n);
                add(&r, (i - k + n) % n, wire / n);
            }
            break;
        case COLL_SENDRECV:
            add(&o, (i + 1) % n, wire);
            add(&r, (i + n - 1) % n, wire);
            break;
        default:
            if (p->algo == NCCL_TREE && symmetric)
                tree_flows_symmetric(g, wire, i, &o, &r);
            else if (p->algo == NCCL_TREE)
                tree_flows(g, wire, i, &o, &r);
            else if (p->algo == NCCL_NVLS) {
                int a = g->node[i];
                add(&o, at(g, a, g->pos[i] + 1), wire);
                add(&r, at(g, a, g->pos[i] + node_count(g, a) - 1), wire);
            } else
                ring_flows(g, wire * coll_bus_factor(op, n), i, &o, &r);
        }
    *nout = o.n;
    *nin = r.n;
}

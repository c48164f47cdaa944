/*
 * sim_links: each pair's path and the bytes per link, for the "busiest
 * links" report. SimGrid's C API gives a route's links but no per-link
 * traffic, so each flow adds its bytes to every link of its path. Paths are
 * resolved once per (from, to) pair (an open-addressing table keyed by the
 * pair) and only from inside actors, because graph-routed zones compute
 * routes when the platform is sealed.
 *
 * A failed link (sim_whatif.c) is off, and SimGrid's routes are static, so
 * a pair whose route crosses one goes through another GPU instead, as NCCL
 * would: first a GPU of the sender's or the receiver's node (PXN: over
 * NVLink to a GPU whose NIC still reaches the peer), else any GPU of the
 * platform; the path of fewest links, then least latency, then the first
 * in that order. A pair with no such path is a disconnected fabric.
 */
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <stdlib.h>
#include <string.h>
#include <xbt/dynar.h>
#include <xbt/log.h>

#include "sim_internal.h"
#include "core/xalloc.h"

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(loong_sim_links, loong, "loong sim: per-link traffic accounting");

typedef struct route {
    uint64_t key; /* from * nranks + to, +1 (0 = empty slot) */
    int *links;   /* link indices, both legs of a relayed path */
    int n;
    sim_path path;
} route;

struct sim_links {
    int nranks;
    placement pl;     /* where each rank runs */
    sg_host_t *hosts; /* every GPU host of the platform, by rank */
    const sim_faults *faults;
    route *tab;
    size_t cap, used;
    sg_link_t *link; /* index -> link */
    double *bytes;
    int nlinks, caplinks;
};

sim_links *sim_links_new(sim_platform *pf)
{
    sim_links *L = xcalloc(1, sizeof *L, "the link accounting");
    L->nranks = sim_platform_gpus(pf);
    L->pl = sim_platform_placement(pf);
    L->hosts = sim_platform_hosts(pf);
    L->faults = sim_platform_faults(pf);
    L->cap = 1024;
    L->tab = xcalloc(L->cap, sizeof *L->tab, "the route table");
    return L;
}

/* Index of link l, registering it on first sight (in link data, +1). */
static int link_index(sim_links *L, sg_link_t l)
{
    intptr_t idx = (intptr_t)sg_link_get_data(l);
    if (idx) return (int)idx - 1;
    if (L->nlinks == L->caplinks) {
        L->caplinks = L->caplinks ? 2 * L->caplinks : 256;
        L->link = xrealloc_array(L->link, (size_t)L->caplinks, sizeof *L->link, "the link accounting");
        L->bytes = xrealloc_array(L->bytes, (size_t)L->caplinks, sizeof *L->bytes, "the link accounting");
    }
    L->link[L->nlinks] = l;
    L->bytes[L->nlinks] = 0;
    sg_link_set_data(l, (void *)(intptr_t)(L->nlinks + 1));
    return L->nlinks++;
}

static route *slot_of(route *tab, size_t cap, uint64_t key)
{
    size_t i = (size_t)(key * 0x9E3779B97F4A7C15ull) & (cap - 1);
    while (tab[i].key && tab[i].key != key)
        i = (i + 1) & (cap - 1);
    return &tab[i];
}

static void grow(sim_links *L)
{
    size_t cap = L->cap * 2;
    route *tab = xcalloc(cap, sizeof *tab, "the route table");
    for (size_t i = 0; i < L->cap; i++)
        if (L->tab[i].key) *slot_of(tab, cap, L->tab[i].key) = L->tab[i];
    free(L->tab);
    L->tab = tab;
    L->cap = cap;
}

/* The route from host a to host b into d (emptied first); false when it
 * crosses a failed link. */
static bool route_ok(const sim_links *L, sg_host_t a, sg_host_t b, xbt_dynar_t d)
{
    xbt_dynar_reset(d);
    sg_host_get_route(a, b, d);
    for (unsigned i = 0; L->faults->noff && i < xbt_dynar_length(d); i++)
        if (sim_faults_link_off(L->faults, xbt_dynar_get_as(d, i, sg_link_t))) return false;
    return true;
}

/* The better relay among `v` and the best so far (*best, its link count and latency). */
static void try_relay(const sim_links *L, int from, int to, int v, xbt_dynar_t d, int *best, int *nbest, double *lbest)
{
    if (v == from || v == to || !route_ok(L, L->hosts[from], L->hosts[v], d)) return;
    int n = (int)xbt_dynar_length(d);
    if (!route_ok(L, L->hosts[v], L->hosts[to], d)) return;
    n += (int)xbt_dynar_length(d);
    double lat =
        sg_host_get_route_latency(L->hosts[from], L->hosts[v]) + sg_host_get_route_latency(L->hosts[v], L->hosts[to]);
    if (*best < 0 || n < *nbest || (n == *nbest && lat < *lbest)) *best = v, *nbest = n, *lbest = lat;
}

/* The relay GPU of a pair whose route crosses a failed link, or -1. */
static int find_relay(const sim_links *L, int from, int to)
{
    xbt_dynar_t d = xbt_dynar_new(sizeof(sg_link_t), NULL);
    int best = -1, nbest = 0;
    double lbest = 0;
    const placement *pl = &L->pl;
    int nodes[2] = {placement_node(pl, from), placement_node(pl, to)};
    /* the GPUs of the pair's NVLink domains first, then any other */
    for (int k = 0; k < 2 && !(k == 1 && nodes[1] == nodes[0]); k++)
        for (int v = placement_rank(pl, nodes[k], 0); v < L->nranks && placement_node(pl, v) == nodes[k]; v++)
            try_relay(L, from, to, v, d, &best, &nbest, &lbest);
    for (int v = 0; best < 0 && v < L->nranks; v++)
        if (!placement_same_domain(pl, v, from) && !placement_same_domain(pl, v, to))
            try_relay(L, from, to, v, d, &best, &nbest, &lbest);
    xbt_dynar_free(&d);
    return best;
}

/* The path of a pair: direct, through a relay, or none (via = -2). */
static sim_path path_of(const sim_links *L, int from, int to, xbt_dynar_t d)
{
    sim_path p = {-1, 0, 0};
    if (route_ok(L, L->hosts[from], L->hosts[to], d)) return p;
    p.via = find_relay(L, from, to);
    if (p.via < 0) {
        p.via = -2;
        return p;
    }
    p.lat1 = sg_host_get_route_latency(L->hosts[from], L->hosts[p.via]);
    p.lat2 = sg_host_get_route_latency(L->hosts[p.via], L->hosts[to]);
    XBT_VERB("rank %d -> rank %d crosses a failed link: through %s", from, to, sg_host_get_name(L->hosts[p.via]));
    return p;
}

static void append_links(sim_links *L, route *r, xbt_dynar_t d)
{
    int n = (int)xbt_dynar_length(d);
    r->links = xrealloc_array(r->links, (size_t)(r->n + n) + 1, sizeof *r->links, "a route");
    for (int i = 0; i < n; i++)
        r->links[r->n++] = link_index(L, xbt_dynar_get_as(d, (unsigned)i, sg_link_t));
}

static route *resolve(sim_links *L, int from, int to)
{
    uint64_t key = (uint64_t)from * (uint64_t)L->nranks + (uint64_t)to + 1;
    route *r = slot_of(L->tab, L->cap, key);
    if (r->key) return r;
    if (2 * (L->used + 1) > L->cap) {
        grow(L);
        r = slot_of(L->tab, L->cap, key);
    }
    xbt_dynar_t d = xbt_dynar_new(sizeof(sg_link_t), NULL);
    r->key = key;
    r->path = path_of(L, from, to, d);
    xbt_assert(r->path.via != -2, "loong sim: rank %d has no path to rank %d (sim_links_check runs first)", from, to);
    if (r->path.via >= 0) {
        route_ok(L, L->hosts[from], L->hosts[r->path.via], d);
        append_links(L, r, d);
        route_ok(L, L->hosts[r->path.via], L->hosts[to], d);
    }
    append_links(L, r, d);
    xbt_dynar_free(&d);
    L->used++;
    XBT_DEBUG("route rank %d -> rank %d: %d links", from, to, r->n);
    return r;
}

sim_path sim_links_add(sim_links *L, int from, int to, double bytes)
{
    route *r = resolve(L, from, to);
    for (int i = 0; i < r->n; i++)
        L->bytes[r->links[i]] += bytes;
    return r->path;
}

int sim_links_check(sim_links *L, int n, char err[LOONG_ERRLEN])
{
    if (!L->faults->noff) return 0;
    xbt_dynar_t d = xbt_dynar_new(sizeof(sg_link_t), NULL);
    int rc = 0;
    for (int a = 0; rc == 0 && a < n; a++)
        for (int b = 0; rc == 0 && b < n; b++)
            if (a != b && path_of(L, a, b, d).via == -2) {
                snprintf(err, LOONG_ERRLEN,
                         "the failed link(s) disconnect rank %d (%s) from rank %d (%s): no route through at most one "
                         "relay GPU is left; fail "
                         "fewer links or choose a platform with more paths",
                         a, sg_host_get_name(L->hosts[a]), b, sg_host_get_name(L->hosts[b]));
                rc = -1;
            }
    xbt_dynar_free(&d);
    return rc;
}

static double util_of(const sim_link *l, double span) { return span > 0 ? l->bytes / (l->bw * span) : 0; }

/* Busiest first; arg points to the makespan. */
static int by_util(const void *a, const void *b, void *arg)
{
    const sim_link *x = a, *y = b;
    double span = *(const double *)arg, ux = util_of(x, span), uy = util_of(y, span);
    if (ux != uy) return ux < uy ? 1 : -1;
    return strcmp(x->name, y->name); /* deterministic order on ties */
}

void sim_links_collect(sim_links *L, sim_result *res)
{
    res->nlinks = 0;
    res->links = xmalloc_array((size_t)L->nlinks, sizeof *res->links, "the busiest links");
    for (int i = 0; i < L->nlinks; i++) {
        if (L->bytes[i] <= 0) continue;
        res->links[res->nlinks++] =
            (sim_link){sg_link_get_name(L->link[i]), L->bytes[i], sg_link_get_bandwidth(L->link[i])};
    }
    qsort_r(res->links, (size_t)res->nlinks, sizeof *res->links, by_util, &res->makespan);
    XBT_VERB("%d of %d links carried traffic over %zu routes", res->nlinks, L->nlinks, L->used);
}

void sim_links_free(sim_links *L)
{
    if (!L) return;
    for (size_t i = 0; i < L->cap; i++)
        free(L->tab[i].links);
    free(L->tab);
    free(L->link);
    free(L->bytes);
    free(L);
}

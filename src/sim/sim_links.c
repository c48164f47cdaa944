/*
 * sim_links: bytes per link, for the "busiest links" report. SimGrid's C API
 * gives a route's links but no per-link traffic, so each flow adds its bytes
 * to every link of its route. Routes are resolved once per (from, to) pair
 * (an open-addressing table keyed by the pair) and only from inside actors,
 * because graph-routed zones compute routes when the platform is sealed.
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
    int *links;   /* link indices */
    int n;
} route;

struct sim_links {
    int nranks;
    route *tab;
    size_t cap, used;
    sg_link_t *link; /* index -> link */
    double *bytes;
    int nlinks, caplinks;
};

sim_links *sim_links_new(int nranks)
{
    sim_links *L = xcalloc(1, sizeof *L, "the link accounting");
    L->nranks = nranks;
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

static route *resolve(sim_links *L, sg_host_t *hosts, int from, int to)
{
    uint64_t key = (uint64_t)from * (uint64_t)L->nranks + (uint64_t)to + 1;
    route *r = slot_of(L->tab, L->cap, key);
    if (r->key) return r;
    if (2 * (L->used + 1) > L->cap) {
        grow(L);
        r = slot_of(L->tab, L->cap, key);
    }
    xbt_dynar_t d = xbt_dynar_new(sizeof(sg_link_t), NULL);
    sg_host_get_route(hosts[from], hosts[to], d);
    r->key = key;
    r->n = (int)xbt_dynar_length(d);
    r->links = xmalloc_array((size_t)r->n, sizeof *r->links, "a route");
    for (int i = 0; i < r->n; i++)
        r->links[i] = link_index(L, xbt_dynar_get_as(d, (unsigned)i, sg_link_t));
    xbt_dynar_free(&d);
    L->used++;
    XBT_DEBUG("route rank %d -> rank %d: %d links", from, to, r->n);
    return r;
}

void sim_links_add(sim_links *L, sg_host_t *hosts, int from, int to, double bytes)
{
    route *r = resolve(L, hosts, from, to);
    for (int i = 0; i < r->n; i++)
        L->bytes[r->links[i]] += bytes;
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

/*
 * sim_whatif: a run's perturbations (model/whatif.h) applied to the loaded
 * platform through SimGrid's own state, never by rewriting the platform:
 * - a straggler: a speed profile scaling its host to 1/F of its peak
 *   (sim_s4u.h), which SimGrid applies to every execution there; the
 *   compute fast path, which sleeps through kernels instead of executing
 *   them, scales by the same factor (sim_faults.kscale);
 * - a slow link: its bandwidth set to 1/F (both directions of a
 *   full-duplex link unless one, NAME_UP or NAME_DOWN, is named);
 * - a failed link: turned off, so that a transfer over it would fail;
 *   sim_links.c routes around it (PXN through another GPU of the node, or
 *   any GPU whose routes avoid it) and refuses a fabric left disconnected;
 * - jitter: drawn per kernel by sim_actor.c from jitter and seed.
 */
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"
#include "sim_s4u.h"
#include "core/xalloc.h"

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(loong_sim_whatif, loong,
                                "loong sim: perturbations (stragglers, slow and failed links)");

/* The links named `name`: the link itself, or both directions of a
 * full-duplex one (SimGrid names them NAME_UP and NAME_DOWN). */
static int find_links(const char *name, sg_link_t out[2])
{
    size_t n = sg_link_count(), len = strlen(name);
    sg_link_t *all = sg_link_list();
    int k = 0;
    for (size_t i = 0; i < n && k < 2; i++) {
        const char *ln = sg_link_get_name(all[i]);
        if (!strcmp(ln, name))
            out[k++] = all[i];
        else if (!strncmp(ln, name, len) && (!strcmp(ln + len, "_UP") || !strcmp(ln + len, "_DOWN")))
            out[k++] = all[i];
    }
    free(all);
    return k;
}

static int no_link(const char *opt, const char *name, const char *path, char err[LOONG_ERRLEN])
{
    snprintf(err, LOONG_ERRLEN,
             "%s '%s': platform '%s' has no link of that name: list them with loong topo --list-links %s", opt, name,
             path, path);
    return -1;
}

static int apply_stragglers(sim_platform *pf, sim_faults *F, const whatif *w, char err[LOONG_ERRLEN])
{
    int n = sim_platform_gpus(pf);
    sg_host_t *h = sim_platform_hosts(pf);
    for (int i = 0; i < w->nstrag; i++)
        if (w->strag[i].rank >= n) {
            snprintf(err, LOONG_ERRLEN, "--straggler %d: the platform has %d GPUs: use a rank in 0..%d",
                     w->strag[i].rank, n, n - 1);
            return -1;
        }
    if (!w->nstrag) return 0;
    F->kscale = xmalloc_array((size_t)n, sizeof *F->kscale, "the stragglers");
    for (int r = 0; r < n; r++)
        F->kscale[r] = 1;
    for (int i = 0; i < w->nstrag; i++)
        F->kscale[w->strag[i].rank] *= w->strag[i].factor;
    for (int r = 0; r < n; r++)
        if (F->kscale[r] != 1) {
            sim_s4u_host_scale(h[r], 1 / F->kscale[r]);
            XBT_VERB("straggler %s: kernels x%g", sg_host_get_name(h[r]), F->kscale[r]);
        }
    return 0;
}

static int apply_links(sim_faults *F, const whatif *w, const char *path, char err[LOONG_ERRLEN])
{
    for (int i = 0; i < w->nslow; i++) {
        sg_link_t l[2];
        int k = find_links(w->slow[i].name, l);
        if (!k) return no_link("--slow-link", w->slow[i].name, path, err);
        for (int j = 0; j < k; j++)
            sg_link_set_bandwidth(l[j], sg_link_get_bandwidth(l[j]) / w->slow[i].factor);
    }
    for (int i = 0; i < w->nfail; i++) {
        sg_link_t l[2];
        int k = find_links(w->fail[i].name, l);
        if (!k) return no_link("--fail-link", w->fail[i].name, path, err);
        F->off = xrealloc_array(F->off, (size_t)(F->noff + k), sizeof *F->off, "the failed links");
        for (int j = 0; j < k; j++) {
            sim_s4u_link_off(l[j]);
            F->off[F->noff++] = l[j];
        }
    }
    return 0;
}

int sim_platform_perturb(sim_platform *pf, const whatif *w, char err[LOONG_ERRLEN])
{
    sim_faults *F = sim_platform_faults(pf);
    F->w = *w;
    if (apply_stragglers(pf, F, w, err) < 0) return -1;
    return apply_links(F, w, sim_platform_path(pf), err);
}

bool sim_faults_link_off(const sim_faults *F, sg_link_t l)
{
    for (int i = 0; i < F->noff; i++)
        if (F->off[i] == l) return true;
    return false;
}

void sim_faults_free(sim_faults *F)
{
    free(F->kscale);
    free(F->off);
    memset(F, 0, sizeof *F);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const sim_link_desc *)a)->name, ((const sim_link_desc *)b)->name);
}

sim_link_desc *sim_platform_links(int *n)
{
    size_t cnt = sg_link_count();
    sg_link_t *all = sg_link_list();
    sim_link_desc *d = xcalloc(cnt + 1, sizeof *d, "the platform's links");
    *n = 0;
    for (size_t i = 0; i < cnt; i++) {
        const char *ln = sg_link_get_name(all[i]);
        size_t len = strlen(ln);
        bool up = len > 3 && !strcmp(ln + len - 3, "_UP");
        if (len > 5 && !strcmp(ln + len - 5, "_DOWN")) continue; /* listed with its _UP */
        if (!strncmp(ln, "__", 2)) continue;                     /* SimGrid's own, e.g. __loopback__ */
        sim_link_desc *x = &d[(*n)++];
        snprintf(x->name, sizeof x->name, "%.*s", (int)(up ? len - 3 : len), ln);
        x->bw = sg_link_get_bandwidth(all[i]);
        x->lat = sg_link_get_latency(all[i]);
        x->duplex = up;
    }
    free(all);
    qsort(d, (size_t)*n, sizeof *d, by_name);
    return d;
}

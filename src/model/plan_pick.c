/*
 * plan_pick: which layout to recommend when the model cannot tell layouts
 * apart, and how robust the candidates are (plan.h).
 *
 * Two layouts whose predicted steps differ by less than the model's error
 * between two layouts (fidelity.h: the spread of its end-to-end errors on
 * published runs), or --tie, tie. Among tied
 * layouts the recommendation prefers the more robust under `--robust`'s
 * perturbations (unless their worst cases tie too), then the simpler: fewer
 * streams, then no KV replication, then the faster.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "core/recompute.h"
#include "core/dag.h"
#include "core/mesh.h"
#include "core/placement.h"
#include "core/xalloc.h"

const char *plan_pert_name(plan_pert k)
{
    static const char *const names[PLAN_PERT_COUNT] = {"a straggler", "a NIC at half speed", "jitter"};
    return names[k];
}

double plan_worst_step(const plan_layout *l)
{
    double w = plan_step(l);
    for (int k = 0; k < PLAN_PERT_COUNT; k++)
        if (l->robust[k] > w) w = l->robust[k];
    return w;
}

/* The kind whose worst case is the largest (the layout's weak spot). */
static plan_pert weakest(const plan_layout *l)
{
    plan_pert w = PLAN_PERT_STRAGGLER;
    for (int k = 1; k < PLAN_PERT_COUNT; k++)
        if (l->robust[k] > l->robust[w]) w = (plan_pert)k;
    return w;
}

int plan_streams(const plan_layout *l)
{
    config c = l->c;
    c.model.layers = 1; /* every layer uses the same streams */
    recompute_clamp_layers(&c);
    char err[LOONG_ERRLEN];
    dag *g = dag_build(&c, err);
    if (!g) return STREAM_COUNT;
    int n = 0;
    for (int s = 0; s < STREAM_COUNT; s++) {
        uint32_t k;
        dag_stream_tasks(g, 0, s, &k);
        n += k > 0;
    }
    dag_free(g);
    return n;
}

static bool same_kind(const plan_layout *a, const plan_layout *b) { return (a->sim_step >= 0) == (b->sim_step >= 0); }

bool plan_tied(const plan_layout *l, const plan_layout *best, double tie)
{
    return same_kind(l, best) && plan_gpu_seconds(l) <= plan_gpu_seconds(best) * (1 + tie);
}

static bool robust_ran(const plan_layout *l) { return l->robust[PLAN_PERT_STRAGGLER] >= 0; }

/* Simpler: fewer streams, then no KV replication. */
static bool simpler(const plan_layout *a, int sa, const plan_layout *b, int sb)
{
    if (sa != sb) return sa < sb;
    return config_kv_repl(&a->c) < config_kv_repl(&b->c);
}

/* The worst step over --robust's perturbations, per sample (the ranking's unit). */
static double worst_per_sample(const plan_layout *l) { return plan_per_sample(l, plan_worst_step(l)); }

/* Whether --robust's worst cases removed the fastest from the tie: the
 * tied layouts all ran them, and the fastest's is not within tie of the
 * best worst case among them. */
static bool robustness_decided(const plan_layout *ls, const int *idx, int m, double tie)
{
    const plan_layout *best = &ls[idx[0]];
    double wmin = worst_per_sample(best);
    for (int k = 0; k < m; k++) {
        const plan_layout *l = &ls[idx[k]];
        if (k > 0 && !plan_tied(l, best, tie)) continue;
        if (!robust_ran(l)) return false;
        if (worst_per_sample(l) < wmin) wmin = worst_per_sample(l);
    }
    return worst_per_sample(best) > wmin * (1 + tie);
}

int plan_recommend(const plan_layout *ls, const int *idx, int m, double tie)
{
    const plan_layout *best = &ls[idx[0]];
    int tied[64] = {idx[0]}, nt = 0;
    for (int k = 0; k < m && nt < 64; k++)
        if (k == 0 || plan_tied(&ls[idx[k]], best, tie)) tied[nt++] = idx[k];
    if (nt == 1) return idx[0];
    bool robust = true;
    double wmin = 0;
    for (int i = 0; i < nt; i++) {
        robust &= robust_ran(&ls[tied[i]]);
        double w = worst_per_sample(&ls[tied[i]]);
        if (i == 0 || w < wmin) wmin = w;
    }
    if (robust) { /* keep those whose worst case ties with the most robust */
        int k = 0;
        for (int i = 0; i < nt; i++)
            if (worst_per_sample(&ls[tied[i]]) <= wmin * (1 + tie)) tied[k++] = tied[i];
        nt = k;
    }
    int pick = tied[0], sp = plan_streams(&ls[pick]);
    for (int i = 1; i < nt; i++) {
        int s = plan_streams(&ls[tied[i]]);
        if (simpler(&ls[tied[i]], s, &ls[pick], sp)) pick = tied[i], sp = s;
    }
    return pick;
}

/* ---- the explanation ---- */

/* Ring hops (between ring neighbours of the ring of rank 0: its seq group,
 * in ring order) that leave an NVLink domain. */
static int ring_crossings(const config *c)
{
    mesh m = config_mesh(c);
    placement pl = placement_make(c->gpus_per_node, 1, 0);
    int n = 0, *ring = xmalloc_array((size_t)c->p_seq, sizeof *ring, "a ring's ranks");
    mesh_group_members(&m, MESH_BIT(MESH_SEQ), mesh_group_id(&m, MESH_BIT(MESH_SEQ), 0), ring);
    for (int s = 0; c->p_seq > 1 && s < c->p_seq; s++)
        n += !placement_same_domain(&pl, ring[s], ring[(s + 1) % c->p_seq]);
    free(ring);
    return n;
}

/* Nodes one all-to-all group (rank 0's head group) spans. */
static int a2a_nodes(const config *c)
{
    mesh m = config_mesh(c);
    placement pl = placement_make(c->gpus_per_node, 1, 0);
    int *group = xmalloc_array((size_t)c->p_head, sizeof *group, "an all-to-all group's ranks");
    mesh_group_members(&m, MESH_BIT(MESH_HEAD), mesh_group_id(&m, MESH_BIT(MESH_HEAD), 0), group);
    int nodes = placement_group_nodes(&pl, group, c->p_head);
    free(group);
    return nodes;
}

static void geometry(const plan_layout *l, char *buf, size_t len)
{
    const config *c = &l->c;
    if (c->p_seq > 1)
        snprintf(buf, len, "%s's ring crosses nodes at %d of %d hops, its all-to-all spans %d node(s)", l->name,
                 ring_crossings(c), c->p_seq, a2a_nodes(c));
    else
        snprintf(buf, len, "%s has no ring, its all-to-all spans %d node(s)", l->name, a2a_nodes(c));
}

static double slowdown(const plan_layout *l, plan_pert k) { return 100 * (l->robust[k] / plan_step(l) - 1); }

static void write_tie(FILE *f, const plan_layout *ls, const int *idx, int m, int pick, const plan_report *rp)
{
    const plan_layout *best = &ls[idx[0]], *p = &ls[pick];
    int nt = 0;
    for (int k = 1; k < m; k++)
        nt += plan_tied(&ls[idx[k]], best, rp->tie);
    if (!nt) return;
    if (pick == idx[0]) {
        fprintf(f, "# tie: %d more layout(s) within %.2f %% of it (the '=' rows); it stays the choice: %s\n", nt,
                100 * rp->tie,
                robust_ran(best) ? "as robust as any of them and no more complex" : "none of them is simpler");
        return;
    }
    fprintf(f, "# tie: the fastest, %s, is only %.2f %% ahead, within %s %.2f %%; %s is chosen as ", best->name,
            100 * (plan_gpu_seconds(p) / plan_gpu_seconds(best) - 1),
            rp->tie_given ? "--tie's" : "the model's error between two layouts,", 100 * rp->tie, p->name);
    if (robustness_decided(ls, idx, m, rp->tie))
        fprintf(f, "the more robust (worst case +%.1f %% under %s, against +%.1f %% under %s)\n",
                100 * (plan_worst_step(p) / plan_step(p) - 1), plan_pert_name(weakest(p)),
                100 * (plan_worst_step(best) / plan_step(best) - 1), plan_pert_name(weakest(best)));
    else
        fprintf(f, "the simpler (%d streams and KV replication x%d, against %d and x%d)%s\n", plan_streams(p),
                config_kv_repl(&p->c), plan_streams(best), config_kv_repl(&best->c),
                robust_ran(p) ? "" : "; --robust would weigh how each copes with a straggler or a slow NIC first");
}

static void write_robust(FILE *f, const plan_layout *ls, const int *idx, int m, int pick, double tie)
{
    int r = -1;
    for (int k = 0; k < m; k++)
        if (robust_ran(&ls[idx[k]]) && (r < 0 || plan_per_sample(&ls[idx[k]], plan_worst_step(&ls[idx[k]])) <
                                                     plan_per_sample(&ls[r], plan_worst_step(&ls[r]))))
            r = idx[k];
    if (r < 0) return;
    const plan_layout *best = &ls[idx[0]], *rb = &ls[r];
    plan_pert kr = weakest(rb), kb = weakest(best);
    fprintf(f, "# robust: best in the worst case: %s, +%.1f %% at worst (%s, %s)\n", rb->name, slowdown(rb, kr),
            plan_pert_name(kr), rb->robust_what[kr]);
    if (r == idx[0]) {
        fprintf(f, "# robust: the clean winner is also the most robust\n");
        return;
    }
    bool tied = plan_tied(rb, best, tie);
    if (r != pick && tied)
        fprintf(f, "# robust: the recommended %s is as robust within the %.2f %% tie (+%.1f %% at worst) and simpler\n",
                ls[pick].name, 100 * tie, 100 * (plan_worst_step(&ls[pick]) / plan_step(&ls[pick]) - 1));
    else if (r != pick) /* robustness only decides among layouts tied on the clean step */
        fprintf(f,
                "# robust: %s is not recommended: its clean step is %.2f %% behind the fastest, outside the %.2f %% "
                "tie, and robustness only decides among tied layouts; the recommended %s slows +%.1f %% at worst\n",
                rb->name, 100 * (plan_gpu_seconds(rb) / plan_gpu_seconds(best) - 1), 100 * tie, ls[pick].name,
                100 * (plan_worst_step(&ls[pick]) / plan_step(&ls[pick]) - 1));
    char gb[200], gr[200];
    geometry(best, gb, sizeof gb);
    geometry(rb, gr, sizeof gr);
    fprintf(f,
            "# robust: differs from the clean winner %s, which slows +%.1f %% under %s (%s) against %s's +%.1f %%: "
            "%s; %s\n",
            best->name, slowdown(best, kb), plan_pert_name(kb), best->robust_what[kb], rb->name,
            rb->robust[kb] >= 0 ? slowdown(rb, kb) : 0, gb, gr);
}

void plan_write_choice(FILE *f, const plan_layout *ls, const int *idx, int m, int pick, const plan_report *rp)
{
    write_tie(f, ls, idx, m, pick, rp);
    if (rp->robust) write_robust(f, ls, idx, m, pick, rp->tie);
}

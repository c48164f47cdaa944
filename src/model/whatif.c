/* whatif: parse, check and describe a run's perturbations (whatif.h). */
#include <ctype.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "whatif.h"
#include "core/xalloc.h"

/* A factor after ':' (or the default when there is none): a finite number
 * above 0. */
static int parse_factor(const char *s, const char *opt, const char *arg, double dflt, double *out,
                        char err[LOONG_ERRLEN])
{
    if (!s) {
        *out = dflt;
        return 0;
    }
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v <= 0) {
        snprintf(err, LOONG_ERRLEN, "%s '%s': the factor '%s' is not a number above 0 (e.g. %s %s)", opt, arg, s, opt,
                 strcmp(opt, "--straggler") ? "node0-nic0:2" : "3:1.25");
        return -1;
    }
    *out = v;
    return 0;
}

/* Split "NAME[:F]" at its last ':' into name (copied) and the factor text. */
static int split(const char *arg, const char *opt, char *name, const char **factor, char err[LOONG_ERRLEN])
{
    const char *colon = strrchr(arg, ':');
    size_t n = colon ? (size_t)(colon - arg) : strlen(arg);
    if (n == 0 || n >= WHATIF_NAME) {
        snprintf(err, LOONG_ERRLEN, "%s '%.64s': %s", opt, arg,
                 n ? "the name is too long" : "no name before the factor: give NAME[:FACTOR]");
        return -1;
    }
    memcpy(name, arg, n);
    name[n] = '\0';
    *factor = colon ? colon + 1 : NULL;
    return 0;
}

static int room(int n, const char *opt, char err[LOONG_ERRLEN])
{
    if (n < WHATIF_MAX) return 0;
    snprintf(err, LOONG_ERRLEN, "%s given more than %d times", opt, WHATIF_MAX);
    return -1;
}

int whatif_add_straggler(whatif *w, const char *arg, char err[LOONG_ERRLEN])
{
    char rank[WHATIF_NAME];
    const char *f;
    if (room(w->nstrag, "--straggler", err) < 0 || split(arg, "--straggler", rank, &f, err) < 0) return -1;
    char *end;
    long r = strtol(rank, &end, 10);
    if (end == rank || *end || r < 0 || r > 1L << 30 || !isdigit((unsigned char)rank[0])) {
        snprintf(err, LOONG_ERRLEN, "--straggler '%s': '%s' is not a rank number (RANK[:FACTOR], e.g. 3:1.25)", arg,
                 rank);
        return -1;
    }
    whatif_straggler *s = &w->strag[w->nstrag];
    s->rank = (int)r;
    if (parse_factor(f, "--straggler", arg, WHATIF_STRAGGLER_DEFAULT, &s->factor, err) < 0) return -1;
    w->nstrag++;
    return 0;
}

int whatif_add_slow_link(whatif *w, const char *arg, char err[LOONG_ERRLEN])
{
    if (room(w->nslow, "--slow-link", err) < 0) return -1;
    whatif_link *l = &w->slow[w->nslow];
    const char *f;
    if (split(arg, "--slow-link", l->name, &f, err) < 0 ||
        parse_factor(f, "--slow-link", arg, WHATIF_SLOW_LINK_DEFAULT, &l->factor, err) < 0)
        return -1;
    w->nslow++;
    return 0;
}

int whatif_add_fail_link(whatif *w, const char *arg, char err[LOONG_ERRLEN])
{
    if (room(w->nfail, "--fail-link", err) < 0) return -1;
    size_t n = strlen(arg);
    if (n == 0 || n >= WHATIF_NAME || strchr(arg, ':')) {
        snprintf(err, LOONG_ERRLEN, "--fail-link '%.64s': give one link name (loong topo --list-links PLATFORM)", arg);
        return -1;
    }
    memcpy(w->fail[w->nfail].name, arg, n + 1);
    w->fail[w->nfail++].factor = 0;
    return 0;
}

int whatif_set_jitter(whatif *w, const char *arg, char err[LOONG_ERRLEN])
{
    char *end;
    double v = strtod(arg, &end);
    if (end == arg || (*end && strcmp(end, "%")) || !isfinite(v) || v < 0 || v >= 100) {
        snprintf(err, LOONG_ERRLEN, "--jitter '%s' is not a percentage in [0, 100) (e.g. --jitter 5)", arg);
        return -1;
    }
    w->jitter = v / 100;
    return 0;
}

bool whatif_any(const whatif *w) { return w->nstrag || w->nslow || w->nfail || w->jitter > 0; }

int whatif_check_ranks(const whatif *w, int nranks, char err[LOONG_ERRLEN])
{
    for (int i = 0; i < w->nstrag; i++)
        if (w->strag[i].rank >= nranks) {
            snprintf(err, LOONG_ERRLEN,
                     "--straggler %d is not a rank of this run: use 0..%d (every rank of every data-parallel replica)",
                     w->strag[i].rank, nranks - 1);
            return -1;
        }
    return 0;
}

/* The time factor of rank r's kernels under w's stragglers. */
static double straggler_factor(const whatif *w, int r)
{
    double f = 1;
    for (int i = 0; i < w->nstrag; i++)
        if (w->strag[i].rank == r) f *= w->strag[i].factor;
    return f;
}

/* The first straggler whose d-group of m is not slowed alike, or -1. */
static int uneven_straggler(const whatif *w, const mesh *m, mesh_dim d)
{
    int n = mesh_group_size(m, MESH_BIT(d)), *members = xmalloc_array((size_t)n, sizeof *members, "a mesh group");
    int found = -1;
    for (int i = 0; i < w->nstrag && found < 0; i++) {
        int r = w->strag[i].rank;
        if (r >= mesh_size(m)) continue; /* whatif_check_ranks refuses it */
        mesh_group_members(m, MESH_BIT(d), mesh_group_id(m, MESH_BIT(d), r), members);
        double f = straggler_factor(w, r);
        for (int k = 0; k < n && found < 0; k++)
            if (straggler_factor(w, members[k]) != f) found = i;
    }
    free(members);
    return found;
}

bool whatif_breaks_fold(const whatif *w, const mesh *m, mesh_dim d, char *why, size_t len)
{
    if (m->degree[d] < 2) return false;
    bool dp = d == MESH_DP;
    const char *copies = dp              ? "the data-parallel replicas"
                         : d == MESH_TP  ? "the ranks of a TP group"
                         : d == MESH_SEQ ? "the ranks of a ring"
                                         : "the ranks of a head group";
    const char *group = d == MESH_TP ? "TP" : d == MESH_SEQ ? "ring" : "head";
    int s = uneven_straggler(w, m, d);
    if (s >= 0) {
        int r = w->strag[s].rank, k = mesh_group_index(m, MESH_BIT(d), r);
        if (dp)
            snprintf(why, len,
                     "--straggler %d slows a GPU of data-parallel replica %d and not the same GPU of the others", r, k);
        else
            snprintf(why, len, "--straggler %d slows %s rank %d of its %s%s and not the others", r, group, k, group,
                     d == MESH_SEQ ? "" : " group");
    } else if (w->nslow || w->nfail) {
        bool slow = w->nslow > 0;
        snprintf(why, len, "%s %s changes one link, which %s do not all cross alike",
                 slow ? "--slow-link" : "--fail-link", slow ? w->slow[0].name : w->fail[0].name, copies);
    } else if (w->jitter > 0) {
        snprintf(why, len, "--jitter draws every kernel's factor on its own, so %s no longer run alike", copies);
    } else {
        return false;
    }
    return true;
}

void whatif_describe(const whatif *w, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
#define PUT(...)                                                                                                       \
    do {                                                                                                               \
        if (n < len) n += (size_t)snprintf(buf + n, len - n, __VA_ARGS__);                                             \
    } while (0)
    for (int i = 0; i < w->nstrag; i++)
        PUT("%sstraggler rank %d x%g", n ? "; " : "", w->strag[i].rank, w->strag[i].factor);
    for (int i = 0; i < w->nslow; i++)
        PUT("%sslow link %s x%g", n ? "; " : "", w->slow[i].name, w->slow[i].factor);
    for (int i = 0; i < w->nfail; i++)
        PUT("%sfailed link %s", n ? "; " : "", w->fail[i].name);
    if (w->jitter > 0)
        PUT("%sjitter %g %% (lognormal, mean 1, seed %llu)", n ? "; " : "", 100 * w->jitter,
            (unsigned long long)w->seed);
#undef PUT
}

void whatif_write_header(FILE *f, const whatif *w)
{
    if (!whatif_any(w)) return;
    char what[1024];
    whatif_describe(w, what, sizeof what);
    fprintf(f, "# PERTURBED (what-if): %s\n", what);
}

static json_t *links_json(const whatif_link *l, int n, bool factor)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, factor ? json_pack("{s:s,s:f}", "name", l[i].name, "factor", l[i].factor)
                                        : json_string(l[i].name));
    return a;
}

json_t *whatif_to_json(const whatif *w)
{
    json_t *j = json_object();
    if (!j) xalloc_die(0, "the perturbations");
    if (w->nstrag) {
        json_t *a = json_array();
        for (int i = 0; i < w->nstrag; i++)
            json_array_append_new(a, json_pack("{s:i,s:f}", "rank", w->strag[i].rank, "factor", w->strag[i].factor));
        json_object_set_new(j, "stragglers", a);
    }
    if (w->nslow) json_object_set_new(j, "slow_links", links_json(w->slow, w->nslow, true));
    if (w->nfail) json_object_set_new(j, "failed_links", links_json(w->fail, w->nfail, false));
    if (w->jitter > 0) {
        json_object_set_new(j, "jitter", json_real(w->jitter));
        json_object_set_new(j, "seed", json_integer((json_int_t)w->seed));
    }
    return j;
}

int whatif_argc(const whatif *w) { return w->nstrag + w->nslow + w->nfail + 2; }

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    char buf[WHATIF_NAME + 64];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return xstrdup(buf, "a perturbation option");
}

int whatif_argv(const whatif *w, char **out)
{
    int k = 0;
    for (int i = 0; i < w->nstrag; i++)
        out[k++] = fmt("--straggler=%d:%.17g", w->strag[i].rank, w->strag[i].factor);
    for (int i = 0; i < w->nslow; i++)
        out[k++] = fmt("--slow-link=%s:%.17g", w->slow[i].name, w->slow[i].factor);
    for (int i = 0; i < w->nfail; i++)
        out[k++] = fmt("--fail-link=%s", w->fail[i].name);
    if (w->jitter > 0) {
        out[k++] = fmt("--jitter=%.17g", 100 * w->jitter);
        out[k++] = fmt("--seed=%llu", (unsigned long long)w->seed);
    }
    return k;
}

void whatif_lognormal_params(double cv, double *mu, double *sigma)
{
    double s2 = log1p(cv * cv);
    *sigma = sqrt(s2);
    *mu = -s2 / 2;
}

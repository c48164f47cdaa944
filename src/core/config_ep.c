/* config_ep: expert parallelism's geometry, Megatron-Core's MoE layers
 * (megatron/core/transformer/moe/; the expert ranks of
 * megatron/core/parallel_state.py, "MoE Parallel Folding"): which EP rank
 * a rank is, what one rank holds of a block's experts, and how the routed
 * tokens split over the EP group under the routing draw (--routing). Every
 * walker asks here. See config.h, "expert parallelism".
 *
 * The expert layers decompose the same ranks as attention. Attention's
 * rank generator numbers a stage's ranks g = t + tp x i (t the TP rank, i
 * the rank's index in the gradient group: context ranks, then replicas);
 * the expert rank generator (order tp-ep-dp, cp 1) numbers the same ranks
 * g = e + etp x (j + ep x d), e the expert-TP rank, j the EP rank, d the
 * expert-data-parallel one. With etp dividing tp, e = t mod etp and the
 * experts' index u = j + ep x d = t / etp + (tp / etp) x i: an EP group
 * is ep consecutive u at one e, the expert-data-parallel group the u
 * congruent mod ep. At expert TP = TP (the default) u = i: ep consecutive
 * context ranks, or the context ranks of ep / P consecutive replicas. */
#include "config.h"
#include "hash.h"
#include "infile.h"
#include "xalloc.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool config_moe(const config *c) { return model_moe(&c->model); }

/* A histogram's weights, interned: equal lists share one. */
struct routing_hist {
    int n;
    double *w, total;
    routing_hist *next;
};
static routing_hist *interned;
static pthread_mutex_t interned_mu = PTHREAD_MUTEX_INITIALIZER;

static const routing_hist *hist_intern(const double *w, int n)
{
    pthread_mutex_lock(&interned_mu);
    routing_hist *h = interned;
    while (h && (h->n != n || memcmp(h->w, w, (size_t)n * sizeof *w)))
        h = h->next;
    if (!h) {
        h = xcalloc(1, sizeof *h, "a routing histogram");
        h->w = xmalloc_array((size_t)n, sizeof *h->w, "a routing histogram");
        memcpy(h->w, w, (size_t)n * sizeof *w);
        h->n = n;
        for (int e = 0; e < n; e++)
            h->total += w[e];
        h->next = interned;
        interned = h;
    }
    pthread_mutex_unlock(&interned_mu);
    return h;
}

bool config_routing_skewed(const config *c) { return c->routing_zipf > 0 || c->routing_hist; }

int config_routing_hist_experts(const config *c) { return c->routing_hist ? c->routing_hist->n : 0; }

void config_routing_text(const config *c, char *buf, size_t len)
{
    if (c->routing_hist)
        snprintf(buf, len, "hist:%d experts", c->routing_hist->n);
    else if (c->routing_zipf == 0)
        snprintf(buf, len, "balanced");
    else
        snprintf(buf, len, "zipf:%.17g", c->routing_zipf);
}

char *config_routing_spec(const config *c)
{
    const routing_hist *h = c->routing_hist;
    if (!h) {
        char buf[64];
        config_routing_text(c, buf, sizeof buf);
        return xstrdup(buf, "--routing");
    }
    size_t cap = 8 + (size_t)h->n * 26, at = (size_t)snprintf(NULL, 0, "hist:");
    char *s = xmalloc(cap, "--routing");
    snprintf(s, cap, "hist:");
    for (int e = 0; e < h->n; e++)
        at += (size_t)snprintf(s + at, cap - at, "%s%.17g", e ? "," : "", h->w[e]);
    return s;
}

enum { HIST_MAX = 4096 }; /* model.c's limit on experts */

/* Weights from text, separated by any of `seps`; # to the end of a line
 * is a comment where comments is set. Returns their count (>= 1), or -1
 * with the error naming `what`. */
static int hist_numbers(char *text, const char *seps, bool comments, double *w, const char *what,
                        char err[LOONG_ERRLEN])
{
    int n = 0;
    double total = 0;
    for (char *line = text, *nl; line; line = nl) {
        nl = comments ? strchr(line, '\n') : NULL;
        if (nl) *nl++ = '\0';
        char *hash = comments ? strchr(line, '#') : NULL;
        if (hash) *hash = '\0';
        char *save = NULL;
        for (char *tok = strtok_r(line, seps, &save); tok; tok = strtok_r(NULL, seps, &save)) {
            char *end;
            double v = strtod(tok, &end);
            if (*end || !(v >= 0 && v <= 1e300)) {
                snprintf(err, LOONG_ERRLEN, "%s: '%.30s' is not a weight (a number >= 0, one per expert)", what, tok);
                return -1;
            }
            if (n == HIST_MAX) {
                snprintf(err, LOONG_ERRLEN, "%s: more than %d weights (one per expert)", what, HIST_MAX);
                return -1;
            }
            w[n++] = v;
            total += v;
        }
    }
    if (n == 0 || !(total > 0 && total <= 1e300)) {
        snprintf(err, LOONG_ERRLEN, "%s: %s (one weight >= 0 per expert, some above 0)", what,
                 n ? "every weight is 0" : "no weights");
        return -1;
    }
    return n;
}

/* --routing hist:W,W,... or FILE into c->routing_hist. */
static int routing_hist_parse(config *c, const char *text, char err[LOONG_ERRLEN])
{
    bool inline_list = !strncmp(text, "hist:", 5);
    char what[LOONG_ERRLEN / 2], *buf;
    if (inline_list) {
        snprintf(what, sizeof what, "--routing's hist: list");
        buf = xstrdup(text + 5, "--routing");
    } else {
        snprintf(what, sizeof what, "--routing '%.60s'", text);
        char rerr[LOONG_ERRLEN];
        if (!(buf = infile_read(text, "--routing histogram", (size_t)1 << 20, NULL, rerr))) {
            snprintf(err, LOONG_ERRLEN, "%.150s (--routing takes balanced, zipf:S, hist:W,W,... or a histogram file)",
                     rerr);
            return -1;
        }
    }
    double *w = xmalloc_array(HIST_MAX, sizeof *w, "--routing");
    int n = hist_numbers(buf, inline_list ? "," : " \t\r,", !inline_list, w, what, err);
    if (n > 0) c->routing_hist = hist_intern(w, n), c->routing_zipf = 0;
    free(w);
    free(buf);
    return n > 0 ? 0 : -1;
}

int config_routing_parse(config *c, const char *text, char err[LOONG_ERRLEN])
{
    if (!strcmp(text, "balanced")) {
        c->routing_zipf = 0, c->routing_hist = NULL;
        return 0;
    }
    if (strncmp(text, "zipf:", 5)) return routing_hist_parse(c, text, err);
    char *end = NULL;
    double s = strtod(text + 5, &end);
    if (end == text + 5 || *end || !(s > 0 && s <= 8)) {
        snprintf(err, LOONG_ERRLEN,
                 "--routing '%.40s' is not balanced or zipf:S with 0 < S <= 8 (e.g. zipf:1.2, the hottest expert "
                 "first)",
                 text);
        return -1;
    }
    c->routing_zipf = s, c->routing_hist = NULL;
    return 0;
}

void config_capacity_text(const config *c, char *buf, size_t len)
{
    if (c->capacity == 0)
        snprintf(buf, len, "none");
    else
        snprintf(buf, len, "%.17g", c->capacity);
}

int config_capacity_parse(config *c, const char *text, char err[LOONG_ERRLEN])
{
    if (!strcmp(text, "none")) {
        c->capacity = 0;
        return 0;
    }
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || *end || !(v >= 0.01 && v <= 1000)) {
        snprintf(err, LOONG_ERRLEN,
                 "--capacity-factor '%.40s' is not none or a factor in [0.01, 1000] (Megatron's "
                 "--moe-expert-capacity-factor, e.g. 1.25)",
                 text);
        return -1;
    }
    c->capacity = v;
    return 0;
}

int config_etp(const config *c) { return c->etp > 0 ? c->etp : c->tp; }

bool config_ep_spans_tp(const config *c) { return config_moe(c) && config_etp(c) < c->tp; }

int config_ep_span(const config *c) { return c->tp / config_etp(c) * config_cp(c); }

bool config_ep_breaks_tp_fold(const config *c)
{
    return config_moe(c) && c->tp > 1 && (config_etp(c) < c->tp || c->dispatcher == DISPATCH_ALLGATHER);
}

/* The experts' index u of rank (above): t / etp + (tp / etp) i. */
static int expert_index(const config *c, const mesh *m, int rank)
{
    int etp = config_etp(c);
    return mesh_group_index(m, CONFIG_TP_DIMS, rank) / etp + c->tp / etp * mesh_group_index(m, CONFIG_GRAD_DIMS, rank);
}

int config_ep_rank(const config *c, int rank)
{
    mesh m = config_mesh(c);
    return expert_index(c, &m, rank) % c->ep;
}

typedef struct {
    int u, rank;
} indexed_rank;

static int by_index(const void *a, const void *b)
{
    const indexed_rank *x = a, *y = b;
    return (x->u > y->u) - (x->u < y->u);
}

int config_ep_members(const config *c, int rank, ep_group_kind kind, int *out, int *rep_stride, int *rep_count)
{
    mesh m = config_mesh(c);
    mesh_dims dims = CONFIG_TP_DIMS | MESH_DIMS_CP; /* the stage's ranks of rank's replica */
    int n = mesh_group_size(&m, dims), span = config_ep_span(c), etp = config_etp(c), k = 0;
    int *all = xmalloc_array((size_t)n, sizeof *all, "an expert group");
    indexed_rank *in = xmalloc_array((size_t)n, sizeof *in, "an expert group");
    mesh_group_members(&m, dims, mesh_group_id(&m, dims, rank), all);
    int me = expert_index(c, &m, rank), e = mesh_group_index(&m, CONFIG_TP_DIMS, rank) % etp;
    bool edp = kind == EP_GROUP_EDP;
    for (int i = 0; i < n; i++) {
        int u = expert_index(c, &m, all[i]);
        bool mine = c->ep >= span ? (edp ? all[i] == rank : true)
                    : edp         ? u % c->ep == me % c->ep
                                  : u / c->ep == me / c->ep;
        if (mine && (kind == EP_GROUP_TP_EP || mesh_group_index(&m, CONFIG_TP_DIMS, all[i]) % etp == e))
            in[k++] = (indexed_rank){kind == EP_GROUP_TP_EP ? all[i] : u, all[i]};
    }
    qsort(in, (size_t)k, sizeof *in, by_index);
    for (int i = 0; i < k; i++)
        out[i] = in[i].rank;
    int s = c->ep > span ? c->ep / span : 1; /* the replicas an EP group spans */
    *rep_stride = c->ep > span ? (edp ? s : 1) : 0;
    *rep_count = c->ep > span ? (edp ? c->dp / s : s) : 0;
    free(in);
    free(all);
    return k;
}

int config_ep_local_experts(const config *c) { return c->model.experts / c->ep; }

int config_edp(const config *c) { return c->tp * config_cp(c) * c->dp / (config_etp(c) * c->ep); }

uint64_t config_ep_expert_ffn(const config *c) { return (uint64_t)c->model.expert_ffn / (uint64_t)config_etp(c); }

uint64_t config_ep_shared_ffn(const config *c) { return (uint64_t)c->model.shared_ffn / (uint64_t)c->tp; }

uint64_t config_ep_expert_params(const config *c)
{
    return model_expert_params_tp(&c->model, config_etp(c)) / (uint64_t)c->ep;
}

/* Zipf's law over the experts, expert e (from 0) drawing (e+1)^-s of the
 * routed tokens, normalised: the hottest experts sit on EP rank 0. */
static double zipf_weight(double s, int e) { return pow((double)e + 1, -s); }

/* The sum of Zipf's weights over E experts, the shares' normaliser: the
 * builder and the simulator ask for shares per task, so the last one is
 * kept (per thread: CUDA's local transport builds a DAG per thread). */
static double zipf_total(double s, int E)
{
    static _Thread_local double last_s = -1, last_total;
    static _Thread_local int last_E = -1;
    if (s != last_s || E != last_E) {
        last_total = 0;
        for (int e = 0; e < E; e++)
            last_total += zipf_weight(s, e);
        last_s = s, last_E = E;
    }
    return last_total;
}

/* Expert e's share of the routed rows: 1/E balanced, its Zipf weight or
 * its histogram weight over their sum. */
static double expert_share(const config *c, int e)
{
    if (c->routing_hist) return e < c->routing_hist->n ? c->routing_hist->w[e] / c->routing_hist->total : 0;
    if (c->routing_zipf == 0) return 1.0 / c->model.experts;
    return zipf_weight(c->routing_zipf, e) / zipf_total(c->routing_zipf, c->model.experts);
}

double config_ep_share(const config *c, int ep_rank)
{
    if (!config_routing_skewed(c)) return 1.0 / c->ep;
    int local = config_ep_local_experts(c);
    double mine = 0;
    for (int e = ep_rank * local; e < (ep_rank + 1) * local; e++)
        mine += expert_share(c, e);
    return mine;
}

/* The routed rows (token copies) one rank sends into the dispatch: its
 * T' tokens (T / tp under sequence parallelism) times top-k. */
static uint64_t routed_rows(const config *c) { return config_sp_rows(c, config_local_tokens(c)) * c->model.top_k; }

uint64_t config_ep_pair_rows(const config *c, int ep_rank)
{
    double R = (double)routed_rows(c);
    if (c->capacity == 0) return (uint64_t)llround(R * config_ep_share(c, ep_rank));
    int local = config_ep_local_experts(c);
    double cap = ceil(c->capacity * R / c->model.experts), rows = 0;
    for (int e = ep_rank * local; e < (ep_rank + 1) * local; e++)
        rows += fmin(R * expert_share(c, e), cap);
    return (uint64_t)llround(rows);
}

uint64_t config_ep_recv_rows(const config *c, int ep_rank) { return (uint64_t)c->ep * config_ep_pair_rows(c, ep_rank); }

uint64_t config_ep_send_rows(const config *c, int ep_rank)
{
    uint64_t rows = 0;
    for (int j = 0; j < c->ep; j++)
        rows += j == ep_rank ? 0 : config_ep_pair_rows(c, j);
    return rows;
}

uint64_t config_ep_return_rows(const config *c, int ep_rank)
{
    return (uint64_t)(c->ep - 1) * config_ep_pair_rows(c, ep_rank);
}

uint64_t config_ep_expert_rows(const config *c, int ep_rank)
{
    return config_ep_recv_rows(c, ep_rank) * (config_sp(c) ? (uint64_t)config_etp(c) : 1);
}

double config_ep_imbalance(const config *c)
{
    double most = 0, all = 0;
    for (int i = 0; i < c->ep; i++) { /* dropless: the shares themselves, else the rows kept */
        double rows = c->capacity == 0 ? config_ep_share(c, i) : (double)config_ep_pair_rows(c, i);
        most = rows > most ? rows : most;
        all += rows;
    }
    return all > 0 ? most * c->ep / all : 1;
}

/* A uniform draw in [0, 1) for choice j of the token at pos in block
 * layer, from seed: FNV-1a of the four, whose top bits barely move with
 * the last bytes, through SplitMix64's finaliser (Steele et al., OOPSLA
 * 2014), the top 53 bits. */
static double route_uniform(uint64_t seed, int layer, uint64_t pos, int j)
{
    uint64_t h = hash_fnv1a_u64(HASH_FNV1A_BASIS, seed);
    h = hash_fnv1a_u64(hash_fnv1a_u64(hash_fnv1a_u64(h, (uint64_t)layer), pos), (uint64_t)j);
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    return (double)(h >> 11) * 0x1p-53;
}

void config_ep_route(const config *c, uint64_t seed, int layer, uint64_t pos, int *experts)
{
    int E = c->model.experts, k = c->model.top_k;
    if (!config_routing_skewed(c)) {
        for (int j = 0; j < k; j++)
            experts[j] = (int)((pos * (uint64_t)k + (uint64_t)j + (uint64_t)layer) % (uint64_t)E);
        return;
    }
    double left = 1; /* the shares of the experts not drawn yet */
    for (int j = 0; j < k; j++) {
        double u = route_uniform(seed, layer, pos, j) * left, acc = 0;
        int pick = -1;
        for (int e = 0; e < E; e++) {
            bool taken = false;
            for (int i = 0; i < j; i++)
                taken |= experts[i] == e;
            if (taken) continue;
            pick = e; /* the last one left, should rounding leave u past the end */
            acc += expert_share(c, e);
            if (u < acc) break;
        }
        experts[j] = pick;
        left -= expert_share(c, pick);
    }
}

/*
 * plan_user: a layout's name as the plan prints it, and back. `loong plan
 * --layout NAME` reads the user's own layout in the plan's grammar, checks
 * it against the request's fixed flags and scores it beside the search,
 * marked as theirs (plan.h).
 *
 * The grammar, in the order plan_layout_name writes it:
 *   [dpN*][ppN*][tpN*]PHxPS [hf|cf] (no ring | PART RING [w=W])
 *   [kv-repl|no-repl] [tp-ovl|no-sp] [SCHED[V]] [mM] [zZ] [none|sel|full]
 * PART is ct, zz, dct, dzz or bal, RING single, dual, double or ag, SCHED
 * 1f1b, gpipe or il. The parser takes the words after the mesh in any
 * order, each once.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/recompute.h"
#include "core/strategy.h"
#include "core/xalloc.h"
#include "plan.h"

static const char *schedule_abbrev(schedule_kind s)
{
    return s == SCHED_GPIPE ? "gpipe" : s == SCHED_1F1B ? "1f1b" : "il";
}

void plan_layout_name(const plan_request *req, const config *c, char *buf, size_t len)
{
    config_layout_name(c, buf, len);
    size_t k = strlen(buf);
    if (c->pp > 1 || c->micro_batches > 1) { /* the pipeline's schedule and micro-batches */
        if (c->pp > 1) k += (size_t)snprintf(buf + k, len - k, " %s", schedule_abbrev(c->schedule));
        if (c->pp > 1 && c->vpp > 1) k += (size_t)snprintf(buf + k, len - k, "%d", c->vpp);
        k += (size_t)snprintf(buf + k, len - k, " m%d", c->micro_batches);
    }
    if (req->search_zero) k += (size_t)snprintf(buf + k, len - k, " z%d", c->zero);
    if (req->search_recompute) {
        char rc[24];
        recompute_abbrev(c, rc, sizeof rc);
        snprintf(buf + k, len - k, " %s", rc);
    }
}

void plan_layout_init(plan_layout *l, const plan_request *req, const config *c)
{
    memset(l, 0, sizeof *l);
    l->sim_step = -1;
    for (int k = 0; k < PLAN_PERT_COUNT; k++)
        l->robust[k] = -1;
    l->c = *c;
    snprintf(l->c.strategy, sizeof l->c.strategy, "%s", strategy_name_of(c));
    plan_layout_name(req, c, l->name, sizeof l->name);
    if (config_validate(&l->c, l->reason) < 0) l->removed = true;
}

/* ---- parsing ---- */

/* What a name says; -1 (or false) where it says nothing. */
typedef struct said {
    int dp, pp, tp, ep, etp, ph, ps; /* etp 0: tp */
    int place, part, ring, window, repl, sched, vpp, m, zero, rec;
    int rec_mods, rec_method, rec_layers; /* with rec: its modules, or its method and N */
    int sp;                               /* 0: no-sp, 1: tp-ovl */
    bool no_ring;
} said;

#define LAYOUT_FIX "write it as the plan's layout column does, e.g. 'dp4*tp4*4x1 no ring m4 z1 sel'"

/* What is wrong with a name, in a buffer that leaves room for the name. */
#define WHAT_LEN 186

static int bad(char err[LOONG_ERRLEN], const char *name, const char *what)
{
    snprintf(err, LOONG_ERRLEN, "--layout '%.56s': %.185s", name, what);
    return -1;
}

/* A positive decimal integer that is all of s (from its start). */
static bool whole_int(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 1 || v > 1 << 24 || *s < '0' || *s > '9') return false;
    *out = (int)v;
    return true;
}

/* Index of s among the n abbreviations of f, or -1. */
static int abbrev_index(const char *s, int n, const char *(*f)(int))
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, f(i))) return i;
    return -1;
}
static const char *place_ab(int i) { return placement_abbrev((placement_kind)i); }
static const char *part_ab(int i) { return partition_abbrev((partition_kind)i); }
static const char *ring_ab(int i) { return ring_abbrev((ring_kind)i); }

/* A recompute word as recompute_abbrev (core/recompute.h) writes it:
 * none, sel, sel+mlp, sel/mlp, sc++, full, full-bN, full-uN; its policy
 * into *rec and the rest into s. */
static bool recompute_word(const char *t, int *rec, said *s)
{
    static const int mods[] = {RECOMPUTE_MOD_CORE_ATTN, RECOMPUTE_MOD_MLP, RECOMPUTE_MOD_CORE_ATTN | RECOMPUTE_MOD_MLP};
    config c;
    memset(&c, 0, sizeof c);
    char buf[24];
    for (int k = RECOMPUTE_NONE; k <= RECOMPUTE_FULL; k++)
        for (int i = 0; i < 3; i++) {
            recompute_set(&c, (recompute_kind)k);
            c.recompute_modules = mods[i];
            recompute_abbrev(&c, buf, sizeof buf);
            if (strcmp(t, buf)) continue;
            *rec = k, s->rec_mods = mods[i], s->rec_method = RECOMPUTE_UNIFORM, s->rec_layers = 1;
            return true;
        }
    int n;
    if (strncmp(t, "full-", 5) || (t[5] != 'b' && t[5] != 'u') || !whole_int(t + 6, &n)) return false;
    *rec = RECOMPUTE_FULL, s->rec_mods = RECOMPUTE_MOD_CORE_ATTN;
    s->rec_method = t[5] == 'b' ? RECOMPUTE_BLOCK : RECOMPUTE_UNIFORM, s->rec_layers = n;
    return true;
}

/* "[dpN*][ppN*][tpN*][epN*][etpN*]PHxPS" into s. */
static int parse_mesh(const char *name, const char *tok, said *s, char err[LOONG_ERRLEN])
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", tok);
    char *p = buf, *star;
    s->dp = s->pp = s->tp = s->ep = 1;
    s->etp = 0;
    bool seen[5] = {false, false, false, false, false};
    while ((star = strchr(p, '*'))) {
        *star = '\0';
        static const char *const dims[] = {"dp", "pp", "tp", "ep", "etp"};
        int *deg[] = {&s->dp, &s->pp, &s->tp, &s->ep, &s->etp}, d = 0;
        while (d < 5 && strncmp(p, dims[d], strlen(dims[d])))
            d++;
        if (d == 5 || seen[d] || !whole_int(p + strlen(dims[d]), deg[d]))
            return bad(err, name,
                       "its mesh is not [dpN*][ppN*][tpN*][epN*][etpN*]PHxPS (e.g. dp2*tp8*4x2): " LAYOUT_FIX);
        seen[d] = true;
        p = star + 1;
    }
    char *x = strchr(p, 'x');
    if (!x) return bad(err, name, "its first word needs the context mesh PHxPS (e.g. 4x2): " LAYOUT_FIX);
    *x = '\0';
    if (!whole_int(p, &s->ph) || !whole_int(x + 1, &s->ps))
        return bad(err, name, "its mesh is not [dpN*][ppN*][tpN*][epN*][etpN*]PHxPS (e.g. dp2*tp8*4x2): " LAYOUT_FIX);
    return 0;
}

/* Stores v in *slot unless the name said it already. */
static int once(int *slot, int v, const char *name, const char *tok, char err[LOONG_ERRLEN])
{
    if (*slot >= 0) {
        char what[WHAT_LEN];
        snprintf(what, sizeof what, "'%s' says a knob a second time: give each once", tok);
        return bad(err, name, what);
    }
    *slot = v;
    return 0;
}

/* A schedule word: "1f1b", "gpipe", "il", each with an optional degree. */
static bool schedule_word(const char *t, int *sched, int *vpp)
{
    static const char *const words[] = {"1f1b", "gpipe", "il"};
    static const schedule_kind kinds[] = {SCHED_1F1B, SCHED_GPIPE, SCHED_INTERLEAVED};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if (strncmp(t, words[i], n)) continue;
        *sched = (int)kinds[i];
        *vpp = 1;
        return !t[n] || whole_int(t + n, vpp);
    }
    return false;
}

/* The words after the mesh; tok[i + 1] is read by "no ring" and the ring. */
static int parse_words(const char *name, char **tok, int nt, said *s, char err[LOONG_ERRLEN])
{
    for (int i = 1; i < nt; i++) {
        const char *t = tok[i];
        int v, rc, vpp = 1;
        if ((v = abbrev_index(t, 2, place_ab)) >= 0)
            rc = once(&s->place, v, name, t, err);
        else if (!strcmp(t, "no") && i + 1 < nt && !strcmp(tok[i + 1], "ring"))
            rc = once(&s->ring, RING_SINGLE, name, "no ring", err), s->no_ring = true, i++;
        else if ((v = abbrev_index(t, 5, part_ab)) >= 0) {
            rc = once(&s->part, v, name, t, err);
            int r = i + 1 < nt ? abbrev_index(tok[i + 1], 4, ring_ab) : -1;
            if (rc == 0 && r < 0)
                return bad(err, name, "a partition is followed by its ring mode (single, dual, double w=W or ag)");
            if (rc == 0) rc = once(&s->ring, r, name, tok[++i], err);
        } else if (!strncmp(t, "w=", 2) && whole_int(t + 2, &v))
            rc = once(&s->window, v, name, t, err);
        else if (!strcmp(t, "kv-repl") || !strcmp(t, "no-repl"))
            rc = once(&s->repl, t[0] == 'k', name, t, err);
        else if (!strcmp(t, "tp-ovl") || !strcmp(t, "no-sp"))
            rc = once(&s->sp, t[0] == 't', name, t, err);
        else if (schedule_word(t, &v, &vpp)) {
            rc = once(&s->sched, v, name, t, err);
            s->vpp = vpp;
        } else if (t[0] == 'm' && whole_int(t + 1, &v))
            rc = once(&s->m, v, name, t, err);
        else if (t[0] == 'z' && t[1] >= '0' && t[1] <= '3' && !t[2])
            rc = once(&s->zero, t[1] - '0', name, t, err);
        else if (recompute_word(t, &v, s))
            rc = once(&s->rec, v, name, t, err);
        else {
            char what[WHAT_LEN];
            snprintf(what, sizeof what, "'%.40s' is not a word of a layout name: %s", t, LAYOUT_FIX);
            return bad(err, name, what);
        }
        if (rc < 0) return -1;
    }
    return 0;
}

/* The mesh's degrees against the request's GPUs, --dp, --pp and --tp. */
static int check_degrees(const plan_request *req, const char *name, const said *s, char err[LOONG_ERRLEN])
{
    char what[WHAT_LEN];
    long gpus = (long)s->dp * s->pp * s->tp * s->ph * s->ps;
    const int *fixed = req->degree;
    int pp = fixed[MESH_PP] == PLAN_SEARCHED ? s->pp : fixed[MESH_PP];
    if (gpus != req->gpus)
        snprintf(what, sizeof what, "it has dp x pp x tp x P_h x P_s = %ld GPUs, the plan %d: give --gpus %ld", gpus,
                 req->gpus, gpus);
    else if (fixed[MESH_DP] != PLAN_SEARCHED && s->dp != fixed[MESH_DP])
        snprintf(what, sizeof what, "it has dp %d and the request --dp %d: drop --dp (or make them agree)", s->dp,
                 fixed[MESH_DP]);
    else if (s->pp != pp)
        snprintf(what, sizeof what, "it has pp %d and the request %d pipeline stage(s): give --pp %d (or --pp auto)",
                 s->pp, pp, s->pp);
    else if (fixed[MESH_TP] != PLAN_SEARCHED && s->tp != fixed[MESH_TP])
        snprintf(what, sizeof what, "it has tp %d and the request --tp %d: drop --tp (or make them agree)", s->tp,
                 fixed[MESH_TP]);
    else if (fixed[MESH_TP] == PLAN_SEARCHED && req->base.gpus_per_node % s->tp)
        snprintf(what, sizeof what,
                 "tp %d does not divide the %d GPUs per node the plan searches it over: add --tp %d to score it", s->tp,
                 req->base.gpus_per_node, s->tp);
    else
        return 0;
    return bad(err, name, what);
}

/* The ring: "no ring" exactly when P_s = 1; a window with the double ring. */
static int apply_ring(const char *name, const said *s, config *c, char err[LOONG_ERRLEN])
{
    c->partition = PART_ZIGZAG, c->ring = RING_SINGLE, c->window = 1;
    if (s->ps == 1) {
        if (s->part >= 0 || s->window >= 0) return bad(err, name, "P_s is 1, so there is no ring: write 'no ring'");
        return 0;
    }
    if (s->no_ring || s->part < 0)
        return bad(err, name, "P_s exceeds 1: say its partition and ring mode, e.g. 'zz single' or 'ct double w=2'");
    c->partition = (partition_kind)s->part;
    c->ring = (ring_kind)s->ring;
    c->window = c->ring == RING_DOUBLE ? s->window : c->p_seq;
    if (c->ring == RING_DOUBLE && s->window < 0) return bad(err, name, "the double ring needs its window: add w=W");
    if (c->ring != RING_DOUBLE && s->window >= 0) return bad(err, name, "a window w=W goes with the double ring only");
    return 0;
}

/* Placement, KV replication and the TP options: each only where it applies. */
static int apply_mesh_knobs(const plan_request *req, const char *name, const said *s, config *c, char err[LOONG_ERRLEN])
{
    bool both = s->ph > 1 && s->ps > 1;
    if (both && s->place < 0) return bad(err, name, "P_h and P_s both exceed 1: say its placement, hf or cf");
    if (!both && s->place >= 0) return bad(err, name, "a placement (hf, cf) applies when P_h and P_s both exceed 1");
    config_set_placement(c, s->place == PLACE_CONTEXT_FIRST ? PLACE_CONTEXT_FIRST : PLACE_HEAD_FIRST);
    bool needs = c->p_head > config_tp_kv_heads(c) || c->tp > c->model.kv_heads;
    if (!needs && s->repl >= 0)
        return bad(err, name, "KV replication applies when P_h exceeds the KV heads per TP shard");
    c->kv_replication = s->repl != 0; /* on unless the name says no-repl */
    if (c->tp == 1) {
        if (s->sp >= 0) return bad(err, name, "tp-ovl and no-sp apply with tp > 1");
        c->sequence_parallel = true, c->tp_overlap = false;
        return 0;
    }
    bool ovl = s->sp == 1, sp = s->sp != 0;
    if (ovl != req->base.tp_overlap || sp != req->base.sequence_parallel) {
        char what[WHAT_LEN];
        snprintf(what, sizeof what,
                 "it runs TP with sequence parallelism %s and overlap %s, the request with %s and %s: give "
                 "--sequence-parallel %s --tp-overlap %s",
                 sp ? "on" : "off", ovl ? "on" : "off", req->base.sequence_parallel ? "on" : "off",
                 req->base.tp_overlap ? "on" : "off", sp ? "on" : "off", ovl ? "on" : "off");
        return bad(err, name, what);
    }
    return 0;
}

/* Micro-batches from the global batch, and the schedule (pp > 1). */
static int apply_pipeline(const plan_request *req, const char *name, const said *s, config *c, char err[LOONG_ERRLEN])
{
    char what[WHAT_LEN];
    int per = c->dp * c->batch, m = c->micro_batches;
    if (req->global_batch && req->global_batch % per) {
        snprintf(what, sizeof what,
                 "dp %d x --batch %d samples do not split the global batch of %d: give --global-batch a multiple "
                 "of %d",
                 c->dp, c->batch, req->global_batch, per);
        return bad(err, name, what);
    }
    if (req->global_batch) m = req->global_batch / per;
    if (s->m >= 0 && s->m != m) {
        if (req->global_batch)
            snprintf(what, sizeof what,
                     "m%d, but the global batch of %d samples over dp %d x --batch %d is m%d: give --global-batch %d",
                     s->m, req->global_batch, c->dp, c->batch, m, s->m * per);
        else
            snprintf(what, sizeof what, "m%d, the request --micro-batches %d: give --micro-batches %d", s->m, m, s->m);
        return bad(err, name, what);
    }
    c->micro_batches = m;
    if (c->pp == 1) {
        if (s->sched >= 0) return bad(err, name, "a pipeline schedule applies with pp > 1");
        c->schedule = SCHED_1F1B, c->vpp = 1;
        return 0;
    }
    if (req->search_schedule && s->sched < 0) return bad(err, name, "pp exceeds 1: say its schedule, 1f1b or il2");
    if (s->sched < 0) return 0; /* the request's --schedule and --vpp */
    bool searched = (s->sched == SCHED_1F1B && s->vpp == 1) || (s->sched == SCHED_INTERLEAVED && s->vpp == 2);
    if (req->search_schedule ? !searched : (s->sched != (int)c->schedule || s->vpp != c->vpp)) {
        snprintf(what, sizeof what, "schedule %s v %d is not the request's: give --schedule %s --vpp %d",
                 schedule_name((schedule_kind)s->sched), s->vpp, schedule_name((schedule_kind)s->sched), s->vpp);
        return bad(err, name, what);
    }
    c->schedule = (schedule_kind)s->sched, c->vpp = s->vpp;
    return 0;
}

/* ZeRO stage and recompute policy: in the name when searched, else the request's. */
static int apply_training(const plan_request *req, const char *name, const said *s, config *c, char err[LOONG_ERRLEN])
{
    char what[WHAT_LEN];
    if (req->search_zero && s->zero < 0) return bad(err, name, "say its ZeRO stage (z0..z3), or give --zero Z");
    if (!req->search_zero && s->zero >= 0 && s->zero != c->zero) {
        snprintf(what, sizeof what, "z%d, the request --zero %d: give --zero %d", s->zero, c->zero, s->zero);
        return bad(err, name, what);
    }
    if (req->search_recompute && s->rec < 0)
        return bad(err, name, "say its recompute policy (none, sel, sc++, full, ...), or give --recompute");
    if (!req->search_recompute && s->rec >= 0 && s->rec != (int)c->recompute) {
        snprintf(what, sizeof what, "'%s', the request --recompute %s: give --recompute %s",
                 recompute_name((recompute_kind)s->rec), recompute_name(c->recompute),
                 recompute_name((recompute_kind)s->rec));
        return bad(err, name, what);
    }
    int prefetch = c->prefetch;
    if (s->zero >= 0) c->zero = s->zero;
    if (s->rec >= 0) {
        c->recompute = (recompute_kind)s->rec;
        c->recompute_modules = s->rec_mods;
        c->recompute_method = (recompute_method_kind)s->rec_method;
        c->recompute_layers = s->rec_layers;
    }
    c->prefetch = c->zero == 3 ? prefetch : 1; /* --prefetch applies to the ZeRO-3 layouts */
    return 0;
}

int plan_parse_layout(const plan_request *req, const char *name, config *c, char err[LOONG_ERRLEN])
{
    char buf[256];
    if (strlen(name) >= sizeof buf) return bad(err, "...", "too long for a layout name: " LAYOUT_FIX);
    snprintf(buf, sizeof buf, "%s", name);
    char *tok[32], *save = NULL;
    int nt = 0;
    for (char *t = strtok_r(buf, " \t", &save); t && nt < 32; t = strtok_r(NULL, " \t", &save))
        tok[nt++] = t;
    if (nt == 0) return bad(err, name, "empty: " LAYOUT_FIX);
    said s;
    memset(&s, 0xff, sizeof s); /* every int -1 */
    s.no_ring = false;
    if (parse_mesh(name, tok[0], &s, err) < 0 || parse_words(name, tok, nt, &s, err) < 0 ||
        check_degrees(req, name, &s, err) < 0)
        return -1;
    *c = req->base;
    c->scope = SCOPE_STEP;
    c->dp = s.dp, c->pp = s.pp, c->tp = s.tp, c->ep = s.ep, c->etp = s.etp, c->p_head = s.ph, c->p_seq = s.ps;
    if (apply_ring(name, &s, c, err) < 0 || apply_mesh_knobs(req, name, &s, c, err) < 0 ||
        apply_pipeline(req, name, &s, c, err) < 0 || apply_training(req, name, &s, c, err) < 0)
        return -1;
    snprintf(c->strategy, sizeof c->strategy, "%s", strategy_name_of(c));
    return 0;
}

int plan_find_layout(const plan_layout *ls, int n, const plan_request *req, const config *c)
{
    char name[64];
    plan_layout_name(req, c, name, sizeof name);
    for (int i = 0; i < n; i++)
        if (!strcmp(ls[i].name, name) && ls[i].c.micro_batches == c->micro_batches) return i;
    return -1;
}

/* ---- the user's layout beside the search ---- */

/* Its rank among the m ranked idx (1-based), or 0 when it is not ranked. */
static int rank_of(const int *idx, int m, const plan_layout *ls, const plan_layout *u)
{
    for (int k = 0; k < m; k++)
        if (&ls[idx[k]] == u) return k + 1;
    return 0;
}

/* The ranking, the pick and the user's rank: returns the pick (-1: none). */
static int rank_user(const plan_layout *ls, int n, const plan_report *rp, int *rank, int *m)
{
    int *idx = xmalloc_array((size_t)n + 1, sizeof *idx, "the plan's ranking");
    *m = plan_rank(ls, n, idx);
    int pick = *m ? plan_recommend(ls, idx, *m, rp->tie) : -1;
    *rank = rank_of(idx, *m, ls, rp->user);
    free(idx);
    return pick;
}

void plan_write_user(FILE *f, const plan_layout *ls, int n, const plan_request *req, const plan_report *rp)
{
    const plan_layout *u = rp->user;
    if (!u) return;
    const char *added = rp->user_added ? " (not among the searched layouts: scored beside them)" : "";
    if (u->removed) {
        fprintf(f, "# yours (--layout): %s%s is not feasible: %s\n", u->name, added, u->reason);
        return;
    }
    int rank, m, pick = rank_user(ls, n, rp, &rank, &m);
    fprintf(f, "# yours (--layout): %s%s, rank %d of %d (%s)", u->name, added, rank, m, plan_by(u));
    if (pick >= 0 && &ls[pick] == u)
        fprintf(f, ": it is the recommended layout\n");
    else if (pick >= 0)
        fprintf(f, ": %+.2f %% %s against the recommended %s (%s)\n",
                100 * (plan_gpu_seconds(u) / plan_gpu_seconds(&ls[pick]) - 1),
                req->global_batch ? "time per global batch" : "GPU-seconds per sample", ls[pick].name,
                plan_by(&ls[pick]));
    else
        fputc('\n', f);
}

struct json_t *plan_user_json(const plan_layout *ls, int n, const plan_report *rp)
{
    const plan_layout *u = rp->user;
    if (!u) return json_null();
    int rank = 0, m = 0, pick = u->removed ? -1 : rank_user(ls, n, rp, &rank, &m);
    json_t *j = json_pack("{s:s, s:b, s:b}", "layout", u->name, "in_search", !rp->user_added, "feasible", !u->removed);
    json_object_set_new(j, "reason", u->removed ? json_string(u->reason) : json_null());
    json_object_set_new(j, "rank", rank ? json_integer(rank) : json_null());
    json_object_set_new(j, "of", json_integer(m));
    json_object_set_new(j, "by", u->removed ? json_null() : json_string(plan_by(u)));
    json_object_set_new(j, "step_s", u->removed ? json_null() : json_real(plan_step(u)));
    json_object_set_new(j, "gpu_seconds_per_sample", u->removed ? json_null() : json_real(plan_gpu_seconds(u)));
    json_object_set_new(j, "recommended", pick >= 0 ? json_string(ls[pick].name) : json_null());
    /* the ranking key's gap to the pick: + when the user's layout is slower */
    json_object_set_new(j, "gap_pct",
                        pick >= 0 ? json_real(100 * (plan_gpu_seconds(u) / plan_gpu_seconds(&ls[pick]) - 1))
                                  : json_null());
    if (rp->commands && rp->commands[u - ls]) json_object_set_new(j, "command", json_string(rp->commands[u - ls]));
    return j;
}

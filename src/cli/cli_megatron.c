/*
 * cli_megatron: Megatron-LM's launch arguments in and out.
 *
 * In: `--megatron-args FILE|-` reads the arguments of a pretrain_gpt.py
 * launch (as the .sh scripts of Megatron's examples write them: whitespace, newlines,
 * backslash continuations, '#' comments, torchrun's own options beside) and
 * turns them into configuration knobs, as if given on the command line. An
 * argument that changes nothing in loong is named on one "read, not
 * modelled" stderr line; a contradiction is an error naming both.
 *
 * Out: cli_megatron_emit writes the arguments that run a configuration, in
 * the same form, so that reading them back gives the same configuration.
 *
 * Meanings: megatron/training/arguments.py (Megatron-LM core_r0.12) and
 * Megatron-Core's parallel_state.RankGenerator (the order tp-cp-ep-dp-pp,
 * or tp-cp-ep-pp-dp under --use-tp-pp-dp-mapping).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/infile.h"
#include "core/recompute.h"
#include "core/xalloc.h"
#include "cli.h"

#define MG_MAX_ARGS 512
#define MG_MAX_VALS 8

/* One option as written: its name without "--" and its values. */
typedef struct mg_arg {
    char *name;
    char *val[MG_MAX_VALS];
    int nval;
    bool used; /* modelled (or consumed by another's translation) */
} mg_arg;

typedef struct mg_args {
    mg_arg a[MG_MAX_ARGS];
    int n;
    char skipped[512]; /* positional words and unmodelled arguments, for the note */
} mg_args;

/* The strings the knobs point at: they live as long as the process (each
 * process reads one launch). */
static char pool[16384];
static size_t pool_used;

static const char *keep(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(pool + pool_used, sizeof pool - pool_used, fmt, ap);
    va_end(ap);
    if (n < 0 || pool_used + (size_t)n + 1 > sizeof pool) return "";
    const char *s = pool + pool_used;
    pool_used += (size_t)n + 1;
    return s;
}

/* Split text into words: white space and backslash-newline separate, '#'
 * starts a comment at the start of a word, quotes group. Words are
 * pointers into text, which is modified. Returns the count. */
static int split_words(char *text, char **w, int cap)
{
    int n = 0;
    char *p = text;
    while (*p && n < cap) {
        while (*p && (isspace((unsigned char)*p) || (*p == '\\' && (p[1] == '\n' || p[1] == '\r'))))
            p++;
        if (!*p) break;
        if (*p == '#') {
            p += strcspn(p, "\n");
            continue;
        }
        char q = (*p == '"' || *p == '\'') ? *p++ : 0;
        w[n++] = p;
        while (*p && (q ? *p != q : !isspace((unsigned char)*p)))
            p++;
        if (*p) *p++ = '\0';
    }
    return n;
}

static void note(mg_args *g, const char *what)
{
    size_t n = strlen(g->skipped);
    if (n + strlen(what) + 6 < sizeof g->skipped)
        snprintf(g->skipped + n, sizeof g->skipped - n, "%s%s", n ? ", " : "", what);
    else if (n + 5 < sizeof g->skipped && !strstr(g->skipped, "..."))
        snprintf(g->skipped + n, sizeof g->skipped - n, ", ...");
}

/* Group the words into options and their values (`--x=v` too); '_' in a
 * name reads as '-' (torchrun's --nproc_per_node). */
static int group_args(char **w, int n, mg_args *g, char err[LOONG_ERRLEN])
{
    g->n = 0;
    for (int i = 0; i < n; i++) {
        if (strncmp(w[i], "--", 2) || !w[i][2]) {
            const char *b = strrchr(w[i], '/');
            b = b ? b + 1 : w[i];
            size_t l = strlen(b);
            bool launcher = !strcmp(b, "torchrun") || !strncmp(b, "python", 6) || (l > 3 && !strcmp(b + l - 3, ".py"));
            if (!launcher) note(g, keep("'%.40s'", w[i]));
            continue;
        }
        if (g->n == MG_MAX_ARGS) {
            snprintf(err, LOONG_ERRLEN, "--megatron-args: more than %d options", MG_MAX_ARGS);
            return -1;
        }
        mg_arg *a = &g->a[g->n++];
        memset(a, 0, sizeof *a);
        a->name = w[i] + 2;
        char *eq = strchr(a->name, '=');
        if (eq) *eq = '\0', a->val[a->nval++] = eq + 1;
        for (char *p = a->name; *p; p++)
            if (*p == '_') *p = '-';
        while (!eq && i + 1 < n && strncmp(w[i + 1], "--", 2) && a->nval < MG_MAX_VALS)
            a->val[a->nval++] = w[++i];
    }
    return 0;
}

static mg_arg *find(mg_args *g, const char *name)
{
    mg_arg *last = NULL;
    for (int i = 0; i < g->n; i++)
        if (!strcmp(g->a[i].name, name)) last = &g->a[i]; /* argparse: the last one wins */
    for (int i = 0; last && i < g->n; i++)
        if (!strcmp(g->a[i].name, name)) g->a[i].used = true;
    return last;
}

/* The integer value of option name (a count >= 0), or dflt when absent. */
static int int_arg(mg_args *g, const char *name, int dflt, int *out, char err[LOONG_ERRLEN])
{
    mg_arg *a = find(g, name);
    *out = dflt;
    if (!a) return 0;
    if (a->nval < 1) {
        snprintf(err, LOONG_ERRLEN, "--megatron-args: --%s needs a value", name);
        return -1;
    }
    if (a->val[0][0] == '$') {
        snprintf(err, LOONG_ERRLEN, "--megatron-args: --%s %.40s is a shell variable: give its value", name, a->val[0]);
        return -1;
    }
    char *end;
    long v = strtol(a->val[0], &end, 10);
    if (*end || v < 0 || v > (1L << 30)) {
        snprintf(err, LOONG_ERRLEN, "--megatron-args: --%s %.40s is not a count", name, a->val[0]);
        return -1;
    }
    *out = (int)v;
    for (int i = 1; i < a->nval; i++) /* words after the value: positional ones */
        if (!strstr(a->val[i], ".py")) note(g, keep("'%.40s'", a->val[i]));
    return 0;
}

static const char *str_arg(mg_args *g, const char *name)
{
    mg_arg *a = find(g, name);
    return a && a->nval ? a->val[0] : NULL;
}

static bool flag(mg_args *g, const char *name) { return find(g, name) != NULL; }

/* ---- --moe-layer-freq: an int N (experts in blocks l % N == 0) or a
 * Python list expression Megatron evaluates (arguments.py's
 * moe_freq_type): lists of 0 and 1, `+` to concatenate, `* N` to repeat,
 * parentheses to group, e.g. "([0]*3+[1]*58)" or "[0,1]*24". ---- */

typedef struct pylist {
    const char *s; /* what is left to read */
    unsigned char *out;
    int n, max; /* entries written, and room (more is an error) */
    bool ok, over;
} pylist;

static void py_space(pylist *p)
{
    while (isspace((unsigned char)*p->s))
        p->s++;
}

static bool py_eat(pylist *p, char ch)
{
    py_space(p);
    if (*p->s != ch) return false;
    p->s++;
    return true;
}

static int py_int(pylist *p)
{
    py_space(p);
    char *end;
    long v = strtol(p->s, &end, 10);
    if (end == p->s || v < 0 || v > 100000) return p->ok = false, 0;
    p->s = end;
    return (int)v;
}

static void py_put(pylist *p, unsigned char v)
{
    if (p->n >= p->max) p->ok = false, p->over = true;
    if (p->ok) p->out[p->n++] = v;
}

/* Repeat the entries from `from` on, times copies in all. */
static void py_repeat(pylist *p, int from, int times)
{
    int len = p->n - from;
    if (times == 0) p->n = from;
    for (int t = 1; p->ok && t < times; t++)
        for (int i = 0; p->ok && i < len; i++)
            py_put(p, p->out[from + i]);
}

static void py_expr(pylist *p);

/* atom (* N)*, or N * atom */
static void py_term(pylist *p)
{
    int from = p->n, times = 1;
    py_space(p);
    if (isdigit((unsigned char)*p->s)) {
        times = py_int(p);
        if (!py_eat(p, '*')) p->ok = false;
    }
    if (py_eat(p, '(')) {
        py_expr(p);
        if (!py_eat(p, ')')) p->ok = false;
    } else if (py_eat(p, '[')) {
        do {
            int v = py_int(p);
            py_put(p, (unsigned char)v);
            if (v > 1) p->ok = false;
        } while (p->ok && py_eat(p, ','));
        if (!py_eat(p, ']')) p->ok = false;
    } else {
        p->ok = false;
    }
    while (p->ok && py_eat(p, '*')) {
        long more = (long)times * py_int(p);
        if (more > 100000) p->ok = false, p->over = true; /* more entries than any model has layers */
        times = (int)more;
    }
    if (p->ok) py_repeat(p, from, times);
}

static void py_expr(pylist *p)
{
    do
        py_term(p);
    while (p->ok && py_eat(p, '+'));
}

/* The dense leading blocks K, the period N and phase of a per-block
 * pattern (1: experts): blocks l >= K with l % N == phase, phase 0 or
 * N - 1 (model.h). False when no such triple gives it. */
static bool pattern_to_model(const unsigned char *pat, int layers, model *m)
{
    for (int N = 1; N <= layers; N++) {
        int phases[2] = {0, N - 1};
        for (int i = 0; i < (N > 1 ? 2 : 1); i++) {
            int phase = phases[i];
            int last_bad = -1; /* the last block the periodic rule gets wrong */
            for (int l = 0; l < layers; l++)
                if (pat[l] != (N == 1 || l % N == phase)) last_bad = l;
            int K = last_bad + 1, l = 0;
            while (l < K && !pat[l])
                l++;
            if (l < K) continue; /* a block before K has experts */
            m->dense_layers = K, m->moe_freq = N > 1 ? N : 0, m->moe_phase = N > 1 ? phase : 0;
            return true;
        }
    }
    return false;
}

static int read_layer_freq(mg_args *g, model *m, char err[LOONG_ERRLEN])
{
    const char *s = str_arg(g, "moe-layer-freq");
    m->dense_layers = m->moe_freq = m->moe_phase = 0;
    if (!s) return 0;
    char *end;
    long n = strtol(s, &end, 10);
    if (end != s && !*end && n >= 1 && n <= m->layers) { /* Megatron: experts in blocks l % N == 0 */
        m->moe_freq = n > 1 ? (int)n : 0;
        return 0;
    }
    unsigned char *pat = xmalloc_array((size_t)m->layers + 1, 1, "the --moe-layer-freq pattern");
    size_t len = strlen(s);
    bool quoted =
        len >= 2 && (s[0] == '\'' || s[0] == '"') && s[len - 1] == s[0]; /* "'([1]*48)'", as slime writes it */
    pylist p = {s + quoted, pat, 0, m->layers, true, false};
    py_expr(&p);
    py_space(&p);
    if (quoted && *p.s == s[0]) p.s++;
    bool ok = p.ok && !*p.s && p.n == m->layers;
    const char *why = p.over || (p.ok && !*p.s && p.n != m->layers) ? "does not have one entry per layer"
                      : !ok ? "is not a list of 0 and 1 written with [ ], +, * and ( )"
                            : "is not K dense blocks, then experts in every N-th block counted from the first or the "
                              "N-th";
    ok = ok && pattern_to_model(pat, m->layers, m);
    free(pat);
    if (ok) return 0;
    snprintf(err, LOONG_ERRLEN,
             "--megatron-args: --moe-layer-freq %.40s %s (--num-layers %d): give N or a pattern "
             "such as ([0]*3+[1]*58)",
             s, why, m->layers);
    return -1;
}

/* A mixture of experts' arguments (megatron/training/arguments.py's MoE
 * group, their defaults: top-k 2, the expert width --ffn-hidden-size). */
static int read_experts(mg_args *g, model *m, char err[LOONG_ERRLEN])
{
    if (int_arg(g, "num-experts", 0, &m->experts, err) < 0) return -1;
    if (!m->experts) return 0;
    if (int_arg(g, "moe-router-topk", 2, &m->top_k, err) < 0 ||
        int_arg(g, "moe-ffn-hidden-size", m->ffn, &m->expert_ffn, err) < 0 ||
        int_arg(g, "moe-shared-expert-intermediate-size", 0, &m->shared_ffn, err) < 0 || read_layer_freq(g, m, err) < 0)
        return -1;
    (void)flag(g, "moe-grouped-gemm");                       /* loong's experts run as grouped GEMMs */
    const char *d = str_arg(g, "moe-token-dispatcher-type"); /* alltoall and allgather: read_rest */
    if (d && strcmp(d, "alltoall") && strcmp(d, "allgather"))
        note(g, keep("--moe-token-dispatcher-type %.20s (costed as alltoall)", d));
    return 0;
}

/* Multi-latent attention (--multi-latent-attention; MLATransformerConfig's
 * defaults: kv_lora_rank 512, qk_head_dim 128, qk_pos_emb_head_dim 64,
 * v_head_dim 128, no q_lora_rank). */
static int read_mla(mg_args *g, model *m, char err[LOONG_ERRLEN])
{
    if (!flag(g, "multi-latent-attention")) return 0;
    if (int_arg(g, "q-lora-rank", 0, &m->q_lora, err) < 0 || int_arg(g, "kv-lora-rank", 512, &m->kv_lora, err) < 0 ||
        int_arg(g, "qk-head-dim", 128, &m->qk_nope, err) < 0 ||
        int_arg(g, "qk-pos-emb-head-dim", 64, &m->qk_rope, err) < 0 ||
        int_arg(g, "v-head-dim", 128, &m->v_dim, err) < 0)
        return -1;
    long long mean = ((long long)m->qk_nope + m->qk_rope + m->v_dim) / 2;
    m->head_dim = mean <= 1 << 16 ? (int)mean : -1; /* model_validate names the widths out of range */
    m->kv_heads = m->heads;
    return 0;
}

/* The model of the launch: --num-layers, --hidden-size, ... Returns 1 when
 * it gives one, 0 when it gives none of the shape options, -1 on error. */
static int read_model(mg_args *g, int tp, model *m, char err[LOONG_ERRLEN])
{
    static const char *const shape[] = {"num-layers", "hidden-size", "num-attention-heads"};
    int given = 0;
    for (int i = 0; i < 3; i++)
        given += find(g, shape[i]) != NULL;
    if (!given) return 0;
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "megatron");
    int groups = 0, ffn = 0, vocab = 0, padded = 0, div = 128;
    if (int_arg(g, "num-layers", 0, &m->layers, err) < 0 || int_arg(g, "hidden-size", 0, &m->hidden, err) < 0 ||
        int_arg(g, "num-attention-heads", 0, &m->heads, err) < 0 || int_arg(g, "ffn-hidden-size", 0, &ffn, err) < 0 ||
        int_arg(g, "num-query-groups", 0, &groups, err) < 0 || int_arg(g, "vocab-size", 0, &vocab, err) < 0 ||
        int_arg(g, "padded-vocab-size", 0, &padded, err) < 0 ||
        int_arg(g, "make-vocab-size-divisible-by", 128, &div, err) < 0)
        return -1;
    if (!m->layers || !m->hidden || !m->heads) {
        snprintf(err, LOONG_ERRLEN,
                 "--megatron-args: give all of --num-layers, --hidden-size and --num-attention-heads (or none, and "
                 "--model)");
        return -1;
    }
    bool gqa = flag(g, "group-query-attention");
    if (groups && !gqa) {
        snprintf(err, LOONG_ERRLEN,
                 "--megatron-args: --num-query-groups %d without --group-query-attention: Megatron ignores it and runs "
                 "MHA; add --group-query-attention or drop --num-query-groups",
                 groups);
        return -1;
    }
    m->kv_heads = gqa && groups ? groups : m->heads;
    if (int_arg(g, "kv-channels", m->hidden / m->heads, &m->head_dim, err) < 0) return -1;
    if (!ffn) ffn = m->hidden <= 1 << 24 ? 4 * m->hidden : -1; /* hidden may be up to 2^30 here: validation refuses */
    /* loong's block is SwiGLU (3 matrices); Megatron's default MLP is GeLU
     * with 2 of h x ffn: ffn' = 2 ffn / 3 keeps its weights and FLOPs */
    if (flag(g, "swiglu"))
        m->ffn = ffn;
    else {
        m->ffn = (2 * ffn + 1) / 3;
        note(g, "the GeLU MLP (no --swiglu: costed as SwiGLU with ffn 2/3)");
    }
    if (!padded && !vocab) {
        const char *tok = str_arg(g, "tokenizer-type");
        if (!tok || strcmp(tok, "GPT2BPETokenizer")) {
            snprintf(err, LOONG_ERRLEN,
                     "--megatron-args: no --vocab-size, and loong cannot read the tokenizer%s%s: give --vocab-size",
                     tok ? " " : "", tok ? tok : "");
            return -1;
        }
        vocab = 50257; /* GPT-2's BPE vocabulary */
    }
    /* Megatron pads to a multiple of make-vocab-size-divisible-by x tp;
     * loong pads each shard itself (ceil(V/tp)), so divisor 1 keeps V */
    int mult = div > 1 ? div * tp : 1;
    m->vocab = padded ? padded : (vocab + mult - 1) / mult * mult;
    m->tied = !flag(g, "untie-embeddings-and-output-weights");
    bool nobias = flag(g, "disable-bias-linear"), qkv = flag(g, "add-qkv-bias");
    m->bias = !nobias ? MODEL_BIAS_ALL : qkv ? MODEL_BIAS_QKV : MODEL_BIAS_NONE;
    if (!nobias) note(g, "the MLP's linear biases (no --disable-bias-linear)");
    if (read_experts(g, m, err) < 0 || read_mla(g, m, err) < 0) return -1;
    return model_validate(m, err) < 0 ? -1 : 1;
}

/* --context-parallel-size and --cp-comm-type as mesh and strategy. */
static int read_cp(mg_args *g, cli_config *out, char err[LOONG_ERRLEN])
{
    int cp;
    if (int_arg(g, "context-parallel-size", 1, &cp, err) < 0) return -1;
    mg_arg *t = find(g, "cp-comm-type"), *h = find(g, "hierarchical-context-parallel-sizes");
    const char *type = t && t->nval ? t->val[0] : "p2p";
    for (int i = 1; t && i < t->nval; i++) /* one per layer in Megatron: loong takes one for all */
        if (strcmp(t->val[i], type)) {
            snprintf(err, LOONG_ERRLEN,
                     "--megatron-args: --cp-comm-type differs between layers (%s, %s): loong runs "
                     "one for all layers",
                     type, t->val[i]);
            return -1;
        }
    bool hier = !strcmp(type, "a2a+p2p");
    if (hier != (h != NULL)) {
        snprintf(err, LOONG_ERRLEN,
                 hier ? "--megatron-args: --cp-comm-type a2a+p2p needs --hierarchical-context-parallel-sizes A P "
                        "(without it Megatron-Bridge #2667 ran without context parallelism): give both"
                      : "--megatron-args: --hierarchical-context-parallel-sizes is for --cp-comm-type a2a+p2p, not %s: "
                        "give both or neither",
                 type);
        return -1;
    }
    if (hier) {
        int a = h->nval == 2 ? atoi(h->val[0]) : 0, p = h->nval == 2 ? atoi(h->val[1]) : 0;
        if (a < 1 || p < 1 || a * p != cp) {
            snprintf(err, LOONG_ERRLEN,
                     "--megatron-args: --hierarchical-context-parallel-sizes must be two sizes whose product is "
                     "--context-parallel-size %d",
                     cp);
            return -1;
        }
        out->val[KNOB_MESH] = keep("%dx%d", a, p);
        out->val[KNOB_STRATEGY] = "usp";
        return 0;
    }
    if (!strcmp(type, "p2p")) {
        out->val[KNOB_MESH] = keep("1x%d", cp);
        out->val[KNOB_STRATEGY] = cp > 1 ? "zigzag" : "ulysses";
    } else if (!strcmp(type, "a2a")) {
        out->val[KNOB_MESH] = keep("%dx1", cp);
        out->val[KNOB_STRATEGY] = "ulysses";
    } else if (!strcmp(type, "all_gather") || !strcmp(type, "allgather")) {
        out->val[KNOB_MESH] = keep("1x%d", cp);
        out->val[KNOB_STRATEGY] = "allgather";
    } else {
        snprintf(err, LOONG_ERRLEN, "--megatron-args: --cp-comm-type %.40s: use p2p, a2a, all_gather or a2a+p2p", type);
        return -1;
    }
    return 0;
}

/* Recompute: granularity, method, layers, modules. */
static int read_recompute(mg_args *g, cli_config *out, char err[LOONG_ERRLEN])
{
    const char *gran = str_arg(g, "recompute-granularity");
    if (!gran && flag(g, "recompute-activations")) gran = "selective";
    if (!gran) {
        out->val[KNOB_RECOMPUTE] = "none";
        return 0;
    }
    if (strcmp(gran, "full") && strcmp(gran, "selective")) {
        snprintf(err, LOONG_ERRLEN, "--megatron-args: --recompute-granularity %.40s: use full or selective", gran);
        return -1;
    }
    out->val[KNOB_RECOMPUTE] = gran;
    if (!strcmp(gran, "full")) {
        const char *method = str_arg(g, "recompute-method");
        int n;
        if (int_arg(g, "recompute-num-layers", 1, &n, err) < 0) return -1;
        out->val[KNOB_RECOMPUTE_METHOD] = method ? method : "uniform";
        out->val[KNOB_RECOMPUTE_NUM_LAYERS] = keep("%d", n);
        return 0;
    }
    mg_arg *mods = find(g, "recompute-modules");
    if (!mods) return 0; /* Megatron's default: core_attn, loong's too */
    char list[128] = "";
    for (int i = 0; i < mods->nval; i++) {
        int bit;
        char why[LOONG_ERRLEN];
        if (recompute_modules_parse(mods->val[i], &bit, why) < 0) {
            note(g, keep("--recompute-modules %.30s", mods->val[i]));
            continue;
        }
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s%s", l ? "," : "", mods->val[i]);
    }
    if (!list[0]) {
        snprintf(err, LOONG_ERRLEN, "--megatron-args: --recompute-modules names none of core_attn, mlp");
        return -1;
    }
    out->val[KNOB_RECOMPUTE_MODULES] = keep("%s", list);
    return 0;
}

/* Pipeline: stages, virtual stages, uneven first/last stages. */
static int read_pipeline(mg_args *g, int layers, cli_config *out, char err[LOONG_ERRLEN])
{
    int pp, vpp = 0, per = 0, first, last;
    if (int_arg(g, "pipeline-model-parallel-size", 1, &pp, err) < 0 ||
        int_arg(g, "virtual-pipeline-model-parallel-size", 0, &vpp, err) < 0 ||
        int_arg(g, "num-layers-per-virtual-pipeline-stage", 0, &per, err) < 0 ||
        int_arg(g, "decoder-first-pipeline-num-layers", 0, &first, err) < 0 ||
        int_arg(g, "decoder-last-pipeline-num-layers", 0, &last, err) < 0)
        return -1;
    int v2;
    if (int_arg(g, "num-virtual-stages-per-pipeline-rank", 0, &v2, err) < 0) return -1;
    if (v2) vpp = v2;
    if (per && vpp) {
        snprintf(err, LOONG_ERRLEN,
                 "--megatron-args: give --num-layers-per-virtual-pipeline-stage or "
                 "--virtual-pipeline-model-parallel-size, not both");
        return -1;
    }
    if (per) {
        if (!layers || layers % (pp * per)) {
            snprintf(err, LOONG_ERRLEN,
                     "--megatron-args: --num-layers-per-virtual-pipeline-stage %d does not divide --num-layers %d "
                     "over --pipeline-model-parallel-size %d",
                     per, layers, pp);
            return -1;
        }
        vpp = layers / (pp * per);
    }
    out->val[KNOB_PP] = keep("%d", pp);
    if (vpp > 1) out->val[KNOB_SCHEDULE] = "interleaved", out->val[KNOB_VPP] = keep("%d", vpp);
    if (first) out->val[KNOB_PP_FIRST_LAYERS] = keep("%d", first);
    if (last) out->val[KNOB_PP_LAST_LAYERS] = keep("%d", last);
    if (flag(g, "account-for-embedding-in-pipeline-split")) out->val[KNOB_PP_EMBED_SLOT] = "on";
    if (flag(g, "account-for-loss-in-pipeline-split")) out->val[KNOB_PP_LOSS_SLOT] = "on";
    return 0;
}

/* Options that loong reads as they are, without their own translation:
 * torchrun's world, and flags whose meaning is loong's already. */
static void read_plain(mg_args *g)
{
    static const char *const modelled[] = {"use-mcore-models",        "use-flash-attn", "transformer-impl",
                                           "position-embedding-type", "normalization",  "max-position-embeddings",
                                           "tokenizer-type",          "nnodes",         "nproc-per-node"};
    for (size_t i = 0; i < sizeof modelled / sizeof *modelled; i++)
        (void)find(g, modelled[i]);
}

/* Attention and dropout: --attention-backend unfused or local (Megatron's
 * own DotProductAttention) materialise the scores; flash, fused (cuDNN's
 * fused attention) and auto do not. The dropouts default to Megatron's
 * 0.1 (megatron/training/arguments.py, _add_regularization_args) when the
 * launch does not give them. */
static void read_attention(mg_args *g, cli_config *out)
{
    const char *backend = str_arg(g, "attention-backend");
    if (backend && (!strcmp(backend, "unfused") || !strcmp(backend, "local"))) out->val[KNOB_ATTENTION] = "unfused";
    if (backend && strcmp(backend, "unfused") && strcmp(backend, "local") && strcmp(backend, "flash") &&
        strcmp(backend, "auto") && strcmp(backend, "fused"))
        note(g, keep("--attention-backend %.20s (costed as FlashAttention)", backend));
    const char *p = str_arg(g, "attention-dropout"), *h = str_arg(g, "hidden-dropout");
    out->val[KNOB_ATTENTION_DROPOUT] = p ? p : "0.1";
    out->val[KNOB_HIDDEN_DROPOUT] = h ? h : "0.1";
}

/* FP8: --fp8-format (e4m3 or hybrid: the GEMMs in FP8 either way) with
 * --fp8-recipe delayed (Megatron's default), tensorwise (current
 * scaling) or mxfp8; blockwise is costed as current scaling, said. */
static int read_fp8(mg_args *g, cli_config *out, char err[LOONG_ERRLEN])
{
    const char *fmt = str_arg(g, "fp8-format"), *recipe = str_arg(g, "fp8-recipe");
    if (!fmt) {
        if (recipe) note(g, keep("--fp8-recipe %.20s (without --fp8-format: bf16)", recipe));
        return 0;
    }
    if (strcmp(fmt, "e4m3") && strcmp(fmt, "hybrid")) {
        snprintf(err, LOONG_ERRLEN, "--megatron-args: --fp8-format '%.20s' is not e4m3 or hybrid", fmt);
        return -1;
    }
    if (!recipe || !strcmp(recipe, "delayed"))
        out->val[KNOB_PRECISION] = "fp8-delayed";
    else if (!strcmp(recipe, "tensorwise"))
        out->val[KNOB_PRECISION] = "fp8-current";
    else if (!strcmp(recipe, "mxfp8"))
        out->val[KNOB_PRECISION] = "mxfp8";
    else if (!strcmp(recipe, "blockwise"))
        out->val[KNOB_PRECISION] = "fp8-current", note(g, "--fp8-recipe blockwise (costed as tensorwise)");
    else {
        snprintf(err, LOONG_ERRLEN,
                 "--megatron-args: --fp8-recipe '%.20s' is not delayed, tensorwise, mxfp8 or blockwise", recipe);
        return -1;
    }
    return 0;
}

/* The world of torchrun's --nnodes x --nproc-per-node, 0 when absent. */
static int read_world(mg_args *g, cli_config *out, int *world, char err[LOONG_ERRLEN])
{
    int nodes, per;
    if (int_arg(g, "nnodes", 0, &nodes, err) < 0 || int_arg(g, "nproc-per-node", 0, &per, err) < 0) return -1;
    if (per) out->val[KNOB_GPUS_PER_NODE] = keep("%d", per);
    *world = nodes && per ? nodes * per : 0;
    return 0;
}

/* Data parallelism and the batch: dp from the world (or --dp), micro-batches
 * from --global-batch-size. */
static int read_batch(mg_args *g, const cli_config *given, int ranks, int world, cli_config *out,
                      char err[LOONG_ERRLEN])
{
    int mbs, gbs, dp = 1;
    if (int_arg(g, "micro-batch-size", 1, &mbs, err) < 0 || int_arg(g, "global-batch-size", 0, &gbs, err) < 0)
        return -1;
    if (given->val[KNOB_DP])
        dp = atoi(given->val[KNOB_DP]);
    else if (world) {
        if (world % ranks) {
            snprintf(err, LOONG_ERRLEN,
                     "--megatron-args: torchrun's %d GPUs are not a multiple of tp x cp x pp = %d: fix --nnodes or "
                     "the parallel sizes",
                     world, ranks);
            return -1;
        }
        dp = world / ranks;
    }
    out->val[KNOB_BATCH] = keep("%d", mbs);
    out->val[KNOB_DP] = keep("%d", dp);
    if (gbs) {
        if (dp < 1 || mbs < 1 || gbs % (mbs * dp)) {
            snprintf(err, LOONG_ERRLEN,
                     "--megatron-args: --global-batch-size %d is not a multiple of --micro-batch-size %d x %d "
                     "data-parallel replicas",
                     gbs, mbs, dp);
            return -1;
        }
        out->val[KNOB_MICRO_BATCHES] = keep("%d", gbs / (mbs * dp));
    }
    return 0;
}

/* Everything else with a loong knob: tp, sp, overlap, seq, precision,
 * optimizer sharding, rank order. */
static int read_rest(mg_args *g, int tp, cli_config *out, char err[LOONG_ERRLEN])
{
    int seq;
    out->val[KNOB_TP] = keep("%d", tp);
    bool sp = flag(g, "sequence-parallel");
    if (sp && tp == 1) note(g, "--sequence-parallel (TP 1: Megatron turns it off)");
    if (tp > 1) out->val[KNOB_SEQUENCE_PARALLEL] = sp ? "on" : "off"; /* Megatron's default: off */
    if (flag(g, "tp-comm-overlap")) out->val[KNOB_TP_OVERLAP] = "on";
    if (int_arg(g, "seq-length", 0, &seq, err) < 0) return -1;
    if (seq) out->val[KNOB_SEQ] = keep("%d", seq);
    bool bf16 = flag(g, "bf16"), fp16 = flag(g, "fp16");
    if (bf16 && fp16) {
        snprintf(err, LOONG_ERRLEN, "--megatron-args: --bf16 and --fp16 both given: give one");
        return -1;
    }
    if (fp16) note(g, "--fp16 (costed as bf16: the same bytes and tensor-core rate)");
    out->val[KNOB_DTYPE] = bf16 || fp16 ? "bf16" : "fp32";
    if (flag(g, "grad-reduce-in-bf16")) out->val[KNOB_GRAD_REDUCE] = "bf16"; /* else fp32: arguments.py for bf16 */
    out->val[KNOB_ZERO] = flag(g, "use-distributed-optimizer") ? "1" : "0";
    (void)flag(g, "use-tp-pp-dp-mapping"); /* the order: cli_megatron_read */
    int ep, etp;
    if (int_arg(g, "expert-model-parallel-size", 1, &ep, err) < 0 ||
        int_arg(g, "expert-tensor-parallel-size", tp, &etp, err) < 0)
        return -1;
    if (ep > 1) out->val[KNOB_EP] = keep("%d", ep);
    if (etp != tp) out->val[KNOB_EXPERT_TP] = keep("%d", etp); /* config_validate: it divides tp */
    if (flag(g, "moe-shared-expert-overlap")) out->val[KNOB_SHARED_EXPERT_OVERLAP] = "on";
    int experts; /* the dispatcher: Megatron's default is allgather (arguments.py) */
    const char *d = str_arg(g, "moe-token-dispatcher-type");
    if (int_arg(g, "num-experts", 0, &experts, err) < 0) return -1;
    if (experts && (!d || !strcmp(d, "allgather"))) out->val[KNOB_DISPATCHER] = "allgather";
    const char *cf = str_arg(g, "moe-expert-capacity-factor");
    if (cf) out->val[KNOB_CAPACITY] = cf; /* its parser checks it */
    if (flag(g, "moe-pad-expert-input-to-capacity"))
        note(g, "--moe-pad-expert-input-to-capacity (costed without the padding: the rows kept)");
    return 0;
}

int cli_megatron_read(const char *path, const cli_config *given, cli_config *out, model *m, bool *has_model,
                      char err[LOONG_ERRLEN])
{
    /* the words point into text, and some knobs at them: it is held (one
     * launch per process) */
    static char *text;
    free(text);
    text = cli_read_text(path, "--megatron-args", err);
    if (!text) return -1;
    static char *words[4 * MG_MAX_ARGS];
    static mg_args g;
    memset(&g, 0, sizeof g);
    memset(out, 0, sizeof *out);
    int n = split_words(text, words, 4 * MG_MAX_ARGS), tp, cp = 1, pp = 1, world = 0;
    int rc = group_args(words, n, &g, err);
    if (rc == 0) rc = int_arg(&g, "tensor-model-parallel-size", 1, &tp, err);
    if (rc == 0) rc = read_cp(&g, out, err);
    if (rc == 0) {
        int r = read_model(&g, tp, m, err);
        rc = r < 0 ? -1 : 0;
        *has_model = r > 0;
    }
    if (rc == 0) rc = read_pipeline(&g, *has_model ? m->layers : 0, out, err);
    if (rc == 0) rc = read_recompute(&g, out, err);
    if (rc == 0) rc = read_rest(&g, tp, out, err);
    if (rc == 0) rc = read_world(&g, out, &world, err);
    if (rc == 0) {
        int a = 1, b = 1;
        sscanf(out->val[KNOB_MESH], "%dx%d", &a, &b);
        cp = a * b;
        pp = atoi(out->val[KNOB_PP]);
        rc = read_batch(&g, given, tp * cp * pp, world, out, err);
    }
    if (rc == 0) read_plain(&g), read_attention(&g, out);
    if (rc == 0) rc = read_fp8(&g, out, err);
    /* Megatron's default order tp-cp-ep-dp-pp puts a stage's replicas
     * next to each other (RankGenerator); --use-tp-pp-dp-mapping's is
     * loong's head-first. Named only where they differ (pp and dp > 1),
     * so that the other launches keep head-first's name */
    if (rc == 0 && !flag(&g, "use-tp-pp-dp-mapping") && pp > 1 && atoi(out->val[KNOB_DP]) > 1)
        out->val[KNOB_PLACEMENT] = keep("tp-cp-ep-dp-pp"); /* a --placement given wins, as every knob does */
    for (int i = 0; rc == 0 && i < g.n; i++)
        if (!g.a[i].used) note(&g, keep("--%s", g.a[i].name)), g.a[i].used = true;
    /* said by cli_config_finish once the configuration is valid: a bad
     * input keeps its one line */
    if (rc == 0) snprintf(out->megatron_note, sizeof out->megatron_note, "%s", g.skipped);
    return rc;
}

/* ---- out ---- */

/* The emitter's state: the lines so far and what could not be said. */
typedef struct mg_out {
    char args[4096], gaps[1024];
    size_t n, ng;
    int ngaps;
} mg_out;

static void arg(mg_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (o->n < sizeof o->args) o->n += (size_t)vsnprintf(o->args + o->n, sizeof o->args - o->n, fmt, ap);
    va_end(ap);
    if (o->n < sizeof o->args) o->n += (size_t)snprintf(o->args + o->n, sizeof o->args - o->n, " \\\n");
}

static void gap(mg_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (o->ng < sizeof o->gaps)
        o->ng += (size_t)snprintf(o->gaps + o->ng, sizeof o->gaps - o->ng, "# not in Megatron-LM: ");
    if (o->ng < sizeof o->gaps) o->ng += (size_t)vsnprintf(o->gaps + o->ng, sizeof o->gaps - o->ng, fmt, ap);
    if (o->ng < sizeof o->gaps) o->ng += (size_t)snprintf(o->gaps + o->ng, sizeof o->gaps - o->ng, "\n");
    va_end(ap);
    o->ngaps++;
}

/* Context parallelism: the mesh and how KV moves. */
static void emit_cp(mg_out *o, const config *c)
{
    int ph = c->p_head, ps = c->p_seq;
    if (ph * ps > 1) arg(o, "--context-parallel-size %d", ph * ps);
    if (c->ring == RING_ALLGATHER)
        arg(o, "--cp-comm-type all_gather");
    else if (ph > 1 && ps > 1)
        arg(o, "--cp-comm-type a2a+p2p"), arg(o, "--hierarchical-context-parallel-sizes %d %d", ph, ps);
    else if (ph > 1)
        arg(o, "--cp-comm-type a2a");
    else if (ps > 1)
        arg(o, "--cp-comm-type p2p");
    if (ps > 1 && c->ring != RING_SINGLE && c->ring != RING_ALLGATHER)
        gap(o, "--ring %s (Megatron's CP is one ring: nearest --cp-comm-type p2p)", ring_name(c->ring));
    if (ps > 1 && c->partition != PART_ZIGZAG)
        gap(o, "--partition %s (Megatron balances 2 x cp chunks: zigzag)", partition_name(c->partition));
    if (ph > 1 && ps > 1 && config_placement(c) != PLACE_HEAD_FIRST)
        gap(o, "context-first placement (a2a+p2p's all-to-all level is the inner one)");
    if (c->docs) gap(o, "--docs (packed documents: Megatron reads them from the data)");
}

/* Whether c's GPUs put dp before pp (Megatron's default order). */
static bool dp_before_pp(const config *c)
{
    for (int i = 0; i < MESH_NDIMS; i++)
        if (c->order[i] == MESH_DP || c->order[i] == MESH_PP) return c->order[i] == MESH_DP;
    return false;
}

static void emit_pipeline(mg_out *o, const config *c)
{
    if (c->pp > 1) arg(o, "--pipeline-model-parallel-size %d", c->pp);
    if (c->schedule == SCHED_INTERLEAVED && c->vpp > 1) arg(o, "--num-virtual-stages-per-pipeline-rank %d", c->vpp);
    if (c->schedule == SCHED_GPIPE) gap(o, "--schedule gpipe (Megatron runs 1F1B)");
    if (c->pp_first) arg(o, "--decoder-first-pipeline-num-layers %d", c->pp_first);
    if (c->pp_last) arg(o, "--decoder-last-pipeline-num-layers %d", c->pp_last);
    if (c->pp_embed_slot) arg(o, "--account-for-embedding-in-pipeline-split");
    if (c->pp_loss_slot) arg(o, "--account-for-loss-in-pipeline-split");
}

/* The blocks from `from` on, n of them, as a Python list's entries
 * ("0,1,..."), into a new string. */
static char *pattern_text(const model *m, int from, int n)
{
    char *t = xmalloc_array(2 * (size_t)n + 2, 1, "the --moe-layer-freq pattern");
    t[0] = '\0';
    for (int i = 0; i < n; i++)
        sprintf(t + 2 * i - (i > 0), "%s%d", i ? "," : "", model_block_moe(m, from + i));
    return t;
}

/* --moe-layer-freq: N when experts are in blocks l % N == 0 from block 0;
 * ([0]*K+[1]*M) for K dense blocks, then experts; else K dense blocks,
 * one period from block K repeated, and the period's first blocks again
 * for the layers left. */
static void emit_layer_freq(mg_out *o, const model *m)
{
    int K = m->dense_layers, L = m->layers;
    if (!model_moe_interleaved(m)) {
        if (K) arg(o, "--moe-layer-freq '([0]*%d+[1]*%d)'", K, L - K);
        return;
    }
    int N = m->moe_freq, q = (L - K) / N, r = (L - K) % N;
    if (K == 0 && m->moe_phase == 0) {
        arg(o, "--moe-layer-freq %d", N);
        return;
    }
    char *one = pattern_text(m, K, N), *tail = pattern_text(m, K + q * N, r);
    char *text = xmalloc_array(strlen(one) + strlen(tail) + 64, 1, "the --moe-layer-freq pattern");
    int n = K ? sprintf(text, "[0]*%d", K) : 0; /* the dense blocks, the periods, the blocks left */
    if (q) n += sprintf(text + n, "%s[%s]", n ? "+" : "", one);
    if (q > 1) n += sprintf(text + n, "*%d", q);
    if (r) sprintf(text + n, "%s[%s]", n ? "+" : "", tail);
    arg(o, "--moe-layer-freq '(%s)'", text);
    free(text);
    free(one);
    free(tail);
}

/* A mixture of experts: the experts, their parallelism (EP, expert TP)
 * and the token dispatcher with grouped GEMMs, as loong costs them. */
static void emit_experts(mg_out *o, const config *c)
{
    const model *m = &c->model;
    if (!model_moe(m)) return;
    arg(o, "--num-experts %d --moe-router-topk %d", m->experts, m->top_k);
    arg(o, "--moe-ffn-hidden-size %d", m->expert_ffn);
    if (m->shared_ffn) arg(o, "--moe-shared-expert-intermediate-size %d", m->shared_ffn);
    emit_layer_freq(o, m);
    arg(o, "--moe-grouped-gemm --moe-token-dispatcher-type %s",
        c->dispatcher == DISPATCH_ALLGATHER ? "allgather" : "alltoall");
    arg(o, "--expert-model-parallel-size %d --expert-tensor-parallel-size %d", c->ep, config_etp(c));
    if (c->shared_overlap) arg(o, "--moe-shared-expert-overlap");
    if (c->capacity > 0) arg(o, "--moe-expert-capacity-factor %.17g", c->capacity);
    if (config_routing_skewed(c)) gap(o, "--routing zipf or a histogram (the routing is the model's, not an argument)");
}

static void emit_model(mg_out *o, const config *c)
{
    const model *m = &c->model;
    arg(o, "--num-layers %d", m->layers);
    arg(o, "--hidden-size %d", m->hidden);
    arg(o, "--ffn-hidden-size %d", m->ffn);
    arg(o, "--swiglu");
    arg(o, "--num-attention-heads %d", m->heads);
    if (m->kv_heads != m->heads) arg(o, "--group-query-attention"), arg(o, "--num-query-groups %d", m->kv_heads);
    if (model_mla(m)) {
        arg(o, "--multi-latent-attention");
        if (m->q_lora) arg(o, "--q-lora-rank %d", m->q_lora);
        arg(o, "--kv-lora-rank %d --qk-head-dim %d", m->kv_lora, m->qk_nope);
        arg(o, "--qk-pos-emb-head-dim %d --v-head-dim %d", m->qk_rope, m->v_dim);
    } else {
        arg(o, "--kv-channels %d", m->head_dim);
    }
    arg(o, "--vocab-size %d", m->vocab);
    arg(o, "--make-vocab-size-divisible-by 1"); /* loong pads each TP shard itself */
    arg(o, "--position-embedding-type rope");
    arg(o, "--normalization RMSNorm");
    if (!m->tied) arg(o, "--untie-embeddings-and-output-weights");
    if (m->bias != MODEL_BIAS_ALL) arg(o, "--disable-bias-linear");
    if (m->bias == MODEL_BIAS_QKV) arg(o, "--add-qkv-bias");
    if (m->bias == MODEL_BIAS_ALL) gap(o, "attention_bias all without the MLP's biases (Megatron adds both)");
    emit_experts(o, c);
}

static void emit_recompute(mg_out *o, const config *c)
{
    char mods[64];
    switch (c->recompute) {
    case RECOMPUTE_NONE: break;
    case RECOMPUTE_SELECTIVE:
        recompute_modules_text(c->recompute_modules, mods, sizeof mods);
        for (char *p = mods; *p; p++)
            if (*p == ',') *p = ' ';
        arg(o, "--recompute-granularity selective");
        arg(o, "--recompute-modules %s", mods);
        break;
    case RECOMPUTE_SCPP: gap(o, "--recompute scpp (LoongTrain's Selective Checkpoint++)"); break;
    case RECOMPUTE_FULL:
        arg(o, "--recompute-granularity full");
        arg(o, "--recompute-method %s", c->recompute_method == RECOMPUTE_BLOCK ? "block" : "uniform");
        arg(o, "--recompute-num-layers %d", c->recompute_layers);
        break;
    }
}

int cli_megatron_emit(FILE *f, const config *c)
{
    static mg_out o;
    memset(&o, 0, sizeof o);
    int world = config_world(c), per = c->gpus_per_node;
    if (world % per == 0)
        arg(&o, "--nnodes %d --nproc-per-node %d", world / per, per);
    else
        arg(&o, "--nnodes 1 --nproc-per-node %d", world);
    arg(&o, "--tensor-model-parallel-size %d", c->tp);
    if (config_sp(c)) arg(&o, "--sequence-parallel");
    if (c->tp > 1 && c->tp_overlap) arg(&o, "--tp-comm-overlap");
    emit_cp(&o, c);
    emit_pipeline(&o, c);
    if (c->pp > 1 && c->dp > 1 && !dp_before_pp(c)) arg(&o, "--use-tp-pp-dp-mapping");
    arg(&o, "--micro-batch-size %d", c->batch);
    arg(&o, "--global-batch-size %d", c->batch * c->micro_batches * c->dp);
    arg(&o, "--seq-length %llu", (unsigned long long)c->seq);
    arg(&o, "--max-position-embeddings %llu", (unsigned long long)c->seq);
    emit_model(&o, c);
    emit_recompute(&o, c);
    if (c->zero == 1) arg(&o, "--use-distributed-optimizer");
    if (c->zero >= 2)
        gap(&o, "--zero %d (Megatron's distributed optimizer is ZeRO-1; FSDP is another launch)", c->zero);
    if (c->act_bytes == 2) arg(&o, "--bf16");
    if (c->grad_reduce == GRAD_REDUCE_BF16) arg(&o, "--grad-reduce-in-bf16");
    arg(&o, "--attention-backend %s", c->attention == ATTN_UNFUSED ? "unfused" : "flash");
    if (c->precision != PRECISION_BF16)
        arg(&o, "--fp8-format %s --fp8-recipe %s", c->precision == PRECISION_MXFP8 ? "e4m3" : "hybrid",
            c->precision == PRECISION_FP8_DELAYED ? "delayed"
            : c->precision == PRECISION_MXFP8     ? "mxfp8"
                                                  : "tensorwise");
    arg(&o, "--attention-dropout %.17g --hidden-dropout %.17g", c->attention_dropout, c->hidden_dropout);
    if (c->nccl_algo != COLL_ALGO_AUTO || c->nccl_proto != COLL_PROTO_AUTO)
        gap(&o, "--nccl-algo/--nccl-proto (set NCCL_ALGO / NCCL_PROTO in the environment)");
    if (!c->kv_replication) gap(&o, "--kv-replication off");
    /* the last line has no continuation */
    if (o.n >= 3 && o.n < sizeof o.args) o.args[o.n - 3] = '\n', o.args[o.n - 2] = '\0';
    int rc = fprintf(f, "%s# torchrun --nnodes N --nproc-per-node G pretrain_gpt.py with these arguments\n%s", o.gaps,
                     o.args);
    return rc < 0 || ferror(f) ? -1 : o.ngaps;
}

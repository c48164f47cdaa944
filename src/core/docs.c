/* docs: document layouts and exact masked pair counts. See docs.h. */
#include "docs.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hash.h"
#include "infile.h"
#include "xalloc.h"

struct doc_layout {
    int n;
    uint64_t *start; /* n + 1 offsets: document i is [start[i], start[i + 1]) */
    uint64_t hash;
    doc_layout *next; /* the interned list */
};

/* Layouts are interned for the process (equal lengths, one pointer, which
 * configurations compare). The executor's --transport local parses and
 * builds per rank thread, so a lock guards the list. */
static doc_layout *interned;
static pthread_mutex_t interned_mu = PTHREAD_MUTEX_INITIALIZER;

/* More documents than this in one sample is a mistake (a histogram of
 * 1-token lengths against a 1M sequence), not a workload. */
#define DOCS_MAX (1 << 20)

/* FNV-1a of the lengths from the documents' compatibility basis (hash.h:
 * the hash is persisted in every configuration with documents). */
static uint64_t hash_lengths(const uint64_t *len, int n)
{
    uint64_t h = HASH_FNV1A_LEGACY_DOCS_BASIS;
    for (int i = 0; i < n; i++)
        h = hash_fnv1a_u64(h, len[i]);
    return h;
}

/* The interned layout of these lengths (validated by the caller). */
static const doc_layout *intern(const uint64_t *len, int n)
{
    uint64_t h = hash_lengths(len, n);
    pthread_mutex_lock(&interned_mu);
    for (doc_layout *d = interned; d; d = d->next) {
        if (d->hash != h || d->n != n) continue;
        int same = 1;
        for (int i = 0; i < n && same; i++)
            same = d->start[i + 1] - d->start[i] == len[i];
        if (same) {
            pthread_mutex_unlock(&interned_mu);
            return d;
        }
    }
    doc_layout *d = xcalloc(1, sizeof *d, "a document layout");
    d->n = n;
    d->hash = h;
    d->start = xmalloc_array((size_t)n + 1, sizeof *d->start, "a document layout");
    d->start[0] = 0;
    for (int i = 0; i < n; i++)
        d->start[i + 1] = d->start[i] + len[i];
    d->next = interned;
    interned = d;
    pthread_mutex_unlock(&interned_mu);
    return d;
}

/* Lengths must be at least 1 and sum to at most seq. */
static int check_lengths(const uint64_t *len, int n, uint64_t seq, const char *what, char err[LOONG_ERRLEN])
{
    if (n == 0) {
        snprintf(err, LOONG_ERRLEN, "%s holds no document: give at least one length", what);
        return -1;
    }
    if (n > DOCS_MAX) {
        snprintf(err, LOONG_ERRLEN, "%s holds %d documents, more than the %d loong packs into one sample", what, n,
                 DOCS_MAX);
        return -1;
    }
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (len[i] == 0) {
            snprintf(err, LOONG_ERRLEN, "%s: document %d has length 0: every document needs a token", what, i + 1);
            return -1;
        }
        if (!units_add(sum, len[i], &sum) || sum > seq) {
            snprintf(err, LOONG_ERRLEN,
                     "%s: the documents add up to more than --seq %llu tokens: drop documents or raise --seq", what,
                     (unsigned long long)seq);
            return -1;
        }
    }
    return 0;
}

typedef struct lengths {
    uint64_t *v;
    int n, cap;
} lengths;

static void push(lengths *l, uint64_t x)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = xrealloc_array(l->v, (size_t)l->cap, sizeof *l->v, "a document layout");
    }
    l->v[l->n++] = x;
}

static const doc_layout *finish(lengths *l, uint64_t seq, const char *what, char err[LOONG_ERRLEN])
{
    const doc_layout *d = check_lengths(l->v, l->n, seq, what, err) < 0 ? NULL : intern(l->v, l->n);
    free(l->v);
    return d;
}

const doc_layout *docs_parse_list(const char *s, uint64_t seq, const char *what, char err[LOONG_ERRLEN])
{
    lengths l = {0};
    char *copy = xstrdup(s, "a document list"), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        uint64_t v;
        char msg[LOONG_ERRLEN];
        if (units_parse_count(tok, "a length", &v, msg) < 0) {
            snprintf(err, LOONG_ERRLEN, "%s: document %d: %.180s", what, l.n + 1, msg);
            free(copy);
            free(l.v);
            return NULL;
        }
        push(&l, v);
    }
    free(copy);
    return finish(&l, seq, what, err);
}

/* Lines of a text, '#' comments and blanks dropped; calls line() with
 * each. Returns 0, or what line() returned first. */
static int each_line(const char *text, int (*line)(char *text, int lineno, void *arg), void *arg)
{
    char *copy = xstrdup(text, "a document list"), *cursor = copy, *buf;
    int lineno = 0, rc = 0;
    while (rc == 0 && (buf = infile_next_line(&cursor))) {
        lineno++;
        char *hash = strchr(buf, '#');
        if (hash) *hash = '\0';
        char *p = buf;
        while (isspace((unsigned char)*p))
            p++;
        for (char *e = p + strlen(p); e > p && isspace((unsigned char)e[-1]);)
            *--e = '\0';
        if (*p) rc = line(p, lineno, arg);
    }
    free(copy);
    return rc;
}

typedef struct file_ctx {
    const char *path;
    lengths l;
    double *w;
    int wcap;
    char *err;
} file_ctx;

static int length_line(char *text, int lineno, void *arg)
{
    file_ctx *x = arg;
    uint64_t v;
    char msg[LOONG_ERRLEN];
    if (units_parse_count(text, "the length", &v, msg) < 0) {
        snprintf(x->err, LOONG_ERRLEN, "%.100s:%d: %.140s", x->path, lineno, msg);
        return -1;
    }
    push(&x->l, v);
    return 0;
}

const doc_layout *docs_parse_lines(const char *text, const char *path, uint64_t seq, char err[LOONG_ERRLEN])
{
    file_ctx x = {path, {0}, NULL, 0, err};
    if (each_line(text, length_line, &x) < 0) {
        free(x.l.v);
        return NULL;
    }
    char what[160];
    snprintf(what, sizeof what, "--docs-file %.120s", path);
    return finish(&x.l, seq, what, err);
}

const doc_layout *docs_load_file(const char *path, uint64_t seq, char err[LOONG_ERRLEN])
{
    char *text = infile_read(path, "document list", INFILE_TEXT_MAX, NULL, err);
    if (!text) return NULL;
    const doc_layout *d = docs_parse_lines(text, path, seq, err);
    free(text);
    return d;
}

/* "LENGTH WEIGHT" */
static int histogram_line(char *text, int lineno, void *arg)
{
    file_ctx *x = arg;
    char *sp = text + strcspn(text, " \t");
    char *wt = sp + strspn(sp, " \t");
    if (!*sp || !*wt) {
        snprintf(x->err, LOONG_ERRLEN, "%.100s:%d: '%.40s' is not 'LENGTH WEIGHT' (e.g. 4K 30)", x->path, lineno, text);
        return -1;
    }
    *sp = '\0';
    uint64_t v;
    char msg[LOONG_ERRLEN], *end;
    if (units_parse_count(text, "the length", &v, msg) < 0) {
        snprintf(x->err, LOONG_ERRLEN, "%.100s:%d: %.140s", x->path, lineno, msg);
        return -1;
    }
    errno = 0;
    double w = strtod(wt, &end);
    if (end == wt || *end || errno || !(w >= 0) || w > 1e300) {
        snprintf(x->err, LOONG_ERRLEN, "%.100s:%d: weight '%.40s' is not a finite number >= 0", x->path, lineno, wt);
        return -1;
    }
    push(&x->l, v);
    if (x->l.n > x->wcap) {
        x->wcap = x->l.cap;
        x->w = xrealloc_array(x->w, (size_t)x->wcap, sizeof *x->w, "a length histogram");
    }
    x->w[x->l.n - 1] = w;
    return 0;
}

const doc_layout *docs_draw(const char *path, uint64_t seq, uint64_t seed, char err[LOONG_ERRLEN])
{
    char *text = infile_read(path, "length histogram", INFILE_TEXT_MAX, NULL, err);
    if (!text) return NULL;
    const doc_layout *d = docs_draw_text(text, path, seq, seed, err);
    free(text);
    return d;
}

const doc_layout *docs_draw_text(const char *text, const char *path, uint64_t seq, uint64_t seed,
                                 char err[LOONG_ERRLEN])
{
    file_ctx x = {path, {0}, NULL, 0, err};
    const doc_layout *d = NULL;
    lengths drawn = {0};
    double total = 0;
    if (each_line(text, histogram_line, &x) < 0) goto out;
    for (int i = 0; i < x.l.n; i++)
        total += x.w[i];
    if (x.l.n == 0 || !(total > 0)) {
        snprintf(err, LOONG_ERRLEN, "--doc-dist %.120s: %s", path,
                 x.l.n ? "every weight is 0: give one length a positive weight" : "no 'LENGTH WEIGHT' line");
        goto out;
    }
    unsigned short xs[3] = {(unsigned short)seed, (unsigned short)(seed >> 16), (unsigned short)(seed >> 32)};
    for (uint64_t filled = 0; filled < seq;) {
        if (drawn.n == DOCS_MAX) {
            snprintf(err, LOONG_ERRLEN,
                     "--doc-dist %.120s draws more than %d documents into --seq %llu: use longer lengths or a shorter "
                     "--seq",
                     path, DOCS_MAX, (unsigned long long)seq);
            goto out;
        }
        double u = erand48(xs) * total, acc = 0;
        int k = 0;
        while (k < x.l.n - 1 && (acc += x.w[k]) <= u)
            k++;
        uint64_t len = x.l.v[k] < seq - filled ? x.l.v[k] : seq - filled;
        push(&drawn, len);
        filled += len;
    }
    d = finish(&drawn, seq, "--doc-dist", err);
    drawn.v = NULL;
out:
    free(drawn.v);
    free(x.l.v);
    free(x.w);
    return d;
}

int docs_count(const doc_layout *d) { return d ? d->n : 1; }
uint64_t docs_length(const doc_layout *d, int i) { return d->start[i + 1] - d->start[i]; }
uint64_t docs_start(const doc_layout *d, int i) { return d->start[i]; }
uint64_t docs_tokens(const doc_layout *d) { return d->start[d->n]; }
uint64_t docs_hash(const doc_layout *d) { return d ? d->hash : 0; }

/* The document holding pos, or -1 (padding). */
static int doc_of(const doc_layout *d, uint64_t pos)
{
    return pos >= d->start[d->n] ? -1 : units_last_at_most(d->start, d->n, pos);
}

uint64_t docs_window_start(const doc_layout *d, uint64_t seq, uint64_t pos)
{
    (void)seq;
    if (!d) return 0;
    int k = doc_of(d, pos);
    return k < 0 ? pos + 1 : d->start[k];
}

/* x (x + 1) / 2 without overflow for x < 2^32 */
static uint64_t tri(uint64_t x) { return x % 2 ? x * ((x + 1) / 2) : (x / 2) * (x + 1); }

/* Pairs i in [a, b), j in [c, e), j <= i: every i >= c sees the keys
 * [c, min(e, i + 1)). */
static uint64_t causal_pairs(uint64_t a, uint64_t b, uint64_t c, uint64_t e)
{
    if (a >= b || c >= e) return 0;
    uint64_t n = 0, lo = a > c ? a : c, hi = b < e ? b : e;
    if (hi > lo) /* i in [lo, hi) sees i + 1 - c keys */
        n += tri(hi - c) - tri(lo - c);
    uint64_t from = a > e ? a : e;
    if (b > from) n += (b - from) * (e - c); /* i >= e sees all of [c, e) */
    return n;
}

uint64_t docs_pairs(const doc_layout *d, uint64_t seq, uint64_t q0, uint64_t q1, uint64_t k0, uint64_t k1)
{
    if (!d) return causal_pairs(q0, q1 < seq ? q1 : seq, k0, k1);
    /* a document with pairs holds a query >= q0 and a key >= k0, and starts
     * before both q1 and k1 */
    uint64_t n = 0, from = q0 > k0 ? q0 : k0, to = q1 < k1 ? q1 : k1;
    int k = doc_of(d, from);
    if (k < 0) return 0;
    for (; k < d->n && d->start[k] < to; k++) {
        uint64_t ds = d->start[k], de = d->start[k + 1];
        n += causal_pairs(q0 > ds ? q0 : ds, q1 < de ? q1 : de, k0 > ds ? k0 : ds, k1 < de ? k1 : de);
    }
    return n;
}

json_t *docs_to_json(const doc_layout *d)
{
    json_t *len = json_array();
    for (int i = 0; len && i < d->n; i++)
        json_array_append_new(len, json_integer((json_int_t)docs_length(d, i)));
    char h[20];
    snprintf(h, sizeof h, "%016llx", (unsigned long long)d->hash);
    json_t *j = json_pack("{s:i, s:I, s:s, s:o}", "count", d->n, "tokens", (json_int_t)docs_tokens(d), "hash", h,
                          "lengths", len);
    if (!j) xalloc_die(0, "a document layout's JSON");
    return j;
}

const doc_layout *docs_from_json(const json_t *j, uint64_t seq, char err[LOONG_ERRLEN])
{
    const json_t *len = json_object_get(j, "lengths");
    if (!json_is_array(len)) {
        snprintf(err, LOONG_ERRLEN, "configuration object: 'docs' has no 'lengths' array");
        return NULL;
    }
    lengths l = {0};
    for (size_t i = 0; i < json_array_size(len); i++) {
        const json_t *v = json_array_get(len, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            snprintf(err, LOONG_ERRLEN, "configuration object: docs length %zu is not a count", i + 1);
            free(l.v);
            return NULL;
        }
        push(&l, (uint64_t)json_integer_value(v));
    }
    return finish(&l, seq, "configuration object: docs", err);
}

char *docs_format(const doc_layout *d)
{
    size_t cap = (size_t)d->n * 21 + 1, n = 0;
    char *s = xmalloc(cap, "a document list");
    s[0] = '\0';
    for (int i = 0; i < d->n; i++)
        n += (size_t)snprintf(s + n, cap - n, "%s%llu", i ? "," : "", (unsigned long long)docs_length(d, i));
    return s;
}

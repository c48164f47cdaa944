/* shard: the token map of each partition. See shard.h.
 *
 * The balanced partition: cut the sequence into n = 2K P_s cells of equal
 * length and weigh each by its unmasked work (the pairs of its queries
 * against every key; a token's work is its offset in its document plus
 * one, wherever the keys live, because the ring brings every key to every
 * query). Sort the cells by work, heaviest first, and deal them in a snake
 * draft: round r gives one cell to each ring index, in index order when r
 * is even and in reverse when r is odd. Every index gets 2K cells, so every
 * shard holds the same tokens. Bound: within a pair of rounds the index
 * that gets the heavier cell of one round gets the lighter of the other, so
 * two indices differ by at most the spread of one round; the rounds cover
 * disjoint runs of the sorted cells, so the spreads add up to at most
 * w_max - w_min, and max - min <= w_max - w_min over the cells. K is the
 * smallest power of two up to 64 (with S divisible by 2K P_s) whose draft
 * reaches max/mean <= 1.01, else the best of them: more cells balance
 * better but cut documents into more runs, and every run is a kernel's
 * ragged edge. With one document, K = 1 deals exactly the zigzag. */
#include "shard.h"

#include <pthread.h>
#include <stdlib.h>

#include "docs.h"
#include "xalloc.h"

typedef struct tile_table tile_table;

typedef struct seglist {
    shard_seg *v;
    uint64_t *off; /* off[i]: tokens before run i */
    int n, cap;
} seglist;

struct shard_map {
    const doc_layout *docs;
    uint64_t seq, ct;
    int p_seq, parts, cells;
    partition_kind partition;
    seglist *lists;    /* [s * parts + part] */
    uint64_t *pairs;   /* [owner][owner], owner = s * parts + part (count_pairs) */
    tile_table *tiles; /* the same per tile shape, on first use (shard_tiles) */
    shard_map *next;
};

/* Maps are built once per (layout, S, P_s, partition) and kept for the
 * process. The executor's --transport local builds one DAG per rank thread,
 * so the list is shared between threads: a lock guards the lookup and the
 * insertion (the build is inside, so two threads never build one map). */
static shard_map *interned;
static pthread_mutex_t interned_mu = PTHREAD_MUTEX_INITIALIZER;

static void count_pairs(shard_map *m);

static seglist *list_of(const shard_map *m, int s, int part) { return &m->lists[s * m->parts + part]; }

/* Append [start, start + len), merged into the last run when it touches. */
static void push(seglist *l, uint64_t start, uint64_t len)
{
    if (!len) return;
    if (l->n && l->v[l->n - 1].start + l->v[l->n - 1].len == start) {
        l->v[l->n - 1].len += len;
        return;
    }
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 4;
        l->v = xrealloc_array(l->v, (size_t)l->cap, sizeof *l->v, "a shard map");
    }
    l->v[l->n++] = (shard_seg){start, len};
}

/* Slot j of parts x P_s slots: ring index and part (zigzag order for 2). */
static void slot(const shard_map *m, int j, int *s, int *part)
{
    *part = j >= m->p_seq;
    *s = *part ? 2 * m->p_seq - 1 - j : j;
}

static void push_slot(shard_map *m, int j, uint64_t start, uint64_t len)
{
    int s, part;
    slot(m, j, &s, &part);
    push(list_of(m, s, part), start, len);
}

/* contiguous and zigzag: slot j holds chunk j */
static void build_chunks(shard_map *m)
{
    for (int j = 0; j < m->parts * m->p_seq; j++)
        push_slot(m, j, (uint64_t)j * m->ct, m->ct);
}

/* One unit (a document or the padding) split over every slot, piece j to
 * slot j; the ceilings go to the slots from *rot on. */
static void split_unit(shard_map *m, uint64_t start, uint64_t len, int *rot)
{
    int n = m->parts * m->p_seq;
    uint64_t base = len / (uint64_t)n;
    int rem = (int)(len % (uint64_t)n);
    for (int j = 0; j < n; j++) {
        uint64_t piece = base + (uint64_t)(((j - *rot) % n + n) % n < rem);
        push_slot(m, j, start, piece);
        start += piece;
    }
    *rot = (*rot + rem) % n;
}

static void build_doc_split(shard_map *m)
{
    int rot = 0, nd = m->docs ? docs_count(m->docs) : 0;
    for (int i = 0; i < nd; i++)
        split_unit(m, docs_start(m->docs, i), docs_length(m->docs, i), &rot);
    uint64_t used = m->docs ? docs_tokens(m->docs) : 0;
    if (used < m->seq) split_unit(m, used, m->seq - used, &rot);
}

/* ---- balanced ---- */

typedef struct cell {
    uint64_t work;
    int index;
} cell;

static int heavier_first(const void *pa, const void *pb)
{
    const cell *a = pa, *b = pb;
    if (a->work != b->work) return a->work < b->work ? 1 : -1;
    return a->index - b->index;
}

/* Deal n cells of g tokens to the ring indices (owner[cell]); max/mean. */
static double snake_draft(const shard_map *m, int n, uint64_t g, int *owner)
{
    int P = m->p_seq;
    cell *cs = xmalloc_array((size_t)n, sizeof *cs, "the balanced partition");
    uint64_t *load = xcalloc((size_t)P, sizeof *load, "the balanced partition"), total = 0, max = 0;
    for (int i = 0; i < n; i++) {
        uint64_t c0 = (uint64_t)i * g;
        cs[i] = (cell){docs_pairs(m->docs, m->seq, c0, c0 + g, 0, c0 + g), i};
    }
    qsort(cs, (size_t)n, sizeof *cs, heavier_first);
    for (int i = 0; i < n; i++) {
        int round = i / P, at = i % P, s = round % 2 ? P - 1 - at : at;
        owner[cs[i].index] = s;
        load[s] += cs[i].work;
        total += cs[i].work;
    }
    for (int s = 0; s < P; s++)
        max = load[s] > max ? load[s] : max;
    free(cs);
    free(load);
    return total ? (double)max * P / (double)total : 1.0;
}

static void build_balanced(shard_map *m)
{
    int P = m->p_seq, best_k = 1;
    double best = 0;
    for (int k = 1; k <= 64 && m->seq % (2 * (uint64_t)k * (uint64_t)P) == 0; k *= 2) {
        int n = 2 * k * P, *owner = xmalloc_array((size_t)n, sizeof *owner, "the balanced partition");
        double ratio = snake_draft(m, n, m->seq / (uint64_t)n, owner);
        free(owner);
        if (k == 1 || ratio < best) best = ratio, best_k = k;
        if (ratio <= 1.01) break;
    }
    int n = 2 * best_k * P, *owner = xmalloc_array((size_t)n, sizeof *owner, "the balanced partition");
    int *dealt = xcalloc((size_t)P, sizeof *dealt, "the balanced partition");
    uint64_t g = m->seq / (uint64_t)n;
    snake_draft(m, n, g, owner);
    for (int i = 0; i < n; i++) { /* an index's first K cells by position are part A */
        int s = owner[i];
        push(list_of(m, s, dealt[s]++ >= best_k), (uint64_t)i * g, g);
    }
    m->cells = best_k;
    free(owner);
    free(dealt);
}

/* ---- the map ---- */

static void index_runs(shard_map *m)
{
    for (int i = 0; i < m->p_seq * m->parts; i++) {
        seglist *l = &m->lists[i];
        l->off = xmalloc_array((size_t)l->n + 1, sizeof *l->off, "a shard map");
        l->off[0] = 0;
        for (int k = 0; k < l->n; k++)
            l->off[k + 1] = l->off[k] + l->v[k].len;
    }
}

static shard_map *build_map(const config *c);

const shard_map *shard_map_of(const config *c)
{
    pthread_mutex_lock(&interned_mu);
    shard_map *m = interned;
    while (m && !(m->docs == c->docs && m->seq == c->seq && m->p_seq == c->p_seq && m->partition == c->partition))
        m = m->next;
    if (!m) {
        m = build_map(c);
        m->next = interned;
        interned = m;
    }
    pthread_mutex_unlock(&interned_mu);
    return m;
}

static shard_map *build_map(const config *c)
{
    shard_map *m = xcalloc(1, sizeof *m, "a shard map");
    *m = (shard_map){c->docs, c->seq, config_chunk_tokens(c), c->p_seq, config_parts(c), 0, c->partition, NULL, NULL,
                     NULL,    NULL};
    m->lists = xcalloc((size_t)m->p_seq * (size_t)m->parts, sizeof *m->lists, "a shard map");
    switch (c->partition) {
    case PART_CONTIGUOUS:
    case PART_ZIGZAG: build_chunks(m); break;
    case PART_DOC_CONTIGUOUS:
    case PART_DOC_ZIGZAG: build_doc_split(m); break;
    case PART_BALANCED: build_balanced(m); break;
    }
    index_runs(m);
    count_pairs(m);
    return m;
}

uint64_t shard_pos(const shard_map *m, int s, int part, uint64_t i)
{
    const seglist *l = list_of(m, s, part);
    int k = units_last_at_most(l->off, l->n, i);
    return l->v[k].start + (i - l->off[k]);
}

const shard_seg *shard_segs(const shard_map *m, int s, int part, int *n)
{
    const seglist *l = list_of(m, s, part);
    *n = l->n;
    return l->v;
}

/* Documents as ranges: document t is [doc_lo(t), doc_hi(t)); no layout is
 * one document of the whole sequence. */
static int ndocs(const shard_map *m) { return m->docs ? docs_count(m->docs) : 1; }
static uint64_t doc_lo(const shard_map *m, int t) { return m->docs ? docs_start(m->docs, t) : 0; }
static uint64_t doc_hi(const shard_map *m, int t)
{
    return m->docs ? docs_start(m->docs, t) + docs_length(m->docs, t) : m->seq;
}

/* A run with its owner (s * parts + part). */
typedef struct owned_run {
    uint64_t lo, hi;
    int owner;
} owned_run;

static int by_start(const void *pa, const void *pb)
{
    const owned_run *a = pa, *b = pb;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Every run of every part, in position order (they tile the sequence). */
static owned_run *all_runs(const shard_map *m, int *n)
{
    int owners = m->p_seq * m->parts, total = 0;
    for (int o = 0; o < owners; o++)
        total += m->lists[o].n;
    owned_run *r = xmalloc_array((size_t)total, sizeof *r, "a shard map");
    for (int o = 0, i = 0; o < owners; o++)
        for (int k = 0; k < m->lists[o].n; k++, i++)
            r[i] = (owned_run){m->lists[o].v[k].start, m->lists[o].v[k].start + m->lists[o].v[k].len, o};
    qsort(r, (size_t)total, sizeof *r, by_start);
    *n = total;
    return r;
}

/* Tiles of the causal grid of query piece [qa, qb) against key piece
 * [ka, kb) of one document: row tile i holds queries up to
 * min(qa + (i+1) br, qb) - 1 and touches every column tile whose first key
 * is at or before that query. */
static uint64_t piece_tiles(uint64_t qa, uint64_t qb, uint64_t ka, uint64_t kb, uint64_t br, uint64_t bc)
{
    if (ka >= qb || qa >= qb || ka >= kb) return 0;
    uint64_t ncol = (kb - ka + bc - 1) / bc, n = 0;
    for (uint64_t r0 = qa; r0 < qb; r0 += br) {
        uint64_t qmax = (r0 + br < qb ? r0 + br : qb) - 1;
        if (qmax < ka) continue;
        uint64_t c = (qmax - ka) / bc + 1;
        n += c < ncol ? c : ncol;
    }
    return n;
}

/* table[x][y]: the work of owner x's queries against owner y's keys,
 * unmasked pairs (br = 0) or tiles of br x bc. Work lives inside one
 * document, so each document adds, for every run x that meets it and every
 * run y at or before x in it, the work of their pieces inside the document
 * (the runs cut at its bounds): O(sum over documents of runs-met^2), which
 * is O(documents) when runs are long and O(P_s^2) per long document when
 * the partition splits every document. */
static uint64_t *owner_table(const shard_map *m, int br, int bc)
{
    int owners = m->p_seq * m->parts, nr, r0 = 0;
    uint64_t *v = xcalloc((size_t)owners * (size_t)owners, sizeof *v, "a shard map's work table");
    owned_run *r = all_runs(m, &nr);
    for (int u = 0; u < ndocs(m); u++) {
        uint64_t ds = doc_lo(m, u), de = doc_hi(m, u);
        while (r0 < nr && r[r0].hi <= ds)
            r0++;
        for (int x = r0; x < nr && r[x].lo < de; x++) {
            uint64_t qa = r[x].lo > ds ? r[x].lo : ds, qb = r[x].hi < de ? r[x].hi : de;
            uint64_t *row = v + (size_t)r[x].owner * (size_t)owners;
            for (int y = r0; y <= x; y++) {
                uint64_t ka = r[y].lo > ds ? r[y].lo : ds, kb = r[y].hi < de ? r[y].hi : de;
                row[r[y].owner] += br ? piece_tiles(qa, qb, ka, kb, (uint64_t)br, (uint64_t)bc)
                                      : docs_pairs(NULL, m->seq, qa, qb, ka, kb); /* causal: one document */
            }
        }
    }
    free(r);
    return v;
}

static void count_pairs(shard_map *m) { m->pairs = owner_table(m, 0, 0); }

uint64_t shard_pairs(const shard_map *m, int s, int a, int src, int k)
{
    size_t owners = (size_t)m->p_seq * (size_t)m->parts;
    return m->pairs[(size_t)(s * m->parts + a) * owners + (size_t)(src * m->parts + k)];
}

uint64_t shard_query_pairs(const shard_map *m, int s)
{
    uint64_t n = 0;
    for (int a = 0; a < m->parts; a++)
        for (int src = 0; src < m->p_seq; src++)
            for (int k = 0; k < m->parts; k++)
                n += shard_pairs(m, s, a, src, k);
    return n;
}

/* ---- tiles (shard_tiles) ---- */

/* One tile shape's table, like pairs: [owner][owner]. */
struct tile_table {
    int br, bc;
    uint64_t *v;
    tile_table *next;
};

/* The table of shape br x bc, built on first use (under the interning
 * lock: maps are shared between threads). */
static const tile_table *tiles_for(const shard_map *m, int br, int bc)
{
    shard_map *mm = (shard_map *)m; /* the cache is the map's only mutable part */
    pthread_mutex_lock(&interned_mu);
    tile_table *t = mm->tiles;
    while (t && (t->br != br || t->bc != bc))
        t = t->next;
    if (!t) {
        t = xcalloc(1, sizeof *t, "a shard map's tile table");
        t->br = br;
        t->bc = bc;
        t->v = owner_table(m, br, bc);
        t->next = mm->tiles;
        mm->tiles = t;
    }
    pthread_mutex_unlock(&interned_mu);
    return t;
}

const uint64_t *shard_tile_table(const shard_map *m, int br, int bc) { return tiles_for(m, br, bc)->v; }

uint64_t shard_tiles(const shard_map *m, int s, int a, int src, int k, int br, int bc)
{
    size_t owners = (size_t)m->p_seq * (size_t)m->parts;
    return shard_tile_table(m, br, bc)[(size_t)(s * m->parts + a) * owners + (size_t)(src * m->parts + k)];
}

/* The last document starting at or before p (0 if none). */
static int doc_at(const shard_map *m, uint64_t p)
{
    int lo = 0, hi = ndocs(m) - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (doc_lo(m, mid) <= p)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

uint64_t shard_query_tiles(const shard_map *m, int s, int br, int bc)
{
    uint64_t n = 0;
    for (int a = 0; a < m->parts; a++) {
        const seglist *l = list_of(m, s, a);
        for (int i = 0; i < l->n; i++) { /* each run cut at the documents it meets, against them whole */
            uint64_t p = l->v[i].start, end = p + l->v[i].len;
            for (int u = doc_at(m, p); p < end && u < ndocs(m); u++) {
                uint64_t ds = doc_lo(m, u), de = doc_hi(m, u);
                if (ds >= end) break;
                uint64_t qa = p > ds ? p : ds, qb = de < end ? de : end;
                if (qa < qb) n += piece_tiles(qa, qb, ds, de, (uint64_t)br, (uint64_t)bc);
                p = qb > p ? qb : p;
            }
        }
    }
    return n;
}

/* Packed documents: layouts from lists, files and histograms (and their
 * bad inputs); exact pair counts against brute force; the token maps of
 * every partition against their definition; the DAG's masked work against
 * closed forms. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/docs.h"
#include "core/shard.h"
#include "dag_util.h"
#include "check_run.h"

#define K 1024ull

/* A temporary file holding text; the caller unlinks it. */
static void temp_file(char path[64], const char *text)
{
    snprintf(path, 64, "/tmp/loong-docs-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq((int)write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
}

/* ---- layouts ---- */

START_TEST(parse_list)
{
    char err[LOONG_ERRLEN];
    const doc_layout *d = docs_parse_list("1K,2K,512", 4 * K, "--docs", err);
    ck_assert_msg(d != NULL, "%s", err);
    ck_assert_int_eq(docs_count(d), 3);
    ck_assert_uint_eq(docs_tokens(d), 3584);
    ck_assert_uint_eq(docs_start(d, 2), 3072);
    ck_assert_uint_eq(docs_length(d, 1), 2048);
    /* interned: the same lengths are the same layout */
    ck_assert_ptr_eq(docs_parse_list("1024,2048,512", 4 * K, "--docs", err), d);
    char *s = docs_format(d);
    ck_assert_str_eq(s, "1024,2048,512");
    free(s);
    /* padding attends to nothing: its window starts after it */
    ck_assert_uint_eq(docs_window_start(d, 4 * K, 3000), 1024);
    ck_assert_uint_eq(docs_window_start(d, 4 * K, 4000), 4001);
}
END_TEST

START_TEST(bad_lists)
{
    static const struct {
        const char *list, *says;
    } bad[] = {
        {"0,5", "must be positive"}, {"3K,2K", "more than --seq"}, {"-5", "document 1"},        {"", "no document"},
        {"a,b", "document 1"},       {"1K,2x", "document 2"},      {"4097", "more than --seq"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[LOONG_ERRLEN] = "";
        ck_assert_msg(docs_parse_list(bad[i].list, 4 * K, "--docs", err) == NULL, "'%s' accepted", bad[i].list);
        ck_assert_msg(strstr(err, bad[i].says) != NULL, "'%s': %s", bad[i].list, err);
    }
}
END_TEST

START_TEST(files)
{
    char path[64], err[LOONG_ERRLEN];
    temp_file(path, "# lengths\n100\n\n  200  # a comment\n1K\n");
    const doc_layout *d = docs_load_file(path, 2 * K, err);
    ck_assert_msg(d != NULL, "%s", err);
    ck_assert_int_eq(docs_count(d), 3);
    ck_assert_uint_eq(docs_tokens(d), 1324);
    unlink(path);
    static const struct {
        const char *text, *says;
    } bad[] = {{"", "no document"}, {"# nothing\n", "no document"}, {"100\nabc\n", ":2:"}, {"0\n", "must be positive"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        temp_file(path, bad[i].text);
        ck_assert(docs_load_file(path, 2 * K, err) == NULL);
        ck_assert_msg(strstr(err, bad[i].says) != NULL, "'%s': %s", bad[i].text, err);
        unlink(path);
    }
    ck_assert(docs_load_file("/nonexistent/lengths", 2 * K, err) == NULL);
    ck_assert_ptr_nonnull(strstr(err, "cannot read"));
}
END_TEST

START_TEST(histograms)
{
    char path[64], err[LOONG_ERRLEN];
    static const struct {
        const char *text, *says;
    } bad[] = {
        {"", "no 'LENGTH WEIGHT' line"},       {"# only a comment\n", "no 'LENGTH WEIGHT' line"},
        {"4K\n", "not 'LENGTH WEIGHT'"},       {"4K 1\n8K -2\n", "weight '-2'"},
        {"4K 0\n8K 0\n", "every weight is 0"}, {"4K one\n", "weight 'one'"},
        {"0 1\n", "must be positive"},         {"4K 1 2\n", "weight '1 2'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        temp_file(path, bad[i].text);
        err[0] = '\0';
        ck_assert_msg(docs_draw(path, 64 * K, 1, err) == NULL, "'%s' accepted", bad[i].text);
        ck_assert_msg(strstr(err, bad[i].says) != NULL, "'%s': %s", bad[i].text, err);
        unlink(path);
    }
    /* a draw fills the sequence exactly, is reproducible, and moves with the seed */
    const doc_layout *a = docs_draw(LOONG_SRCDIR "/experiments/varlen/heavy.dist", 64 * K, 7, err);
    ck_assert_msg(a != NULL, "%s", err);
    ck_assert_uint_eq(docs_tokens(a), 64 * K);
    ck_assert_ptr_eq(docs_draw(LOONG_SRCDIR "/experiments/varlen/heavy.dist", 64 * K, 7, err), a);
    ck_assert_ptr_ne(docs_draw(LOONG_SRCDIR "/experiments/varlen/heavy.dist", 64 * K, 8, err), a);
    /* only lengths of the histogram, except the last one, cut at S */
    for (int i = 0; i + 1 < docs_count(a); i++) {
        uint64_t L = docs_length(a, i);
        ck_assert_msg(L >= 128 && (L & (L - 1)) == 0, "length %llu is not in the histogram", (unsigned long long)L);
    }
}
END_TEST

/* ---- exact pairs ---- */

/* A deterministic layout of n random documents within seq (LCG). */
static const doc_layout *random_layout(uint64_t seq, unsigned seed, int maxlen)
{
    char list[4096] = "", err[LOONG_ERRLEN];
    size_t off = 0;
    uint64_t used = 0, x = seed * 2654435761u + 1;
    for (;;) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t len = 1 + (x >> 33) % (uint64_t)maxlen;
        if (used + len > seq) break;
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%llu", off ? "," : "", (unsigned long long)len);
        used += len;
    }
    const doc_layout *d = docs_parse_list(off ? list : "1", seq, "test", err);
    ck_assert_msg(d != NULL, "%s", err);
    return d;
}

/* Pairs by enumeration: key <= query, same document, neither padding. */
static uint64_t brute_pairs(const doc_layout *d, uint64_t seq, uint64_t q0, uint64_t q1, uint64_t k0, uint64_t k1)
{
    uint64_t n = 0;
    for (uint64_t q = q0; q < q1; q++)
        for (uint64_t k = k0; k < k1; k++) {
            uint64_t st = docs_window_start(d, seq, q);
            n += k <= q && k >= st;
        }
    return n;
}

START_TEST(pairs_match_enumeration)
{
    const uint64_t S = 240;
    const doc_layout *d = random_layout(S, (unsigned)_i + 1, 1 + 37 * _i);
    for (uint64_t q0 = 0; q0 < S; q0 += 13)
        for (uint64_t q1 = q0; q1 <= S; q1 += 29)
            for (uint64_t k0 = 0; k0 < S; k0 += 17)
                for (uint64_t k1 = k0; k1 <= S; k1 += 31)
                    ck_assert_uint_eq(docs_pairs(d, S, q0, q1, k0, k1), brute_pairs(d, S, q0, q1, k0, k1));
    /* no layout: one causal document */
    ck_assert_uint_eq(docs_pairs(NULL, S, 0, S, 0, S), S * (S + 1) / 2);
}
END_TEST

/* ---- token maps ---- */

static const partition_kind partitions[] = {PART_CONTIGUOUS, PART_ZIGZAG, PART_DOC_CONTIGUOUS, PART_DOC_ZIGZAG,
                                            PART_BALANCED};
#define NPART 5

static config map_config(partition_kind p, int ps, uint64_t seq, const doc_layout *d)
{
    config c = tcfg("tiny", seq, "ring", 1, ps, 0, SCOPE_ATTN);
    c.partition = p;
    c.docs = d;
    char err[LOONG_ERRLEN];
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    return c;
}

/* Every position held once, ascending within a part, S/(parts P_s) per
 * part; every pair count equal to enumeration; the total equal to the
 * layout's. */
START_TEST(maps_tile_the_sequence)
{
    static const int pss[] = {1, 2, 3, 4};
    const uint64_t S = 240;
    for (int v = 0; v < 3; v++) {
        const doc_layout *d = v == 0 ? NULL : random_layout(S - 7 * (uint64_t)v, (unsigned)(v + 10 * _i), 9 + 40 * v);
        for (int pi = 0; pi < NPART; pi++) {
            config c = map_config(partitions[pi], pss[_i], S, d);
            const shard_map *m = shard_map_of(&c);
            int parts = config_parts(&c);
            uint64_t ct = config_chunk_tokens(&c), total = 0;
            int seen[240] = {0};
            for (int s = 0; s < c.p_seq; s++)
                for (int a = 0; a < parts; a++) {
                    uint64_t held = 0, last = 0;
                    int n;
                    const shard_seg *sg = shard_segs(m, s, a, &n);
                    for (int k = 0; k < n; k++) {
                        ck_assert(k == 0 || sg[k].start > last);
                        held += sg[k].len;
                        last = sg[k].start + sg[k].len - 1;
                    }
                    ck_assert_uint_eq(held, ct);
                    for (uint64_t i = 0; i < ct; i++)
                        seen[shard_pos(m, s, a, i)]++;
                    for (int src = 0; src < c.p_seq; src++)
                        for (int b = 0; b < parts; b++) {
                            uint64_t want = 0;
                            for (uint64_t i = 0; i < ct; i++)
                                for (uint64_t j = 0; j < ct; j++) {
                                    uint64_t q = shard_pos(m, s, a, i), kp = shard_pos(m, src, b, j);
                                    want += kp <= q && kp >= docs_window_start(d, S, q);
                                }
                            ck_assert_uint_eq(shard_pairs(m, s, a, src, b), want);
                        }
                }
            for (uint64_t p = 0; p < S; p++)
                ck_assert_int_eq(seen[p], 1);
            for (int s = 0; s < c.p_seq; s++)
                total += shard_query_pairs(m, s);
            ck_assert_uint_eq(total, docs_pairs(d, S, 0, S, 0, S));
        }
    }
}
END_TEST

/* The start of the piece holding position p of part (s, a): its run of
 * consecutive positions, cut at p's document (the kernel's varlen grid). */
static uint64_t piece_start(const shard_map *m, int s, int a, const doc_layout *d, uint64_t S, uint64_t p)
{
    int n;
    const shard_seg *sg = shard_segs(m, s, a, &n);
    uint64_t run = 0, doc = docs_window_start(d, S, p);
    for (int k = 0; k < n; k++)
        if (sg[k].start <= p && p < sg[k].start + sg[k].len) run = sg[k].start;
    return run > doc ? run : doc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Distinct keys among n (sorted in place). */
static uint64_t distinct(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_u64);
    uint64_t u = 0;
    for (size_t i = 0; i < n; i++)
        u += i == 0 || v[i] != v[i - 1];
    return u;
}

/* shard_tiles against enumeration: a tile is (query piece, row tile, key
 * piece, column tile) with the grids from each piece's start, counted when
 * it holds an unmasked pair; every partition, with and without documents,
 * at 1x1 (the exact pairs) and two uneven shapes. Then shard_query_tiles,
 * the keys being whole documents. */
START_TEST(tiles_match_enumeration)
{
    static const int shapes[][2] = {{1, 1}, {3, 5}, {16, 8}};
    const uint64_t S = 240;
    uint64_t *keys = malloc(S * S * sizeof *keys);
    for (int v = 0; v < 3; v++) {
        const doc_layout *d = v == 0 ? NULL : random_layout(S - 7 * (uint64_t)v, (unsigned)(v + 10 * _i), 9 + 40 * v);
        for (int pi = 0; pi < NPART; pi++) {
            config c = map_config(partitions[pi], _i + 1, S, d);
            const shard_map *m = shard_map_of(&c);
            int parts = config_parts(&c);
            uint64_t ct = config_chunk_tokens(&c);
            for (int sh = 0; sh < 3; sh++) {
                uint64_t br = (uint64_t)shapes[sh][0], bc = (uint64_t)shapes[sh][1];
                for (int s = 0; s < c.p_seq; s++) {
                    size_t nall = 0;
                    uint64_t *all = malloc(parts * ct * S * sizeof *all);
                    for (int a = 0; a < parts; a++) {
                        for (int src = 0; src < c.p_seq; src++)
                            for (int b = 0; b < parts; b++) {
                                size_t n = 0;
                                for (uint64_t i = 0; i < ct; i++)
                                    for (uint64_t j = 0; j < ct; j++) {
                                        uint64_t q = shard_pos(m, s, a, i), kp = shard_pos(m, src, b, j);
                                        if (kp > q || kp < docs_window_start(d, S, q)) continue;
                                        uint64_t qs = piece_start(m, s, a, d, S, q),
                                                 ks = piece_start(m, src, b, d, S, kp);
                                        keys[n++] = qs << 48 | (q - qs) / br << 32 | ks << 16 | (kp - ks) / bc;
                                    }
                                ck_assert_uint_eq(shard_tiles(m, s, a, src, b, (int)br, (int)bc), distinct(keys, n));
                            }
                        for (uint64_t i = 0; i < ct; i++) /* against every key: the documents whole */
                            for (uint64_t kp = 0; kp < S; kp++) {
                                uint64_t q = shard_pos(m, s, a, i), ds = docs_window_start(d, S, q);
                                if (kp > q || kp < ds) continue;
                                uint64_t qs = piece_start(m, s, a, d, S, q);
                                all[nall++] =
                                    (uint64_t)a << 62 | qs << 48 | (q - qs) / br << 32 | ds << 16 | (kp - ds) / bc;
                            }
                    }
                    ck_assert_uint_eq(shard_query_tiles(m, s, (int)br, (int)bc), distinct(all, nall));
                    free(all);
                }
            }
        }
    }
    free(keys);
}
END_TEST

/* Closed forms: one causal document of 1024 tokens in one block is n(n+1)/2
 * tiles of 128 x 128 (n = 8) and twice that of 128 x 64 or 64 x 128; a
 * block wholly in the past is every tile; 48 documents of 5 tokens are one
 * tile each, 128 x 128 positions for 15 pairs. */
START_TEST(tiles_closed_forms)
{
    config c = map_config(PART_CONTIGUOUS, 1, 1024, NULL);
    const shard_map *m = shard_map_of(&c);
    ck_assert_uint_eq(shard_tiles(m, 0, 0, 0, 0, 128, 128), 36);
    ck_assert_uint_eq(shard_tiles(m, 0, 0, 0, 0, 128, 64), 72);
    ck_assert_uint_eq(shard_tiles(m, 0, 0, 0, 0, 64, 128), 72);
    ck_assert_uint_eq(shard_tiles(m, 0, 0, 0, 0, 1, 1), shard_pairs(m, 0, 0, 0, 0));
    c = map_config(PART_CONTIGUOUS, 2, 1024, NULL);
    m = shard_map_of(&c);
    ck_assert_uint_eq(shard_tiles(m, 1, 0, 0, 0, 128, 64), 4 * 8);
    ck_assert_uint_eq(shard_tiles(m, 0, 0, 1, 0, 128, 64), 0);
    char err[LOONG_ERRLEN] = "", list[48 * 2 + 1] = "";
    for (int i = 0; i < 48; i++)
        strcat(list, i ? ",5" : "5");
    const doc_layout *d = docs_parse_list(list, 240, "--docs", err);
    ck_assert_msg(d != NULL, "%s", err);
    c = map_config(PART_CONTIGUOUS, 1, 240, d);
    m = shard_map_of(&c);
    ck_assert_uint_eq(shard_pairs(m, 0, 0, 0, 0), 48 * 15);
    ck_assert_uint_eq(shard_tiles(m, 0, 0, 0, 0, 128, 128), 48);
}
END_TEST

/* doc-zigzag gives each ring index pieces j and 2P_s-1-j of every document:
 * with lengths that are multiples of 2P_s the work is exactly equal. */
START_TEST(doc_zigzag_balances_equal_documents)
{
    static const int pss[] = {2, 4, 8};
    int ps = pss[_i];
    char err[LOONG_ERRLEN], list[256] = "";
    uint64_t L = 2 * (uint64_t)ps * 37;
    for (int i = 0; i < 6; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%llu", i ? "," : "", (unsigned long long)L);
    const doc_layout *d = docs_parse_list(list, 6 * L, "test", err);
    config c = map_config(PART_DOC_ZIGZAG, ps, 6 * L, d);
    const shard_map *m = shard_map_of(&c);
    for (int s = 1; s < ps; s++)
        ck_assert_uint_eq(shard_query_pairs(m, s), shard_query_pairs(m, 0));
    ck_assert_uint_eq(shard_query_pairs(m, 0) * (uint64_t)ps, 6 * L * (L + 1) / 2);
}
END_TEST

/* The README's bound on the experiment's distribution: max/mean <= 1.05. */
START_TEST(balanced_on_heavy_tail)
{
    static const int pss[] = {8, 32};
    char err[LOONG_ERRLEN];
    for (unsigned seed = 1; seed <= 3; seed++) {
        const doc_layout *d = docs_draw(LOONG_SRCDIR "/experiments/varlen/heavy.dist", 1024 * K, seed, err);
        ck_assert_msg(d != NULL, "%s", err);
        config c = map_config(PART_BALANCED, pss[_i], 1024 * K, d);
        const shard_map *m = shard_map_of(&c);
        uint64_t max = 0, total = 0;
        for (int s = 0; s < c.p_seq; s++) {
            uint64_t n = shard_query_pairs(m, s);
            max = n > max ? n : max;
            total += n;
        }
        double ratio = (double)max * c.p_seq / (double)total;
        ck_assert_msg(ratio <= 1.05, "P_s %d seed %u: max/mean %.4f", c.p_seq, seed, ratio);
    }
}
END_TEST

/* ---- the DAG's masked work ---- */

typedef struct layout {
    const char *strategy;
    int ph, ps, w;
} layout;

static const layout matrix[] = {
    {"ulysses", 8, 1, 0}, {"ring", 1, 8, 0},       {"zigzag", 1, 8, 0},   {"usp", 2, 4, 0},
    {"usp", 4, 2, 0},     {"loongtrain", 2, 4, 2}, {"dualring", 2, 4, 0}, {"allgather", 2, 4, 0},
};
#define NMATRIX ((int)(sizeof matrix / sizeof matrix[0]))

/* n documents of length L: n L (L + 1) / 2 pairs of 4 d H FLOPs, under every
 * strategy and every partition it accepts. */
START_TEST(equal_documents_closed_form)
{
    const layout *l = &matrix[_i];
    char err[LOONG_ERRLEN];
    const uint64_t S = 16 * K, L = 1000, n = 16; /* 16000 tokens + 384 padding */
    const doc_layout *d = docs_parse_list("1000,1000,1000,1000,1000,1000,1000,1000,"
                                          "1000,1000,1000,1000,1000,1000,1000,1000",
                                          S, "test", err);
    for (int pi = 0; pi < NPART; pi++) {
        config c = tcfg("tiny", S, l->strategy, l->ph, l->ps, l->w, SCOPE_ATTN);
        c.docs = d;
        c.partition = partitions[pi];
        if (config_validate(&c, err) < 0) continue; /* the dual ring takes two-part partitions only */
        dag *g = tbuild(&c);
        uint64_t per_pair = 4 * (uint64_t)c.model.head_dim * (uint64_t)c.model.heads;
        ck_assert_uint_eq(sum_flops(g, -1, TASK_ATTN_FWD), n * L * (L + 1) / 2 * per_pair);
        ck_assert_uint_eq(sum_flops(g, -1, TASK_ATTN_BWD), n * L * (L + 1) / 2 * per_pair * 5 / 2);
        dag_free(g);
    }
}
END_TEST

/* A block with no unmasked pair is not emitted: documents of one chunk each
 * under the contiguous ring leave only the diagonal blocks. */
START_TEST(masked_blocks_not_emitted)
{
    char err[LOONG_ERRLEN];
    config c = tcfg("tiny", 8 * K, "ring", 1, 8, 0, SCOPE_ATTN_FWD);
    c.docs = docs_parse_list("1K,1K,1K,1K,1K,1K,1K,1K", 8 * K, "test", err);
    dag *g = tbuild(&c);
    ck_assert_uint_eq(count_tasks(g, -1, TASK_ATTN_FWD, -1), 8);
    dag_free(g);
    c.docs = NULL;
    g = tbuild(&c);
    ck_assert_uint_eq(count_tasks(g, -1, TASK_ATTN_FWD, -1), 8 * 9 / 2);
    dag_free(g);
}
END_TEST

/* ---- the caches under threads ----
 * Layouts and shard maps are interned for the process, and the executor's
 * --transport local builds one DAG per rank thread at once. Threads that
 * start together (a barrier) and ask for the same layouts and maps must all
 * get the one interned pointer: without the lock, two threads that miss
 * the cache together each insert their own copy. Fresh lengths per round,
 * so every round races on an insertion. */
enum { RACE_THREADS = 8, RACE_ROUNDS = 200 };
typedef struct race_arg {
    pthread_barrier_t *bar;
    const doc_layout *layout[RACE_ROUNDS];
    const shard_map *map[RACE_ROUNDS];
} race_arg;

static void *race(void *arg)
{
    race_arg *a = arg;
    config c = tcfg("tiny", 4096, "zigzag", 1, 4, 4, SCOPE_ATTN);
    c.partition = PART_DOC_ZIGZAG;
    for (int k = 0; k < RACE_ROUNDS; k++) {
        char list[64], err[LOONG_ERRLEN];
        snprintf(list, sizeof list, "%d,%d", 1 + k, 4095 - k);
        pthread_barrier_wait(a->bar);
        a->layout[k] = docs_parse_list(list, 4096, "--docs", err);
        c.docs = a->layout[k];
        a->map[k] = a->layout[k] ? shard_map_of(&c) : NULL;
    }
    return NULL;
}

START_TEST(caches_shared_by_threads)
{
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, RACE_THREADS);
    static race_arg a[RACE_THREADS];
    pthread_t th[RACE_THREADS];
    for (int t = 0; t < RACE_THREADS; t++) {
        a[t].bar = &bar;
        ck_assert_int_eq(pthread_create(&th[t], NULL, race, &a[t]), 0);
    }
    for (int t = 0; t < RACE_THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&bar);
    for (int k = 0; k < RACE_ROUNDS; k++) {
        ck_assert_ptr_nonnull(a[0].layout[k]);
        ck_assert_uint_eq(docs_count(a[0].layout[k]), 2);
        for (int t = 1; t < RACE_THREADS; t++) {
            ck_assert_msg(a[t].layout[k] == a[0].layout[k], "round %d: threads 0 and %d interned two layouts", k, t);
            ck_assert_msg(a[t].map[k] == a[0].map[k], "round %d: threads 0 and %d built two shard maps", k, t);
        }
    }
}
END_TEST

static Suite *docs_suite(void)
{
    Suite *s = suite_create("docs");
    TCase *tc = tcase_create("layouts");
    tcase_add_test(tc, parse_list);
    tcase_add_test(tc, bad_lists);
    tcase_add_test(tc, files);
    tcase_add_test(tc, histograms);
    tcase_add_loop_test(tc, pairs_match_enumeration, 0, 4);
    tcase_add_test(tc, caches_shared_by_threads);
    suite_add_tcase(s, tc);
    tc = tcase_create("partitions");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, maps_tile_the_sequence, 0, 4);
    tcase_add_loop_test(tc, tiles_match_enumeration, 0, 3);
    tcase_add_test(tc, tiles_closed_forms);
    tcase_add_loop_test(tc, doc_zigzag_balances_equal_documents, 0, 3);
    tcase_add_loop_test(tc, balanced_on_heavy_tail, 0, 2);
    suite_add_tcase(s, tc);
    tc = tcase_create("dag");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, equal_documents_closed_form, 0, NMATRIX);
    tcase_add_test(tc, masked_blocks_not_emitted);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return check_run(docs_suite()); }

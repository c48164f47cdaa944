/* ringgeo: ring indices, windows, lanes and blocks. See ringgeo.h. */
#include "ringgeo.h"

#include "shard.h"
#include "xalloc.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

int ringgeo_lanes(const config *c) { return c->ring == RING_DUAL ? 2 : 1; }

unsigned ringgeo_parts(const config *c) { return config_parts(c) == 2 ? 3u : 1u; }

unsigned ringgeo_lane_parts(const config *c, int lane)
{
    if (ringgeo_lanes(c) == 1) return ringgeo_parts(c);
    return lane == 0 ? 1u : 2u;
}

uint64_t ringgeo_lane_tokens(const config *c, int lane)
{
    return (uint64_t)ringgeo_count(ringgeo_lane_parts(c, lane)) * config_chunk_tokens(c);
}

int ringgeo_src_at(const config *c, int s, int o, int i)
{
    int w = c->window, p = s % w;
    return mod(s - p + mod(p - i, w) - o * w, c->p_seq);
}

int ringgeo_next(const config *c, int s, bool outer)
{
    int w = c->window, p = s % w;
    return outer ? mod(s + w, c->p_seq) : s - p + (p + 1) % w;
}

int ringgeo_prev(const config *c, int s, bool outer)
{
    int w = c->window, p = s % w;
    return outer ? mod(s - w, c->p_seq) : s - p + mod(p - 1, w);
}

/* The pairs of every (query part a, key part k) of ring indices s and src. */
static void part_pairs(const config *c, int s, int src, uint64_t n[2][2])
{
    const shard_map *m = shard_map_of(c);
    int parts = config_parts(c);
    for (int a = 0; a < 2; a++)
        for (int k = 0; k < 2; k++)
            n[a][k] = a < parts && k < parts ? shard_pairs(m, s, a, src, k) : 0;
}

static ringgeo_block block_from(const config *c, const uint64_t n[2][2], unsigned kv_parts)
{
    ringgeo_block bl = {0, 0, false, 0};
    for (int a = 0; a < 2; a++)
        for (int k = 0; k < 2; k++) {
            if (!(kv_parts >> k & 1) || !n[a][k]) continue;
            bl.q_sel |= (uint8_t)(1 << a);
            bl.kv_sel |= (uint8_t)(1 << k);
            bl.pairs += n[a][k];
        }
    uint64_t ct = config_chunk_tokens(c);
    bl.masked = bl.pairs < (uint64_t)ringgeo_count(bl.q_sel) * ct * (uint64_t)ringgeo_count(bl.kv_sel) * ct;
    return bl;
}

ringgeo_block ringgeo_block_of(const config *c, int s, int src, unsigned kv_parts)
{
    uint64_t n[2][2];
    part_pairs(c, s, src, n);
    return block_from(c, n, kv_parts);
}

uint64_t ringgeo_query_pairs(const config *c, int s) { return shard_query_pairs(shard_map_of(c), s); }

struct ringgeo_blocks {
    int p_seq;
    ringgeo_block *v; /* [s][src][kv_parts 1..3] */
};

ringgeo_blocks *ringgeo_blocks_new(const config *c)
{
    ringgeo_blocks *b = xcalloc(1, sizeof *b, "the ring's blocks");
    size_t n = (size_t)c->p_seq * (size_t)c->p_seq * 3;
    b->p_seq = c->p_seq;
    b->v = xmalloc_array(n, sizeof *b->v, "the ring's blocks");
    for (int s = 0; s < c->p_seq; s++)
        for (int src = 0; src < c->p_seq; src++) {
            uint64_t n[2][2];
            part_pairs(c, s, src, n);
            for (unsigned parts = 1; parts <= 3; parts++)
                b->v[((size_t)s * (size_t)c->p_seq + (size_t)src) * 3 + parts - 1] = block_from(c, n, parts);
        }
    return b;
}

const ringgeo_block *ringgeo_blocks_get(const ringgeo_blocks *b, int s, int src, unsigned kv_parts)
{
    return &b->v[((size_t)s * (size_t)b->p_seq + (size_t)src) * 3 + kv_parts - 1];
}

void ringgeo_blocks_free(ringgeo_blocks *b)
{
    if (!b) return;
    free(b->v);
    free(b);
}

/* tiles: attention work at the kernel's tile granularity. See tiles.h. */
#include "tiles.h"

#include <stdlib.h>

#include "core/shard.h"
#include "core/xalloc.h"

struct tiles {
    const config *c;
    const shard_map *m;
    int tile[2][2];         /* [forward, backward][rows, columns]; 0: exact pairs */
    const uint64_t *tab[2]; /* the shard map's tile table of each pass's shape (lock-free reads) */
    double *query[2];       /* [pass][s]: the all-gather block's ratio, 0 until computed */
};

/* tl with its passes' shapes set: the map and tables. */
static tiles *tiles_init(tiles *tl, const config *c)
{
    tl->c = c;
    tl->m = shard_map_of(c);
    for (int p = 0; p < 2; p++)
        if (tl->tile[p][0]) tl->tab[p] = shard_tile_table(tl->m, tl->tile[p][0], tl->tile[p][1]);
    return tl;
}

tiles *tiles_new(const calib *cb, const config *c)
{
    tiles *tl = xcalloc(1, sizeof *tl, "the attention tile work");
    bool any = false;
    for (int p = 0; p < 2; p++)
        any |= calib_tile(cb, p ? TASK_ATTN_BWD : TASK_ATTN_FWD, &tl->tile[p][0], &tl->tile[p][1]);
    if (!any) {
        free(tl);
        return NULL;
    }
    return tiles_init(tl, c);
}

tiles *tiles_new_shape(const config *c, int br, int bc)
{
    if (br <= 0 || bc <= 0) return NULL;
    tiles *tl = xcalloc(1, sizeof *tl, "the attention tile work");
    for (int p = 0; p < 2; p++)
        tl->tile[p][0] = br, tl->tile[p][1] = bc;
    return tiles_init(tl, c);
}

void tiles_free(tiles *tl)
{
    if (!tl) return;
    free(tl->query[0]);
    free(tl->query[1]);
    free(tl);
}

/* Tiles x area over exact pairs of ring index s's queries (parts q_sel)
 * against src's keys (parts kv_sel) at pass p's tile. */
static double block_ratio(const tiles *tl, int p, int s, int src, unsigned q_sel, unsigned kv_sel)
{
    int parts = config_parts(tl->c);
    size_t owners = (size_t)tl->c->p_seq * (size_t)parts;
    uint64_t pairs = 0, n = 0;
    for (int a = 0; a < parts; a++)
        for (int k = 0; k < parts; k++) {
            if (!(q_sel >> a & 1) || !(kv_sel >> k & 1)) continue;
            pairs += shard_pairs(tl->m, s, a, src, k);
            n += tl->tab[p][(size_t)(s * parts + a) * owners + (size_t)(src * parts + k)];
        }
    return pairs ? (double)n * tl->tile[p][0] * tl->tile[p][1] / (double)pairs : 1;
}

/* The same for s's queries against every key (the all-gather's block),
 * computed once per s. */
static double query_ratio(tiles *tl, int p, int s)
{
    if (!tl->query[p]) tl->query[p] = xcalloc((size_t)tl->c->p_seq, sizeof *tl->query[p], "the attention tile work");
    double *r = &tl->query[p][s];
    if (*r == 0) {
        uint64_t pairs = shard_query_pairs(tl->m, s);
        uint64_t n = shard_query_tiles(tl->m, s, tl->tile[p][0], tl->tile[p][1]);
        *r = pairs ? (double)n * tl->tile[p][0] * tl->tile[p][1] / (double)pairs : 1;
    }
    return *r;
}

double tiles_ratio(tiles *tl, int kind, int s, int src, unsigned q_sel, unsigned kv_sel)
{
    int p = kind == TASK_ATTN_BWD;
    if (!tl || (kind != TASK_ATTN_FWD && kind != TASK_ATTN_BWD) || !tl->tile[p][0]) return 1;
    return src < 0 ? query_ratio(tl, p, s) : block_ratio(tl, p, s, src, q_sel, kv_sel);
}

double tiles_task_flops(tiles *tl, const dag_task *t)
{
    if (!tl || (t->kind != TASK_ATTN_FWD && t->kind != TASK_ATTN_BWD)) return (double)t->flops;
    int h, s;
    config_coords(tl->c, t->rank, &h, &s);
    int src = tl->c->ring == RING_ALLGATHER ? -1 : t->src;
    return (double)t->flops * tiles_ratio(tl, t->kind, s, src, SEL_Q(t->sel), SEL_KV(t->sel));
}

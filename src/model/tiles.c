/* tiles: attention work at the kernel's tile granularity. See tiles.h. */
#include "tiles.h"

#include <stdlib.h>

#include "core/ringgeo.h"
#include "core/shard.h"
#include "core/xalloc.h"

struct tiles {
    const config *c;
    const shard_map *m;
    int tile[2][2];   /* [forward, backward][rows, columns]; 0: exact pairs */
    double *ratio[2]; /* [pass][(s * (P_s + 1) + src + 1) * 16 + q_sel | kv_sel << 2]; 0: not yet */
};

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
    tl->c = c;
    tl->m = shard_map_of(c);
    return tl;
}

void tiles_free(tiles *tl)
{
    if (!tl) return;
    free(tl->ratio[0]);
    free(tl->ratio[1]);
    free(tl);
}

/* Tiles x area over exact pairs of one block at pass p's tile. */
static double block_ratio(const tiles *tl, int p, int s, int src, unsigned q_sel, unsigned kv_sel)
{
    int br = tl->tile[p][0], bc = tl->tile[p][1];
    uint64_t pairs = 0, n = 0;
    if (src < 0) {
        pairs = shard_query_pairs(tl->m, s);
        n = shard_query_tiles(tl->m, s, br, bc);
    } else {
        for (int a = 0; a < 2; a++)
            for (int k = 0; k < 2; k++) {
                if (!(q_sel >> a & 1) || !(kv_sel >> k & 1) || a >= config_parts(tl->c) || k >= config_parts(tl->c))
                    continue;
                pairs += shard_pairs(tl->m, s, a, src, k);
                n += shard_tiles(tl->m, s, a, src, k, br, bc);
            }
    }
    return pairs ? (double)n * br * bc / (double)pairs : 1;
}

double tiles_ratio(tiles *tl, int kind, int s, int src, unsigned q_sel, unsigned kv_sel)
{
    int p = kind == TASK_ATTN_BWD;
    if (!tl || (kind != TASK_ATTN_FWD && kind != TASK_ATTN_BWD) || !tl->tile[p][0]) return 1;
    size_t ps = (size_t)tl->c->p_seq;
    if (!tl->ratio[p]) tl->ratio[p] = xcalloc(ps * (ps + 1) * 16, sizeof *tl->ratio[p], "the attention tile work");
    double *r = &tl->ratio[p][((size_t)s * (ps + 1) + (size_t)(src + 1)) * 16 + (q_sel & 3) + ((kv_sel & 3) << 2)];
    if (*r == 0) *r = block_ratio(tl, p, s, src, q_sel, kv_sel);
    return *r;
}

double tiles_task_flops(tiles *tl, const dag_task *t)
{
    if (!tl || (t->kind != TASK_ATTN_FWD && t->kind != TASK_ATTN_BWD)) return (double)t->flops;
    int h, s;
    config_coords(tl->c, t->rank, &h, &s);
    int src = tl->c->ring == RING_ALLGATHER ? -1 : t->src;
    return (double)t->flops * tiles_ratio(tl, t->kind, s, src, SEL_Q(t->sel), SEL_KV(t->sel));
}

/* strategy: named presets over the config knobs. See strategy.h.
 * Everything about a strategy is its row in `strategies`: the CLI's help
 * and errors, the preset, and the name `loong plan` gives a layout. */
#include "strategy.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef enum { SPLIT_HEAD, SPLIT_SEQ, SPLIT_2D } mesh_split;

typedef struct strategy {
    const char *name;
    const char *summary;
    mesh_split split;
    partition_kind partition;
    ring_kind ring;
} strategy;

static const strategy strategies[] = {
    {"ulysses", "head parallel only: P_h = P, all-to-all (DeepSpeed-Ulysses)", SPLIT_HEAD, PART_ZIGZAG, RING_SINGLE},
    {"ring", "sequence parallel only: P_s = P, contiguous chunks, one ring", SPLIT_SEQ, PART_CONTIGUOUS, RING_SINGLE},
    {"zigzag", "sequence parallel only: P_s = P, zigzag chunks, one ring (Megatron-CP)", SPLIT_SEQ, PART_ZIGZAG,
     RING_SINGLE},
    {"usp", "2D head x ring, zigzag, one ring (USP)", SPLIT_2D, PART_ZIGZAG, RING_SINGLE},
    {"loongtrain", "2D head x ring, zigzag, double ring with window w (LoongTrain)", SPLIT_2D, PART_ZIGZAG,
     RING_DOUBLE},
    {"dualring", "2D head x ring, zigzag, chunk A and chunk B on two rings (the seed's A/B rings)", SPLIT_2D,
     PART_ZIGZAG, RING_DUAL},
    {"allgather", "2D head x context, zigzag, KV all-gathered per layer (Llama 3 CP; --kv-stride)", SPLIT_2D,
     PART_ZIGZAG, RING_ALLGATHER},
};
#define NSTRATEGIES (sizeof strategies / sizeof strategies[0])

const char *strategy_help(void)
{
    static char buf[1024];
    if (!buf[0]) {
        size_t off = 0;
        for (size_t i = 0; i < NSTRATEGIES; i++)
            off += (size_t)snprintf(buf + off, sizeof buf - off, "    %-11s %s\n", strategies[i].name,
                                    strategies[i].summary);
    }
    return buf;
}

static const strategy *strategy_find(const char *name)
{
    for (size_t i = 0; i < NSTRATEGIES; i++)
        if (!strcmp(strategies[i].name, name)) return &strategies[i];
    return NULL;
}

/* "a, b or c" of the strategies with split `only` (or all when only < 0). */
static void names_of(int only, char *buf, size_t len)
{
    size_t n = 0, count = 0, k = 0;
    for (size_t i = 0; i < NSTRATEGIES; i++)
        count += only < 0 || strategies[i].split == (mesh_split)only;
    buf[0] = '\0';
    for (size_t i = 0; i < NSTRATEGIES && n < len; i++) {
        if (only >= 0 && strategies[i].split != (mesh_split)only) continue;
        const char *sep = k == 0 ? "" : k + 1 == count ? " or " : ", ";
        n += (size_t)snprintf(buf + n, len - n, "%s%s", sep, strategies[i].name);
        k++;
    }
}

static bool split_fits(mesh_split split, const config *c)
{
    if (split == SPLIT_HEAD) return c->p_seq == 1;
    if (split == SPLIT_SEQ) return c->p_head == 1;
    return true;
}

const char *strategy_name_of(const config *c)
{
    const strategy *best = NULL;
    for (size_t i = 0; i < NSTRATEGIES; i++) {
        const strategy *st = &strategies[i];
        if (!split_fits(st->split, c) || st->ring != c->ring) continue;
        if (st->partition == c->partition || c->p_seq == 1) return st->name;
        if (!best) best = st;
    }
    return best ? best->name : "custom";
}

/* P_h splits the heads of one TP shard (config_validate's rule). */
static bool head_degree_ok(const config *c, int ph)
{
    int heads = config_tp_heads(c), kv = config_tp_kv_heads(c);
    if (c->model.heads % c->tp || c->model.kv_heads % c->tp) return true; /* config_validate names the tp */
    if (heads % ph) return false;
    if (ph <= kv) return kv % ph == 0;
    return c->kv_replication && ph % kv == 0;
}

/* Largest valid P_h that divides P and stays within one node beside TP. */
static int default_head_degree(const config *c, int p)
{
    int best = 1, room = c->tp < c->gpus_per_node ? c->gpus_per_node / c->tp : 1;
    for (int ph = 1; ph <= p && ph <= room; ph++)
        if (p % ph == 0 && head_degree_ok(c, ph)) best = ph;
    return best;
}

static int largest_divisor_at_most(int n, int cap)
{
    for (int w = cap < n ? cap : n; w > 1; w--)
        if (n % w == 0) return w;
    return 1;
}

int strategy_default_window(const config *c)
{
    mesh m = config_mesh(c);
    int stride = mesh_stride(&m, MESH_SEQ);
    int per_node = stride < c->gpus_per_node ? c->gpus_per_node / stride : 1;
    int w = largest_divisor_at_most(c->p_seq, per_node);
    if (w == 1) w = largest_divisor_at_most(c->p_seq, (int)floor(sqrt((double)c->p_seq)));
    return w;
}

static int split_mesh(const strategy *st, int ph, int ps, int p, config *c, char err[LOONG_ERRLEN])
{
    if (ph > 0) {
        if ((st->split == SPLIT_HEAD && ps != 1) || (st->split == SPLIT_SEQ && ph != 1)) {
            char two_d[128];
            names_of(SPLIT_2D, two_d, sizeof two_d);
            snprintf(err, LOONG_ERRLEN, "strategy %s needs %s, got mesh %dx%d: use --mesh %d or a 2D strategy (%s)",
                     st->name, st->split == SPLIT_HEAD ? "P_s = 1" : "P_h = 1", ph, ps, ph * ps, two_d);
            return -1;
        }
        c->p_head = ph;
        c->p_seq = ps;
        return 0;
    }
    switch (st->split) {
    case SPLIT_HEAD: c->p_head = p, c->p_seq = 1; break;
    case SPLIT_SEQ: c->p_head = 1, c->p_seq = p; break;
    case SPLIT_2D:
        c->p_head = default_head_degree(c, p);
        c->p_seq = p / c->p_head;
        break;
    }
    return 0;
}

int strategy_apply(const char *name, int p_head, int p_seq, int p_total, config *c, char err[LOONG_ERRLEN])
{
    const strategy *st = strategy_find(name);
    if (!st) {
        char all[160];
        names_of(-1, all, sizeof all);
        snprintf(err, LOONG_ERRLEN, "unknown strategy '%.40s': use %s", name, all);
        return -1;
    }
    if (split_mesh(st, p_head, p_seq, p_total, c, err) < 0) return -1;
    snprintf(c->strategy, sizeof c->strategy, "%s", st->name);
    c->partition = st->partition;
    c->ring = st->ring;
    c->window = st->ring == RING_DOUBLE ? strategy_default_window(c) : c->p_seq;
    return 0;
}

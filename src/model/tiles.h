/*
 * tiles: the work an attention kernel does at its tile granularity. A
 * FlashAttention-style kernel computes Br x Bc tiles of (query, key)
 * pairs and pays for a partly masked tile in full: a causal diagonal, a
 * packed document's short piece, a block smaller than a tile. The DAG
 * keeps the exact pairs as its FLOPs (MFU counts those); a calibration
 * table with `tile` lines (calib.h) times an attention task by the tiles
 * its block touches instead (core/shard.h's shard_tiles):
 *
 *   work = task FLOPs x tiles x Br x Bc / exact pairs of the block,
 *
 * per kind, with the forward's and the backward's tile shapes. A block is
 * ring index s's queries (parts SEL_Q) against ring index src's keys
 * (parts SEL_KV); the all-gather's is s's queries against every key.
 *
 * The tile counts come from the shard map's tables, built once per tile
 * shape and shared; the all-gather's ratios are kept per ring index in
 * the object: not thread-safe, one object per simulation or planner
 * thread.
 *
 * Layer: model (uses core only).
 */
#ifndef LOONG_TILES_H
#define LOONG_TILES_H

#include "calib.h"

/* The tile work of c's attention under cb's tile shapes; NULL when cb
 * declares no tile for either attention kind (every task is then timed
 * by its exact FLOPs). */
tiles *tiles_new(const calib *cb, const config *c);
/* The same with one br x bc tile for both passes (what `loong calibrate`
 * tries); NULL for 0 x 0 (exact pairs). */
tiles *tiles_new_shape(const config *c, int br, int bc);
void tiles_free(tiles *tl);

/* The FLOPs the kernel of task t computes: t->flops scaled as above for an
 * attention task of a kind with a tile, else t->flops. */
double tiles_task_flops(tiles *tl, const dag_task *t);

/* The same ratio (tiles x area / pairs, >= 1) for a block of ring index s
 * against src's parts kv_sel with queries q_sel, or (src < 0) against every
 * key, for callers without a task (the analytical model); 1 without a tile. */
double tiles_ratio(tiles *tl, int kind, int s, int src, unsigned q_sel, unsigned kv_sel);

#endif

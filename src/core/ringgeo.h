/*
 * ringgeo: the geometry of the KV ring, defined once for the DAG builder
 * (ring.c), the analytical and memory models and the executor. Pure
 * functions of a validated config; they work on ring indices s in [0, P_s)
 * (config_rank_of() turns one into a rank).
 *
 * Windows: the P_s ring indices form P_s/w windows of w consecutive
 * indices (DESIGN.md, LoongTrain's double ring). Inside a window KV moves
 * to the next index (the inner ring); on entering window o a rank also
 * sends the KV it holds w indices on (the outer ring). A single ring is
 * w = P_s, the all-outer ring w = 1.
 *
 * Parts and lanes: ring index s owns part A (bit 0) and, under a two-part
 * partition, part B (bit 1), each config_chunk_tokens(c) tokens (shard.h
 * says which).
 * The dual ring carries part A on lane 0 and part B on lane 1, each on its
 * own streams; every other ring has one lane with all parts.
 *
 * Layer: core (config only).
 */
#ifndef LOONG_RINGGEO_H
#define LOONG_RINGGEO_H

#include "config.h"

/* Lanes of the ring: 2 for the dual ring, else 1. */
int ringgeo_lanes(const config *c);
/* The parts a ring index owns: 1 (contiguous) or 3 (zigzag, A and B). */
unsigned ringgeo_parts(const config *c);
/* The parts lane `lane` (< ringgeo_lanes(c)) carries. */
unsigned ringgeo_lane_parts(const config *c, int lane);
/* Chunks in a part mask (0, 1 or 2). */
static inline int ringgeo_count(unsigned parts) { return (int)(parts & 1) + (int)((parts >> 1) & 1); }
/* Tokens per sample that lane `lane` carries: its parts x the chunk. */
uint64_t ringgeo_lane_tokens(const config *c, int lane);

/* Windows of the double ring: P_s / w (1 for a single ring). */
static inline int ringgeo_windows(const config *c) { return c->p_seq / c->window; }
/* Ring index whose KV ring index s holds at outer step o, inner step i. */
int ringgeo_src_at(const config *c, int s, int o, int i);
/* The ring index s sends to (next) and receives from (prev), on the inner
 * ring (within s's window) or the outer ring (w indices on). */
int ringgeo_next(const config *c, int s, bool outer);
int ringgeo_prev(const config *c, int s, bool outer);

/* Unmasked pairs of one sample of ring index s's queries against every
 * key: the work of the all-gather's one block (shard_query_pairs). */
uint64_t ringgeo_query_pairs(const config *c, int s);

/* One attention block: ring index s's queries against the parts kv_parts
 * of ring index src's KV, under the document-causal mask of c->docs
 * (docs.h). A (query part, key part) pair with no unmasked (query, key)
 * pair takes no part; a block with pairs == 0 is not emitted. */
typedef struct ringgeo_block {
    uint8_t q_sel, kv_sel; /* parts of the queries and of the KV that take part */
    bool masked;           /* fewer unmasked pairs than rows x columns: the kernel masks */
    uint64_t pairs;        /* exact unmasked (query, key) pairs of one sample */
} ringgeo_block;
ringgeo_block ringgeo_block_of(const config *c, int s, int src, unsigned kv_parts);

/* Every block of a config, computed once: the DAG builder asks for each
 * (s, src, parts) once per rank, layer and phase, and with many documents
 * a block costs O(documents in a chunk). */
typedef struct ringgeo_blocks ringgeo_blocks;
ringgeo_blocks *ringgeo_blocks_new(const config *c);
const ringgeo_block *ringgeo_blocks_get(const ringgeo_blocks *b, int s, int src, unsigned kv_parts);
void ringgeo_blocks_free(ringgeo_blocks *b);

#endif

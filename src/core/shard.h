/*
 * shard: which tokens of the packed sequence each ring index holds (the
 * partition, --partition). Ring index s holds config_parts(c) parts of
 * exactly config_chunk_tokens(c) tokens each, under every partition, so
 * every shard has the same memory and every KV transfer the same size;
 * the partitions differ in which positions a part holds:
 *
 *   contiguous      part A of s is chunk s of P_s equal chunks;
 *   zigzag          parts A and B of s are chunks s and 2P_s-1-s of 2P_s;
 *   doc-contiguous  every document (and the padding) is split into P_s
 *                   pieces, piece j to ring index j (ring-flash-attention's
 *                   varlen ring);
 *   doc-zigzag      every document into 2P_s pieces, pieces j and
 *                   2P_s-1-j to ring index j (TransformerEngine's THD,
 *                   ring-flash-attention's zigzag varlen);
 *   balanced        the sequence cut into 2KP_s equal cells, dealt to the
 *                   ring indices by a snake draft over the cells sorted by
 *                   unmasked work (shard.c states the bound).
 *
 * A piece of a split document gets floor or ceil of L/n tokens; the
 * ceilings rotate over the ring indices from one document to the next, so
 * the totals come out equal (S is a multiple of the pieces per document).
 * A part's positions are ascending.
 *
 * Maps are immutable and interned per (layout, S, P_s, partition), like
 * document layouts: building one is not thread-safe, reading one is.
 *
 * Layer: core (config and docs only).
 */
#ifndef LOONG_SHARD_H
#define LOONG_SHARD_H

#include "config.h"

typedef struct shard_map shard_map;

/* One run of consecutive positions: [start, start + len). */
typedef struct shard_seg {
    uint64_t start, len;
} shard_seg;

/* The map of a validated config (built on first use). */
const shard_map *shard_map_of(const config *c);

/* Position in the packed sequence of token i (< config_chunk_tokens) of
 * part `part` of ring index s. O(log segments). */
uint64_t shard_pos(const shard_map *m, int s, int part, uint64_t i);

/* The runs of part `part` of ring index s, ascending; *n of them. */
const shard_seg *shard_segs(const shard_map *m, int s, int part, int *n);

/* Unmasked (query, key) pairs of one sample between the queries of part a
 * of ring index s and the keys of part k of ring index src, under the
 * document-causal mask. */
uint64_t shard_pairs(const shard_map *m, int s, int a, int src, int k);

/* Unmasked pairs of every query of ring index s (all its parts) against
 * every key: the attention work that index does, whatever the strategy. */
uint64_t shard_query_pairs(const shard_map *m, int s);

/* The same at the tile granularity of a FlashAttention-style kernel
 * with br x bc tiles (query rows x key columns): the tiles that hold at
 * least one unmasked pair, each computed in full, per sample and head. The
 * kernel's grid starts at the first position of every piece, a run of
 * consecutive positions of a part within one document (a varlen
 * sequence: cu_seqlens), on both sides. br = bc = 1: shard_pairs. */
uint64_t shard_tiles(const shard_map *m, int s, int a, int src, int k, int br, int bc);
/* The table behind shard_tiles for one shape, built once (thread-safe):
 * entry [(s * parts + a) * owners + src * parts + k], owners = P_s x parts;
 * reading it takes no lock. */
const uint64_t *shard_tile_table(const shard_map *m, int br, int bc);

/* The same for ring index s's queries against every key of the sequence
 * (the all-gather's block: the gathered keys are whole documents). */
uint64_t shard_query_tiles(const shard_map *m, int s, int br, int bc);

#endif

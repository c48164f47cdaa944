/*
 * docs: the documents packed into one sample, and the exact work of
 * attention under the document-causal mask (a token attends to earlier
 * tokens of its own document only). A layout is a list of document
 * lengths laid end to end from token 0; tokens after the last document are
 * padding, which attends to nothing. NULL stands for one document of the
 * whole sequence, the causal mask of a single sample.
 *
 * Layouts are immutable and interned: every layout made here lives until
 * the process exits, so configs (plain values, copied freely) hold a
 * pointer to one. Making layouts is not thread-safe; reading them is.
 *
 * Layer: core (libc and jansson only: it knows no predictor, measurement or backend).
 */
#ifndef LOONG_DOCS_H
#define LOONG_DOCS_H

#include <jansson.h>

#include "units.h"

typedef struct doc_layout doc_layout;

/* "512K,256K,8192": lengths with K/M/G (binary), each at least 1, summing to
 * at most seq (the rest is padding). NULL with a message naming `what`
 * (e.g. "--docs") and the fix otherwise. */
const doc_layout *docs_parse_list(const char *s, uint64_t seq, const char *what, char err[LOONG_ERRLEN]);
/* The same from a file of one length per line ('#' comments). */
const doc_layout *docs_load_file(const char *path, uint64_t seq, char err[LOONG_ERRLEN]);
/* Draw a packing from a length histogram (lines "LENGTH WEIGHT", '#'
 * comments, weights >= 0, one positive): documents are drawn i.i.d. by
 * weight (POSIX erand48 seeded from seed, the same on every machine) and
 * laid end to end; the one that reaches seq is cut there, as a packer cuts
 * at the sequence end. NULL with a message for a malformed, empty or
 * all-zero histogram. */
const doc_layout *docs_draw(const char *path, uint64_t seq, uint64_t seed, char err[LOONG_ERRLEN]);
/* The two above from a file's text (path names it in messages). */
const doc_layout *docs_parse_lines(const char *text, const char *path, uint64_t seq, char err[LOONG_ERRLEN]);
const doc_layout *docs_draw_text(const char *text, const char *path, uint64_t seq, uint64_t seed,
                                 char err[LOONG_ERRLEN]);

int docs_count(const doc_layout *d);
uint64_t docs_length(const doc_layout *d, int i);
uint64_t docs_start(const doc_layout *d, int i);
/* Tokens of all documents: what is not padding. */
uint64_t docs_tokens(const doc_layout *d);
/* 64-bit FNV-1a of the lengths (each 8 bytes, least significant first)
 * from hash.h's compatibility basis: equal layouts hash equal. */
uint64_t docs_hash(const doc_layout *d);

/* The start of the document of token pos (the first token it may attend
 * to), or pos + 1 when pos is padding (it attends to nothing). With d ==
 * NULL, 0. O(log documents). */
uint64_t docs_window_start(const doc_layout *d, uint64_t seq, uint64_t pos);

/* Unmasked (query, key) pairs of one sample between the query tokens
 * [q0, q1) and the key tokens [k0, k1): key <= query, same document. Exact;
 * O(log documents + the documents between max(q0, k0) and min(q1, k1)). */
uint64_t docs_pairs(const doc_layout *d, uint64_t seq, uint64_t q0, uint64_t q1, uint64_t k0, uint64_t k1);

/* {"count", "tokens", "hash", "lengths": [...]} (caller owns it). */
json_t *docs_to_json(const doc_layout *d);
/* Parse what docs_to_json wrote. NULL with a message. */
const doc_layout *docs_from_json(const json_t *j, uint64_t seq, char err[LOONG_ERRLEN]);
/* The lengths as a comma list (the --docs spelling); malloc'd. */
char *docs_format(const doc_layout *d);

#endif

/*
 * hash: the one 64-bit FNV-1a of loong (Fowler, Noll and Vo; the constants
 * are the 64-bit offset basis and prime of the FNV reference,
 * http://www.isthe.com/chongo/tech/comp/fnv/ and draft-eastlake-fnv). For
 * equality keys and fingerprints, never for security.
 *
 * Layer: core (libc only).
 */
#ifndef LOONG_HASH_H
#define LOONG_HASH_H

#include <stddef.h>
#include <stdint.h>

/* The standard 64-bit offset basis and prime. */
#define HASH_FNV1A_BASIS 14695981039346656037ull
#define HASH_FNV1A_PRIME 1099511628211ull

/* A compatibility basis: 1469598103934665603, the standard basis with its
 * last digit lost, which the document layouts' hash (docs.c) has always
 * started from. That hash is persisted: the "hash" of a configuration's
 * "docs" object in every trace, DAG JSON and configuration written so far,
 * and the "(%016llx)" of config_describe's table headers. Starting it from
 * the standard basis would change every one of them, so it keeps this one
 * (still FNV-1a's mixing, only another start). Nothing new uses it. */
#define HASH_FNV1A_LEGACY_DOCS_BASIS 1469598103934665603ull

/* FNV-1a over the n bytes at p, continuing from h (HASH_FNV1A_BASIS to
 * start): hash_fnv1a(hash_fnv1a(b, x, n), y, m) hashes x then y. */
uint64_t hash_fnv1a(uint64_t h, const void *p, size_t n);

/* FNV-1a over the 8 bytes of v, least significant first, continuing from
 * h: the same value on every host, whatever its byte order. */
uint64_t hash_fnv1a_u64(uint64_t h, uint64_t v);

#endif

/* hash: 64-bit FNV-1a. See hash.h. */
#include "hash.h"

uint64_t hash_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= HASH_FNV1A_PRIME;
    }
    return h;
}

uint64_t hash_fnv1a_u64(uint64_t h, uint64_t v)
{
    for (int b = 0; b < 8; b++) {
        h ^= (v >> (8 * b)) & 0xff;
        h *= HASH_FNV1A_PRIME;
    }
    return h;
}

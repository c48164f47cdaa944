/*
 * units: sizes with K/M/G suffixes and overflow-checked 64-bit arithmetic.
 *
 * Low-level: depends on nothing else in loong. Every quantity that the core
 * derives from user input (tokens, FLOPs, bytes) goes through the checked
 * helpers, so an overflow is an error with a message rather than a wrapped
 * number.
 *
 * Layer: core (libc and jansson only: it knows no predictor, measurement or backend).
 */
#ifndef LOONG_UNITS_H
#define LOONG_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOONG_ERRLEN 256

/* Prepend prefix to the message already in err (truncating safely), for
 * adding context such as "file:line: " as an error travels up. */
void loong_err_prefix(char err[LOONG_ERRLEN], const char *prefix);

/* Parse a positive count such as "4096", "128K", "1M" or "2G" (binary
 * multiples: K = 1024). Returns 0 and sets *out, or -1 with a message in err
 * for empty, zero, negative, non-numeric, fractional or overflowing input.
 * `what` names the quantity in the message (e.g. "--seq"). */
int units_parse_count(const char *s, const char *what, uint64_t *out, char err[LOONG_ERRLEN]);

/* Parse a positive integer without suffix that fits in an int. Same errors. */
int units_parse_int(const char *s, const char *what, int *out, char err[LOONG_ERRLEN]);

/* Format a token count the way users write it: 131072 -> "128K". Exact
 * multiples only; otherwise the plain number. Returns buf. */
const char *units_fmt_count(uint64_t n, char *buf, size_t len);

/* Parse a positive real with an optional decimal SI prefix: "989T" =
 * 989e12, "2.5G", "1e9", "780" (k/K, M, G, T, P = 10^3..10^15). For rates
 * such as FLOP/s. Returns 0 and sets *out, or -1 with a message naming
 * `what` for empty, non-positive, non-finite or malformed input. */
int units_parse_si(const char *s, const char *what, double *out, char err[LOONG_ERRLEN]);

/* Parse a bandwidth into bytes per second: a decimal SI prefix then "Bps"
 * (bytes/s) or "bps" (bits/s), e.g. "450GBps" = 450e9, "400Gbps" = 50e9,
 * "3.35TBps". A bare number is bytes/s. Same errors as units_parse_si. */
int units_parse_bandwidth(const char *s, const char *what, double *out, char err[LOONG_ERRLEN]);

/* Parse a duration into seconds: a number with "s", "ms", "us" or "ns", e.g.
 * "4us" = 4e-6; a bare number is seconds. Zero is allowed ("0us"); negative,
 * non-finite or malformed input is an error. */
int units_parse_time(const char *s, const char *what, double *out, char err[LOONG_ERRLEN]);

/* Parse a memory size into bytes: a number with "B", "KB", "MB", "GB", "TB"
 * (decimal, 1 GB = 1e9) or "KiB", "MiB", "GiB", "TiB" (binary, 1 GiB =
 * 2^30), e.g. "80GB", "141GB", "79.6GiB". The unit is required: a bare
 * number or an unknown unit is an error, as are zero, negative, non-finite
 * and malformed input. Returns 0 and sets *out, or -1 with a message naming
 * `what`. */
int units_parse_mem(const char *s, const char *what, double *out, char err[LOONG_ERRLEN]);

/* Checked arithmetic: return false on overflow (out is then unspecified). */
static inline bool units_mul(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline bool units_add(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }

/* The last i in [0, n) with v[i] <= x, for ascending v with v[0] <= x (run
 * and document offsets): binary search. */
static inline int units_last_at_most(const uint64_t *v, int n, uint64_t x)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (v[mid] <= x)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}
/* Product of n factors; false on overflow. */
bool units_mul_n(uint64_t *out, int n, const uint64_t *factors);

#endif

/* units: size parsing and checked arithmetic. See units.h. */
#include "units.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int suffix_shift(char c)
{
    switch (c) {
    case 'k':
    case 'K': return 10;
    case 'm':
    case 'M': return 20;
    case 'g':
    case 'G': return 30;
    case 't':
    case 'T': return 40;
    default: return -1;
    }
}

int units_parse_count(const char *s, const char *what, uint64_t *out, char err[LOONG_ERRLEN])
{
    if (!s || !*s) {
        snprintf(err, LOONG_ERRLEN, "%s is empty: give a positive count such as 4096 or 128K", what);
        return -1;
    }
    if (!isdigit((unsigned char)s[0])) {
        snprintf(err, LOONG_ERRLEN,
                 "%s '%s' is not a positive count: use digits with an optional K/M/G suffix, e.g. 128K", what, s);
        return -1;
    }
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE) {
        snprintf(err, LOONG_ERRLEN, "%s '%s' overflows 64 bits: use a smaller value", what, s);
        return -1;
    }
    int shift = 0;
    if (*end) {
        shift = suffix_shift(*end);
        if (shift < 0 || end[1] != '\0') {
            snprintf(err, LOONG_ERRLEN,
                     "%s '%s' is not a positive count: use digits with an optional K/M/G/T suffix, e.g. 128K", what, s);
            return -1;
        }
    }
    if (v == 0) {
        snprintf(err, LOONG_ERRLEN, "%s must be positive, got '%s'", what, s);
        return -1;
    }
    if (shift && v > (UINT64_MAX >> shift)) {
        snprintf(err, LOONG_ERRLEN, "%s '%s' overflows 64 bits: use a smaller value", what, s);
        return -1;
    }
    *out = (uint64_t)v << shift;
    return 0;
}

int units_parse_int(const char *s, const char *what, int *out, char err[LOONG_ERRLEN])
{
    uint64_t v;
    if (units_parse_count(s, what, &v, err) < 0) return -1;
    if (v > INT_MAX) {
        snprintf(err, LOONG_ERRLEN, "%s '%s' is too large (at most %d)", what, s, INT_MAX);
        return -1;
    }
    *out = (int)v;
    return 0;
}

const char *units_fmt_count(uint64_t n, char *buf, size_t len)
{
    static const char sfx[] = "KMGT";
    int i = -1;
    while (i < 3 && n >= 1024 && n % 1024 == 0) {
        n /= 1024;
        i++;
    }
    if (i < 0)
        snprintf(buf, len, "%llu", (unsigned long long)n);
    else
        snprintf(buf, len, "%llu%c", (unsigned long long)n, sfx[i]);
    return buf;
}

bool units_mul_n(uint64_t *out, int n, const uint64_t *factors)
{
    uint64_t acc = 1;
    for (int i = 0; i < n; i++)
        if (!units_mul(acc, factors[i], &acc)) return false;
    *out = acc;
    return true;
}

void loong_err_prefix(char err[LOONG_ERRLEN], const char *prefix)
{
    char tmp[LOONG_ERRLEN];
    memcpy(tmp, err, LOONG_ERRLEN);
    tmp[LOONG_ERRLEN - 1] = '\0';
    size_t n = strlen(prefix);
    if (n > LOONG_ERRLEN - 1) n = LOONG_ERRLEN - 1;
    size_t rest = strlen(tmp);
    if (n + rest > LOONG_ERRLEN - 1) rest = LOONG_ERRLEN - 1 - n;
    memmove(err, prefix, n);
    memcpy(err + n, tmp, rest);
    err[n + rest] = '\0';
}

/* ---- real quantities with units (rates, bandwidths, durations) ---- */

static double si_scale(char c)
{
    switch (c) {
    case 'k':
    case 'K': return 1e3;
    case 'M': return 1e6;
    case 'G': return 1e9;
    case 'T': return 1e12;
    case 'P': return 1e15;
    default: return 0;
    }
}

/* strtod without locale surprises or leading blanks/signs; *end is where the
 * unit starts. Returns -1 on a malformed number. */
static int real_prefix(const char *s, double *v, const char **end)
{
    if (!s || !(isdigit((unsigned char)s[0]) || s[0] == '.')) return -1;
    char *e;
    *v = strtod(s, &e);
    /* not ERANGE: it also flags underflow, a subnormal that calib_write prints with %.17g and must read back */
    if (e == s || !isfinite(*v)) return -1;
    *end = e;
    return 0;
}

static int bad_real(const char *s, const char *what, const char *example, char err[LOONG_ERRLEN])
{
    snprintf(err, LOONG_ERRLEN, "%s '%s' is not a positive quantity: write e.g. %s", what, s ? s : "", example);
    return -1;
}

int units_parse_si(const char *s, const char *what, double *out, char err[LOONG_ERRLEN])
{
    double v;
    const char *e;
    if (real_prefix(s, &v, &e) < 0) return bad_real(s, what, "989T or 2.5e9", err);
    double k = 1;
    if (*e) {
        k = si_scale(*e);
        if (k == 0 || e[1]) return bad_real(s, what, "989T or 2.5e9", err);
    }
    /* a finite number times its prefix can still overflow (1e308T) */
    if (v <= 0 || !isfinite(v * k)) return bad_real(s, what, "989T or 2.5e9", err);
    *out = v * k;
    return 0;
}

int units_parse_bandwidth(const char *s, const char *what, double *out, char err[LOONG_ERRLEN])
{
    static const char ex[] = "450GBps (bytes/s) or 400Gbps (bits/s)";
    double v;
    const char *e;
    if (real_prefix(s, &v, &e) < 0) return bad_real(s, what, ex, err);
    double k = 1;
    if (*e && si_scale(*e) != 0) k = si_scale(*e++);
    if (!strcmp(e, "Bps") || (!*e && k == 1))
        ;
    else if (!strcmp(e, "bps"))
        k /= 8;
    else
        return bad_real(s, what, ex, err);
    if (v <= 0 || !isfinite(v * k)) return bad_real(s, what, ex, err); /* 1e308TBps overflows */
    *out = v * k;
    return 0;
}

int units_parse_time(const char *s, const char *what, double *out, char err[LOONG_ERRLEN])
{
    static const char ex[] = "4us, 1.5ms or 0.002s";
    double v;
    const char *e;
    if (real_prefix(s, &v, &e) < 0) return bad_real(s, what, ex, err);
    double k;
    if (!*e || !strcmp(e, "s"))
        k = 1;
    else if (!strcmp(e, "ms"))
        k = 1e-3;
    else if (!strcmp(e, "us"))
        k = 1e-6;
    else if (!strcmp(e, "ns"))
        k = 1e-9;
    else
        return bad_real(s, what, ex, err);
    *out = v * k;
    return 0;
}

int units_parse_mem(const char *s, const char *what, double *out, char err[LOONG_ERRLEN])
{
    static const struct {
        const char *unit;
        double scale;
    } units[] = {{"B", 1},        {"KB", 1e3},     {"MB", 1e6},     {"GB", 1e9},    {"TB", 1e12},
                 {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40}};
    static const char ex[] = "80GB (1 GB = 1e9 bytes) or 64GiB (1 GiB = 2^30 bytes); units B, KB, MB, GB, TB, "
                             "KiB, MiB, GiB, TiB";
    double v;
    const char *e;
    if (real_prefix(s, &v, &e) < 0 || v <= 0) return bad_real(s, what, ex, err);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(e, units[i].unit)) {
            if (!isfinite(v * units[i].scale)) break; /* 1e308TB overflows */
            *out = v * units[i].scale;
            return 0;
        }
    return bad_real(s, what, ex, err);
}

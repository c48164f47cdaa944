/* xalloc: allocation that names what ran out. See xalloc.h. */
#include "xalloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void xalloc_die(size_t bytes, const char *what)
{
    fprintf(stderr, "loong: out of memory: %s (%.1f MB): free memory or use a smaller configuration\n", what,
            (double)bytes / 1e6);
    exit(2);
}

/* Zero-byte requests get one byte, so that success is never a NULL. */
static size_t at_least_one(size_t n) { return n ? n : 1; }

static size_t product(size_t n, size_t size, const char *what)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes)) xalloc_die(SIZE_MAX, what);
    return bytes;
}

void *xmalloc(size_t n, const char *what)
{
    void *p = malloc(at_least_one(n));
    if (!p) xalloc_die(n, what);
    return p;
}

void *xcalloc(size_t n, size_t size, const char *what)
{
    size_t bytes = product(n, size, what);
    void *p = calloc(1, at_least_one(bytes));
    if (!p) xalloc_die(bytes, what);
    return p;
}

void *xmalloc_array(size_t n, size_t size, const char *what) { return xmalloc(product(n, size, what), what); }

void *xrealloc_array(void *p, size_t n, size_t size, const char *what)
{
    size_t bytes = product(n, size, what);
    void *q = realloc(p, at_least_one(bytes));
    if (!q) xalloc_die(bytes, what);
    return q;
}

char *xstrdup(const char *s, const char *what)
{
    size_t n = strlen(s) + 1;
    char *p = xmalloc(n, what);
    memcpy(p, s, n);
    return p;
}

char *xstrndup(const char *s, size_t n, const char *what)
{
    size_t len = strnlen(s, n);
    char *p = xmalloc(len + 1, what);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

double xalloc_machine_bytes(void)
{
    double pages = (double)sysconf(_SC_PHYS_PAGES), size = (double)sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? pages * size : 0;
}

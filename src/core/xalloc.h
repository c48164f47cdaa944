/*
 * xalloc: the one allocator of the core, the model, the analysis, the
 * SimGrid backend and the command. Running out of memory while building a
 * DAG, a plan or a report leaves nothing worth returning, so these never
 * return NULL: they print "loong: out of memory: WHAT (N MB)" on stderr and
 * exit with status 2, the documented status of every error. The executor's
 * devices are different: their out-of-memory is an error value
 * (DEV_ERR_MEM), because every rank must agree before exiting.
 *
 * Layer: core (libc only).
 */
#ifndef LOONG_XALLOC_H
#define LOONG_XALLOC_H

#include <stddef.h>

/* malloc(n); `what` names the request in the message. */
void *xmalloc(size_t n, const char *what);
/* calloc(n, size), zeroed; n * size is checked for overflow. */
void *xcalloc(size_t n, size_t size, const char *what);
/* malloc(n * size), unzeroed; n * size is checked for overflow. */
void *xmalloc_array(size_t n, size_t size, const char *what);
/* realloc(p, n * size); n * size is checked for overflow. */
void *xrealloc_array(void *p, size_t n, size_t size, const char *what);
/* strdup(s). */
char *xstrdup(const char *s, const char *what);
/* strndup(s, n): at most n bytes of s, NUL-terminated. */
char *xstrndup(const char *s, size_t n, const char *what);

/* This machine's physical memory, bytes (0 when unknown): what the checks
 * that refuse a job before allocating it compare with. */
double xalloc_machine_bytes(void);

/* Print the message and exit(2): for allocators outside libc (jansson,
 * vasprintf) whose failure is the same condition. */
void xalloc_die(size_t bytes, const char *what) __attribute__((noreturn));

#endif

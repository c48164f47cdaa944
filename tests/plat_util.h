/* Test helpers for the suites that simulate: a scratch directory per test
 * and platforms written into it. */
#ifndef LOONG_TEST_PLAT_UTIL_H
#define LOONG_TEST_PLAT_UTIL_H

#include <stddef.h>

#include "model/platform_spec.h"

/* The scratch directory of the running test (set by plat_setup). */
extern char plat_dir[64];

/* Check fixtures: create /tmp/loong-test-XXXXXX, and remove it. */
void plat_setup(void);
void plat_teardown(void);

/* The H100 defaults with nodes x gpn GPUs and `nics` NICs per node. */
platform_spec plat_spec(int nodes, int gpn, int nics);

/* Write sp as plat_dir/name into path (len bytes) and return path. */
const char *plat_write(const platform_spec *sp, const char *name, char *path, size_t len);

#endif

/* Test helpers: a scratch directory and platforms. See plat_util.h. */
#include "plat_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char plat_dir[64];

void plat_setup(void)
{
    strcpy(plat_dir, "/tmp/loong-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(plat_dir));
}

void plat_teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", plat_dir);
    ck_assert_int_eq(system(cmd), 0);
}

platform_spec plat_spec(int nodes, int gpn, int nics)
{
    platform_spec sp;
    char err[LOONG_ERRLEN];
    ck_assert_int_eq(platform_spec_defaults("h100", &sp, err), 0);
    sp.nodes = nodes;
    sp.gpus_per_node = gpn;
    sp.nics_per_node = nics;
    return sp;
}

const char *plat_write(const platform_spec *sp, const char *name, char *path, size_t len)
{
    snprintf(path, len, "%s/%s", plat_dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(platform_spec_write(f, sp, NULL), 0);
    fclose(f);
    return path;
}

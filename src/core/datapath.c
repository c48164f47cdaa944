/* datapath: find data files named without a directory (datapath.h). */
#include "datapath.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <unistd.h>

#ifndef LOONG_PKGDATADIR
#define LOONG_PKGDATADIR "/usr/local/share/loong"
#endif

#define DATAPATH_MAX 32

const char *datapath_installed(void) { return LOONG_PKGDATADIR; }

const char *datapath_source(void)
{
#if defined(LOONG_BUILDDIR) && defined(LOONG_SRCDATA)
    static char exe[PATH_MAX], build[PATH_MAX], data[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0 || !realpath(LOONG_BUILDDIR, build) || !realpath(LOONG_SRCDATA, data)) return NULL;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return NULL;
    *slash = '\0';
    return strcmp(exe, build) ? NULL : data;
#else
    return NULL;
#endif
}

int datapath_dirs(const char **dirs, int max)
{
    static char copy[4096];
    const char *env = getenv("LOONG_DATA_PATH"), *src = datapath_source();
    snprintf(copy, sizeof copy, "%s", env ? env : "");
    int n = 0;
    for (char *save = NULL, *d = strtok_r(copy, ":", &save); d && n < max - 2; d = strtok_r(NULL, ":", &save))
        dirs[n++] = d;
    if (src && n < max) dirs[n++] = src;
    if (n < max) dirs[n++] = LOONG_PKGDATADIR;
    return n;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

/* dir/name, or dir/name + ext: 0 when one is a readable file. */
static int try_dir(const char *dir, const char *name, const char *ext, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", dir, name);
    if (access(out, R_OK) == 0) return 0;
    if (!ext || ends_with(name, ext)) return -1;
    snprintf(out, len, "%s/%s%s", dir, name, ext);
    return access(out, R_OK) == 0 ? 0 : -1;
}

int datapath_find(const char *what, const char *name, const char *ext, const char *first, char *out, size_t len,
                  char err[LOONG_ERRLEN])
{
    if (strchr(name, '/')) {
        snprintf(out, len, "%s", name);
        return 0;
    }
    const char *dirs[DATAPATH_MAX + 1];
    int n = 0;
    if (first) dirs[n++] = first;
    n += datapath_dirs(dirs + n, DATAPATH_MAX);
    for (int i = 0; i < n; i++)
        if (try_dir(dirs[i], name, ext, out, len) == 0) return 0;
    int k = snprintf(err, LOONG_ERRLEN, "%s '%s' not found in:", what, name);
    for (int i = 0; i < n && k < LOONG_ERRLEN; i++)
        k += snprintf(err + k, LOONG_ERRLEN - (size_t)k, "%s %s", i ? "," : "", dirs[i]);
    return -1;
}

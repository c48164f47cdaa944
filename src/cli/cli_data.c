/* Platforms named without a directory, and `loong topo --list` (cli.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/kineto.h"
#include "core/infile.h"
#include "cli.h"
#include "core/datapath.h"
#include "core/xalloc.h"
#include "model/calib.h"
#include "model/platform_spec.h"

int cli_find_platform(const char *given, char *out, size_t len, char err[LOONG_ERRLEN])
{
    /* a path, or a file here, keeps its own errors (a directory, unreadable) */
    if (strchr(given, '/') || access(given, F_OK) == 0) {
        snprintf(out, len, "%s", given);
        return 0;
    }
    if (datapath_find("platform", given, ".xml", ".", out, len, err) == 0) return 0;
    size_t n = strlen(err);
    snprintf(err + n, LOONG_ERRLEN - n,
             " (give its path, set LOONG_DATA_PATH to its directory, or make install; loong topo --list)");
    return -1;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The *.xml, *.calib and *.fit files of dir, sorted: malloc'd names, n of them. */
static char **data_files(const char *dir, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **v = NULL;
    int cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t k = strlen(e->d_name);
        bool xml = k > 4 && !strcmp(e->d_name + k - 4, ".xml"), cal = k > 6 && !strcmp(e->d_name + k - 6, ".calib"),
             fit = k > 4 && !strcmp(e->d_name + k - 4, ".fit");
        if (!xml && !cal && !fit) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            v = xrealloc_array(v, (size_t)cap, sizeof *v, "the data files");
        }
        v[(*n)++] = xstrdup(e->d_name, "the data files");
    }
    closedir(d);
    qsort(v, (size_t)*n, sizeof *v, by_name);
    return v;
}

/* A calibration table's row: the default of its GPU kind when its name is
 * <gpu>.calib, else a table of that kind that --calib names. */
static void list_calib(FILE *f, const char *path, const char *name, size_t stem)
{
    char err[LOONG_ERRLEN];
    calib *cb = calib_load(path, err);
    if (!cb)
        fprintf(f, "  %-28s calibration table that does not parse: %s\n", name, err);
    else if (strlen(calib_gpu(cb)) == stem && !strncmp(calib_gpu(cb), name, stem))
        fprintf(f, "  %-28s calibration table for --gpu %s (its default)\n", name, calib_gpu(cb));
    else
        fprintf(f, "  %-28s calibration table of %s GPUs, not a default (--calib %.*s)\n", name, calib_gpu(cb),
                (int)stem, name);
    calib_free(cb);
}

/* One row: a platform with its shape from loong_spec, or a table. */
static void list_file(FILE *f, const char *dir, const char *name)
{
    char path[4096], err[LOONG_ERRLEN];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t k = strlen(name);
    if (k > 6 && !strcmp(name + k - 6, ".calib")) {
        list_calib(f, path, name, k - 6);
        return;
    }
    if (!strcmp(name + k - 4, ".fit")) {
        fprintf(f, "  %-28s fitted link values loong topo --gpu %.*s writes\n", name, (int)(k - 4), name);
        return;
    }
    platform_spec sp;
    if (platform_spec_read(path, &sp, err) < 0)
        fprintf(f, "  %-28s platform (no loong_spec: written by hand?)\n", name);
    else
        fprintf(f, "  %-28s platform: %d node(s) x %d %s GPUs, %d NIC(s) per node  (--platform %.*s)\n", name, sp.nodes,
                sp.gpus_per_node, sp.gpu, sp.nics_per_node, (int)(k - 4), name);
}

int cli_list_data(FILE *f)
{
    const char *dirs[33];
    int nd = datapath_dirs(dirs, 32);
    fprintf(f, "# loong's data path: $LOONG_DATA_PATH, %sthen the installed %s\n",
            datapath_source() ? "the source tree's topologies/ (this loong runs from its build directory), " : "",
            datapath_installed());
    for (int i = 0; i < nd; i++) {
        int n;
        char **files = data_files(dirs[i], &n);
        fprintf(f, "# %s: %s\n", dirs[i], files ? (n ? "" : "no platforms or tables") : "not readable");
        for (int j = 0; j < n; j++) {
            list_file(f, dirs[i], files[j]);
            free(files[j]);
        }
        free(files);
    }
    return ferror(f) ? -1 : 0;
}

kineto_names *cli_kernel_names(const char *path, char err[LOONG_ERRLEN])
{
    kineto_names *n = kineto_names_default();
    char *text = path ? infile_read(path, "kernel-name table", INFILE_TEXT_MAX, NULL, err) : NULL;
    if (path && (!text || kineto_names_add(n, text, path, err) < 0)) {
        kineto_names_free(n);
        n = NULL;
    }
    free(text);
    return n;
}

/* A launch (--megatron-args) or a job file (--torchtitan-toml) from a file
 * or standard input. */
char *cli_read_text(const char *path, const char *what, char err[LOONG_ERRLEN])
{
    if (strcmp(path, "-")) {
        char file[64];
        snprintf(file, sizeof file, "%s file", what);
        return infile_read(path, file, INFILE_TEXT_MAX, NULL, err);
    }
    size_t cap = 1 << 20, n = 0; /* a launch or a job file is a few KiB */
    char *buf = malloc(cap + 1);
    if (!buf) {
        snprintf(err, LOONG_ERRLEN, "%s -: out of memory", what);
        return NULL;
    }
    size_t r;
    while (n < cap && (r = fread(buf + n, 1, cap - n, stdin)) > 0)
        n += r;
    if (n == cap || memchr(buf, '\0', n)) {
        snprintf(err, LOONG_ERRLEN, "%s -: standard input is over 1 MiB or not text", what);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

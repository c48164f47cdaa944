/* kineto_set: the ranks of one profiled run, and the steps to compare.
 * See kineto.h. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/xalloc.h"
#include "kineto.h"

static bool is_trace_name(const char *n)
{
    size_t l = strlen(n);
    return (l > 5 && !strcmp(n + l - 5, ".json")) || (l > 8 && !strcmp(n + l - 8, ".json.gz"));
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The trace files of `path`: itself, or a directory's *.json and *.json.gz
 * in name order. Appends to *files. */
static int expand(const char *path, char ***files, int *n, char err[LOONG_ERRLEN])
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        *files = xrealloc_array(*files, (size_t)*n + 1, sizeof **files, "the trace list");
        (*files)[(*n)++] = xstrdup(path, "a trace path");
        return 0;
    }
    DIR *d = opendir(path);
    if (!d) {
        snprintf(err, LOONG_ERRLEN, "cannot list directory '%.100s': check its permissions", path);
        return -1;
    }
    int first = *n;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!is_trace_name(e->d_name)) continue;
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        char *full = xmalloc_array(len, 1, "a trace path");
        snprintf(full, len, "%s/%s", path, e->d_name);
        *files = xrealloc_array(*files, (size_t)*n + 1, sizeof **files, "the trace list");
        (*files)[(*n)++] = full;
    }
    closedir(d);
    if (*n == first) {
        snprintf(err, LOONG_ERRLEN, "directory '%.100s' holds no *.json or *.json.gz trace: give the profiler's output",
                 path);
        return -1;
    }
    qsort(*files + first, (size_t)(*n - first), sizeof **files, by_name);
    return 0;
}

static int by_rank(const void *a, const void *b)
{
    return ((const kineto_rank *)a)->rank - ((const kineto_rank *)b)->rank;
}

/* One run: the same world size and NCCL version, each rank once, none
 * missing. Traces without distributed info are one rank, or ordered by
 * name when all lack it. */
static int check_run(kineto_set *s, char err[LOONG_ERRLEN])
{
    int without = 0;
    for (int i = 0; i < s->n; i++)
        without += s->r[i].rank < 0;
    if (without == s->n) {
        for (int i = 0; i < s->n; i++)
            s->r[i].rank = i, s->r[i].world = s->n;
        return 0;
    }
    if (without) {
        for (int i = 0; i < s->n; i++)
            if (s->r[i].rank < 0)
                return snprintf(err, LOONG_ERRLEN,
                                "'%.90s' has no distributedInfo but the other traces have: give the traces of one run",
                                s->r[i].path),
                       -1;
    }
    qsort(s->r, (size_t)s->n, sizeof *s->r, by_rank);
    const kineto_rank *a = &s->r[0];
    for (int i = 0; i < s->n; i++) {
        const kineto_rank *b = &s->r[i];
        if (b->world != a->world || strcmp(b->nccl_version, a->nccl_version))
            return snprintf(
                       err, LOONG_ERRLEN,
                       "traces of different runs mixed: '%.50s' (world %d, NCCL %.16s) and '%.50s' (world %d, NCCL "
                       "%.16s): give one run's traces",
                       a->path, a->world, a->nccl_version[0] ? a->nccl_version : "?", b->path, b->world,
                       b->nccl_version[0] ? b->nccl_version : "?"),
                   -1;
        if (i && b->rank == s->r[i - 1].rank)
            return snprintf(err, LOONG_ERRLEN,
                            "rank %d twice ('%.80s' and '%.80s'): traces of different runs mixed; give one run's",
                            b->rank, s->r[i - 1].path, b->path),
                   -1;
    }
    /* a run of consecutive ranks of a larger world may be given (a node,
     * the ranks a prediction covers), but no gap */
    for (int i = 1; i < s->n; i++)
        if (s->r[i].rank != s->r[0].rank + i)
            return snprintf(err, LOONG_ERRLEN,
                            "rank %d is missing (the traces hold ranks %d..%d of %d, %d files): add its trace, or "
                            "give consecutive ranks",
                            s->r[0].rank + i, s->r[0].rank, s->r[s->n - 1].rank, a->world, s->n),
                   -1;
    return 0;
}

static bool has_step(const kineto_rank *r, int number)
{
    for (int i = 0; i < r->nsteps; i++)
        if (r->steps[i].number == number) return true;
    return false;
}

static int parse_steps(const char *spec, int *lo, int *hi, char err[LOONG_ERRLEN])
{
    char extra;
    if (sscanf(spec, "%d-%d%c", lo, hi, &extra) == 2 && *lo >= 0 && *hi >= *lo) return 0;
    if (sscanf(spec, "%d%c", lo, &extra) == 1 && *lo >= 0) return *hi = *lo, 0;
    snprintf(err, LOONG_ERRLEN, "--steps '%.40s' is not N or N-M (profiler step numbers, ProfilerStep#N)", spec);
    return -1;
}

/* The steps every rank has (all of them must have the same), or those
 * of `spec`. A trace without annotations is one step (-1). */
static int choose_steps(kineto_set *s, const char *spec, char err[LOONG_ERRLEN])
{
    const kineto_rank *a = &s->r[0];
    for (int i = 1; i < s->n; i++) {
        const kineto_rank *b = &s->r[i];
        bool same = b->nsteps == a->nsteps;
        for (int j = 0; same && j < a->nsteps; j++)
            same = has_step(b, a->steps[j].number);
        if (!same)
            return snprintf(err, LOONG_ERRLEN,
                            "the ranks' profiler steps do not match: rank %d has %d (ProfilerStep#%d..), rank %d has "
                            "%d: profile every rank with the same schedule",
                            a->rank, a->nsteps, a->nsteps ? a->steps[0].number : -1, b->rank, b->nsteps),
                   -1;
    }
    s->steps = xcalloc((size_t)(a->nsteps ? a->nsteps : 1), sizeof *s->steps, "the chosen steps");
    if (!a->nsteps) {
        s->steps[s->nsteps++] = -1;
        return 0;
    }
    int lo = -1, hi = -1;
    if (spec && parse_steps(spec, &lo, &hi, err) < 0) return -1;
    for (int j = 0; j < a->nsteps; j++) {
        int num = a->steps[j].number;
        if (!spec || (num >= lo && num <= hi)) s->steps[s->nsteps++] = num;
    }
    if (!s->nsteps)
        return snprintf(err, LOONG_ERRLEN, "--steps %s holds none of the trace's steps (ProfilerStep#%d..%d)", spec,
                        a->steps[0].number, a->steps[a->nsteps - 1].number),
               -1;
    return 0;
}

/* Each kernel's index among the chosen steps: the step whose CPU span
 * holds its launch. */
static void assign_steps(kineto_set *s)
{
    for (int i = 0; i < s->n; i++) {
        kineto_rank *r = &s->r[i];
        for (size_t j = 0; j < r->nk; j++) {
            kineto_kernel *k = &r->k[j];
            k->step = -1;
            for (int c = 0; c < s->nsteps; c++) {
                if (s->steps[c] < 0) {
                    k->step = c;
                    break;
                }
                for (int q = 0; q < r->nsteps; q++)
                    if (r->steps[q].number == s->steps[c] && k->launch >= r->steps[q].ts && k->launch < r->steps[q].end)
                        k->step = c;
            }
        }
    }
}

int kineto_set_open(const char *const *paths, int npaths, const kineto_names *names, const char *steps, kineto_set *s,
                    char err[LOONG_ERRLEN])
{
    memset(s, 0, sizeof *s);
    char **files = NULL;
    int nf = 0, rc = 0;
    for (int i = 0; i < npaths && rc == 0; i++)
        rc = expand(paths[i], &files, &nf, err);
    if (rc == 0) s->r = xcalloc((size_t)nf + 1, sizeof *s->r, "the profiler traces");
    for (int i = 0; i < nf && rc == 0; i++) {
        rc = kineto_read(files[i], names, &s->r[i], err);
        if (rc == 0) s->n++;
    }
    for (int i = 0; i < nf; i++)
        free(files[i]);
    free(files);
    if (rc == 0) rc = check_run(s, err);
    if (rc == 0) rc = choose_steps(s, steps, err);
    if (rc == 0) assign_steps(s);
    if (rc < 0) kineto_set_free(s);
    return rc;
}

void kineto_set_free(kineto_set *s)
{
    for (int i = 0; i < s->n; i++)
        kineto_rank_free(&s->r[i]);
    free(s->r);
    free(s->steps);
    memset(s, 0, sizeof *s);
}

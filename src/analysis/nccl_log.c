/* nccl_log: nccl-tests output. See nccl_log.h. */
#include "nccl_log.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/infile.h"
#include "core/xalloc.h"

typedef char host_name[64];

typedef struct reader {
    nccl_log *log;
    host_name *hosts; /* distinct, as first seen; any number (2,048-node logs) */
    int nhosts, hosts_cap;
    bool header, footer;
    int cap;
} reader;

/* "# Collective test starting: all_reduce_perf", or a file name that holds
 * an op name, with or without its underscore ("allreduce", as published
 * logs are often named), in any case. */
static void op_from(nccl_log *log, const char *text)
{
    if (log->has_op) return;
    static const coll_op order[] = {COLL_REDUCE_SCATTER, COLL_ALL_REDUCE, COLL_ALL_GATHER,
                                    COLL_ALLTOALL,       COLL_SENDRECV,   COLL_BROADCAST};
    char flat[256], name[32];
    size_t n = 0;
    for (const char *p = text; *p && n + 1 < sizeof flat; p++)
        if (*p != '_' && *p != '-') flat[n++] = (char)tolower((unsigned char)*p);
    flat[n] = 0;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        size_t m = 0;
        for (const char *p = coll_op_name(order[i]); *p && m + 1 < sizeof name; p++)
            if (*p != '_') name[m++] = *p;
        name[m] = 0;
        if (strstr(text, coll_op_name(order[i])) || strstr(flat, name)) {
            log->op = order[i];
            log->has_op = true;
            return;
        }
    }
}

/* A "#  Rank N Group G Pid P on HOST ..." line: one more GPU, and HOST if
 * new. nccl-tests lists a host's ranks together, so the last host is
 * checked first and the scan is rarely needed. */
static void rank_line(reader *r, const char *line)
{
    int rank, group;
    host_name host;
    if (sscanf(line, "# Rank %d Group %d Pid %*d on %63s", &rank, &group, host) != 3) return;
    r->log->gpus++;
    if (r->nhosts && !strcmp(r->hosts[r->nhosts - 1], host)) return;
    for (int i = 0; i < r->nhosts; i++)
        if (!strcmp(r->hosts[i], host)) return;
    if (r->nhosts == r->hosts_cap) {
        r->hosts_cap = r->hosts_cap ? 2 * r->hosts_cap : 64;
        r->hosts = xrealloc_array(r->hosts, (size_t)r->hosts_cap, sizeof *r->hosts, "an nccl-tests log's hosts");
    }
    snprintf(r->hosts[r->nhosts++], sizeof *r->hosts, "%s", host);
}

static void comment(reader *r, const char *line)
{
    const char *s = strstr(line, "Collective test starting:");
    if (s) op_from(r->log, s);
    if (strstr(line, " Rank ")) rank_line(r, line);
    if (strstr(line, "out-of-place") || (strstr(line, "size") && strstr(line, "busbw"))) r->header = true;
    if (strstr(line, "Avg bus bandwidth")) r->footer = true;
}

/* A data row: size count type redop root time algbw busbw #wrong ... */
static int row(reader *r, char *line, int lineno, char err[LOONG_ERRLEN])
{
    char *tok[16];
    int n = 0;
    for (char *t = strtok(line, " \t\r\n"); t && n < 16; t = strtok(NULL, " \t\r\n"))
        tok[n++] = t;
    nccl_log *log = r->log;
    /* a line of chatter that starts with a digit (Open MPI's "8 more
     * processes have sent help message ..."): its count column is a word */
    if (n >= 2 && strspn(tok[1], "0123456789") != strlen(tok[1])) return 0;
    if (n < 9) {
        snprintf(err, LOONG_ERRLEN,
                 "%.100s: line %d is a row cut short (%d of 9+ columns): rerun nccl-tests to the end", log->path,
                 lineno, n);
        return -1;
    }
    char *e1, *e2, *e3;
    double size = strtod(tok[0], &e1), t = strtod(tok[5], &e2), bus = strtod(tok[7], &e3);
    /* bounds: up to 1 PiB moved, an hour per call, 1 PB/s (nccl-tests prints us and GB/s) */
    if (*e1 || *e2 || *e3 || !(size >= 0 && size <= 0x1p50) || !(t > 0 && t <= 3.6e9) || !(bus >= 0 && bus <= 1e6)) {
        snprintf(err, LOONG_ERRLEN,
                 "%.60s: line %d: size '%.20s', time '%.20s', busbw '%.20s' are not nccl-tests figures (size <= 1 PiB, "
                 "0 < time <= 1 h, busbw <= 1 PB/s)",
                 log->path, lineno, tok[0], tok[5], tok[7]);
        return -1;
    }
    if (log->nrows && size <= log->rows[log->nrows - 1].size) {
        snprintf(err, LOONG_ERRLEN, "%.100s: line %d: size %s does not grow: one nccl-tests run per log", log->path,
                 lineno, tok[0]);
        return -1;
    }
    if (log->nrows == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 32;
        log->rows = xrealloc_array(log->rows, (size_t)r->cap, sizeof *log->rows, "an nccl-tests log");
    }
    log->rows[log->nrows++] = (nccl_log_row){size, t * 1e-6, bus * 1e9};
    return 0;
}

static int finish(reader *r, bool empty, char err[LOONG_ERRLEN])
{
    nccl_log *log = r->log;
    const char *why = NULL;
    if (empty)
        why = "is empty: give the output of an nccl-tests run (all_reduce_perf -b 8 -e 8G -f 2 > LOG)";
    else if (!r->header || !log->nrows)
        why = "is not an nccl-tests log: no '# size count type redop root time algbw busbw' table with rows";
    else if (!r->footer)
        why = "is truncated: no '# Avg bus bandwidth' line after its rows; rerun the test to the end";
    if (why) {
        snprintf(err, LOONG_ERRLEN, "%.100s %s", log->path, why);
        return -1;
    }
    log->nodes = r->nhosts;
    return 0;
}

int nccl_log_parse(const char *text, const char *path, nccl_log *log, char err[LOONG_ERRLEN])
{
    memset(log, 0, sizeof *log);
    snprintf(log->path, sizeof log->path, "%s", path);
    reader r = {.log = log};
    char *copy = xstrdup(text, "an nccl-tests log"), *cursor = copy, *line;
    int lineno = 0, rc = 0;
    bool empty = true;
    while (rc == 0 && (line = infile_next_line(&cursor))) {
        lineno++;
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        /* srun --label and mpirun --tag-output put "N: " or "[1,N]<stdout>:" before every line */
        size_t d = strspn(p, "0123456789");
        if (d && p[d] == ':') p += d + 1;
        if (*p == '[' && strstr(p, "]<stdout>:")) p = strstr(p, "]<stdout>:") + 10;
        while (isspace((unsigned char)*p))
            p++;
        if (*p) empty = false;
        if (*p == '#')
            comment(&r, p);
        else if (r.header && !r.footer && isdigit((unsigned char)*p))
            rc = row(&r, p, lineno, err);
    }
    free(copy);
    if (rc == 0) rc = finish(&r, empty, err);
    free(r.hosts);
    if (rc == 0) {
        const char *base = strrchr(path, '/');
        op_from(log, base ? base + 1 : path);
    }
    if (rc < 0) nccl_log_free(log);
    return rc;
}

int nccl_log_read(const char *path, nccl_log *log, char err[LOONG_ERRLEN])
{
    memset(log, 0, sizeof *log);
    char *text = infile_read(path, "nccl-tests log", INFILE_TEXT_MAX, NULL, err);
    if (!text) return -1;
    int rc = nccl_log_parse(text, path, log, err);
    free(text);
    return rc;
}

void nccl_log_free(nccl_log *log)
{
    free(log->rows);
    log->rows = NULL;
    log->nrows = 0;
}

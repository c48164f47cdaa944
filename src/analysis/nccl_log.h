/*
 * nccl_log: read the output of an nccl-tests binary (all_reduce_perf, ...),
 * the measurement every cluster team already has. The header gives the
 * collective ("# Collective test starting: all_reduce_perf", else the file
 * name), the GPUs ("#  Rank  N Group ... on HOST device ..." lines) and the
 * nodes (distinct hosts); each row gives a size and its out-of-place time
 * (nccl-tests src/util.cu's format). NCCL_DEBUG lines and other chatter
 * between them are skipped.
 *
 * Layer: analysis (uses core and model).
 */
#ifndef LOONG_NCCL_LOG_H
#define LOONG_NCCL_LOG_H

#include "model/nccl.h"

typedef struct nccl_log_row {
    double size;   /* bytes, nccl-tests' size */
    double time_s; /* out-of-place time per iteration */
    double busbw;  /* bytes/s as printed (GB/s x 1e9) */
} nccl_log_row;

typedef struct nccl_log {
    char path[256];
    coll_op op;
    bool has_op;
    int gpus, nodes; /* 0 when the header does not list ranks */
    nccl_log_row *rows;
    int nrows;
} nccl_log;

/* Parse the log at path. Returns 0, or -1 with a one-line message naming
 * the problem and the fix: unreadable or empty file, no nccl-tests table
 * (a foreign format), a row cut short, no '# Avg bus bandwidth' footer (a
 * truncated run), sizes out of order, a non-positive time. Free with
 * nccl_log_free. */
int nccl_log_read(const char *path, nccl_log *log, char err[LOONG_ERRLEN]);
/* The same from a log's text (path names it in messages). */
int nccl_log_parse(const char *text, const char *path, nccl_log *log, char err[LOONG_ERRLEN]);
void nccl_log_free(nccl_log *log);

#endif

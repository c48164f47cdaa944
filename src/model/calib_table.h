/*
 * calib_table: the calibration table's representation, shared by its file
 * format (calib_file.c: parse, write, the validated setters) and its cost
 * rules (calib.c). Private to those two files: everything else goes
 * through calib.h.
 *
 * Layer: model (uses core only).
 */
#ifndef LOONG_CALIB_TABLE_H
#define LOONG_CALIB_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "calib.h"

#define CALIB_MAXPTS 32
#define NKINDS       (TASK_COMPUTE_LAST + 1) /* compute kinds: gemm .. optim */

typedef enum { X_FLOPS, X_BYTES, X_TOKENS } xaxis;

/* One 'gemm shape' row: a measured GEMM (see calib.h, "GEMM shapes"). */
typedef struct gemm_shape {
    int layout;      /* gemm_layout */
    uint64_t dim[3]; /* M, N, K as written */
    double lg[3];    /* log2 of each */
    double eff;      /* of peak */
} gemm_shape;
#define GEMM_SHAPES_MAX 4096 /* rows per table: 20x the largest published sweep */

typedef struct row {
    bool set;
    bool inherited; /* a memory-bound kind after acc without a row of its own: acc's */
    bool curve;     /* else a line */
    bool membw;     /* a memory-bound kind timed by the table's membw rows (KIND membw T0) */
    bool skip;      /* KIND skip: the device runs none of these kernels (an executor's elementwise kinds): 0 s */
    xaxis x;
    double t0;
    double rate; /* line: work per second */
    int npts;
    double lx[CALIB_MAXPTS], eff[CALIB_MAXPTS]; /* log(x), efficiency */
    double xs[CALIB_MAXPTS];                    /* x as written, for calib_write */
} row;

struct calib {
    char gpu[32];
    char *path; /* the file it was read from (calib_load), or NULL */
    double peak, mem_bw;
    bool peak_assumed, mem_bw_assumed; /* "assumed" after the value: a guess, not a datasheet or measured figure */
    double peak_fp8, peak_mxfp8;       /* dense FP8 FLOP/s (per-tensor scaling; MXFP8's block scaling); 0: none */
    row rows[NKINDS];
    double interference[NKINDS]; /* slowdown of a kind's kernel per concurrent communication kernel */
    int tile[NKINDS][2];         /* attention kernels' tile, query rows x key columns ('tile'); 0: none */
    gemm_shape *shape;           /* 'gemm shape' rows, in the order read */
    int nshape, shapecap;
    row bw;         /* the 'membw' rows as a curve over bytes: fraction of mem_bw, bytes increasing */
    unsigned given; /* while parsing: header lines seen (HDR_*), each allowed once */
    /* the 'gemm shape' rows indexed once parsed (calib_index_shapes): per
     * layout, the layout whose rows time it (-1: none), and the range of
     * those rows in log2 M, N, K */
    int shape_set[GEMM_LAYOUTS];
    double shape_lo[GEMM_LAYOUTS][3], shape_hi[GEMM_LAYOUTS][3];
};

/* Fill cb's shape index from its rows (calib_parse, once the table is read). */
void calib_index_shapes(calib *cb);

#define memory_bound calib_memory_bound

#endif

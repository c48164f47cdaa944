/*
 * afile: output files that appear whole or not at all. Writes go to a
 * temporary file beside the target, renamed over it on commit, so a failed
 * run never leaves a half-written trace or table. The path "-" means stdout.
 * A target that exists and is not a regular file (/dev/null, a FIFO, a
 * terminal) is written directly: a rename would replace the device.
 *
 * Layer: core (libc and jansson only: it knows no predictor, measurement or backend).
 */
#ifndef LOONG_AFILE_H
#define LOONG_AFILE_H

#include <stdio.h>

#include "units.h"

typedef struct afile {
    FILE *f;
    char *path; /* NULL for stdout */
    char *tmp;  /* NULL unless writing through a temporary */
} afile;

/* Open path for writing (through a temporary). Returns 0 or -1 with err. */
int afile_open(afile *a, const char *path, char err[LOONG_ERRLEN]);
/* Flush, close and rename into place. Returns 0 or -1 with err (the
 * temporary is removed). */
int afile_commit(afile *a, char err[LOONG_ERRLEN]);
/* Discard: close and remove the temporary. Safe on a zeroed afile. */
void afile_abort(afile *a);

#endif

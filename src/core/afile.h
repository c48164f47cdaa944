/*
 * afile: output files that appear whole or not at all. Writes go to a
 * temporary file beside the target, renamed over it on commit, so a failed
 * run never leaves a half-written trace or table. Where the file system
 * can (Linux O_TMPFILE, with /proc), the temporary has no name until
 * commit, so even a process killed mid-write (SIGKILL) leaves nothing
 * behind; elsewhere it is "TARGET.tmp.XXXXXX", removed on abort and on
 * every error but left by a kill. The path "-" means stdout.
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
    char *tmp;  /* NULL unless writing through a named temporary */
    int anon;   /* writing through an unnamed temporary (O_TMPFILE) */
} afile;

/* Open path for writing (through a temporary). Returns 0 or -1 with err. */
int afile_open(afile *a, const char *path, char err[LOONG_ERRLEN]);
/* Open path for writing through an unnamed temporary made in directory
 * `stage` (on the file system of path's directory, which need not exist
 * until commit): for outputs in a directory that is created only when
 * they are committed. Returns 0, or -1 with err where the file system has
 * no unnamed temporaries (the caller then makes the directory and uses
 * afile_open). */
int afile_open_staged(afile *a, const char *path, const char *stage, char err[LOONG_ERRLEN]);
/* Whether path could be written (not a directory; its directory exists and
 * is writable), for outputs that another program writes (gnuplot's PNGs):
 * checked before the work. Returns 0 or -1 with err. */
int afile_check(const char *path, char err[LOONG_ERRLEN]);
/* Flush, close and rename into place. Returns 0 or -1 with err (the
 * temporary is removed). */
int afile_commit(afile *a, char err[LOONG_ERRLEN]);
/* Discard: close and remove the temporary. Safe on a zeroed afile. */
void afile_abort(afile *a);

#endif

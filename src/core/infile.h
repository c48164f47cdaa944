/*
 * infile: input files read whole, with the checks every reader shares. A
 * directory is named as one; a file above the reader's size limit is refused
 * before anything is allocated for it; a NUL byte marks a binary file. The
 * parsers then work on memory (what the fuzz targets call).
 *
 * Layer: core (libc only).
 */
#ifndef LOONG_INFILE_H
#define LOONG_INFILE_H

#include <stddef.h>

#include "units.h"

/* Size limits of the text inputs (bytes): model files, calibration tables,
 * document lists and nccl-tests logs are small; platforms hold one line per
 * link; a trace is checked against memory as well (trace.h). */
#define INFILE_TEXT_MAX     ((size_t)64 << 20)
#define INFILE_PLATFORM_MAX ((size_t)1 << 30)

/* Read path whole into a NUL-terminated malloc'd buffer (*len bytes before
 * the NUL; len may be NULL). `what` names the input in messages ("model
 * file"). Returns NULL with a one-line err for a missing or unreadable file,
 * a directory, a file over max bytes, or (text) a NUL byte. */
char *infile_read(const char *path, const char *what, size_t max, size_t *len, char err[LOONG_ERRLEN]);

/* The same for a binary input (a gzip file): NUL bytes allowed; the
 * buffer still ends with a NUL after its *len bytes. */
char *infile_read_bytes(const char *path, const char *what, size_t max, size_t *len, char err[LOONG_ERRLEN]);

/* The size of a regular file, or -1 (not one, or unreadable). */
long long infile_size(const char *path);

/* Split text into lines in place: returns the next line (newline and a
 * trailing CR removed) and advances *cursor, or NULL at the end. */
char *infile_next_line(char **cursor);

#endif

/*
 * fuzz_text: the one input convention of the fuzz targets. The file reader
 * (core/infile.c) hands every parser a NUL-terminated copy of the file and
 * refuses a file that holds a NUL byte; the targets do the same, so that a
 * fuzz input is exactly a file a user could give.
 */
#ifndef LOONG_FUZZ_TEXT_H
#define LOONG_FUZZ_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A malloc'd NUL-terminated copy of data, or NULL when data holds a NUL
 * byte (infile_read refuses such a file). The caller frees it. */
static inline char *fuzz_text(const uint8_t *data, size_t size)
{
    if (memchr(data, '\0', size)) return NULL;
    char *text = malloc(size + 1);
    if (!text) abort();
    if (size) memcpy(text, data, size);
    text[size] = '\0';
    return text;
}

#endif

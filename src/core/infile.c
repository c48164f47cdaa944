/* infile: input files read whole. See infile.h. */
#include "infile.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "xalloc.h"

long long infile_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (long long)st.st_size : -1;
}

static void size_text(size_t bytes, char *buf, size_t len)
{
    if (bytes >= (size_t)1 << 30)
        snprintf(buf, len, "%.1f GiB", (double)bytes / (double)(1 << 30));
    else
        snprintf(buf, len, "%.1f MiB", (double)bytes / (double)(1 << 20));
}

static int refuse_size(const char *path, const char *what, size_t have, size_t max, char err[LOONG_ERRLEN])
{
    char h[32], m[32];
    size_text(have, h, sizeof h);
    size_text(max, m, sizeof m);
    snprintf(err, LOONG_ERRLEN, "%s '%s' is %s%s, above the %s loong reads for one: is it the right file?", what, path,
             have > max ? "" : "over ", h, m);
    return -1;
}

/* Open for reading, refusing directories and regular files over max. */
static FILE *open_checked(const char *path, const char *what, size_t max, size_t *size, char err[LOONG_ERRLEN])
{
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        snprintf(err, LOONG_ERRLEN, "cannot read %s '%s': %s%s", what, path, strerror(e),
                 e == ENOENT ? ": check the path" : "");
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(err, LOONG_ERRLEN, "%s '%s' is a directory: give the file inside it", what, path);
        return NULL;
    }
    if (S_ISREG(st.st_mode) && (unsigned long long)st.st_size > max) {
        refuse_size(path, what, (size_t)st.st_size, max, err);
        return NULL;
    }
    *size = S_ISREG(st.st_mode) ? (size_t)st.st_size : 0;
    FILE *f = fopen(path, "rb");
    if (!f) snprintf(err, LOONG_ERRLEN, "cannot read %s '%s': %s", what, path, strerror(errno));
    return f;
}

static char *read_whole(const char *path, const char *what, size_t max, size_t *len, bool text, char err[LOONG_ERRLEN])
{
    size_t size;
    FILE *f = open_checked(path, what, max, &size, err);
    if (!f) return NULL;
    /* a regular file's size, plus one byte to see it has not grown */
    size_t cap = size + 2 > 4096 ? size + 2 : 4096, n = 0, got;
    char *buf = xmalloc(cap, "an input file");
    /* read in chunks: a FIFO or a file that grows has no size to trust */
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n > max) break;
        if (n + 1 == cap) buf = xrealloc_array(buf, cap *= 2, 1, "an input file");
    }
    int bad = ferror(f), e = errno;
    fclose(f);
    if (bad || n > max) {
        if (bad)
            snprintf(err, LOONG_ERRLEN, "cannot read %s '%s': %s", what, path, strerror(e ? e : EIO));
        else
            refuse_size(path, what, n, max, err);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (text && memchr(buf, '\0', n)) {
        snprintf(err, LOONG_ERRLEN, "%s '%s' holds a NUL byte at offset %zu: it is not a text file", what, path,
                 strlen(buf));
        free(buf);
        return NULL;
    }
    if (len) *len = n;
    return buf;
}

char *infile_read(const char *path, const char *what, size_t max, size_t *len, char err[LOONG_ERRLEN])
{
    return read_whole(path, what, max, len, true, err);
}

char *infile_read_bytes(const char *path, const char *what, size_t max, size_t *len, char err[LOONG_ERRLEN])
{
    return read_whole(path, what, max, len, false, err);
}

char *infile_next_line(char **cursor)
{
    char *line = *cursor;
    if (!line || !*line) return NULL;
    char *nl = strchr(line, '\n');
    if (nl) {
        *nl = '\0';
        *cursor = nl + 1;
    } else {
        *cursor = line + strlen(line);
    }
    size_t n = strlen(line);
    if (n && line[n - 1] == '\r') line[n - 1] = '\0';
    return line;
}

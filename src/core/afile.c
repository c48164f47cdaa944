/* afile: write-to-temporary-then-rename. See afile.h. */
#include "afile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xalloc.h"

/* A target that exists and is not a regular file (a character device such
 * as /dev/null, a FIFO, a terminal) is written in place: renaming a
 * temporary over it would replace the device with a file. */
static bool is_special(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

static int open_direct(afile *a, const char *path, char err[LOONG_ERRLEN])
{
    a->f = fopen(path, "w");
    a->path = xstrdup(path, "an output path");
    if (a->f) return 0;
    int e = errno;
    afile_abort(a);
    snprintf(err, LOONG_ERRLEN, "cannot write '%s': %s", path, strerror(e));
    return -1;
}

int afile_open(afile *a, const char *path, char err[LOONG_ERRLEN])
{
    memset(a, 0, sizeof *a);
    if (!strcmp(path, "-")) {
        a->f = stdout;
        return 0;
    }
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, LOONG_ERRLEN, "cannot write '%s': it is a directory: give a file path", path);
        return -1;
    }
    if (is_special(path)) return open_direct(a, path, err);
    size_t n = strlen(path) + 16;
    a->path = xstrdup(path, "an output path");
    a->tmp = xmalloc(n, "an output path");
    snprintf(a->tmp, n, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(a->tmp);
    if (fd >= 0) {
        /* mkstemp makes 0600 files; outputs get the usual 0666 & ~umask */
        mode_t mask = umask(0);
        umask(mask);
        fchmod(fd, 0666 & ~mask);
        a->f = fdopen(fd, "w");
    }
    if (!a->f) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(a->tmp);
        }
        snprintf(err, LOONG_ERRLEN, "cannot write '%s': %s (check that the directory exists and is writable)", path,
                 strerror(e));
        free(a->tmp);
        a->tmp = NULL;
        afile_abort(a);
        return -1;
    }
    return 0;
}

int afile_commit(afile *a, char err[LOONG_ERRLEN])
{
    if (a->f == stdout) {
        if (fflush(a->f) != 0 || ferror(a->f)) {
            snprintf(err, LOONG_ERRLEN, "error writing to standard output: %s", strerror(errno));
            return -1;
        }
        return 0;
    }
    if (!a->tmp) { /* written in place (a device or FIFO) */
        int bad = ferror(a->f);
        if (fclose(a->f) != 0) bad = 1;
        a->f = NULL;
        if (bad) snprintf(err, LOONG_ERRLEN, "cannot write '%s': %s", a->path, strerror(errno ? errno : EIO));
        free(a->path);
        a->path = NULL;
        return bad ? -1 : 0;
    }
    int bad = ferror(a->f);
    if (fclose(a->f) != 0) bad = 1;
    a->f = NULL;
    if (bad || rename(a->tmp, a->path) != 0) {
        snprintf(err, LOONG_ERRLEN, "cannot write '%s': %s", a->path, strerror(errno ? errno : EIO));
        afile_abort(a);
        return -1;
    }
    free(a->tmp);
    free(a->path);
    a->tmp = a->path = NULL;
    return 0;
}

void afile_abort(afile *a)
{
    if (a->f && a->f != stdout) fclose(a->f);
    if (a->tmp) unlink(a->tmp);
    free(a->tmp);
    free(a->path);
    memset(a, 0, sizeof *a);
}

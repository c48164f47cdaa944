/* afile: write-to-temporary-then-rename. See afile.h. */
#include "afile.h"

#include <errno.h>
#include <fcntl.h>
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

/* An unnamed temporary in directory dir, or -1 where there is none: no
 * O_TMPFILE, a file system without it, or no /proc to link it by. Its
 * mode is 0666 & ~umask, as open() gives. */
static int open_anon(const char *dir)
{
#ifdef O_TMPFILE
    if (access("/proc/self/fd", X_OK) != 0) return -1;
    return open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
#else
    (void)dir;
    return -1;
#endif
}

/* The directory part of path ("." for a bare name, "/" for "/x"). */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return xstrdup(".", "an output path");
    char *d = xstrdup(path, "an output path");
    d[slash == path ? 1 : slash - path] = '\0';
    return d;
}

/* Write path through an unnamed temporary in dir; 0, or -1 (a untouched). */
static int start_anon(afile *a, const char *path, const char *dir)
{
    int fd = open_anon(dir);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return -1;
    }
    a->f = f;
    a->path = xstrdup(path, "an output path");
    a->anon = 1;
    return 0;
}

/* Give the unnamed temporary open as fd the name `to` (which must not
 * exist). */
static int link_anon(int fd, const char *to)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, proc, AT_FDCWD, to, AT_SYMLINK_FOLLOW);
}

/* Link the unnamed temporary in as path: directly when path is new, else
 * under a fresh temporary name renamed over it (the only moment a name
 * other than path exists). */
static int commit_anon(afile *a)
{
    int fd = fileno(a->f);
    if (link_anon(fd, a->path) == 0) return 0;
    if (errno != EEXIST) return -1;
    size_t n = strlen(a->path) + 32;
    char *tmp = xmalloc(n, "an output path");
    int rc = -1;
    for (unsigned k = 0; k < 100 && rc < 0; k++) {
        snprintf(tmp, n, "%s.tmp.%d.%u", a->path, (int)getpid(), k);
        if (link_anon(fd, tmp) == 0) {
            rc = rename(tmp, a->path);
            if (rc != 0) {
                int e = errno;
                unlink(tmp);
                errno = e;
                break;
            }
        } else if (errno != EEXIST)
            break;
    }
    free(tmp);
    return rc;
}

int afile_check(const char *path, char err[LOONG_ERRLEN])
{
    struct stat st;
    if (!strcmp(path, "-")) return 0;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, LOONG_ERRLEN, "cannot write '%s': it is a directory: give a file path", path);
        return -1;
    }
    if (is_special(path)) return 0;
    char *dir = dir_of(path);
    int rc = access(dir, W_OK);
    int e = errno;
    free(dir);
    if (rc == 0) return 0;
    snprintf(err, LOONG_ERRLEN, "cannot write '%s': %s (check that the directory exists and is writable)", path,
             strerror(e));
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
    char *dir = dir_of(path);
    int anon = start_anon(a, path, dir);
    free(dir);
    if (anon == 0) return 0;
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

int afile_open_staged(afile *a, const char *path, const char *stage, char err[LOONG_ERRLEN])
{
    memset(a, 0, sizeof *a);
    if (start_anon(a, path, stage) == 0) return 0;
    snprintf(err, LOONG_ERRLEN, "cannot stage '%s' in '%s': no unnamed temporary files there", path, stage);
    return -1;
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
    if (a->anon) {
        int bad = fflush(a->f) != 0 || ferror(a->f) || commit_anon(a) != 0;
        int e = errno ? errno : EIO;
        if (bad) snprintf(err, LOONG_ERRLEN, "cannot write '%s': %s", a->path, strerror(e));
        afile_abort(a); /* closes; the linked file stays */
        return bad ? -1 : 0;
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

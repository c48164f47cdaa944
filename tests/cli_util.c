#include "cli_util.h"

#include <check.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static size_t slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, cap - 1, f), total = n;
    buf[n] = '\0';
    char tmp[4096];
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        total += n;
    fclose(f);
    return total;
}

/* Remove from s the three lines ASan prints when SimGrid switches stacks
 * ("==N==WARNING: ASan is ignoring requested __asan_handle_no_return", "False
 * positive error reports may follow", "For details see ..."; google/sanitizers#189,
 * as tests/badinput.sh does): the sanitizer pass's noise, not the program's. */
static void strip_asan_noise(char *s)
{
    static const char *const noise[] = {"WARNING: ASan is ignoring requested __asan_handle_no_return",
                                        "False positive error reports may follow",
                                        "For details see https://github.com/google/sanitizers/issues/189"};
    char *w = s;
    for (char *line = s; *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line + 1) : strlen(line);
        bool drop = false;
        for (int k = 0; k < 3; k++)
            drop |= memmem(line, len, noise[k], strlen(noise[k])) != NULL;
        if (!drop) memmove(w, line, len), w += len;
        line += len;
    }
    *w = '\0';
}

run_result run_cmd(const char *fmt, ...)
{
    run_result r;
    memset(&r, 0, sizeof r);
    char cmd[4096], full[8192], out[] = "/tmp/loong-out-XXXXXX", err[] = "/tmp/loong-err-XXXXXX";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int fo = mkstemp(out), fe = mkstemp(err);
    ck_assert(fo >= 0 && fe >= 0);
    close(fo);
    close(fe);
    snprintf(full, sizeof full, "(%s) </dev/null >%s 2>%s", cmd, out, err);
    int st = system(full);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out_len = slurp(out, r.out, sizeof r.out);
    slurp(err, r.err, sizeof r.err);
    strip_asan_noise(r.err);
    unlink(out);
    unlink(err);
    return r;
}

int count_lines(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p++)
        n += *p == '\n';
    if (*s && s[strlen(s) - 1] != '\n') n++;
    return n;
}

char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

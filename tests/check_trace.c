/* trace: Chrome trace write/read round trip, the time convention, bad files. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/afile.h"
#include "core/infile.h"
#include "core/trace.h"
#include "dag_util.h"
#include "check_run.h"

START_TEST(us_convention)
{
    ck_assert(trace_us(1.2345678e-3) == 1234.568);
    ck_assert(trace_us(0) == 0);
    ck_assert(trace_us(2.0) == 2e6);
}
END_TEST

static char tmpl[64];
static const char *tmp_path(void)
{
    snprintf(tmpl, sizeof tmpl, "/tmp/loong-trace-XXXXXX");
    int fd = mkstemp(tmpl);
    ck_assert_int_ge(fd, 0);
    close(fd);
    return tmpl;
}

START_TEST(round_trip)
{
    config c = tcfg("tiny", 4096, "loongtrain", 2, 4, 2, SCOPE_ATTN);
    dag *g = tbuild(&c);
    uint32_t n = dag_ntasks(g);
    double *st = malloc(n * sizeof *st), *du = malloc(n * sizeof *du);
    for (uint32_t i = 0; i < n; i++) {
        st[i] = i * 1.5e-6 + 1e-10;
        du[i] = (i % 7 + 1) * 1e-6;
    }
    const char *p = tmp_path();
    FILE *f = fopen(p, "w");
    ck_assert_int_eq(trace_write(f, g, "test", st, du, NULL, NULL), 0);
    fclose(f);
    trace t;
    char err[LOONG_ERRLEN];
    ck_assert_msg(trace_read(p, &t, err) == 0, "%s", err);
    ck_assert_uint_eq(t.n, n);
    ck_assert_str_eq(t.backend, "test");
    ck_assert_uint_eq(config_hash(&t.cfg), config_hash(&c));
    for (uint32_t i = 0; i < n; i++) {
        const dag_task *x = dag_task_get(g, i);
        const trace_ev *e = &t.ev[i];
        ck_assert_uint_eq(e->id, i);
        ck_assert_int_eq(e->rank, x->rank);
        ck_assert_int_eq(e->stream, x->stream);
        ck_assert_int_eq(e->kind, x->kind);
        ck_assert_int_eq(e->op, x->op);
        ck_assert_int_eq(e->phase, x->phase);
        ck_assert_uint_eq(e->flops, x->flops);
        ck_assert_uint_eq(e->bytes, dag_task_bytes_moved(g, x));
        ck_assert(fabs(e->ts - trace_us(st[i])) < 1e-9);
        ck_assert(fabs(e->dur - trace_us(du[i])) < 1e-9);
    }
    ck_assert(fabs(trace_makespan(&t) - trace_us(st[n - 1] + du[n - 1])) < 1e-3);
    trace_free(&t);
    /* a rank filter keeps that rank's events only */
    trace_filter flt = {1, -1};
    f = fopen(p, "w");
    ck_assert_int_eq(trace_write(f, g, "test", st, du, &flt, NULL), 0);
    fclose(f);
    ck_assert_int_eq(trace_read(p, &t, err), 0);
    for (size_t i = 0; i < t.n; i++)
        ck_assert_int_eq(t.ev[i].rank, 1);
    ck_assert_uint_gt(t.n, 0);
    trace_free(&t);
    unlink(p);
    free(st);
    free(du);
    dag_free(g);
}
END_TEST

START_TEST(bad_files)
{
    static const char *bad[] = {
        "",
        "not json",
        "{\"traceEvents\":[{\"ph\":\"X\"",
        "{\"traceEvents\":[]}",
        "{\"traceEvents\":[{\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":1,\"dur\":1,\"args\":{\"kind\":\"gemm\"}}],"
        "\"loong\":{\"backend\":\"x\",\"config\":{}}}",
    };
    char err[LOONG_ERRLEN];
    trace t;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *p = tmp_path();
        FILE *f = fopen(p, "w");
        fputs(bad[i], f);
        fclose(f);
        err[0] = '\0';
        ck_assert_msg(trace_read(p, &t, err) == -1, "accepted: %s", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, p));
        ck_assert_ptr_null(strchr(err, '\n'));
        unlink(p);
    }
    ck_assert_int_eq(trace_read("/nonexistent/trace.json", &t, err), -1);
}
END_TEST

/* Inputs: a directory is named, a file over the reader's limit is refused
 * before it is read, a NUL byte marks a binary file. */
START_TEST(infile_limits)
{
    char err[LOONG_ERRLEN], dir[] = "/tmp/loong-infile-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_ptr_null(infile_read(dir, "model file", 100, NULL, err));
    ck_assert_ptr_nonnull(strstr(err, "is a directory"));
    char path[64];
    snprintf(path, sizeof path, "%s/f", dir);
    FILE *f = fopen(path, "w");
    fputs("0123456789", f);
    fclose(f);
    size_t len = 0;
    char *text = infile_read(path, "model file", 10, &len, err);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(len, 10);
    free(text);
    ck_assert_ptr_null(infile_read(path, "model file", 9, NULL, err));
    ck_assert_ptr_nonnull(strstr(err, "above the"));
    f = fopen(path, "w");
    fputs("ab", f);
    fputc(0, f);
    fclose(f);
    ck_assert_ptr_null(infile_read(path, "model file", 100, NULL, err));
    ck_assert_ptr_nonnull(strstr(err, "NUL byte at offset 2"));
    /* an output that is a directory is refused before anything is written */
    afile a;
    ck_assert_int_eq(afile_open(&a, dir, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "is a directory"));
    unlink(path);
    rmdir(dir);
}
END_TEST

/* Outputs that are not regular files are written in place: a rename over
 * a FIFO or over /dev/null (as root) would replace it with a file. */
START_TEST(afile_special_targets)
{
    char dir[] = "/tmp/loong-afile-XXXXXX", fifo[64], err[LOONG_ERRLEN] = "";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK);
    ck_assert_int_ge(rd, 0);
    afile a;
    ck_assert_int_eq(afile_open(&a, fifo, err), 0);
    fputs("summary\n", a.f);
    ck_assert_int_eq(afile_commit(&a, err), 0);
    struct stat st;
    ck_assert_int_eq(stat(fifo, &st), 0);
    ck_assert_msg(S_ISFIFO(st.st_mode), "the FIFO was replaced by a regular file");
    char buf[16] = "";
    ck_assert_int_eq(read(rd, buf, sizeof buf - 1), 8);
    ck_assert_str_eq(buf, "summary\n");
    close(rd);
    unlink(fifo);
    ck_assert_int_eq(afile_open(&a, "/dev/null", err), 0);
    fputs("discarded\n", a.f);
    ck_assert_int_eq(afile_commit(&a, err), 0);
    ck_assert_int_eq(stat("/dev/null", &st), 0);
    ck_assert_msg(S_ISCHR(st.st_mode), "/dev/null is no longer a character device");
    rmdir(dir);
}
END_TEST

/* A regular target appears whole on commit and is untouched on abort. */
START_TEST(afile_regular_target)
{
    char path[64], err[LOONG_ERRLEN] = "", buf[32] = "";
    snprintf(path, sizeof path, "%s", tmp_path());
    FILE *f = fopen(path, "w");
    fputs("old", f);
    fclose(f);
    afile a;
    ck_assert_int_eq(afile_open(&a, path, err), 0);
    fputs("new", a.f);
    afile_abort(&a);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
    fclose(f);
    ck_assert_str_eq(buf, "old");
    ck_assert_int_eq(afile_open(&a, path, err), 0);
    fputs("new", a.f);
    ck_assert_int_eq(afile_commit(&a, err), 0);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
    fclose(f);
    ck_assert_str_eq(buf, "new");
    unlink(path);
}
END_TEST

/* Entries of dir other than . and .. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

/* A writer killed (SIGKILL) before its commit leaves nothing where the file
 * system has unnamed temporaries: neither a temporary nor a new target, and
 * an old target unchanged. A staged file's directory appears at commit. */
START_TEST(afile_killed_writer)
{
    char dir[] = "/tmp/loong-afile-XXXXXX", path[96], err[LOONG_ERRLEN] = "";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    afile a;
    snprintf(path, sizeof path, "%s/probe", dir);
    ck_assert_int_eq(afile_open(&a, path, err), 0);
    bool anon = a.anon;
    afile_abort(&a);
    if (!anon) { /* e.g. NFS: named temporaries, which a kill leaves */
        fprintf(stderr, "# afile_killed_writer: no O_TMPFILE in /tmp, skipped\n");
        rmdir(dir);
        return;
    }
    for (int old = 0; old < 2; old++) {
        snprintf(path, sizeof path, "%s/out.json", dir);
        if (old) {
            FILE *f = fopen(path, "w");
            fputs("old", f);
            fclose(f);
        }
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            afile w;
            char e[LOONG_ERRLEN];
            if (afile_open(&w, path, e) == 0) {
                fputs("half-written", w.f);
                fflush(w.f);
            }
            raise(SIGKILL);
            _exit(0);
        }
        int st;
        waitpid(pid, &st, 0);
        ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        ck_assert_int_eq(count_entries(dir), old);
        if (old) {
            char buf[16] = "";
            FILE *f = fopen(path, "r");
            ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
            fclose(f);
            ck_assert_str_eq(buf, "old");
        }
    }
    unlink(path);
    /* staged in dir for dir/sub/f, which exists only after commit */
    char sub[80];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    snprintf(path, sizeof path, "%s/f", sub);
    ck_assert_int_eq(afile_open_staged(&a, path, dir, err), 0);
    fputs("staged", a.f);
    ck_assert_int_eq(count_entries(dir), 0);
    ck_assert_int_eq(mkdir(sub, 0777), 0);
    ck_assert_int_eq(afile_commit(&a, err), 0);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_size, 6);
    mode_t mask = umask(0);
    umask(mask);
    ck_assert_int_eq(st.st_mode & 0777, 0666 & ~mask);
    unlink(path);
    rmdir(sub);
    rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("trace");
    tcase_add_test(tc, us_convention);
    tcase_add_test(tc, round_trip);
    tcase_add_test(tc, infile_limits);
    tcase_add_test(tc, bad_files);
    tcase_add_test(tc, afile_special_targets);
    tcase_add_test(tc, afile_regular_target);
    tcase_add_test(tc, afile_killed_writer);
    suite_add_tcase(s, tc);
    return check_run(s);
}

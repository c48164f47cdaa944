/* units: size parsing and checked arithmetic. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/units.h"
#include "core/xalloc.h"
#include "check_run.h"

START_TEST(parse_suffixes)
{
    uint64_t v;
    char err[LOONG_ERRLEN];
    ck_assert_int_eq(units_parse_count("128K", "--seq", &v, err), 0);
    ck_assert_uint_eq(v, 131072);
    ck_assert_int_eq(units_parse_count("1M", "--seq", &v, err), 0);
    ck_assert_uint_eq(v, 1048576);
    ck_assert_int_eq(units_parse_count("3g", "--seq", &v, err), 0);
    ck_assert_uint_eq(v, 3ull << 30);
    ck_assert_int_eq(units_parse_count("4097", "--seq", &v, err), 0);
    ck_assert_uint_eq(v, 4097);
}
END_TEST

START_TEST(parse_rejects)
{
    static const char *bad[] = {
        "", "0", "-5", "abc", "1.5K", "12Q", "1KK", "+4", " 4", "99999999999999999999", "17179869184G"};
    uint64_t v;
    char err[LOONG_ERRLEN];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        ck_assert_msg(units_parse_count(bad[i], "--seq", &v, err) == -1, "accepted '%s'", bad[i]);
        ck_assert_msg(strstr(err, "--seq") != NULL, "message does not name the option: %s", err);
        ck_assert_ptr_null(strchr(err, '\n'));
    }
    int n;
    ck_assert_int_eq(units_parse_int("4294967296", "--batch", &n, err), -1);
}
END_TEST

START_TEST(checked_math)
{
    uint64_t out;
    ck_assert(units_mul(1ull << 32, 1ull << 31, &out));
    ck_assert_uint_eq(out, 1ull << 63);
    ck_assert(!units_mul(1ull << 32, 1ull << 32, &out));
    ck_assert(!units_add(UINT64_MAX, 1, &out));
    uint64_t f[] = {1ull << 20, 1ull << 20, 1ull << 24};
    ck_assert(!units_mul_n(&out, 3, f));
    char buf[32];
    ck_assert_str_eq(units_fmt_count(131072, buf, sizeof buf), "128K");
    ck_assert_str_eq(units_fmt_count(1048576, buf, sizeof buf), "1M");
    ck_assert_str_eq(units_fmt_count(1000, buf, sizeof buf), "1000");
}
END_TEST

START_TEST(err_prefix)
{
    char err[LOONG_ERRLEN] = "bad value";
    loong_err_prefix(err, "file:3: ");
    ck_assert_str_eq(err, "file:3: bad value");
    memset(err, 'x', LOONG_ERRLEN - 1);
    err[LOONG_ERRLEN - 1] = '\0';
    loong_err_prefix(err, "p: ");
    ck_assert_uint_eq(strlen(err), LOONG_ERRLEN - 1);
    ck_assert(!strncmp(err, "p: xx", 5));
}
END_TEST

START_TEST(parse_mem)
{
    char err[LOONG_ERRLEN];
    double v;
    ck_assert_int_eq(units_parse_mem("80GB", "--gpu-mem", &v, err), 0);
    ck_assert(v == 80e9);
    ck_assert_int_eq(units_parse_mem("64GiB", "--gpu-mem", &v, err), 0);
    ck_assert(v == 64.0 * 1024 * 1024 * 1024);
    ck_assert_int_eq(units_parse_mem("1.5TB", "--gpu-mem", &v, err), 0);
    ck_assert(v == 1.5e12);
    ck_assert_int_eq(units_parse_mem("512MiB", "--gpu-mem", &v, err), 0);
    ck_assert(v == 512.0 * 1024 * 1024);
    const char *bad[] = {"80", "80GBs", "80gb", "80Gb", "0GB", "-1GB", "GB", "", "80 GB", "nanGB"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(units_parse_mem(bad[i], "--gpu-mem", &v, err) == -1, "accepted '%s'", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, "--gpu-mem"));
    }
}
END_TEST

/* Run f in a child with stderr on a pipe; its exit status and stderr. */
static int in_child(void (*f)(void), char *msg, size_t len)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        f();
        _exit(0);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t got;
    while (n + 1 < len && (got = read(fd[0], msg + n, len - 1 - n)) > 0)
        n += (size_t)got;
    msg[n] = '\0';
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void huge_array(void) { xmalloc_array(SIZE_MAX / 8, 16, "a huge test array"); }
static void huge_block(void) { xmalloc(SIZE_MAX / 2, "a huge test block"); }

/* Out of memory (or a size that overflows) names the request in one line
 * and exits 2, the documented status of errors. */
START_TEST(xalloc_names_the_request)
{
    char msg[2048];
    ck_assert_int_eq(in_child(huge_array, msg, sizeof msg), 2);
    const char *line = strstr(msg, "loong: out of memory: a huge test array");
    ck_assert_ptr_nonnull(line); /* one line (a sanitizer may print its own before it) */
    ck_assert_ptr_eq(strchr(line, '\n'), msg + strlen(msg) - 1);
    ck_assert_int_eq(in_child(huge_block, msg, sizeof msg), 2);
    ck_assert_ptr_nonnull(strstr(msg, "a huge test block"));
    char *p = xcalloc(0, 8, "nothing");
    ck_assert_ptr_nonnull(p); /* a zero-byte request still succeeds */
    free(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("units");
    TCase *tc = tcase_create("units");
    tcase_add_test(tc, parse_suffixes);
    tcase_add_test(tc, parse_rejects);
    tcase_add_test(tc, checked_math);
    tcase_add_test(tc, err_prefix);
    tcase_add_test(tc, parse_mem);
    tcase_add_test(tc, xalloc_names_the_request);
    suite_add_tcase(s, tc);
    return check_run(s);
}

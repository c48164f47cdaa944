/* trace: Chrome trace write/read round trip, the time convention, bad files,
 * flow events against the DAG. */
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
    trace_filter flt = {1, -1, 0};
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

/* ---- flow events ---- */

/* Times where a recv often starts before its send (the writer must then
 * move the flow's end into the recv, never before the send), and every
 * fifth task is so short that a recv can end before its send starts. */
static void flow_times(uint32_t n, double *st, double *du)
{
    for (uint32_t i = 0; i < n; i++) {
        st[i] = (double)((i * 7919u) % 1000u) * 1e-6;
        du[i] = i % 5 == 0 ? 1e-7 : 2e-3;
    }
}

static bool flow_kept(const trace_filter *flt, const dag_task *t)
{
    if (!flt) return true;
    if (flt->rank >= 0 && t->rank != flt->rank) return false;
    return flt->layer < 0 || t->layer < 0 || t->layer == flt->layer;
}

typedef struct flow_end {
    int seen;
    json_int_t pid, tid;
    double ts;
    const char *cat;
} flow_end;

/* Every flow event of the trace at p is one half of an s/f pair whose id is
 * a task; the pairs are exactly those the DAG implies under flt: each
 * written send to its written recv (s at the send's ts on its rank and
 * stream, f inside the recv's slice, at the later of the two starts), and a
 * chain through the written members of each collective instance, forward
 * in time. Expectations come from g and the times given, not the file.
 * Returns the number of flows. */
static size_t check_flows(const char *p, const dag *g, const double *st, const double *du, const trace_filter *flt)
{
    uint32_t n = dag_ntasks(g);
    json_error_t je;
    json_t *root = json_load_file(p, 0, &je);
    ck_assert_msg(root != NULL, "%s", je.text);
    flow_end *s = calloc(n, sizeof *s), *f = calloc(n, sizeof *f);
    size_t i, nflow = 0;
    json_t *e;
    json_array_foreach(json_object_get(root, "traceEvents"), i, e)
    {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        if (strcmp(ph, "s") && strcmp(ph, "f")) continue;
        json_int_t id = json_integer_value(json_object_get(e, "id"));
        ck_assert_msg(id >= 0 && id < n, "flow id %lld names no task", (long long)id);
        flow_end *x = ph[0] == 's' ? &s[id] : &f[id];
        ck_assert_msg(!x->seen, "two '%s' events with id %lld", ph, (long long)id);
        *x = (flow_end){1, json_integer_value(json_object_get(e, "pid")), json_integer_value(json_object_get(e, "tid")),
                        json_real_value(json_object_get(e, "ts")), json_string_value(json_object_get(e, "cat"))};
        if (ph[0] == 'f') ck_assert_str_eq(json_string_value(json_object_get(e, "bp")), "e");
        nflow += ph[0] == 's';
    }
    size_t want = 0;
    int *in = calloc(n, sizeof *in), *out = calloc(n, sizeof *out), *members = calloc(n, sizeof *members);
    for (uint32_t k = 0; k < n; k++) {
        const dag_task *t = dag_task_get(g, k);
        ck_assert_msg(s[k].seen == f[k].seen, "flow %u lacks its %s", k, s[k].seen ? "f" : "s");
        if (task_is_collective(t) && flow_kept(flt, t)) members[t->match]++;
        if (t->kind == TASK_SEND) {
            const dag_task *r = dag_task_get(g, t->match);
            bool both = flow_kept(flt, t) && flow_kept(flt, r);
            ck_assert_msg(s[k].seen == both, "send %u: flow %s", k, both ? "missing" : "to an unwritten recv");
            if (!both) continue;
            want++;
            double ts = trace_us(st[k]), rs = trace_us(st[r->id]), re = rs + trace_us(du[r->id]);
            double fts = ts < rs ? rs : ts > re ? re : ts;
            ck_assert_str_eq(s[k].cat, "p2p");
            ck_assert(s[k].pid == t->rank && s[k].tid == t->stream && fabs(s[k].ts - ts) < 1e-6);
            ck_assert_msg(f[k].pid == r->rank && f[k].tid == r->stream && fabs(f[k].ts - fts) < 1e-6,
                          "send %u -> recv %u: f at rank %lld stream %lld ts %.3f, want %d %d %.3f", k, r->id,
                          (long long)f[k].pid, (long long)f[k].tid, f[k].ts, r->rank, r->stream, fts);
            ck_assert(f[k].ts >= rs - 1e-6 && f[k].ts <= re + 1e-6);
        } else if (s[k].seen) {
            /* a collective member: the chain's next member is the written
             * member of the same instance on the f's rank, starting there */
            ck_assert_msg(task_is_collective(t) && flow_kept(flt, t), "flow %u starts on a %s", k,
                          task_kind_name(t->kind));
            ck_assert_str_eq(s[k].cat, "coll");
            ck_assert(s[k].pid == t->rank && s[k].tid == t->stream && fabs(s[k].ts - trace_us(st[k])) < 1e-6);
            uint32_t to = DAG_NONE;
            for (uint32_t j = t->match; j < n && to == DAG_NONE; j++) {
                const dag_task *u = dag_task_get(g, j);
                if (task_is_collective(u) && u->match == t->match && u->rank == f[k].pid && flow_kept(flt, u)) to = j;
            }
            ck_assert_msg(to != DAG_NONE && to != k, "flow %u ends on no other member of its collective", k);
            const dag_task *u = dag_task_get(g, to);
            ck_assert(f[k].tid == u->stream && fabs(f[k].ts - trace_us(st[to])) < 1e-6);
            ck_assert_msg(st[to] > st[k] || (st[to] == st[k] && to > k), "flow %u goes back in time", k);
            out[k]++;
            in[to]++;
        }
    }
    /* chains: in and out at most one per member, members - 1 links */
    size_t links = 0, chain = 0;
    for (uint32_t k = 0; k < n; k++) {
        ck_assert(in[k] <= 1 && out[k] <= 1);
        links += out[k];
        if (members[k]) chain += (size_t)members[k] - 1;
    }
    ck_assert_uint_eq(links, chain);
    ck_assert_uint_eq(nflow, want + chain);
    free(in);
    free(out);
    free(members);
    free(s);
    free(f);
    json_decref(root);
    return nflow;
}

static void write_with(const char *p, const dag *g, const double *st, const double *du, const trace_filter *flt)
{
    FILE *f = fopen(p, "w");
    ck_assert_int_eq(trace_write(f, g, "test", st, du, flt, NULL), 0);
    fclose(f);
}

START_TEST(flows_match_dag)
{
    static const struct {
        const char *strategy;
        int ph, ps, w;
    } cases[] = {{"loongtrain", 2, 4, 2}, {"dualring", 2, 4, 4}, {"allgather", 2, 4, 4}, {"ulysses", 8, 1, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        config cf = tcfg("tiny", 4096, cases[c].strategy, cases[c].ph, cases[c].ps, cases[c].w, SCOPE_STEP);
        dag *g = tbuild(&cf);
        uint32_t n = dag_ntasks(g);
        double *st = malloc(n * sizeof *st), *du = malloc(n * sizeof *du);
        flow_times(n, st, du);
        const char *p = tmp_path();
        write_with(p, g, st, du, NULL);
        size_t all = check_flows(p, g, st, du, NULL);
        ck_assert_uint_gt(all, 0);
        /* filters: flows only between written slices */
        trace_filter by_rank = {1, -1, 0}, by_layer = {-1, 0, 0};
        write_with(p, g, st, du, &by_rank);
        check_flows(p, g, st, du, &by_rank);
        write_with(p, g, st, du, &by_layer);
        size_t layer0 = check_flows(p, g, st, du, &by_layer);
        ck_assert_uint_le(layer0, all);
        unlink(p);
        free(st);
        free(du);
        dag_free(g);
    }
}
END_TEST

/* The trace at `from` without its flow events, at `to`. */
static void strip_flows(const char *from, const char *to)
{
    FILE *in = fopen(from, "r"), *out = fopen(to, "w");
    char line[8192];
    while (fgets(line, sizeof line, in))
        if (!strstr(line, "{\"ph\":\"s\"") && !strstr(line, "{\"ph\":\"f\"")) fputs(line, out);
    fclose(in);
    fclose(out);
}

/* A trace with flows and the same without (the format before flows) read
 * back alike; malformed flow events are refused, naming the event. */
START_TEST(flows_read_back)
{
    config c = tcfg("tiny", 4096, "loongtrain", 2, 4, 2, SCOPE_STEP);
    dag *g = tbuild(&c);
    uint32_t n = dag_ntasks(g);
    double *st = malloc(n * sizeof *st), *du = malloc(n * sizeof *du);
    flow_times(n, st, du);
    char with[64], without[64];
    snprintf(with, sizeof with, "%s", tmp_path());
    snprintf(without, sizeof without, "%s", tmp_path());
    write_with(with, g, st, du, NULL);
    strip_flows(with, without);
    trace a, b;
    char err[LOONG_ERRLEN];
    ck_assert_msg(trace_read(with, &a, err) == 0, "%s", err);
    ck_assert_msg(trace_read(without, &b, err) == 0, "%s", err);
    ck_assert_uint_gt(a.nflow, 0);
    ck_assert_uint_eq(a.nflow % 2, 0);
    ck_assert_uint_eq(b.nflow, 0);
    ck_assert_uint_eq(a.n, n);
    ck_assert_uint_eq(b.n, n);
    ck_assert_int_eq(memcmp(a.ev, b.ev, n * sizeof *a.ev), 0);
    ck_assert_str_eq(a.backend, b.backend);
    ck_assert_uint_eq(config_hash(&a.cfg), config_hash(&b.cfg));
    trace_free(&a);
    trace_free(&b);
    /* one malformed flow event inserted after the first line */
    static const struct {
        const char *ev, *needle;
    } bad[] = {
        {"{\"ph\":\"s\",\"cat\":\"p2p\",\"name\":\"kv\",\"pid\":0,\"tid\":2,\"ts\":1}", "id"},
        {"{\"ph\":\"f\",\"bp\":\"e\",\"id\":[1],\"pid\":0,\"tid\":2,\"ts\":1}", "id"},
        {"{\"ph\":\"s\",\"id\":1,\"pid\":99,\"tid\":2,\"ts\":1}", "pid 99"},
        {"{\"ph\":\"f\",\"id\":1,\"pid\":0,\"tid\":99,\"ts\":1}", "tid 99"},
        {"{\"ph\":\"t\",\"id\":1,\"pid\":0,\"tid\":2,\"ts\":-5}", "ts -5"},
        {"{\"ph\":\"s\",\"id\":1,\"pid\":0,\"tid\":2}", "ts"},
        {"{\"ph\":\"f\",\"id\":1,\"pid\":\"0\",\"tid\":2,\"ts\":1}", "pid"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        FILE *in = fopen(without, "r"), *out = fopen(with, "w");
        char line[8192];
        for (int l = 0; fgets(line, sizeof line, in); l++) {
            fputs(line, out);
            if (l == 0) fprintf(out, "%s,\n", bad[k].ev);
        }
        fclose(in);
        fclose(out);
        err[0] = '\0';
        ck_assert_msg(trace_read(with, &a, err) == -1, "accepted %s", bad[k].ev);
        ck_assert_msg(strstr(err, "event 0: flow event") && strstr(err, bad[k].needle), "%s: '%s' lacks '%s'",
                      bad[k].ev, err, bad[k].needle);
        ck_assert_ptr_null(strchr(err, '\n'));
    }
    unlink(with);
    unlink(without);
    free(st);
    free(du);
    dag_free(g);
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
    tcase_add_test(tc, flows_match_dag);
    tcase_add_test(tc, flows_read_back);
    tcase_add_test(tc, afile_special_targets);
    tcase_add_test(tc, afile_regular_target);
    tcase_add_test(tc, afile_killed_writer);
    suite_add_tcase(s, tc);
    return check_run(s);
}

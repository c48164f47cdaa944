/* sim_child: loong sim subprocesses and layer composition. See sim_child.h. */
#include "sim_child.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/knobs.h"
#include "core/recompute.h"
#include "core/xalloc.h"

extern char **environ;

/* "--name=value" into v[*k]. */
static void add_option(char **v, int *k, const char *name, const char *value)
{
    if (asprintf(&v[(*k)++], "--%s=%s", name, value) < 0) xalloc_die(strlen(value), "a loong sim command line");
}

char **sim_child_argv(const config *c, const sim_child_spec *sp, const char *const *extra, int nextra)
{
    char **v = xcalloc((size_t)(KNOB_COUNT + nextra + 9), sizeof *v, "a loong sim command line");
    int k = 0;
    v[k++] = xstrdup("loong", "a loong sim command line");
    v[k++] = xstrdup("sim", "a loong sim command line");
    for (int i = 0; i < KNOB_COUNT; i++) {
        char *val = i == KNOB_MODEL && sp->model_spec ? xstrdup(sp->model_spec, "a loong sim command line")
                                                      : config_knob_text(c, (config_knob)i);
        if (val) add_option(v, &k, config_knob_get((config_knob)i)->option, val);
        free(val);
    }
    add_option(v, &k, "platform", sp->platform);
    if (sp->calib) add_option(v, &k, "calib", sp->calib);
    if (sp->layers > 0) {
        char lay[16];
        snprintf(lay, sizeof lay, "%d", sp->layers);
        add_option(v, &k, "layers", lay);
    }
    for (int i = 0; i < nextra; i++)
        v[k++] = xstrdup(extra[i], "a loong sim command line");
    v[k++] = xstrdup("--json=-", "a loong sim command line");
    v[k++] = xstrdup("--quiet", "a loong sim command line");
    return v;
}

/* Append word to buf (a malloc'd string of *len bytes), single-quoted when
 * the shell would read anything in it specially. */
static void append_word(char **buf, size_t *len, const char *word)
{
    bool plain = *word != '\0';
    for (const char *p = word; *p; p++)
        plain &= (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                 strchr("_-./=:,+%@", *p) != NULL;
    size_t need = *len + 4 * strlen(word) + 4;
    *buf = xrealloc_array(*buf, need, 1, "a loong sim command");
    char *o = *buf + *len;
    if (*len) *o++ = ' ';
    if (plain) {
        o = stpcpy(o, word);
    } else {
        *o++ = '\'';
        for (const char *p = word; *p; p++)
            o = *p == '\'' ? stpcpy(o, "'\\''") : (*o = *p, o + 1);
        *o++ = '\'';
        *o = '\0';
    }
    *len = (size_t)(o - *buf);
}

/* The path of the running binary (what a reproduce command should run:
 * `loong` may not be on PATH, and another loong may be), or "loong" when
 * /proc does not say. */
static const char *self_path(void)
{
    static char path[4096];
    if (!path[0]) {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        snprintf(path + (n > 0 ? n : 0), sizeof path - (size_t)(n > 0 ? n : 0), "%s", n > 0 ? "" : "loong");
    }
    return path;
}

char *sim_child_command(char *const argv[])
{
    char *buf = NULL;
    size_t len = 0;
    for (int i = 0; argv[i]; i++)
        if (strcmp(argv[i], "--json=-") && strcmp(argv[i], "--quiet") && strcmp(argv[i], "--links=0"))
            append_word(&buf, &len, i == 0 ? self_path() : argv[i]);
    return buf ? buf : xstrdup("", "a loong sim command");
}

void sim_child_argv_free(char **argv)
{
    for (int i = 0; argv && argv[i]; i++)
        free(argv[i]);
    free(argv);
}

/* An unlinked temporary file, or -1: nothing to clean up, whatever happens. */
static int scratch_file(void)
{
    char path[] = "/tmp/loong-sim-child-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) unlink(path);
    return fd;
}

int sim_child_start(sim_child *ch, char *const argv[], char err[LOONG_ERRLEN])
{
    /* The summary goes to a file, not a pipe: a child whose summary is
     * larger than a pipe holds (64 KiB: the per-rank rows of thousands of
     * ranks) would block writing it while its parent waits for it to exit. */
    ch->out = scratch_file();
    if (ch->out < 0) {
        snprintf(err, LOONG_ERRLEN, "cannot start loong sim: a temporary file in /tmp: %s", strerror(errno));
        return -1;
    }
    ch->log = scratch_file();
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, ch->out, 1);
    if (ch->log >= 0) posix_spawn_file_actions_adddup2(&fa, ch->log, 2);
    char parent[32]; /* the child dies with this process (sim_child_guard) */
    snprintf(parent, sizeof parent, "%ld", (long)getpid());
    setenv(SIM_CHILD_ENV, parent, 1);
    int rc = posix_spawn(&ch->pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) {
        snprintf(err, LOONG_ERRLEN, "cannot start loong sim: %s", strerror(rc));
        close(ch->out);
        if (ch->log >= 0) close(ch->log);
        ch->out = ch->log = -1;
        return -1;
    }
    return 0;
}

/* All of fd into a NUL-terminated malloc'd string. */
static char *slurp(int fd)
{
    size_t cap = 4096, n = 0;
    char *buf = xmalloc(cap, "a loong sim summary");
    ssize_t got;
    while ((got = read(fd, buf + n, cap - n - 1)) > 0 || (got < 0 && errno == EINTR)) {
        if (got < 0) continue;
        n += (size_t)got;
        if (n + 1 == cap) buf = xrealloc_array(buf, cap *= 2, 1, "a loong sim summary");
    }
    buf[n] = '\0';
    return buf;
}

/* The child's first line of stderr, for a failure message. */
static void first_line(int fd, char *line, size_t len)
{
    line[0] = '\0';
    if (fd < 0 || lseek(fd, 0, SEEK_SET) != 0) return;
    ssize_t n = read(fd, line, len - 1);
    line[n > 0 ? n : 0] = '\0';
    line[strcspn(line, "\n")] = '\0';
}

int sim_child_finish(sim_child *ch, int status, const char *what, sim_child_result *res, char err[LOONG_ERRLEN])
{
    char *out = lseek(ch->out, 0, SEEK_SET) == 0 ? slurp(ch->out) : xstrdup("", "a loong sim summary");
    int rc = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) {
        char line[200];
        first_line(ch->log, line, sizeof line);
        snprintf(err, LOONG_ERRLEN, "simulating %s failed (status %d): %s", what,
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, line[0] ? line : "no message");
        rc = -1;
    } else {
        json_error_t je;
        json_t *j = json_loads(out, 0, &je);
        if (!j || json_unpack(j, "{s:F, s:F}", "step_s", &res->step, "exposed_mean_s", &res->exposed) < 0) {
            snprintf(err, LOONG_ERRLEN, "simulating %s: the child printed no readable summary", what);
            rc = -1;
        }
        json_decref(j);
    }
    free(out);
    close(ch->out);
    if (ch->log >= 0) close(ch->log);
    ch->out = ch->log = -1;
    return rc;
}

int sim_child_run(char *const argv[], const char *what, sim_child_result *res, char err[LOONG_ERRLEN])
{
    sim_child ch;
    if (sim_child_start(&ch, argv, err) < 0) return -1;
    int status = 0;
    while (waitpid(ch.pid, &status, 0) < 0 && errno == EINTR)
        ;
    return sim_child_finish(&ch, status, what, res, err);
}

/* Whether listing (loong topo --list-links) has a link `name`, or its
 * _UP and _DOWN halves (sim_whatif.c's find_links). */
static bool lists_link(const char *listing, const char *name)
{
    size_t len = strlen(name);
    for (const char *line = listing; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        line += strspn(line, " ");
        if (*line == '#') continue;
        size_t n = strcspn(line, " \n");
        if ((n == len || (n == len + 3 && !strncmp(line + len, "_UP", 3)) ||
             (n == len + 5 && !strncmp(line + len, "_DOWN", 5))) &&
            !strncmp(line, name, len))
            return true;
    }
    return false;
}

int sim_child_check_links(const char *path, const whatif *w, char err[LOONG_ERRLEN])
{
    if (w->nslow == 0 && w->nfail == 0) return 0;
    char *argv[] = {"loong", "topo", "--list-links", (char *)path, "-o", "-", NULL};
    sim_child ch;
    if (sim_child_start(&ch, argv, err) < 0) return -1;
    int status = 0;
    while (waitpid(ch.pid, &status, 0) < 0 && errno == EINTR)
        ;
    char *out = lseek(ch.out, 0, SEEK_SET) == 0 ? slurp(ch.out) : xstrdup("", "a link listing"), line[200];
    int rc = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        first_line(ch.log, line, sizeof line);
        snprintf(err, LOONG_ERRLEN, "listing the links of '%s' failed: %s", path, line[0] ? line : "no message");
        rc = -1;
    }
    for (int i = 0; rc == 0 && i < w->nslow + w->nfail; i++) {
        bool slow = i < w->nslow;
        const char *name = slow ? w->slow[i].name : w->fail[i - w->nslow].name;
        if (lists_link(out, name)) continue;
        snprintf(err, LOONG_ERRLEN,
                 "%s '%s': platform '%s' has no link of that name: list them with loong topo --list-links %s",
                 slow ? "--slow-link" : "--fail-link", name, path, path);
        rc = -1;
    }
    free(out);
    close(ch.out);
    if (ch.log >= 0) close(ch.log);
    return rc;
}

void sim_child_guard(void)
{
    const char *parent = getenv(SIM_CHILD_ENV);
    if (!parent) return;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if ((long)getppid() != strtol(parent, NULL, 10)) _exit(2); /* the parent died before prctl */
}

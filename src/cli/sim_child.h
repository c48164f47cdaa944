/*
 * sim_child: `loong sim` as a child process. SimGrid initialises
 * once per process, so every command that needs several simulations
 * (`loong plan`, `loong sim --compose`) runs each one as this program
 * again. A child prints its JSON summary on its standard output (`--json
 * -`), an unlinked temporary file that the parent reads once the child has
 * exited (a pipe would block a child whose summary outgrows it while the
 * parent waits): no named file is written, and no output path (least of
 * all /dev/null) is handed to the child.
 *
 * Layer: cli (may use every library).
 */
#ifndef LOONG_CLI_SIM_CHILD_H
#define LOONG_CLI_SIM_CHILD_H

#include <sys/types.h>

#include "core/config.h"
#include "model/whatif.h"

/* Where and how a child simulates. */
typedef struct sim_child_spec {
    const char *platform;   /* --platform */
    const char *calib;      /* --calib, or NULL for the platform's table */
    const char *model_spec; /* --model as the user gave it (a model file is read again), or NULL: c's name */
    int layers;             /* --layers, or 0 for the model's */
} sim_child_spec;

/* The command line of a child simulating c: "loong sim", every knob of c
 * from the knob table, the spec's options, the `nextra` strings of `extra`,
 * then --json=- --quiet. NULL-terminated, malloc'd: free it with
 * sim_child_argv_free(). */
char **sim_child_argv(const config *c, const sim_child_spec *sp, const char *const *extra, int nextra);
void sim_child_argv_free(char **argv);

/* The command a user types to run what argv (from sim_child_argv) runs:
 * the running binary's absolute path (not "loong", which PATH may lack or
 * name another build), then the words shell-quoted, without the options only a child needs
 * (--json=-, --quiet, --links=0): the same prediction on stdout. Malloc'd. */
char *sim_child_command(char *const argv[]);

/* A running child: its pid, its standard output and its standard error
 * (unlinked temporary files: the summary, read back when it has exited;
 * the log, read back on failure). */
typedef struct sim_child {
    pid_t pid;
    int out, log;
} sim_child;

/* What a child's summary says. */
typedef struct sim_child_result {
    double step;    /* predicted step time, seconds */
    double exposed; /* mean exposed communication per rank, seconds */
} sim_child_result;

/* The environment variable that tells a child its parent's pid. */
#define SIM_CHILD_ENV "LOONG_SIM_CHILD"

/* Called first in main: in a child (SIM_CHILD_ENV set), die with the
 * parent (Linux's PR_SET_PDEATHSIG), so that a child the planner kills at
 * --sim-timeout takes its own children (loong sim --compose's) with it,
 * and none outlives an interrupted plan. */
void sim_child_guard(void);

/* Start /proc/self/exe with argv. Returns 0, or -1 with a message. */
int sim_child_start(sim_child *ch, char *const argv[], char err[LOONG_ERRLEN]);

/* After waitpid() reported `status` for ch->pid: read the summary, close
 * ch's descriptors. Exit status 1 (a # BUG line) still carries a summary.
 * Returns 0, or -1 with a message that quotes the child's first line of
 * stderr. `what` names the run in the message. */
int sim_child_finish(sim_child *ch, int status, const char *what, sim_child_result *res, char err[LOONG_ERRLEN]);

/* Start, wait for and finish one child. */
int sim_child_run(char *const argv[], const char *what, sim_child_result *res, char err[LOONG_ERRLEN]);

/* Whether every --slow-link and --fail-link of w names a link of the
 * platform at path (loong topo --list-links, in a child: this process
 * keeps SimGrid for its own runs), as loong sim would find it: the name,
 * or its _UP and _DOWN halves. So a planner fails at once, with sim's
 * message, not after the simulations before the first that uses it.
 * Returns 0, or -1 with a message. */
int sim_child_check_links(const char *path, const whatif *w, char err[LOONG_ERRLEN]);

#endif

/*
 * fault: injected faults for `loong exec --fail-rank R --fail-at WHEN
 * --fail-signal SIG`. The chosen rank ends itself at one point of the run
 * the way a real failure would: it exits, is killed (SIGKILL, a real
 * kill -9: no handler, no cleanup) or is stopped (SIGSTOP: alive but
 * silent, the watchdog's case). The executor places the points; this
 * module only names, parses and fires them.
 *
 * Layer: exec (C and POSIX signals only: no MPI, no DAG).
 */
#ifndef LOONG_EXEC_FAULT_H
#define LOONG_EXEC_FAULT_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fault_at {
    FAULT_NONE,
    FAULT_START, /* start-up: before the communicators are made */
    FAULT_TASK,  /* when task T (exec_opts.fail_task) starts on its stream */
    FAULT_CHECK, /* in the --check gather, after the first gathered tensor */
    FAULT_TRACE, /* in the trace write: rank 0 has written the temporary, not renamed it */
} fault_at;

typedef enum fault_signal {
    FAULT_EXIT, /* _exit(3), as a crash that returns an error would */
    FAULT_KILL, /* raise(SIGKILL) */
    FAULT_STOP, /* raise(SIGSTOP) */
} fault_signal;

/* Parse WHEN: "start", "task:T" (T: a task id, stored in *task), "check"
 * or "trace". Returns 0, or -1 for anything else (nothing stored). */
int fault_parse_at(const char *s, fault_at *at, int *task);

/* Parse "exit", "kill" or "stop". Returns 0 or -1. */
int fault_parse_signal(const char *s, fault_signal *sig);

/* What the point is called in messages: "start-up", "the --check gather",
 * "the trace write" ("a task" for FAULT_TASK; callers name the task). */
const char *fault_at_name(fault_at at);

/* End this process as sig says, after one line on stderr naming the rank
 * and the point `where`. Does not return (a stopped rank that is continued
 * exits with status 3). */
void fault_fire(int rank, const char *where, fault_signal sig) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif

#endif

/* fault: injected faults (see fault.h). */
#include "fault.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fault_parse_at(const char *s, fault_at *at, int *task)
{
    static const struct {
        const char *name;
        fault_at at;
    } plain[] = {{"start", FAULT_START}, {"check", FAULT_CHECK}, {"trace", FAULT_TRACE}};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (!strcmp(s, plain[i].name)) {
            *at = plain[i].at;
            return 0;
        }
    if (strncmp(s, "task:", 5) || s[5] < '0' || s[5] > '9') return -1;
    char *end;
    errno = 0;
    long t = strtol(s + 5, &end, 10);
    if (*end || errno || t > 1000000000L) return -1;
    *at = FAULT_TASK;
    *task = (int)t;
    return 0;
}

int fault_parse_signal(const char *s, fault_signal *sig)
{
    if (!strcmp(s, "exit"))
        *sig = FAULT_EXIT;
    else if (!strcmp(s, "kill"))
        *sig = FAULT_KILL;
    else if (!strcmp(s, "stop"))
        *sig = FAULT_STOP;
    else
        return -1;
    return 0;
}

const char *fault_at_name(fault_at at)
{
    switch (at) {
    case FAULT_START: return "start-up";
    case FAULT_TASK: return "a task";
    case FAULT_CHECK: return "the --check gather";
    case FAULT_TRACE: return "the trace write";
    default: return "nowhere";
    }
}

void fault_fire(int rank, const char *where, fault_signal sig)
{
    static const char *how[] = {"exiting", "raising SIGKILL", "raising SIGSTOP"};
    fprintf(stderr, "loong exec: rank %d: injected failure at %s (--fail-rank/--fail-at): %s\n", rank, where, how[sig]);
    fflush(stderr);
    if (sig == FAULT_KILL) raise(SIGKILL);
    if (sig == FAULT_STOP) raise(SIGSTOP);
    _exit(3);
}

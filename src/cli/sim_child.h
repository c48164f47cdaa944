/*
 * sim_child: `loong sim` as a child process. SimGrid initialises once per
 * process, so every command that needs several simulations (plan, sim
 * --compose) runs each one as this program again and reads its --json
 * summary.
 */
#ifndef LOONG_CLI_SIM_CHILD_H
#define LOONG_CLI_SIM_CHILD_H

#include <sys/types.h>

#include "core/units.h"

/* Start /proc/self/exe with argv (NULL-terminated, argv[0] = "loong"),
 * stdin and stdout on /dev/null and stderr to `log` (or /dev/null when
 * NULL). Returns 0 and sets *pid, or -1 with a message. */
int sim_child_spawn(char *const argv[], const char *log, pid_t *pid, char err[LOONG_ERRLEN]);

/* Read step_s and exposed_mean_s from a child's --json summary and remove
 * the file. Returns 0, or -1 when it is missing or unreadable. */
int sim_child_result(const char *json, double *step, double *exposed);

#endif

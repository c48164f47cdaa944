/* sim_child: loong sim subprocesses. See sim_child.h. */
#include "sim_child.h"

#include <fcntl.h>
#include <jansson.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

int sim_child_spawn(char *const argv[], const char *log, pid_t *pid, char err[LOONG_ERRLEN])
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, log ? log : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int rc = posix_spawn(pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) snprintf(err, LOONG_ERRLEN, "cannot start loong sim: %s", strerror(rc));
    return rc ? -1 : 0;
}

int sim_child_result(const char *json, double *step, double *exposed)
{
    json_error_t je;
    json_t *j = json_load_file(json, 0, &je);
    int rc = j && json_unpack(j, "{s:F, s:F}", "step_s", step, "exposed_mean_s", exposed) == 0 ? 0 : -1;
    json_decref(j);
    unlink(json);
    return rc;
}

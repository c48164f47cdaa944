/*
 * cli: the `loong` command. Each subcommand is one file filling a
 * cli_command; the configuration options shared by dag, sim, exec and plan
 * are parsed here once (cli_config.c).
 *
 * Exit status: 0 success, 1 a check failed (e.g. exec --check), 2 bad input
 * or an error, with a one-line message on stderr.
 */
#ifndef LOONG_CLI_H
#define LOONG_CLI_H

#include <getopt.h>

#include "core/config.h"

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command;

/* Print "loong CMD: error: MSG" and return 2 (for `return cli_fail(...)`). */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Monotonic wall-clock seconds, and this process's peak resident memory. */
double cli_now(void);
double cli_peak_rss_mb(void);

/* Raw strings of the configuration options, parsed by cli_config_finish. */
typedef struct cli_config {
    const char *model, *seq, *batch, *mesh, *strategy, *window, *placement, *partition, *ring, *kv_replication, *scope,
        *gpus_per_node, *recompute, *zero, *dtype;
} cli_config;

/* getopt_long entries for the configuration options; their `val`s are
 * CLI_OPT_BASE and up. */
#define CLI_OPT_BASE 1000
#define CLI_CONFIG_OPTIONS                                                                                             \
    {"model", required_argument, 0, CLI_OPT_BASE + 0}, {"seq", required_argument, 0, CLI_OPT_BASE + 1},                \
        {"batch", required_argument, 0, CLI_OPT_BASE + 2}, {"mesh", required_argument, 0, CLI_OPT_BASE + 3},           \
        {"strategy", required_argument, 0, CLI_OPT_BASE + 4}, {"window", required_argument, 0, CLI_OPT_BASE + 5},      \
        {"placement", required_argument, 0, CLI_OPT_BASE + 6}, {"partition", required_argument, 0, CLI_OPT_BASE + 7},  \
        {"ring", required_argument, 0, CLI_OPT_BASE + 8}, {"kv-replication", required_argument, 0, CLI_OPT_BASE + 9},  \
        {"scope", required_argument, 0, CLI_OPT_BASE + 10},                                                            \
        {"gpus-per-node", required_argument, 0, CLI_OPT_BASE + 11},                                                    \
        {"recompute", required_argument, 0, CLI_OPT_BASE + 12}, {"zero", required_argument, 0, CLI_OPT_BASE + 13},     \
    {                                                                                                                  \
        "dtype", required_argument, 0, CLI_OPT_BASE + 14                                                               \
    }

/* Record option `opt` (a CLI_CONFIG_OPTIONS val); returns false if opt is
 * not a configuration option. */
bool cli_config_option(cli_config *cc, int opt, const char *arg);

/* Turn the recorded strings into a validated config: defaults, then the
 * strategy preset over the mesh, then explicit knob overrides. Returns 0 or
 * -1 with a message naming the option. */
int cli_config_finish(const cli_config *cc, config *c, char err[LOONG_ERRLEN]);

/* Help text of the configuration options. */
extern const char cli_config_help[];

int cmd_dag(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_topo(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);

/* Under mpirun only rank 0 prints cli_fail messages (set by cmd_exec). */
extern bool cli_quiet;

#endif

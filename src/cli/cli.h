/*
 * cli: the `loong` command. Each subcommand is one file filling a
 * cli_command; the configuration options shared by dag, sim, exec and plan
 * are parsed here once (cli_config.c).
 *
 * Exit status: 0 success, 1 a check failed (e.g. exec --check), 2 bad input
 * or an error, with a one-line message on stderr.
 *
 * Layer: cli (may use every library).
 */
#ifndef LOONG_CLI_H
#define LOONG_CLI_H

#include <getopt.h>
#include <stdio.h>

#include "core/config.h"
#include "core/knobs.h"
#include "model/whatif.h"

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command;

/* Print "loong CMD: error: MSG" and return 2 (for `return cli_fail(...)`).
 * Right after cli_getopt_long diagnosed a long option ('?' below), MSG is
 * that diagnosis instead: every command's '?' branch calls cli_fail. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* getopt_long without abbreviations. glibc's getopt_long takes any
 * unambiguous prefix of a long option, so `--sequence 128K` silently set
 * --sequence-parallel. This returns what getopt_long returns, except '?'
 * for a long option not typed in full (its name up to '='); for that and
 * for an unknown or ambiguous long option that is a prefix of real ones
 * (or has one as its prefix), the next cli_fail says "unknown option
 * '--sequence' (did you mean --seq or --sequence-parallel?): see loong CMD
 * --help". optind then points past the option as typed. */
int cli_getopt_long(int argc, char *const argv[], const char *shortopts, const struct option *longopts, int *longindex);
/* Every command's option loop calls getopt_long; this sends each call
 * through cli_getopt_long, so that no command (nor a new one) takes
 * abbreviations. cli_config.c calls the real one as (getopt_long)(...). */
#define getopt_long(argc, argv, shortopts, longopts, longindex)                                                        \
    cli_getopt_long(argc, argv, shortopts, longopts, longindex)

/* Monotonic wall-clock seconds, and this process's peak resident memory. */
double cli_now(void);
double cli_peak_rss_mb(void);

/* The configuration options as given, by knob (config.h); NULL when not
 * given. Parsed by cli_config_finish. */
typedef struct cli_config {
    const char *val[KNOB_COUNT];
    const char *docs_file, *doc_dist, *seed; /* the other two ways to give KNOB_DOCS, and the draw's seed */
    const char *megatron;                    /* --megatron-args FILE|- (cli_megatron.c) */
    char megatron_note[1024];   /* its arguments read but not modelled, said once the configuration is valid */
    const char *torchtitan;     /* --torchtitan-toml FILE|- (cli_torchtitan.c) */
    char torchtitan_note[1024]; /* its keys read but not modelled, likewise */
} cli_config;

/* getopt_long values of the configuration options: CLI_OPT_BASE + knob,
 * then --docs-file, --doc-dist and --seed, then Megatron's on/off flags
 * that set a knob on (CLI_OPT_FLAGS + i, cli_config.c's aliases). */
#define CLI_OPT_BASE 1000
enum {
    CLI_OPT_DOCS_FILE = CLI_OPT_BASE + KNOB_COUNT,
    CLI_OPT_DOC_DIST,
    CLI_OPT_SEED,
    CLI_OPT_MEGATRON,
    CLI_OPT_TORCHTITAN,
    CLI_OPT_FLAGS
};

/* --seed N (default 1): the seed of everything drawn (a --doc-dist packing,
 * exec's inputs). Returns 0 or -1 with a message. */
int cli_config_seed(const cli_config *cc, uint64_t *seed, char err[LOONG_ERRLEN]);

/* ---- Megatron-LM's launch arguments (cli_megatron.c) ---- */
/* Read the pretrain_gpt.py arguments of path ("-": standard input) into
 * knob strings in out (as if given on the command line) and, when they
 * give the shape, the model into m (*has_model). given: the options of the
 * command line (its --dp sets the replicas when torchrun's world is not in
 * the file). Prints one "read, not modelled" stderr line when some argument
 * changes nothing in loong. Returns 0, or -1 with a one-line message (a
 * contradiction names both arguments). */
int cli_megatron_read(const char *path, const cli_config *given, cli_config *out, model *m, bool *has_model,
                      char err[LOONG_ERRLEN]);
/* Write the Megatron-LM arguments (and torchrun's world) that run c, one
 * option a line with backslash continuations; what Megatron-LM cannot
 * express is named in '#' comment lines first. Returns the number of such
 * knobs (0: exact), or -1 on a write error. */
int cli_megatron_emit(FILE *f, const config *c);

/* The text of path ("-": standard input, at most 1 MiB), malloc'd (cli_data.c); what
 * names the option in messages ("--megatron-args"). NULL with a one-line
 * message. */
char *cli_read_text(const char *path, const char *what, char err[LOONG_ERRLEN]);

/* ---- torchtitan's job TOML (cli_torchtitan.c) ---- */
/* Read the job configuration of path ("-": standard input; torchtitan's
 * --job.config_file, v0.2.2's JobConfig) into knob strings in out, as if
 * given on the command line: [model], [training], [parallelism] and
 * [activation_checkpoint]. given: the command line (its --dp resolves
 * data_parallel_shard_degree = -1; its --model replaces [model]). Every
 * other key is named in out->torchtitan_note ("read, not modelled").
 * Returns 0, or -1 with a one-line message (a contradiction names both
 * keys). */
int cli_torchtitan_read(const char *path, const cli_config *given, cli_config *out, char err[LOONG_ERRLEN]);
/* Write the torchtitan job TOML sections that run c; what torchtitan
 * cannot express is named in '#' comment lines first. Returns the number
 * of such knobs (0: exact), or -1 on a write error. */
int cli_torchtitan_emit(FILE *f, const config *c);

/* ---- data files (cli_data.c) ---- */
/* The platform `given` names: a path, a file in the working directory, or a
 * name (with or without .xml) searched on loong's data path (core/datapath.h).
 * Returns 0 with the path in out; -1 with a message listing where it looked. */
int cli_find_platform(const char *given, char *out, size_t len, char err[LOONG_ERRLEN]);
/* `loong topo --list`: every directory of the data path with its platforms
 * and calibration tables. Returns 0, or -1 on a write error. */
int cli_list_data(FILE *f);

/* The kernel-name table of --kernel-names FILE: its rules ahead of the
 * shipped ones (analysis/kineto.h), or the shipped ones alone (path NULL).
 * NULL with a message for an unreadable file or a bad rule. */
typedef struct kineto_names kineto_names;
kineto_names *cli_kernel_names(const char *path, char err[LOONG_ERRLEN]);

/* ---- the perturbation options of sim, coll and plan (cli_whatif.c) ---- */
enum { CLI_OPT_STRAGGLER = 2000, CLI_OPT_SLOW_LINK, CLI_OPT_FAIL_LINK, CLI_OPT_JITTER };
#define CLI_WHATIF_OPTIONS                                                                                             \
    {"straggler", required_argument, 0, CLI_OPT_STRAGGLER}, {"slow-link", required_argument, 0, CLI_OPT_SLOW_LINK},    \
        {"fail-link", required_argument, 0, CLI_OPT_FAIL_LINK},                                                        \
    {                                                                                                                  \
        "jitter", required_argument, 0, CLI_OPT_JITTER                                                                 \
    }
/* Their --help lines. */
const char *cli_whatif_help(void);
/* Record perturbation option `opt` in w: 1; 0 when opt is not one; -1
 * after printing "loong CMD: error: ..." (return 2 then). */
int cli_whatif_option(const char *cmd, whatif *w, int opt, const char *arg);

/* The getopt_long table of a command: one option per configuration knob
 * (named by the knob table), then the command's own options `own`
 * (terminated by a zero entry, at most 48). Returns a static array: each
 * process parses one command line. */
const struct option *cli_options(const struct option *own);

/* The knob of option value `opt`, or -1 when opt is not a configuration
 * option. */
int cli_config_knob(int opt);

/* Record option `opt` (a cli_options value); returns false if opt is not
 * a configuration option. */
bool cli_config_option(cli_config *cc, int opt, const char *arg);

/* Turn the recorded strings into a validated config: defaults, then the
 * strategy preset over the mesh, then explicit knob overrides. Returns 0 or
 * -1 with a message naming the option. */
int cli_config_finish(const cli_config *cc, config *c, char err[LOONG_ERRLEN]);

/* Help text of the configuration options, the models and the strategies,
 * from the knob, model and strategy tables. */
const char *cli_config_help(void);

int cmd_dag(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_topo(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_check(int argc, char **argv);
/* loong compare --kineto (cmd_compare_kineto.c), which cmd_compare hands over to. */
int cmd_compare_kineto(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_coll(int argc, char **argv);

/* Under mpirun only rank 0 prints cli_fail messages (set by cmd_exec). */
extern bool cli_quiet;

#endif

/*
 * cli_opts: what every command's option loop shares. Each `loong CMD`
 * parses its own options with getopt_long (cli.h routes it through
 * cli_getopt_long); the case every loop ends with, the operands none
 * takes, and counts are read here, so that their messages are the same
 * in every command.
 *
 * Layer: cli.
 */
#ifndef LOONG_CLI_OPTS_H
#define LOONG_CLI_OPTS_H

#include <stdbool.h>
#include <stdio.h>

/* The end of an option switch (`case 'h': default:`): opt 'h' prints the
 * usage to stdout and returns help_rc (each command's convention for
 * "stop, successfully"); anything else is an unknown or incomplete option,
 * refused through cli_fail (status 2) with `help` (e.g. "loong dag") named
 * for the list of options. */
int cli_opt_tail(const char *cmd, const char *help, int opt, char *const argv[], void (*usage)(FILE *), int help_rc);

/* After the loop: no operand is left (0), or the first is refused (2). */
int cli_opt_no_operands(const char *cmd, const char *help, int argc, char *const argv[]);

/* A count for option `opt` (K/M/G suffixes, units.h), "0" only when
 * zero_ok, at most max. Returns 0, or cli_fail's 2 naming the option. */
int cli_opt_count(const char *cmd, const char *opt, const char *s, bool zero_ok, int max, int *out);

#endif

/* cli_opts: the option loops' shared end, operand check and count parser (cli_opts.h). */
#include "cli_opts.h"

#include <getopt.h>
#include <stdint.h>
#include <string.h>

#include "cli.h"
#include "core/units.h"

int cli_opt_tail(const char *cmd, const char *help, int opt, char *const argv[], void (*usage)(FILE *), int help_rc)
{
    if (opt == 'h') {
        usage(stdout);
        return help_rc;
    }
    return cli_fail(cmd, "unknown or incomplete option '%s': see %s --help", argv[optind - 1], help);
}

int cli_opt_no_operands(const char *cmd, const char *help, int argc, char *const argv[])
{
    if (optind < argc) return cli_fail(cmd, "unexpected argument '%s': see %s --help", argv[optind], help);
    return 0;
}

int cli_opt_count(const char *cmd, const char *opt, const char *s, bool zero_ok, int max, int *out)
{
    char err[LOONG_ERRLEN];
    uint64_t v = 0;
    if (!(zero_ok && !strcmp(s, "0")) && units_parse_count(s, opt, &v, err) < 0) return cli_fail(cmd, "%s", err);
    if (v > (uint64_t)max) {
        char lim[32];
        return cli_fail(cmd, "%s '%s' is too large (at most %s)", opt, s,
                        units_fmt_count((uint64_t)max, lim, sizeof lim));
    }
    *out = (int)v;
    return 0;
}

/* The perturbation options of loong sim, coll and plan (cli.h, model/whatif.h). */
#include <stdio.h>

#include "cli.h"

const char *cli_whatif_help(void)
{
    return "Perturbations (what-if; each may be repeated, and shows in the summary and the trace):\n"
           "  --straggler RANK[:F]  rank RANK's GPU runs its kernels F times slower          [F 1.25]\n"
           "                        (any rank of the run, every data-parallel replica's)\n"
           "  --slow-link NAME[:F]  link NAME at 1/F of its bandwidth, e.g. node0-nic0:2      [F 2]\n"
           "  --fail-link NAME      link NAME down: traffic reroutes through another GPU (PXN:\n"
           "                        another rail; or another node); refused when no path\n"
           "                        through at most one relay GPU is left\n"
           "  --jitter PCT          every kernel's time times a lognormal draw of mean 1 and\n"
           "                        coefficient of variation PCT %, from --seed N            [0]\n"
           "                        (link names: loong topo --list-links PLATFORM)\n";
}

int cli_whatif_option(const char *cmd, whatif *w, int opt, const char *arg)
{
    char err[LOONG_ERRLEN];
    int rc;
    switch (opt) {
    case CLI_OPT_STRAGGLER: rc = whatif_add_straggler(w, arg, err); break;
    case CLI_OPT_SLOW_LINK: rc = whatif_add_slow_link(w, arg, err); break;
    case CLI_OPT_FAIL_LINK: rc = whatif_add_fail_link(w, arg, err); break;
    case CLI_OPT_JITTER: rc = whatif_set_jitter(w, arg, err); break;
    default: return 0;
    }
    if (rc < 0) {
        cli_fail(cmd, "%s", err);
        return -1;
    }
    return 1;
}

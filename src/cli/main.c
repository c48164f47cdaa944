/*
 * loong: the command. It plans, simulates (SimGrid) and executes (MPI
 * ranks with CPU kernels, or CUDA) training steps of long-context LLMs over
 * a device mesh: tensor, head and sequence (context) parallelism, pipeline
 * stages and data-parallel replicas. This file only dispatches: one
 * subcommand per file (cmd_*.c), all reading the configuration options of
 * cli_config.c.
 */
#include <stdio.h>
#include <string.h>

#include "autoconf.h"
#include "cli.h"
#include "sim_child.h"

static const cli_command commands[] = {
    {"dag", "build, validate and print the task DAG of a configuration", cmd_dag},
#ifdef HAVE_SIMGRID
    {"sim", "predict a configuration on a SimGrid cluster: step time, MFU, trace", cmd_sim},
#endif
    {"coll", "nccl-tests on a simulated platform: time, algbw, busbw per size", cmd_coll},
    {"topo", "generate a SimGrid platform (NVSwitch + rail NICs + fat-tree)", cmd_topo},
    {"plan", "choose the layout for N GPUs: memory + analytical model, SimGrid ranking", cmd_plan},
    {"compare", "compare a predicted trace with a measured one, task by task", cmd_compare},
    {"calibrate", "fit compute rates and link alpha/beta from measured traces", cmd_calibrate},
    {"check", "is a reported throughput plausible? against the ceiling and the prediction", cmd_check},
#ifdef HAVE_MPI
    {"exec", "run the DAG on MPI ranks with CPU kernels; --check proves it numerically", cmd_exec},
#endif
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: loong <command> [options]   (loong <command> --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n  loong --version    print the version\n");
}

static void version(void) { printf("loong %s\n", PACKAGE_VERSION); }

int main(int argc, char **argv)
{
    sim_child_guard();
    if (argc < 2) {
        fprintf(stderr, "loong: error: give a command (");
        for (size_t i = 0; i < NCOMMANDS; i++)
            fprintf(stderr, "%s%s", i ? ", " : "", commands[i].name);
        fprintf(stderr, "): see loong --help\n");
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        version();
        return 0;
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "loong: error: unknown command '%s': run loong --help for the list\n", argv[1]);
    return 2;
}

/* loong exec: run the DAG for real on MPI ranks (see src/exec). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/strategy.h"
#include "../exec/exec.h"
#include "cli.h"

static void exec_usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np P loong exec [configuration] [--check] [--trace FILE] [--dump DIR]\n"
            "                               [--seed N] [--iters N] [--warmup N] [--device cpu]\n"
            "\n"
            "Run the DAG of one configuration on P = P_h x P_s MPI ranks: every rank builds\n"
            "the same DAG and executes its own tasks, each stream a worker thread, with\n"
            "non-blocking MPI on one communicator per stream and group. Activations are fp32\n"
            "on the CPU device (--dtype defaults to fp32 here); B must be 1.\n"
            "\n"
            "  --check               compare with a single-rank float64 reference over the\n"
            "                        whole sequence; exit 1 above tolerance\n"
            "  --trace FILE          measured Chrome trace (the median timed iteration)\n"
            "  --dump DIR            gathered inputs and outputs as .npy files\n"
            "  --seed N              input seed                                    [1]\n"
            "  --iters N             timed iterations                              [3]\n"
            "  --warmup N            untimed iterations first                      [1]\n"
            "  --device D            cpu (cuda comes with the CUDA device)       [cpu]\n"
            "  --timeout S           abort all ranks when an iteration exceeds S s [30]\n"
            "  --fail-rank R --fail-at-task T\n"
            "                        fault injection: rank R exits when it reaches task T\n"
            "  -h, --help            this text\n"
            "\n%s%s"
            "\nExample:\n"
            "  mpirun -np 8 loong exec --model tiny --seq 4K --mesh 2x4 --strategy loongtrain \\\n"
            "        --window 2 --scope attn --check --trace measured.json\n",
            cli_config_help, strategy_help());
}

typedef struct exec_cli {
    exec_opts o;
    const char *device;
    cli_config cc;
} exec_cli;

static int parse_uint(const char *s, const char *what, uint64_t *out)
{
    char err[LOONG_ERRLEN];
    if (!strcmp(s, "0")) {
        *out = 0;
        return 0;
    }
    if (units_parse_count(s, what, out, err) < 0) return cli_fail("exec", "%s", err);
    return 0;
}

static int parse_args(int argc, char **argv, exec_cli *e)
{
    static const struct option opts[] = {
        CLI_CONFIG_OPTIONS,
        {"check", no_argument, 0, 'c'},
        {"trace", required_argument, 0, 't'},
        {"dump", required_argument, 0, 'D'},
        {"seed", required_argument, 0, 's'},
        {"iters", required_argument, 0, 'i'},
        {"warmup", required_argument, 0, 'w'},
        {"device", required_argument, 0, 'd'},
        {"timeout", required_argument, 0, 'T'},
        {"fail-rank", required_argument, 0, 'r'},
        {"fail-at-task", required_argument, 0, 'a'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int opt;
    uint64_t v;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_config_option(&e->cc, opt, optarg)) continue;
        switch (opt) {
        case 'c': e->o.check = true; break;
        case 't': e->o.trace_path = optarg; break;
        case 'D': e->o.dump_dir = optarg; break;
        case 'd': e->device = optarg; break;
        case 's':
        case 'i':
        case 'w':
        case 'T':
        case 'r':
        case 'a':
            if (parse_uint(optarg, argv[optind - 1], &v)) return 2;
            if (opt == 's') e->o.seed = v;
            if (opt == 'i') e->o.iters = (int)v;
            if (opt == 'w') e->o.warmup = (int)v;
            if (opt == 'T') e->o.timeout_s = (double)v;
            if (opt == 'r') e->o.fail_rank = (int)v;
            if (opt == 'a') e->o.fail_task = (int)v;
            if (v > 1000000000ull) return cli_fail("exec", "%s %s is too large", argv[optind - 1], optarg);
            break;
        default: return cli_fail("exec", "unknown or incomplete option '%s': see loong exec --help", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_fail("exec", "unexpected argument '%s': see loong exec --help", argv[optind]);
    if (e->o.iters < 1) return cli_fail("exec", "--iters must be at least 1");
    if (e->o.timeout_s < 1) return cli_fail("exec", "--timeout must be at least 1 second");
    if ((e->o.fail_rank >= 0) != (e->o.fail_task >= 0))
        return cli_fail("exec", "--fail-rank and --fail-at-task go together");
    return 0;
}

static int configure(exec_cli *e, config *c)
{
    char err[LOONG_ERRLEN];
    if (!e->cc.dtype) e->cc.dtype = "fp32"; /* the CPU device computes in fp32 */
    if (cli_config_finish(&e->cc, c, err) < 0) return cli_fail("exec", "%s", err);
    if (strcmp(e->device, "cpu"))
        return cli_fail("exec", "--device %s is not built in: this build has --device cpu only", e->device);
    if (c->act_bytes != 4) return cli_fail("exec", "the CPU device computes in fp32: use --dtype fp32");
    if (c->batch != 1) return cli_fail("exec", "loong exec runs one sample per micro-batch: use --batch 1");
    return 0;
}

static bool wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return true;
    return false;
}

/* Every rank parses the same flags; rank 0 alone reports bad input, and
 * the others wait for it at a barrier so that mpirun, which stops the job
 * at the first exit, never cuts the message short. */
int cmd_exec(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        exec_usage(stdout);
        return 0;
    }
    int provided, rank;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return cli_fail("exec", "MPI_Init_thread failed: run under mpirun");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    cli_quiet = rank != 0;
    exec_cli e = {{1, 3, 1, false, NULL, NULL, -1, -1, 30}, "cpu", {0}};
    config c;
    int rc = parse_args(argc, argv, &e);
    if (rc == 0) rc = configure(&e, &c);
    if (rc == 0 && provided < MPI_THREAD_MULTIPLE)
        rc = cli_fail("exec", "this MPI library lacks MPI_THREAD_MULTIPLE, which the CPU device needs");
    if (rc == 0) rc = exec_run(&c, &dev_cpu, &e.o);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}

/* loong exec: run the DAG for real on MPI ranks (see src/exec). */
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/infile.h"
#include "core/strategy.h"
#include "autoconf.h"
#include "exec/exec.h"
#include "cli.h"
#include "cli_opts.h"
#include "exec/plugin.h"

static void exec_usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np P loong exec [configuration] [--check] [--trace FILE] [--dump DIR]\n"
            "                               [--seed N] [--iters N] [--warmup N] [--trace-iter median|fastest]\n"
            "                               [--device cpu|cuda]\n"
            "       mpirun -np P loong exec --cases FILE [options for every case]\n"
            "       loong exec --device cuda --transport local [configuration] [...]\n"
            "\n"
            "Run the DAG of one configuration on tp x P_h x P_s x pp MPI ranks: every rank builds\n"
            "the same DAG and executes its own tasks, each stream a worker thread, with\n"
            "non-blocking MPI on one communicator per stream and group. Activations are fp32\n"
            "on the CPU device (--dtype defaults to fp32 here); B must be 1.\n"
            "\n"
            "  --check               compare with a single-rank float64 reference over the\n"
            "                        whole sequence; exit 1 above tolerance\n"
            "  --trace FILE          measured Chrome trace of one timed iteration\n"
            "  --trace-iter WHICH    that iteration: median, or fastest (the closest to\n"
            "                        what a shared machine can do: noise only adds\n"
            "                        time)                                         [median]\n"
            "  --dump DIR            gathered inputs and outputs as .npy files\n"
            "  --iters N             timed iterations                              [3]\n"
            "  --warmup N            untimed iterations first                      [1]\n"
            "  --device D            cpu, or cuda (GPUs: NCCL, one rank per GPU) [cpu]\n"
            "  --transport T         nccl (mpirun, one GPU per rank) or local: all\n"
            "                        P ranks in one process on one GPU, no mpirun\n"
            "                        (--device cuda only)                        [nccl]\n"
            "  --cases FILE          run every line of FILE (options of loong exec after\n"
            "                        those given here, '#' comments) as one case of this\n"
            "                        one MPI job; each case's mesh needs the same P;\n"
            "                        exit status: the worst case's (CPU device)\n"
            "  --timeout S           abort all ranks when an iteration (or start-up, a\n"
            "                        gather, the trace write) makes no progress for\n"
            "                        S seconds (decimal, 1 to 86400)               [30]\n"
            "  --fail-rank R --fail-at WHEN [--fail-signal SIG]\n"
            "                        fault injection: rank R fails at WHEN, one of\n"
            "                        start (before the communicators), task:T (when\n"
            "                        task T starts; --fail-at-task T is the same),\n"
            "                        check (in the --check gather) or trace (while\n"
            "                        the --trace file is written); SIG is exit\n"
            "                        (status 3), kill (SIGKILL, as kill -9) or stop\n"
            "                        (SIGSTOP: the others abort after --timeout) [exit]\n"
            "  -h, --help            this text\n"
            "\n%s"
            "\nExample:\n"
            "  mpirun -np 8 loong exec --model tiny --seq 4K --mesh 2x4 --strategy loongtrain \\\n"
            "        --window 2 --scope attn --check --trace measured.json\n",
            cli_config_help());
}

typedef struct exec_cli {
    exec_opts o;
    const char *device;
    const char *cases; /* --cases FILE, or NULL */
    cli_config cc;
    const char *transport;
} exec_cli;

/* The defaults of every exec_opts (mpirun and --transport local). */
static const exec_opts exec_defaults = {
    .seed = 1, .iters = 3, .warmup = 1, .fail_rank = -1, .fail_at = FAULT_NONE, .fail_task = -1, .timeout_s = 30};

static int parse_seconds(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < 1 || v > 86400)
        return cli_fail("exec", "--timeout '%s' is not a number of seconds from 1 to 86400", s);
    *out = v;
    return 0;
}

static int parse_rank(const char *s, int *out)
{
    char *end;
    long v = s[0] >= '0' && s[0] <= '9' ? strtol(s, &end, 10) : -1;
    if (v < 0 || *end || v > 1000000000L) return cli_fail("exec", "--fail-rank '%s' is not a rank number (0..P-1)", s);
    *out = (int)v;
    return 0;
}

/* The options' own checks, once all are read. */
static int check_args(const exec_cli *e, bool fail_at, bool fail_at_task, bool fail_signal)
{
    if (e->o.iters < 1) return cli_fail("exec", "--iters must be at least 1");
    if (fail_at && fail_at_task) return cli_fail("exec", "--fail-at-task T is --fail-at task:T: give one of them");
    if ((e->o.fail_rank >= 0) != (e->o.fail_at != FAULT_NONE))
        return cli_fail("exec", "--fail-rank R and --fail-at WHEN go together (e.g. --fail-rank 1 --fail-at start)");
    if (fail_signal && e->o.fail_rank < 0)
        return cli_fail("exec", "--fail-signal needs --fail-rank R and --fail-at WHEN: it says how rank R fails");
    return 0;
}

static int parse_args(int argc, char **argv, exec_cli *e)
{
    static const struct option own[] = {
        {"check", no_argument, 0, 'c'},
        {"trace", required_argument, 0, 't'},
        {"dump", required_argument, 0, 'D'},
        {"iters", required_argument, 0, 'i'},
        {"warmup", required_argument, 0, 'w'},
        {"trace-iter", required_argument, 0, 'I'},
        {"device", required_argument, 0, 'd'},
        {"transport", required_argument, 0, 'X'},
        {"timeout", required_argument, 0, 'T'},
        {"cases", required_argument, 0, 'C'},
        {"fail-rank", required_argument, 0, 'r'},
        {"fail-at", required_argument, 0, 'A'},
        {"fail-at-task", required_argument, 0, 'a'},
        {"fail-signal", required_argument, 0, 'S'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const struct option *opts = cli_options(own);
    int opt;
    bool fail_at = false, fail_at_task = false, fail_signal = false;
    opterr = 0;
    optind = 0; /* a full rescan: --cases parses one command line per case */
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_config_option(&e->cc, opt, optarg)) continue;
        switch (opt) {
        case 'c': e->o.check = true; break;
        case 't': e->o.trace_path = optarg; break;
        case 'D': e->o.dump_dir = optarg; break;
        case 'd': e->device = optarg; break;
        case 'X': e->transport = optarg; break;
        case 'C': e->cases = optarg; break;
        case 'i':
            if (cli_opt_count("exec", "--iters", optarg, false, 1000000000, &e->o.iters)) return 2;
            break;
        case 'w':
            if (cli_opt_count("exec", "--warmup", optarg, true, 1000000000, &e->o.warmup)) return 2;
            break;
        case 'I':
            if (strcmp(optarg, "median") && strcmp(optarg, "fastest"))
                return cli_fail("exec", "--trace-iter '%s' is not median or fastest", optarg);
            e->o.trace_fastest = !strcmp(optarg, "fastest");
            break;
        case 'T':
            if (parse_seconds(optarg, &e->o.timeout_s)) return 2;
            break;
        case 'r':
            if (parse_rank(optarg, &e->o.fail_rank)) return 2;
            break;
        case 'a':
            if (cli_opt_count("exec", "--fail-at-task", optarg, true, 1000000000, &e->o.fail_task)) return 2;
            e->o.fail_at = FAULT_TASK;
            fail_at_task = true;
            break;
        case 'A':
            if (fault_parse_at(optarg, &e->o.fail_at, &e->o.fail_task))
                return cli_fail("exec", "--fail-at '%s' is not start, task:T, check or trace", optarg);
            fail_at = true;
            break;
        case 'S':
            if (fault_parse_signal(optarg, &e->o.fail_signal))
                return cli_fail("exec", "--fail-signal '%s' is not exit, kill or stop", optarg);
            fail_signal = true;
            break;
        default: return cli_opt_tail("exec", "loong exec", opt, argv, exec_usage, 0); /* -h: cmd_exec's wants_help */
        }
    }
    if (cli_opt_no_operands("exec", "loong exec", argc, argv)) return 2;
    return check_args(e, fail_at, fail_at_task, fail_signal);
}

/* What the executor runs of a mixture of experts (exec_ep.c): the CPU
 * device's kernels, expert TP = TP = 1, dropless routing, and a --check
 * table of at most 64 experts. 0, or 2 with the one-line error. */
static int check_moe(const exec_cli *e, const config *c)
{
    if (strcmp(e->device, "cpu"))
        return cli_fail("exec", "the %s device has no mixture-of-experts kernels: use --device cpu", e->device);
    if (c->tp > 1)
        return cli_fail("exec",
                        "loong exec runs a mixture of experts without tensor parallelism: drop --tp %d (expert TP is "
                        "modelled by dag, sim and plan)",
                        c->tp);
    if (c->capacity > 0)
        return cli_fail("exec", "loong exec routes dropless: drop --capacity-factor (token dropping is modelled by "
                                "dag, sim and plan)");
    if (c->dispatcher != DISPATCH_ALLTOALL)
        return cli_fail("exec", "loong exec dispatches with all-to-alls: drop --dispatcher allgather (the all-gather "
                                "dispatcher is modelled by dag, sim and plan)");
    if (c->model.experts > 64)
        return cli_fail("exec",
                        "model '%s' has %d experts and loong exec checks each one: use a model of at most 64 "
                        "(e.g. tiny-moe)",
                        c->model.name, c->model.experts);
    return 0;
}

/* What the executor runs of multi-head latent attention (exec_mla.c):
 * the CPU device's kernels, tp = 1. 0, or 2 with the one-line error. */
static int check_mla(const exec_cli *e, const config *c)
{
    if (strcmp(e->device, "cpu"))
        return cli_fail("exec",
                        "the %s device has no multi-head latent attention (V's width differs from K's): "
                        "use --device cpu",
                        e->device);
    if (c->tp > 1)
        return cli_fail("exec",
                        "loong exec runs multi-head latent attention without tensor parallelism: drop --tp %d "
                        "(dag, sim and plan model it)",
                        c->tp);
    return 0;
}

static int configure(exec_cli *e, config *c)
{
    char err[LOONG_ERRLEN];
    if (!e->cc.val[KNOB_DTYPE]) e->cc.val[KNOB_DTYPE] = "fp32"; /* the CPU device computes in fp32 */
    if (cli_config_finish(&e->cc, c, err) < 0 || cli_config_seed(&e->cc, &e->o.seed, err) < 0)
        return cli_fail("exec", "%s", err);
    if (strcmp(e->device, "cpu") && strcmp(e->device, "cuda"))
        return cli_fail("exec", "unknown --device %s: use cpu or cuda", e->device);
    if (e->transport && strcmp(e->transport, "nccl") && strcmp(e->transport, "local"))
        return cli_fail("exec", "unknown --transport %s: use nccl or local", e->transport);
    if (e->transport && !strcmp(e->device, "cpu"))
        return cli_fail("exec", "--transport is for --device cuda (the CPU device always uses MPI)");
    if (c->act_bytes != 4)
        return cli_fail("exec", "the %s device stores activations in fp32: use --dtype fp32", e->device);
    if (!strcmp(e->device, "cuda")) e->o.tol = 1e-2; /* bf16 tensor-core attention */
    if (c->batch != 1) return cli_fail("exec", "loong exec runs one sample per micro-batch: use --batch 1");
    /* the executor's weights are untied and bias-free (exec_data.c) */
    if (c->model.tied || c->model.bias)
        return cli_fail("exec", "model '%s' has %s, which the executor does not implement: use a model without",
                        c->model.name, c->model.tied ? "tied embeddings" : "attention biases");
    if (model_mla(&c->model) && check_mla(e, c)) return 2;
    if (config_moe(c) && check_moe(e, c)) return 2;
    if (c->dp > 1)
        return cli_fail("exec",
                        "loong exec runs one data-parallel replica (its gradient collectives over its P ranks): "
                        "drop --dp %d, or predict the replicas with loong sim --dp %d",
                        c->dp, c->dp);
    if (e->o.dump_dir && (c->pp > 1 || c->micro_batches > 1))
        return cli_fail("exec", "--dump writes one micro-batch's tensors of a run without stages: drop it, or drop "
                                "--pp and --micro-batches");
    if (c->kv_stride && c->kv_stride != config_kv_heads(c))
        return cli_fail("exec",
                        "loong exec gathers all %d KV heads of a rank at once: leave out --kv-stride (strided "
                        "gathers are modelled by dag, sim and plan, not executed)",
                        config_kv_heads(c));
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
/* The value of --NAME in argv (either "--NAME V" or "--NAME=V"), or NULL. */
static const char *arg_value(int argc, char **argv, const char *name)
{
    size_t n = strlen(name);
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], name, n)) {
            if (argv[i][n] == '=') return argv[i] + n + 1;
            if (!argv[i][n] && i + 1 < argc) return argv[i + 1];
        }
    return NULL;
}

/* The CUDA device, loaded from its plug-in (exec/plugin.h) on the first
 * call: NULL with err when this loong has none or it cannot load. */
static const dev_plugin *cuda_device(char err[LOONG_ERRLEN]) { return dev_plugin_load("cuda", LOONG_PKGLIBDIR, err); }

/* --device cuda on a build or a machine without it: one line, exit 2,
 * before MPI starts (under mpirun only rank 0 speaks). */
static int check_cuda_available(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (r && atoi(r) != 0) cli_quiet = true;
    char err[LOONG_ERRLEN];
    const dev_plugin *cuda = cuda_device(err);
    if (!cuda || cuda->count(err) == 0) return cli_fail("exec", "--device cuda: %s", err);
    return 0;
}

typedef struct local_rank {
    pthread_t th;
    const config *c;
    const exec_opts *o;
    const dev_ops *ops;
    world w;
    int rc;
} local_rank;

static void *local_main(void *arg)
{
    local_rank *lr = arg;
    lr->rc = exec_run_world(lr->c, lr->ops, lr->o, &lr->w);
    return NULL;
}

/* --transport local: the P ranks of the mesh as threads of this process,
 * one GPU, no MPI. */
static int exec_local(int argc, char **argv)
{
    exec_cli e = {.o = exec_defaults, .device = "cpu"};
    config c;
    int rc = parse_args(argc, argv, &e);
    if (rc == 0) rc = configure(&e, &c);
    if (rc) return rc;
    if (strcmp(e.device, "cuda")) return cli_fail("exec", "--transport local needs --device cuda");
    if (e.o.fail_signal == FAULT_STOP)
        return cli_fail("exec", "--fail-signal stop would stop every rank of --transport local (one process), its "
                                "watchdog too: use exit or kill");
    char err[LOONG_ERRLEN];
    const dev_plugin *cuda = cuda_device(err); /* loaded by check_cuda_available */
    const dev_ops *ops = cuda ? cuda->local : NULL;
    if (!ops) return cli_fail("exec", "--transport local: %s", cuda ? "this CUDA plug-in has no local transport" : err);
    int P = config_ranks(&c);
    world_local_shared *sh = world_local_new(P);
    local_rank *lr = calloc((size_t)P, sizeof *lr);
    if (!sh || !lr) {
        world_local_free(sh);
        free(lr);
        return cli_fail("exec", "out of memory starting %d local ranks", P);
    }
    int started = 0;
    for (int r = 0; r < P; r++) {
        lr[r] = (local_rank){.c = &c, .o = &e.o, .ops = ops, .w = world_local_rank(sh, r)};
        if (pthread_create(&lr[r].th, NULL, local_main, &lr[r]) != 0) break;
        started++;
    }
    if (started < P) { /* the started ranks would wait for the others forever */
        fprintf(stderr, "loong exec: error: cannot start %d rank threads (started %d)\n", P, started);
        fflush(stderr);
        _exit(2);
    }
    for (int r = 0; r < P; r++) {
        pthread_join(lr[r].th, NULL);
        if (lr[r].rc > rc) rc = lr[r].rc;
    }
    world_local_free(sh);
    free(lr);
    fflush(stdout);
    return rc;
}

/* NCCL transport: this rank's GPU is its node-local rank's. */
static int select_gpu(int rank)
{
    MPI_Comm node;
    int lrank = 0, lsize = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &lrank);
        MPI_Comm_size(node, &lsize);
        MPI_Comm_free(&node);
    }
    char err[LOONG_ERRLEN];
    const dev_plugin *cuda = cuda_device(err); /* loaded by check_cuda_available */
    int bad = cuda->select(lrank, lsize, err) ? 1 : 0, any;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any) return 0;
    if (bad) cli_quiet = lrank != 0; /* one line per node that fails */
    return bad ? cli_fail("exec", "--device cuda: %s", err) : 2;
}

/* The command line less "--cases FILE" (or "--cases=FILE"), then `line`
 * split at blanks (no quoting: the options of a case hold no spaces), into
 * out (cap entries). Returns the count, or -1 when the line has too many. */
static int case_argv(int argc, char **argv, char *line, char **out, int cap)
{
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--cases")) {
            i++;
            continue;
        }
        if (strncmp(argv[i], "--cases=", 8) && n < cap) out[n++] = argv[i];
    }
    for (char *tok = strtok(line, " \t"); tok; tok = strtok(NULL, " \t")) {
        if (n == cap) return -1;
        out[n++] = tok;
    }
    return n;
}

/* One case of --cases: parse, configure and run on the CPU device. */
static int run_case(int argc, char **argv)
{
    exec_cli e = {.o = exec_defaults, .device = "cpu"};
    config c;
    int rc = parse_args(argc, argv, &e);
    if (rc == 0 && e.cases) rc = cli_fail("exec", "--cases inside a --cases file: give each case on a line of its own");
    if (rc == 0) rc = configure(&e, &c);
    if (rc == 0 && strcmp(e.device, "cpu"))
        rc = cli_fail("exec", "--cases runs the CPU device: run each --device cuda configuration as its own job");
    if (rc == 0) rc = exec_run(&c, &dev_cpu, &e.o);
    return rc;
}

/* Rank 0's marker of case k of n, on stdout and stderr alike, so that each
 * case's table and its errors can be told apart. */
static void mark_case(int k, int n, const char *what)
{
    if (cli_quiet) return;
    fflush(stdout);
    fflush(stderr);
    int len = (int)strlen(what);
    while (len > 0 && (what[len - 1] == ' ' || what[len - 1] == '\t'))
        len--;
    printf("# case %d/%d: %.*s\n", k, n, len, what);
    fprintf(stderr, "# case %d/%d: %.*s\n", k, n, len, what);
    fflush(stdout);
    fflush(stderr);
}

/* --cases FILE: one configuration per line, after the options of the
 * command line, run one after another in this MPI job (one start-up of
 * mpirun and of the processes for a whole table of configurations). Every
 * rank reads the file and parses each case alike, so the ranks agree on
 * each case without talking. Returns the worst case's status (0, 1 for a
 * check above tolerance, 2 for an error), 2 when the file is unreadable or
 * holds no case. */
static int run_cases(int argc, char **argv, const char *path)
{
    enum { MAX_ARGS = 256, MAX_CASES = 4096 };
    char err[LOONG_ERRLEN];
    char *text = infile_read(path, "--cases file", INFILE_TEXT_MAX, NULL, err);
    if (!text) return cli_fail("exec", "%s", err);
    char *lines[MAX_CASES], *cur = text, *l;
    int n = 0;
    while ((l = infile_next_line(&cur))) {
        char *hash = strchr(l, '#');
        if (hash) *hash = '\0';
        if (strspn(l, " \t") == strlen(l)) continue;
        if (n == MAX_CASES) {
            free(text);
            return cli_fail("exec", "--cases file '%s' has more than %d cases: split it", path, MAX_CASES);
        }
        lines[n++] = l;
    }
    if (n == 0) {
        free(text);
        return cli_fail("exec", "--cases file '%s' holds no case: give one configuration per line", path);
    }
    int worst = 0, ok = 0;
    for (int k = 0; k < n; k++) {
        char shown[512], *args[MAX_ARGS];
        snprintf(shown, sizeof shown, "%s", lines[k]);
        mark_case(k + 1, n, shown);
        int na = case_argv(argc, argv, lines[k], args, MAX_ARGS);
        int rc = na < 0 ? cli_fail("exec", "case %d has more than %d words", k + 1, MAX_ARGS) : run_case(na, args);
        if (rc > worst) worst = rc;
        if (!cli_quiet) printf("# case %d/%d status %d\n", k + 1, n, rc);
        ok += rc == 0;
        fflush(stdout);
        world w = world_mpi();
        w.barrier(&w); /* the next marker after this case's last line */
    }
    if (!cli_quiet) printf("# cases: %d run, %d ok, %d not ok\n", n, ok, n - ok);
    free(text);
    return worst;
}

int cmd_exec(int argc, char **argv)
{
    if (wants_help(argc, argv)) {
        exec_usage(stdout);
        return 0;
    }
    const char *dv = arg_value(argc, argv, "--device"), *tp = arg_value(argc, argv, "--transport");
    if (dv && !strcmp(dv, "cuda") && check_cuda_available()) return 2;
    if (tp && !strcmp(tp, "local")) {
        char err[LOONG_ERRLEN];
        if (!cuda_device(err)) return cli_fail("exec", "--transport local needs the CUDA device: %s", err);
        return exec_local(argc, argv);
    }
    /* More ranks on this node than cores (mpirun --oversubscribe, the CPU
     * validation on a laptop or in CI): ask Open MPI to yield the core while
     * a rank waits inside MPI, as its documentation advises, instead of
     * busy-polling the cores the computing ranks need (2 cores, 8 ranks:
     * 3.5x the wall time without it). An explicit --mca mpi_yield_when_idle
     * (or OMPI_MCA_ variable) is left as given. */
    if (world_oversubscribed()) setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    int provided, rank;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return cli_fail("exec", "MPI_Init_thread failed: run under mpirun");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    cli_quiet = rank != 0;
    exec_cli e = {.o = exec_defaults, .device = "cpu"};
    config c;
    int rc = parse_args(argc, argv, &e);
    if (rc == 0 && provided < MPI_THREAD_MULTIPLE)
        rc = cli_fail("exec", "this MPI library lacks MPI_THREAD_MULTIPLE, which the CPU device needs");
    if (rc == 0 && e.cases) {
        rc = run_cases(argc, argv, e.cases);
        fflush(stdout);
        world w = world_mpi();
        w.barrier(&w);
        MPI_Finalize();
        return rc;
    }
    if (rc == 0) rc = configure(&e, &c);
    bool cuda = rc == 0 && !strcmp(e.device, "cuda");
    if (cuda) rc = select_gpu(rank); /* the plug-in is loaded: check_cuda_available() passed */
    if (rc == 0) {
        char err[LOONG_ERRLEN];
        rc = exec_run(&c, cuda ? cuda_device(err)->mpi : &dev_cpu, &e.o);
    }
    fflush(stdout);
    world w = world_mpi(); /* rank 0 may still write the trace: wait without spinning */
    w.barrier(&w);
    MPI_Finalize();
    return rc;
}

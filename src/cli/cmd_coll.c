/* loong coll: nccl-tests for a simulated platform. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/nccl_log.h"
#include "autoconf.h"
#include "cli.h"
#include "cli_opts.h"
#include "core/xalloc.h"
#include "model/nccl.h"
#include "model/platform_spec.h"
#ifdef HAVE_SIMGRID
#include "sim/sim.h"
#endif

static void coll_usage(FILE *f)
{
    fprintf(f, "usage: loong coll --platform FILE [--op OP] [-b SIZE] [-e SIZE] [-f N] [options]\n"
               "\n"
               "nccl-tests on a simulated platform: one collective per size on the platform's\n"
               "GPUs, run as NCCL runs it (algorithm and protocol by NCCL's tuner, rings over\n"
               "every rail, trees, NVLink SHARP, PXN), printed in nccl-tests' table so that it\n"
               "diffs against your cluster's all_reduce_perf output.\n"
               "\n"
               "  --platform FILE     a platform written by loong topo (required)\n"
               "  --op OP             all_reduce | all_gather | reduce_scatter | alltoall |\n"
               "                      sendrecv | broadcast                        [all_reduce]\n"
               "  -b, --minbytes N    smallest size, K/M/G = 2^10/2^20/2^30               [8]\n"
               "  -e, --maxbytes N    largest size                                    [128M]\n"
               "  -f, --stepfactor N  size multiplier between rows                        [2]\n"
               "  --gpus N            GPUs taking part, the first of each node  [all of them]\n"
               "  --nodes N           nodes they spread over           [fewest that hold them]\n"
               "  --nccl-algo A       ring | tree | nvls | auto, as NCCL_ALGO          [auto]\n"
               "  --nccl-proto P      simple | ll | ll128 | auto, as NCCL_PROTO        [auto]\n"
               "  --model             the analytical model only (no SimGrid): what the planner uses\n"
               "  --compare LOG       an nccl-tests log: its sizes, op, GPUs and nodes (unless\n"
               "                      given), measured and simulated side by side with the error\n"
               "  --slow-link NAME[:F] link NAME at 1/F of its bandwidth (what-if)      [F 2]\n"
               "  --fail-link NAME    link NAME down: traffic reroutes (PXN, another GPU)\n"
               "                      (names: loong topo --list-links PLATFORM)\n"
               "  -h, --help          this text\n"
               "\nSizes are nccl-tests' (the buffer per rank; all_gather's the gathered one).\n"
               "In-place columns repeat out-of-place: the simulation has no separate path.\n"
               "\nExample:\n"
               "  loong coll --platform topologies/dgx-h100-4n.xml --op all_reduce -b 8 -e 8G -f 2\n");
}

typedef struct coll_cli {
    const char *platform, *op, *minb, *maxb, *factor, *gpus, *nodes, *algo, *proto, *compare;
    bool model;
    whatif w;         /* --slow-link, --fail-link */
    char where[4096]; /* the platform file (cli_find_platform) */
} coll_cli;

typedef struct coll_job {
    platform_spec sp;
    nccl_sweep a;
    double *sizes, *seconds;
    nccl_plan *plans;
    nccl_log log;
    bool compare;
} coll_job;

static int parse_cli(int argc, char **argv, coll_cli *o)
{
    static const struct option opts[] = {{"platform", required_argument, 0, 'p'},
                                         {"op", required_argument, 0, 'o'},
                                         {"minbytes", required_argument, 0, 'b'},
                                         {"maxbytes", required_argument, 0, 'e'},
                                         {"stepfactor", required_argument, 0, 'f'},
                                         {"gpus", required_argument, 0, 'g'},
                                         {"nodes", required_argument, 0, 'n'},
                                         {"nccl-algo", required_argument, 0, 'A'},
                                         {"nccl-proto", required_argument, 0, 'P'},
                                         {"model", no_argument, 0, 'm'},
                                         {"compare", required_argument, 0, 'c'},
                                         CLI_WHATIF_OPTIONS,
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    int ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "b:e:f:h", opts, NULL)) != -1) {
        int wi = cli_whatif_option("coll", &o->w, ch, optarg);
        if (wi < 0) return 2;
        if (wi) continue;
        switch (ch) {
        case 'p': o->platform = optarg; break;
        case 'o': o->op = optarg; break;
        case 'b': o->minb = optarg; break;
        case 'e': o->maxb = optarg; break;
        case 'f': o->factor = optarg; break;
        case 'g': o->gpus = optarg; break;
        case 'n': o->nodes = optarg; break;
        case 'A': o->algo = optarg; break;
        case 'P': o->proto = optarg; break;
        case 'm': o->model = true; break;
        case 'c': o->compare = optarg; break;
        case 'h':
        default: return cli_opt_tail("coll", "loong coll", ch, argv, coll_usage, 1);
        }
    }
    if (cli_opt_no_operands("coll", "loong coll", argc, argv)) return 2;
    if (!o->platform) return cli_fail("coll", "--platform FILE is required (shipped ones are in topologies/)");
    char err[LOONG_ERRLEN];
    if (cli_find_platform(o->platform, o->where, sizeof o->where, err) < 0) return cli_fail("coll", "%s", err);
    o->platform = o->where;
    if (o->w.nstrag || o->w.jitter > 0)
        return cli_fail("coll",
                        "--%s slows kernels, and loong coll times collectives alone: use it with loong sim "
                        "or loong plan",
                        o->w.nstrag ? "straggler" : "jitter");
    if (o->model && whatif_any(&o->w))
        return cli_fail("coll", "--model is the unperturbed analytical model: drop it to simulate --slow-link or "
                                "--fail-link");
    return 0;
}

/* -b, -e, -f as nccl-tests reads them. */
static int size_sweep(const coll_cli *o, coll_job *j, char err[LOONG_ERRLEN])
{
    uint64_t lo = 8, hi = 128ull << 20;
    int f = 2;
    if (o->minb && units_parse_count(o->minb, "-b", &lo, err) < 0) return -1;
    if (o->maxb && units_parse_count(o->maxb, "-e", &hi, err) < 0) return -1;
    if (o->factor && units_parse_int(o->factor, "-f", &f, err) < 0) return -1;
    if (lo > hi) {
        snprintf(err, LOONG_ERRLEN, "-b %llu is larger than -e %llu: give the smallest size first",
                 (unsigned long long)lo, (unsigned long long)hi);
        return -1;
    }
    if (f < 2 || lo == 0) {
        snprintf(err, LOONG_ERRLEN, "-f must be at least 2 and -b at least 1 (sizes grow by -f from -b to -e)");
        return -1;
    }
    j->sizes = xmalloc_array(64, sizeof *j->sizes, "the sizes");
    for (double s = (double)lo; s <= (double)hi && j->a.nsizes < 64; s *= f)
        j->sizes[j->a.nsizes++] = s;
    return 0;
}

/* The log's sizes, op, GPUs and nodes, where the command line is silent. */
static int from_log(const coll_cli *o, coll_job *j, char err[LOONG_ERRLEN])
{
    if (nccl_log_read(o->compare, &j->log, err) < 0) return -1;
    j->compare = true;
    if (!o->op && !j->log.has_op) {
        snprintf(err, LOONG_ERRLEN,
                 "%s names no collective (no '# Collective test starting: ..._perf' line): give --op", o->compare);
        return -1;
    }
    if (!o->op) j->a.op = j->log.op;
    if (!o->gpus) j->a.gpus = j->log.gpus;
    if (!o->nodes) j->a.nodes = j->log.nodes;
    j->sizes = xmalloc_array((size_t)j->log.nrows, sizeof *j->sizes, "the sizes");
    for (int k = 0; k < j->log.nrows; k++)
        j->sizes[j->a.nsizes++] = j->log.rows[k].size;
    return 0;
}

static int setup(const coll_cli *o, coll_job *j, char err[LOONG_ERRLEN])
{
    if (platform_spec_read(o->platform, &j->sp, err) < 0) return -1;
    if (!j->sp.nccl) {
        snprintf(err, LOONG_ERRLEN,
                 "%s does not run NCCL's collectives (nccl=0 in its loong_spec): use a GPU platform "
                 "from loong topo --gpu h100|h200|b200|b300|gb200|gb300|a100|a100-pcie",
                 o->platform);
        return -1;
    }
    j->a.op = COLL_ALL_REDUCE;
    if (o->op && coll_op_parse(o->op, &j->a.op) < 0) {
        snprintf(err, LOONG_ERRLEN,
                 "--op '%s' is not one of: all_reduce, all_gather, reduce_scatter, alltoall, "
                 "sendrecv, broadcast",
                 o->op);
        return -1;
    }
    j->a.algo = j->a.proto = NCCL_AUTO;
    if (o->algo && nccl_algo_parse(o->algo, &j->a.algo) < 0) {
        snprintf(err, LOONG_ERRLEN, "--nccl-algo '%s' is not one of: ring, tree, nvls, auto", o->algo);
        return -1;
    }
    if (o->proto && nccl_proto_parse(o->proto, &j->a.proto) < 0) {
        snprintf(err, LOONG_ERRLEN, "--nccl-proto '%s' is not one of: simple, ll, ll128, auto", o->proto);
        return -1;
    }
    if (o->gpus && units_parse_int(o->gpus, "--gpus", &j->a.gpus, err) < 0) return -1;
    if (o->nodes && units_parse_int(o->nodes, "--nodes", &j->a.nodes, err) < 0) return -1;
    if (o->compare ? from_log(o, j, err) < 0 : size_sweep(o, j, err) < 0) return -1;
    int total = j->sp.nodes * j->sp.gpus_per_node, gpn = j->sp.gpus_per_node;
    if (!j->a.gpus) j->a.gpus = total;
    if (!j->a.nodes) j->a.nodes = (j->a.gpus + gpn - 1) / gpn;
    nccl_group g;
    if (j->a.gpus < 2 || nccl_group_uniform(&g, &j->sp, j->a.gpus, j->a.nodes) < 0) {
        snprintf(err, LOONG_ERRLEN,
                 "%d GPUs on %d nodes do not fit %s (%d nodes x %d GPUs): give --gpus >= 2 that --nodes divides, at "
                 "most %d per node",
                 j->a.gpus, j->a.nodes, o->platform, j->sp.nodes, gpn, gpn);
        return -1;
    }
    nccl_plan p;
    int rc = nccl_plan_coll(&j->sp, &g, j->a.op, j->sizes[0], j->a.algo, j->a.proto, &p, err);
    nccl_group_free(&g);
    return rc;
}

/* The analytical model, the planner's: nccl.h's alpha + bytes / busbw. */
static void run_model(coll_job *j)
{
    nccl_group g;
    char err[LOONG_ERRLEN];
    nccl_group_uniform(&g, &j->sp, j->a.gpus, j->a.nodes);
    for (int k = 0; k < j->a.nsizes; k++) {
        nccl_plan_coll(&j->sp, &g, j->a.op, j->sizes[k], j->a.algo, j->a.proto, &j->plans[k], err);
        j->seconds[k] = j->plans[k].seconds;
    }
    nccl_group_free(&g);
}

static int run_engine(const coll_cli *o, coll_job *j, char err[LOONG_ERRLEN])
{
    j->a.sizes = j->sizes;
    j->seconds = xcalloc((size_t)j->a.nsizes, sizeof *j->seconds, "the times");
    j->plans = xcalloc((size_t)j->a.nsizes, sizeof *j->plans, "the plans");
    if (o->model) {
        run_model(j);
        return 0;
    }
#ifdef HAVE_SIMGRID
    sim_platform *pf = sim_platform_open(o->platform, 0, NULL, err);
    if (!pf) return -1;
    if (sim_platform_perturb(pf, &o->w, err) < 0) {
        sim_platform_free(pf);
        return -1;
    }
    int rc = sim_coll_bench(pf, &j->a, j->seconds, j->plans, err);
    sim_platform_free(pf);
    return rc;
#else
    snprintf(err, LOONG_ERRLEN, "this loong was built without SimGrid: use --model");
    return -1;
#endif
}

/* All-to-all and send/recv are NCCL point-to-point, not an algorithm. */
static const char *algo_of(coll_op op, const nccl_plan *p)
{
    return op == COLL_ALLTOALL || op == COLL_SENDRECV ? "P2P" : nccl_algo_name(p->algo);
}

static const char *redop_of(coll_op op) { return op == COLL_ALL_REDUCE || op == COLL_REDUCE_SCATTER ? "sum" : "none"; }

/* nccl-tests' count: per rank for all-gather and reduce-scatter, per peer
 * for all-to-all (nccl-tests src/all_gather.cu, alltoall.cu). */
static int count_div(coll_op op, int n)
{
    return op == COLL_ALL_GATHER || op == COLL_REDUCE_SCATTER || op == COLL_ALLTOALL ? n : 1;
}

static void print_table(const coll_cli *o, const coll_job *j)
{
    int n = j->a.gpus;
    printf("# loong coll: %s on %d GPUs (%d nodes x %d) of %s, %s; NCCL algorithm %s, protocol %s\n",
           coll_op_name(j->a.op), n, j->a.nodes, n / j->a.nodes, o->platform,
           o->model ? "analytical model" : "simulated (SimGrid)", nccl_algo_name(j->a.algo),
           nccl_proto_name(j->a.proto));
    whatif_write_header(stdout, &o->w);
    printf("#\n#%59s%-35s%s\n", "", "out-of-place", "in-place");
    printf("#%11s %13s %9s %7s %7s %8s %7s %7s %6s %8s %7s %7s %6s %6s %6s\n", "size", "count", "type", "redop", "root",
           "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "algo", "proto");
    printf("#%11s %13s %9s %7s %7s %8s %7s %7s %6s %8s %7s %7s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
           "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)");
    double sum = 0;
    for (int k = 0; k < j->a.nsizes; k++) {
        double s = j->sizes[k], t = j->seconds[k], alg = t > 0 ? s / t / 1e9 : 0;
        double bus = alg * coll_bus_factor(j->a.op, n);
        sum += bus;
        for (int pass = 0; pass < 2; pass++) {
            if (!pass)
                printf(" %11.0f %13.0f %9s %7s %7d", s, floor(s / 4 / count_div(j->a.op, n)), "float",
                       redop_of(j->a.op), j->a.op == COLL_BROADCAST ? 0 : -1);
            printf(" %8.2f %7.2f %7.2f %6s", 1e6 * t, alg, bus, "N/A");
        }
        printf(" %6s %6s\n", algo_of(j->a.op, &j->plans[k]), nccl_proto_name(j->plans[k].proto));
    }
    printf("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %g\n#\n", sum / j->a.nsizes);
}

/* Measured against simulated, per size, and the mean absolute error. */
static void print_compare(const coll_cli *o, const coll_job *j)
{
    printf("# loong coll --compare %s: %s on %d GPUs (%d nodes), measured (out-of-place) vs %s\n", o->compare,
           coll_op_name(j->a.op), j->a.gpus, j->a.nodes, o->model ? "analytical model" : "simulated (SimGrid)");
    printf("#%11s %12s %12s %11s %11s %8s %6s %6s\n", "size", "meas_us", "sim_us", "meas_busbw", "sim_busbw", "err_%",
           "algo", "proto");
    double sum = 0, worst = 0;
    int wk = 0;
    for (int k = 0; k < j->a.nsizes; k++) {
        const nccl_log_row *r = &j->log.rows[k];
        double t = j->seconds[k], e = 100 * (t - r->time_s) / r->time_s;
        double bus = t > 0 ? r->size / t * coll_bus_factor(j->a.op, j->a.gpus) / 1e9 : 0;
        printf(" %11.0f %12.2f %12.2f %11.2f %11.2f %8.2f %6s %6s\n", r->size, 1e6 * r->time_s, 1e6 * t, r->busbw / 1e9,
               bus, e, nccl_algo_name(j->plans[k].algo), nccl_proto_name(j->plans[k].proto));
        sum += fabs(e);
        if (fabs(e) > worst) worst = fabs(e), wk = k;
    }
    printf("# mean |error| %.2f %% over %d sizes; worst %.2f %% at %.0f B\n", sum / j->a.nsizes, j->a.nsizes, worst,
           j->sizes[wk]);
}

int cmd_coll(int argc, char **argv)
{
    coll_cli o;
    int rc = parse_cli(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    coll_job j;
    memset(&j, 0, sizeof j);
    char err[LOONG_ERRLEN];
    if (setup(&o, &j, err) < 0 || run_engine(&o, &j, err) < 0) {
        rc = cli_fail("coll", "%s", err);
    } else if (j.compare) {
        print_compare(&o, &j);
    } else {
        print_table(&o, &j);
    }
    free(j.sizes);
    free(j.seconds);
    free(j.plans);
    nccl_log_free(&j.log);
    return rc;
}

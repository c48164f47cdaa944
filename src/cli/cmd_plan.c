/*
 * loong plan: choose the layout for N GPUs. This file parses the options
 * and orchestrates; the planner is a library below the CLI: the request
 * (plan_request.c builds it from the options) is searched by
 * model/plan_search.h (enumerate, score, draw, simulate, --robust), whose
 * simulations are `loong sim` children and whose work is split over MPI
 * ranks under mpirun by the CLI's runner (plan_runner.c); rank 0 writes
 * what a serial run does (plan_output.c).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoconf.h"
#include "cli_opts.h"
#include "plan_cli.h"

static void plan_usage(FILE *f)
{
    fprintf(f,
            "usage: loong plan [--platform FILE] [--gpus N] [--model M] [--seq S] [--gpu-mem 80GB] [--zero Z]\n"
            "                  [--recompute none|selective|sc++|full] [--top K | --exact] [--csv FILE] [-o FILE]\n"
            "\n"
            "Search every layout of N GPUs (P_h x P_s, placement, partition, ring mode, window,\n"
            "KV replication, data parallelism), remove the infeasible ones with\n"
            "a reason (invalid mesh, predicted out of memory), score the rest with the\n"
            "analytical model, simulate the best K with SimGrid (loong sim) and print the\n"
            "ranked #-table with units and a recommendation. Under mpirun the layouts and\n"
            "the simulations are split across the ranks; the output is the serial one.\n"
            "\n"
            "  --platform FILE       platform from loong topo (its loong_spec gives the links)\n"
            "                                                         [" PLAN_DEFAULT_PLATFORM "]\n"
            "  --gpus N              GPUs to use                     [all of the platform's]\n"
            "  --pp N|auto           pipeline stages: gpus = dp x pp x tp x P_h x P_s; auto\n"
            "                        searches every divisor the layers split over, with\n"
            "                        1F1B and interleaved (v 2) schedules                [1]\n"
            "  --global-batch G      samples per step over all replicas, with or without\n"
            "                        --pp: every layout runs G / (dp x batch) micro-\n"
            "                        batches, the same work; ranked by time per global\n"
            "                        batch                [16M tokens, Llama 3's, in samples]\n"
            "  --dp N|auto           data-parallel replicas: gpus = dp x pp x tp x P_h x P_s;\n"
            "                        auto searches every divisor                      [auto]\n"
            "  --gpu-mem SIZE        memory per GPU, e.g. 80GB or 74.5GiB (GB = 1e9 bytes,\n"
            "                        GiB = 2^30)   [81559MiB h100, 80GB a100, 141GB h200]\n"
            "  --memory-margin PCT   a layout fits when its reserved peak is at most the\n"
            "                        GPU's memory less PCT %%  (0-50)                    [4]\n"
            "  --allocator default|expandable|F  PyTorch's caching allocator as the reserved\n"
            "                        peak counts it (expandable: expandable_segments; F: a\n"
            "                        measured reserved / allocated factor, 1 to 10, as loong\n"
            "                        calibrate fits it from profile_memory profiler traces)\n"
            "                                                                   [default]\n"
            "  --calib FILE          calibration table               [<platform dir>/<gpu>.calib]\n"
            "  --top K               simulate the K best layouts (0: analytical only)   [10]\n"
            "  --exact               simulate every feasible layout\n"
            "  --full-layers         simulate all L layers instead of composing them (1 and 2\n"
            "                        layers under ZeRO-1, their period otherwise: loong sim\n"
            "                        --compose)\n"
            "  --why-removed         list every removed layout and its reason (default: one\n"
            "                        line per reason, with a count and an example)\n"
            "  --show ROW            print the loong sim command that reproduces table row ROW\n"
            "                        (its rank) instead of the table; the table's recommended\n"
            "                        line gives the pick's\n"
            "  --emit megatron|torchtitan\n"
            "                        print the Megatron-LM arguments or torchtitan job TOML that\n"
            "                        run the pick (with --show ROW: that row's) instead of the\n"
            "                        table (docs/frameworks.md)\n"
            "  --from FILE           with --show ROW: read the row from a plan's --json FILE\n"
            "                        instead of planning again (no other option applies)\n"
            "  --layout NAME         score the layout you run beside the search: its name as\n"
            "                        the layout column writes it (e.g. \"dp2*8x4 hf zz single\n"
            "                        m8 z1 sel\"); marked 'yours' with its rank and its gap\n"
            "                        to the recommendation, simulated when the search\n"
            "                        simulates, shown with its reason when it cannot run\n"
            "  --jobs N              simulations at once, over all MPI ranks             [2]\n"
            "  --sim-timeout S       a simulation running longer is stopped, and its layout\n"
            "                        keeps its analytical score, marked model* (0: no\n"
            "                        limit); so is one estimated to need more memory than\n"
            "                        this machine has, or more time than S            [600]\n"
            "  --rows N              table rows to print (0: all)                         [20]\n"
            "  --csv FILE            write every layout, ranked, as CSV (atomically)\n"
            "  --json FILE           write the plan as JSON: every row with its loong sim\n"
            "                        command, the recommendation, the causes of removal\n"
            "  --plot FILE.png       draw tokens/s/GPU against peak memory for every layout\n"
            "                        and the pick's step split (gnuplot)\n"
            "  -o, --output FILE     write the table there (atomically) instead of stdout\n"
            "  --draws N             with --doc-dist: packings drawn (seeds --seed ..\n"
            "                        --seed + N - 1); the table shows their mean step and\n"
            "                        spread                                           [3]\n"
            "  --robust              also simulate every simulated layout under the worst of two\n"
            "                        stragglers (ranks 0 and P-1, kernels x1.25), the worst of\n"
            "                        two NICs at half speed (node0-nic0 and the last GPU's), and\n"
            "                        5 %% jitter; report the slowdowns, the layout best in the\n"
            "                        worst case, and prefer the more robust among ties\n"
            "  --tie PCT             layouts within PCT %% of the best tie      [%.1f: the\n"
            "                        model's error between two layouts, from its end-to-end\n"
            "                        errors on published bf16 runs (%.1f with --precision\n"
            "                        fp8-*: FP8 runs'), those of the platform's GPU kind\n"
            "                        alone when there are 3 or more: docs/validation.md]\n"
            "  --quiet               no progress bar on stderr\n"
            "  -h, --help            this text\n"
            "\n"
            "Configuration options that apply (the mesh and ring knobs are what plan searches:\n"
            "give your own as --layout):\n"
            "  --model, --seq [1M], --batch, --zero [searched: 0-3], --recompute [searched],\n"
            "  --tp [searched: the divisors of the GPUs per node], --sequence-parallel, --dtype,\n"
            "  --micro-batches (instead of --global-batch), --schedule and --vpp [searched\n"
            "  with --pp], --pp-first-layers and --pp-last-layers (with --pp N),\n"
            "  --gpus-per-node (must match the platform), and the documents: --docs,\n"
            "  --docs-file or --doc-dist with --seed (plan then searches the packed-document\n"
            "  partitions too)\n"
            "\n%s"
            "\nExit status: 0; 2 on bad input or when no layout is feasible.\n"
            "\nExample:\n"
            "  loong plan --model llama3-8b --seq 1M --gpus 64 --platform topologies/dgx-h100-8n.xml\n",
            plan_cli_default_tie_pct(PRECISION_BF16, false, NULL),
            plan_cli_default_tie_pct(PRECISION_FP8_CURRENT, false, NULL), cli_whatif_help());
}

/* Mesh and ring knobs are what plan searches: refuse them by name. */
static bool searched_option(int opt)
{
    int k = cli_config_knob(opt);
    return k >= 0 && config_knob_get((config_knob)k)->searched;
}

static int parse_args(int argc, char **argv, plan_args *a)
{
    static const struct option own[] = {
        {"platform", required_argument, 0, 'p'},
        {"gpus", required_argument, 0, 'g'},
        {"gpu-mem", required_argument, 0, 'm'},
        {"calib", required_argument, 0, 'c'},
        {"top", required_argument, 0, 'k'},
        {"exact", no_argument, 0, 'x'},
        {"full-layers", no_argument, 0, 'F'},
        {"show", required_argument, 0, 'S'},
        {"emit", required_argument, 0, 'E'},
        {"from", required_argument, 0, 'f'},
        {"layout", required_argument, 0, 'L'},
        {"why-removed", no_argument, 0, 'W'},
        {"json", required_argument, 0, 'J'},
        {"plot", required_argument, 0, 'P'},
        {"jobs", required_argument, 0, 'j'},
        {"rows", required_argument, 0, 'r'},
        {"csv", required_argument, 0, 'C'},
        {"output", required_argument, 0, 'o'},
        {"quiet", no_argument, 0, 'q'},
        {"draws", required_argument, 0, 'd'},
        {"robust", no_argument, 0, 'R'},
        {"tie", required_argument, 0, 'T'},
        {"global-batch", required_argument, 0, 'G'},
        {"sim-timeout", required_argument, 0, 'O'},
        {"memory-margin", required_argument, 0, 'M'},
        {"allocator", required_argument, 0, 'A'},
        CLI_WHATIF_OPTIONS,
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const struct option *opts = cli_options(own);
    int opt;
    bool top_given = false;
    opterr = 0;
    int li = -1;
    while ((opt = getopt_long(argc, argv, "o:h", opts, &li)) != -1) {
        char name[64]; /* the option as given, without its value */
        if (li >= 0)
            snprintf(name, sizeof name, "--%s", opts[li].name);
        else
            snprintf(name, sizeof name, "-%c", opt);
        li = -1;
        top_given |= opt == 'k';
        if (!a->planning[0] && opt != 'S' && opt != 'f' && opt != 'o' && opt != 'q' && opt != 'h' && opt != '?')
            snprintf(a->planning, sizeof a->planning, "%s", name);
        if (searched_option(opt))
            return cli_fail("plan",
                            "'%s %s' is a layout knob that loong plan searches: drop it, or score the layout you run "
                            "beside the search with --layout \"NAME\" (its name as the layout column writes it, "
                            "e.g. --layout \"dp2*8x4 hf zz single z1 sel\")",
                            name, optarg ? optarg : "");
        if (cli_config_option(&a->cc, opt, optarg)) continue;
        int wi = cli_whatif_option("plan", &a->w, opt, optarg);
        if (wi < 0) return 2;
        if (wi) continue;
        int rc = 0;
        switch (opt) {
        case 'p': a->platform = optarg; break;
        case 'g': a->gpus = optarg; break;
        case 'm': a->gpu_mem = optarg; break;
        case 'M': a->margin = optarg; break;
        case 'A': a->allocator = optarg; break;
        case 'c': a->calib = optarg; break;
        case 'k': rc = cli_opt_count("plan", "--top", optarg, true, INT_MAX, &a->top); break;
        case 'x': a->exact = true; break;
        case 'F': a->full_layers = true; break;
        case 'S': rc = cli_opt_count("plan", "--show", optarg, false, INT_MAX, &a->show); break;
        case 'E':
            if (strcmp(optarg, "megatron") && strcmp(optarg, "torchtitan"))
                return cli_fail("plan", "--emit %s: loong emits megatron or torchtitan", optarg);
            a->emit = optarg;
            break;
        case 'f': a->from = optarg; break;
        case 'L': a->layout = optarg; break;
        case 'W': a->why_removed = true; break;
        case 'J': a->json = optarg; break;
        case 'P': a->plot = optarg; break;
        case 'j': rc = cli_opt_count("plan", "--jobs", optarg, false, INT_MAX, &a->jobs); break;
        case 'r': rc = cli_opt_count("plan", "--rows", optarg, true, INT_MAX, &a->rows); break;
        case 'C': a->csv = optarg; break;
        case 'o': a->out = optarg; break;
        case 'q': a->quiet = true; break;
        case 'd': rc = cli_opt_count("plan", "--draws", optarg, false, INT_MAX, &a->draws); break;
        case 'R': a->robust = true; break;
        case 'T': rc = plan_cli_tie(optarg, &a->tie); break;
        case 'G': rc = cli_opt_count("plan", "--global-batch", optarg, false, INT_MAX, &a->global_batch); break;
        case 'O': rc = plan_cli_seconds(optarg, "--sim-timeout", &a->sim_timeout); break;
        case 'h':
        default: return cli_opt_tail("plan", "loong plan", opt, argv, plan_usage, -1);
        }
        if (rc) return rc;
    }
    if (cli_opt_no_operands("plan", "loong plan", argc, argv)) return 2;
    return plan_cli_check_args(a, top_given);
}

/* Search and write: outputs opened first (an unwritable path fails before
 * any work), aborted on any error. */
static int plan_run(plan_args *a, plan_ctx *x)
{
    char err[LOONG_ERRLEN] = "";
    plan_outputs out = {0};
    if (x->rank == 0 && plan_cli_open(a, &out, err) < 0) return cli_fail("plan", "%s", err);
    plan_search_out s = {0};
    int rc = plan_cli_search(a, x, &s, err) < 0 ? cli_fail("plan", "%s", err) : plan_cli_write(a, x, &out, &s);
    if (rc) plan_cli_abort(&out);
    free(s.ls);
    return rc;
}

int cmd_plan(int argc, char **argv)
{
    plan_args a = {.out = "-", .top = 10, .jobs = 2, .rows = 20, .tie = -1, .sim_timeout = 600};
    plan_ctx x = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    if (a.from) return plan_cli_show_from(&a);
#ifndef HAVE_SIMGRID
    a.top = 0; /* no loong sim in this build: the analytical ranking only */
    a.exact = false;
#endif
    plan_cli_mpi_start(&argc, &argv, &x);
    char err[LOONG_ERRLEN];
    if (plan_cli_request(&a, &x, err) < 0)
        rc = cli_fail("plan", "%s", err);
    else
        rc = plan_run(&a, &x);
    calib_free(x.cb);
    return plan_cli_mpi_finish(&x, rc);
}

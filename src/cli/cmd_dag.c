/* loong dag: build, validate and print the task DAG of a configuration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/afile.h"
#include "core/xalloc.h"
#include "core/dag_io.h"
#include "core/stats.h"
#include "core/strategy.h"
#include "cli.h"
#include "cli_opts.h"
#include "chakra.h"
#include "core/datapath.h"

static void dag_usage(FILE *f)
{
    fprintf(f,
            "usage: loong dag [configuration] [--format stats|json|dot|megatron|torchtitan] [-o FILE]\n"
            "       loong dag [configuration] --format chakra -o DIR [--calib FILE] [--platform FILE]\n"
            "                 [--all-to-all direct|ring] [--dimensions rail-first|nvlink-first]\n"
            "\n"
            "Build the deterministic task DAG of one configuration, validate it (acyclic,\n"
            "every recv matched by one send, every collective complete) and print it.\n"
            "\n"
            "  --format F            stats: per-rank #-table of tasks, FLOPs and bytes;\n"
            "                        json: the machine-readable DAG (docs/dag.md);\n"
            "                        dot: Graphviz, for small DAGs;\n"
            "                        megatron: no DAG, the Megatron-LM arguments that run the\n"
            "                        configuration (--megatron-args reads them; docs/frameworks.md);\n"
            "                        torchtitan: likewise, its job TOML (--torchtitan-toml reads it);\n"
            "                        chakra: Chakra execution traces for ASTRA-sim, DIR/workload.<NPU>.et,\n"
            "                        DIR/workload.json, network.yml and system.json (docs/dag.md) [stats]\n"
            "  -o, --output FILE     write there (atomically) instead of stdout; chakra: a new directory\n"
            "  --calib FILE          chakra: compute nodes carry their duration under this calibration\n"
            "                        (a path, or a name on the data path, e.g. h100)\n"
            "                        (else ASTRA-sim's roofline times them from num_ops and tensor_size)\n"
            "  --platform FILE       chakra: the platform network.yml describes, by path or name\n"
            "                        [H100 datasheet defaults]\n"
            "  --all-to-all A        chakra: the all-to-all ASTRA-sim runs, direct or ring; comm_size\n"
            "                        is sized for it and system.json names it      [direct]\n"
            "  --dimensions D        chakra: network.yml's dimension order. rail-first: transfers\n"
            "                        between nodes pay the rail, collectives cross the rails at full\n"
            "                        size; nvlink-first: collectives cross the rails at 1/gpus-per-node\n"
            "                        (as NCCL's rings), such transfers pay NVLink (docs/dag.md)\n"
            "                                                                  [rail-first]\n"
            "  --timing              print build/validate/write times and peak memory to stderr\n"
            "  -h, --help            this text\n"
            "\n%s"
            "\nExample:\n"
            "  loong dag --model llama3-8b --seq 128K --mesh 4x16 --strategy loongtrain \\\n"
            "            --window 4 --placement head-first --scope attn --gpus-per-node 8\n",
            cli_config_help());
}

/* --format megatron|torchtitan: the configuration's Megatron-LM arguments
 * or torchtitan job TOML, no DAG. */
static int write_framework(const cli_config *cc, const char *format, const char *out)
{
    char err[LOONG_ERRLEN];
    config c;
    if (cli_config_finish(cc, &c, err) < 0) return cli_fail("dag", "%s", err);
    afile o;
    if (afile_open(&o, out, err) < 0) return cli_fail("dag", "%s", err);
    bool mg = !strcmp(format, "megatron");
    int gaps = mg ? cli_megatron_emit(o.f, &c) : cli_torchtitan_emit(o.f, &c);
    if (gaps < 0) {
        afile_abort(&o);
        return cli_fail("dag", "write error on '%s'", out);
    }
    if (afile_commit(&o, err) < 0) return cli_fail("dag", "%s", err);
    if (gaps)
        fprintf(stderr, "loong dag: %d knob(s) of this configuration are not %s's: see the '#' lines\n", gaps,
                mg ? "Megatron-LM" : "torchtitan");
    return 0;
}

static int write_dag(const dag *g, const char *format, const char *out, char err[LOONG_ERRLEN])
{
    afile a;
    if (afile_open(&a, out, err) < 0) return -1;
    int rc;
    if (!strcmp(format, "json")) {
        rc = dag_write_json(a.f, g);
    } else if (!strcmp(format, "dot")) {
        rc = dag_write_dot(a.f, g);
    } else {
        rank_stats *rs = xcalloc((size_t)config_ranks(dag_config(g)), sizeof *rs, "the per-rank statistics");
        stats_compute(g, rs);
        stats_print(a.f, g, rs);
        fprintf(a.f, "# validated: acyclic, every recv matched by one send, every collective complete\n");
        free(rs);
        rc = ferror(a.f) ? -1 : 0;
    }
    if (rc < 0) {
        afile_abort(&a);
        snprintf(err, LOONG_ERRLEN, "write error on '%s'", out);
        return -1;
    }
    return afile_commit(&a, err);
}

/* --calib for the Chakra durations: a path or a name, found as sim finds
 * it (beside the platform when one is given, then on the data path), and
 * for the platform's GPU kind when there is one. */
static calib *load_calib(const char *given, const char *platform, const platform_spec *sp, char err[LOONG_ERRLEN])
{
    if (sp) return calib_for_platform(platform, sp->gpu, given, err);
    char found[4096];
    if (datapath_find("calibration table", given, ".calib", ".", found, sizeof found, err) < 0) return NULL;
    return calib_load(found, err);
}

int cmd_dag(int argc, char **argv)
{
    static const struct option own[] = {
        {"format", required_argument, 0, 'f'},
        {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},
        {"timing", no_argument, 0, 't'},
        {"calib", required_argument, 0, 'c'}, /* --format chakra */
        {"platform", required_argument, 0, 'p'},
        {"all-to-all", required_argument, 0, 'a'},
        {"dimensions", required_argument, 0, 'D'},
        {0, 0, 0, 0},
    };
    const struct option *opts = cli_options(own);
    cli_config cc = {0};
    const char *format = "stats", *out = "-", *calib_path = NULL, *platform = NULL, *a2a = NULL, *dims = NULL;
    bool timing = false;
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "f:o:h", opts, NULL)) != -1) {
        if (cli_config_option(&cc, opt, optarg)) continue;
        switch (opt) {
        case 'f': format = optarg; break;
        case 'o': out = optarg; break;
        case 't': timing = true; break;
        case 'c': calib_path = optarg; break;
        case 'p': platform = optarg; break;
        case 'a': a2a = optarg; break;
        case 'D': dims = optarg; break;
        case 'h':
        default: return cli_opt_tail("dag", "loong dag", opt, argv, dag_usage, 0);
        }
    }
    if (cli_opt_no_operands("dag", "loong dag", argc, argv)) return 2;
    bool chakra = !strcmp(format, "chakra");
    if (strcmp(format, "stats") && strcmp(format, "json") && strcmp(format, "dot") && strcmp(format, "megatron") &&
        strcmp(format, "torchtitan") && !chakra)
        return cli_fail("dag", "--format '%s' is not one of: stats, json, dot, megatron, torchtitan, chakra", format);
    if (!strcmp(format, "megatron") || !strcmp(format, "torchtitan")) return write_framework(&cc, format, out);
    char err[LOONG_ERRLEN];
    /* ---- Chakra execution traces: their own checks and writer (chakra.h) ---- */
    const char *why;
    if (chakra && !chakra_available(&why)) return cli_fail("dag", "--format chakra: %s", why);
    if (chakra && !strcmp(out, "-")) return cli_fail("dag", "--format chakra writes a directory: give -o DIR");
    if (calib_path && !chakra) return cli_fail("dag", "--calib applies to --format chakra only");
    if (platform && !chakra) return cli_fail("dag", "--platform applies to --format chakra only");
    if (a2a && !chakra) return cli_fail("dag", "--all-to-all applies to --format chakra only");
    chakra_opts co = {.a2a = CHAKRA_A2A_DIRECT};
    if (a2a && strcmp(a2a, "direct") && strcmp(a2a, "ring"))
        return cli_fail("dag", "--all-to-all '%s' is not direct or ring (ASTRA-sim's all-to-all implementations)", a2a);
    if (a2a && !strcmp(a2a, "ring")) co.a2a = CHAKRA_A2A_RING;
    if (dims && !chakra) return cli_fail("dag", "--dimensions applies to --format chakra only");
    if (dims && strcmp(dims, "rail-first") && strcmp(dims, "nvlink-first"))
        return cli_fail("dag", "--dimensions '%s' is not rail-first or nvlink-first (network.yml's dimension order)",
                        dims);
    if (dims && !strcmp(dims, "nvlink-first")) co.dims = CHAKRA_NVLINK_FIRST;
    platform_spec spec;
    char ppath[4096];
    if (platform) {
        if (cli_find_platform(platform, ppath, sizeof ppath, err) < 0 || platform_spec_read(ppath, &spec, err) < 0)
            return cli_fail("dag", "%s", err);
        co.platform = &spec;
        co.platform_path = ppath;
    }
    calib *cb = NULL;
    if (calib_path && !(cb = load_calib(calib_path, co.platform ? ppath : NULL, co.platform, err)))
        return cli_fail("dag", "%s", err);
    /* ---- */
    config c;
    if (cli_config_finish(&cc, &c, err) < 0 || (cb && calib_check_precision(cb, c.precision, err) < 0)) {
        calib_free(cb);
        return cli_fail("dag", "%s", err);
    }
    if (chakra && c.dp > 1) {
        calib_free(cb);
        return cli_fail("dag",
                        "--format chakra exports one data-parallel replica (its gradient groups hold its P "
                        "ranks): drop --dp %d",
                        c.dp);
    }
    if (co.platform && co.platform->gpus_per_node != c.gpus_per_node) {
        calib_free(cb);
        return cli_fail("dag", "--platform %s has %d GPUs per node but the configuration %d: give --gpus-per-node %d",
                        platform, co.platform->gpus_per_node, c.gpus_per_node, co.platform->gpus_per_node);
    }
    double t0 = cli_now();
    dag *g = dag_build(&c, err);
    if (!g) {
        calib_free(cb);
        return cli_fail("dag", "%s", err);
    }
    double t1 = cli_now();
    int rc = dag_validate(g, err) < 0;
    double t2 = cli_now();
    rc = rc || (chakra ? chakra_write_dir(g, cb, &co, out, err) : write_dag(g, format, out, err)) < 0;
    double t3 = cli_now();
    if (timing)
        fprintf(stderr, "# timing: build %.3f s (%u tasks), validate %.3f s, %s %.3f s, peak RSS %.1f MB\n", t1 - t0,
                dag_ntasks(g), t2 - t1, format, t3 - t2, cli_peak_rss_mb());
    dag_free(g);
    calib_free(cb);
    return rc ? cli_fail("dag", "%s", err) : 0;
}

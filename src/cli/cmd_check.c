/*
 * loong check: is a reported throughput plausible for its configuration?
 *
 * A run's log says "N TFLOP/s per GPU" or "N tokens/s"; its configuration
 * (loong's options, or the Megatron-LM launch it came from) says how much
 * work one step is. Two tests, cheapest first:
 *   1. the ceiling: the hardware FLOPs of the step (the DAG's compute
 *      tasks, recompute included, as Megatron's logged TFLOP/s counts
 *      them) at the platform's peak on every GPU. A report above it is not
 *      a run of this configuration (Megatron-Bridge #2667: a2a+p2p without
 *      hierarchical sizes turned context parallelism off, and the run
 *      reported 1,937 TFLOP/s on a 989 TFLOP/s H200);
 *   2. the prediction: loong's analytical step (model/analytic.h), and
 *      the term of it that dominates (compute, or the exposed all-to-all,
 *      ring, TP, data-parallel or pipeline-bubble time).
 * Exit status: 0 plausible, 1 above the ceiling, 2 bad input.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dag.h"
#include "core/stats.h"
#include "core/units.h"
#include "model/analytic.h"
#include "model/calib.h"
#include "model/platform_spec.h"
#include "cli.h"
#include "cli_opts.h"

static void check_usage(FILE *f)
{
    fprintf(f, "usage: loong check [configuration options | --megatron-args FILE] --platform P.xml\n"
               "                   (--measured-tflops X | --measured-tokens-per-s N) [--calib T.calib]\n"
               "\n"
               "Is a reported throughput plausible for its configuration? It is compared with\n"
               "the physical ceiling (the step's hardware FLOPs, recompute included, at the\n"
               "platform's peak on every GPU) and with loong's analytical prediction, whose\n"
               "dominant term it names. Exit status: 0 plausible, 1 above the ceiling (the run\n"
               "is not what its configuration says), 2 bad input.\n"
               "\n"
               "  --platform FILE            the cluster (loong topo), its GPU's peak and links\n"
               "  --calib FILE               compute rates          [<gpu>.calib beside the platform]\n"
               "  --measured-tflops X        TFLOP/s per GPU as Megatron-LM logs it (hardware\n"
               "                             FLOPs: a recomputed forward counts)\n"
               "  --measured-tokens-per-s N  tokens per second of the whole job (all replicas)\n"
               "  -h, --help                 this text\n"
               "\nConfiguration options: as loong dag --help lists them.\n"
               "\nExample (Megatron-LM's Table 1, GPT-1.7B, 137 TFLOP/s on 32 A100s):\n"
               "  loong check --megatron-args experiments/tp-published/gpt-1.7b.megatron \\\n"
               "              --platform topologies/a100-4n-8nic.xml --measured-tflops 137\n");
}

typedef struct check_args {
    const char *platform, *calib, *tflops, *tokens;
    double value; /* the measurement, > 0 */
} check_args;

/* The hardware FLOPs of one step on all GPUs: every compute task of the
 * DAG (one data-parallel replica) times the replicas. */
static double step_hw_flops(const dag *g)
{
    double f = 0;
    for (uint32_t i = 0; i < dag_ntasks(g); i++)
        f += (double)dag_task_get(g, i)->flops;
    return f * dag_config(g)->dp;
}

/* The largest term of the predicted step, and its name. */
static const char *dominant(const analytic_result *r, double *share)
{
    struct {
        const char *name;
        double s;
    } t[] = {{"compute (the busiest rank's kernels)", r->busy},
             {"the exposed all-to-all (Ulysses)", r->a2a},
             {"the exposed ring transfers", r->ring_wait},
             {"the exposed tensor-parallel collectives", r->tp},
             {"the data-parallel gradient collectives not hidden", r->dp_tail},
             {"the pipeline bubble", r->bubble * r->step}};
    int best = 0;
    for (int i = 1; i < (int)(sizeof t / sizeof t[0]); i++)
        if (t[i].s > t[best].s) best = i;
    *share = r->step > 0 ? t[best].s / r->step : 0;
    return t[best].name;
}

static int parse(int argc, char **argv, check_args *a, cli_config *cc)
{
    static const struct option own[] = {
        {"platform", required_argument, 0, 'p'},
        {"calib", required_argument, 0, 'c'},
        {"measured-tflops", required_argument, 0, 'f'},
        {"measured-tokens-per-s", required_argument, 0, 't'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const struct option *opts = cli_options(own);
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_config_option(cc, opt, optarg)) continue;
        switch (opt) {
        case 'p': a->platform = optarg; break;
        case 'c': a->calib = optarg; break;
        case 'f': a->tflops = optarg; break;
        case 't': a->tokens = optarg; break;
        case 'h':
        default: return cli_opt_tail("check", "loong check", opt, argv, check_usage, 1);
        }
    }
    if (cli_opt_no_operands("check", "loong check", argc, argv)) return 2;
    if (!a->platform) return cli_fail("check", "no --platform: give the cluster the run used (loong topo --list)");
    if (!a->tflops == !a->tokens)
        return cli_fail("check", "give one measurement: --measured-tflops X (per GPU) or --measured-tokens-per-s N");
    const char *given = a->tflops ? a->tflops : a->tokens;
    char *end;
    a->value = strtod(given, &end);
    if (end == given || *end || !(a->value > 0) || !isfinite(a->value))
        return cli_fail("check", "%s '%.40s' is not a positive number",
                        a->tflops ? "--measured-tflops" : "--measured-tokens-per-s", given);
    return 0;
}

/* The measured step time the report implies, in seconds: hw_flops at the
 * reported TFLOP/s on every GPU, or the step's tokens at tokens/s. */
static double measured_step(const check_args *a, const config *c, double hw_flops)
{
    if (a->tflops) return hw_flops / (a->value * 1e12 * config_world(c));
    return config_step_tokens(c) * c->dp / a->value;
}

static int report(const check_args *a, const config *c, const platform_spec *sp, const calib *cb, const dag *g)
{
    double hw = step_hw_flops(g), meas = measured_step(a, c, hw);
    int P = config_world(c);
    /* FP8 GEMMs run at the FP8 tensor cores' peak: the ceiling is the
     * precision's, or bf16 runs would look impossible beside FP8 ones */
    bool fp8 = c->precision != PRECISION_BF16 && calib_peak_of(cb, c->precision) > 0;
    double peak = fp8 ? calib_peak_of(cb, c->precision) : sp->peak;
    const char *kind = !fp8 ? "" : c->precision == PRECISION_MXFP8 ? "MXFP8 " : "FP8 ";
    double ceiling = hw / (peak * P), achieved = hw / (meas * P);
    analytic_result r;
    analytic_step(c, cb, sp, &r);
    double share;
    const char *term = dominant(&r, &share);
    printf("# loong check: %s on %d %s GPUs\n", a->platform, P, sp->gpu);
    printf("# step: %.4g hardware TFLOP on all GPUs (recompute counted), %.0f tokens\n", hw / 1e12,
           config_step_tokens(c) * c->dp);
    printf("# measured: step %.4f s, %.1f TFLOP/s per GPU (%.1f %% of the %.0f TFLOP/s %speak)\n", meas,
           achieved / 1e12, 100 * achieved / peak, peak / 1e12, kind);
    printf("# ceiling: step %.4f s at the peak on every GPU\n", ceiling);
    printf("# predicted: step %.4f s (loong's analytical model); its largest term: %s, %.0f %% of it\n", r.step, term,
           100 * share);
    if (meas < ceiling) {
        printf("above the ceiling: %.1f TFLOP/s per GPU is more than the GPU can do: this run's configuration is not "
               "what you think (a parallel dimension off, fewer layers, a smaller batch?)\n",
               achieved / 1e12);
        return 1;
    }
    double dev = 100 * (meas - r.step) / r.step;
    printf("plausible: the measured step is %.1f %% %s loong's prediction%s\n", fabs(dev),
           dev >= 0 ? "slower than" : "faster than",
           dev >= 0 ? " (what the model leaves out, or a slow run: compare --kineto tells which kernels)" : "");
    return 0;
}

int cmd_check(int argc, char **argv)
{
    check_args a = {0};
    cli_config cc = {0};
    int rc = parse(argc, argv, &a, &cc);
    if (rc) return rc == 1 ? 0 : rc;
    char err[LOONG_ERRLEN], path[4096];
    config c;
    platform_spec sp;
    if (cli_config_finish(&cc, &c, err) < 0) return cli_fail("check", "%s", err);
    if (cli_find_platform(a.platform, path, sizeof path, err) < 0 || platform_spec_read(path, &sp, err) < 0)
        return cli_fail("check", "%s", err);
    if (config_world(&c) > sp.nodes * sp.gpus_per_node)
        return cli_fail("check", "the configuration takes %d GPUs and %s has %d: give the run's platform",
                        config_world(&c), a.platform, sp.nodes * sp.gpus_per_node);
    calib *cb = calib_for_platform(path, sp.gpu, a.calib, err);
    if (cb && calib_check_precision(cb, c.precision, err) < 0) calib_free(cb), cb = NULL;
    if (!cb) return cli_fail("check", "%s", err);
    dag *g = dag_build(&c, err);
    if (!g) {
        calib_free(cb);
        return cli_fail("check", "%s", err);
    }
    rc = report(&a, &c, &sp, cb, g);
    dag_free(g);
    calib_free(cb);
    return rc;
}

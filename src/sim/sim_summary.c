/*
 * sim_summary: the #-headed report of a simulated run, every figure with
 * its unit: step time, per-rank busy / idle / exposed-communication time,
 * tokens/s/GPU, MFU (the core's formula), and the busiest links. A figure
 * above what the hardware can do is a modelling bug and says so.
 *
 * Per rank: busy = time its compute stream runs kernels; exposed
 * communication = time some communication task of the rank is in flight
 * while its compute stream is not busy; idle = step time - busy - exposed.
 */
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "core/xalloc.h"
#include "core/timeline.h"
#include "sim_internal.h"

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(loong_sim_summary, loong, "loong sim: summary report");

typedef struct rank_time {
    double busy, exposed, idle;
    double flops;
} rank_time;

static rank_time time_of_rank(const dag *g, const sim_result *res, int r)
{
    rank_timeline tl;
    timeline_rank(g, res->start, res->dur, r, res->makespan, &tl);
    return (rank_time){tl.busy, tl.exposed, tl.idle, 0};
}

static void rank_flops(const dag *g, rank_time *rt)
{
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        rt[t->rank].flops += (double)t->flops;
    }
}

/* The most FLOP/s a GPU can do in c's precision: the FP8 recipes' peak
 * when the table has it, else bf16's. */
static double sim_peak_ceiling(const config *c, const calib *cb)
{
    double p = c->precision != PRECISION_BF16 ? calib_peak_of(cb, c->precision) : 0;
    return p > 0 ? p : calib_peak(cb);
}

static int print_ranks(FILE *f, const dag *g, const calib *cb, const sim_result *res, rank_time *rt)
{
    const config *c = dag_config(g);
    int P = config_ranks(c), bugs = 0;
    /* a rank's ceiling is its GEMMs' precision's peak (FP8's for FP8 runs) */
    double T = res->makespan, peak = sim_peak_ceiling(c, cb);
    fprintf(f, "#%5s %5s %4s %12s %12s %18s %7s %10s\n", "rank", "node", "gpu", "busy_s", "idle_s", "exposed_comm_s",
            "busy_%", "TFLOP/s");
    double sum[3] = {0, 0, 0}, mx[3] = {0, 0, 0};
    for (int r = 0; r < P; r++) {
        double rate = T > 0 ? rt[r].flops / T : 0;
        fprintf(f, " %5d %5d %4d %12.6f %12.6f %18.6f %7.2f %10.2f\n", r, config_node(c, r), config_gpu(c, r),
                rt[r].busy, rt[r].idle, rt[r].exposed, T > 0 ? 100 * rt[r].busy / T : 0, rate / 1e12);
        double v[3] = {rt[r].busy, rt[r].idle, rt[r].exposed};
        for (int k = 0; k < 3; k++) {
            sum[k] += v[k];
            if (v[k] > mx[k]) mx[k] = v[k];
        }
        if (rate > peak * (1 + 1e-9)) {
            fprintf(f, "# BUG: rank %d computes %.2f TFLOP/s, above the GPU peak %.2f TFLOP/s\n", r, rate / 1e12,
                    peak / 1e12);
            bugs++;
        }
    }
    fprintf(f, "# per rank, mean (max): busy %.6f s (%.6f), idle %.6f s (%.6f), exposed communication %.6f s (%.6f)\n",
            sum[0] / P, mx[0], sum[1] / P, mx[1], sum[2] / P, mx[2]);
    return bugs;
}

static int print_links(FILE *f, const sim_result *res, int top)
{
    int bugs = 0;
    fprintf(f, "# busiest links (of %d that carried traffic):\n", res->nlinks);
    fprintf(f, "#%-30s %14s %14s %13s\n", "link", "bandwidth_GBps", "traffic_GB", "utilisation_%");
    for (int i = 0; i < res->nlinks; i++) {
        const sim_link *l = &res->links[i];
        double u = res->makespan > 0 ? l->bytes / (l->bw * res->makespan) : 0;
        if (i < top) fprintf(f, " %-30s %14.3f %14.6f %13.2f\n", l->name, l->bw / 1e9, l->bytes / 1e9, 100 * u);
        if (u > 1 + 1e-9) {
            fprintf(f, "# BUG: link %s carried %.3f GB in %.6f s, above its bandwidth\n", l->name, l->bytes / 1e9,
                    res->makespan);
            bugs++;
        }
    }
    return bugs;
}

int sim_summary_write(FILE *f, const dag *g, const calib *cb, const sim_result *res, int top, int *bugs)
{
    const config *c = dag_config(g);
    int P = config_ranks(c);
    double T = res->makespan;
    rank_time *rt = xcalloc((size_t)P, sizeof *rt, "the summary's ranks");
    rank_flops(g, rt);
    for (int r = 0; r < P; r++) { /* the built ranks (every one, unless the DAG was built folded) */
        double flops = rt[r].flops;
        if (dag_rank_source(g, r) == r) rt[r] = time_of_rank(g, res, r), rt[r].flops = flops;
    }
    for (int r = 0; r < P; r++) /* a folded DAG's unbuilt rank: its representative's, which ran for it */
        rt[r] = rt[dag_rank_source(g, r)];
    /* every replica's tokens and FLOPs on all its GPUs: the same ratios as one replica's */
    double tokens = config_step_tokens(c) * c->dp;
    int world = config_world(c);
    double mfu = stats_mfu(c, T, calib_peak(cb));
    const char *what = c->scope == SCOPE_STEP ? "training step" : "one attention layer";
    fprintf(f, "# step time: %.6f s (%s, %s)\n", T, what, scope_name(c->scope));
    fprintf(f, "# throughput: %.1f tokens/s/GPU (%.0f tokens per %s on %d GPUs)\n", T > 0 ? tokens / (T * world) : 0,
            tokens, what, world);
    fprintf(f, "# MFU: %.2f %% (model FLOPs %.4g TFLOP / (step time x %d GPUs x peak %.1f TFLOP/s))\n", 100 * mfu,
            (double)stats_model_flops(c) * c->dp / 1e12, world, calib_peak(cb) / 1e12);
    if (c->precision != PRECISION_BF16) /* the same FLOPs against the FP8 tensor cores' peak */
        fprintf(f, "# MFU (%s peak): %.2f %% (peak %.1f TFLOP/s; the line above is against the bf16 peak)\n",
                c->precision == PRECISION_MXFP8 ? "MXFP8" : "FP8",
                100 * stats_mfu(c, T, calib_peak_of(cb, c->precision)), calib_peak_of(cb, c->precision) / 1e12);
    *bugs = 0;
    double mfu_ceiling = stats_mfu(c, T, sim_peak_ceiling(c, cb));
    if (mfu_ceiling > 1 + 1e-9) {
        fprintf(f, "# BUG: MFU %.2f %% is above 100 %%: the prediction beats the hardware peak\n", 100 * mfu_ceiling);
        (*bugs)++;
    }
    *bugs += print_ranks(f, g, cb, res, rt);
    *bugs += print_links(f, res, top);
    XBT_VERB("checked the MFU, %d ranks' FLOP/s and %d links against the hardware: %d above it", P, res->nlinks, *bugs);
    free(rt);
    return ferror(f) ? -1 : 0;
}

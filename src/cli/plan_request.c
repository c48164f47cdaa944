/* plan_request: `loong plan`'s options into a plan_request. See plan_cli.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/units.h"
#include "plan_cli.h"
#include "sim_child.h"

int plan_cli_seconds(const char *s, const char *what, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < 0)
        return cli_fail("plan", "%s '%s' is not a number of seconds, 0 or more (0: no limit)", what, s);
    *out = v;
    return 0;
}

int plan_cli_tie(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || (*end && strcmp(end, "%")) || !isfinite(v) || v < 0 || v >= 100)
        return cli_fail("plan", "--tie '%s' is not a percentage in [0, 100) (e.g. --tie 3)", s);
    *out = v / 100;
    return 0;
}

int plan_cli_check_args(plan_args *a, bool top_given)
{
    if (a->from && a->emit) return cli_fail("plan", "--emit %s plans: drop --from", a->emit);
    if (a->from && !a->show)
        return cli_fail("plan", "--from FILE reads a plan for --show ROW: add --show ROW (the table's rank)");
    if (a->from && a->planning[0])
        return cli_fail("plan",
                        "--show --from reads a finished plan: drop '%s' (it applies when planning), or drop --from "
                        "to plan again",
                        a->planning);
    /* options that would silently override each other */
    if (top_given && a->exact)
        return cli_fail("plan",
                        "--top %d and --exact: --exact simulates every feasible layout, --top N the N best; "
                        "give one",
                        a->top);
    if (a->full_layers && a->top == 0 && !a->exact)
        return cli_fail("plan", "--full-layers and --top 0: --top 0 simulates nothing, so there are no layers to "
                                "simulate in full; drop one");
    if (a->draws && !a->cc.doc_dist)
        return cli_fail("plan", "--draws needs --doc-dist FILE: only a length histogram can be drawn again");
    if (!a->draws) a->draws = a->cc.doc_dist ? 3 : 1;
    char err[LOONG_ERRLEN];
    if (cli_config_seed(&a->cc, &a->w.seed, err) < 0) return cli_fail("plan", "%s", err);
    if (a->robust && a->draws > 1)
        return cli_fail("plan", "--robust compares each layout with itself under one packing: give --draws 1");
    if (a->robust && a->top == 0 && !a->exact)
        return cli_fail("plan", "--robust perturbs the simulated layouts: drop --top 0 (or give --exact)");
    return 0;
}

/* ---- the request: platform, GPUs, degrees, memory, base configuration ---- */

/* s as a number within [lo, hi] into *out: 0, or -1 (not a number, or
 * outside). */
static int number_in(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

/* --memory-margin (a percentage, 0 to 50) and --allocator into req. */
static int parse_memory_knobs(const plan_args *a, plan_request *req, char err[LOONG_ERRLEN])
{
    req->margin = PLAN_MARGIN;
    req->allocator = MEMORY_ALLOC_CACHING;
    req->alloc_factor = 0;
    double pct;
    if (a->margin) {
        if (number_in(a->margin, 0, 50, &pct) < 0) {
            snprintf(err, LOONG_ERRLEN,
                     "--memory-margin '%s' is not a percentage from 0 to 50 (the share of the GPU's memory kept free, "
                     "e.g. --memory-margin 4)",
                     a->margin);
            return -1;
        }
        req->margin = pct / 100;
    }
    if (a->allocator && memory_allocator_parse(a->allocator, &req->allocator) < 0 &&
        number_in(a->allocator, 1, 10, &req->alloc_factor) < 0) {
        snprintf(err, LOONG_ERRLEN,
                 "--allocator '%s' is not one of default, expandable, or a factor from 1 to 10 (loong calibrate "
                 "--kineto fits one)",
                 a->allocator);
        return -1;
    }
    return 0;
}

/* The GPU kind's memory (platform_spec_gpu_mem), 80 GB for a kind without one (cpu). */
static double default_gpu_mem(const char *kind)
{
    double m = platform_spec_gpu_mem(kind);
    return m > 0 ? m : 80e9;
}

/* The platform file, and --gpus (all of its GPUs by default). */
static int read_platform(const plan_args *a, plan_ctx *x, char err[LOONG_ERRLEN])
{
    if (platform_spec_read(a->platform, &x->spec, err) < 0) return -1;
    const platform_spec *sp = &x->spec;
    placement pl = platform_spec_placement(sp);
    x->req.gpus = placement_gpus(&pl);
    if (a->gpus && units_parse_int(a->gpus, "--gpus", &x->req.gpus, err) < 0) return -1;
    return 0;
}

/* More GPUs than the platform holds: fine when one replica of whole nodes
 * fits it, the other replicas simulated by symmetry (loong sim --dp). */
static int check_gpus(const plan_args *a, const plan_ctx *x, char err[LOONG_ERRLEN])
{
    const platform_spec *sp = &x->spec;
    placement pl = platform_spec_placement(sp);
    int have = placement_gpus(&pl), dp = x->req.degree[MESH_DP], P = dp ? x->req.gpus / dp : 0;
    if (x->req.gpus <= have || (dp && P <= have && P % sp->gpus_per_node == 0)) return 0;
    snprintf(err, LOONG_ERRLEN,
             "--gpus %d exceeds the %d GPUs of platform %s: use a larger platform (loong topo), or --dp N with "
             "replicas of whole nodes that fit it (the others by symmetry)",
             x->req.gpus, have, a->platform);
    return -1;
}

/* The degree of dimension d as its option gives it (s, NULL when not
 * given) into req->degree[d]: a count that divides the GPUs, or "auto"
 * (dp, pp) for PLAN_SEARCHED; not given, dp and tp are searched and pp is
 * 1 (a pipeline is asked for). */
static int request_degree(plan_request *req, mesh_dim d, const char *s, char err[LOONG_ERRLEN])
{
    char flag[16];
    snprintf(flag, sizeof flag, "--%s", mesh_dim_name(d));
    req->degree[d] = d == MESH_PP ? 1 : PLAN_SEARCHED;
    if (s && d != MESH_TP && !strcmp(s, "auto"))
        req->degree[d] = PLAN_SEARCHED;
    else if (s && units_parse_int(s, flag, &req->degree[d], err) < 0)
        return -1;
    if (req->degree[d] != PLAN_SEARCHED && req->gpus % req->degree[d]) {
        snprintf(err, LOONG_ERRLEN, "%s %d does not divide --gpus %d", flag, req->degree[d], req->gpus);
        return -1;
    }
    return 0;
}

/* --pp N|auto and the knobs that go with it: read here (the base config
 * has one stage), applied to the layouts (plan_enumerate). The global
 * batch, with or without --pp, is --global-batch, else 16M tokens (Llama 3
 * 405B's, Dubey et al. 2024, section 3.4.1) in whole samples: every layout
 * does the same work. --micro-batches M instead gives each replica M. */
static int pipeline_knobs(plan_args *a, plan_ctx *x, config *pk, const char **v, char err[LOONG_ERRLEN])
{
    config_defaults(pk);
    static const config_knob own[] = {KNOB_SCHEDULE,       KNOB_VPP,           KNOB_PP_FIRST_LAYERS,
                                      KNOB_PP_LAST_LAYERS, KNOB_PP_EMBED_SLOT, KNOB_PP_LOSS_SLOT};
    for (int i = 0; i < (int)(sizeof own / sizeof *own); i++) {
        if (v[own[i]] && config_knob_parse(pk, own[i], v[own[i]], err) < 0) return -1;
        if (v[own[i]] && !v[KNOB_PP]) {
            snprintf(err, LOONG_ERRLEN, "--%s applies to pipelined layouts: add --pp N or --pp auto",
                     config_knob_get(own[i])->option);
            return -1;
        }
    }
    bool split = pk->pp_first || pk->pp_last || pk->pp_embed_slot || pk->pp_loss_slot;
    x->req.search_schedule = !v[KNOB_SCHEDULE] && !v[KNOB_VPP];
    if (request_degree(&x->req, MESH_PP, v[KNOB_PP], err) < 0) return -1;
    int pp = x->req.degree[MESH_PP];
    if (split && (pp == PLAN_SEARCHED || pp < 2)) {
        snprintf(err, LOONG_ERRLEN,
                 "--pp-first-layers, --pp-last-layers and the slots split a given --pp N of 2 or more: "
                 "give --pp N");
        return -1;
    }
    if (a->global_batch && v[KNOB_MICRO_BATCHES]) {
        snprintf(err, LOONG_ERRLEN, "--global-batch and --micro-batches both set the micro-batches: give one");
        return -1;
    }
    x->req.global_batch = a->global_batch;
    if (!a->global_batch && !v[KNOB_MICRO_BATCHES]) {
        x->req.global_batch_default = true;
        uint64_t seq = 0;
        if (units_parse_count(v[KNOB_SEQ], "--seq", &seq, err) < 0) return -1;
        double g = 16.0 * 1024 * 1024 / (double)seq;
        x->req.global_batch = g < 1 ? 1 : (int)(g + 0.5);
    }
    v[KNOB_PP] = v[KNOB_SCHEDULE] = v[KNOB_VPP] = v[KNOB_PP_FIRST_LAYERS] = v[KNOB_PP_LAST_LAYERS] = NULL;
    v[KNOB_PP_EMBED_SLOT] = v[KNOB_PP_LOSS_SLOT] = NULL;
    return 0;
}

int plan_cli_request(plan_args *a, plan_ctx *x, char err[LOONG_ERRLEN])
{
    /* the source tree's topologies/, else the installed one by name */
    if (!a->platform) a->platform = access(PLAN_DEFAULT_PLATFORM, F_OK) == 0 ? PLAN_DEFAULT_PLATFORM : "dgx-h100-8n";
    if (cli_find_platform(a->platform, a->where, sizeof a->where, err) < 0) return -1;
    a->platform = a->where;
    if (read_platform(a, x, err) < 0 || sim_child_check_links(a->platform, &a->w, err) < 0) return -1;
    a->foldable = plan_foldable(&x->spec);
    cli_config cc = a->cc;
    char gpn[16];
    snprintf(gpn, sizeof gpn, "%d", x->spec.gpus_per_node);
    const char **v = cc.val;
    if (v[KNOB_GPUS_PER_NODE] && strcmp(v[KNOB_GPUS_PER_NODE], gpn)) {
        snprintf(err, LOONG_ERRLEN, "--gpus-per-node %s differs from the platform's %s GPUs per node",
                 v[KNOB_GPUS_PER_NODE], gpn);
        return -1;
    }
    v[KNOB_GPUS_PER_NODE] = gpn;
    if (!v[KNOB_SEQ]) v[KNOB_SEQ] = "1M";
    /* what the user does not fix is searched (the base's value is unused then) */
    x->req.search_zero = !v[KNOB_ZERO];
    x->req.search_recompute = !v[KNOB_RECOMPUTE];
    if (!v[KNOB_RECOMPUTE]) v[KNOB_RECOMPUTE] = "selective";
    v[KNOB_MESH] = "1x1"; /* the base config only; every enumerated layout sets its own mesh */
    v[KNOB_STRATEGY] = "ulysses";
    /* the degrees are the request's (searched unless given): the base
     * config has one replica, no TP and one stage */
    const char *dp = v[KNOB_DP], *tp = v[KNOB_TP];
    v[KNOB_DP] = v[KNOB_TP] = NULL;
    /* --ep N|auto, applied to each layout (its P): searched unless given */
    x->req.ep = 0;
    if (v[KNOB_EP] && strcmp(v[KNOB_EP], "auto") && units_parse_int(v[KNOB_EP], "--ep", &x->req.ep, err) < 0) return -1;
    v[KNOB_EP] = NULL;
    x->req.etp = 0; /* --expert-tp N|auto likewise */
    if (v[KNOB_EXPERT_TP] && strcmp(v[KNOB_EXPERT_TP], "auto") &&
        units_parse_int(v[KNOB_EXPERT_TP], "--expert-tp", &x->req.etp, err) < 0)
        return -1;
    v[KNOB_EXPERT_TP] = NULL;
    config pk; /* the pipeline knobs given (schedule, vpp, uneven split), for the layouts */
    if (pipeline_knobs(a, x, &pk, v, err) < 0) return -1;
    /* valid with tp > 1 only: read by the knobs' own parser, applied to
     * the layouts (plan_enumerate) */
    config tpk;
    config_defaults(&tpk);
    if ((v[KNOB_SEQUENCE_PARALLEL] &&
         config_knob_parse(&tpk, KNOB_SEQUENCE_PARALLEL, v[KNOB_SEQUENCE_PARALLEL], err) < 0) ||
        (v[KNOB_TP_OVERLAP] && config_knob_parse(&tpk, KNOB_TP_OVERLAP, v[KNOB_TP_OVERLAP], err) < 0) ||
        (v[KNOB_PREFETCH] && config_knob_parse(&tpk, KNOB_PREFETCH, v[KNOB_PREFETCH], err) < 0))
        return -1;
    bool sp_off = !tpk.sequence_parallel, overlap = tpk.tp_overlap;
    if (sp_off && overlap) {
        snprintf(err, LOONG_ERRLEN,
                 "--tp-overlap on overlaps sequence parallelism's collectives: drop "
                 "--sequence-parallel off");
        return -1;
    }
    v[KNOB_SEQUENCE_PARALLEL] = v[KNOB_TP_OVERLAP] = v[KNOB_PREFETCH] = NULL; /* --prefetch: ZeRO-3 layouts */
    if (cli_config_finish(&cc, &x->req.base, err) < 0) return -1;
    if ((x->req.ep > 1 || x->req.etp) && !config_moe(&x->req.base)) {
        snprintf(err, LOONG_ERRLEN,
                 "%s applies to a mixture-of-experts model: use e.g. --model qwen3-30b-a3b, or drop it",
                 x->req.etp ? "--expert-tp" : "--ep");
        return -1;
    }
    x->req.base.sequence_parallel = !sp_off;
    x->req.base.tp_overlap = overlap;
    x->req.base.prefetch = tpk.prefetch;
    if (config_check_prefetch(tpk.prefetch, err) < 0) return -1;
    x->req.base.schedule = pk.schedule;
    x->req.base.vpp = pk.vpp;
    x->req.base.pp_first = pk.pp_first;
    x->req.base.pp_last = pk.pp_last;
    x->req.base.pp_embed_slot = pk.pp_embed_slot;
    x->req.base.pp_loss_slot = pk.pp_loss_slot;
    if (request_degree(&x->req, MESH_TP, tp, err) < 0 || request_degree(&x->req, MESH_DP, dp, err) < 0) return -1;
    if (check_gpus(a, x, err) < 0) return -1;
    x->req.gpu_mem = default_gpu_mem(x->spec.gpu);
    if (a->gpu_mem && units_parse_mem(a->gpu_mem, "--gpu-mem", &x->req.gpu_mem, err) < 0) return -1;
    if (parse_memory_knobs(a, &x->req, err) < 0) return -1;
    if (a->layout && plan_parse_layout(&x->req, a->layout, &x->user, err) < 0) return -1;
    x->cb = calib_for_platform(a->platform, x->spec.gpu, a->calib, err);
    return x->cb ? calib_check_precision(x->cb, x->req.base.precision, err) : -1;
}

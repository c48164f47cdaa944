/* cli_config: the configuration options shared by the commands. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "core/strategy.h"
#include "cli.h"

const char cli_config_help[] = "Configuration (shared by dag, sim, exec and plan):\n"
                               "  --model NAME|FILE     preset (llama3-8b, llama3-70b, 7b-mha, 7b-gqa, tiny) or a\n"
                               "                        `key = value` model file                  [llama3-8b]\n"
                               "  --seq N               tokens per sample, K/M/G = 2^10/2^20/2^30  [128K]\n"
                               "  --batch N             samples per micro-batch                     [1]\n"
                               "  --mesh PhxPs | P      head-parallel x sequence-parallel ranks, or a total\n"
                               "                        that the strategy splits                    [64]\n"
                               "  --strategy NAME       preset over the knobs below            [loongtrain]\n"
                               "  --window W            double-ring window, P_s % W == 0 [strategy's rule]\n"
                               "  --placement P         head-first | context-first              [head-first]\n"
                               "  --partition P         zigzag | contiguous                 [from strategy]\n"
                               "  --ring MODE           single | dual | double              [from strategy]\n"
                               "  --kv-replication on|off  replicate KV heads when P_h > H_kv          [on]\n"
                               "  --scope S             attn-fwd | attn | step                      [step]\n"
                               "  --gpus-per-node N     for the node/GPU of each rank                  [8]\n"
                               "  --recompute R         none | selective | full                     [none]\n"
                               "  --zero N              ZeRO stage 0-3 of the gradient reduction       [1]\n"
                               "  --dtype T             bf16 | fp32 activations                     [bf16]\n"
                               "Strategies:\n";

bool cli_config_option(cli_config *cc, int opt, const char *arg)
{
    const char **slot[] = {&cc->model,  &cc->seq,           &cc->batch,     &cc->mesh, &cc->strategy,
                           &cc->window, &cc->placement,     &cc->partition, &cc->ring, &cc->kv_replication,
                           &cc->scope,  &cc->gpus_per_node, &cc->recompute, &cc->zero, &cc->dtype};
    int k = opt - CLI_OPT_BASE;
    if (k < 0 || k >= (int)(sizeof slot / sizeof slot[0])) return false;
    *slot[k] = arg;
    return true;
}

bool cli_quiet;

int cli_fail(const char *cmd, const char *fmt, ...)
{
    if (cli_quiet) return 2;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "loong %s: error: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

static int parse_mesh(const char *s, int *ph, int *ps, int *p, char err[LOONG_ERRLEN])
{
    *ph = *ps = *p = 0;
    const char *x = strchr(s, 'x');
    if (!x) return units_parse_int(s, "--mesh", p, err);
    char a[32];
    size_t n = (size_t)(x - s);
    if (n == 0 || n >= sizeof a) {
        snprintf(err, LOONG_ERRLEN, "--mesh '%s' is not PhxPs (e.g. 4x16) or a rank count", s);
        return -1;
    }
    memcpy(a, s, n);
    a[n] = '\0';
    if (units_parse_int(a, "--mesh P_h", ph, err) < 0 || units_parse_int(x + 1, "--mesh P_s", ps, err) < 0) return -1;
    return 0;
}

static int bad_choice(const char *opt, const char *v, const char *choices, char err[LOONG_ERRLEN])
{
    snprintf(err, LOONG_ERRLEN, "%s '%s' is not one of: %s", opt, v, choices);
    return -1;
}

static int parse_sizes(const cli_config *cc, config *c, char err[LOONG_ERRLEN])
{
    if (cc->model && model_resolve(cc->model, &c->model, err) < 0) return -1;
    if (cc->seq && units_parse_count(cc->seq, "--seq", &c->seq, err) < 0) return -1;
    if (cc->batch && units_parse_int(cc->batch, "--batch", &c->batch, err) < 0) return -1;
    if (cc->gpus_per_node && units_parse_int(cc->gpus_per_node, "--gpus-per-node", &c->gpus_per_node, err) < 0)
        return -1;
    if (cc->kv_replication) {
        if (strcmp(cc->kv_replication, "on") && strcmp(cc->kv_replication, "off")) {
            snprintf(err, LOONG_ERRLEN, "--kv-replication '%s' is not on or off", cc->kv_replication);
            return -1;
        }
        c->kv_replication = !strcmp(cc->kv_replication, "on");
    }
    if (cc->placement && placement_parse(cc->placement, &c->placement))
        return bad_choice("--placement", cc->placement, "head-first, context-first", err);
    return 0;
}

static int parse_knobs(const cli_config *cc, config *c, char err[LOONG_ERRLEN])
{
    if (cc->partition && partition_parse(cc->partition, &c->partition))
        return bad_choice("--partition", cc->partition, "zigzag, contiguous", err);
    if (cc->ring && ring_parse(cc->ring, &c->ring)) return bad_choice("--ring", cc->ring, "single, dual, double", err);
    if (cc->scope && scope_parse(cc->scope, &c->scope))
        return bad_choice("--scope", cc->scope, "attn-fwd, attn, step", err);
    if (cc->recompute && recompute_parse(cc->recompute, &c->recompute))
        return bad_choice("--recompute", cc->recompute, "none, selective, full", err);
    if (cc->ring) c->window = c->ring == RING_DOUBLE ? strategy_default_window(c) : c->p_seq;
    if (cc->window && units_parse_int(cc->window, "--window", &c->window, err) < 0) return -1;
    if (cc->zero) {
        if (strlen(cc->zero) != 1 || cc->zero[0] < '0' || cc->zero[0] > '3') {
            snprintf(err, LOONG_ERRLEN, "--zero '%s' is not a ZeRO stage 0, 1, 2 or 3", cc->zero);
            return -1;
        }
        c->zero = cc->zero[0] - '0';
    }
    if (cc->dtype) {
        if (strcmp(cc->dtype, "bf16") && strcmp(cc->dtype, "fp32")) {
            snprintf(err, LOONG_ERRLEN, "--dtype '%s' is not bf16 or fp32", cc->dtype);
            return -1;
        }
        c->act_bytes = !strcmp(cc->dtype, "bf16") ? 2 : 4;
    }
    return 0;
}

int cli_config_finish(const cli_config *cc, config *c, char err[LOONG_ERRLEN])
{
    config_defaults(c);
    if (parse_sizes(cc, c, err) < 0) return -1;
    int ph, ps, p;
    if (parse_mesh(cc->mesh ? cc->mesh : "64", &ph, &ps, &p, err) < 0) return -1;
    if (strategy_apply(cc->strategy ? cc->strategy : "loongtrain", ph, ps, p, c, err) < 0) return -1;
    if (parse_knobs(cc, c, err) < 0) return -1;
    return config_validate(c, err);
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double cli_peak_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

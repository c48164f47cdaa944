/* config: validation, geometry and serialisation of a run. See config.h. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Upper bounds that keep every task field in range. */
#define MAX_RANKS 65536
#define MAX_TASKS 2000000000ull

void config_defaults(config *c)
{
    memset(c, 0, sizeof *c);
    char err[LOONG_ERRLEN];
    model_preset("llama3-8b", &c->model, err);
    c->seq = 128 * 1024;
    c->batch = 1;
    c->p_head = 8;
    c->p_seq = 8;
    snprintf(c->strategy, sizeof c->strategy, "loongtrain");
    c->placement = PLACE_HEAD_FIRST;
    c->partition = PART_ZIGZAG;
    c->ring = RING_DOUBLE;
    c->window = 2;
    c->kv_replication = true;
    c->scope = SCOPE_STEP;
    c->gpus_per_node = 8;
    c->recompute = RECOMPUTE_NONE;
    c->zero = 1;
    c->act_bytes = 2;
}

/* ---- names ---- */

#define NAMES(fn, type, ...)                                                                                           \
    static const char *const fn##_names[] = {__VA_ARGS__};                                                             \
    const char *fn##_name(type v) { return fn##_names[v]; }                                                            \
    int fn##_parse(const char *s, type *out)                                                                           \
    {                                                                                                                  \
        for (size_t i = 0; i < sizeof fn##_names / sizeof fn##_names[0]; i++)                                          \
            if (!strcmp(s, fn##_names[i])) {                                                                           \
                *out = (type)i;                                                                                        \
                return 0;                                                                                              \
            }                                                                                                          \
        return -1;                                                                                                     \
    }
NAMES(placement, placement_kind, "head-first", "context-first")
NAMES(partition, partition_kind, "contiguous", "zigzag")
NAMES(ring, ring_kind, "single", "dual", "double")
NAMES(scope, scope_kind, "attn-fwd", "attn", "step")
NAMES(recompute, recompute_kind, "none", "selective", "full")

/* ---- validation ---- */

static int fail(char err[LOONG_ERRLEN], const char *msg)
{
    snprintf(err, LOONG_ERRLEN, "%s", msg);
    return -1;
}

static int validate_heads(const config *c, char err[LOONG_ERRLEN])
{
    const model *m = &c->model;
    int ph = c->p_head;
    if (ph > m->heads || m->heads % ph) {
        snprintf(err, LOONG_ERRLEN,
                 "mesh %dx%d: P_h = %d must divide the %d query heads of %s (H %% P_h == 0): choose P_h among the "
                 "divisors of %d",
                 ph, c->p_seq, ph, m->heads, m->name, m->heads);
        return -1;
    }
    if (ph <= m->kv_heads) {
        if (m->kv_heads % ph) {
            snprintf(err, LOONG_ERRLEN, "mesh %dx%d: P_h = %d must divide the %d KV heads of %s (H_kv %% P_h == 0)", ph,
                     c->p_seq, ph, m->kv_heads, m->name);
            return -1;
        }
        return 0;
    }
    if (!c->kv_replication) {
        snprintf(err, LOONG_ERRLEN,
                 "mesh %dx%d: P_h = %d exceeds the %d KV heads of %s and KV replication is off: use --kv-replication "
                 "on or P_h <= %d",
                 ph, c->p_seq, ph, m->kv_heads, m->name, m->kv_heads);
        return -1;
    }
    if (ph % m->kv_heads) {
        snprintf(err, LOONG_ERRLEN,
                 "mesh %dx%d: with KV replication P_h = %d must be a multiple of H_kv = %d (P_h %% H_kv == 0)", ph,
                 c->p_seq, ph, m->kv_heads);
        return -1;
    }
    return 0;
}

static int validate_ring(const config *c, char err[LOONG_ERRLEN])
{
    if (c->window < 1 || c->p_seq % c->window) {
        snprintf(err, LOONG_ERRLEN,
                 "P_s = %d is not a multiple of the window w = %d (P_s %% w == 0): choose w among the divisors of %d",
                 c->p_seq, c->window, c->p_seq);
        return -1;
    }
    if (c->ring != RING_DOUBLE && c->window != c->p_seq) {
        snprintf(err, LOONG_ERRLEN, "--window %d applies to --ring double only (ring mode is %s)", c->window,
                 ring_name(c->ring));
        return -1;
    }
    if (c->ring == RING_DUAL && c->partition != PART_ZIGZAG)
        return fail(err, "--ring dual needs --partition zigzag: its A and B rings carry the two zigzag chunks");
    return 0;
}

static int validate_seq(const config *c, char err[LOONG_ERRLEN])
{
    uint64_t p = (uint64_t)config_ranks(c), s = c->seq;
    if (s > UINT32_MAX)
        return fail(err, "--seq exceeds 4G tokens, the largest sequence loong represents: use a shorter sequence");
    if (c->partition == PART_ZIGZAG && s % (2 * (uint64_t)c->p_seq)) {
        snprintf(err, LOONG_ERRLEN,
                 "--seq %llu is not a multiple of 2*P_s = %d (zigzag splits the sequence into 2*P_s chunks): use a "
                 "multiple of %d or --partition contiguous",
                 (unsigned long long)s, 2 * c->p_seq, 2 * c->p_seq);
        return -1;
    }
    if (s % p) {
        snprintf(err, LOONG_ERRLEN, "--seq %llu is not divisible by P = P_h*P_s = %llu ranks (S %% P == 0)",
                 (unsigned long long)s, (unsigned long long)p);
        return -1;
    }
    uint64_t local;
    if (!units_mul(s / p, (uint64_t)c->batch, &local) || local > UINT32_MAX)
        return fail(err, "--batch x --seq / P exceeds 4G tokens per rank: reduce --batch or --seq");
    return 0;
}

/* Prove the largest totals fit in 64 bits: 14*S^2*H*d*B*L (attention fwd +
 * bwd, full blocks, with recompute) plus 16*S*B*params. */
static int validate_overflow(const config *c, char err[LOONG_ERRLEN])
{
    const model *m = &c->model;
    uint64_t attn, gemm, total;
    uint64_t fa[] = {
        14, c->seq, c->seq, (uint64_t)m->heads, (uint64_t)m->head_dim, (uint64_t)c->batch, (uint64_t)m->layers};
    uint64_t fg[] = {16, c->seq, (uint64_t)c->batch, model_params(m)};
    if (!units_mul_n(&attn, 7, fa) || !units_mul_n(&gemm, 4, fg) || !units_add(attn, gemm, &total)) {
        return fail(err, "the FLOP count of this configuration overflows 64-bit arithmetic: "
                         "reduce --seq, --batch or the model size");
    }
    uint64_t est = (uint64_t)config_ranks(c) * (uint64_t)(m->layers + 1) * (24ull * (uint64_t)c->p_seq + 64);
    if (est > MAX_TASKS) {
        snprintf(err, LOONG_ERRLEN,
                 "this configuration would need about %llu tasks, more than loong builds (%llu): use fewer ranks or "
                 "--scope attn",
                 (unsigned long long)est, (unsigned long long)MAX_TASKS);
        return -1;
    }
    return 0;
}

int config_validate(const config *c, char err[LOONG_ERRLEN])
{
    if (model_validate(&c->model, err) < 0) return -1;
    if (c->seq < 1) return fail(err, "--seq must be positive");
    if (c->batch < 1) return fail(err, "--batch must be positive");
    if (c->p_head < 1 || c->p_seq < 1) return fail(err, "--mesh needs positive P_h and P_s, e.g. 4x16");
    if (config_ranks(c) > MAX_RANKS) {
        snprintf(err, LOONG_ERRLEN, "mesh %dx%d has more than %d ranks", c->p_head, c->p_seq, MAX_RANKS);
        return -1;
    }
    if (c->gpus_per_node < 1) return fail(err, "--gpus-per-node must be positive");
    if (c->zero < 0 || c->zero > 3) return fail(err, "--zero must be 0, 1, 2 or 3");
    if (c->act_bytes != 2 && c->act_bytes != 4) return fail(err, "--dtype must be bf16 or fp32");
    if (validate_heads(c, err) < 0 || validate_ring(c, err) < 0 || validate_seq(c, err) < 0) return -1;
    return validate_overflow(c, err);
}

/* ---- geometry ---- */

int config_rank_of(const config *c, int h, int s)
{
    return c->placement == PLACE_HEAD_FIRST ? s * c->p_head + h : h * c->p_seq + s;
}

void config_coords(const config *c, int rank, int *h, int *s)
{
    if (c->placement == PLACE_HEAD_FIRST) {
        *h = rank % c->p_head;
        *s = rank / c->p_head;
    } else {
        *h = rank / c->p_seq;
        *s = rank % c->p_seq;
    }
}

int config_q_heads(const config *c) { return c->model.heads / c->p_head; }

int config_kv_heads_total(const config *c)
{
    int kv = c->model.kv_heads;
    return kv > c->p_head ? kv : c->p_head;
}

int config_kv_heads(const config *c) { return config_kv_heads_total(c) / c->p_head; }

int config_kv_repl(const config *c) { return c->p_head > c->model.kv_heads ? c->p_head / c->model.kv_heads : 1; }

int config_parts(const config *c) { return c->partition == PART_ZIGZAG ? 2 : 1; }

int config_nchunks(const config *c) { return c->p_seq * config_parts(c); }

uint64_t config_chunk_tokens(const config *c) { return c->seq / (uint64_t)config_nchunks(c); }

int config_chunk_of(const config *c, int s, int part) { return part == 0 ? s : 2 * c->p_seq - 1 - s; }

uint64_t config_local_tokens(const config *c) { return (uint64_t)c->batch * c->seq / (uint64_t)config_ranks(c); }

/* ---- serialisation ---- */

json_t *config_to_json(const config *c)
{
    const model *m = &c->model;
    return json_pack(
        "{s:{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i},s:I,s:i,s:[i,i],s:s,s:s,s:s,s:s,s:i,s:b,s:s,s:i,s:s,s:i,s:s}", "model",
        "name", m->name, "layers", m->layers, "hidden", m->hidden, "heads", m->heads, "kv_heads", m->kv_heads,
        "head_dim", m->head_dim, "ffn", m->ffn, "vocab", m->vocab, "seq", (json_int_t)c->seq, "batch", c->batch, "mesh",
        c->p_head, c->p_seq, "strategy", c->strategy, "placement", placement_name(c->placement), "partition",
        partition_name(c->partition), "ring", ring_name(c->ring), "window", c->window, "kv_replication",
        c->kv_replication, "scope", scope_name(c->scope), "gpus_per_node", c->gpus_per_node, "recompute",
        recompute_name(c->recompute), "zero", c->zero, "dtype", c->act_bytes == 2 ? "bf16" : "fp32");
}

int config_from_json(const json_t *j, config *c, char err[LOONG_ERRLEN])
{
    memset(c, 0, sizeof *c);
    model *m = &c->model;
    const char *name, *strategy, *place, *part, *ring, *scope, *recomp, *dtype;
    json_int_t seq;
    int repl;
    json_error_t jerr;
    if (json_unpack_ex(
            (json_t *)j, &jerr, 0,
            "{s:{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i},s:I,s:i,s:[i,i],s:s,s:s,s:s,s:s,s:i,s:b,s:s,s:i,s:s,s:i,s:s}",
            "model", "name", &name, "layers", &m->layers, "hidden", &m->hidden, "heads", &m->heads, "kv_heads",
            &m->kv_heads, "head_dim", &m->head_dim, "ffn", &m->ffn, "vocab", &m->vocab, "seq", &seq, "batch", &c->batch,
            "mesh", &c->p_head, &c->p_seq, "strategy", &strategy, "placement", &place, "partition", &part, "ring",
            &ring, "window", &c->window, "kv_replication", &repl, "scope", &scope, "gpus_per_node", &c->gpus_per_node,
            "recompute", &recomp, "zero", &c->zero, "dtype", &dtype) < 0) {
        snprintf(err, LOONG_ERRLEN, "configuration object: %s", jerr.text);
        return -1;
    }
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(c->strategy, sizeof c->strategy, "%s", strategy);
    c->seq = seq > 0 ? (uint64_t)seq : 0;
    c->kv_replication = repl;
    c->act_bytes = !strcmp(dtype, "fp32") ? 4 : 2;
    if (placement_parse(place, &c->placement) || partition_parse(part, &c->partition) || ring_parse(ring, &c->ring) ||
        scope_parse(scope, &c->scope) || recompute_parse(recomp, &c->recompute)) {
        snprintf(err, LOONG_ERRLEN, "configuration object: unknown placement/partition/ring/scope/recompute name");
        return -1;
    }
    return config_validate(c, err);
}

uint64_t config_hash(const config *c)
{
    json_t *j = config_to_json(c);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    uint64_t h = 1469598103934665603ull;
    for (const char *p = s; p && *p; p++) {
        h ^= (unsigned char)*p;
        h *= 1099511628211ull;
    }
    free(s);
    json_decref(j);
    return h;
}

void config_describe(const config *c, char *buf, size_t len)
{
    char seq[32];
    units_fmt_count(c->seq, seq, sizeof seq);
    snprintf(buf, len, "%s S=%s B=%d mesh %dx%d %s (%s, %s, ring %s w=%d, kv-repl %s) scope %s, %d GPUs/node",
             c->model.name, seq, c->batch, c->p_head, c->p_seq, c->strategy, placement_name(c->placement),
             partition_name(c->partition), ring_name(c->ring), c->window, c->kv_replication ? "on" : "off",
             scope_name(c->scope), c->gpus_per_node);
}

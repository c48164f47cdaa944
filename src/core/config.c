/* config: validation, geometry and serialisation of a run. See config.h. */
#include "config.h"
#include "pipeline.h"
#include "recompute.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

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
    c->tp = 1;
    c->sequence_parallel = true;
    c->p_head = 8;
    c->p_seq = 8;
    c->dp = 1;
    c->pp = 1;
    c->micro_batches = 1;
    c->schedule = SCHED_1F1B;
    c->vpp = 1;
    snprintf(c->strategy, sizeof c->strategy, "loongtrain");
    config_set_placement(c, PLACE_HEAD_FIRST);
    c->partition = PART_ZIGZAG;
    c->ring = RING_DOUBLE;
    c->window = 2;
    c->kv_replication = true;
    c->scope = SCOPE_STEP;
    c->gpus_per_node = 8;
    c->recompute = RECOMPUTE_NONE;
    c->recompute_modules = RECOMPUTE_MOD_CORE_ATTN;
    c->recompute_method = RECOMPUTE_UNIFORM;
    c->recompute_layers = 1;
    c->zero = 1;
    c->prefetch = 1;
    c->act_bytes = 2;
}

/* ---- names ---- */

/* How a value is spelled on the command line and in JSON, and in the short
 * layout names of `loong plan`. */
typedef struct spelling {
    const char *name, *abbrev;
} spelling;

static const spelling placement_sp[] = {{"head-first", "hf"}, {"context-first", "cf"}};
static const spelling partition_sp[] = {
    {"contiguous", "ct"}, {"zigzag", "zz"}, {"doc-contiguous", "dct"}, {"doc-zigzag", "dzz"}, {"balanced", "bal"}};
static const spelling ring_sp[] = {{"single", "single"}, {"dual", "dual"}, {"double", "double"}, {"allgather", "ag"}};
static const spelling scope_sp[] = {{"attn-fwd", "attn-fwd"}, {"attn", "attn"}, {"step", "step"}};
static const spelling recompute_sp[] = {{"none", "none"}, {"selective", "sel"}, {"sc++", "sc++"}, {"full", "full"}};
static const spelling recompute_method_sp[] = {{"uniform", "u"}, {"block", "b"}};
static const spelling onoff_sp[] = {{"off", "off"}, {"on", "on"}};
static const spelling nccl_algo_sp[] = {{"auto", "auto"}, {"ring", "ring"}, {"tree", "tree"}, {"nvls", "nvls"}};
static const spelling nccl_proto_sp[] = {{"auto", "auto"}, {"simple", "simple"}, {"ll", "ll"}, {"ll128", "ll128"}};
static const spelling fusions_sp[] = {{"te", "te"}, {"none", "none"}};
static const spelling attention_sp[] = {{"flash", "flash"}, {"unfused", "unfused"}};
static const spelling precision_sp[] = {
    {"bf16", "bf16"}, {"fp8-delayed", "fp8-delayed"}, {"fp8-current", "fp8-current"}, {"mxfp8", "mxfp8"}};
static const spelling schedule_sp[] = {{"1f1b", "1f1b"}, {"gpipe", "gpipe"}, {"interleaved", "il"}};
static const spelling dtype_sp[] = {{"bf16", "bf16"}, {"fp32", "fp32"}}; /* act_bytes 2, 4 */
#define NSP(a) ((int)(sizeof(a) / sizeof(a[0])))

static int spelling_find(const spelling *sp, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, sp[i].name)) return i;
    return -1;
}

#define NAMES(fn, type)                                                                                                \
    const char *fn##_name(type v) { return fn##_sp[v].name; }                                                          \
    int fn##_parse(const char *s, type *out)                                                                           \
    {                                                                                                                  \
        int i = spelling_find(fn##_sp, NSP(fn##_sp), s);                                                               \
        if (i >= 0) *out = (type)i;                                                                                    \
        return i >= 0 ? 0 : -1;                                                                                        \
    }
NAMES(placement, placement_kind)

/* The orders the placement names stand for. */
static const char *const placement_order[] = {"tp-head-seq-pp-dp", "tp-seq-head-pp-dp"};
NAMES(partition, partition_kind)
NAMES(ring, ring_kind)
NAMES(scope, scope_kind)
NAMES(recompute, recompute_kind)
const char *schedule_name(schedule_kind v) { return schedule_sp[v].name; }
const char *placement_abbrev(placement_kind v) { return placement_sp[v].abbrev; }
const char *partition_abbrev(partition_kind v) { return partition_sp[v].abbrev; }
const char *ring_abbrev(ring_kind v) { return ring_sp[v].abbrev; }

/* ---- validation ---- */

static int fail(char err[LOONG_ERRLEN], const char *msg)
{
    snprintf(err, LOONG_ERRLEN, "%s", msg);
    return -1;
}

/* Megatron's column-parallel QKV gives each TP rank H/tp query heads and
 * H_kv/tp KV groups, and asserts that tp divides both
 * (megatron/core/transformer/attention.py). Beyond H_kv, with KV
 * replication on, each of the tp/H_kv adjacent shards of a KV group holds
 * that KV head (vLLM's QKVParallelLinear, vllm/model_executor/layers/
 * linear.py; Megatron itself refuses it), and the replicas' gradients of its weights are
 * summed (build.c's kv_grad_replicas). */
static int validate_tp_kv_heads(const config *c, char err[LOONG_ERRLEN])
{
    const model *m = &c->model;
    int tp = c->tp;
    if (m->kv_heads % tp == 0) return 0;
    if (tp % m->kv_heads) {
        snprintf(err, LOONG_ERRLEN,
                 "--tp %d neither divides the %d KV heads of %s nor is a multiple of them (each KV head on tp/H_kv "
                 "shards): choose tp among the divisors or multiples of %d",
                 tp, m->kv_heads, m->name, m->kv_heads);
        return -1;
    }
    if (!c->kv_replication) {
        snprintf(err, LOONG_ERRLEN,
                 "--tp %d exceeds the %d KV heads of %s and KV replication is off: use --kv-replication on "
                 "(each KV head on %d shards; Megatron-Core refuses this) or tp <= %d",
                 tp, m->kv_heads, m->name, tp / m->kv_heads, m->kv_heads);
        return -1;
    }
    return 0;
}

static int validate_tp_heads(const config *c, char err[LOONG_ERRLEN])
{
    const model *m = &c->model;
    int tp = c->tp;
    if (m->heads % tp) {
        snprintf(err, LOONG_ERRLEN,
                 "--tp %d must divide the %d query heads of %s (H %% tp == 0): choose tp among the "
                 "divisors of %d",
                 tp, m->heads, m->name, m->heads);
        return -1;
    }
    if (validate_tp_kv_heads(c, err) < 0) return -1;
    if (m->ffn % tp) {
        snprintf(err, LOONG_ERRLEN, "--tp %d must divide the FFN width %d of %s (column-parallel gate and up)", tp,
                 m->ffn, m->name);
        return -1;
    }
    return 0;
}

/* P_h splits the heads of one TP shard: H/tp query heads, H_kv/tp KV heads. */
static int validate_heads(const config *c, char err[LOONG_ERRLEN])
{
    if (validate_tp_heads(c, err) < 0) return -1;
    const model *m = &c->model;
    int ph = c->p_head, hs = config_tp_heads(c), kvs = config_tp_kv_heads(c);
    const char *of = c->tp > 1 ? " per TP shard" : "";
    if (ph > hs || hs % ph) {
        snprintf(err, LOONG_ERRLEN,
                 "mesh %dx%d: P_h = %d must divide the %d query heads%s of %s (H %% P_h == 0): choose P_h among the "
                 "divisors of %d",
                 ph, c->p_seq, ph, hs, of, m->name, hs);
        return -1;
    }
    if (ph <= kvs) {
        if (kvs % ph) {
            snprintf(err, LOONG_ERRLEN, "mesh %dx%d: P_h = %d must divide the %d KV heads%s of %s (H_kv %% P_h == 0)",
                     ph, c->p_seq, ph, kvs, of, m->name);
            return -1;
        }
        return 0;
    }
    if (!c->kv_replication) {
        snprintf(err, LOONG_ERRLEN,
                 "mesh %dx%d: P_h = %d exceeds the %d KV heads%s of %s and KV replication is off: use "
                 "--kv-replication on or P_h <= %d",
                 ph, c->p_seq, ph, kvs, of, m->name, kvs);
        return -1;
    }
    if (ph % kvs) {
        snprintf(err, LOONG_ERRLEN,
                 "mesh %dx%d: with KV replication P_h = %d must be a multiple of H_kv = %d%s (P_h %% H_kv == 0)", ph,
                 c->p_seq, ph, kvs, of);
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
    if (c->ring == RING_DUAL && config_parts(c) != 2)
        return fail(err, "--ring dual needs a two-part partition (zigzag, doc-zigzag or balanced): its A and B rings "
                         "carry the two parts");
    if (c->kv_stride < 0 || (c->kv_stride && c->ring != RING_ALLGATHER))
        return fail(err, "--kv-stride applies to --ring allgather (strategy allgather) only, as a count >= 1");
    int kvh = config_kv_heads(c);
    if (c->kv_stride && kvh % c->kv_stride) {
        snprintf(err, LOONG_ERRLEN,
                 "--kv-stride %d does not divide the %d KV heads of a rank: use a divisor of %d (or leave it out for "
                 "all)",
                 c->kv_stride, kvh, kvh);
        return -1;
    }
    return 0;
}

static int validate_seq(const config *c, char err[LOONG_ERRLEN])
{
    uint64_t p = (uint64_t)config_cp(c), s = c->seq;
    if (s > UINT32_MAX)
        return fail(err, "--seq exceeds 4G tokens, the largest sequence loong represents: use a shorter sequence");
    if (config_parts(c) == 2 && s % (2 * (uint64_t)c->p_seq)) {
        snprintf(err, LOONG_ERRLEN,
                 "--seq %llu is not a multiple of 2*P_s = %d (%s gives each ring index two parts of S/(2*P_s) "
                 "tokens): use a multiple of %d or --partition contiguous",
                 (unsigned long long)s, 2 * c->p_seq, partition_name(c->partition), 2 * c->p_seq);
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
    /* sequence parallelism splits each sample's S/P tokens over the TP group */
    if (c->tp > 1 && c->sequence_parallel && (s / p) % (uint64_t)c->tp) {
        snprintf(err, LOONG_ERRLEN,
                 "--seq %llu: S/P = %llu tokens per rank are not divisible by --tp %d, which sequence parallelism "
                 "splits them over: use a multiple of %llu or --sequence-parallel off",
                 (unsigned long long)s, (unsigned long long)(s / p), c->tp, (unsigned long long)(p * (uint64_t)c->tp));
        return -1;
    }
    return 0;
}

/* The widest activation row or weight matrix side of a block or the LM
 * head, in elements: what one GEMM's n (or a transfer's row) spans. */
static long double widest(const model *m)
{
    long double w = m->hidden, qkv = (long double)(m->heads + 2 * m->kv_heads) * m->head_dim;
    long double mlp = 2.0L * m->ffn; /* a fused gate and up projection */
    w = qkv > w ? qkv : w;
    w = mlp > w ? mlp : w;
    return m->vocab > w ? m->vocab : w;
}

/* An upper bound on the FLOPs and bytes of any single task of c (a task's
 * fields are uint64_t, and traces and Chakra read them as int64). A task
 * is one attention block (under --ring allgather one KV-stride group of a
 * rank's queries against every key), one GEMM, one merge or accumulation,
 * one transfer or collective: never a sum over layers, micro-batches or
 * ranks, which every module totals in floating point (stats.h).
 *   attention: a rank holds n = S/P_s query positions per sample; under
 *     the causal mask the most (query, key) pairs n positions can see is
 *     the last n's, n*S - n(n-1)/2 (S(S+1)/2 at P_s = 1; the balanced
 *     partition's equal shares, S(S+1)/(2 P_s), and document masks stay
 *     below it); backward 2.5x the forward's 4*d*hq*B per pair (sizes.h).
 *   GEMM: backward 4*m*n*k, m the rank's B*S/P tokens, n*k at most
 *     hidden x widest() (not divided by tp: a bound).
 *   bytes: 2x (a ring all-reduce) an fp32 tensor of B*S/P_s tokens of
 *     widest() elements, or of every parameter.
 * For llama3-405b at S = 4M, B = 1 on one rank (1x1, tp 1), the largest
 * task is the backward of its one causal block, S(S+1)/2 pairs * 4*128*128
 * * 2.5 = 1.44e18 FLOPs (the bound is exact there): 2^63 / 6.4. Its
 * largest GEMM (the LM head's backward) is 4*S*16384*128256 = 3.5e16. */
static long double task_size_bound(const config *c)
{
    const model *m = &c->model;
    long double S = (long double)c->seq, n = S / c->p_seq, B = c->batch;
    long double pairs = n * S - n * (n - 1) / 2;
    long double attn = pairs * 4 * m->head_dim * config_q_heads(c) * B * 5 / 2;
    long double gemm = 4 * (long double)config_local_tokens(c) * m->hidden * widest(m);
    long double act = 8 * B * n * widest(m), params = 8 * (long double)model_params(m);
    long double b = attn > gemm ? attn : gemm;
    b = act > b ? act : b;
    return params > b ? params : b;
}

/* What must fit 64 bits: each task's FLOPs and bytes (task_size_bound),
 * and the task count (a DAG's ids are 32-bit, its memory finite). Totals
 * over tasks, layers, micro-batches and ranks are floating point and
 * have no such limit. */
static int validate_overflow(const config *c, char err[LOONG_ERRLEN])
{
    long double task = task_size_bound(c);
    if (task >= 0x1p63L) {
        snprintf(err, LOONG_ERRLEN,
                 "one task (attention block, GEMM or transfer) of this configuration reaches %.3Lg FLOPs or bytes, "
                 "above the 2^63 a task holds: spread it over a larger --mesh or --tp, or use a smaller --batch "
                 "(--micro-batches keep the samples)",
                 task);
        return -1;
    }
    const model *m = &c->model;
    uint64_t mb = (uint64_t)c->micro_batches;
    uint64_t est =
        (uint64_t)config_ranks(c) * (uint64_t)(m->layers / c->pp + 1) * mb * (24ull * (uint64_t)c->p_seq + 64);
    if (est > MAX_TASKS) {
        snprintf(err, LOONG_ERRLEN,
                 "this configuration would need up to %.3g tasks (~%.0f GB of task memory), more than loong builds "
                 "(%.3g): use --compose, --layers, --scope attn or a smaller mesh",
                 (double)est, (double)est * DAG_BYTES_PER_TASK / 1e9, (double)MAX_TASKS);
        return -1;
    }
    return 0;
}

/* The DAG holds replica 0 as ranks 0..P-1: no dimension of degree > 1 may
 * vary slower than dp. */
static int validate_mesh(const config *c, char err[LOONG_ERRLEN])
{
    if (c->dp < 1) return fail(err, "--dp must be at least 1 (1: one replica, no data parallelism)");
    mesh m = config_mesh(c);
    if (mesh_validate(&m, err) < 0) return -1;
    if ((long long)c->dp * config_ranks(c) > MAX_RANKS) {
        snprintf(err, LOONG_ERRLEN, "--dp %d x mesh %dx%d is more than %d ranks: use fewer replicas", c->dp, c->p_head,
                 c->p_seq, MAX_RANKS);
        return -1;
    }
    bool after_dp = false;
    for (int i = 0; i < MESH_NDIMS; i++) {
        mesh_dim d = m.order[i];
        if (after_dp && m.degree[d] > 1 && c->dp > 1) {
            char order[64];
            mesh_order_text(&m, order, sizeof order);
            snprintf(err, LOONG_ERRLEN,
                     "--placement %s: %s (degree %d) varies slower than dp, but a DAG holds one data-parallel replica "
                     "as ranks 0..P-1: put dp after it, e.g. %s",
                     order, mesh_dim_name(d), m.degree[d], placement_order[config_placement(c)]);
            return -1;
        }
        after_dp |= d == MESH_DP;
    }
    return 0;
}

/* Megatron's uneven split (--decoder-first/last-pipeline-num-layers,
 * TransformerConfig.__post_init__'s checks in megatron/core/transformer/
 * transformer_config.py): each named count at least 1, the other layers
 * even over the other stages, one or more each; under --vpp every stage's
 * count a multiple of v (each chunk holds 1/v of it). */
static int validate_uneven(const config *c, char err[LOONG_ERRLEN])
{
    if (c->pp < 2)
        return fail(err, "--pp-first-layers and --pp-last-layers split --pp 2 or more stages: add --pp, or drop them");
    int L = c->model.layers, v = c->vpp, rest = L - c->pp_first - c->pp_last;
    int k = c->pp - (c->pp_first > 0) - (c->pp_last > 0);
    if (rest < k || (k ? rest % k : rest)) {
        snprintf(err, LOONG_ERRLEN,
                 "--pp-first-layers %d --pp-last-layers %d: the other %d of the %d layers do not split evenly over "
                 "the other %d stages, one or more each: choose counts that leave a multiple of %d",
                 c->pp_first, c->pp_last, rest, L, k, k ? k : 1);
        return -1;
    }
    if (v == 1) return 0;
    if (!k) /* get_transformer_layer_offset divides by the middle stages */
        return fail(err, "--pp 2 with both --pp-first-layers and --pp-last-layers and --vpp: Megatron-Core places "
                         "no middle stage's chunks then (its layer offset divides by zero): set one of the two");
    int bad = c->pp_first % v ? c->pp_first : c->pp_last % v ? c->pp_last : rest / k % v ? rest / k : 0;
    if (bad) {
        snprintf(err, LOONG_ERRLEN,
                 "--vpp %d: a stage of %d layers (first %d, last %d, others %d each) does not split into %d "
                 "equal chunks: make each a multiple of %d (Megatron-Core's check)",
                 v, bad, c->pp_first, c->pp_last, rest / k, v, v);
        return -1;
    }
    return 0;
}

/* The embedding and the loss as layers of the split (Megatron's
 * --account-for-embedding/loss-in-pipeline-split; TransformerConfig's
 * checks): L plus the one or two slots split evenly over pp stages and
 * their v chunks; not with the uneven split's counts. */
static int validate_slots(const config *c, char err[LOONG_ERRLEN])
{
    if (c->pp_first || c->pp_last)
        return fail(err, "--pp-embedding-slot/--pp-loss-slot and --pp-first/last-layers are two ways to shorten "
                         "the end stages (Megatron-Core refuses both at once): give one");
    if (c->pp < 2)
        return fail(err, "--pp-embedding-slot and --pp-loss-slot place the embedding and loss in a split of --pp 2 "
                         "or more stages: add --pp, or drop them");
    int n = c->model.layers + c->pp_embed_slot + c->pp_loss_slot, chunks = c->pp * c->vpp;
    if (n % chunks) {
        snprintf(err, LOONG_ERRLEN,
                 "--pp %d --vpp %d: the %d layers and %d slot%s (%d) do not split into %d equal chunks: use a pp x "
                 "vpp that divides %d",
                 c->pp, c->vpp, c->model.layers, n - c->model.layers, n - c->model.layers > 1 ? "s" : "", n, chunks, n);
        return -1;
    }
    return 0;
}

/* The even split: pp v equal chunks. */
static int validate_even(const config *c, char err[LOONG_ERRLEN])
{
    int chunks = c->pp * c->vpp;
    if (c->model.layers % chunks == 0) return 0;
    char vpp[24] = "";
    if (c->vpp > 1) snprintf(vpp, sizeof vpp, " --vpp %d", c->vpp);
    snprintf(err, LOONG_ERRLEN,
             "--pp %d%s: the %d layers do not split into %d equal stage chunks: use a pp%s that divides %d", c->pp, vpp,
             c->model.layers, chunks, c->vpp > 1 ? " x vpp" : "", c->model.layers);
    return -1;
}

/* Pipeline parallelism and micro-batches (pipeline.h). ZeRO-2 and -3
 * shard the gradients and parameters that accumulate over micro-batches:
 * DeepSpeed's pipeline engine refuses them (deepspeed/runtime/pipe/
 * engine.py), Megatron pipelines with its distributed optimizer, ZeRO-1
 * (megatron/core/optimizer/distrib_optimizer.py), so loong does too. */
static int validate_pipeline(const config *c, char err[LOONG_ERRLEN])
{
    if (c->micro_batches < 1) return fail(err, "--micro-batches must be at least 1");
    if (c->pp > c->model.layers || c->vpp > c->model.layers) {
        snprintf(err, LOONG_ERRLEN, "--pp %d --vpp %d: more stage chunks than the model's %d layers", c->pp, c->vpp,
                 c->model.layers);
        return -1;
    }
    if (c->vpp < 1) return fail(err, "--vpp must be at least 1 (1: one model chunk per stage)");
    if ((long long)c->micro_batches * c->vpp > CONFIG_MAX_MICRO_BATCHES) {
        snprintf(err, LOONG_ERRLEN,
                 "--micro-batches %d x --vpp %d passes per stage are more than loong schedules (%d): use fewer",
                 c->micro_batches, c->vpp, CONFIG_MAX_MICRO_BATCHES);
        return -1;
    }
    if ((c->pp > 1 || c->micro_batches > 1) && c->scope != SCOPE_STEP)
        return fail(err, "--pp and --micro-batches shape a training step: use --scope step");
    if (c->schedule == SCHED_INTERLEAVED && (c->pp < 2 || c->vpp < 2))
        return fail(err, "--schedule interleaved needs --pp 2 or more and --vpp 2 or more model chunks per stage");
    if (c->vpp > 1 && c->schedule != SCHED_INTERLEAVED)
        return fail(err, "--vpp applies to --schedule interleaved: add it, or drop --vpp");
    if (c->pp_first < 0 || c->pp_last < 0)
        return fail(err, "--pp-first-layers and --pp-last-layers count layers: 1 or more");
    int split = c->pp_embed_slot || c->pp_loss_slot ? validate_slots(c, err)
                : c->pp_first || c->pp_last         ? validate_uneven(c, err)
                                                    : validate_even(c, err);
    if (split) return split;
    if (c->schedule == SCHED_INTERLEAVED && c->micro_batches % c->pp) {
        snprintf(err, LOONG_ERRLEN,
                 "--micro-batches %d: the interleaved schedule runs micro-batches in groups of --pp %d "
                 "(Megatron's): use a multiple of %d",
                 c->micro_batches, c->pp, c->pp);
        return -1;
    }
    if (c->zero >= 2 && (c->pp > 1 || c->micro_batches > 1)) {
        snprintf(err, LOONG_ERRLEN,
                 "--zero %d with %s: gradients accumulate over micro-batches, which ZeRO-2/3 shard (DeepSpeed's "
                 "pipeline engine refuses them; Megatron pipelines with ZeRO-1): use --zero 0 or 1",
                 c->zero, c->pp > 1 ? "--pp" : "--micro-batches");
        return -1;
    }
    return 0;
}

int config_check_prefetch(int prefetch, char err[LOONG_ERRLEN])
{
    if (prefetch >= 0 && prefetch <= CONFIG_MAX_PREFETCH) return 0;
    snprintf(err, LOONG_ERRLEN, "--prefetch %d must be 0 to %d blocks (1: FSDP's, one block ahead)", prefetch,
             CONFIG_MAX_PREFETCH);
    return -1;
}

/* The recompute knobs (recompute.h): modules apply to selective, the
 * method and N to full, N within 1 .. a chunk's layers (Megatron-Core's
 * TransformerConfig asks the same of recompute_num_layers). ZeRO-3's
 * gathers are per block (FSDP's), so groups of N > 1 blocks re-run at once
 * are not expressed. */
static int validate_recompute(const config *c, char err[LOONG_ERRLEN])
{
    int mods = c->recompute_modules;
    if (mods < 1 || mods > (RECOMPUTE_MOD_CORE_ATTN | RECOMPUTE_MOD_MLP))
        return fail(err, "--recompute-modules must list core_attn and/or mlp");
    if (c->recompute != RECOMPUTE_SELECTIVE && mods != RECOMPUTE_MOD_CORE_ATTN)
        return fail(err, "--recompute-modules applies to --recompute selective: add it or drop the modules");
    bool method = c->recompute_method != RECOMPUTE_UNIFORM || c->recompute_layers != 1;
    if (c->recompute != RECOMPUTE_FULL && method)
        return fail(err,
                    "--recompute-method and --recompute-num-layers apply to --recompute full: add it or drop them");
    int most = 0;
    for (int s = 0; s < c->pp; s++)
        if (pipe_chunk_layers(c, s) > most) most = pipe_chunk_layers(c, s);
    if (c->recompute_layers < 1 || c->recompute_layers > most) {
        snprintf(err, LOONG_ERRLEN,
                 "--recompute-num-layers %d is outside 1 .. %d, the layers of a model chunk of a pipeline stage: "
                 "choose N in that range",
                 c->recompute_layers, most);
        return -1;
    }
    if (c->zero == 3 && c->recompute_method == RECOMPUTE_UNIFORM && c->recompute_layers > 1)
        return fail(err, "--recompute-num-layers above 1 with the uniform method re-runs several blocks at once, "
                         "which ZeRO-3's per-block gathers do not model: use --zero 0-2 or --recompute-num-layers 1");
    return 0;
}

int config_validate(const config *c, char err[LOONG_ERRLEN])
{
    if (model_validate(&c->model, err) < 0) return -1;
    if (c->seq < 1) return fail(err, "--seq must be positive");
    if (c->batch < 1) return fail(err, "--batch must be positive");
    if (c->p_head < 1 || c->p_seq < 1) return fail(err, "--mesh needs positive P_h and P_s, e.g. 4x16");
    if (c->tp < 1) return fail(err, "--tp must be at least 1 (1: no tensor parallelism)");
    if (c->pp < 1) return fail(err, "--pp must be at least 1 (1: no pipeline parallelism)");
    if ((!c->sequence_parallel || c->tp_overlap) && c->tp == 1)
        return fail(err,
                    "--sequence-parallel off and --tp-overlap apply to --tp 2 or more: give --tp or leave them out");
    if (c->tp_overlap && !c->sequence_parallel)
        return fail(err, "--tp-overlap overlaps sequence parallelism's all-gathers and reduce-scatters with the GEMMs "
                         "(TransformerEngine's): use --sequence-parallel on");
    if ((long long)c->p_head * c->p_seq > MAX_RANKS) {
        snprintf(err, LOONG_ERRLEN, "mesh %dx%d has more than %d ranks: use a smaller mesh", c->p_head, c->p_seq,
                 MAX_RANKS);
        return -1;
    }
    if (validate_mesh(c, err) < 0) return -1;
    if (c->gpus_per_node < 1) return fail(err, "--gpus-per-node must be positive");
    if (c->tp < c->gpus_per_node ? c->gpus_per_node % c->tp : c->tp % c->gpus_per_node) {
        snprintf(err, LOONG_ERRLEN,
                 "--tp %d does not divide the %d GPUs of a node (nor is a multiple of them): a TP group would "
                 "straddle nodes unevenly; choose a divisor of %d",
                 c->tp, c->gpus_per_node, c->gpus_per_node);
        return -1;
    }
    if (c->zero < 0 || c->zero > 3) return fail(err, "--zero must be 0, 1, 2 or 3");
    if (c->prefetch != 1 && c->zero != 3)
        return fail(err,
                    "--prefetch applies to --zero 3 (parameters gathered block by block): drop it or add --zero 3");
    if (config_check_prefetch(c->prefetch, err) < 0) return -1;
    if (c->act_bytes != 2 && c->act_bytes != 4) return fail(err, "--dtype must be bf16 or fp32");
    if (validate_heads(c, err) < 0 || validate_ring(c, err) < 0 || validate_seq(c, err) < 0) return -1;
    if (validate_pipeline(c, err) < 0 || validate_recompute(c, err) < 0) return -1;
    if (c->attention == ATTN_UNFUSED && c->p_seq > 1) {
        snprintf(err, LOONG_ERRLEN,
                 "--attention unfused materialises each head's s x s scores over the whole sequence, which context "
                 "parallelism (seq %d) splits: use --mesh Nx1 (heads only) or --attention flash",
                 c->p_seq);
        return -1;
    }
    if (c->precision != PRECISION_BF16 && c->fusions == FUSIONS_NONE)
        return fail(err, "--precision fp8 recipes run in Transformer Engine's modules, which --fusions none (Megatron-"
                         "Core's local layers) does not use: drop --fusions none, or use --precision bf16");
    if (c->precision != PRECISION_BF16 && c->act_bytes != 2)
        return fail(err, "--precision fp8 recipes keep bf16 activations beside the FP8 GEMMs (Transformer Engine's): "
                         "use --dtype bf16, or --precision bf16");
    if (c->attention == ATTN_UNFUSED && c->recompute == RECOMPUTE_SCPP)
        return fail(err, "--recompute sc++ keeps FlashAttention's output and LSE, from which its backward rebuilds the "
                         "scores; --attention unfused needs its probabilities: use --recompute selective, full or "
                         "none, or --attention flash");
    if (!(c->attention_dropout >= 0 && c->attention_dropout < 1) || !(c->hidden_dropout >= 0 && c->hidden_dropout < 1))
        return fail(err, "--attention-dropout and --hidden-dropout are probabilities in [0, 1): e.g. 0.1");
    return validate_overflow(c, err);
}

/* ---- geometry ---- */

void config_set_placement(config *c, placement_kind p)
{
    mesh m = config_mesh(c);
    char err[LOONG_ERRLEN];
    mesh_set_order(&m, placement_order[p], err); /* a constant that parses */
    memcpy(c->order, m.order, sizeof c->order);
}

placement_kind config_placement(const config *c)
{
    for (int i = 0; i < MESH_NDIMS; i++) {
        if (c->order[i] == MESH_HEAD) return PLACE_HEAD_FIRST;
        if (c->order[i] == MESH_SEQ) return PLACE_CONTEXT_FIRST;
    }
    return PLACE_HEAD_FIRST;
}

void config_placement_text(const config *c, char *buf, size_t len)
{
    mesh m = config_mesh(c);
    mesh_order_text(&m, buf, len);
    for (int p = 0; p < NSP(placement_sp); p++)
        if (!strcmp(buf, placement_order[p])) snprintf(buf, len, "%s", placement_sp[p].name);
}

mesh config_mesh(const config *c)
{
    mesh m;
    memset(&m, 0, sizeof m);
    for (int d = 0; d < MESH_NDIMS; d++)
        m.degree[d] = 1;
    m.degree[MESH_TP] = c->tp;
    m.degree[MESH_HEAD] = c->p_head;
    m.degree[MESH_SEQ] = c->p_seq;
    m.degree[MESH_PP] = c->pp;
    m.degree[MESH_DP] = c->dp;
    memcpy(m.order, c->order, sizeof m.order);
    return m;
}

int config_rank_of(const config *c, int h, int s)
{
    mesh m = config_mesh(c);
    int co[MESH_NDIMS] = {0};
    co[MESH_HEAD] = h;
    co[MESH_SEQ] = s;
    return mesh_rank(&m, co);
}

int config_rank_at(const config *c, int rank, int h, int s)
{
    mesh m = config_mesh(c);
    int co[MESH_NDIMS];
    mesh_coords(&m, rank, co);
    co[MESH_HEAD] = h;
    co[MESH_SEQ] = s;
    return mesh_rank(&m, co);
}

void config_coords(const config *c, int rank, int *h, int *s)
{
    mesh m = config_mesh(c);
    int co[MESH_NDIMS];
    mesh_coords(&m, rank, co);
    *h = co[MESH_HEAD];
    *s = co[MESH_SEQ];
}

int config_tp_rank(const config *c, int rank)
{
    mesh m = config_mesh(c);
    int co[MESH_NDIMS];
    mesh_coords(&m, rank, co);
    return co[MESH_TP];
}

int config_tp_nodes(const config *c)
{
    mesh m = config_mesh(c);
    int n = mesh_group_size(&m, CONFIG_TP_DIMS), *mem = xmalloc_array((size_t)n, sizeof *mem, "the TP group");
    mesh_group_members(&m, CONFIG_TP_DIMS, 0, mem);
    int nodes = 0, last = -1;
    for (int i = 0; i < n; i++) { /* members ascend, so a node's are adjacent */
        nodes += config_node(c, mem[i]) != last;
        last = config_node(c, mem[i]);
    }
    free(mem);
    return nodes;
}

int config_tp_heads(const config *c) { return c->model.heads / c->tp; }
int config_tp_kv_heads(const config *c) { return model_tp_kv_heads(&c->model, c->tp); }
int config_tp_kv_repl(const config *c) { return c->tp > c->model.kv_heads ? c->tp / c->model.kv_heads : 1; }
int config_tp_kv_head0(const config *c, int t) { return (int)((int64_t)t * c->model.kv_heads / c->tp); }

int config_q_heads(const config *c) { return config_tp_heads(c) / c->p_head; }

int config_kv_heads_total(const config *c)
{
    int kv = config_tp_kv_heads(c);
    return kv > c->p_head ? kv : c->p_head;
}

int config_kv_heads(const config *c) { return config_kv_heads_total(c) / c->p_head; }

int config_kv_repl(const config *c)
{
    int kv = config_tp_kv_heads(c);
    return c->p_head > kv ? c->p_head / kv : 1;
}

int config_parts(const config *c)
{
    return c->partition == PART_CONTIGUOUS || c->partition == PART_DOC_CONTIGUOUS ? 1 : 2;
}

int config_nchunks(const config *c) { return c->p_seq * config_parts(c); }

uint64_t config_chunk_tokens(const config *c) { return c->seq / (uint64_t)config_nchunks(c); }

uint64_t config_local_tokens(const config *c) { return (uint64_t)c->batch * c->seq / (uint64_t)config_cp(c); }

/* ---- the knobs ---- */

typedef enum {
    KT_MODEL,
    KT_COUNT,
    KT_INT,
    KT_NONNEG, /* an int that may be 0 */
    KT_STAGE,
    KT_MESH,
    KT_ORDER,
    KT_STRING,
    KT_ENUM,
    KT_BOOL,
    KT_DTYPE,
    KT_DOCS,
    KT_MODULES, /* --recompute-modules' list */
    KT_PROB     /* a probability in [0, 1) (a double) */
} knob_type;

typedef struct knob_row {
    config_knob_info info;
    knob_type type;
    size_t off;            /* the field in config (not for MODEL, MESH, DTYPE) */
    const spelling *names; /* ENUM and BOOL */
    int nnames;
} knob_row;

#define KNOB_ENUM(field, sp) KT_ENUM, offsetof(config, field), sp, NSP(sp)

static const knob_row knobs[KNOB_COUNT] = {
    [KNOB_MODEL] = {{"model", "model", "NAME|FILE", "a preset (Models below) or a `key = value` file [llama3-8b]",
                     false},
                    KT_MODEL,
                    0,
                    NULL,
                    0},
    [KNOB_SEQ] = {{"seq", "seq", "N", "tokens per sample, K/M/G = 2^10/2^20/2^30  [128K]", false},
                  KT_COUNT,
                  offsetof(config, seq),
                  NULL,
                  0},
    [KNOB_BATCH] = {{"batch", "batch", "N", "samples per micro-batch                     [1]", false},
                    KT_INT,
                    offsetof(config, batch),
                    NULL,
                    0},
    [KNOB_TP] = {{"tp", "tp", "N",
                  "tensor-parallel ranks (Megatron's TP, innermost:\n"
                  "one node's GPUs); tp divides H and H_kv        [1]",
                  false},
                 KT_INT,
                 offsetof(config, tp),
                 NULL,
                 0},
    [KNOB_SEQUENCE_PARALLEL] = {{"sequence_parallel", "sequence-parallel", "on|off",
                                 "tp > 1: Megatron's sequence parallelism (all-\n"
                                 "gather/reduce-scatter; off: all-reduces)     [on]",
                                 false},
                                KT_BOOL,
                                offsetof(config, sequence_parallel),
                                onoff_sp,
                                NSP(onoff_sp)},
    [KNOB_TP_OVERLAP] = {{"tp_overlap", "tp-overlap", "on|off",
                          "tp > 1: TP all-gathers and reduce-scatters overlap\n"
                          "their GEMMs (TE's ring-exchange)           [off]",
                          false},
                         KT_BOOL,
                         offsetof(config, tp_overlap),
                         onoff_sp,
                         NSP(onoff_sp)},
    [KNOB_MESH] = {{"mesh", "mesh", "PhxPs | P",
                    "head-parallel x sequence-parallel ranks, or a total\n"
                    "that the strategy splits                    [64]",
                    true},
                   KT_MESH,
                   0,
                   NULL,
                   0},
    [KNOB_DP] = {{"dp", "dp", "N",
                  "data-parallel replicas of the mesh: the gradient\n"
                  "collectives (ZeRO) span dp x P ranks         [1]",
                  false},
                 KT_INT,
                 offsetof(config, dp),
                 NULL,
                 0},
    [KNOB_PP] = {{"pp", "pp", "N",
                  "pipeline stages (outside CP, inside DP): the\n"
                  "layers split evenly over them                [1]",
                  false},
                 KT_INT,
                 offsetof(config, pp),
                 NULL,
                 0},
    [KNOB_MICRO_BATCHES] = {{"micro_batches", "micro-batches", "M",
                             "micro-batches of --batch samples per step and\n"
                             "pipeline (pp 1: gradient accumulation)       [1]",
                             false},
                            KT_INT,
                            offsetof(config, micro_batches),
                            NULL,
                            0},
    [KNOB_SCHEDULE] = {{"schedule", "schedule", "S",
                        "pipeline schedule: 1f1b | gpipe | interleaved\n"
                        "(Megatron's, --vpp chunks per stage)       [1f1b]",
                        false},
                       KNOB_ENUM(schedule, schedule_sp)},
    [KNOB_VPP] = {{"vpp", "vpp", "V",
                   "interleaved: model chunks per stage (Megatron's\n"
                   "virtual pipeline size)                        [1]",
                   false},
                  KT_INT,
                  offsetof(config, vpp),
                  NULL,
                  0},
    [KNOB_PP_FIRST_LAYERS] = {{"pp_first_layers", "pp-first-layers", "N",
                               "layers of the first stage, the rest even over\n"
                               "the others; with --vpp, 1/v of a stage's\n"
                               "layers in each chunk (Megatron's)   [even split]",
                               false},
                              KT_NONNEG,
                              offsetof(config, pp_first),
                              NULL,
                              0},
    [KNOB_PP_LAST_LAYERS] = {{"pp_last_layers", "pp-last-layers", "N",
                              "layers of the last stage (with the LM head) [even]", false},
                             KT_NONNEG,
                             offsetof(config, pp_last),
                             NULL,
                             0},
    [KNOB_PP_EMBED_SLOT] = {{"pp_embedding_slot", "pp-embedding-slot", "on|off",
                             "the embedding counts as a layer of the split:\n"
                             "stage 0's first chunk one layer short      [off]",
                             false},
                            KT_BOOL,
                            offsetof(config, pp_embed_slot),
                            onoff_sp,
                            NSP(onoff_sp)},
    [KNOB_PP_LOSS_SLOT] = {{"pp_loss_slot", "pp-loss-slot", "on|off",
                            "the LM head and loss count as a layer: the last\n"
                            "stage's last chunk one layer short         [off]",
                            false},
                           KT_BOOL,
                           offsetof(config, pp_loss_slot),
                           onoff_sp,
                           NSP(onoff_sp)},
    [KNOB_STRATEGY] = {{"strategy", "strategy", "NAME", "preset over the knobs below (Strategies) [loongtrain]", true},
                       KT_STRING,
                       offsetof(config, strategy),
                       NULL,
                       0},
    [KNOB_PLACEMENT] = {{"placement", "placement", "P",
                         "head-first | context-first, or the mesh's order\n"
                         "fastest first, e.g. tp-seq-head-pp-dp   [head-first]",
                         true},
                        KT_ORDER,
                        0,
                        placement_sp,
                        NSP(placement_sp)},
    [KNOB_PARTITION] = {{"partition", "partition", "P",
                         "contiguous | zigzag | doc-contiguous | doc-zigzag |\n"
                         "balanced (packed documents)     [from strategy]",
                         true},
                        KNOB_ENUM(partition, partition_sp)},
    [KNOB_RING] = {{"ring", "ring", "MODE", "single | dual | double | allgather  [from strategy]", true},
                   KNOB_ENUM(ring, ring_sp)},
    [KNOB_WINDOW] = {{"window", "window", "W", "double-ring window, P_s % W == 0 [strategy's rule]", true},
                     KT_INT,
                     offsetof(config, window),
                     NULL,
                     0},
    [KNOB_KV_STRIDE] = {{"kv_stride", "kv-stride", "N",
                         "allgather: KV heads per all-gather, a divisor\n"
                         "of the rank's KV heads (bounds memory)        [all]",
                         false},
                        KT_INT,
                        offsetof(config, kv_stride),
                        NULL,
                        0},
    [KNOB_KV_REPLICATION] = {{"kv_replication", "kv-replication", "on|off",
                              "replicate KV heads when tp or P_h > H_kv [on]", true},
                             KT_BOOL,
                             offsetof(config, kv_replication),
                             onoff_sp,
                             NSP(onoff_sp)},
    [KNOB_SCOPE] = {{"scope", "scope", "S", "attn-fwd | attn | step                      [step]", true},
                    KNOB_ENUM(scope, scope_sp)},
    [KNOB_GPUS_PER_NODE] = {{"gpus_per_node", "gpus-per-node", "N",
                             "for the node/GPU of each rank                  [8]", false},
                            KT_INT,
                            offsetof(config, gpus_per_node),
                            NULL,
                            0},
    [KNOB_RECOMPUTE] = {{"recompute", "recompute", "R",
                         "none | selective (Megatron's) | sc++ (LoongTrain's\n"
                         "Selective Checkpoint++) | full                 [none]",
                         false},
                        KNOB_ENUM(recompute, recompute_sp)},
    [KNOB_RECOMPUTE_MODULES] = {{"recompute_modules", "recompute-modules", "LIST",
                                 "selective: the modules re-run, core_attn (with its\n"
                                 "CP communication) and/or mlp          [core_attn]",
                                 false},
                                KT_MODULES,
                                offsetof(config, recompute_modules),
                                NULL,
                                0},
    [KNOB_RECOMPUTE_METHOD] = {{"recompute_method", "recompute-method", "M",
                                "full: uniform (groups of N blocks) | block (the\n"
                                "first N blocks of each chunk)             [uniform]",
                                false},
                               KNOB_ENUM(recompute_method, recompute_method_sp)},
    [KNOB_RECOMPUTE_NUM_LAYERS] = {{"recompute_num_layers", "recompute-num-layers", "N",
                                    "full: N of --recompute-method             [1]", false},
                                   KT_INT,
                                   offsetof(config, recompute_layers),
                                   NULL,
                                   0},
    [KNOB_ZERO] = {{"zero", "zero", "N", "ZeRO stage 0-3 of the gradient reduction       [1]", false},
                   KT_STAGE,
                   offsetof(config, zero),
                   NULL,
                   0},
    [KNOB_PREFETCH] = {{"prefetch", "prefetch", "N",
                        "ZeRO-3: blocks whose parameters are gathered\n"
                        "ahead of the one computing (FSDP's)          [1]",
                        false},
                       KT_NONNEG,
                       offsetof(config, prefetch),
                       NULL,
                       0},
    [KNOB_DTYPE] = {{"dtype", "dtype", "T", "bf16 | fp32 activations                     [bf16]", false},
                    KT_DTYPE,
                    0,
                    dtype_sp,
                    NSP(dtype_sp)},
    [KNOB_FUSIONS] = {{"fusions", "fusions", "te|none",
                       "elementwise kernel fusion: Megatron-Core with TE's\n"
                       "fused kernels, or none (unfused PyTorch)      [te]",
                       false},
                      KNOB_ENUM(fusions, fusions_sp)},
    [KNOB_ATTENTION] = {{"attention", "attention", "flash|unfused",
                         "attention kernel: FlashAttention, or unfused\n"
                         "(materialised s x s softmax; needs seq 1)   [flash]",
                         false},
                        KNOB_ENUM(attention, attention_sp)},
    [KNOB_ATTENTION_DROPOUT] = {{"attention_dropout", "attention-dropout", "P",
                                 "unfused: dropout on the attention scores [0]", false},
                                KT_PROB,
                                offsetof(config, attention_dropout),
                                NULL,
                                0},
    [KNOB_HIDDEN_DROPOUT] = {{"hidden_dropout", "hidden-dropout", "P", "dropout in each residual add (Megatron's) [0]",
                              false},
                             KT_PROB,
                             offsetof(config, hidden_dropout),
                             NULL,
                             0},
    [KNOB_PRECISION] = {{"precision", "precision", "P",
                         "block GEMMs: bf16 | fp8-delayed | fp8-current |\n"
                         "mxfp8 (Transformer Engine's recipes)         [bf16]",
                         false},
                        KNOB_ENUM(precision, precision_sp)},
    [KNOB_DOCS] = {{"docs", "docs", "L,L,...",
                    "document lengths packed into each sample (K/M/G), padded\n"
                    "to --seq; or --docs-file FILE, --doc-dist FILE --seed N  [one]",
                    false},
                   KT_DOCS,
                   0,
                   NULL,
                   0},
    [KNOB_NCCL_ALGO] = {{"nccl_algo", "nccl-algo", "A",
                         "ring | tree | nvls: force NCCL's algorithm where it\n"
                         "runs, as NCCL_ALGO does                        [auto]",
                         false},
                        KNOB_ENUM(nccl_algo, nccl_algo_sp)},
    [KNOB_NCCL_PROTO] = {{"nccl_proto", "nccl-proto", "P",
                          "simple | ll | ll128: force NCCL's protocol, as\n"
                          "NCCL_PROTO does                                [auto]",
                          false},
                         KNOB_ENUM(nccl_proto, nccl_proto_sp)},
};

const config_knob_info *config_knob_get(config_knob k) { return &knobs[k].info; }

static int *int_field(config *c, const knob_row *r) { return (int *)((char *)c + r->off); }
static int int_value(const config *c, const knob_row *r) { return *(const int *)((const char *)c + r->off); }
static int dtype_index(const config *c) { return c->act_bytes == 4; }
static double *prob_field(config *c, const knob_row *r) { return (double *)((char *)c + r->off); }
static double prob_value(const config *c, const knob_row *r) { return *(const double *)((const char *)c + r->off); }

static void knob_format(const config *c, const knob_row *r, char *buf, size_t len)
{
    switch (r->type) {
    case KT_MODEL: snprintf(buf, len, "%s", c->model.name); break;
    case KT_COUNT: snprintf(buf, len, "%llu", (unsigned long long)c->seq); break;
    case KT_INT:
    case KT_NONNEG:
    case KT_STAGE: snprintf(buf, len, "%d", int_value(c, r)); break;
    case KT_MESH: snprintf(buf, len, "%dx%d", c->p_head, c->p_seq); break;
    case KT_ORDER: config_placement_text(c, buf, len); break;
    case KT_STRING: snprintf(buf, len, "%s", (const char *)c + r->off); break;
    case KT_ENUM: snprintf(buf, len, "%s", r->names[int_value(c, r)].name); break;
    case KT_BOOL: snprintf(buf, len, "%s", r->names[*(const bool *)((const char *)c + r->off)].name); break;
    case KT_DTYPE: snprintf(buf, len, "%s", r->names[dtype_index(c)].name); break;
    case KT_DOCS: break;
    case KT_MODULES: recompute_modules_text(int_value(c, r), buf, len); break;
    case KT_PROB: snprintf(buf, len, "%.17g", prob_value(c, r)); break;
    }
}

/* Knobs that say nothing at their default (one document; every KV head in
 * one gather) are left out of the JSON and the command lines, so configs
 * that do not use them read and hash as before they existed. */
static bool knob_unset(const config *c, config_knob k)
{
    return (k == KNOB_DOCS && !c->docs) || (k == KNOB_KV_STRIDE && c->kv_stride == 0) ||
           (k == KNOB_NCCL_ALGO && c->nccl_algo == COLL_ALGO_AUTO) ||
           (k == KNOB_NCCL_PROTO && c->nccl_proto == COLL_PROTO_AUTO) || (k == KNOB_DP && c->dp == 1) ||
           (k == KNOB_TP && c->tp == 1) || (k == KNOB_SEQUENCE_PARALLEL && c->tp == 1) ||
           (k == KNOB_TP_OVERLAP && !c->tp_overlap) || (k == KNOB_PREFETCH && c->prefetch == 1) ||
           (k == KNOB_PP && c->pp == 1) || (k == KNOB_MICRO_BATCHES && c->micro_batches == 1) ||
           (k == KNOB_SCHEDULE && c->pp == 1 && c->schedule == SCHED_1F1B) || (k == KNOB_VPP && c->vpp == 1) ||
           (k == KNOB_PP_FIRST_LAYERS && c->pp_first == 0) || (k == KNOB_PP_LAST_LAYERS && c->pp_last == 0) ||
           (k == KNOB_PP_EMBED_SLOT && !c->pp_embed_slot) || (k == KNOB_PP_LOSS_SLOT && !c->pp_loss_slot) ||
           (k == KNOB_RECOMPUTE_MODULES && c->recompute_modules == RECOMPUTE_MOD_CORE_ATTN) ||
           (k == KNOB_RECOMPUTE_METHOD && c->recompute_method == RECOMPUTE_UNIFORM) ||
           (k == KNOB_RECOMPUTE_NUM_LAYERS && c->recompute_layers == 1) ||
           (k == KNOB_FUSIONS && c->fusions == FUSIONS_TE) || (k == KNOB_ATTENTION && c->attention == ATTN_FLASH) ||
           (k == KNOB_ATTENTION_DROPOUT && c->attention_dropout == 0) ||
           (k == KNOB_HIDDEN_DROPOUT && c->hidden_dropout == 0) || (k == KNOB_PRECISION && c->precision == PRECISION_BF16);
}

/* The knobs knob_unset() may leave out, whose default is all-zero but dp's,
 * tp's, pp's, micro_batches', vpp's, prefetch's and recompute_num_layers'
 * (1), sequence_parallel's (on) and recompute_modules' (core_attn), set by
 * config_from_json. */
static bool optional_knob(int k)
{
    return k == KNOB_DOCS || k == KNOB_KV_STRIDE || k == KNOB_NCCL_ALGO || k == KNOB_NCCL_PROTO || k == KNOB_DP ||
           k == KNOB_TP || k == KNOB_SEQUENCE_PARALLEL || k == KNOB_TP_OVERLAP || k == KNOB_PREFETCH || k == KNOB_PP ||
           k == KNOB_MICRO_BATCHES || k == KNOB_SCHEDULE || k == KNOB_VPP || k == KNOB_PP_FIRST_LAYERS ||
           k == KNOB_PP_LAST_LAYERS || k == KNOB_PP_EMBED_SLOT || k == KNOB_PP_LOSS_SLOT ||
           k == KNOB_RECOMPUTE_MODULES || k == KNOB_RECOMPUTE_METHOD || k == KNOB_RECOMPUTE_NUM_LAYERS ||
           k == KNOB_FUSIONS || k == KNOB_ATTENTION || k == KNOB_ATTENTION_DROPOUT || k == KNOB_HIDDEN_DROPOUT ||
           k == KNOB_PRECISION;
}

char *config_knob_text(const config *c, config_knob k)
{
    if (knob_unset(c, k)) return NULL;
    if (knobs[k].type == KT_DOCS) return docs_format(c->docs);
    char buf[256];
    knob_format(c, &knobs[k], buf, sizeof buf);
    return xstrdup(buf, "a knob's value");
}

/* "--opt 'x' is not one of: a, b, c" */
static int not_one_of(const knob_row *r, const char *text, char err[LOONG_ERRLEN])
{
    char list[128] = "";
    for (int i = 0; i < r->nnames; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", r->names[i].name);
    snprintf(err, LOONG_ERRLEN, "--%s '%.60s' is not one of: %s", r->info.option, text, list);
    return -1;
}

static int parse_mesh(config *c, const char *text, char err[LOONG_ERRLEN])
{
    const char *x = strchr(text, 'x');
    char a[32];
    size_t n = x ? (size_t)(x - text) : 0;
    if (!x || n == 0 || n >= sizeof a) {
        snprintf(err, LOONG_ERRLEN, "--mesh '%.60s' is not PhxPs (e.g. 4x16)", text);
        return -1;
    }
    memcpy(a, text, n);
    a[n] = '\0';
    if (units_parse_int(a, "--mesh P_h", &c->p_head, err) < 0 ||
        units_parse_int(x + 1, "--mesh P_s", &c->p_seq, err) < 0)
        return -1;
    if ((long long)c->p_head * c->p_seq > MAX_RANKS) {
        snprintf(err, LOONG_ERRLEN, "--mesh %.60s has more than %d ranks: use a smaller mesh", text, MAX_RANKS);
        return -1;
    }
    return 0;
}

/* A placement name, or an order of the mesh's dimensions. */
static int parse_order(config *c, const knob_row *r, const char *text, char err[LOONG_ERRLEN])
{
    int i = spelling_find(r->names, r->nnames, text);
    if (i >= 0) {
        config_set_placement(c, (placement_kind)i);
        return 0;
    }
    if (!strchr(text, '-') && !strchr(text, ',')) {
        snprintf(err, LOONG_ERRLEN,
                 "--placement '%.60s' is neither head-first, context-first nor an order of tp, head, seq, pp, dp "
                 "(fastest first, e.g. tp-seq-head-pp-dp)",
                 text);
        return -1;
    }
    mesh m = config_mesh(c);
    char why[LOONG_ERRLEN];
    if (mesh_set_order(&m, text, why) < 0) {
        snprintf(err, LOONG_ERRLEN, "--placement: %.*s", LOONG_ERRLEN - 16, why);
        return -1;
    }
    memcpy(c->order, m.order, sizeof c->order);
    return 0;
}

/* A dropout probability: a number in [0, 1) (Megatron's range: p = 1
 * would drop everything). */
static int parse_prob(const char *text, const char *what, double *out, char err[LOONG_ERRLEN])
{
    char *end;
    double p = strtod(text, &end);
    if (end == text || *end || !(p >= 0 && p < 1)) {
        snprintf(err, LOONG_ERRLEN, "%s '%.40s' is not a probability in [0, 1) (e.g. 0.1)", what, text);
        return -1;
    }
    *out = p;
    return 0;
}

int config_knob_parse(config *c, config_knob k, const char *text, char err[LOONG_ERRLEN])
{
    const knob_row *r = &knobs[k];
    char what[40];
    snprintf(what, sizeof what, "--%s", r->info.option);
    int i;
    switch (r->type) {
    case KT_MODEL: return model_resolve(text, &c->model, err);
    case KT_COUNT: return units_parse_count(text, what, &c->seq, err);
    case KT_INT: return units_parse_int(text, what, int_field(c, r), err);
    case KT_NONNEG:
        if (!strcmp(text, "0")) return *int_field(c, r) = 0;
        return units_parse_int(text, what, int_field(c, r), err);
    case KT_STAGE:
        if (strlen(text) != 1 || text[0] < '0' || text[0] > '3') {
            snprintf(err, LOONG_ERRLEN, "--zero '%.60s' is not a ZeRO stage 0, 1, 2 or 3", text);
            return -1;
        }
        *int_field(c, r) = text[0] - '0';
        return 0;
    case KT_MESH: return parse_mesh(c, text, err);
    case KT_ORDER: return parse_order(c, r, text, err);
    case KT_DOCS: return (c->docs = docs_parse_list(text, c->seq, "--docs", err)) ? 0 : -1;
    case KT_MODULES: return recompute_modules_parse(text, int_field(c, r), err);
    case KT_PROB: return parse_prob(text, what, prob_field(c, r), err);
    case KT_STRING: snprintf((char *)c + r->off, sizeof c->strategy, "%s", text); return 0;
    case KT_ENUM:
    case KT_BOOL:
    case KT_DTYPE:
        i = spelling_find(r->names, r->nnames, text);
        if (i < 0) return not_one_of(r, text, err);
        if (r->type == KT_ENUM) *int_field(c, r) = i;
        if (r->type == KT_BOOL) *(bool *)((char *)c + r->off) = i == 1;
        if (r->type == KT_DTYPE) c->act_bytes = i ? 4 : 2;
        return 0;
    }
    return 0;
}

/* ---- serialisation: the knobs as JSON ---- */

/* The model's sizes; its optional keys only when set, so that the JSON
 * (and config_hash) of a model without them is what it always was. */
static json_t *model_to_json(const model *m)
{
    json_t *j = json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "name", m->name, "layers", m->layers, "hidden",
                          m->hidden, "heads", m->heads, "kv_heads", m->kv_heads, "head_dim", m->head_dim, "ffn", m->ffn,
                          "vocab", m->vocab);
    if (j && m->tied) json_object_set_new(j, "tie_word_embeddings", json_true());
    if (j && m->bias) json_object_set_new(j, "attention_bias", json_string(model_bias_name(m->bias)));
    if (j && m->window) json_object_set_new(j, "sliding_window", json_integer(m->window));
    return j;
}

static json_t *knob_to_json(const config *c, const knob_row *r)
{
    switch (r->type) {
    case KT_MODEL: return model_to_json(&c->model);
    case KT_COUNT: return json_integer((json_int_t)c->seq);
    case KT_INT:
    case KT_NONNEG:
    case KT_STAGE: return json_integer(int_value(c, r));
    case KT_MESH: return json_pack("[i,i]", c->p_head, c->p_seq);
    case KT_ORDER: {
        char buf[64];
        config_placement_text(c, buf, sizeof buf);
        return json_string(buf);
    }
    case KT_STRING: return json_string((const char *)c + r->off);
    case KT_ENUM: return json_string(r->names[int_value(c, r)].name);
    case KT_BOOL: return json_boolean(*(const bool *)((const char *)c + r->off));
    case KT_DTYPE: return json_string(r->names[dtype_index(c)].name);
    case KT_DOCS: return docs_to_json(c->docs);
    case KT_PROB: return json_real(prob_value(c, r));
    case KT_MODULES: {
        char buf[64];
        recompute_modules_text(int_value(c, r), buf, sizeof buf);
        return json_string(buf);
    }
    }
    return NULL;
}

json_t *config_to_json(const config *c)
{
    json_t *j = json_object();
    for (int k = 0; j && k < KNOB_COUNT; k++)
        if (!knob_unset(c, (config_knob)k) &&
            json_object_set_new(j, knobs[k].info.key, knob_to_json(c, &knobs[k])) < 0) {
            json_decref(j);
            return NULL;
        }
    return j;
}

static int model_from_json(const json_t *v, model *m, char err[LOONG_ERRLEN])
{
    const char *name, *bias = "none";
    int tied = 0;
    json_error_t je;
    memset(m, 0, sizeof *m);
    if (json_unpack_ex((json_t *)v, &je, 0, "{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s?b,s?s,s?i}", "name", &name, "layers",
                       &m->layers, "hidden", &m->hidden, "heads", &m->heads, "kv_heads", &m->kv_heads, "head_dim",
                       &m->head_dim, "ffn", &m->ffn, "vocab", &m->vocab, "tie_word_embeddings", &tied, "attention_bias",
                       &bias, "sliding_window", &m->window) < 0) {
        snprintf(err, LOONG_ERRLEN, "configuration object: model: %s", je.text);
        return -1;
    }
    m->tied = tied;
    if (model_bias_parse(bias, &m->bias) < 0) {
        snprintf(err, LOONG_ERRLEN, "configuration object: model: attention_bias '%.40s' is not none, qkv or all",
                 bias);
        return -1;
    }
    snprintf(m->name, sizeof m->name, "%s", name);
    return 0;
}

static int knob_from_json(const json_t *v, config *c, const knob_row *r, char err[LOONG_ERRLEN])
{
    if (r->type == KT_MODEL) return model_from_json(v, &c->model, err);
    if (r->type == KT_DOCS) return (c->docs = docs_from_json(v, c->seq, err)) ? 0 : -1;
    if (r->type == KT_MESH) {
        if (json_unpack((json_t *)v, "[ii!]", &c->p_head, &c->p_seq) == 0) return 0;
    } else if (r->type == KT_COUNT || r->type == KT_INT || r->type == KT_NONNEG || r->type == KT_STAGE) {
        json_int_t n = json_is_integer(v) ? json_integer_value(v) : -1;
        if (r->type == KT_COUNT && n > 0) {
            c->seq = (uint64_t)n;
            return 0;
        }
        if (r->type != KT_COUNT && n >= 0 && n <= INT32_MAX) {
            *int_field(c, r) = (int)n;
            return 0;
        }
    } else if (r->type == KT_PROB) {
        double p = json_is_number(v) ? json_number_value(v) : -1;
        if (p >= 0 && p < 1) {
            *prob_field(c, r) = p;
            return 0;
        }
    } else if (r->type == KT_BOOL) {
        if (json_is_boolean(v)) {
            *(bool *)((char *)c + r->off) = json_is_true(v);
            return 0;
        }
    } else if (json_is_string(v)) { /* a name, or a spelling checked by the parser */
        const char *s = json_string_value(v);
        if (r->type == KT_STRING) return config_knob_parse(c, (config_knob)(r - knobs), s, err);
        if (config_knob_parse(c, (config_knob)(r - knobs), s, err) == 0) return 0;
        snprintf(err, LOONG_ERRLEN, "configuration object: '%s' is '%.60s', not a known %s", r->info.key, s,
                 r->info.key);
        return -1;
    }
    snprintf(err, LOONG_ERRLEN, "configuration object: '%s' has the wrong type", r->info.key);
    return -1;
}

int config_from_json(const json_t *j, config *c, char err[LOONG_ERRLEN])
{
    memset(c, 0, sizeof *c);
    c->dp = 1;
    c->tp = 1;
    c->prefetch = 1;
    c->pp = 1;
    c->micro_batches = 1;
    c->vpp = 1;
    c->sequence_parallel = true;
    c->recompute_modules = RECOMPUTE_MOD_CORE_ATTN;
    c->recompute_layers = 1;
    if (!json_is_object(j)) {
        snprintf(err, LOONG_ERRLEN, "configuration object: not a JSON object");
        return -1;
    }
    for (int k = 0; k < KNOB_COUNT; k++) {
        const json_t *v = json_object_get(j, knobs[k].info.key);
        if (!v && optional_knob(k)) continue; /* unset: the default (0) */
        if (!v) {
            snprintf(err, LOONG_ERRLEN, "configuration object: '%s' is missing", knobs[k].info.key);
            return -1;
        }
        if (knob_from_json(v, c, &knobs[k], err) < 0) return -1;
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
    char dp[128] = "", place[64];
    mesh m = config_mesh(c);
    static const mesh_dim outer[] = {MESH_DP, MESH_TP, MESH_PP}; /* the dimensions beside P_h x P_s */
    for (size_t i = 0; i < sizeof outer / sizeof *outer; i++) {
        mesh_dim d = outer[i];
        if (!mesh_on(&m, d)) continue;
        snprintf(dp + strlen(dp), sizeof dp - strlen(dp), " %s %d", mesh_dim_name(d), m.degree[d]);
        if (d == MESH_TP)
            snprintf(dp + strlen(dp), sizeof dp - strlen(dp), "%s%s", c->sequence_parallel ? " sp" : "",
                     c->tp_overlap ? " overlapped" : "");
        if (d == MESH_PP)
            snprintf(dp + strlen(dp), sizeof dp - strlen(dp), " %s%s", schedule_name(c->schedule),
                     c->vpp > 1 ? " v" : "");
    }
    if (c->vpp > 1) snprintf(dp + strlen(dp), sizeof dp - strlen(dp), "%d", c->vpp);
    if (c->micro_batches > 1) snprintf(dp + strlen(dp), sizeof dp - strlen(dp), " m %d", c->micro_batches);
    config_placement_text(c, place, sizeof place);
    snprintf(buf, len, "%s S=%s B=%d mesh %dx%d%s %s (%s, %s, ring %s w=%d, kv-repl %s) scope %s, %d GPUs/node",
             c->model.name, seq, c->batch, c->p_head, c->p_seq, dp, c->strategy, place, partition_name(c->partition),
             ring_name(c->ring), c->window, c->kv_replication ? "on" : "off", scope_name(c->scope), c->gpus_per_node);
    size_t n = strlen(buf);
    if (c->docs && n < len)
        snprintf(buf + n, len - n, ", %d docs (%016llx)", docs_count(c->docs), (unsigned long long)docs_hash(c->docs));
}

void config_layout_name(const config *c, char *buf, size_t len)
{
    char dpx[32], ring[40];
    mesh m = config_mesh(c);
    mesh_describe(&m, MESH_DIMS_ALL & ~MESH_DIMS_CP, "%s%d*", dpx, sizeof dpx); /* "dp2*pp2*tp2*" */
    const char *part = partition_sp[c->partition].abbrev;
    if (c->p_seq == 1)
        snprintf(ring, sizeof ring, "no ring");
    else if (c->ring == RING_DOUBLE)
        snprintf(ring, sizeof ring, "%s %s w=%d", part, ring_sp[c->ring].abbrev, c->window);
    else
        snprintf(ring, sizeof ring, "%s %s", part, ring_sp[c->ring].abbrev);
    char place[8] = "";
    if (c->p_head > 1 && c->p_seq > 1) snprintf(place, sizeof place, " %s", placement_sp[config_placement(c)].abbrev);
    bool needs_repl = c->p_head > config_tp_kv_heads(c) || c->tp > c->model.kv_heads;
    const char *repl = needs_repl ? (c->kv_replication ? " kv-repl" : " no-repl") : "";
    const char *sp = c->tp == 1 ? "" : c->tp_overlap ? " tp-ovl" : c->sequence_parallel ? "" : " no-sp";
    snprintf(buf, len, "%s%dx%d%s %s%s%s", dpx, c->p_head, c->p_seq, place, ring, repl, sp);
}

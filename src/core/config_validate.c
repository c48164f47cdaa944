/* config_validate: the one place that rejects an invalid configuration.
 * See config.h. It reads the pipeline's layer split (pipeline.h), which is
 * why it is a file of its own: pipeline.c depends on config.c's geometry,
 * this file on both, and nothing on this file but through config.h. */
#include "config.h"
#include "pipeline.h"

#include <stdio.h>
#include <string.h>

/* An upper bound on a DAG's tasks: its ids are 32-bit (dag.h). */
#define MAX_TASKS 2000000000ull

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
    /* a grouped GEMM's backward: at most every EP rank's routed rows */
    long double experts = 4 * (long double)config_local_tokens(c) * m->top_k * c->ep * m->hidden * m->expert_ffn;
    long double b = attn > gemm ? attn : gemm;
    b = experts > b ? experts : b;
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
    uint64_t est = (uint64_t)config_ranks(c) * (uint64_t)(m->layers / c->pp + 1) * mb *
                   (24ull * (uint64_t)c->p_seq + (config_moe(c) ? 128 : 64));
    if (est > MAX_TASKS) {
        snprintf(err, LOONG_ERRLEN,
                 "this configuration would need up to %.3g tasks (~%.0f GB of task memory), more than loong builds "
                 "(%.3g): use --compose, --layers, --scope attn or a smaller mesh",
                 (double)est, (double)est * DAG_BYTES_PER_TASK / 1e9, (double)MAX_TASKS);
        return -1;
    }
    return 0;
}

/* Only pp may vary slower than dp: loong's ranks keep dp slowest
 * (config_mesh) and the GPUs take the given order through config_gpu_of;
 * with dp before pp alone (Megatron-Core's default tp-cp-ep-dp-pp,
 * torchtitan's pp-outermost mesh) a stage's ranks of replica 0 stay on the
 * GPUs of their loong ranks, which the predictors' per-stage groups assume. */
static int validate_mesh(const config *c, char err[LOONG_ERRLEN])
{
    if (c->dp < 1) return fail(err, "--dp must be at least 1 (1: one replica, no data parallelism)");
    mesh m = config_gpu_mesh(c);
    if (mesh_validate(&m, err) < 0) return -1;
    if ((long long)c->dp * config_ranks(c) > CONFIG_MAX_RANKS) {
        snprintf(err, LOONG_ERRLEN, "--dp %d x mesh %dx%d is more than %d ranks: use fewer replicas", c->dp, c->p_head,
                 c->p_seq, CONFIG_MAX_RANKS);
        return -1;
    }
    bool after_dp = false;
    for (int i = 0; i < MESH_NDIMS; i++) {
        mesh_dim d = m.order[i];
        if (after_dp && m.degree[d] > 1 && c->dp > 1 && d != MESH_PP) {
            char order[64];
            mesh_order_text(&m, order, sizeof order);
            snprintf(err, LOONG_ERRLEN,
                     "--placement %s: %s (degree %d) varies slower than dp, and only pp may (replicas beside "
                     "pipeline stages, Megatron's tp-cp-ep-dp-pp): put dp after it, e.g. %s",
                     order, mesh_dim_name(d), m.degree[d], placement_order(config_placement(c)));
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

/* Expert parallelism (config_ep.c): an EP group is ep consecutive
 * context ranks holding E/ep experts each; Megatron's constraints
 * (megatron/training/arguments.py: sequence parallelism under TP with
 * experts; the expert TP shards' widths). */
static int validate_experts(const config *c, char err[LOONG_ERRLEN])
{
    const model *m = &c->model;
    char buf[LOONG_ERRLEN];
    if (c->ep < 1) return fail(err, "--ep must be at least 1 (1: every rank holds every expert)");
    if (c->etp < 0) return fail(err, "--expert-tp must be at least 1 (it defaults to --tp)");
    if (!config_moe(c) && (c->ep > 1 || config_routing_skewed(c) || c->capacity != 0 || (c->etp && c->etp != c->tp)))
        return fail(err, "--ep, --expert-tp, --routing and --capacity-factor apply to a mixture-of-experts model: use "
                         "e.g. --model qwen3-30b-a3b, or drop them");
    if (!config_moe(c) && c->dispatcher != DISPATCH_ALLTOALL)
        return fail(err, "--dispatcher applies to a mixture-of-experts model: use e.g. --model qwen3-30b-a3b, or "
                         "drop it");
    if (c->shared_overlap && c->dispatcher != DISPATCH_ALLTOALL)
        return fail(err, "--shared-expert-overlap on needs --dispatcher alltoall (Megatron-Core overlaps the shared "
                         "experts with the all-to-alls only)");
    if (c->shared_overlap && !c->model.shared_ffn)
        return fail(err, "--shared-expert-overlap on needs shared experts, which this model has none of: use e.g. "
                         "--model deepseek-v3, or drop it");
    if (!config_moe(c)) return 0;
    int hist = config_routing_hist_experts(c);
    if (hist && hist != m->experts) {
        snprintf(buf, sizeof buf,
                 "--routing's histogram weighs %d experts and model '%s' has %d: give one weight per expert, in "
                 "expert order",
                 hist, m->name, m->experts);
        return fail(err, buf);
    }
    int P = config_cp(c), etp = config_etp(c);
    if (c->tp % etp) {
        snprintf(buf, sizeof buf,
                 "--expert-tp %d must divide --tp %d (Megatron's expert TP group is a run of one TP group's ranks)",
                 etp, c->tp);
        return fail(err, buf);
    }
    int span = config_ep_span(c); /* P at expert TP = TP */
    if ((span % c->ep && (c->ep % span || c->dp % (c->ep / span))) || m->experts % c->ep) {
        if (etp == c->tp)
            snprintf(buf, sizeof buf,
                     "--ep %d must divide the %d experts and either divide P = %d or be P times a divisor of --dp %d "
                     "(an EP group is ep consecutive context ranks, or the context ranks of ep / P replicas)",
                     c->ep, m->experts, P, c->dp);
        else
            snprintf(buf, sizeof buf,
                     "--ep %d must divide the %d experts and either divide (tp / expert-tp) x P = %d or be that times "
                     "a divisor of --dp %d (an EP group is ep consecutive ranks in the experts' order)",
                     c->ep, m->experts, span, c->dp);
        return fail(err, buf);
    }
    if (c->tp > 1 && !c->sequence_parallel)
        return fail(err, "a mixture of experts under --tp needs --sequence-parallel on (Megatron-LM requires it: the "
                         "tokens are dispatched from their sequence-parallel shards)");
    if (m->expert_ffn % etp || m->shared_ffn % c->tp) {
        if (etp == c->tp)
            snprintf(buf, sizeof buf,
                     "--tp %d must divide moe_intermediate_size (%d) and the shared experts' width (%d)", c->tp,
                     m->expert_ffn, m->shared_ffn);
        else
            snprintf(buf, sizeof buf,
                     "--expert-tp %d must divide moe_intermediate_size (%d) and --tp %d the shared experts' width (%d)",
                     etp, m->expert_ffn, c->tp, m->shared_ffn);
        return fail(err, buf);
    }
    if (c->zero == 3)
        return fail(err, "--zero 3 with a mixture of experts: loong gathers no expert shards yet; use --zero 0, 1 or 2 "
                         "(Megatron's distributed optimizer is --zero 1)");
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
    if ((long long)c->p_head * c->p_seq > CONFIG_MAX_RANKS) {
        snprintf(err, LOONG_ERRLEN, "mesh %dx%d has more than %d ranks: use a smaller mesh", c->p_head, c->p_seq,
                 CONFIG_MAX_RANKS);
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
    if (c->grad_reduce == GRAD_REDUCE_BF16 && c->act_bytes != 2)
        return fail(err, "--grad-reduce bf16 reduces bf16 gradients, and --dtype fp32 has none: drop --grad-reduce, "
                         "or use --dtype bf16");
    if (validate_heads(c, err) < 0 || validate_ring(c, err) < 0 || validate_seq(c, err) < 0) return -1;
    if (validate_pipeline(c, err) < 0 || validate_recompute(c, err) < 0) return -1;
    if (validate_experts(c, err) < 0) return -1;
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

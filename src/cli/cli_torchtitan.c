/*
 * cli_torchtitan: torchtitan's job configuration (the TOML of
 * `--job.config_file`) in and out.
 *
 * In: `--torchtitan-toml FILE|-` reads [model], [training], [parallelism]
 * and [activation_checkpoint] into configuration knobs, as if given on the
 * command line. A key that changes nothing in loong (and every other
 * section: torchtitan has many) is named on one "read, not modelled"
 * stderr line; a contradiction is an error naming both keys.
 *
 * Out: cli_torchtitan_emit writes the sections that run a configuration,
 * so that reading them back gives the same configuration.
 *
 * Meanings: torchtitan v0.2.2 (github.com/pytorch/torchtitan, commit
 * 73a0e6979dd10b6b1904098eb3c8f62c18ab87ce, the last release with TOML job
 * files): torchtitan/config/job_config.py (names, defaults),
 * distributed/parallel_dims.py (fsdp_enabled = dp_shard > 1 or cp > 1),
 * models/llama3/infra/parallelize.py (FSDP/HSDP/DDP, async TP),
 * distributed/pipeline_parallel.py (stages and their split),
 * distributed/activation_checkpoint.py (selective by op or every N-th
 * layer), distributed/utils.py maybe_enable_amp (mixed precision), train.py
 * (gradient accumulation), models/llama3/__init__.py (flavors).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toml_json.h"
#include "cli.h"

/* torchtitan's llama3 flavors (models/llama3/__init__.py, llama3_args) and
 * loong's presets of the same shape (core/model.c; tests/check_torchtitan
 * derives each preset's ffn from the flavor's ffn_dim_multiplier and
 * multiple_of). */
static const struct {
    const char *flavor, *preset;
} flavors[] = {{"8B", "llama3-8b"}, {"70B", "llama3-70b"}, {"405B", "llama3-405b"}};
#define NFLAVORS ((int)(sizeof flavors / sizeof *flavors))

/* The sections whose keys loong reads; any other is named whole. */
static const char *const modelled[] = {"model", "training", "parallelism", "activation_checkpoint"};

#define TT_MAX_READ 64

/* The reader's state: the document, the keys read ("section.key"), the
 * note so far. */
typedef struct tt_in {
    json_t *root;
    const char *read[TT_MAX_READ];
    int nread;
    char note[1024];
} tt_in;

/* The strings the knobs point at live as long as the process (each process
 * reads one job file). */
static char pool[4096];
static size_t pool_used;

static const char *keep(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(pool + pool_used, sizeof pool - pool_used, fmt, ap);
    va_end(ap);
    if (n < 0 || pool_used + (size_t)n + 1 > sizeof pool) return "";
    const char *s = pool + pool_used;
    pool_used += (size_t)n + 1;
    return s;
}

static void note(tt_in *t, const char *fmt, ...)
{
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    size_t n = strlen(t->note);
    if (n + strlen(what) + 6 < sizeof t->note)
        snprintf(t->note + n, sizeof t->note - n, "%s%s", n ? ", " : "", what);
    else if (n + 5 < sizeof t->note && !strstr(t->note, "..."))
        snprintf(t->note + n, sizeof t->note - n, ", ...");
}

static int fail(char err[LOONG_ERRLEN], const char *fmt, ...)
{
    int n = snprintf(err, LOONG_ERRLEN, "--torchtitan-toml: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, LOONG_ERRLEN - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* The value of [sec] key, or NULL; marks it read. */
static json_t *get(tt_in *t, const char *sec, const char *key)
{
    json_t *v = json_object_get(json_object_get(t->root, sec), key);
    if (v && t->nread < TT_MAX_READ) t->read[t->nread++] = keep("%s.%s", sec, key);
    return v;
}

static bool was_read(const tt_in *t, const char *sec, const char *key)
{
    size_t l = strlen(sec);
    for (int i = 0; i < t->nread; i++)
        if (!strncmp(t->read[i], sec, l) && t->read[i][l] == '.' && !strcmp(t->read[i] + l + 1, key)) return true;
    return false;
}

static int int_key(tt_in *t, const char *sec, const char *key, long dflt, long *out, char err[LOONG_ERRLEN])
{
    json_t *v = get(t, sec, key);
    *out = dflt;
    if (!v) return 0;
    if (!json_is_integer(v)) return fail(err, "[%s] %s must be an integer", sec, key);
    *out = (long)json_integer_value(v);
    if (*out < -1 || *out > (1L << 30)) return fail(err, "[%s] %s = %ld is out of range", sec, key, *out);
    return 0;
}

/* A degree or count: >= min. */
static int count_key(tt_in *t, const char *sec, const char *key, long dflt, long min, long *out, char err[LOONG_ERRLEN])
{
    if (int_key(t, sec, key, dflt, out, err) < 0) return -1;
    if (*out < min) return fail(err, "[%s] %s = %ld: give %ld or more", sec, key, *out, min);
    return 0;
}

static int str_key(tt_in *t, const char *sec, const char *key, const char *dflt, const char **out,
                   char err[LOONG_ERRLEN])
{
    json_t *v = get(t, sec, key);
    *out = dflt;
    if (!v) return 0;
    if (!json_is_string(v)) return fail(err, "[%s] %s must be a string", sec, key);
    *out = json_string_value(v);
    return 0;
}

static int bool_key(tt_in *t, const char *sec, const char *key, bool dflt, bool *out, char err[LOONG_ERRLEN])
{
    json_t *v = get(t, sec, key);
    *out = dflt;
    if (!v) return 0;
    if (!json_is_boolean(v)) return fail(err, "[%s] %s must be true or false", sec, key);
    *out = json_is_true(v);
    return 0;
}

/* One of the choices (case as torchtitan spells them), else an error listing them. */
static int choice(const char *sec, const char *key, const char *v, const char *list, char err[LOONG_ERRLEN])
{
    char l[128];
    snprintf(l, sizeof l, ",%s,", list);
    char w[64];
    snprintf(w, sizeof w, ",%s,", v);
    if (strlen(v) < 60 && strstr(l, w)) return 0;
    return fail(err, "[%s] %s = \"%.40s\": use one of %s", sec, key, v, list);
}

/* The parsed values that several sections share. */
typedef struct tt_job {
    long dp, tp, cp, pp, vpp, layers;
    bool fsdp;
    schedule_kind sched;
} tt_job;

/* [model]: a llama3 flavor as a loong preset (or the command line's --model). */
static int read_model(tt_in *t, const cli_config *given, cli_config *out, tt_job *j, char err[LOONG_ERRLEN])
{
    const char *name, *flavor;
    if (str_key(t, "model", "name", "llama3", &name, err) < 0 ||
        str_key(t, "model", "flavor", "debugmodel", &flavor, err) < 0)
        return -1;
    json_t *conv = get(t, "model", "converters");
    for (size_t i = 0; conv && i < json_array_size(conv); i++) {
        const char *cv = json_string_value(json_array_get(conv, i));
        if (!cv) continue;
        /* torchao's float8 training scales each tensor by its own amax
         * (tensorwise, the default recipe): TE's current scaling; "mx" is
         * MXFP8 (Blackwell) */
        if (!strcmp(cv, "float8"))
            out->val[KNOB_PRECISION] = "fp8-current", note(t, "model.converters float8 (torchao's, costed as TE's "
                                                              "current scaling: --precision fp8-current)");
        else if (!strcmp(cv, "mx"))
            out->val[KNOB_PRECISION] = "mxfp8", note(t, "model.converters mx (torchao's, costed as TE's MXFP8)");
        else
            note(t, "model.converters %.20s", cv);
    }
    if (conv && !json_is_array(conv)) return fail(err, "[model] converters must be an array of strings");
    const char *spec = given->val[KNOB_MODEL];
    if (!spec) {
        int f = -1;
        for (int i = 0; i < NFLAVORS && !strcmp(name, "llama3"); i++)
            if (!strcmp(flavor, flavors[i].flavor)) f = i;
        if (f < 0)
            return fail(err,
                        "[model] name = \"%.30s\" flavor = \"%.30s\": loong ships llama3's 8B, 70B and 405B; give "
                        "--model PRESET|FILE for another",
                        name, flavor);
        spec = flavors[f].preset;
        out->val[KNOB_MODEL] = spec;
    }
    model m;
    if (model_resolve(spec, &m, err) < 0) return -1;
    j->layers = m.layers;
    return 0;
}

/* Data parallelism: dp = replicate x shard, ZeRO from FSDP. */
static int read_dp(tt_in *t, const cli_config *given, cli_config *out, tt_job *j, char err[LOONG_ERRLEN])
{
    const char *P = "parallelism";
    long rep, shard;
    if (count_key(t, P, "data_parallel_replicate_degree", 1, 1, &rep, err) < 0 ||
        int_key(t, P, "data_parallel_shard_degree", -1, &shard, err) < 0)
        return -1;
    if (shard == 0 || shard < -1)
        return fail(err, "[parallelism] data_parallel_shard_degree = %ld: give -1 or 1 or more", shard);
    long dp = 0;
    if (given->val[KNOB_DP]) {
        char *end;
        dp = strtol(given->val[KNOB_DP], &end, 10);
        if (*end || dp < 1) return fail(err, "--dp %.20s is not a count", given->val[KNOB_DP]);
    }
    if (shard == -1) {
        if (!dp)
            return fail(err, "[parallelism] data_parallel_shard_degree = -1 takes the GPUs that torchrun's world "
                             "leaves: give --dp N (replicate x shard) or the degree");
        if (dp % rep)
            return fail(err, "--dp %ld is not a multiple of [parallelism] data_parallel_replicate_degree = %ld", dp,
                        rep);
        shard = dp / rep;
    } else if (dp && dp != rep * shard)
        return fail(err,
                    "--dp %ld contradicts [parallelism] data_parallel_replicate_degree = %ld x "
                    "data_parallel_shard_degree = %ld: give one",
                    dp, rep, shard);
    j->dp = rep * shard;
    j->fsdp = shard > 1 || j->cp > 1; /* parallel_dims.fsdp_enabled: FSDP also shards over cp */
    if (rep > 1 && j->fsdp)
        return fail(err,
                    "[parallelism] data_parallel_replicate_degree = %ld with %s: HSDP, which loong does not model "
                    "(its ZeRO shards over every data-parallel rank)",
                    rep, shard > 1 ? "data_parallel_shard_degree > 1" : "context_parallel_degree > 1");
    if (rep > 1 && (j->tp > 1 || j->pp > 1))
        return fail(err,
                    "[parallelism] data_parallel_replicate_degree = %ld (DDP) with %s > 1: torchtitan refuses DDP "
                    "with more than 1-D parallelism; use data_parallel_shard_degree",
                    rep, j->tp > 1 ? "tensor_parallel_degree" : "pipeline_parallel_degree");
    if (j->fsdp && j->pp > 1)
        return fail(err,
                    "[parallelism] %s with pipeline_parallel_degree = %ld: FSDP under pipelining, which loong does "
                    "not model (it pipelines with ZeRO 0 or 1, as Megatron does)",
                    shard > 1 ? "data_parallel_shard_degree > 1" : "context_parallel_degree > 1 (FSDP over cp)", j->pp);
    const char *reshard = "default";
    if (j->fsdp && str_key(t, P, "fsdp_reshard_after_forward", "default", &reshard, err) < 0) return -1;
    if (choice(P, "fsdp_reshard_after_forward", reshard, "default,always,never", err) < 0) return -1;
    /* reshard after forward: ZeRO-3; kept gathered until backward: ZeRO-2 */
    out->val[KNOB_ZERO] = !j->fsdp ? "0" : !strcmp(reshard, "never") ? "2" : "3";
    out->val[KNOB_DP] = keep("%ld", j->dp);
    return 0;
}

/* Context parallelism: PyTorch's ring attention over the sequence, KV
 * all-gathered or passed (all-to-all rotation), head-tail balanced. */
static int read_cp(tt_in *t, cli_config *out, tt_job *j, char err[LOONG_ERRLEN])
{
    const char *P = "parallelism", *rot, *lb;
    if (count_key(t, P, "context_parallel_degree", 1, 1, &j->cp, err) < 0) return -1;
    out->val[KNOB_MESH] = keep("1x%ld", j->cp);
    if (j->cp == 1) {
        out->val[KNOB_STRATEGY] = "ulysses";
        return 0;
    }
    if (str_key(t, P, "context_parallel_rotate_method", "allgather", &rot, err) < 0 ||
        choice(P, "context_parallel_rotate_method", rot, "allgather,alltoall", err) < 0 ||
        str_key(t, P, "context_parallel_load_balancer", "headtail", &lb, err) < 0)
        return -1;
    out->val[KNOB_STRATEGY] = !strcmp(rot, "allgather") ? "allgather" : "zigzag";
    if (strcmp(lb, "headtail")) note(t, "parallelism.context_parallel_load_balancer %.20s (costed as headtail)", lb);
    return 0;
}

static int read_tp(tt_in *t, cli_config *out, tt_job *j, char err[LOONG_ERRLEN])
{
    const char *P = "parallelism";
    bool async;
    if (count_key(t, P, "tensor_parallel_degree", 1, 1, &j->tp, err) < 0 ||
        bool_key(t, P, "enable_async_tensor_parallel", false, &async, err) < 0)
        return -1;
    out->val[KNOB_TP] = keep("%ld", j->tp);
    if (j->tp > 1) out->val[KNOB_SEQUENCE_PARALLEL] = "on"; /* torchtitan's TP plan: norms SequenceParallel */
    if (!async) return 0;
    /* looked at, not marked read: torch.compile's fusions stay unmodelled */
    json_t *ct = json_object_get(t->root, "compile"), *comp = json_object_get(ct, "components");
    bool compile = json_is_true(json_object_get(ct, "enable"));
    bool model = !comp;
    for (size_t i = 0; comp && i < json_array_size(comp); i++)
        model |=
            json_is_string(json_array_get(comp, i)) && !strcmp(json_string_value(json_array_get(comp, i)), "model");
    if (!compile || !model) /* tensor_parallel.py, maybe_enable_async_tp */
        return fail(err,
                    "[parallelism] enable_async_tensor_parallel = true needs [compile] enable = true with \"model\" "
                    "in components (torchtitan raises otherwise): set both or neither");
    if (j->tp > 1)
        out->val[KNOB_TP_OVERLAP] = "on";
    else
        note(t, "parallelism.enable_async_tensor_parallel (TP 1)");
    return 0;
}

/* Pipeline: degree, schedule, stages per rank, the split's weights. */
static int read_pp(tt_in *t, const cli_config *given, cli_config *out, tt_job *j, char err[LOONG_ERRLEN])
{
    const char *P = "parallelism", *sched;
    if (count_key(t, P, "pipeline_parallel_degree", 1, 1, &j->pp, err) < 0) return -1;
    out->val[KNOB_PP] = keep("%ld", j->pp);
    j->vpp = 1;
    j->sched = SCHED_1F1B;
    if (j->pp == 1) return 0;
    if (str_key(t, P, "pipeline_parallel_schedule", "1F1B", &sched, err) < 0) return -1;
    /* torch.distributed.pipelining's get_schedule_class matches case-insensitively */
    char lc[40];
    size_t i;
    for (i = 0; sched[i] && i + 1 < sizeof lc; i++)
        lc[i] = (char)tolower((unsigned char)sched[i]);
    lc[i] = '\0';
    if (!strcmp(lc, "1f1b"))
        j->sched = SCHED_1F1B;
    else if (!strcmp(lc, "gpipe"))
        j->sched = SCHED_GPIPE;
    else if (!strcmp(lc, "interleaved1f1b"))
        j->sched = SCHED_INTERLEAVED;
    else
        return fail(err,
                    "[parallelism] pipeline_parallel_schedule = \"%.30s\": loong runs GPipe, 1F1B and "
                    "Interleaved1F1B",
                    sched);
    long in, outw, lps;
    if (count_key(t, P, "pipeline_parallel_first_stage_less_layers", 1, 0, &in, err) < 0 ||
        count_key(t, P, "pipeline_parallel_last_stage_less_layers", 1, 0, &outw, err) < 0 ||
        int_key(t, P, "pipeline_parallel_layers_per_stage", 0, &lps, err) < 0)
        return -1;
    long eff = j->layers + in + outw, stages = j->pp * (j->sched == SCHED_INTERLEAVED ? 2 : 1);
    if (lps > 0) stages = (eff + lps - 1) / lps; /* pipeline_parallel.py: ceil */
    if (stages % j->pp || (j->sched != SCHED_INTERLEAVED && stages != j->pp) ||
        (j->sched == SCHED_INTERLEAVED && stages < 2 * j->pp))
        return fail(err,
                    "[parallelism] pipeline_parallel_layers_per_stage = %ld gives %ld stages, not %s %ld "
                    "(pipeline_parallel_degree) for %s",
                    lps, stages, j->sched == SCHED_INTERLEAVED ? "2 or more per rank of" : "one per rank of", j->pp,
                    sched);
    j->vpp = stages / j->pp;
    out->val[KNOB_SCHEDULE] = schedule_name(j->sched);
    if (j->vpp > 1) out->val[KNOB_VPP] = keep("%ld", j->vpp);
    if (given->val[KNOB_PP_FIRST_LAYERS] || given->val[KNOB_PP_LAST_LAYERS] || given->val[KNOB_PP_EMBED_SLOT] ||
        given->val[KNOB_PP_LOSS_SLOT])
        return 0; /* the command line splits */
    /* generate_llm_fqn_per_model_part: the layers plus the embedding and
     * output weights over the stages, the first `eff % stages` one more;
     * loong's embedding and loss slots are weights of 1, split evenly */
    if (in > 1 || outw > 1 || eff % stages)
        return fail(err,
                    "[parallelism] pipeline_parallel_first/last_stage_less_layers = %ld/%ld: torchtitan splits %ld "
                    "layers and weights over %ld stages unevenly (or with a weight over 1), which loong does not "
                    "model: choose a degree that divides %ld, or give --pp-first-layers",
                    in, outw, eff, stages, eff);
    if (in) out->val[KNOB_PP_EMBED_SLOT] = "on";
    if (outw) out->val[KNOB_PP_LOSS_SLOT] = "on";
    return 0;
}

/* [training]: the batch, the sequence, the precision. */
static int read_training(tt_in *t, cli_config *out, const tt_job *j, char err[LOONG_ERRLEN])
{
    const char *T = "training", *dtype, *mp, *mr;
    long local, global, seq, mbs = 1;
    json_t *tab = json_object_get(t->root, T);
    bool old = json_object_get(tab, "batch_size") != NULL; /* its name before torchtitan #1238 (v0.1.0) */
    if (old && json_object_get(tab, "local_batch_size"))
        return fail(err,
                    "[training] batch_size and local_batch_size both given (batch_size is the older name): give one");
    if (count_key(t, T, old ? "batch_size" : "local_batch_size", 8, 1, &local, err) < 0 ||
        int_key(t, T, "global_batch_size", -1, &global, err) < 0 || count_key(t, T, "seq_len", 2048, 1, &seq, err) < 0)
        return -1;
    out->val[KNOB_SEQ] = keep("%ld", seq);
    if (j->pp > 1) {
        if (count_key(t, "parallelism", "pipeline_parallel_microbatch_size", 1, 1, &mbs, err) < 0) return -1;
        if (local % mbs)
            return fail(err,
                        "[training] local_batch_size = %ld is not a multiple of [parallelism] "
                        "pipeline_parallel_microbatch_size = %ld",
                        local, mbs);
    }
    long accum = 1;
    if (global > 0) {
        if (global % (local * j->dp))
            return fail(err,
                        "[training] global_batch_size = %ld is not a multiple of local_batch_size = %ld x %ld "
                        "data-parallel ranks",
                        global, local, j->dp);
        accum = global / (local * j->dp);
    } else if (global != -1)
        return fail(err, "[training] global_batch_size = %ld: give -1 (local x data parallel) or a count", global);
    if (accum > 1 && j->fsdp)
        return fail(err,
                    "[training] global_batch_size = %ld (%ld accumulation steps) with FSDP (%s): loong does not "
                    "model ZeRO-2/3 with gradient accumulation; give global_batch_size = local x data parallel",
                    global, accum, j->cp > 1 ? "context_parallel_degree > 1" : "data_parallel_shard_degree > 1");
    if (accum > 1 && j->pp > 1)
        note(t, "training.global_batch_size's %ld accumulation steps (costed as one pipeline of all micro-batches)",
             accum);
    out->val[KNOB_BATCH] = keep("%ld", j->pp > 1 ? mbs : local);
    out->val[KNOB_MICRO_BATCHES] = keep("%ld", (j->pp > 1 ? local / mbs : 1) * accum);
    if (str_key(t, T, "dtype", "float32", &dtype, err) < 0 || choice(T, "dtype", dtype, "bfloat16,float32", err) < 0 ||
        str_key(t, T, "mixed_precision_param", "bfloat16", &mp, err) < 0 ||
        choice(T, "mixed_precision_param", mp, "bfloat16,float32", err) < 0 ||
        str_key(t, T, "mixed_precision_reduce", "float32", &mr, err) < 0 ||
        choice(T, "mixed_precision_reduce", mr, "float32,bfloat16", err) < 0)
        return -1;
    /* maybe_enable_amp: FSDP casts; DDP or one device autocasts; TP or PP
     * without FSDP runs in training.dtype */
    bool amp = j->fsdp || (j->tp == 1 && j->pp == 1);
    bool bf16 = !strcmp(dtype, "bfloat16") || (amp && !strcmp(mp, "bfloat16"));
    if (!strcmp(dtype, "bfloat16")) note(t, "training.dtype bfloat16 (costed as bf16 mixed precision)");
    if (!amp && !strcmp(mp, "bfloat16") && strcmp(dtype, "bfloat16"))
        note(t, "training.mixed_precision_param bfloat16 (off under TP/PP without FSDP, torchtitan's "
                "maybe_enable_amp: costed fp32)");
    out->val[KNOB_DTYPE] = bf16 ? "bf16" : "fp32";
    if (bf16 && !strcmp(mr, "bfloat16")) out->val[KNOB_GRAD_REDUCE] = "bf16"; /* FSDP's reduce_dtype */
    return 0;
}

/* The loss (components/loss.py): cross_entropy_loss is
 * F.cross_entropy(pred.float()) at TP 1, eager unless [compile] enable
 * with "loss" in components (its default ["model", "loss"]) compiles it;
 * at TP > 1 its _LossParallelCrossEntropy keeps one fp32 copy, as
 * Megatron's does. torchtitan before it compiled the loss (2024-12's
 * train.py, "compiling loss function causes CUDA errors") ran it eager. */
static int read_loss(tt_in *t, cli_config *out, const tt_job *j, char err[LOONG_ERRLEN])
{
    bool compile;
    if (bool_key(t, "compile", "enable", false, &compile, err) < 0) return -1;
    json_t *comp = get(t, "compile", "components");
    if (comp && !json_is_array(comp))
        return fail(err, "[compile] components must be a list, e.g. [\"model\", \"loss\"]");
    bool loss = !comp;
    for (size_t i = 0; comp && i < json_array_size(comp); i++)
        loss |= json_is_string(json_array_get(comp, i)) && !strcmp(json_string_value(json_array_get(comp, i)), "loss");
    if (j->tp == 1 && !(compile && loss)) out->val[KNOB_CROSS_ENTROPY] = "eager";
    if (compile) note(t, "compile.enable (the model's fused kernels costed as --fusions te)");
    return 0;
}

/* [activation_checkpoint]: none, full (every block), selective by op or
 * every N-th layer. */
static int read_ac(tt_in *t, cli_config *out, const tt_job *j, char err[LOONG_ERRLEN])
{
    const char *A = "activation_checkpoint", *mode, *opt = "2";
    if (str_key(t, A, "mode", "selective", &mode, err) < 0) return -1;
    if (!strcmp(mode, "memory_budget"))
        return fail(err, "[activation_checkpoint] mode = \"memory_budget\" is the compiler's trade-off, which loong "
                         "does not model: use none, selective or full");
    if (choice(A, "mode", mode, "none,selective,full", err) < 0) return -1;
    out->val[KNOB_RECOMPUTE] = "none";
    if (!strcmp(mode, "none")) return 0;
    long every = 1;
    if (!strcmp(mode, "selective")) {
        json_t *v = get(t, A, "selective_ac_option");
        char num[24];
        if (json_is_integer(v))
            snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v)), opt = num;
        else if (json_is_string(v))
            opt = json_string_value(v);
        else if (v)
            return fail(err, "[activation_checkpoint] selective_ac_option must be \"op\" or a layer count");
        if (!strcmp(opt, "op")) {
            /* per-op SAC keeps attention's output and every other matmul's:
             * sc++ keeps attention's output and re-runs the GEMMs */
            out->val[KNOB_RECOMPUTE] = "sc++";
            note(t, "activation_checkpoint.selective_ac_option op (keeps every other matmul's output: costed as "
                    "sc++, which re-runs them all)");
            return 0;
        }
        char *end;
        every = strtol(opt, &end, 10);
        if (!*opt || *end || every < 0 || every > (1L << 20))
            return fail(err,
                        "[activation_checkpoint] selective_ac_option = \"%.20s\": use \"op\" or a layer count N "
                        "(every N-th layer)",
                        opt);
    }
    out->val[KNOB_RECOMPUTE] = "full";
    if (every <= 1) { /* ac_freq 0 or 1: every block, as mode full */
        out->val[KNOB_RECOMPUTE_METHOD] = "uniform";
        out->val[KNOB_RECOMPUTE_NUM_LAYERS] = "1";
        return 0;
    }
    /* _apply_layer_sac: the N-th, 2N-th, ... blocks of a chunk re-run,
     * floor(chunk / N) of them: loong's block method re-runs that many */
    long chunk = j->layers / (j->pp * j->vpp), k = chunk / every;
    if (!k) {
        out->val[KNOB_RECOMPUTE] = "none";
        return 0;
    }
    out->val[KNOB_RECOMPUTE_METHOD] = "block";
    out->val[KNOB_RECOMPUTE_NUM_LAYERS] = keep("%ld", k);
    return 0;
}

/* Everything left: sections named whole when loong reads none of their
 * keys, else the keys. */
static void note_rest(tt_in *t)
{
    const char *sec;
    json_t *tab;
    json_object_foreach(t->root, sec, tab)
    {
        bool known = false;
        for (size_t i = 0; i < sizeof modelled / sizeof *modelled; i++)
            known |= !strcmp(sec, modelled[i]);
        bool any = false;
        const char *key;
        json_t *v;
        json_object_foreach(tab, key, v) any |= was_read(t, sec, key);
        if (!known && !any) {
            note(t, "[%.40s]", sec);
            continue;
        }
        json_object_foreach(tab, key, v) if (!was_read(t, sec, key)) note(t, "%.40s.%.50s", sec, key);
    }
}

int cli_torchtitan_read(const char *path, const cli_config *given, cli_config *out, char err[LOONG_ERRLEN])
{
    memset(out, 0, sizeof *out);
    char *text = cli_read_text(path, "--torchtitan-toml", err);
    if (!text) return -1;
    static tt_in t; /* the knobs point into its document: held (one job per process) */
    json_decref(t.root);
    memset(&t, 0, sizeof t);
    t.root = cli_toml_parse(text, "--torchtitan-toml", err);
    free(text);
    if (!t.root) return -1;
    const char *sec;
    json_t *tab;
    json_object_foreach(t.root, sec, tab) if (!json_is_object(tab)) return fail(
        err, "%.40s is a key outside a section: torchtitan's keys are in [sections]", sec);
    tt_job j = {0};
    /* the degrees first: data parallelism and the split read them */
    int rc = read_model(&t, given, out, &j, err);
    if (rc == 0) rc = read_cp(&t, out, &j, err);
    if (rc == 0) rc = read_tp(&t, out, &j, err);
    if (rc == 0) rc = read_pp(&t, given, out, &j, err);
    if (rc == 0) rc = read_dp(&t, given, out, &j, err);
    if (rc == 0) rc = read_training(&t, out, &j, err);
    if (rc == 0) rc = read_ac(&t, out, &j, err);
    if (rc == 0) rc = read_loss(&t, out, &j, err);
    if (rc < 0) return -1;
    long ep;
    if (count_key(&t, "parallelism", "expert_parallel_degree", 1, 1, &ep, err) < 0) return -1;
    if (ep > 1) note(&t, "parallelism.expert_parallel_degree %ld (a dense model: no effect)", ep);
    out->val[KNOB_ATTENTION_DROPOUT] = "0"; /* torchtitan's llama3 has no dropout */
    out->val[KNOB_HIDDEN_DROPOUT] = "0";
    note_rest(&t);
    snprintf(out->torchtitan_note, sizeof out->torchtitan_note, "%s", t.note);
    return 0;
}

/* ---- out ---- */

typedef struct tt_out {
    char toml[4096], gaps[1024];
    size_t n, ng;
    int ngaps;
} tt_out;

static void line(tt_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (o->n < sizeof o->toml) o->n += (size_t)vsnprintf(o->toml + o->n, sizeof o->toml - o->n, fmt, ap);
    va_end(ap);
    if (o->n < sizeof o->toml) o->n += (size_t)snprintf(o->toml + o->n, sizeof o->toml - o->n, "\n");
}

static void gap(tt_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (o->ng < sizeof o->gaps)
        o->ng += (size_t)snprintf(o->gaps + o->ng, sizeof o->gaps - o->ng, "# not in torchtitan: ");
    if (o->ng < sizeof o->gaps) o->ng += (size_t)vsnprintf(o->gaps + o->ng, sizeof o->gaps - o->ng, fmt, ap);
    if (o->ng < sizeof o->gaps) o->ng += (size_t)snprintf(o->gaps + o->ng, sizeof o->gaps - o->ng, "\n");
    va_end(ap);
    o->ngaps++;
}

static void emit_model(tt_out *o, const config *c)
{
    int f = -1;
    for (int i = 0; i < NFLAVORS; i++)
        if (!strcmp(c->model.name, flavors[i].preset)) f = i;
    line(o, "[model]");
    line(o, "name = \"llama3\"");
    if (f >= 0)
        line(o, "flavor = \"%s\"", flavors[f].flavor);
    else
        gap(o, "--model %s (llama3's flavors are 8B, 70B, 405B: register one, or read back with --model)",
            c->model.name);
    if (model_moe(&c->model)) /* written as llama3 above: its experts, EP and routing are not in the file */
        gap(o, "a mixture of experts (%d experts, --ep %d): torchtitan runs experts in its own models (deepseek_v3, "
               "llama4) with [parallelism] expert_parallel_degree; this file is a dense llama3's",
            c->model.experts, c->ep);
    if (c->precision == PRECISION_MXFP8) line(o, "converters = [\"mx\"]");
    if (c->precision == PRECISION_FP8_CURRENT || c->precision == PRECISION_FP8_DELAYED)
        line(o, "converters = [\"float8\"]");
    if (c->precision == PRECISION_FP8_DELAYED)
        gap(o, "--precision fp8-delayed (torchao's float8 scales by the current tensor: fp8-current)");
}

/* The split's weights and stages per rank. */
static void emit_pp(tt_out *o, const config *c)
{
    static const char *const names[] = {
        [SCHED_1F1B] = "1F1B", [SCHED_GPIPE] = "GPipe", [SCHED_INTERLEAVED] = "Interleaved1F1B"};
    line(o, "pipeline_parallel_degree = %d", c->pp);
    if (c->pp == 1) return;
    line(o, "pipeline_parallel_schedule = \"%s\"", names[c->schedule]);
    line(o, "pipeline_parallel_microbatch_size = %d", c->batch);
    line(o, "pipeline_parallel_first_stage_less_layers = %d", c->pp_embed_slot ? 1 : 0);
    line(o, "pipeline_parallel_last_stage_less_layers = %d", c->pp_loss_slot ? 1 : 0);
    int eff = c->model.layers + c->pp_embed_slot + c->pp_loss_slot;
    if (c->schedule == SCHED_INTERLEAVED && c->vpp != 2)
        line(o, "pipeline_parallel_layers_per_stage = %d", eff / (c->pp * c->vpp));
    if (c->pp_first || c->pp_last)
        gap(o, "--pp-first-layers/--pp-last-layers (torchtitan's split gives the end stages less_layers fewer, or "
               "module_fqns_per_model_part)");
}

static void emit_cp(tt_out *o, const config *c)
{
    int ph = c->p_head, ps = c->p_seq;
    if (ph > 1)
        gap(o, "head parallelism P_h = %d (torchtitan's CP has no all-to-all: emitted as a ring of %d)", ph, ph * ps);
    line(o, "context_parallel_degree = %d", ph * ps);
    if (ph * ps == 1) return;
    line(o, "context_parallel_rotate_method = \"%s\"", c->ring == RING_ALLGATHER ? "allgather" : "alltoall");
    if (c->ring != RING_SINGLE && c->ring != RING_ALLGATHER)
        gap(o, "--ring %s (torchtitan's CP is one ring: alltoall rotation)", ring_name(c->ring));
    if (c->partition != PART_ZIGZAG)
        gap(o, "--partition %s (torchtitan balances head and tail: zigzag)", partition_name(c->partition));
    if (c->ring == RING_ALLGATHER && c->kv_stride)
        gap(o, "--kv-stride %d (torchtitan gathers all KV heads)", c->kv_stride);
}

static void emit_dp(tt_out *o, const config *c)
{
    bool cp = c->p_head * c->p_seq > 1;
    if (c->zero == 0 && c->dp > 1)
        line(o, "data_parallel_replicate_degree = %d\ndata_parallel_shard_degree = 1", c->dp);
    else
        line(o, "data_parallel_replicate_degree = 1\ndata_parallel_shard_degree = %d", c->dp);
    if (c->zero == 2) line(o, "fsdp_reshard_after_forward = \"never\"");
    if (c->zero == 0 && cp) gap(o, "--zero 0 with context parallelism (torchtitan shards over cp with FSDP)");
    if (c->zero == 0 && c->dp > 1 && (c->tp > 1 || c->pp > 1))
        gap(o, "--zero 0 with TP or PP (torchtitan's DDP is 1-D)");
    if (c->zero == 1) gap(o, "--zero 1 (torchtitan shards with FSDP: ZeRO-3)");
    if (c->zero >= 2 && c->dp == 1 && !cp) gap(o, "--zero %d over one rank (torchtitan applies no FSDP then)", c->zero);
}

static void emit_ac(tt_out *o, const config *c)
{
    int chunk = c->model.layers / (c->pp * c->vpp), every = 0;
    line(o, "[activation_checkpoint]");
    switch (c->recompute) {
    case RECOMPUTE_NONE: line(o, "mode = \"none\""); return;
    case RECOMPUTE_SCPP: line(o, "mode = \"selective\"\nselective_ac_option = \"op\""); return;
    case RECOMPUTE_SELECTIVE:
        gap(o, "--recompute selective (Megatron's modules: torchtitan selects by op or by layer)");
        line(o, "mode = \"selective\"\nselective_ac_option = \"op\"");
        return;
    case RECOMPUTE_FULL:
        if (c->recompute_method == RECOMPUTE_UNIFORM && c->recompute_layers == 1) {
            line(o, "mode = \"full\"");
            return;
        }
        for (int n = 2; c->recompute_method == RECOMPUTE_BLOCK && n <= chunk && !every; n++)
            if (chunk / n == c->recompute_layers) every = n;
        if (every) {
            line(o, "mode = \"selective\"\nselective_ac_option = \"%d\"", every);
            return;
        }
        gap(o, "--recompute-method %s --recompute-num-layers %d (torchtitan re-runs every block, or every N-th)",
            c->recompute_method == RECOMPUTE_BLOCK ? "block" : "uniform", c->recompute_layers);
        line(o, "mode = \"full\"");
        return;
    }
}

int cli_torchtitan_emit(FILE *f, const config *c)
{
    static tt_out o;
    memset(&o, 0, sizeof o);
    emit_model(&o, c);
    line(&o, "\n[training]");
    bool pp = c->pp > 1;
    line(&o, "local_batch_size = %d", pp ? c->batch * c->micro_batches : c->batch);
    line(&o, "global_batch_size = %d", c->batch * c->micro_batches * c->dp);
    line(&o, "seq_len = %llu", (unsigned long long)c->seq);
    line(&o, "mixed_precision_param = \"%s\"", c->act_bytes == 2 ? "bfloat16" : "float32");
    if (c->grad_reduce == GRAD_REDUCE_BF16) line(&o, "mixed_precision_reduce = \"bfloat16\"");
    bool fsdp = c->zero >= 2 || c->p_head * c->p_seq > 1;
    if (c->act_bytes == 2 && !fsdp && (c->tp > 1 || pp))
        gap(&o, "bf16 under TP or PP without FSDP (torchtitan's mixed precision needs FSDP there)");
    line(&o, "\n[parallelism]");
    emit_dp(&o, c);
    line(&o, "tensor_parallel_degree = %d", c->tp);
    if (c->tp > 1 && !c->sequence_parallel) gap(&o, "--sequence-parallel off (torchtitan's TP shards the norms)");
    if (c->tp > 1 && c->tp_overlap) line(&o, "enable_async_tensor_parallel = true");
    emit_cp(&o, c);
    emit_pp(&o, c);
    line(&o, "");
    emit_ac(&o, c);
    /* async TP needs the model compiled; a fused loss at TP 1 the loss */
    bool loss = c->tp == 1 && c->cross_entropy == CE_FUSED, model = c->tp > 1 && c->tp_overlap;
    if (loss || model)
        line(&o, "\n[compile]\nenable = true\ncomponents = [%s]", model ? "\"model\", \"loss\"" : "\"loss\"");
    if (c->tp > 1 && c->cross_entropy == CE_EAGER)
        gap(&o, "--cross-entropy eager at TP > 1 (torchtitan's loss-parallel cross-entropy is fused)");
    if (c->attention == ATTN_UNFUSED) gap(&o, "--attention unfused (torchtitan runs SDPA)");
    if (c->attention_dropout > 0 || c->hidden_dropout > 0) gap(&o, "dropout (torchtitan's llama3 has none)");
    if (c->docs) gap(&o, "--docs (packed documents: torchtitan's flex/varlen flavors read them from the data)");
    if (c->nccl_algo != COLL_ALGO_AUTO || c->nccl_proto != COLL_PROTO_AUTO)
        gap(&o, "--nccl-algo/--nccl-proto (set NCCL_ALGO / NCCL_PROTO in the environment)");
    if (!c->kv_replication) gap(&o, "--kv-replication off");
    int world = config_world(c), per = c->gpus_per_node;
    int rc = fprintf(f,
                     "%s# torchtitan v0.2.2 job file: torchrun --nnodes %d --nproc-per-node %d -m torchtitan.train "
                     "--job.config_file FILE\n%s",
                     o.gaps, world % per ? 1 : world / per, world % per ? world : per, o.toml);
    return rc < 0 || ferror(f) ? -1 : o.ngaps;
}

/*
 * model_hf: a Hugging Face config.json as a model (model.h's
 * model_parse_hf). It reads the dense decoder families whose block is
 * loong's (pre-norm, rotary, gated MLP): Llama, Qwen2/2.5/3, Mistral,
 * Gemma/Gemma 2, and the mixtures of experts Mixtral, Qwen2-MoE, Qwen3-MoE
 * and DeepSeek-V2/V3 (with MLA). It is not a general transformers config
 * reader: an expert layout loong does not model (experts every N-th
 * layer, dense layers listed by index) is refused, and every key that does
 * not change loong's cost or memory model is named in m->unmodelled, never
 * dropped silently.
 *
 * Key names and their defaults when absent: transformers'
 * models/<family>/configuration_<family>.py (LlamaConfig, Qwen2Config,
 * Qwen3Config, MistralConfig, GemmaConfig, Gemma2Config).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "model.h"

/* The experts' count under its three names (Mixtral's, Qwen-MoE's,
 * DeepSeek's). */
static const char *const expert_keys[] = {"num_local_experts", "num_experts", "n_routed_experts"};

/* The family's defaults for the keys a config may leave out. */
typedef struct hf_family {
    const char *model_type;
    bool tied;    /* tie_word_embeddings' default */
    int qkv_bias; /* bias on Q, K, V whatever attention_bias says (Qwen2's) */
    bool sliding; /* sliding_window applies only with use_sliding_window (Qwen2's) */
} hf_family;

static const hf_family families[] = {
    {"llama", false, MODEL_BIAS_NONE, false},       {"mistral", false, MODEL_BIAS_NONE, false},
    {"qwen2", false, MODEL_BIAS_QKV, true},         {"qwen3", false, MODEL_BIAS_NONE, true},
    {"gemma", true, MODEL_BIAS_NONE, false},        {"gemma2", true, MODEL_BIAS_NONE, false},
    {"mixtral", false, MODEL_BIAS_NONE, false},     {"qwen2_moe", false, MODEL_BIAS_QKV, true},
    {"qwen3_moe", false, MODEL_BIAS_NONE, true},    {"deepseek_v2", false, MODEL_BIAS_NONE, false},
    {"deepseek_v3", false, MODEL_BIAS_NONE, false},
};

/* Keys loong consumes: each changes the model (shape, parameters, memory)
 * or says which family's defaults apply. */
static const char *const modelled[] = {"hidden_size",
                                       "intermediate_size",
                                       "num_attention_heads",
                                       "num_key_value_heads",
                                       "head_dim",
                                       "num_hidden_layers",
                                       "vocab_size",
                                       "tie_word_embeddings",
                                       "attention_bias",
                                       "sliding_window",
                                       "use_sliding_window",
                                       "model_type",
                                       "num_local_experts",
                                       "num_experts",
                                       "n_routed_experts",
                                       "num_experts_per_tok",
                                       "moe_intermediate_size",
                                       "shared_expert_intermediate_size",
                                       "n_shared_experts",
                                       "first_k_dense_replace",
                                       "decoder_sparse_step",
                                       "mlp_only_layers",
                                       "moe_layer_freq",
                                       "q_lora_rank",
                                       "kv_lora_rank",
                                       "qk_nope_head_dim",
                                       "qk_rope_head_dim",
                                       "v_head_dim"};

/* Whether loong models key at value v: a key it consumes, or one whose
 * value is what loong computes anyway (SiLU's gated MLP is loong's
 * SwiGLU; no MLP bias; no attention dropout). */
static bool is_modelled(const char *key, const json_t *v)
{
    for (size_t i = 0; i < sizeof modelled / sizeof *modelled; i++)
        if (!strcmp(key, modelled[i])) return true;
    const char *s = json_string_value(v);
    if (!strcmp(key, "hidden_act") || !strcmp(key, "hidden_activation")) return s && !strcmp(s, "silu");
    if (!strcmp(key, "mlp_bias")) return json_is_false(v);
    if (!strcmp(key, "attention_dropout")) return json_is_number(v) && json_number_value(v) == 0;
    return false;
}

/* The integer at key, or dflt when absent or null; -1 with a message when
 * it is another type or out of int's range. */
static int hf_int(const json_t *j, const char *key, int dflt, int *out, const char *file, char err[LOONG_ERRLEN])
{
    const json_t *v = json_object_get(j, key);
    *out = dflt;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (1 << 30)) {
        snprintf(err, LOONG_ERRLEN, "%s: '%s' must be a non-negative integer", file, key);
        return -1;
    }
    *out = (int)json_integer_value(v);
    return 0;
}

/* A required size: present, an integer. */
static int hf_size(const json_t *j, const char *key, int *out, const char *file, char err[LOONG_ERRLEN])
{
    if (!json_object_get(j, key)) {
        snprintf(err, LOONG_ERRLEN, "%s: no '%s': not a Hugging Face config.json of a dense decoder model", file, key);
        return -1;
    }
    return hf_int(j, key, 0, out, file, err);
}

/* The model's name: the last part of _name_or_path, else the file's name
 * without ".json" (its directory's for a file called config.json). */
static void hf_name(const json_t *j, const char *file, model *m)
{
    const char *np = json_string_value(json_object_get(j, "_name_or_path"));
    if (np && *np && strcmp(np, "./")) {
        const char *b = strrchr(np, '/');
        snprintf(m->name, sizeof m->name, "%.63s", b && b[1] ? b + 1 : np);
        return;
    }
    char path[512];
    snprintf(path, sizeof path, "%s", file);
    char *base = strrchr(path, '/');
    if (base && !strcmp(base + 1, "config.json")) {
        *base = '\0';
        base = strrchr(path, '/');
    }
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 5 && !strcmp(base + n - 5, ".json")) base[n - 5] = '\0';
    snprintf(m->name, sizeof m->name, "%.63s", *base ? base : "hf-model");
}

/* A family's defaults; Llama's for an unknown model_type (the common base). */
static const hf_family *hf_family_of(const json_t *j)
{
    const char *t = json_string_value(json_object_get(j, "model_type"));
    for (size_t i = 0; t && i < sizeof families / sizeof *families; i++)
        if (!strcmp(t, families[i].model_type)) return &families[i];
    return &families[0];
}

/* A mixture of experts' keys (transformers' MixtralConfig,
 * Qwen2MoeConfig, Qwen3MoeConfig, DeepseekV2Config, DeepseekV3Config):
 * the experts, top-k and expert width (Mixtral's is intermediate_size,
 * its dense one), the shared experts' width, the dense leading layers,
 * and experts every N-th layer: DeepSeek's moe_layer_freq in the blocks
 * l % N == 0 (modeling_deepseek.py), Qwen's decoder_sparse_step in the
 * blocks (l + 1) % N == 0 (modeling_qwen2_moe.py). Dense layers listed by
 * index (mlp_only_layers) are refused. */
static int hf_experts(const json_t *j, model *m, const char *file, char err[LOONG_ERRLEN])
{
    for (size_t i = 0; i < sizeof expert_keys / sizeof *expert_keys && !m->experts; i++)
        if (hf_int(j, expert_keys[i], 0, &m->experts, file, err) < 0) return -1;
    if (!m->experts) return 0;
    int step = 1, freq = 1, shared = 0;
    const json_t *only = json_object_get(j, "mlp_only_layers");
    if (hf_int(j, "num_experts_per_tok", 0, &m->top_k, file, err) < 0 ||
        hf_int(j, "moe_intermediate_size", m->ffn, &m->expert_ffn, file, err) < 0 ||
        hf_int(j, "shared_expert_intermediate_size", 0, &m->shared_ffn, file, err) < 0 ||
        hf_int(j, "n_shared_experts", 0, &shared, file, err) < 0 ||
        hf_int(j, "first_k_dense_replace", 0, &m->dense_layers, file, err) < 0 ||
        hf_int(j, "decoder_sparse_step", 1, &step, file, err) < 0 ||
        hf_int(j, "moe_layer_freq", 1, &freq, file, err) < 0)
        return -1;
    long long width = (long long)shared * m->expert_ffn;            /* each up to 2^30 */
    if (shared) m->shared_ffn = width <= 1 << 24 ? (int)width : -1; /* model_validate names it out of range */
    if (only && json_array_size(only) > 0) {
        snprintf(err, LOONG_ERRLEN,
                 "%s: dense layers listed by index (mlp_only_layers) are not modelled: loong's dense blocks lead "
                 "(first_k_dense_replace) or recur every N-th block (decoder_sparse_step, moe_layer_freq)",
                 file);
        return -1;
    }
    if (step != 1 && freq != 1) {
        snprintf(err, LOONG_ERRLEN,
                 "%s: decoder_sparse_step (%d) and moe_layer_freq (%d) both set the experts' period: "
                 "keep one",
                 file, step, freq);
        return -1;
    }
    m->moe_freq = step != 1 ? step : freq;
    m->moe_phase = step > 1 ? step - 1 : 0; /* model_validate names a period out of range */
    if (m->moe_freq == 1) m->moe_freq = 0;
    return 0;
}

/* MLA's keys (DeepseekV2Config): with kv_lora_rank, the head widths, and
 * attention at their mean on every head (model.h). */
static int hf_mla(const json_t *j, model *m, const char *file, char err[LOONG_ERRLEN])
{
    if (hf_int(j, "kv_lora_rank", 0, &m->kv_lora, file, err) < 0) return -1;
    if (!m->kv_lora) return 0;
    if (hf_int(j, "q_lora_rank", 0, &m->q_lora, file, err) < 0 ||
        hf_int(j, "qk_nope_head_dim", 0, &m->qk_nope, file, err) < 0 ||
        hf_int(j, "qk_rope_head_dim", 0, &m->qk_rope, file, err) < 0 ||
        hf_int(j, "v_head_dim", 0, &m->v_dim, file, err) < 0)
        return -1;
    long long mean = ((long long)m->qk_nope + m->qk_rope + m->v_dim) / 2;
    m->head_dim = mean <= 1 << 16 ? (int)mean : -1; /* model_validate names the widths out of range */
    m->kv_heads = m->heads;
    return 0;
}

/* tie_word_embeddings, attention_bias and sliding_window, with the family's
 * defaults. */
static int hf_optional(const json_t *j, const hf_family *f, model *m, const char *file, char err[LOONG_ERRLEN])
{
    const json_t *tie = json_object_get(j, "tie_word_embeddings"), *bias = json_object_get(j, "attention_bias");
    if ((tie && !json_is_boolean(tie)) || (bias && !json_is_boolean(bias))) {
        snprintf(err, LOONG_ERRLEN, "%s: tie_word_embeddings and attention_bias are true or false", file);
        return -1;
    }
    m->tied = tie ? json_is_true(tie) : f->tied;
    m->bias = bias && json_is_true(bias) ? MODEL_BIAS_ALL : f->qkv_bias;
    if (hf_int(j, "sliding_window", 0, &m->window, file, err) < 0) return -1;
    if (f->sliding && !json_is_true(json_object_get(j, "use_sliding_window"))) m->window = 0;
    return 0;
}

/* Every key loong does not model, "a, b, c", into m->unmodelled (cut with
 * "..." when long). */
static void hf_unmodelled(const json_t *j, model *m)
{
    const char *key;
    const json_t *v;
    size_t n = 0, cap = sizeof m->unmodelled;
    m->unmodelled[0] = '\0';
    json_object_foreach((json_t *)j, key, v)
    {
        if (is_modelled(key, v)) continue;
        size_t need = strlen(key) + (n ? 2 : 0);
        if (n + need + 4 >= cap) {
            snprintf(m->unmodelled + n, cap - n, "%s...", n ? ", " : "");
            return;
        }
        n += (size_t)snprintf(m->unmodelled + n, cap - n, "%s%s", n ? ", " : "", key);
    }
}

int model_parse_hf(const char *text, const char *file, model *m, char err[LOONG_ERRLEN])
{
    memset(m, 0, sizeof *m);
    json_error_t je;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!j || !json_is_object(j)) {
        snprintf(err, LOONG_ERRLEN,
                 "%s:%d: not valid JSON (%s): --model reads a loong model file or a Hugging Face "
                 "config.json",
                 file, j ? 1 : je.line, j ? "not an object" : je.text);
        json_decref(j);
        return -1;
    }
    const hf_family *f = hf_family_of(j);
    int rc = hf_size(j, "hidden_size", &m->hidden, file, err) < 0 ||
                     hf_size(j, "intermediate_size", &m->ffn, file, err) < 0 ||
                     hf_size(j, "num_attention_heads", &m->heads, file, err) < 0 ||
                     hf_size(j, "num_hidden_layers", &m->layers, file, err) < 0 ||
                     hf_size(j, "vocab_size", &m->vocab, file, err) < 0
                 ? -1
                 : 0;
    /* absent: MHA, and head_dim = hidden / heads (LlamaConfig) */
    if (rc == 0) rc = hf_int(j, "num_key_value_heads", m->heads, &m->kv_heads, file, err);
    if (rc == 0) rc = hf_int(j, "head_dim", m->heads ? m->hidden / m->heads : 0, &m->head_dim, file, err);
    if (rc == 0) rc = hf_optional(j, f, m, file, err);
    if (rc == 0) rc = hf_experts(j, m, file, err) < 0 || hf_mla(j, m, file, err) < 0 ? -1 : 0;
    if (rc == 0) {
        hf_name(j, file, m);
        hf_unmodelled(j, m);
        if (model_validate(m, err) < 0) {
            char msg[LOONG_ERRLEN];
            snprintf(msg, sizeof msg, "%s: %s", file, err);
            snprintf(err, LOONG_ERRLEN, "%s", msg);
            rc = -1;
        }
    }
    json_decref(j);
    return rc;
}

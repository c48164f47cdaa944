/* model: presets, model files and parameter counts. See model.h. */
#include "model.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "infile.h"
#include "xalloc.h"

/* A preset: the sizes; none has the optional keys. */
#define PRESET(n, L, h, H, kv, d, f, v)                                                                                \
    {                                                                                                                  \
        .name = n, .layers = L, .hidden = h, .heads = H, .kv_heads = kv, .head_dim = d, .ffn = f, .vocab = v           \
    }
/* DeepSeek's: MLA (q_lora, kv_lora; nope, rope and v dims 128, 64, 128,
 * so head_dim (128 + 64 + 128) / 2 = 160 and kv_heads = heads), experts
 * with shared ones (n_shared x moe_intermediate_size) after k dense blocks */
#define DEEPSEEK_PRESET(n, L, h, H, f, v, E, k, fe, shared, dense)                                                     \
    {                                                                                                                  \
        .name = n, .layers = L, .hidden = h, .heads = H, .kv_heads = H, .head_dim = 160, .ffn = f, .vocab = v,         \
        .experts = E, .top_k = k, .expert_ffn = fe, .shared_ffn = shared, .dense_layers = dense, .q_lora = 1536,       \
        .kv_lora = 512, .qk_nope = 128, .qk_rope = 64, .v_dim = 128                                                    \
    }
#define MOE_PRESET(n, L, h, H, kv, d, f, v, E, k, fe)                                                                  \
    {                                                                                                                  \
        .name = n, .layers = L, .hidden = h, .heads = H, .kv_heads = kv, .head_dim = d, .ffn = f, .vocab = v,          \
        .experts = E, .top_k = k, .expert_ffn = fe                                                                     \
    }
static const model presets[] = {
    /*     name           L    hidden H    H_kv d    ffn    vocab */
    PRESET("llama3-8b", 32, 4096, 32, 8, 128, 14336, 128256),
    PRESET("llama3-70b", 80, 8192, 64, 8, 128, 28672, 128256),
    PRESET("llama3-405b", 126, 16384, 128, 8, 128, 53248, 128256),
    PRESET("7b-mha", 32, 4096, 32, 32, 128, 11008, 32000),
    PRESET("7b-gqa", 32, 4096, 32, 8, 128, 11008, 32000),
    PRESET("tiny", 2, 256, 8, 2, 32, 512, 1000),
    /* Mixtures of experts: the Hugging Face config.json of each
     * (mistralai/Mixtral-8x7B-v0.1, Qwen/Qwen3-30B-A3B, Qwen/Qwen3-235B-A22B);
     * ffn is their dense intermediate_size, which no block uses */
    MOE_PRESET("mixtral-8x7b", 32, 4096, 32, 8, 128, 14336, 32000, 8, 2, 14336),
    MOE_PRESET("qwen3-30b-a3b", 48, 2048, 32, 4, 128, 6144, 151936, 128, 8, 768),
    MOE_PRESET("qwen3-235b-a22b", 94, 4096, 64, 4, 128, 12288, 151936, 128, 8, 1536),
    MOE_PRESET("tiny-moe", 2, 256, 8, 2, 32, 512, 1000, 8, 2, 128),
    /* deepseek-ai/DeepSeek-V2 and DeepSeek-V3's config.json (V3's
     * multi-token prediction module is not counted) */
    DEEPSEEK_PRESET("deepseek-v2", 60, 5120, 128, 12288, 102400, 160, 6, 1536, 2 * 1536, 1),
    DEEPSEEK_PRESET("deepseek-v3", 61, 7168, 128, 18432, 129280, 256, 8, 2048, 2048, 3),
    /* moonshotai/Kimi-K2-Instruct's config.json: DeepSeek-V3's block with
     * 64 heads, 384 experts and one dense block (1.026T parameters by
     * these shapes; its report says 1.04T) */
    DEEPSEEK_PRESET("kimi-k2", 61, 7168, 64, 18432, 163840, 384, 8, 2048, 2048, 1),
};
#define NPRESETS (sizeof presets / sizeof presets[0])

const char *model_preset_names(void)
{
    return "llama3-8b, llama3-70b, llama3-405b, 7b-mha, 7b-gqa, tiny, mixtral-8x7b, qwen3-30b-a3b, qwen3-235b-a22b, "
           "tiny-moe, deepseek-v2, deepseek-v3, kimi-k2";
}

int model_preset(const char *name, model *m, char err[LOONG_ERRLEN])
{
    for (size_t i = 0; i < NPRESETS; i++)
        if (strcmp(presets[i].name, name) == 0) {
            *m = presets[i];
            return 0;
        }
    snprintf(err, LOONG_ERRLEN, "unknown model '%s': use one of %s, or a model file path", name, model_preset_names());
    return -1;
}

/* The experts' keys: none, or experts, top_k and expert_ffn together
 * (top_k <= experts), shared_ffn only beside them. */
static int model_validate_experts(const model *m, char err[LOONG_ERRLEN])
{
    if (m->experts < 0 || m->top_k < 0 || m->expert_ffn < 0 || m->shared_ffn < 0 || m->experts > 4096 ||
        m->expert_ffn > 1 << 24 || m->shared_ffn > 1 << 24)
        snprintf(err, LOONG_ERRLEN,
                 "model '%s': num_experts, moe_intermediate_size or shared_expert_intermediate_size "
                 "out of range (experts at most 4096, widths at most 2^24)",
                 m->name);
    else if ((m->experts > 0) != (m->top_k > 0) || (m->experts > 0) != (m->expert_ffn > 0) ||
             (m->shared_ffn > 0 && !m->experts))
        snprintf(err, LOONG_ERRLEN,
                 "model '%s': a mixture of experts needs num_experts, num_experts_per_tok and moe_intermediate_size "
                 "together (shared_expert_intermediate_size beside them): give all three, or none for a dense MLP",
                 m->name);
    else if (m->top_k > m->experts)
        snprintf(err, LOONG_ERRLEN, "model '%s': num_experts_per_tok (%d) exceeds num_experts (%d)", m->name, m->top_k,
                 m->experts);
    else if (m->dense_layers < 0 || m->dense_layers > m->layers || (m->dense_layers && !m->experts))
        snprintf(err, LOONG_ERRLEN,
                 "model '%s': first_k_dense_replace (%d) applies to a mixture of experts, within its "
                 "%d layers",
                 m->name, m->dense_layers, m->layers);
    else if (m->moe_freq < 0 || m->moe_freq > m->layers || (m->moe_freq > 1 && !m->experts) || m->moe_phase < 0 ||
             (m->moe_freq > 1 && m->moe_phase >= m->moe_freq) || (m->moe_freq <= 1 && m->moe_phase))
        snprintf(err, LOONG_ERRLEN,
                 "model '%s': the experts' period (moe_layer_freq or decoder_sparse_step %d) applies to a mixture "
                 "of experts, from 1 (experts in every block) to its %d layers",
                 m->name, m->moe_freq, m->layers);
    else
        return 0;
    return -1;
}

/* MLA's keys: kv_lora_rank with the three head widths, a mean head_dim
 * and kv_heads = heads (model.h); q_lora_rank optional. */
static int model_validate_mla(const model *m, char err[LOONG_ERRLEN])
{
    long long sum = (long long)m->qk_nope + m->qk_rope + m->v_dim; /* each may be near INT_MAX until checked */
    if (!m->kv_lora && !m->q_lora && !m->qk_nope && !m->qk_rope && !m->v_dim) return 0;
    if (m->kv_lora <= 0 || m->q_lora < 0 || m->qk_nope <= 0 || m->qk_rope < 0 || m->v_dim <= 0 ||
        m->kv_lora > 1 << 16 || m->q_lora > 1 << 16 || m->qk_nope > 1 << 16 || m->qk_rope > 1 << 16 ||
        m->v_dim > 1 << 16)
        snprintf(err, LOONG_ERRLEN,
                 "model '%s': multi-head latent attention needs kv_lora_rank, qk_nope_head_dim and v_head_dim "
                 "(positive, at most 65536; qk_rope_head_dim and q_lora_rank may be 0)",
                 m->name);
    else if (sum % 2 || m->head_dim != sum / 2 || m->kv_heads != m->heads)
        snprintf(err, LOONG_ERRLEN,
                 "model '%s': under MLA give head_dim = (qk_nope + qk_rope + v) / 2 = %d (an even sum) and kv_heads = "
                 "heads = %d: attention runs on every head at their mean width",
                 m->name, (int)(sum / 2), m->heads);
    else
        return 0;
    return -1;
}

int model_validate(const model *m, char err[LOONG_ERRLEN])
{
    /* bounds far beyond any published model keep every product below 2^63 */
    const struct {
        const char *key;
        int v, max;
    } f[] = {
        {"layers", m->layers, 10000},       {"hidden", m->hidden, 1 << 20},     {"heads", m->heads, 1 << 16},
        {"kv_heads", m->kv_heads, 1 << 16}, {"head_dim", m->head_dim, 1 << 16}, {"ffn", m->ffn, 1 << 24},
        {"vocab", m->vocab, 1 << 24},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v <= 0 || f[i].v > f[i].max) {
            snprintf(err, LOONG_ERRLEN, "model '%s': %s = %d is outside 1..%d", m->name, f[i].key, f[i].v, f[i].max);
            return -1;
        }
    /* the name goes into every JSON output: it must be text */
    json_t *name = json_string(m->name);
    bool text = name != NULL;
    json_decref(name);
    for (const char *p = m->name; text && *p; p++)
        text = !iscntrl((unsigned char)*p);
    if (!text) {
        snprintf(err, LOONG_ERRLEN, "the model's name is not printable UTF-8: give it one with a 'name = ...' line");
        return -1;
    }
    if (m->bias < MODEL_BIAS_NONE || m->bias > MODEL_BIAS_ALL || m->window < 0) {
        snprintf(err, LOONG_ERRLEN, "model '%s': attention_bias or sliding_window out of range", m->name);
        return -1;
    }
    if (model_validate_experts(m, err) < 0 || model_validate_mla(m, err) < 0) return -1;
    if (m->kv_heads > m->heads || m->heads % m->kv_heads) {
        snprintf(err, LOONG_ERRLEN, "model '%s': heads (%d) must be a multiple of kv_heads (%d)", m->name, m->heads,
                 m->kv_heads);
        return -1;
    }
    return 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

const char *model_bias_name(int bias)
{
    static const char *const names[] = {"none", "qkv", "all"};
    return bias >= 0 && bias <= MODEL_BIAS_ALL ? names[bias] : "none";
}

int model_bias_parse(const char *s, int *out)
{
    for (int b = MODEL_BIAS_NONE; b <= MODEL_BIAS_ALL; b++)
        if (!strcmp(s, model_bias_name(b))) {
            *out = b;
            return 0;
        }
    return -1;
}

/* Keys of a model file, in the order of the bit that marks each seen: the
 * name, the 7 required sizes, then the optional keys (HF's names). */
static const char *const model_keys[] = {"name",
                                         "layers",
                                         "hidden",
                                         "heads",
                                         "kv_heads",
                                         "head_dim",
                                         "ffn",
                                         "vocab",
                                         "tie_word_embeddings",
                                         "attention_bias",
                                         "sliding_window",
                                         "num_experts",
                                         "num_experts_per_tok",
                                         "moe_intermediate_size",
                                         "shared_expert_intermediate_size",
                                         "first_k_dense_replace",
                                         "q_lora_rank",
                                         "kv_lora_rank",
                                         "qk_nope_head_dim",
                                         "qk_rope_head_dim",
                                         "v_head_dim",
                                         "moe_layer_freq",
                                         "decoder_sparse_step"};
#define MODEL_NREQUIRED   8  /* name .. vocab; name is optional too */
#define MODEL_KEY_EXPERTS 11 /* num_experts, the first of the experts' four */
#define MODEL_KEY_FREQ    21 /* moe_layer_freq, then decoder_sparse_step: one of them */

static int *model_field(model *m, int key)
{
    int *f[] = {NULL, &m->layers, &m->hidden, &m->heads, &m->kv_heads, &m->head_dim, &m->ffn, &m->vocab};
    return f[key];
}

static int model_key(const char *key)
{
    for (int k = 0; k < (int)(sizeof model_keys / sizeof *model_keys); k++)
        if (!strcmp(key, model_keys[k])) return k;
    return -1;
}

/* The value of an optional key (index k >= MODEL_NREQUIRED) into m. */
static int model_apply_optional(model *m, int k, const char *key, const char *val, char err[LOONG_ERRLEN])
{
    if (!strcmp(key, "tie_word_embeddings")) {
        if (strcmp(val, "true") && strcmp(val, "false")) {
            snprintf(err, LOONG_ERRLEN, "tie_word_embeddings is true or false, got '%.40s'", val);
            return -1;
        }
        m->tied = !strcmp(val, "true");
        return 0;
    }
    if (!strcmp(key, "attention_bias")) {
        if (model_bias_parse(val, &m->bias) < 0) {
            snprintf(err, LOONG_ERRLEN, "attention_bias is none, qkv (Q, K, V) or all (and the output), got '%.40s'",
                     val);
            return -1;
        }
        return 0;
    }
    if (k >= MODEL_KEY_FREQ) { /* the experts' period, counted from block 0 or from block N - 1 */
        if (units_parse_int(val, key, &m->moe_freq, err) < 0) return -1;
        m->moe_phase = k == MODEL_KEY_FREQ || m->moe_freq <= 1 ? 0 : m->moe_freq - 1;
        if (m->moe_freq == 1) m->moe_freq = 0; /* experts in every block, as without the key */
        return 0;
    }
    int *experts[] = {&m->experts, &m->top_k,   &m->expert_ffn, &m->shared_ffn, &m->dense_layers,
                      &m->q_lora,  &m->kv_lora, &m->qk_nope,    &m->qk_rope,    &m->v_dim};
    if (k >= MODEL_KEY_EXPERTS) return units_parse_int(val, key, experts[k - MODEL_KEY_EXPERTS], err);
    if (!strcmp(val, "none")) return 0;
    if (units_parse_int(val, key, &m->window, err) < 0) return -1;
    if (m->window < 0) {
        snprintf(err, LOONG_ERRLEN, "sliding_window must be a token count or none, got '%.40s'", val);
        return -1;
    }
    return 0;
}

/* Apply one `key = value` line; *seen marks the keys given so far (a key
 * given twice is an error, not "the last one wins"). Returns 0, or -1 with
 * the reason in err. */
static int model_apply_line(model *m, char *line, unsigned *seen, char err[LOONG_ERRLEN])
{
    char *eq = strchr(line, '=');
    if (!eq) {
        snprintf(err, LOONG_ERRLEN, "expected 'key = value', got '%.60s'", line);
        return -1;
    }
    *eq = '\0';
    char *key = trim(line), *val = trim(eq + 1);
    int k = model_key(key);
    if (k < 0) {
        snprintf(err, LOONG_ERRLEN,
                 "unknown key '%.20s' (keys: name, layers, hidden, heads, kv_heads, head_dim, ffn, vocab; the "
                 "optional ones, such as num_experts or moe_layer_freq, are in docs/concepts.md#models)",
                 key);
        return -1;
    }
    if (*seen & (1u << k)) {
        snprintf(err, LOONG_ERRLEN, "'%s' is given twice: keep one line", key);
        return -1;
    }
    *seen |= 1u << k;
    if (k >= MODEL_KEY_FREQ && (*seen & (3u << MODEL_KEY_FREQ)) == 3u << MODEL_KEY_FREQ) {
        snprintf(err, LOONG_ERRLEN,
                 "moe_layer_freq and decoder_sparse_step both give the experts' period: keep one (moe_layer_freq "
                 "counts from block 0, decoder_sparse_step from block N - 1)");
        return -1;
    }
    if (k >= MODEL_NREQUIRED) return model_apply_optional(m, k, key, val, err);
    if (k > 0) return units_parse_int(val, key, model_field(m, k), err);
    if (!*val || strlen(val) >= sizeof m->name) {
        snprintf(err, LOONG_ERRLEN, "name must be 1..%zu characters", sizeof m->name - 1);
        return -1;
    }
    strcpy(m->name, val);
    return 0;
}

/* The first character of text that is not white space. */
static char first_char(const char *text)
{
    while (isspace((unsigned char)*text))
        text++;
    return *text;
}

int model_parse(const char *text, const char *file, model *m, char err[LOONG_ERRLEN])
{
    if (first_char(text) == '{') return model_parse_hf(text, file, m, err);
    memset(m, 0, sizeof *m);
    const char *base = strrchr(file, '/');
    snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : file);
    char *copy = xstrdup(text, "a model file"), *cursor = copy, *buf, where[LOONG_ERRLEN];
    int lineno = 0, rc = 0;
    unsigned seen = 0;
    while (rc == 0 && (buf = infile_next_line(&cursor))) {
        lineno++;
        char *hash = strchr(buf, '#');
        if (hash) *hash = '\0';
        char *line = trim(buf);
        if (*line && model_apply_line(m, line, &seen, err) < 0) {
            snprintf(where, sizeof where, "%s:%d: ", file, lineno);
            loong_err_prefix(err, where);
            rc = -1;
        }
    }
    free(copy);
    for (int k = 1; rc == 0 && k < MODEL_NREQUIRED; k++)
        if (!(seen & (1u << k))) {
            snprintf(err, LOONG_ERRLEN, "%s: no '%s = ...' line: every key but name is required", file, model_keys[k]);
            rc = -1;
        }
    if (rc == 0 && model_validate(m, err) < 0) {
        snprintf(where, sizeof where, "%s: ", file);
        loong_err_prefix(err, where);
        rc = -1;
    }
    return rc;
}

int model_load_file(const char *path, model *m, char err[LOONG_ERRLEN])
{
    char *text = infile_read(path, "model file", INFILE_TEXT_MAX, NULL, err);
    if (!text) return -1;
    int rc = model_parse(text, path, m, err);
    free(text);
    return rc;
}

int model_resolve(const char *spec, model *m, char err[LOONG_ERRLEN])
{
    size_t n = strlen(spec);
    bool is_path = strchr(spec, '/') != NULL;
    const char *exts[] = {".model", ".conf", ".txt", ".json"};
    for (size_t i = 0; i < sizeof exts / sizeof *exts; i++) {
        size_t k = strlen(exts[i]);
        if (n > k && !strcmp(spec + n - k, exts[i])) is_path = true;
    }
    return is_path ? model_load_file(spec, m, err) : model_preset(spec, m, err);
}

uint64_t model_layer_bias_params_tp(const model *m, int tp)
{
    if (m->bias == MODEL_BIAS_NONE) return 0;
    uint64_t qkv = (uint64_t)model_tp_qkv_heads(m, tp) * (uint64_t)m->head_dim;
    return qkv + (m->bias == MODEL_BIAS_ALL ? (uint64_t)m->hidden : 0);
}

uint64_t model_layer_params(const model *m) { return model_layer_params_tp(m, 1); }

uint64_t model_embed_params_tp(const model *m, int tp)
{
    return ((uint64_t)m->vocab + (uint64_t)tp - 1) / (uint64_t)tp * (uint64_t)m->hidden;
}

uint64_t model_params(const model *m) { return model_params_tp(m, 1); }

/* MLA's projections on one of tp ranks (Megatron-Core's
 * MultiLatentAttention): the down projections and the latents' norms
 * replicated over TP, the up projections column-parallel. */
static uint64_t mla_params_tp(const model *m, int tp)
{
    uint64_t h = (uint64_t)m->hidden, H = (uint64_t)m->heads / (uint64_t)tp, ql = (uint64_t)m->q_lora,
             kl = (uint64_t)m->kv_lora, dqk = (uint64_t)(m->qk_nope + m->qk_rope);
    uint64_t q = ql ? h * ql + ql + ql * H * dqk : h * H * dqk;
    return q + h * (kl + (uint64_t)m->qk_rope) + kl + kl * H * (uint64_t)(m->qk_nope + m->v_dim);
}

/* A block's weights on one of tp ranks; moe: with the router and shared
 * experts in place of the dense SwiGLU. */
static uint64_t block_params_tp(const model *m, int tp, bool moe)
{
    uint64_t h = (uint64_t)m->hidden, d = (uint64_t)m->head_dim, t = (uint64_t)tp;
    uint64_t qkv = model_mla(m) ? mla_params_tp(m, tp) : h * (uint64_t)model_tp_qkv_heads(m, tp) * d;
    /* output projection, then the SwiGLU or the shared experts' */
    uint64_t rest =
        (uint64_t)m->heads * (uint64_t)model_v_dim(m) * h + 3 * h * (uint64_t)(moe ? m->shared_ffn : m->ffn);
    uint64_t router = moe ? h * (uint64_t)m->experts : 0; /* replicated over TP, as Megatron's TopKRouter is */
    return qkv + rest / t + router + 2 * h + model_layer_bias_params_tp(m, tp);
}

uint64_t model_layer_params_tp(const model *m, int tp) { return block_params_tp(m, tp, model_moe(m)); }

uint64_t model_block_params_tp(const model *m, int tp, int l) { return block_params_tp(m, tp, model_block_moe(m, l)); }

int model_moe_blocks_below(const model *m, int l)
{
    int n = 0;
    for (int i = 0; i < l && i < m->layers; i++)
        n += model_block_moe(m, i);
    return n;
}

int model_first_block(const model *m, bool moe)
{
    for (int l = 0; l < m->layers; l++)
        if (model_block_moe(m, l) == moe) return l;
    return -1;
}

uint64_t model_expert_params_tp(const model *m, int tp)
{
    return (uint64_t)m->experts * 3 * (uint64_t)m->hidden * (uint64_t)m->expert_ffn / (uint64_t)tp;
}

uint64_t model_head_params_tp(const model *m, int tp)
{
    return (m->tied ? 1 : 2) * model_embed_params_tp(m, tp) + (uint64_t)m->hidden;
}

uint64_t model_params_tp(const model *m, int tp)
{
    uint64_t blocks = 0;
    for (int l = 0; l < m->layers; l++)
        blocks += model_block_params_tp(m, tp, l) + (model_block_moe(m, l) ? model_expert_params_tp(m, tp) : 0);
    return blocks + model_head_params_tp(m, tp);
}

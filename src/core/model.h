/*
 * model: transformer shapes (presets and `key = value` model files) and the
 * per-model quantities every backend shares (parameter count).
 *
 * Low-level: depends only on units.
 *
 * Layer: core (libc and jansson only: it knows no predictor, measurement or backend).
 */
#ifndef LOONG_MODEL_H
#define LOONG_MODEL_H

#include "units.h"

typedef struct model {
    char name[64];
    int layers;   /* L: transformer blocks */
    int hidden;   /* model width */
    int heads;    /* H: query heads */
    int kv_heads; /* H_kv: key/value heads (GQA when < heads) */
    int head_dim; /* d */
    int ffn;      /* SwiGLU inner width */
    int vocab;    /* vocabulary (embedding and LM head) */
    /* The optional keys (0: absent; what each changes: docs/concepts.md#models) */
    bool tied;  /* tie_word_embeddings: the LM head is the embedding matrix (one V x hidden, not two) */
    int bias;   /* attention_bias: MODEL_BIAS_* (vectors added by the projections) */
    int window; /* sliding_window: keys each query sees (0: all); read, costed as full causal */
    /* Mixture of experts (0: a dense MLP; docs/moe.md): with experts > 0
     * every block's MLP is a router over `experts` SwiGLU experts of width
     * expert_ffn, each token going to top_k of them, beside shared experts
     * of total width shared_ffn that every token goes through (Qwen2-MoE's
     * shared_expert_intermediate_size; DeepSeek's n_shared_experts x
     * moe_intermediate_size). ffn is then the dense MLP's width, which no
     * block uses. */
    int experts;      /* num_experts (Mixtral's num_local_experts) */
    int top_k;        /* num_experts_per_tok */
    int expert_ffn;   /* moe_intermediate_size (Mixtral: intermediate_size) */
    int shared_ffn;   /* shared_expert_intermediate_size (0: none) */
    int dense_layers; /* first_k_dense_replace: the leading blocks keep a dense MLP of ffn */
    /* Past them, experts in every moe_freq-th block (0 and 1: in every
     * one): in block l when l % moe_freq == moe_phase. DeepSeek's
     * moe_layer_freq and Megatron's --moe-layer-freq N count from block 0
     * (phase 0); Qwen2-MoE's decoder_sparse_step and Llama 4's interleave
     * step from block N - 1 (phase N - 1). The other blocks keep the
     * dense MLP of ffn. */
    int moe_freq;
    int moe_phase;
    /* Multi-head latent attention (DeepSeek-V2/V3's MLA; 0: GQA): Q through
     * a rank-q_lora latent (0: one projection), K and V up from a shared
     * rank-kv_lora latent, per head qk_nope + qk_rope dims for Q and K and
     * v_dim for V. Attention then runs on H heads for K and V too
     * (kv_heads = heads, as Megatron-Core expands them for context
     * parallelism), and head_dim is the mean (qk_nope + qk_rope + v_dim)/2,
     * with which attention's FLOPs, 2 (d_qk + d_v) per (query, key) pair and
     * head, and the K and V bytes a ring moves, d_qk + d_v per head, are
     * exact. */
    int q_lora;           /* q_lora_rank */
    int kv_lora;          /* kv_lora_rank (> 0: MLA) */
    int qk_nope;          /* qk_nope_head_dim */
    int qk_rope;          /* qk_rope_head_dim */
    int v_dim;            /* v_head_dim */
    char unmodelled[640]; /* keys of the file read but not modelled, "a, b, c" ("": none); never serialised */
} model;

/* attention_bias: none; Q, K and V (Qwen2's); Q, K, V and the output
 * projection (Llama's, Qwen3's and Mistral's attention_bias = true). */
enum { MODEL_BIAS_NONE, MODEL_BIAS_QKV, MODEL_BIAS_ALL };
/* The spellings of attention_bias in model files and JSON ("none", "qkv", "all"). */
const char *model_bias_name(int bias);
int model_bias_parse(const char *s, int *out);

/* Fill m with the preset called name. Returns 0, or -1 with a message that
 * lists the presets. */
int model_preset(const char *name, model *m, char err[LOONG_ERRLEN]);

/* Comma-separated preset names, for --help. */
const char *model_preset_names(void);

/* Load a model file: one `key = value` per line (keys: name, layers, hidden,
 * heads, kv_heads, head_dim, ffn, vocab; optional tie_word_embeddings,
 * attention_bias, sliding_window, and the experts' num_experts,
 * num_experts_per_tok, moe_intermediate_size (the three together) and
 * shared_expert_intermediate_size), '#' starts a comment. Every key but name
 * and the optional ones is required, none twice; sizes are bounded
 * (model_validate). A file whose text starts with '{' is read as a Hugging
 * Face config.json (model_parse_hf). Returns 0, or -1 with a message naming
 * file:line. */
int model_load_file(const char *path, model *m, char err[LOONG_ERRLEN]);

/* The same from memory: text is the file's content, file names it in
 * messages (and gives the default name). */
int model_parse(const char *text, const char *file, model *m, char err[LOONG_ERRLEN]);

/* A Hugging Face config.json (model_hf.c): the dense Llama, Qwen2/2.5/3,
 * Mistral and Gemma families. Shape keys fill m; tie_word_embeddings,
 * attention_bias and sliding_window fill the optional fields (with each
 * model_type's default when absent); every other key is named in
 * m->unmodelled. Mixture-of-experts keys, a JSON that is not such a config,
 * or bad sizes: -1 with a one-line message naming file. */
int model_parse_hf(const char *text, const char *file, model *m, char err[LOONG_ERRLEN]);

/* Resolve --model: a preset name, or a path to a model file when the value
 * contains '/' or ends in ".model"/".conf"/".txt"/".json". */
int model_resolve(const char *spec, model *m, char err[LOONG_ERRLEN]);

/* Check internal consistency (positive sizes, H % H_kv == 0). */
int model_validate(const model *m, char err[LOONG_ERRLEN]);

/* Whether the blocks' MLPs are mixtures of experts, and whether block l's
 * is (the first dense_layers keep a dense one, and past them the blocks
 * off the moe_freq pattern). */
static inline bool model_moe(const model *m) { return m->experts > 0; }
static inline bool model_block_moe(const model *m, int l)
{
    return m->experts > 0 && l >= m->dense_layers && (m->moe_freq <= 1 || l % m->moe_freq == m->moe_phase);
}
/* Whether experts and dense MLPs interleave past the dense leading blocks
 * (moe_freq > 1). */
static inline bool model_moe_interleaved(const model *m) { return m->experts > 0 && m->moe_freq > 1; }
/* The blocks among the first l (0 <= l <= layers) whose MLP is a mixture
 * of experts: block l's index among the expert blocks when it is one. */
int model_moe_blocks_below(const model *m, int l);
/* The blocks whose MLP is a mixture of experts (0 for a dense model). */
static inline int model_moe_blocks(const model *m) { return model_moe_blocks_below(m, m->layers); }
/* The first block whose MLP is (moe) or is not a mixture of experts; -1
 * when none is. */
int model_first_block(const model *m, bool moe);
/* Whether attention is multi-head latent attention (MLA). */
static inline bool model_mla(const model *m) { return m->kv_lora > 0; }
/* The width of one head of V and of attention's output: v_dim under MLA,
 * else head_dim. */
static inline int model_v_dim(const model *m) { return model_mla(m) ? m->v_dim : m->head_dim; }

/* Heads the QKV projection produces: H query heads, H_kv K and H_kv V. */
static inline int model_qkv_heads(const model *m) { return m->heads + 2 * m->kv_heads; }
/* KV heads of one of tp tensor-parallel shards: H_kv / tp when tp divides
 * H_kv, else 1: with tp a multiple of H_kv each KV head is replicated on
 * tp / H_kv adjacent shards (config_validate refuses the rest). */
static inline int model_tp_kv_heads(const model *m, int tp) { return m->kv_heads % tp ? 1 : m->kv_heads / tp; }
/* QKV output heads of one TP shard: H / tp query heads, K and V of its KV heads. */
static inline int model_tp_qkv_heads(const model *m, int tp) { return m->heads / tp + 2 * model_tp_kv_heads(m, tp); }

/* Weights of one transformer block: QKV, output projection, three SwiGLU
 * matrices, two RMSNorm vectors and the attention biases. A mixture of
 * experts' block: the router (hidden x experts) and the shared experts'
 * three matrices in place of the SwiGLU, its routed experts counted apart
 * (model_expert_params_tp), since they are sharded and reduced over other
 * ranks. */
uint64_t model_layer_params(const model *m);
/* The bias vectors of one block's attention, of a TP shard's heads
 * (tp = 1: all): (H + 2 H_kv) d for qkv, + hidden for all (the output
 * projection's bias is replicated over TP, as Megatron's row-parallel
 * bias is). */
uint64_t model_layer_bias_params_tp(const model *m, int tp);

/* All weights: L blocks (their experts included) + embedding + LM head
 * (unless tied) + final norm. */
uint64_t model_params(const model *m);
/* The same held by one of tp tensor-parallel ranks (Megatron's shards):
 * the QKV, output and MLP weights divided by tp (QKV's K and V: of the
 * shard's model_tp_kv_heads(), replicas included), the norms replicated;
 * the embedding and LM head vocab-parallel over ceil(V/tp) rows each
 * (Megatron pads the vocabulary to a multiple of tp), one matrix when
 * tied. tp = 1: the above. */
uint64_t model_layer_params_tp(const model *m, int tp);
/* The same of block l: a dense leading block of a mixture of experts has
 * the SwiGLU of ffn in place of the router and shared experts (and no
 * routed experts). */
uint64_t model_block_params_tp(const model *m, int tp, int l);
/* The routed experts' weights of one block on one of tp tensor-parallel
 * ranks (expert TP = TP): experts x 3 x hidden x expert_ffn / tp; 0 for a
 * dense model. */
uint64_t model_expert_params_tp(const model *m, int tp);
uint64_t model_head_params_tp(const model *m, int tp);
uint64_t model_params_tp(const model *m, int tp);
/* One vocab-parallel embedding shard: ceil(V/tp) x hidden (with pp > 1 the
 * first stage holds it and the last stage the LM head, tied or not:
 * Megatron keeps a tied copy on the last stage, pipeline.c). */
uint64_t model_embed_params_tp(const model *m, int tp);

#endif

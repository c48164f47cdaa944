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
    int vocab;    /* vocabulary (untied embedding and LM head) */
} model;

/* Fill m with the preset called name. Returns 0, or -1 with a message that
 * lists the presets. */
int model_preset(const char *name, model *m, char err[LOONG_ERRLEN]);

/* Comma-separated preset names, for --help. */
const char *model_preset_names(void);

/* Load a model file: one `key = value` per line (keys: name, layers, hidden,
 * heads, kv_heads, head_dim, ffn, vocab), '#' starts a comment. Every key but
 * name is required, none twice; sizes are bounded (model_validate). Returns 0, or -1 with a message naming file:line.
 */
int model_load_file(const char *path, model *m, char err[LOONG_ERRLEN]);

/* The same from memory: text is the file's content, file names it in
 * messages (and gives the default name). */
int model_parse(const char *text, const char *file, model *m, char err[LOONG_ERRLEN]);

/* Resolve --model: a preset name, or a path to a model file when the value
 * contains '/' or ends in ".model"/".conf"/".txt". */
int model_resolve(const char *spec, model *m, char err[LOONG_ERRLEN]);

/* Check internal consistency (positive sizes, H % H_kv == 0). */
int model_validate(const model *m, char err[LOONG_ERRLEN]);

/* Heads the QKV projection produces: H query heads, H_kv K and H_kv V. */
static inline int model_qkv_heads(const model *m) { return m->heads + 2 * m->kv_heads; }
/* KV heads of one of tp tensor-parallel shards: H_kv / tp when tp divides
 * H_kv, else 1: with tp a multiple of H_kv each KV head is replicated on
 * tp / H_kv adjacent shards (config_validate refuses the rest). */
static inline int model_tp_kv_heads(const model *m, int tp) { return m->kv_heads % tp ? 1 : m->kv_heads / tp; }
/* QKV output heads of one TP shard: H / tp query heads, K and V of its KV heads. */
static inline int model_tp_qkv_heads(const model *m, int tp) { return m->heads / tp + 2 * model_tp_kv_heads(m, tp); }

/* Weights of one transformer block: QKV, output projection, three SwiGLU
 * matrices and two RMSNorm vectors. */
uint64_t model_layer_params(const model *m);

/* Weights outside the blocks: untied embedding, LM head, final norm. */
uint64_t model_head_params(const model *m);

/* All weights: L blocks + untied embedding + LM head + final norm. */
uint64_t model_params(const model *m);
/* The same held by one of tp tensor-parallel ranks (Megatron's shards):
 * the QKV, output and MLP weights divided by tp (QKV's K and V: of the
 * shard's model_tp_kv_heads(), replicas included), the norms replicated;
 * the embedding and LM head vocab-parallel over ceil(V/tp) rows each
 * (Megatron pads the vocabulary to a multiple of tp). tp = 1: the above. */
uint64_t model_layer_params_tp(const model *m, int tp);
uint64_t model_head_params_tp(const model *m, int tp);
uint64_t model_params_tp(const model *m, int tp);

#endif

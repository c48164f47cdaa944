/* config_json: a configuration as JSON, one member per knob, and its
 * hash. See config.h. */
#include "config.h"
#include "knobs.h"
#include "knobs_internal.h"
#include "recompute.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

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
    if (j && model_moe(m)) {
        json_object_set_new(j, "num_experts", json_integer(m->experts));
        json_object_set_new(j, "num_experts_per_tok", json_integer(m->top_k));
        json_object_set_new(j, "moe_intermediate_size", json_integer(m->expert_ffn));
    }
    if (j && m->shared_ffn) json_object_set_new(j, "shared_expert_intermediate_size", json_integer(m->shared_ffn));
    if (j && m->dense_layers) json_object_set_new(j, "first_k_dense_replace", json_integer(m->dense_layers));
    if (j && model_moe_interleaved(m)) /* its phase is 0 or N - 1, as the two keys count (model.h) */
        json_object_set_new(j, m->moe_phase ? "decoder_sparse_step" : "moe_layer_freq", json_integer(m->moe_freq));
    if (j && model_mla(m)) {
        json_object_set_new(j, "q_lora_rank", json_integer(m->q_lora));
        json_object_set_new(j, "kv_lora_rank", json_integer(m->kv_lora));
        json_object_set_new(j, "qk_nope_head_dim", json_integer(m->qk_nope));
        json_object_set_new(j, "qk_rope_head_dim", json_integer(m->qk_rope));
        json_object_set_new(j, "v_head_dim", json_integer(m->v_dim));
    }
    return j;
}

static json_t *knob_to_json(const config *c, const knob_row *r)
{
    switch (r->type) {
    case KT_MODEL: return model_to_json(&c->model);
    case KT_COUNT: return json_integer((json_int_t)c->seq);
    case KT_INT:
    case KT_NONNEG:
    case KT_STAGE: return json_integer(knob_int_value(c, r));
    case KT_MESH: return json_pack("[i,i]", c->p_head, c->p_seq);
    case KT_ORDER: {
        char buf[64];
        config_placement_text(c, buf, sizeof buf);
        return json_string(buf);
    }
    case KT_STRING: return json_string((const char *)c + r->off);
    case KT_ENUM: return json_string(r->names[knob_int_value(c, r)].name);
    case KT_BOOL: return json_boolean(*(const bool *)((const char *)c + r->off));
    case KT_DTYPE: return json_string(r->names[knob_dtype_index(c)].name);
    case KT_DOCS: return docs_to_json(c->docs);
    case KT_PROB: return json_real(knob_prob_value(c, r));
    case KT_ROUTING: {
        char *spec = config_routing_spec(c);
        json_t *j = json_string(spec);
        free(spec);
        return j;
    }
    case KT_CAPACITY: {
        char buf[64];
        config_capacity_text(c, buf, sizeof buf);
        return json_string(buf);
    }
    case KT_MODULES: {
        char buf[64];
        recompute_modules_text(knob_int_value(c, r), buf, sizeof buf);
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
            json_object_set_new(j, knob_rows[k].info.key, knob_to_json(c, &knob_rows[k])) < 0) {
            json_decref(j);
            return NULL;
        }
    return j;
}

static int model_from_json(const json_t *v, model *m, char err[LOONG_ERRLEN])
{
    const char *name, *bias = "none";
    int tied = 0, freq = 0, step = 0;
    json_error_t je;
    memset(m, 0, sizeof *m);
    if (json_unpack_ex((json_t *)v, &je, 0,
                       "{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s?b,s?s,s?i,s?i,s?i,s?i,s?i,s?i,s?i,s?i,s?i,s?i,s?i,s?i,s?i}",
                       "name", &name, "layers", &m->layers, "hidden", &m->hidden, "heads", &m->heads, "kv_heads",
                       &m->kv_heads, "head_dim", &m->head_dim, "ffn", &m->ffn, "vocab", &m->vocab,
                       "tie_word_embeddings", &tied, "attention_bias", &bias, "sliding_window", &m->window,
                       "num_experts", &m->experts, "num_experts_per_tok", &m->top_k, "moe_intermediate_size",
                       &m->expert_ffn, "shared_expert_intermediate_size", &m->shared_ffn, "first_k_dense_replace",
                       &m->dense_layers, "q_lora_rank", &m->q_lora, "kv_lora_rank", &m->kv_lora, "qk_nope_head_dim",
                       &m->qk_nope, "qk_rope_head_dim", &m->qk_rope, "v_head_dim", &m->v_dim, "moe_layer_freq", &freq,
                       "decoder_sparse_step", &step) < 0) {
        snprintf(err, LOONG_ERRLEN, "configuration object: model: %s", je.text);
        return -1;
    }
    if (freq && step) {
        snprintf(err, LOONG_ERRLEN,
                 "configuration object: model: moe_layer_freq and decoder_sparse_step both give "
                 "the experts' period: keep one");
        return -1;
    }
    m->moe_freq = freq ? freq : step;
    m->moe_phase = step > 1 ? step - 1 : 0;
    if (m->moe_freq == 1) m->moe_freq = 0; /* experts in every block */
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
            *knob_int(c, r) = (int)n;
            return 0;
        }
    } else if (r->type == KT_PROB) {
        double p = json_is_number(v) ? json_number_value(v) : -1;
        if (p >= 0 && p < 1) {
            *knob_prob(c, r) = p;
            return 0;
        }
    } else if (r->type == KT_BOOL) {
        if (json_is_boolean(v)) {
            *(bool *)((char *)c + r->off) = json_is_true(v);
            return 0;
        }
    } else if (json_is_string(v)) { /* a name, or a spelling checked by the parser */
        const char *s = json_string_value(v);
        if (r->type == KT_STRING) return config_knob_parse(c, (config_knob)(r - knob_rows), s, err);
        if (config_knob_parse(c, (config_knob)(r - knob_rows), s, err) == 0) return 0;
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
    c->ep = 1;
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
        const json_t *v = json_object_get(j, knob_rows[k].info.key);
        if (!v && knob_optional((config_knob)k)) continue; /* unset: the default (0) */
        if (!v) {
            snprintf(err, LOONG_ERRLEN, "configuration object: '%s' is missing", knob_rows[k].info.key);
            return -1;
        }
        if (knob_from_json(v, c, &knob_rows[k], err) < 0) return -1;
    }
    return config_validate(c, err);
}

/* From the standard basis (the copy config.c had started from the documents'
 * shortened one, hash.h): the hash is never printed on success nor persisted,
 * only compared between the ranks of one `loong exec` (exec_run.c), which run
 * the same binary, so no recorded value moves. */
uint64_t config_hash(const config *c)
{
    json_t *j = config_to_json(c);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    uint64_t h = hash_fnv1a(HASH_FNV1A_BASIS, s, s ? strlen(s) : 0);
    free(s);
    json_decref(j);
    return h;
}

/* config, model and strategy: presets, model files, constraints, geometry,
 * and every knob of the table parsed from its option (by `loong dag`). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/docs.h"
#include "core/knobs.h"
#include "core/pipeline.h"
#include "core/recompute.h"
#include "core/shard.h"
#include "cli_util.h"
#include "dag_util.h"
#include "check_run.h"
#include "check_dagjson.h"

START_TEST(presets_match_table)
{
    /* the table: layers hidden heads kv head_dim ffn vocab */
    static const struct {
        const char *n;
        int v[7];
    } want[] = {
        {"llama3-8b", {32, 4096, 32, 8, 128, 14336, 128256}},
        {"llama3-70b", {80, 8192, 64, 8, 128, 28672, 128256}},
        {"7b-mha", {32, 4096, 32, 32, 128, 11008, 32000}},
        {"7b-gqa", {32, 4096, 32, 8, 128, 11008, 32000}},
        {"tiny", {2, 256, 8, 2, 32, 512, 1000}},
    };
    char err[LOONG_ERRLEN];
    for (size_t i = 0; i < 5; i++) {
        model m;
        ck_assert_int_eq(model_preset(want[i].n, &m, err), 0);
        int got[7] = {m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn, m.vocab};
        ck_assert_int_eq(memcmp(got, want[i].v, sizeof got), 0);
    }
    model m;
    ck_assert_int_eq(model_preset("gpt5", &m, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "unknown model 'gpt5'"));
}
END_TEST

static char *write_tmp(const char *text)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/loong-model-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

START_TEST(model_file)
{
    char err[LOONG_ERRLEN];
    model m;
    char *p = write_tmp("# a small model\nname = mini\nlayers = 4\nhidden = 512\nheads = 8 # eight\n"
                        "kv_heads = 4\nhead_dim = 64\nffn = 1024\nvocab = 500\n");
    ck_assert_int_eq(model_load_file(p, &m, err), 0);
    ck_assert_str_eq(m.name, "mini");
    ck_assert_int_eq(m.kv_heads, 4);
    ck_assert_int_eq(m.ffn, 1024);
    unlink(p);
    static const char *bad[] = {
        "layers = 4\n",                                                          /* missing keys */
        "layers 4\nhidden=1\nheads=1\nkv_heads=1\nhead_dim=1\nffn=1\nvocab=1\n", /* no '=' */
        "layers = -4\nhidden=1\nheads=1\nkv_heads=1\nhead_dim=1\nffn=1\nvocab=1\n",
        "layers = 4\ncolor = red\n",
        "layers=2\nhidden=8\nheads=6\nkv_heads=4\nhead_dim=2\nffn=8\nvocab=9\n", /* heads % kv */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = write_tmp(bad[i]);
        ck_assert_msg(model_load_file(p, &m, err) == -1, "accepted: %s", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, p));
        unlink(p);
    }
    ck_assert_int_eq(model_load_file("/nonexistent/x.model", &m, err), -1);
}
END_TEST

/* Files are parsed whole: a comment longer than any line buffer stays a
 * comment (its tail used to be parsed as a line of its own). */
START_TEST(model_file_long_comment)
{
    char text[4096], err[LOONG_ERRLEN];
    int n = snprintf(text, sizeof text, "# ");
    for (int i = 0; i < 1500; i++)
        text[n++] = 'x';
    snprintf(text + n, sizeof text - (size_t)n,
             " layers = 999\nlayers = 4\nhidden = 512\nheads = 8\nkv_heads = 4\nhead_dim = 64\nffn = 1024\n"
             "vocab = 500\n");
    model m;
    ck_assert_int_eq(model_parse(text, "long.model", &m, err), 0);
    ck_assert_int_eq(m.layers, 4);
    /* a key given twice, or sizes past the bounds, are errors, not "last one wins" */
    ck_assert_int_eq(model_parse("layers = 4\nlayers = 5\n", "dup.model", &m, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "'layers' is given twice"));
    ck_assert_int_eq(model_parse("layers=2\nhidden=8\nheads=2000000000\nkv_heads=1000000000\nhead_dim=2\nffn=8\n"
                                 "vocab=9\n",
                                 "big.model", &m, err),
                     -1);
    ck_assert_ptr_nonnull(strstr(err, "heads = 2000000000 is outside 1..65536"));
}
END_TEST

/* Real Hugging Face config.json files (tests/data/hf/SOURCES) load, and
 * their parameter counts are the published ones within 1 % (the published
 * figure: the model card or the safetensors index's total; loong leaves out
 * what it does not model, e.g. Gemma 2's two extra norms per block) and
 * exactly the closed form L (h (H + 2 H_kv) d + H d h + 3 h f + 2 h + b) +
 * (tied ? 1 : 2) V h + h. */
START_TEST(hf_configs)
{
    static const struct {
        const char *file;
        double published;
        bool tied;
        int bias;
    } rows[] = {
        {"Llama-3.1-8B", 8030261248.0, false, MODEL_BIAS_NONE},
        {"Qwen2.5-7B-Instruct", 7615616512.0, false, MODEL_BIAS_QKV},
        {"Qwen2.5-0.5B", 494032768.0, true, MODEL_BIAS_QKV},
        {"Mistral-7B-v0.3", 7248023552.0, false, MODEL_BIAS_NONE},
        {"gemma-2-9b", 9241705984.0, true, MODEL_BIAS_NONE},
        {"TinyLlama-1.1B-Chat-v1.0", 1100048384.0, false, MODEL_BIAS_NONE},
    };
    char err[LOONG_ERRLEN], path[512];
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        model m;
        snprintf(path, sizeof path, "%s/tests/data/hf/%s.json", LOONG_SRCDIR, rows[i].file);
        ck_assert_msg(model_resolve(path, &m, err) == 0, "%s: %s", rows[i].file, err);
        ck_assert_int_eq(m.tied, rows[i].tied);
        ck_assert_int_eq(m.bias, rows[i].bias);
        double h = m.hidden, d = m.head_dim, H = m.heads, kv = m.kv_heads;
        double b = m.bias == MODEL_BIAS_QKV ? (H + 2 * kv) * d : 0;
        double closed = m.layers * (h * (H + 2 * kv) * d + H * d * h + 3 * h * m.ffn + 2 * h + b) +
                        (m.tied ? 1 : 2) * (double)m.vocab * h + h;
        ck_assert_double_eq((double)model_params(&m), closed);
        double rel = fabs((double)model_params(&m) / rows[i].published - 1);
        ck_assert_msg(rel < 0.01, "%s: %.0f parameters, published %.0f", rows[i].file, (double)model_params(&m),
                      rows[i].published);
    }
    /* mixtures of experts: DeepSeek-V3's and Mixtral-8x7B's config.json
     * keys (deepseek-ai/DeepSeek-V3, mistralai/Mixtral-8x7B-v0.1) read as
     * the presets; experts every other layer are refused */
    model m, preset;
    const char *ds3 =
        "{\"model_type\":\"deepseek_v3\",\"hidden_size\":7168,\"intermediate_size\":18432,\"moe_intermediate_size\":"
        "2048,"
        "\"num_hidden_layers\":61,\"num_attention_heads\":128,\"num_key_value_heads\":128,\"n_shared_experts\":1,"
        "\"n_routed_experts\":256,\"num_experts_per_tok\":8,\"first_k_dense_replace\":3,\"moe_layer_freq\":1,"
        "\"q_lora_rank\":1536,\"kv_lora_rank\":512,\"qk_nope_head_dim\":128,\"qk_rope_head_dim\":64,\"v_head_dim\":128,"
        "\"vocab_size\":129280,\"tie_word_embeddings\":false}";
    const char *mixtral =
        "{\"model_type\":\"mixtral\",\"hidden_size\":4096,\"intermediate_size\":14336,"
        "\"num_hidden_layers\":32,\"num_attention_heads\":32,\"num_key_value_heads\":8,"
        "\"num_local_experts\":8,\"num_experts_per_tok\":2,\"vocab_size\":32000,\"sliding_window\":null}";
    const char *json[] = {ds3, mixtral}, *name[] = {"deepseek-v3", "mixtral-8x7b"};
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(model_parse(json[i], "moe.json", &m, err) == 0, "%s", err);
        ck_assert_int_eq(model_preset(name[i], &preset, err), 0);
        ck_assert_uint_eq(model_params(&m), model_params(&preset));
        ck_assert_int_eq(m.experts, preset.experts);
        ck_assert_int_eq(m.top_k, preset.top_k);
        ck_assert_int_eq(m.expert_ffn, preset.expert_ffn);
        ck_assert_int_eq(m.shared_ffn, preset.shared_ffn);
        ck_assert_int_eq(m.dense_layers, preset.dense_layers);
        ck_assert_int_eq(m.head_dim, preset.head_dim);
        ck_assert_int_eq(m.kv_lora, preset.kv_lora);
    }
    /* experts every N-th block: Qwen2-MoE's decoder_sparse_step in the
     * blocks (l + 1) % N == 0, DeepSeek's moe_layer_freq in the blocks
     * l >= first_k_dense_replace with l % N == 0; dense blocks by index refused */
    static const struct {
        const char *keys;
        int moe[6];
    } freq[] = {{"\"decoder_sparse_step\":2", {0, 1, 0, 1, 0, 1}},
                {"\"decoder_sparse_step\":3", {0, 0, 1, 0, 0, 1}},
                {"\"moe_layer_freq\":2,\"first_k_dense_replace\":1", {0, 0, 1, 0, 1, 0}},
                {"\"moe_layer_freq\":1,\"first_k_dense_replace\":2", {0, 0, 1, 1, 1, 1}}};
    for (size_t i = 0; i < sizeof freq / sizeof *freq; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"model_type\":\"qwen2_moe\",\"hidden_size\":8,\"intermediate_size\":8,\"num_hidden_layers\":6,"
                 "\"num_attention_heads\":2,\"vocab_size\":8,\"num_experts\":4,\"num_experts_per_tok\":2,%s}",
                 freq[i].keys);
        ck_assert_msg(model_parse(text, "moe.json", &m, err) == 0, "%s: %s", freq[i].keys, err);
        int n = 0;
        for (int l = 0; l < 6; l++) {
            ck_assert_msg(model_block_moe(&m, l) == freq[i].moe[l], "%s: block %d", freq[i].keys, l);
            ck_assert_int_eq(model_moe_blocks_below(&m, l), n);
            n += freq[i].moe[l];
        }
        ck_assert_int_eq(model_moe_blocks(&m), n);
        /* each expert block holds the router and E experts where a dense one holds its MLP */
        model dense = m;
        dense.experts = dense.top_k = dense.expert_ffn = dense.dense_layers = dense.moe_freq = dense.moe_phase = 0;
        ck_assert_uint_eq(model_params(&m) - model_params(&dense),
                          (uint64_t)n * (8 * 4 + 4 * 3 * 8 * (uint64_t)m.expert_ffn - 3 * 8 * 8));
    }
    ck_assert_int_eq(model_parse("{\"model_type\":\"qwen2_moe\",\"hidden_size\":8,\"intermediate_size\":8,"
                                 "\"num_hidden_layers\":2,\"num_attention_heads\":2,\"vocab_size\":8,\"num_experts\":4,"
                                 "\"num_experts_per_tok\":2,\"mlp_only_layers\":[1]}",
                                 "moe.json", &m, err),
                     -1);
    ck_assert_ptr_nonnull(strstr(err, "mlp_only_layers"));
    ck_assert_int_eq(model_parse("{\"model_type\":\"qwen2_moe\",\"hidden_size\":8,\"intermediate_size\":8,"
                                 "\"num_hidden_layers\":2,\"num_attention_heads\":2,\"vocab_size\":8,\"num_experts\":4,"
                                 "\"num_experts_per_tok\":2,\"decoder_sparse_step\":3}",
                                 "moe.json", &m, err),
                     -1);
    ck_assert_ptr_nonnull(strstr(err, "experts' period"));
    ck_assert_int_eq(model_parse("{\"config\": {}}", "other.json", &m, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "not a Hugging Face config.json"));
    ck_assert_int_eq(model_parse("{", "cut.json", &m, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "not valid JSON"));
}
END_TEST

/* loong's model file takes the same optional keys; tying removes one
 * V x hidden matrix, QKV bias adds (H + 2 H_kv) d per block, and with
 * pp > 1 the last stage keeps the tied embedding's copy (Megatron's). */
START_TEST(model_file_optional_keys)
{
    const char *base = "layers=4\nhidden=64\nheads=4\nkv_heads=2\nhead_dim=16\nffn=128\nvocab=1000\n";
    char text[512], err[LOONG_ERRLEN];
    model plain, tied;
    ck_assert_int_eq(model_parse(base, "a.model", &plain, err), 0);
    snprintf(text, sizeof text, "%stie_word_embeddings = true\nattention_bias = qkv\nsliding_window = 4K\n", base);
    ck_assert_int_eq(model_parse(text, "b.model", &tied, err), 0);
    ck_assert_int_eq(tied.window, 4096);
    ck_assert_uint_eq(model_params(&plain) - model_params(&tied) + 4 * (4 + 2 * 2) * 16, 1000 * 64);
    snprintf(text, sizeof text, "%sattention_bias = yes\n", base);
    ck_assert_int_eq(model_parse(text, "c.model", &tied, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "attention_bias is none, qkv"));
    config c;
    config_defaults(&c);
    ck_assert_int_eq(model_parse(base, "a.model", &c.model, err), 0);
    c.model.tied = true;
    c.pp = 2;
    ck_assert_uint_eq(pipe_head_params(&c, 0), 1000 * 64);
    ck_assert_uint_eq(pipe_head_params(&c, 1), 1000 * 64 + 64);
    /* the experts' period: as in config.json, one of its two keys, which
     * the configuration's JSON carries back; pp 2 of 4 blocks with
     * experts in blocks 1 and 3 holds one expert block per stage */
    const char *moe = "num_experts = 4\nnum_experts_per_tok = 2\nmoe_intermediate_size = 32\n";
    snprintf(text, sizeof text, "%s%sdecoder_sparse_step = 2\n", base, moe);
    ck_assert_msg(model_parse(text, "d.model", &c.model, err) == 0, "%s", err);
    ck_assert(!model_block_moe(&c.model, 0) && model_block_moe(&c.model, 1) && model_block_moe(&c.model, 3));
    ck_assert_int_eq(pipe_stage_moe_blocks(&c, 0), 1);
    ck_assert_int_eq(pipe_stage_moe_blocks(&c, 1), 1);
    ck_assert_uint_eq(pipe_stage_block_params(&c, 0) + pipe_stage_block_params(&c, 1),
                      model_params(&c.model) - model_head_params_tp(&c.model, 1) -
                          2 * model_expert_params_tp(&c.model, 1));
    c.p_head = 1; /* the model's 4 heads */
    json_t *j = config_to_json(&c);
    config back;
    ck_assert_msg(config_from_json(j, &back, err) == 0, "%s", err);
    json_decref(j);
    ck_assert_int_eq(back.model.moe_freq, 2);
    ck_assert_int_eq(back.model.moe_phase, 1);
    snprintf(text, sizeof text, "%s%smoe_layer_freq = 2\ndecoder_sparse_step = 2\n", base, moe);
    ck_assert_int_eq(model_parse(text, "e.model", &c.model, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "keep one"));
    snprintf(text, sizeof text, "%smoe_layer_freq = 2\n", base);
    ck_assert_int_eq(model_parse(text, "f.model", &c.model, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "applies to a mixture of experts"));
}
END_TEST

static void expect_invalid(config *c, const char *needle)
{
    char err[LOONG_ERRLEN] = "";
    ck_assert_int_eq(config_validate(c, err), -1);
    ck_assert_msg(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err, needle);
}

START_TEST(constraints)
{
    config c = tcfg("llama3-8b", 128 * 1024, "usp", 8, 8, 0, SCOPE_ATTN);
    config bad = c;
    bad.p_head = 3;
    expect_invalid(&bad, "H % P_h");
    bad = c;
    bad.p_head = 64;
    expect_invalid(&bad, "H % P_h");
    bad = c;
    bad.p_head = 16;
    bad.kv_replication = false;
    expect_invalid(&bad, "KV replication is off");
    c = tcfg("7b-gqa", 128 * 1024, "usp", 4, 8, 0, SCOPE_ATTN);
    bad = c;
    bad.model.kv_heads = 2; /* P_h = 4 > 2 = H_kv; replication x2 is fine */
    char err[LOONG_ERRLEN];
    ck_assert_int_eq(config_validate(&bad, err), 0);
    bad.model.kv_heads = 8;
    bad.model.heads = 48;
    bad.p_head = 12; /* 48 % 12 == 0, but 12 > H_kv = 8 is not a multiple of 8 */
    expect_invalid(&bad, "P_h % H_kv");
    bad = c;               /* P = 32, 2*P_s = 16 */
    bad.seq = 32 * 17 * 3; /* odd multiple of 32 and 16: valid */
    ck_assert_int_eq(config_validate(&bad, err), 0);
    bad.seq = 16 * 33; /* a multiple of 2*P_s but not of P */
    expect_invalid(&bad, "S % P");
    bad.p_head = 1;
    bad.seq = 8 * 3; /* 24: multiple of P = 8, not of 2*P_s = 16 */
    expect_invalid(&bad, "2*P_s");
    bad = c;
    bad.ring = RING_DOUBLE;
    bad.window = 3;
    expect_invalid(&bad, "P_s % w");
    bad = c;
    bad.ring = RING_DUAL;
    bad.partition = PART_CONTIGUOUS;
    expect_invalid(&bad, "--ring dual needs a two-part partition");
    bad = c;
    bad.seq = 3ull << 31;
    expect_invalid(&bad, "4G tokens");
    bad = c;
    bad.batch = 1 << 30;
    bad.seq = 1 << 20;
    expect_invalid(&bad, "tokens per rank");
}
END_TEST

START_TEST(overflow)
{
    config c = tcfg("llama3-70b", 1 << 20, "loongtrain", 8, 8, 2, SCOPE_STEP);
    c.seq = 1ull << 31;
    c.batch = 1 << 20;
    char err[LOONG_ERRLEN];
    ck_assert_int_eq(config_validate(&c, err), -1);
    /* one task must fit 2^63: llama3-405b on one rank has one causal
     * block, whose backward is S(S+1)/2 pairs x 4*d*H x 2.5 FLOPs, 5.8e18
     * at S = 8M, 2.3e19 at 16M */
    ck_assert_int_eq(tcfg_try(&c, "llama3-405b", 8ull << 20, "ulysses", 1, 1, 0, SCOPE_STEP, err), 0);
    ck_assert_int_eq(tcfg_try(&c, "llama3-405b", 16ull << 20, "ulysses", 1, 1, 0, SCOPE_STEP, err), -1);
    ck_assert_msg(strstr(err, "2^63") && strstr(err, "--mesh") && strstr(err, "--batch"), "%s", err);
}
END_TEST

/* llama3-70b at 1M: layouts of 8 and 256 GPUs whose per-rank FLOPs over
 * layers and micro-batches the old 64-bit bound refused (and loong plan's
 * 1x1 base config), now totalled in floating point: they validate. */
START_TEST(no_total_overflow)
{
    static const struct {
        int ph, ps, tp, pp, dp, m;
    } rows[] = {
        {1, 1, 1, 1, 1, 1},  /* loong plan's base config */
        {1, 1, 8, 1, 1, 16}, /* 8 GPUs */
        {1, 1, 1, 8, 1, 32}, /* 8 GPUs */
        {8, 32, 1, 1, 1, 1}, /* 256 GPUs: loong sim --mesh 8x32 */
        {1, 1, 8, 4, 8, 32}, /* 256 GPUs */
        {1, 4, 8, 8, 1, 64}, /* 256 GPUs */
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        config c =
            tcfg("llama3-70b", 1 << 20, rows[i].ps > 1 ? "usp" : "ulysses", rows[i].ph, rows[i].ps, 0, SCOPE_STEP);
        c.tp = rows[i].tp;
        c.pp = rows[i].pp;
        c.dp = rows[i].dp;
        c.micro_batches = rows[i].m;
        char err[LOONG_ERRLEN];
        ck_assert_msg(config_validate(&c, err) == 0, "row %zu: %s", i, err);
    }
}
END_TEST

START_TEST(geometry)
{
    config c = tcfg("llama3-8b", 128 * 1024, "usp", 4, 16, 0, SCOPE_ATTN);
    c.gpus_per_node = 8;
    int h, s;
    /* head-first: head groups are consecutive ranks */
    config_coords(&c, 9, &h, &s);
    ck_assert_int_eq(h, 1);
    ck_assert_int_eq(s, 2);
    ck_assert_int_eq(config_rank_of(&c, 1, 2), 9);
    ck_assert_int_eq(config_node(&c, 9), 1);
    ck_assert_int_eq(config_gpu(&c, 9), 1);
    config_set_placement(&c, PLACE_CONTEXT_FIRST);
    config_coords(&c, 9, &h, &s);
    ck_assert_int_eq(h, 0);
    ck_assert_int_eq(s, 9);
    for (int r = 0; r < 64; r++) {
        config_coords(&c, r, &h, &s);
        ck_assert_int_eq(config_rank_of(&c, h, s), r);
    }
    /* zigzag: ring rank r owns chunks r and 2*P_s-1-r */
    const shard_map *m = shard_map_of(&c);
    uint64_t ct = config_chunk_tokens(&c);
    ck_assert_uint_eq(shard_pos(m, 3, 0, 0), 3 * ct);
    ck_assert_uint_eq(shard_pos(m, 3, 1, 5), 28 * ct + 5);
}
END_TEST

START_TEST(strategies)
{
    char err[LOONG_ERRLEN];
    config c;
    config_defaults(&c);
    ck_assert_int_eq(strategy_apply("ulysses", 0, 0, 8, &c, err), 0);
    ck_assert_int_eq(c.p_head, 8);
    ck_assert_int_eq(c.p_seq, 1);
    ck_assert_int_eq(strategy_apply("zigzag", 0, 0, 64, &c, err), 0);
    ck_assert_int_eq(c.p_seq, 64);
    ck_assert_int_eq(c.partition, PART_ZIGZAG);
    ck_assert_int_eq(strategy_apply("ring", 0, 0, 64, &c, err), 0);
    ck_assert_int_eq(c.partition, PART_CONTIGUOUS);
    ck_assert_int_eq(strategy_apply("loongtrain", 0, 0, 64, &c, err), 0);
    ck_assert_int_eq(c.p_head, 8); /* largest valid P_h within an 8-GPU node */
    ck_assert_int_eq(c.ring, RING_DOUBLE);
    ck_assert_int_eq(c.p_seq % c.window, 0);
    ck_assert_int_eq(strategy_apply("dualring", 2, 4, 0, &c, err), 0);
    ck_assert_int_eq(c.ring, RING_DUAL);
    ck_assert_int_eq(strategy_apply("ring", 4, 16, 0, &c, err), -1);
    ck_assert_int_eq(strategy_apply("magic", 0, 0, 8, &c, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "unknown strategy 'magic'"));
}
END_TEST

START_TEST(json_and_hash)
{
    config c = tcfg("7b-gqa", 256 * 1024, "loongtrain", 4, 8, 4, SCOPE_STEP), back;
    c.recompute = RECOMPUTE_SELECTIVE;
    c.zero = 3;
    json_t *j = config_to_json(&c);
    char err[LOONG_ERRLEN];
    ck_assert_int_eq(config_from_json(j, &back, err), 0);
    json_decref(j);
    ck_assert_uint_eq(config_hash(&c), config_hash(&back));
    ck_assert_int_eq(back.window, 4);
    ck_assert_int_eq(back.recompute, RECOMPUTE_SELECTIVE);
    ck_assert_int_eq(back.recompute_modules, RECOMPUTE_MOD_CORE_ATTN);
    back.window = 2;
    ck_assert_uint_ne(config_hash(&c), config_hash(&back));
    /* the recompute knobs at their defaults stay out of the JSON (configs
     * written before them hash as before); set, they round-trip */
    j = config_to_json(&c);
    ck_assert_ptr_null(json_object_get(j, "recompute_modules"));
    ck_assert_ptr_null(json_object_get(j, "recompute_method"));
    json_decref(j);
    c.recompute_modules = RECOMPUTE_MOD_CORE_ATTN | RECOMPUTE_MOD_MLP;
    j = config_to_json(&c);
    ck_assert_str_eq(json_string_value(json_object_get(j, "recompute_modules")), "core_attn,mlp");
    ck_assert_int_eq(config_from_json(j, &back, err), 0);
    json_decref(j);
    ck_assert_int_eq(back.recompute_modules, c.recompute_modules);
    c.recompute_modules = RECOMPUTE_MOD_CORE_ATTN;
    c.recompute = RECOMPUTE_FULL;
    c.zero = 1;
    c.recompute_method = RECOMPUTE_BLOCK;
    c.recompute_layers = 3;
    j = config_to_json(&c);
    ck_assert_int_eq(config_from_json(j, &back, err), 0);
    json_decref(j);
    ck_assert_int_eq(back.recompute_method, RECOMPUTE_BLOCK);
    ck_assert_int_eq(back.recompute_layers, 3);
    ck_assert_uint_eq(config_hash(&c), config_hash(&back));
    recompute_set(&c, RECOMPUTE_SELECTIVE);
    c.zero = 3;
    /* a document layout and a packed partition round-trip, and move the hash */
    c.docs = docs_parse_list("100K,4K,1,120K", c.seq, "test", err);
    c.partition = PART_BALANCED;
    ck_assert_int_eq(config_validate(&c, err), 0);
    j = config_to_json(&c);
    ck_assert_int_eq(config_from_json(j, &back, err), 0);
    json_decref(j);
    ck_assert_ptr_eq(back.docs, c.docs);
    ck_assert_int_eq(back.partition, PART_BALANCED);
    ck_assert_uint_eq(config_hash(&c), config_hash(&back));
    back.docs = docs_parse_list("100K,4K,2,120K", c.seq, "test", err);
    ck_assert_uint_ne(config_hash(&c), config_hash(&back));
}
END_TEST

/* The data-parallel degree and the mesh order are knobs: "dp" appears in
 * the JSON only when it is not 1 (so existing files read and hash as
 * before), moves the hash, and the order round-trips, the named ones by
 * name. dp must vary slowest: the DAG holds one replica as ranks 0..P-1. */
/* Megatron-Core's default order tp-cp-ep-dp-pp (RankGenerator): a stage's
 * replicas side by side. loong's ranks keep dp slowest (replica k at
 * k*P .. k*P+P-1); the GPU of rank q + Q*stage + P*rep (Q = tp*cp ranks
 * per stage) is q + Q*rep + Q*dp*stage, and back. Head-first keeps the
 * GPUs the ranks'. Other dimensions after dp are refused. */
START_TEST(dp_before_pp_gpus)
{
    config c = tcfg("tiny", 8192, "usp", 1, 2, 0, SCOPE_STEP);
    char err[LOONG_ERRLEN], text[64];
    c.tp = 2;
    c.pp = 2;
    c.micro_batches = 2;
    c.dp = 3;
    ck_assert_int_eq(config_validate(&c, err), 0);
    for (int r = 0; r < config_world(&c); r++)
        ck_assert_int_eq(config_gpu_of(&c, r), r);
    ck_assert_int_eq(config_knob_parse(&c, KNOB_PLACEMENT, "tp-cp-ep-dp-pp", err), 0);
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    config_placement_text(&c, text, sizeof text);
    ck_assert_str_eq(text, "tp-head-seq-dp-pp");
    int Q = 4, P = 8, dp = 3;
    for (int rep = 0; rep < dp; rep++)
        for (int stage = 0; stage < 2; stage++)
            for (int q = 0; q < Q; q++) {
                int r = q + Q * stage + P * rep, gpu = q + Q * rep + Q * dp * stage;
                ck_assert_int_eq(config_gpu_of(&c, r), gpu);
                ck_assert_int_eq(config_rank_of_gpu(&c, gpu), r);
                ck_assert_int_eq(config_node(&c, r), gpu / c.gpus_per_node);
            }
    /* loong's mesh keeps dp slowest: the DAG's stages are where they were */
    mesh m = config_mesh(&c);
    ck_assert_int_eq(mesh_stride(&m, MESH_DP), P);
    ck_assert_int_eq(mesh_stride(&m, MESH_PP), Q);
    ck_assert_int_eq(config_tp_nodes(&c), 1);
    /* only pp may vary slower than dp */
    ck_assert_int_eq(config_knob_parse(&c, KNOB_PLACEMENT, "tp-dp-head-seq-pp", err), 0);
    ck_assert_int_eq(config_validate(&c, err), -1);
    ck_assert_msg(strstr(err, "seq") && strstr(err, "only pp"), "%s", err);
}
END_TEST

START_TEST(dp_and_order)
{
    config c = tcfg("tiny", 8192, "usp", 2, 4, 4, SCOPE_STEP), back;
    char err[LOONG_ERRLEN], text[64];
    json_t *j = config_to_json(&c);
    ck_assert_ptr_null(json_object_get(j, "dp"));
    ck_assert_str_eq(json_string_value(json_object_get(j, "placement")), "head-first");
    json_decref(j);
    uint64_t one = config_hash(&c);
    c.dp = 2;
    ck_assert_int_eq(config_validate(&c, err), 0);
    ck_assert_int_eq(config_world(&c), 16);
    j = config_to_json(&c);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "dp")), 2);
    ck_assert_int_eq(config_from_json(j, &back, err), 0);
    json_decref(j);
    ck_assert_int_eq(back.dp, 2);
    ck_assert_uint_ne(config_hash(&c), one);
    ck_assert_uint_eq(config_hash(&c), config_hash(&back));
    /* the mesh: replica k holds ranks 8k .. 8k+7; head-first order */
    mesh m = config_mesh(&c);
    ck_assert_int_eq(mesh_size(&m), 16);
    ck_assert_int_eq(mesh_group_size(&m, CONFIG_GRAD_DIMS), 16);
    ck_assert_int_eq(mesh_group_index(&m, MESH_BIT(MESH_DP), 11), 1);
    ck_assert_int_eq(mesh_fold(&m, MESH_BIT(MESH_DP), 11), 3);
    /* an order by name, then one that is not an alias */
    ck_assert_int_eq(config_knob_parse(&c, KNOB_PLACEMENT, "tp-seq-head-pp-dp", err), 0);
    ck_assert_int_eq(config_placement(&c), PLACE_CONTEXT_FIRST);
    config_placement_text(&c, text, sizeof text);
    ck_assert_str_eq(text, "context-first");
    ck_assert_int_eq(config_knob_parse(&c, KNOB_PLACEMENT, "seq-tp-pp-head-dp", err), 0);
    config_placement_text(&c, text, sizeof text);
    ck_assert_str_eq(text, "seq-tp-pp-head-dp");
    ck_assert_int_eq(config_rank_of(&c, 1, 2), 1 * 4 + 2);
    /* dp faster than a dimension of degree > 1 */
    ck_assert_int_eq(config_knob_parse(&c, KNOB_PLACEMENT, "tp-head-dp-seq-pp", err), 0);
    ck_assert_int_eq(config_validate(&c, err), -1);
    ck_assert_msg(strstr(err, "seq") && strstr(err, "dp"), "%s", err);
    c.dp = 1; /* one replica: any order */
    ck_assert_int_eq(config_validate(&c, err), 0);
    c.dp = 0;
    ck_assert_int_eq(config_validate(&c, err), -1);
    ck_assert_msg(strstr(err, "--dp") != NULL, "%s", err);
    ck_assert_int_eq(config_knob_parse(&c, KNOB_PLACEMENT, "tp-head-seq", err), -1);
    ck_assert_msg(strstr(err, "--placement") && strstr(err, "pp"), "%s", err);
}
END_TEST

/* config_from_json names the knob it rejects; an unknown dtype is an error,
 * not bf16. */
START_TEST(json_rejects_bad_knobs)
{
    static const struct {
        const char *key, *json, *want;
    } bad[] = {
        {"dtype", "\"fp16\"", "'dtype'"},
        {"placement", "\"sideways\"", "'placement'"},
        {"mesh", "[4]", "'mesh'"},
        {"seq", "-5", "'seq'"},
        {"kv_replication", "\"yes\"", "'kv_replication'"},
        {"zero", NULL, "'zero' is missing"},
        {"dp", "\"two\"", "'dp'"},
        {"placement", "\"tp-head-seq-pp\"", "'placement'"},
    };
    config c = tcfg("tiny", 4096, "usp", 2, 2, 2, SCOPE_ATTN), back;
    char err[LOONG_ERRLEN];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *j = config_to_json(&c);
        if (bad[i].json)
            json_object_set_new(j, bad[i].key, json_loads(bad[i].json, JSON_DECODE_ANY, NULL));
        else
            json_object_del(j, bad[i].key);
        err[0] = '\0';
        ck_assert_msg(config_from_json(j, &back, err) == -1, "accepted %s = %s", bad[i].key, bad[i].json);
        ck_assert_msg(strstr(err, bad[i].want) != NULL, "%s: %s", bad[i].key, err);
        json_decref(j);
    }
}
END_TEST

/* Every knob's command-line spelling parses back to the same config: the
 * command lines that plan and compose build for their children. */
START_TEST(knob_text_round_trip)
{
    config cs[4] = {tcfg("7b-gqa", 256 * 1024, "loongtrain", 4, 8, 2, SCOPE_STEP),
                    tcfg("tiny", 4096, "ring", 1, 4, 4, SCOPE_ATTN_FWD),
                    tcfg("tiny", 8192, "dualring", 2, 4, 4, SCOPE_ATTN),
                    tcfg("tiny-moe", 8192, "usp", 2, 2, 2, SCOPE_STEP)};
    config_set_placement(&cs[0], PLACE_CONTEXT_FIRST);
    cs[0].recompute = RECOMPUTE_FULL;
    cs[0].zero = 0;
    cs[0].kv_replication = false;
    cs[1].act_bytes = 4;
    char err[LOONG_ERRLEN], text[256];
    cs[2].partition = PART_DOC_ZIGZAG;
    cs[2].docs = docs_parse_list("1K,7,5000", 8192, "test", err);
    cs[2].dp = 3;
    ck_assert_int_eq(config_knob_parse(&cs[2], KNOB_PLACEMENT, "head-tp-pp-seq-dp", err), 0);
    cs[3].ep = 2; /* a routing histogram: every weight written back, to the last bit */
    ck_assert_int_eq(config_knob_parse(&cs[3], KNOB_ROUTING, "hist:3,0.1,1e-3,0,7,1,1,2.5", err), 0);
    for (int i = 0; i < 4; i++) {
        config back;
        config_defaults(&back);
        for (int k = 0; k < KNOB_COUNT; k++) {
            char *t = config_knob_text(&cs[i], (config_knob)k);
            if (!t) continue; /* at its unset default */
            snprintf(text, sizeof text, "%s", t);
            free(t);
            ck_assert_msg(config_knob_parse(&back, (config_knob)k, text, err) == 0, "knob %s '%s': %s",
                          config_knob_get((config_knob)k)->option, text, err);
        }
        ck_assert_uint_eq(config_hash(&cs[i]), config_hash(&back));
    }
}
END_TEST

/* Every knob of the table is parsed from the command line (the CLI parses
 * the table by phase, knobs.h): for each knob, a value off its default,
 * given on top of a valid configuration, changes that knob's member of the
 * configuration JSON. The cases name each knob by its option, and a knob
 * without a case fails, so a new knob needs one. The context makes the
 * value valid (an 8-layer model for the pipeline splits; --tp 2 for its
 * sub-knobs; the strategy or recompute mode a sub-knob applies to), and a
 * value may carry what its own validity needs (a slot's 9 layers split
 * over 3 stages where the context's 8 split over 2). */
static const struct {
    const char *option, *context, *value;
} knob_cases[] = {
    {"model", "", "tiny"},
    {"seq", "", "8K"},
    {"batch", "", "2"},
    {"tp", "", "2"},
    {"sequence-parallel", "--tp 2", "off"},
    {"tp-overlap", "--tp 2", "on"},
    {"mesh", "", "1x4"},
    {"dp", "", "2"},
    {"pp", "", "2"},
    {"ep", "--model tiny-moe", "2"},
    {"expert-tp", "--model tiny-moe --tp 2", "1"},
    {"shared-expert-overlap", "--model deepseek-v2", "on"},
    {"dispatcher", "--model tiny-moe", "allgather"},
    {"routing", "--model tiny-moe", "zipf:1.5"},
    {"capacity-factor", "--model tiny-moe", "1.25"},
    {"micro-batches", "", "2"},
    {"schedule", "--pp 2 --micro-batches 2", "gpipe"},
    {"vpp", "--pp 2 --schedule interleaved --vpp 2 --micro-batches 2", "4"},
    {"pp-first-layers", "--pp 2", "3"},
    {"pp-last-layers", "--pp 2", "3"},
    {"pp-embedding-slot", "--pp 2", "on --pp 3"},
    {"pp-loss-slot", "--pp 2", "on --pp 3"},
    {"strategy", "", "usp"},
    {"placement", "", "context-first"},
    {"partition", "", "contiguous"},
    {"ring", "", "single"},
    {"window", "", "1"},
    {"kv-stride", "--strategy allgather", "1"},
    {"kv-replication", "", "off"},
    {"scope", "", "attn"},
    {"gpus-per-node", "", "4"},
    {"recompute", "", "full"},
    {"recompute-modules", "--recompute selective", "mlp"},
    {"recompute-method", "--recompute full", "block"},
    {"recompute-num-layers", "--recompute full", "2"},
    {"zero", "", "2"},
    {"prefetch", "--zero 3", "2"},
    {"dtype", "", "fp32"},
    {"fusions", "", "none"},
    {"grad-reduce", "", "bf16"},
    {"cross-entropy", "", "eager"},
    {"attention", "--mesh 2x1", "unfused"},
    {"attention-dropout", "", "0.1"},
    {"hidden-dropout", "", "0.1"},
    {"precision", "", "fp8-delayed"},
    {"docs", "", "1K,3K"},
    {"nccl-algo", "", "ring"},
    {"nccl-proto", "", "simple"},
};

START_TEST(every_knob_parsed)
{
    char model[] = "/tmp/loong-knobs-XXXXXX";
    int fd = mkstemp(model);
    ck_assert_int_ge(fd, 0);
    const char *m = "layers=8\nhidden=256\nheads=8\nkv_heads=2\nhead_dim=32\nffn=512\nvocab=1000\n";
    ck_assert_int_eq(write(fd, m, strlen(m)), (ssize_t)strlen(m));
    close(fd);
    /* the configuration without the knob, once per context (most share "") */
    json_t *bases = json_object();
    for (int k = 0; k < KNOB_COUNT; k++) {
        const config_knob_info *ki = config_knob_get((config_knob)k);
        size_t i = 0, n = sizeof knob_cases / sizeof *knob_cases;
        while (i < n && strcmp(knob_cases[i].option, ki->option))
            i++;
        ck_assert_msg(i < n, "knob --%s has no case in knob_cases", ki->option);
        char base[512], with[600];
        snprintf(base, sizeof base, "--model %s --seq 4K --mesh 2x2 %s", model, knob_cases[i].context);
        snprintf(with, sizeof with, "%s --%s %s", base, ki->option, knob_cases[i].value);
        json_t *a = json_object_get(bases, knob_cases[i].context);
        if (!a) json_object_set_new(bases, knob_cases[i].context, a = dag_config_json(LOONG_BIN, base));
        json_t *b = dag_config_json(LOONG_BIN, with);
        const json_t *was = json_object_get(a, ki->key), *is = json_object_get(b, ki->key);
        ck_assert_msg(is && !(was && json_equal(was, is)), "--%s %s left '%s' of the configuration as it was (%s)",
                      ki->option, knob_cases[i].value, ki->key, with);
        json_decref(b);
    }
    json_decref(bases);
    unlink(model);
}
END_TEST

/* A preset's knobs name the preset back (plan names its layouts so), and
 * layout names follow README's spelling. */
START_TEST(names_of_layouts)
{
    static const struct {
        const char *strategy;
        int ph, ps;
    } rows[] = {{"ulysses", 8, 1}, {"ring", 1, 8},       {"zigzag", 1, 8},
                {"usp", 2, 4},     {"loongtrain", 2, 4}, {"dualring", 2, 4}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        config c = tcfg("llama3-8b", 1 << 20, rows[i].strategy, rows[i].ph, rows[i].ps, 0, SCOPE_STEP);
        ck_assert_str_eq(strategy_name_of(&c), rows[i].strategy);
    }
    char name[64];
    config c = tcfg("llama3-8b", 1 << 20, "loongtrain", 8, 8, 4, SCOPE_STEP);
    config_layout_name(&c, name, sizeof name);
    ck_assert_str_eq(name, "8x8 hf zz double w=4");
    c = tcfg("llama3-8b", 1 << 20, "ulysses", 32, 1, 1, SCOPE_STEP);
    c.dp = 2;
    config_layout_name(&c, name, sizeof name);
    ck_assert_str_eq(name, "dp2*32x1 no ring kv-repl");
    c = tcfg("llama3-8b", 1 << 20, "ring", 1, 64, 64, SCOPE_STEP);
    config_layout_name(&c, name, sizeof name);
    ck_assert_str_eq(name, "1x64 ct single");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, presets_match_table);
    tcase_add_test(tc, model_file);
    tcase_add_test(tc, model_file_long_comment);
    tcase_add_test(tc, hf_configs);
    tcase_add_test(tc, model_file_optional_keys);
    tcase_add_test(tc, constraints);
    tcase_add_test(tc, overflow);
    tcase_add_test(tc, no_total_overflow);
    tcase_add_test(tc, geometry);
    tcase_add_test(tc, strategies);
    tcase_add_test(tc, json_and_hash);
    tcase_add_test(tc, dp_and_order);
    tcase_add_test(tc, dp_before_pp_gpus);
    tcase_add_test(tc, json_rejects_bad_knobs);
    tcase_add_test(tc, knob_text_round_trip);
    tcase_add_test(tc, names_of_layouts);
    suite_add_tcase(s, tc);
    /* 80 runs of loong dag: their own time limit */
    TCase *cli = tcase_create("knobs");
    tcase_set_timeout(cli, 120);
    tcase_add_test(cli, every_knob_parsed);
    suite_add_tcase(s, cli);
    return check_run(s);
}

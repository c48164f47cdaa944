/* loong plan: the memory model against hand-computed values, enumeration
 * completeness against a closed-form count, the analytical model's cost,
 * the one-line errors of bad input, and the serial vs MPI sweep. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check_run.h"
#include "cli_util.h"
#include "core/dag.h"
#include "core/docs.h"
#include "model/calib.h"
#include "model/fidelity.h"
#include "model/memory.h"
#include "model/plan.h"
#include "model/plan_search.h"
#include "core/strategy.h"
#include "model/platform_spec.h"

#define PLAN LOONG_BIN " plan --platform " LOONG_SRCDIR "/topologies/dgx-h100-8n.xml --quiet"

static config base(const char *model, uint64_t seq, int ph, int ps, int zero, recompute_kind rc)
{
    config c;
    char err[LOONG_ERRLEN];
    config_defaults(&c);
    ck_assert_int_eq(model_preset(model, &c.model, err), 0);
    c.seq = seq;
    ck_assert_int_eq(strategy_apply("usp", ph, ps, 0, &c, err), 0);
    c.zero = zero;
    c.recompute = rc;
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    return c;
}

static void near(double got, double want, const char *what)
{
    ck_assert_msg(fabs(got - want) <= 1e-9 * want + 1e-6, "%s: %.17g, hand-computed %.17g", what, got, want);
}

/* The shipped H100 kernel table and H100 platform figures (the caller
 * frees the table). */
static calib *h100_tables(platform_spec *net)
{
    char err[LOONG_ERRLEN];
    calib *cb = calib_load(LOONG_SRCDIR "/topologies/h100.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    ck_assert_int_eq(platform_spec_defaults("h100", net, err), 0);
    return cb;
}

/* A mixture of experts' leading dense blocks (DeepSeek's first_k_dense)
 * cost as dense blocks in the analytical model, as the DAG builds them:
 * with every block dense the step is the dense model's (experts removed),
 * to the bit but for rounding, with or without a pipeline; in between it
 * moves monotonically from the all-experts step, one block at a time. */
START_TEST(analytic_dense_leading_blocks)
{
    char err[LOONG_ERRLEN];
    platform_spec net;
    calib *cb = h100_tables(&net);
    for (int pp = 1; pp <= 2; pp++) {
        double t[5];
        for (int k = 0; k <= 5; k++) { /* k dense blocks of 4; 5: the model without experts */
            config c = base("qwen3-30b-a3b", 8192, 1, 2, 1, RECOMPUTE_NONE);
            c.model.layers = 4;
            c.model.dense_layers = k < 5 ? k : 0;
            if (k == 5) c.model.experts = c.model.top_k = c.model.expert_ffn = c.model.shared_ffn = 0;
            c.pp = pp;
            c.micro_batches = 2;
            ck_assert_msg(config_validate(&c, err) == 0, "k %d: %s", k, err);
            analytic_result r;
            analytic_step(&c, cb, &net, &r);
            /* the planner's task estimate: finite though the dense blocks
             * outnumber a small DAG's layers, high by the dense blocks' fewer tasks */
            dag *g = dag_build(&c, err);
            ck_assert_msg(g != NULL, "%s", err);
            double est = plan_task_estimate(&c, 0, false), n = dag_ntasks(g);
            ck_assert_msg(est >= n && est <= 1.5 * n, "k %d pp %d: estimate %g, the DAG %g tasks", k, pp, est, n);
            dag_free(g);
            if (k < 5)
                t[k] = r.step;
            else
                near(t[4], r.step, "every block dense vs no experts");
        }
        for (int k = 1; k < 4; k++)
            ck_assert_msg((t[k] - t[k - 1]) * (t[4] - t[0]) > 0, "pp %d: %d dense blocks %.9g, %d: %.9g, all: %.9g", pp,
                          k - 1, t[k - 1], k, t[k], t[4]);
    }
    calib_free(cb);
}
END_TEST

/* Experts every other block (moe_layer_freq 2, or decoder_sparse_step 2's
 * odd blocks): in one stage the analytical step sums its blocks, so it
 * is the step of as many dense blocks leading; over two stages it is the
 * slower stage's, which holds the same count either way (2 of 4). */
START_TEST(analytic_interleaved_blocks)
{
    char err[LOONG_ERRLEN];
    platform_spec net;
    calib *cb = h100_tables(&net);
    for (int pp = 1; pp <= 2; pp++) {
        double t[3];
        for (int k = 0; k < 3; k++) { /* 0: 2 dense blocks leading; 1: experts in blocks 0, 2; 2: in 1, 3 */
            config c = base("qwen3-30b-a3b", 8192, 1, 2, 1, RECOMPUTE_NONE);
            c.model.layers = 8 / (3 - pp);
            c.model.dense_layers = k == 0 ? c.model.layers / 2 : 0;
            c.model.moe_freq = k ? 2 : 0;
            c.model.moe_phase = k - 1 > 0;
            c.pp = pp;
            c.micro_batches = 2;
            ck_assert_msg(config_validate(&c, err) == 0, "k %d: %s", k, err);
            ck_assert_int_eq(model_moe_blocks(&c.model), c.model.layers / 2);
            analytic_result r;
            analytic_step(&c, cb, &net, &r);
            t[k] = r.step;
        }
        if (pp == 1) near(t[1], t[0], "experts in the even blocks vs dense blocks leading");
        near(t[2], t[1], "experts in the odd blocks vs the even ones");
    }
    calib_free(cb);
}
END_TEST

/* MLA's latents: each block keeps its Q and KV down projections' outputs
 * and their norms' outputs, (q_lora + kv_lora) x 2 bf16 values per token
 * of the rank (DeepSeek-V3: 1536 and 512), so without a Q latent it keeps
 * T x 1536 x 2 x 2 bytes less, whatever else the block keeps. */
START_TEST(memory_mla_latents)
{
    config c = base("deepseek-v3", 8192, 1, 2, 1, RECOMPUTE_NONE), noq = c;
    noq.model.q_lora = 0;
    double T = (double)config_local_tokens(&c);
    near(memory_layer_activations(&c, RECOMPUTE_NONE) - memory_layer_activations(&noq, RECOMPUTE_NONE),
         T * 1536 * 2 * 2, "the Q latent and its norm's output");
    near(memory_layer_activations(&c, RECOMPUTE_FULL), memory_layer_activations(&noq, RECOMPUTE_FULL),
         "full recompute keeps the block input only");
}
END_TEST

/* llama3-8b (L 32, hidden 4096, H 32, H_kv 8, d 128, ffn 14336, vocab
 * 128256) at S = 1M on a 4x16 mesh: T = 16384 tokens per rank, N_s = 65536
 * per ring rank, 8 query and 2 KV heads per rank. */
START_TEST(memory_llama3_8b)
{
    const double L = 32, hid = 4096, d = 128, ffn = 14336, V = 128256;
    const double layer_w = hid * (32 + 16) * d + 32 * d * hid + 3 * hid * ffn + 2 * hid; /* 218,112,000 */
    const double psi = L * layer_w + 2 * V * hid + hid;                                  /* 8,030,261,248 */
    const double T = 16384, Ns = 65536, P = 64;
    const double x = T * hid * 2, olse = Ns * 8 * d * 2 + Ns * 8 * 4;
    /* x and its norm's output, qkv, the head-sharded q|kv and O, O and LSE, h and its norm's output, SwiGLU */
    const double none =
        2 * x + T * 48 * d * 2 + (Ns * (8 + 4) * d * 2 + T * 32 * d * 2) + olse + 2 * x + 3 * T * ffn * 2;
    /* ZeRO-1, Selective Checkpoint++: weights and grads whole, optimizer sharded */
    config c = base("llama3-8b", 1 << 20, 4, 16, 1, RECOMPUTE_SCPP);
    memory_estimate m;
    memory_estimate_config(&c, &m);
    near(m.weights, 2 * psi, "weights");
    near(m.grads, 4 * psi, "grads (Megatron's fp32 main gradients)");
    near(m.optimizer, 12 * psi / P, "optimizer");
    c.grad_reduce = GRAD_REDUCE_BF16; /* --grad-reduce-in-bf16: a bf16 gradient buffer */
    memory_estimate_config(&c, &m);
    near(m.grads, 2 * psi, "grads reduced in bf16");
    c.grad_reduce = GRAD_REDUCE_FP32;
    memory_estimate_config(&c, &m);
    near(m.act_per_layer, x + olse, "sc++ layer");
    near(m.working, none + (none - x - olse), "working (grads + what the re-run regenerates)");
    /* Megatron's selective, core_attn: the head-sharded q|kv, O and LSE
     * inside core attention go; with mlp too, h's norm output and SwiGLU */
    const double qh = Ns * (8 + 4) * d * 2;
    c.recompute = RECOMPUTE_SELECTIVE;
    memory_estimate_config(&c, &m);
    near(m.act_per_layer, none - qh - olse, "selective layer");
    near(m.working, none + qh + olse, "selective working");
    c.recompute_modules = RECOMPUTE_MOD_CORE_ATTN | RECOMPUTE_MOD_MLP;
    memory_estimate_config(&c, &m);
    near(m.act_per_layer, none - qh - olse - x - 3 * T * ffn * 2, "selective core_attn,mlp layer");
    /* full, uniform over groups of 4 blocks: 8 inputs kept, 4 blocks re-run at once */
    c.recompute = RECOMPUTE_FULL;
    c.recompute_modules = RECOMPUTE_MOD_CORE_ATTN;
    c.recompute_layers = 4;
    memory_estimate_config(&c, &m);
    near(m.activations, 8 * x, "full uniform 4");
    near(m.working, none + 4 * none - x, "full uniform 4 working");
    /* full, block method, 12 of the 32 blocks: 12 inputs, 20 whole blocks */
    c.recompute_method = RECOMPUTE_BLOCK;
    c.recompute_layers = 12;
    memory_estimate_config(&c, &m);
    near(m.activations, 12 * x + 20 * none, "full block 12");
    near(m.working, none + none - x, "full block working");
    near(m.lm_head, T * V * (2 + 4), "logits and their fp32 copy");
    c.cross_entropy = CE_EAGER; /* backward: log-probs, nll's gradient, the input's, fp32 */
    memory_estimate_config(&c, &m);
    near(m.lm_head, T * V * 12, "eager cross-entropy");
    c.cross_entropy = CE_FUSED;
    memory_estimate_config(&c, &m);
    /* a single ring: KV_IN0/1, DKV_BLK0/1, DKV_IN0/1, DKV_FINAL */
    double kv = 2 * Ns * 2 * d * 2, dkv = 2 * Ns * 2 * d * 4, a2a = 2 * T * (32 + 16) * d * 2;
    double bufs = 2 * kv + 5 * dkv + olse + a2a;
    near(m.attn_buffers, bufs, "attention buffers");
    c = base("llama3-8b", 1 << 20, 4, 16, 1, RECOMPUTE_SCPP);
    memory_estimate_config(&c, &m);
    near(m.peak,
         6 * psi + 12 * psi / P + MEMORY_WORKSPACE_BYTES + L * (x + olse) + fmax(T * V * 6, 2 * none - x - olse + bufs),
         "peak");
    /* ZeRO-3, full: everything sharded; gathered, at most two consecutive
     * blocks, the largest pair being the last layer and the embedding + LM
     * head block (2 V hid + hid) */
    const double head = 2 * V * hid + hid;
    c = base("llama3-8b", 1 << 20, 4, 16, 3, RECOMPUTE_FULL);
    memory_estimate_config(&c, &m);
    near(m.weights, 2 * psi / P + 2 * (layer_w + head), "zero-3 weights");
    near(m.grads, 4 * psi / P, "zero-3 grads");
    near(m.act_per_layer, x, "full layer");
    /* ZeRO-3 over dp = 4 replicas: the gradient group is 4 P ranks */
    c.dp = 4;
    memory_estimate_config(&c, &m);
    near(m.weights, 2 * psi / (4 * P) + 2 * (layer_w + head), "zero-3 weights, dp 4");
    near(m.grads, 4 * psi / (4 * P), "zero-3 grads, dp 4");
    near(m.optimizer, 12 * psi / (4 * P), "zero-3 optimizer, dp 4");
    /* ZeRO-0, none, with dp = 2: nothing sharded, every activation kept */
    c = base("llama3-8b", 1 << 20, 4, 16, 0, RECOMPUTE_NONE);
    c.dp = 2;
    memory_estimate_config(&c, &m);
    near(m.optimizer, 12 * psi, "zero-0 optimizer");
    near(m.act_per_layer, none, "none layer");
    near(m.working, none, "working without recompute");
}
END_TEST

/* 7b-mha (L 32, hidden 4096, H = H_kv = 32, d 128, ffn 11008, vocab 32000)
 * at S = 128K on 8x8 with the outer ring (w = 2): T = 2048, N_s = 16384,
 * 4 query and 4 KV heads per rank. */
START_TEST(memory_7b_mha)
{
    const double L = 32, hid = 4096, d = 128, ffn = 11008, V = 32000;
    const double layer_w = hid * 96 * d + 32 * d * hid + 3 * hid * ffn + 2 * hid;
    const double psi = L * layer_w + 2 * V * hid + hid;
    const double T = 2048, Ns = 16384, P = 64;
    config c = base("7b-mha", 128 * 1024, 8, 8, 2, RECOMPUTE_SCPP);
    c.ring = RING_DOUBLE;
    c.window = 2;
    memory_estimate m;
    memory_estimate_config(&c, &m);
    near(m.weights, 2 * psi, "weights");
    near(m.grads, 4 * psi / P, "zero-2 grads");
    near(m.optimizer, 12 * psi / P, "zero-2 optimizer");
    double olse = Ns * 4 * d * 2 + Ns * 4 * 4;
    near(m.act_per_layer, T * hid * 2 + olse, "sc++ layer");
    /* outer ring: KV_OUT0/1 and DKV_WIN0/1, DKV_OIN0/1 too */
    double kv = 2 * Ns * 4 * d * 2, dkv = 2 * Ns * 4 * d * 4, a2a = 2 * T * 96 * d * 2;
    near(m.attn_buffers, 4 * kv + 9 * dkv + olse + a2a, "double-ring buffers");
    /* dual ring: two lanes of half the tokens, the same bytes as one */
    c.ring = RING_DUAL;
    c.window = 8;
    memory_estimate_config(&c, &m);
    near(m.attn_buffers, 2 * kv + 5 * dkv + olse + a2a, "dual-ring buffers");
    c = base("7b-mha", 128 * 1024, 8, 8, 1, RECOMPUTE_NONE);
    memory_estimate_config(&c, &m);
    double none = 2 * T * hid * 2 + T * 96 * d * 2 + Ns * (4 + 8) * d * 2 + T * 32 * d * 2 + olse + 2 * T * hid * 2 +
                  3 * T * ffn * 2;
    near(m.act_per_layer, none, "none layer");
}
END_TEST

/* Tensor parallelism (Korthikanti et al. 2022, Table 2, with S the T
 * tokens of a CP rank). 7b-mha on a 2x4 context mesh, S = 128K: T = 16K,
 * no KV replication at tp 1, 2, 4. With sequence parallelism every tensor
 * a layer keeps is divided by tp (the paper's sbh 34/t); without it the
 * block and MLP inputs x and h and their norms' outputs stay whole (the
 * paper's replicated 10 sbh less its two dropout masks: here 4 T hidden a)
 * and the rest is divided (24/t). Model states: the
 * 1/tp shard of the weights with the norms replicated. */
START_TEST(memory_tensor_parallel)
{
    const double L = 32, hid = 4096, d = 128, ffn = 11008, V = 32000, T = 16384;
    for (int tp = 2; tp <= 4; tp *= 2) {
        config c1 = base("7b-mha", 128 * 1024, 2, 4, 1, RECOMPUTE_NONE), c = c1;
        c.tp = tp;
        memory_estimate m, m1;
        memory_estimate_config(&c1, &m1);
        for (int sp = 1; sp >= 0; sp--) {
            c.sequence_parallel = sp;
            for (int r = RECOMPUTE_NONE; r <= RECOMPUTE_FULL; r++) {
                double a1 = memory_layer_activations(&c1, (recompute_kind)r);
                double a = memory_layer_activations(&c, (recompute_kind)r);
                /* x, h, norms (none, and selective's core_attn); else x alone */
                double whole = r <= RECOMPUTE_SELECTIVE ? 4 * T * hid * 2 : T * hid * 2;
                near(a, sp ? a1 / tp : whole + (a1 - whole) / tp, "TP layer activations");
            }
            memory_estimate_config(&c, &m);
            double layer_w = (hid * 96 * d + 32 * d * hid + 3 * hid * ffn) / tp + 2 * hid;
            double psi = L * layer_w + 2 * (V / tp) * hid + hid;
            near(m.weights, 2 * psi, "TP weights");
            near(m.optimizer, 12 * psi / 8, "TP optimizer (ZeRO-1 over the 8 context ranks)");
            near(m.lm_head, m1.lm_head / tp, "vocab-parallel logits");
        }
    }
}
END_TEST

/* Korthikanti et al. 2022's own examples (arXiv 2205.05198, Table 3: the
 * 22B, h 6144, a 64, and the 175B, h 12288, a 96, both at s = 2048 and
 * t = 8), with the paper's per-layer activation bytes (Table 2, bf16):
 * with sequence parallelism sbh(34 + 5as/h)/t, of which FlashAttention
 * keeps no 5as/h term (= the paper's selective recompute, 34 sbh/t);
 * without it sbh(10 + 24/t); full recompute the 2sbh input (sharded by t
 * under sequence parallelism). loong's layer has no dropout, so it keeps
 * the paper's 34 and 10 less the two dropout masks (1 byte each per
 * element: 2 sbh), plus FlashAttention's fp32 LSE, 4 s b a/t. Its
 * SwiGLU of 8h/3 keeps the 16 sbh of the paper's GeLU MLP (4h in, 4h
 * out); MHA, d = h/a. Then the CP substitution: on a 1x2 ring every term
 * holds the rank's s/2 tokens instead of s. With --attention unfused and
 * both dropouts at 0.1 the layer is the paper's, and so are the bytes. */
START_TEST(memory_korthikanti_examples)
{
    static const struct {
        int h, a;
    } ex[] = {{6144, 64}, {12288, 96}};
    const double t = 8, s = 2048, b = 1;
    for (int i = 0; i < 2; i++)
        for (int ps = 1; ps <= 2; ps++) {
            config c = base("7b-mha", 2048, 1, ps, 1, RECOMPUTE_NONE);
            c.model = (model){"paper",         2,     ex[i].h,      ex[i].a, ex[i].a, ex[i].h / ex[i].a,
                              ex[i].h * 8 / 3, 51200, .tied = false};
            c.tp = 8;
            double S = s / ps, sbh = S * b * ex[i].h, lse = 4 * S * b * ex[i].a / t;
            for (int sp = 1; sp >= 0; sp--) {
                c.sequence_parallel = sp;
                char err[LOONG_ERRLEN] = "";
                ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
                double none = sp ? sbh * (34 - 2) / t + lse : sbh * (10 - 2 + 24 / t) + lse;
                near(memory_layer_activations(&c, RECOMPUTE_NONE), none, "paper example, no recompute");
                near(memory_layer_activations(&c, RECOMPUTE_FULL), sp ? 2 * sbh / t : 2 * sbh, "paper, full");
                /* the paper's selective recompute drops the 5as/h term, which
                 * FlashAttention never keeps: core attention's LSE is left */
                near(memory_layer_activations(&c, RECOMPUTE_SELECTIVE), none - lse, "paper, selective");
                /* the paper's own layer: unfused attention with both
                 * dropouts keeps sbh(34 + 5as/h)/t, or sbh(10 + 24/t +
                 * 5as/(ht)) without sequence parallelism, and selective
                 * recompute drops exactly the 5as/h term (on one rank:
                 * unfused attention takes no context parallelism) */
                if (ps > 1) continue;
                c.attention = ATTN_UNFUSED;
                c.attention_dropout = c.hidden_dropout = 0.1;
                ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
                double sas = 5 * ex[i].a * S * S * b / t;
                double paper = sp ? sbh * 34 / t + sas : sbh * (10 + 24 / t) + sas;
                near(memory_layer_activations(&c, RECOMPUTE_NONE), paper, "paper's layer, no recompute");
                near(memory_layer_activations(&c, RECOMPUTE_SELECTIVE), paper - sas, "paper's layer, selective");
                near(memory_layer_activations(&c, RECOMPUTE_FULL), sp ? 2 * sbh / t : 2 * sbh, "paper's layer, full");
                c.attention = ATTN_FLASH;
                c.attention_dropout = c.hidden_dropout = 0;
            }
        }
}
END_TEST

/* --precision's memory terms (memory.h): Transformer Engine keeps the
 * GEMMs' inputs in FP8, so against bf16 a layer keeps (a - 1) bytes less
 * per element of the two norms' outputs (T/tp x hidden each, sequence
 * parallel) and of the SwiGLU product (T x ffn/tp), and one byte more per
 * element of the output projection's FP8 input (T x H d/tp, beside O at
 * P_h = 1); the FP8 weight copies are 2 bytes per block parameter (MXFP8:
 * 2 + 2/32), and none of it under bf16. */
START_TEST(memory_fp8_terms)
{
    static const precision_kind rec[] = {PRECISION_FP8_DELAYED, PRECISION_FP8_CURRENT, PRECISION_MXFP8};
    config c = base("llama3-8b", 8192, 1, 1, 1, RECOMPUTE_NONE);
    c.tp = 8;
    char err[LOONG_ERRLEN];
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    double T = 8192, a = 2, h = c.model.hidden, ffn = c.model.ffn / 8.0, o = c.model.heads * c.model.head_dim / 8.0;
    double bf16 = memory_layer_activations(&c, RECOMPUTE_NONE),
           blocks = c.model.layers * (double)model_layer_params_tp(&c.model, 8);
    memory_estimate e;
    memory_estimate_config(&c, &e);
    ck_assert(e.fp8_weights == 0);
    for (int i = 0; i < 3; i++) {
        c.precision = rec[i];
        ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
        near(memory_layer_activations(&c, RECOMPUTE_NONE), bf16 - 2 * (T / 8) * h * (a - 1) - T * ffn * (a - 1) + T * o,
             "fp8 layer");
        near(memory_fp8_weight_bytes(&c, 0), blocks * (rec[i] == PRECISION_MXFP8 ? 2 + 2.0 / 32 : 2), "fp8 weights");
        memory_estimate_config(&c, &e);
        near(e.fp8_weights, memory_fp8_weight_bytes(&c, 0), "fp8 weights in the estimate");
    }
}
END_TEST

/* Does task `to` wait, directly or through others, for task `from` of the
 * same rank? (cross-stream deps and each stream's order) */
static bool waits_for(const dag *g, uint32_t to, uint32_t from)
{
    uint32_t n = dag_ntasks(g), *stack = malloc(n * sizeof *stack), top = 0;
    bool *seen = calloc(n, 1), found = false;
    int32_t *prev = malloc(n * sizeof *prev), last[64][STREAM_COUNT];
    memset(last, 0xff, sizeof last);
    for (uint32_t i = 0; i < n; i++) { /* the same-stream predecessor */
        const dag_task *t = dag_task_get(g, i);
        prev[i] = t->rank < 64 ? last[t->rank][t->stream] : -1;
        if (t->rank < 64) last[t->rank][t->stream] = (int32_t)i;
    }
    stack[top++] = to;
    while (top && !found) {
        uint32_t id = stack[--top];
        const dag_task *t = dag_task_get(g, id);
        const uint32_t *d = dag_deps(g, t);
        for (int k = -1; k < (int)t->ndeps; k++) {
            int32_t up = k < 0 ? prev[id] : (int32_t)d[k];
            if (up < 0 || seen[up]) continue;
            seen[up] = true;
            found |= (uint32_t)up == from;
            stack[top++] = (uint32_t)up;
        }
    }
    free(stack), free(seen), free(prev);
    return found;
}

/* ZeRO-3's gathers in the DAG, rank 0, and the memory model's count: with
 * --prefetch n, block j's forward gather (j = L: the LM head's) waits for
 * block j-n-1's forward and not for block j-n's, and its backward gather
 * waits for block j+n+1's backward and not for block j+n's; so at most
 * n + 1 consecutive blocks are gathered at once, and n + 1 are. The peak is
 * then the largest n + 1 consecutive blocks, which the memory model must
 * count. */
START_TEST(zero3_bounded_prefetch)
{
    for (int n = 0; n <= 2; n++) {
        config c = base("tiny", 8192, 1, 4, 3, RECOMPUTE_NONE);
        char err[LOONG_ERRLEN];
        c.model.layers = 6;
        c.prefetch = n;
        ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
        const int L = c.model.layers;
        dag *g = dag_build(&c, err);
        ck_assert_msg(g, "%s", err);
        int32_t fag[8], bag[8], ffirst[8], flast[8], bfirst[8], blast[8];
        for (int j = 0; j < 8; j++)
            fag[j] = bag[j] = ffirst[j] = flast[j] = bfirst[j] = blast[j] = -1;
        for (uint32_t i = 0; i < dag_ntasks(g); i++) {
            const dag_task *t = dag_task_get(g, i);
            if (t->rank != 0) continue;
            int j = t->layer < 0 ? L : t->layer;
            if (t->op == OP_PARAM_ALLGATHER) *(fag[j] < 0 ? &fag[j] : &bag[j]) = (int32_t)i;
            if (!task_is_compute(t)) continue;
            /* the memory-bound kernels around the blocks (the embedding,
             * the loss, the optimizer) do not mark where block L starts:
             * its gathered weights are the LM head's GEMM's */
            if (t->layer < 0 && t->kind >= TASK_NORM) continue;
            bool fwd = t->phase == PHASE_FWD && t->op != OP_LM_HEAD;
            int32_t *first = fwd ? ffirst : bfirst, *last = fwd ? flast : blast;
            if (t->op == OP_LM_HEAD && t->phase == PHASE_FWD) first = ffirst, last = flast;
            if (first[j] < 0) first[j] = (int32_t)i;
            /* a block's backward ends with the residual's gradient sum,
             * which touches no parameter: its gradient collective waits
             * for the last kernel that writes its gradients (the norm's) */
            if (t->kind != TASK_ADD) last[j] = (int32_t)i;
        }
        for (int j = 0; j <= L; j++) {
            ck_assert_msg(fag[j] >= 0 && ffirst[j] >= 0, "n %d: block %d's forward gather", n, j);
            ck_assert(waits_for(g, (uint32_t)ffirst[j], (uint32_t)fag[j]));
            if (j - n - 1 >= 0)
                ck_assert_msg(waits_for(g, (uint32_t)fag[j], (uint32_t)flast[j - n - 1]), "n %d j %d", n, j);
            int k = j - n > 0 ? j - n : 0; /* the block it runs beside */
            ck_assert_msg(!waits_for(g, (uint32_t)fag[j], (uint32_t)ffirst[k]), "n %d: gather %d is not ahead", n, j);
        }
        for (int j = 0; j < L; j++) {
            ck_assert(bag[j] >= 0 && waits_for(g, (uint32_t)bfirst[j], (uint32_t)bag[j]));
            if (j + n + 1 < L)
                ck_assert_msg(waits_for(g, (uint32_t)bag[j], (uint32_t)blast[j + n + 1]), "n %d j %d", n, j);
            int k = j + n < L - 1 ? j + n : L - 1;
            ck_assert_msg(!waits_for(g, (uint32_t)bag[j], (uint32_t)bfirst[k]), "n %d: bwd gather %d is not ahead", n,
                          j);
        }
        dag_free(g);
        double lp = (double)model_layer_params_tp(&c.model, 1), hp = (double)model_head_params_tp(&c.model, 1);
        double peak = 0;
        for (int a = 0; a + n <= L; a++) { /* windows of n + 1 blocks */
            double w = 0;
            for (int j = a; j <= a + n; j++)
                w += j < L ? lp : hp;
            peak = fmax(peak, w);
        }
        near(memory_gathered_params(&c), peak, "gathered parameters");
    }
}
END_TEST

static int divisors(int n)
{
    int k = 0;
    for (int i = 1; i <= n; i++)
        k += n % i == 0;
    return k;
}

/* 16 GPUs, llama3-8b: every P_h | 16 is valid (P_h = 16 > H_kv = 8 needs
 * replication). Per mesh: 2 placements when P_h, P_s > 1; ring layouts
 * 1 when P_s = 1, else 2 d(P_s) + 1 (contiguous: single + all-gather +
 * d(P_s) - 2 windows, neither w = P_s nor w = 1, both the single ring;
 * zigzag: those and dual); with documents 5 d(P_s) + 3 (doc-contiguous
 * like contiguous; doc-zigzag and balanced like zigzag). */
START_TEST(enumeration_count)
{
    int closed = 0;
    for (int ph = 1; ph <= 16; ph++) {
        if (16 % ph) continue;
        int ps = 16 / ph, places = ph > 1 && ps > 1 ? 2 : 1;
        closed += places * (ps == 1 ? 1 : _i ? 5 * divisors(ps) + 3 : 2 * divisors(ps) + 1);
    }
    ck_assert_int_eq(closed, _i ? 28 + 2 * 23 + 2 * 18 + 2 * 13 + 1 : 11 + 2 * 9 + 2 * 7 + 2 * 5 + 1);
    plan_request req = {0};
    req.base = base("llama3-8b", 128 * 1024, 1, 1, 1, RECOMPUTE_SELECTIVE);
    char err[LOONG_ERRLEN];
    if (_i) req.base.docs = docs_parse_list("100K,28K", req.base.seq, "test", err);
    req.gpus = 16;
    req.degree[MESH_DP] = req.degree[MESH_PP] = 1;
    req.degree[MESH_TP] = 1; /* the closed form above is of the context-parallel layouts */
    req.gpu_mem = 1e15;
    int n, valid = 0, removed = 0;
    plan_layout *ls = plan_enumerate(&req, &n);
    for (int i = 0; i < n; i++) {
        if (!ls[i].removed) {
            valid++;
            continue;
        }
        removed++;
        ck_assert_msg(ls[i].reason[0], "%s removed without a reason", ls[i].name);
        ck_assert_ptr_nonnull(strstr(ls[i].reason, "KV replication is off"));
    }
    ck_assert_int_eq(valid, closed);
    ck_assert_int_eq(removed, 1); /* 16x1 without replication */
    free(ls);
    /* recompute searched: each layout under six policies (plan.c's
     * searched_recompute), its short name last in the layout's */
    static const char *const rc[] = {" none", " sel", " sel+mlp", " sc++", " full", " full-b16"};
    req.search_recompute = true;
    ls = plan_enumerate(&req, &n);
    int per[6] = {0};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 6 && !ls[i].removed; k++) {
            size_t a = strlen(ls[i].name), b = strlen(rc[k]);
            per[k] += a > b && !strcmp(ls[i].name + a - b, rc[k]);
        }
    for (int k = 0; k < 6; k++)
        ck_assert_msg(per[k] == closed, "%d layouts end in '%s', not %d", per[k], rc[k], closed);
    free(ls);
}
END_TEST

/* Five dimensions (--pp auto, a global batch of 8 samples on 32 GPUs):
 * every layout uses the 32 GPUs as dp x pp x tp x P; its micro-batches do
 * the global batch (m dp B = 8) or it is removed for that reason; every
 * pp dividing 32 that llama3-8b's 32 layers split over appears; pipelined
 * layouts run ZeRO 0 or 1, 1F1B or interleaved with v 2 only where the
 * layers split into 2 pp chunks and m is a multiple of pp. */
START_TEST(pipeline_enumeration)
{
    plan_request req = {0};
    req.base = base("llama3-8b", 128 * 1024, 1, 1, 1, RECOMPUTE_SELECTIVE);
    req.gpus = 32; /* every dimension searched (PLAN_SEARCHED) */
    req.global_batch = 8;
    req.search_zero = req.search_schedule = true;
    req.gpu_mem = 1e15;
    int n, seen_pp[33] = {0}, interleaved = 0;
    plan_layout *ls = plan_enumerate(&req, &n);
    for (int i = 0; i < n; i++) {
        const config *c = &ls[i].c;
        ck_assert_int_eq(config_world(c), 32);
        if (ls[i].removed) {
            if (8 % (c->dp * c->batch)) ck_assert_ptr_nonnull(strstr(ls[i].reason, "--global-batch 8"));
            continue;
        }
        ck_assert_int_eq(c->micro_batches * c->dp * c->batch, 8);
        seen_pp[c->pp]++;
        if (c->pp > 1) ck_assert_int_le(c->zero, 1);
        if (c->schedule == SCHED_INTERLEAVED) {
            interleaved++;
            ck_assert_int_eq(c->vpp, 2);
            ck_assert_int_eq(c->model.layers % (2 * c->pp), 0);
            ck_assert_int_eq(c->micro_batches % c->pp, 0);
        }
    }
    for (int pp = 1; pp <= 8; pp *= 2)
        ck_assert_msg(seen_pp[pp] > 0, "no feasible layout of pp %d", pp);
    ck_assert_int_gt(interleaved, 0);
    free(ls);
}
END_TEST

static calib *h100(void)
{
    char err[LOONG_ERRLEN];
    calib *cb = calib_load(LOONG_SRCDIR "/topologies/h100.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    return cb;
}

static platform_spec net_of(const char *platform)
{
    platform_spec sp;
    char err[LOONG_ERRLEN];
    ck_assert_msg(platform_spec_read(platform, &sp, err) == 0, "%s", err);
    return sp;
}

/* A too small GPU removes layouts as "predicted OOM at X GB of Y GB", and
 * the analytical model stays under 10 ms per layout at 256 GPUs. */
START_TEST(oom_reason_and_cost)
{
    plan_request req = {0};
    req.base = base("llama3-8b", 1 << 20, 1, 1, 1, RECOMPUTE_NONE);
    req.gpus = 256;
    req.degree[MESH_PP] = 1;
    req.gpu_mem = 40e9;
    int n, oom = 0, scored = 0;
    plan_layout *ls = plan_enumerate(&req, &n);
    calib *cb = h100();
    platform_spec net = net_of(LOONG_SRCDIR "/topologies/dgx-h100-32n.xml");
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    plan_score(ls, 0, n, &req, cb, &net);
    clock_gettime(CLOCK_MONOTONIC, &b);
    for (int i = 0; i < n; i++) {
        oom +=
            ls[i].removed && strstr(ls[i].reason, "predicted OOM: reserved ") && strstr(ls[i].reason, "over 40.0 GB");
        scored += !ls[i].removed;
    }
    ck_assert_int_gt(oom, 0);
    req.gpu_mem = 1e15;
    for (int i = 0; i < n; i++)
        if (strstr(ls[i].reason, "OOM")) ls[i].removed = false;
    clock_gettime(CLOCK_MONOTONIC, &a);
    plan_score(ls, 0, n, &req, cb, &net);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double per = ((double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec)) / n;
    printf("# analytical model: %.3f ms per layout over %d layouts at 256 GPUs\n", 1e3 * per, n);
    ck_assert_double_lt(per, 10e-3);
    for (int i = 0; i < n; i++)
        if (!ls[i].removed) ck_assert(ls[i].an.step > 0 && isfinite(ls[i].an.step));
    (void)scored;
    calib_free(cb);
    free(ls);
}
END_TEST

static void one_line_exit2(const char *args)
{
    run_result r = run_cmd(PLAN " %s", args);
    ck_assert_msg(r.status == 2, "'%s' exited %d: %s", args, r.status, r.err);
    ck_assert_msg(count_lines(r.err) == 1, "'%s' stderr: %s", args, r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "loong plan: error: "));
}

/* Ties and robustness decide the recommendation: layouts within the tie
 * width of the fastest are one choice, made by robustness (worst step under
 * --robust) unless those tie too, then by simplicity (fewer streams). */
static plan_layout layout_of(ring_kind ring, double step, double worst)
{
    plan_layout l;
    memset(&l, 0, sizeof l);
    l.c = base("llama3-8b", 128 << 10, 8, 4, 1, RECOMPUTE_SELECTIVE);
    l.c.ring = ring;
    char err[LOONG_ERRLEN];
    ck_assert_msg(config_validate(&l.c, err) == 0, "%s", err);
    config_layout_name(&l.c, l.name, sizeof l.name);
    l.sim_step = step;
    for (int k = 0; k < PLAN_PERT_COUNT; k++)
        l.robust[k] = worst < 0 ? -1 : step + (worst - step) * (k == PLAN_PERT_NIC ? 1 : 0.5);
    return l;
}

static int pick_of(plan_layout *ls, int n, double tie)
{
    int idx[8];
    int m = plan_rank(ls, n, idx);
    return plan_recommend(ls, idx, m, tie);
}

START_TEST(tie_and_robust_pick)
{
    /* the dual ring uses two more streams (its second ring and KV-gradient ring) than the single */
    plan_layout d = layout_of(RING_DUAL, 1.0, -1), s1 = layout_of(RING_SINGLE, 1.02, -1);
    ck_assert_int_gt(plan_streams(&d), plan_streams(&s1));
    plan_layout ls[3] = {d, s1, layout_of(RING_SINGLE, 1.5, -1)};
    ck_assert_int_eq(pick_of(ls, 3, 0.0459), 1); /* 2 % apart: a tie, the simpler wins */
    ck_assert_int_eq(pick_of(ls, 3, 0.01), 0);   /* a 1 % tie width: the fastest */
    ls[1].sim_step = 1.06;
    ck_assert_int_eq(pick_of(ls, 3, 0.0459), 0); /* 6 % apart: no tie */
    /* with --robust: the more robust of a tie wins, unless their worst cases tie too */
    plan_layout r[2] = {layout_of(RING_DUAL, 1.0, 1.10), layout_of(RING_SINGLE, 1.02, 1.40)};
    ck_assert_int_eq(pick_of(r, 2, 0.0459), 0);
    ck_assert(fabs(plan_worst_step(&r[1]) - 1.40) < 1e-12);
    r[1] = layout_of(RING_SINGLE, 1.02, 1.12);
    ck_assert_int_eq(pick_of(r, 2, 0.0459), 1);
}
END_TEST

/* A scored layout of llama3-8b at 128K on 16 GPUs: dp replicas of a
 * 1 x (16 / dp) ring, m micro-batches each, a planted step. */
static plan_layout planted(int dp, int m, double step)
{
    plan_layout l;
    memset(&l, 0, sizeof l);
    l.c = base("llama3-8b", 128 << 10, 1, 16 / dp, 1, RECOMPUTE_SELECTIVE);
    l.c.dp = dp;
    l.c.micro_batches = m;
    char err[LOONG_ERRLEN];
    ck_assert_msg(config_validate(&l.c, err) == 0, "%s", err);
    snprintf(l.name, sizeof l.name, "dp%d m%d", dp, m);
    l.sim_step = step;
    for (int k = 0; k < PLAN_PERT_COUNT; k++)
        l.robust[k] = -1;
    return l;
}

/* The objective at equal work: every layout of a global batch of 8
 * samples on 16 GPUs runs dp x m = 8, so the ranking is the order of the
 * planted step times whatever dp is (step x P ranked dp8 first, as the
 * old key did); "ahead" ratios are step ratios. With the micro-batches
 * fixed per replica instead, a replica's samples differ: GPU-seconds per
 * sample, 16 step / (dp m), decides. */
START_TEST(rank_at_equal_work)
{
    plan_layout ls[4] = {planted(8, 1, 2.0), planted(2, 4, 1.5), planted(1, 8, 1.8), planted(4, 2, 1.6)};
    int idx[4], want[4] = {1, 3, 2, 0};
    ck_assert_int_eq(plan_rank(ls, 4, idx), 4);
    for (int k = 0; k < 4; k++)
        ck_assert_msg(idx[k] == want[k], "rank %d: %s, want %s", k + 1, ls[idx[k]].name, ls[want[k]].name);
    for (int k = 0; k < 4; k++)
        near(plan_gpu_seconds(&ls[k]), ls[k].sim_step * 16 / 8, "GPU-seconds per sample");
    near(plan_gpu_seconds(&ls[0]) / plan_gpu_seconds(&ls[1]), 2.0 / 1.5, "a throughput ratio");
    ck_assert_int_eq(plan_recommend(ls, idx, 4, 0.01), 1);
    /* one micro-batch per replica: dp 8 does 8 samples in 1.0 s (2 GPU-s each), dp 2 two in 0.3 s (2.4) */
    plan_layout fixed[2] = {planted(2, 1, 0.3), planted(8, 1, 1.0)};
    ck_assert_int_eq(plan_rank(fixed, 2, idx), 2);
    ck_assert_int_eq(idx[0], 1);
    near(plan_gpu_seconds(&fixed[0]), 0.3 * 16 / 2, "dp 2, GPU-seconds per sample");
}
END_TEST

/* The planner's task estimate (four small DAGs, bilinear in the layers
 * per chunk and the micro-batches) against the DAG built whole: one
 * replica with micro-batches, a 1F1B pipeline with TP, an interleaved one. */
/* The work units of a built DAG, counted directly (plan.h): one a task,
 * and PLAN_SIM_A2A_PEER_UNITS for each other member an all-to-all task
 * exchanges with, over every replica its group spans. */
static double units_of(const dag *g)
{
    double u = dag_ntasks(g);
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->kind != TASK_ALLTOALL) continue;
        int n, stride, count;
        dag_group(g, t->group, &n);
        dag_group_replicas(g, t->group, &stride, &count);
        u += PLAN_SIM_A2A_PEER_UNITS * (n * count - 1);
    }
    return u;
}

START_TEST(task_estimate)
{
    static const struct {
        const char *model;
        int tp, ph, ps, pp, vpp, m, ep, dp;
    } k[] = {{"llama3-8b", 1, 2, 4, 1, 1, 3, 1, 1},
             {"llama3-8b", 2, 1, 2, 2, 1, 4, 1, 1},
             {"llama3-8b", 1, 2, 2, 2, 2, 4, 1, 1},
             {"qwen3-30b-a3b", 1, 4, 1, 2, 1, 3, 8, 2}};
    int nk = (int)(sizeof k / sizeof *k);
    for (int i = 0; i < nk; i++) {
        config c = base(k[i].model, 16 << 10, k[i].ph, k[i].ps, 1, RECOMPUTE_SELECTIVE);
        c.tp = k[i].tp, c.pp = k[i].pp, c.vpp = k[i].vpp, c.micro_batches = k[i].m, c.ep = k[i].ep, c.dp = k[i].dp;
        c.model.layers = c.model.layers < 8 ? c.model.layers : 8;
        c.model.dense_layers = 0;
        c.schedule = k[i].vpp > 1 ? SCHED_INTERLEAVED : SCHED_1F1B;
        char err[LOONG_ERRLEN];
        ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
        dag *g = dag_build(&c, err);
        ck_assert_msg(g != NULL, "%s", err);
        plan_sim_size est = plan_sim_estimate(&c, 0, false, 0);
        double n = dag_ntasks(g), u = units_of(g);
        printf("# task estimate, case %d: %.0f tasks and %.0f units against %.0f and %.0f built\n", i, est.tasks,
               est.units, n, u);
        ck_assert_msg(fabs(est.tasks - n) <= 0.01 * n, "case %d: estimated %.0f tasks, built %.0f", i, est.tasks, n);
        ck_assert_msg(fabs(est.units - u) <= 0.01 * u, "case %d: estimated %.0f units, built %.0f", i, est.units, u);
        /* all-to-alls (Ulysses' heads, the experts' dispatch) weigh more than a task; without them a unit is a task */
        ck_assert(k[i].ph > 1 || k[i].ep > 1 ? u > n : u == n);
        ck_assert(fabs(plan_task_estimate(&c, 0, false) - est.tasks) <= 1e-9 * est.tasks);
        plan_sim_size all = plan_sim_estimate(&c, 0, true, 0);
        ck_assert(fabs(all.tasks - est.tasks * c.dp) <= 1e-9 * est.tasks);
        ck_assert(fabs(all.units - est.units * c.dp) <= 1e-9 * est.units);
        /* TP, head or ring ranks by symmetry: rank 0's tasks of each group are built, 1/size of them (they
         * run alike) */
        static const mesh_dim copied[] = {MESH_TP, MESH_HEAD, MESH_SEQ};
        for (int d = 0; d < 3; d++) {
            int size = copied[d] == MESH_TP ? c.tp : copied[d] == MESH_HEAD ? c.p_head : c.p_seq;
            if (size < 2 || (copied[d] != MESH_TP && c.ep > 1)) continue; /* experts span head, ring ranks: no fold */
            dag *f = dag_build_folded(&c, MESH_BIT(copied[d]), err);
            ck_assert_msg(f != NULL, "%s", err);
            plan_sim_size fe = plan_sim_estimate(&c, 0, false, MESH_BIT(copied[d]));
            ck_assert_msg(dag_ntasks(f) * (uint32_t)size == dag_ntasks(g), "case %d: %u folded x %d vs %u", i,
                          dag_ntasks(f), size, dag_ntasks(g));
            ck_assert(dag_ntasks_whole(f) == dag_ntasks(g));
            ck_assert_msg(fabs(fe.tasks - dag_ntasks(f)) <= 0.01 * dag_ntasks(f), "case %d: folded estimate %.0f", i,
                          fe.tasks);
            ck_assert_int_eq(dag_validate(f, err), 0);
            /* a ring step from an unbuilt ring rank moves what its sender's match moves in the whole DAG */
            int unmatched = 0;
            for (uint32_t t = 0, w = 0; copied[d] == MESH_SEQ && t < dag_ntasks(f); t++) {
                const dag_task *x = dag_task_get(f, t);
                if (x->kind != TASK_RECV || x->match != DAG_NONE) continue;
                while (w < dag_ntasks(g) &&
                       !(dag_task_get(g, w)->rank == x->rank && dag_task_get(g, w)->kind == TASK_RECV &&
                         dag_task_get(g, w)->op == x->op && dag_task_get(g, w)->layer == x->layer &&
                         dag_task_get(g, w)->step == x->step && dag_task_get(g, w)->src == x->src &&
                         dag_task_get(g, w)->phase == x->phase))
                    w++;
                ck_assert_msg(w < dag_ntasks(g), "case %d: task %u has no counterpart", i, t);
                ck_assert_uint_eq(dag_task_bytes_moved(f, x), dag_task_bytes_moved(g, dag_task_get(g, w)));
                w++, unmatched++;
            }
            ck_assert_msg(copied[d] != MESH_SEQ || unmatched > 0, "case %d: no ring step crosses the fold", i);
            dag_free(f);
        }
        dag_free(g);
    }
}
END_TEST

/* What the plan's simulations fold (plan_foldable, plan_fold): head, ring
 * and tp ranks in a pipelined layout on a platform of a NIC per GPU and rails
 * of their own links; neither where GPUs share a NIC (a folded rank's
 * ring traffic would be missing from it), on a three-tier fabric whose
 * pod uplinks are oversubscribed, or on a PCIe server; no head fold with
 * experts across head ranks, no ring fold where the ring ranks' work
 * differs; nothing but dp without a pipeline or under a perturbation. */
START_TEST(fold_by_platform)
{
    char err[LOONG_ERRLEN];
    platform_spec sp;
    ck_assert_int_eq(platform_spec_defaults("h100", &sp, err), 0);
    const mesh_dims TP = MESH_BIT(MESH_TP), HEAD = MESH_BIT(MESH_HEAD), DP = MESH_BIT(MESH_DP),
                    SEQ = MESH_BIT(MESH_SEQ);
    ck_assert_uint_eq(plan_foldable(&sp), TP | HEAD | SEQ);
    platform_spec shared = sp;
    shared.nics_per_node = sp.gpus_per_node / 2;
    ck_assert_uint_eq(plan_foldable(&shared), 0);
    ck_assert_ptr_nonnull(strstr(platform_spec_rails_shared(&shared), "share a rail NIC"));
    platform_spec pods = sp;
    pods.fabric = PLATFORM_RAIL, pods.nodes = 2048, pods.nodes_per_leaf = 32, pods.unit_nodes = 32;
    pods.switch_ports = 64, pods.spine_oversub = 2;
    ck_assert_msg(platform_spec_pod_nodes(&pods) > 0, "no pods: the case tests nothing");
    ck_assert_uint_eq(plan_foldable(&pods), 0);
    pods.spine_oversub = 1; /* non-blocking: the uplinks never carry more than they can */
    ck_assert_uint_eq(plan_foldable(&pods), TP | HEAD | SEQ);
    platform_spec pcie = sp;
    pcie.sockets = 2;
    ck_assert_uint_eq(plan_foldable(&pcie), 0);
    config c = base("llama3-8b", 16 << 10, 4, 2, 1, RECOMPUTE_SELECTIVE);
    c.tp = 2, c.pp = 2, c.dp = 2, c.micro_batches = 4;
    ck_assert_int_eq(config_validate(&c, err), 0);
    ck_assert_uint_eq(plan_fold(&c, TP | HEAD | SEQ, false), DP | TP | HEAD | SEQ);
    ck_assert_uint_eq(plan_fold(&c, TP, false), DP | TP);
    ck_assert_uint_eq(plan_fold(&c, TP | HEAD | SEQ, true), DP);
    config contiguous = c; /* the ring ranks' work differs: no ring fold (config_ring_asymmetry) */
    contiguous.partition = PART_CONTIGUOUS;
    ck_assert_int_eq(config_validate(&contiguous, err), 0);
    ck_assert_uint_eq(plan_fold(&contiguous, TP | HEAD | SEQ, false), DP | TP | HEAD);
    c.pp = 1, c.micro_batches = 1;
    ck_assert_uint_eq(plan_fold(&c, TP | HEAD | SEQ, false), DP);
    config m = base("qwen3-30b-a3b", 16 << 10, 4, 1, 1, RECOMPUTE_SELECTIVE);
    m.pp = 2, m.micro_batches = 4, m.ep = 4;
    ck_assert_uint_eq(plan_fold(&m, TP | HEAD, false) & HEAD, 0);
}
END_TEST

/* A plan always finishes: a pick whose simulation is stopped at
 * --sim-timeout (every child takes longer than 0.02 s: loading SimGrid
 * alone does), or estimated over it, keeps its analytical score, marked
 * model* in the table and with its reason in the JSON; nothing is lost. */
START_TEST(unsimulated_keep_their_score)
{
    static const char *const cases[][2] = {{"0.02", "stopped at --sim-timeout 0.02 s"},
                                           {"1e-9", "more than --sim-timeout 1e-09 s"}};
    for (int k = 0; k < 2; k++) {
        run_result r = run_cmd(PLAN " --gpus 8 --dp 1 --micro-batches 1 --seq 16K --zero 1 --recompute selective "
                                    "--top 1 --rows 3 --sim-timeout %s --json /tmp/loong-plan-unsim.json",
                               cases[k][0]);
        ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
        ck_assert_msg(strstr(r.out, " model* ") && !strstr(r.out, "   sim "), "%.900s", r.out); /* the by column */
        ck_assert_msg(strstr(r.out, cases[k][1]), "no '%s' in:\n%.900s", cases[k][1], r.out);
        ck_assert_ptr_nonnull(strstr(r.out, "# recommended: "));
        char *j = read_text("/tmp/loong-plan-unsim.json");
        ck_assert_msg(strstr(j, "\"not_simulated\": \"") != NULL, "%s", j);
        free(j);
    }
    unlink("/tmp/loong-plan-unsim.json");
}
END_TEST

/* The error the plan quotes (fidelity.h): closed forms of the summary, the
 * compiled-in table is recorded.txt's, and the default tie is the model's
 * error between two layouts unless --tie sets it. */
START_TEST(model_error_tie)
{
    /* two rows: sd of ln(1 + e) is |r1 - r2| / sqrt(2), so the error
     * between two layouts is (1 + e1) / (1 + e2) - 1 */
    const fidelity_row rows[] = {{"e2e.a", 50}, {"e2e.b", 20}, {"attn.c", -10}, {"e2ex.d", 90}};
    fidelity_error e;
    ck_assert_int_eq(fidelity_summarize(rows, 4, "e2e", FIDELITY_ANY, &e), 2);
    ck_assert_double_eq_tol(e.between_pct, 100 * (1.5 / 1.2 - 1), 1e-9);
    ck_assert_double_eq_tol(e.mean_abs_pct, 35, 1e-12);
    ck_assert_double_eq(e.lo_pct, 20);
    ck_assert_double_eq(e.hi_pct, 50);
    ck_assert_int_eq(fidelity_summarize(rows, 4, "attn", FIDELITY_ANY, &e), 1);
    ck_assert_double_eq(e.between_pct, 0); /* one row: no spread to speak of */
    const fidelity_row same[] = {{"e2e.a", 40}, {"e2e.b", 40}, {"e2e.c", 40}};
    fidelity_summarize(same, 3, "e2e", FIDELITY_ANY, &e);
    ck_assert_double_eq_tol(e.between_pct, 0, 1e-12); /* a common bias cancels */
    ck_assert_int_eq(fidelity_summarize(rows, 4, "mem", FIDELITY_ANY, &e), 0);
    /* a source that also gave a calib file its kernels is not independent */
    const fidelity_row shared[] = {
        {"e2e.a.x", 10}, {"e2e.simumax.y", 90}, {"e2e.simumaxi.z", 30}, {"e2e.simumax-b200-calib.w", 70}};
    ck_assert_int_eq(fidelity_summarize(shared, 4, "e2e", FIDELITY_ANY, &e), 2);
    ck_assert_double_eq(e.hi_pct, 30);
    /* FP8 sources' rows are FP8 plans', the others bf16 plans' */
    const fidelity_row prec[] = {{"e2e.nemo.x", 40}, {"e2e.torchtitan.y", 80}, {"e2e.megatron.z", 10}};
    ck_assert_int_eq(fidelity_summarize(prec, 3, "e2e", FIDELITY_FP8, &e), 2);
    ck_assert_double_eq(e.lo_pct, 40);
    ck_assert_int_eq(fidelity_summarize(prec, 3, "e2e", FIDELITY_BF16, &e), 1);
    ck_assert_double_eq(e.hi_pct, 10);
    ck_assert_int_eq(fidelity_summarize(prec, 3, "e2e", FIDELITY_ANY, &e), 3);
    /* the compiled table has recorded.txt's independent e2e rows, split by precision */
    const char *rec = "grep '^e2e\\.' " LOONG_SRCDIR
                      "/experiments/fidelity/recorded.txt | grep -v '^e2e\\.simumax\\(-b200-calib\\)\\?\\.'";
    run_result r = run_cmd("%s | grep -vc '^e2e\\.\\(nemo\\|torchtitan\\)\\.'", rec);
    ck_assert_int_eq(fidelity_for_run(SCOPE_STEP, PRECISION_BF16, false, NULL, &e), atoi(r.out));
    ck_assert_str_eq(e.kind, "e2e");
    fidelity_error f, g;
    r = run_cmd("%s | grep -c '^e2e\\.\\(nemo\\|torchtitan\\)\\.'", rec);
    ck_assert_int_eq(fidelity_for_run(SCOPE_STEP, PRECISION_MXFP8, false, NULL, &f), atoi(r.out));
    /* a bf16 mixture of experts' plan quotes the bf16 moe rows, but those sharing a calib file's source */
    r = run_cmd("grep '^moe\\.' " LOONG_SRCDIR "/experiments/fidelity/recorded.txt | grep -v '^moe\\.mbridge\\.' | "
                "grep -vc '^moe\\.simumax\\(-b200-calib\\)\\?\\.'");
    ck_assert_int_eq(fidelity_for_run(SCOPE_STEP, PRECISION_BF16, true, NULL, &g), atoi(r.out));
    ck_assert_str_eq(g.kind, "moe");
    /* an FP8 one, the FP8 moe rows (Megatron-Bridge's) */
    fidelity_error h;
    r = run_cmd("grep -c '^moe\\.mbridge\\.' " LOONG_SRCDIR "/experiments/fidelity/recorded.txt");
    ck_assert_int_gt(atoi(r.out), 0);
    ck_assert_int_eq(fidelity_for_run(SCOPE_STEP, PRECISION_MXFP8, true, NULL, &h), atoi(r.out));
    /* the plan's default tie is it, --tie overrides it */
    const char *json = "/tmp/loong-plan-tie.json";
    ck_assert_int_eq(run_cmd(PLAN " --gpus 8 --seq 128K --top 0 --json %s -o /dev/null", json).status, 0);
    char want[64];
    snprintf(want, sizeof want, "\"tie_pct\": %.17g", e.between_pct);
    r = run_cmd("grep -o '\"tie_pct\": [0-9.e+-]*' %s", json);
    ck_assert_msg(strstr(r.out, want) || fabs(atof(strchr(r.out, ':') + 1) - e.between_pct) < 1e-9, "%s vs %s", r.out,
                  want);
    ck_assert_int_eq(run_cmd("grep -q '\"tie_from\": \"model_error.between_layouts_pct\"' %s", json).status, 0);
    /* an FP8 plan's default tie is the FP8 rows' */
    ck_assert_int_eq(
        run_cmd(PLAN " --gpus 8 --seq 128K --top 0 --precision fp8-current --json %s -o /dev/null", json).status, 0);
    r = run_cmd("grep -o '\"tie_pct\": [0-9.e+-]*' %s", json);
    ck_assert_msg(f.rows > 1 && fabs(atof(strchr(r.out, ':') + 1) - f.between_pct) < 1e-9 * f.between_pct,
                  "%s vs %.17g", r.out, f.between_pct);
    ck_assert_int_eq(run_cmd(PLAN " --gpus 8 --seq 128K --top 0 --tie 3 --json %s -o /dev/null", json).status, 0);
    r = run_cmd("grep -o '\"tie_pct\": [0-9.e+-]*' %s", json);
    ck_assert_double_eq_tol(atof(strchr(r.out, ':') + 1), 3, 1e-9);
    ck_assert_int_eq(run_cmd("grep -q '\"tie_from\": \"--tie\"' %s", json).status, 0);
    unlink(json);
}
END_TEST

/* A plan quotes the rows of its platform's GPU kind alone when there are
 * FIDELITY_GPU_MIN_ROWS of them (fidelity.h), else every GPU's: the
 * sources' GPUs, Megatron-Bridge's from the row's name. */
START_TEST(model_error_per_gpu)
{
    const fidelity_row rows[] = {{"e2e.megatron.a", 10},     {"e2e.megatron.b", 12},     {"e2e.megatron.c", 8},
                                 {"e2e.simumax-b200.d", 40}, {"e2e.simumax-b200.e", 50}, {"moe.mbridge.gb200.x", 60}};
    fidelity_error e;
    ck_assert_int_eq(fidelity_summarize_gpu(rows, 6, "e2e", FIDELITY_BF16, "a100", &e), 3);
    ck_assert_double_eq(e.hi_pct, 12);
    ck_assert_str_eq(e.gpu, "a100");
    ck_assert_int_eq(fidelity_summarize_gpu(rows, 6, "e2e", FIDELITY_BF16, "b200", &e), 2);
    ck_assert_double_eq(e.lo_pct, 40);
    ck_assert_int_eq(fidelity_summarize_gpu(rows, 6, "moe", FIDELITY_ANY, "gb200", &e), 1);
    ck_assert_int_eq(fidelity_summarize_gpu(rows, 6, "e2e", FIDELITY_BF16, NULL, &e), 5);
    char g[32];
    ck_assert(fidelity_row_gpu("moe.mbridge.gb300.30b-a3b", g, sizeof g) && !strcmp(g, "gb300"));
    ck_assert(fidelity_row_gpu("e2e.simumax-b200-calib.70b", g, sizeof g) && !strcmp(g, "b200"));
    ck_assert(!fidelity_row_gpu("attn.batch.flash.fwd", g, sizeof g));
    ck_assert(!fidelity_row_gpu("moe.mbridge.b200", g, sizeof g)); /* no model after the GPU */
    /* the compiled table: a B200 bf16 plan quotes SimuMax's B200 runs alone, an H100 one (no bf16 H100 run) all */
    run_result r = run_cmd("grep -c '^e2e\\.simumax-b200\\.' " LOONG_SRCDIR "/experiments/fidelity/recorded.txt");
    ck_assert_int_ge(atoi(r.out), FIDELITY_GPU_MIN_ROWS);
    ck_assert_int_eq(fidelity_for_run(SCOPE_STEP, PRECISION_BF16, false, "b200", &e), atoi(r.out));
    ck_assert_str_eq(e.gpu, "b200");
    fidelity_error all;
    ck_assert_int_eq(fidelity_for_run(SCOPE_STEP, PRECISION_BF16, false, "h100", &all),
                     fidelity_for_run(SCOPE_STEP, PRECISION_BF16, false, NULL, &e));
    ck_assert_ptr_null(all.gpu);
    /* and `loong plan` on a B200 platform says so, its tie the B200 rows' */
    const char *xml = "/tmp/loong-plan-b200.xml", *json = "/tmp/loong-plan-b200.json";
    ck_assert_int_eq(run_cmd(LOONG_BIN " topo --gpu b200 -o %s", xml).status, 0);
    fidelity_for_run(SCOPE_STEP, PRECISION_BF16, false, "b200", &e);
    r = run_cmd(LOONG_BIN " plan --platform %s --quiet --gpus 8 --seq 128K --top 0 --json %s", xml, json);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.out, "training steps on b200 ("), "%s", r.out);
    ck_assert_msg(strstr(r.out, "\n# calibration table: ") && strstr(r.out, "/b200.calib\n"), "%s", r.out);
    r = run_cmd("grep -o '\"tie_pct\": [0-9.e+-]*' %s", json);
    ck_assert_msg(fabs(atof(strchr(r.out, ':') + 1) - e.between_pct) < 1e-9 * e.between_pct, "%s vs %.17g", r.out,
                  e.between_pct);
    ck_assert_int_eq(run_cmd("grep -q '\"gpu\": \"b200\"' %s", json).status, 0);
    ck_assert_int_eq(run_cmd("grep -q '\"calib\": \"[^\"]*/b200.calib\"' %s", json).status, 0);
    unlink(xml);
    unlink(json);
}
END_TEST

/* The layout column's names read back (loong plan --layout): for every
 * layout of three requests (five dimensions with the ZeRO stage, recompute
 * policy and schedule searched; tp fixed without sequence parallelism;
 * packed documents), parse(name) gives the layout's own knobs, names it
 * the same and finds it; removed layouts too, but for those whose dp
 * does not split the global batch (no such layout can be named). */
static void same_knobs(const config *a, const config *b, const char *name)
{
    const int x[] = {a->dp,
                     a->pp,
                     a->tp,
                     a->p_head,
                     a->p_seq,
                     a->partition,
                     a->ring,
                     a->window,
                     a->zero,
                     a->recompute,
                     a->schedule,
                     a->vpp,
                     a->micro_batches,
                     a->kv_replication,
                     a->sequence_parallel,
                     a->tp_overlap,
                     config_placement(a),
                     a->prefetch,
                     a->scope,
                     a->ep,
                     config_etp(a)};
    const int y[] = {b->dp,
                     b->pp,
                     b->tp,
                     b->p_head,
                     b->p_seq,
                     b->partition,
                     b->ring,
                     b->window,
                     b->zero,
                     b->recompute,
                     b->schedule,
                     b->vpp,
                     b->micro_batches,
                     b->kv_replication,
                     b->sequence_parallel,
                     b->tp_overlap,
                     config_placement(b),
                     b->prefetch,
                     b->scope,
                     b->ep,
                     config_etp(b)};
    for (size_t k = 0; k < sizeof x / sizeof x[0]; k++)
        ck_assert_msg(x[k] == y[k], "%s: knob %zu is %d, read back %d", name, k, x[k], y[k]);
    ck_assert_str_eq(a->strategy, b->strategy);
}

START_TEST(layout_names_round_trip)
{
    plan_request req = {0};
    char err[LOONG_ERRLEN];
    req.base = base("llama3-8b", 128 * 1024, 1, 1, 1, RECOMPUTE_SELECTIVE);
    req.gpu_mem = 1e15;
    if (_i == 0) { /* every dimension (PLAN_SEARCHED), every knob the plan searches */
        req.gpus = 32, req.global_batch = 8;
        req.search_zero = req.search_recompute = req.search_schedule = true;
    } else if (_i == 1) { /* tp fixed, sequence parallelism off, --micro-batches */
        req.base = base("llama3-70b", 64 * 1024, 1, 1, 1, RECOMPUTE_FULL);
        req.base.sequence_parallel = false;
        req.base.micro_batches = 2;
        req.gpus = 32, req.degree[MESH_TP] = 4, req.degree[MESH_PP] = 1;
    } else if (_i == 3) { /* a mixture of experts: ep and expert TP searched beside tp */
        req.base = base("qwen3-30b-a3b", 16 * 1024, 1, 1, 1, RECOMPUTE_SELECTIVE);
        req.gpus = 16, req.degree[MESH_PP] = 1;
    } else { /* the packed-document partitions */
        req.base.docs = docs_parse_list("100K,28K", req.base.seq, "test", err);
        req.gpus = 16, req.search_zero = true;
        req.degree[MESH_DP] = req.degree[MESH_TP] = req.degree[MESH_PP] = 1;
    }
    int n, named = 0;
    plan_layout *ls = plan_enumerate(&req, &n);
    for (int i = 0; i < n; i++) {
        const config *c = &ls[i].c;
        if (req.global_batch && req.global_batch % (c->dp * c->batch)) continue;
        config back;
        ck_assert_msg(plan_parse_layout(&req, ls[i].name, &back, err) == 0, "%s: %s", ls[i].name, err);
        char again[64];
        plan_layout_name(&req, &back, again, sizeof again);
        ck_assert_str_eq(again, ls[i].name);
        same_knobs(c, &back, ls[i].name);
        ck_assert_int_eq(plan_find_layout(ls, n, &req, &back), i);
        named++;
    }
    ck_assert_int_gt(named, _i == 0 ? 1000 : 50);
    if (_i == 3) { /* every divisor of tp as expert TP, each with the ep its span allows */
        int etp_of[9][9] = {{0}};
        for (int i = 0; i < n; i++)
            if (!ls[i].removed) etp_of[ls[i].c.tp][config_etp(&ls[i].c)]++;
        for (int tp = 1; tp <= 8; tp *= 2)
            for (int e = 1; e <= tp; e *= 2)
                ck_assert_msg(etp_of[tp][e] > 0, "no valid layout at tp %d, expert TP %d", tp, e);
    }
    free(ls);
}
END_TEST

/* A name that does not parse, or says a knob the request fixes otherwise,
 * is refused with the fix; 64 GPUs, ZeRO and recompute searched, a global
 * batch of 64 samples. */
START_TEST(layout_name_refusals)
{
    static const struct {
        const char *name, *args, *want;
    } rows[] = {
        {"", "", "empty"},
        {"8x8 hf zz single z1", "", "recompute"},
        {"8x8 zz single z1 sel", "", "placement"},
        {"8x8 hf zz z1 sel", "", "ring mode"},
        {"8x8 hf zz double z1 sel", "", "w=W"},
        {"8x8 hf zz single w=2 z1 sel", "", "double ring only"},
        {"64x1 hf no ring z1 sel", "", "placement (hf, cf) applies"},
        {"1x64 zz single z1 z1 sel", "", "second time"},
        {"8x4 hf zz single z1 sel", "", "give --gpus 32"},
        {"dp2*4x8 hf zz single m16 z1 sel", "", "give --global-batch 32"},
        {"dp2*4x8 hf zz single z1 sel", "dp", "drop --dp"},
        {"pp2*4x8 hf zz single 1f1b m64 z1 sel", "", "give --pp 2"},
        {"tp16*4x1 no ring z1 sel", "", "add --tp 16"},
        {"tp2*4x8 hf zz single no-sp z1 sel", "", "--sequence-parallel off"},
        {"1x64 zz single z1 sel", "zero", "give --zero 1"},
        {"1x64 zz single zigzag z1 sel", "", "'zigzag' is not a word"},
        {"8y8 hf zz single z1 sel", "", "PHxPS"},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        plan_request req = {0};
        req.base = base("llama3-8b", 1 << 20, 1, 1, 1, RECOMPUTE_SELECTIVE);
        req.gpus = 64, req.degree[MESH_PP] = 1, req.global_batch = 64;
        req.search_zero = req.search_recompute = true;
        if (!strcmp(rows[k].args, "dp")) req.degree[MESH_DP] = 4;
        if (!strcmp(rows[k].args, "zero")) req.search_zero = false, req.base.zero = 2;
        config c;
        char err[LOONG_ERRLEN] = "";
        ck_assert_msg(plan_parse_layout(&req, rows[k].name, &c, err) < 0, "'%s' was taken", rows[k].name);
        ck_assert_msg(strstr(err, rows[k].want) && !strncmp(err, "--layout '", 10), "'%s': %s", rows[k].name, err);
    }
}
END_TEST

/* --layout on the CLI: the user's layout is marked in the table and the
 * JSON; given the fastest row's own name, it is that row, rank 1, the
 * same step; given one that cannot fit, it is shown with its OOM reason
 * and the plan still ranks the rest (exit 0). */
START_TEST(user_layout_scored)
{
    const char *json = "/tmp/loong-plan-user.json",
               *args = " --gpus 16 --seq 256K --zero 1 --recompute sc++ --top 0 --rows 3";
    ck_assert_int_eq(run_cmd(PLAN "%s --json %s -o /dev/null", args, json).status, 0);
    char *j = read_text(json), first[64] = "";
    const char *p = strstr(j, "\"layout\": \"");
    ck_assert_ptr_nonnull(p);
    sscanf(p + 11, "%63[^\"]", first);
    free(j);
    run_result r = run_cmd(PLAN "%s --layout '%s' --json %s", args, first, json);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "<- yours") && strstr(r.out, "# yours (--layout): "), "%s", r.out);
    p = strstr(r.out, "    1 ");
    ck_assert_msg(p && strstr(p, first) && strstr(p, "<- yours") < strchr(p, '\n'), "row 1 is not marked:\n%s", r.out);
    ck_assert_msg(strstr(r.out, ", rank 1 of "), "%s", r.out);
    j = read_text(json);
    ck_assert_msg(strstr(j, "\"user_layout\": {") && strstr(j, "\"rank\": 1,") && strstr(j, "\"in_search\": true"),
                  "%s", j);
    free(j);
    r = run_cmd(PLAN "%s --gpu-mem 40GB --layout '16x1 no ring kv-repl' --json %s", args, json);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(
        strstr(r.out, "# yours (--layout): 16x1 no ring kv-repl m64 is not feasible: predicted OOM: reserved "), "%s",
        r.out);
    j = read_text(json);
    ck_assert_msg(strstr(j, "\"feasible\": false") && strstr(j, "\"rank\": null"), "%s", j);
    free(j);
    unlink(json);
}
END_TEST

/* --show ROW --from FILE prints, without planning, the command that
 * --show ROW prints after planning again, for the first rows. */
START_TEST(show_from_json)
{
    const char *json = "/tmp/loong-plan-from.json", *args = " --gpus 16 --seq 256K --zero 1 --recompute sc++ --top 0";
    ck_assert_int_eq(run_cmd(PLAN "%s --json %s -o /dev/null", args, json).status, 0);
    for (int row = 1; row <= 3; row++) {
        run_result a = run_cmd(PLAN "%s --show %d", args, row);
        run_result b = run_cmd(LOONG_BIN " plan --show %d --from %s --quiet", row, json);
        ck_assert_msg(a.status == 0 && b.status == 0, "%s%s", a.err, b.err);
        ck_assert_msg(count_lines(b.out) == 1 && b.out[0] == '/' && strstr(b.out, "/loong sim "), "%s", b.out);
        ck_assert_str_eq(a.out, b.out);
    }
    run_result r = run_cmd(LOONG_BIN " plan --show 9999 --from %s", json);
    ck_assert_msg(r.status == 2 && count_lines(r.err) == 1 && strstr(r.err, "--show 9999"), "%s", r.err);
    unlink(json);
}
END_TEST

/* No layout splits the GPUs (72 = 8 x 9 for a model of 64 heads at 128K,
 * on 9-GPU nodes as on 8-GPU ones): the error names the factor that no
 * dimension takes and the count that splits, not a tp of 3; on 8-GPU
 * nodes that count plans (on 9-GPU ones tp 1 leaves the 70B out of memory
 * there, which that plan then says). */
START_TEST(unsplit_gpu_count)
{
    const char *xml = "/tmp/loong-plan-9gpn.xml", *args = " --model llama3-70b --seq 128K --top 0 -o /dev/null";
    ck_assert_int_eq(run_cmd(LOONG_BIN " topo --nodes 8 --gpus-per-node 9 --nics-per-node 9 -o %s", xml).status, 0);
    const char *platforms[] = {xml, LOONG_SRCDIR "/topologies/dgx-h100-16n.xml"};
    for (int k = 0; k < 2; k++) {
        run_result r = run_cmd(LOONG_BIN " plan --platform %s --gpus 72 --quiet%s", platforms[k], args);
        ck_assert_msg(r.status == 2 && count_lines(r.err) == 1, "%s", r.err);
        ck_assert_msg(strstr(r.err, "72 GPUs = 8 x 9, and 9 divides none of the 128K-token sequence") &&
                          strstr(r.err, "use --gpus 64") && !strstr(r.err, "--tp 3"),
                      "%s", r.err);
        if (k == 0) continue;
        r = run_cmd(LOONG_BIN " plan --platform %s --gpus 64 --quiet%s", platforms[k], args);
        ck_assert_msg(r.status == 0, "--gpus 64: %s", r.err);
    }
    unlink(xml);
}
END_TEST

/* The analytical gradient ring runs over the gradient group's members, not
 * ranks 0..N-1: with tp 2 innermost on nodes of 2 GPUs, dp 2's group is
 * {0, 2}, one rank on each node, so its ring crosses the NIC and a NIC a
 * thousand times slower makes the step slower. With tp 1 the group {0, 1}
 * is one node's and the NIC does not matter. A ring of p2p flows (nccl 0,
 * as on CPU ranks), ZeRO 0's all-reduce of the whole model. */
START_TEST(grad_ring_members)
{
    char err[LOONG_ERRLEN];
    calib *cb = calib_load(LOONG_SRCDIR "/topologies/cpu.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    for (int tp = 1; tp <= 2; tp++) {
        config c = base("tiny", 2048, 1, 1, 0, RECOMPUTE_NONE);
        c.tp = tp;
        c.dp = 2;
        c.gpus_per_node = 2;
        ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
        double step[2];
        for (int slow = 0; slow < 2; slow++) {
            platform_spec net;
            ck_assert_int_eq(platform_spec_defaults("cpu", &net, err), 0);
            net.nccl = 0;
            net.gpus_per_node = net.nics_per_node = 2;
            net.nodes = 2;
            if (slow) net.nic_bw /= 1000;
            analytic_result r;
            analytic_step(&c, cb, &net, &r);
            step[slow] = r.step;
        }
        if (tp == 2)
            ck_assert_msg(step[1] > step[0], "tp 2: the gradient ring ignores the NIC (%g s either way)", step[0]);
        else
            ck_assert_msg(step[1] == step[0], "tp 1: one node's group, yet %g s vs %g s", step[0], step[1]);
    }
    calib_free(cb);
}
END_TEST

START_TEST(bad_input)
{
    one_line_exit2("--gpus 0");
    one_line_exit2("--gpus 3 --top 0");   /* S = 1M has no factor 3; H = 32 neither */
    one_line_exit2("--gpus 128 --top 0"); /* the platform has 64 */
    one_line_exit2("--gpu-mem 80XB --top 0");
    one_line_exit2("--gpu-mem 80 --top 0");
    one_line_exit2("--sim-timeout -1 --top 0");
    one_line_exit2("--sim-timeout 5m --top 0");
    one_line_exit2("--mesh 8x8");
    one_line_exit2("--draws 2 --top 0"); /* draws need a histogram */
    one_line_exit2("--doc-dist " LOONG_SRCDIR "/tests/data/negative.dist --top 0");
    one_line_exit2("--docs 2M --top 0"); /* longer than --seq 1M */
    run_result r = run_cmd(PLAN " --gpus 3 --top 0");
    ck_assert_ptr_nonnull(strstr(r.err, "no feasible layout for 3 GPUs"));
}
END_TEST

/* Nothing fits: the table output breaks the leanest layout's peak into
 * its terms, which sum to it; the smallest change it names does fit; the
 * CSV lists every layout with its reason; one line on stderr, exit 2. */
START_TEST(oom_breakdown)
{
    const char *csv = "/tmp/loong-plan-oom.csv", *txt = "/tmp/loong-plan-oom.txt";
    const char *args = " --platform " LOONG_SRCDIR "/topologies/dgx-h100-1n.xml --model llama3-8b --seq 32K "
                       "--gpu-mem 40GB --top 0 --recompute sc++ --tp 1 --dp 1 --micro-batches 1";
    run_result r = run_cmd(LOONG_BIN " plan%s --zero 1 --csv %s -o %s", args, csv, txt);
    ck_assert_msg(r.status == 2 && count_lines(r.err) == 1, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "no feasible layout for 8 GPUs: the leanest"));
    char *t = read_text(txt);
    /* the tensors' terms sum to allocated; allocated and the reserve's
     * terms to reserved */
    static const char *terms[] = {"weights",   "gradients", "optimizer",    "activations", "transient", "workspaces",
                                  "allocated", "allocator", "CUDA context", "NCCL",        "reserved"};
    double v[11];
    for (int i = 0; i < 11; i++) {
        char key[32];
        snprintf(key, sizeof key, "#   %s ", terms[i]);
        const char *p = strstr(t, key);
        ck_assert_msg(p && sscanf(p + strlen(key), "%lf", &v[i]) == 1, "no %s line in:\n%s", terms[i], t);
    }
    double sum = v[0] + v[1] + v[2] + v[3] + v[4] + v[5];
    ck_assert_msg(fabs(sum - v[6]) <= 0.3, "the terms sum to %.1f GB, allocated is %.1f GB", sum, v[6]); /* 0.05 x 6 */
    sum = v[6] + v[7] + v[8] + v[9];
    ck_assert_msg(fabs(sum - v[10]) <= 0.2, "%.1f GB, reserved is %.1f GB", sum, v[10]);
    const char *p;
    /* ZeRO-1 keeps 16 GB of weights and 32 GB of fp32 gradients per GPU;
     * ZeRO-2 leaves 16 + 4 + 12 GB and the rest over 40 GB: ZeRO-3 is the
     * smallest change that fits */
    p = strstr(t, "# smallest change that fits: ");
    ck_assert_msg(p != NULL, "%s", t);
    ck_assert_msg(!strncmp(p + 29, "--zero 3 ", 9), "%s", p);
    ck_assert_msg(run_cmd(LOONG_BIN " plan%s --zero 2 -o /dev/null", args).status == 2, "--zero 2 fits");
    ck_assert_msg(run_cmd(LOONG_BIN " plan%s --zero 3 -o /dev/null", args).status == 0, "--zero 3 does not fit");
    /* searched (neither --zero nor --recompute given), that fits as is */
    ck_assert_int_eq(run_cmd(LOONG_BIN " plan --platform " LOONG_SRCDIR "/topologies/dgx-h100-1n.xml --model llama3-8b "
                                       "--seq 32K --gpu-mem 40GB --top 0 -o /dev/null")
                         .status,
                     0);
    free(t);
    t = read_text(csv);
    ck_assert_ptr_nonnull(strstr(t, ",removed,\"predicted OOM: reserved "));
    free(t);
    unlink(csv);
    unlink(txt);
}
END_TEST

/* The reserved peak's terms (memory.h): NCCL's buffers per communicator
 * in closed form, reserved = f(allocated), and the planner refusing a
 * layout whose tensors fit but whose reserved peak and margin do not. */
START_TEST(memory_reserved_terms)
{
    const double conn = 10.0 * 1048576; /* 9.19 MiB of Simple + LL + LL128 in 2 MiB granules */
    near(memory_nccl_collective(8, false), 16 * conn, "ring of 8, 16 channels, a connection each");
    near(memory_nccl_collective(16, true), 16 * 3 * conn, "across nodes: ring + tree parent and child");
    ck_assert(memory_nccl_collective(1, false) == 0 && memory_nccl_collective(1, true) == 0);
    near(memory_nccl_p2p(7, 0), 7 * 32 * conn, "all-to-all of 8 on NVLink: 32 channels per peer");
    near(memory_nccl_p2p(1, 2), (32 + 2 * 2) * conn, "one NVLink and two network peers");
    /* one node of 8: the ring's two neighbours on NVLink, the gradient
     * group of 8 (ZeRO-1); Ulysses' 7 all-to-all peers */
    config c = base("llama3-8b", 256 * 1024, 1, 8, 1, RECOMPUTE_FULL);
    memory_estimate m;
    memory_estimate_config(&c, &m);
    near(m.nccl_cp, memory_nccl_p2p(2, 0), "ring neighbours");
    near(m.nccl_grad, memory_nccl_collective(8, false), "gradient group");
    ck_assert(m.nccl_tp == 0 && m.nccl_ulysses == 0 && m.nccl_pp == 0);
    near(m.nccl, m.nccl_cp + m.nccl_grad, "nccl");
    near(m.reserved, m.peak * MEMORY_ALLOC_FACTOR + MEMORY_CONTEXT_BYTES + m.nccl, "reserved (caching)");
    memory_reserve(&m, MEMORY_ALLOC_EXPANDABLE);
    near(m.reserved, m.peak + MEMORY_CONTEXT_BYTES + m.nccl, "reserved (expandable)");
    memory_reserve_factor(&m, 1.5); /* a measured factor: loong plan --allocator 1.5 */
    near(m.reserved, m.peak * 1.5 + MEMORY_CONTEXT_BYTES + m.nccl, "reserved (measured factor)");
    c = base("llama3-8b", 256 * 1024, 8, 1, 1, RECOMPUTE_FULL);
    memory_estimate_config(&c, &m);
    near(m.nccl_ulysses, memory_nccl_p2p(7, 0), "ulysses all-to-all");
    ck_assert(m.nccl_cp == 0 && m.reserved > m.peak);
    /* reserved grows with allocated at the allocator's factor */
    memory_estimate m2;
    c.seq *= 2;
    ck_assert_int_eq(config_validate(&c, (char[LOONG_ERRLEN]){0}), 0);
    memory_estimate_config(&c, &m2);
    near(m2.reserved - m.reserved, (m2.peak - m.peak) * MEMORY_ALLOC_FACTOR, "d reserved = factor x d allocated");
    /* the planner: a GPU whose memory holds the tensors but not reserved
     * less the margin refuses the layout, a larger one keeps it */
    plan_request req = {0};
    req.base = base("llama3-8b", 256 * 1024, 1, 1, 1, RECOMPUTE_FULL);
    req.gpus = 8;
    req.degree[MESH_DP] = req.degree[MESH_TP] = req.degree[MESH_PP] = 1;
    req.margin = PLAN_MARGIN;
    int n;
    plan_layout *ls = plan_enumerate(&req, &n);
    int k = -1;
    for (int i = 0; i < n && k < 0; i++)
        if (!ls[i].removed) k = i;
    ck_assert_int_ge(k, 0);
    ck_assert(plan_mem_fits(&ls[k], &(plan_request){.gpu_mem = 1e15, .alloc_factor = 1.5}));
    near(ls[k].mem.alloc_factor, 1.5, "the planner's measured factor");
    ck_assert(plan_mem_fits(&ls[k], &(plan_request){.gpu_mem = 1e15}));
    double alloc = ls[k].mem.peak, resv = ls[k].mem.reserved;
    req.gpu_mem = (alloc + resv) / 2 / (1 - PLAN_MARGIN); /* allocated fits with the margin, reserved does not */
    calib *cb = h100();
    platform_spec net = net_of(LOONG_SRCDIR "/topologies/dgx-h100-1n.xml");
    plan_score(ls, k, k + 1, &req, cb, &net);
    ck_assert_msg(ls[k].removed && strstr(ls[k].reason, "predicted OOM: reserved"), "%s", ls[k].reason);
    ls[k].removed = false;
    req.gpu_mem = resv / (1 - PLAN_MARGIN) * 1.001;
    plan_score(ls, k, k + 1, &req, cb, &net);
    ck_assert_msg(!ls[k].removed, "%s", ls[k].reason);
    /* the margin alone: reserved under the GPU's memory but over the limit */
    req.gpu_mem = resv * 1.01;
    ls[k].removed = false;
    plan_score(ls, k, k + 1, &req, cb, &net);
    ck_assert(ls[k].removed);
    calib_free(cb);
    free(ls);
}
END_TEST

#ifdef MPIRUN_BIN
/* The same ranking (and every figure) from one process and from two MPI
 * ranks; only the timing footer differs. */
START_TEST(serial_vs_mpi)
{
    const char *args = "--gpus 16 --seq 256K --top 2 --rows 0";
    ck_assert_int_eq(run_cmd(PLAN " %s --csv /tmp/loong-plan-s.csv -o /tmp/loong-plan-s.txt", args).status, 0);
    run_result r = run_cmd("ASAN_OPTIONS=detect_leaks=0 " MPIRUN_BIN " --oversubscribe -np 2 " PLAN
                           " %s --csv /tmp/loong-plan-m.csv -o /tmp/loong-plan-m.txt",
                           args);
    ck_assert_msg(r.status == 0, "mpirun: %s", r.err);
    ck_assert_int_eq(run_cmd("cmp /tmp/loong-plan-s.csv /tmp/loong-plan-m.csv").status, 0);
    ck_assert_int_eq(
        run_cmd(
            "bash -c \"diff <(grep -v '^# time' /tmp/loong-plan-s.txt) <(grep -v '^# time' /tmp/loong-plan-m.txt)\"")
            .status,
        0);
    r = run_cmd("grep '^# time' /tmp/loong-plan-m.txt");
    ck_assert_ptr_nonnull(strstr(r.out, "on 2 MPI rank(s)"));
    unlink("/tmp/loong-plan-s.csv");
    unlink("/tmp/loong-plan-m.csv");
    unlink("/tmp/loong-plan-s.txt");
    unlink("/tmp/loong-plan-m.txt");
}
END_TEST

/* Packings drawn from a histogram: the same table from one process and two
 * MPI ranks (every rank redraws the layouts it scored), a documents line,
 * the spread of the draws, and MFU from the documents' own model FLOPs. */
START_TEST(doc_draws)
{
    const char *args = "--gpus 16 --seq 256K --top 1 --rows 0 --doc-dist " LOONG_SRCDIR
                       "/experiments/varlen/heavy.dist --draws 2 --seed 5";
    ck_assert_int_eq(run_cmd(PLAN " %s --csv /tmp/loong-plan-ds.csv -o /tmp/loong-plan-ds.txt", args).status, 0);
    run_result r = run_cmd("ASAN_OPTIONS=detect_leaks=0 " MPIRUN_BIN " --oversubscribe -np 2 " PLAN
                           " %s --csv /tmp/loong-plan-dm.csv -o /tmp/loong-plan-dm.txt",
                           args);
    ck_assert_msg(r.status == 0, "mpirun: %s", r.err);
    ck_assert_int_eq(run_cmd("cmp /tmp/loong-plan-ds.csv /tmp/loong-plan-dm.csv").status, 0);
    r = run_cmd("cat /tmp/loong-plan-ds.txt");
    ck_assert_ptr_nonnull(strstr(r.out, "# documents: --doc-dist "));
    ck_assert_ptr_nonnull(strstr(r.out, "2 packings drawn"));
    ck_assert_ptr_nonnull(strstr(r.out, " dzz ")); /* the packed partitions were searched */
    /* every feasible row: step_min <= step <= step_max, MFU in (0, 100] */
    r = run_cmd("awk -F, 'NR > 1 && $11 == \"feasible\" && !($15 > 0 && $17 > 0 && $17 <= 100 && $22 <= $15 + 1e-9 "
                "&& $15 <= $23 + 1e-9) {print}' /tmp/loong-plan-ds.csv");
    ck_assert_msg(r.out[0] == '\0', "rows out of range:\n%s", r.out);
    unlink("/tmp/loong-plan-ds.csv");
    unlink("/tmp/loong-plan-dm.csv");
    unlink("/tmp/loong-plan-ds.txt");
    unlink("/tmp/loong-plan-dm.txt");
}
END_TEST
#endif

/* The planner searches the NVLink domain: on two GB200 NVL72 racks (18
 * nodes of 4 GPUs, 72-GPU NVLink domains) a 16-way head group is a
 * feasible layout inside one domain, and its exposed communication is
 * below that of the same racks cut into 4-GPU NVLink domains
 * (--nvlink-domain 4), where the group's all-to-all crosses NICs. */
static double exposed_16x4(const char *topo_args)
{
    run_result r = run_cmd("%s topo %s -o /tmp/loong-plan-nvl.xml && %s plan --platform /tmp/loong-plan-nvl.xml "
                           "--calib %s/topologies/gb200.calib --quiet --model llama3-8b --seq 256K --gpus 64 --dp 1 "
                           "--tp 1 --pp 1 --global-batch 1 --zero 1 --recompute selective --top 0 "
                           "--csv /tmp/loong-plan-nvl.csv -o /dev/null && "
                           "grep '\"16x4 hf zz single kv-repl' /tmp/loong-plan-nvl.csv",
                           LOONG_BIN, topo_args, LOONG_BIN, LOONG_SRCDIR);
    ck_assert_msg(r.status == 0, "%s: %s", topo_args, r.err);
    /* rank,"layout",dp,p_head,p_seq,placement,...,status (11),reason,by,analytic_s,step_s,tok/s,mfu,mem,exposed (19) */
    char *f = r.out;
    for (int i = 0; i < 18 && f; i++)
        f = strchr(f + 1, ',');
    ck_assert_msg(f && strstr(r.out, ",feasible,"), "%s: 16x4 not feasible: %s", topo_args, r.out);
    ck_assert_ptr_nonnull(strstr(r.out, ",16,4,head-first,"));
    unlink("/tmp/loong-plan-nvl.xml");
    unlink("/tmp/loong-plan-nvl.csv");
    return atof(f + 1);
}

START_TEST(plan_head_group_spans_nvl72)
{
    double nvl72 = exposed_16x4("--preset gb200-superpod --nodes 36"),
           nvl4 = exposed_16x4("--preset gb200-superpod --nodes 36 --nvlink-domain 4");
    ck_assert_msg(nvl72 < nvl4, "exposed communication %g s in a 72-GPU domain, %g s in 4-GPU ones", nvl72, nvl4);
}
END_TEST

/* ---- the search through a fake child runner (plan_search.h) ----
 * A runner that "simulates" in closed form: a run of l layers takes
 * SIM_A + SIM_B l seconds, exposes SIM_E l. Layers are identical, so the
 * search's ZeRO-1 composition T(1) + (L-1)(T(2) - T(1)) and a run of all L
 * layers must both give SIM_A + SIM_B L exactly (binary fractions). */
#define SIM_A     0.5
#define SIM_B     0.25
#define SIM_E     0.0625
#define FAKE_RUNS 2048

typedef struct fake {
    int queue[FAKE_RUNS], nq; /* started and not yet reported */
    double step[FAKE_RUNS], exposed[FAKE_RUNS];
    bool stopped_id[FAKE_RUNS];
    int started, stopped, notes;
    bool hang; /* nothing ever ends on its own: every run meets the time limit */
    double clock;
} fake;

static int fake_start(void *user, int id, const plan_sim *sim, char err[LOONG_ERRLEN])
{
    fake *f = user;
    (void)err;
    ck_assert_int_lt(id, FAKE_RUNS);
    int l = sim->layers ? sim->layers : sim->l->c.model.layers;
    f->step[id] = SIM_A + SIM_B * l;
    f->exposed[id] = SIM_E * l;
    f->queue[f->nq++] = id;
    f->started++;
    return 0;
}

static int fake_wait(void *user, int *id, int *rc, double *step, double *exposed, char why[LOONG_ERRLEN])
{
    fake *f = user;
    f->clock += 1;
    if (f->nq == 0) return -1;
    int k = f->nq - 1;
    while (f->hang && k >= 0 && !f->stopped_id[f->queue[k]])
        k--;
    if (k < 0) return 0; /* none ended: the search's clock runs on */
    *id = f->queue[k];
    f->queue[k] = f->queue[--f->nq];
    *rc = f->hang ? -1 : 0;
    *step = f->step[*id];
    *exposed = f->exposed[*id];
    snprintf(why, LOONG_ERRLEN, "killed");
    return 1;
}

static void fake_stop(void *user, int id)
{
    fake *f = user;
    f->stopped_id[id] = true;
    f->stopped++;
}
static double fake_now(void *user) { return ((fake *)user)->clock; }
static void fake_gather(void *user, plan_layout *ls, int n) { (void)user, (void)ls, (void)n; }
static void fake_max(void *user, double *v, int n) { (void)user, (void)v, (void)n; }
static void fake_progress(void *user, const char *what, int done, int total, double eta)
{
    (void)user, (void)what, (void)done, (void)total, (void)eta;
}
static void fake_begin(void *user, int runs, double tasks, double eta, int jobs)
{
    (void)user, (void)runs, (void)tasks, (void)eta, (void)jobs;
}
static void fake_note(void *user, const char *line)
{
    (void)line;
    ((fake *)user)->notes++;
}

/* 8 GPUs, one replica, no TP or PP: the sequence-parallel layouts, ZeRO
 * searched (ZeRO-1's compose from two runs, the others run all layers). */
static plan_search_out fake_search(fake *f, int top, bool exact, double timeout, int *rc, char err[LOONG_ERRLEN])
{
    static plan_request req;
    memset(&req, 0, sizeof req);
    req.base = base("llama3-8b", 128 * 1024, 1, 1, 1, RECOMPUTE_SELECTIVE);
    req.gpus = 8;
    req.degree[MESH_DP] = req.degree[MESH_TP] = req.degree[MESH_PP] = 1;
    req.search_zero = true;
    req.gpu_mem = 1e15;
    static calib *cb;
    static platform_spec net;
    if (!cb) cb = h100(), net = net_of(LOONG_SRCDIR "/topologies/dgx-h100-1n.xml");
    whatif w = {0};
    const plan_runner r = {.user = f,
                           .rank = 0,
                           .size = 1,
                           .start = fake_start,
                           .wait = fake_wait,
                           .stop = fake_stop,
                           .now = fake_now,
                           .gather_layouts = fake_gather,
                           .max = fake_max,
                           .progress = fake_progress,
                           .begin = fake_begin,
                           .note = fake_note};
    const plan_search_opts o = {
        .top = top, .exact = exact, .jobs = 4, .sim_timeout = timeout, .draws = 1, .w = &w, .cb = cb, .spec = &net};
    plan_search_out out;
    *rc = plan_search(&req, &o, &r, &out, err);
    return out;
}

START_TEST(search_fake_runner)
{
    fake f = {0};
    char err[LOONG_ERRLEN] = "";
    int rc;
    plan_search_out s = fake_search(&f, 0, true, 0, &rc, err);
    ck_assert_msg(rc == 0, "%s", err);
    int sim = 0, runs = 0, L = s.ls[0].c.model.layers;
    for (int i = 0; i < s.n; i++) {
        const plan_layout *l = &s.ls[i];
        if (l->sim_step < 0) continue;
        sim++;
        runs += plan_compose_mode(&l->c, false) == PLAN_TWO_LAYERS ? 2 : 1;
        near(l->sim_step, SIM_A + SIM_B * L, "a simulated step, composed or whole");
        near(l->sim_exposed, SIM_E * L, "its exposed communication");
    }
    ck_assert_int_eq(sim, s.feasible); /* --exact: every feasible layout */
    ck_assert_int_eq(s.runs, runs);
    ck_assert_int_eq(f.started, runs);
    ck_assert_uint_eq(s.compose, PLAN_TWO_LAYERS | PLAN_PERIOD); /* ZeRO-1, and the other stages */
    ck_assert_int_eq(f.notes, 0);
    free(s.ls);

    /* every run over the time limit: stopped, the layouts keep their
     * analytical score with the reason (not an error: the request is fine) */
    fake h = {.hang = true};
    s = fake_search(&h, 2, false, 5, &rc, err);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_gt(h.stopped, 0);
    int unsim = 0;
    for (int i = 0; i < s.n; i++) {
        ck_assert(s.ls[i].sim_step < 0);
        if (s.ls[i].unsimulated[0]) {
            unsim++;
            ck_assert_str_eq(s.ls[i].unsimulated, "stopped at --sim-timeout 5 s");
            ck_assert_str_eq(plan_by(&s.ls[i]), "model*");
        }
    }
    ck_assert_int_ge(unsim, 2);
    ck_assert_int_eq(h.notes, unsim);
    free(s.ls);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("plan");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, memory_llama3_8b);
    tcase_add_test(tc, memory_mla_latents);
    tcase_add_test(tc, analytic_dense_leading_blocks);
    tcase_add_test(tc, analytic_interleaved_blocks);
    tcase_add_test(tc, plan_head_group_spans_nvl72);
    tcase_add_test(tc, memory_7b_mha);
    tcase_add_test(tc, memory_tensor_parallel);
    tcase_add_test(tc, memory_reserved_terms);
    tcase_add_test(tc, memory_korthikanti_examples);
    tcase_add_test(tc, memory_fp8_terms);
    tcase_add_loop_test(tc, enumeration_count, 0, 2);
    tcase_add_test(tc, pipeline_enumeration);
    tcase_add_test(tc, oom_reason_and_cost);
    tcase_add_test(tc, tie_and_robust_pick);
    tcase_add_test(tc, rank_at_equal_work);
    tcase_add_test(tc, unsimulated_keep_their_score);
    tcase_add_test(tc, task_estimate);
    tcase_add_test(tc, fold_by_platform);
    tcase_add_test(tc, oom_breakdown);
    tcase_add_test(tc, zero3_bounded_prefetch);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, model_error_tie);
    tcase_add_test(tc, model_error_per_gpu);
    tcase_add_loop_test(tc, layout_names_round_trip, 0, 4);
    tcase_add_test(tc, layout_name_refusals);
    tcase_add_test(tc, user_layout_scored);
    tcase_add_test(tc, show_from_json);
    tcase_add_test(tc, unsplit_gpu_count);
    tcase_add_test(tc, grad_ring_members);
#ifdef MPIRUN_BIN
    tcase_add_test(tc, serial_vs_mpi);
    tcase_add_test(tc, doc_draws);
#endif
    suite_add_tcase(s, tc);
    TCase *search = tcase_create("search");
    tcase_add_test(search, search_fake_runner);
    suite_add_tcase(s, search);
    return check_run(s);
}

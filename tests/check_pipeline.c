/* Pipeline parallelism (core/pipeline.h, build.c): the schedules' order
 * against Megatron-Core's closed forms, the DAG's stage p2p bytes, its
 * FLOPs conserved over stages and micro-batches, gradient collectives
 * after the last micro-batch, the live activations a stage's program
 * holds against the memory model's count, and the largest size the counts
 * hold (llama3-405b at 4M tokens, a 16M-token global batch). And activation
 * recompute (core/recompute.h): the tensors each policy's DAG keeps for the
 * backward against the memory model's, and selective's step cost between
 * none's and full's. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/pipeline.h"
#include "core/recompute.h"
#include "dag_util.h"
#include "model/analytic.h"
#include "model/memory.h"
#include "check_run.h"

#define K 1024ull

/* llama3-8b (32 layers) at 8K on a 2x2 context mesh, pp stages. */
static config pcfg(int pp, int m, schedule_kind sched, int vpp, int tp)
{
    config c = tcfg("llama3-8b", 8 * K, "usp", 2, 2, 0, SCOPE_STEP);
    c.pp = pp;
    c.micro_batches = m;
    c.schedule = sched;
    c.vpp = vpp;
    c.tp = tp;
    char err[LOONG_ERRLEN];
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    return c;
}

/* The schedules' rows of the tests below: (pp, m, schedule, vpp). */
static const struct {
    int pp, m;
    schedule_kind s;
    int v;
} rows[] = {{4, 8, SCHED_1F1B, 1},        {4, 2, SCHED_1F1B, 1},        {4, 8, SCHED_GPIPE, 1},
            {2, 4, SCHED_INTERLEAVED, 2}, {4, 8, SCHED_INTERLEAVED, 2}, {4, 4, SCHED_INTERLEAVED, 4},
            {1, 3, SCHED_1F1B, 1}};
#define NROWS ((int)(sizeof rows / sizeof *rows))

static pipe_op *ops_of(const config *c, int stage)
{
    pipe_op *ops = malloc((size_t)pipe_nops(c) * sizeof *ops);
    ck_assert_ptr_nonnull(ops);
    pipe_ops(c, stage, ops);
    return ops;
}

/* Every (chunk, micro-batch) runs forward once and backward once, its
 * forward first; the warm-up (the forwards before the steady state's
 * first forward-backward pair) is
 * Megatron's: 1F1B min(pp - s - 1, m), interleaved (pp - s - 1) * 2 +
 * (v - 1) * pp (all of them when m == pp), GPipe all; after it passes
 * alternate one forward, one backward until the forwards run out. */
START_TEST(schedule_order)
{
    config c = pcfg(rows[_i].pp, rows[_i].m, rows[_i].s, rows[_i].v, 1);
    int total = c.micro_batches * c.vpp, n = pipe_nops(&c);
    ck_assert_int_eq(n, 2 * total);
    for (int s = 0; s < c.pp; s++) {
        pipe_op *ops = ops_of(&c, s);
        int fpos[64][8], bpos[64][8], warm = 0;
        for (int k = 0; k < 64; k++)
            for (int j = 0; j < 8; j++)
                fpos[k][j] = bpos[k][j] = -1;
        while (warm < n && !ops[warm].bwd)
            warm++;
        for (int i = 0; i < n; i++) {
            int(*pos)[8] = ops[i].bwd ? bpos : fpos;
            ck_assert_int_eq(pos[ops[i].mb][ops[i].chunk], -1);
            pos[ops[i].mb][ops[i].chunk] = i;
        }
        for (int k = 0; k < c.micro_batches; k++)
            for (int j = 0; j < c.vpp; j++)
                ck_assert(fpos[k][j] >= 0 && bpos[k][j] > fpos[k][j]);
        int want = c.schedule == SCHED_GPIPE  ? total
                   : c.schedule == SCHED_1F1B ? c.pp - s - 1
                   : c.micro_batches == c.pp  ? total
                                              : (c.pp - s - 1) * 2 + (c.vpp - 1) * c.pp;
        want = want < total ? want : total;
        ck_assert_int_eq(warm, want + (want < total)); /* the steady state opens with a forward */
        warm = want;
        for (int i = warm; i < warm + 2 * (total - warm); i++)
            ck_assert_int_eq(ops[i].bwd, (i - warm) % 2 == 1);
        free(ops);
    }
}
END_TEST

/* Megatron's interleaved order (get_model_chunk_id): virtual micro-batch
 * k runs chunk (k mod pp v) / pp forward, v - 1 minus that backward, on
 * micro-batch (k / (pp v)) pp + k mod pp: with pp 2, v 2, m 4 the
 * forwards of every stage are chunk 0 on 0, 1; chunk 1 on 0, 1; chunk 0
 * on 2, 3; chunk 1 on 2, 3. */
START_TEST(interleaved_chunks)
{
    config c = pcfg(2, 4, SCHED_INTERLEAVED, 2, 1);
    static const int chunk[] = {0, 0, 1, 1, 0, 0, 1, 1}, mb[] = {0, 1, 0, 1, 2, 3, 2, 3};
    for (int s = 0; s < 2; s++) {
        pipe_op *ops = ops_of(&c, s);
        int f = 0, b = 0;
        for (int i = 0; i < pipe_nops(&c); i++) {
            if (!ops[i].bwd) {
                ck_assert_int_eq(ops[i].chunk, chunk[f]);
                ck_assert_int_eq(ops[i].mb, mb[f++]);
            } else {
                ck_assert_int_eq(ops[i].chunk, 1 - chunk[b]);
                ck_assert_int_eq(ops[i].mb, mb[b++]);
            }
        }
        free(ops);
    }
    /* Megatron's strided layers: 32 layers over 2 stages of 2 chunks */
    ck_assert_int_eq(pipe_chunk_layers(&c, 0), 8);
    ck_assert_int_eq(pipe_first_layer(&c, 0, 1), 16);
    ck_assert_int_eq(pipe_first_layer(&c, 1, 0), 8);
}
END_TEST

/* Passes in flight at a stage's peak: 1F1B min(pp - s, m); GPipe m;
 * interleaved, stage 0 holds pp v + pp - 1 chunk passes of L/(pp v)
 * layers, (1 + (pp - 1)/(pp v)) times 1F1B's L layers (Narayanan et al.
 * 2021, section 2.2.2). */
START_TEST(peak_in_flight)
{
    config c = pcfg(rows[_i].pp, rows[_i].m, rows[_i].s, rows[_i].v, 1);
    for (int s = 0; s < c.pp; s++) {
        int got = pipe_peak_in_flight(&c, s);
        if (c.schedule == SCHED_GPIPE) ck_assert_int_eq(got, c.micro_batches);
        if (c.schedule == SCHED_1F1B) ck_assert_int_eq(got, c.pp - s < c.micro_batches ? c.pp - s : c.micro_batches);
    }
    if (c.schedule == SCHED_INTERLEAVED && c.micro_batches > c.pp) {
        double layers = pipe_peak_in_flight(&c, 0) * pipe_chunk_layers(&c, 0);
        double want = c.model.layers * (1 + (c.pp - 1.0) / (c.pp * c.vpp));
        ck_assert_double_eq_tol(layers, want, 1e-9);
    }
}
END_TEST

/* Each virtual-stage boundary moves, per micro-batch, the sending rank's
 * T = S/P tokens' hidden states (T/tp under sequence parallelism) to the
 * rank one step along pp, and their gradient back: a stage sends one
 * activation per chunk it does not end the model with and one gradient
 * per chunk it does not start it with, for each micro-batch. */
START_TEST(stage_p2p_bytes)
{
    int tp = _i % 2 ? 2 : 1;
    config c = pcfg(rows[_i / 2].pp, rows[_i / 2].m, rows[_i / 2].s, rows[_i / 2].v, tp);
    dag *g = tbuild(&c);
    mesh msh = config_mesh(&c);
    uint64_t rows_ = config_local_tokens(&c) / (uint64_t)tp;
    uint64_t each = rows_ * (uint64_t)c.model.hidden * (uint64_t)c.act_bytes;
    for (int r = 0; r < config_ranks(&c); r++) {
        int s = pipe_stage(&c, r), acts = 0, grads = 0;
        for (int j = 0; j < c.vpp; j++) {
            acts += !pipe_is_last(&c, s, j);
            grads += !pipe_is_first(&c, s, j);
        }
        for (int op = OP_PP_ACT; op <= OP_PP_GRAD; op++) {
            int want = (op == OP_PP_ACT ? acts : grads) * c.micro_batches;
            ck_assert_uint_eq(count_tasks(g, r, TASK_SEND, op), (uint64_t)want);
            ck_assert_uint_eq(sum_bytes(g, r, TASK_SEND, op), (uint64_t)want * each);
        }
        for (uint32_t i = 0; i < dag_ntasks(g); i++) {
            const dag_task *t = dag_task_get(g, i);
            if (t->rank != r || !task_is_p2p(t) || (t->op != OP_PP_ACT && t->op != OP_PP_GRAD)) continue;
            int dir = (t->op == OP_PP_ACT) == (t->kind == TASK_SEND) ? 1 : -1;
            ck_assert_int_eq(t->peer, mesh_shift(&msh, r, MESH_PP, dir));
            ck_assert_uint_lt(t->mb, (unsigned)c.micro_batches);
        }
    }
    dag_free(g);
}
END_TEST

/* The pipelined step computes m micro-batches of the unpipelined one:
 * the GEMM and attention FLOPs of all stages are m times pp = 1's. */
START_TEST(flops_conserved)
{
    config c = pcfg(rows[_i].pp, rows[_i].m, rows[_i].s, rows[_i].v, 1);
    config one = pcfg(1, 1, SCHED_1F1B, 1, 1);
    dag *g = tbuild(&c), *g1 = tbuild(&one);
    for (int k = TASK_GEMM; k <= TASK_ATTN_BWD; k++)
        ck_assert_uint_eq(sum_flops(g, -1, k), (uint64_t)c.micro_batches * sum_flops(g1, -1, k));
    dag_free(g);
    dag_free(g1);
}
END_TEST

/* Gradients accumulate over the micro-batches: ZeRO-0's all-reduces run
 * once per block and per stage's outer weights, after that block's last
 * backward (micro-batch m - 1); ZeRO-1's reduce-scatter covers the
 * stage's own parameters. */
START_TEST(grads_after_last_micro_batch)
{
    config c = pcfg(4, 8, _i ? SCHED_INTERLEAVED : SCHED_1F1B, _i ? 2 : 1, 1);
    c.zero = 0;
    dag *g = tbuild(&c);
    for (int r = 0; r < config_ranks(&c); r++) {
        int s = pipe_stage(&c, r), n = 0;
        for (uint32_t i = 0; i < dag_ntasks(g); i++) {
            const dag_task *t = dag_task_get(g, i);
            if (t->rank != r || t->op != OP_GRAD_ALLREDUCE) continue;
            n++;
            ck_assert_uint_eq(t->mb, (unsigned)c.micro_batches - 1);
            if (t->layer >= 0) ck_assert(pipe_holds(&c, s, t->layer));
        }
        ck_assert_int_eq(n, c.model.layers / c.pp + (pipe_head_params(&c, s) > 0));
    }
    dag_free(g);
    c.zero = 1;
    g = tbuild(&c);
    for (int r = 0; r < config_ranks(&c); r++) {
        uint32_t n;
        const uint32_t *ids = dag_stream_tasks(g, r, STREAM_DP, &n);
        ck_assert_uint_eq(n, 2); /* the reduce-scatter, the gather */
        uint64_t N = (uint64_t)config_cp(&c), elems = pipe_stage_params(&c, pipe_stage(&c, r));
        uint64_t grads = elems * 4, params = elems * (uint64_t)c.act_bytes; /* fp32 reduction, bf16 weights */
        ck_assert_uint_eq(dag_task_get(g, ids[0])->bytes, (N - 1) * ((grads + N - 1) / N)); /* ring chunks */
        ck_assert_uint_eq(dag_task_get(g, ids[1])->bytes, (N - 1) * ((params + N - 1) / N));
    }
    dag_free(g);
}
END_TEST

/* The memory model's in-flight activations per stage are those its DAG
 * program holds: walking a stage rank's compute stream, a block's
 * activations of micro-batch k live from its forward's first GEMM to its
 * backward's last (the QKV backward); the most alive at once equal the
 * model's in_flight chunk passes of L/(pp v) blocks (of their chunks'
 * blocks where the split is uneven or has slots). */
static void live_matches_memory(const config *cp)
{
    config c = *cp;
    dag *g = tbuild(&c);
    mesh msh = config_mesh(&c);
    for (int s = 0; s < c.pp; s++) {
        int coord[MESH_NDIMS] = {0};
        coord[MESH_PP] = s;
        int r = mesh_rank(&msh, coord), live = 0, peak = 0;
        uint32_t n;
        const uint32_t *ids = dag_stream_tasks(g, r, STREAM_COMP, &n);
        char *alive = calloc((size_t)c.model.layers * (size_t)c.micro_batches, 1);
        for (uint32_t i = 0; i < n; i++) {
            const dag_task *t = dag_task_get(g, ids[i]);
            if (t->kind != TASK_GEMM || t->op != OP_QKV || t->layer < 0) continue;
            char *a = &alive[(size_t)t->mb * (size_t)c.model.layers + (size_t)t->layer];
            if (t->phase == PHASE_FWD && !*a) *a = 1, live++;
            if (t->phase == PHASE_BWD && *a) *a = 0, live--;
            if (live > peak) peak = live;
        }
        free(alive);
        memory_estimate e;
        memory_estimate_stage(&c, s, &e);
        ck_assert_double_eq_tol(e.activations / e.act_per_layer, (double)peak, 1e-9);
    }
    dag_free(g);
}

START_TEST(live_activations_match_memory)
{
    config c = pcfg(rows[_i].pp, rows[_i].m, rows[_i].s, rows[_i].v, 1);
    live_matches_memory(&c);
}
END_TEST

/* Every schedule's DAG holds the contract (dag_validate: acyclic under
 * group semantics, p2p matched); pp 1 with one micro-batch has no pp
 * task and every task of micro-batch 0. */
START_TEST(schedules_validate)
{
    config c = pcfg(rows[_i].pp, rows[_i].m, rows[_i].s, rows[_i].v, _i % 2 ? 2 : 1);
    dag *g = tbuild(&c); /* validates */
    dag_free(g);
    config one = pcfg(1, 1, SCHED_1F1B, 1, 1);
    g = tbuild(&one);
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        ck_assert_uint_lt(dag_task_get(g, i)->stream, STREAM_PP);
        ck_assert_uint_eq(dag_task_get(g, i)->mb, 0);
    }
    dag_free(g);
}
END_TEST

/* Megatron's uneven split: the first and last stages' layers named, the
 * rest even over the others; every block on exactly one stage, the
 * stages' parameters summing to the model's, and the step's FLOPs m times
 * the unpipelined one's. Llama 3 405B's 126 layers over 16 stages: 7 on
 * the first and last, 8 on the others (Dubey et al. 2024, section 3.3.2). */
START_TEST(uneven_split)
{
    config c = pcfg(1, 1, SCHED_1F1B, 1, 1);
    char err[LOONG_ERRLEN];
    ck_assert(model_preset("llama3-405b", &c.model, err) == 0);
    c.pp = 16;
    c.pp_first = c.pp_last = 7;
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    ck_assert_int_eq(pipe_chunk_layers(&c, 0), 7);
    ck_assert_int_eq(pipe_chunk_layers(&c, 8), 8);
    ck_assert_int_eq(pipe_chunk_layers(&c, 15), 7);
    uint64_t params = 0;
    for (int s = 0; s < c.pp; s++)
        params += pipe_stage_params(&c, s);
    ck_assert_uint_eq(params, model_params_tp(&c.model, 1));
    for (int l = 0; l < c.model.layers; l++) {
        int holders = 0;
        for (int s = 0; s < c.pp; s++)
            if (pipe_holds(&c, s, l)) {
                holders++;
                ck_assert(l >= pipe_first_layer(&c, s, 0) && l < pipe_first_layer(&c, s, 0) + pipe_chunk_layers(&c, s));
            }
        ck_assert_int_eq(holders, 1);
    }
    /* _i 0: 1F1B 6, 8, 8, 10; _i 1: interleaved v 2, 2, 12, 12, 6 (chunks of 1, 6, 6, 3), tp 2 */
    config u = _i ? pcfg(4, 8, SCHED_INTERLEAVED, 2, 2) : pcfg(4, 8, SCHED_1F1B, 1, 1),
           one = pcfg(1, 1, SCHED_1F1B, 1, _i ? 2 : 1);
    u.pp_first = _i ? 2 : 6;
    u.pp_last = _i ? 6 : 10;
    ck_assert_msg(config_validate(&u, err) == 0, "%s", err);
    dag *g = tbuild(&u), *g1 = tbuild(&one); /* validates */
    ck_assert_uint_eq(sum_flops(g, -1, TASK_GEMM), 8 * sum_flops(g1, -1, TASK_GEMM));
    dag_free(g);
    dag_free(g1);
    live_matches_memory(&u);
}
END_TEST

/* The uneven split under the interleaved schedule, against Megatron-Core's
 * assignment (get_num_layers_to_build, get_transformer_layer_offset):
 * stage s holds n_s layers (pp_first, pp_last, or (L - first - last)/k on
 * the k others), 1/v of them in each chunk; chunk j of stage s starts at
 * j L/v plus the chunks of stages 0 .. s-1, so the virtual stages u = j pp
 * + s, in order, hold the layers 0 .. L-1 once each. */
static const struct {
    const char *model;
    int pp, v, first, last;
} vrows[] = {{"llama3-8b", 4, 2, 2, 6},    {"llama3-8b", 4, 2, 0, 2},  {"llama3-8b", 4, 4, 4, 4},
             {"llama3-8b", 3, 2, 0, 4},    {"llama3-8b", 2, 2, 0, 20}, {"llama3-405b", 16, 2, 6, 8},
             {"llama3-405b", 16, 2, 10, 4}};

START_TEST(uneven_vpp_layers)
{
    config c = pcfg(1, 1, SCHED_1F1B, 1, 1);
    char err[LOONG_ERRLEN];
    ck_assert(model_preset(vrows[_i].model, &c.model, err) == 0);
    c.pp = vrows[_i].pp;
    c.vpp = vrows[_i].v;
    c.schedule = SCHED_INTERLEAVED;
    c.micro_batches = c.pp;
    c.pp_first = vrows[_i].first;
    c.pp_last = vrows[_i].last;
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    int L = c.model.layers, pp = c.pp, v = c.vpp, k = pp - (c.pp_first > 0) - (c.pp_last > 0);
    int n[64], before = 0;
    for (int s = 0; s < pp; s++)
        n[s] = s == 0 && c.pp_first       ? c.pp_first
               : s == pp - 1 && c.pp_last ? c.pp_last
                                          : (L - c.pp_first - c.pp_last) / k;
    for (int j = 0; j < v; j++)
        for (int s = 0, within = 0; s < pp; s++) {
            ck_assert_int_eq(pipe_chunk_layers(&c, s), n[s] / v);
            ck_assert_int_eq(pipe_first_layer(&c, s, j), j * L / v + within);
            ck_assert_int_eq(pipe_first_layer(&c, s, j), before); /* contiguous over u = j pp + s */
            within += n[s] / v;
            before += n[s] / v;
        }
    ck_assert_int_eq(before, L);
    uint64_t params = 0;
    for (int s = 0; s < pp; s++)
        params += pipe_stage_params(&c, s);
    ck_assert_uint_eq(params, model_params_tp(&c.model, 1));
    for (int l = 0; l < L; l++) {
        int holders = 0;
        for (int s = 0; s < pp; s++)
            holders += pipe_holds(&c, s, l);
        ck_assert_int_eq(holders, 1);
    }
}
END_TEST

/* The embedding's and the loss's slots (Megatron's --account-for-
 * embedding/loss-in-pipeline-split, get_num_layers_to_build and
 * get_transformer_layer_offset): L + slots split into pp v chunks of n;
 * virtual stage 0 holds n - 1 layers with the embedding's slot, the last
 * n - 1 with the loss's, the others n, and the virtual stages u = j pp + s
 * in order hold 0 .. L-1 once each. Llama 3 405B (Dubey et al. 2024,
 * section 3.3.2): 126 layers + 2 over 16 stages of 8 chunks, stage 0's
 * first chunk the embedding alone, stage 15's last the LM head alone. */
static const struct {
    int layers, pp, v;
    bool embed, loss;
} srows[] = {{126, 16, 8, true, true}, {30, 4, 2, true, true}, {32, 3, 1, true, false}, {31, 4, 2, false, true}};

START_TEST(slot_layers)
{
    config c = pcfg(1, 1, SCHED_1F1B, 1, 1);
    char err[LOONG_ERRLEN];
    ck_assert(model_preset("llama3-405b", &c.model, err) == 0);
    c.model.layers = srows[_i].layers;
    c.pp = srows[_i].pp;
    c.vpp = srows[_i].v;
    c.schedule = c.vpp > 1 ? SCHED_INTERLEAVED : SCHED_1F1B;
    c.micro_batches = c.pp;
    c.pp_embed_slot = srows[_i].embed;
    c.pp_loss_slot = srows[_i].loss;
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    int L = c.model.layers, pp = c.pp, v = c.vpp, n = (L + c.pp_embed_slot + c.pp_loss_slot) / (pp * v), next = 0;
    for (int u = 0; u < pp * v; u++) {
        int s = u % pp, j = u / pp;
        int want = n - (u == 0 && c.pp_embed_slot) - (u == pp * v - 1 && c.pp_loss_slot);
        ck_assert_int_eq(pipe_layers(&c, s, j), want);
        ck_assert_int_eq(pipe_first_layer(&c, s, j), next);
        next += want;
    }
    ck_assert_int_eq(next, L);
    uint64_t params = 0;
    for (int s = 0; s < pp; s++)
        params += pipe_stage_params(&c, s);
    ck_assert_uint_eq(params, model_params_tp(&c.model, 1));
    for (int l = 0; l < L; l++) {
        int holders = 0;
        for (int s = 0; s < pp; s++)
            holders += pipe_holds(&c, s, l);
        ck_assert_int_eq(holders, 1);
    }
}
END_TEST

/* With the slots the DAG validates, its GEMM FLOPs m times the
 * unpipelined step's, and each stage's compute stream runs its blocks'
 * forwards m times: 30 layers, pp 4, v 2, both slots (stage 0's first
 * chunk and stage 3's last of 3 blocks, the others 4). */
START_TEST(slot_dag)
{
    config c = pcfg(4, 8, SCHED_INTERLEAVED, 2, 1), one = pcfg(1, 1, SCHED_1F1B, 1, 1);
    char err[LOONG_ERRLEN];
    c.model.layers = one.model.layers = 30;
    c.pp_embed_slot = c.pp_loss_slot = true;
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    ck_assert_msg(config_validate(&one, err) == 0, "%s", err);
    ck_assert_int_eq(pipe_stage_layers(&c, 0), 7);
    ck_assert_int_eq(pipe_stage_layers(&c, 1), 8);
    ck_assert_int_eq(pipe_stage_layers(&c, 3), 7);
    dag *g = tbuild(&c), *g1 = tbuild(&one); /* validates */
    ck_assert_uint_eq(sum_flops(g, -1, TASK_GEMM), 8 * sum_flops(g1, -1, TASK_GEMM));
    dag_free(g);
    dag_free(g1);
    live_matches_memory(&c);
}
END_TEST

/* Megatron-Core's refusals of an uneven split under --vpp
 * (TransformerConfig.__post_init__): a first, last or middle stage count
 * that is not a multiple of v; pp 2 with both named (its layer offset
 * divides by the zero middle stages). Llama 3 405B's 7, 8 x 14, 7 is one:
 * only v = 1 divides 7 and 8. */
START_TEST(uneven_vpp_refused)
{
    static const struct {
        const char *model;
        int pp, v, first, last;
    } bad[] = {{"llama3-8b", 4, 2, 3, 5},   {"llama3-8b", 3, 2, 0, 2},    {"llama3-8b", 4, 4, 2, 2},
               {"llama3-8b", 2, 2, 16, 16}, {"llama3-405b", 16, 7, 7, 7}, {"llama3-405b", 16, 2, 7, 7}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        config c = pcfg(1, 1, SCHED_1F1B, 1, 1);
        char err[LOONG_ERRLEN];
        ck_assert(model_preset(bad[i].model, &c.model, err) == 0);
        c.pp = bad[i].pp;
        c.vpp = bad[i].v;
        c.schedule = SCHED_INTERLEAVED;
        c.micro_batches = c.pp;
        c.pp_first = bad[i].first;
        c.pp_last = bad[i].last;
        ck_assert_msg(config_validate(&c, err) == -1, "row %zu accepted", i);
        ck_assert_msg(strstr(err, "--vpp") != NULL, "row %zu: %s", i, err);
    }
}
END_TEST

/* ---- the largest size: llama3-405b at S = 4M, 16M tokens a step ----
 * A rank's FLOPs over its stage's layers and micro-batches pass 2^64
 * here (uint64_t would wrap); each task's stay below 2^63 (config.c,
 * task_size_bound). */

#define S4M (4 * K * K)

/* llama3-405b at S = 4M, batch 1, m micro-batches, on tp x (1 x P_s) x pp. */
static config big(int tp, int ps, int pp, int m)
{
    config c = tcfg("llama3-405b", S4M, ps > 1 ? "usp" : "ulysses", 1, ps, 0, SCOPE_STEP);
    c.tp = tp;
    c.pp = pp;
    c.micro_batches = m;
    return c;
}

/* GEMM weights of one block, from the model's dimensions: QKV, output, SwiGLU. */
static long double block_weights(const model *m)
{
    long double h = m->hidden, d = m->head_dim;
    return h * (m->heads + 2.0L * m->kv_heads) * d + (long double)m->heads * d * h + 3 * h * m->ffn;
}

static void assert_rel(long double got, long double want, const char *what)
{
    ck_assert_msg(fabsl(got - want) <= 1e-12L * want, "%s: %.17Lg, closed form %.17Lg", what, got, want);
}

/* tp 8 x 1x2 x pp 2, 4 micro-batches of one 4M sample (the old per-rank
 * bound, 14*S^2*H*d*L_stage*m/(P*tp/2), was 1.3e20 and refused it): it
 * validates; the step's model FLOPs are stats.h's closed form, 6 x block
 * weights x tokens per layer + the causal attention term 6*tokens*S*H*d
 * per layer + the LM head's 6 x tokens x hidden x vocab; the analytical
 * step is finite, positive and at most the peak's rate (MFU <= 1); every
 * stage's memory peak is finite and above its weights. No DAG: the
 * analytical paths only. */
START_TEST(size_405b_4m_analytic)
{
    config c = big(8, 2, 2, 4);
    char err[LOONG_ERRLEN];
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    const model *m = &c.model;
    long double S = (long double)c.seq, tokens = S * c.batch * c.micro_batches;
    ck_assert(tokens == 16.0L * K * K); /* 16M */
    long double want = 6 * tokens * (m->layers * block_weights(m) + (long double)m->hidden * m->vocab) +
                       6 * tokens * S * m->layers * m->heads * m->head_dim;
    assert_rel(stats_model_flops(&c), want, "model FLOPs");
    calib *cb = calib_load(LOONG_SRCDIR "/topologies/h100.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    platform_spec net;
    ck_assert_int_eq(platform_spec_defaults("h100", &net, err), 0);
    analytic_result r;
    analytic_step(&c, cb, &net, &r);
    ck_assert_msg(isfinite(r.step) && r.step > 0 && r.busy > 0 && r.busy <= r.step, "step %g busy %g", r.step, r.busy);
    ck_assert_double_le(want, r.step * config_ranks(&c) * calib_peak(cb));
    calib_free(cb);
    for (int s = 0; s < c.pp; s++) {
        memory_estimate e;
        memory_estimate_stage(&c, s, &e);
        ck_assert_msg(isfinite(e.peak) && e.peak > e.weights && e.weights > 0, "stage %d: peak %g", s, e.peak);
    }
}
END_TEST

/* The same model and global batch on 1x1 x pp 2 (no recompute), as a DAG
 * (3000 tasks a rank): each rank's attention FLOPs, 4 micro-batches x 63
 * layers x (forward + 2.5x backward) of S(S+1)/2 pairs x 4*d*H, are 5e20,
 * past 2^64; stats_compute() returns them and the GEMMs' (the last stage
 * with the LM head) to 1e-12 of the closed forms. */
START_TEST(size_405b_4m_stats)
{
    config c = big(1, 1, 2, 4);
    c.recompute = RECOMPUTE_NONE;
    char err[LOONG_ERRLEN];
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    const model *m = &c.model;
    long double S = (long double)c.seq, mb = c.micro_batches, L = m->layers / c.pp;
    long double fwd = S * (S + 1) / 2 * 4 * m->head_dim * m->heads;
    long double attn = mb * L * 3.5L * fwd, gemm = mb * L * 6 * S * block_weights(m);
    ck_assert(attn > 0x1p64L);
    dag *g = tbuild(&c);
    rank_stats rs[2];
    stats_compute(g, rs);
    mesh msh = config_mesh(&c);
    for (int r = 0; r < 2; r++) {
        int coord[MESH_NDIMS];
        mesh_coords(&msh, r, coord);
        int stage = coord[MESH_PP];
        assert_rel(rs[r].flops_attn, attn, "attention FLOPs of a rank");
        assert_rel(rs[r].flops_gemm, gemm + (stage == 1 ? mb * 6 * S * m->hidden * m->vocab : 0), "GEMM FLOPs");
    }
    dag_free(g);
}
END_TEST

/* ---- activation recompute ---- */

/* The recompute policies of the tests below (recompute.h). */
static const struct {
    recompute_kind r;
    int mods;
    recompute_method_kind method;
    int n;
} policies[] = {
    {RECOMPUTE_NONE, RECOMPUTE_MOD_CORE_ATTN, RECOMPUTE_UNIFORM, 1},
    {RECOMPUTE_SELECTIVE, RECOMPUTE_MOD_CORE_ATTN, RECOMPUTE_UNIFORM, 1},
    {RECOMPUTE_SELECTIVE, RECOMPUTE_MOD_MLP, RECOMPUTE_UNIFORM, 1},
    {RECOMPUTE_SELECTIVE, RECOMPUTE_MOD_CORE_ATTN | RECOMPUTE_MOD_MLP, RECOMPUTE_UNIFORM, 1},
    {RECOMPUTE_SCPP, RECOMPUTE_MOD_CORE_ATTN, RECOMPUTE_UNIFORM, 1},
    {RECOMPUTE_FULL, RECOMPUTE_MOD_CORE_ATTN, RECOMPUTE_UNIFORM, 1},
    {RECOMPUTE_FULL, RECOMPUTE_MOD_CORE_ATTN, RECOMPUTE_UNIFORM, 2},
    {RECOMPUTE_FULL, RECOMPUTE_MOD_CORE_ATTN, RECOMPUTE_BLOCK, 1},
};
#define NPOLICIES ((int)(sizeof policies / sizeof *policies))

static void set_policy(config *c, int i)
{
    c->recompute = policies[i].r;
    c->recompute_modules = policies[i].mods;
    c->recompute_method = policies[i].method;
    c->recompute_layers = policies[i].n;
    char err[LOONG_ERRLEN];
    ck_assert_msg(config_validate(c, err) == 0, "%s", err);
}

/* The first task of rank 0 of (op, phase, layer), in program order (ids);
 * DAG_NONE: none. */
static uint32_t first_task(const dag *g, int op, int phase, int layer)
{
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->rank == 0 && t->op == op && t->phase == phase && t->layer == layer) return i;
    }
    return DAG_NONE;
}

/* Whether the tensor that op `producer` of block p writes is written again
 * by a recompute pass before the first backward task `reader` of block l
 * reads it: then the forward's copy need not be kept. */
static bool regenerated(const dag *g, int producer, int p, int reader, int l)
{
    uint32_t rd = first_task(g, reader, PHASE_BWD, l);
    ck_assert_uint_ne(rd, DAG_NONE);
    uint32_t re = p < 0 ? DAG_NONE : first_task(g, producer, PHASE_RECOMPUTE, p);
    return re != DAG_NONE && re < rd;
}

/* Per policy, the bytes a stage keeps for the backward as the DAG says
 * (a block's tensors, each kept unless a recompute pass writes it again
 * before the backward reads it: x, the block input, from block l-1's down;
 * the norms' outputs and qkv from the QKV projection; the head-sharded
 * q|kv from the all-to-all; the output projection's input O; attention's
 * (O,) LSE; h from the output projection; the SwiGLU tensors from gate and
 * up) equal the memory model's activations. tiny (2 blocks, hidden 256,
 * H 8, H_kv 2, d 32, ffn 512) at 8K tokens, one micro-batch, on 2x2 (head
 * all-to-all), 1x4 (P_h = 1: O is the output projection's input) and 2x2
 * at tp 2 with sequence parallelism; the eight policies of policies[]. */
START_TEST(recompute_kept_matches_memory)
{
    static const struct {
        int ph, ps, tp;
    } mesh_rows[] = {{2, 2, 1}, {1, 4, 1}, {2, 2, 2}};
    int row = _i / NPOLICIES;
    config c = tcfg("tiny", 8 * K, "usp", mesh_rows[row].ph, mesh_rows[row].ps, 0, SCOPE_STEP);
    c.tp = mesh_rows[row].tp;
    set_policy(&c, _i % NPOLICIES);
    const model *m = &c.model;
    double a = c.act_bytes, tp = c.tp, T = (double)c.seq / (c.p_head * c.p_seq), Ns = (double)c.seq / c.p_seq;
    double hq = config_q_heads(&c), kvh = config_kv_heads(&c), d = m->head_dim;
    double x = T / tp * m->hidden * a, qkv = T * model_tp_qkv_heads(m, c.tp) * d * a;
    double qh = Ns * (hq + 2 * kvh) * d * a, os = T * m->heads / tp * d * a, o = Ns * hq * d * a, lse = Ns * hq * 4;
    double mlp = 3 * T * m->ffn / tp * a;
    bool a2a = c.p_head > 1;
    dag *g = tbuild(&c);
    double kept = 0;
    for (int l = 0; l < m->layers; l++) {
        const struct {
            double bytes;
            int producer, p, reader;
        } ts[] = {
            {x, OP_MLP_DOWN, l - 1, OP_QKV},
            {x, OP_QKV, l, OP_QKV},
            {qkv, OP_QKV, l, OP_ATTN},
            {a2a ? qh : 0, OP_A2A_QKV, l, OP_ATTN},
            {a2a ? os : o, a2a ? OP_A2A_O : OP_ATTN, l, OP_OUT_PROJ},
            {a2a ? o + lse : lse, OP_ATTN, l, OP_ATTN},
            {x, OP_OUT_PROJ, l, OP_MLP_GATE},
            {x, OP_MLP_GATE, l, OP_MLP_GATE},
            {mlp, OP_MLP_GATE, l, OP_MLP_DOWN},
        };
        for (size_t k = 0; k < sizeof ts / sizeof *ts; k++)
            if (!regenerated(g, ts[k].producer, ts[k].p, ts[k].reader, l)) kept += ts[k].bytes;
    }
    dag_free(g);
    memory_estimate e;
    memory_estimate_stage(&c, 0, &e);
    ck_assert_double_eq_tol(e.in_flight, 1, 1e-12);
    ck_assert_msg(fabs(e.activations - kept) <= 1e-9 * kept, "policy %d mesh row %d: memory %.17g, DAG %.17g",
                  _i % NPOLICIES, row, e.activations, kept);
}
END_TEST

/* Megatron's selective recompute re-runs core attention only, so a step
 * with it costs at least none's and less than full's (the analytical
 * model, under a second for all): every shipped model at 16K tokens on a
 * 2x4 usp mesh of H100s, and a GPT-style MHA model (hidden 6144, 48 heads,
 * 48 layers; Megatron-LM's Table 1 scale) at 2K tokens with TP 8 on one
 * A100 node, with FlashAttention and with --attention unfused (dropout
 * 0.1), where selective re-runs the softmax and dropout too. */
START_TEST(selective_between_none_and_full)
{
    static const char *const presets[] = {"llama3-8b", "llama3-70b", "llama3-405b", "7b-mha", "7b-gqa", "tiny"};
    int n = (int)(sizeof presets / sizeof *presets);
    char err[LOONG_ERRLEN];
    for (int i = 0; i <= n + 1; i++) {
        bool gpt = i >= n;
        config c = gpt ? tcfg("tiny", 2 * K, "usp", 1, 1, 0, SCOPE_STEP)
                       : tcfg(presets[i], 16 * K, "usp", 2, 4, 0, SCOPE_STEP);
        if (gpt) {
            c.model = (model){"gpt-mha", 48, 6144, 48, 48, 128, 4 * 6144, 51200, .tied = false};
            c.tp = 8;
        }
        if (i == n + 1) { /* and as Megatron ran it before FlashAttention */
            c.attention = ATTN_UNFUSED;
            c.attention_dropout = c.hidden_dropout = 0.1;
        }
        const char *gpu = gpt ? "a100" : "h100";
        char path[256];
        snprintf(path, sizeof path, "%s/topologies/%s.calib", LOONG_SRCDIR, gpu);
        calib *cb = calib_load(path, err);
        ck_assert_msg(cb != NULL, "%s", err);
        platform_spec net;
        ck_assert_int_eq(platform_spec_defaults(gpu, &net, err), 0);
        double step[3];
        static const recompute_kind kinds[3] = {RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL};
        for (int k = 0; k < 3; k++) {
            recompute_set(&c, kinds[k]);
            ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
            analytic_result r;
            analytic_step(&c, cb, &net, &r);
            step[k] = r.step;
        }
        calib_free(cb);
        ck_assert_msg(step[1] >= step[0] && step[1] < step[2], "%s: none %g s, selective %g s, full %g s", c.model.name,
                      step[0], step[1], step[2]);
    }
}
END_TEST

static Suite *pipeline_suite(void)
{
    Suite *s = suite_create("pipeline");
    TCase *tc = tcase_create("schedules");
    tcase_add_loop_test(tc, schedule_order, 0, NROWS);
    tcase_add_test(tc, interleaved_chunks);
    tcase_add_loop_test(tc, peak_in_flight, 0, NROWS);
    suite_add_tcase(s, tc);
    tc = tcase_create("dag");
    tcase_add_loop_test(tc, stage_p2p_bytes, 0, 2 * NROWS);
    tcase_add_loop_test(tc, flops_conserved, 0, NROWS);
    tcase_add_loop_test(tc, grads_after_last_micro_batch, 0, 2);
    tcase_add_loop_test(tc, live_activations_match_memory, 0, NROWS);
    tcase_add_loop_test(tc, schedules_validate, 0, NROWS);
    tcase_add_loop_test(tc, uneven_split, 0, 2);
    tcase_add_loop_test(tc, uneven_vpp_layers, 0, (int)(sizeof vrows / sizeof *vrows));
    tcase_add_test(tc, uneven_vpp_refused);
    tcase_add_loop_test(tc, slot_layers, 0, (int)(sizeof srows / sizeof *srows));
    tcase_add_test(tc, slot_dag);
    tcase_add_test(tc, size_405b_4m_analytic);
    tcase_add_test(tc, size_405b_4m_stats);
    suite_add_tcase(s, tc);
    tc = tcase_create("recompute");
    tcase_add_loop_test(tc, recompute_kept_matches_memory, 0, 3 * NPOLICIES);
    tcase_add_test(tc, selective_between_none_and_full);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return check_run(pipeline_suite()); }

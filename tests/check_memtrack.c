/* The memory timeline (model/memtrack.h) on simulated steps: its peak per
 * rank equals the memory model's allocated peak of the rank's stage
 * (memory_estimate_stage) for every ZeRO stage, pipeline schedule and
 * recompute policy; and `loong sim --trace-memory` writes it as counter
 * events. Both sides add the same byte counts in a different order, so they
 * agree to rounding: a relative 1e-9. Each Check test runs in its own
 * process (SimGrid starts once per process). */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "dag_util.h"
#include "model/calib.h"
#include "model/memory.h"
#include "model/memtrack.h"
#include "core/pipeline.h"
#include "core/recompute.h"
#include "sim/sim.h"

#define K 1024ull

/* tiny (hidden 256, ffn 512, vocab 1000: the head's parameters below a
 * block's, so ZeRO-3's gathered peak is prefetch + 1 blocks) with L layers,
 * usp over ph x ps ranks. */
static config mcfg(int ph, int ps, int layers)
{
    config c = tcfg("tiny", 4 * K, "usp", ph, ps, 0, SCOPE_STEP);
    c.model.layers = layers;
    return c;
}

static void validate(const config *c)
{
    char err[LOONG_ERRLEN];
    ck_assert_msg(config_validate(c, err) == 0, "%s", err);
}

/* The allocated peak the timeline must reach on `stage`: the model's,
 * with two exceptions where the model's sum of maxima is not what the
 * schedule holds at once (the model is left as it is: its predictions stay
 * unchanged; both are reported on the issue):
 *   - every forward before any backward (GPipe; interleaved with m = pp
 *     runs all its forwards in the warm-up) on the last stage: each micro-
 *     batch keeps its logits from the LM head's forward to its backward,
 *     so m of them are held, the model counting one: + (m - 1) x lm_head;
 *   - full recompute, block method, on a chunk of n blocks of which the
 *     first N re-run (pp = 1, m = 1): the re-run's working set
 *     (2 none - x) comes after the n - N blocks that keep all were freed,
 *     so the peak is at the backward of the last block, all kept + one
 *     block's gradients (none), below the model's all kept + 2 none - x by
 *     none - x (when that exceeds the LM head's term, asserted). */
static double expected_peak(const config *c, int stage, const memory_estimate *e)
{
    bool all_fwd = c->schedule == SCHED_GPIPE || (c->schedule == SCHED_INTERLEAVED && c->micro_batches == c->pp);
    if (c->pp > 1 && all_fwd && stage == c->pp - 1) return e->peak + (c->micro_batches - 1) * e->lm_head;
    if (c->recompute == RECOMPUTE_FULL && c->recompute_method == RECOMPUTE_BLOCK && c->pp == 1) {
        double none = memory_layer_activations(c, RECOMPUTE_NONE), x = memory_layer_activations(c, RECOMPUTE_FULL);
        ck_assert(e->lm_head < e->working + e->attn_buffers - (none - x));
        return e->peak - (none - x);
    }
    return e->peak;
}

/* Simulate c on one DGX H100 node with the H100 calibration, and compare
 * every rank's timeline peak with its stage's allocated peak. */
static void assert_peaks(const config *c)
{
    validate(c);
    char err[LOONG_ERRLEN] = "";
    calib *cb = calib_load(LOONG_SRCDIR "/topologies/h100.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    sim_platform *pf = sim_platform_open(LOONG_SRCDIR "/topologies/dgx-h100-1n.xml", 0, NULL, err);
    ck_assert_msg(pf != NULL, "%s", err);
    dag *g = tbuild(c);
    sim_result res;
    ck_assert_msg(sim_run(pf, g, cb, false, SIM_FOLD_DEFAULT, &res, err) == 0, "%s", err);
    memtrack mt;
    memtrack_build(g, res.start, res.dur, &mt);
    ck_assert_int_eq(mt.nranks, config_ranks(c));
    for (int r = 0; r < mt.nranks; r++) {
        memory_estimate e;
        memory_estimate_stage(c, pipe_stage(c, r), &e);
        const memtrack_rank *m = &mt.r[r];
        double want = expected_peak(c, pipe_stage(c, r), &e);
        ck_assert_msg(fabs(m->peak - want) <= 1e-9 * want,
                      "rank %d (stage %d): timeline peak %.6f MB at %.6f ms, expected %.6f MB (model's allocated %.6f)",
                      r, pipe_stage(c, r), m->peak / 1e6, m->peak_t * 1e3, want / 1e6, e.peak / 1e6);
        /* every term back to its constant at the step's end: nothing leaks */
        const double *last = &m->v[(m->n - 1) * MT_TERMS];
        for (int k = MT_GATHERED; k < MT_TERMS; k++)
            ck_assert_msg(fabs(last[k]) <= 1e-6 * e.peak, "rank %d: %s holds %g B at the end", r, memtrack_term_name(k),
                          last[k]);
    }
    memtrack_free(&mt);
    sim_result_free(&res);
    dag_free(g);
    sim_platform_free(pf);
    calib_free(cb);
}

START_TEST(zero_stages)
{
    config c = mcfg(2, 2, 4);
    c.zero = _i;
    c.micro_batches = _i < 2 ? 2 : 1; /* ZeRO-2/3 refuse gradient accumulation */
    assert_peaks(&c);
}
END_TEST

/* ZeRO-3 with two blocks prefetched */
START_TEST(zero3_prefetch)
{
    config c = mcfg(2, 2, 6);
    c.zero = 3;
    c.prefetch = 2;
    assert_peaks(&c);
}
END_TEST

static const struct {
    int pp, m, v;
    schedule_kind s;
} pipes[] = {{2, 4, 1, SCHED_1F1B},
             {4, 8, 1, SCHED_1F1B},
             {2, 4, 1, SCHED_GPIPE},
             {2, 4, 2, SCHED_INTERLEAVED},
             {4, 4, 2, SCHED_INTERLEAVED}};

START_TEST(pipelines)
{
    config c = mcfg(1, 2, 8);
    c.pp = pipes[_i].pp;
    c.micro_batches = pipes[_i].m;
    c.vpp = pipes[_i].v;
    c.schedule = pipes[_i].s;
    assert_peaks(&c);
}
END_TEST

/* none, selective (core_attn; core_attn + mlp), sc++, full uniform N = 1
 * and N = 2 (dividing the 4 blocks: with a shorter last group the model's
 * working set, the largest group's, is an upper bound), full block N = 2 */
START_TEST(recompute_policies)
{
    config c = mcfg(2, 2, 4);
    switch (_i) {
    case 0: c.recompute = RECOMPUTE_NONE; break;
    case 1: recompute_set(&c, RECOMPUTE_SELECTIVE); break;
    case 2:
        recompute_set(&c, RECOMPUTE_SELECTIVE);
        c.recompute_modules = RECOMPUTE_MOD_CORE_ATTN | RECOMPUTE_MOD_MLP;
        break;
    case 3: recompute_set(&c, RECOMPUTE_SCPP); break;
    case 4: recompute_set(&c, RECOMPUTE_FULL); break;
    case 5:
        recompute_set(&c, RECOMPUTE_FULL);
        c.recompute_layers = 2;
        break;
    default:
        recompute_set(&c, RECOMPUTE_FULL);
        c.recompute_method = RECOMPUTE_BLOCK;
        c.recompute_layers = 2;
        break;
    }
    assert_peaks(&c);
}
END_TEST

/* Recompute and a pipeline together, with tensor and sequence parallelism */
START_TEST(pipeline_recompute_tp)
{
    config c = mcfg(1, 2, 4);
    c.pp = 2;
    c.micro_batches = 4;
    c.tp = 2;
    c.sequence_parallel = true;
    recompute_set(&c, _i ? RECOMPUTE_FULL : RECOMPUTE_SELECTIVE);
    assert_peaks(&c);
}
END_TEST

/* `loong sim --trace-memory`: per rank (pid), the "memory" counter's
 * largest sample is the model's allocated peak (written in whole bytes:
 * within 1 byte), its "memory by term" samples sum to it, and the task
 * events are those of the trace without counters (the flag adds events
 * only: the file less its counter lines is the one without the flag). */
START_TEST(trace_counters)
{
    char path[64], bare[64];
    snprintf(path, sizeof path, "/tmp/loong-memtrack-%d.json", (int)getpid());
    snprintf(bare, sizeof bare, "/tmp/loong-memtrack-%d-bare.json", (int)getpid());
    const char *args = "--model tiny --seq 4K --mesh 2x2 --strategy usp --scope step --quiet -o /dev/null";
    run_result rr = run_cmd("%s sim --platform %s/topologies/dgx-h100-1n.xml %s --trace %s --trace-memory", LOONG_BIN,
                            LOONG_SRCDIR, args, path);
    ck_assert_msg(rr.status == 0, "%s", rr.err);
    rr = run_cmd("%s sim --platform %s/topologies/dgx-h100-1n.xml %s --trace %s", LOONG_BIN, LOONG_SRCDIR, args, bare);
    ck_assert_msg(rr.status == 0, "%s", rr.err);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je), *plain = json_load_file(bare, 0, &je);
    ck_assert_ptr_nonnull(root);
    ck_assert_ptr_nonnull(plain);
    config c = mcfg(2, 2, 2); /* the command's configuration */
    validate(&c);
    double peak[4] = {0};
    size_t i, ntasks = 0, nplain = 0;
    json_t *e, *evs = json_object_get(root, "traceEvents");
    json_array_foreach(evs, i, e)
    {
        const char *ph = json_string_value(json_object_get(e, "ph")),
                   *name = json_string_value(json_object_get(e, "name"));
        ntasks += !strcmp(ph, "X");
        if (strcmp(ph, "C")) continue;
        int pid = (int)json_integer_value(json_object_get(e, "pid"));
        ck_assert(pid >= 0 && pid < 4);
        json_t *a = json_object_get(e, "args");
        if (!strcmp(name, "memory")) {
            double v = json_number_value(json_object_get(a, "allocated"));
            if (v > peak[pid]) peak[pid] = v;
        } else {
            ck_assert_str_eq(name, "memory by term");
            ck_assert_int_eq((int)json_object_size(a), MT_TERMS);
        }
    }
    json_array_foreach(json_object_get(plain, "traceEvents"), i, e) nplain +=
        !strcmp(json_string_value(json_object_get(e, "ph")), "X");
    ck_assert_uint_eq(ntasks, nplain);
    /* byte for byte, less the counter lines */
    char *with = read_text(path), *without = read_text(bare), *w = with;
    for (char *line = with; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);
        if (strncmp(line, "{\"ph\":\"C\"", 8)) memmove(w, line, len), w += len;
        line += len;
    }
    *w = 0;
    ck_assert_str_eq(with, without);
    free(with);
    free(without);
    memory_estimate est;
    memory_estimate_stage(&c, 0, &est);
    for (int r = 0; r < 4; r++)
        ck_assert_msg(fabs(peak[r] - est.peak) <= 1 + 1e-9 * est.peak, "rank %d: counter peak %.0f B, model %.0f B", r,
                      peak[r], est.peak);
    json_decref(root);
    json_decref(plain);
    unlink(path);
    unlink(bare);
}
END_TEST

/* --attention unfused (its s x s scores kept and their gradients in the
 * backward) with attention and hidden dropout, Ulysses over 2 ranks (the
 * unfused kernel runs no ring), recompute none and selective */
START_TEST(unfused_dropout)
{
    config c = tcfg("tiny", 4 * K, "ulysses", 2, 1, 0, SCOPE_STEP);
    c.attention = ATTN_UNFUSED;
    c.attention_dropout = 0.1;
    c.hidden_dropout = 0.1;
    if (_i) recompute_set(&c, RECOMPUTE_SELECTIVE);
    assert_peaks(&c);
}
END_TEST

/* --precision fp8-delayed (TE's FP8 weight copies a constant term, the
 * GEMM inputs kept in FP8), ZeRO 1 and 3 */
START_TEST(fp8_precision)
{
    config c = tcfg("tiny", 4 * K, "usp", 2, 2, 0, SCOPE_STEP);
    c.precision = PRECISION_FP8_DELAYED;
    c.zero = _i ? 3 : 1;
    assert_peaks(&c);
}
END_TEST

Suite *memtrack_suite(void)
{
    Suite *s = suite_create("memtrack");
    TCase *tc = tcase_create("peaks");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, zero_stages, 0, 4);
    tcase_add_test(tc, zero3_prefetch);
    tcase_add_loop_test(tc, pipelines, 0, (int)(sizeof pipes / sizeof *pipes));
    tcase_add_loop_test(tc, recompute_policies, 0, 7);
    tcase_add_loop_test(tc, pipeline_recompute_tp, 0, 2);
    tcase_add_test(tc, trace_counters);
    tcase_add_loop_test(tc, unfused_dropout, 0, 2);
    tcase_add_loop_test(tc, fp8_precision, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(memtrack_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

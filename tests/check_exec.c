/* loong exec under mpirun: numerical equality with the float64 reference
 * for every strategy, mesh and scope; random configurations; the measured
 * trace's invariants; --dump; faults and bad input. Each run uses a small
 * sequence so that compute stays cheap on two cores. */
#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <gsl/gsl_rng.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_util.h"
#include "core/trace.h"
#include "dag_util.h"
#include "check_run.h"

/* Open MPI's plugins leak at exit and are unloaded before LeakSanitizer
 * can name them, so leak checking is off under mpirun (ASan's memory-error
 * checks and UBSan stay on); the single-process suites keep it on. */
#define MPIRUN "ASAN_OPTIONS=detect_leaks=0 " MPIRUN_BIN " --oversubscribe -np %d " LOONG_BIN " exec"
/* The same under timeout(1), which only guards the suite against a hang. */
#define MPIRUN_GUARDED                                                                                                 \
    "ASAN_OPTIONS=detect_leaks=0 timeout -k 10 120 " MPIRUN_BIN " --oversubscribe -np %d " LOONG_BIN " exec"
#define FAST "--iters 1 --warmup 0"

/* ---- tables of cases, each table one mpirun (loong exec --cases) ----
 * A case is a row: its options, and what its output must hold besides a
 * passing check table. The rows of one rank count run as one MPI job, so a
 * new case costs its own work, not another start-up of mpirun and P
 * processes. */

typedef struct exec_case {
    char args[320];
    const char *want; /* its table must hold this too, or NULL */
} exec_case;

typedef struct case_table {
    int np, n;
    exec_case row[96];
} case_table;

static void add_case(case_table *t, const char *want, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_case(case_table *t, const char *want, const char *fmt, ...)
{
    ck_assert_int_lt(t->n, (int)(sizeof t->row / sizeof t->row[0]));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->row[t->n].args, sizeof t->row[t->n].args, fmt, ap);
    va_end(ap);
    t->row[t->n++].want = want;
}

/* The output of case k (1-based) of n: from its "# case k/n:" marker to the
 * next case's (malloc'd; "" when the marker is missing). */
static char *case_section(const char *text, int k, int n)
{
    char mark[48], next[48];
    snprintf(mark, sizeof mark, "# case %d/%d: ", k, n);
    snprintf(next, sizeof next, "\n# case %d/%d: ", k + 1, n);
    const char *a = strstr(text, mark), *b = a ? strstr(a, k < n ? next : "\n# cases: ") : NULL;
    size_t len = a ? (b ? (size_t)(b - a) + 1 : strlen(a)) : 0; /* with its last newline */
    char *o = malloc(len + 1);
    memcpy(o, a ? a : "", len);
    o[len] = '\0';
    return o;
}

typedef struct batch_result {
    int status;
    char *out, *err;
} batch_result;

/* All rows of t in one `mpirun -np t->np loong exec --cases FILE COMMON`. */
static batch_result run_table(const case_table *t, const char *common)
{
    char dir[] = "/tmp/loong-cases-XXXXXX", path[64], out[64], err[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/cases", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < t->n; i++)
        fprintf(f, "%s\n", t->row[i].args);
    fclose(f);
    batch_result b;
    b.status = run_cmd(MPIRUN " --cases %s %s >%s 2>%s", t->np, path, common, out, err).status;
    b.out = read_text(out);
    b.err = read_text(err);
    run_cmd("rm -rf %s", dir);
    return b;
}

static void batch_free(batch_result *b)
{
    free(b->out);
    free(b->err);
}

/* Every row passed its check and holds its text; the batch exited 0. */
static void expect_table_ok(const case_table *t, const batch_result *b)
{
    for (int k = 0; k < t->n; k++) {
        char *sec = case_section(b->out, k + 1, t->n), *esec = case_section(b->err, k + 1, t->n);
        const char *what = t->row[k].args;
        ck_assert_msg(sec[0], "np %d case %d (%s): no output\nstderr:\n%s", t->np, k + 1, what, b->err);
        ck_assert_msg(strstr(sec, "FAILED") == NULL, "%s:\n%s", what, sec);
        ck_assert_msg(strstr(sec, "  O ") != NULL || strstr(sec, "dW_o ") != NULL, "%s: no check table\n%s\n%s", what,
                      sec, esec);
        ck_assert_msg(strstr(sec, "status 0\n") != NULL, "%s: not exit 0\n%s\n%s", what, sec, esec);
        if (t->row[k].want)
            ck_assert_msg(strstr(sec, t->row[k].want) != NULL, "%s: no '%s'\n%s", what, t->row[k].want, sec);
        free(sec);
        free(esec);
    }
    char tail[64];
    snprintf(tail, sizeof tail, "# cases: %d run, %d ok, 0 not ok", t->n, t->n);
    ck_assert_msg(strstr(b->out, tail) != NULL, "np %d: no '%s'\n%s", t->np, tail, b->err);
    ck_assert_msg(b->status == 0, "np %d: exit %d\n%s", t->np, b->status, b->err);
}

/* Under the sanitizers (LOONG_SANITIZED, make check's second pass, five
 * times slower) the tables run one row in `every` of each kind (attention
 * and documents 1 in 6, steps 1 in 2), every
 * code path still among them, so that the pass fits CI's time; the
 * normal pass runs them all. */
static bool sampled(int i, int every)
{
    static int sanitized = -1;
    if (sanitized < 0) sanitized = getenv("LOONG_SANITIZED") != NULL;
    return !sanitized || i % every == 0;
}

typedef struct layout {
    const char *mesh, *strategy, *extra;
    int np;
} layout;

static const layout meshes[] = {
    {"8", "ulysses", "", 8},
    {"8", "ring", "", 8},
    {"8", "zigzag", "", 8},
    {"2x4", "usp", "", 8},
    {"4x2", "usp", "", 8},
    {"2x4", "loongtrain", "--window 1", 8},
    {"2x4", "loongtrain", "--window 2", 8},
    {"2x4", "loongtrain", "--window 4", 8},
    {"4x2", "loongtrain", "--window 2 --placement context-first", 8},
    {"2x4", "dualring", "", 8},
    {"2x4", "allgather", "", 8},
    {"1x8", "allgather", "", 8},
};
#define NMESH ((int)(sizeof meshes / sizeof meshes[0]))

/* Every layout with MHA (H_kv = H) and GQA with replication (tiny: H_kv =
 * 2 < P_h for 4x2 and 8x1); one model after the other, so that the float64
 * reference is computed once per model. Then per model one layout under
 * tensor parallelism, each TP rank on its shard's heads (tiny: H_kv/tp = 1,
 * replicated over P_h = 2), against the same reference of all heads. */
static void attn_rows(case_table *t8)
{
    static const char *tp_layout[2] = {"--tp 4 --mesh 1x2 --strategy allgather",
                                       "--tp 2 --mesh 2x2 --strategy dualring"};
    for (int mdl = 0; mdl < 2; mdl++) {
        const char *model = mdl ? "tiny" : LOONG_SRCDIR "/tests/data/tiny-mha.model";
        for (int i = 0; i < NMESH; i++) /* sanitized: each mesh under one of the models */
            if (sampled(i + mdl, 6))
                add_case(t8, "  dK ", "--model %s --seq 1K --mesh %s --strategy %s %s --scope attn", model,
                         meshes[i].mesh, meshes[i].strategy, meshes[i].extra);
        add_case(t8, "  dK ", "--model %s --seq 1K %s --scope attn", model, tp_layout[mdl]);
    }
    /* tiny at tp 4 > H_kv = 2: each KV head on two shards, whose dK/dV --check sums */
    add_case(t8, "  dK ", "--model tiny --seq 1K --tp 4 --mesh 1x2 --strategy zigzag --scope attn");
    /* MLA: V 32 wide beside Q and K of 48, through the double ring's slots and the head all-to-alls */
    add_case(t8, "  dV ",
             "--model " LOONG_SRCDIR "/tests/data/tiny-mla.model --seq 1K --mesh 2x4 --strategy loongtrain --window 2 "
             "--scope attn");
}

static void attn_fwd_rows(case_table *t8)
{
    for (int i = 0; i < 4; i++) {
        const layout *m = &meshes[i * 3 % NMESH];
        if (sampled(i, 2))
            add_case(t8, NULL, "--model tiny --seq 2K --mesh %s --strategy %s %s --scope attn-fwd", m->mesh,
                     m->strategy, m->extra);
    }
}

/* Whole steps of tiny: ZeRO 0-3, Megatron's selective recompute (core
 * attention with its ring) beside the contiguous ring, full recompute
 * beside the dual ring and, over a uniform group of both blocks, beside
 * Ulysses. */
static void step_rows(case_table *t4)
{
    static const char *cases[] = {
        "--mesh 2x2 --strategy loongtrain --zero 0",
        "--mesh 4 --strategy zigzag --zero 2 --recompute selective",
        "--mesh 2x2 --strategy dualring --zero 3 --recompute full",
        "--mesh 4x1 --strategy ulysses --zero 1 --recompute full --recompute-num-layers 2",
    };
    for (int i = 0; i < 4; i++)
        if (sampled(i, 2)) add_case(t4, "dW_lm_head", "--model tiny --seq 512 %s --scope step", cases[i]);
}

/* Tensor parallelism at step scope, each row's weight gradients and loss
 * statistics against the reference's whole model: tp 2 (tiny, H_kv = 2)
 * and 4 (tiny-mha: tp must divide H_kv), beside P_h and P_s; together the
 * rows cover the single ring, the double ring, the dual ring (with KV
 * replication: H_kv/tp = 1 < P_h), the all-gather and Ulysses alone, ZeRO
 * 0-3, recompute none, full and Megatron's selective of core_attn and mlp
 * (and of mlp alone), sequence parallelism on and off;
 * and tp 4 with tiny (H_kv = 2): each KV head replicated on two shards,
 * whose weight gradients the tp_kv all-reduce sums, alone and beside the
 * replication over P_h = 2; and --tp-overlap's ring-exchange pairs (tp
 * chunks of T/tp rows, each on its TP part, and the ring steps between
 * them) at tp 2 and 4, beside the head all-to-all, under full recompute.
 * `want` is the run's description: TP on, with or without "sp". */
static void tp_step_rows(case_table *t4, case_table *t8)
{
    static const struct {
        const char *model, *args, *want;
        int np;
    } rows[] = {
        {"tiny", "--tp 2 --mesh 1x2 --strategy usp --zero 3 --recompute full", "mesh 1x2 tp 2 sp usp", 4},
        {"tiny", "--tp 2 --mesh 1x4 --strategy loongtrain --window 2 --zero 0", "mesh 1x4 tp 2 sp loongtrain", 8},
        {"tiny", "--tp 2 --mesh 2x2 --strategy dualring --zero 1 --sequence-parallel off", "mesh 2x2 tp 2 dualring", 8},
        {LOONG_SRCDIR "/tests/data/tiny-mha.model",
         "--tp 4 --mesh 1x2 --strategy allgather --zero 2 --recompute selective --recompute-modules core_attn,mlp",
         "mesh 1x2 tp 4 sp allgather", 8},
        {LOONG_SRCDIR "/tests/data/tiny-mha.model",
         "--tp 4 --mesh 2x1 --strategy ulysses --zero 3 --recompute full --sequence-parallel off",
         "mesh 2x1 tp 4 ulysses", 8},
        {"tiny", "--tp 4 --mesh 1x2 --strategy zigzag --zero 2", "mesh 1x2 tp 4 sp zigzag", 8},
        {"tiny",
         "--tp 4 --mesh 2x1 --strategy ulysses --zero 1 --sequence-parallel off --recompute selective "
         "--recompute-modules mlp",
         "mesh 2x1 tp 4 ulysses", 8},
        {"tiny", "--tp 2 --mesh 1x2 --strategy zigzag --zero 1 --tp-overlap on", "mesh 1x2 tp 2 sp overlapped", 4},
        {LOONG_SRCDIR "/tests/data/tiny-mha.model",
         "--tp 4 --mesh 2x1 --strategy ulysses --zero 3 --recompute full --tp-overlap on",
         "mesh 2x1 tp 4 sp overlapped", 8},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (sampled((int)i, 2))
            add_case(rows[i].np == 4 ? t4 : t8, rows[i].want, "--model %s --seq 512 %s --scope step", rows[i].model,
                     rows[i].args);
}

/* Random valid configurations: mesh, strategy, window, placement, seed. */
static void random_rows(case_table *t4, case_table *t8)
{
    for (int i = 0; i < 3; i++) {
        gsl_rng *g = gsl_rng_alloc(gsl_rng_taus2);
        gsl_rng_set(g, 20261129 + (unsigned long)i);
        static const char *meshes2d[] = {"1x4", "2x2", "4x1", "2x4", "4x2", "1x8"};
        static const char *strat[] = {"usp", "loongtrain", "dualring"};
        const char *mesh = meshes2d[gsl_rng_uniform_int(g, 6)], *st = strat[gsl_rng_uniform_int(g, 3)];
        int ph = mesh[0] - '0', ps = mesh[2] - '0', w = 1 << gsl_rng_uniform_int(g, 3);
        while (ps % w)
            w /= 2;
        char extra[128];
        snprintf(extra, sizeof extra, "--placement %s --seed %lu",
                 gsl_rng_uniform_int(g, 2) ? "head-first" : "context-first", gsl_rng_uniform_int(g, 1000) + 1);
        if (!strcmp(st, "loongtrain")) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --window %d", w);
        gsl_rng_free(g);
        if (sampled(i, 3))
            add_case(ph * ps == 8 ? t8 : t4, NULL, "--model tiny --seq 1K --mesh %s --strategy %s %s --scope attn",
                     mesh, st, extra);
    }
}

/* Packed documents: every partition on meshes 1x4, 2x2 and 2x4 with three
 * layouts of S = 1K; a chunk is 128 or 256 tokens and a shard 256 or 512:
 * a 5-token document shorter than a chunk and a 700-token one longer than a
 * shard; ten equal documents; documents of 1, 2 and 3 tokens. The
 * partitions alternate the single ring, the all-gather, the double ring and
 * (two-part partitions) the dual ring. */
static const char *doc_layouts[] = {"5,300,700", "100,100,100,100,100,100,100,100,100,100", "1,2,3,1000"};
static const char *doc_partitions[] = {"contiguous", "zigzag", "doc-contiguous", "doc-zigzag", "balanced"};
static const struct {
    const char *mesh;
    int np;
} doc_meshes[] = {{"1x4", 4}, {"2x2", 4}, {"2x4", 8}};

static void document_rows(case_table *t4, case_table *t8)
{
    static const char *rings[] = {"--strategy usp", "--strategy allgather", "--strategy loongtrain --window 2",
                                  "--strategy dualring"};
    for (int li = 0; li < 3; li++) /* layout outermost: one reference per layout */
        for (int pi = 0; pi < 5; pi++)
            for (int mi = 0; mi < 3; mi++) {
                bool two = pi == 1 || pi >= 3;
                const char *ring = two ? rings[(li + mi) % 4] : rings[(li + mi) % 3];
                if (sampled(li + pi + mi, 6))
                    add_case(doc_meshes[mi].np == 8 ? t8 : t4, NULL,
                             "--model tiny --seq 1K --mesh %s %s --partition %s --docs %s --scope attn",
                             doc_meshes[mi].mesh, ring, doc_partitions[pi], doc_layouts[li]);
            }
}

/* Pipeline parallelism (tests/data/tiny4.model: 4 layers), each row's
 * weight gradients accumulated over its micro-batches (sample k's inputs
 * from row k S on) against the reference's sum over the samples: 1F1B on
 * 2 stages beside the double ring and the all-to-all, 4 stages of one
 * block (the middle ones send and receive), GPipe with ZeRO-0, gradient
 * accumulation alone (pp 1), interleaved 1F1B (v 2: the last stage sends
 * back to stage 0) alone and beside --tp-overlap and full recompute, and
 * interleaved with uneven stages (tests/data/tiny6.model, 6 layers,
 * --pp-first-layers 2: stage 0's chunks hold layers 0 and 3, stage 1's
 * 1-2 and 4-5), and with the embedding's and the loss's slots (v 3 over
 * tiny4's 4 layers and 2 slots: stage 0's first chunk holds the embedding
 * alone, stage 1's last the LM head alone, as Llama 3 405B's did);
 * LoongTrain's Selective Checkpoint++ beside 1F1B, Megatron's block method
 * (the first block of each stage re-run) beside GPipe.
 * `want` is the run's description. */
static void pipeline_step_rows(case_table *t4, case_table *t8)
{
    static const struct {
        const char *args, *want;
        int np;
    } rows[] = {
        {"--mesh 2x2 --strategy loongtrain --pp 2 --micro-batches 2 --recompute sc++", "pp 2 1f1b m 2", 8},
        {"--mesh 1x1 --strategy ulysses --pp 4 --micro-batches 4 --zero 0", "pp 4 1f1b m 4", 4},
        {"--mesh 1x2 --strategy usp --pp 2 --micro-batches 3 --schedule gpipe --zero 0 --recompute full "
         "--recompute-method block --recompute-num-layers 1",
         "pp 2 gpipe m 3", 4},
        {"--mesh 2x2 --strategy usp --micro-batches 2", "mesh 2x2 m 2 usp", 4},
        {"--mesh 1x2 --strategy zigzag --pp 2 --micro-batches 2 --schedule interleaved --vpp 2",
         "pp 2 interleaved v2 m 2", 4},
        {"--tp 2 --mesh 1x2 --strategy usp --pp 2 --micro-batches 4 --schedule interleaved --vpp 2 --tp-overlap on "
         "--recompute full",
         "tp 2 sp overlapped pp 2 interleaved v2 m 4", 8},
        {"--mesh 1x2 --strategy zigzag --pp 2 --micro-batches 2 --schedule interleaved --vpp 2 --pp-first-layers 2",
         "pp 2 interleaved v2 m 2", 4},
        {"--mesh 1x2 --strategy zigzag --pp 2 --micro-batches 2 --schedule interleaved --vpp 3 --pp-embedding-slot on "
         "--pp-loss-slot on",
         "pp 2 interleaved v3 m 2", 4},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (sampled((int)i, 2)) /* sanitized: 1F1B beside CP, GPipe, interleaved */
            add_case(rows[i].np == 4 ? t4 : t8, rows[i].want,
                     "--model " LOONG_SRCDIR "/tests/data/%s.model --seq 512 %s --scope step",
                     strstr(rows[i].args, "--pp-first-layers") ? "tiny6" : "tiny4", rows[i].args);
}

/* The whole step under documents: GEMMs, all-to-alls, the dK/dV ring. */
static void document_step_rows(case_table *t4)
{
    static const char *cases[] = {
        "--mesh 2x2 --strategy loongtrain --partition balanced --docs 5,300,200",
        "--mesh 2x2 --strategy dualring --partition doc-zigzag --docs 1,2,3,500",
        "--mesh 2x2 --strategy allgather --zero 3 --recompute full --docs 5,300,200",
    };
    for (int i = 0; i < 3; i++)
        add_case(t4, "dW_lm_head", "--model tiny --seq 512 %s --scope step", cases[i]);
}

/* Mixtures of experts (exec_ep.c) beside 2-D context parallelism, every
 * expert's gradient, the router's and the shared experts' checked: EP 2
 * and 4 inside meshes 2x2 and 2x4 (the double, single and dual rings),
 * EP 1 under Ulysses; balanced and zipf routing; tiny-moe4's dense first
 * block and shared expert; tiny-moe6's experts every other block past
 * a dense first one (moe_layer_freq 2), over two stages; ZeRO 0-2, full
 * recompute, and two pipeline stages of two micro-batches. And multi-head latent attention
 * (exec_mla.c, tests/data/tiny-mla.model: V 32 wide beside Q and K of
 * 48, a rope part shared by the heads) with EP 2 and 4 beside meshes 2x2
 * (the double ring) and 2x4 (the all-gather, its K and V gathered apart),
 * and over two stages with full recompute; each of its four projections
 * checked. */
static void moe_step_rows(case_table *t4, case_table *t8)
{
    static const struct {
        const char *model, *args, *want;
        int np;
    } rows[] = {
        {"tiny-moe", "--mesh 2x2 --strategy loongtrain --ep 2 --zero 0", "dW_expert7", 4},
        {LOONG_SRCDIR "/tests/data/tiny-moe4.model", "--mesh 2x2 --strategy usp --ep 4 --zero 2 --recompute full",
         "dW_shared_down", 4},
        {LOONG_SRCDIR "/tests/data/tiny-moe4.model",
         "--mesh 1x2 --pp 2 --micro-batches 2 --strategy zigzag --ep 2 --zero 1 --routing zipf:1.2", "dW_expert7", 4},
        {"tiny-moe", "--mesh 2x4 --strategy dualring --ep 4 --routing zipf:1", "ep 4 zipf:1", 8},
        {LOONG_SRCDIR "/tests/data/tiny-moe6.model", "--mesh 1x2 --pp 2 --micro-batches 2 --strategy zigzag --ep 2",
         "dW_expert7", 4},
        {"tiny-moe", "--mesh 4x1 --strategy ulysses", "dW_router", 4},
        {LOONG_SRCDIR "/tests/data/tiny-mla.model", "--mesh 2x2 --strategy loongtrain --ep 2", "dW_kv_up", 4},
        {LOONG_SRCDIR "/tests/data/tiny-mla.model", "--mesh 2x4 --strategy allgather --ep 4 --zero 2", "dW_q_down", 8},
        {LOONG_SRCDIR "/tests/data/tiny-mla.model",
         "--mesh 1x2 --pp 2 --micro-batches 2 --strategy ring --ep 2 --recompute full", "dW_kv_down", 4},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (sampled((int)i, 2))
            add_case(rows[i].np == 4 ? t4 : t8, rows[i].want, "--model %s --seq 512 %s --scope step", rows[i].model,
                     rows[i].args);
}

/* The numerical tables: _i = 0 runs the rows of 4 ranks, 1 those of 8.
 * Each row equals the float64 single-rank reference (exit 0, no FAILED). */
START_TEST(numerics_match_reference)
{
    static case_table t[2];
    memset(t, 0, sizeof t);
    t[0].np = 4;
    t[1].np = 8;
    attn_rows(&t[1]);
    attn_fwd_rows(&t[1]);
    step_rows(&t[0]);
    tp_step_rows(&t[0], &t[1]);
    random_rows(&t[0], &t[1]);
    document_rows(&t[0], &t[1]);
    document_step_rows(&t[0]);
    pipeline_step_rows(&t[0], &t[1]);
    moe_step_rows(&t[0], &t[1]);
    /* 504 = 8 * 63: a multiple of 2*P_s = 8 with odd chunks of 63 tokens */
    add_case(&t[0], NULL, "--model tiny --seq 504 --mesh 4 --strategy zigzag --scope attn");
    batch_result b = run_table(&t[_i], "--check " FAST);
    expect_table_ok(&t[_i], &b);
    batch_free(&b);
}
END_TEST

/* A mutation --check must catch: the executor (alone) routes every
 * choice to the next expert, so every expert's gradient is off. */
START_TEST(moe_routing_mutation_caught)
{
    run_result r = run_cmd("LOONG_EXEC_MUTATE=route " MPIRUN " --model tiny-moe --seq 512 --mesh 2x2 --strategy usp "
                           "--ep 2 --scope step --check " FAST,
                           4);
    ck_assert_msg(r.status == 1, "exit %d\n%s\n%s", r.status, r.out, r.err);
    for (int e = 0; e < 8; e++) {
        char name[32];
        snprintf(name, sizeof name, "dW_expert%d", e);
        const char *at = strstr(r.out, name), *nl = at ? strchr(at, '\n') : NULL;
        ck_assert_msg(at && nl, "no %s row\n%s", name, r.out);
        ck_assert_msg(strstr(at, "FAILED") && strstr(at, "FAILED") < nl, "%s passed\n%s", name, r.out);
    }
}
END_TEST

START_TEST(sequence_not_divisible)
{
    /* (seq 504, odd chunks, is a row of the 4-rank numerical table) */
    run_result r = run_cmd(MPIRUN " --model tiny --seq 1004 --mesh 4 --strategy zigzag --scope attn " FAST, 4);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "2*P_s"));
}
END_TEST

/* ---- the measured trace ---- */

START_TEST(trace_invariants)
{
    char path[] = "/tmp/loong-exec-trace-XXXXXX";
    close(mkstemp(path));
    run_result r = run_cmd(MPIRUN " --model tiny --seq 2K --mesh 2x2 --strategy loongtrain --window 2 --scope attn "
                                  "--iters 3 --warmup 1 --trace-iter fastest --trace %s",
                           4, path);
    ck_assert_msg(r.status == 0, "%s", r.err);
    /* --trace-iter fastest: the traced iteration is the fastest timed one */
    double fastest, step;
    int fi, traced, it, timed = 0;
    const char *f = strstr(r.out, "# fastest step "), *tr = strstr(r.out, "# trace: iteration ");
    ck_assert_msg(f && sscanf(f, "# fastest step %lf ms (iteration %d)", &fastest, &fi) == 2, "%s", r.out);
    ck_assert_msg(tr && sscanf(tr, "# trace: iteration %d", &traced) == 1 && traced == fi, "%s", r.out);
    const char *l = strstr(r.out, "#  iter"), *end = strstr(r.out, "# median step");
    ck_assert_msg(l && end, "%s", r.out);
    for (l = strchr(l, '\n'); l && l < end; l = strchr(l + 1, '\n')) /* the iteration table */
        if (sscanf(l + 1, " %d %lf", &it, &step) == 2 && it >= 1) {  /* iteration 0 is the warm-up */
            ck_assert_msg(step >= fastest - 5e-4, "iteration %d took %.3f ms, under the fastest %.3f", it, step,
                          fastest);
            timed++;
        }
    ck_assert_msg(timed >= 3, "%d timed iterations in\n%s", timed, r.out);
    trace t;
    char err[LOONG_ERRLEN];
    ck_assert_msg(trace_read(path, &t, err) == 0, "%s", err);
    ck_assert_str_eq(t.backend, "exec-cpu");
    dag *g = tbuild(&t.cfg);
    ck_assert_uint_eq(t.n, dag_ntasks(g));
    const double eps = 1.0; /* µs: stamps are taken around the ops, the events set after */
    for (size_t i = 0; i < t.n; i++) {
        const trace_ev *e = &t.ev[i];
        const dag_task *k = dag_task_get(g, e->id);
        ck_assert(e->ts >= -eps && e->dur >= 0);
        ck_assert_int_eq(e->rank, k->rank);
        const uint32_t *d = dag_deps(g, k);
        for (uint16_t j = 0; j < k->ndeps; j++) {
            const trace_ev *p = &t.ev[d[j]];
            ck_assert_msg(e->ts + eps >= p->ts + p->dur, "task %u starts at %.3f before its dep %u ends at %.3f", e->id,
                          e->ts, d[j], p->ts + p->dur);
        }
        /* stream order: a task starts after its stream predecessor ends,
         * except the recv issued in one group with its send */
        if (i > 0 && !(k->flags & DAG_F_GROUPED)) {
            uint32_t n;
            const uint32_t *ids = dag_stream_tasks(g, k->rank, k->stream, &n);
            for (uint32_t j = 1; j < n; j++)
                if (ids[j] == k->id) {
                    const trace_ev *p = &t.ev[ids[j - 1]];
                    ck_assert(e->ts + eps >= p->ts + p->dur);
                }
        }
    }
    dag_free(g);
    trace_free(&t);
    unlink(path);
}
END_TEST

START_TEST(dump_npy)
{
    char dir[] = "/tmp/loong-dump-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    run_result r =
        run_cmd(MPIRUN " --model tiny --seq 1K --mesh 2x2 --strategy usp --scope attn --dump %s " FAST, 4, dir);
    ck_assert_msg(r.status == 0, "%s", r.err);
    static const char *names[] = {"q", "k", "v", "o", "do", "dq", "dk", "dv"};
    for (int i = 0; i < 8; i++) {
        char p[256], hdr[128];
        snprintf(p, sizeof p, "%s/%s.npy", dir, names[i]);
        FILE *f = fopen(p, "rb");
        ck_assert_msg(f != NULL, "missing %s", p);
        size_t n = fread(hdr, 1, sizeof hdr - 1, f);
        hdr[n] = '\0';
        ck_assert(!memcmp(hdr, "\x93NUMPY\x01\x00", 8));
        unsigned hlen = (unsigned char)hdr[8] | (unsigned char)hdr[9] << 8;
        ck_assert_uint_eq((10 + hlen) % 64, 0);
        int heads = names[i][strlen(names[i]) - 1] == 'k' || names[i][strlen(names[i]) - 1] == 'v' ? 2 : 8;
        char shape[64];
        snprintf(shape, sizeof shape, "'shape': (1024, %d, 32,)", heads);
        ck_assert_msg(strstr(hdr + 10, shape) != NULL, "%s header: %s", p, hdr + 10);
        fseek(f, 0, SEEK_END);
        ck_assert_int_eq(ftell(f), (long)(10 + hlen + 1024 * heads * 32 * 4));
        fclose(f);
    }
    run_cmd("rm -rf %s", dir);
}
END_TEST

/* ---- faults and bad input ---- */

START_TEST(rank_dies)
{
    config c = tcfg("tiny", 2048, "loongtrain", 2, 2, 2, SCOPE_ATTN);
    dag *g = tbuild(&c);
    uint32_t n;
    const uint32_t *ids = dag_stream_tasks(g, 1, STREAM_COMP, &n);
    uint32_t victim = ids[n / 2];
    dag_free(g);
    time_t t0 = time(NULL);
    run_result r = run_cmd(MPIRUN " --model tiny --seq 2K --mesh 2x2 --strategy loongtrain --window 2 --scope attn "
                                  "--fail-rank 1 --fail-at-task %u --timeout 20",
                           4, victim);
    ck_assert_int_ne(r.status, 0);
    ck_assert_int_le(time(NULL) - t0, 30);
    ck_assert_msg(strstr(r.err, "rank 1") != NULL, "%s", r.err);
}
END_TEST

/* ---- the fault matrix ----
 * One rank fails at each point of a run that waits on its peers: killed
 * (SIGKILL, a real kill -9: it prints nothing more and cleans nothing up)
 * or stopped (SIGSTOP: alive and silent, the watchdog's case). Every case
 * must end every rank with a non-zero status within 30 s, name the failed
 * rank in a line other than the injection's own (as mpirun or a surviving
 * rank reports a kill from outside), and leave no output: no trace, no
 * --dump directory, no temporary, and a trace that was there before
 * unchanged. */

typedef struct fault_case {
    const char *name;
    int rank;
    const char *flags; /* "%u": a ring send task of the rank, mid-schedule */
} fault_case;

static const fault_case fault_cases[] = {
    {"kill -9 at start-up", 1, "--fail-at start --fail-signal kill"},
    {"kill -9 mid-ring", 1, "--fail-at task:%u --fail-signal kill"},
    {"kill -9 in the --check gather", 1, "--fail-at check --fail-signal kill"},
    {"kill -9 in the trace write", 0, "--fail-at trace --fail-signal kill"},
    {"SIGSTOP mid-ring", 1, "--fail-at task:%u --fail-signal stop --timeout 3"},
    {"SIGSTOP at start-up", 3, "--fail-at start --fail-signal stop --timeout 3"},
    {"SIGSTOP in the --check gather", 0, "--fail-at check --fail-signal stop --timeout 3"},
};
#define NFAULT ((int)(sizeof fault_cases / sizeof fault_cases[0]))
#define FAULT_RUN                                                                                                      \
    "--model tiny --seq 1K --mesh 2x2 --strategy loongtrain --window 2 --scope attn --check --iters 1 --warmup 0 "
static const char old_trace[] = "{\"an older trace\": true}\n";

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether err names rank r ("rank R", R not followed by a digit) on a line
 * other than the injected fault's own. */
static bool names_rank(const char *err, int r)
{
    char want[32];
    int n = snprintf(want, sizeof want, "rank %d", r);
    for (const char *line = err; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        if (!strstr(buf, "injected failure"))
            for (const char *p = strstr(buf, want); p; p = strstr(p + 1, want))
                if (!isdigit((unsigned char)p[n])) return true;
        line += len + (end ? 1 : 0);
    }
    return false;
}

/* The names in dir, space-separated ("" when empty). */
static void dir_entries(const char *dir, char *out, size_t cap)
{
    out[0] = '\0';
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            snprintf(out + strlen(out), cap - strlen(out), "%s%s", out[0] ? " " : "", e->d_name);
    closedir(d);
}

/* The processes whose command line holds tag (this test's temporary
 * directory: mpirun and its ranks), their pids into pids; with `kill_them`
 * each is killed. Returns how many. */
static int scan_leftovers(const char *tag, char *pids, size_t cap, bool kill_them)
{
    int found = 0;
    pids[0] = '\0';
    DIR *d = opendir("/proc");
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) {
        int pid = atoi(e->d_name);
        if (pid <= 0 || pid == (int)getpid()) continue;
        char path[64], cmd[4096];
        snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t n = fread(cmd, 1, sizeof cmd - 1, f);
        fclose(f);
        for (size_t i = 0; i < n; i++)
            if (!cmd[i]) cmd[i] = ' ';
        cmd[n] = '\0';
        if (!strstr(cmd, tag)) continue;
        if (kill_them) kill(pid, SIGKILL);
        snprintf(pids + strlen(pids), cap - strlen(pids), " %d", pid);
        found++;
    }
    closedir(d);
    return found;
}

/* Kill (by pid) every process whose command line still holds tag 2 s
 * after mpirun returned, and say how many there were: a rank that mpirun
 * killed is gone within that grace, however loaded the machine (under
 * the sanitizers' suite a stopped rank, killed, was once still listed at
 * the first look), and one left running is not. */
static int kill_leftovers(const char *tag, char *pids, size_t cap)
{
    for (int tries = 0; tries < 20 && scan_leftovers(tag, pids, cap, false); tries++)
        usleep(100000);
    return scan_leftovers(tag, pids, cap, true);
}

/* _i / 2: the case; _i % 2: 0 with new outputs, 1 over an existing trace. */
START_TEST(fault_matrix)
{
    const fault_case *fc = &fault_cases[_i / 2];
    bool old = _i % 2;
    config c = tcfg("tiny", 1024, "loongtrain", 2, 2, 2, SCOPE_ATTN);
    dag *g = tbuild(&c);
    uint32_t n, send = UINT32_MAX;
    const uint32_t *ids = dag_stream_tasks(g, fc->rank, STREAM_RING, &n);
    for (uint32_t k = n / 2; k < n && send == UINT32_MAX; k++)
        if (dag_task_get(g, ids[k])->kind == TASK_SEND) send = ids[k];
    ck_assert_uint_ne(send, UINT32_MAX);
    dag_free(g);
    char dir[] = "/tmp/loong-fault-XXXXXX", trace[64], flags[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(trace, sizeof trace, "%s/t.json", dir);
    if (old) {
        FILE *f = fopen(trace, "w");
        fputs(old_trace, f);
        fclose(f);
    }
    snprintf(flags, sizeof flags, fc->flags, send);
    double t0 = mono_now();
    run_result r = run_cmd(MPIRUN_GUARDED " " FAULT_RUN "--trace %s --dump %s/dump --fail-rank %d %s", 4, trace, dir,
                           fc->rank, flags);
    double secs = mono_now() - t0;
    fprintf(stderr, "# fault matrix: %-32s %-14s exit %3d  %5.1f s\n", fc->name, old ? "(older trace)" : "", r.status,
            secs);
    char left[256];
    int lingering = kill_leftovers(dir, left, sizeof left);
    ck_assert_msg(lingering == 0, "%s: processes left running (killed now):%s", fc->name, left);
    ck_assert_msg(r.status != 0, "%s: exit 0\n%s", fc->name, r.err);
    ck_assert_msg(secs <= 30, "%s: took %.1f s", fc->name, secs);
    ck_assert_msg(names_rank(r.err, fc->rank), "%s: stderr does not name rank %d:\n%s", fc->name, fc->rank, r.err);
    char entries[512];
    dir_entries(dir, entries, sizeof entries);
    ck_assert_msg(!strcmp(entries, old ? "t.json" : ""), "%s: left '%s' in %s", fc->name, entries, dir);
    if (old) {
        char buf[256] = "";
        FILE *f = fopen(trace, "r");
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        ck_assert_msg(got == strlen(old_trace) && !memcmp(buf, old_trace, got), "%s: the older trace changed: %s",
                      fc->name, buf);
        unlink(trace);
    }
    rmdir(dir);
}
END_TEST

START_TEST(config_mismatch)
{
    run_result r = run_cmd("ASAN_OPTIONS=detect_leaks=0 " MPIRUN_BIN " --oversubscribe -np 1 " LOONG_BIN
                           " exec --model tiny --seq 1K --mesh 2 --strategy zigzag --scope attn : -np 1 " LOONG_BIN
                           " exec --model tiny --seq 2K --mesh 2 --strategy zigzag --scope attn");
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "rank 1 has a different configuration") != NULL, "%s", r.err);
}
END_TEST

/* Bad input that every rank sees alike, as rows of one 2-rank table: each
 * row exits 2 with its one line from loong (rank 0's, after its marker on
 * stderr) naming the problem, and leaves no --trace file. */
typedef struct bad_row {
    char flags[128], want[96];
} bad_row;

static int bad_rows(bad_row *r, const char *tracedir)
{
    static const struct {
        const char *flags, *want;
    } fixed[] = {
        /* the flags of fault injection and of the watchdog */
        {"--timeout nan", "--timeout 'nan' is not a number of seconds"},
        {"--timeout 0.5", "--timeout '0.5' is not a number of seconds"},
        {"--fail-rank -1 --fail-at start", "--fail-rank '-1' is not a rank number (0..P-1)"},
        {"--iters x", "--iters 'x' is not a positive count"},
        {"--fail-rank 0 --fail-at check", "--fail-at check fires in the --check gather"},
        {"--fail-rank 0 --fail-at trace", "add --trace FILE"},
        {"--fail-rank 0 --fail-at never", "--fail-at 'never' is not start, task:T, check or trace"},
        {"--fail-rank 0 --fail-at start --fail-signal term", "--fail-signal 'term' is not exit, kill or stop"},
        {"--fail-signal kill", "--fail-signal needs --fail-rank"},
        {"--fail-rank 0 --fail-at start --fail-at-task 1", "give one of them"},
        /* configurations and options the executor refuses */
        {"--seq 0", "loong exec: error:"},
        {"--strategy magic", "loong exec: error:"},
        {"--batch 2", "use --batch 1"},
        {"--dtype bf16", "use --dtype fp32"},
        {"--iters 0", "--iters must be positive"},
        {"--trace-iter min", "--trace-iter 'min' is not median or fastest"},
        {"--fail-rank 1", "go together"},
        {"--mesh 1x2 --strategy allgather --kv-stride 1", "leave out --kv-stride"},
        {"--mesh 2x2 --strategy usp", "use mpirun -np 4"},
        {"--tp 2 --scope step", "needs tp x P_h x P_s = 4"},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++, n++) {
        bool traced = i >= 10; /* the fault rows must not write one: "--fail-at trace" needs --trace */
        snprintf(r[n].flags, sizeof r[n].flags, "%s%s%s%s", fixed[i].flags, traced ? " --trace " : "",
                 traced ? tracedir : "", traced ? "/t.json" : "");
        snprintf(r[n].want, sizeof r[n].want, "%s", fixed[i].want);
    }
    /* a fault that would never fire is refused, naming the task's owner */
    config c = tcfg("tiny", 1024, "zigzag", 1, 2, 2, SCOPE_ATTN);
    dag *g = tbuild(&c);
    uint32_t nt;
    const uint32_t *ids = dag_stream_tasks(g, 1, STREAM_COMP, &nt);
    uint32_t of_rank1 = ids[0], total = dag_ntasks(g);
    dag_free(g);
    snprintf(r[n].flags, sizeof r[n].flags, "--fail-rank 0 --fail-at-task %u", of_rank1);
    snprintf(r[n++].want, sizeof r[n].want, "runs on rank 1, not on --fail-rank 0");
    snprintf(r[n].flags, sizeof r[n].flags, "--fail-rank 7 --fail-at-task 0");
    snprintf(r[n++].want, sizeof r[n].want, "--fail-rank 7 is not a rank");
    snprintf(r[n].flags, sizeof r[n].flags, "--fail-rank 0 --fail-at task:%u", total);
    snprintf(r[n++].want, sizeof r[n].want, "is not a task of this configuration");
    return n;
}

START_TEST(bad_input_table)
{
    char dir[] = "/tmp/loong-exec-bad-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    bad_row rows[32];
    int n = bad_rows(rows, dir);
    static case_table t;
    memset(&t, 0, sizeof t);
    t.np = 2;
    for (int i = 0; i < n; i++)
        add_case(&t, NULL, "--model tiny --seq 1K --mesh 2 --strategy zigzag --scope attn %s", rows[i].flags);
    /* and a row that runs: a decimal --timeout is accepted */
    add_case(&t, NULL, "--model tiny --seq 1K --mesh 2 --strategy zigzag --scope attn --timeout 2.5");
    batch_result b = run_table(&t, FAST);
    ck_assert_msg(b.status == 2, "exit %d (the worst row's, 2)\n%s", b.status, b.err);
    for (int k = 0; k < n; k++) {
        char *sec = case_section(b.out, k + 1, t.n), *esec = case_section(b.err, k + 1, t.n);
        ck_assert_msg(strstr(sec, "status 2\n") != NULL, "%s: not exit 2\n%s", rows[k].flags, sec);
        ck_assert_msg(strstr(esec, rows[k].want) != NULL, "%s: no '%s' in\n%s", rows[k].flags, rows[k].want, esec);
        int lines = 0; /* loong's own */
        for (const char *p = strstr(esec, "loong exec:"); p; p = strstr(p + 1, "loong exec:"))
            lines++;
        ck_assert_msg(lines == 1, "%s: not one line:\n%s", rows[k].flags, esec);
        free(sec);
        free(esec);
    }
    char *last = case_section(b.out, t.n, t.n);
    ck_assert_msg(strstr(last, "status 0\n") != NULL, "--timeout 2.5: not exit 0\n%s\n%s", last, b.err);
    free(last);
    char p[128];
    snprintf(p, sizeof p, "%s/t.json", dir);
    ck_assert_msg(access(p, F_OK) != 0, "a refused row left %s", p);
    batch_free(&b);
    run_cmd("rm -rf %s", dir);
}
END_TEST

/* --device cuda stops before MPI starts (no CUDA device in this build, or
 * no GPU): one line, exit 2, no trace. */
START_TEST(device_cuda_refused)
{
    char dir[] = "/tmp/loong-exec-bad-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    run_result r = run_cmd(MPIRUN " --model tiny --seq 1K --mesh 2 --strategy zigzag --scope attn --device cuda "
                                  "--trace %s/t.json",
                           2, dir);
    ck_assert_msg(r.status == 2, "exit %d", r.status);
    ck_assert_msg(strstr(r.err, "loong exec: error: --device cuda") != NULL, "%s", r.err);
    char p[128];
    snprintf(p, sizeof p, "%s/t.json", dir);
    ck_assert(access(p, F_OK) != 0);
    run_cmd("rm -rf %s", dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("exec");
    TCase *tc = tcase_create("numerics");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, numerics_match_reference, 0, 2);
    tcase_add_test(tc, sequence_not_divisible);
    tcase_add_test(tc, moe_routing_mutation_caught);
    suite_add_tcase(s, tc);
    tc = tcase_create("outputs");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, trace_invariants);
    tcase_add_test(tc, dump_npy);
    suite_add_tcase(s, tc);
    tc = tcase_create("faults");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, rank_dies);
    tcase_add_test(tc, config_mismatch);
    tcase_add_test(tc, bad_input_table);
    tcase_add_test(tc, device_cuda_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("fault-matrix");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, fault_matrix, 0, 2 * NFAULT);
    suite_add_tcase(s, tc);
    return check_run(s);
}

/* loong dag from the outside: help, formats, and bad input (exit 2, one
 * line on stderr, no output file). */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autoconf.h"
#include "cli_util.h"
#include "check_run.h"
#include "check_dagjson.h"

#define LOONG LOONG_BIN

START_TEST(help_and_version)
{
    run_result r = run_cmd(LOONG " --help");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "dag"));
    r = run_cmd(LOONG " dag --help");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "--strategy"));
    r = run_cmd(LOONG " --version");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "loong "));
    r = run_cmd(LOONG);
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
}
END_TEST

/* NCCL's algorithm and protocol are configuration knobs of every command
 * (they were parsed by loong coll only, and silently ignored elsewhere). */
/* A process that does not run the CUDA device loads none of its libraries:
 * they live in the loong-cuda.so plug-in, loaded only for --device cuda
 * (exec/plugin.h). Checked both on what the executable links (ldd) and on
 * what the dynamic loader loads while it runs (LD_DEBUG=libs, which names
 * every library a process maps, dlopen'ed ones included); in a build with
 * the CUDA device, --device cuda must load the runtime (the plug-in is
 * really used), whether or not a GPU is there. */
START_TEST(no_cuda_libraries_linked)
{
    run_result r = run_cmd("ldd " LOONG_BIN);
    ck_assert_int_eq(r.status, 0);
    static const char *libs[] = {"libcudart", "libnccl", "libcublas"};
    for (int i = 0; i < 3; i++)
        ck_assert_msg(strstr(r.out, libs[i]) == NULL, "loong links %s:\n%s", libs[i], r.out);
    r = run_cmd("LD_DEBUG=libs " LOONG_BIN
                " dag --help 2>&1 >/dev/null | grep -cE 'calling init: .*(libcudart|libnccl|libcublas)'");
    ck_assert_msg(!strcmp(r.out, "0\n"), "loong dag --help loads CUDA libraries: %s", r.out);
    r = run_cmd("LD_DEBUG=libs " LOONG_BIN " dag --help 2>&1 >/dev/null | grep -c 'calling init: .*libc.so'");
    ck_assert_msg(strcmp(r.out, "0\n"), "LD_DEBUG=libs names no library here: the check above proves nothing");
#ifdef HAVE_CUDA
    r = run_cmd("LD_DEBUG=libs " LOONG_BIN " exec --device cuda --model tiny --seq 1K --mesh 1 --strategy ring 2>&1 "
                "| grep -c 'calling init: .*libcudart'");
    ck_assert_msg(strcmp(r.out, "0\n"), "--device cuda never loaded the CUDA runtime");
#endif
}
END_TEST

START_TEST(nccl_knobs_parsed)
{
    run_result r =
        run_cmd(LOONG " dag --model tiny --seq 4K --mesh 2 --nccl-algo tree --nccl-proto ll128 --format json");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "\"nccl_algo\":\"tree\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"nccl_proto\":\"ll128\""));
}
END_TEST

/* The pipeline knobs travel in the configuration JSON (left out at their
 * defaults, so pp 1 reads as before), tasks carry their micro-batch, and
 * fewer micro-batches than stages is allowed with a warning. */
START_TEST(pipeline_knobs_parsed)
{
    run_result r = run_cmd(LOONG " dag --seq 8K --mesh 2 --pp 4 --micro-batches 8 --schedule interleaved --vpp 2 "
                                 "--format json");
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "\"pp\":4"));
    ck_assert_ptr_nonnull(strstr(r.out, "\"micro_batches\":8"));
    ck_assert_ptr_nonnull(strstr(r.out, "\"schedule\":\"interleaved\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"vpp\":2"));
    ck_assert_ptr_nonnull(strstr(r.out, "\"mb\":0"));
    ck_assert_ptr_null(strstr(r.err, "warning"));
    r = run_cmd(LOONG " dag --seq 8K --mesh 2 --format json");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_null(strstr(r.out, "\"pp\""));
    ck_assert_ptr_null(strstr(r.out, "\"mb\""));
    r = run_cmd(LOONG " dag --seq 8K --mesh 2 --pp 4 --micro-batches 2 -o /dev/null");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.err, "warning: --micro-batches 2 < --pp 4"));
}
END_TEST

START_TEST(stats_table)
{
    run_result r = run_cmd(LOONG " dag --model tiny --seq 4K --mesh 2x4 --strategy zigzag --scope attn");
    ck_assert_int_eq(r.status, 2); /* zigzag is 1D: a 2x4 mesh is refused */
    r = run_cmd(LOONG " dag --model tiny --seq 4K --mesh 8 --strategy zigzag --scope attn");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "# rank"));
    ck_assert_ptr_nonnull(strstr(r.out, "max/min 1.0000"));
    r = run_cmd(LOONG " dag --model tiny --seq 4K --mesh 8 --strategy ring --scope attn");
    ck_assert_int_eq(r.status, 0);
    /* the last rank: 7 full 512 x 512 blocks and a diagonal; the first: the diagonal */
    char want[64];
    snprintf(want, sizeof want, "max/min %.4f", (7.0 * 512 * 512 + 512 * 513 / 2) / (512 * 513 / 2));
    ck_assert_ptr_nonnull(strstr(r.out, want));
}
END_TEST

START_TEST(json_schema)
{
    char path[] = "/tmp/loong-dag-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    run_result r = run_cmd(LOONG " dag --model tiny --seq 4K --mesh 2x4 --strategy loongtrain --window 2 "
                                 "--scope attn --format json -o %s",
                           path);
    ck_assert_int_eq(r.status, 0);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    ck_assert_msg(j != NULL, "%s", je.text);
    json_t *tasks = json_object_get(j, "tasks");
    ck_assert(json_is_object(json_object_get(j, "config")));
    ck_assert(json_object_get(json_object_get(j, "config"), "docs") == NULL); /* one document: no key */
    ck_assert(json_array_size(tasks) > 0);
    static const char *keys[] = {"id", "rank", "stream", "kind", "flops", "bytes", "peer", "group", "layer", "deps"};
    size_t i;
    json_t *t;
    json_array_foreach(tasks, i, t)
    {
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            ck_assert_msg(json_object_get(t, keys[k]) != NULL, "task %zu lacks %s", i, keys[k]);
        ck_assert_int_eq(json_integer_value(json_object_get(t, "id")), (json_int_t)i);
        const char *kind = json_string_value(json_object_get(t, "kind"));
        if (!strcmp(kind, "recv")) ck_assert_int_eq(json_integer_value(json_object_get(t, "bytes")), 0);
        if (!strcmp(kind, "send")) ck_assert(json_is_integer(json_object_get(t, "peer")));
        if (!strcmp(kind, "all_to_all")) ck_assert_int_eq(json_array_size(json_object_get(t, "group")), 2);
    }
    json_decref(j);
    unlink(path);
}
END_TEST

static const char *bad_inputs[] = {
    "--strategy magic",
    "--model gpt5",
    "--seq 0",
    "--seq -4K",
    "--seq lots",
    "--batch 0",
    "--seq 99999999999999999999",
    "--seq 2G --mesh 8x8",
    "--mesh 3x8",
    "--mesh 4x",
    "--model " LOONG_SRCDIR "/tests/data/malformed.model",
    "--format xml",
    "--window 3",
    "--kv-replication maybe",
    "--mesh 16x4 --kv-replication off",
    "--bogus-flag",
    "extra-argument",
    "--seq 4K --docs 0,5",
    "--seq 4K --docs 3K,2K",
    "--seq 4K --docs 1K,x",
    "--seq 4K --docs 1K --docs-file " LOONG_SRCDIR "/tests/data/empty.dist",
    "--seq 4K --docs-file /nonexistent/lengths",
    "--seq 4K --docs-file " LOONG_SRCDIR "/tests/data/empty.dist",
    "--seq 4K --doc-dist " LOONG_SRCDIR "/tests/data/negative.dist",
    "--seq 4K --doc-dist " LOONG_SRCDIR "/tests/data/malformed.dist",
    "--seq 4K --doc-dist " LOONG_SRCDIR "/tests/data/empty.dist",
    "--partition magic",
    "--mesh 2x4 --strategy dualring --partition doc-contiguous",
    "--model llama3-8b --mesh 2x4 --strategy allgather --kv-stride 3",
    "--mesh 2x4 --strategy usp --kv-stride 1",
    "--ring allgather --kv-stride 0x",
};

START_TEST(bad_input)
{
    char dir[] = "/tmp/loong-cli-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    run_result r = run_cmd(LOONG " dag %s -o %s/out.txt", bad_inputs[_i], dir);
    ck_assert_msg(r.status == 2, "'%s' exited %d", bad_inputs[_i], r.status);
    ck_assert_msg(count_lines(r.err) == 1, "'%s' printed: %s", bad_inputs[_i], r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "error"));
    char out[128];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    ck_assert_msg(access(out, F_OK) != 0, "'%s' left an output file", bad_inputs[_i]);
    run_cmd("rm -rf %s", dir);
}
END_TEST

/* Abbreviated long options are refused by every command, naming the
 * option as typed and the options it could have meant: getopt_long would
 * take an unambiguous prefix as the option (`--sequence 128K` set
 * --sequence-parallel). The same options typed in full are accepted
 * (the last column: an exact spelling, checked not to be refused as
 * unknown). */
static const struct {
    const char *cmd, *args, *typed, *meant, *exact;
} abbreviated[] = {
    {"dag", "--sequence 128K", "--sequence", "--seq or --sequence-parallel", "--sequence-parallel 2"},
    {"dag", "--sequence=2", "--sequence", "--seq or --sequence-parallel", "--sequence-parallel=2"},
    {"dag", "--mod tiny", "--mod", "--model", "--model tiny"},
    {"sim", "--plat dgx-h100-1n --model tiny", "--plat", "--platform", "--platform dgx-h100-1n"},
    {"plan", "--gpu 8", "--gpu", "--gpus-per-node, --gpus or --gpu-mem", "--gpus 8"},
    {"exec", "--check-", "--check-", "--check", "--check"},
    {"calibrate", "--nccl x.log --platform p.xml -o o", "--nccl", "--nccl-tests", "--nccl-tests"},
    {"topo", "--node 2", "--node", "--nodes or --nodes-per-leaf", "--nodes 2"},
    {"coll", "--plat x.xml", "--plat", "--platform", "--platform dgx-h100-1n"},
    {"compare", "--max-err 5 a.json b.json", "--max-err", "--max-error", "--max-error 5"},
};

START_TEST(abbreviations_refused)
{
    const char *cmd = abbreviated[_i].cmd;
#ifndef HAVE_SIMGRID
    if (!strcmp(cmd, "sim")) return;
#endif
#ifndef HAVE_MPI
    if (!strcmp(cmd, "exec")) return;
#endif
    /* exec starts MPI first, whose own allocations LeakSanitizer reports (as check_exec says) */
    const char *env = strcmp(cmd, "exec") ? "" : "ASAN_OPTIONS=detect_leaks=0 ";
    run_result r = run_cmd("%s" LOONG " %s %s", env, cmd, abbreviated[_i].args);
    ck_assert_msg(r.status == 2, "%s %s: exit %d", cmd, abbreviated[_i].args, r.status);
    ck_assert_msg(count_lines(r.err) == 1, "%s", r.err);
    char want[256];
    snprintf(want, sizeof want, "loong %s: error: unknown option '%s' (did you mean %s", cmd, abbreviated[_i].typed,
             abbreviated[_i].meant);
    ck_assert_msg(strstr(r.err, want) == r.err, "%s\nwanted: %s", r.err, want);
    r = run_cmd("%s" LOONG " %s %s --help", env, cmd, abbreviated[_i].exact); /* --help: parsed, then nothing run */
    ck_assert_msg(!strstr(r.err, "unknown option"), "%s %s: %s", cmd, abbreviated[_i].exact, r.err);
}
END_TEST

/* The DAG JSON's config records a layout: count, tokens, hash, lengths;
 * and a document list reads back from it. */
START_TEST(json_records_docs)
{
    char path[] = "/tmp/loong-dag-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    run_result r = run_cmd(LOONG " dag --model tiny --seq 4K --mesh 2x4 --strategy usp --partition balanced "
                                 "--docs 1K,100,2K --scope attn --format json -o %s",
                           path);
    ck_assert_msg(r.status == 0, "%s", r.err);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    ck_assert_msg(j != NULL, "%s", je.text);
    json_t *cfg = json_object_get(j, "config"), *docs = json_object_get(cfg, "docs");
    ck_assert_str_eq(json_string_value(json_object_get(cfg, "partition")), "balanced");
    ck_assert_int_eq(json_integer_value(json_object_get(docs, "count")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(docs, "tokens")), 3172);
    ck_assert_int_eq(json_array_size(json_object_get(docs, "lengths")), 3);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(docs, "lengths"), 1)), 100);
    ck_assert(json_is_string(json_object_get(docs, "hash")));
    json_decref(j);
    unlink(path);
}
END_TEST

/* Data files by name from anywhere: this build's loong finds the source
 * tree's topologies/ from /, a copy of it elsewhere does not, and the
 * message names the fixes. */
START_TEST(data_path_from_anywhere)
{
    run_result r = run_cmd("cd / && env -u LOONG_DATA_PATH %s topo --list", LOONG);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "the source tree's topologies/"));
    ck_assert_ptr_nonnull(strstr(r.out, "dgx-h100-1n.xml"));
    /* a table is its GPU kind's default only by name; another names how to use it */
    ck_assert_ptr_nonnull(strstr(r.out, "calibration table for --gpu b200 (its default)"));
    ck_assert_ptr_nonnull(strstr(r.out, "calibration table of b200 GPUs, not a default (--calib b200-simumax)"));
    r = run_cmd("cd / && env -u LOONG_DATA_PATH %s plan --platform dgx-h100-1n --model tiny --seq 16K --top 0 -o "
                "/dev/null",
                LOONG);
    ck_assert_msg(r.status == 0, "from /: %s", r.err);
    r = run_cmd("d=$(mktemp -d) && cp %s $d/loong && cd / && env -u LOONG_DATA_PATH $d/loong plan --platform "
                "dgx-h100-1n --model tiny --seq 16K --top 0; s=$?; rm -rf $d; exit $s",
                LOONG);
    ck_assert_msg(r.status == 2 && count_lines(r.err) == 1, "a copy: exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "LOONG_DATA_PATH"));
    ck_assert_ptr_nonnull(strstr(r.err, "make install"));
    ck_assert_ptr_null(strstr(r.err, "source tree"));
}
END_TEST

START_TEST(unwritable_output)
{
    run_result r = run_cmd(LOONG " dag --model tiny --seq 4K --mesh 8 --scope attn -o /nonexistent/dir/x.json");
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
}
END_TEST

/* loong check: a published run is plausible, a report above the peak is
 * not (exit 1), and a tokens/s report of the same step reads alike. The
 * ceiling is hardware FLOPs at the peak, so 1.01x the peak in TFLOP/s is
 * over it whatever the configuration. */
START_TEST(check_plausibility)
{
    const char *cfg =
        "--megatron-args " LOONG_SRCDIR "/tests/../experiments/tp-published/gpt-1.7b.megatron --platform " LOONG_SRCDIR
        "/topologies/a100-4n-8nic.xml";
    run_result r = run_cmd("%s check %s --measured-tflops 137", LOONG_BIN, cfg); /* Table 1's figure */
    ck_assert_msg(r.status == 0 && strstr(r.out, "\nplausible: "), "%d %s %s", r.status, r.out, r.err);
    r = run_cmd("%s check %s --measured-tflops %g", LOONG_BIN, cfg, 312 * 1.01);
    ck_assert_msg(r.status == 1 && strstr(r.out, "above the ceiling"), "%d %s", r.status, r.out);
    r = run_cmd("%s check %s --measured-tflops %g", LOONG_BIN, cfg, 312 * 0.99);
    ck_assert_msg(r.status == 0, "%d %s", r.status, r.out);
    /* the same step as tokens/s: 512 x 2048 tokens per step */
    double step;
    const char *m = strstr(r.out, "# measured: step ");
    ck_assert(m && sscanf(m, "# measured: step %lf", &step) == 1);
    r = run_cmd("%s check %s --measured-tokens-per-s %.17g", LOONG_BIN, cfg, 512.0 * 2048 / step);
    ck_assert_msg(r.status == 0 && strstr(r.out, "(99.0 % of the 312 TFLOP/s peak)"), "%s", r.out);
    /* FP8 GEMMs: the ceiling is the FP8 peak (H100: 1979 TFLOP/s dense), so
     * 1.5x the bf16 peak is possible and 1.06x the FP8 peak is not */
    const char *fp8 = "--model llama3-8b --seq 8K --mesh 8 --precision fp8-current --platform " LOONG_SRCDIR
                      "/topologies/dgx-h100-1n.xml";
    r = run_cmd("%s check %s --measured-tflops 1500", LOONG_BIN, fp8);
    ck_assert_msg(r.status == 0 && strstr(r.out, "(75.8 % of the 1979 TFLOP/s FP8 peak)"), "%d %s %s", r.status, r.out,
                  r.err);
    r = run_cmd("%s check %s --measured-tflops 2100", LOONG_BIN, fp8);
    ck_assert_msg(r.status == 1 && strstr(r.out, "above the ceiling"), "%d %s", r.status, r.out);
    static const char *bad[] = {"--measured-tflops 137 --measured-tokens-per-s 5", "", "--measured-tflops -3",
                                "--measured-tflops 1e9 --tp 3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = run_cmd("%s check %s %s", LOONG_BIN, cfg, bad[i]);
        ck_assert_msg(r.status == 2 && count_lines(r.err) == 1, "%s: %d %s", bad[i], r.status, r.err);
    }
}
END_TEST

/* Megatron-LM's arguments round-trip: dag --format megatron writes them,
 * --megatron-args reads them back, and the configuration is the same, knob
 * by knob (the JSON object config_hash hashes). A contradiction is one line
 * naming both arguments; a published launch reads with its unmodelled
 * arguments listed. Megatron-Core's default rank order (tp-cp-ep-dp-pp)
 * round-trips as itself, loong's head-first as --use-tp-pp-dp-mapping. */
START_TEST(megatron_round_trip)
{
    char model[] = "/tmp/loong-mg-XXXXXX", args[] = "/tmp/loong-mga-XXXXXX";
    int fd = mkstemp(model);
    ck_assert_int_ge(fd, 0);
    const char *m = "layers=8\nhidden=256\nheads=8\nkv_heads=2\nhead_dim=32\nffn=512\nvocab=1000\n"
                    "attention_bias=qkv\ntie_word_embeddings=true\n";
    ck_assert_int_eq(write(fd, m, strlen(m)), (ssize_t)strlen(m));
    close(fd);
    close(mkstemp(args));
    static const char *const configs[] = {
        "--tp 2 --mesh 2x2 --strategy usp --pp 2 --dp 2 --micro-batches 4 --schedule interleaved --vpp 2 "
        "--recompute selective --recompute-modules core_attn,mlp --zero 1 --dtype bf16",
        "--tp 2 --sequence-parallel off --mesh 4 --strategy zigzag --recompute full --recompute-method block "
        "--recompute-num-layers 2 --zero 0 --dtype fp32 --micro-batches 2",
        "--mesh 4 --strategy ulysses --dp 4 --gpus-per-node 4 --pp-first-layers 3 --pp 2 --micro-batches 8 --zero 1 "
        "--grad-reduce bf16",
        "--mesh 4 --strategy ulysses --dp 4 --gpus-per-node 4 --pp 2 --micro-batches 8 --placement tp-cp-ep-dp-pp",
    };
    char a[1024];
    /* the last two: a mixture of experts with MLA and a dense first block,
     * EP 8 over TP 2 x 4 context ranks at expert TP 1 with the shared
     * experts overlapped, and EP 8 across 2 replicas with the all-gather
     * dispatcher */
    static const char *const moe = "layers=4\nhidden=256\nheads=8\nkv_heads=8\nhead_dim=40\nffn=512\nvocab=1000\n"
                                   "num_experts=8\nnum_experts_per_tok=2\nmoe_intermediate_size=128\n"
                                   "shared_expert_intermediate_size=128\nfirst_k_dense_replace=1\nq_lora_rank=64\n"
                                   "kv_lora_rank=32\nqk_nope_head_dim=32\nqk_rope_head_dim=16\nv_head_dim=32\n";
    static const char *const moe_configs[] = {
        "--tp 2 --mesh 2x2 --strategy usp --ep 8 --expert-tp 1 --shared-expert-overlap on --dp 2 --pp 2 "
        "--micro-batches 2 --zero 1 --dtype bf16",
        "--tp 2 --mesh 2x2 --strategy usp --ep 8 --dispatcher allgather --dp 2 --zero 1 --dtype bf16"};
    size_t nc = sizeof configs / sizeof *configs;
    for (size_t i = 0; i < nc + 2; i++) {
        if (i == nc) {
            FILE *f = fopen(model, "w");
            ck_assert_ptr_nonnull(f);
            fputs(moe, f);
            fclose(f);
        }
        snprintf(a, sizeof a, "--model %s --seq 4K %s", model, i < nc ? configs[i] : moe_configs[i - nc]);
        run_result r = run_cmd(LOONG " dag %s --format megatron -o %s", a, args);
        ck_assert_msg(r.status == 0 && !r.err[0], "%s: %s", a, r.err);
        json_t *want = dag_config_json(LOONG, a);
        snprintf(a, sizeof a, "--megatron-args %s", args);
        json_t *got = dag_config_json(LOONG, a);
        char *w = json_dumps(want, JSON_SORT_KEYS), *g = json_dumps(got, JSON_SORT_KEYS);
        ck_assert_msg(json_equal(want, got), "round trip of %s:\n want %s\n got  %s", a, w, g);
        free(w), free(g);
        json_decref(want), json_decref(got);
    }
    /* experts interleaved with dense blocks go out as --moe-layer-freq's
     * pattern and come back as the same blocks (tests/data/tiny-moe6.model:
     * experts in blocks 2 and 4 of 6) */
    snprintf(a, sizeof a,
             "--model %s/tests/data/tiny-moe6.model --seq 4K --mesh 2x2 --strategy usp --ep 2 --pp 2 "
             "--micro-batches 2 --zero 1",
             LOONG_SRCDIR);
    run_result rr = run_cmd(LOONG " dag %s --format megatron -o %s", a, args);
    ck_assert_msg(rr.status == 0 && !rr.err[0], "%s: %s", a, rr.err);
    json_t *want = dag_config_json(LOONG, a);
    snprintf(a, sizeof a, "--megatron-args %s", args);
    json_t *got = dag_config_json(LOONG, a);
    ck_assert(json_equal(want, got));
    const json_t *mj = json_object_get(got, "model");
    ck_assert_int_eq(json_integer_value(json_object_get(mj, "moe_layer_freq")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(mj, "first_k_dense_replace")), 1);
    json_decref(want), json_decref(got);
    unlink(model), unlink(args);
    /* Megatron-Bridge #2667: a2a+p2p without its hierarchical sizes */
    run_result r = run_cmd("echo '--context-parallel-size 4 --cp-comm-type a2a+p2p' | " LOONG
                           " dag --megatron-args - --format stats");
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
    ck_assert_ptr_nonnull(strstr(r.err, "--cp-comm-type a2a+p2p needs --hierarchical-context-parallel-sizes"));
    /* Table 1's GPT-1.7B launch: the paper's shape, its unmodelled arguments listed */
    json_t *c = dag_config_json(LOONG, "--megatron-args " LOONG_SRCDIR "/experiments/tp-published/gpt-1.7b.megatron");
    json_t *mo = json_object_get(c, "model");
    ck_assert_int_eq(json_integer_value(json_object_get(mo, "hidden")), 2304);
    ck_assert_int_eq(json_integer_value(json_object_get(mo, "ffn")), 8 * 2304 / 3); /* GeLU 4h as SwiGLU */
    ck_assert_int_eq(json_integer_value(json_object_get(mo, "vocab")), 51200);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "dp")), 32);
    json_decref(c);
    r = run_cmd(LOONG " dag --megatron-args " LOONG_SRCDIR
                      "/experiments/tp-published/gpt-1.7b.megatron --format stats");
    ck_assert_ptr_nonnull(strstr(r.err, "read, not modelled: "));
    ck_assert_ptr_nonnull(strstr(r.err, "--lr,"));
}
END_TEST

/* torchtitan's job TOML round-trips: dag --format torchtitan writes it,
 * --torchtitan-toml reads it back, and the configuration is the same, knob
 * by knob. A published train config (tests/data/torchtitan, v0.2.2) reads
 * with its flavor's shape and its unmodelled sections listed; a
 * contradiction is one line naming both keys. */
/* The configuration of a torchtitan job: the 8B flavor, FSDP off
 * (data_parallel_shard_degree 1), then `extra` (TOML lines, the last in
 * [parallelism] unless it opens a section), at 4K tokens. */
static json_t *tt_8b_config(const char *extra)
{
    FILE *f = fopen("/tmp/loong-tt8b.toml", "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "[model]\nflavor = \"8B\"\n[parallelism]\ndata_parallel_shard_degree = 1\n%s\n", extra);
    fclose(f);
    json_t *c = dag_config_json(LOONG, "--torchtitan-toml /tmp/loong-tt8b.toml --seq 4K");
    unlink("/tmp/loong-tt8b.toml");
    return c;
}

START_TEST(torchtitan_round_trip)
{
    char toml[] = "/tmp/loong-tt-XXXXXX";
    close(mkstemp(toml));
    static const char *const configs[] = {
        "--mesh 4 --strategy zigzag --tp 2 --zero 3 --dp 2 --recompute none --grad-reduce bf16",
        "--mesh 1x4 --strategy allgather --zero 3 --recompute full --cross-entropy eager",
        "--mesh 2 --strategy zigzag --zero 2 --dp 2 --batch 2",
        "--mesh 1 --strategy ulysses --pp 2 --schedule interleaved --vpp 4 --micro-batches 4 --zero 0 "
        "--recompute full --recompute-method block --recompute-num-layers 2 --dtype fp32",
        "--tp 2 --tp-overlap on --pp 2 --pp-embedding-slot on --pp-loss-slot on --batch 2 --micro-batches 8 --mesh 1 "
        "--strategy ulysses --zero 0 --recompute sc++ --dtype fp32",
        "--mesh 1 --strategy ulysses --dp 4 --zero 0 --micro-batches 2 --recompute none",
        "--mesh 1x4 --strategy zigzag --zero 3 --recompute none --precision fp8-current", /* converters float8 */
    };
    char a[1024];
    for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) {
        snprintf(a, sizeof a, "--model llama3-8b --seq 4K %s", configs[i]);
        run_result r = run_cmd(LOONG " dag %s --format torchtitan -o %s", a, toml);
        ck_assert_msg(r.status == 0 && !r.err[0], "%s: %s", a, r.err);
        json_t *want = dag_config_json(LOONG, a);
        snprintf(a, sizeof a, "--torchtitan-toml %s", toml);
        json_t *got = dag_config_json(LOONG, a);
        char *w = json_dumps(want, JSON_SORT_KEYS), *g = json_dumps(got, JSON_SORT_KEYS);
        ck_assert_msg(json_equal(want, got), "round trip of %s:\n want %s\n got  %s", configs[i], w, g);
        free(w), free(g);
        json_decref(want), json_decref(got);
    }
    /* a knob torchtitan cannot say is a '#' line, and counted */
    run_result r = run_cmd(LOONG " dag --model llama3-8b --mesh 2x2 --strategy usp --zero 3 --format torchtitan");
    ck_assert_msg(r.status == 0 && strstr(r.out, "# not in torchtitan: head parallelism"), "%s", r.out);
    ck_assert_ptr_nonnull(strstr(r.err, "1 knob(s) of this configuration are not torchtitan's"));
    /* a mixture of experts is not dropped silently */
    r = run_cmd(LOONG " dag --model tiny-moe --mesh 2 --strategy ulysses --ep 2 --zero 2 --format torchtitan");
    ck_assert_msg(r.status == 0 && strstr(r.out, "# not in torchtitan: a mixture of experts (8 experts, --ep 2)"),
                  "%s", r.out);
    /* llama3_8b.toml as published: FSDP over --dp (its shard degree is -1),
     * per-op selective AC as sc++, its other sections listed */
    const char *tt = "--torchtitan-toml " LOONG_SRCDIR "/tests/data/torchtitan/llama3_8b.toml";
    snprintf(a, sizeof a, "%s --dp 64", tt);
    json_t *c = dag_config_json(LOONG, a);
    ck_assert_str_eq(json_string_value(json_object_get(c, "recompute")), "sc++");
    ck_assert_int_eq(json_integer_value(json_object_get(c, "dp")), 64);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "zero")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "seq")), 8192);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(c, "model"), "ffn")), 14336);
    json_decref(c);
    r = run_cmd(LOONG " dag %s --dp 64 --format stats", tt);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.err, "loong: --torchtitan-toml: read, not modelled: ") && strstr(r.err, "[optimizer]") &&
                      strstr(r.err, "training.steps") && count_lines(r.err) == 1,
                  "%s", r.err);
    /* selective every N-th layer: floor(32 / N) blocks re-run (the
     * default section is selective "2"); "1" is every block */
    static const struct {
        const char *ac;
        const char *method;
        int layers;
    } sel[] = {{"", "block", 16},
               {"[activation_checkpoint]\nselective_ac_option = \"5\"", "block", 6},
               {"[activation_checkpoint]\nselective_ac_option = \"1\"", "uniform", 1}};
    for (size_t i = 0; i < sizeof sel / sizeof *sel; i++) {
        c = tt_8b_config(sel[i].ac);
        ck_assert_str_eq(json_string_value(json_object_get(c, "recompute")), "full");
        json_t *method = json_object_get(c, "recompute_method"), *n = json_object_get(c, "recompute_num_layers");
        ck_assert_str_eq(method ? json_string_value(method) : "uniform", sel[i].method); /* absent: the default */
        ck_assert_int_eq(n ? json_integer_value(n) : 1, sel[i].layers);
        json_decref(c);
    }
    /* the loss (components/loss.py): eager F.cross_entropy at TP 1 unless
     * [compile] compiles "loss" (components' default holds it); TP > 1
     * runs torchtitan's fused loss-parallel function */
    static const struct {
        const char *extra;
        const char *ce;
    } loss[] = {{"", "eager"},
                {"[compile]\nenable = true", "fused"},
                {"[compile]\nenable = true\ncomponents = [\"model\"]", "eager"},
                {"[compile]\nenable = false\ncomponents = [\"model\", \"loss\"]", "eager"},
                {"tensor_parallel_degree = 2", "fused"}};
    for (size_t i = 0; i < sizeof loss / sizeof *loss; i++) {
        c = tt_8b_config(loss[i].extra);
        json_t *ce = json_object_get(c, "cross_entropy");
        ck_assert_msg(!strcmp(ce ? json_string_value(ce) : "fused", loss[i].ce), "%s: %s", loss[i].extra,
                      ce ? json_string_value(ce) : "fused");
        json_decref(c);
    }
    /* the 405B file: float8 named, async TP with its compile */
    r = run_cmd(LOONG " dag --torchtitan-toml " LOONG_SRCDIR "/tests/data/torchtitan/llama3_405b.toml --dp 16 "
                      "--format torchtitan");
    ck_assert_msg(r.status == 0 && strstr(r.out, "enable_async_tensor_parallel = true") &&
                      strstr(r.err, "model.converters float8"),
                  "%s %s", r.out, r.err);
    /* plan's pick as a job file, read back: the pick runs on the 8 GPUs */
    r = run_cmd(LOONG " plan --model llama3-8b --seq 32K --gpus 8 --platform dgx-h100-1n --top 0 --zero 3 "
                      "--global-batch 8 --emit torchtitan -o %s",
                toml);
    ck_assert_msg(r.status == 0 && !r.err[0], "%s", r.err);
    snprintf(a, sizeof a, "--torchtitan-toml %s", toml);
    c = dag_config_json(LOONG, a);
    json_t *mesh = json_object_get(c, "mesh");
    int world = (int)(json_integer_value(json_array_get(mesh, 0)) * json_integer_value(json_array_get(mesh, 1)));
    static const char *const degrees[] = {"tp", "dp", "pp"}; /* absent: 1 */
    for (size_t i = 0; i < 3; i++)
        if (json_object_get(c, degrees[i])) world *= (int)json_integer_value(json_object_get(c, degrees[i]));
    ck_assert_int_eq(world, 8);
    json_decref(c);
    r = run_cmd(LOONG " plan --model llama3-8b --seq 32K --gpus 8 --platform dgx-h100-1n --top 0 --zero 3 "
                      "--global-batch 8 --emit torchtitan --show 2");
    ck_assert_msg(r.status == 0 && strstr(r.out, "[parallelism]\n"), "%s", r.err);
    unlink(toml);
    static const struct {
        const char *toml, *says;
    } bad[] = {
        {"[parallelism]\ndata_parallel_shard_degree = 2\ntensor_parallel_degree = 2\nenable_async_tensor_parallel "
         "= true",
         "enable_async_tensor_parallel = true needs [compile] enable = true"},
        {"[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 2", "HSDP"},
        {"[parallelism]\ndata_parallel_shard_degree = 4\n[training]\nlocal_batch_size = 2\nglobal_batch_size = 12",
         "global_batch_size = 12 is not a multiple of local_batch_size = 2"},
        {"[parallelism]\ndata_parallel_shard_degree = 1\n[training]\nbatch_size = 2\nlocal_batch_size = 2",
         "batch_size and local_batch_size both given"},
        {"[model]\nname = \"llama3\"\nflavor = \"debugmodel\"", "loong ships llama3's 8B, 70B and 405B"},
        {"[parallelism]\ndata_parallel_shard_degree = 1\n[activation_checkpoint]\nmode = \"memory_budget\"",
         "memory_budget"},
        {"[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 1\ntensor_parallel_degree = "
         "2",
         "torchtitan refuses DDP"},
        {"[parallelism]\ndata_parallel_shard_degree = 2\npipeline_parallel_degree = 2", "FSDP under pipelining"},
        {"[parallelism]\ndata_parallel_shard_degree = 2\n[training]\nlocal_batch_size = 1\nglobal_batch_size = 4",
         "accumulation steps) with FSDP"},
        {"[parallelism]\ndata_parallel_shard_degree = 1\npipeline_parallel_degree = 4", "unevenly"},
        {"[parallelism]\ndata_parallel_shard_degree = 1\npipeline_parallel_degree = 2\npipeline_parallel_schedule = "
         "\"ZBVZeroBubble\"",
         "GPipe, 1F1B and Interleaved1F1B"},
        {"[parallelism\n", "not TOML"},
        {"[training]\nstart = 1979-05-27", "date or time"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        /* the 8B flavor unless the case is about [model] */
        const char *model = strstr(bad[i].toml, "[model]") ? "" : "[model]\nflavor = \"8B\"";
        r = run_cmd("printf '%%s\\n%%s\\n' '%s' '%s' | " LOONG " dag --torchtitan-toml - --format stats", bad[i].toml,
                    model);
        ck_assert_msg(r.status == 2 && count_lines(r.err) == 1 && strstr(r.err, bad[i].says), "%s: %d %s", bad[i].toml,
                      r.status, r.err);
    }
}
END_TEST

/* The flavors that --torchtitan-toml maps to loong's presets have their
 * shape: llama3's FeedForward (torchtitan/models/llama3/model/model.py)
 * sizes the SwiGLU hidden as int(2 * 4 * dim / 3), times
 * ffn_dim_multiplier, rounded up to multiple_of (llama3_args of
 * models/llama3/__init__.py, v0.2.2). */
START_TEST(torchtitan_flavors)
{
    static const struct {
        const char *flavor;
        int dim, layers, heads, kv, multiple;
        double mult;
    } fl[] = {{"8B", 4096, 32, 32, 8, 1024, 1.3},
              {"70B", 8192, 80, 64, 8, 4096, 1.3},
              {"405B", 16384, 126, 128, 8, 4096, 1.2}};
    char a[512];
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++) {
        snprintf(a, sizeof a,
                 "printf '[model]\\nflavor = \"%s\"\\n[parallelism]\\ndata_parallel_shard_degree = 1\\n"
                 "[training]\\nseq_len = 4096\\n' > /tmp/loong-flavor.toml",
                 fl[i].flavor);
        ck_assert_int_eq(system(a), 0);
        json_t *c = dag_config_json(LOONG, "--torchtitan-toml /tmp/loong-flavor.toml --scope attn");
        json_t *m = json_object_get(c, "model");
        int hidden = (int)(2 * 4 * fl[i].dim / 3);
        hidden = (int)(fl[i].mult * hidden);
        hidden = (hidden + fl[i].multiple - 1) / fl[i].multiple * fl[i].multiple;
        ck_assert_int_eq(json_integer_value(json_object_get(m, "ffn")), hidden);
        ck_assert_int_eq(json_integer_value(json_object_get(m, "hidden")), fl[i].dim);
        ck_assert_int_eq(json_integer_value(json_object_get(m, "layers")), fl[i].layers);
        ck_assert_int_eq(json_integer_value(json_object_get(m, "heads")), fl[i].heads);
        ck_assert_int_eq(json_integer_value(json_object_get(m, "kv_heads")), fl[i].kv);
        ck_assert_int_eq(json_integer_value(json_object_get(m, "vocab")), 128256);
        json_decref(c);
    }
    unlink("/tmp/loong-flavor.toml");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("dag");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, help_and_version);
    tcase_add_test(tc, nccl_knobs_parsed);
    tcase_add_test(tc, pipeline_knobs_parsed);
    tcase_add_test(tc, stats_table);
    tcase_add_test(tc, json_schema);
    tcase_add_test(tc, json_records_docs);
    tcase_add_loop_test(tc, bad_input, 0, (int)(sizeof bad_inputs / sizeof bad_inputs[0]));
    tcase_add_loop_test(tc, abbreviations_refused, 0, (int)(sizeof abbreviated / sizeof abbreviated[0]));
    tcase_add_test(tc, unwritable_output);
    tcase_add_test(tc, data_path_from_anywhere);
    tcase_add_test(tc, no_cuda_libraries_linked);
    tcase_add_test(tc, megatron_round_trip);
    tcase_add_test(tc, torchtitan_round_trip);
    tcase_add_test(tc, torchtitan_flavors);
    tcase_add_test(tc, check_plausibility);
    suite_add_tcase(s, tc);
    return check_run(s);
}

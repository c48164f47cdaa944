/* kineto: PyTorch profiler traces. A constructed trace's per-kind totals,
 * exposed communication and step come out exactly; NCCL's kernel names
 * and the attention shapes read as their closed forms; the public traces
 * of HolisticTraceAnalysis read (tests/data/kineto/hta/README.md); every
 * bad input is one message; and the round trip prediction -> Kineto form
 * -> calibrate recovers the table's rates within 2 %. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "autoconf.h"
#include "check_run.h"
#include "analysis/kineto_calib.h"
#include "analysis/kineto_mem.h"
#include "model/memory.h"
#include "analysis/kineto_write.h"
#include "analysis/kprofile.h"
#include "model/tiles.h"
#include "cli_util.h"
#include "dag_util.h"

#define HTA LOONG_SRCDIR "/tests/data/kineto/hta/"

static double rel(double a, double b) { return fabs(a - b) / fabs(b); }

/* ---- a constructed two-rank trace ----
 * Rank R, step #7 on the CPU over [0, 1000) us: on stream 7 a GEMM
 * [100, 200) (aten::mm 1024 x 512 x 256) and a causal attention forward
 * [200, 500) (flash_attn's op, q = k = 4096 tokens, 32 heads of 128); on
 * stream 20 an all-reduce [450, 650) of 1M bf16 over 2 ranks; and on
 * stream 7 an unnamed kernel [700, 750). Step #8 over [1000, 2000) holds
 * one GEMM [1100, 1150). Rank 1 is rank 0 shifted by 10 us. */
static char *constructed(int rank, int world, double shift, const char *nccl_version)
{
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    fprintf(f,
            "{\"schemaVersion\":1,\"distributedInfo\":{\"backend\":\"nccl\",\"rank\":%d,\"world_size\":%d,"
            "\"nccl_version\":\"%s\"},\"traceEvents\":[\n",
            rank, world, nccl_version);
    double s = shift;
    fprintf(f,
            "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#7\",\"pid\":1,\"tid\":1,\"ts\":%g,"
            "\"dur\":1000},\n"
            "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#8\",\"pid\":1,\"tid\":1,\"ts\":%g,"
            "\"dur\":1000},\n",
            s, s + 1000);
    /* launches: ops by External id, runtime calls by correlation */
    struct {
        const char *op, *args, *kernel, *kargs;
        double launch, ts, dur;
        int stream;
    } k[] = {
        {"aten::mm", "\"Input Dims\":[[1024,256],[256,512]],\"Input Strides\":[[256,1],[1,256]]",
         "sm90_xmma_gemm_bf16bf16_bf16f32", "", 10, 100, 100, 7},
        {"flash_attn::_flash_attn_forward",
         "\"Input Dims\":[[1,4096,32,128],[1,4096,8,128],[1,4096,8,128]],\"Concrete "
         "Inputs\":[\"\",\"\",\"\",\"0.0\",\"0.088\",\"True\"]",
         "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits>(Flash_fwd_params)", "", 20, 200, 300, 7},
        {"record_param_comms", "\"Collective name\":\"allreduce\"", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
         ",\"Collective name\":\"allreduce\",\"In msg nelems\":1048576,\"Out msg nelems\":1048576,\"Group size\":2,"
         "\"dtype\":\"BFloat16\",\"Process Group Name\":\"0\",\"Process Group Ranks\":\"[0, 1]\"",
         30, 450, 200, 20},
        {"aten::add", "", "void at::native::vectorized_elementwise_kernel<4>", "", 40, 700, 50, 7},
        {"aten::mm", "\"Input Dims\":[[64,64],[64,64]]", "nvjet_tst_64x64", "", 1010, 1100, 50, 7},
    };
    for (int i = 0; i < 5; i++) {
        fprintf(f,
                "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"%s\",\"pid\":1,\"tid\":1,\"ts\":%g,\"dur\":5,"
                "\"args\":{\"External id\":%d%s%s}},\n",
                k[i].op, s + k[i].launch - 1, 100 + i, k[i].args[0] ? "," : "", k[i].args);
        fprintf(f,
                "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":%g,"
                "\"dur\":2,\"args\":{\"External id\":%d,\"correlation\":%d}},\n",
                s + k[i].launch, 100 + i, 5000 + i);
        fprintf(f,
                "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"%s\",\"pid\":0,\"tid\":%d,\"ts\":%g,\"dur\":%g,"
                "\"args\":{\"External id\":%d,\"correlation\":%d,\"stream\":%d%s}}%s\n",
                k[i].kernel, k[i].stream, s + k[i].ts, k[i].dur, 100 + i, 5000 + i, k[i].stream, k[i].kargs,
                i < 4 ? "," : "");
    }
    fprintf(f, "]}\n");
    fclose(f);
    return buf;
}

static char *write_temp(const char *dir, const char *name, const void *data, size_t len)
{
    char *path;
    ck_assert_int_ge(asprintf(&path, "%s/%s", dir, name), 0);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    fclose(f);
    return path;
}

/* gzip of text, as the profiler's .json.gz */
static void *gzipped(const char *text, size_t *len)
{
    z_stream z = {0};
    ck_assert_int_eq(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&z, strlen(text));
    unsigned char *out = malloc(cap);
    z.next_in = (Bytef *)text;
    z.avail_in = (uInt)strlen(text);
    z.next_out = out;
    z.avail_out = (uInt)cap;
    ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    *len = z.total_out;
    deflateEnd(&z);
    return out;
}

static char *tmpdir(void)
{
    char *d = strdup("/tmp/loong-kineto-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d));
    return d;
}

static void rmdir_all(char *d)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    ck_assert_int_eq(system(cmd), 0);
    free(d);
}

START_TEST(constructed_exactly)
{
    char *d = tmpdir(), *t0 = constructed(0, 2, 0, "2.21.5"), *t1 = constructed(1, 2, 10, "2.21.5");
    size_t gzl;
    void *gz = gzipped(t1, &gzl);
    char *p0 = write_temp(d, "rank0.json", t0, strlen(t0)), *p1 = write_temp(d, "rank1.json.gz", gz, gzl);
    kineto_names *names = kineto_names_default();
    kineto_set s;
    char err[LOONG_ERRLEN] = "";
    const char *paths[] = {d};
    ck_assert_msg(kineto_set_open(paths, 1, names, NULL, &s, err) == 0, "%s", err);
    ck_assert_int_eq(s.n, 2);
    ck_assert_int_eq(s.nsteps, 2);
    ck_assert_int_eq(s.steps[0], 7);
    const kineto_rank *r = &s.r[1];
    ck_assert_int_eq(r->rank, 1);
    ck_assert_uint_eq(r->nk, 5);
    /* kinds, shapes and sizes */
    ck_assert_int_eq(r->k[0].kind, TASK_GEMM);
    ck_assert_double_eq(r->k[0].flops, 2.0 * 1024 * 256 * 512);
    /* X W^T: B's rows are contiguous, a transposed view (tn) */
    ck_assert(r->k[0].gm == 1024 && r->k[0].gn == 512 && r->k[0].gk == 256);
    ck_assert_int_eq(r->k[0].layout, GEMM_TN);
    ck_assert_int_eq(r->k[4].layout, GEMM_ANY); /* no strides in the trace */
    ck_assert_int_eq(r->k[1].kind, TASK_ATTN_FWD);
    ck_assert(r->k[1].causal);
    ck_assert_double_eq(r->k[1].flops, 4.0 * (4096.0 * 4097 / 2) * 128 * 32);
    ck_assert_int_eq(r->k[2].kind, TASK_ALLREDUCE);
    ck_assert_double_eq(r->k[2].bytes, 2.0 * 1048576);
    ck_assert_int_eq(r->k[2].group, 2);
    ck_assert_int_eq(r->k[2].algo, NCCL_RING);
    ck_assert_int_eq(r->k[2].proto, NCCL_LL);
    ck_assert_int_eq(r->k[3].kind, KINETO_OTHER);
    ck_assert_uint_eq(r->unknown, 1);
    ck_assert_int_eq(r->k[4].step, 1);
    ck_assert_int_eq(r->k[0].step, 0);
    /* the profile, per step: (gemm 100 + 50) / 2 steps, attention 300 / 2,
     * the all-reduce 200 / 2, other 50 / 2; exposed: [500, 650) minus
     * nothing (the other kernel starts at 700) = 150, over 2 steps 75 */
    kprof p;
    kprof_of_kineto(&s, &p);
    ck_assert_int_eq(p.rank0, 0);
    ck_assert_double_eq_tol(p.kind_us[TASK_GEMM], 75, 1e-9);
    ck_assert_double_eq_tol(p.kind_us[TASK_ATTN_FWD], 150, 1e-9);
    ck_assert_double_eq_tol(p.kind_us[TASK_ALLREDUCE], 100, 1e-9);
    ck_assert_double_eq_tol(p.kind_us[KINETO_OTHER], 25, 1e-9);
    ck_assert_double_eq_tol(p.exposed_us[0], 75, 1e-9);
    ck_assert_double_eq_tol(p.exposed_us[1], 75, 1e-9);
    /* steps: [100, 750) = 650 and [1100, 1150) = 50 */
    ck_assert_double_eq_tol(p.step_us[1], (650 + 50) / 2.0, 1e-9);
    ck_assert_double_eq_tol(p.run_step_us, (650 + 50) / 2.0, 1e-9);
    ck_assert_int_eq(p.ncoll, 1);
    ck_assert_double_eq(p.coll[0].bytes, 2.0 * 1048576);
    ck_assert_double_eq_tol(p.coll[0].n, 1, 1e-12); /* 2 ranks x 1 per step / 2 steps... per step over ranks */
    kprof_free(&p);
    /* one step chosen */
    kineto_set_free(&s);
    ck_assert_msg(kineto_set_open(paths, 1, names, "8", &s, err) == 0, "%s", err);
    kprof_of_kineto(&s, &p);
    ck_assert_double_eq_tol(p.kind_us[TASK_GEMM], 50, 1e-9);
    ck_assert_double_eq_tol(p.kind_us[TASK_ALLREDUCE], 0, 1e-9);
    kprof_free(&p);
    kineto_set_free(&s);
    kineto_names_free(names);
    free(t0), free(t1), free(gz), free(p0), free(p1);
    rmdir_all(d);
}
END_TEST

START_TEST(nccl_names)
{
    static const struct {
        const char *name;
        int kind, algo, proto;
        const char *dtype;
    } v[] = {
        {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", TASK_ALLREDUCE, NCCL_RING,
         NCCL_LL, "bf16"},
        {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", TASK_ALLREDUCE, NCCL_RING,
         NCCL_LL, "float"},
        {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", KINETO_P2P, NCCL_RING, NCCL_SIMPLE, "int8_t"},
        {"ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", KINETO_P2P, -1, -1, ""},
        {"ncclDevKernel_ReduceScatter_Sum_f32_RING_LL128", TASK_REDUCESCATTER, NCCL_RING, NCCL_LL128, "f32"},
        {"ncclDevKernel_AllGather_RING_LL", TASK_ALLGATHER, NCCL_RING, NCCL_LL, ""},
        {"ncclDevKernel_AllReduce_Sum_bf16_TREE_LL128", TASK_ALLREDUCE, NCCL_TREE, NCCL_LL128, "bf16"},
        {"ncclDevKernel_AllReduce_Sum_bf16_NVLS_SIMPLE", TASK_ALLREDUCE, NCCL_NVLS, NCCL_SIMPLE, "bf16"},
        {"ncclDevKernel_AllReduce_Sum_bf16_NVLS_TREE_SIMPLE", TASK_ALLREDUCE, -1, NCCL_SIMPLE, "bf16"},
        {"ncclKernel_Broadcast_RING_LL_Sum_int8_t", KINETO_NCCL_OTHER, NCCL_RING, NCCL_LL, "int8_t"},
        {"ncclDevKernel_Generic", KINETO_NCCL_OTHER, -1, -1, ""},
    };
    kineto_names *t = kineto_names_default();
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        kineto_nccl_name n;
        ck_assert_msg(kineto_nccl_name_parse(v[i].name, &n), "%s", v[i].name);
        ck_assert_msg(n.kind == v[i].kind && n.algo == v[i].algo && n.proto == v[i].proto, "%s: %d %d %d", v[i].name,
                      n.kind, n.algo, n.proto);
        ck_assert_str_eq(n.dtype, v[i].dtype);
        ck_assert_int_eq(kineto_names_classify(t, v[i].name), v[i].kind);
    }
    kineto_nccl_name n;
    ck_assert(!kineto_nccl_name_parse("sm90_xmma_gemm", &n));
    /* the shipped rules: attention before GEMM; a user rule goes first */
    ck_assert_int_eq(kineto_names_classify(t, "void cutlass::device_kernel<flash::FlashAttnFwdSm90<gemm>>"),
                     TASK_ATTN_FWD);
    ck_assert_int_eq(kineto_names_classify(t, "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16"),
                     TASK_ATTN_BWD);
    ck_assert_int_eq(kineto_names_classify(t, "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn"), TASK_GEMM);
    ck_assert_int_eq(kineto_names_classify(t, "triton_poi_fused_add_0"), KINETO_OTHER);
    char err[LOONG_ERRLEN];
    ck_assert_int_eq(kineto_names_add(t, "# mine\nmerge  triton_poi_fused_add*\n", "mine.rules", err), 0);
    ck_assert_int_eq(kineto_names_classify(t, "triton_poi_fused_add_0"), TASK_MERGE);
    ck_assert_int_eq(kineto_names_add(t, "gemm\n", "bad.rules", err), -1);
    ck_assert_msg(strstr(err, "bad.rules:1"), "%s", err);
    ck_assert_int_eq(kineto_names_add(t, "colour *x*\n", "bad.rules", err), -1);
    kineto_names_free(t);
}
END_TEST

/* Tiles and pairs of one FlashAttention call against enumeration. */
/* The materialised attention's kernels, and a mixture of experts', as
 * Megatron, Transformer Engine and PyTorch name them
 * (megatron/fused_kernels' scaled_*softmax_warp_*, aten's Dropout.cu),
 * map to softmax and dropout; the fused bias-dropout-add stays an add;
 * Transformer Engine's FP8 casts (transformer_engine/common/transpose/
 * cast_transpose.cu, util/cast_kernels.cuh) are quant. */
START_TEST(unfused_names)
{
    static const struct {
        const char *name;
        int kind;
    } rows[] = {
        {"void scaled_upper_triang_masked_softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 11>", TASK_SOFTMAX},
        {"void scaled_upper_triang_masked_softmax_warp_backward<c10::BFloat16, c10::BFloat16, float, 11>",
         TASK_SOFTMAX},
        {"void scaled_masked_softmax_warp_forward<c10::Half, c10::Half, float, 10>", TASK_SOFTMAX},
        {"void at::native::(anonymous namespace)::fused_dropout_kernel_vec<c10::BFloat16, float, unsigned int, 1, 4, "
         "bool>",
         TASK_DROPOUT},
        {"void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::masked_scale_kernel<"
         "bool, c10::BFloat16, float>(at::Tensor&, at::Tensor const&, at::Tensor const&, float)::{lambda}>",
         TASK_DROPOUT},
        {"CudaCodeGen::kernel_bias_dropout_add_fused_train", TASK_ADD},
        {"void transformer_engine::detail::cast_transpose_optimized_kernel<true, float, __nv_bfloat16, "
         "__nv_fp8_e4m3>",
         TASK_QUANT},
        {"void transformer_engine::dispatch::mxfp8::cast_mxfp8_2D_kernel<false, false, false, false, float, "
         "__nv_bfloat16, __nv_fp8_e4m3>",
         TASK_QUANT},
        /* a mixture of experts' (TE's permutation.cu and fused router, aten's TensorTopK.cu) */
        {"void moe_permute_kernel<__nv_bfloat16, float, 128, false>", TASK_ADD},
        {"void moe_unpermute_kernel<__nv_bfloat16, float, true>", TASK_ADD},
        {"void transformer_engine::fused_topk_with_score_function_forward_kernel<__nv_bfloat16, float>", TASK_SOFTMAX},
        {"void at::native::sbtopk::gatherTopK<c10::BFloat16, unsigned int, 2, false>", TASK_SOFTMAX},
    };
    kineto_names *names = kineto_names_default();
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        ck_assert_msg(kineto_names_classify(names, rows[i].name) == rows[i].kind, "%s: %s, want %s", rows[i].name,
                      kineto_kind_name(kineto_names_classify(names, rows[i].name)), kineto_kind_name(rows[i].kind));
    kineto_names_free(names);
}
END_TEST

START_TEST(attention_closed_forms)
{
    ck_assert_uint_eq(kineto_attn_pairs(4096, 4096, true), 4096ull * 4097 / 2);
    ck_assert_uint_eq(kineto_attn_pairs(1000, 3000, false), 3000000ull);
    ck_assert_uint_eq(kineto_attn_tiles(256, 256, true, 128, 128), 3);
    ck_assert_uint_eq(kineto_attn_tiles(300, 200, false, 128, 64), 3 * 4);
    for (int sq = 1; sq <= 70; sq += 3)
        for (int sk = 1; sk <= 70; sk += 5) {
            uint64_t pairs = 0, tiles = 0;
            const int br = 8, bc = 16;
            for (int i = 0; i < sq; i++)
                for (int j = 0; j < sk; j++)
                    pairs += j <= i + sk - sq;
            for (int a = 0; a < sq; a += br)
                for (int b = 0; b < sk; b += bc) {
                    bool any = false;
                    for (int i = a; i < a + br && i < sq; i++)
                        for (int j = b; j < b + bc && j < sk; j++)
                            any |= j <= i + sk - sq;
                    tiles += any;
                }
            ck_assert_uint_eq(kineto_attn_pairs(sq, sk, true), pairs);
            ck_assert_uint_eq(kineto_attn_tiles(sq, sk, true, br, bc), tiles);
        }
}
END_TEST

/* HolisticTraceAnalysis' traces: a 2024 single-rank A100 trace with NCCL
 * kernels carrying their collective args, and a 2023 pair of ranks of a
 * 128-rank run (SendRecv kernels, record_shapes, PyTorch <= 2.0's ids). */
/* profile_memory's "[memory]" events (tests/data/kineto/memory: two ranks
 * written for this test, GB-sized totals): per GPU the largest "Total
 * Allocated" and "Total Reserved", read separately (rank 0's fall on
 * different events), with the CPU's events (above both) and an event
 * without "Total Reserved" left out; the allocator factor is the mean of
 * the two ratios, (6/3 + 8.5/8) / 2 = 1.53125. loong calibrate --kineto
 * prints them, and with --predicted the memory model's peaks beside. */
#define MEMDIR LOONG_SRCDIR "/tests/data/kineto/memory"
START_TEST(memory_events)
{
    kineto_names *names = kineto_names_default();
    kineto_set s;
    char err[LOONG_ERRLEN];
    const char *dir[] = {MEMDIR};
    ck_assert_msg(kineto_set_open(dir, 1, names, NULL, &s, err) == 0, "%s", err);
    kineto_names_free(names);
    ck_assert_int_eq(s.n, 2);
    static const struct {
        double alloc, reserved;
        size_t events;
    } want[2] = {{3e9, 6e9, 3}, {8e9, 8.5e9, 3}};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(s.r[i].nmem, 1);
        ck_assert_int_eq(s.r[i].mem[0].device, i);
        ck_assert_uint_eq(s.r[i].mem[0].events, want[i].events);
        ck_assert_double_eq(s.r[i].mem[0].alloc_peak, want[i].alloc);
        ck_assert_double_eq(s.r[i].mem[0].reserved_peak, want[i].reserved);
    }
    kineto_mem_fit fit;
    ck_assert_int_eq(kineto_mem_fit_set(&s, &fit), 2);
    ck_assert_double_eq_tol(fit.factor, (6.0 / 3 + 8.5 / 8) / 2, 1e-12);
    ck_assert_double_eq_tol(fit.factor_min, 8.5 / 8, 1e-12);
    ck_assert_double_eq_tol(fit.factor_max, 2, 1e-12);
    ck_assert_double_eq(fit.alloc_peak, 8e9);
    ck_assert_double_eq(fit.reserved_peak, 8.5e9);
    kineto_set_free(&s);

    char *d = tmpdir();
    const char *plat = LOONG_SRCDIR "/topologies/dgx-h100-1n.xml";
    run_result r = run_cmd("%s calibrate --kineto %s --platform %s -o %s/fit", LOONG_BIN, MEMDIR, plat, d);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "# memory: rank 0 gpu 0: peak allocated 3.00 GB, reserved 6.00 GB (3 events)"), "%s",
                  r.out);
    ck_assert_msg(strstr(r.out, "allocator factor 1.5312 (mean reserved / allocated peak of 2 GPUs"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "loong plan --allocator 1.5312"), "%s", r.out);
    /* the model's peaks of a 2-rank configuration beside the measured */
    r = run_cmd("%s sim --platform %s --model tiny --seq 4K --mesh 1x2 --strategy zigzag --scope step --quiet "
                "-o /dev/null --trace %s/pred.json",
                LOONG_BIN, plat, d);
    ck_assert_msg(r.status == 0, "%s", r.err);
    r = run_cmd("%s calibrate --kineto %s --platform %s -o %s/fit --predicted %s/pred.json", LOONG_BIN, MEMDIR, plat, d,
                d);
    ck_assert_msg(r.status == 0, "%s", r.err);
    config c = tcfg("tiny", 4096, "zigzag", 1, 2, 0, SCOPE_STEP);
    memory_estimate e;
    memory_estimate_stage(&c, 0, &e);
    char line[160];
    snprintf(line, sizeof line, "; model: allocated %.2f GB (%+.1f %%), reserved %.2f GB (%+.1f %%)", e.peak / 1e9,
             100 * (e.peak - 3e9) / 3e9, e.reserved / 1e9, 100 * (e.reserved - 6e9) / 6e9);
    ck_assert_msg(strstr(r.out, line), "no '%s' in:\n%s", line, r.out);
    /* the memory lines come with --kineto only */
    r = run_cmd("%s calibrate %s/pred.json --platform %s -o %s/fit --predicted %s/pred.json", LOONG_BIN, d, plat, d, d);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "--kineto"), "%s", r.err);
    rmdir_all(d);
}
END_TEST

START_TEST(public_traces)
{
    kineto_names *names = kineto_names_default();
    kineto_set s;
    char err[LOONG_ERRLEN];
    const char *one[] = {HTA "nccl_data.json.gz"};
    ck_assert_msg(kineto_set_open(one, 1, names, NULL, &s, err) == 0, "%s", err);
    ck_assert_int_eq(s.r[0].world, 2);
    ck_assert_int_eq(s.nsteps, 3);
    ck_assert_int_eq(s.steps[0], 4);
    ck_assert_uint_eq(s.r[0].nk, 2700);
    size_t ar = 0, sized = 0;
    for (size_t i = 0; i < s.r[0].nk; i++) {
        const kineto_kernel *k = &s.r[0].k[i];
        if (k->kind != TASK_ALLREDUCE) continue;
        ar++;
        sized += k->bytes > 0 && k->group == 2 && k->algo == NCCL_RING && k->proto == NCCL_LL;
    }
    ck_assert_uint_gt(ar, 0);
    ck_assert_uint_eq(sized, ar);
    kineto_set_free(&s);
    /* its 5 all-reduce sizes of 3 steps fit the links poorly: calibrate
     * names each link parameter below the gate and writes nothing */
    char out[] = "/tmp/loong-hta-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(out));
    run_result r =
        run_cmd("%s calibrate --kineto %snccl_data.json.gz --platform %s/topologies/a100-1n-8nic.xml -o %s/fit",
                LOONG_BIN, HTA, LOONG_SRCDIR, out);
    ck_assert_msg(r.status == 2, "exit %d: %s", r.status, r.err);
    for (const char *p = r.err; (p = strstr(p, "R^2 = ")); p++)
        ck_assert_msg(atof(p + 6) < 0.5, "%s", r.err);
    ck_assert_msg(count_lines(r.err) == 1 && strstr(r.err, "error: nvlink_bw: R^2 = ") &&
                      strstr(r.err, "; nvlink_lat: R^2 = "),
                  "%s", r.err);
    r = run_cmd("ls %s/fit", out);
    ck_assert_msg(r.status != 0, "calibrate wrote a refused fit");
    run_cmd("rm -rf %s", out);
    const char *two[] = {HTA "sampled_rank-1.json.gz", HTA "sampled_rank-0.json.gz"};
    ck_assert_msg(kineto_set_open(two, 2, names, NULL, &s, err) == 0, "%s", err);
    ck_assert_int_eq(s.n, 2);
    ck_assert_int_eq(s.r[0].rank, 0); /* ordered by rank */
    ck_assert_int_eq(s.nsteps, 2);
    for (int r = 0; r < 2; r++) {
        size_t p2p = 0;
        for (size_t i = 0; i < s.r[r].nk; i++)
            p2p += s.r[r].k[i].kind == KINETO_P2P;
        ck_assert_uint_eq(p2p, 10);
        ck_assert_uint_gt(s.r[r].shaped, 0); /* GEMMs found through the operators around their launches */
    }
    kprof p;
    kprof_of_kineto(&s, &p);
    ck_assert_double_gt(p.run_step_us, 0);
    ck_assert_double_gt(kprof_kind_total(&p, KINETO_P2P), 0);
    kprof_free(&p);
    kineto_set_free(&s);
    const char *rank1[] = {HTA "sampled_rank-1.json.gz"};
    ck_assert_msg(kineto_set_open(rank1, 1, names, NULL, &s, err) == 0, "%s", err);
    ck_assert_int_eq(s.r[0].rank, 1);
    kineto_set_free(&s);
    kineto_names_free(names);
}
END_TEST

static void refused(const char *const *paths, int n, const char *steps, const char *expect)
{
    kineto_names *names = kineto_names_default();
    kineto_set s;
    char err[LOONG_ERRLEN] = "";
    ck_assert_int_eq(kineto_set_open(paths, n, names, steps, &s, err), -1);
    ck_assert_msg(strstr(err, expect) && !strchr(err, '\n'), "expected '%s' in: %s", expect, err);
    kineto_names_free(names);
}

START_TEST(bad_inputs)
{
    char *d = tmpdir();
    char *ok0 = constructed(0, 2, 0, "2.21.5"), *ok1 = constructed(1, 2, 0, "2.21.5");
    char *p0 = write_temp(d, "r0.json", ok0, strlen(ok0)), *p1 = write_temp(d, "r1.json", ok1, strlen(ok1));
    char *other = constructed(1, 4, 0, "2.21.5"), *po = write_temp(d, "o1.json", other, strlen(other));
    char *r2 = constructed(2, 4, 0, "2.21.5"), *p2 = write_temp(d, "r2.json", r2, strlen(r2));
    char *w4 = constructed(0, 4, 0, "2.21.5"), *p4 = write_temp(d, "w4.json", w4, strlen(w4));
    char *plain = write_temp(d, "plain.json.gz", ok0, strlen(ok0));
    size_t gl;
    unsigned char *gz = gzipped(ok0, &gl);
    gz[gl / 2] ^= 0xff;
    char *bad_gz = write_temp(d, "bad.json.gz", gz, gl);
    char *cut_gz = write_temp(d, "cut.json.gz", gz, gl / 3);
    char *nj = write_temp(d, "notjson.json", "{\"traceEvents\": [", 17);
    char *nt = write_temp(d, "nottrace.json", "{\"events\": []}", 14);
    char *loong = write_temp(d, "loong.json", "{\"loong\":{},\"traceEvents\":[]}", 29);
    /* steps 7 and 9 on one rank against 7 and 8 */
    char *st = constructed(1, 2, 0, "2.21.5"), *at = strstr(st, "ProfilerStep#8");
    at[13] = '9';
    char *ps = write_temp(d, "steps1.json", st, strlen(st));
    char *empty = tmpdir();
    const char *a[] = {plain}, *b[] = {bad_gz}, *c[] = {nj}, *e[] = {nt}, *f[] = {HTA "cpu_only.json.gz"},
               *g[] = {p0, po}, *h[] = {p4, p2}, *i[] = {p0, ps}, *j[] = {p0, p1}, *k[] = {empty}, *l[] = {p0, p0},
               *m[] = {loong}, *n[] = {cut_gz}, *o[] = {p0, "nowhere.json"};
    refused(a, 1, NULL, "is named .gz but is not gzip");
    refused(b, 1, NULL, "does not inflate");
    refused(n, 1, NULL, "cut short");
    refused(c, 1, NULL, "is not JSON");
    refused(e, 1, NULL, "not a trace");
    refused(f, 1, NULL, "no GPU kernel events");
    refused(g, 2, NULL, "different runs mixed");
    refused(h, 2, NULL, "rank 1 is missing");
    refused(i, 2, NULL, "steps do not match");
    refused(j, 2, "12", "holds none of the trace's steps");
    refused(j, 2, "7-x", "is not N or N-M");
    refused(k, 1, NULL, "holds no *.json");
    refused(l, 2, NULL, "rank 0 twice");
    refused(m, 1, NULL, "is a loong trace");
    refused(o, 2, NULL, "nowhere.json");
    free(ok0), free(ok1), free(other), free(r2), free(w4), free(p4), free(st), free(gz);
    free(p0), free(p1), free(po), free(p2), free(plain), free(bad_gz), free(cut_gz), free(nj), free(nt), free(loong),
        free(ps);
    rmdir_all(empty);
    rmdir_all(d);
}
END_TEST

/* ---- the round trip ---- */

static const char *TABLE = "gpu h100\npeak 989T\nmem_bw 3.35TBps\nattn_fwd line 20us 500T\nattn_bwd line 30us 400T\n"
                           "tile attn_fwd 128x128\ntile attn_bwd 64x128\ngemm line 8us 700T\nmerge line 3us 2.68TBps\n"
                           "acc line 3us 2.68TBps\n";

/* A schedule without a simulator: each stream's tasks back to back (a
 * grouped task beside the one before it, as NCCL runs a group), a compute
 * task for the table's time, a transfer 50 us, every task after its
 * dependencies. */
static void schedule(const dag *g, const calib *cb, double *st, double *du)
{
    const config *c = dag_config(g);
    tiles *tl = tiles_new(cb, c);
    uint32_t n = dag_ntasks(g);
    for (uint32_t id = 0; id < n; id++) { /* ids are in a topological order */
        const dag_task *t = dag_task_get(g, id);
        du[id] = task_is_compute(t) ? calib_task_seconds(cb, c, tl, t) : 50e-6;
        double at = 0;
        const uint32_t *deps = dag_deps(g, t);
        for (int k = 0; k < t->ndeps; k++)
            at = fmax(at, st[deps[k]] + du[deps[k]]);
        uint32_t m;
        const uint32_t *ids = dag_stream_tasks(g, t->rank, t->stream, &m);
        for (uint32_t k = 0; k < m && ids[k] != id; k++) {
            bool beside = (t->flags & DAG_F_GROUPED) && ids[k + 1] == id;
            at = fmax(at, beside ? st[ids[k]] : st[ids[k]] + du[ids[k]]);
        }
        st[id] = at;
    }
    tiles_free(tl);
}

/* g's schedule (st, du) as profiler traces, one per rank, into dir d. */
static void write_ranks(const char *d, const dag *g, const calib *cb, const double *st, const double *du)
{
    for (int r = 0; r < config_ranks(dag_config(g)); r++) {
        char *path;
        ck_assert_int_ge(asprintf(&path, "%s/rank%d.pt.trace.json", d, r), 0);
        FILE *f = fopen(path, "w");
        ck_assert_int_eq(kineto_write_rank(f, g, cb, r, st, du), 0);
        fclose(f);
        free(path);
    }
}

START_TEST(round_trip)
{
    char err[LOONG_ERRLEN];
    calib *cb = calib_parse(TABLE, "table", err);
    ck_assert_msg(cb, "%s", err);
    config c = tcfg("llama3-8b", 64 * 1024, "usp", 2, 4, 4, SCOPE_STEP);
    c.model.layers = 2;
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    dag *g = tbuild(&c);
    uint32_t n = dag_ntasks(g);
    double *st = calloc(n, sizeof *st), *du = calloc(n, sizeof *du);
    schedule(g, cb, st, du);
    char *d = tmpdir();
    write_ranks(d, g, cb, st, du);
    kineto_names *names = kineto_names_default();
    kineto_set s;
    const char *paths[] = {d};
    ck_assert_msg(kineto_set_open(paths, 1, names, NULL, &s, err) == 0, "%s", err);
    /* the same profile from both sides */
    trace t = {0};
    t.cfg = c;
    t.ev = calloc(n, sizeof *t.ev);
    for (uint32_t i = 0; i < n; i++) {
        const dag_task *k = dag_task_get(g, i);
        t.ev[t.n++] = (trace_ev){.ts = trace_us(st[i]),
                                 .dur = trace_us(du[i]),
                                 .id = i,
                                 .rank = k->rank,
                                 .stream = k->stream,
                                 .kind = k->kind,
                                 .layer = k->layer};
    }
    kprof pp, pm;
    kprof_of_trace(&t, g, &pp);
    kprof_of_kineto(&s, &pm);
    for (int k = 0; k < KINETO_KINDS; k++)
        ck_assert_msg(fabs(kprof_kind_total(&pp, k) - kprof_kind_total(&pm, k)) < 1e-6 * (1 + kprof_kind_total(&pp, k)),
                      "%s: %g vs %g", kineto_kind_name(k), kprof_kind_total(&pp, k), kprof_kind_total(&pm, k));
    ck_assert_double_eq_tol(kprof_exposed_total(&pp), kprof_exposed_total(&pm), 1e-6);
    ck_assert_double_eq_tol(pp.run_step_us, pm.run_step_us, 1e-6);
    kprof_free(&pp);
    kprof_free(&pm);
    /* calibrate: every attention and GEMM kernel has its shapes */
    calibrate_points *pts = calibrate_points_new();
    kineto_calib_counts cnt = {0};
    kineto_calib_points(pts, &s, cb, &cnt);
    ck_assert_uint_eq(cnt.shaped, cnt.compute);
    calibrate_result res;
    ck_assert_msg(calibrate_fit(pts, cb, false, &res, err) == 0, "%s", err);
    static const struct {
        int kind;
        double t0, rate;
    } want[] = {{TASK_ATTN_FWD, 20e-6, 500e12}, {TASK_ATTN_BWD, 30e-6, 400e12}, {TASK_GEMM, 8e-6, 700e12}};
    for (int i = 0; i < 3; i++) {
        const calibrate_fit_of *f = &res.kind[want[i].kind];
        ck_assert_int_eq(f->status, CAL_FITTED);
        ck_assert_msg(rel(1 / f->line.c1, want[i].rate) < 0.02, "%s rate %g", task_kind_name(want[i].kind),
                      1 / f->line.c1);
        /* a backward GEMM is two kernels of half its time: the GEMM's
         * start-up comes back between half and all of the table's */
        if (want[i].kind != TASK_GEMM)
            ck_assert_msg(rel(f->line.c0, want[i].t0) < 0.02, "%s t0 %g", task_kind_name(want[i].kind), f->line.c0);
        else
            ck_assert(f->line.c0 >= want[i].t0 / 2 * 0.98 && f->line.c0 <= want[i].t0 * 1.02);
    }
    calibrate_points_free(pts);
    /* and the transfers as nccl-tests logs: one row per size, 50 us each */
    nccl_log *logs;
    int nlogs;
    kineto_calib_logs(&s, 8, &logs, &nlogs, &cnt);
    ck_assert_int_gt(nlogs, 0);
    ck_assert_uint_eq(cnt.sized, cnt.nccl);
    for (int i = 0; i < nlogs; i++) {
        for (int j = 0; j < logs[i].nrows; j++)
            ck_assert_double_eq_tol(logs[i].rows[j].time_s, 50e-6, 1e-9);
        nccl_log_free(&logs[i]);
    }
    free(logs);
    kineto_set_free(&s);
    kineto_names_free(names);
    free(t.ev);
    free(st);
    free(du);
    dag_free(g);
    calib_free(cb);
    rmdir_all(d);
}
END_TEST

/* Memory-bound kernels: a one-rank trace of residual adds (aten::add,
 * two bf16 inputs of n elements: 6n bytes) and RMSNorm forwards (x of n
 * elements and a weight of 4096: 4n + 8192 bytes) at six sizes each, every
 * kernel exactly T0 + bytes / rate (add 4 us at 1.5 TB/s, norm 6 us at 2
 * TB/s); the add's third input, a Scalar (alpha), is no tensor. The fit
 * gives back each kind's T0 and rate. */
START_TEST(memory_bound_fit)
{
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    fprintf(f, "{\"schemaVersion\":1,\"traceEvents\":[\n{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":"
               "\"ProfilerStep#1\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":1000000}");
    double ts = 10;
    for (int i = 0; i < 12; i++) {
        bool add = i < 6;
        double n = 4096.0 * (double)(256 << (i % 6)), bytes = add ? 6 * n : 4 * n + 8192;
        double dur = add ? 4 + bytes / 1.5e6 : 6 + bytes / 2e6; /* us: bytes over B/us */
        const char *op = add ? "aten::add" : "te::rmsnorm_fwd";
        const char *kern = add ? "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::"
                                 "BFloat16>>"
                               : "void transformer_engine::normalization::rmsnorm_fwd_tuned_kernel<bf16>";
        char dims[200];
        if (add)
            snprintf(dims, sizeof dims,
                     "[[%.0f,4096],[%.0f,4096],[]],\"Input type\":[\"c10::BFloat16\",\"c10::BFloat16\",\"Scalar\"]",
                     n / 4096, n / 4096);
        else
            snprintf(dims, sizeof dims, "[[%.0f,4096],[4096]],\"Input type\":[\"c10::BFloat16\",\"c10::BFloat16\"]",
                     n / 4096);
        fprintf(f,
                ",\n{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"%s\",\"pid\":1,\"tid\":1,\"ts\":%g,\"dur\":1,"
                "\"args\":{\"External id\":%d,\"Input Dims\":%s}}",
                op, ts - 2, 100 + i, dims);
        fprintf(f,
                ",\n{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,"
                "\"ts\":%g,\"dur\":1,\"args\":{\"External id\":%d,\"correlation\":%d}}",
                ts - 1, 100 + i, 5000 + i);
        fprintf(f,
                ",\n{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"%s\",\"pid\":0,\"tid\":7,\"ts\":%g,\"dur\":%.6f,"
                "\"args\":{\"External id\":%d,\"correlation\":%d,\"stream\":7}}",
                kern, ts, dur, 100 + i, 5000 + i);
        ts += dur + 20;
    }
    fprintf(f, "\n]}\n");
    fclose(f);
    char *d = tmpdir(), err[LOONG_ERRLEN];
    free(write_temp(d, "rank0.json", buf, len));
    free(buf);
    kineto_names *names = kineto_names_default();
    kineto_set s;
    const char *paths[] = {d};
    ck_assert_msg(kineto_set_open(paths, 1, names, NULL, &s, err) == 0, "%s", err);
    calib *cb = calib_parse(TABLE, "table", err);
    ck_assert_msg(cb, "%s", err);
    calibrate_points *pts = calibrate_points_new();
    kineto_calib_counts cnt = {0};
    kineto_calib_points(pts, &s, cb, &cnt);
    ck_assert_uint_eq(cnt.membound, 12);
    ck_assert_uint_eq(cnt.sized_mem, 12);
    calibrate_result res;
    ck_assert_msg(calibrate_fit(pts, cb, false, &res, err) == 0, "%s", err);
    static const struct {
        int kind;
        double t0, rate;
    } want[] = {{TASK_ADD, 4e-6, 1.5e12}, {TASK_NORM, 6e-6, 2e12}};
    for (int i = 0; i < 2; i++) {
        const calibrate_fit_of *fo = &res.kind[want[i].kind];
        ck_assert_int_eq(fo->status, CAL_FITTED);
        ck_assert_msg(rel(1 / fo->line.c1, want[i].rate) < 1e-3, "%s rate %g", task_kind_name(want[i].kind),
                      1 / fo->line.c1);
        ck_assert_msg(rel(fo->line.c0, want[i].t0) < 1e-3, "%s t0 %g", task_kind_name(want[i].kind), fo->line.c0);
    }
    calibrate_points_free(pts);
    calib_free(cb);
    kineto_set_free(&s);
    kineto_names_free(names);
    rmdir_all(d);
}
END_TEST

/* GEMM shapes both ways: a schedule timed by a table with `gemm shape`
 * rows, written as profiler traces, gives back each GEMM's shape, its
 * layout as Megatron runs it (forward tn (m, n, k), dgrad nn (m, k, n),
 * wgrad nt (n, k, m)) and the table's efficiency at that shape. */
START_TEST(gemm_shapes_round_trip)
{
    char err[LOONG_ERRLEN], *text;
    ck_assert_int_ge(asprintf(&text,
                              "%sgemm shape tn 4096 4096 4096 0.8\ngemm shape nn 512 512 512 0.4\n"
                              "gemm shape nt 512 512 512 0.3\ngemm shape any 65536 256 256 0.6\n",
                              TABLE),
                     0);
    calib *cb = calib_parse(text, "table", err);
    ck_assert_msg(cb, "%s", err);
    config c = tcfg("llama3-8b", 16 * 1024, "usp", 2, 2, 2, SCOPE_STEP);
    c.model.layers = 2;
    ck_assert_msg(config_validate(&c, err) == 0, "%s", err);
    dag *g = tbuild(&c);
    uint32_t n = dag_ntasks(g);
    double *st = calloc(n, sizeof *st), *du = calloc(n, sizeof *du);
    schedule(g, cb, st, du);
    char *d = tmpdir();
    write_ranks(d, g, cb, st, du);
    kineto_names *names = kineto_names_default();
    kineto_set s;
    const char *paths[] = {d};
    ck_assert_msg(kineto_set_open(paths, 1, names, NULL, &s, err) == 0, "%s", err);
    kineto_gemm_shape *v;
    size_t left, ns = kineto_calib_gemm_shapes(&s, cb, &v, &left);
    int layouts[GEMM_LAYOUTS] = {0};
    for (size_t i = 0; i < ns; i++) {
        layouts[v[i].layout]++;
        bool found = false; /* the shape is one of a DAG GEMM's, in its layout */
        for (uint32_t id = 0; id < n && !found; id++) {
            const dag_task *t = dag_task_get(g, id);
            if (t->kind != TASK_GEMM) continue;
            int64_t m = (int64_t)t->dim[0], nn = (int64_t)t->dim[1], k = (int64_t)t->dim[2];
            if (t->phase != PHASE_BWD)
                found = v[i].layout == GEMM_TN && v[i].m == m && v[i].n == nn && v[i].k == k;
            else
                found = (v[i].layout == GEMM_NN && v[i].m == m && v[i].n == k && v[i].k == nn) ||
                        (v[i].layout == GEMM_NT && v[i].m == nn && v[i].n == k && v[i].k == m);
        }
        ck_assert_msg(found, "%s %lld %lld %lld is no GEMM of the DAG", calib_gemm_layout_name(v[i].layout),
                      (long long)v[i].m, (long long)v[i].n, (long long)v[i].k);
        double want = calib_gemm_eff(cb, v[i].layout, (double)v[i].m, (double)v[i].n, (double)v[i].k);
        /* the traces keep times to the ns: a 1-ns error over the shortest
         * GEMM's busy time (tens of us) */
        ck_assert_msg(!v[i].clamped && rel(v[i].eff, want) < 1e-4, "eff %g, the table's %g", v[i].eff, want);
        ck_assert_double_eq_tol(v[i].median_s,
                                calib_gemm_seconds(cb, v[i].layout, (double)v[i].m, (double)v[i].n, (double)v[i].k, 0),
                                1e-9);
    }
    ck_assert(layouts[GEMM_TN] > 0 && layouts[GEMM_NN] > 0 && layouts[GEMM_NT] > 0 && layouts[GEMM_ANY] == 0);
    /* the rows set: the table times each measured shape at its median */
    for (size_t i = 0; i < ns; i++)
        ck_assert_int_eq(
            calib_set_gemm_shape(cb, v[i].layout, (uint64_t)v[i].m, (uint64_t)v[i].n, (uint64_t)v[i].k, v[i].eff, err),
            0);
    for (size_t i = 0; i < ns; i++)
        ck_assert(rel(calib_gemm_seconds(cb, v[i].layout, (double)v[i].m, (double)v[i].n, (double)v[i].k, 0),
                      v[i].median_s) < 1e-6);
    free(v);
    kineto_set_free(&s);
    kineto_names_free(names);
    free(st);
    free(du);
    free(text);
    dag_free(g);
    calib_free(cb);
    rmdir_all(d);
}
END_TEST

/* Attention kernels of many block geometries (causal diagonals, partial
 * tiles, rectangles) timed at 64 x 128 tiles: calibrate measures that
 * tile against a base table that declares 128 x 128, and the rate. */
START_TEST(tile_is_measured)
{
    static const int64_t sq[] = {100, 300, 700, 1000, 1500, 2200, 3000, 4100, 5000, 8192};
    kineto_rank r = {0};
    r.k = calloc(2 * 10, sizeof *r.k);
    for (int i = 0; i < 20; i++) {
        kineto_kernel *k = &r.k[r.nk++];
        *k = (kineto_kernel){.kind = TASK_ATTN_FWD, .step = 0, .batch = 1, .heads = 32, .head_dim = 128};
        k->sq = sq[i % 10];
        k->sk = i < 10 ? k->sq : 2 * k->sq + 77;
        k->causal = i < 10;
        k->flops = 4.0 * (double)kineto_attn_pairs(k->sq, k->sk, k->causal) * 128 * 32;
        k->dur = 1e6 * (20e-6 + kineto_kernel_work_at(k, 64, 128) / 500e12);
    }
    kineto_set s = {.r = &r, .n = 1, .nsteps = 1};
    char err[LOONG_ERRLEN];
    calib *base = calib_parse(TABLE, "table", err);
    calibrate_points *pts = calibrate_points_new();
    kineto_calib_counts cnt = {0};
    kineto_calib_points(pts, &s, base, &cnt);
    calibrate_result res;
    ck_assert_msg(calibrate_fit(pts, base, false, &res, err) == 0, "%s", err);
    ck_assert(res.tile[0].measured);
    ck_assert_int_ge(res.tile[0].chosen, 0);
    ck_assert_int_eq(calibrate_tile_shapes[res.tile[0].chosen][0], 64);
    ck_assert_int_eq(calibrate_tile_shapes[res.tile[0].chosen][1], 128);
    ck_assert(rel(1 / res.kind[TASK_ATTN_FWD].line.c1, 500e12) < 0.02);
    ck_assert(rel(res.kind[TASK_ATTN_FWD].line.c0, 20e-6) < 0.02);
    ck_assert_int_eq(calibrate_apply(&res, base, err), 0);
    int br, bc;
    ck_assert(calib_tile(base, TASK_ATTN_FWD, &br, &bc));
    ck_assert(br == 64 && bc == 128);
    /* one geometry per shape class cannot tell shapes apart: none is taken */
    calibrate_points_free(pts);
    pts = calibrate_points_new();
    r.nk = 4; /* sq 100, 300, 700, 1000 causal: four block sizes still tell */
    for (size_t i = 0; i < r.nk; i++)
        r.k[i].sq = r.k[i].sk = 4096, r.k[i].dur *= 1 + 0.0 * (double)i;
    kineto_calib_points(pts, &s, base, &cnt);
    ck_assert_int_eq(calibrate_fit(pts, base, false, &res, err), 0);
    ck_assert_int_eq(res.tile[0].chosen, -1);
    calibrate_points_free(pts);
    calib_free(base);
    free(r.k);
}
END_TEST

/* The commands end to end: loong sim writes both forms, loong compare
 * --kineto finds no difference between them (given the prediction, or
 * simulating it from options or from a DAG JSON), and loong calibrate
 * --kineto recovers the table the simulation ran with. */
START_TEST(cli_end_to_end)
{
#ifndef HAVE_SIMGRID
    return; /* no loong sim to predict with */
#endif
    char *d = tmpdir();
    char *table = write_temp(d, "rt.calib", TABLE, strlen(TABLE));
    const char *cfg = "--model tiny --seq 8K --mesh 2x2 --strategy usp --scope step";
    const char *plat = LOONG_SRCDIR "/topologies/dgx-h100-1n.xml";
    run_result r =
        run_cmd("%s sim --platform %s --calib %s %s --trace %s/k --trace-format kineto --quiet && %s sim "
                "--platform %s --calib %s %s --trace %s/pred.json --quiet && %s dag %s --format json >%s/dag.json",
                LOONG_BIN, plat, table, cfg, d, LOONG_BIN, plat, table, cfg, d, LOONG_BIN, cfg, d);
    ck_assert_msg(r.status == 0, "%s", r.err);
    const char *how[3] = {"--predicted %s/pred.json", "--platform %s --calib %s %s",
                          "--platform %s --calib %s --config %s/dag.json"};
    for (int i = 0; i < 3; i++) {
        char pred[1024];
        if (i == 0) snprintf(pred, sizeof pred, how[0], d);
        if (i == 1) snprintf(pred, sizeof pred, how[1], plat, table, cfg);
        if (i == 2) snprintf(pred, sizeof pred, how[2], plat, table, d);
        r = run_cmd("%s compare --kineto %s/k %s --json %s/cmp.json --max-error 0.001", LOONG_BIN, d, pred, d);
        ck_assert_msg(r.status == 0, "%s: %s", pred, r.err);
        char path[512];
        snprintf(path, sizeof path, "%s/cmp.json", d);
        json_error_t je;
        json_t *j = json_load_file(path, 0, &je), *k;
        ck_assert_ptr_nonnull(j);
        ck_assert_double_eq_tol(json_real_value(json_object_get(j, "step_error_pct")), 0, 1e-6);
        size_t at;
        json_array_foreach(json_object_get(j, "kinds"), at, k)
        {
            json_t *e = json_object_get(k, "error_pct");
            ck_assert_msg(json_is_real(e) && fabs(json_real_value(e)) < 1e-3, "%s",
                          json_string_value(json_object_get(k, "kind")));
        }
        json_decref(j);
    }
    r = run_cmd("%s calibrate --kineto %s/k --platform %s --calib %s -o %s/fit", LOONG_BIN, d, plat, table, d);
    ck_assert_msg(r.status == 0, "%s", r.err);
    char path[512], err[LOONG_ERRLEN];
    snprintf(path, sizeof path, "%s/fit/h100.calib", d);
    calib *fit = calib_load(path, err), *want = calib_parse(TABLE, "table", err);
    ck_assert_msg(fit && want, "%s", err);
    static const int kinds[] = {TASK_ATTN_FWD, TASK_ATTN_BWD, TASK_GEMM};
    for (int i = 0; i < 3; i++) /* time of a 1 GFLOP kernel of each kind */
        ck_assert_msg(rel(calib_seconds(fit, kinds[i], 1e12, 0, 4096), calib_seconds(want, kinds[i], 1e12, 0, 4096)) <
                          0.02,
                      "%s", task_kind_name(kinds[i]));
    calib_free(fit);
    calib_free(want);
    free(table);
    rmdir_all(d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kineto");
    TCase *tc = tcase_create("kineto");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, constructed_exactly);
    tcase_add_test(tc, nccl_names);
    tcase_add_test(tc, unfused_names);
    tcase_add_test(tc, memory_bound_fit);
    tcase_add_test(tc, attention_closed_forms);
    tcase_add_test(tc, public_traces);
    tcase_add_test(tc, memory_events);
    tcase_add_test(tc, bad_inputs);
    tcase_add_test(tc, round_trip);
    tcase_add_test(tc, gemm_shapes_round_trip);
    tcase_add_test(tc, cli_end_to_end);
    tcase_add_test(tc, tile_is_measured);
    suite_add_tcase(s, tc);
    return check_run(s);
}

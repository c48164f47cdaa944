/* calib: the calibration table (parser, evaluator, writer) and the units it
 * reads (bandwidths, durations, SI rates). Expected values are computed here
 * from the format's definition (docs/sim.md, "Calibration tables"). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/calib.h"
#include "model/tiles.h"
#include "core/elementwise.h"
#include "core/fusion.h"
#include "dag_util.h"
#include "check_run.h"

#define CLOSE(a, b) ck_assert_msg(fabs((a) - (b)) <= 1e-12 * fabs(b) + 1e-300, "%.17g != %.17g", (a), (b))

static const char table[] = "# test table\n"
                            "gpu test\n"
                            "peak 1000T   # FLOP/s\n"
                            "mem_bw 2TBps\n"
                            "\n"
                            "gemm curve flops 4us 1G:0.25 100G:0.75\n"
                            "attn_fwd curve tokens 5us 1K:0.5 4K:0.7\n"
                            "attn_bwd line 2us 400T\n"
                            "merge line 3us 1TBps\n"
                            "acc curve bytes 1us 1M:0.5\n";

START_TEST(units_real)
{
    double v;
    char err[LOONG_ERRLEN];
    ck_assert_int_eq(units_parse_bandwidth("450GBps", "--nvlink", &v, err), 0);
    CLOSE(v, 450e9);
    ck_assert_int_eq(units_parse_bandwidth("400Gbps", "--nic", &v, err), 0);
    CLOSE(v, 50e9);
    ck_assert_int_eq(units_parse_bandwidth("3.35TBps", "x", &v, err), 0);
    CLOSE(v, 3.35e12);
    ck_assert_int_eq(units_parse_bandwidth("1e9", "x", &v, err), 0);
    CLOSE(v, 1e9);
    ck_assert_int_eq(units_parse_time("4us", "t", &v, err), 0);
    CLOSE(v, 4e-6);
    ck_assert_int_eq(units_parse_time("1.5ms", "t", &v, err), 0);
    CLOSE(v, 1.5e-3);
    ck_assert_int_eq(units_parse_time("0", "t", &v, err), 0);
    CLOSE(v, 0.0);
    ck_assert_int_eq(units_parse_si("989T", "peak", &v, err), 0);
    CLOSE(v, 989e12);
    static const char *bad[] = {"", "-1GBps", "450GB", "450Gbit", "GBps", "0GBps", "1e999GBps", " 4GBps"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(units_parse_bandwidth(bad[i], "--nic", &v, err) == -1, "accepted '%s'", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, "--nic"));
    }
    ck_assert_int_eq(units_parse_time("4 us", "t", &v, err), -1);
    ck_assert_int_eq(units_parse_time("4h", "t", &v, err), -1);
    ck_assert_int_eq(units_parse_si("5X", "peak", &v, err), -1);
}
END_TEST

START_TEST(evaluate_closed_forms)
{
    char err[LOONG_ERRLEN] = "";
    calib *cb = calib_parse(table, "t.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    ck_assert_str_eq(calib_gpu(cb), "test");
    CLOSE(calib_peak(cb), 1e15);
    CLOSE(calib_mem_bw(cb), 2e12);
    /* gemm: eff interpolated in log x between 1G:0.25 and 100G:0.75; 10G is halfway */
    double f = 10e9;
    CLOSE(calib_seconds(cb, TASK_GEMM, f, 0, 0), 4e-6 + f / (0.5 * 1e15));
    /* clamped below the first and above the last point */
    CLOSE(calib_seconds(cb, TASK_GEMM, 1e6, 0, 0), 4e-6 + 1e6 / (0.25 * 1e15));
    CLOSE(calib_seconds(cb, TASK_GEMM, 1e13, 0, 0), 4e-6 + 1e13 / (0.75 * 1e15));
    /* attention on tokens: 2K is halfway in log between 1K and 4K */
    CLOSE(calib_seconds(cb, TASK_ATTN_FWD, 1e12, 0, 2048), 5e-6 + 1e12 / (0.6 * 1e15));
    CLOSE(calib_seconds(cb, TASK_ATTN_BWD, 1e12, 0, 0), 2e-6 + 1e12 / 400e12);
    /* memory-bound kinds take bytes */
    CLOSE(calib_seconds(cb, TASK_MERGE, 0, 1e9, 0), 3e-6 + 1e9 / 1e12);
    CLOSE(calib_seconds(cb, TASK_ACC, 0, 1e9, 0), 1e-6 + 1e9 / (0.5 * 2e12));
    ck_assert(calib_seconds(cb, TASK_SEND, 1, 1, 1) == 0);
    calib_free(cb);
}
END_TEST

START_TEST(task_bytes_and_seconds)
{
    char err[LOONG_ERRLEN] = "";
    calib *cb = calib_parse(table, "t.calib", err);
    ck_assert_ptr_nonnull(cb);
    config c = tcfg("tiny", 16 * 1024, "zigzag", 1, 4, 0, SCOPE_ATTN);
    dag *g = tbuild(&c);
    int seen = 0;
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        double s = calib_task_seconds(cb, &c, NULL, t);
        if (t->kind == TASK_MERGE) {
            uint64_t elems = (uint64_t)t->dim[0] * t->dim[2] * (uint64_t)c.model.head_dim * (uint64_t)c.batch;
            ck_assert_uint_eq(calib_task_bytes(&c, t), elems * (8 + (uint64_t)c.act_bytes));
            CLOSE(s, 3e-6 + (double)calib_task_bytes(&c, t) / 1e12);
            seen |= 1;
        } else if (t->kind == TASK_ACC) {
            ck_assert_uint_eq(calib_task_bytes(&c, t), 12 * t->flops);
            seen |= 2;
        } else if (t->kind == TASK_ATTN_BWD) {
            CLOSE(s, 2e-6 + (double)t->flops / 400e12);
            seen |= 4;
        } else if (!task_is_compute(t)) {
            ck_assert(s == 0);
        }
    }
    ck_assert_int_eq(seen, 7);
    dag_free(g);
    calib_free(cb);
}
END_TEST

/* What calib_write writes of cb, read back by calib_parse (asserted). */
static calib *rewritten(const calib *cb)
{
    char *buf = NULL, err[LOONG_ERRLEN] = "";
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(calib_write(f, cb), 0);
    fclose(f);
    calib *back = calib_parse(buf, "written", err);
    ck_assert_msg(back != NULL, "%s\n%s", err, buf);
    free(buf);
    return back;
}

/* A table's tile lines time attention by the tiles a block touches: one
 * causal block of S = 2K tokens of tiny (P_s = 1, contiguous) has
 * S(S+1)/2 pairs, 16 * 17 / 2 = 136 tiles of 128 x 128 (the forward's) and
 * twice as many of 64 x 128 (the backward's: two 64-row tiles per
 * 128-column step of the diagonal), so each pass takes its FLOPs x tiles x
 * area / pairs. calib_write keeps the lines. */
START_TEST(tile_granular_attention)
{
    char err[LOONG_ERRLEN] = "", text[1024];
    snprintf(text, sizeof text, "%stile attn_fwd 128x128\ntile attn_bwd 64x128\n", table);
    calib *cb = calib_parse(text, "t.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    int br, bc;
    ck_assert(calib_tile(cb, TASK_ATTN_FWD, &br, &bc) && br == 128 && bc == 128);
    ck_assert(calib_tile(cb, TASK_ATTN_BWD, &br, &bc) && br == 64 && bc == 128);
    ck_assert(!calib_tile(cb, TASK_GEMM, &br, &bc));
    config c = tcfg("tiny", 2 * 1024, "ring", 1, 1, 0, SCOPE_ATTN);
    c.partition = PART_CONTIGUOUS;
    dag *g = tbuild(&c);
    tiles *tl = tiles_new(cb, &c);
    ck_assert_ptr_nonnull(tl);
    const double S = 2048, pairs = S * (S + 1) / 2, fwd = 136 * 128.0 * 128, bwd = 272 * 64.0 * 128;
    int seen = 0;
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->kind == TASK_ATTN_FWD) {
            CLOSE(tiles_task_flops(tl, t), (double)t->flops * fwd / pairs);
            CLOSE(calib_task_seconds(cb, &c, tl, t),
                  calib_seconds(cb, TASK_ATTN_FWD, (double)t->flops * fwd / pairs, 0, (double)t->dim[0]));
            seen |= 1;
        } else if (t->kind == TASK_ATTN_BWD) {
            CLOSE(tiles_task_flops(tl, t), (double)t->flops * bwd / pairs);
            seen |= 2;
        } else if (task_is_compute(t)) {
            CLOSE(tiles_task_flops(tl, t), (double)t->flops);
        }
    }
    ck_assert_int_eq(seen, 3);
    calib *back = rewritten(cb);
    ck_assert(calib_tile(back, TASK_ATTN_BWD, &br, &bc) && br == 64 && bc == 128);
    calib_free(back);
    tiles_free(tl);
    dag_free(g);
    calib_free(cb);
    cb = calib_parse(table, "t.calib", err);
    ck_assert_ptr_null(tiles_new(cb, &c)); /* no tile line: exact pairs */
    calib_free(cb);
}
END_TEST

/* Each malformed table is rejected with one line naming file:line. */
START_TEST(malformed_rows)
{
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm curve flops 4us 1G:1.5\n", "t.calib:4:"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm curve flops 4us 1G:0.5 1M:0.6\n", "increase"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm curve furlongs 4us 1G:0.5\n", "furlongs"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm line 4us\n", "t.calib:4:"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm line 4us 2T\n", "peak"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm line 4parsecs 1T\n", "T0"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\nwarp line 4us 1T\n", "warp"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm fit 1 2\n", "fit"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm line 1us 1T\ngemm line 1us 1T\n", "duplicate"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm line 1us 1T\n", "attn_fwd"},
        {"peak 1T\nmem_bw 1TBps\n", "gpu"},
        {"gpu x\npeak fast\n", "t.calib:2:"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm curve flops 4us 1G\n", "x:efficiency"},
        {"gpu x\npeak 1T guessed\n", "'assumed'"},
        {"gpu x assumed\n", "'gpu' takes one value"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ntile gemm 128x64\n", "attention kind"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ntile attn_fwd 128\n", "'128' is not ROWSxCOLUMNS"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ntile attn_fwd 0x64\n", "[1, 4096]"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ntile attn_fwd 128x8192\n", "[1, 4096]"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ntile attn_bwd 64x128z\n", "ROWSxCOLUMNS"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ntile attn_bwd 64x128\ntile attn_bwd 64x64\n", "second 'tile'"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm shape tn 4096 1536 5120\n", "LAYOUT M N K EFF"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm shape tt 4096 1536 5120 0.5\n", "'tt' is not one of"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm shape tn 0 1536 5120 0.5\n", "t.calib:4:"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm shape tn 4096 8G 5120 0.5\n", "[1, 4294967295]"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm shape nt 4096 1536 5120 1.2\n", "[1e-9, 1]"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm shape nt 4096 1536 5120 fast\n", "'fast'"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm shape nn 4K 2 3 0.5\ngemm shape nn 4096 2 3 0.6\n", "second 'gemm shape'"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\ngemm skip\n", "(elementwise) 'skip'"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\nacc skip\n", "(elementwise) 'skip'"},
        {"gpu x\npeak 1T\nmem_bw 1TBps\nnorm skip 3us\n", "'norm skip' takes nothing"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[LOONG_ERRLEN] = "";
        calib *cb = calib_parse(bad[i].text, "t.calib", err);
        ck_assert_msg(cb == NULL, "accepted table %zu", i);
        ck_assert_msg(strstr(err, bad[i].needle) != NULL, "table %zu: '%s' lacks '%s'", i, err, bad[i].needle);
        ck_assert_ptr_null(strchr(err, '\n'));
    }
}
END_TEST

/* What calib_write writes, calib_parse reads back to the same numbers. */
START_TEST(round_trip)
{
    char err[LOONG_ERRLEN] = "";
    calib *cb = calib_parse(table, "t.calib", err);
    ck_assert_ptr_nonnull(cb);
    ck_assert_int_eq(calib_set_line(cb, TASK_GEMM, 6e-6, 7.7e14, err), 0);
    ck_assert_int_eq(calib_set_line(cb, TASK_GEMM, 6e-6, 2e15, err), -1); /* above peak */
    calib *back = rewritten(cb);
    for (int k = TASK_GEMM; k <= TASK_ACC; k++)
        for (double x = 1e6; x < 1e14; x *= 7.3)
            CLOSE(calib_seconds(back, k, x, x / 3, x / 1e6), calib_seconds(cb, k, x, x / 3, x / 1e6));
    CLOSE(calib_seconds(back, TASK_GEMM, 1e12, 0, 0), 6e-6 + 1e12 / 7.7e14);
    calib_free(cb);
    calib_free(back);
    /* an assumed reference stays assumed */
    cb = calib_parse("gpu x\npeak 1T assumed\nmem_bw 1TBps\ngemm line 1us 1T\nattn_fwd line 1us 1T\n"
                     "attn_bwd line 1us 1T\nmerge line 1us 1TBps\nacc line 1us 1TBps\n",
                     "a.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    ck_assert(calib_assumed(cb, TASK_GEMM) && !calib_assumed(cb, TASK_MERGE));
    back = rewritten(cb);
    ck_assert(calib_assumed(back, TASK_ATTN_FWD));
    calib_free(cb);
    calib_free(back);
}
END_TEST

/* The shipped default tables load, never exceed peak, and name their GPU. */
START_TEST(shipped_tables)
{
    static const char *kinds[] = {"h100", "h200", "a100", "a100-pcie", "b200", "b300", "gb200", "gb300"};
    for (int i = 0; i < 8; i++) {
        char path[1024], err[LOONG_ERRLEN] = "";
        snprintf(path, sizeof path, "%s/topologies/%s.calib", LOONG_SRCDIR, kinds[i]);
        calib *cb = calib_load(path, err);
        ck_assert_msg(cb != NULL, "%s", err);
        ck_assert_str_eq(calib_gpu(cb), kinds[i]);
        for (int k = TASK_GEMM; k <= TASK_ATTN_BWD; k++)
            for (double x = 1e3; x < 1e15; x *= 10)
                ck_assert(x / calib_seconds(cb, k, x, 0, x) <= calib_peak(cb));
        calib_free(cb);
    }
    char err[LOONG_ERRLEN];
    ck_assert_ptr_null(calib_load("/nonexistent/x.calib", err));
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/x.calib"));
}
END_TEST

/* ---- GEMM shapes (calib.h, "GEMM shapes") ---- */

static const char shaped[] = "gpu s\npeak 1000T\nmem_bw 2TBps\n"
                             "gemm line 4us 500T\nattn_fwd line 1us 1T\nattn_bwd line 1us 1T\n"
                             "merge line 1us 1TBps\nacc line 1us 1TBps\n"
                             "gemm shape tn 1024 1024 1024 0.4\n"
                             "gemm shape tn 4096 1024 1024 0.8\n"
                             "gemm shape nn 1024 1024 1024 0.5\n"
                             "gemm shape any 2048 2048 2048 0.7\n";

/* Exact at a row; between two rows on one axis the power-4 weights of
 * distances f and 1 - f in log2 space (closed form), monotone and within
 * the two rows; flat beyond them; a layout without rows takes `any`'s,
 * and without either the line. */
START_TEST(gemm_shape_interpolation)
{
    char err[LOONG_ERRLEN] = "";
    calib *cb = calib_parse(shaped, "s.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    ck_assert(calib_has_gemm_shapes(cb));
    CLOSE(calib_gemm_eff(cb, GEMM_TN, 1024, 1024, 1024), 0.4);
    CLOSE(calib_gemm_eff(cb, GEMM_TN, 4096, 1024, 1024), 0.8);
    double prev = 0.4;
    for (double f = 0.125; f < 1; f += 0.125) { /* m = 1024 * 4^f: distance 2f and 2(1-f) */
        double a = pow(2 * f, 4), b = pow(2 * (1 - f), 4), want = (0.4 / a + 0.8 / b) / (1 / a + 1 / b);
        double e = calib_gemm_eff(cb, GEMM_TN, 1024 * pow(4, f), 1024, 1024);
        CLOSE(e, want);
        ck_assert(e >= prev && e > 0.4 && e < 0.8);
        prev = e;
    }
    CLOSE(calib_gemm_eff(cb, GEMM_TN, 2048, 1024, 1024), 0.6); /* the midpoint: the mean */
    CLOSE(calib_gemm_eff(cb, GEMM_TN, 64, 1024, 1024), 0.4);   /* flat beyond the rows */
    CLOSE(calib_gemm_eff(cb, GEMM_TN, 1 << 20, 1024, 1024), 0.8);
    CLOSE(calib_gemm_eff(cb, GEMM_TN, 1 << 20, 7, 1 << 30), 0.8); /* N and K span one value: clamped onto it */
    CLOSE(calib_gemm_eff(cb, GEMM_NN, 5, 6, 7), 0.5);             /* its single row everywhere */
    CLOSE(calib_gemm_eff(cb, GEMM_NT, 3, 3, 3), 0.7);             /* no nt rows: any's */
    /* a GEMM's time: T0 + 2mnk / (eff x peak) */
    CLOSE(calib_gemm_seconds(cb, GEMM_TN, 4096, 1024, 1024, 0), 4e-6 + 2.0 * 4096 * 1024 * 1024 / (0.8 * 1e15));
    calib_free(cb);
    cb = calib_parse("gpu s\npeak 1000T\nmem_bw 2TBps\ngemm line 4us 500T\nattn_fwd line 1us 1T\n"
                     "attn_bwd line 1us 1T\nmerge line 1us 1TBps\nacc line 1us 1TBps\ngemm shape tn 64 64 64 0.5\n",
                     "s.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    ck_assert(calib_gemm_eff(cb, GEMM_NN, 64, 64, 64) < 0); /* no nn and no any rows: the line */
    CLOSE(calib_gemm_seconds(cb, GEMM_NN, 100, 200, 300, 0), 4e-6 + 2.0 * 100 * 200 * 300 / 500e12);
    calib_free(cb);
}
END_TEST

/* A backward GEMM task (m, n, k) is its dgrad nn (m, k, n) and wgrad nt
 * (n, k, m), each 2mnk FLOPs and each paying T0; the forward is one tn
 * (m, n, k). Without shape rows a task is timed by its FLOPs as before. */
START_TEST(gemm_dgrad_wgrad_split)
{
    char err[LOONG_ERRLEN] = "";
    calib *cb = calib_parse("gpu s\npeak 1000T\nmem_bw 2TBps\ngemm line 4us 500T\nattn_fwd line 1us 1T\n"
                            "attn_bwd line 1us 1T\nmerge line 1us 1TBps\nacc line 1us 1TBps\n"
                            "gemm shape tn 512 3072 1024 0.6\ngemm shape nn 512 1024 3072 0.5\n"
                            "gemm shape nt 3072 1024 512 0.25\n",
                            "s.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    double m = 512, n = 3072, k = 1024, f = 2 * m * n * k;
    CLOSE(calib_gemm_task_seconds(cb, m, n, k, false, 0), 4e-6 + f / 0.6e15);
    CLOSE(calib_gemm_task_seconds(cb, m, n, k, true, 0), 4e-6 + f / 0.5e15 + 4e-6 + f / 0.25e15);
    /* a DAG task carries its shape: the builder's GEMMs are timed the same way */
    config c = tcfg("tiny", 16 * 1024, "zigzag", 1, 4, 0, SCOPE_STEP);
    dag *g = tbuild(&c);
    int seen = 0;
    double a = c.act_bytes; /* a DAG task's GEMM moves its operands too (the cost rule) */
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->kind != TASK_GEMM) continue;
        double tm = t->dim[0], tn = t->dim[1], tk = t->dim[2];
        bool bwd = t->phase == PHASE_BWD;
        ck_assert(t->flops == (uint64_t)((bwd ? 4 : 2) * tm * tn * tk));
        double want =
            bwd ? calib_gemm_seconds(cb, GEMM_NN, tm, tk, tn, a) + calib_gemm_seconds(cb, GEMM_NT, tn, tk, tm, a)
                : calib_gemm_seconds(cb, GEMM_TN, tm, tn, tk, a);
        CLOSE(calib_task_seconds(cb, &c, NULL, t), want);
        seen |= bwd ? 2 : 1;
    }
    ck_assert_int_eq(seen, 3);
    calib_free(cb);
    cb = calib_parse(table, "t.calib", err); /* no shapes: by FLOPs */
    ck_assert_msg(cb != NULL, "%s", err);
    ck_assert(!calib_has_gemm_shapes(cb));
    CLOSE(calib_gemm_task_seconds(cb, m, n, k, true, 0), calib_seconds(cb, TASK_GEMM, 2 * f, 0, m));
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->kind == TASK_GEMM)
            CLOSE(calib_task_seconds(cb, &c, NULL, t),
                  calib_gemm_task_seconds(cb, t->dim[0], t->dim[1], t->dim[2], t->phase == PHASE_BWD, a));
    }
    dag_free(g);
    calib_free(cb);
}
END_TEST

/* Shape rows round-trip through calib_write; a raised peak keeps their
 * absolute speed; calibrate's setter refuses what the parser refuses; a
 * fitted gemm line replaces them. */
START_TEST(gemm_shape_round_trip)
{
    char err[LOONG_ERRLEN] = "";
    calib *cb = calib_parse(shaped, "s.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    ck_assert_int_eq(calib_set_gemm_shape(cb, GEMM_NT, 3, 5, 7, 0.123456789, err), 0);
    ck_assert_int_eq(calib_set_gemm_shape(cb, GEMM_NT, 3, 5, 7, 1.5, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "[1e-9, 1]"));
    ck_assert_int_eq(calib_set_gemm_shape(cb, GEMM_NT, 0, 5, 7, 0.5, err), -1);
    calib *back = rewritten(cb);
    for (int l = GEMM_TN; l <= GEMM_ANY; l++)
        for (double x = 100; x < 1e5; x *= 3.7)
            CLOSE(calib_gemm_eff(back, l, x, 2 * x, x / 2), calib_gemm_eff(cb, l, x, 2 * x, x / 2));
    CLOSE(calib_gemm_eff(back, GEMM_NT, 3, 5, 7), 0.123456789);
    double before = calib_gemm_seconds(cb, GEMM_TN, 3000, 1000, 1000, 0);
    calib_raise_reference(cb, TASK_GEMM, 2e15);
    CLOSE(calib_gemm_seconds(cb, GEMM_TN, 3000, 1000, 1000, 0), before);
    ck_assert_int_eq(calib_set_line(cb, TASK_GEMM, 1e-6, 1e15, err), 0);
    ck_assert(!calib_has_gemm_shapes(cb));
    calib_free(cb);
    calib_free(back);
}
END_TEST

/* The shipped shape tables keep their sources' figures: SimuMax's A100
 * PCIe forward of 4096 x 1536 x 5120 at 0.7877 (of 312T) and its wgrad at
 * 0.6245 (configs/system/a100_pcie.json); XLA's sm_90 4096^3 bf16 dot at
 * 780.2 TFLOP/s (of 989T) for H100 and H200; XLA's sm_100 for B200. */
START_TEST(shipped_gemm_shapes)
{
    static const struct {
        const char *gpu;
        int layout;
        double m, n, k, eff;
    } rows[] = {{"a100-pcie", GEMM_TN, 4096, 1536, 5120, 0.7877},
                {"a100-pcie", GEMM_NT, 1536, 5120, 4096, 0.6245},
                {"h100", GEMM_NN, 4096, 4096, 4096, 780.193877565849e12 / 989e12},
                {"h200", GEMM_NT, 4096, 4096, 4096, 780.193877565849e12 / 989e12},
                /* XLA's sm_100 (B200) bf16 dots of 256 x 4096 x 4096 and
                 * 4096^3, of the B200's 2.25 PF; GB200 and GB300 carry the
                 * B200's fractions of their own peak (an assumption) */
                {"b200", GEMM_TN, 256, 4096, 4096, 651394145142943 / 2.25e15},
                {"b200", GEMM_TN, 4096, 4096, 4096, 1416867213789406 / 2.25e15},
                {"gb200", GEMM_TN, 4096, 4096, 4096, 1416867213789406 / 2.25e15},
                {"gb300", GEMM_NN, 4096, 4096, 4096, 1416867213789406 / 2.25e15}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char path[1024], err[LOONG_ERRLEN] = "";
        snprintf(path, sizeof path, "%s/topologies/%s.calib", LOONG_SRCDIR, rows[i].gpu);
        calib *cb = calib_load(path, err);
        ck_assert_msg(cb != NULL, "%s", err);
        ck_assert_str_eq(calib_gpu(cb), rows[i].gpu);
        double e = calib_gemm_eff(cb, rows[i].layout, rows[i].m, rows[i].n, rows[i].k);
        ck_assert_msg(fabs(e - rows[i].eff) < 5e-5, "%s: %g != %g", rows[i].gpu, e, rows[i].eff);
        calib_free(cb);
    }
}
END_TEST

/* The A100 PCIe attention curve keeps SimuMax's measured kernel times
 * (configs/system/a100_pcie.json, sdp_fwd/sdp_bwd at 4096 tokens, head dim
 * 128): its FLOP count is the full square, fwd 4 s^2 h d and bwd 2.5 x that,
 * over factor x 312T; loong's work is the 128x64 / 64x128 tiles' 0.515625
 * s^2 pairs x 4 d h (x 2.5), plus the 5 us T0. 64 query heads, 8 KV heads
 * (factors 1.1870 fwd, 1.0051 bwd), and 4 heads, 1 KV head (0.5142, 0.6747). */
START_TEST(shipped_attention)
{
    static const struct {
        int kind;
        double heads, factor;
    } rows[] = {{TASK_ATTN_FWD, 64, 1.187005822075009},
                {TASK_ATTN_BWD, 64, 1.0050629192555385},
                {TASK_ATTN_FWD, 4, 0.5141956346963809},
                {TASK_ATTN_BWD, 4, 0.6746810734436374}};
    char path[1024], err[LOONG_ERRLEN] = "";
    snprintf(path, sizeof path, "%s/topologies/a100-pcie.calib", LOONG_SRCDIR);
    calib *cb = calib_load(path, err);
    ck_assert_msg(cb != NULL, "%s", err);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        double s = 4096, mult = rows[i].kind == TASK_ATTN_BWD ? 2.5 : 1, full = 4 * s * s * 128 * rows[i].heads * mult;
        double want = 5e-6 + full / (rows[i].factor * 312e12);
        double got = calib_seconds(cb, rows[i].kind, 0.515625 * full, 0, s);
        ck_assert_msg(fabs(got / want - 1) < 2e-4, "row %zu: %g s != %g s", i, got, want);
    }
    calib_free(cb);
}
END_TEST

/* The experts' grouped GEMM (calib_grouped_gemm_seconds): with grouped-*
 * rows one launch, T0 plus the groups' FLOPs at the row's efficiency
 * (forward grouped-tn (m, n, k); backward its dgrad grouped-nn (m, k, n)
 * and wgrad grouped-nt (n, k, m), a launch each); without them, groups
 * separate GEMMs by the dense rows. Grouped rows never time a single GEMM
 * (nor dense rows a grouped one when grouped rows exist), a table with
 * some grouped layouts but not all three is refused, and they round-trip. */
START_TEST(grouped_gemm_rows)
{
    static const char dense[] = "gpu s\npeak 1000T\nmem_bw 2TBps\ngemm line 4us 500T\nattn_fwd line 1us 1T\n"
                                "attn_bwd line 1us 1T\nmerge line 1us 1TBps\nacc line 1us 1TBps\n"
                                "gemm shape any 512 1024 2048 0.6\n";
    static const char grouped[] = "gemm shape grouped-tn 512 1024 2048 0.3\n"
                                  "gemm shape grouped-nn 512 2048 1024 0.25\n"
                                  "gemm shape grouped-nt 1024 2048 512 0.1\n";
    char text[1024], err[LOONG_ERRLEN] = "";
    snprintf(text, sizeof text, "%s%s", dense, grouped);
    calib *plain = calib_parse(dense, "d.calib", err), *cb = calib_parse(text, "g.calib", err);
    ck_assert_msg(plain && cb, "%s", err);
    ck_assert(calib_has_grouped_gemms(cb) && !calib_has_grouped_gemms(plain));
    double g = 16, m = 512, n = 1024, k = 2048, f = 2 * m * n * k;
    CLOSE(calib_grouped_gemm_seconds(cb, PRECISION_BF16, g, m, n, k, false, 0), 4e-6 + g * f / 0.3e15);
    CLOSE(calib_grouped_gemm_seconds(cb, PRECISION_BF16, g, m, n, k, true, 0),
          4e-6 + g * f / 0.25e15 + 4e-6 + g * f / 0.1e15);
    /* without grouped rows: g GEMMs, each T0 + 2mnk / (0.6 x peak) */
    CLOSE(calib_grouped_gemm_seconds(plain, PRECISION_BF16, g, m, n, k, false, 0), g * (4e-6 + f / 0.6e15));
    /* a single GEMM keeps the dense rows in both tables */
    CLOSE(calib_gemm_task_seconds(cb, m, n, k, true, 2), calib_gemm_task_seconds(plain, m, n, k, true, 2));
    CLOSE(calib_grouped_gemm_seconds(cb, PRECISION_BF16, 1, m, n, k, false, 2),
          calib_gemm_task_seconds(plain, m, n, k, false, 2));
    /* the groups' operands count in the memory term: a skinny group is bandwidth-bound */
    double mm = 8, bytes = g * 2 * (mm * k + k * n + mm * n);
    CLOSE(calib_grouped_gemm_seconds(cb, PRECISION_BF16, g, mm, n, k, false, 2),
          4e-6 + fmax(g * 2 * mm * n * k / 0.3e15, bytes / 2e12));
    calib *back = rewritten(cb);
    for (int l = GEMM_GROUPED_TN; l <= GEMM_GROUPED_NT; l++)
        CLOSE(calib_gemm_eff(back, l, 300, 700, 900), calib_gemm_eff(cb, l, 300, 700, 900));
    calib_free(back);
    calib_free(cb);
    calib_free(plain);
    snprintf(text, sizeof text, "%sgemm shape grouped-tn 512 1024 2048 0.3\n", dense);
    ck_assert_ptr_null(calib_parse(text, "h.calib", err));
    ck_assert_msg(strstr(err, "grouped-nn") && strstr(err, "all three"), "%s", err);
}
END_TEST

/* The shipped tables from SimuMax's measured kernels keep its figures
 * (configs/system/b200_bf16_ceperm.json and a100_pcie.json at 4dcaae5):
 * dense GEMMs, grouped GEMMs (one group's forward shape, the wgrad's
 * (N, K, M)), and the B200's attention at 32K tokens, 8 query heads (its
 * full-square factor 1.2018 over loong's 128x128 tiles' 0.501953125 s^2). */
START_TEST(shipped_simumax_tables)
{
    static const struct {
        const char *file;
        int layout;
        double m, n, k, eff;
    } rows[] = {{"b200-simumax", GEMM_TN, 4096, 28672, 8192, 0.4943238940655},
                {"b200-simumax", GEMM_NT, 10240, 8192, 4096, 0.5979461534906494},
                {"b200-simumax", GEMM_GROUPED_TN, 1232, 3072, 5120, 0.5134153708896044},
                {"b200-simumax", GEMM_GROUPED_NT, 3072, 5120, 1232, 0.32760011542122736},
                {"a100-pcie", GEMM_GROUPED_TN, 616, 3072, 5120, 0.6313438865579614}};
    char path[1024], err[LOONG_ERRLEN] = "";
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        snprintf(path, sizeof path, "%s/topologies/%s.calib", LOONG_SRCDIR, rows[i].file);
        calib *cb = calib_load(path, err);
        ck_assert_msg(cb != NULL, "%s", err);
        double e = calib_gemm_eff(cb, rows[i].layout, rows[i].m, rows[i].n, rows[i].k);
        ck_assert_msg(fabs(e - rows[i].eff) < 5e-5, "%s row %zu: %g != %g", rows[i].file, i, e, rows[i].eff);
        calib_free(cb);
    }
    snprintf(path, sizeof path, "%s/topologies/b200-simumax.calib", LOONG_SRCDIR);
    calib *cb = calib_load(path, err);
    ck_assert_msg(cb != NULL, "%s", err);
    ck_assert_str_eq(calib_gpu(cb), "b200");
    double s = 32768, full = 4 * s * s * 128 * 8, tiled = 0.501953125 * full;
    double want = 5e-6 + full / (1.201756785556635 * 2.25e15), got = calib_seconds(cb, TASK_ATTN_FWD, tiled, 0, s);
    ck_assert_msg(fabs(got / want - 1) < 2e-4, "%g s != %g s", got, want);
    calib_free(cb);
}
END_TEST

/* The cost rule (calib.h): a GEMM whose operand bytes dominate costs T0 +
 * bytes / bandwidth; a tiny kernel pays its floor; the membw rows
 * interpolate monotonically in log(bytes), exact at a row, flat beyond;
 * a membw row round-trips. */
START_TEST(cost_rule)
{
    char err[LOONG_ERRLEN] = "";
    calib *cb = calib_parse("gpu s\npeak 1000T\nmem_bw 2TBps\ngemm line 4us 500T\nattn_fwd line 1us 1T\n"
                            "attn_bwd line 1us 1T\nmerge line 1us 1TBps\nacc membw 3us\n"
                            "membw 1K 0.1\nmembw 1M 0.5\nmembw 1G 0.8\n",
                            "r.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    /* a matrix-vector GEMM: 2 x 4096^2 FLOPs (67 ns at 500T), 2 x (4096^2 + 2 x 4096) bytes */
    double m = 4096, k = 4096, bytes = 2 * (m * k + k + m);
    CLOSE(calib_gemm_task_seconds(cb, m, 1, k, false, 2), 4e-6 + bytes / calib_bandwidth(cb, bytes));
    CLOSE(calib_gemm_task_seconds(cb, m, 1, k, false, 0), 4e-6 + 2 * m * k / 500e12); /* compute alone */
    /* a large square GEMM stays compute-bound: the memory term does not bind */
    CLOSE(calib_gemm_task_seconds(cb, 8192, 8192, 8192, false, 2), 4e-6 + 2.0 * 8192 * 8192 * 8192 / 500e12);
    /* the membw rows: exact at a row, flat beyond, the log-midpoint between two rows */
    CLOSE(calib_bandwidth(cb, 1e6), 0.5 * 2e12);
    CLOSE(calib_bandwidth(cb, 10), 0.1 * 2e12);
    CLOSE(calib_bandwidth(cb, 1e12), 0.8 * 2e12);
    CLOSE(calib_bandwidth(cb, sqrt(1e3 * 1e6)), 0.3 * 2e12);
    for (double b = 1, prev = 0; b < 1e13; b *= 1.7) {
        double bw = calib_bandwidth(cb, b);
        ck_assert(bw >= prev);
        prev = bw;
    }
    /* a kernel of 1 byte pays its floor; a large one its bytes at the plateau */
    ck_assert(fabs(calib_seconds(cb, TASK_ACC, 0, 1, 1) - 3e-6) < 1e-11);
    CLOSE(calib_seconds(cb, TASK_ACC, 0, 4e9, 1), 3e-6 + 4e9 / 1.6e12);
    /* norm .. optim inherit acc's membw row */
    CLOSE(calib_seconds(cb, TASK_NORM, 0, 1e6, 1), 3e-6 + 1e6 / 1e12);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(calib_write(f, cb), 0);
    fclose(f);
    calib *back = calib_parse(buf, "w.calib", err);
    ck_assert_msg(back != NULL, "%s", err);
    CLOSE(calib_seconds(back, TASK_ACC, 0, 5e5, 1), calib_seconds(cb, TASK_ACC, 0, 5e5, 1));
    free(buf);
    calib_free(back);
    /* `KIND skip` (an executor's table): those kinds take 0 s, T0 included,
     * the others keep their rows, and the rows round-trip */
    calib_set_skip(cb, 1u << TASK_NORM | 1u << TASK_OPTIM | 1u << TASK_GEMM | 1u << TASK_ACC);
    ck_assert(calib_seconds(cb, TASK_NORM, 0, 1e6, 1) == 0 && calib_seconds(cb, TASK_OPTIM, 0, 1e9, 1) == 0);
    CLOSE(calib_seconds(cb, TASK_ROPE, 0, 1e6, 1), 3e-6 + 1e6 / 1e12);
    CLOSE(calib_seconds(cb, TASK_ACC, 0, 4e9, 1), 3e-6 + 4e9 / 1.6e12); /* acc and gemm are not elementwise */
    CLOSE(calib_seconds(cb, TASK_GEMM, 1e12, 0, 0), 4e-6 + 1e12 / 500e12);
    buf = NULL;
    f = open_memstream(&buf, &len);
    ck_assert_int_eq(calib_write(f, cb), 0);
    fclose(f);
    ck_assert_msg(strstr(buf, "\nnorm skip\n") && strstr(buf, "\noptim skip\n") && !strstr(buf, "rope skip"), "%s",
                  buf);
    back = calib_parse(buf, "w.calib", err);
    ck_assert_msg(back != NULL, "%s", err);
    ck_assert(calib_seconds(back, TASK_NORM, 0, 1e6, 1) == 0);
    CLOSE(calib_seconds(back, TASK_ROPE, 0, 1e6, 1), 3e-6 + 1e6 / 1e12);
    free(buf);
    calib_free(back);
    calib_free(cb);
}
END_TEST

/* --fusions none adds exactly fusion.h's kernels and bytes per layer: a
 * block's forward launches 6 kernels under te and 8 + 10 + 1 + 8 + 2 + 1
 * = 30 under none, the backward 6 against 8 + 10 + 1 + 8 + 4 + 1 = 32; a
 * task's time is its kernels' floors plus its bytes over a line's rate. */
/* FP8 GEMMs (--precision): the shape's bf16 efficiency at the FP8 peak,
 * FP8 operands (MXFP8: a scale byte per 32 of them) and the output in the
 * activations' width, against the cost rule's closed form; a table
 * without the recipe's peak times it as bf16 and calib_check_precision
 * names the missing line. The LM head (calib_task_seconds) stays bf16. */
START_TEST(fp8_gemm)
{
    char err[LOONG_ERRLEN] = "";
    calib *cb = calib_parse("gpu s\npeak 1000T\npeak_fp8 2000T\nmem_bw 2TBps\ngemm line 4us 500T\n"
                            "gemm shape tn 8192 8192 8192 0.6\ngemm shape nn 8192 8192 8192 0.5\n"
                            "gemm shape nt 8192 8192 8192 0.4\nattn_fwd line 1us 1T\nattn_bwd line 1us 1T\n"
                            "merge line 1us 1TBps\nacc membw 3us\nmembw 1K 0.5\n",
                            "f.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    double n = 8192, f = 2 * n * n * n;
    /* compute-bound: 2n^3 at 0.6 of 2000T, forward; dgrad at 0.5, wgrad at 0.4 */
    CLOSE(calib_gemm_prec_seconds(cb, PRECISION_FP8_DELAYED, n, n, n, false, 2), 4e-6 + f / (0.6 * 2000e12));
    CLOSE(calib_gemm_prec_seconds(cb, PRECISION_FP8_CURRENT, n, n, n, true, 2),
          4e-6 + f / (0.5 * 2000e12) + 4e-6 + f / (0.4 * 2000e12));
    CLOSE(calib_gemm_prec_seconds(cb, PRECISION_BF16, n, n, n, false, 2), 4e-6 + f / (0.6 * 1000e12));
    /* memory-bound (a matrix-vector product): n^2 + n FP8 operand bytes and n bf16 output bytes */
    double bytes = n * n + n + 2 * n;
    CLOSE(calib_gemm_prec_seconds(cb, PRECISION_FP8_DELAYED, n, 1, n, false, 2),
          4e-6 + bytes / calib_bandwidth(cb, bytes));
    ck_assert_int_eq(calib_check_precision(cb, PRECISION_FP8_DELAYED, err), 0);
    ck_assert_int_eq(calib_check_precision(cb, PRECISION_MXFP8, err), -1);
    ck_assert_msg(strstr(err, "peak_mxfp8") && strstr(err, "--precision mxfp8"), "%s", err);
    /* without peak_mxfp8, MXFP8 is timed as bf16 */
    CLOSE(calib_gemm_prec_seconds(cb, PRECISION_MXFP8, n, n, n, false, 2), 4e-6 + f / (0.6 * 1000e12));
    /* the LM head's GEMM task stays bf16, a block GEMM's does not */
    config c = tcfg("tiny", 1024, "usp", 1, 1, 0, SCOPE_STEP);
    c.precision = PRECISION_FP8_DELAYED;
    dag_task t = {.kind = TASK_GEMM, .op = OP_LM_HEAD, .phase = PHASE_FWD, .dim = {8192, 8192, 8192}};
    CLOSE(calib_task_seconds(cb, &c, NULL, &t), 4e-6 + f / (0.6 * 1000e12));
    t.op = OP_MLP_UP;
    CLOSE(calib_task_seconds(cb, &c, NULL, &t), 4e-6 + f / (0.6 * 2000e12));
    /* the table writes its FP8 peak back */
    char *buf = NULL;
    size_t len = 0;
    FILE *w = open_memstream(&buf, &len);
    ck_assert_int_eq(calib_write(w, cb), 0);
    fclose(w);
    calib *again = calib_parse(buf, "again", err);
    ck_assert_msg(again != NULL, "%s", err);
    CLOSE(calib_peak_of(again, PRECISION_FP8_CURRENT), 2000e12);
    free(buf);
    calib_free(again);
    calib_free(cb);
    /* measured FP8 rows (gemm shape fp8): every FP8 GEMM of a task at its
     * efficiency of peak_fp8, forward, dgrad and wgrad alike; bf16 and
     * MXFP8 GEMMs keep the bf16 rows; the rows write back */
    cb = calib_parse("gpu s\npeak 1000T\npeak_fp8 2000T\npeak_mxfp8 2000T\nmem_bw 2TBps\ngemm line 4us 500T\n"
                     "gemm shape tn 8192 8192 8192 0.6\ngemm shape fp8 8192 8192 8192 0.3\n"
                     "attn_fwd line 1us 1T\nattn_bwd line 1us 1T\nmerge line 1us 1TBps\nacc membw 3us\nmembw 1K 0.5\n",
                     "f8.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    CLOSE(calib_gemm_prec_seconds(cb, PRECISION_FP8_CURRENT, n, n, n, false, 2), 4e-6 + f / (0.3 * 2000e12));
    CLOSE(calib_gemm_prec_seconds(cb, PRECISION_FP8_DELAYED, n, n, n, true, 2), 2 * (4e-6 + f / (0.3 * 2000e12)));
    CLOSE(calib_gemm_prec_seconds(cb, PRECISION_BF16, n, n, n, false, 2), 4e-6 + f / (0.6 * 1000e12));
    CLOSE(calib_gemm_prec_seconds(cb, PRECISION_MXFP8, n, n, n, false, 2), 4e-6 + f / (0.6 * 2000e12));
    buf = NULL, len = 0;
    w = open_memstream(&buf, &len);
    ck_assert_int_eq(calib_write(w, cb), 0);
    fclose(w);
    ck_assert_ptr_nonnull(strstr(buf, "gemm shape fp8 8192 8192 8192 0.29999999999999999\n"));
    free(buf);
    calib_free(cb);
    ck_assert_ptr_null(calib_parse("gpu s\npeak 1T\ngemm shape fp16 8 8 8 0.5\n", "bad.calib", err));
    ck_assert_msg(strstr(err, "tn, nn, nt, any, fp8"), "%s", err);
}
END_TEST

START_TEST(fusions_kernels)
{
    config c = tcfg("tiny", 16 * 1024, "zigzag", 1, 4, 0, SCOPE_STEP);
    const task_op *ops;
    int nops = elementwise_block_ops(&ops);
    uint64_t a = (uint64_t)c.act_bytes, b[FUSION_MAX_KERNELS];
    for (int bwd = 0; bwd < 2; bwd++) {
        task_phase ph = bwd ? PHASE_BWD : PHASE_FWD;
        int kte = 0, knone = 0;
        for (int i = 0; i < nops; i++) {
            uint64_t rows, cols, te = 0, none = 0;
            elementwise_shape(&c, ops[i], 0, &rows, &cols);
            uint64_t e = rows * cols;
            c.fusions = FUSIONS_TE;
            for (int j = 0, n = fusion_kernels(&c, ops[i], ph, e, b); j < n; j++, kte++)
                te += b[j];
            c.fusions = FUSIONS_NONE;
            for (int j = 0, n = fusion_kernels(&c, ops[i], ph, e, b); j < n; j++, knone++)
                none += b[j];
            ck_assert_uint_eq(te, elementwise_hbm_bytes(&c, ops[i], ph, e));
            switch (elementwise_kind(ops[i])) {
            case TASK_NORM: ck_assert_uint_eq(none, e * (2 * a + 36)); break;
            case TASK_ROPE: ck_assert_uint_eq(none, e * 10 * a); break;
            case TASK_ACT: ck_assert_uint_eq(none, e * (bwd ? 13 : 5) * a); break;
            default: ck_assert_uint_eq(none, te); break;
            }
        }
        ck_assert_int_eq(kte, 6);
        ck_assert_int_eq(knone, bwd ? 32 : 30);
    }
    char err[LOONG_ERRLEN] = "";
    calib *cb = calib_parse(table, "t.calib", err);
    ck_assert_msg(cb != NULL, "%s", err);
    uint64_t rows, cols;
    elementwise_shape(&c, OP_ACT, 0, &rows, &cols); /* acc's curve (1 us, 0.5 x 2 TB/s) times act */
    c.fusions = FUSIONS_NONE;
    CLOSE(calib_elementwise_seconds(cb, &c, OP_ACT, PHASE_BWD, rows * cols),
          4 * calib_t0(cb, TASK_ACC) + (double)(rows * cols * 13 * a) / 1e12);
    /* --cross-entropy eager: the fp32 copy and log_softmax forward; nll's
     * gradient, log_softmax's backward and the cast back (fusion.c) */
    c.cross_entropy = CE_EAGER;
    elementwise_shape(&c, OP_LOSS, 0, &rows, &cols);
    uint64_t e = rows * cols;
    ck_assert_int_eq(fusion_kernels(&c, OP_LOSS, PHASE_FWD, e, b), 2);
    ck_assert_uint_eq(b[0] + b[1], e * (a + 4 + 16));
    ck_assert_int_eq(fusion_kernels(&c, OP_LOSS, PHASE_BWD, e, b), 3);
    ck_assert_uint_eq(b[0] + b[1] + b[2], e * (4 + 16 + 4 + a));
    CLOSE(calib_elementwise_seconds(cb, &c, OP_LOSS, PHASE_FWD, e),
          2 * calib_t0(cb, TASK_ACC) + (double)(e * (a + 20)) / 1e12);
    calib_free(cb);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("calib");
    TCase *tc = tcase_create("calib");
    tcase_add_test(tc, units_real);
    tcase_add_test(tc, evaluate_closed_forms);
    tcase_add_test(tc, task_bytes_and_seconds);
    tcase_add_test(tc, malformed_rows);
    tcase_add_test(tc, round_trip);
    tcase_add_test(tc, tile_granular_attention);
    tcase_add_test(tc, shipped_tables);
    tcase_add_test(tc, gemm_shape_interpolation);
    tcase_add_test(tc, gemm_dgrad_wgrad_split);
    tcase_add_test(tc, gemm_shape_round_trip);
    tcase_add_test(tc, shipped_gemm_shapes);
    tcase_add_test(tc, shipped_attention);
    tcase_add_test(tc, grouped_gemm_rows);
    tcase_add_test(tc, shipped_simumax_tables);
    tcase_add_test(tc, cost_rule);
    tcase_add_test(tc, fusions_kernels);
    tcase_add_test(tc, fp8_gemm);
    suite_add_tcase(s, tc);
    return check_run(s);
}

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
    static const char *kinds[] = {"h100", "h200", "a100"};
    for (int i = 0; i < 3; i++) {
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
    suite_add_tcase(s, tc);
    return check_run(s);
}

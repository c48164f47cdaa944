/*
 * calib_file: the calibration table's text format: the parser (one line
 * per row, every value checked against a physically meaningful range,
 * errors as file:line), the writer (its inverse: calib_parse reads back
 * what calib_write writes), the loaders by path and by platform, and the
 * setters that loong calibrate fills a table with, validated like the
 * parser's rows. See calib.h.
 */
#include "calib_table.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/datapath.h"
#include "core/infile.h"
#include "core/xalloc.h"

static const char *const xaxis_names[] = {"flops", "bytes", "tokens"};

enum {
    HDR_GPU = 1,
    HDR_PEAK = 2,
    HDR_MEM_BW = 4,
    HDR_PEAK_FP8 = 8,
    HDR_PEAK_MXFP8 = 16
}; /* interference: bit 8 + kind */

/* Physically meaningful ranges, far around every GPU built: a line's or a
 * curve's fixed cost, a compute rate and a memory bandwidth. */
#define T0_MAX    1.0  /* s */
#define FLOPS_MAX 1e18 /* FLOP/s: 1000x an H100's dense BF16 */
#define BW_MAX    1e15 /* B/s: 300x an H100's HBM */
/* Lower bounds keep every predicted time finite: a 2^64-FLOP task at 1e-9
 * of 1 FLOP/s takes 1.8e28 s, where an efficiency of 1e-308 took inf. */
#define RATE_MIN 1.0  /* FLOP/s or B/s: peak, mem_bw, a line's rate */
#define EFF_MIN  1e-9 /* a curve point's efficiency */

/* ---- parsing ---- */

typedef struct cursor {
    const char *name;
    int line;
    char *err;
} cursor;

static int fail(const cursor *cu, const char *fmt, const char *a, const char *b)
{
    char msg[LOONG_ERRLEN];
    snprintf(msg, sizeof msg, fmt, a, b);
    snprintf(cu->err, LOONG_ERRLEN, "%.90s:%d: %.140s", cu->name, cu->line, msg);
    return -1;
}

/* Prefix a units_* message with file:line. */
static int fail_units(const cursor *cu)
{
    char pre[128];
    snprintf(pre, sizeof pre, "%s:%d: ", cu->name, cu->line);
    loong_err_prefix(cu->err, pre);
    return -1;
}

/* A parsed value outside [min, max]. */
static int out_of_range(const cursor *cu, const char *what, const char *tok, double v, double min, double max,
                        const char *unit)
{
    if (v >= min && v <= max) return 0;
    char range[80];
    snprintf(range, sizeof range, "%s '%.30s' is outside [%g, %g %s]", what, tok, min, max, unit);
    return fail(cu, "%s, the physically meaningful range%s", range, "");
}

static int parse_rate(const cursor *cu, int kind, const char *s, double *out)
{
    int rc = memory_bound(kind) ? units_parse_bandwidth(s, "rate", out, cu->err)
                                : units_parse_si(s, "rate (FLOP/s)", out, cu->err);
    if (rc < 0) return fail_units(cu);
    return memory_bound(kind) ? out_of_range(cu, "rate", s, *out, RATE_MIN, BW_MAX, "B/s")
                              : out_of_range(cu, "rate", s, *out, RATE_MIN, FLOPS_MAX, "FLOP/s");
}

static int parse_t0(const cursor *cu, const char *s, double *out)
{
    if (units_parse_time(s, "T0", out, cu->err) < 0) return fail_units(cu);
    return out_of_range(cu, "T0", s, *out, 0, T0_MAX, "s");
}

static int parse_point(const cursor *cu, row *r, const char *tok)
{
    char buf[64];
    const char *colon = strchr(tok, ':');
    if (!colon || (size_t)(colon - tok) >= sizeof buf)
        return fail(cu, "curve point '%s' is not x:efficiency (e.g. 4K:0.62)%s", tok, "");
    memcpy(buf, tok, (size_t)(colon - tok));
    buf[colon - tok] = '\0';
    double x, e;
    char *end;
    uint64_t n;
    if (r->x == X_TOKENS) { /* token counts use binary K/M like --seq */
        if (units_parse_count(buf, "curve point tokens", &n, cu->err) < 0) return fail_units(cu);
        /* above 2^53 a count is not exact as a double and calib_write's %.17g turns it into 1e+17 notation */
        if (n > (uint64_t)1 << 53) return fail(cu, "curve point '%s': tokens above 2^53%s", tok, "");
        x = (double)n;
    } else if (units_parse_si(buf, "curve point x", &x, cu->err) < 0) {
        return fail_units(cu);
    }
    e = strtod(colon + 1, &end);
    if (end == colon + 1 || *end || !(e >= EFF_MIN && e <= 1))
        return fail(cu, "curve point '%s': efficiency must be a number in [1e-9, 1]%s", tok, "");
    if (r->npts == CALIB_MAXPTS) return fail(cu, "curve has more than 32 points at '%s'%s", tok, "");
    if (r->npts && log(x) <= r->lx[r->npts - 1])
        return fail(cu, "curve point '%s': x must increase along the row%s", tok, "");
    r->xs[r->npts] = x;
    r->lx[r->npts] = log(x);
    r->eff[r->npts++] = e;
    return 0;
}

static int parse_row(const cursor *cu, calib *cb, int kind, char **tok, int ntok)
{
    row *r = &cb->rows[kind];
    if (r->set) return fail(cu, "duplicate row for kind '%s': give each kind once%s", tok[0], "");
    memset(r, 0, sizeof *r);
    if (ntok < 2) return fail(cu, "row '%s' lacks a model: use 'curve' or 'line'%s", tok[0], "");
    if (!strcmp(tok[1], "line")) {
        if (ntok != 4) return fail(cu, "'%s line' takes T0 RATE (e.g. 5us 780T)%s", tok[0], "");
        if (parse_t0(cu, tok[2], &r->t0) < 0) return -1;
        if (parse_rate(cu, kind, tok[3], &r->rate) < 0) return -1;
    } else if (!strcmp(tok[1], "curve")) {
        if (ntok < 5) return fail(cu, "'%s curve' takes X T0 and at least one x:eff point%s", tok[0], "");
        int x = -1;
        for (int i = 0; i < 3; i++)
            if (!strcmp(tok[2], xaxis_names[i])) x = i;
        if (x < 0) return fail(cu, "curve abscissa '%s' is not one of: flops, bytes, tokens%s", tok[2], "");
        r->x = (xaxis)x;
        r->curve = true;
        if (parse_t0(cu, tok[3], &r->t0) < 0) return -1;
        for (int i = 4; i < ntok; i++)
            if (parse_point(cu, r, tok[i]) < 0) return -1;
    } else if (!strcmp(tok[1], "skip") && kind > TASK_ACC && kind <= TASK_COMPUTE_LAST) {
        if (ntok != 2) return fail(cu, "'%s skip' takes nothing: the device runs no such kernel%s", tok[0], "");
        r->skip = true;
    } else if (!strcmp(tok[1], "membw") && memory_bound(kind)) {
        if (ntok != 3)
            return fail(cu, "'%s membw' takes T0 (e.g. 3us): the bandwidth is the membw rows'%s", tok[0], "");
        if (parse_t0(cu, tok[2], &r->t0) < 0) return -1;
        r->membw = true;
    } else {
        return fail(cu,
                    "unknown model '%s' for kind '%s': use 'curve', 'line', (memory-bound) 'membw' or (elementwise) "
                    "'skip'",
                    tok[1], tok[0]);
    }
    r->set = true;
    return 0;
}

static int parse_header(const cursor *cu, calib *cb, char **tok, int ntok)
{
    bool assumed = ntok == 3 && !strcmp(tok[2], "assumed") && strcmp(tok[0], "gpu");
    if (ntok != 2 && !assumed)
        return fail(cu, "'%s' takes one value%s", tok[0], strcmp(tok[0], "gpu") ? ", then optionally 'assumed'" : "");
    unsigned bit = !strcmp(tok[0], "gpu")          ? HDR_GPU
                   : !strcmp(tok[0], "peak")       ? HDR_PEAK
                   : !strcmp(tok[0], "peak_fp8")   ? HDR_PEAK_FP8
                   : !strcmp(tok[0], "peak_mxfp8") ? HDR_PEAK_MXFP8
                                                   : HDR_MEM_BW;
    if (cb->given & bit) return fail(cu, "a second '%s' line: give it once%s", tok[0], "");
    cb->given |= bit;
    if (!strcmp(tok[0], "peak")) cb->peak_assumed = assumed;
    if (!strcmp(tok[0], "mem_bw")) cb->mem_bw_assumed = assumed;
    if (!strcmp(tok[0], "gpu")) {
        if (strlen(tok[1]) >= sizeof cb->gpu) return fail(cu, "gpu name '%s' is too long%s", tok[1], "");
        strcpy(cb->gpu, tok[1]);
        return 0;
    }
    if (!strcmp(tok[0], "peak"))
        return units_parse_si(tok[1], "peak (FLOP/s)", &cb->peak, cu->err) < 0
                   ? fail_units(cu)
                   : out_of_range(cu, "peak", tok[1], cb->peak, RATE_MIN, FLOPS_MAX, "FLOP/s");
    if (bit == HDR_PEAK_FP8 || bit == HDR_PEAK_MXFP8) {
        double *v = bit == HDR_PEAK_FP8 ? &cb->peak_fp8 : &cb->peak_mxfp8;
        return units_parse_si(tok[1], "FP8 peak (FLOP/s)", v, cu->err) < 0
                   ? fail_units(cu)
                   : out_of_range(cu, tok[0], tok[1], *v, RATE_MIN, FLOPS_MAX, "FLOP/s");
    }
    return units_parse_bandwidth(tok[1], "mem_bw", &cb->mem_bw, cu->err) < 0
               ? fail_units(cu)
               : out_of_range(cu, "mem_bw", tok[1], cb->mem_bw, RATE_MIN, BW_MAX, "B/s");
}

/* interference F (every kind) | interference KIND F */
static int parse_interference(const cursor *cu, calib *cb, char **tok, int ntok)
{
    int kind = ntok == 3 ? task_kind_parse(tok[1]) : -1;
    if (ntok < 2 || ntok > 3 || (ntok == 3 && (kind < 0 || kind >= NKINDS)))
        return fail(cu, "'interference' takes a factor, or a compute kind and a factor (interference attn_fwd 0.1)%s%s",
                    "", "");
    char *end;
    double f = strtod(tok[ntok - 1], &end);
    if (*end || end == tok[ntok - 1] || !(f >= 0 && f <= 10))
        return fail(cu, "interference factor '%s' is not a slowdown in [0, 10] (0.1 = 10 %% slower)%s", tok[ntok - 1],
                    "");
    /* one line for every kind, or one per kind: a second line for a kind is a conflict */
    unsigned mask = kind < 0 ? (1u << NKINDS) - 1 : 1u << kind;
    if ((cb->given >> 8) & mask) return fail(cu, "a second 'interference' line for the same kind%s%s", "", "");
    cb->given |= mask << 8;
    for (int k = 0; k < NKINDS; k++)
        if (kind < 0 || k == kind) cb->interference[k] = f;
    return 0;
}

#define TILE_MAX 4096 /* rows or columns of a kernel's tile */

/* tile attn_fwd|attn_bwd BRxBC */
static int parse_tile(const cursor *cu, calib *cb, char **tok, int ntok)
{
    int kind = ntok == 3 ? task_kind_parse(tok[1]) : -1;
    if (kind != TASK_ATTN_FWD && kind != TASK_ATTN_BWD)
        return fail(cu,
                    "'tile' takes an attention kind and its kernel's tile, rows x columns (tile attn_fwd 128x128)%s%s",
                    "", "");
    char *x = strchr(tok[2], 'x'), *e1, *e2;
    long br = x ? strtol(tok[2], &e1, 10) : 0, bc = x ? strtol(x + 1, &e2, 10) : 0;
    if (!x || e1 != x || *e2 || br < 1 || bc < 1 || br > TILE_MAX || bc > TILE_MAX)
        return fail(cu, "tile '%s' is not ROWSxCOLUMNS with each in [1, 4096] (e.g. 128x64)%s", tok[2], "");
    if (cb->tile[kind][0]) return fail(cu, "a second 'tile' line for %s%s", tok[1], "");
    cb->tile[kind][0] = (int)br;
    cb->tile[kind][1] = (int)bc;
    return 0;
}

static int gemm_shape_find(const calib *cb, int layout, const uint64_t dim[3])
{
    for (int i = 0; i < cb->nshape; i++)
        if (cb->shape[i].layout == layout && !memcmp(cb->shape[i].dim, dim, sizeof cb->shape[i].dim)) return i;
    return -1;
}

/* Add or replace a shape row; -1 when the table is full. */
static int gemm_shape_put(calib *cb, int layout, const uint64_t dim[3], double eff)
{
    int i = gemm_shape_find(cb, layout, dim);
    if (i < 0) {
        if (cb->nshape == GEMM_SHAPES_MAX) return -1;
        if (cb->nshape == cb->shapecap) {
            cb->shapecap = cb->shapecap ? 2 * cb->shapecap : 64;
            cb->shape = xrealloc_array(cb->shape, (size_t)cb->shapecap, sizeof *cb->shape, "a calibration table");
        }
        i = cb->nshape++;
    }
    gemm_shape *g = &cb->shape[i];
    g->layout = layout;
    for (int a = 0; a < 3; a++) {
        g->dim[a] = dim[a];
        g->lg[a] = log2((double)dim[a]);
    }
    g->eff = eff;
    calib_index_shapes(cb); /* a setter after parsing changes the rows too */
    return 0;
}

/* gemm shape LAYOUT M N K EFF */
static int parse_gemm_shape(const cursor *cu, calib *cb, char **tok, int ntok)
{
    if (ntok != 7)
        return fail(cu, "'gemm shape' takes LAYOUT M N K EFF (e.g. gemm shape tn 4096 1536 5120 0.79)%s%s", "", "");
    int layout = -1;
    for (int i = 0; i < GEMM_LAYOUTS; i++)
        if (!strcmp(tok[2], calib_gemm_layout_name(i))) layout = i;
    if (layout < 0)
        return fail(cu,
                    "gemm shape layout '%s' is not one of: tn, nn, nt, any, fp8, grouped-tn, grouped-nn, grouped-nt%s",
                    tok[2], "");
    uint64_t dim[3];
    for (int a = 0; a < 3; a++) {
        if (units_parse_count(tok[3 + a], "gemm shape dimension", &dim[a], cu->err) < 0) return fail_units(cu);
        if (dim[a] < 1 || dim[a] > UINT32_MAX)
            return fail(cu, "gemm shape dimension '%s' is outside [1, 4294967295]%s", tok[3 + a], "");
    }
    char *end;
    double e = strtod(tok[6], &end);
    if (end == tok[6] || *end || !(e >= EFF_MIN && e <= 1))
        return fail(cu, "gemm shape efficiency '%s' must be a number in [1e-9, 1]%s", tok[6], "");
    char shape[80];
    snprintf(shape, sizeof shape, "%.10s %.20s %.20s %.20s", tok[2], tok[3], tok[4], tok[5]);
    if (gemm_shape_find(cb, layout, dim) >= 0)
        return fail(cu, "a second 'gemm shape' row for %s: give each shape once%s", shape, "");
    if (gemm_shape_put(cb, layout, dim, e) < 0)
        return fail(cu, "more than 4096 'gemm shape' rows at '%s': merge measurements of one shape%s", shape, "");
    return 0;
}

/* membw BYTES FRACTION: a kernel moving BYTES reaches FRACTION of mem_bw */
static int parse_membw(const cursor *cu, calib *cb, char **tok, int ntok)
{
    if (ntok != 3) return fail(cu, "'membw' takes BYTES FRACTION (e.g. membw 4MB 0.72)%s%s", "", "");
    double x, f;
    char *end;
    if (units_parse_si(tok[1], "membw bytes", &x, cu->err) < 0) return fail_units(cu);
    if (out_of_range(cu, "membw bytes", tok[1], x, 1, 1e15, "B") < 0) return -1;
    f = strtod(tok[2], &end);
    if (end == tok[2] || *end || !(f >= EFF_MIN && f <= 1))
        return fail(cu, "membw fraction '%s' must be a number in [1e-9, 1]%s", tok[2], "");
    row *b = &cb->bw;
    if (b->npts == CALIB_MAXPTS) return fail(cu, "more than 32 'membw' rows at '%s'%s", tok[1], "");
    if (b->npts && log(x) <= b->lx[b->npts - 1])
        return fail(cu, "membw bytes '%s' must increase from row to row%s", tok[1], "");
    b->xs[b->npts] = x;
    b->lx[b->npts] = log(x);
    b->eff[b->npts++] = f;
    return 0;
}

static int parse_line(const cursor *cu, calib *cb, char *line)
{
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char *tok[4 + CALIB_MAXPTS + 1], *save = NULL;
    int ntok = 0;
    for (char *p = strtok_r(line, " \t\r", &save); p; p = strtok_r(NULL, " \t\r", &save)) {
        if (ntok == (int)(sizeof tok / sizeof tok[0])) return fail(cu, "too many fields%s%s", "", "");
        tok[ntok++] = p;
    }
    if (!ntok) return 0;
    if (!strcmp(tok[0], "gpu") || !strcmp(tok[0], "peak") || !strcmp(tok[0], "mem_bw") || !strcmp(tok[0], "peak_fp8") ||
        !strcmp(tok[0], "peak_mxfp8"))
        return parse_header(cu, cb, tok, ntok);
    if (!strcmp(tok[0], "interference")) return parse_interference(cu, cb, tok, ntok);
    if (!strcmp(tok[0], "tile")) return parse_tile(cu, cb, tok, ntok);
    if (!strcmp(tok[0], "membw")) return parse_membw(cu, cb, tok, ntok);
    if (!strcmp(tok[0], "gemm") && ntok >= 2 && !strcmp(tok[1], "shape")) return parse_gemm_shape(cu, cb, tok, ntok);
    int kind = task_kind_parse(tok[0]);
    if (kind < 0 || kind >= NKINDS)
        return fail(cu,
                    "unknown key or kind '%s': expected gpu, peak, peak_fp8, peak_mxfp8, mem_bw, membw, "
                    "interference, tile, gemm, attn_fwd, attn_bwd, merge, acc, norm, rope, add, act, embed, loss, "
                    "softmax, dropout, quant or optim%s",
                    tok[0], "");
    return parse_row(cu, cb, kind, tok, ntok);
}

/* Whole-table checks once every line is read. */
static int check_table(const cursor *cu, calib *cb)
{
    if (!cb->gpu[0]) return fail(cu, "missing 'gpu NAME' line%s%s", "", "");
    if (cb->peak <= 0) return fail(cu, "missing 'peak FLOPS' line (e.g. peak 989T)%s%s", "", "");
    if (cb->mem_bw <= 0) return fail(cu, "missing 'mem_bw BANDWIDTH' line (e.g. mem_bw 3.35TBps)%s%s", "", "");
    for (int k = TASK_ACC + 1; k < NKINDS; k++) /* tables from before these kinds: time them like acc */
        if (!cb->rows[k].set && cb->rows[TASK_ACC].set) {
            cb->rows[k] = cb->rows[TASK_ACC];
            cb->rows[k].inherited = true;
        }
    bool grouped[3] = {false, false, false};
    for (int i = 0; i < cb->nshape; i++)
        if (cb->shape[i].layout >= GEMM_GROUPED_TN) grouped[cb->shape[i].layout - GEMM_GROUPED_TN] = true;
    if ((grouped[0] || grouped[1] || grouped[2]) && !(grouped[0] && grouped[1] && grouped[2]))
        return fail(cu,
                    "grouped GEMM rows need all three of grouped-tn, grouped-nn, grouped-nt (forward, dgrad, "
                    "wgrad): add the missing layouts or drop them all%s%s",
                    "", "");
    for (int k = 0; k < NKINDS; k++) {
        const row *r = &cb->rows[k];
        if (!r->set) return fail(cu, "no row for kind '%s': every compute kind needs one%s", task_kind_name(k), "");
        double ref = memory_bound(k) ? cb->mem_bw : cb->peak;
        if (!r->curve && !r->membw && r->rate > ref * (1 + 1e-12)) {
            char a[64];
            snprintf(a, sizeof a, "%s line rate %.4g", task_kind_name(k), r->rate);
            return fail(cu, "%s exceeds the hardware peak (%s): a table cannot be faster than the GPU", a,
                        memory_bound(k) ? "mem_bw" : "peak");
        }
    }
    return 0;
}

calib *calib_parse(const char *text, const char *name, char err[LOONG_ERRLEN])
{
    calib *cb = xcalloc(1, sizeof *cb, "a calibration table");
    char *copy = xstrdup(text, "a calibration table");
    cursor cu = {name, 0, err};
    char *save = NULL;
    int rc = 0;
    /* strtok_r would merge empty lines and skew line numbers: split by hand */
    for (char *line = copy; line && rc == 0; line = save) {
        char *nl = strchr(line, '\n');
        save = nl ? nl + 1 : NULL;
        if (nl) *nl = '\0';
        cu.line++;
        rc = parse_line(&cu, cb, line);
    }
    free(copy);
    if (rc == 0) rc = check_table(&cu, cb);
    if (rc < 0) {
        calib_free(cb);
        return NULL;
    }
    calib_index_shapes(cb);
    return cb;
}

calib *calib_load(const char *path, char err[LOONG_ERRLEN])
{
    char *buf = infile_read(path, "calibration table", INFILE_TEXT_MAX, NULL, err);
    if (!buf) return NULL;
    calib *cb = calib_parse(buf, path, err);
    free(buf);
    if (cb) cb->path = xstrdup(path, "a calibration table's path");
    return cb;
}

calib *calib_for_platform(const char *platform, const char *gpu, const char *path, char err[LOONG_ERRLEN])
{
    char dir[4096], name[64], found[4096];
    const char *slash = strrchr(platform, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - platform) : 1, slash ? platform : ".");
    if (slash == platform) snprintf(dir, sizeof dir, "/");
    /* a table named on the command line is a path, or a file here, or a
     * name searched like the platform's own (datapath.h) */
    if (!path || (!strchr(path, '/') && access(path, R_OK) != 0)) {
        snprintf(name, sizeof name, "%s.calib", gpu);
        if (datapath_find("calibration table", path ? path : name, ".calib", dir, found, sizeof found, err) < 0) {
            char pre[96];
            snprintf(pre, sizeof pre, "unknown GPU kind '%.32s': ", gpu);
            if (!path) loong_err_prefix(err, pre);
            size_t n = strlen(err);
            snprintf(err + n, LOONG_ERRLEN - n, " (give one with --calib FILE)");
            return NULL;
        }
        path = found;
    }
    calib *cb = calib_load(path, err);
    if (cb && strcmp(cb->gpu, gpu)) {
        snprintf(err, LOONG_ERRLEN,
                 "calibration table %.120s is for GPU kind '%s' but the platform's GPUs are '%s': use a table for %s",
                 path, cb->gpu, gpu, gpu);
        calib_free(cb);
        return NULL;
    }
    return cb;
}

void calib_free(calib *cb)
{
    if (!cb) return;
    free(cb->path);
    free(cb->shape);
    free(cb);
}

int calib_set_line(calib *cb, int kind, double t0, double rate, char err[LOONG_ERRLEN])
{
    double ref = memory_bound(kind) ? cb->mem_bw : cb->peak;
    if (kind < 0 || kind >= NKINDS || !(rate >= RATE_MIN) || rate > ref || t0 < 0) {
        snprintf(err, LOONG_ERRLEN, "%s line: rate %.4g must be in [1, %.4g] and T0 >= 0", task_kind_name(kind), rate,
                 ref);
        return -1;
    }
    row *r = &cb->rows[kind];
    memset(r, 0, sizeof *r);
    r->set = true;
    r->t0 = t0;
    r->rate = rate;
    if (kind == TASK_GEMM) cb->nshape = 0, calib_index_shapes(cb); /* the line is now the whole GEMM model */
    return 0;
}

int calib_write(FILE *f, const calib *cb)
{
    fprintf(f, "gpu %s\npeak %.17g%s\nmem_bw %.17gBps%s\n", cb->gpu, cb->peak, cb->peak_assumed ? " assumed" : "",
            cb->mem_bw, cb->mem_bw_assumed ? " assumed" : "");
    if (cb->peak_fp8 > 0) fprintf(f, "peak_fp8 %.17g\n", cb->peak_fp8);
    if (cb->peak_mxfp8 > 0) fprintf(f, "peak_mxfp8 %.17g\n", cb->peak_mxfp8);
    for (int k = 0; k < NKINDS; k++) {
        const row *r = &cb->rows[k];
        if (r->inherited) continue; /* acc's row stands for it */
        if (r->skip) {
            fprintf(f, "%s skip\n", task_kind_name(k));
            continue;
        }
        if (r->membw) {
            fprintf(f, "%s membw %.17gs\n", task_kind_name(k), r->t0);
            continue;
        }
        if (!r->curve) {
            fprintf(f, "%s line %.17gs %.17g%s\n", task_kind_name(k), r->t0, r->rate, memory_bound(k) ? "Bps" : "");
            continue;
        }
        fprintf(f, "%s curve %s %.17gs", task_kind_name(k), xaxis_names[r->x], r->t0);
        for (int i = 0; i < r->npts; i++)
            fprintf(f, " %.17g:%.17g", r->xs[i], r->eff[i]);
        fputc('\n', f);
    }
    for (int i = 0; i < cb->nshape; i++) {
        const gemm_shape *g = &cb->shape[i];
        fprintf(f, "gemm shape %s %llu %llu %llu %.17g\n", calib_gemm_layout_name(g->layout),
                (unsigned long long)g->dim[0], (unsigned long long)g->dim[1], (unsigned long long)g->dim[2], g->eff);
    }
    for (int i = 0; i < cb->bw.npts; i++)
        fprintf(f, "membw %.17g %.17g\n", cb->bw.xs[i], cb->bw.eff[i]);
    for (int k = 0; k < NKINDS; k++)
        if (cb->interference[k] > 0) fprintf(f, "interference %s %.17g\n", task_kind_name(k), cb->interference[k]);
    for (int k = 0; k < NKINDS; k++)
        if (cb->tile[k][0]) fprintf(f, "tile %s %dx%d\n", task_kind_name(k), cb->tile[k][0], cb->tile[k][1]);
    return ferror(f) ? -1 : 0;
}

int calib_set_gemm_shape(calib *cb, int layout, uint64_t m, uint64_t n, uint64_t k, double eff, char err[LOONG_ERRLEN])
{
    uint64_t dim[3] = {m, n, k};
    bool dims_ok = m >= 1 && n >= 1 && k >= 1 && m <= UINT32_MAX && n <= UINT32_MAX && k <= UINT32_MAX;
    if (layout < 0 || layout >= GEMM_LAYOUTS || !dims_ok || !(eff >= EFF_MIN && eff <= 1)) {
        snprintf(err, LOONG_ERRLEN,
                 "gemm shape %s %llu %llu %llu: efficiency %.4g must be in [1e-9, 1] and each dimension in [1, 2^32)",
                 calib_gemm_layout_name(layout), (unsigned long long)m, (unsigned long long)n, (unsigned long long)k,
                 eff);
        return -1;
    }
    if (gemm_shape_put(cb, layout, dim, eff) < 0) {
        snprintf(err, LOONG_ERRLEN, "more than %d gemm shape rows: the table is full", GEMM_SHAPES_MAX);
        return -1;
    }
    return 0;
}

/*
 * fidelity: the model's error on the kind of run being planned (fidelity.h).
 */
#include "fidelity.h"

#include <math.h>
#include <string.h>

/* experiments/fidelity/recorded.txt as {name, error}, made by Makefile.am */
static const fidelity_row recorded[] = {
#include "fidelity_rows.inc" /* in the build tree: the model library adds its directory */
};

const fidelity_row *fidelity_table(int *n)
{
    *n = (int)(sizeof recorded / sizeof recorded[0]);
    return recorded;
}

/* Sources whose measured kernel tables a shipped calib file was derived
 * from (experiments/fidelity/run.sh says which): their end-to-end rows are
 * not independent of the model, so the fidelity table reports them but
 * the error a plan quotes leaves them out. SimuMax: a100-pcie.calib's
 * GEMM shapes and attention, and its A100-PCIe runs; simumax-b200-calib:
 * SimuMax's B200 runs under b200-simumax.calib, its kernels measured on
 * the same server (the same runs under b200.calib, source simumax-b200,
 * are independent and quoted). */
static const char *const shared_sources[] = {"simumax", "simumax-b200-calib"};

/* Sources whose published steps ran FP8 GEMMs (experiments/fidelity/run.sh
 * says which): NeMo's FP8 performance summary (experiments/nemo-published),
 * torchtitan's Float8 runs (experiments/torchtitan-cp) and Megatron-
 * Bridge's FP8 MoE runs (experiments/megatron-bridge-moe). Every other
 * source's runs are bf16. FP8 predictions carry their own error (the FP8
 * peak and its assumed efficiency, calib.h), so a plan quotes the rows of
 * its own precision. */
static const char *const fp8_sources[] = {"nemo", "torchtitan", "mbridge"};

/* The GPU each source's runs used (experiments/fidelity/run.sh): Megatron-
 * LM's Table 1 on A100 SXM, SimuMax's first release on A100 PCIe, NeMo's
 * and torchtitan's on H100, SimuMax's B200 release. Megatron-Bridge's rows
 * name theirs (moe.mbridge.GPU.MODEL). */
static const struct {
    const char *source, *gpu;
} source_gpus[] = {{"megatron", "a100"},   {"simumax", "a100-pcie"}, {"nemo", "h100"},
                   {"torchtitan", "h100"}, {"simumax-b200", "b200"}, {"simumax-b200-calib", "b200"}};

/* Whether the n bytes at src spell the source `name`. */
static bool source_is(const char *src, size_t n, const char *name)
{
    return strlen(name) == n && !strncmp(src, name, n);
}

bool fidelity_row_gpu(const char *name, char *gpu, size_t len)
{
    const char *src = strchr(name, '.'), *end = src ? strchr(src + 1, '.') : NULL;
    if (!src || !end || !len) return false;
    size_t n = (size_t)(end - ++src);
    const char *g = NULL, *ge = NULL;
    for (size_t i = 0; i < sizeof source_gpus / sizeof *source_gpus; i++)
        if (source_is(src, n, source_gpus[i].source)) g = source_gpus[i].gpu, ge = g + strlen(g);
    if (!g && source_is(src, n, "mbridge")) /* moe.mbridge.b200.30b-a3b: the GPU follows */
        g = end + 1, ge = strchr(g, '.');
    if (!g || !ge || ge == g || (size_t)(ge - g) >= len) return false;
    memcpy(gpu, g, (size_t)(ge - g));
    gpu[ge - g] = '\0';
    return true;
}

static bool on_gpu(const char *name, const char *gpu)
{
    char g[32];
    return !gpu || (fidelity_row_gpu(name, g, sizeof g) && !strcmp(g, gpu));
}

/* Whether the row of kind length k names one of list's sources. */
static bool source_in(const char *name, size_t k, const char *const *list, size_t nlist)
{
    for (size_t i = 0; i < nlist; i++) {
        size_t n = strlen(list[i]);
        if (!strncmp(name + k + 1, list[i], n) && name[k + 1 + n] == '.') return true;
    }
    return false;
}

static bool of_kind(const char *name, const char *kind, fidelity_precision p)
{
    size_t k = strlen(kind);
    if (strncmp(name, kind, k) || name[k] != '.') return false;
    if (source_in(name, k, shared_sources, sizeof shared_sources / sizeof *shared_sources)) return false;
    bool fp8 = source_in(name, k, fp8_sources, sizeof fp8_sources / sizeof *fp8_sources);
    return p == FIDELITY_ANY || fp8 == (p == FIDELITY_FP8);
}

static const char *kind_what(const char *kind, fidelity_precision p)
{
    if (!strcmp(kind, "moe")) return "end-to-end mixture-of-experts training steps";
    if (strcmp(kind, "e2e")) return !strcmp(kind, "attn") ? "attention" : kind;
    return p == FIDELITY_BF16  ? "end-to-end bf16 training steps"
           : p == FIDELITY_FP8 ? "end-to-end FP8 training steps"
                               : "end-to-end training steps";
}

int fidelity_summarize(const fidelity_row *rows, int n, const char *kind, fidelity_precision p, fidelity_error *out)
{
    return fidelity_summarize_gpu(rows, n, kind, p, NULL, out);
}

int fidelity_summarize_gpu(const fidelity_row *rows, int n, const char *kind, fidelity_precision p, const char *gpu,
                           fidelity_error *out)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->what = kind_what(kind, p);
    out->gpu = gpu;
    double sum_abs = 0, sum_r = 0, sum_r2 = 0;
    for (int i = 0; i < n; i++) {
        if (!of_kind(rows[i].name, kind, p) || !on_gpu(rows[i].name, gpu)) continue;
        double e = rows[i].error_pct, r = log1p(e / 100);
        out->lo_pct = out->rows ? fmin(out->lo_pct, e) : e;
        out->hi_pct = out->rows ? fmax(out->hi_pct, e) : e;
        sum_abs += fabs(e);
        sum_r += r;
        sum_r2 += r * r;
        out->rows++;
    }
    int k = out->rows;
    if (!k) return 0;
    out->mean_abs_pct = sum_abs / k;
    if (k > 1) {
        double var = (sum_r2 - sum_r * sum_r / k) / (k - 1);
        out->between_pct = 100 * expm1(sqrt(2 * fmax(var, 0)));
    }
    return k;
}

/* The rows of kind and precision on gpu when there are enough of them,
 * else on every GPU. */
static int summarize_for(const fidelity_row *rows, int n, const char *kind, fidelity_precision p, const char *gpu,
                         fidelity_error *out)
{
    if (gpu && fidelity_summarize_gpu(rows, n, kind, p, gpu, out) >= FIDELITY_GPU_MIN_ROWS) return out->rows;
    return fidelity_summarize(rows, n, kind, p, out);
}

int fidelity_for_run(scope_kind s, precision_kind p, bool moe, const char *gpu, fidelity_error *out)
{
    int n;
    const fidelity_row *rows = fidelity_table(&n);
    if (s != SCOPE_STEP) return fidelity_summarize(rows, n, "attn", FIDELITY_ANY, out);
    fidelity_precision fp = p == PRECISION_BF16 ? FIDELITY_BF16 : FIDELITY_FP8;
    if (moe && summarize_for(rows, n, "moe", fp, gpu, out) > 0) return out->rows;
    if (moe && summarize_for(rows, n, "moe", FIDELITY_ANY, gpu, out) > 0) return out->rows;
    return summarize_for(rows, n, "e2e", fp, gpu, out);
}

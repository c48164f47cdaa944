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
 * GEMM shapes and attention, and its A100-PCIe runs. */
static const char *const shared_sources[] = {"simumax"};

static bool independent(const char *name, size_t k)
{
    for (size_t i = 0; i < sizeof shared_sources / sizeof shared_sources[0]; i++) {
        size_t n = strlen(shared_sources[i]);
        if (!strncmp(name + k + 1, shared_sources[i], n) && name[k + 1 + n] == '.') return false;
    }
    return true;
}

static bool of_kind(const char *name, const char *kind)
{
    size_t k = strlen(kind);
    return !strncmp(name, kind, k) && name[k] == '.' && independent(name, k);
}

int fidelity_summarize(const fidelity_row *rows, int n, const char *kind, fidelity_error *out)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->what = !strcmp(kind, "e2e") ? "end-to-end training steps" : !strcmp(kind, "attn") ? "attention" : kind;
    double sum_abs = 0, sum_r = 0, sum_r2 = 0;
    for (int i = 0; i < n; i++) {
        if (!of_kind(rows[i].name, kind)) continue;
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

int fidelity_for_scope(scope_kind s, fidelity_error *out)
{
    int n;
    const fidelity_row *rows = fidelity_table(&n);
    return fidelity_summarize(rows, n, s == SCOPE_STEP ? "e2e" : "attn", out);
}

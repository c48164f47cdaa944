/* fit_gate: judge fitted parameters before they are written. See
 * fit_gate.h. */
#include "fit_gate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void fit_gate_add(fit_gate *g, const char *name, double r2, int n, const char *degenerate)
{
    fit_gate_item *it = &g->item[g->n < FIT_GATE_MAX ? g->n++ : FIT_GATE_MAX - 1];
    snprintf(it->name, sizeof it->name, "%s", name);
    it->r2 = degenerate && degenerate[0] ? NAN : r2;
    it->n = n;
    snprintf(it->degenerate, sizeof it->degenerate, "%s", degenerate ? degenerate : "");
}

bool fit_gate_fails(const fit_gate_item *it, double min_r2) { return it->degenerate[0] || !(it->r2 >= min_r2); }

int fit_gate_failing(const fit_gate *g, double min_r2)
{
    int n = 0;
    for (int i = 0; i < g->n; i++)
        n += fit_gate_fails(&g->item[i], min_r2);
    return n;
}

void fit_gate_describe(const fit_gate_item *it, double min_r2, char *buf, size_t len)
{
    if (it->degenerate[0])
        snprintf(buf, len, "%s: no R^2: its fit is degenerate (%s)", it->name, it->degenerate);
    else
        snprintf(buf, len, "%s: R^2 = %.4f over %d points, below --min-r2 %g", it->name, it->r2, it->n, min_r2);
}

void fit_gate_note(const fit_gate *g, double min_r2, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < g->n && n < len; i++) {
        const fit_gate_item *it = &g->item[i];
        if (!fit_gate_fails(it, min_r2)) continue;
        const char *sep = n ? "; " : "";
        if (!n) n += (size_t)snprintf(buf + n, len - n, "forced past --min-r2 %g: ", min_r2);
        if (n >= len) break;
        if (it->degenerate[0])
            n += (size_t)snprintf(buf + n, len - n, "%s%s no R^2 (degenerate)", sep, it->name);
        else
            n += (size_t)snprintf(buf + n, len - n, "%s%s R^2 %.4f", sep, it->name, it->r2);
    }
}

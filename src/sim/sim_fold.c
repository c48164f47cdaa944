/*
 * sim_fold: which mesh dimensions loong sim runs by symmetry, as a set
 * (sim.h: sim_run's `folded`), read from and written as `--fold`'s text.
 * What a fold does to the run lives in sim_actor.c; this names it.
 */
#include <stdio.h>
#include <string.h>

#include "sim.h"

/* Why a dimension other than dp, tp, head and seq cannot fold: its ranks differ. */
static const char *why_not(mesh_dim d)
{
    return d == MESH_PP ? "pipeline stages run different layers" : "its ranks run different programs";
}

int sim_fold_parse(const char *s, mesh_dims *out, char err[LOONG_ERRLEN])
{
    if (!strcmp(s, "none")) {
        *out = 0;
        return 0;
    }
    mesh_dims f = 0;
    for (const char *p = s;;) {
        size_t n = strcspn(p, ",");
        int d = 0;
        while (d < MESH_NDIMS && (strlen(mesh_dim_name((mesh_dim)d)) != n || strncmp(p, mesh_dim_name((mesh_dim)d), n)))
            d++;
        if (d == MESH_NDIMS && n == 4 && !strncmp(p, "none", 4)) {
            snprintf(err, LOONG_ERRLEN,
                     "--fold '%.100s': none folds nothing and stands alone: give none, or dp, tp, head and seq", s);
            return -1;
        }
        if (d == MESH_NDIMS) {
            snprintf(err, LOONG_ERRLEN,
                     "--fold '%.100s': '%.*s' is not a mesh dimension: give none, or a comma-separated list of dp, "
                     "tp, head and seq",
                     s, (int)(n > 40 ? 40 : n), p);
            return -1;
        }
        if (!(SIM_FOLDABLE & MESH_BIT(d))) {
            snprintf(err, LOONG_ERRLEN, "--fold '%.100s': %s cannot be folded (%s): fold dp, tp, head, seq or none", s,
                     mesh_dim_name((mesh_dim)d), why_not((mesh_dim)d));
            return -1;
        }
        if (f & MESH_BIT(d)) {
            snprintf(err, LOONG_ERRLEN, "--fold '%.100s' names %s twice: name each dimension once", s,
                     mesh_dim_name((mesh_dim)d));
            return -1;
        }
        f |= MESH_BIT(d);
        if (!p[n]) break;
        p += n + 1;
    }
    *out = f;
    return 0;
}

void sim_fold_text(mesh_dims folded, char *buf, size_t len)
{
    size_t n = 0;
    if (len) buf[0] = '\0';
    /* dp first, as --fold's documentation and the default write it */
    static const mesh_dim order[] = {MESH_DP, MESH_TP, MESH_HEAD, MESH_SEQ, MESH_PP};
    for (size_t i = 0; i < sizeof order / sizeof *order; i++)
        if (folded & MESH_BIT(order[i]) && n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", mesh_dim_name(order[i]));
    if (!n) snprintf(buf, len, "none");
}

int sim_fold_check(mesh_dims folded, char err[LOONG_ERRLEN])
{
    for (int d = 0; d < MESH_NDIMS; d++)
        if (folded & MESH_BIT(d) && !(SIM_FOLDABLE & MESH_BIT(d))) {
            snprintf(err, LOONG_ERRLEN, "%s cannot be folded (%s): loong sim folds dp, tp, head and seq",
                     mesh_dim_name((mesh_dim)d), why_not((mesh_dim)d));
            return -1;
        }
    if (folded & ~(mesh_dims)((1u << MESH_NDIMS) - 1)) {
        snprintf(err, LOONG_ERRLEN, "a fold of dimensions 0x%x names no mesh dimension", folded);
        return -1;
    }
    return 0;
}

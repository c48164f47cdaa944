/* recompute: what a block's backward re-runs, by policy. See recompute.h. */
#include "recompute.h"

#include <stdio.h>
#include <string.h>

#include "pipeline.h"

void recompute_set(config *c, recompute_kind r)
{
    c->recompute = r;
    c->recompute_modules = RECOMPUTE_MOD_CORE_ATTN;
    c->recompute_method = RECOMPUTE_UNIFORM;
    c->recompute_layers = 1;
}

unsigned recompute_parts(const config *c)
{
    switch (c->recompute) {
    case RECOMPUTE_NONE: return 0;
    case RECOMPUTE_SELECTIVE:
        return (c->recompute_modules & RECOMPUTE_MOD_CORE_ATTN ? RC_A2A | RC_RING : 0) |
               (c->recompute_modules & RECOMPUTE_MOD_MLP ? RC_MLP : 0);
    case RECOMPUTE_SCPP: return RC_ALL & ~RC_RING;
    case RECOMPUTE_FULL: return RC_ALL;
    }
    return 0;
}

unsigned recompute_parts_late(const config *c)
{
    return c->recompute == RECOMPUTE_SELECTIVE ? recompute_parts(c) & (RC_A2A | RC_RING) : 0;
}

/* The chunk of `stage` that holds block l: its first block and size. */
static void chunk_of(const config *c, int stage, int l, int *first, int *n)
{
    *n = pipe_chunk_layers(c, stage);
    *first = pipe_first_layer(c, stage, 0);
    for (int k = 1; k < c->vpp; k++) {
        int f = pipe_first_layer(c, stage, k);
        if (f <= l) *first = f;
    }
}

int recompute_span(const config *c, int stage, int l, int *first)
{
    if (c->recompute == RECOMPUTE_NONE) return 0;
    if (c->recompute != RECOMPUTE_FULL) {
        *first = l;
        return 1;
    }
    int f, n, i, N = c->recompute_layers;
    chunk_of(c, stage, l, &f, &n);
    i = l - f;
    if (c->recompute_method == RECOMPUTE_BLOCK) {
        if (i >= N) return 0;
        *first = l;
        return 1;
    }
    int start = f + i / N * N, last = start + N < f + n ? start + N - 1 : f + n - 1;
    if (l != last) return 0; /* the group re-runs when its last block's backward starts */
    *first = start;
    return l - start + 1;
}

/* The most blocks a chunk of c's stages holds. */
static int largest_chunk(const config *c)
{
    int most = 0;
    for (int s = 0; s < c->pp; s++)
        if (pipe_chunk_layers(c, s) > most) most = pipe_chunk_layers(c, s);
    return most;
}

bool recompute_layers_alike(const config *c)
{
    if (c->recompute != RECOMPUTE_FULL) return true;
    if (c->recompute_method == RECOMPUTE_UNIFORM) return c->recompute_layers == 1;
    return c->recompute_layers >= largest_chunk(c);
}

void recompute_clamp_layers(config *c)
{
    int most = largest_chunk(c);
    if (c->recompute_layers > most) c->recompute_layers = most > 0 ? most : 1;
}

void recompute_chunk(const config *c, int n, int *reruns, int *inputs, int *group)
{
    int N = c->recompute_layers;
    *reruns = c->recompute == RECOMPUTE_NONE ? 0 : n;
    *inputs = 0;
    *group = c->recompute == RECOMPUTE_NONE ? 0 : 1;
    if (c->recompute != RECOMPUTE_FULL) return;
    if (c->recompute_method == RECOMPUTE_BLOCK) {
        *reruns = *inputs = N < n ? N : n;
        *group = *reruns > 0;
        return;
    }
    *inputs = (n + N - 1) / N;
    *group = N < n ? N : n;
}

/* Megatron-Core's recompute modules (transformer_config.py,
 * recompute_modules) with the bit of those loong models (0: not modelled,
 * and why). */
static const struct {
    const char *name;
    int bit;
    const char *why;
} modules[] = {
    {"core_attn", RECOMPUTE_MOD_CORE_ATTN, NULL},
    {"mlp", RECOMPUTE_MOD_MLP, NULL},
    {"layernorm", 0, "loong's blocks have no norm tasks"},
    {"moe_act", 0, "loong models no MoE"},
    {"moe", 0, "loong models no MoE"},
    {"shared_experts", 0, "loong models no MoE"},
    {"mla_up_proj", 0, "loong models no MLA"},
};
#define NMODULES (sizeof modules / sizeof modules[0])

static int module_find(const char *s, size_t len)
{
    for (size_t i = 0; i < NMODULES; i++)
        if (strlen(modules[i].name) == len && !strncmp(s, modules[i].name, len)) return (int)i;
    return -1;
}

int recompute_modules_parse(const char *s, int *mods, char err[LOONG_ERRLEN])
{
    int out = 0;
    for (const char *p = s;; p++) {
        size_t len = strcspn(p, ",");
        int i = module_find(p, len);
        if (i < 0) {
            snprintf(err, LOONG_ERRLEN,
                     "--recompute-modules: '%.*s' is not a recompute module: give a comma-separated list of "
                     "core_attn, mlp",
                     (int)(len < 60 ? len : 60), p);
            return -1;
        }
        if (!modules[i].bit) {
            snprintf(err, LOONG_ERRLEN,
                     "--recompute-modules: Megatron-Core's '%s' is not modelled (%s): use core_attn, mlp",
                     modules[i].name, modules[i].why);
            return -1;
        }
        out |= modules[i].bit;
        p += len;
        if (!*p) break;
    }
    *mods = out;
    return 0;
}

void recompute_modules_text(int mods, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s", mods & RECOMPUTE_MOD_CORE_ATTN ? "core_attn" : "",
             (mods & RECOMPUTE_MOD_CORE_ATTN) && (mods & RECOMPUTE_MOD_MLP) ? "," : "",
             mods & RECOMPUTE_MOD_MLP ? "mlp" : "");
}

void recompute_abbrev(const config *c, char *buf, size_t len)
{
    int mods = c->recompute_modules;
    switch (c->recompute) {
    case RECOMPUTE_NONE: snprintf(buf, len, "none"); break;
    case RECOMPUTE_SELECTIVE:
        snprintf(buf, len, "%s", mods == RECOMPUTE_MOD_MLP ? "sel/mlp" : mods & RECOMPUTE_MOD_MLP ? "sel+mlp" : "sel");
        break;
    case RECOMPUTE_SCPP: snprintf(buf, len, "sc++"); break;
    case RECOMPUTE_FULL:
        if (c->recompute_method == RECOMPUTE_UNIFORM && c->recompute_layers == 1)
            snprintf(buf, len, "full");
        else
            snprintf(buf, len, "full-%c%d", c->recompute_method == RECOMPUTE_BLOCK ? 'b' : 'u', c->recompute_layers);
        break;
    }
}

/* model: presets, model files and parameter counts. See model.h. */
#include "model.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const model presets[] = {
    /* name        L   hidden H   H_kv d    ffn    vocab */
    {"llama3-8b", 32, 4096, 32, 8, 128, 14336, 128256},
    {"llama3-70b", 80, 8192, 64, 8, 128, 28672, 128256},
    {"7b-mha", 32, 4096, 32, 32, 128, 11008, 32000},
    {"7b-gqa", 32, 4096, 32, 8, 128, 11008, 32000},
    {"tiny", 2, 256, 8, 2, 32, 512, 1000},
};
#define NPRESETS (sizeof presets / sizeof presets[0])

const char *model_preset_names(void) { return "llama3-8b, llama3-70b, 7b-mha, 7b-gqa, tiny"; }

int model_preset(const char *name, model *m, char err[LOONG_ERRLEN])
{
    for (size_t i = 0; i < NPRESETS; i++)
        if (strcmp(presets[i].name, name) == 0) {
            *m = presets[i];
            return 0;
        }
    snprintf(err, LOONG_ERRLEN, "unknown model '%s': use one of %s, or a model file path", name, model_preset_names());
    return -1;
}

int model_validate(const model *m, char err[LOONG_ERRLEN])
{
    const struct {
        const char *key;
        int v;
    } f[] = {
        {"layers", m->layers},     {"hidden", m->hidden}, {"heads", m->heads}, {"kv_heads", m->kv_heads},
        {"head_dim", m->head_dim}, {"ffn", m->ffn},       {"vocab", m->vocab},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v <= 0) {
            snprintf(err, LOONG_ERRLEN, "model '%s': %s must be a positive integer", m->name, f[i].key);
            return -1;
        }
    if (m->kv_heads > m->heads || m->heads % m->kv_heads) {
        snprintf(err, LOONG_ERRLEN, "model '%s': heads (%d) must be a multiple of kv_heads (%d)", m->name, m->heads,
                 m->kv_heads);
        return -1;
    }
    return 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static int *model_field(model *m, const char *key)
{
    if (!strcmp(key, "layers")) return &m->layers;
    if (!strcmp(key, "hidden")) return &m->hidden;
    if (!strcmp(key, "heads")) return &m->heads;
    if (!strcmp(key, "kv_heads")) return &m->kv_heads;
    if (!strcmp(key, "head_dim")) return &m->head_dim;
    if (!strcmp(key, "ffn")) return &m->ffn;
    if (!strcmp(key, "vocab")) return &m->vocab;
    return NULL;
}

/* Apply one `key = value` line. Returns 0, or -1 with the reason in err. */
static int model_apply_line(model *m, char *line, char err[LOONG_ERRLEN])
{
    char *eq = strchr(line, '=');
    if (!eq) {
        snprintf(err, LOONG_ERRLEN, "expected 'key = value', got '%s'", line);
        return -1;
    }
    *eq = '\0';
    char *key = trim(line), *val = trim(eq + 1);
    if (!strcmp(key, "name")) {
        if (!*val || strlen(val) >= sizeof m->name) {
            snprintf(err, LOONG_ERRLEN, "name must be 1..%zu characters", sizeof m->name - 1);
            return -1;
        }
        strcpy(m->name, val);
        return 0;
    }
    int *field = model_field(m, key);
    if (!field) {
        snprintf(err, LOONG_ERRLEN,
                 "unknown key '%s' (keys: name, layers, hidden, heads, kv_heads, head_dim, ffn, vocab)", key);
        return -1;
    }
    return units_parse_int(val, key, field, err);
}

int model_load_file(const char *path, model *m, char err[LOONG_ERRLEN])
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, LOONG_ERRLEN, "cannot open model file '%s': %m", path);
        return -1;
    }
    memset(m, 0, sizeof *m);
    const char *base = strrchr(path, '/');
    snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : path);
    char buf[512], where[LOONG_ERRLEN];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(buf, sizeof buf, f)) {
        lineno++;
        char *hash = strchr(buf, '#');
        if (hash) *hash = '\0';
        char *line = trim(buf);
        if (*line && model_apply_line(m, line, err) < 0) {
            snprintf(where, sizeof where, "%s:%d: ", path, lineno);
            loong_err_prefix(err, where);
            rc = -1;
        }
    }
    fclose(f);
    if (rc == 0 && model_validate(m, err) < 0) {
        snprintf(where, sizeof where, "%s: ", path);
        loong_err_prefix(err, where);
        rc = -1;
    }
    return rc;
}

int model_resolve(const char *spec, model *m, char err[LOONG_ERRLEN])
{
    size_t n = strlen(spec);
    bool is_path = strchr(spec, '/') != NULL;
    const char *exts[] = {".model", ".conf", ".txt"};
    for (size_t i = 0; i < 3; i++) {
        size_t k = strlen(exts[i]);
        if (n > k && !strcmp(spec + n - k, exts[i])) is_path = true;
    }
    return is_path ? model_load_file(spec, m, err) : model_preset(spec, m, err);
}

uint64_t model_layer_params(const model *m)
{
    uint64_t h = (uint64_t)m->hidden, d = (uint64_t)m->head_dim;
    uint64_t qkv = h * (uint64_t)model_qkv_heads(m) * d;
    uint64_t out = (uint64_t)m->heads * d * h;
    uint64_t mlp = 3 * h * (uint64_t)m->ffn;
    return qkv + out + mlp + 2 * h;
}

uint64_t model_head_params(const model *m)
{
    uint64_t h = (uint64_t)m->hidden;
    return 2 * (uint64_t)m->vocab * h + h;
}

uint64_t model_params(const model *m) { return (uint64_t)m->layers * model_layer_params(m) + model_head_params(m); }

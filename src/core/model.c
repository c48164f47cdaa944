/* model: presets, model files and parameter counts. See model.h. */
#include "model.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "infile.h"
#include "xalloc.h"

static const model presets[] = {
    /* name        L   hidden H   H_kv d    ffn    vocab */
    {"llama3-8b", 32, 4096, 32, 8, 128, 14336, 128256},      {"llama3-70b", 80, 8192, 64, 8, 128, 28672, 128256},
    {"llama3-405b", 126, 16384, 128, 8, 128, 53248, 128256}, {"7b-mha", 32, 4096, 32, 32, 128, 11008, 32000},
    {"7b-gqa", 32, 4096, 32, 8, 128, 11008, 32000},          {"tiny", 2, 256, 8, 2, 32, 512, 1000},
};
#define NPRESETS (sizeof presets / sizeof presets[0])

const char *model_preset_names(void) { return "llama3-8b, llama3-70b, llama3-405b, 7b-mha, 7b-gqa, tiny"; }

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
    /* bounds far beyond any published model keep every product below 2^63 */
    const struct {
        const char *key;
        int v, max;
    } f[] = {
        {"layers", m->layers, 10000},       {"hidden", m->hidden, 1 << 20},     {"heads", m->heads, 1 << 16},
        {"kv_heads", m->kv_heads, 1 << 16}, {"head_dim", m->head_dim, 1 << 16}, {"ffn", m->ffn, 1 << 24},
        {"vocab", m->vocab, 1 << 24},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v <= 0 || f[i].v > f[i].max) {
            snprintf(err, LOONG_ERRLEN, "model '%s': %s = %d is outside 1..%d", m->name, f[i].key, f[i].v, f[i].max);
            return -1;
        }
    /* the name goes into every JSON output: it must be text */
    json_t *name = json_string(m->name);
    bool text = name != NULL;
    json_decref(name);
    for (const char *p = m->name; text && *p; p++)
        text = !iscntrl((unsigned char)*p);
    if (!text) {
        snprintf(err, LOONG_ERRLEN, "the model's name is not printable UTF-8: give it one with a 'name = ...' line");
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

/* Keys of a model file, in the order of the bit that marks each seen. */
static const char *const model_keys[] = {"name", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab"};

static int *model_field(model *m, int key)
{
    int *f[] = {NULL, &m->layers, &m->hidden, &m->heads, &m->kv_heads, &m->head_dim, &m->ffn, &m->vocab};
    return f[key];
}

static int model_key(const char *key)
{
    for (int k = 0; k < (int)(sizeof model_keys / sizeof *model_keys); k++)
        if (!strcmp(key, model_keys[k])) return k;
    return -1;
}

/* Apply one `key = value` line; *seen marks the keys given so far (a key
 * given twice is an error, not "the last one wins"). Returns 0, or -1 with
 * the reason in err. */
static int model_apply_line(model *m, char *line, unsigned *seen, char err[LOONG_ERRLEN])
{
    char *eq = strchr(line, '=');
    if (!eq) {
        snprintf(err, LOONG_ERRLEN, "expected 'key = value', got '%.60s'", line);
        return -1;
    }
    *eq = '\0';
    char *key = trim(line), *val = trim(eq + 1);
    int k = model_key(key);
    if (k < 0) {
        snprintf(err, LOONG_ERRLEN,
                 "unknown key '%.40s' (keys: name, layers, hidden, heads, kv_heads, head_dim, ffn, vocab)", key);
        return -1;
    }
    if (*seen & (1u << k)) {
        snprintf(err, LOONG_ERRLEN, "'%s' is given twice: keep one line", key);
        return -1;
    }
    *seen |= 1u << k;
    if (k > 0) return units_parse_int(val, key, model_field(m, k), err);
    if (!*val || strlen(val) >= sizeof m->name) {
        snprintf(err, LOONG_ERRLEN, "name must be 1..%zu characters", sizeof m->name - 1);
        return -1;
    }
    strcpy(m->name, val);
    return 0;
}

int model_parse(const char *text, const char *file, model *m, char err[LOONG_ERRLEN])
{
    memset(m, 0, sizeof *m);
    const char *base = strrchr(file, '/');
    snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : file);
    char *copy = xstrdup(text, "a model file"), *cursor = copy, *buf, where[LOONG_ERRLEN];
    int lineno = 0, rc = 0;
    unsigned seen = 0;
    while (rc == 0 && (buf = infile_next_line(&cursor))) {
        lineno++;
        char *hash = strchr(buf, '#');
        if (hash) *hash = '\0';
        char *line = trim(buf);
        if (*line && model_apply_line(m, line, &seen, err) < 0) {
            snprintf(where, sizeof where, "%s:%d: ", file, lineno);
            loong_err_prefix(err, where);
            rc = -1;
        }
    }
    free(copy);
    for (int k = 1; rc == 0 && k < (int)(sizeof model_keys / sizeof *model_keys); k++)
        if (!(seen & (1u << k))) {
            snprintf(err, LOONG_ERRLEN, "%s: no '%s = ...' line: every key but name is required", file, model_keys[k]);
            rc = -1;
        }
    if (rc == 0 && model_validate(m, err) < 0) {
        snprintf(where, sizeof where, "%s: ", file);
        loong_err_prefix(err, where);
        rc = -1;
    }
    return rc;
}

int model_load_file(const char *path, model *m, char err[LOONG_ERRLEN])
{
    char *text = infile_read(path, "model file", INFILE_TEXT_MAX, NULL, err);
    if (!text) return -1;
    int rc = model_parse(text, path, m, err);
    free(text);
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

uint64_t model_layer_params_tp(const model *m, int tp)
{
    uint64_t h = (uint64_t)m->hidden, d = (uint64_t)m->head_dim, t = (uint64_t)tp;
    uint64_t qkv = h * (uint64_t)model_tp_qkv_heads(m, tp) * d;
    uint64_t rest = (uint64_t)m->heads * d * h + 3 * h * (uint64_t)m->ffn; /* output projection, SwiGLU */
    return qkv + rest / t + 2 * h;
}

uint64_t model_head_params_tp(const model *m, int tp)
{
    uint64_t h = (uint64_t)m->hidden, v = ((uint64_t)m->vocab + (uint64_t)tp - 1) / (uint64_t)tp;
    return 2 * v * h + h;
}

uint64_t model_params_tp(const model *m, int tp)
{
    return (uint64_t)m->layers * model_layer_params_tp(m, tp) + model_head_params_tp(m, tp);
}

/* trace: Chrome Trace Event JSON writer and reader. See trace.h. */
#include "trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

#include "autoconf.h"

double trace_us(double seconds) { return round(seconds * 1e9) / 1e3; }

static bool keep(const trace_filter *flt, const dag_task *t)
{
    if (!flt) return true;
    if (flt->rank >= 0 && t->rank != flt->rank) return false;
    return flt->layer < 0 || t->layer < 0 || t->layer == flt->layer;
}

static void write_metadata(FILE *f, const dag *g, const trace_filter *flt)
{
    const config *c = dag_config(g);
    for (int r = 0; r < config_ranks(c); r++) {
        if (flt && flt->rank >= 0 && r != flt->rank) continue;
        fprintf(f,
                "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"rank %d \xc2\xb7 node %d gpu "
                "%d\"}},\n"
                "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":{\"sort_index\":%d}},\n",
                r, r, config_node(c, r), config_gpu(c, r), r, r);
        for (int s = 0; s < STREAM_COUNT; s++) {
            uint32_t n;
            dag_stream_tasks(g, r, s, &n);
            if (!n) continue;
            fprintf(
                f,
                "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}},\n"
                "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}},\n",
                r, s, stream_name(s), r, s, s);
        }
    }
}

int trace_write(FILE *f, const dag *g, const char *backend, const double *start_s, const double *dur_s,
                const trace_filter *flt)
{
    fputs("{\"traceEvents\":[\n", f);
    write_metadata(f, g, flt);
    char label[96];
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (!keep(flt, t)) continue;
        dag_task_label(t, label, sizeof label);
        fprintf(f,
                "{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                "\"args\":{\"id\":%u,\"kind\":\"%s\",\"op\":\"%s\",\"phase\":\"%s\",\"layer\":%d,\"flops\":%llu,"
                "\"bytes\":%llu,\"peer\":%d,\"step\":%u}},\n",
                label, task_kind_name(t->kind), t->rank, t->stream, trace_us(start_s[i]), trace_us(dur_s[i]), i,
                task_kind_name(t->kind), task_op_name(t->op), task_phase_name(t->phase), t->layer,
                (unsigned long long)t->flops, (unsigned long long)dag_task_bytes_moved(g, t), t->peer, t->step);
    }
    /* a closing metadata event keeps the array free of a trailing comma */
    fputs("{\"ph\":\"M\",\"name\":\"loong_end\",\"pid\":0,\"args\":{}}\n],\n\"displayTimeUnit\":\"ms\",\n", f);
    json_t *meta = json_pack("{s:i,s:s,s:s,s:o}", "format", TRACE_FORMAT, "version", PACKAGE_VERSION, "backend",
                             backend, "config", config_to_json(dag_config(g)));
    char *ms = json_dumps(meta, JSON_COMPACT);
    json_decref(meta);
    if (!ms) return -1;
    fprintf(f, "\"loong\":%s}\n", ms);
    free(ms);
    return ferror(f) ? -1 : 0;
}

/* ---- reader ---- */

static int cmp_ev(const void *a, const void *b)
{
    uint32_t x = ((const trace_ev *)a)->id, y = ((const trace_ev *)b)->id;
    return (x > y) - (x < y);
}

static int parse_event(json_t *e, trace_ev *ev, size_t idx, char err[LOONG_ERRLEN])
{
    const char *kind, *op = "?", *phase = "fwd";
    json_int_t pid, tid, id, layer = -1, peer = -1, flops = 0, bytes = 0, step = 0;
    double ts, dur;
    json_error_t je;
    if (json_unpack_ex(e, &je, 0, "{s:I,s:I,s:F,s:F,s:{s:I,s:s,s?s,s?s,s?I,s?I,s?I,s?I,s?I}}", "pid", &pid, "tid", &tid,
                       "ts", &ts, "dur", &dur, "args", "id", &id, "kind", &kind, "op", &op, "phase", &phase, "layer",
                       &layer, "flops", &flops, "bytes", &bytes, "peer", &peer, "step", &step) < 0) {
        snprintf(err, LOONG_ERRLEN, "event %zu: %s", idx, je.text);
        return -1;
    }
    int k = task_kind_parse(kind);
    if (k < 0 || id < 0 || id > UINT32_MAX || tid < 0 || tid >= STREAM_COUNT || pid < 0 || dur < 0) {
        snprintf(err, LOONG_ERRLEN, "event %zu: invalid id, kind, pid, tid or dur", idx);
        return -1;
    }
    *ev =
        (trace_ev){(uint64_t)flops, (uint64_t)bytes, ts, dur, (uint32_t)id, (int32_t)pid, (int32_t)peer, (int16_t)layer,
                   (uint8_t)tid,    (uint8_t)k,      0,  0};
    for (int o = 0; o < OP_COUNT; o++)
        if (!strcmp(task_op_name(o), op)) ev->op = (uint8_t)o;
    for (int p = 0; p <= PHASE_REDUCE; p++)
        if (!strcmp(task_phase_name(p), phase)) ev->phase = (uint8_t)p;
    return 0;
}

static int read_events(json_t *arr, trace *t, char err[LOONG_ERRLEN])
{
    t->ev = xcalloc(json_array_size(arr) + 1, sizeof *t->ev, "a trace's events");
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        if (!ph || strcmp(ph, "X")) continue;
        if (parse_event(e, &t->ev[t->n], i, err) < 0) return -1;
        t->n++;
    }
    qsort(t->ev, t->n, sizeof *t->ev, cmp_ev);
    for (size_t k = 1; k < t->n; k++)
        if (t->ev[k].id == t->ev[k - 1].id) {
            snprintf(err, LOONG_ERRLEN, "task id %u appears twice", t->ev[k].id);
            return -1;
        }
    return 0;
}

int trace_read(const char *path, trace *t, char err[LOONG_ERRLEN])
{
    memset(t, 0, sizeof *t);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        snprintf(err, LOONG_ERRLEN, "%s: not a readable JSON trace (line %d: %s)", path, je.line, je.text);
        return -1;
    }
    json_t *meta = json_object_get(root, "loong"), *arr = json_object_get(root, "traceEvents");
    const char *backend = json_string_value(json_object_get(meta, "backend"));
    char where[LOONG_ERRLEN];
    snprintf(where, sizeof where, "%s: ", path);
    int rc = -1;
    if (!json_is_array(arr) || !backend) {
        snprintf(err, LOONG_ERRLEN, "missing \"traceEvents\" or the \"loong\" object (not written by loong?)");
        loong_err_prefix(err, where);
    } else if (config_from_json(json_object_get(meta, "config"), &t->cfg, err) < 0 || read_events(arr, t, err) < 0) {
        loong_err_prefix(err, where);
    } else {
        snprintf(t->backend, sizeof t->backend, "%s", backend);
        rc = 0;
    }
    json_decref(root);
    if (rc < 0) trace_free(t);
    return rc;
}

void trace_free(trace *t)
{
    free(t->ev);
    t->ev = NULL;
    t->n = 0;
}

double trace_makespan(const trace *t)
{
    double end = 0;
    for (size_t i = 0; i < t->n; i++)
        if (t->ev[i].ts + t->ev[i].dur > end) end = t->ev[i].ts + t->ev[i].dur;
    return end;
}

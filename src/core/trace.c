/* trace: Chrome Trace Event JSON writer and reader. See trace.h. */
#include "trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "infile.h"
#include "xalloc.h"

#include "autoconf.h"

double trace_us(double seconds) { return round(seconds * 1e9) / 1e3; }

static bool keep(const trace_filter *flt, const dag_task *t)
{
    if (!flt) return true;
    if (flt->rank >= 0 && t->rank != flt->rank) return false;
    if (flt->drop_kinds & (1u << t->kind)) return false;
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

/* ---- flows ----
 *
 * Arrows between slices, in the legacy flow events of the Trace Event Format
 * ("Flow events": "ph":"s" starts a flow, "ph":"f" ends it; they match by
 * id, cat and name), as Perfetto's JSON importer reads them
 * (google/perfetto src/trace_processor/importers/json/json_trace_parser_impl.cc,
 * cases 's' and 'f'; importers/common/flow_tracker.cc): an "s" binds to the
 * slice open on its pid/tid at its ts, an "f" with "bp":"e" to the enclosing
 * slice likewise (without it, to the next slice that begins). The
 * bind_id/flow_in/flow_out form would add keys to the task events
 * themselves; these separate events leave them byte-identical.
 *
 * Perfetto reads events in ts order and drops an "f" met before its "s"
 * (stat flow_end_without_start), so an arrow never points back in time: a
 * recv posted before its send started gets its "f" at the send's start,
 * still inside the recv's slice. The flow's id is the task id of its start
 * slice (a send, or a collective member): unique in the trace, the same on
 * every run. Events follow the task events, in the order below. */

static bool written(const trace_filter *flt, const dag *g, uint32_t id)
{
    return id != DAG_NONE && keep(flt, dag_task_get(g, id));
}

typedef struct member {
    double ts; /* microseconds, as written */
    uint32_t inst, id;
} member;

static int cmp_member(const void *a, const void *b)
{
    const member *x = a, *y = b;
    if (x->inst != y->inst) return (x->inst > y->inst) - (x->inst < y->inst);
    if (x->ts != y->ts) return (x->ts > y->ts) - (x->ts < y->ts);
    return (x->id > y->id) - (x->id < y->id);
}

static void write_flow(FILE *f, const char *cat, const dag_task *from, double from_us, const dag_task *to, double to_us)
{
    const char *name = task_op_name(from->op);
    fprintf(f,
            "{\"ph\":\"s\",\"id\":%u,\"cat\":\"%s\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f},\n"
            "{\"ph\":\"f\",\"bp\":\"e\",\"id\":%u,\"cat\":\"%s\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,"
            "\"ts\":%.3f},\n",
            from->id, cat, name, from->rank, from->stream, from_us, from->id, cat, name, to->rank, to->stream, to_us);
}

/* Each send to its recv ("cat":"p2p"), in send id order; then the written
 * members of each collective instance in a chain ("cat":"coll"), from the
 * first to start to the last (ties by id), instances in the order of their
 * first task: a user hops from member to member. A flow is written only when
 * both its slices are. */
static void write_flows(FILE *f, const dag *g, const double *start_s, const double *dur_s, const trace_filter *flt)
{
    uint32_t n = dag_ntasks(g), nm = 0;
    member *m = NULL;
    for (uint32_t i = 0; i < n; i++) {
        const dag_task *t = dag_task_get(g, i);
        if (!keep(flt, t)) continue;
        if (t->kind == TASK_SEND && written(flt, g, t->match)) {
            const dag_task *r = dag_task_get(g, t->match);
            double s_us = trace_us(start_s[i]), r_us = trace_us(start_s[r->id]), r_end = r_us + trace_us(dur_s[r->id]);
            write_flow(f, "p2p", t, s_us, r, fmin(fmax(r_us, s_us), r_end));
        } else if (task_is_collective(t) && t->match != DAG_NONE) {
            if (!m) m = xcalloc(n, sizeof *m, "a trace's collective members");
            m[nm++] = (member){trace_us(start_s[i]), t->match, i};
        }
    }
    if (nm > 1) qsort(m, nm, sizeof *m, cmp_member);
    for (uint32_t k = 1; k < nm; k++)
        if (m[k].inst == m[k - 1].inst)
            write_flow(f, "coll", dag_task_get(g, m[k - 1].id), m[k - 1].ts, dag_task_get(g, m[k].id), m[k].ts);
    free(m);
}

/* Task t's "X" event, start and duration in microseconds, into f; with f
 * NULL only its length: the writer and the size estimate share one format. */
static int task_event(FILE *f, const dag *g, const dag_task *t, double ts_us, double dur_us)
{
    static const char fmt[] =
        "{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
        "\"args\":{\"id\":%u,\"kind\":\"%s\",\"op\":\"%s\",\"phase\":\"%s\",\"layer\":%d,\"flops\":%llu,"
        "\"bytes\":%llu,\"peer\":%d,\"step\":%u%s}},\n";
    char label[96];
    dag_task_label(t, label, sizeof label);
#define TASK_EVENT_ARGS                                                                                                \
    label, task_kind_name(t->kind), t->rank, t->stream, ts_us, dur_us, t->id, task_kind_name(t->kind),                 \
        task_op_name(t->op), task_phase_name(t->phase), t->layer, (unsigned long long)t->flops,                        \
        (unsigned long long)dag_task_bytes_moved(g, t), t->peer, t->step, mb
    char mb[24] = ""; /* the micro-batch, when the step has more than one */
    if (dag_config(g)->micro_batches > 1) snprintf(mb, sizeof mb, ",\"mb\":%u", t->mb);
    int n = f ? fprintf(f, fmt, TASK_EVENT_ARGS) : snprintf(NULL, 0, fmt, TASK_EVENT_ARGS);
#undef TASK_EVENT_ARGS
    return n;
}

#define TRACE_SAMPLE 65536
/* What the times add past "0.000" each, for steps of ~0.1 to 10 s: a
 * start stamp of 6 to 7 digits before the point, a duration of 1 to 4. */
#define TRACE_TIMES_EXTRA 9
#define TRACE_FLOW_BYTES  190 /* an "s" and an "f" event, their stamps included */

double trace_estimate_bytes(const dag *g, const trace_filter *flt)
{
    uint32_t n = dag_ntasks(g), stride = n / TRACE_SAMPLE + 1;
    double kept = 0, flows = 0, sampled = 0, bytes = 0;
    for (uint32_t i = 0; i < n; i++) {
        const dag_task *t = dag_task_get(g, i);
        if (!keep(flt, t)) continue;
        kept++;
        flows += (t->kind == TASK_SEND && written(flt, g, t->match)) || (task_is_collective(t) && t->match != DAG_NONE);
        if (i % stride) continue;
        sampled++;
        bytes += task_event(NULL, g, t, 0, 0) + TRACE_TIMES_EXTRA;
    }
    return (sampled > 0 ? bytes / sampled * kept : 0) + flows * TRACE_FLOW_BYTES;
}

/* The counter tracks: one "C" event per sample, on the rank's process. A
 * sample repeating the previous one is left out (Perfetto holds a value
 * until the next sample). */
static void write_counters(FILE *f, const trace_counter *cnt, size_t ncnt, const trace_filter *flt)
{
    for (size_t c = 0; c < ncnt; c++) {
        const trace_counter *k = &cnt[c];
        if (flt && flt->rank >= 0 && k->rank != flt->rank) continue;
        for (size_t i = 0; i < k->n; i++) {
            const double *v = &k->values[i * (size_t)k->nseries];
            if (i > 0 && !memcmp(v, v - k->nseries, (size_t)k->nseries * sizeof *v)) continue;
            fprintf(f, "{\"ph\":\"C\",\"name\":\"%s\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"args\":{", k->name, k->rank,
                    trace_us(k->ts_s[i]));
            for (int j = 0; j < k->nseries; j++)
                fprintf(f, "%s\"%s\":%.0f", j ? "," : "", k->series[j], v[j]);
            fputs("}},\n", f);
        }
    }
}

int trace_write(FILE *f, const dag *g, const char *backend, const double *start_s, const double *dur_s,
                const trace_filter *flt, json_t *perturbed)
{
    return trace_write_counters(f, g, backend, start_s, dur_s, flt, perturbed, NULL, 0);
}

int trace_write_counters(FILE *f, const dag *g, const char *backend, const double *start_s, const double *dur_s,
                         const trace_filter *flt, json_t *perturbed, const trace_counter *cnt, size_t ncnt)
{
    fputs("{\"traceEvents\":[\n", f);
    write_metadata(f, g, flt);
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (keep(flt, t)) task_event(f, g, t, trace_us(start_s[i]), trace_us(dur_s[i]));
    }
    write_flows(f, g, start_s, dur_s, flt);
    write_counters(f, cnt, ncnt, flt);
    /* a closing metadata event keeps the array free of a trailing comma */
    fputs("{\"ph\":\"M\",\"name\":\"loong_end\",\"pid\":0,\"args\":{}}\n],\n\"displayTimeUnit\":\"ms\",\n", f);
    json_t *meta = json_pack("{s:i,s:s,s:s,s:o}", "format", TRACE_FORMAT, "version", PACKAGE_VERSION, "backend",
                             backend, "config", config_to_json(dag_config(g)));
    if (perturbed) json_object_set_new(meta, "whatif", perturbed);
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

/* An event's value outside its range: "event 12 (task 7): ts 1e308 ..." */
static int bad_event(size_t idx, json_int_t id, const char *what, char err[LOONG_ERRLEN])
{
    if (id >= 0)
        snprintf(err, LOONG_ERRLEN, "event %zu (task %lld): %s: regenerate the trace", idx, (long long)id, what);
    else
        snprintf(err, LOONG_ERRLEN, "event %zu: %s: regenerate the trace", idx, what);
    return -1;
}

static int name_index(const char *name, const char *(*name_of)(int), int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(name_of(i), name)) return i;
    return -1;
}

/* One "ph":"X" event, checked against the trace's configuration. */
static int parse_event(json_t *e, const config *c, trace_ev *ev, size_t idx, char err[LOONG_ERRLEN])
{
    const char *kind, *op = NULL, *phase = "fwd";
    json_int_t pid, tid, id = -1, layer = -1, peer = -1, flops = 0, bytes = 0, step = 0;
    double ts, dur;
    json_error_t je;
    if (json_unpack_ex(e, &je, 0, "{s:I,s:I,s:F,s:F,s:{s:I,s:s,s?s,s?s,s?I,s?I,s?I,s?I,s?I}}", "pid", &pid, "tid", &tid,
                       "ts", &ts, "dur", &dur, "args", "id", &id, "kind", &kind, "op", &op, "phase", &phase, "layer",
                       &layer, "flops", &flops, "bytes", &bytes, "peer", &peer, "step", &step) < 0)
        return bad_event(idx, -1, je.text, err);
    int k = task_kind_parse(kind), o = op ? name_index(op, task_op_name, OP_COUNT) : 0,
        ph = name_index(phase, task_phase_name, PHASE_REDUCE + 1), P = config_ranks(c);
    char why[160];
    if (id < 0 || id > UINT32_MAX) return bad_event(idx, -1, "args.id is not a task id (0..2^32-1)", err);
    if (k < 0 || o < 0 || ph < 0) {
        snprintf(why, sizeof why, "unknown kind '%.20s', op '%.20s' or phase '%.20s'", kind, op ? op : "", phase);
        return bad_event(idx, id, why, err);
    }
    if (pid < 0 || pid >= P || peer < -1 || peer >= P) {
        snprintf(why, sizeof why, "pid %lld or peer %lld is not a rank of the configuration's %d", (long long)pid,
                 (long long)peer, P);
        return bad_event(idx, id, why, err);
    }
    if (tid < 0 || tid >= STREAM_COUNT || layer < -1 || layer >= c->model.layers || flops < 0 || bytes < 0 ||
        step < 0 || step > UINT32_MAX) {
        snprintf(why, sizeof why, "tid %lld, layer %lld, flops, bytes or step out of range (layers -1..%d)",
                 (long long)tid, (long long)layer, c->model.layers - 1);
        return bad_event(idx, id, why, err);
    }
    /* 1e12 us is eleven days: beyond it a time is an edit or a broken clock */
    if (!(ts >= 0 && ts <= TRACE_MAX_US && dur >= 0 && dur <= TRACE_MAX_US)) {
        snprintf(why, sizeof why, "ts %g or dur %g us is outside [0, 1e12] us", ts, dur);
        return bad_event(idx, id, why, err);
    }
    *ev = (trace_ev){(uint64_t)flops, (uint64_t)bytes, ts,           dur,        (uint32_t)id, (int32_t)pid,
                     (int32_t)peer,   (int16_t)layer,  (uint8_t)tid, (uint8_t)k, (uint8_t)o,   (uint8_t)ph};
    return 0;
}

/* One flow event ("ph" s, t or f): skipped, but only when it could bind to
 * a slice of this trace (a rank, a stream, a time in range, an id). */
static int check_flow(json_t *e, const config *c, size_t idx, char err[LOONG_ERRLEN])
{
    json_int_t pid, tid;
    double ts;
    json_t *id;
    json_error_t je;
    char why[200];
    if (json_unpack_ex(e, &je, 0, "{s:I,s:I,s:F,s:o}", "pid", &pid, "tid", &tid, "ts", &ts, "id", &id) < 0) {
        snprintf(why, sizeof why, "flow event: needs pid, tid, ts and id: %s", je.text);
        return bad_event(idx, -1, why, err);
    }
    if (!json_is_integer(id) && !json_is_string(id))
        return bad_event(idx, -1, "flow event: id is neither an integer nor a string", err);
    if (pid < 0 || pid >= config_ranks(c) || tid < 0 || tid >= STREAM_COUNT) {
        snprintf(why, sizeof why, "flow event: pid %lld or tid %lld is not a rank or stream of the configuration",
                 (long long)pid, (long long)tid);
        return bad_event(idx, -1, why, err);
    }
    if (!(ts >= 0 && ts <= TRACE_MAX_US)) {
        snprintf(why, sizeof why, "flow event: ts %g us is outside [0, 1e12] us", ts);
        return bad_event(idx, -1, why, err);
    }
    return 0;
}

static int read_events(json_t *arr, trace *t, char err[LOONG_ERRLEN])
{
    t->ev = xcalloc(json_array_size(arr) + 1, sizeof *t->ev, "a trace's events");
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        if (!json_is_object(e)) return bad_event(i, -1, "not a JSON object: every traceEvents entry is one", err);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        if (ph && (!strcmp(ph, "s") || !strcmp(ph, "t") || !strcmp(ph, "f"))) {
            if (check_flow(e, &t->cfg, i, err) < 0) return -1;
            t->nflow++;
            continue;
        }
        if (!ph || strcmp(ph, "X")) continue;
        if (parse_event(e, &t->cfg, &t->ev[t->n], i, err) < 0) return -1;
        t->n++;
    }
    if (!t->n) {
        snprintf(err, LOONG_ERRLEN,
                 "holds no task events (\"ph\":\"X\"): a trace of a run has one per task: regenerate it");
        return -1;
    }
    qsort(t->ev, t->n, sizeof *t->ev, cmp_ev);
    for (size_t k = 1; k < t->n; k++)
        if (t->ev[k].id == t->ev[k - 1].id) {
            snprintf(err, LOONG_ERRLEN, "task id %u appears twice", t->ev[k].id);
            return -1;
        }
    return 0;
}

int trace_parse(const char *buf, size_t len, const char *path, trace *t, char err[LOONG_ERRLEN])
{
    memset(t, 0, sizeof *t);
    json_error_t je;
    json_t *root = json_loadb(buf, len, 0, &je);
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
        char *w = json_object_get(meta, "whatif") ? json_dumps(json_object_get(meta, "whatif"), JSON_COMPACT) : NULL;
        snprintf(t->whatif, sizeof t->whatif, "%s", w ? w : "");
        free(w);
        rc = 0;
    }
    json_decref(root);
    if (rc < 0) trace_free(t);
    return rc;
}

/* Peak memory to parse a trace, per byte of its file: the file, jansson's
 * objects for the events, the event array (measured 16.7 on a 21 MB trace:
 * README, "Reliability"). */
#define TRACE_MEM_PER_BYTE 17

int trace_read(const char *path, trace *t, char err[LOONG_ERRLEN])
{
    memset(t, 0, sizeof *t);
    long long size = infile_size(path);
    double phys = xalloc_machine_bytes();
    if (size > 0 && (double)size * TRACE_MEM_PER_BYTE > phys && phys > 0) {
        snprintf(err, LOONG_ERRLEN,
                 "trace '%s' is %.1f GiB: parsing it would need ~%.0f GiB, more than this machine's %.0f GiB: trace "
                 "fewer ranks or layers (--trace-rank, --trace-layer)",
                 path, (double)size / (1 << 30), (double)size * TRACE_MEM_PER_BYTE / (1 << 30), phys / (1 << 30));
        return -1;
    }
    size_t len;
    char *buf = infile_read(path, "trace", TRACE_MAX_BYTES, &len, err);
    if (!buf) return -1;
    int rc = trace_parse(buf, len, path, t, err);
    free(buf);
    return rc;
}

int trace_check_dag(const trace *t, const dag *g, char err[LOONG_ERRLEN])
{
    uint32_t n = dag_ntasks(g);
    for (size_t i = 0; i < t->n; i++) {
        const trace_ev *e = &t->ev[i];
        const dag_task *d = e->id < n ? dag_task_get(g, e->id) : NULL;
        const char *bad = !d                       ? "is not a task of the configuration"
                          : e->kind != d->kind     ? "has another kind than the configuration's task"
                          : e->rank != d->rank     ? "runs on another rank than the configuration's task"
                          : e->stream != d->stream ? "runs on another stream than the configuration's task"
                          : e->layer != d->layer   ? "has another layer than the configuration's task"
                          : e->op != d->op         ? "has another op than the configuration's task"
                                                   : NULL;
        if (bad) {
            snprintf(err, LOONG_ERRLEN, "task %u (%s on rank %d) %s (%u tasks): was the trace edited?", e->id,
                     task_kind_name(e->kind), e->rank, bad, n);
            return -1;
        }
    }
    return 0;
}

void trace_free(trace *t)
{
    free(t->ev);
    t->ev = NULL;
    t->n = 0;
}

size_t trace_drop_kinds(trace *t, unsigned drop_kinds, double *busy_us)
{
    size_t kept = 0;
    *busy_us = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->ev[i].kind < 32 && drop_kinds & (1u << t->ev[i].kind)) {
            *busy_us += t->ev[i].dur;
            continue;
        }
        t->ev[kept++] = t->ev[i];
    }
    size_t gone = t->n - kept;
    t->n = kept;
    return gone;
}

double trace_makespan(const trace *t)
{
    double end = 0;
    for (size_t i = 0; i < t->n; i++)
        if (t->ev[i].ts + t->ev[i].dur > end) end = t->ev[i].ts + t->ev[i].dur;
    return end;
}

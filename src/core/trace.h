/*
 * trace: the Chrome Trace Event JSON every backend writes (DESIGN.md, "Trace
 * format"), and its reader for compare/calibrate.
 *
 * One complete event ("ph":"X") per task: pid = rank, tid = stream index,
 * ts/dur in microseconds (fractions to the nanosecond), args = {id, kind,
 * op, phase, layer, flops, bytes, peer, step}; "bytes" is what the task
 * moves (a recv: what it receives). Metadata events name each rank
 * ("rank 9 · node 1 gpu 1") and stream. The top-level "loong" object holds
 * {format, version, backend, config}. Opens in Perfetto and chrome://tracing.
 * After the task events, flow events ("ph":"s" on a send, "ph":"f" on its
 * recv; a chain through each collective's members) draw arrows between
 * ranks in Perfetto; readers skip them (trace.c, "flows").
 *
 * Layer: core (libc and jansson only: it knows no predictor, measurement or backend).
 */
#ifndef LOONG_TRACE_H
#define LOONG_TRACE_H

#include <jansson.h>
#include <stdio.h>

#include "dag.h"

#define TRACE_FORMAT 1

/* The one time convention: seconds -> microseconds rounded to the
 * nanosecond. Every backend converts through this. */
double trace_us(double seconds);

typedef struct trace_filter {
    int rank;            /* only this rank, or -1 */
    int layer;           /* only this layer, or -1 (model-level tasks are layer -1 and kept) */
    unsigned drop_kinds; /* bit 1 << kind: tasks of that kind left out (what a backend does not run) */
} trace_filter;

/* The kinds loong's executor runs as empty ops and leaves out of its
 * trace (a duration of nothing would read as a measurement): the step's
 * elementwise kernels, norm .. optim (dag.h). */
#define TRACE_EXEC_SKIPS (((1u << (TASK_COMPUTE_LAST + 1)) - 1) & ~((1u << TASK_NORM) - 1))

/* Write the trace of g. start_s[id] and dur_s[id] are seconds from the step's
 * start; flt may be NULL. `perturbed`, when not NULL, describes what the
 * run was perturbed by (model/whatif.h) and becomes the "whatif" member
 * of the trace's "loong" object, beside its config (the reference is
 * taken). The flow events link only slices both written under flt.
 * Returns 0, or -1 on a write error. */
int trace_write(FILE *f, const dag *g, const char *backend, const double *start_s, const double *dur_s,
                const trace_filter *flt, json_t *perturbed);

/* A counter track of one rank: n samples; from ts_s[i] (seconds from the
 * step's start) on, series k holds values[i * nseries + k]. Written as
 * "ph":"C" events named `name` with one arg per series, on the rank's
 * process (pid = rank), which Perfetto draws as one track per series,
 * "<name> <series>", under the rank's streams (its JSON importer, case 'C',
 * google/perfetto src/trace_processor/importers/json/
 * json_trace_parser_impl.cc), and chrome://tracing as one stacked chart. */
typedef struct trace_counter {
    int rank;
    const char *name;
    int nseries;
    const char *const *series;
    size_t n;
    const double *ts_s, *values;
} trace_counter;

/* trace_write, with the ncnt counter tracks cnt after the flow events
 * (those of ranks that flt leaves out are not written; trace_write writes
 * none). Values are written rounded to integers (bytes). */
int trace_write_counters(FILE *f, const dag *g, const char *backend, const double *start_s, const double *dur_s,
                         const trace_filter *flt, json_t *perturbed, const trace_counter *cnt, size_t ncnt);

/* About how many bytes trace_write writes for g under flt (NULL: all):
 * the task events formatted for a sample of at most 65,536 kept tasks,
 * scaled to all of them, their time stamps sized for steps of 0.1 to 10 s,
 * plus two flow events per kept send and collective member (within 10 %
 * of the file: tests/check_sim.c). Cheap enough to call before simulating,
 * to refuse or warn about a trace too large. */
double trace_estimate_bytes(const dag *g, const trace_filter *flt);

/* Perfetto's UI opens traces up to about this size (its in-browser
 * limit); `loong sim` warns above it. */
#define TRACE_PERFETTO_MAX 1e9

typedef struct trace_ev {
    uint64_t flops, bytes;
    double ts, dur; /* microseconds */
    uint32_t id;
    int32_t rank, peer;
    int16_t layer;
    uint8_t stream, kind, op, phase;
} trace_ev;

typedef struct trace {
    config cfg;
    char backend[32];
    char whatif[256]; /* the perturbations of a what-if run, as compact JSON; "" for a clean run */
    trace_ev *ev;     /* sorted by id */
    size_t n;
    size_t nflow; /* flow events ("ph" s, t, f): checked, counted, otherwise skipped */
} trace;

/* Read a trace written by any backend, with or without flow events.
 * Returns 0, or -1 with a one-line message for unreadable files, invalid
 * JSON, missing fields, no task event, an event whose rank, layer, kind, op
 * or times fall outside the trace's own configuration, or a flow event
 * without an id or with a pid, tid or ts out of range. Files above TRACE_MAX_BYTES, or above what
 * this machine's memory can parse, are refused before reading. */
int trace_read(const char *path, trace *t, char err[LOONG_ERRLEN]);
/* The same from memory (path names it in messages). */
int trace_parse(const char *buf, size_t len, const char *path, trace *t, char err[LOONG_ERRLEN]);

/* Check each event against the task of its id in g (built from t->cfg):
 * the id exists and kind, rank, stream, layer and op agree. Returns 0 or -1
 * naming the task. */
int trace_check_dag(const trace *t, const dag *g, char err[LOONG_ERRLEN]);

#define TRACE_MAX_BYTES ((size_t)4 << 30)
#define TRACE_MAX_US    1e12
void trace_free(trace *t);

/* Leave out t's events of the kinds in drop_kinds (bit 1 << kind), as a
 * backend that does not run them wrote its trace. Returns how many went
 * and, in *busy_us, their summed durations. */
size_t trace_drop_kinds(trace *t, unsigned drop_kinds, double *busy_us);

/* End of the last event (microseconds): the step time of the trace. */
double trace_makespan(const trace *t);

#endif

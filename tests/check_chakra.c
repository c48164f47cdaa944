/* loong dag --format chakra from the outside: every rank's Chakra ET file is
 * decoded by protoc (not by our protobuf-c code), under proto/chakra_et.proto,
 * and checked against the DAG that `loong dag --format json` prints for the
 * same configuration: one node per task of the rank in the file of its
 * ASTRA-sim NPU, the node types, data_deps (the union over each NCCL group),
 * stream order as ctrl_deps, FLOPs and tensor sizes, send/recv peers (as
 * NPUs), sizes and tags, collective types, groups (ids from 1) and sizes.
 * The properties ASTRA-sim enforces (astra_props) are also checked on
 * deliberately broken copies of an export, each of which must fail. Then
 * bad input: one line, exit 2, no directory left behind. Skips (77) when
 * loong was built without protobuf-c or protoc is missing. */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_run.h"
#include "cli_util.h"

#define LOONG  LOONG_BIN
#define PROTOS "-I" LOONG_SRCDIR "/proto -I" LOONG_SRCDIR "/tests " LOONG_SRCDIR "/tests/chakra_stream.proto"

/* Chakra's CollectiveCommType numbers (schema/protobuf/et_def.proto). */
enum { ALL_REDUCE = 0, ALL_GATHER = 2, ALL_TO_ALL = 6, REDUCE_SCATTER = 7 };

/* ---- one decoded node (protoc's text format) ---- */

#define MAXDEPS  64
#define MAXATTRS 16
typedef struct node {
    uint64_t id;
    char type[32];
    uint64_t data[MAXDEPS], ctrl[MAXDEPS];
    int ndata, nctrl;
    char aname[MAXATTRS][32], aval[MAXATTRS][64];
    int nattr;
} node;

static const char *attr(const node *n, const char *name)
{
    for (int i = 0; i < n->nattr; i++)
        if (!strcmp(n->aname[i], name)) return n->aval[i];
    return NULL;
}
static long long attr_ll(const node *n, const char *name)
{
    const char *v = attr(n, name);
    ck_assert_msg(v, "node %llu has no attribute %s", (unsigned long long)n->id, name);
    return strtoll(v, NULL, 10);
}

/* Strip protoc's quotes. */
static void unquote(char *dst, size_t len, const char *v)
{
    size_t n = strlen(v);
    if (n >= 2 && v[0] == '"') v++, n -= 2;
    snprintf(dst, len, "%.*s", (int)n, v);
}

/* Parse `protoc --decode=loongtest.EtStream` output into nodes; returns the
 * count and sets *version to the metadata's version. */
static int parse_stream(char *text, node **out, char *version, size_t vlen)
{
    int cap = 64, n = 0, depth = 0;
    node *v = calloc((size_t)cap, sizeof *v), *cur = NULL;
    bool in_meta = false;
    *version = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        while (*line == ' ')
            line++;
        char *colon = strchr(line, ':');
        size_t l = strlen(line);
        if (l && line[l - 1] == '{') {
            if (depth == 0 && !strncmp(line, "node", 4)) {
                if (n == cap) v = realloc(v, (size_t)(cap *= 2) * sizeof *v);
                cur = &v[n++];
                memset(cur, 0, sizeof *cur);
            }
            if (depth == 0) in_meta = !strncmp(line, "metadata", 8);
            if (depth == 1 && cur) cur->nattr++; /* attr { */
            depth++;
            continue;
        }
        if (!strcmp(line, "}")) {
            depth--;
            continue;
        }
        ck_assert_msg(colon, "unexpected protoc line '%s'", line);
        *colon = 0;
        const char *key = line, *val = colon + 2;
        if (in_meta) {
            if (depth == 1 && !strcmp(key, "version")) unquote(version, vlen, val);
            continue;
        }
        ck_assert_ptr_nonnull(cur);
        if (depth == 1) {
            if (!strcmp(key, "id"))
                cur->id = strtoull(val, NULL, 10);
            else if (!strcmp(key, "type"))
                snprintf(cur->type, sizeof cur->type, "%s", val);
            else if (!strcmp(key, "data_deps")) {
                ck_assert_int_lt(cur->ndata, MAXDEPS);
                cur->data[cur->ndata++] = strtoull(val, NULL, 10);
            } else if (!strcmp(key, "ctrl_deps")) {
                ck_assert_int_lt(cur->nctrl, MAXDEPS);
                cur->ctrl[cur->nctrl++] = strtoull(val, NULL, 10);
            }
        } else if (depth == 2) {
            ck_assert_int_le(cur->nattr, MAXATTRS);
            int a = cur->nattr - 1;
            if (!strcmp(key, "name"))
                unquote(cur->aname[a], sizeof cur->aname[a], val);
            else
                unquote(cur->aval[a], sizeof cur->aval[a], val);
        }
    }
    *out = v;
    return n;
}

/* ---- the ET file: varint32 frames, re-framed as one EtStream message ---- */

static unsigned char *read_bin(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    ck_assert_int_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* Put a field tag before each frame: 1 (metadata) before the first, 2
 * (node) before the others. Checks that the frames tile the file exactly. */
static int reframe(const char *et, const char *out)
{
    size_t len, at = 0;
    unsigned char *b = read_bin(et, &len);
    FILE *f = fopen(out, "wb");
    ck_assert_ptr_nonnull(f);
    int frames = 0;
    while (at < len) {
        uint64_t size = 0;
        size_t start = at;
        for (int shift = 0;; shift += 7) {
            ck_assert_msg(at < len && shift < 35, "%s: truncated varint at byte %zu", et, at);
            size |= (uint64_t)(b[at] & 0x7f) << shift;
            if (!(b[at++] & 0x80)) break;
        }
        ck_assert_msg(size <= len - at, "%s: frame at byte %zu runs past the end", et, start);
        fputc(frames ? 0x12 : 0x0a, f);
        fwrite(b + start, 1, at - start + size, f);
        at += size;
        frames++;
    }
    fclose(f);
    free(b);
    return frames;
}

/* ---- the DAG (JSON) ---- */

static json_t *dag_json(const char *cfg, const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/dag.json", dir);
    run_result r = run_cmd(LOONG " dag %s --format json -o %s", cfg, path);
    ck_assert_msg(r.status == 0, "loong dag --format json: %s", r.err);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    ck_assert_msg(j != NULL, "%s: %s", path, e.text);
    return j;
}

static long long jint(const json_t *t, const char *k) { return json_integer_value(json_object_get(t, k)); }

static bool has(const uint64_t *v, int n, uint64_t x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x) return true;
    return false;
}

/* Bytes one member sends for comm_size in ASTRA-sim 518bd51
 * (system/astraccl/native_collectives/collective_algorithm/Ring.cc and
 * AllToAll.cc): ring all-reduce 2(n-1) messages of size/n, reduce-scatter
 * n-1 of size/n, all-gather n-1 of size; all-to-all n-1 of size/n direct,
 * n(n-1)/2 of size/n on the ring. */
static uint64_t astra_sent(int type, uint64_t size, uint64_t n, bool ring_a2a)
{
    switch (type) {
    case ALL_REDUCE: return 2 * (n - 1) * (size / n);
    case ALL_GATHER: return (n - 1) * size;
    case ALL_TO_ALL: return ring_a2a ? n * (n - 1) / 2 * (size / n) : (n - 1) * (size / n);
    default: return (n - 1) * (size / n);
    }
}

/* The export's dimension order: --dimensions nvlink-first puts each
 * node's NVSwitch first (set by verify from its options). */
static bool nvlink_first;

/* ASTRA-sim's NPU of loong rank r: network.yml's dimension 0 is the rail
 * (node), dimension 1 the GPU slot, and NPU ids vary fastest along
 * dimension 0 (MultiDimTopology::translate_address); one node, or the
 * NVSwitch first (the GPU slot varying fastest): NPU = rank. */
static int npu(int r, int ranks, int gpn)
{
    if (ranks <= gpn || ranks % gpn || nvlink_first) return r;
    int nodes = ranks / gpn;
    return r % gpn * nodes + r / gpn;
}

static int expect_type(const char *kind)
{
    if (!strcmp(kind, "all_to_all")) return ALL_TO_ALL;
    if (!strcmp(kind, "all_reduce")) return ALL_REDUCE;
    if (!strcmp(kind, "reduce_scatter")) return REDUCE_SCATTER;
    ck_assert_str_eq(kind, "all_gather");
    return ALL_GATHER;
}

/* ---- one export, decoded ---- */

typedef struct export
{
    int ranks, gpn;
    node **of;        /* by task id: its decoded node */
    json_t *tasks;    /* the DAG's (loong dag --format json) */
    json_t *groups;   /* workload.json */
    bool ring_a2a;    /* system.json names the ring all-to-all */
    long long *first; /* by task id: the first member of its NCCL group */
}
export;

static bool failf(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool failf(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return false;
}

/* The properties ASTRA-sim enforces or relies on, true when x has them all
 * (else false with the first broken one in why):
 *   ids      every collective's pg_name is a group id above 0 that
 *            workload.json defines, and workload.json has no id 0
 *            (CommunicatorGroup.cc set_id asserts id > 0; Workload.cc reads
 *            pg_name "0" as every rank);
 *   deps     every node's data_deps are the union of its NCCL group's
 *            (ASTRA-sim issues each node alone, when its own deps are met);
 *   tensor   every compute node has a tensor_size above 0 (Workload.cc's
 *            roofline takes 0 or a missing one for an invalid node);
 *   a2a      every all-to-all's comm_size makes each member send the DAG's
 *            bytes under the implementation system.json names. */
static bool astra_props(const export *x, char *why, size_t len)
{
    void *it = json_object_iter(x->groups);
    for (; it; it = json_object_iter_next(x->groups, it))
        if (atoll(json_object_iter_key(it)) <= 0)
            return failf(why, len, "ids: workload.json defines group '%s'", json_object_iter_key(it));
    size_t nt = json_array_size(x->tasks);
    for (size_t i = 0; i < nt; i++) {
        const node *n = x->of[i];
        json_t *t = json_array_get(x->tasks, i);
        if (!strcmp(n->type, "COMM_COLL_NODE")) {
            const char *pg = attr(n, "pg_name");
            if (!pg || atoll(pg) <= 0 || !json_object_get(x->groups, pg))
                return failf(why, len, "ids: node %zu has pg_name '%s'", i, pg ? pg : "(none)");
            int type = (int)attr_ll(n, "comm_type");
            uint64_t sent = astra_sent(type, (uint64_t)attr_ll(n, "comm_size"),
                                       json_array_size(json_object_get(x->groups, pg)), x->ring_a2a);
            if (type == ALL_TO_ALL && sent != (uint64_t)jint(t, "bytes"))
                return failf(why, len, "a2a: node %zu sends %llu bytes under %s, the DAG %lld", i,
                             (unsigned long long)sent, x->ring_a2a ? "ring" : "direct", jint(t, "bytes"));
        }
        if (!strcmp(n->type, "COMP_NODE") && (!attr(n, "tensor_size") || atoll(attr(n, "tensor_size")) <= 0))
            return failf(why, len, "tensor: compute node %zu has no tensor_size above 0", i);
        /* the union of the group's deps, each member's exactly */
        int want = 0;
        for (size_t k = (size_t)x->first[i]; k < nt && x->first[k] == x->first[i]; k++) {
            json_t *deps = json_object_get(json_array_get(x->tasks, k), "deps");
            for (size_t d = 0; d < json_array_size(deps); d++) {
                uint64_t dep = (uint64_t)json_integer_value(json_array_get(deps, d));
                bool again = false; /* counted for an earlier member */
                for (size_t e = (size_t)x->first[i]; e < k && !again; e++) {
                    json_t *de = json_object_get(json_array_get(x->tasks, e), "deps");
                    for (size_t f = 0; f < json_array_size(de) && !again; f++)
                        again = (uint64_t)json_integer_value(json_array_get(de, f)) == dep;
                }
                if (again) continue;
                want++;
                if (!has(n->data, n->ndata, dep))
                    return failf(why, len, "deps: node %zu lacks %llu, a dep of its NCCL group", i,
                                 (unsigned long long)dep);
            }
        }
        if (n->ndata != want)
            return failf(why, len, "deps: node %zu has %d data deps, its NCCL group %d", i, n->ndata, want);
    }
    return true;
}

/* Each property of astra_props, broken in turn on a copy of x (and put
 * back), must be caught: a checker that passes a broken export proves
 * nothing. */
static void props_catch_breakage(export *x)
{
    char why[256];
    size_t nt = json_array_size(x->tasks);
    bool broke[4] = {false};
    for (size_t i = 0; i < nt; i++) {
        node *n = x->of[i];
        for (int a = 0; a < n->nattr; a++) {
            if (!broke[0] && !strcmp(n->aname[a], "pg_name")) { /* ids */
                char keep[64];
                snprintf(keep, sizeof keep, "%s", n->aval[a]);
                snprintf(n->aval[a], sizeof n->aval[a], "0");
                ck_assert_msg(!astra_props(x, why, sizeof why), "pg_name 0 passed");
                ck_assert_msg(!strncmp(why, "ids:", 4), "%s", why);
                snprintf(n->aval[a], sizeof n->aval[a], "%s", keep);
                broke[0] = true;
            }
            if (!broke[2] && !strcmp(n->aname[a], "tensor_size")) { /* tensor */
                n->aname[a][0] = 'X';
                ck_assert_msg(!astra_props(x, why, sizeof why), "a missing tensor_size passed");
                ck_assert_msg(!strncmp(why, "tensor:", 7), "%s", why);
                n->aname[a][0] = 't';
                broke[2] = true;
            }
        }
        /* deps: a grouped member that waits on its group's first member's deps */
        if (!broke[1] && (jint(json_array_get(x->tasks, i), "flags") & 1) && n->ndata > 0) {
            n->ndata--;
            ck_assert_msg(!astra_props(x, why, sizeof why), "a missing group dep passed");
            ck_assert_msg(!strncmp(why, "deps:", 5), "%s", why);
            n->ndata++;
            broke[1] = true;
        }
    }
    /* a2a: sized for the other implementation */
    x->ring_a2a = !x->ring_a2a;
    bool any_a2a = !astra_props(x, why, sizeof why);
    if (any_a2a) ck_assert_msg(!strncmp(why, "a2a:", 4), "%s", why);
    x->ring_a2a = !x->ring_a2a;
    broke[3] = any_a2a;
    ck_assert_msg(astra_props(x, why, sizeof why), "the export, put back: %s", why);
    for (int k = 0; k < 4; k++)
        ck_assert_msg(broke[k], "property %d was never broken: choose a configuration that exercises it", k);
}

/* Check every rank's file against the DAG (the configuration cfg, gpn GPUs
 * per node, `extra` options of the export); returns the collectives seen,
 * and adds the count of each Chakra collective type to types[10]. With
 * break_props, also checks that astra_props catches each broken property. */
static int verify(const char *cfg, int gpn, const char *extra, bool break_props, int types[10])
{
    char dir[] = "/tmp/loong-chakra-XXXXXX", et[600], path[700], cmd[1600];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    json_t *j = dag_json(cfg, dir);
    json_t *tasks = json_object_get(j, "tasks");
    size_t nt = json_array_size(tasks);
    int ranks = 0;
    for (size_t i = 0; i < nt; i++) {
        json_t *t = json_array_get(tasks, i);
        ck_assert_int_eq(jint(t, "id"), (long long)i);
        if (jint(t, "rank") + 1 > ranks) ranks = (int)jint(t, "rank") + 1;
    }
    snprintf(et, sizeof et, "%s/et", dir);
    nvlink_first = strstr(extra, "--dimensions nvlink-first") != NULL;
    run_result r = run_cmd(LOONG " dag %s --format chakra %s -o %s", cfg, extra, et);
    ck_assert_msg(r.status == 0, "loong dag --format chakra: %s", r.err);

    /* the layout: workload.<NPU>.et per rank, workload.json, network.yml, system.json */
    int files = 0;
    DIR *d = opendir(et);
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d));)
        files += e->d_name[0] != '.';
    closedir(d);
    ck_assert_int_eq(files, ranks + 3);
    snprintf(path, sizeof path, "%s/workload.json", et);
    json_error_t je;
    json_t *groups = json_load_file(path, 0, &je);
    ck_assert_msg(groups != NULL, "%s: %s", path, je.text);
    snprintf(path, sizeof path, "%s/system.json", et);
    json_t *sys = json_load_file(path, 0, &je);
    ck_assert_msg(sys != NULL, "%s: %s", path, je.text);
    const char *impl = json_string_value(json_array_get(json_object_get(sys, "all-to-all-implementation"), 0));
    ck_assert_ptr_nonnull(impl);
    ck_assert_int_eq(json_array_size(json_object_get(sys, "all-to-all-implementation")), 1);
    snprintf(path, sizeof path, "%s/network.yml", et);
    char *yml = read_text(path);
    char want_npus[64];
    if (ranks > gpn && ranks % gpn == 0)
        snprintf(want_npus, sizeof want_npus, "npus_count: [ %d, %d ]", nvlink_first ? gpn : ranks / gpn,
                 nvlink_first ? ranks / gpn : gpn);
    else
        snprintf(want_npus, sizeof want_npus, "npus_count: [ %d ]", ranks);
    ck_assert_msg(strstr(yml, want_npus) != NULL, "network.yml lacks '%s':\n%s", want_npus, yml);
    free(yml);

    /* stream predecessor of each task, the first member of its NCCL group */
    long long *prev = malloc(nt * sizeof *prev), *first = malloc(nt * sizeof *first);
    node **of = calloc(nt, sizeof *of);
    for (size_t i = 0; i < nt; i++) {
        prev[i] = -1;
        json_t *t = json_array_get(tasks, i);
        for (long long k = (long long)i - 1; k >= 0; k--) {
            json_t *u = json_array_get(tasks, (size_t)k);
            if (jint(u, "rank") == jint(t, "rank") && !strcmp(json_string_value(json_object_get(u, "stream")),
                                                              json_string_value(json_object_get(t, "stream")))) {
                prev[i] = k;
                break;
            }
        }
        first[i] = (jint(t, "flags") & 1) && prev[i] >= 0 ? first[prev[i]] : (long long)i;
    }
    /* a group's members are consecutive ids (astra_props walks them so) */
    for (size_t i = 1; i < nt; i++)
        ck_assert(first[i] == (long long)i || first[i] == first[i - 1]);

    int colls = 0;
    node **all = calloc((size_t)ranks, sizeof *all);
    for (int rank = 0; rank < ranks; rank++) {
        char bin[700], txt[700], version[32];
        int me = npu(rank, ranks, gpn);
        snprintf(path, sizeof path, "%s/workload.%d.et", et, me);
        snprintf(bin, sizeof bin, "%s/%d.bin", dir, rank);
        snprintf(txt, sizeof txt, "%s/%d.txt", dir, rank);
        int frames = reframe(path, bin);
        snprintf(cmd, sizeof cmd, "%s --decode=loongtest.EtStream %s < %s > %s", PROTOC, PROTOS, bin, txt);
        r = run_cmd("%s", cmd);
        ck_assert_msg(r.status == 0, "protoc could not decode %s: %s", path, r.err);
        char *text = read_text(txt);
        node *v;
        int n = parse_stream(text, &v, version, sizeof version);
        free(text);
        all[rank] = v;
        ck_assert_str_eq(version, "0.0.4");
        ck_assert_int_eq(n, frames - 1);

        /* one node per task of the rank, each a task of this rank */
        int want = 0;
        for (size_t i = 0; i < nt; i++)
            want += jint(json_array_get(tasks, i), "rank") == rank;
        ck_assert_int_eq(n, want);
        for (int k = 0; k < n; k++) {
            node *x = &v[k];
            ck_assert_uint_lt(x->id, nt);
            ck_assert_ptr_null(of[x->id]);
            of[x->id] = x;
            ck_assert_int_eq(jint(json_array_get(tasks, x->id), "rank"), rank);
        }
        for (int k = 0; k < n; k++) {
            node *x = &v[k];
            json_t *t = json_array_get(tasks, x->id);
            const char *kind = json_string_value(json_object_get(t, "kind"));
            /* every dependency is a node of this file (data_deps: astra_props) */
            for (int i = 0; i < x->ndata; i++)
                ck_assert(x->data[i] < nt && of[x->data[i]] && jint(json_array_get(tasks, x->data[i]), "rank") == rank);
            for (int i = 0; i < x->nctrl; i++)
                ck_assert(x->ctrl[i] < nt && of[x->ctrl[i]] && jint(json_array_get(tasks, x->ctrl[i]), "rank") == rank);
            /* ctrl_deps: the stream order, a grouped task shares its group's */
            if (prev[x->id] < 0)
                ck_assert_int_eq(x->nctrl, 0);
            else if (jint(t, "flags") & 1) {
                node *p = of[prev[x->id]];
                ck_assert_int_eq(x->nctrl, p->nctrl);
                for (int i = 0; i < p->nctrl; i++)
                    ck_assert(has(x->ctrl, x->nctrl, p->ctrl[i]));
            } else
                ck_assert(has(x->ctrl, x->nctrl, (uint64_t)prev[x->id]));
            ck_assert_str_eq(attr(x, "is_cpu_op"), "false");

            long long peer = jint(t, "peer");
            if (!strcmp(kind, "send")) {
                ck_assert_str_eq(x->type, "COMM_SEND_NODE");
                ck_assert_int_eq(attr_ll(x, "comm_src"), me);
                ck_assert_int_eq(attr_ll(x, "comm_dst"), npu((int)peer, ranks, gpn));
                ck_assert_int_eq(attr_ll(x, "comm_size"), jint(t, "bytes"));
                ck_assert_int_eq(attr_ll(x, "comm_tag"), (long long)x->id);
            } else if (!strcmp(kind, "recv")) {
                json_t *s = json_array_get(tasks, (size_t)jint(t, "match"));
                ck_assert_str_eq(x->type, "COMM_RECV_NODE");
                ck_assert_int_eq(attr_ll(x, "comm_src"), npu((int)peer, ranks, gpn));
                ck_assert_int_eq(attr_ll(x, "comm_dst"), me);
                ck_assert_int_eq(attr_ll(x, "comm_size"), jint(s, "bytes"));
                ck_assert_int_eq(attr_ll(x, "comm_tag"), jint(s, "id"));
            } else if (json_is_array(json_object_get(t, "group"))) {
                json_t *g = json_object_get(t, "group");
                int type = (int)attr_ll(x, "comm_type");
                ck_assert_str_eq(x->type, "COMM_COLL_NODE");
                ck_assert_int_eq(type, expect_type(kind));
                types[type]++;
                /* the group's members, as NPUs, in the DAG's order */
                json_t *members = json_object_get(groups, attr(x, "pg_name"));
                ck_assert_msg(members && json_array_size(members) == json_array_size(g), "task %llu: pg_name %s",
                              (unsigned long long)x->id, attr(x, "pg_name"));
                for (size_t i = 0; i < json_array_size(g); i++)
                    ck_assert_int_eq(json_integer_value(json_array_get(members, i)),
                                     npu((int)json_integer_value(json_array_get(g, i)), ranks, gpn));
                uint64_t sent =
                    astra_sent(type, (uint64_t)attr_ll(x, "comm_size"), json_array_size(g), !strcmp(impl, "ring"));
                ck_assert_uint_eq(sent, (uint64_t)jint(t, "bytes"));
                colls++;
            } else {
                ck_assert_str_eq(x->type, "COMP_NODE");
                ck_assert_int_eq(attr_ll(x, "num_ops"), jint(t, "flops"));
                if (!strcmp(kind, "gemm")) { /* A, B and C at the activation width (bf16 here) */
                    json_t *dm = json_object_get(t, "dims");
                    long long m = json_integer_value(json_array_get(dm, 0)),
                              nn = json_integer_value(json_array_get(dm, 1)),
                              kk = json_integer_value(json_array_get(dm, 2));
                    ck_assert_int_eq(attr_ll(x, "tensor_size"), (m * kk + kk * nn + m * nn) * 2);
                }
            }
        }
    }
    export x = {ranks, gpn, of, tasks, groups, !strcmp(impl, "ring"), first};
    char why[256];
    ck_assert_msg(astra_props(&x, why, sizeof why), "%s: %s", cfg, why);
    if (break_props) props_catch_breakage(&x);
    for (int rank = 0; rank < ranks; rank++)
        free(all[rank]);
    free(all), free(of), free(prev), free(first);
    json_decref(groups);
    json_decref(sys);
    json_decref(j);
    r = run_cmd("rm -rf %s", dir);
    return colls;
}

START_TEST(attn_matches_dag)
{
    int types[10] = {0};
    int colls = verify("--model tiny --seq 4K --mesh 2x2 --gpus-per-node 4 --strategy loongtrain --scope attn", 4, "",
                       false, types);
    ck_assert_int_gt(types[ALL_TO_ALL], 0);
    ck_assert_int_eq(colls, types[ALL_TO_ALL]);
}
END_TEST

/* Two nodes of four GPUs: ranks become NPUs across the rail dimension
 * (or, NVSwitch first, NPU = rank); the all-to-all sized for each
 * implementation; every ASTRA-sim property broken in turn. */
START_TEST(two_nodes_and_npus)
{
    int types[10] = {0};
    /* P_h = 4: under 2 members the direct and the ring all-to-all send alike */
    const char *cfg =
        "--model tiny --seq 4K --mesh 4x2 --gpus-per-node 4 --strategy loongtrain --window 2 --scope attn";
    verify(cfg, 4, "", true, types);
    verify(cfg, 4, "--all-to-all ring", true, types);
    verify(cfg, 4, "--dimensions nvlink-first", false, types);
    ck_assert_int_gt(types[ALL_TO_ALL], 0);
}
END_TEST

START_TEST(step_matches_dag)
{
    int types[10] = {0};
    verify("--model tiny --seq 4K --mesh 2x2 --gpus-per-node 4 --strategy loongtrain --scope step", 4, "", false,
           types);
    ck_assert_int_gt(types[ALL_TO_ALL], 0);
    ck_assert_int_gt(types[REDUCE_SCATTER], 0);
    ck_assert_int_gt(types[ALL_GATHER], 0);
    verify("--model tiny --seq 4K --mesh 2x2 --gpus-per-node 4 --strategy usp --scope step --zero 0", 4, "", false,
           types);
    ck_assert_int_gt(types[ALL_REDUCE], 0);
    /* tensor parallelism: the TP groups are process groups like the others */
    int tp_types[10] = {0};
    verify("--model tiny --seq 4K --tp 2 --mesh 2x1 --gpus-per-node 4 --strategy ulysses --scope step", 4, "", false,
           tp_types);
    ck_assert_int_gt(tp_types[ALL_GATHER], 0);
    ck_assert_int_gt(tp_types[REDUCE_SCATTER], 0);
    /* pipeline parallelism: the stages' activation and gradient p2p are
     * send and recv nodes between the stages' NPUs, checked like the ring's */
    verify("--model tiny --seq 4K --mesh 1x2 --pp 2 --micro-batches 2 --gpus-per-node 4 --strategy usp --scope step", 4,
           "", false, tp_types);
}
END_TEST

/* Rank r's nodes of an export in dir (4 ranks, one node of 4 GPUs: NPU =
 * rank), decoded by protoc. */
static int decode_rank(const char *dir, int r, node **v)
{
    char path[700], bin[700], txt[700], version[32];
    snprintf(path, sizeof path, "%s/et/workload.%d.et", dir, r);
    snprintf(bin, sizeof bin, "%s/%d.bin", dir, r);
    snprintf(txt, sizeof txt, "%s/%d.txt", dir, r);
    reframe(path, bin);
    run_result rr = run_cmd("%s --decode=loongtest.EtStream %s < %s > %s", PROTOC, PROTOS, bin, txt);
    ck_assert_msg(rr.status == 0, "protoc could not decode %s: %s", path, rr.err);
    char *text = read_text(txt);
    int n = parse_stream(text, v, version, sizeof version);
    free(text);
    return n;
}

/* A mixture of experts' all-to-all under a skewed routing (tiny-moe, 8
 * experts, top-2, EP 4 over a 2x2 mesh, zipf:1) is an all-to-all-v: each
 * EP all-to-all task is a send and a recv per peer instead of one
 * collective node. Each send has its recv in the peer's file (same src,
 * dst, tag and size); a rank's sends sum to the DAG's bytes of its EP
 * tasks; the layer-0 dispatch of rank 0 sends EP rank j llround(R share(j))
 * rows of 256 bf16 values, R = 2K tokens x 2 and share(j) the Zipf weights
 * of j's experts, (1/(2j+1) + 1/(2j+2)) / H_8 with H_8 = 761/280; every
 * dependency names a node of the same file. */
START_TEST(moe_alltoallv)
{
    char dir[] = "/tmp/loong-chakra-XXXXXX", et[600];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *cfg = "--model tiny-moe --seq 8K --mesh 2x2 --ep 4 --routing zipf:1 --gpus-per-node 4 --scope step";
    json_t *j = dag_json(cfg, dir), *tasks = json_object_get(j, "tasks");
    snprintf(et, sizeof et, "%s/et", dir);
    run_result r = run_cmd(LOONG " dag %s --format chakra -o %s", cfg, et);
    ck_assert_msg(r.status == 0, "loong dag --format chakra: %s", r.err);
    node *v[4];
    int n[4];
    long long dag_bytes[4] = {0}, sent[4] = {0};
    for (int rk = 0; rk < 4; rk++)
        n[rk] = decode_rank(dir, rk, &v[rk]);
    for (size_t i = 0; i < json_array_size(tasks); i++) {
        json_t *t = json_array_get(tasks, i);
        if (strcmp(json_string_value(json_object_get(t, "stream")), "ep")) continue;
        dag_bytes[jint(t, "rank")] += jint(t, "bytes");
        for (int k = 0; k < n[jint(t, "rank")]; k++) /* no collective node for it */
            ck_assert_uint_ne(v[jint(t, "rank")][k].id, i);
    }
    const long long tag0 = 1LL << 30;
    double H8 = 761.0 / 280, R = 2048.0 * 2;
    for (int rk = 0; rk < 4; rk++) {
        for (int k = 0; k < n[rk]; k++) {
            const node *x = &v[rk][k];
            for (int d = 0; d < x->ndata + x->nctrl; d++) { /* dependencies within the file */
                uint64_t dep = d < x->ndata ? x->data[d] : x->ctrl[d - x->ndata];
                bool found = false;
                for (int m = 0; m < n[rk] && !found; m++)
                    found = v[rk][m].id == dep;
                ck_assert_msg(found, "rank %d node %llu depends on %llu, not in its file", rk,
                              (unsigned long long)x->id, (unsigned long long)dep);
            }
            if (strcmp(x->type, "COMM_SEND_NODE") || attr_ll(x, "comm_tag") < tag0) continue;
            long long dst = attr_ll(x, "comm_dst"), size = attr_ll(x, "comm_size");
            sent[rk] += size;
            int recvs = 0;
            for (int m = 0; m < n[dst]; m++) {
                const node *y = &v[dst][m];
                if (strcmp(y->type, "COMM_RECV_NODE") || attr_ll(y, "comm_tag") != attr_ll(x, "comm_tag") ||
                    attr_ll(y, "comm_src") != rk)
                    continue;
                ck_assert_int_eq(attr_ll(y, "comm_dst"), dst);
                ck_assert_int_eq(attr_ll(y, "comm_size"), size);
                recvs++;
            }
            ck_assert_int_eq(recvs, 1);
            if (rk == 0 && attr_ll(x, "comm_tag") == tag0) { /* layer 0's dispatch */
                double share = (1.0 / (2 * dst + 1) + 1.0 / (2 * dst + 2)) / H8;
                ck_assert_int_eq(size, llround(R * share) * 256 * 2);
            }
        }
        ck_assert_int_eq(sent[rk], dag_bytes[rk]);
    }
    for (int rk = 0; rk < 4; rk++)
        free(v[rk]);
    json_decref(j);
    run_cmd("rm -rf %s", dir);
}
END_TEST

/* Bad input: one line on stderr, exit 2, and no directory appears. */
START_TEST(bad_output)
{
    char dir[] = "/tmp/loong-chakra-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *cfg = "--model tiny --seq 4K --mesh 2 --scope attn";
    run_result r = run_cmd(LOONG " dag %s --format chakra", cfg);
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
    r = run_cmd(LOONG " dag %s --format chakra -o %s/missing/et", cfg, dir);
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
    r = run_cmd(LOONG " dag %s --format json --calib /dev/null", cfg);
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
    /* a non-empty directory is refused and left alone */
    r = run_cmd("mkdir %s/full && touch %s/full/keep", dir, dir);
    r = run_cmd(LOONG " dag %s --format chakra -o %s/full", cfg, dir);
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
    r = run_cmd("ls %s/full", dir);
    ck_assert_str_eq(r.out, "keep\n");
    /* a file is refused; an empty directory is filled */
    r = run_cmd(LOONG " dag %s --format chakra -o %s/full/keep", cfg, dir);
    ck_assert_int_eq(r.status, 2);
    r = run_cmd("mkdir %s/empty && " LOONG " dag %s --format chakra -o %s/empty/", dir, cfg, dir);
    ck_assert_int_eq(r.status, 0);
    r = run_cmd("ls %s/empty", dir);
    ck_assert_str_eq(r.out, "network.yml\nsystem.json\nworkload.0.et\nworkload.1.et\nworkload.json\n");
    /* the options of the export are refused elsewhere, and a bad implementation */
    r = run_cmd(LOONG " dag %s --all-to-all ring", cfg);
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
    r = run_cmd(LOONG " dag %s --format chakra --all-to-all pairwise -o %s/x", cfg, dir);
    ck_assert_int_eq(r.status, 2);
    ck_assert_int_eq(count_lines(r.err), 1);
    r = run_cmd(LOONG " dag %s --format chakra --platform %s/topologies/dgx-h100-1n.xml --gpus-per-node 4 -o %s/x", cfg,
                LOONG_SRCDIR, dir);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "--gpus-per-node 8") != NULL, "%s", r.err);
    /* --calib by name, on the data path; for the platform's GPU kind with --platform */
    r = run_cmd("LOONG_DATA_PATH=%s/topologies " LOONG " dag %s --format chakra --calib h100 -o %s/named", LOONG_SRCDIR,
                cfg, dir);
    ck_assert_msg(r.status == 0, "%s", r.err);
    run_cmd("rm -rf %s/named", dir);
    r = run_cmd(LOONG " dag %s --format chakra --platform %s/topologies/dgx-h100-1n.xml --calib a100 -o %s/x", cfg,
                LOONG_SRCDIR, dir);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "for GPU kind 'a100'") != NULL, "%s", r.err);
    /* no temporary directory is left beside the outputs */
    r = run_cmd("ls %s", dir);
    ck_assert_str_eq(r.out, "empty\nfull\n");
    run_cmd("rm -rf %s", dir);
}
END_TEST

int main(void)
{
    /* (outside a test: Check's assertions in run_cmd are not available) */
    if (system(LOONG " dag --model tiny --seq 4K --mesh 2 --format chakra 2>&1 | grep 'without protobuf-c'") == 0) {
        printf("SKIP: this loong was built without protobuf-c\n");
        return 77;
    }
    if (!PROTOC[0] || access(PROTOC, X_OK) != 0) {
        printf("SKIP: protoc (Debian package protobuf-compiler) is needed to decode the traces\n");
        return 77;
    }
    Suite *s = suite_create("chakra");
    TCase *tc = tcase_create("chakra");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, attn_matches_dag);
    tcase_add_test(tc, two_nodes_and_npus);
    tcase_add_test(tc, step_matches_dag);
    tcase_add_test(tc, moe_alltoallv);
    tcase_add_test(tc, bad_output);
    suite_add_tcase(s, tc);
    return check_run(s);
}

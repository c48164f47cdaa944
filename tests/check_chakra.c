/* loong dag --format chakra from the outside: every rank's Chakra ET file is
 * decoded by protoc (not by our protobuf-c code), under proto/chakra_et.proto,
 * and checked against the DAG that `loong dag --format json` prints for the
 * same configuration: one node per task of the rank, the node types, the
 * DAG's deps as data_deps, stream order as ctrl_deps, FLOPs, send/recv peers,
 * sizes and tags, collective types, groups and sizes. Then bad input: one line,
 * exit 2, no directory left behind. Skips (77) when loong was built without
 * protobuf-c or protoc is missing. */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
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

/* Bytes one member sends in ASTRA-sim's ring algorithm for comm_size
 * (astra-sim/system/collective/Ring.cc): all-reduce 2(n-1) messages of
 * size/n, reduce-scatter and all-to-all n-1 of size/n, all-gather n-1 of
 * size. */
static uint64_t astra_sent(int type, uint64_t size, uint64_t n)
{
    switch (type) {
    case ALL_REDUCE: return 2 * (n - 1) * (size / n);
    case ALL_GATHER: return (n - 1) * size;
    default: return (n - 1) * (size / n);
    }
}

static int expect_type(const char *kind)
{
    if (!strcmp(kind, "all_to_all")) return ALL_TO_ALL;
    if (!strcmp(kind, "all_reduce")) return ALL_REDUCE;
    if (!strcmp(kind, "reduce_scatter")) return REDUCE_SCATTER;
    ck_assert_str_eq(kind, "all_gather");
    return ALL_GATHER;
}

/* Check every rank's file against the DAG; returns the collectives seen,
 * and adds the count of each Chakra collective type to types[10]. */
static int verify(const char *cfg, int types[10])
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
    run_result r = run_cmd(LOONG " dag %s --format chakra -o %s", cfg, et);
    ck_assert_msg(r.status == 0, "loong dag --format chakra: %s", r.err);

    /* the layout: workload.<rank>.et per rank and workload.json, nothing else */
    int files = 0;
    DIR *d = opendir(et);
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d));)
        files += e->d_name[0] != '.';
    closedir(d);
    ck_assert_int_eq(files, ranks + 1);
    snprintf(path, sizeof path, "%s/workload.json", et);
    json_error_t je;
    json_t *groups = json_load_file(path, 0, &je);
    ck_assert_msg(groups != NULL, "%s: %s", path, je.text);

    /* stream predecessor of each task, and its decoded ctrl deps */
    long long *prev = malloc(nt * sizeof *prev);
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
    }

    int colls = 0;
    node **all = calloc((size_t)ranks, sizeof *all);
    for (int rank = 0; rank < ranks; rank++) {
        char bin[700], txt[700], version[32];
        snprintf(path, sizeof path, "%s/workload.%d.et", et, rank);
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
            /* every dependency is a node of this file; data_deps are the DAG's deps */
            for (int i = 0; i < x->ndata; i++)
                ck_assert(x->data[i] < nt && of[x->data[i]] && jint(json_array_get(tasks, x->data[i]), "rank") == rank);
            for (int i = 0; i < x->nctrl; i++)
                ck_assert(x->ctrl[i] < nt && of[x->ctrl[i]] && jint(json_array_get(tasks, x->ctrl[i]), "rank") == rank);
            json_t *deps = json_object_get(t, "deps");
            ck_assert_int_eq(x->ndata, (int)json_array_size(deps));
            for (size_t i = 0; i < json_array_size(deps); i++)
                ck_assert(has(x->data, x->ndata, (uint64_t)json_integer_value(json_array_get(deps, i))));
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
                ck_assert_int_eq(attr_ll(x, "comm_src"), rank);
                ck_assert_int_eq(attr_ll(x, "comm_dst"), peer);
                ck_assert_int_eq(attr_ll(x, "comm_size"), jint(t, "bytes"));
                ck_assert_int_eq(attr_ll(x, "comm_tag"), (long long)x->id);
            } else if (!strcmp(kind, "recv")) {
                json_t *s = json_array_get(tasks, (size_t)jint(t, "match"));
                ck_assert_str_eq(x->type, "COMM_RECV_NODE");
                ck_assert_int_eq(attr_ll(x, "comm_src"), peer);
                ck_assert_int_eq(attr_ll(x, "comm_dst"), rank);
                ck_assert_int_eq(attr_ll(x, "comm_size"), jint(s, "bytes"));
                ck_assert_int_eq(attr_ll(x, "comm_tag"), jint(s, "id"));
            } else if (json_is_array(json_object_get(t, "group"))) {
                json_t *g = json_object_get(t, "group");
                int type = (int)attr_ll(x, "comm_type");
                ck_assert_str_eq(x->type, "COMM_COLL_NODE");
                ck_assert_int_eq(type, expect_type(kind));
                types[type]++;
                json_t *members = json_object_get(groups, attr(x, "pg_name"));
                ck_assert_msg(json_equal(members, g), "task %llu: pg_name %s is not its group",
                              (unsigned long long)x->id, attr(x, "pg_name"));
                ck_assert_uint_eq(astra_sent(type, (uint64_t)attr_ll(x, "comm_size"), json_array_size(g)),
                                  (uint64_t)jint(t, "bytes"));
                colls++;
            } else {
                ck_assert_str_eq(x->type, "COMP_NODE");
                ck_assert_int_eq(attr_ll(x, "num_ops"), jint(t, "flops"));
            }
        }
    }
    for (int rank = 0; rank < ranks; rank++)
        free(all[rank]);
    free(all), free(of), free(prev);
    json_decref(groups);
    json_decref(j);
    r = run_cmd("rm -rf %s", dir);
    return colls;
}

START_TEST(attn_matches_dag)
{
    int types[10] = {0};
    int colls = verify("--model tiny --seq 4K --mesh 2x2 --gpus-per-node 4 --strategy loongtrain --scope attn", types);
    ck_assert_int_gt(types[ALL_TO_ALL], 0);
    ck_assert_int_eq(colls, types[ALL_TO_ALL]);
}
END_TEST

START_TEST(step_matches_dag)
{
    int types[10] = {0};
    verify("--model tiny --seq 4K --mesh 2x2 --gpus-per-node 4 --strategy loongtrain --scope step", types);
    ck_assert_int_gt(types[ALL_TO_ALL], 0);
    ck_assert_int_gt(types[REDUCE_SCATTER], 0);
    ck_assert_int_gt(types[ALL_GATHER], 0);
    verify("--model tiny --seq 4K --mesh 2x2 --gpus-per-node 4 --strategy usp --scope step --zero 0", types);
    ck_assert_int_gt(types[ALL_REDUCE], 0);
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
    ck_assert_str_eq(r.out, "workload.0.et\nworkload.1.et\nworkload.json\n");
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
    tcase_add_test(tc, step_matches_dag);
    tcase_add_test(tc, bad_output);
    suite_add_tcase(s, tc);
    return check_run(s);
}

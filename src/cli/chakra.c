/*
 * chakra: write a DAG as Chakra execution traces (see chakra.h).
 *
 * What goes where (ASTRA-sim's Workload.cc and feeder_v3 read these names
 * and value types):
 *   task                 Node.type        attributes
 *   gemm, attn, merge,   COMP_NODE        num_ops = FLOPs (int64); tensor_size
 *   acc                                   = HBM bytes of merge/acc (uint64)
 *   send                 COMM_SEND_NODE   comm_src = rank, comm_dst = peer,
 *   recv                 COMM_RECV_NODE   comm_size = bytes (int64), comm_tag =
 *                                         the send's task id (int32)
 *   all_to_all, all_*,   COMM_COLL_NODE   comm_type, comm_size (int64), pg_name
 *   reduce_scatter                        = the DAG's group index (string)
 * and is_cpu_op = false on every node. Node ids are the DAG's task ids;
 * data_deps are the DAG's cross-stream events, ctrl_deps the stream order.
 */
#include "chakra.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "autoconf.h"
#include "core/xalloc.h"

#ifndef HAVE_PROTOBUF_C

bool chakra_available(const char **why)
{
    *why = "this loong was built without protobuf-c: install the Debian packages libprotobuf-c-dev and "
           "protobuf-c-compiler (setup.sh does), then re-run configure and make";
    return false;
}

int chakra_write_dir(const dag *g, const calib *cb, const char *dir, char err[LOONG_ERRLEN])
{
    (void)g, (void)cb, (void)dir;
    const char *why;
    chakra_available(&why);
    snprintf(err, LOONG_ERRLEN, "%s", why);
    return -1;
}

#else

#include <math.h>
#include <stdint.h>

#include "chakra_et.pb-c.h" /* generated from proto/chakra_et.proto (build dir) */

/* The GlobalMetadata version Chakra's own generators write. */
#define CHAKRA_VERSION "0.0.4"
#define MAX_ATTRS      8

bool chakra_available(const char **why)
{
    (void)why;
    return true;
}

/* ---- messages ---- */

typedef struct attrs {
    ChakraProtoMsg__AttributeProto a[MAX_ATTRS];
    ChakraProtoMsg__AttributeProto *p[MAX_ATTRS];
    size_t n;
} attrs;

static ChakraProtoMsg__AttributeProto *attr_new(attrs *as, const char *name, int value_case)
{
    ChakraProtoMsg__AttributeProto *a = &as->a[as->n];
    chakra_proto_msg__attribute_proto__init(a);
    a->name = (char *)name;
    a->value_case = value_case;
    as->p[as->n++] = a;
    return a;
}
static void attr_i32(attrs *as, const char *name, int32_t v)
{
    attr_new(as, name, CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT32_VAL)->int32_val = v;
}
static void attr_i64(attrs *as, const char *name, int64_t v)
{
    attr_new(as, name, CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL)->int64_val = v;
}
static void attr_u64(attrs *as, const char *name, uint64_t v)
{
    attr_new(as, name, CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT64_VAL)->uint64_val = v;
}
static void attr_bool(attrs *as, const char *name, bool v)
{
    attr_new(as, name, CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_BOOL_VAL)->bool_val = v;
}
static void attr_str(attrs *as, const char *name, char *v)
{
    attr_new(as, name, CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL)->string_val = v;
}

/* Chakra's CollectiveCommType of a collective task kind. */
static int64_t comm_type_of(int kind)
{
    switch (kind) {
    case TASK_ALLTOALL: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_TO_ALL;
    case TASK_ALLREDUCE: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_REDUCE;
    case TASK_REDUCESCATTER: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE_SCATTER;
    default: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_GATHER;
    }
}

/* comm_size of a collective over n members whose member sends `bytes`
 * (the DAG's size): the data size ASTRA-sim's ring algorithms take
 * (astra-sim/system/collective/Ring.cc: all-reduce, reduce-scatter and
 * all-to-all send (n-1) messages of size/n, an all-reduce twice; an
 * all-gather n-1 messages of size), so that a member sends the DAG's bytes.
 * That is the buffer for all-reduce, reduce-scatter and all-to-all, and one
 * member's share for all-gather. */
static uint64_t coll_comm_size(int kind, uint64_t bytes, int n)
{
    uint64_t m = (uint64_t)(n - 1);
    switch (kind) {
    case TASK_ALLREDUCE: return bytes / (2 * m) * (uint64_t)n;
    case TASK_ALLGATHER: return bytes / m;
    default: return bytes / m * (uint64_t)n;
    }
}

/* ---- output ---- */

typedef struct writer {
    const dag *g;
    const calib *cb;
    FILE *f;
    uint8_t *buf; /* packed message */
    size_t cap;
    uint64_t *data, *ctrl; /* deps of one node */
    size_t ctrl_cap;
    const uint32_t **pred; /* per task: its stream predecessors (a run of its stream's ids) */
    uint32_t *npred;
    char err[LOONG_ERRLEN];
} writer;

/* A varint32 byte count, then the message (Chakra's protoio framing). */
static int put_msg(writer *w, const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    if (len > UINT32_MAX) {
        snprintf(w->err, LOONG_ERRLEN, "a Chakra node is %zu bytes, above the varint32 frame's limit", len);
        return -1;
    }
    if (len > w->cap) {
        w->cap = len * 2;
        w->buf = xrealloc_array(w->buf, w->cap, 1, "a Chakra message");
    }
    protobuf_c_message_pack(m, w->buf);
    uint8_t hdr[5];
    size_t h = 0;
    for (uint32_t v = (uint32_t)len;; v >>= 7) {
        hdr[h++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80) break;
    }
    if (fwrite(hdr, 1, h, w->f) != h || fwrite(w->buf, 1, len, w->f) != len) {
        snprintf(w->err, LOONG_ERRLEN, "write error: %s", strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}

static int put_metadata(writer *w, int rank)
{
    ChakraProtoMsg__GlobalMetadata md = CHAKRA_PROTO_MSG__GLOBAL_METADATA__INIT;
    attrs as = {.n = 0};
    attr_str(&as, "generator", "loong " PACKAGE_VERSION);
    attr_i32(&as, "loong_rank", rank);
    attr_i32(&as, "loong_ranks", config_ranks(dag_config(w->g)));
    md.version = CHAKRA_VERSION;
    md.attr = as.p;
    md.n_attr = as.n;
    return put_msg(w, &md.base);
}

static int put_node(writer *w, const dag_task *t)
{
    const dag *g = w->g;
    ChakraProtoMsg__Node nd = CHAKRA_PROTO_MSG__NODE__INIT;
    attrs as = {.n = 0};
    char name[96], pg[16];
    char label[64];
    dag_task_label(t, label, sizeof label);
    snprintf(name, sizeof name, "%s [%s]", label, stream_name(t->stream));
    nd.id = t->id;
    nd.name = name;

    const uint32_t *deps = dag_deps(g, t);
    for (uint16_t i = 0; i < t->ndeps; i++)
        w->data[i] = deps[i];
    nd.data_deps = w->data;
    nd.n_data_deps = t->ndeps;
    uint32_t np = w->npred[t->id];
    if (np > w->ctrl_cap) {
        w->ctrl_cap = np;
        w->ctrl = xrealloc_array(w->ctrl, np, sizeof *w->ctrl, "the Chakra control dependencies");
    }
    for (uint32_t i = 0; i < np; i++)
        w->ctrl[i] = w->pred[t->id][i];
    nd.ctrl_deps = w->ctrl;
    nd.n_ctrl_deps = np;

    attr_bool(&as, "is_cpu_op", false);
    if (task_is_compute(t)) {
        nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE;
        attr_i64(&as, "num_ops", (int64_t)t->flops);
        uint64_t hbm = calib_task_bytes(dag_config(g), t);
        if (hbm) attr_u64(&as, "tensor_size", hbm);
        if (w->cb) nd.duration_micros = (uint64_t)llround(calib_task_seconds(w->cb, dag_config(g), t) * 1e6);
    } else if (task_is_p2p(t)) {
        bool send = t->kind == TASK_SEND;
        nd.type = send ? CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE : CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE;
        attr_i32(&as, "comm_src", send ? t->rank : t->peer);
        attr_i32(&as, "comm_dst", send ? t->peer : t->rank);
        attr_i64(&as, "comm_size", (int64_t)dag_task_bytes_moved(g, t));
        attr_i32(&as, "comm_tag", (int32_t)(send ? t->id : t->match));
    } else {
        int n;
        dag_group(g, t->group, &n);
        nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE;
        attr_i64(&as, "comm_type", comm_type_of(t->kind));
        attr_i64(&as, "comm_size", (int64_t)coll_comm_size(t->kind, t->bytes, n));
        snprintf(pg, sizeof pg, "%u", t->group);
        attr_str(&as, "pg_name", pg);
    }
    nd.attr = as.p;
    nd.n_attr = as.n;
    return put_msg(w, &nd.base);
}

/* Stream order as control dependencies: a task waits for the whole group
 * (NCCL group: a task and the DAG_F_GROUPED ones after it) before it on its
 * stream; a grouped task waits for what its group's first task waits for. */
static void stream_preds(writer *w)
{
    const dag *g = w->g;
    int ranks = config_ranks(dag_config(g));
    for (int r = 0; r < ranks; r++)
        for (int s = 0; s < STREAM_COUNT; s++) {
            uint32_t n, cur = 0, prev = 0, nprev = 0;
            const uint32_t *ids = dag_stream_tasks(g, r, s, &n);
            for (uint32_t i = 0; i < n; i++) {
                if (i == 0 || !(dag_task_get(g, ids[i])->flags & DAG_F_GROUPED)) {
                    prev = cur;
                    nprev = i - cur;
                    cur = i;
                }
                w->pred[ids[i]] = ids + prev;
                w->npred[ids[i]] = nprev;
            }
        }
}

/* Tasks of each rank in id order: first[r] .. first[r+1] in order[]. */
static void by_rank(const dag *g, int ranks, uint32_t *first, uint32_t *order)
{
    uint32_t nt = dag_ntasks(g);
    memset(first, 0, (size_t)(ranks + 1) * sizeof *first);
    for (uint32_t i = 0; i < nt; i++)
        first[dag_task_get(g, i)->rank + 1]++;
    for (int r = 0; r < ranks; r++)
        first[r + 1] += first[r];
    uint32_t *at = xmalloc((size_t)ranks * sizeof *at, "the Chakra rank index");
    memcpy(at, first, (size_t)ranks * sizeof *at);
    for (uint32_t i = 0; i < nt; i++)
        order[at[dag_task_get(g, i)->rank]++] = i;
    free(at);
}

static int write_rank(writer *w, const char *path, int rank, const uint32_t *ids, uint32_t n)
{
    w->f = fopen(path, "wb");
    if (!w->f) {
        snprintf(w->err, LOONG_ERRLEN, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    int rc = put_metadata(w, rank);
    for (uint32_t i = 0; i < n && !rc; i++)
        rc = put_node(w, dag_task_get(w->g, ids[i]));
    if (fclose(w->f) != 0 && !rc) {
        snprintf(w->err, LOONG_ERRLEN, "cannot write '%s': %s", path, strerror(errno));
        rc = -1;
    }
    w->f = NULL;
    return rc;
}

/* ASTRA-sim's --comm-group-configuration: {"pg_name": [ranks], ...}. */
static int write_groups(writer *w, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(w->err, LOONG_ERRLEN, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    fputc('{', f);
    for (uint32_t gid = 0; gid < dag_ngroups(w->g); gid++) {
        int n;
        const int32_t *m = dag_group(w->g, gid, &n);
        fprintf(f, "%s\n  \"%u\": [", gid ? "," : "", gid);
        for (int i = 0; i < n; i++)
            fprintf(f, "%s%d", i ? ", " : "", m[i]);
        fputc(']', f);
    }
    fputs("\n}\n", f);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad) {
        snprintf(w->err, LOONG_ERRLEN, "cannot write '%s': %s", path, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}

/* Values Chakra's attribute types hold: int32 ranks and tags, int64 sizes. */
static int check_ranges(const dag *g, char err[LOONG_ERRLEN])
{
    uint32_t nt = dag_ntasks(g);
    if (nt > (uint32_t)INT32_MAX) {
        snprintf(err, LOONG_ERRLEN, "%u tasks: Chakra's int32 comm_tag holds task ids below 2^31", nt);
        return -1;
    }
    for (uint32_t i = 0; i < nt; i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->flops > (uint64_t)INT64_MAX || t->bytes > (uint64_t)INT64_MAX) {
            snprintf(err, LOONG_ERRLEN, "task %u: a size above 2^63 does not fit Chakra's int64 attributes", i);
            return -1;
        }
    }
    return 0;
}

/* ---- the directory ---- */

static char *path_in(const char *dir, const char *name)
{
    size_t len = strlen(dir) + strlen(name) + 2;
    char *p = xmalloc(len, "a path");
    snprintf(p, len, "%s/%s", dir, name);
    return p;
}

/* Remove what chakra_write_dir put in the temporary directory, and it. */
static void remove_stage(const char *stage, int ranks)
{
    char name[64];
    for (int r = 0; r <= ranks; r++) {
        if (r < ranks)
            snprintf(name, sizeof name, CHAKRA_PREFIX ".%d.et", r);
        else
            snprintf(name, sizeof name, CHAKRA_PREFIX ".json");
        char *p = path_in(stage, name);
        unlink(p);
        free(p);
    }
    rmdir(stage);
}

/* 0 if dir may become the output: absent with an existing parent, or an
 * empty directory. */
static int check_target(const char *dir, char err[LOONG_ERRLEN])
{
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            snprintf(err, LOONG_ERRLEN, "cannot write '%s': it exists and is not a directory: give a new directory",
                     dir);
            return -1;
        }
        DIR *d = opendir(dir);
        if (!d) {
            snprintf(err, LOONG_ERRLEN, "cannot write '%s': %s", dir, strerror(errno));
            return -1;
        }
        struct dirent *e;
        bool empty = true;
        while (empty && (e = readdir(d)))
            empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
        closedir(d);
        if (!empty) {
            snprintf(err, LOONG_ERRLEN, "cannot write '%s': the directory is not empty: give a new or empty directory",
                     dir);
            return -1;
        }
        return 0;
    }
    char *parent = xstrdup(dir, "a path");
    char *slash = strrchr(parent, '/');
    const char *pdir = slash ? (slash == parent ? "/" : (*slash = 0, parent)) : ".";
    int rc = 0;
    if (stat(pdir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, LOONG_ERRLEN, "cannot write '%s': directory '%s' does not exist", dir, pdir);
        rc = -1;
    }
    free(parent);
    return rc;
}

int chakra_write_dir(const dag *g, const calib *cb, const char *dir_arg, char err[LOONG_ERRLEN])
{
    size_t len = strlen(dir_arg);
    while (len > 1 && dir_arg[len - 1] == '/')
        len--;
    char *dir = xstrndup(dir_arg, len, "a path");
    int ranks = config_ranks(dag_config(g));
    int rc = check_target(dir, err) < 0 || check_ranges(g, err) < 0 ? -1 : 0;
    char *stage = NULL;
    if (!rc) {
        size_t sl = len + 16;
        stage = xmalloc(sl, "a path");
        snprintf(stage, sl, "%s.tmp.XXXXXX", dir);
        if (!mkdtemp(stage)) {
            snprintf(err, LOONG_ERRLEN, "cannot write '%s': %s", dir, strerror(errno));
            free(stage);
            free(dir);
            return -1;
        }
        mode_t um = umask(0); /* mkdtemp makes it 0700: give it a new directory's mode */
        umask(um);
        chmod(stage, 0777 & ~um);
    }
    writer w = {.g = g, .cb = cb};
    uint32_t nt = dag_ntasks(g);
    uint32_t *first = NULL, *order = NULL;
    if (!rc) {
        w.data = xmalloc(STREAM_COUNT * sizeof *w.data, "the Chakra data dependencies");
        w.pred = xmalloc((size_t)nt * sizeof *w.pred + 1, "the Chakra stream order");
        w.npred = xmalloc((size_t)nt * sizeof *w.npred + 1, "the Chakra stream order");
        first = xmalloc((size_t)(ranks + 1) * sizeof *first, "the Chakra rank index");
        order = xmalloc((size_t)nt * sizeof *order + 1, "the Chakra rank index");
        stream_preds(&w);
        by_rank(g, ranks, first, order);
    }
    for (int r = 0; r < ranks && !rc; r++) {
        char name[64];
        snprintf(name, sizeof name, CHAKRA_PREFIX ".%d.et", r);
        char *p = path_in(stage, name);
        rc = write_rank(&w, p, r, order + first[r], first[r + 1] - first[r]);
        free(p);
    }
    if (!rc) {
        char *p = path_in(stage, CHAKRA_PREFIX ".json");
        rc = write_groups(&w, p);
        free(p);
    }
    if (rc && stage) snprintf(err, LOONG_ERRLEN, "%s", w.err);
    /* rename() replaces an empty directory: `dir` is whole or untouched */
    if (!rc && rename(stage, dir) != 0) {
        snprintf(err, LOONG_ERRLEN, "cannot write '%s': %s", dir, strerror(errno));
        rc = -1;
    }
    if (rc && stage) remove_stage(stage, ranks);
    free(w.buf), free(w.data), free(w.ctrl), free(w.pred), free(w.npred), free(first), free(order);
    free(stage), free(dir);
    return rc;
}

#endif

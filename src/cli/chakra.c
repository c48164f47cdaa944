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
 * A mixture of experts' all-to-all under a skewed --routing (an
 * all-to-all-v: each peer its own bytes) is a send and a recv per EP peer
 * instead (split_a2a below).
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
#include "core/placement.h"
#include "core/unfused.h"
#include "core/xalloc.h"
#include "model/tiles.h"

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
 * (the DAG's size), for the collective algorithm ASTRA-sim will run, so that
 * a member sends exactly the DAG's bytes. ASTRA-sim's ring
 * (system/astraccl/native_collectives/collective_algorithm/Ring.cc, the
 * constructor at 518bd51): an all-reduce sends 2(n-1) messages of size/n,
 * a reduce-scatter n-1 of size/n, an all-gather n-1 of size; a ring
 * all-to-all sends n(n-1)/2 messages of size/n (stream_count), so size =
 * 2 bytes/(n-1). Its direct all-to-all (AllToAll.cc: a Ring whose
 * stream_count is n-1) sends n-1 messages of size/n, so size = bytes n/(n-1).
 * Which one ASTRA-sim runs is system.json's "all-to-all-implementation"
 * (written beside the traces with the same choice). */
static uint64_t coll_comm_size(int kind, uint64_t bytes, int n, chakra_a2a a2a)
{
    uint64_t m = (uint64_t)(n - 1);
    switch (kind) {
    case TASK_ALLREDUCE: return bytes / (2 * m) * (uint64_t)n;
    case TASK_ALLGATHER: return bytes / m;
    case TASK_ALLTOALL: return a2a == CHAKRA_A2A_RING ? 2 * (bytes / m) : bytes / m * (uint64_t)n;
    default: return bytes / m * (uint64_t)n;
    }
}

/* HBM bytes a compute node reads and writes once (what ASTRA-sim's roofline
 * divides num_ops by, Workload.cc issue_comp): a GEMM's A, B and C; an
 * attention block's Q, K, V and O (forward) or Q, K, V, O, dO, dQ, dK, dV
 * (backward) at the activation width; merge and accumulation as the
 * calibration model counts them. Never 0, which ASTRA-sim's roofline takes
 * for an invalid node. */
static uint64_t tensor_bytes(const config *c, const dag_task *t)
{
    uint64_t e = (uint64_t)c->act_bytes, d = (uint64_t)c->model.head_dim, B = (uint64_t)c->batch;
    uint64_t hq = t->dim[2], hkv = (uint64_t)config_kv_heads(c);
    uint64_t q = (uint64_t)t->dim[0] * hq * d * B, kv = (uint64_t)t->dim[1] * hkv * d * B, v;
    switch (t->kind) {
    case TASK_GEMM:
        v = ((uint64_t)t->dim[0] * t->dim[2] + (uint64_t)t->dim[2] * t->dim[1] + (uint64_t)t->dim[0] * t->dim[1]) * e;
        break;
    case TASK_ATTN_FWD: v = (2 * q + 2 * kv) * e; break;
    case TASK_ATTN_BWD: v = (4 * q + 4 * kv) * e; break;
    default: v = calib_task_bytes(c, t);
    }
    /* unfused attention's GEMMs also write and read the s x s scores:
     * forward S and P, backward dP, P, dS twice (core/unfused.h) */
    if (c->attention == ATTN_UNFUSED && (t->kind == TASK_ATTN_FWD || t->kind == TASK_ATTN_BWD))
        v += (t->kind == TASK_ATTN_BWD ? 4 : 2) * unfused_scores(c, t->dim[0], t->dim[1], t->dim[2]) * e;
    return v ? v : 1;
}

/* ---- ranks on ASTRA-sim's network ----
 * network.yml describes the ranks as a two-dimensional network, dimension
 * 0 the rail switches joining GPU k of every node, dimension 1 each node's
 * NVSwitch. ASTRA-sim numbers NPUs fastest along dimension 0
 * (MultiDimTopology::translate_address), so NPU n sits in node n % nodes at
 * GPU slot n / nodes, and loong's rank r (node r / gpn, slot r % gpn) is
 * NPU (r % gpn) * nodes + r / gpn: its trace is workload.<NPU>.et, and every
 * peer and group member is named by NPU. The rail dimension comes first
 * because ASTRA-sim's congestion-unaware backend charges a transfer to the
 * first dimension whose address differs (get_dim_to_transfer): a transfer
 * between nodes then pays the rail, as loong's PXN route does (NVLink to
 * the GPU on the peer's rail, then the NIC), not NVLink, which the other
 * order would charge whenever the GPU slot differs too. */
static placement npu_map_of(const config *c)
{
    int P = config_ranks(c), gpn = c->gpus_per_node;
    placement m = placement_make(P, 1, 1); /* one NVSwitch dimension, NPU = rank */
    if (P > gpn && P % gpn == 0) m = placement_make(gpn, 1, P / gpn);
    return m;
}

/* ---- output ---- */

typedef struct writer {
    const dag *g;
    const calib *cb;
    tiles *tiles; /* cb's attention tile work (NULL: exact pairs) */
    chakra_a2a a2a;
    chakra_dims dims; /* network.yml's dimension order (chakra.h) */
    placement map;    /* ranks on ASTRA-sim's nodes (nodes == 1: one NVSwitch dimension) */
    FILE *f;
    uint8_t *buf; /* packed message */
    size_t cap;
    uint64_t *data, *ctrl; /* deps of one node */
    size_t ctrl_cap;
    const uint32_t **pred; /* per task: its stream predecessors (a run of its stream's ids) */
    uint32_t *npred;
    const uint32_t **mates; /* per task: the members of its NCCL group (a run of its stream's ids) */
    uint32_t *nmates;
    size_t data_cap;
    uint64_t *split; /* per task: the first id of its per-peer nodes (0: not split; split_a2a) */
    uint32_t *nsplit;
    int32_t a2a_seq; /* the rank's split tasks written so far: their tags */
    char err[LOONG_ERRLEN];
} writer;

/* The NPU of loong's rank: fastest along network.yml's first dimension,
 * the rails (rank r is NPU (r % gpn) * nodes + r / gpn) or, NVSwitch
 * first, the node's GPUs (NPU r). */
static int npu_of(const writer *w, int rank)
{
    const placement *m = &w->map;
    if (w->dims == CHAKRA_NVLINK_FIRST) return placement_node(m, rank) * m->gpus_per_node + placement_gpu(m, rank);
    return placement_gpu(m, rank) * m->nodes + placement_node(m, rank);
}

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
    attr_i32(&as, "astra_sim_npu", npu_of(w, rank));
    attr_i32(&as, "loong_ranks", config_ranks(dag_config(w->g)));
    md.version = CHAKRA_VERSION;
    md.attr = as.p;
    md.n_attr = as.n;
    return put_msg(w, &md.base);
}

/* The data dependencies of t: those of every member of its NCCL group (a
 * task and the DAG_F_GROUPED ones after it on its stream), since NCCL
 * launches the group's sends and receives together, when all of them may
 * start, as loong's backends do. ASTRA-sim issues each node when its own
 * deps are met, so each member carries the union. Returns the count, in
 * w->data, in order and without repeats. */
static size_t group_deps(writer *w, const dag_task *t)
{
    size_t n = 0;
    for (uint32_t m = 0; m < w->nmates[t->id]; m++) {
        const dag_task *u = dag_task_get(w->g, w->mates[t->id][m]);
        const uint32_t *deps = dag_deps(w->g, u);
        for (uint16_t i = 0; i < u->ndeps; i++) {
            bool seen = false;
            for (size_t j = 0; j < n && !seen; j++)
                seen = w->data[j] == deps[i];
            if (seen) continue;
            if (n == w->data_cap) {
                w->data_cap = 2 * w->data_cap + STREAM_COUNT;
                w->data = xrealloc_array(w->data, w->data_cap, sizeof *w->data, "the Chakra data dependencies");
            }
            w->data[n++] = deps[i];
        }
    }
    /* in id order, as the DAG lists deps */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && w->data[j - 1] > w->data[j]; j--) {
            uint64_t x = w->data[j];
            w->data[j] = w->data[j - 1];
            w->data[j - 1] = x;
        }
    return n;
}

/* ---- a mixture of experts' all-to-all-v ----
 * Under a skewed routing an EP all-to-all sends each peer its own rows
 * (config_ep_pair_rows), which Chakra's collective node (one comm_size for
 * every member) cannot say. It goes out as a send and a recv per peer,
 * with ids after the DAG's (w->split[t], 2 (n - 1) of them), tags 2^30 +
 * the rank's count of such tasks before it (every member of an EP group
 * runs them in the same order), and the task's deps; what depended on the
 * task depends on all of them. */
static bool split_a2a(const config *c, const dag_task *t)
{
    return t->kind == TASK_ALLTOALL && t->stream == STREAM_EP && config_routing_skewed(c);
}

static void plan_splits(writer *w)
{
    const dag *g = w->g;
    uint32_t nt = dag_ntasks(g);
    uint64_t next = nt;
    w->split = xcalloc((size_t)nt + 1, sizeof *w->split, "the Chakra all-to-all-v");
    w->nsplit = xcalloc((size_t)nt + 1, sizeof *w->nsplit, "the Chakra all-to-all-v");
    for (uint32_t i = 0; i < nt; i++) {
        const dag_task *t = dag_task_get(g, i);
        int n;
        if (!split_a2a(dag_config(g), t)) continue;
        dag_group(g, t->group, &n);
        w->split[i] = next;
        w->nsplit[i] = 2 * (uint32_t)(n - 1);
        next += w->nsplit[i];
    }
}

/* deps[0 .. *n) with every split task replaced by its nodes. */
static void expand_split(writer *w, uint64_t **deps, size_t *n, size_t *cap)
{
    size_t total = 0, k = 0;
    for (size_t i = 0; i < *n; i++)
        total += w->split[(*deps)[i]] ? w->nsplit[(*deps)[i]] : 1;
    if (total == *n) return;
    uint64_t *out = xmalloc_array(total, sizeof *out, "the Chakra dependencies");
    for (size_t i = 0; i < *n; i++) {
        uint64_t d = (*deps)[i];
        for (uint32_t j = 0; j < (w->split[d] ? w->nsplit[d] : 1); j++)
            out[k++] = w->split[d] ? w->split[d] + j : d;
    }
    free(*deps);
    *deps = out, *n = total, *cap = total;
}

/* The bytes this rank sends EP rank j (recv: receives from it) in an
 * all-to-all-v: the dispatch sends each peer its experts' rows, the
 * combine returns each peer the rows its experts took from it. */
static int64_t pair_bytes(const config *c, const dag_task *t, int me, int j, bool recv)
{
    bool out = (t->op == OP_EP_DISPATCH) == (t->phase != PHASE_BWD); /* rows towards the experts */
    int owner = out != recv ? j : me;
    return (int64_t)config_ep_pair_rows(c, owner) * c->model.hidden * c->act_bytes;
}

static int put_split(writer *w, const dag_task *t, ChakraProtoMsg__Node *nd, const char *name)
{
    const config *c = dag_config(w->g);
    int n, me = config_ep_rank(c, t->rank), k = 0, rc = 0;
    const int32_t *mem = dag_group(w->g, t->group, &n);
    char label[128];
    int32_t tag = (1 << 30) + w->a2a_seq++;
    for (int j = 0; j < n && !rc; j++)
        for (int recv = 0; recv < 2 && j != me && !rc; recv++) {
            attrs as = {.n = 0};
            attr_bool(&as, "is_cpu_op", false);
            attr_i32(&as, "comm_src", npu_of(w, recv ? mem[j] : t->rank));
            attr_i32(&as, "comm_dst", npu_of(w, recv ? t->rank : mem[j]));
            attr_i64(&as, "comm_size", pair_bytes(c, t, me, j, recv));
            attr_i32(&as, "comm_tag", tag);
            snprintf(label, sizeof label, "%s, %s EP rank %d", name, recv ? "from" : "to", j);
            nd->id = w->split[t->id] + (uint64_t)k++;
            nd->name = label;
            nd->type = recv ? CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE : CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE;
            nd->attr = as.p;
            nd->n_attr = as.n;
            rc = put_msg(w, &nd->base);
        }
    return rc;
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

    size_t nd_data = group_deps(w, t), nctrl = w->npred[t->id];
    if (nctrl > w->ctrl_cap) {
        w->ctrl_cap = nctrl;
        w->ctrl = xrealloc_array(w->ctrl, nctrl, sizeof *w->ctrl, "the Chakra control dependencies");
    }
    for (size_t i = 0; i < nctrl; i++)
        w->ctrl[i] = w->pred[t->id][i];
    expand_split(w, &w->data, &nd_data, &w->data_cap);
    expand_split(w, &w->ctrl, &nctrl, &w->ctrl_cap);
    nd.data_deps = w->data;
    nd.n_data_deps = nd_data;
    nd.ctrl_deps = w->ctrl;
    nd.n_ctrl_deps = nctrl;
    if (w->split[t->id]) return put_split(w, t, &nd, name);

    attr_bool(&as, "is_cpu_op", false);
    if (task_is_compute(t)) {
        nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE;
        attr_u64(&as, "num_ops", t->flops);
        attr_u64(&as, "tensor_size", tensor_bytes(dag_config(g), t));
        if (w->cb) nd.duration_micros = (uint64_t)llround(calib_task_seconds(w->cb, dag_config(g), w->tiles, t) * 1e6);
    } else if (task_is_p2p(t)) {
        bool send = t->kind == TASK_SEND;
        nd.type = send ? CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE : CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE;
        attr_i32(&as, "comm_src", npu_of(w, send ? t->rank : t->peer));
        attr_i32(&as, "comm_dst", npu_of(w, send ? t->peer : t->rank));
        attr_i64(&as, "comm_size", (int64_t)dag_task_bytes_moved(g, t));
        attr_i32(&as, "comm_tag", (int32_t)(send ? t->id : t->match));
    } else {
        int n;
        dag_group(g, t->group, &n);
        nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE;
        attr_i64(&as, "comm_type", comm_type_of(t->kind));
        attr_i64(&as, "comm_size", (int64_t)coll_comm_size(t->kind, t->bytes, n, w->a2a));
        snprintf(pg, sizeof pg, "%u", t->group + CHAKRA_FIRST_GROUP);
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
            /* the group of ids[i]: from its first member to the last grouped one after it */
            for (uint32_t i = 0; i < n;) {
                uint32_t end = i + 1;
                while (end < n && (dag_task_get(g, ids[end])->flags & DAG_F_GROUPED))
                    end++;
                for (uint32_t k = i; k < end; k++) {
                    w->mates[ids[k]] = ids + i;
                    w->nmates[ids[k]] = end - i;
                }
                i = end;
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
    w->a2a_seq = 0;
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
        fprintf(f, "%s\n  \"%u\": [", gid ? "," : "", gid + CHAKRA_FIRST_GROUP);
        for (int i = 0; i < n; i++)
            fprintf(f, "%s%d", i ? ", " : "", npu_of(w, m[i]));
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

static int close_written(writer *w, FILE *f, const char *path)
{
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad) {
        snprintf(w->err, LOONG_ERRLEN, "cannot write '%s': %s", path, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}

/* ASTRA-sim's bandwidth unit: GB/s with GB = 2^30 bytes
 * (astra-network-analytical, NetworkFunction.cpp bw_GBps_to_Bpns). */
static double astra_gbps(double bytes_per_s) { return bytes_per_s / (1024.0 * 1024.0 * 1024.0); }

/* network.yml: ASTRA-sim's analytical network for the DAG's ranks on the
 * platform (or H100 datasheet defaults): per-link latencies (a path crosses
 * two links, GPU -> switch -> GPU, as in loong), per-GPU bandwidths. */
static int write_network(writer *w, const chakra_opts *o, const char *path)
{
    platform_spec def;
    const platform_spec *sp = o->platform;
    char err[LOONG_ERRLEN];
    if (!sp) {
        platform_spec_defaults("h100", &def, err);
        sp = &def;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(w->err, LOONG_ERRLEN, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    const placement *m = &w->map;
    double rail = sp->nic_bw * sp->nics_per_node / sp->gpus_per_node; /* a GPU's share of its rail NIC */
    fprintf(f, "# ASTRA-sim analytical network for loong's %d ranks (loong %s)\n", m->gpus_per_node * m->nodes,
            PACKAGE_VERSION);
    fprintf(f, "# platform: %s (%s, nvlink %.4g B/s, rail %.4g B/s per GPU, links %.4g us / %.4g us)\n",
            o->platform_path ? o->platform_path : "none given: H100 datasheet defaults", sp->gpu, sp->nvlink_bw, rail,
            sp->nvlink_lat * 1e6, sp->nic_lat * 1e6);
    if (m->nodes > 1 && w->dims == CHAKRA_NVLINK_FIRST) {
        fprintf(f,
                "# dimension 0: each node's NVSwitch (%d GPUs); dimension 1: the rail switches (GPU k of each of the\n"
                "# %d nodes). NPU n = node n / %d, GPU slot n %% %d: loong rank r is NPU r (docs/dag.md, \"Ranks and\n"
                "# NPUs\": collectives cross the rails with 1/%d of their size, transfers between nodes whose slots\n"
                "# differ pay NVLink). The leaf-spine hop of loong's fabric has no dimension here.\n",
                m->gpus_per_node, m->nodes, m->gpus_per_node, m->gpus_per_node, m->gpus_per_node);
        fprintf(f, "topology: [ Switch, Switch ]\nnpus_count: [ %d, %d ]\n", m->gpus_per_node, m->nodes);
        fprintf(f, "bandwidth: [ %.10g, %.10g ]  # GB/s, GB = 2^30 B\n", astra_gbps(sp->nvlink_bw), astra_gbps(rail));
        fprintf(f, "latency: [ %.10g, %.10g ]  # ns per link\n", sp->nvlink_lat * 1e9, sp->nic_lat * 1e9);
    } else if (m->nodes > 1) {
        fprintf(f,
                "# dimension 0: the rail switches (GPU k of each of the %d nodes); dimension 1: each node's NVSwitch\n"
                "# (%d GPUs). NPU n = node n %% %d, GPU slot n / %d: loong rank r is NPU (r %% %d) * %d + r / %d,\n"
                "# whose trace is workload.<NPU>.et (docs/dag.md, \"Ranks and NPUs\"). The leaf-spine hop of loong's\n"
                "# fabric (uplinks, oversubscription %.3g) has no dimension here.\n",
                m->nodes, m->gpus_per_node, m->nodes, m->nodes, m->gpus_per_node, m->nodes, m->gpus_per_node,
                sp->oversub);
        fprintf(f, "topology: [ Switch, Switch ]\nnpus_count: [ %d, %d ]\n", m->nodes, m->gpus_per_node);
        fprintf(f, "bandwidth: [ %.10g, %.10g ]  # GB/s, GB = 2^30 B\n", astra_gbps(rail), astra_gbps(sp->nvlink_bw));
        fprintf(f, "latency: [ %.10g, %.10g ]  # ns per link\n", sp->nic_lat * 1e9, sp->nvlink_lat * 1e9);
    } else {
        fprintf(f, "# one NVSwitch of %d GPUs: NPU n is loong rank n\n", m->gpus_per_node);
        fprintf(f, "topology: [ Switch ]\nnpus_count: [ %d ]\n", m->gpus_per_node);
        fprintf(f, "bandwidth: [ %.10g ]  # GB/s, GB = 2^30 B\n", astra_gbps(sp->nvlink_bw));
        fprintf(f, "latency: [ %.10g ]  # ns per link\n", sp->nvlink_lat * 1e9);
    }
    return close_written(w, f, path);
}

/* system.json: ring collectives over every dimension, the all-to-all the
 * comm_sizes were sized for, and the roofline (on without --calib, so that
 * compute nodes take num_ops / min(peak, intensity x HBM bandwidth); off
 * with it, the nodes then carrying their calibrated durations). */
static int write_system(writer *w, const chakra_opts *o, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(w->err, LOONG_ERRLEN, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    const char *rings = w->map.nodes > 1 ? "\"ring\", \"ring\"" : "\"ring\"";
    platform_spec def;
    char err[LOONG_ERRLEN];
    platform_spec_defaults(o->platform ? o->platform->gpu : "h100", &def, err);
    double peak = w->cb ? calib_peak(w->cb) : o->platform ? o->platform->peak : def.peak;
    double mem = w->cb ? calib_mem_bw(w->cb) : 3.35e12; /* H100 SXM HBM3 datasheet, without a table */
    fprintf(f,
            "{\n  \"scheduling-policy\": \"FIFO\",\n  \"endpoint-delay\": 0,\n"
            "  \"active-chunks-per-dimension\": 1,\n  \"preferred-dataset-splits\": 1,\n"
            "  \"all-reduce-implementation\": [%s],\n  \"all-gather-implementation\": [%s],\n"
            "  \"reduce-scatter-implementation\": [%s],\n  \"all-to-all-implementation\": [\"%s\"],\n"
            "  \"collective-optimization\": \"baseline\",\n  \"local-mem-bw\": %.6g,\n  \"boost-mode\": 0,\n"
            "  \"roofline-enabled\": %d,\n  \"peak-perf\": %.6g\n}\n",
            rings, rings, rings, o->a2a == CHAKRA_A2A_RING ? "ring" : "direct", mem / 1e9, w->cb ? 0 : 1, peak / 1e12);
    return close_written(w, f, path);
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
    for (int r = 0; r < ranks + 3; r++) {
        if (r < ranks)
            snprintf(name, sizeof name, CHAKRA_PREFIX ".%d.et", r);
        else
            snprintf(name, sizeof name, "%s",
                     r == ranks       ? CHAKRA_PREFIX ".json"
                     : r == ranks + 1 ? "network.yml"
                                      : "system.json");
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

int chakra_write_dir(const dag *g, const calib *cb, const chakra_opts *o, const char *dir_arg, char err[LOONG_ERRLEN])
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
    writer w = {.g = g, .cb = cb, .a2a = o->a2a, .dims = o->dims, .map = npu_map_of(dag_config(g))};
    if (cb) w.tiles = tiles_new(cb, dag_config(g));
    uint32_t nt = dag_ntasks(g);
    uint32_t *first = NULL, *order = NULL;
    if (!rc) {
        w.data_cap = 4 * STREAM_COUNT;
        w.data = xmalloc(w.data_cap * sizeof *w.data, "the Chakra data dependencies");
        w.mates = xmalloc((size_t)nt * sizeof *w.mates + 1, "the Chakra NCCL groups");
        w.nmates = xmalloc((size_t)nt * sizeof *w.nmates + 1, "the Chakra NCCL groups");
        w.pred = xmalloc((size_t)nt * sizeof *w.pred + 1, "the Chakra stream order");
        w.npred = xmalloc((size_t)nt * sizeof *w.npred + 1, "the Chakra stream order");
        first = xmalloc((size_t)(ranks + 1) * sizeof *first, "the Chakra rank index");
        order = xmalloc((size_t)nt * sizeof *order + 1, "the Chakra rank index");
        stream_preds(&w);
        plan_splits(&w);
        by_rank(g, ranks, first, order);
    }
    for (int r = 0; r < ranks && !rc; r++) {
        char name[64];
        snprintf(name, sizeof name, CHAKRA_PREFIX ".%d.et", npu_of(&w, r));
        char *p = path_in(stage, name);
        rc = write_rank(&w, p, r, order + first[r], first[r + 1] - first[r]);
        free(p);
    }
    if (!rc) {
        char *p = path_in(stage, CHAKRA_PREFIX ".json");
        rc = write_groups(&w, p);
        free(p);
    }
    if (!rc) {
        char *p = path_in(stage, "network.yml");
        rc = write_network(&w, o, p);
        free(p);
    }
    if (!rc) {
        char *p = path_in(stage, "system.json");
        rc = write_system(&w, o, p);
        free(p);
    }
    if (rc && stage) snprintf(err, LOONG_ERRLEN, "%s", w.err);
    /* rename() replaces an empty directory: `dir` is whole or untouched */
    if (!rc && rename(stage, dir) != 0) {
        snprintf(err, LOONG_ERRLEN, "cannot write '%s': %s", dir, strerror(errno));
        rc = -1;
    }
    if (rc && stage) remove_stage(stage, ranks);
    free(w.buf), free(w.data), free(w.ctrl), free(w.pred), free(w.npred), free(w.mates), free(w.nmates);
    free(w.split), free(w.nsplit);
    tiles_free(w.tiles);
    free(first), free(order);
    free(stage), free(dir);
    return rc;
}

#endif

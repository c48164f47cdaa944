/* kineto: one rank's PyTorch profiler trace. See kineto.h. */
#include "kineto.h"
#include "kineto_mem.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/infile.h"
#include "core/sizes.h"
#include "core/xalloc.h"
#include "model/calib.h"

/* ---- gzip ---- */

static bool is_gzip(const void *buf, size_t len)
{
    const unsigned char *b = buf;
    return len >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

/* Inflate a gzip stream (several members too) into a NUL-terminated
 * buffer. NULL with a message when it does not inflate or grows past
 * KINETO_MAX_BYTES. */
static char *gunzip(const void *buf, size_t len, const char *path, size_t *out_len, char err[LOONG_ERRLEN])
{
    z_stream z = {0};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) xalloc_die(0, "zlib's inflate state");
    size_t cap = len * 8 + 4096, n = 0;
    char *out = xmalloc_array(cap, 1, "an inflated trace");
    z.next_in = (Bytef *)buf;
    z.avail_in = (uInt)(len > UINT32_MAX ? UINT32_MAX : len);
    size_t left = len - z.avail_in;
    int rc = Z_OK;
    while (rc != Z_STREAM_END || z.avail_in) {
        if (rc == Z_STREAM_END) inflateReset(&z); /* the next gzip member */
        if (cap - n < 2) {
            if (cap >= KINETO_MAX_BYTES) {
                snprintf(err, LOONG_ERRLEN, "'%.100s' inflates past %zu GiB: profile fewer steps", path,
                         KINETO_MAX_BYTES >> 30);
                goto fail;
            }
            cap *= 2;
            out = xrealloc_array(out, cap, 1, "an inflated trace");
        }
        z.next_out = (Bytef *)out + n;
        z.avail_out = (uInt)((cap - n - 1) > UINT32_MAX ? UINT32_MAX : cap - n - 1);
        uInt before = z.avail_out;
        rc = inflate(&z, Z_NO_FLUSH);
        n += before - z.avail_out;
        if (z.avail_in == 0 && left) {
            z.avail_in = (uInt)(left > UINT32_MAX ? UINT32_MAX : left);
            left -= z.avail_in;
        }
        if (rc == Z_BUF_ERROR && z.avail_in == 0 && !left) {
            snprintf(err, LOONG_ERRLEN, "'%.100s' is a gzip file cut short: copy it again from the run", path);
            goto fail;
        }
        if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
            snprintf(err, LOONG_ERRLEN, "'%.100s' starts like gzip but does not inflate (%s): copy it again", path,
                     z.msg ? z.msg : "corrupt data");
            goto fail;
        }
    }
    inflateEnd(&z);
    out[n] = 0;
    *out_len = n;
    return out;
fail:
    inflateEnd(&z);
    free(out);
    return NULL;
}

/* ---- lookups by id: sorted (key, index) pairs ---- */

typedef struct keyed {
    int64_t key;
    size_t i;
} keyed;

static int by_key(const void *a, const void *b)
{
    int64_t x = ((const keyed *)a)->key, y = ((const keyed *)b)->key;
    return (x > y) - (x < y);
}

static const keyed *find(const keyed *v, size_t n, int64_t key)
{
    keyed k = {key, 0};
    return n ? bsearch(&k, v, n, sizeof *v, by_key) : NULL;
}

/* ---- the parse ---- */

/* A CPU operator's span on its thread, for traces whose kernels' External
 * id is their correlation id (PyTorch <= 2.0): the operator that launched
 * a kernel is then the innermost one around its runtime call. */
typedef struct op_span {
    int64_t tid;
    double ts, end;
    size_t i;
} op_span;

static int by_tid_ts(const void *a, const void *b)
{
    const op_span *x = a, *y = b;
    if (x->tid != y->tid) return (x->tid > y->tid) - (x->tid < y->tid);
    return (x->ts > y->ts) - (x->ts < y->ts);
}

typedef struct parse {
    kineto_rank *r;
    const kineto_names *names;
    json_t **ev; /* the events that matter, borrowed from the root */
    keyed *corr, *ext;
    size_t ncorr, next;
    op_span *ops;
    size_t nops;
    size_t cap_k, cap_s;
    int cap_streams, cap_names;
} parse;

static int64_t int_arg(const json_t *args, const char *key, int64_t dflt)
{
    json_t *v = json_object_get(args, key);
    if (json_is_integer(v)) return json_integer_value(v);
    double d = json_is_real(v) ? json_real_value(v) : NAN;
    /* a real beyond int64's range (or NaN) is no integer: the default, as
     * for a missing key (casting it would be undefined) */
    if (d >= -9.2e18 && d <= 9.2e18) return (int64_t)d;
    return dflt;
}

static double num(const json_t *v, double dflt) { return json_is_number(v) ? json_number_value(v) : dflt; }

static int name_index(parse *p, const char *name)
{
    kineto_rank *r = p->r;
    for (int i = r->nnames - 1; i >= 0 && i >= r->nnames - 8; i--) /* kernels repeat in runs */
        if (!strcmp(r->names[i], name)) return r->name_count[i]++, i;
    for (int i = 0; i < r->nnames - 8; i++)
        if (!strcmp(r->names[i], name)) return r->name_count[i]++, i;
    if (r->nnames == p->cap_names) {
        p->cap_names = p->cap_names ? 2 * p->cap_names : 64;
        r->names = xrealloc_array(r->names, (size_t)p->cap_names, sizeof *r->names, "a trace's kernel names");
        r->name_count =
            xrealloc_array(r->name_count, (size_t)p->cap_names, sizeof *r->name_count, "a trace's kernel names");
    }
    r->names[r->nnames] = xstrdup(name, "a kernel name");
    r->name_count[r->nnames] = 1;
    return r->nnames++;
}

/* The (device, stream) of a kernel: a process that drives several GPUs
 * numbers each one's streams from 7 again. */
static int stream_index(parse *p, int64_t device, int64_t id)
{
    kineto_rank *r = p->r;
    for (int i = 0; i < r->nstreams; i++)
        if (r->streams[i].id == id && r->streams[i].device == device) return i;
    if (r->nstreams == p->cap_streams) {
        p->cap_streams = p->cap_streams ? 2 * p->cap_streams : 8;
        r->streams = xrealloc_array(r->streams, (size_t)p->cap_streams, sizeof *r->streams, "a trace's streams");
    }
    r->streams[r->nstreams] = (kineto_stream){.id = id, .device = device};
    return r->nstreams++;
}

/* The innermost operator on thread tid whose span holds t, or NULL. */
static const json_t *op_around(const parse *p, int64_t tid, double t)
{
    size_t lo = 0, hi = p->nops; /* the first span after (tid, t) */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const op_span *o = &p->ops[mid];
        if (o->tid < tid || (o->tid == tid && o->ts <= t))
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo, walked = 0; i-- > 0 && p->ops[i].tid == tid && walked < 256; walked++)
        if (p->ops[i].end >= t) return p->ev[p->ops[i].i];
    return NULL;
}

/* The operator that launched a kernel: by its External id, else around
 * its runtime call (launch, NULL when the trace has none). */
static const json_t *op_of(const parse *p, const json_t *args, const json_t *launch)
{
    int64_t ext = int_arg(args, "External id", -1);
    /* PyTorch <= 2.0 set a kernel's External id to its correlation id, a
     * number of another space that may match an unrelated operator */
    bool own = ext >= 0 && ext != int_arg(args, "correlation", -2);
    const keyed *k = own ? find(p->ext, p->next, ext) : NULL;
    if (k) return p->ev[k->i];
    if (!launch) return NULL;
    return op_around(p, int_arg(launch, "tid", -1), num(json_object_get(launch, "ts"), 0));
}

/* Bytes per element of PyTorch's dtype names ("Float", "BFloat16", ...). */
static int dtype_bytes(const char *t)
{
    if (!t) return 0;
    if (strstr(t, "Float8") || !strcmp(t, "Byte") || !strcmp(t, "Char") || !strcmp(t, "Bool")) return 1;
    if (!strcmp(t, "BFloat16") || !strcmp(t, "Half") || !strcmp(t, "Short")) return 2;
    if (!strcmp(t, "Float") || !strcmp(t, "Int")) return 4;
    if (!strcmp(t, "Double") || !strcmp(t, "Long")) return 8;
    return 0;
}

static int collective_kind(const char *name)
{
    if (!name) return -1;
    if (strstr(name, "allreduce") || strstr(name, "all_reduce")) return TASK_ALLREDUCE;
    if (strstr(name, "allgather") || strstr(name, "all_gather")) return TASK_ALLGATHER;
    if (strstr(name, "reduce_scatter") || strstr(name, "reducescatter")) return TASK_REDUCESCATTER;
    if (strstr(name, "all_to_all") || strstr(name, "alltoall")) return TASK_ALLTOALL;
    if (strstr(name, "send") || strstr(name, "recv")) return KINETO_P2P;
    return KINETO_NCCL_OTHER;
}

/* The group's global ranks when they are start + i x stride: PyTorch's
 * "Global rank start/stride", else its "Process Group Ranks" list (a
 * string, "[0, 8, 16]"). */
static void ranks_of(const json_t *a, kineto_kernel *k)
{
    int64_t start = int_arg(a, "Global rank start", -1), stride = int_arg(a, "Global rank stride", 0);
    const char *list = json_string_value(json_object_get(a, "Process Group Ranks"));
    if ((start < 0 || stride <= 0) && list) {
        long v[3];
        int n = sscanf(list, " [%ld , %ld , %ld", &v[0], &v[1], &v[2]);
        if (n >= 1) start = v[0];
        stride = n >= 2 ? v[1] - v[0] : 1;
        if (n == 3 && v[2] - v[1] != stride) stride = 0;
    }
    if (start >= 0 && start < INT32_MAX && stride > 0 && stride < INT32_MAX) {
        k->pg_start = (int)start;
        k->pg_stride = (int)stride;
    }
}

/* NCCL's collective args, on the kernel (PyTorch >= 2.2) or on the
 * record_param_comms operator that launched it. */
static void nccl_args(const parse *p, const json_t *args, const json_t *launch, kineto_kernel *k)
{
    const json_t *a = args;
    if (!json_object_get(a, "Collective name")) {
        const json_t *op = op_of(p, args, launch);
        const char *opname = op ? json_string_value(json_object_get(op, "name")) : NULL;
        if (!opname || strcmp(opname, "record_param_comms")) return;
        a = json_object_get(op, "args");
    }
    /* the args name the op the name may not (Generic, or an all-to-all run
     * as SendRecv); a user's rule that made the kernel compute stands */
    int kind = collective_kind(json_string_value(json_object_get(a, "Collective name")));
    if (kind >= 0 && kind != KINETO_NCCL_OTHER && (kineto_kind_is_comm(k->kind) || k->kind == KINETO_OTHER))
        k->kind = kind;
    int eb = dtype_bytes(json_string_value(json_object_get(a, "dtype")));
    int64_t in = int_arg(a, "In msg nelems", 0), out = int_arg(a, "Out msg nelems", 0);
    int64_t n = k->kind == TASK_ALLGATHER ? out : in ? in : out;
    if (eb > 0 && n > 0) k->bytes = (double)n * eb;
    k->group = (int)int_arg(a, "Group size", 0);
    ranks_of(a, k);
}

/* ---- shapes ---- */

/* An attention operator: its kind, where q and k sit among its inputs,
 * their layout ([b, s, h, d] or [b, h, s, d]) and which concrete input is
 * is_causal. Signatures of PyTorch 2.4's native_functions.yaml and
 * flash-attn 2.6's torch.library ops. */
typedef struct attn_op {
    const char *name;
    int kind, q, k, causal;
    bool bhsd;
} attn_op;

static const attn_op attn_ops[] = {
    {"aten::_scaled_dot_product_flash_attention", TASK_ATTN_FWD, 0, 1, 4, true},
    {"aten::_scaled_dot_product_flash_attention_backward", TASK_ATTN_BWD, 1, 2, 11, true},
    {"aten::_scaled_dot_product_cudnn_attention", TASK_ATTN_FWD, 0, 1, 6, true},
    {"aten::_scaled_dot_product_cudnn_attention_backward", TASK_ATTN_BWD, 1, 2, 14, true},
    {"aten::_scaled_dot_product_efficient_attention", TASK_ATTN_FWD, 0, 1, 6, true},
    {"aten::_scaled_dot_product_efficient_attention_backward", TASK_ATTN_BWD, 1, 2, 11, true},
    {"aten::_flash_attention_forward", TASK_ATTN_FWD, 0, 1, 8, false},
    {"aten::_flash_attention_backward", TASK_ATTN_BWD, 1, 2, 11, false},
    {"flash_attn::_flash_attn_forward", TASK_ATTN_FWD, 0, 1, 5, false},
    {"flash_attn::_flash_attn_backward", TASK_ATTN_BWD, 1, 2, 11, false},
};

/* dims[i] as up to 4 integers; returns how many (-1: not a list of them). */
static int dims_of(const json_t *dims, size_t i, int64_t v[4])
{
    const json_t *d = json_array_get(dims, i);
    if (!json_is_array(d) || json_array_size(d) > 4) return -1;
    for (size_t j = 0; j < json_array_size(d); j++) {
        const json_t *x = json_array_get(d, j);
        if (!json_is_integer(x) || json_integer_value(x) <= 0) return -1;
        v[j] = json_integer_value(x);
    }
    return (int)json_array_size(d);
}

static int concrete_bool(const json_t *args, int i)
{
    const char *s = json_string_value(json_array_get(json_object_get(args, "Concrete Inputs"), (size_t)i));
    if (!s) return -1;
    if (!strcmp(s, "True") || !strcmp(s, "true") || !strcmp(s, "1")) return 1;
    if (!strcmp(s, "False") || !strcmp(s, "false") || !strcmp(s, "0")) return 0;
    return -1;
}

static bool attn_op_shape(const char *opname, const json_t *args, kineto_kernel *k)
{
    const json_t *dims = json_object_get(args, "Input Dims");
    for (size_t i = 0; i < sizeof attn_ops / sizeof attn_ops[0]; i++) {
        const attn_op *a = &attn_ops[i];
        if (strcmp(opname, a->name) || a->kind != k->kind) continue;
        int64_t q[4], kv[4];
        int causal = concrete_bool(args, a->causal);
        /* varlen calls pass [tokens, heads, dim]: their documents are not in the shapes */
        if (dims_of(dims, (size_t)a->q, q) != 4 || dims_of(dims, (size_t)a->k, kv) != 4 || causal < 0) return false;
        int s = a->bhsd ? 2 : 1, h = a->bhsd ? 1 : 2;
        if (q[0] != kv[0] || q[3] != kv[3] || q[0] > INT32_MAX || q[h] > INT32_MAX || q[3] > INT32_MAX) return false;
        k->batch = (int)q[0];
        k->heads = (int)q[h];
        k->head_dim = (int)q[3];
        k->sq = q[s];
        k->sk = kv[s];
        k->causal = causal;
        double f = 4.0 * (double)kineto_attn_pairs(k->sq, k->sk, k->causal) * k->head_dim * k->heads * k->batch;
        k->flops = k->kind == TASK_ATTN_BWD ? f * 5 / 2 : f;
        return true;
    }
    return false;
}

/* The cuBLAS layout (calib.h) of a row-major A B from the operands'
 * strides: an operand whose rows are contiguous in memory (strides [1,
 * ld]) is a transposed view, as nn.Linear's W^T is. Megatron's forward
 * X W^T is tn, its dgrad dY W nn and its wgrad dY^T X nt. GEMM_ANY when
 * the strides are not in the trace or both operands are transposed. */
static int gemm_layout_of(const json_t *args, int first)
{
    const json_t *st = json_object_get(args, "Input Strides");
    int64_t a[4], b[4];
    if (dims_of(st, (size_t)first, a) != 2 || dims_of(st, (size_t)first + 1, b) != 2) return GEMM_ANY;
    bool ta = a[1] != 1 && a[0] == 1, tb = b[1] != 1 && b[0] == 1;
    if (ta && tb) return GEMM_ANY;
    return tb ? GEMM_TN : ta ? GEMM_NT : GEMM_NN;
}

/* 2mnk of a GEMM operator from its input shapes; a 2-D one's (m, n, k)
 * and layout into k's GEMM fields. */
static double gemm_flops(const char *opname, const json_t *args, kineto_kernel *kk)
{
    const json_t *dims = json_object_get(args, "Input Dims");
    int64_t a[4], b[4];
    int first = !strcmp(opname, "aten::addmm") || !strcmp(opname, "aten::baddbmm") ? 1 : 0;
    bool batched = !strcmp(opname, "aten::bmm") || !strcmp(opname, "aten::baddbmm");
    if (!batched && strcmp(opname, "aten::mm") && strcmp(opname, "aten::addmm") && strcmp(opname, "aten::_scaled_mm"))
        return 0;
    int na = dims_of(dims, (size_t)first, a), nb = dims_of(dims, (size_t)first + 1, b);
    if (batched && na == 3 && nb == 3 && a[0] == b[0] && a[2] == b[1])
        return 2.0 * (double)a[0] * (double)a[1] * (double)a[2] * (double)b[2];
    if (batched || na != 2 || nb != 2 || a[1] != b[0]) return 0;
    kk->gm = a[0], kk->gn = b[1], kk->gk = a[1];
    kk->layout = gemm_layout_of(args, first);
    return 2.0 * (double)a[0] * (double)a[1] * (double)b[1];
}

/* The elements of a dims entry: a list of sizes (a scalar's is []); -1
 * when it is not one (a TensorList, a None). */
static double numel(const json_t *d)
{
    if (!json_is_array(d)) return -1;
    double n = 1;
    for (size_t j = 0; j < json_array_size(d); j++) {
        const json_t *x = json_array_get(d, j);
        if (!json_is_integer(x) || json_integer_value(x) < 0) return -1;
        n *= (double)json_integer_value(x);
    }
    return n;
}

/* Bytes per element of a tensor input's "Input type", as record_shapes
 * writes the C++ scalar type ("float", "c10::BFloat16", "long int"); 0
 * for an unknown one. Non-tensor inputs ("", "Scalar", "ScalarList", ...)
 * are told apart by the caller. */
static int input_type_bytes(const char *t)
{
    static const struct {
        const char *name;
        int bytes;
    } cxx[] = {{"float", 4}, {"double", 8},        {"long int", 8},    {"int", 4},       {"short int", 2},
               {"bool", 1},  {"unsigned char", 1}, {"signed char", 1}, {"c10::Half", 2}, {"c10::BFloat16", 2}};
    for (size_t i = 0; i < sizeof cxx / sizeof *cxx; i++)
        if (!strcmp(t, cxx[i].name)) return cxx[i].bytes;
    return strstr(t, "Float8") ? 1 : 0;
}

static bool is_tensor_type(const char *t) { return t && t[0] && strncmp(t, "Scalar", 6) && !strstr(t, "List"); }

/* An elementwise op's HBM bytes from its "Input Dims" and "Input type":
 * every tensor input read once, and an output of its largest input's
 * bytes written. 0 when a tensor input's size or type is unknown. */
static double op_hbm_bytes(const json_t *args)
{
    const json_t *dims = json_object_get(args, "Input Dims"), *types = json_object_get(args, "Input type");
    if (!json_is_array(dims) || !json_is_array(types) || json_array_size(dims) != json_array_size(types)) return 0;
    double sum = 0, big = 0;
    for (size_t i = 0; i < json_array_size(dims); i++) {
        const char *t = json_string_value(json_array_get(types, i));
        if (!is_tensor_type(t)) continue; /* a Scalar, a None, a list: not one tensor */
        double n = numel(json_array_get(dims, i)), eb = input_type_bytes(t);
        if (n < 0 || eb <= 0) return 0;
        sum += n * eb;
        big = fmax(big, n * eb);
    }
    return sum + big;
}

static void shapes(parse *p, const json_t *args, const json_t *launch, kineto_kernel *k)
{
    const json_t *op = op_of(p, args, launch);
    const char *opname = op ? json_string_value(json_object_get(op, "name")) : NULL;
    if (!opname) return;
    const json_t *oargs = json_object_get(op, "args");
    if (k->kind == TASK_ATTN_FWD || k->kind == TASK_ATTN_BWD)
        attn_op_shape(opname, oargs, k);
    else if (k->kind == TASK_GEMM)
        k->flops = gemm_flops(opname, oargs, k);
    else if (k->kind >= 0 && k->kind < TASK_KIND_COUNT && calib_memory_bound(k->kind))
        k->hbm = op_hbm_bytes(oargs);
    if (k->flops > 0) p->r->shaped++;
}

/* ---- events ---- */

static bool ev_is(const json_t *e, const char *cat)
{
    const char *c = json_string_value(json_object_get(e, "cat"));
    return c && !strcmp(c, cat);
}

static int kernel(parse *p, const json_t *e, double ts, double dur, char err[LOONG_ERRLEN])
{
    kineto_rank *r = p->r;
    const char *name = json_string_value(json_object_get(e, "name"));
    const json_t *args = json_object_get(e, "args");
    if (!name) {
        snprintf(err, LOONG_ERRLEN, "'%.100s': a kernel event without a name: is this a PyTorch profiler trace?",
                 r->path);
        return -1;
    }
    if (r->nk == p->cap_k) {
        p->cap_k = p->cap_k ? 2 * p->cap_k : 1024;
        r->k = xrealloc_array(r->k, p->cap_k, sizeof *r->k, "a trace's kernels");
    }
    kineto_kernel *k = &r->k[r->nk++];
    *k = (kineto_kernel){.ts = ts, .dur = dur, .launch = ts, .step = -1, .algo = -1, .proto = -1};
    k->kind = kineto_names_classify(p->names, name);
    k->name = name_index(p, name);
    int64_t sid = int_arg(args, "stream", int_arg(e, "tid", -1));
    k->stream = stream_index(p, int_arg(args, "device", int_arg(e, "pid", 0)), sid);
    const keyed *c = find(p->corr, p->ncorr, int_arg(args, "correlation", -1));
    const json_t *launch = c ? p->ev[c->i] : NULL;
    if (launch) k->launch = num(json_object_get(launch, "ts"), 0) - r->t0_us;
    kineto_nccl_name nn;
    bool nccl = kineto_nccl_name_parse(name, &nn);
    if (nccl) {
        k->algo = nn.algo;
        k->proto = nn.proto;
    }
    if (nccl || kineto_kind_is_comm(k->kind)) nccl_args(p, args, launch, k);
    if (k->kind == KINETO_OTHER) r->unknown++;
    shapes(p, args, launch, k);
    kineto_stream *s = &r->streams[k->stream];
    if (kineto_kind_is_comm(k->kind)) {
        s->comm_us += dur;
        const char *pg = json_string_value(json_object_get(args, "Process Group Name"));
        if (pg && !s->pg[0] && !s->pg_mixed)
            snprintf(s->pg, sizeof s->pg, "%s", pg);
        else if (pg && strcmp(s->pg, pg))
            s->pg_mixed = true, s->pg[0] = 0;
    } else {
        s->compute_us += dur;
    }
    return 0;
}

static void step(parse *p, const char *name, double ts, double dur)
{
    kineto_rank *r = p->r;
    int n;
    if (sscanf(name, "ProfilerStep#%d", &n) != 1) return;
    for (int i = 0; i < r->nsteps; i++)
        if (r->steps[i].number == n) return; /* the GPU-side copy of an annotation */
    if ((size_t)r->nsteps == p->cap_s) {
        p->cap_s = p->cap_s ? 2 * p->cap_s : 16;
        r->steps = xrealloc_array(r->steps, p->cap_s, sizeof *r->steps, "a trace's steps");
    }
    r->steps[r->nsteps++] = (kineto_step){n, ts, ts + dur};
}

static int by_step_ts(const void *a, const void *b)
{
    double x = ((const kineto_step *)a)->ts, y = ((const kineto_step *)b)->ts;
    return (x > y) - (x < y);
}

/* First pass: the events with a time stamp, the runtime calls by
 * correlation id, the operators by External id, the earliest ts. */
static int index_events(parse *p, const json_t *events, char err[LOONG_ERRLEN])
{
    size_t n = json_array_size(events), ne = 0;
    p->ev = xmalloc_array(n + 1, sizeof *p->ev, "a trace's events");
    p->corr = xmalloc_array(n + 1, sizeof *p->corr, "a trace's events");
    p->ext = xmalloc_array(n + 1, sizeof *p->ext, "a trace's events");
    p->ops = xmalloc_array(n + 1, sizeof *p->ops, "a trace's events");
    double t0 = INFINITY;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(events, i);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        if (!json_is_object(e) || !ph || strcmp(ph, "X")) continue;
        double ts = num(json_object_get(e, "ts"), NAN), dur = num(json_object_get(e, "dur"), NAN);
        if (!isfinite(ts) || !isfinite(dur) || dur < 0 || fabs(ts) > 1e17) {
            snprintf(err, LOONG_ERRLEN,
                     "'%.100s': event %zu has no finite ts and non-negative dur (microseconds): is the file cut short?",
                     p->r->path, i);
            return -1;
        }
        if (ts < t0) t0 = ts;
        json_t *args = json_object_get(e, "args");
        if (ev_is(e, "cuda_runtime") || ev_is(e, "cuda_driver")) {
            int64_t c = int_arg(args, "correlation", -1);
            if (c >= 0) p->corr[p->ncorr++] = (keyed){c, ne};
        } else if (ev_is(e, "cpu_op")) {
            int64_t x = int_arg(args, "External id", -1);
            if (x >= 0) p->ext[p->next++] = (keyed){x, ne};
            p->ops[p->nops++] = (op_span){int_arg(e, "tid", -1), ts, ts + dur, ne};
        }
        p->ev[ne++] = e;
    }
    p->r->events = ne;
    p->r->t0_us = ne ? t0 : 0;
    qsort(p->corr, p->ncorr, sizeof *p->corr, by_key);
    qsort(p->ops, p->nops, sizeof *p->ops, by_tid_ts);
    /* several operators share an External id only through nesting: keep the
     * innermost, the one that started last (stable: later index wins ties) */
    qsort(p->ext, p->next, sizeof *p->ext, by_key);
    size_t w = 0;
    for (size_t i = 0; i < p->next; i++) {
        if (w && p->ext[w - 1].key == p->ext[i].key) {
            double a = num(json_object_get(p->ev[p->ext[w - 1].i], "ts"), 0);
            double b = num(json_object_get(p->ev[p->ext[i].i], "ts"), 0);
            if (b >= a) p->ext[w - 1] = p->ext[i];
            continue;
        }
        p->ext[w++] = p->ext[i];
    }
    p->next = w;
    return 0;
}

static int read_events(parse *p, char err[LOONG_ERRLEN])
{
    kineto_rank *r = p->r;
    for (size_t i = 0; i < r->events; i++) {
        const json_t *e = p->ev[i];
        double ts = num(json_object_get(e, "ts"), 0) - r->t0_us, dur = num(json_object_get(e, "dur"), 0);
        const char *name = json_string_value(json_object_get(e, "name"));
        if (ev_is(e, "kernel")) {
            if (kernel(p, e, ts, dur, err) < 0) return -1;
        } else if (name && !strncmp(name, "ProfilerStep#", 13) && !ev_is(e, "gpu_user_annotation")) {
            step(p, name, ts, dur);
        }
    }
    if (r->nsteps > 1) qsort(r->steps, (size_t)r->nsteps, sizeof *r->steps, by_step_ts);
    return 0;
}

static void distributed(kineto_rank *r, const json_t *root)
{
    const json_t *d = json_object_get(root, "distributedInfo");
    r->rank = (int)int_arg(d, "rank", -1);
    r->world = (int)int_arg(d, "world_size", -1);
    if (r->rank < -1 || r->world < -1 || r->world > 1 << 24 || (r->world > 0 && r->rank >= r->world))
        r->rank = r->world = -1;
    const char *v = json_string_value(json_object_get(d, "nccl_version"));
    snprintf(r->nccl_version, sizeof r->nccl_version, "%s", v ? v : "");
}

/* Peak memory to parse a trace, per byte of its JSON: jansson's objects
 * for the events (core/trace.c measured 17 on loong's own traces). */
#define KINETO_MEM_PER_BYTE 17

static int parse_json(const char *text, size_t len, const char *path, const kineto_names *names, kineto_rank *r,
                      char err[LOONG_ERRLEN])
{
    double phys = xalloc_machine_bytes();
    if ((double)len * KINETO_MEM_PER_BYTE > phys && phys > 0) {
        snprintf(err, LOONG_ERRLEN,
                 "'%.100s' is %.1f GiB of JSON: parsing it needs ~%.0f GiB, more than this machine's %.0f GiB: profile "
                 "fewer steps",
                 path, (double)len / (1 << 30), (double)len * KINETO_MEM_PER_BYTE / (1 << 30), phys / (1 << 30));
        return -1;
    }
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_DECODE_ANY, &je);
    if (!root) {
        for (char *c = je.text; *c; c++) /* jansson quotes the input, control bytes included: one line */
            if ((unsigned char)*c < 0x20) *c = '?';
        snprintf(err, LOONG_ERRLEN, "'%.100s' is not JSON (line %d: %.60s): give a PyTorch profiler trace", path,
                 je.line, je.text);
        return -1;
    }
    const json_t *events = json_object_get(root, "traceEvents");
    int rc = -1;
    if (json_is_object(root) && json_object_get(root, "loong"))
        snprintf(err, LOONG_ERRLEN,
                 "'%.100s' is a loong trace, not a PyTorch profiler one: compare it with loong compare PRED MEAS",
                 path);
    else if (!json_is_array(events))
        snprintf(err, LOONG_ERRLEN,
                 "'%.100s' is JSON but not a trace (no \"traceEvents\" array): give a PyTorch profiler trace", path);
    else {
        parse p = {.r = r, .names = names};
        distributed(r, root);
        if (index_events(&p, events, err) == 0 && read_events(&p, err) == 0) rc = 0;
        if (rc == 0) kineto_mem_scan(events, r);
        if (rc == 0 && !r->nk) {
            snprintf(err, LOONG_ERRLEN,
                     "'%.100s' has no GPU kernel events (a CPU-only trace?): profile with "
                     "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]",
                     path);
            rc = -1;
        }
        free(p.ev);
        free(p.corr);
        free(p.ext);
        free(p.ops);
    }
    json_decref(root);
    return rc;
}

int kineto_parse(const void *buf, size_t len, const char *path, const kineto_names *names, kineto_rank *r,
                 char err[LOONG_ERRLEN])
{
    memset(r, 0, sizeof *r);
    r->rank = r->world = -1;
    snprintf(r->path, sizeof r->path, "%s", path);
    size_t plen = strlen(path);
    bool named_gz = plen > 3 && !strcmp(path + plen - 3, ".gz");
    int rc;
    if (is_gzip(buf, len)) {
        size_t n;
        char *text = gunzip(buf, len, path, &n, err);
        rc = text ? parse_json(text, n, path, names, r, err) : -1;
        free(text);
    } else if (named_gz) {
        snprintf(err, LOONG_ERRLEN, "'%.100s' is named .gz but is not gzip: rename it, or copy it again", path);
        rc = -1;
    } else {
        rc = parse_json(buf, len, path, names, r, err);
    }
    if (rc < 0) kineto_rank_free(r);
    return rc;
}

int kineto_read(const char *path, const kineto_names *names, kineto_rank *r, char err[LOONG_ERRLEN])
{
    memset(r, 0, sizeof *r);
    size_t len;
    char *buf = infile_read_bytes(path, "profiler trace", KINETO_MAX_BYTES, &len, err);
    if (!buf) return -1;
    int rc = kineto_parse(buf, len, path, names, r, err);
    free(buf);
    return rc;
}

void kineto_rank_free(kineto_rank *r)
{
    for (int i = 0; i < r->nnames; i++)
        free(r->names[i]);
    free(r->names);
    free(r->name_count);
    free(r->k);
    free(r->steps);
    free(r->streams);
    free(r->mem);
    r->mem = NULL;
    r->nmem = 0;
    r->names = NULL;
    r->name_count = NULL;
    r->k = NULL;
    r->steps = NULL;
    r->streams = NULL;
    r->nk = 0;
    r->nnames = r->nsteps = r->nstreams = 0;
}

/* ---- attention work ---- */

uint64_t kineto_attn_pairs(int64_t sq, int64_t sk, bool causal)
{
    if (!causal) return (uint64_t)sq * (uint64_t)sk;
    /* query i (0-based) sees keys 0 .. i + sk - sq: i + sk - sq + 1 of them
     * from the first query that sees one, an arithmetic series up to sk */
    int64_t lo = sq > sk ? sq - sk : 0;
    if (lo >= sq) return 0;
    uint64_t first = (uint64_t)(lo + sk - sq + 1), count = (uint64_t)(sq - lo);
    return (first + (uint64_t)sk) * count / 2;
}

uint64_t kineto_attn_tiles(int64_t sq, int64_t sk, bool causal, int br, int bc)
{
    uint64_t ncol = (uint64_t)((sk + bc - 1) / bc);
    if (!causal) return (uint64_t)((sq + br - 1) / br) * ncol;
    uint64_t n = 0;
    int64_t off = sk - sq;
    for (int64_t r0 = 0; r0 < sq; r0 += br) {
        int64_t qmax = (r0 + br < sq ? r0 + br : sq) - 1 + off; /* the last key the row tile's last query sees */
        if (qmax < 0) continue;
        uint64_t c = (uint64_t)(qmax / bc + 1);
        n += c < ncol ? c : ncol;
    }
    return n;
}

double kineto_kernel_work_at(const kineto_kernel *k, int br, int bc)
{
    if (k->flops <= 0 || (k->kind != TASK_ATTN_FWD && k->kind != TASK_ATTN_BWD) || br <= 0 || bc <= 0) return k->flops;
    uint64_t pairs = kineto_attn_pairs(k->sq, k->sk, k->causal);
    if (!pairs) return k->flops;
    return k->flops * (double)kineto_attn_tiles(k->sq, k->sk, k->causal, br, bc) * br * bc / (double)pairs;
}

double kineto_kernel_work(const kineto_kernel *k, const calib *cb)
{
    int br, bc;
    if (!cb || !calib_tile(cb, k->kind, &br, &bc)) return k->flops;
    return kineto_kernel_work_at(k, br, bc);
}

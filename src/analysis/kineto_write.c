/* kineto_write: a loong prediction in the PyTorch profiler's form. See
 * kineto_write.h. */
#include "kineto_write.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/sizes.h"
#include "core/trace.h"
#include "core/xalloc.h"
#include "model/nccl.h"

/* Kineto numbers CUDA streams from 7 (the default stream's neighbours);
 * loong's stream s becomes s + 7. */
#define STREAM_BASE      7
#define CPU_PID          1
#define CORRELATION_BASE 1000000

typedef struct writer {
    FILE *f;
    const dag *g;
    const calib *cb; /* the table that timed the tasks; NULL: none */
    const double *start, *dur;
    bool first;
    uint32_t corr;
} writer;

static void event(writer *w, json_t *e)
{
    char *s = json_dumps(e, JSON_COMPACT | JSON_REAL_PRECISION(15));
    fprintf(w->f, "%s%s", w->first ? "\n" : ",\n", s);
    w->first = false;
    free(s);
    json_decref(e);
}

static json_t *dims2(uint64_t a, uint64_t b) { return json_pack("[I, I]", (json_int_t)a, (json_int_t)b); }
static json_t *dims4(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return json_pack("[I, I, I, I]", (json_int_t)a, (json_int_t)b, (json_int_t)c, (json_int_t)d);
}

/* The launching operator and runtime call, then the kernel (its CPU side
 * at the kernel's start, inside the step). op may be NULL: no shapes. */
static void launch(writer *w, const char *kernel, const char *opname, json_t *op_args, int stream, double ts,
                   double dur, json_t *kargs)
{
    uint32_t c = ++w->corr, corr = CORRELATION_BASE + c; /* two numberings, as CUPTI's and PyTorch's are */
    if (!op_args) op_args = json_object();
    json_object_set_new(op_args, "External id", json_integer(c));
    event(w, json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:o}", "ph", "X", "cat", "cpu_op", "name",
                       opname ? opname : "loong::task", "pid", CPU_PID, "tid", CPU_PID, "ts", ts, "dur", 0.0, "args",
                       op_args));
    event(w, json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:{s:i, s:i}}", "ph", "X", "cat", "cuda_runtime", "name",
                       "cudaLaunchKernel", "pid", CPU_PID, "tid", CPU_PID, "ts", ts, "dur", 0.0, "args", "External id",
                       c, "correlation", corr));
    if (!kargs) kargs = json_object();
    json_object_set_new(kargs, "External id", json_integer(c));
    json_object_set_new(kargs, "correlation", json_integer(corr));
    json_object_set_new(kargs, "device", json_integer(0));
    json_object_set_new(kargs, "stream", json_integer(stream + STREAM_BASE));
    event(w, json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:o}", "ph", "X", "cat", "kernel", "name", kernel, "pid", 0,
                       "tid", stream + STREAM_BASE, "ts", ts, "dur", dur, "args", kargs));
}

/* An attention block as one FlashAttention call, when its exact pairs are
 * those of a (bottom-right) causal or full sq x sk block (a zigzag step, a
 * contiguous diagonal); a packed document's block is not, and goes
 * without shapes. */
static json_t *attn_args(const config *c, const dag_task *t)
{
    uint64_t sq = t->dim[0], sk = t->dim[1];
    bool causal = t->flags & DAG_F_MASKED;
    uint64_t fwd = size_attn_fwd_flops(c, kineto_attn_pairs((int64_t)sq, (int64_t)sk, causal));
    if ((t->kind == TASK_ATTN_FWD ? fwd : size_attn_bwd_flops(fwd)) != t->flops) return NULL;
    uint64_t b = (uint64_t)c->batch, h = t->dim[2], hkv = (uint64_t)config_kv_heads(c), d = (uint64_t)c->model.head_dim;
    json_t *dims = json_array(), *conc = json_array();
    if (t->kind == TASK_ATTN_FWD) { /* q, k, v, dropout_p, softmax_scale, causal */
        json_array_append_new(dims, dims4(b, sq, h, d));
        json_array_append_new(dims, dims4(b, sk, hkv, d));
        json_array_append_new(dims, dims4(b, sk, hkv, d));
        for (int i = 0; i < 5; i++)
            json_array_append_new(conc, json_string(""));
    } else { /* dout, q, k, v, out, lse, dq, dk, dv, dropout_p, softmax_scale, causal */
        json_array_append_new(dims, dims4(b, sq, h, d));
        json_array_append_new(dims, dims4(b, sq, h, d));
        json_array_append_new(dims, dims4(b, sk, hkv, d));
        json_array_append_new(dims, dims4(b, sk, hkv, d));
        for (int i = 0; i < 11; i++)
            json_array_append_new(conc, json_string(""));
    }
    json_array_append_new(conc, json_string(causal ? "True" : "False"));
    return json_pack("{s:o, s:o}", "Input Dims", dims, "Concrete Inputs", conc);
}

/* The kernel name of a memory-bound task, as the library that runs it in
 * Megatron-Core + TransformerEngine names it (merge and acc: loong's own,
 * loong_*); the shipped kernel-name table (kineto_names.c) maps each back
 * to its kind. */
static const char *elementwise_kernel_name(const dag_task *t)
{
    bool bwd = t->phase == PHASE_BWD;
    switch (t->kind) {
    case TASK_MERGE: return "loong_merge_kernel";
    case TASK_NORM:
        return bwd ? "void transformer_engine::normalization::rmsnorm_bwd_tuned_kernel<bf16>"
                   : "void transformer_engine::normalization::rmsnorm_fwd_tuned_kernel<bf16>";
    case TASK_ROPE:
        return bwd ? "void transformer_engine::fused_rope_backward_kernel<bf16>"
                   : "void transformer_engine::fused_rope_forward_kernel<bf16>";
    case TASK_ADD:
        return "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>";
    case TASK_ACT:
        return bwd ? "void transformer_engine::dgated_act_kernel<silu, dsilu>"
                   : "void transformer_engine::gated_act_kernel<silu>";
    case TASK_EMBED:
        return bwd ? "void at::native::embedding_backward_feature_kernel<c10::BFloat16>"
                   : "void at::native::indexSelectLargeIndex<c10::BFloat16>";
    case TASK_LOSS: return bwd ? "cross_entropy_bwd_kernel" : "cross_entropy_fwd_kernel";
    case TASK_SOFTMAX:
        return bwd ? "void scaled_upper_triang_masked_softmax_warp_backward<bf16, bf16, float, 11>"
                   : "void scaled_upper_triang_masked_softmax_warp_forward<bf16, bf16, float, 11>";
    case TASK_DROPOUT:
        return bwd ? "void at::native::vectorized_elementwise_kernel<4, at::native::masked_scale_kernel<bool, "
                     "c10::BFloat16, float>>"
                   : "void at::native::fused_dropout_kernel_vec<c10::BFloat16, float, unsigned int, 1, 4, bool>";
    case TASK_OPTIM:
        return t->op == OP_ZERO_GRAD
                   ? "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"
                   : "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>>";
    default: return "loong_acc_kernel";
    }
}

/* aten::mm(A, B) of A m x k, B k x n with A's and B's strides: transposed
 * operands are views of a row-major matrix of the other orientation. */
static json_t *mm_args(uint64_t m, uint64_t n, uint64_t k, bool ta, bool tb)
{
    json_t *sa = ta ? dims2(1, m) : dims2(k, 1), *sb = tb ? dims2(1, k) : dims2(n, 1);
    return json_pack("{s:[o, o], s:[o, o]}", "Input Dims", dims2(m, k), dims2(k, n), "Input Strides", sa, sb);
}

/* A GEMM task (Y = X W^T, Y m x n, X m x k, as Megatron's linear layer
 * runs it): forward X W^T (tn); backward dX = dY W (nn, m x k over n),
 * then dW = dY^T X (nt, n x k over m), the task's time split as cb times
 * the two shapes. */
static void gemm(writer *w, const dag_task *t, double ts, double dur)
{
    const char *k = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas";
    uint64_t m = t->dim[0], n = t->dim[1], kk = t->dim[2];
    if (t->phase != PHASE_BWD) {
        launch(w, k, "aten::mm", mm_args(m, n, kk, false, true), t->stream, ts, dur, NULL);
        return;
    }
    double share = 0.5;
    if (w->cb && calib_has_gemm_shapes(w->cb)) {
        double a = dag_config(w->g)->act_bytes;
        double dx = calib_gemm_seconds(w->cb, GEMM_NN, (double)m, (double)kk, (double)n, a),
               dw = calib_gemm_seconds(w->cb, GEMM_NT, (double)n, (double)kk, (double)m, a);
        share = dx / (dx + dw);
    }
    launch(w, k, "aten::mm", mm_args(m, kk, n, false, false), t->stream, ts, dur * share, NULL);
    launch(w, k, "aten::mm", mm_args(n, kk, m, true, false), t->stream, ts + dur * share, dur * (1 - share), NULL);
}

static void compute(writer *w, const dag_task *t, double ts, double dur)
{
    const config *c = dag_config(w->g);
    switch (t->kind) {
    case TASK_GEMM: gemm(w, t, ts, dur); break;
    case TASK_ATTN_FWD:
        launch(w, "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits>(Flash_fwd_params)",
               "flash_attn::_flash_attn_forward", attn_args(c, t), t->stream, ts, dur, NULL);
        break;
    case TASK_ATTN_BWD:
        launch(w, "void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits>(Flash_bwd_params)",
               "flash_attn::_flash_attn_backward", attn_args(c, t), t->stream, ts, dur, NULL);
        break;
    default: launch(w, elementwise_kernel_name(t), NULL, NULL, t->stream, ts, dur, NULL);
    }
}

static const char *nccl_name(int kind)
{
    switch (kind) {
    case TASK_ALLREDUCE: return "ncclDevKernel_AllReduce_Sum_bf16_RING_LL";
    case TASK_ALLGATHER: return "ncclDevKernel_AllGather_RING_LL";
    case TASK_REDUCESCATTER: return "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL";
    default: return "ncclDevKernel_SendRecv"; /* all-to-all and p2p run as SendRecv */
    }
}

static const char *collective_name(int kind)
{
    switch (kind) {
    case TASK_ALLREDUCE: return "allreduce";
    case TASK_ALLGATHER: return "_allgather_base";
    case TASK_REDUCESCATTER: return "_reduce_scatter_base";
    case TASK_ALLTOALL: return "all_to_all";
    case TASK_SEND: return "send";
    default: return "recv";
    }
}

/* NCCL's kernel args as PyTorch >= 2.2 writes them: the size in elements
 * (bf16 when it divides, else bytes), the group. */
static json_t *nccl_args(const dag_task *t, double size, int n)
{
    bool half = fmod(size, 2) == 0;
    json_int_t elems = (json_int_t)(half ? size / 2 : size);
    json_int_t in = t->kind == TASK_ALLGATHER ? elems / (n ? n : 1) : elems;
    json_int_t out = t->kind == TASK_REDUCESCATTER ? elems / (n ? n : 1) : elems;
    return json_pack("{s:s, s:I, s:I, s:i, s:s, s:s}", "Collective name", collective_name(t->kind), "In msg nelems", in,
                     "Out msg nelems", out, "Group size", n, "dtype", half ? "BFloat16" : "Byte", "Process Group Name",
                     stream_name(t->stream));
}

/* A ring step's send and its grouped recv are one SendRecv kernel. */
static void comm(writer *w, const dag_task *t, const dag_task *pair, double ts, double dur)
{
    const dag *g = w->g;
    if (pair) {
        double end = fmax(ts + dur, trace_us(w->start[pair->id]) + trace_us(w->dur[pair->id]));
        ts = fmin(ts, trace_us(w->start[pair->id]));
        dur = end - ts;
        if (pair->kind == TASK_SEND) t = pair; /* the kernel is named for the send it carries */
    }
    int n = 2;
    double size;
    if (task_is_collective(t)) {
        dag_group(g, t->group, &n);
        size = nccl_size_of_task(t->kind, (double)t->bytes, n);
    } else {
        size = (double)dag_task_bytes_moved(g, t);
    }
    launch(w, nccl_name(t->kind), "record_param_comms", NULL, t->stream, ts, dur, nccl_args(t, size, n));
}

static int write_rank(writer *w, int rank, int world)
{
    const dag *g = w->g;
    double end = 0;
    for (uint32_t id = 0; id < dag_ntasks(g); id++)
        if (dag_task_get(g, id)->rank == rank) end = fmax(end, trace_us(w->start[id] + w->dur[id]));
    fprintf(w->f,
            "{\"schemaVersion\":1,\"traceName\":\"loong sim prediction\",\"distributedInfo\":{\"backend\":\"nccl\","
            "\"rank\":%d,\"world_size\":%d,\"nccl_version\":\"loong-sim\"},\"traceEvents\":[",
            rank, world);
    w->first = true;
    event(w, json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:f}", "ph", "X", "cat", "user_annotation", "name",
                       "ProfilerStep#1", "pid", CPU_PID, "tid", CPU_PID, "ts", 0.0, "dur", end + 1));
    for (int s = 0; s < STREAM_COUNT; s++) {
        uint32_t n;
        const uint32_t *ids = dag_stream_tasks(g, rank, s, &n);
        for (uint32_t i = 0; i < n; i++) {
            const dag_task *t = dag_task_get(g, ids[i]);
            double ts = trace_us(w->start[t->id]), dur = trace_us(w->dur[t->id]);
            const dag_task *next = i + 1 < n ? dag_task_get(g, ids[i + 1]) : NULL;
            if (task_is_compute(t)) {
                compute(w, t, ts, dur);
            } else if (next && (next->flags & DAG_F_GROUPED) && task_is_p2p(t) && task_is_p2p(next)) {
                comm(w, t, next, ts, dur);
                i++;
            } else {
                comm(w, t, NULL, ts, dur);
            }
        }
    }
    fprintf(w->f, "\n]}\n");
    return ferror(w->f) ? -1 : 0;
}

int kineto_write_rank(FILE *f, const dag *g, const calib *cb, int rank, const double *start_s, const double *dur_s)
{
    writer w = {f, g, cb, start_s, dur_s, true, 0};
    return write_rank(&w, rank, config_ranks(dag_config(g)));
}

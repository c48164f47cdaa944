/* kineto_names: which loong kind a GPU kernel's name is. See kineto.h and
 * docs/kineto.md ("The kernel-name table"). */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/infile.h"
#include "core/xalloc.h"
#include "kineto.h"
#include "model/nccl.h"

/* KIND_NCCL: the op comes from NCCL's name (kineto_nccl_name_parse). */
enum { KIND_NCCL = -2 };

/* The shipped rules, most specific first: attention before GEMM, since
 * FlashAttention-3's and cuDNN's attention kernels are CUTLASS kernels
 * whose names may hold "gemm". Sources of the names: FlashAttention-2
 * (csrc/flash_attn/src/flash_{fwd,bwd}_kernel.h; PyTorch's copy in
 * namespace pytorch_flash), FlashAttention-3 (hopper/flash_{fwd,bwd}_kernel
 * *.h: FlashAttnFwdSm90, FlashAttnBwdSm90), cuDNN's fused SDPA (kernel
 * names cudnn_generated_fort_native_sdpa_*_fprop / _bprop, which
 * TransformerEngine's fused attention runs), PyTorch's memory-efficient
 * attention (fmha_cutlassF / fmha_cutlassB), the elementwise kernels of
 * Megatron-Core + TransformerEngine (TE's rmsnorm_{fwd,bwd}_*_kernel,
 * fused_rope_{forward,backward}_kernel and {d,}gated_act_kernel; PyTorch's
 * CUDAFunctor_add, embedding's indexSelect and embedding_backward kernels and the
 * cross_entropy/log_softmax/nll_loss kernels; the materialised
 * attention's softmax, Megatron's fused scaled_{upper_triang_masked_,
 * masked_,}softmax_warp_{forward,backward} (megatron/fused_kernels and
 * TE's copy), and PyTorch's dropout, fused_dropout_kernel{,_vec} and its
 * backward's masked_scale_kernel (aten/src/ATen/native/cuda/Dropout.cu;
 * Megatron's fused bias_dropout_add is an add); TE's FP8 casts
 * (cast_transpose, cast_fp8, cast_mxfp8 and quantize kernels, and the amax
 * pass of current scaling); Apex's and TE's
 * multi_tensor_apply_kernel for the optimizer and the FillFunctor<float>
 * that zeroes the fp32 gradient buffer), a mixture of experts' kernels
 * (TE's transformer_engine/common/permutation/permutation.cu
 * moe_permute_kernel, moe_unpermute_kernel and moe_sort_chunks_by_map as
 * loong's permute and unpermute, kind add; TE's fused router
 * fused_topk_with_score_function_*_kernel and PyTorch's gatherTopK as the
 * router's top-k, kind softmax; grouped GEMMs are GEMMs), cuBLAS/CUTLASS GEMMs
 * (sm80/sm90 xmma and CUTLASS gemm kernels, cuBLAS 12.6's nvjet_*, gemv),
 * and NCCL (src/device: ncclDevKernel_* since 2.19, ncclKernel_* before). */
static const char default_rules[] = "attn_bwd  *flash_bwd*\n"
                                    "attn_bwd  *FlashAttnBwd*\n"
                                    "attn_bwd  *sdpa*bprop*\n"
                                    "attn_bwd  *fmha_cutlassB*\n"
                                    "attn_bwd  *fmha*_bwd*\n"
                                    "attn_fwd  *flash_fwd*\n"
                                    "attn_fwd  *FlashAttnFwd*\n"
                                    "attn_fwd  *sdpa*fprop*\n"
                                    "attn_fwd  *fmha_cutlassF*\n"
                                    "attn_fwd  *fmha*_fwd*\n"
                                    "nccl      ncclDevKernel_*\n"
                                    "nccl      ncclKernel_*\n"
                                    "nccl      ncclSymkDevKernel_*\n"
                                    "merge     loong_merge_kernel*\n"
                                    "acc       loong_acc_kernel*\n"
                                    "norm      *rmsnorm*\n"
                                    "norm      *RMSNorm*\n"
                                    "norm      *layernorm*\n"
                                    "norm      *layer_norm*\n"
                                    "norm      *LayerNorm*\n"
                                    "rope      *fused_rope*\n"
                                    "rope      *rotary*\n"
                                    "act       *gated_act*\n"
                                    "act       *swiglu*\n"
                                    "act       *silu*\n"
                                    "act       *gelu*\n"
                                    "add       *moe_permute*\n"
                                    "add       *moe_unpermute*\n"
                                    "add       *moe_sort_chunks*\n"
                                    "softmax   *fused_topk*\n"
                                    "softmax   *gatherTopK*\n"
                                    "add       *bias_dropout_add*\n"
                                    "add       *CUDAFunctor_add*\n"
                                    "softmax   *scaled_upper_triang_masked_softmax*\n"
                                    "softmax   *scaled_masked_softmax*\n"
                                    "softmax   *scaled_softmax*\n"
                                    "dropout   *fused_dropout*\n"
                                    "dropout   *masked_scale*\n"
                                    "quant     *cast_transpose*\n"
                                    "quant     *cast_fp8*\n"
                                    "quant     *cast_mxfp8*\n"
                                    "quant     *quantize*\n"
                                    "quant     *amax*\n"
                                    "embed     *embedding*\n"
                                    "embed     *indexSelect*\n"
                                    "loss      *cross_entropy*\n"
                                    "loss      *log_softmax*\n"
                                    "loss      *nll_loss*\n"
                                    "optim     *multi_tensor_apply*\n"
                                    "optim     *FillFunctor<float>*\n"
                                    "gemm      *gemm*\n"
                                    "gemm      *Gemm*\n"
                                    "gemm      nvjet_*\n"
                                    "gemm      *gemv*\n";

typedef struct rule {
    int kind;
    char *glob;
} rule;

struct kineto_names {
    rule *r;
    int n;
};

static int parse_kind(const char *s) { return !strcmp(s, "nccl") ? KIND_NCCL : kineto_kind_parse(s); }

int kineto_names_add(kineto_names *t, const char *text, const char *name, char err[LOONG_ERRLEN])
{
    char *copy = xstrdup(text, "a kernel-name table"), *cur = copy, *line;
    rule *add = NULL;
    int n = 0, lineno = 0, rc = 0;
    while (rc == 0 && (line = infile_next_line(&cur))) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char kind[32], glob[512], extra[2];
        int got = sscanf(line, "%31s %511s %1s", kind, glob, extra);
        if (got <= 0) continue;
        int k = got == 2 ? parse_kind(kind) : -1;
        if (got != 2 || k == -1) {
            snprintf(err, LOONG_ERRLEN,
                     "%.100s:%d: expected 'KIND GLOB' with KIND one of a loong kind (gemm, attn_fwd, ...), p2p, "
                     "nccl or other",
                     name, lineno);
            rc = -1;
            break;
        }
        add = xrealloc_array(add, (size_t)n + 1, sizeof *add, "a kernel-name table");
        add[n++] = (rule){k, xstrdup(glob, "a kernel-name rule")};
    }
    free(copy);
    if (rc < 0) {
        for (int i = 0; i < n; i++)
            free(add[i].glob);
        free(add);
        return -1;
    }
    /* the new rules go first: a user's file overrides the shipped ones */
    t->r = xrealloc_array(t->r, (size_t)(t->n + n) + 1, sizeof *t->r, "a kernel-name table");
    memmove(t->r + n, t->r, (size_t)t->n * sizeof *t->r);
    if (n) memcpy(t->r, add, (size_t)n * sizeof *add);
    t->n += n;
    free(add);
    return 0;
}

kineto_names *kineto_names_default(void)
{
    kineto_names *t = xcalloc(1, sizeof *t, "a kernel-name table");
    char err[LOONG_ERRLEN];
    if (kineto_names_add(t, default_rules, "the shipped kernel-name table", err) < 0) xalloc_die(0, err);
    return t;
}

void kineto_names_free(kineto_names *t)
{
    if (!t) return;
    for (int i = 0; i < t->n; i++)
        free(t->r[i].glob);
    free(t->r);
    free(t);
}

int kineto_names_classify(const kineto_names *t, const char *name)
{
    for (int i = 0; i < t->n; i++) {
        if (fnmatch(t->r[i].glob, name, 0) != 0) continue;
        if (t->r[i].kind != KIND_NCCL) return t->r[i].kind;
        kineto_nccl_name nn;
        return kineto_nccl_name_parse(name, &nn) ? nn.kind : KINETO_NCCL_OTHER;
    }
    return KINETO_OTHER;
}

/* ---- NCCL's kernel names ---- */

static int nccl_op_kind(const char *op)
{
    static const struct {
        const char *name;
        int kind;
    } ops[] = {
        {"AllReduce", TASK_ALLREDUCE}, {"AllGather", TASK_ALLGATHER},  {"ReduceScatter", TASK_REDUCESCATTER},
        {"AllToAll", TASK_ALLTOALL},   {"AlltoAll", TASK_ALLTOALL},    {"SendRecv", KINETO_P2P},
        {"Send", KINETO_P2P},          {"Recv", KINETO_P2P},           {"Broadcast", KINETO_NCCL_OTHER},
        {"Reduce", KINETO_NCCL_OTHER}, {"Generic", KINETO_NCCL_OTHER},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(op, ops[i].name)) return ops[i].kind;
    return -1;
}

/* NCCL's type names, as its kernels spell them: "_int8_t", "_bf16", ...
 * Longer names first, so that "_f16" is not read out of "_bf16". */
static void dtype_of(const char *name, char out[16])
{
    static const char *const types[] = {
        "__nv_bfloat16", "rawfp8e4m3", "fp8e4m3", "fp8e5m2", "uint64_t", "uint32_t", "uint8_t", "int64_t",
        "int32_t",       "int8_t",     "rawbf16", "double",  "float",    "half",     "bf16",    "f16",
        "f32",           "f64",        "u8",      "i8",      "u32",      "i32",      "u64",     "i64"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        size_t n = strlen(types[i]);
        for (const char *p = strchr(name, '_'); p; p = strchr(p + 1, '_'))
            if (!strncmp(p + 1, types[i], n) && (p[1 + n] == '_' || p[1 + n] == 0)) {
                snprintf(out, 16, "%s", types[i]);
                return;
            }
    }
}

bool kineto_nccl_name_parse(const char *name, kineto_nccl_name *out)
{
    static const char *const prefix[] = {"ncclDevKernel_", "ncclSymkDevKernel_", "ncclKernel_"};
    const char *p = NULL;
    for (int i = 0; i < 3 && !p; i++)
        if (!strncmp(name, prefix[i], strlen(prefix[i]))) p = name + strlen(prefix[i]);
    if (!p) return false;
    char buf[160];
    size_t len = strcspn(p, "(< ");
    if (len >= sizeof buf) len = sizeof buf - 1;
    memcpy(buf, p, len);
    buf[len] = 0;
    *out = (kineto_nccl_name){KINETO_NCCL_OTHER, -1, -1, ""};
    dtype_of(buf, out->dtype);
    char *save = NULL, *tok = strtok_r(buf, "_", &save);
    int kind = tok ? nccl_op_kind(tok) : -1;
    if (kind >= 0) out->kind = kind;
    bool nvls = false;
    while ((tok = strtok_r(NULL, "_", &save))) {
        if (!strcmp(tok, "RING"))
            out->algo = NCCL_RING;
        else if (!strcmp(tok, "TREE"))
            out->algo = nvls ? -1 : NCCL_TREE; /* NVLS_TREE: not modelled */
        else if (!strcmp(tok, "NVLS"))
            out->algo = NCCL_NVLS, nvls = true;
        else if (!strcmp(tok, "COLLNET") || !strcmp(tok, "PAT"))
            out->algo = -1;
        else if (!strcmp(tok, "LL"))
            out->proto = NCCL_LL;
        else if (!strcmp(tok, "LL128"))
            out->proto = NCCL_LL128;
        else if (!strcmp(tok, "SIMPLE"))
            out->proto = NCCL_SIMPLE;
    }
    return true;
}

/* ---- kinds ---- */

const char *kineto_kind_name(int kind)
{
    if (kind >= 0 && kind < TASK_KIND_COUNT) return task_kind_name(kind);
    return kind == KINETO_P2P ? "p2p" : kind == KINETO_NCCL_OTHER ? "nccl_other" : "other";
}

int kineto_kind_parse(const char *s)
{
    for (int k = 0; k < KINETO_KINDS; k++)
        if (!strcmp(s, kineto_kind_name(k))) return k;
    return -1;
}

/* knobs: the table of a configuration's knobs, their spellings, and their
 * command-line text both ways. See knobs.h. */
#include "knobs.h"
#include "knobs_internal.h"
#include "recompute.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

/* ---- the spellings of values ---- */

/* Each enumeration's values in enum order (knobs_internal.h's spelling). */
static const spelling placement_sp[] = {{"head-first", "hf"}, {"context-first", "cf"}};
static const spelling partition_sp[] = {
    {"contiguous", "ct"}, {"zigzag", "zz"}, {"doc-contiguous", "dct"}, {"doc-zigzag", "dzz"}, {"balanced", "bal"}};
static const spelling ring_sp[] = {{"single", "single"}, {"dual", "dual"}, {"double", "double"}, {"allgather", "ag"}};
static const spelling scope_sp[] = {{"attn-fwd", "attn-fwd"}, {"attn", "attn"}, {"step", "step"}};
static const spelling recompute_sp[] = {{"none", "none"}, {"selective", "sel"}, {"sc++", "sc++"}, {"full", "full"}};
static const spelling recompute_method_sp[] = {{"uniform", "u"}, {"block", "b"}};
static const spelling onoff_sp[] = {{"off", "off"}, {"on", "on"}};
static const spelling nccl_algo_sp[] = {{"auto", "auto"}, {"ring", "ring"}, {"tree", "tree"}, {"nvls", "nvls"}};
static const spelling nccl_proto_sp[] = {{"auto", "auto"}, {"simple", "simple"}, {"ll", "ll"}, {"ll128", "ll128"}};
static const spelling fusions_sp[] = {{"te", "te"}, {"none", "none"}};
static const spelling grad_reduce_sp[] = {{"fp32", "fp32"}, {"bf16", "bf16"}};
static const spelling cross_entropy_sp[] = {{"fused", "fused"}, {"eager", "eager"}};
static const spelling attention_sp[] = {{"flash", "flash"}, {"unfused", "unfused"}};
static const spelling precision_sp[] = {
    {"bf16", "bf16"}, {"fp8-delayed", "fp8-delayed"}, {"fp8-current", "fp8-current"}, {"mxfp8", "mxfp8"}};
static const spelling schedule_sp[] = {{"1f1b", "1f1b"}, {"gpipe", "gpipe"}, {"interleaved", "il"}};
static const spelling dispatcher_sp[] = {{"alltoall", "a2a"}, {"allgather", "ag"}};
static const spelling dtype_sp[] = {{"bf16", "bf16"}, {"fp32", "fp32"}}; /* act_bytes 2, 4 */
#define NSP(a) ((int)(sizeof(a) / sizeof(a[0])))

static int spelling_find(const spelling *sp, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, sp[i].name)) return i;
    return -1;
}

#define NAMES(fn, type)                                                                                                \
    const char *fn##_name(type v) { return fn##_sp[v].name; }                                                          \
    int fn##_parse(const char *s, type *out)                                                                           \
    {                                                                                                                  \
        int i = spelling_find(fn##_sp, NSP(fn##_sp), s);                                                               \
        if (i >= 0) *out = (type)i;                                                                                    \
        return i >= 0 ? 0 : -1;                                                                                        \
    }
NAMES(placement, placement_kind)
NAMES(partition, partition_kind)
NAMES(ring, ring_kind)
NAMES(scope, scope_kind)
NAMES(recompute, recompute_kind)
const char *schedule_name(schedule_kind v) { return schedule_sp[v].name; }
const char *placement_abbrev(placement_kind v) { return placement_sp[v].abbrev; }
const char *partition_abbrev(partition_kind v) { return partition_sp[v].abbrev; }
const char *ring_abbrev(ring_kind v) { return ring_sp[v].abbrev; }

/* ---- the table ---- */

#define KNOB_ENUM(field, sp) KT_ENUM, offsetof(config, field), sp, NSP(sp)

const knob_row knob_rows[KNOB_COUNT] = {
    [KNOB_MODEL] = {{"model", "model", "NAME|FILE", "a preset (Models below) or a `key = value` file [llama3-8b]",
                     false, KNOB_PHASE_FIRST},
                    KT_MODEL,
                    0,
                    NULL,
                    0},
    [KNOB_SEQ] = {{"seq", "seq", "N", "tokens per sample, K/M/G = 2^10/2^20/2^30  [128K]", false, KNOB_PHASE_FIRST},
                  KT_COUNT,
                  offsetof(config, seq),
                  NULL,
                  0},
    [KNOB_BATCH] = {{"batch", "batch", "N", "samples per micro-batch                     [1]", false, KNOB_PHASE_FIRST},
                    KT_INT,
                    offsetof(config, batch),
                    NULL,
                    0},
    [KNOB_TP] = {{"tp", "tp", "N",
                  "tensor-parallel ranks (Megatron's TP, innermost:\n"
                  "one node's GPUs); tp divides H and H_kv        [1]",
                  false, KNOB_PHASE_FIRST},
                 KT_INT,
                 offsetof(config, tp),
                 NULL,
                 0},
    [KNOB_SEQUENCE_PARALLEL] = {{"sequence_parallel", "sequence-parallel", "on|off",
                                 "tp > 1: Megatron's sequence parallelism (all-\n"
                                 "gather/reduce-scatter; off: all-reduces)     [on]",
                                 false, KNOB_PHASE_FIRST},
                                KT_BOOL,
                                offsetof(config, sequence_parallel),
                                onoff_sp,
                                NSP(onoff_sp)},
    [KNOB_TP_OVERLAP] = {{"tp_overlap", "tp-overlap", "on|off",
                          "tp > 1: TP all-gathers and reduce-scatters overlap\n"
                          "their GEMMs (TE's ring-exchange)           [off]",
                          false, KNOB_PHASE_FIRST},
                         KT_BOOL,
                         offsetof(config, tp_overlap),
                         onoff_sp,
                         NSP(onoff_sp)},
    [KNOB_MESH] = {{"mesh", "mesh", "PhxPs | P",
                    "head-parallel x sequence-parallel ranks, or a total\n"
                    "that the strategy splits                    [64]",
                    true, KNOB_PHASE_PRESET},
                   KT_MESH,
                   0,
                   NULL,
                   0},
    [KNOB_DP] = {{"dp", "dp", "N",
                  "data-parallel replicas of the mesh: the gradient\n"
                  "collectives (ZeRO) span dp x P ranks         [1]",
                  false, KNOB_PHASE_LAST},
                 KT_INT,
                 offsetof(config, dp),
                 NULL,
                 0},
    [KNOB_PP] = {{"pp", "pp", "N",
                  "pipeline stages (outside CP, inside DP): the\n"
                  "layers split evenly over them                [1]",
                  false, KNOB_PHASE_LAST},
                 KT_INT,
                 offsetof(config, pp),
                 NULL,
                 0},
    [KNOB_EP] = {{"ep", "ep", "N",
                  "mixture of experts: expert-parallel ranks holding\n"
                  "a block's experts: ep consecutive context ranks,\n"
                  "or P x a divisor of dp across replicas (Megatron's\n"
                  "EP; the experts' order under --expert-tp)      [1]",
                  false, KNOB_PHASE_LAST},
                 KT_INT,
                 offsetof(config, ep),
                 NULL,
                 0},
    [KNOB_EXPERT_TP] = {{"expert_tp", "expert-tp", "N",
                         "mixture of experts: the experts' own TP degree,\n"
                         "dividing tp (Megatron's expert tensor\n"
                         "parallelism; MoE parallel folding)         [tp]",
                         false, KNOB_PHASE_LAST},
                        KT_INT,
                        offsetof(config, etp),
                        NULL,
                        0},
    [KNOB_SHARED_EXPERT_OVERLAP] = {{"shared_expert_overlap", "shared-expert-overlap", "on|off",
                                     "mixture of experts: the shared experts run\n"
                                     "while the dispatch and combine are in flight\n"
                                     "(Megatron's shared expert overlap)       [off]",
                                     false, KNOB_PHASE_LAST},
                                    KT_BOOL,
                                    offsetof(config, shared_overlap),
                                    onoff_sp,
                                    NSP(onoff_sp)},
    [KNOB_DISPATCHER] = {{"dispatcher", "dispatcher", "alltoall|allgather",
                          "mixture of experts: the token dispatcher, all-\n"
                          "to-alls over EP, or an all-gather and reduce-\n"
                          "scatter over expert TP x EP         [alltoall]",
                          false, KNOB_PHASE_LAST},
                         KNOB_ENUM(dispatcher, dispatcher_sp)},
    [KNOB_ROUTING] = {{"routing", "routing", "balanced|zipf:S|FILE",
                       "mixture of experts: the tokens' draw over the\n"
                       "experts, even, Zipf's law of exponent S, or a\n"
                       "histogram: a weight per expert in FILE (or\n"
                       "hist:W,W,...)  [balanced]",
                       false, KNOB_PHASE_LAST},
                      KT_ROUTING,
                      offsetof(config, routing_zipf),
                      NULL,
                      0},
    [KNOB_CAPACITY] = {{"capacity_factor", "capacity-factor", "none|C",
                        "mixture of experts: an expert takes at most C x\n"
                        "its mean tokens, the rest dropped  [none: dropless]",
                        false, KNOB_PHASE_LAST},
                       KT_CAPACITY,
                       offsetof(config, capacity),
                       NULL,
                       0},
    [KNOB_MICRO_BATCHES] = {{"micro_batches", "micro-batches", "M",
                             "micro-batches of --batch samples per step and\n"
                             "pipeline (pp 1: gradient accumulation)       [1]",
                             false, KNOB_PHASE_LAST},
                            KT_INT,
                            offsetof(config, micro_batches),
                            NULL,
                            0},
    [KNOB_SCHEDULE] = {{"schedule", "schedule", "S",
                        "pipeline schedule: 1f1b | gpipe | interleaved\n"
                        "(Megatron's, --vpp chunks per stage)       [1f1b]",
                        false, KNOB_PHASE_LAST},
                       KNOB_ENUM(schedule, schedule_sp)},
    [KNOB_VPP] = {{"vpp", "vpp", "V",
                   "interleaved: model chunks per stage (Megatron's\n"
                   "virtual pipeline size)                        [1]",
                   false, KNOB_PHASE_LAST},
                  KT_INT,
                  offsetof(config, vpp),
                  NULL,
                  0},
    [KNOB_PP_FIRST_LAYERS] = {{"pp_first_layers", "pp-first-layers", "N",
                               "layers of the first stage, the rest even over\n"
                               "the others; with --vpp, 1/v of a stage's\n"
                               "layers in each chunk (Megatron's)   [even split]",
                               false, KNOB_PHASE_LAST},
                              KT_NONNEG,
                              offsetof(config, pp_first),
                              NULL,
                              0},
    [KNOB_PP_LAST_LAYERS] = {{"pp_last_layers", "pp-last-layers", "N",
                              "layers of the last stage (with the LM head) [even]", false, KNOB_PHASE_LAST},
                             KT_NONNEG,
                             offsetof(config, pp_last),
                             NULL,
                             0},
    [KNOB_PP_EMBED_SLOT] = {{"pp_embedding_slot", "pp-embedding-slot", "on|off",
                             "the embedding counts as a layer of the split:\n"
                             "stage 0's first chunk one layer short      [off]",
                             false, KNOB_PHASE_LAST},
                            KT_BOOL,
                            offsetof(config, pp_embed_slot),
                            onoff_sp,
                            NSP(onoff_sp)},
    [KNOB_PP_LOSS_SLOT] = {{"pp_loss_slot", "pp-loss-slot", "on|off",
                            "the LM head and loss count as a layer: the last\n"
                            "stage's last chunk one layer short         [off]",
                            false, KNOB_PHASE_LAST},
                           KT_BOOL,
                           offsetof(config, pp_loss_slot),
                           onoff_sp,
                           NSP(onoff_sp)},
    [KNOB_STRATEGY] = {{"strategy", "strategy", "NAME", "preset over the knobs below (Strategies) [loongtrain]", true,
                        KNOB_PHASE_PRESET},
                       KT_STRING,
                       offsetof(config, strategy),
                       NULL,
                       0},
    [KNOB_PLACEMENT] = {{"placement", "placement", "P",
                         "head-first | context-first, or the mesh's order\n"
                         "fastest first, e.g. tp-seq-head-pp-dp; Megatron's\n"
                         "default tp-cp-ep-dp-pp                [head-first]",
                         true, KNOB_PHASE_FIRST},
                        KT_ORDER,
                        0,
                        placement_sp,
                        NSP(placement_sp)},
    [KNOB_PARTITION] = {{"partition", "partition", "P",
                         "contiguous | zigzag | doc-contiguous | doc-zigzag |\n"
                         "balanced (packed documents)     [from strategy]",
                         true, KNOB_PHASE_OVERRIDE},
                        KNOB_ENUM(partition, partition_sp)},
    [KNOB_RING] = {{"ring", "ring", "MODE", "single | dual | double | allgather  [from strategy]", true,
                    KNOB_PHASE_OVERRIDE},
                   KNOB_ENUM(ring, ring_sp)},
    [KNOB_WINDOW] = {{"window", "window", "W", "double-ring window, P_s % W == 0 [strategy's rule]", true,
                      KNOB_PHASE_LAST},
                     KT_INT,
                     offsetof(config, window),
                     NULL,
                     0},
    [KNOB_KV_STRIDE] = {{"kv_stride", "kv-stride", "N",
                         "allgather: KV heads per all-gather, a divisor\n"
                         "of the rank's KV heads (bounds memory)        [all]",
                         false, KNOB_PHASE_LAST},
                        KT_INT,
                        offsetof(config, kv_stride),
                        NULL,
                        0},
    [KNOB_KV_REPLICATION] = {{"kv_replication", "kv-replication", "on|off",
                              "replicate KV heads when tp or P_h > H_kv [on]", true, KNOB_PHASE_FIRST},
                             KT_BOOL,
                             offsetof(config, kv_replication),
                             onoff_sp,
                             NSP(onoff_sp)},
    [KNOB_SCOPE] = {{"scope", "scope", "S", "attn-fwd | attn | step                      [step]", true,
                     KNOB_PHASE_OVERRIDE},
                    KNOB_ENUM(scope, scope_sp)},
    [KNOB_GPUS_PER_NODE] = {{"gpus_per_node", "gpus-per-node", "N",
                             "for the node/GPU of each rank                  [8]", false, KNOB_PHASE_FIRST},
                            KT_INT,
                            offsetof(config, gpus_per_node),
                            NULL,
                            0},
    [KNOB_RECOMPUTE] = {{"recompute", "recompute", "R",
                         "none | selective (Megatron's) | sc++ (LoongTrain's\n"
                         "Selective Checkpoint++) | full                 [none]",
                         false, KNOB_PHASE_OVERRIDE},
                        KNOB_ENUM(recompute, recompute_sp)},
    [KNOB_RECOMPUTE_MODULES] = {{"recompute_modules", "recompute-modules", "LIST",
                                 "selective: the modules re-run, core_attn (with its\n"
                                 "CP communication) and/or mlp          [core_attn]",
                                 false, KNOB_PHASE_OVERRIDE},
                                KT_MODULES,
                                offsetof(config, recompute_modules),
                                NULL,
                                0},
    [KNOB_RECOMPUTE_METHOD] = {{"recompute_method", "recompute-method", "M",
                                "full: uniform (groups of N blocks) | block (the\n"
                                "first N blocks of each chunk)             [uniform]",
                                false, KNOB_PHASE_OVERRIDE},
                               KNOB_ENUM(recompute_method, recompute_method_sp)},
    [KNOB_RECOMPUTE_NUM_LAYERS] = {{"recompute_num_layers", "recompute-num-layers", "N",
                                    "full: N of --recompute-method             [1]", false, KNOB_PHASE_OVERRIDE},
                                   KT_INT,
                                   offsetof(config, recompute_layers),
                                   NULL,
                                   0},
    [KNOB_ZERO] = {{"zero", "zero", "N", "ZeRO stage 0-3 of the gradient reduction       [1]", false, KNOB_PHASE_LAST},
                   KT_STAGE,
                   offsetof(config, zero),
                   NULL,
                   0},
    [KNOB_PREFETCH] = {{"prefetch", "prefetch", "N",
                        "ZeRO-3: blocks whose parameters are gathered\n"
                        "ahead of the one computing (FSDP's)          [1]",
                        false, KNOB_PHASE_LAST},
                       KT_NONNEG,
                       offsetof(config, prefetch),
                       NULL,
                       0},
    [KNOB_DTYPE] = {{"dtype", "dtype", "T", "bf16 | fp32 activations                     [bf16]", false,
                     KNOB_PHASE_LAST},
                    KT_DTYPE,
                    0,
                    dtype_sp,
                    NSP(dtype_sp)},
    [KNOB_FUSIONS] = {{"fusions", "fusions", "te|none",
                       "elementwise kernel fusion: Megatron-Core with TE's\n"
                       "fused kernels, or none (unfused PyTorch)      [te]",
                       false, KNOB_PHASE_LAST},
                      KNOB_ENUM(fusions, fusions_sp)},
    [KNOB_GRAD_REDUCE] = {{"grad_reduce", "grad-reduce", "fp32|bf16",
                           "dtype of the gradient collectives: fp32\n"
                           "(Megatron's, NeMo's, torchtitan's) or bf16  [fp32]",
                           false, KNOB_PHASE_LAST},
                          KNOB_ENUM(grad_reduce, grad_reduce_sp)},
    [KNOB_CROSS_ENTROPY] = {{"cross_entropy", "cross-entropy", "fused|eager",
                             "the loss: fused (Megatron's, TE's, compiled)\n"
                             "or eager F.cross_entropy on fp32 logits  [fused]",
                             false, KNOB_PHASE_LAST},
                            KNOB_ENUM(cross_entropy, cross_entropy_sp)},
    [KNOB_ATTENTION] = {{"attention", "attention", "flash|unfused",
                         "attention kernel: FlashAttention, or unfused\n"
                         "(materialised s x s softmax; needs seq 1)   [flash]",
                         false, KNOB_PHASE_LAST},
                        KNOB_ENUM(attention, attention_sp)},
    [KNOB_ATTENTION_DROPOUT] = {{"attention_dropout", "attention-dropout", "P",
                                 "unfused: dropout on the attention scores [0]", false, KNOB_PHASE_LAST},
                                KT_PROB,
                                offsetof(config, attention_dropout),
                                NULL,
                                0},
    [KNOB_HIDDEN_DROPOUT] = {{"hidden_dropout", "hidden-dropout", "P", "dropout in each residual add (Megatron's) [0]",
                              false, KNOB_PHASE_LAST},
                             KT_PROB,
                             offsetof(config, hidden_dropout),
                             NULL,
                             0},
    [KNOB_PRECISION] = {{"precision", "precision", "P",
                         "block GEMMs: bf16 | fp8-delayed | fp8-current |\n"
                         "mxfp8 (Transformer Engine's recipes)         [bf16]",
                         false, KNOB_PHASE_LAST},
                        KNOB_ENUM(precision, precision_sp)},
    [KNOB_DOCS] = {{"docs", "docs", "L,L,...",
                    "document lengths packed into each sample (K/M/G), padded\n"
                    "to --seq; or --docs-file FILE, --doc-dist FILE --seed N  [one]",
                    false, KNOB_PHASE_PRESET},
                   KT_DOCS,
                   0,
                   NULL,
                   0},
    [KNOB_NCCL_ALGO] = {{"nccl_algo", "nccl-algo", "A",
                         "ring | tree | nvls: force NCCL's algorithm where it\n"
                         "runs, as NCCL_ALGO does                        [auto]",
                         false, KNOB_PHASE_LAST},
                        KNOB_ENUM(nccl_algo, nccl_algo_sp)},
    [KNOB_NCCL_PROTO] = {{"nccl_proto", "nccl-proto", "P",
                          "simple | ll | ll128: force NCCL's protocol, as\n"
                          "NCCL_PROTO does                                [auto]",
                          false, KNOB_PHASE_LAST},
                         KNOB_ENUM(nccl_proto, nccl_proto_sp)},
};

const config_knob_info *config_knob_get(config_knob k) { return &knob_rows[k].info; }

static void knob_format(const config *c, const knob_row *r, char *buf, size_t len)
{
    switch (r->type) {
    case KT_MODEL: snprintf(buf, len, "%s", c->model.name); break;
    case KT_COUNT: snprintf(buf, len, "%llu", (unsigned long long)c->seq); break;
    case KT_INT:
    case KT_NONNEG:
    case KT_STAGE: snprintf(buf, len, "%d", knob_int_value(c, r)); break;
    case KT_MESH: snprintf(buf, len, "%dx%d", c->p_head, c->p_seq); break;
    case KT_ORDER: config_placement_text(c, buf, len); break;
    case KT_STRING: snprintf(buf, len, "%s", (const char *)c + r->off); break;
    case KT_ENUM: snprintf(buf, len, "%s", r->names[knob_int_value(c, r)].name); break;
    case KT_BOOL: snprintf(buf, len, "%s", r->names[*(const bool *)((const char *)c + r->off)].name); break;
    case KT_DTYPE: snprintf(buf, len, "%s", r->names[knob_dtype_index(c)].name); break;
    case KT_DOCS: break;
    case KT_MODULES: recompute_modules_text(knob_int_value(c, r), buf, len); break;
    case KT_PROB: snprintf(buf, len, "%.17g", knob_prob_value(c, r)); break;
    case KT_ROUTING: config_routing_text(c, buf, len); break;
    case KT_CAPACITY: config_capacity_text(c, buf, len); break;
    }
}

/* Knobs that say nothing at their default (one document; every KV head in
 * one gather) are left out of the JSON and the command lines, so configs
 * that do not use them read and hash as before they existed. */
bool knob_unset(const config *c, config_knob k)
{
    return (k == KNOB_DOCS && !c->docs) || (k == KNOB_KV_STRIDE && c->kv_stride == 0) ||
           (k == KNOB_NCCL_ALGO && c->nccl_algo == COLL_ALGO_AUTO) ||
           (k == KNOB_NCCL_PROTO && c->nccl_proto == COLL_PROTO_AUTO) || (k == KNOB_DP && c->dp == 1) ||
           (k == KNOB_TP && c->tp == 1) || (k == KNOB_SEQUENCE_PARALLEL && c->tp == 1) ||
           (k == KNOB_TP_OVERLAP && !c->tp_overlap) || (k == KNOB_PREFETCH && c->prefetch == 1) ||
           (k == KNOB_PP && c->pp == 1) || (k == KNOB_EP && c->ep == 1) ||
           (k == KNOB_EXPERT_TP && (c->etp == 0 || c->etp == c->tp)) ||
           (k == KNOB_SHARED_EXPERT_OVERLAP && !c->shared_overlap) ||
           (k == KNOB_DISPATCHER && c->dispatcher == DISPATCH_ALLTOALL) ||
           (k == KNOB_ROUTING && !config_routing_skewed(c)) || (k == KNOB_CAPACITY && c->capacity == 0) ||
           (k == KNOB_MICRO_BATCHES && c->micro_batches == 1) ||
           (k == KNOB_SCHEDULE && c->pp == 1 && c->schedule == SCHED_1F1B) || (k == KNOB_VPP && c->vpp == 1) ||
           (k == KNOB_PP_FIRST_LAYERS && c->pp_first == 0) || (k == KNOB_PP_LAST_LAYERS && c->pp_last == 0) ||
           (k == KNOB_PP_EMBED_SLOT && !c->pp_embed_slot) || (k == KNOB_PP_LOSS_SLOT && !c->pp_loss_slot) ||
           (k == KNOB_RECOMPUTE_MODULES && c->recompute_modules == RECOMPUTE_MOD_CORE_ATTN) ||
           (k == KNOB_RECOMPUTE_METHOD && c->recompute_method == RECOMPUTE_UNIFORM) ||
           (k == KNOB_RECOMPUTE_NUM_LAYERS && c->recompute_layers == 1) ||
           (k == KNOB_FUSIONS && c->fusions == FUSIONS_TE) ||
           (k == KNOB_GRAD_REDUCE && c->grad_reduce == GRAD_REDUCE_FP32) ||
           (k == KNOB_CROSS_ENTROPY && c->cross_entropy == CE_FUSED) ||
           (k == KNOB_ATTENTION && c->attention == ATTN_FLASH) ||
           (k == KNOB_ATTENTION_DROPOUT && c->attention_dropout == 0) ||
           (k == KNOB_HIDDEN_DROPOUT && c->hidden_dropout == 0) ||
           (k == KNOB_PRECISION && c->precision == PRECISION_BF16);
}

/* The knobs knob_unset() may leave out, whose default is all-zero but dp's,
 * tp's, pp's, micro_batches', vpp's, prefetch's and recompute_num_layers'
 * (1), sequence_parallel's (on) and recompute_modules' (core_attn), set by
 * config_from_json. */
bool knob_optional(config_knob k)
{
    return k == KNOB_DOCS || k == KNOB_KV_STRIDE || k == KNOB_NCCL_ALGO || k == KNOB_NCCL_PROTO || k == KNOB_DP ||
           k == KNOB_TP || k == KNOB_SEQUENCE_PARALLEL || k == KNOB_TP_OVERLAP || k == KNOB_PREFETCH || k == KNOB_PP ||
           k == KNOB_EP || k == KNOB_EXPERT_TP || k == KNOB_SHARED_EXPERT_OVERLAP || k == KNOB_DISPATCHER ||
           k == KNOB_ROUTING || k == KNOB_CAPACITY || k == KNOB_MICRO_BATCHES || k == KNOB_SCHEDULE || k == KNOB_VPP ||
           k == KNOB_PP_FIRST_LAYERS || k == KNOB_PP_LAST_LAYERS || k == KNOB_PP_EMBED_SLOT || k == KNOB_PP_LOSS_SLOT ||
           k == KNOB_RECOMPUTE_MODULES || k == KNOB_RECOMPUTE_METHOD || k == KNOB_RECOMPUTE_NUM_LAYERS ||
           k == KNOB_FUSIONS || k == KNOB_GRAD_REDUCE || k == KNOB_CROSS_ENTROPY || k == KNOB_ATTENTION ||
           k == KNOB_ATTENTION_DROPOUT || k == KNOB_HIDDEN_DROPOUT || k == KNOB_PRECISION;
}

char *config_knob_text(const config *c, config_knob k)
{
    if (knob_unset(c, k)) return NULL;
    if (knob_rows[k].type == KT_DOCS) return docs_format(c->docs);
    if (knob_rows[k].type == KT_ROUTING) return config_routing_spec(c); /* a histogram's every weight */
    char buf[256];
    knob_format(c, &knob_rows[k], buf, sizeof buf);
    return xstrdup(buf, "a knob's value");
}

/* "--opt 'x' is not one of: a, b, c" */
static int not_one_of(const knob_row *r, const char *text, char err[LOONG_ERRLEN])
{
    char list[128] = "";
    for (int i = 0; i < r->nnames; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", r->names[i].name);
    snprintf(err, LOONG_ERRLEN, "--%s '%.60s' is not one of: %s", r->info.option, text, list);
    return -1;
}

static int parse_mesh(config *c, const char *text, char err[LOONG_ERRLEN])
{
    const char *x = strchr(text, 'x');
    char a[32];
    size_t n = x ? (size_t)(x - text) : 0;
    if (!x || n == 0 || n >= sizeof a) {
        snprintf(err, LOONG_ERRLEN, "--mesh '%.60s' is not PhxPs (e.g. 4x16)", text);
        return -1;
    }
    memcpy(a, text, n);
    a[n] = '\0';
    if (units_parse_int(a, "--mesh P_h", &c->p_head, err) < 0 ||
        units_parse_int(x + 1, "--mesh P_s", &c->p_seq, err) < 0)
        return -1;
    if ((long long)c->p_head * c->p_seq > CONFIG_MAX_RANKS) {
        snprintf(err, LOONG_ERRLEN, "--mesh %.60s has more than %d ranks: use a smaller mesh", text, CONFIG_MAX_RANKS);
        return -1;
    }
    return 0;
}

/* A placement name, or an order of the mesh's dimensions. */
static int parse_order(config *c, const knob_row *r, const char *text, char err[LOONG_ERRLEN])
{
    int i = spelling_find(r->names, r->nnames, text);
    if (i >= 0) {
        config_set_placement(c, (placement_kind)i);
        return 0;
    }
    if (!strchr(text, '-') && !strchr(text, ',')) {
        snprintf(err, LOONG_ERRLEN,
                 "--placement '%.60s' is neither head-first, context-first nor an order of tp, head, seq, pp, dp "
                 "(fastest first, e.g. tp-seq-head-pp-dp)",
                 text);
        return -1;
    }
    mesh m = config_gpu_mesh(c);
    char why[LOONG_ERRLEN];
    if (mesh_set_order(&m, text, why) < 0) {
        snprintf(err, LOONG_ERRLEN, "--placement: %.*s", LOONG_ERRLEN - 16, why);
        return -1;
    }
    memcpy(c->order, m.order, sizeof c->order);
    return 0;
}

/* A dropout probability: a number in [0, 1) (Megatron's range: p = 1
 * would drop everything). */
static int parse_prob(const char *text, const char *what, double *out, char err[LOONG_ERRLEN])
{
    char *end;
    double p = strtod(text, &end);
    if (end == text || *end || !(p >= 0 && p < 1)) {
        snprintf(err, LOONG_ERRLEN, "%s '%.40s' is not a probability in [0, 1) (e.g. 0.1)", what, text);
        return -1;
    }
    *out = p;
    return 0;
}

int config_knob_parse(config *c, config_knob k, const char *text, char err[LOONG_ERRLEN])
{
    const knob_row *r = &knob_rows[k];
    char what[40];
    snprintf(what, sizeof what, "--%s", r->info.option);
    int i;
    switch (r->type) {
    case KT_MODEL: return model_resolve(text, &c->model, err);
    case KT_COUNT: return units_parse_count(text, what, &c->seq, err);
    case KT_INT: return units_parse_int(text, what, knob_int(c, r), err);
    case KT_NONNEG:
        if (!strcmp(text, "0")) return *knob_int(c, r) = 0;
        return units_parse_int(text, what, knob_int(c, r), err);
    case KT_STAGE:
        if (strlen(text) != 1 || text[0] < '0' || text[0] > '3') {
            snprintf(err, LOONG_ERRLEN, "--zero '%.60s' is not a ZeRO stage 0, 1, 2 or 3", text);
            return -1;
        }
        *knob_int(c, r) = text[0] - '0';
        return 0;
    case KT_MESH: return parse_mesh(c, text, err);
    case KT_ORDER: return parse_order(c, r, text, err);
    case KT_DOCS: return (c->docs = docs_parse_list(text, c->seq, "--docs", err)) ? 0 : -1;
    case KT_MODULES: return recompute_modules_parse(text, knob_int(c, r), err);
    case KT_PROB: return parse_prob(text, what, knob_prob(c, r), err);
    case KT_ROUTING: return config_routing_parse(c, text, err);
    case KT_CAPACITY: return config_capacity_parse(c, text, err);
    case KT_STRING: snprintf((char *)c + r->off, sizeof c->strategy, "%s", text); return 0;
    case KT_ENUM:
    case KT_BOOL:
    case KT_DTYPE:
        i = spelling_find(r->names, r->nnames, text);
        if (i < 0) return not_one_of(r, text, err);
        if (r->type == KT_ENUM) *knob_int(c, r) = i;
        if (r->type == KT_BOOL) *(bool *)((char *)c + r->off) = i == 1;
        if (r->type == KT_DTYPE) c->act_bytes = i ? 4 : 2;
        return 0;
    }
    return 0;
}

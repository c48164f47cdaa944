/*
 * elementwise: the step's memory-bound kernels beside the GEMMs and
 * attention, as Megatron-Core with TransformerEngine runs them — what each
 * task processes and the HBM bytes it moves. The DAG builder places the
 * tasks (build.c), the calibration table times them (calib.h: bytes over a
 * bandwidth plus a launch floor), the analytical model sums the same
 * counts (analytic.c).
 *
 * Per block (T tokens of the rank; rows T/tp under sequence parallelism,
 * where Megatron runs norms and residual adds on the sequence shard):
 *   forward:  norm_attn (T', h), rope (T, (hq + hkv) d / tp), add_attn
 *             (T', h), norm_mlp (T', h), act (T, ffn / tp), add_mlp (T', h);
 *   backward: the same kernels' backwards, in reverse.
 * Around the blocks: embed (T, h) and norm_final (T', h) forward and
 * backward, loss (T, ceil(V / tp)) forward and backward; once per step,
 * zero_grad over the stage's local gradients (ZeRO >= 2: the rank's shard,
 * 1 / (cp x dp) of them) and optim_step over the rank's shard of the
 * parameters (ZeRO >= 1).
 *
 * Bytes per element, with a = the activation's bytes (2 for bf16), from
 * the kernels' reads and writes:
 *   norm     fwd 2a (x in, y out), bwd 3a (x, dy in, dx out): TE's
 *            rmsnorm_fwd/bwd kernels (transformer_engine/common/
 *            normalization); the per-row statistics and the weight are
 *            negligible beside them.
 *   rope     2a either way (read, write Q and K in place): TE's fused_rope.
 *   add      3a: forward, Megatron's bias-dropout-add (no bias, no
 *            dropout: residual + branch -> out); backward, autograd's sum
 *            of the residual's two gradients. With --hidden-dropout
 *            above 0 the forward also writes the dropout's bool mask (1
 *            byte: the fused bias_dropout_add of megatron/core/fusions/
 *            fused_bias_dropout.py) and the backward also runs the
 *            dropout's backward, dx = dy x mask / (1 - p): 2a + 1.
 *   softmax  --attention unfused (unfused.h), per score: Megatron's fused
 *            scaled_upper_triang_masked_softmax (or scaled_masked_softmax)
 *            kernels (megatron/fused_kernels, used by megatron/core/
 *            fusions/fused_softmax.py): fwd 2a (scores in, probabilities
 *            out), bwd 3a (output gradient and probabilities in, input
 *            gradient out).
 *   quant    --precision fp8-delayed, fp8-current, mxfp8: the casts to FP8
 *            that Transformer Engine does not fuse into the kernel before
 *            them (its norm and SwiGLU kernels write FP8 themselves:
 *            LayerNormLinear, LayerNormMLP): forward the attention output
 *            (the output projection's input, a Linear's cast_transpose);
 *            backward the gradients entering the MLP's down and the output
 *            projection (T', hidden each) and attention's input gradient
 *            entering QKV; once per step the stage's block weights (TE
 *            caches them over the micro-batches: is_first_microbatch).
 *            Per element: read the input (a; a weight's bf16 copy: 2) and
 *            write the FP8 data and its transpose (2: the rowwise and
 *            columnwise copies a GEMM and its wgrad read); MXFP8 adds an
 *            E8M0 scale per 32 elements of each copy (1/16); current
 *            scaling reads the input once more first for its amax
 *            (transformer_engine/pytorch/tensor/float8_tensor.py,
 *            Float8CurrentScalingQuantizer: amax, then the cast).
 *   dropout  --attention unfused with --attention-dropout above 0, per
 *            score: torch's native_dropout, fwd 2a + 1 (in, out and the
 *            bool mask), bwd 2a + 1 (gradient and mask in, gradient out).
 *   act      per output element of SwiGLU: fwd 3a (gate, up in, out),
 *            bwd 5a (dy, gate, up in, dgate, dup out): TE's swiglu/dswiglu.
 *   embed    fwd 2a (a row gathered per token); bwd: the dense gradient of
 *            the vocab shard zeroed (2 per element of (V/tp, h)), the
 *            tokens' rows scattered into it (2a per (T, h) element), then
 *            added into the fp32 main grad (read 2 + 4, write 4:
 *            Megatron-Core's DDP backward hook main_grad.add_(grad)).
 *   loss     per logit, Megatron-Core's vocab_parallel_cross_entropy
 *            (megatron/core/tensor_parallel/cross_entropy.py), unfused:
 *            fwd .float() (read 2, write 4), max (4), in-place subtract
 *            (4 + 4), exp (4 + 4), sum (4), div_ into the softmax (4 + 4)
 *            = 38 bytes; bwd the in-place mul_ by the output gradient
 *            (4 + 4) and the cast back to bf16 for the LM head (4 + 2) = 14.
 *   zero_grad  4 per local parameter (the fp32 grad buffer memset:
 *            zero_grad_buffer at the start of train_step, megatron/training/
 *            training.py).
 *   optim_step 38 per shard parameter (megatron/core/optimizer/
 *            optimizer.py, MixedPrecisionOptimizer.step): the gradient
 *            norm reads the fp32 grad (4); Adam reads grad, fp32 param,
 *            exp_avg, exp_avg_sq and writes the last three (16 + 12);
 *            the updated fp32 params are copied to the bf16 model params
 *            (4 + 2). Clipping rescales the grads only when their norm
 *            exceeds the threshold, which is not modelled.
 *
 * Layer: core (config, model and pipeline only).
 */
#ifndef LOONG_ELEMENTWISE_H
#define LOONG_ELEMENTWISE_H

#include "dag.h"

/* The task kind of a memory-bound op (OP_NORM_ATTN .. OP_QUANT_W, OP_NORM_LATENT). */
task_kind elementwise_kind(task_op op);

/* The (rows, cols) a task of op processes on a rank of c; for zero_grad
 * and optim_step rows is the parameter count and cols 1 (stage: the
 * rank's pipeline stage, which decides its parameters); for softmax and
 * the attention dropout the rank's query rows of every head and the keys
 * of the whole sequence (unfused runs at P_s = 1). */
void elementwise_shape(const config *c, task_op op, int stage, uint64_t *rows, uint64_t *cols);

/* HBM bytes of a task of op in phase ph (PHASE_RECOMPUTE as forward)
 * processing `elems` elements (rows x cols of elementwise_shape). */
uint64_t elementwise_hbm_bytes(const config *c, task_op op, task_phase ph, uint64_t elems);

/* Memory-bound ops of one block's forward, in the order they run, and
 * their count; the backward runs the same in reverse. */
int elementwise_block_ops(const task_op **ops);

/* Whether a recompute pass of `parts` (recompute.h's RC_*) re-runs the
 * block's kernel op: norm_attn and rope with the QKV projection, add_attn
 * with the output projection, norm_mlp and act with the MLP (TE's
 * LayerNormMLP holds the norm), add_mlp only with a re-run of the whole
 * layer (its output is the next block's kept input). The builder and the
 * analytical model both ask. */
bool elementwise_reruns(task_op op, unsigned parts);

#endif

/*
 * fusion: which of the step's memory-bound kernels fuse, by --fusions —
 * the one table of how many kernels an elementwise task (elementwise.h)
 * launches and the HBM bytes each moves. The calibration table times
 * each kernel (a launch floor plus its bytes over the bandwidth it
 * reaches, calib.h); the simulator and the analytical model both ask
 * here, through calib_elementwise_seconds().
 *
 * te (default): Megatron-Core with Transformer Engine, one kernel per
 * task with elementwise_hbm_bytes()' bytes: TE's rmsnorm, fused_rope and
 * swiglu/dswiglu kernels.
 *
 * none: the unfused PyTorch path (Megatron-Core's local layer spec and
 * its fusion flags off). Per element of the task's (rows, cols), a = the
 * activation's bytes:
 *   norm  8 kernels, fwd 2a + 36 bytes: PyTorch's rms_norm
 *         (aten/src/ATen/native/layer_norm.cpp, rms_norm_symint, the
 *         module Megatron-Core's WrappedTorchNorm builds): to(fp32)
 *         a + 4, pow 8, mean 4, add_ and rsqrt on one value per row (0),
 *         mul by it 8, mul by the weight 8, type_as 4 + a. Backward:
 *         autograd's mirror, counted as the same kernels and bytes (a
 *         lower bound: the weight gradient's reduction is left out).
 *   rope  5 kernels on Q and 5 on K (Megatron applies it to each,
 *         megatron/core/transformer/attention.py), 10a in all, either
 *         way: --no-rope-fusion's _apply_rotary_pos_emb_bshd
 *         (megatron/core/models/common/embeddings/rope_utils.py),
 *         t * cos + _rotate_half(t) * sin: neg of half the columns a,
 *         cat 2a, mul by cos 2a, mul by sin 2a, add 3a; the backward is
 *         autograd's mirror of the same five.
 *   act   --no-bias-swiglu-fusion's glu (megatron/core/transformer/
 *         mlp.py: silu(chunk 0) * chunk 1): fwd silu 2a and mul 3a (2
 *         kernels, 5a); bwd the mul's two gradients 3a each, silu's
 *         backward 3a, and chunk's backward, the cat of both halves, 4a
 *         (4 kernels, 13a).
 *   softmax  --no-masked-softmax-fusion's FusedScaleMaskSoftmax.
 *         forward_torch_softmax (megatron/core/fusions/fused_softmax.py,
 *         softmax in the input's precision): the scale's mul 2a,
 *         masked_fill_ 2a + 1 (the bool mask read), softmax 2a (3
 *         kernels); backward softmax's 3a, masked_fill's 2a + 1 and the
 *         scale's 2a.
 *   add   with --hidden-dropout above 0: the dropout 2a + 1 (in, out, the
 *         bool mask) then the add 3a (2 kernels; te fuses them into one
 *         of 3a + 1, Megatron's bias_dropout_add_fused_train); backward,
 *         either way, the sum 3a and the dropout's backward 2a + 1.
 * The other kinds launch the same kernels either way: the residual add
 * without dropout is bias-dropout-add with no bias (--no-bias-dropout-
 * fusion's unfused path adds residual + x in one kernel; dropout at p = 0
 * launches none), the attention dropout is nn.Dropout's one kernel, and
 * the loss is already Megatron's unfused
 * vocab_parallel_cross_entropy (Megatron's default; --cross-entropy-
 * loss-fusion is off). Gradient accumulation fusion is not in this table
 * (the wgrad GEMM's fp32 accumulate; see docs/sim.md).
 *
 * Layer: core (config, model and elementwise only).
 */
#ifndef LOONG_FUSION_H
#define LOONG_FUSION_H

#include "dag.h"

#define FUSION_MAX_KERNELS 10 /* none's rope: 5 on Q, 5 on K */

/* The kernels a task of op in phase ph (PHASE_RECOMPUTE as forward)
 * launches on a rank of c when it processes `elems` elements (rows x
 * cols of elementwise_shape): their count, and each one's HBM bytes in
 * bytes[]. The counts add up to calib_task_bytes()' total. */
int fusion_kernels(const config *c, task_op op, task_phase ph, uint64_t elems, uint64_t bytes[FUSION_MAX_KERNELS]);

#endif

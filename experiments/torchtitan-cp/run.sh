#!/usr/bin/env bash
# torchtitan's published FSDP x CP runs of Llama 3.1 8B on H100 against
# loong's prediction (github.com/pytorch/torchtitan
# benchmarks/llama3_h100_202412_torchtitan.md at 31a17bf, "Table 2 FSDP +
# CP + torch.compile + Float8. Llama 3.1 8B model. 8 GPUs. Local batch size
# 1. Full activation checkpointing."; torch 1963fc8, torchao eab345c,
# torchtitan 9dec370, December 2024):
#
#   FSDP 8, CP 1,  32768 tokens: 3890 TPS/GPU, 83.9 GiB
#   FSDP 4, CP 2,  65536 tokens: 2540 TPS/GPU, 84.2 GiB
#   FSDP 2, CP 4, 131072 tokens: 1071 TPS/GPU, 84.0 GiB
#   FSDP 1, CP 8, 262144 tokens:  548 TPS/GPU, 84.5 GiB
#
# Their setup: one Grand Teton host of 8 H100 SXM with 96 GB HBM2e at 2.4
# TB/s, NVLink, "the default 500W power limit"; one sample per GPU group
# (local batch size 1: 8 x 32K = 262144 tokens per step in every row);
# TPS/GPU read at iteration 90, memory as torchtitan logs it (torch's
# max_reserved, the maximum over the GPUs). In loong:
#   - FSDP over the shard mesh, which torchtitan builds from dp_shard x cp
#     (parallelisms/parallel_dims.py): --zero 3 --dp FSDP, sharded over
#     dp x CP ranks as loong's ZeRO groups are; FSDP2's fp32 reduce
#     (mixed_precision_reduce "float32", config_manager.py at 9dec370) and
#     bf16 parameters in compute (mixed_precision_param "bfloat16");
#   - CP: PyTorch's context_parallel with the rotate method torchtitan
#     defaults to ("allgather", experimental.context_parallel_rotate_method)
#     and its load-balanced (head-tail) shards: --strategy allgather
#     (its zigzag partition);
#   - Float8: torchao's dynamic (per-tensor, current) scaling on the
#     nn.Linear layers: --precision fp8-current; attention stays bf16;
#   - full activation checkpointing: --recompute full;
#   - torch.compile: fused elementwise kernels, --fusions te (assumed the
#     closest of loong's two settings), of the blocks only: the loss ran
#     eager (train.py at 9dec370: loss_fn is F.cross_entropy(pred.float(),
#     labels), its torch.compile commented out, "compiling loss function
#     causes CUDA errors"), --cross-entropy eager.
# The attention kernel: torchtitan runs PyTorch's SDPA, whose flash backend
# is FlashAttention-2 (aten/src/ATen/native/transformers/cuda/flash_attn),
# where topologies/h100.calib's attention is FlashAttention-3's. The
# derived table takes FA2's own H100 figures from the same source as FA3's
# there: the FlashAttention-3 paper (Shah et al. 2024, arXiv:2407.08608),
# "Attention forward/backward speed, head dim 128 (H100 80GB SXM5)",
# non-causal, FlashAttention-2 bars: forward 309 350 362 368 370 370 and
# backward 214 260 291 310 318 322 TFLOP/s at 512 1K 2K 4K 8K 16K tokens,
# divided by 989 (the figures topologies/a100.calib already quotes for the
# curve's shape); FA2's sm80 kernels' tiles, which it runs on sm90 too
# (csrc/flash_attn/src/flash_fwd_launch_template.h run_mha_fwd_hdim128:
# 128 x 64; flash_bwd_launch_template.h run_mha_bwd_hdim128: 64 x 128).
# FSDP's float8 all-gather is assumed off (torchtitan's default; the table
# does not say).
#
# The platform (nothing fitted to these rows):
#   - peak: a 500 W H100 SXM has no datasheet. torchtitan's footnote 2 says
#     its "actual peak TFLOPs number is between SXM and NVL". The bounds are
#     NVIDIA's H100 datasheet (nvidia.com/en-us/data-center/h100/): SXM
#     989.5 TFLOP/s dense bf16 (1,979 sparse) at up to 700 W, NVL 835.5
#     (1,671 sparse) at 350-400 W. ASSUMED: the peak is linear in the power
#     limit between NVL's 400 W and SXM's 700 W: 835.5 + (989.5 - 835.5) x
#     (500 - 400) / (700 - 400) = 886.8 TFLOP/s, 0.8962 of the SXM's; the
#     FP8 peak takes the same fraction of 1979. Every kernel efficiency of
#     h100.calib is a fraction of the peak, so the whole compute side
#     scales. --peak-bounds also predicts at both bounds (NVL and SXM).
#   - HBM: mem_bw 2.4 TB/s (the benchmark's own figure) in place of the
#     SXM's 3.35; capacity 96 GiB less the 80 GB part's reserve (its
#     81559 MiB of 80 GiB: 361 MiB): --gpu-mem 97943MiB, an assumption.
#   - one node of `loong topo --gpu h100 --peak 887T` (NVLink, the kind's
#     shipped fit), calibration h100.calib with the three lines above
#     changed, written to a temporary directory.
#
# Prints per row the published and predicted TPS/GPU and error, and the
# published memory against loong's reserved peak (GiB) and its verdict
# (torchtitan ran every row, so each fits). About 1 s a row.
#
# usage: experiments/torchtitan-cp/run.sh [--peak-bounds] [LOONG]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
# shellcheck source=experiments/fidelity/plausible.sh
. "$TOP/experiments/fidelity/plausible.sh"
BOUNDS=0
[ "${1:-}" = --peak-bounds ] && { BOUNDS=1; shift; }
L=${1:-$TOP/build/loong}
[ -x "$L" ] || { echo "torchtitan-cp: no loong at $L (build first)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
GPU_MEM=97943MiB
# FlashAttention-2 on an H100 SXM, fractions of 989 TFLOP/s (above)
FA2_FWD=$(awk 'BEGIN {n = split("309 350 362 368 370 370", t, " "); split("512 1K 2K 4K 8K 16K", k, " ")
    for (i = 1; i <= n; i++) printf "%s%s:%.3f", (i > 1 ? " " : ""), k[i], t[i] / 989 }')
FA2_BWD=$(awk 'BEGIN {n = split("214 260 291 310 318 322", t, " "); split("512 1K 2K 4K 8K 16K", k, " ")
    for (i = 1; i <= n; i++) printf "%s%s:%.3f", (i > 1 ? " " : ""), k[i], t[i] / 989 }')

# platform NAME PEAK_TFLOPS: a capped H100 platform and calibration table in $TMP
platform() {
    local fp8
    fp8=$(awk -v p="$2" 'BEGIN {printf "%.1f", 1979 * p / 989.5}')
    "$L" topo --gpu h100 --nodes 1 --peak "${2}T" -o "$TMP/$1.xml" >/dev/null
    sed -e "s|^peak .*|peak    ${2}T      # 500 W cap: experiments/torchtitan-cp/run.sh|" \
        -e "s|^peak_fp8 .*|peak_fp8 ${fp8}T   # the same fraction of the SXM's 1979|" \
        -e "s|^mem_bw .*|mem_bw  2.4TBps   # HBM2e, the benchmark's figure|" \
        -e "s|^attn_fwd curve .*|attn_fwd curve tokens 5us $FA2_FWD|" \
        -e "s|^attn_bwd curve .*|attn_bwd curve tokens 5us $FA2_BWD|" \
        -e "s|^tile attn_fwd .*|tile attn_fwd 128x64|" "$TOP/topologies/h100.calib" >"$TMP/$1.calib"
    [ "$(grep -c -e "^peak    ${2}T" -e "^attn_fwd curve tokens 5us $FA2_FWD" -e "^attn_bwd curve tokens 5us $FA2_BWD" \
        -e '^tile attn_fwd 128x64' -e '^tile attn_bwd 64x128' "$TMP/$1.calib")" = 5 ] ||
        { echo "torchtitan-cp: cannot derive $1.calib" >&2; exit 2; }
}
platform capped "$(awk 'BEGIN {printf "%.1f", 835.5 + (989.5 - 835.5) * (500 - 400) / (700 - 400)}')"
[ $BOUNDS = 1 ] && platform nvl 835.5 && platform sxm 989.5

# fsdp  cp  seq  published TPS/GPU  published GiB
rows="8 1 32K 3890 83.9
4 2 64K 2540 84.2
2 4 128K 1071 84.0
1 8 256K 548 84.5"

# config platform fsdp cp seq: the run's configuration, as loong's options
config() {
    echo "--platform $TMP/$1.xml --calib $TMP/$1.calib --model llama3-8b --seq $4 --batch 1 --mesh 1x$3
        --strategy allgather --dp $2 --micro-batches 1 --zero 3 --recompute full --precision fp8-current --fusions te
        --cross-entropy eager"
}

predict() { # platform fsdp cp seq -> "tokens/s/GPU reserved_GiB verdict"
    local out
    # shellcheck disable=SC2046
    out=$("$L" sim --quiet $(config "$@") --dp-mode full --gpu-mem "$GPU_MEM" --json "$TMP/r.json" 2>&1) ||
        { echo "torchtitan-cp: loong sim failed: $(echo "$out" | tail -n 1)" >&2; exit 2; }
    # the --json summary's "tokens_per_s_per_gpu":T, "memory_bytes":{...,"reserved":R,...} and "oom":B
    sed -n 's/.*"tokens_per_s_per_gpu": *\([0-9.e+]*\).*"reserved": *\([0-9.e+]*\).*"oom": *\([a-z]*\).*/\1 \2 \3/p' \
        <<<"$(tr -d '\n' <"$TMP/r.json")" | awk '{printf "%s %.4f %s\n", $1, $2 / 1073741824, $3 == "true" ? "oom" : "fits"}'
}

printf '# %-4s %2s %5s %9s %10s %8s %8s %9s %8s %s' fsdp cp seq published predicted error_% pub_GiB reserved_GiB \
    mem_err_% memory
[ $BOUNDS = 1 ] && printf ' %9s %9s' at_nvl at_sxm
printf '\n'
while read -r fsdp cp seq pub pubm; do
    read -r pred resv verdict < <(predict capped "$fsdp" "$cp" "$seq")
    [ -n "${verdict:-}" ] || { echo "torchtitan-cp: no prediction for fsdp $fsdp cp $cp" >&2; exit 2; }
    # shellcheck disable=SC2046
    plausible torchtitan-cp "$L" $((pub * 8)) $(config capped "$fsdp" "$cp" "$seq")
    awk -v f="$fsdp" -v c="$cp" -v s="$seq" -v q="$pub" -v p="$pred" -v qm="$pubm" -v r="$resv" -v v="$verdict" 'BEGIN {
        printf "  %-4s %2s %5s %9s %10.1f %8.1f %8s %9.1f %8.1f %s%s", f, c, s, q, p, 100 * (p - q) / q, qm, r,
            100 * (r - qm) / qm, v, v == "oom" ? " (published: fits)" : "" }'
    if [ $BOUNDS = 1 ]; then
        read -r lo _ < <(predict nvl "$fsdp" "$cp" "$seq")
        read -r hi _ < <(predict sxm "$fsdp" "$cp" "$seq")
        printf ' %9.1f %9.1f' "$lo" "$hi"
    fi
    printf '\n'
done <<<"$rows"

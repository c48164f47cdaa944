#!/usr/bin/env bash
# Published tensor-parallel training against loong's prediction: the four
# rows of Megatron-LM's Table 1 without pipeline parallelism (Narayanan et
# al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
# Using Megatron-LM", arXiv 2104.04473): GPT 1.7B to 18.4B at TP 1, 2, 4, 8
# on 32 to 256 A100 80GB GPUs of Selene (DGX A100: NVSwitch, 8 x 200 Gb/s
# HDR InfiniBand per node), sequence 2048, mixed precision, activation
# recomputation, data parallelism over the rest (32 replicas).
#
# Predicted with loong sim on platforms of as many nodes from `loong topo
# --gpu a100 --nics-per-node 8` (its links fitted to published nccl-tests
# logs: topologies/a100.fit), topologies/a100.calib (published kernel
# figures: FlashAttention-2 and GEMM anchors, nothing fitted to Megatron),
# --recompute full, --zero 0 (data-parallel all-reduce, the optimizer
# replicated), no sequence parallelism (it came in 2022), each replica's
# global-batch share as one micro-batch (--batch: loong has no gradient
# accumulation). Achieved teraFLOP/s per GPU as the paper counts them
# (its Eq. 3, recomputation included): 96 B s l h^2 (1 + s/(6h) + V/(16 l h))
# / (step x GPUs). Prints the published and predicted figures and the
# error per row, and their mean absolute percentage error.
#
# usage: experiments/tp-published/run.sh [LOONG]   (default build/loong)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
# shellcheck source=experiments/fidelity/plausible.sh
. "$TOP/experiments/fidelity/plausible.sh"
L=${1:-$TOP/build/loong}
[ -x "$L" ] || { echo "tp-published: no loong at $L (build first)" >&2; exit 2; }
TMP=$(mktemp -d)
# Megatron-LM as the paper ran it (2021, before FlashAttention): Megatron's
# own attention, the s x s scores materialised (CoreAttention with its
# fused scale-mask-softmax), and its default --attention-dropout and
# --hidden-dropout of 0.1 (megatron/arguments.py), which the paper's
# scripts do not change.
ATTN="--attention unfused --attention-dropout 0.1 --hidden-dropout 0.1"
trap 'rm -rf "$TMP"' EXIT

# model  tp  GPUs  global batch  published TFLOP/s per GPU (Table 1)
rows="1.7b 1 32 512 137
3.6b 2 64 512 138
7.5b 4 128 512 142
18.4b 8 256 1024 135"

printf '# %-6s %3s %5s %6s %6s %10s %11s %12s %8s\n' model tp GPUs batch dp step_s published predicted error_%
sum=0 n=0
while read -r m tp gpus batch pub; do
    nodes=$((gpus / 8)) dp=$((gpus / tp))
    plat=$TMP/a100-${nodes}n.xml
    [ -f "$plat" ] || "$L" topo --nodes "$nodes" --gpu a100 --nics-per-node 8 -o "$plat" >/dev/null
    model=$HERE/gpt-$m.model
    sp=""
    [ "$tp" -gt 1 ] && sp="--sequence-parallel off"
    cfg="--model $model --seq 2048 --batch $((batch / dp)) --tp $tp $sp --mesh 1x1 --strategy ulysses --dp $dp
        --recompute full --zero 0 $ATTN --platform $plat --calib $TOP/topologies/a100.calib"
    # shellcheck disable=SC2086
    out=$("$L" sim --quiet $cfg --dp-mode full --compose)
    step=$(printf '%s\n' "$out" | sed -n 's/^# step time: \([0-9.]*\) s.*/\1/p')
    read -r l h <<<"$(awk -F' *= *' '$1 == "layers" {l = $2} $1 == "hidden" {h = $2} END {print l, h}' "$model")"
    pred=$(awk -v B="$batch" -v l="$l" -v h="$h" -v t="$step" -v g="$gpus" 'BEGIN {
        s = 2048; V = 51200
        printf "%.1f", 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)) / (t * g) / 1e12 }')
    err=$(awk -v p="$pred" -v q="$pub" 'BEGIN {printf "%.1f", 100 * (p - q) / q}')
    # the published step's tokens/s: the formula is linear in 1/step
    # shellcheck disable=SC2086
    plausible tp-published "$L" "$(awk -v B="$batch" -v t="$step" -v p="$pred" -v q="$pub" \
        'BEGIN {printf "%.6g", B * 2048 * q / (p * t)}')" $cfg
    printf '  %-6s %3s %5s %6s %6s %10.3f %11s %12s %8s\n' "gpt-$m" "$tp" "$gpus" "$batch" "$dp" "$step" "$pub" "$pred" "$err"
    sum=$(awk -v s="$sum" -v e="$err" 'BEGIN {print s + (e < 0 ? -e : e)}')
    n=$((n + 1))
done <<<"$rows"
awk -v s="$sum" -v n="$n" 'BEGIN {printf "# mean absolute error over %d rows: %.1f %%\n", n, s / n}'

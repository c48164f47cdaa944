#!/usr/bin/env bash
# SimuMax's published A100-PCIe training runs against loong's prediction
# (github.com/MooreThreads/SimuMax at 4dcaae5, docs/FULL_RESULTS.md and the
# chart it shows, assets/A100-Pcie.png, unchanged since the first public
# commit 3005b17): Megatron-LM runs of Llama3-70B trimmed to 12 layers on
# one server of 8 A100 PCIe 80GB GPUs (no NVLink: PCIe Gen4), TP 1, 2, 4, 8
# (TP 1 with PP 2), 4, 8 and 32 micro-batches per step.
#
# Their setup (configs/strategy/tp{1_pp2_dp4,2_pp1_dp4,4_pp1_dp2,8_pp1_dp1}
# _mbs1.json, examples/perf_llama3_70b_layer12_*.py): sequence 4096,
# micro-batch 1, data parallelism over the rest of the 8 GPUs (global batch
# = micro-batches x dp), bf16, sequence parallelism, ZeRO-1 (Megatron's
# distributed optimizer: zero_state 1), no recomputation (enable_recompute
# with no granularity and 0 layers is SimuMax's "No Recompute"), flash
# attention, fused norm and SwiGLU, fp32 gradient accumulation, vocabulary
# padded to a multiple of 128 x TP, and Megatron-Core's default rank
# order tp-cp-ep-dp-pp (no --use-tp-pp-dp-mapping in SimuMax's examples:
# TP 1 PP 2's four replicas of a stage side by side, in one socket). The
# published figure is the measured
# ("Actual") TFLOP/s per GPU, read off the chart by pixel (its gridlines
# 60-180 TFLOP/s, each marker's centre; +-0.5 TFLOP/s): FULL_RESULTS.md
# gives only SimuMax's own error per run, and its Llama3-8B runs have no
# chart, so they have no measured figure to compare with and are left out.
# TFLOP/s as SimuMax counts them (simumax/core/config.py flops_per_token,
# perf_llm.py): per token 6 l (h (n_q + 2 n_kv) d + h^2 + 3 h f) + 12 l s h
# + 6 h V_padded, times the step's tokens, over step time x GPUs; loong's
# step time goes through the same formula, so the error is that of the step.
#
# Predicted with loong sim on `loong topo --gpu a100-pcie` (one node) and
# topologies/a100-pcie.calib, whose GEMM and FlashAttention efficiencies are
# SimuMax's measured kernel tables for this card: the kernel source and
# these validation rows come from the same project (the fidelity table says
# so). Nothing in that table was fitted to these runs.
#
# usage: experiments/simumax-published/run.sh [LOONG]   (default build/loong)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
# shellcheck source=experiments/fidelity/plausible.sh
. "$TOP/experiments/fidelity/plausible.sh"
L=${1:-$TOP/build/loong}
[ -x "$L" ] || { echo "simumax-published: no loong at $L (build first)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PLAT=$TMP/a100-pcie.xml
"$L" topo --gpu a100-pcie -o "$PLAT" >/dev/null
MODEL=$HERE/llama3-70b-12l.model
SEQ=4096

# tp  pp  micro-batches  measured TFLOP/s per GPU (the chart's "Actual")
rows="1 2 4 122.1
2 1 4 84.6
4 1 4 62.3
8 1 4 50.5
1 2 8 151.3
2 1 8 113.0
4 1 8 82.2
8 1 8 51.4
1 2 32 182.6
2 1 32 150.3
4 1 32 107.8
8 1 32 51.7"

read -r l h nq nkv d f V <<<"$(awk -F' *= *' '{v[$1] = $2}
    END {print v["layers"], v["hidden"], v["heads"], v["kv_heads"], v["head_dim"], v["ffn"], v["vocab"]}' "$MODEL")"
printf '# %-14s %3s %3s %3s %4s %4s %10s %11s %12s %8s\n' model tp pp dp mbc gbs step_s published predicted error_%
sum=0 n=0
while read -r tp pp mbc pub; do
    dp=$((8 / (tp * pp)))
    # every TP rank simulated: the socket link carries all their traffic
    sp=""
    [ "$tp" -gt 1 ] && sp="--sequence-parallel on"
    cfg="--platform $PLAT --calib $TOP/topologies/a100-pcie.calib --model $MODEL --seq $SEQ --batch 1
        --micro-batches $mbc --tp $tp $sp --pp $pp --mesh 1x1 --strategy ulysses --dp $dp --zero 1
        --recompute none --placement tp-cp-ep-dp-pp"
    # shellcheck disable=SC2086
    out=$("$L" sim $cfg --dp-mode full --quiet 2>&1) ||
        { echo "simumax-published: loong sim failed: $(echo "$out" | tail -n 1)" >&2; exit 2; }
    step=$(printf '%s\n' "$out" | sed -n 's/^# step time: \([0-9.]*\) s.*/\1/p')
    [ -n "$step" ] || { echo "simumax-published: no step time for tp$tp pp$pp m$mbc" >&2; exit 2; }
    pred=$(awk -v l="$l" -v h="$h" -v nq="$nq" -v nkv="$nkv" -v d="$d" -v f="$f" -v V="$V" -v s="$SEQ" \
        -v tp="$tp" -v gbs=$((mbc * dp)) -v t="$step" 'BEGIN {
        m = 128 * tp; Vp = int((V + m - 1) / m) * m
        per_token = 6 * l * (h * d * (nq + 2 * nkv) + h * h) + 6 * l * 3 * h * f + 12 * l * s * h + 6 * h * Vp
        printf "%.1f", per_token * s * gbs / 8 / t / 1e12 }')
    err=$(awk -v p="$pred" -v q="$pub" 'BEGIN {printf "%.1f", 100 * (p - q) / q}')
    # shellcheck disable=SC2086
    plausible simumax-published "$L" "$(awk -v B=$((mbc * dp)) -v t="$step" -v p="$pred" -v q="$pub" -v s="$SEQ" \
        'BEGIN {printf "%.6g", B * s * q / (p * t)}')" $cfg
    printf '  %-14s %3s %3s %3s %4s %4s %10.3f %11s %12s %8s\n' llama3-70b-12l "$tp" "$pp" "$dp" "$mbc" $((mbc * dp)) \
        "$step" "$pub" "$pred" "$err"
    sum=$(awk -v s="$sum" -v e="$err" 'BEGIN {print s + (e < 0 ? -e : e)}')
    n=$((n + 1))
done <<<"$rows"
awk -v s="$sum" -v n="$n" 'BEGIN {printf "# mean absolute error over %d rows: %.1f %%\n", n, s / n}'

#!/usr/bin/env bash
# Published pipeline-parallel training against loong's prediction: the six
# rows of Megatron-LM's Table 1 with pipeline parallelism (Narayanan et al.
# 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
# Megatron-LM", arXiv 2104.04473; the setups from its scripts,
# examples/academic_paper_scripts/sc21/run_table_1.sh, the throughputs from
# the Megatron-LM README's table of April 2021): GPT 39.1B to 1008B at TP 8
# and PP 2 to 64 on 512 to 3072 A100 80GB GPUs of Selene (DGX A100:
# NVSwitch, 8 x 200 Gb/s HDR InfiniBand per node), sequence 2048, mixed
# precision, full activation recomputation ("uniform"), Megatron's local DDP
# (an all-reduce, the optimizer replicated: --zero 0), no sequence
# parallelism (2022's), the interleaved schedule where the script gives
# --num-layers-per-virtual-pipeline-stage (v = layers / (pp x that)), else
# 1F1B, and m = global batch / (dp x micro-batch) micro-batches. Megatron's
# attention as it ran before FlashAttention (2022): the s x s scores
# materialised (--attention unfused), with its default dropouts of 0.1
# (--attention-dropout, --hidden-dropout; megatron/arguments.py), which
# the scripts do not change.
#
# Predicted with loong sim on platforms of as many nodes from `loong topo
# --gpu a100 --nics-per-node 8` (its links fitted to published nccl-tests
# logs: topologies/a100.fit), topologies/a100.calib (published kernel
# figures, nothing fitted to Megatron), the data-parallel replicas by
# symmetry. Achieved teraFLOP/s per GPU as the paper counts them (its Eq. 3,
# recomputation included): 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) / (step x
# GPUs). The first ROWS rows are simulated (default 4: 39.1B to 310.1B, about
# a minute); the 530B and 1T rows, 6.6M and 13.6M tasks in one replica, take
# minutes each on this machine (ROWS=6 runs them). The fidelity table runs
# the first 3.
#
# usage: experiments/pp-published/run.sh [LOONG] [ROWS]   (default build/loong, 4)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
# shellcheck source=experiments/fidelity/plausible.sh
. "$TOP/experiments/fidelity/plausible.sh"
L=${1:-$TOP/build/loong}
ROWS=${2:-4}
[ -x "$L" ] || { echo "pp-published: no loong at $L (build first)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# model  tp  pp  GPUs  micro-batch  global batch  layers per virtual stage (0: none)  published TFLOP/s per GPU
rows="39.1b 8 2 512 4 1536 0 138
76.1b 8 4 1024 2 1792 5 140
145.6b 8 8 1536 2 2304 5 148
310.1b 8 16 1920 1 2160 3 155
529.6b 8 35 2520 1 2520 1 163
1008b 8 64 3072 1 3072 0 163"

printf '# %-10s %3s %3s %5s %3s %4s %4s %-12s %9s %10s %11s %10s %8s\n' model tp pp GPUs dp mbs m schedule tasks step_s \
    published predicted error_%
sum=0 n=0 skip=0
while read -r m tp pp gpus mbs gbs lpvs pub; do
    nodes=$((gpus / 8)) dp=$((gpus / (tp * pp)))
    mb=$((gbs / (dp * mbs)))
    model=$HERE/gpt-$m.model
    read -r l h <<<"$(awk -F' *= *' '$1 == "layers" {l = $2} $1 == "hidden" {h = $2} END {print l, h}' "$model")"
    sched="--schedule 1f1b" name=1f1b
    if [ "$lpvs" -gt 0 ]; then
        v=$((l / (pp * lpvs)))
        sched="--schedule interleaved --vpp $v" name="interleaved$v"
    fi
    args="--model $model --seq 2048 --batch $mbs --tp $tp --sequence-parallel off --mesh 1x1 --strategy ulysses
        --pp $pp --micro-batches $mb $sched --dp $dp --recompute full --zero 0
        --attention unfused --attention-dropout 0.1 --hidden-dropout 0.1"
    if [ $((n + skip)) -ge "$ROWS" ]; then
        printf '  %-10s %3s %3s %5s %3s %4s %4s %-12s %9s %10s %11s %10s %8s\n' "gpt-$m" "$tp" "$pp" "$gpus" "$dp" \
            "$mbs" "$mb" "$name" - - "$pub" "skipped" -
        skip=$((skip + 1))
        continue
    fi
    plat=$TMP/a100-${nodes}n.xml
    [ -f "$plat" ] || "$L" topo --nodes "$nodes" --gpu a100 --nics-per-node 8 -o "$plat" >/dev/null
    # shellcheck disable=SC2086
    out=$("$L" sim $args --platform "$plat" --calib "$TOP/topologies/a100.calib" --quiet --links 0)
    step=$(printf '%s\n' "$out" | sed -n 's/^# step time: \([0-9.]*\) s.*/\1/p')
    tasks=$(printf '%s\n' "$out" | sed -n 's/^# platform .*; \([0-9]*\) tasks$/\1/p')
    pred=$(awk -v B="$gbs" -v l="$l" -v h="$h" -v t="$step" -v g="$gpus" 'BEGIN {
        s = 2048; V = 51200
        printf "%.1f", 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)) / (t * g) / 1e12 }')
    err=$(awk -v p="$pred" -v q="$pub" 'BEGIN {printf "%.1f", 100 * (p - q) / q}')
    # shellcheck disable=SC2086
    plausible pp-published "$L" "$(awk -v B="$gbs" -v t="$step" -v p="$pred" -v q="$pub" \
        'BEGIN {printf "%.6g", B * 2048 * q / (p * t)}')" $args --platform "$plat" --calib "$TOP/topologies/a100.calib"
    printf '  %-10s %3s %3s %5s %3s %4s %4s %-12s %9s %10.3f %11s %10s %8s\n' "gpt-$m" "$tp" "$pp" "$gpus" "$dp" "$mbs" \
        "$mb" "$name" "$tasks" "$step" "$pub" "$pred" "$err"
    sum=$(awk -v s="$sum" -v e="$err" 'BEGIN {print s + (e < 0 ? -e : e)}')
    n=$((n + 1))
done <<<"$rows"
awk -v s="$sum" -v n="$n" 'BEGIN {printf "# mean absolute error over %d simulated rows: %.1f %%\n", n, s / n}'

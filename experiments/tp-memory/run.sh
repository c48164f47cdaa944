#!/usr/bin/env bash
# Published per-GPU memory of Megatron-LM runs with context parallelism and
# with tensor parallelism against loong's memory model (src/model/memory.h:
# Korthikanti et al. 2022, arXiv 2205.05198, with the paper's s replaced
# by the T = B*S/(P_h*P_s) tokens a rank holds under CP).
#
# Source of the measurements: vuiseng9/megatron-tutorials (commit 0b2c030,
# 2026-02-08), 03-cp.md with its table assets/tbl-301-cp.png (rows R0-R9:
# GPT-2 1.2B, global = micro-batch 8, DP 1, TP 1, CP 1-8 on one node of
# 8 H100 80GB, bf16, flash attention, no distributed optimizer, Megatron's
# p2p, all_gather and a2a CP) and 02-tp-sp.md with assets/tbl-280-sp-ra.png
# (C1-C3: GPT 22B, batch 4, sequence 2048, TP 8 with and without sequence
# parallelism, full recompute in C3). Exact flags: the scripts named in
# gpt2-1.2b.model and gpt-22b.model; they leave --attention-dropout and
# --hidden-dropout at Megatron's 0.1 (the residual dropouts' masks are
# kept; the attention's dropout runs inside FlashAttention). The figures are gpustat readings
# (scripts/source-this-for-monitor-gpu-func.sh: `watch gpustat`; "Mem.
# Usage (GB/gpu)", rounded to 1 GB in R0-R9). gpustat shows NVML's memory
# in use in MiB, labelled MB, and the tables read that in thousands: one
# published "GB" is 1000 MiB. NVML's figure is the whole process on the
# GPU: the caching allocator's reserve, the CUDA context and NCCL's
# buffers, so it is compared with loong's reserved peak (memory.h), in the
# same unit (GiB_pub = 1000 MiB). Megatron ties the embedding to the LM
# head here (loong counts both: an over-count of vocab x hidden x 18 B).
# The OOM rows are rows too: predicted OOM when the reserved peak is over
# the 81559 MiB an H100 80GB HBM3 has (nvidia-smi), what loong sim checks.
#
# Prints, per row, the published figure, loong's predicted reserved and
# allocated peaks and its activations (thousands of MiB), and the error (or
# the OOM verdict); then the check of the substitution: at a fixed S, what
# one doubling of CP frees, measured and predicted (R2-R3, R3-R4: the
# model states and every constant cancel).
#
# usage: experiments/tp-memory/run.sh [LOONG]   (default build/loong)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
L=${1:-$TOP/build/loong}
[ -x "$L" ] || { echo "tp-memory: no loong at $L (build first)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# row  model  seq  batch  tp  sp  mesh  strategy  recompute  published (GB/GPU, oom: > 80)
rows="R0 gpt2-1.2b 4096 8 1 on 1x1 zigzag full 38
R1 gpt2-1.2b 4096 8 1 on 1x1 zigzag none oom
R2 gpt2-1.2b 4096 8 1 on 1x2 zigzag none 69
R3 gpt2-1.2b 4096 8 1 on 1x4 zigzag none 49
R4 gpt2-1.2b 4096 8 1 on 1x8 zigzag none 39
R5 gpt2-1.2b 4096 8 1 on 1x8 allgather none 36
R6 gpt2-1.2b 4096 8 1 on 8x1 ulysses none 38
R7 gpt2-1.2b 16384 8 1 on 1x8 zigzag none 80
R8 gpt2-1.2b 16384 8 1 on 1x8 allgather none 68
R9 gpt2-1.2b 16384 8 1 on 8x1 ulysses none 71
C1 gpt-22b 2048 4 8 off 1x1 zigzag none oom
C2 gpt-22b 2048 4 8 on 1x1 zigzag none 62.0
C3 gpt-22b 2048 4 8 off 1x1 zigzag full 57.6"

peak() { # row fields -> "reserved allocated activations", in thousands of MiB
    "$L" sim --quiet --platform "$TOP/topologies/dgx-h100-1n.xml" --calib "$TOP/topologies/h100.calib" \
        --model "$HERE/$2.model" --seq "$3" --batch "$4" --tp "$5" --sequence-parallel "$6" --mesh "$7" \
        --strategy "$8" --recompute "$9" --zero 0 --attention-dropout 0.1 --hidden-dropout 0.1 --compose --json "$TMP/m.json" >/dev/null 2>"$TMP/err" ||
        { cat "$TMP/err" >&2; exit 1; }
    # the --json summary's "memory_bytes":{...,"activations":A,...,"reserved":R}
    local m
    m=$(grep -o '"memory_bytes":{[^}]*}' "$TMP/m.json")
    awk -v r="$(echo "$m" | sed 's/.*"reserved":\([0-9.e+]*\).*/\1/')" \
        -v p="$(echo "$m" | sed 's/.*"allocated":\([0-9.e+]*\).*/\1/')" \
        -v a="$(echo "$m" | sed 's/.*"activations":\([0-9.e+]*\).*/\1/')" \
        'BEGIN {u = 1000 * 1048576; printf "%.1f %.1f %.1f\n", r / u, p / u, a / u}'
}

printf '# %-3s %-10s %6s %2s %3s %4s %-9s %-5s %10s %9s %9s %9s %8s\n' row model seq tp sp mesh strategy recomp \
    published reserved allocated activ error_%
declare -A P
while read -r row model seq batch tp sp mesh strat rc pub; do
    read -r pk al act <<<"$(peak "$row" "$model" "$seq" "$batch" "$tp" "$sp" "$mesh" "$strat" "$rc")"
    P[$row]=$pk
    if [ "$pub" = oom ]; then # 81559 MiB: an H100 80GB HBM3 (nvidia-smi)
        err=$(awk -v p="$pk" 'BEGIN {print (p > 81.559 ? "oom_too" : "fits!")}')
    else
        err=$(awk -v p="$pk" -v q="$pub" 'BEGIN {printf "%+.1f", 100 * (p - q) / q}')
    fi
    [ "$tp" = 1 ] && sp=-
    printf '  %-3s %-10s %6s %2s %3s %4s %-9s %-5s %10s %9s %9s %9s %8s\n' "$row" "$model" "$seq" "$tp" "$sp" "$mesh" \
        "$strat" "$rc" "$pub" "$pk" "$al" "$act" "$err"
done <<<"$rows"
echo "# what doubling CP frees at S = 4096 (published R2-R3 = 20, R3-R4 = 10 GB; their ratio 2 is unit-free):"
awk -v a="${P[R2]}" -v b="${P[R3]}" -v c="${P[R4]}" 'BEGIN {
    printf "#   loong: R2-R3 %.1f GB (%+.1f %%), R3-R4 %.1f GB (%+.1f %%), ratio %.2f\n",
        a - b, 100 * (a - b - 20) / 20, b - c, 100 * (b - c - 10) / 10, (a - b) / (b - c) }'

#!/usr/bin/env bash
# Prediction against measurement on one GPU: the CUDA device's measured
# traces (traces/, one H200, 2026-12-04, tests/device/run.sh) held against
# loong sim, with nothing fitted to the runs it predicts.
#   1. calibrate: `loong calibrate` fits the kernel rates (gemm, attention
#      forward and backward) from the seven single-rank traces (one-*: one
#      rank alone on the GPU, no sharing) on a one-GPU h200 platform;
#   2. predict: each multi-rank trace (P = 4 or 8 ranks of `loong exec
#      --device cuda --transport local`, sharing the one GPU) with `loong
#      sim --one-gpu` and that table: the ranks' kernels divide the GPU,
#      each kernel's T0 stays latency (calib.h: calib_task_t0), and the
#      ranks' copies go over links of the GPU's measured device-to-device
#      copy rate divided by P (all P ranks copy at once in a ring step);
#   3. compare: `loong compare` per configuration, then the MAPE.
# The configurations are tests/device/traces.txt's lines (their options).
#
# usage: experiments/cuda-local/run.sh [path/to/loong] [outdir]
# Exit status: 0; 2 when a step fails.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
LOONG=$(readlink -f "${1:-$ROOT/build/loong}")
OUT=${2:-$HERE/out}
case "${1:-}" in -h|--help) sed -n '2,19p' "$0"; exit 0 ;; esac
[ -x "$LOONG" ] || { echo "cuda-local: no loong at ${1:-build/loong}" >&2; exit 2; }
fail() { echo "cuda-local: $*" >&2; exit 2; }
mkdir -p "$OUT"
cd "$ROOT" || exit 2

# the copy rate (bytes copied once) at the largest size the lab measured
COPY_GBPS=$(awk '$1 == "copy_d2d" {r = $4} END {sub("GBps=", "", r); print r}' "$HERE/h200-2026-12-04/lab.txt")
[ -n "$COPY_GBPS" ] || fail "no copy_d2d line in h200-2026-12-04/lab.txt"

echo "# 1. calibrating from the single-rank traces" >&2
"$LOONG" topo --nodes 1 --gpus-per-node 1 --nics-per-node 1 --gpu h200 -o "$OUT/h200-1.xml" || fail "loong topo failed"
"$LOONG" calibrate "$HERE"/traces/one-*.json --platform "$OUT/h200-1.xml" --calib topologies/h200-measured.calib \
    -o "$OUT/fit" >"$OUT/calibrate.txt" || fail "calibration failed (see $OUT/calibrate.txt)"
grep -E '^ (gemm|attn_fwd|attn_bwd) ' "$OUT/calibrate.txt" | sed 's/^/#  /' >&2

echo "# 2-3. predicting every multi-rank trace with loong sim --one-gpu (copies at $COPY_GBPS GB/s / P)" >&2
printf '# %-16s %-52s %12s %12s %9s\n' config options measured_ms predicted_ms error_%
sum=0 n=0 worst=0
while read -r name args; do
    case "$name" in '' | '#'* | one-*) continue ;; esac
    trace="$HERE/traces/$name.json"
    [ -f "$trace" ] || fail "no measured trace $trace"
    # shellcheck disable=SC2086
    p=$("$LOONG" dag $args 2>/dev/null | sed -n 's/^# [0-9]* tasks on \([0-9]*\) ranks.*/\1/p')
    [ -n "$p" ] || fail "loong dag $args failed"
    bw=$(awk -v c="$COPY_GBPS" -v p="$p" 'BEGIN {printf "%.0f", c / p}')
    plat="$OUT/h200-one-$p.xml"
    [ -f "$plat" ] || "$LOONG" topo --nodes 1 --gpus-per-node 8 --nics-per-node 8 --gpu h200 --nvlink "${bw}GBps" \
        -o "$plat" || fail "loong topo failed for P = $p"
    # shellcheck disable=SC2086
    "$LOONG" sim --platform "$plat" --calib "$OUT/fit/h200.calib" --one-gpu $args --dtype fp32 --quiet \
        --trace "$OUT/$name.predicted.json" -o "$OUT/$name.sim.txt" || fail "simulating $name failed"
    "$LOONG" compare "$OUT/$name.predicted.json" "$trace" >"$OUT/$name.compare.txt" || fail "comparing $name failed"
    line=$(grep '^# step time:' "$OUT/$name.compare.txt")
    pred=$(echo "$line" | sed -E 's/.*predicted ([0-9.]+) ms.*/\1/')
    meas=$(echo "$line" | sed -E 's/.*measured ([0-9.]+) ms.*/\1/')
    err=$(echo "$line" | sed -E 's/.*error ([-+0-9.]+) %.*/\1/')
    printf '  %-16s %-52s %12s %12s %9s\n' "$name" "$(echo "$args" | sed 's/--model //; s/experiments\/cuda-lab\///')" \
        "$meas" "$pred" "$err"
    sum=$(awk -v s="$sum" -v e="$err" 'BEGIN {print s + (e < 0 ? -e : e)}')
    worst=$(awk -v w="$worst" -v e="$err" 'BEGIN {a = (e < 0 ? -e : e) + 0; print (a > w ? a : w)}')
    n=$((n + 1))
done <tests/device/traces.txt
[ "$n" -gt 0 ] || fail "no multi-rank configuration in tests/device/traces.txt"
awk -v s="$sum" -v n="$n" -v w="$worst" 'BEGIN {printf "# MAPE %.2f %% over %d configurations (worst %.2f %%)\n", s / n, n, w}'

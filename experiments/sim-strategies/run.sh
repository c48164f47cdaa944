#!/usr/bin/env bash
# The README's worked example: ring, zigzag, usp and loongtrain for one
# training step of llama3-8b at S = 1M tokens on 64 H100s (dgx-h100-8n:
# 8 DGX nodes, NVSwitch + 8 x 400 Gb/s rail NICs), default calibration;
# selective recompute, so the step fits the 80 GB H100s (50.7 GB).
# usage: experiments/sim-strategies/run.sh [path/to/loong]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LOONG=${1:-$HERE/../../build/loong}
PLAT=$HERE/../../topologies/dgx-h100-8n.xml
printf '# %-30s %12s %14s %8s %14s %14s\n' strategy step_time_s tokens/s/GPU MFU_% exposed_comm_s busiest_link_%
run() {
    local name=$1; shift
    "$LOONG" sim --quiet --platform "$PLAT" --model llama3-8b --seq 1M --scope step --recompute sc++ --links 1 "$@" \
        -o /tmp/loong-sim-strategy.txt
    local f=/tmp/loong-sim-strategy.txt
    printf '  %-30s %12s %14s %8s %14s %14s\n' "$name" \
        "$(sed -nE 's/^# step time: ([0-9.]+) s.*/\1/p' $f)" \
        "$(sed -nE 's/^# throughput: ([0-9.]+) .*/\1/p' $f)" \
        "$(sed -nE 's/^# MFU: ([0-9.]+) %.*/\1/p' $f)" \
        "$(sed -nE 's/^# per rank.*exposed communication ([0-9.]+) s.*/\1/p' $f)" \
        "$(awk '/^# busiest links/ {getline; getline; print $NF}' $f)"
}
run "ring 1x64" --strategy ring --mesh 1x64
run "zigzag 1x64" --strategy zigzag --mesh 1x64
run "usp 8x8" --strategy usp --mesh 8x8
run "loongtrain 8x8 w=4" --strategy loongtrain --mesh 8x8 --window 4
run "loongtrain 8x8 w=2" --strategy loongtrain --mesh 8x8 --window 2
run "loongtrain 4x16 w=8 ctx-first" --strategy loongtrain --mesh 4x16 --window 8 --placement context-first

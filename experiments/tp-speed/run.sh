#!/usr/bin/env bash
# DAG build and simulation cost with tensor parallelism: llama3-8b, S = 128K,
# the same 32 GPUs of topologies/dgx-h100-4n.xml as tp 1 (mesh 4x8,
# loongtrain) and tp 8 (mesh 1x4, zigzag ring), ZeRO-1. Each command runs
# RUNS times in turn (A B A B ...); prints the median wall seconds of each
# and their ratio tp8/tp1, with the task counts.
#
# usage: experiments/tp-speed/run.sh [LOONG] [RUNS]   (defaults build/loong, 5)
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
L=${1:-$TOP/build/loong}
RUNS=${2:-5}
PLAT=$TOP/topologies/dgx-h100-4n.xml
[ -x "$L" ] || { echo "tp-speed: no loong at $L (build first)" >&2; exit 2; }
base="--model llama3-8b --seq 128K --zero 1"
tp1="$base --mesh 4x8 --strategy loongtrain"
tp8="$base --tp 8 --mesh 1x4 --strategy zigzag"

wall() { # seconds of one run of "$@"
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

printf '# %-6s %-4s %10s %12s\n' what tp tasks median_s
for what in dag sim; do
    a=() b=()
    for _ in $(seq "$RUNS"); do
        if [ $what = dag ]; then
            a+=("$(wall "$L" dag $tp1)") b+=("$(wall "$L" dag $tp8)")
        else
            a+=("$(wall "$L" sim $tp1 --platform "$PLAT")") b+=("$(wall "$L" sim $tp8 --platform "$PLAT")")
        fi
    done
    m1=$(printf '%s\n' "${a[@]}" | median) m8=$(printf '%s\n' "${b[@]}" | median)
    n1=$("$L" dag $tp1 | sed -n 's/^# \([0-9]*\) tasks.*/\1/p') n8=$("$L" dag $tp8 | sed -n 's/^# \([0-9]*\) tasks.*/\1/p')
    printf '  %-6s %-4s %10s %12.3f\n' "$what" 1 "$n1" "$m1"
    printf '  %-6s %-4s %10s %12.3f\n' "$what" 8 "$n8" "$m8"
    printf '# %s: tp8 / tp1 = %.3f\n' "$what" "$(echo "$m8 / $m1" | bc -l)"
done

#!/usr/bin/env bash
# loong sim cost vs cluster size: one full training step of llama3-8b at
# S = 1M (32 layers), loongtrain 8 x P/8 with w = min(4, P_s), on the shipped
# DGX-H100 platforms. Best of N runs per size (the machine is shared); wall
# is the whole process (platform load, DAG build, simulation, summary), peak
# RSS from /usr/bin/time. Goal (issue #4): 256 GPUs in <= 5 s and <= 2 GB.
# usage: experiments/sim-scaling/run.sh [path/to/loong] [runs]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOPO=$HERE/../../topologies
LOONG=${1:-$HERE/../../build/loong}
RUNS=${2:-3}
printf '# %5s %6s %10s %8s %11s %9s %12s %8s\n' GPUs mesh tasks wall_s simulate_s RSS_MB step_time_s MFU_%
for P in 8 32 64 128 256; do
    ps=$((P / 8)); w=$((ps < 4 ? ps : 4)); nodes=$((P / 8))
    best=""
    for _ in $(seq "$RUNS"); do
        out=$( { /usr/bin/time -f 'TIME %e %M' "$LOONG" sim --quiet --timing --platform "$TOPO/dgx-h100-${nodes}n.xml" \
                   --model llama3-8b --seq 1M --mesh 8x$ps --strategy loongtrain --window $w --scope step \
                   --links 0 -o /tmp/loong-sim-scaling.txt; } 2>&1 )
        wall=$(echo "$out" | awk '/^TIME/ {print $2}')
        if [ -z "$best" ] || awk "BEGIN{exit !($wall < ${best%% *})}"; then best="$wall $out"; fi
    done
    out=${best#* }
    rss=$(echo "$out" | awk '/^TIME/ {printf "%.0f", $3 / 1024}')
    sim=$(echo "$out" | sed -nE 's/.*simulate ([0-9.]+) s.*/\1/p')
    tasks=$(echo "$out" | sed -nE 's/.*\(([0-9]+) tasks\).*/\1/p')
    step=$(sed -nE 's/^# step time: ([0-9.]+) s.*/\1/p' /tmp/loong-sim-scaling.txt)
    mfu=$(sed -nE 's/^# MFU: ([0-9.]+) %.*/\1/p' /tmp/loong-sim-scaling.txt)
    printf '  %5d %6s %10d %8s %11s %9s %12s %8s\n' "$P" "8x$ps" "$tasks" "${best%% *}" "$sim" "$rss" "$step" "$mfu"
done

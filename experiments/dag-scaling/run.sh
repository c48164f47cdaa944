#!/usr/bin/env bash
# DAG build cost vs cluster size: llama3-8b, S = 1M, scope step (32 layers),
# loongtrain 8 x P/8 with w = min(4, P_s). Best of 3 runs per size (the
# machine is shared); peak RSS is the whole `loong dag` process.
# usage: experiments/dag-scaling/run.sh [path/to/loong]
set -euo pipefail
LOONG=${1:-$(dirname "$0")/../../build/loong}
printf '# %6s %6s %10s %10s %11s %11s\n' ranks mesh tasks build_s validate_s peak_RSS_MB
for P in 8 16 32 64 128 256; do
    ps=$((P / 8)); w=$((ps < 4 ? ps : 4))
    best=""
    for _ in 1 2 3; do
        line=$("$LOONG" dag --model llama3-8b --seq 1M --mesh 8x$ps --strategy loongtrain --window $w \
                --scope step --timing -o /dev/null 2>&1 >/dev/null | grep '^# timing')
        b=$(echo "$line" | sed -E 's/.*build ([0-9.]+) s.*/\1/')
        if [ -z "$best" ] || awk "BEGIN{exit !($b < ${best%% *})}"; then best="$b $line"; fi
    done
    line=${best#* }
    tasks=$(echo "$line" | sed -E 's/.*\(([0-9]+) tasks\).*/\1/')
    val=$(echo "$line" | sed -E 's/.*validate ([0-9.]+) s.*/\1/')
    rss=$(echo "$line" | sed -E 's/.*peak RSS ([0-9.]+) MB.*/\1/')
    printf '  %6d %6s %10d %10s %11s %11s\n' "$P" "8x$ps" "$tasks" "${best%% *}" "$val" "$rss"
done

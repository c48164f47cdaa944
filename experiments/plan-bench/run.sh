#!/usr/bin/env bash
# loong plan's benchmark (docs/plan.md):
#   1. the full sweep for 256 GPUs (dgx-h100-32n, llama3-8b at 1M, top 10
#      simulated), serially and under mpirun -np 2: wall time, layouts/s,
#      analytical vs SimGrid time (the table's "# time" footer);
#   2. how often the analytical top 1 is the SimGrid top 1, over a range of
#      configurations (each with --top 10: the analytical top 1 is among the
#      simulated, so the question is whether simulation reorders the top).
#      A tie (the two simulate within 0.1 %, e.g. single ring vs double ring
#      w = 1, which are the same schedule) counts as agreement;
#   3. the llama3-70b plan at 512K under ZeRO-3 on dgx-h100-32n (top 10,
#      recompute searched, one sample a step: --global-batch 1, as ZeRO-3
#      accumulates no micro-batches and the default batch of 16M tokens
#      would leave 8 GPUs a replica, which nothing fits), composed (every child a loong sim --compose)
#      against --full-layers: wall, peak RSS and their ratios, and whether
#      the two recommend the same layout. RUN_FULL=0 skips the full one
#      (minutes).
# usage: experiments/plan-bench/run.sh [path/to/loong]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LOONG=${1:-$HERE/../../build/loong}
TOPO=$HERE/../../topologies
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

echo "# 1. 256 GPUs, llama3-8b, S = 1M, top 10 simulated"
for mode in serial mpi2; do
    pre=()
    [ $mode = mpi2 ] && pre=(mpirun --oversubscribe -np 2)
    start=$(date +%s.%N)
    "${pre[@]}" "$LOONG" plan --quiet --platform "$TOPO/dgx-h100-32n.xml" --csv "$TMP/$mode.csv" -o "$TMP/$mode.txt"
    end=$(date +%s.%N)
    n=$(grep -c ',feasible,' "$TMP/$mode.csv" || true)
    awk -v m=$mode -v s="$start" -v e="$end" -v n="$n" 'BEGIN { printf "%-7s wall %.2f s (whole process), %d layouts scored, %.0f layouts/s\n", m, e - s, n, n / (e - s) }'
    tail -n 1 "$TMP/$mode.txt"
done
cmp "$TMP/serial.csv" "$TMP/mpi2.csv" && echo "serial and mpirun -np 2 CSVs are identical"

echo "# 2. analytical top 1 vs SimGrid top 1"
agree=0 total=0
for plat in dgx-h100-4n dgx-h100-8n a100-8n-4nic; do
    for seq in 128K 512K 1M; do
        "$LOONG" plan --quiet --platform "$TOPO/$plat.xml" --seq $seq --csv "$TMP/t.csv" -o /dev/null
        read -r same a s < <(awk -F, 'NR > 1 && $11 == "feasible" {
                cost = $14 * $4 * $5; if (best == "" || cost < bc) { bc = cost; best = $2; bsim = $15 * $4 * $5 }
                if ($1 == 1) { top = $2; tsim = $15 * $4 * $5 } }
            END { same = best == top || (bsim - tsim) / tsim < 0.001; gsub(/"/, "", best); gsub(/"/, "", top);
                  gsub(/ /, "_", best); gsub(/ /, "_", top); print same, best, top }' "$TMP/t.csv")
        printf '  %-13s S=%-5s analytical top 1 %-28s SimGrid top 1 %-28s %s\n' $plat $seq "$a" "$s" \
            "$([ "$same" = 1 ] && echo agree || echo DIFFER)"
        total=$((total + 1))
        agree=$((agree + same))
    done
done
echo "# analytical top 1 = SimGrid top 1 in $agree of $total configurations"

echo "# 3. llama3-70b, S = 512K, ZeRO-3, 256 GPUs: composed vs every layer simulated"
for mode in composed full; do
    [ $mode = full ] && [ "${RUN_FULL:-1}" = 0 ] && break
    extra=()
    [ $mode = full ] && extra=(--full-layers)
    /usr/bin/time -o "$TMP/time" -f '%e %M' "$LOONG" plan --quiet --platform "$TOPO/dgx-h100-32n.xml" \
        --model llama3-70b --seq 512K --zero 3 --global-batch 1 "${extra[@]}" --csv "$TMP/$mode.csv" -o "$TMP/$mode.txt"
    read -r w m <"$TMP/time"
    pick=$(sed -n 's/^# recommended: \([^;]*\);.*/\1/p' "$TMP/$mode.txt")
    printf '  %-8s wall %8.1f s  peak RSS %6.0f MB  recommends %s\n' $mode "$w" "$((m / 1024))" "$pick"
    echo "$w $m $pick" >"$TMP/$mode.res"
done
if [ -f "$TMP/full.res" ]; then
    read -r cw cm cp <"$TMP/composed.res"
    read -r fw fm fp <"$TMP/full.res"
    awk -v cw="$cw" -v fw="$fw" -v cm="$cm" -v fm="$fm" \
        'BEGIN { printf "# composed / full: wall %.2fx, peak RSS %.2fx\n", cw / fw, cm / fm }'
    [ "$cp" = "$fp" ] && echo "# the same recommendation" || echo "# DIFFERENT recommendations"
fi

#!/usr/bin/env bash
# How repeatable is this machine? The noise floor under the CPU validation
# loop (experiments/validate-cpu): the same configurations measured again and
# again with loong exec, interleaved, and the spread of their step times.
#   solo   1 rank, ring, 2K, attn: compute only, no message at all, so its
#          spread is the machine's own (other tenants, frequency, caches);
#   pair   2 ranks, zigzag, 4K, attn: what the loop measures (two ranks on
#          two cores, each with compute and communication threads).
# A held-out error below the pair's spread cannot be told from noise, so a
# MAPE gate on this machine is only as tight as this table.
#
# usage: experiments/cpu-noise/run.sh [--runs N] [loong]     (N default 8)
# Prints per configuration: runs, min, median, max step (ms), and
# (max - min) / min and (median - min) / min in %.
set -euo pipefail
RUNS=8
case "${1:-}" in
--runs) RUNS=${2:?--runs needs a count}; shift 2 ;;
-h | --help) sed -n '2,15p' "$0"; exit 0 ;;
esac
case "$RUNS" in '' | *[!0-9]* | 0) echo "cpu-noise: --runs takes a positive count" >&2; exit 2 ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
L=$(readlink -f "${1:-$HERE/../../build/loong}")
[ -x "$L" ] || { echo "cpu-noise: no loong at ${1:-build/loong}" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
step() { # ranks args...: the median step of one run, ms
    local np=$1
    shift
    mpirun --oversubscribe -np "$np" "$L" exec --model tiny --gpus-per-node 2 --iters 3 --warmup 1 "$@" 2>"$TMP/err" |
        sed -nE 's/^# median step ([0-9.]+) ms.*/\1/p' || { echo "cpu-noise: loong exec failed: $(head -c 300 "$TMP/err")" >&2; exit 2; }
}
for ((i = 1; i <= RUNS; i++)); do
    step 1 --mesh 1 --strategy ring --seq 2K --scope attn >>"$TMP/solo"
    step 2 --mesh 2 --strategy zigzag --seq 4K --scope attn >>"$TMP/pair"
done
printf '# %-6s %5s %10s %10s %10s %9s %9s\n' config runs min_ms median_ms max_ms spread_% median_%
for c in solo pair; do
    sort -g "$TMP/$c" | awk -v c="$c" '{v[NR] = $1} END {
        med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "  %-6s %5d %10.1f %10.1f %10.1f %9.1f %9.1f\n", c, NR, v[1], med, v[NR], 100 * (v[NR] - v[1]) / v[1], 100 * (med - v[1]) / v[1]}'
done

#!/usr/bin/env bash
# Measured overlap of communication with compute, zigzag vs loongtrain, on 4
# CPU ranks of this machine: tiny model, S = 8K, scope attn (forward and
# backward), median of 5 timed iterations after 1 warm-up. Prints each run's
# per-rank table and the hidden fraction, then both fractions side by side.
# usage: experiments/exec-overlap/run.sh [path/to/loong]
set -euo pipefail
LOONG=${1:-$(dirname "$0")/../../build/loong}
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
run() {
    mpirun --oversubscribe -np 4 "$LOONG" exec --model tiny --seq 8K --scope attn --iters 5 --warmup 1 "$@"
}
declare -A hidden step
for cfg in "zigzag:--mesh 4 --strategy zigzag" "loongtrain:--mesh 1x4 --strategy loongtrain --window 2"; do
    name=${cfg%%:*}
    out=$(run ${cfg#*:})
    echo "## $name: ${cfg#*:}"
    echo "$out" | grep -E '^#  rank|^  +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$|hidden|median'
    hidden[$name]=$(echo "$out" | sed -nE 's/.*hidden behind compute: ([0-9.]+) %.*/\1/p')
    step[$name]=$(echo "$out" | sed -nE 's/# median step ([0-9.]+) ms.*/\1/p')
done
printf '# %-11s %12s %10s\n' strategy step_ms hidden_%
for n in zigzag loongtrain; do printf '  %-11s %12s %10s\n' "$n" "${step[$n]}" "${hidden[$n]}"; done

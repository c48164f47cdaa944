#!/usr/bin/env bash
# The validation loop on this machine, end to end:
#   1. measure with `loong exec` (CPU device, 2 ranks = 2 cores) on 10
#      configurations (strategies, sizes, scopes);
#   2. calibrate compute rates and the MPI link from the first half;
#   3. predict the other half with `loong sim` on a platform describing this
#      machine (one node, one "GPU" per core, kind cpu), fitted in step 2;
#   4. compare each prediction with its measurement.
# Prints the step-time error per held-out configuration and the MAPE.
# usage: experiments/validate-cpu/run.sh [path/to/loong] [outdir]
set -euo pipefail
LOONG=$(readlink -f "${1:-$(dirname "$0")/../../build/loong}")
OUT=${2:-$(dirname "$0")/out}
TOPO=$(dirname "$0")/../../topologies
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
mkdir -p "$OUT"
COMMON="--model tiny --gpus-per-node 2"
# name|mesh and strategy|size and scope ; the first five calibrate, the rest are predicted
CONFIGS=(
  "zz-4k|--mesh 2 --strategy zigzag|--seq 4K --scope attn"
  "uly-8k|--mesh 2 --strategy ulysses|--seq 8K --scope attn"
  "ring-8k|--mesh 2 --strategy ring|--seq 8K --scope attn"
  "dual-4k|--mesh 1x2 --strategy dualring|--seq 4K --scope attn"
  "zz-step-2k|--mesh 2 --strategy zigzag|--seq 2K --scope step"
  "zz-8k|--mesh 2 --strategy zigzag|--seq 8K --scope attn"
  "uly-4k|--mesh 2 --strategy ulysses|--seq 4K --scope attn"
  "lt-8k|--mesh 1x2 --strategy loongtrain --window 1|--seq 8K --scope attn"
  "ring-4k|--mesh 2 --strategy ring|--seq 4K --scope attn"
  "uly-step-2k|--mesh 2 --strategy ulysses|--seq 2K --scope step"
)
NTRAIN=5

echo "# 1. measuring ${#CONFIGS[@]} configurations with loong exec on 2 ranks" >&2
for c in "${CONFIGS[@]}"; do
    IFS='|' read -r name layout size <<<"$c"
    mpirun --oversubscribe -np 2 "$LOONG" exec $COMMON $layout $size --iters 5 --warmup 1 \
        --trace "$OUT/$name.measured.json" >"$OUT/$name.exec.txt"
    echo "   $name: $(grep '^# median' "$OUT/$name.exec.txt")" >&2
done

echo "# 2. calibrating from the first $NTRAIN" >&2
"$LOONG" topo --nodes 1 --gpus-per-node 2 --nics-per-node 2 --gpu cpu -o "$OUT/cpu-2.xml"
cp "$TOPO/cpu.calib" "$OUT/cpu.calib"
train=()
for c in "${CONFIGS[@]:0:$NTRAIN}"; do train+=("$OUT/${c%%|*}.measured.json"); done
"$LOONG" calibrate "${train[@]}" --platform "$OUT/cpu-2.xml" -o "$OUT/fit" | tee "$OUT/calibrate.txt" >&2

echo "# 3-4. predicting the other $(( ${#CONFIGS[@]} - NTRAIN )) with loong sim and comparing" >&2
printf '# %-12s %-50s %12s %12s %9s\n' config layout measured_ms predicted_ms error_%
sum=0
n=0
for c in "${CONFIGS[@]:$NTRAIN}"; do
    IFS='|' read -r name layout size <<<"$c"
    "$LOONG" sim --platform "$OUT/fit/cpu-2.xml" $COMMON $layout $size --dtype fp32 --quiet \
        --trace "$OUT/$name.predicted.json" -o "$OUT/$name.sim.txt"
    "$LOONG" compare "$OUT/$name.predicted.json" "$OUT/$name.measured.json" >"$OUT/$name.compare.txt"
    line=$(grep '^# step time:' "$OUT/$name.compare.txt")
    pred=$(echo "$line" | sed -E 's/.*predicted ([0-9.]+) ms.*/\1/')
    meas=$(echo "$line" | sed -E 's/.*measured ([0-9.]+) ms.*/\1/')
    err=$(echo "$line" | sed -E 's/.*error ([-+0-9.]+) %.*/\1/')
    printf '  %-12s %-50s %12s %12s %9s\n' "$name" "$layout $size" "$meas" "$pred" "$err"
    sum=$(awk -v s="$sum" -v e="$err" 'BEGIN{print s + (e < 0 ? -e : e)}')
    n=$((n + 1))
done
echo "# step-time MAPE over $n held-out configurations: $(awk -v s="$sum" -v n="$n" 'BEGIN{printf "%.2f", s / n}') %"

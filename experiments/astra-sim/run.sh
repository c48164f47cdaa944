#!/usr/bin/env bash
# loong against ASTRA-sim 2.x on the same workloads: loong sim's prediction
# beside ASTRA-sim's congestion-unaware analytical backend running the
# Chakra export of the same DAG (loong dag --format chakra, with the same
# calibration table, so both time compute alike, and the network.yml and
# system.json the export writes), with each tool's wall time and peak RSS.
#
#   experiments/astra-sim/run.sh ASTRA_SIM_BIN_DIR [LOONG]
#
# ASTRA_SIM_BIN_DIR holds AstraSim_Analytical_Congestion_Unaware (built as
# ../shared/tools/astra-sim/README.md says, or any ASTRA-sim 2.x build).
# Without it the script says so and exits 0 (skipped): ASTRA-sim is never a
# dependency of loong. Output: a '#' table, kept in
# experiments/astra-sim/results.txt. Workloads:
#   1. 64 H100s, llama3-8b, one attention layer at 128K, loongtrain 8x8 w=4
#   2. 64 H100s, the same layer as a zigzag ring, 1x64 (Megatron-CP)
#   3. 256 H100s, llama3-8b, a training step at 1M, loongtrain 8x32
#   4. 64 H100s, qwen3-30b-a3b's shape at 2 blocks (qwen3-30b-a3b-2l.model),
#      a step at 32K, loongtrain 8x8 with EP 8 under zipf:1.2 routing: the
#      all-to-all-v exported as per-peer sends and receives
#   5. the same balanced with the all-gather dispatcher (collective nodes).
#   6-9. rows 2, 3, 4 and 5 exported with network.yml's NVSwitch dimension
#      first (--dimensions nvlink-first), names ending in -nv.
#      (Balanced with all-to-alls finishes too, then ASTRA-sim 518bd51 aborts
#      in its teardown: docs/dag.md, "All-to-all-v".)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-}
loong=${2:-./build/loong}
if [ -z "$bin" ] || [ ! -x "$bin/AstraSim_Analytical_Congestion_Unaware" ]; then
    echo "astra-sim: SKIP: give the directory of AstraSim_Analytical_Congestion_Unaware (see docs/dag.md, \"Running the export on ASTRA-sim\")"
    exit 0
fi
[ -x "$loong" ] || { echo "astra-sim: no loong at $loong: build it first (./setup.sh)" >&2; exit 2; }
remote=$PWD/experiments/astra-sim/remote_memory.json
out=$(mktemp -d /tmp/loong-astra-XXXXXX)
trap 'rm -rf "$out"' EXIT
results=experiments/astra-sim/results.txt

# measure NAME CMD...: run CMD, keep its wall seconds and peak RSS (MB) in $wall $rss
measure() {
    local name=$1
    shift
    /usr/bin/time -f '%e %M' -o "$out/$name.time" "$@" >"$out/$name.out" 2>"$out/$name.err" ||
        { echo "astra-sim: '$*' failed: $(tail -n 3 "$out/$name.err" | tr '\n' ' ')" >&2; exit 1; }
    read -r wall rss <"$out/$name.time"
    rss=$((rss / 1024))
}

row() { # NAME PLATFORM CONFIG...
    local name=$1 platform=$2
    shift 2
    measure "$name-sim" "$loong" sim --platform "$platform" "$@" --quiet
    local step lw=$wall lr=$rss fw=-
    step=$(sed -n 's/^# step time: \([0-9.]*\) s.*/\1/p' "$out/$name-sim.out")
    # the same with head ranks by symmetry (docs/sim.md), where the layout has them and no experts span them
    case " $* " in *" --mesh 1x"* | *" --ep "*) ;; *)
        measure "$name-fold" "$loong" sim --platform "$platform" "$@" --fold dp,head --quiet
        fw=$wall ;;
    esac
    measure "$name-dag" "$loong" dag "$@" --format chakra --platform "$platform" --calib "$(dirname "$platform")/h100.calib" \
        ${DIMS:+--dimensions "$DIMS"} -o "$out/$name-et"
    local dw=$wall
    local et=$out/$name-et
    mkdir -p "$out/$name-run"
    (cd "$out/$name-run" && measure "$name-astra" "$bin/AstraSim_Analytical_Congestion_Unaware" \
        --workload-configuration="$et/workload" --comm-group-configuration="$et/workload.json" \
        --system-configuration="$et/system.json" --remote-memory-configuration="$remote" \
        --network-configuration="$et/network.yml"
     echo "$wall $rss" >"$out/$name-astra.wr")
    read -r aw ar <"$out/$name-astra.wr"
    local ranks finished cycles
    ranks=$(find "$et" -name 'workload.*.et' | wc -l)
    finished=$(grep -c 'finished, [0-9]* cycles' "$out/$name-astra.out" || true)
    [ "$finished" -eq "$ranks" ] || { echo "astra-sim: $name: $finished of $ranks ranks finished" >&2; exit 1; }
    cycles=$(grep -o 'finished, [0-9]* cycles' "$out/$name-astra.out" | awk '{print $2}' | sort -n | tail -n 1)
    awk -v n="$name" -v s="$step" -v lw="$lw" -v lr="$lr" -v fw="$fw" -v dw="$dw" -v c="$cycles" -v aw="$aw" -v ar="$ar" 'BEGIN {
        a = c / 1e9
        printf "  %-24s %12.6f %9.2f %8d %9s %9.2f %12.6f %9.2f %8d %+8.2f\n", n, s, lw, lr, fw, dw, a, aw, ar, 100 * (a - s) / s }'
}

{
    echo "# loong sim against ASTRA-sim (congestion-unaware analytical) on loong's Chakra export; $(date -u +%Y-%m-%d), $(nproc) cores"
    echo "# loong's wall_s is every rank simulated (--fold dp); fold_s the same step with --fold dp,head (within 0.5 %: docs/sim.md)"
    echo "# workload                    loong_s   wall_s  rss_MB    fold_s  export_s     astra_s   wall_s  rss_MB  astra-loong_%"
    row "64-gpu-loongtrain-attn" topologies/dgx-h100-8n.xml --model llama3-8b --seq 128K --mesh 8x8 \
        --strategy loongtrain --window 4 --scope attn
    row "64-gpu-zigzag-attn" topologies/dgx-h100-8n.xml --model llama3-8b --seq 128K --mesh 1x64 --strategy zigzag \
        --scope attn
    row "256-gpu-1M-step" topologies/dgx-h100-32n.xml --model llama3-8b --seq 1M --mesh 8x32 --strategy loongtrain \
        --scope step
    moe=experiments/astra-sim/qwen3-30b-a3b-2l.model
    row "64-gpu-moe-a2a-v" topologies/dgx-h100-8n.xml --model $moe --seq 32K --mesh 8x8 --strategy loongtrain \
        --window 4 --ep 8 --routing zipf:1.2 --scope step
    row "64-gpu-moe-allgather" topologies/dgx-h100-8n.xml --model $moe --seq 32K --mesh 8x8 --strategy loongtrain \
        --window 4 --ep 8 --dispatcher allgather --scope step
    # the same exports with network.yml's NVSwitch dimension first (loong dag --dimensions nvlink-first):
    # ASTRA-sim's collectives then cross the rails with 1/8 of their size, as NCCL's rings do, and
    # transfers between nodes whose GPU slots differ pay NVLink (docs/dag.md, "Ranks and NPUs")
    DIMS=nvlink-first row "64-gpu-zigzag-attn-nv" topologies/dgx-h100-8n.xml --model llama3-8b --seq 128K \
        --mesh 1x64 --strategy zigzag --scope attn
    DIMS=nvlink-first row "256-gpu-1M-step-nv" topologies/dgx-h100-32n.xml --model llama3-8b --seq 1M --mesh 8x32 \
        --strategy loongtrain --scope step
    DIMS=nvlink-first row "64-gpu-moe-a2a-v-nv" topologies/dgx-h100-8n.xml --model $moe --seq 32K --mesh 8x8 \
        --strategy loongtrain --window 4 --ep 8 --routing zipf:1.2 --scope step
    DIMS=nvlink-first row "64-gpu-moe-allgather-nv" topologies/dgx-h100-8n.xml --model $moe --seq 32K --mesh 8x8 \
        --strategy loongtrain --window 4 --ep 8 --dispatcher allgather --scope step
} | tee "$results"

#!/usr/bin/env bash
# loong coll on the shipped DGX-H100 platforms: bus bandwidth of the five
# nccl-tests collectives on 1, 4 and 32 nodes (8, 32, 256 H100s) at 1 GiB and
# 8 GiB, simulated (SimGrid) with NCCL's tuner choosing algorithm and
# protocol, plus the all-reduce on 4 nodes with the ring forced (what NVIDIA
# asks for when checking a network) and the wall time of each run. Writes
# results.csv next to this script and prints the table.
# usage: experiments/coll/run.sh [path/to/loong]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOPO=$HERE/../../topologies
LOONG=${1:-$HERE/../../build/loong}
csv=$HERE/results.csv
echo "nodes,gpus,op,forced,size_B,time_us,algbw_GBps,busbw_GBps,algo,proto,wall_s" >"$csv.tmp"
run() { # nodes op extra...
    local n=$1 op=$2; shift 2
    local t0 t1 out
    t0=$(date +%s.%N)
    out=$("$LOONG" coll --platform "$TOPO/dgx-h100-${n}n.xml" --op "$op" -b 1G -e 8G -f 8 "$@")
    t1=$(date +%s.%N)
    echo "$out" | awk -v n="$n" -v op="$op" -v f="${*:-auto}" -v w="$(echo "$t1 - $t0" | bc -l)" \
        '!/^#/ && NF >= 15 {printf "%d,%d,%s,%s,%s,%s,%s,%s,%s,%s,%.2f\n", n, 8 * n, op, f, $1, $6, $7, $8, $14, $15, w}' \
        >>"$csv.tmp"
}
for n in 1 4 32; do
    for op in all_reduce all_gather reduce_scatter alltoall sendrecv; do
        run "$n" "$op"
    done
done
run 4 all_reduce --nccl-algo ring
run 32 all_reduce --nccl-algo ring
mv "$csv.tmp" "$csv"
printf '# %5s %5s %-15s %-22s %11s %11s %6s %6s %7s\n' nodes GPUs op forced size_B busbw_GB/s algo proto wall_s
tail -n +2 "$csv" | awk -F, '{printf "  %5d %5d %-15s %-22s %11s %11s %6s %6s %7s\n", $1, $2, $3, $4, $5, $8, $9, $10, $11}'

#!/usr/bin/env bash
# The shape of the seed's two evaluation tables, regenerated from loong's own
# predictions (never from the seed's numbers):
# loongtrain here means a real double ring: 2D, zigzag, 1 < w < P_s.
#   1. MFU against sequence length (32K, 128K, 512K, 1M) for the best Ulysses,
#      ring (zigzag, Megatron-CP) and loongtrain (2D, double ring) layouts on
#      64 H100s (dgx-h100-8n) with llama3-8b;
#   2. aggregate TFLOP/s and speedup over ring at 512K on 32, 64, 128 and 256
#      H100s (dgx-h100-{4,8,16,32}n).
# "Best" per family is loong plan's analytical choice (highest tokens/s/GPU)
# with every GPU in one context-parallel group (dp = 1), as in the seed's
# tables; Ulysses cannot use more than H = 32 GPUs on one sample, so it gets
# dp = GPUs/32 replicas of 32x1 (its throughput per GPU is what compares);
# each chosen layout is then simulated with SimGrid, one CP group of
# P_h x P_s GPUs, 1- and 2-layer runs composed to 32 layers (ZeRO-1; README,
# "loong plan"). Defaults of loong plan: ZeRO-1, selective recompute, 80 GB.
# Writes mfu_vs_seq.csv, scaling_512k.csv and two PNGs (gnuplot) here.
# usage: experiments/seed-tables/run.sh [path/to/loong]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LOONG=${1:-$HERE/../../build/loong}
TOPO=$HERE/../../topologies
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
L=32

# model FLOPs of one llama3-8b step (stats.h): L(6 S W + 6 S^2 H d) + 6 S hid vocab
model_flops() { awk -v S="$1" -v L=$L 'BEGIN { printf "%.6e", L*(6*S*218103808 + 6*S*S*32*128) + 6*S*4096*128256 }'; }

# best FAMILY SEQ PLATFORM: "p_head p_seq placement partition ring window dp layout" of the best layout
best() {
    local fam=$1 seq=$2 plat=$3 gpus=$4 dp=1
    [ "$fam" = ulysses ] && [ "$gpus" -gt 32 ] && dp=$((gpus / 32))
    "$LOONG" plan --quiet --platform "$plat" --seq "$seq" --dp $dp --top 0 --csv "$TMP/plan.csv" -o /dev/null
    awk -F, -v fam="$fam" 'NR > 1 && $11 == "feasible" {
        u = $5 == 1 && $4 > 1; r = $4 == 1 && $7 == "zigzag" && $8 == "single"; l = $4 > 1 && $5 > 1 && $8 == "double" && $9 > 1;
        if ((fam == "ulysses" && u) || (fam == "ring" && r) || (fam == "loongtrain" && l)) {
            gsub(/"/, "", $2); print $4, $5, $6, $7, $8, $9, $3, $2; exit } }' "$TMP/plan.csv"
}

# simulate PLATFORM SEQ PH PS PLACEMENT PARTITION RING WINDOW: composed step seconds
simulate() {
    local plat=$1 seq=$2 ph=$3 ps=$4 pl=$5 pa=$6 ri=$7 w=$8 t=()
    for layers in 1 2; do
        "$LOONG" sim --quiet --platform "$plat" --model llama3-8b --seq "$seq" --scope step --recompute sc++ \
            --mesh "${ph}x${ps}" --strategy usp --placement "$pl" --partition "$pa" --ring "$ri" --window "$w" \
            --layers $layers --json "$TMP/sim.json" -o /dev/null
        t+=("$(sed -nE 's/.*"step_s": ?([0-9.eE+-]+).*/\1/p' "$TMP/sim.json")")
    done
    awk -v a="${t[0]}" -v b="${t[1]}" -v L=$L 'BEGIN { printf "%.6f", a + (L - 1) * (b - a) }'
}

seqnum() { case $1 in *K) echo $((${1%K} * 1024)) ;; *M) echo $((${1%M} * 1048576)) ;; *) echo "$1" ;; esac; }

echo "family,seq,tokens,layout,dp,p_head,p_seq,step_s,mfu_pct" >"$HERE/mfu_vs_seq.csv"
for seq in 32K 128K 512K 1M; do
    for fam in ulysses ring loongtrain; do
        read -r ph ps pl pa ri w dp name < <(best $fam $seq "$TOPO/dgx-h100-8n.xml" 64) || continue
        t=$(simulate "$TOPO/dgx-h100-8n.xml" $seq "$ph" "$ps" "$pl" "$pa" "$ri" "$w")
        S=$(seqnum $seq)
        mfu=$(awk -v f="$(model_flops "$S")" -v t="$t" -v P=$((ph * ps)) 'BEGIN { printf "%.2f", 100 * f / (t * P * 989e12) }')
        echo "$fam,$seq,$S,$name,$dp,$ph,$ps,$t,$mfu" | tee -a "$HERE/mfu_vs_seq.csv"
    done
done

echo "gpus,family,layout,dp,p_head,p_seq,step_s,aggregate_TFLOPs,speedup_vs_ring" >"$HERE/scaling_512k.csv"
S=$(seqnum 512K)
for nodes in 4 8 16 32; do
    plat=$TOPO/dgx-h100-${nodes}n.xml gpus=$((nodes * 8)) ring_agg=
    for fam in ring ulysses loongtrain; do
        read -r ph ps pl pa ri w dp name < <(best $fam 512K "$plat" $gpus) || continue
        t=$(simulate "$plat" 512K "$ph" "$ps" "$pl" "$pa" "$ri" "$w")
        agg=$(awk -v f="$(model_flops "$S")" -v t="$t" -v dp="$dp" 'BEGIN { printf "%.1f", dp * f / t / 1e12 }')
        [ "$fam" = ring ] && ring_agg=$agg
        sp=$(awk -v r="$ring_agg" -v a="$agg" 'BEGIN { printf "%.3f", a / r }')  # throughput ratio
        echo "$gpus,$fam,$name,$dp,$ph,$ps,$t,$agg,$sp" | tee -a "$HERE/scaling_512k.csv"
    done
done

gnuplot <<GP
set terminal pngcairo size 800,500
set datafile separator ","
set key top left
set grid
set output "$HERE/mfu_vs_seq.png"
set title "llama3-8b on 64 H100s (dgx-h100-8n): predicted MFU (SimGrid, loong's H100 table)"
set xlabel "sequence length (tokens)"; set ylabel "MFU (%)"; set logscale x 2; set yrange [0:*]
plot for [f in "ulysses ring loongtrain"] "$HERE/mfu_vs_seq.csv" using (strcol(1) eq f ? \$3 : NaN):9 with linespoints title f
set output "$HERE/scaling_512k.png"
set title "llama3-8b at S = 512K: predicted aggregate TFLOP/s (SimGrid)"
set xlabel "GPUs"; set ylabel "aggregate TFLOP/s"
plot for [f in "ring ulysses loongtrain"] "$HERE/scaling_512k.csv" using (strcol(2) eq f ? \$1 : NaN):8 with linespoints title f
GP
echo "wrote $HERE/{mfu_vs_seq,scaling_512k}.{csv,png}"

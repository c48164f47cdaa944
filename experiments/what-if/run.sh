#!/usr/bin/env bash
# What-if on 256 H100s (topologies/dgx-h100-32n.xml, llama3-8b, ZeRO-1,
# selective recompute): `loong plan --robust --top 5` at S = 128K and 1M.
# The five best layouts of the clean ranking, and the two baselines the
# planner always simulates (the best pure ring and pure Ulysses), are
# simulated clean and under each named perturbation: the worst straggler of
# ranks 0 and P-1 (kernels x1.25), the worst of node0-nic0 and the last
# GPU's NIC at half speed, 5 % jitter.
#
# Writes here: plan-128K.txt, plan-1M.txt (the planner's tables),
# plan-*.csv, results.csv (clean vs perturbed step of every simulated
# layout) and slowdown.png (gnuplot), and prints the cost of --robust
# against the clean simulations of the same run.
# usage: experiments/what-if/run.sh [path/to/loong]   (all, ~4 min on 2 cores)
#        experiments/what-if/run.sh --tables          (results.csv and the PNG from plan-*.csv)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PLATFORM=$HERE/../../topologies/dgx-h100-32n.xml

plans() {
    local loong=$1 S start end
    for S in 128K 1M; do
        start=$(date +%s.%N)
        "$loong" plan --platform "$PLATFORM" --seq $S --top 5 --robust --quiet --csv "$HERE/plan-$S.csv" \
            -o "$HERE/plan-$S.txt"
        end=$(date +%s.%N)
        echo "S=$S: $(grep "^# time: --robust" "$HERE/plan-$S.txt" | cut -c9-); whole plan" \
            "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s"
    done
}

# Every simulated layout of the two plans (plan_write.c's CSV columns).
tables() {
    local S
    echo "seq,rank,layout,set,clean_s,straggler_s,straggler_on,slow_nic_s,slow_nic_on,jitter_s,worst_s,straggler_pct,slow_nic_pct,jitter_pct,worst_pct" >"$HERE/results.csv.tmp"
    for S in 128K 1M; do
        awk -F, -v S=$S 'NR > 1 && $11 == "feasible" && $13 == "sim" {
            gsub(/"/, "", $2); c = $15
            printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%.2f,%.2f,%.2f,%.2f\n", S, $1, $2, $1 <= 5 ? "top5" : "baseline",
                c, $25, $26, $27, $28, $29, $30, 100 * ($25 / c - 1), 100 * ($27 / c - 1), 100 * ($29 / c - 1),
                100 * ($30 / c - 1) }' "$HERE/plan-$S.csv" >>"$HERE/results.csv.tmp"
    done
    mv "$HERE/results.csv.tmp" "$HERE/results.csv"
    column -s, -t "$HERE/results.csv"
    grep -h "^# recommended\|^# tie: [0-9]\|^# tie: the\|^# robust: [bdt]" "$HERE"/plan-128K.txt "$HERE"/plan-1M.txt
    gnuplot <<GP
set terminal pngcairo size 1200,560
set datafile separator ","
set output "$HERE/slowdown.png.tmp"
set multiplot layout 1,2 title "llama3-8b on 256 H100s (dgx-h100-32n): step slowdown under each perturbation (loong plan --robust)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "slowdown vs clean step (%)"
set yrange [0:105]
set grid ytics
set xtics rotate by -30 font ",8"
set key top left font ",9" opaque
do for [s in "128K 1M"] {
  set title "S = ".s.": top five, then the baselines"
  plot "< grep '^".s.",' $HERE/results.csv" using 12:xtic(3) title "straggler x1.25", \
       "" using 13 title "NIC at half speed", "" using 14 title "5 % jitter"
}
unset multiplot
GP
    mv "$HERE/slowdown.png.tmp" "$HERE/slowdown.png"
    echo "wrote $HERE/results.csv and slowdown.png"
}

if [ "${1:-}" = --tables ]; then
    tables
else
    plans "${1:-$HERE/../../build/loong}"
    tables
fi

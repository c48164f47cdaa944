#!/usr/bin/env bash
# Llama 3 405B's layout on a laptop: one training step of llama3-405b at
# S = 131,072 on 16,384 H100s, TP 8 x CP 16 x PP 16 x DP 8 (Dubey et al.
# 2024, section 3.3.2: context parallelism by all-gather, 126 layers over 16
# stages as 7, 8 x 14, 7; a global batch of 16M tokens: 128 samples, so
# m = 16 micro-batches of one sample per pipeline), 1F1B, ZeRO-1, on
# `loong topo --preset superpod --nodes 2048` (2,048 DGX H100 nodes, DGX
# SuperPOD's three-tier rail fabric), the data-parallel replicas by
# symmetry, the TP ranks by symmetry too (--tp-mode symmetric), and again
# with every TP rank simulated (--tp-mode full; FULL=0 skips it, ~3.5 min).
# Beside it, in the same run: the 256-GPU llama3-8b step (S = 1M,
# mesh 8x8 loongtrain, dp 4, ZeRO-1) on the 32-node H100 platform, and the
# five-dimensional plan of llama3-405b at 131K on the 16,384 GPUs
# (`loong plan --pp auto`, analytical: --top 0), and the same plan with its
# top 3 simulated (--top 3: TP, head and ring ranks by symmetry,
# docs/sim.md; PLANTOP=0 skips it, ~3 min). And the 405B step with a
# zigzag ring for CP in place of the all-gather (--ring single), TP
# folded, with every ring rank simulated and with the ring ranks by
# symmetry (--fold dp,tp,seq; RING=0 skips both, ~20 s). Wall seconds and
# peak RSS (/usr/bin/time) of each, and their ratios to the 8B step.
# Goals (the pipeline issue): the step in <= 60 s and <= 8 GB; the plan in
# <= 120 s. The simulation-speed issue: its top 3 confirmed in <= 5 min;
# the ring step <= 20 s and <= 2 GB, and no dearer than the all-gather's.
# usage: experiments/pp-scale/run.sh [LOONG]   (default build/loong)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
L=${1:-$TOP/build/loong}
[ -x "$L" ] || { echo "pp-scale: no loong at $L (build first)" >&2; exit 2; }
T=$(mktemp -d /tmp/loong-pp-scale-XXXXXX)
trap 'rm -rf "$T"' EXIT
CAL=$TOP/topologies/h100.calib

# wall_s rss_MB of "$@" (its stdout to $T/out)
timed() {
    /usr/bin/time -o "$T/time" -f '%e %M' "$@" >"$T/out"
    awk '{printf "%s %.0f\n", $1, $2 / 1024}' "$T/time"
}

"$L" topo --preset superpod --nodes 2048 -o "$T/sp2048.xml"
grep -o '2048 nodes x 8 h100 GPUs[^.]*' "$T/sp2048.xml" | head -1 | sed 's/^/# platform: /'

read -r w8 m8 < <(timed "$L" sim --platform "$TOP/topologies/dgx-h100-32n.xml" --calib "$CAL" --model llama3-8b \
    --seq 1M --mesh 8x8 --strategy loongtrain --window 4 --dp 4 --zero 1 --quiet --links 0)
s8=$(sed -n 's/^# step time: \([0-9.]*\) s.*/\1/p' "$T/out")

L405="--model llama3-405b --seq 128K --tp 8 --mesh 1x16 --strategy ring --ring allgather --partition zigzag --pp 16
    --pp-first-layers 7 --pp-last-layers 7 --micro-batches 16 --dp 8 --zero 1"
# shellcheck disable=SC2086
read -r w405 m405 < <(timed "$L" sim --platform "$T/sp2048.xml" --calib "$CAL" $L405 --tp-mode symmetric --quiet \
    --links 0)
s405=$(sed -n 's/^# step time: \([0-9.]*\) s.*/\1/p' "$T/out")
mfu405=$(sed -n 's/^# MFU: \([0-9.]*\) %.*/\1/p' "$T/out")
tasks=$("$L" dag --model llama3-405b --seq 128K --tp 8 --mesh 1x16 --strategy ring --ring allgather \
    --partition zigzag --pp 16 --pp-first-layers 7 --pp-last-layers 7 --micro-batches 16 --dp 8 --zero 1 |
    sed -n 's/^# \([0-9]*\) tasks on.*/\1/p')

if [ "${FULL:-1}" = 1 ]; then # the same step with every TP rank simulated
    # shellcheck disable=SC2086
    read -r wf mf < <(timed "$L" sim --platform "$T/sp2048.xml" --calib "$CAL" $L405 --tp-mode full --quiet --links 0)
    sf=$(sed -n 's/^# step time: \([0-9.]*\) s.*/\1/p' "$T/out")
fi

if [ "${RING:-1}" = 1 ]; then # the zigzag ring in place of the all-gather, every ring rank, then by symmetry
    RING405="${L405/--ring allgather/--ring single}"
    # shellcheck disable=SC2086
    read -r wr mr < <(timed "$L" sim --platform "$T/sp2048.xml" --calib "$CAL" $RING405 --fold dp,tp --quiet --links 0)
    sr=$(sed -n 's/^# step time: \([0-9.]*\) s.*/\1/p' "$T/out")
    # shellcheck disable=SC2086
    read -r wrs mrs < <(timed "$L" sim --platform "$T/sp2048.xml" --calib "$CAL" $RING405 --fold dp,tp,seq --quiet \
        --links 0)
    srs=$(sed -n 's/^# step time: \([0-9.]*\) s.*/\1/p' "$T/out")
fi

read -r wp mp < <(timed "$L" plan --platform "$T/sp2048.xml" --calib "$CAL" --model llama3-405b --seq 128K \
    --pp auto --top 0 --quiet)
npl=$(sed -n 's/^# \([0-9]*\) layouts enumerated.*/\1/p' "$T/out")
best=$(awk '/^ +1 /{print $2, $3, $4, $5, $6, $7, $8, $9; exit}' "$T/out")

if [ "${PLANTOP:-1}" = 1 ]; then # the same plan, its top 3 simulated
    read -r wt mt < <(timed "$L" plan --platform "$T/sp2048.xml" --calib "$CAL" --model llama3-405b --seq 128K \
        --pp auto --top 3 --quiet)
    top3=$(awk '$1 ~ /^[123]$/ && / sim / {n++} END {print n + 0}' "$T/out")
    sym=$(sed -n 's/^# symmetry: //p' "$T/out")
fi

printf '# %-58s %10s %8s %9s %12s\n' run wall_s RSS_MB wall_x predicted
printf '  %-58s %10s %8s %9s %12s\n' "llama3-8b S=1M 8x8 x dp 4 (256 GPUs), 32 nodes" "$w8" "$m8" 1.00 "${s8} s"
printf '  %-58s %10s %8s %9.2f %12s\n' "llama3-405b S=128K tp8 x 1x16 x pp16 x dp8, --tp-mode symmetric" "$w405" "$m405" \
    "$(awk -v a="$w405" -v b="$w8" 'BEGIN {print a / b}')" "${s405} s"
[ "${FULL:-1}" = 1 ] && printf '  %-58s %10s %8s %9.2f %12s\n' "the same, --tp-mode full (every TP rank simulated)" \
    "$wf" "$mf" "$(awk -v a="$wf" -v b="$w8" 'BEGIN {print a / b}')" "${sf} s"
[ "${RING:-1}" = 1 ] && printf '  %-58s %10s %8s %9.2f %12s\n' "the same, zigzag ring (--ring single), --fold dp,tp" \
    "$wr" "$mr" "$(awk -v a="$wr" -v b="$w8" 'BEGIN {print a / b}')" "${sr} s"
[ "${RING:-1}" = 1 ] && printf '  %-58s %10s %8s %9.2f %12s\n' "the zigzag ring, --fold dp,tp,seq (ring ranks too)" \
    "$wrs" "$mrs" "$(awk -v a="$wrs" -v b="$w8" 'BEGIN {print a / b}')" "${srs} s"
printf '  %-58s %10s %8s %9.2f %12s\n' "loong plan --pp auto, llama3-405b S=128K, 16384 GPUs" "$wp" "$mp" \
    "$(awk -v a="$wp" -v b="$w8" 'BEGIN {print a / b}')" "$npl layouts"
[ "${PLANTOP:-1}" = 1 ] && printf '  %-58s %10s %8s %9.2f %12s\n' "the same plan, --top 3" "$wt" "$mt" \
    "$(awk -v a="$wt" -v b="$w8" 'BEGIN {print a / b}')" "$top3 of 3 sim"
[ "${PLANTOP:-1}" = 1 ] && echo "# the plan's symmetry: ${sym:-none named}"
echo "# the 405B step: $tasks tasks in one replica, MFU $mfu405 %; the plan's best: $best"

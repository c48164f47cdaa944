#!/usr/bin/env bash
# What a simulation costs against the size of the platform it runs on: one
# tiny 8-GPU attention layer (--model tiny --seq 8K --mesh 2x4 --strategy usp
# --scope attn), the same work on every row, on H100 platforms that loong
# topo writes for 8 .. 2048 nodes, under DijkstraCache routing (a route
# computed on first use, once per source: what loong topo writes above 32
# nodes) and, up to FLOYD_MAX nodes, the same file under Floyd routing (all
# pairs at load time, cubic: what it writes up to 32 nodes), and on the
# DGX SuperPOD fabric (--preset superpod: rail units of 32 nodes, three
# tiers above 256 nodes). Then the 4096-GPU llama3-70b step
# (8x8 loongtrain x dp 64, ZeRO-3, selective recompute, S = 1M) on the
# 512-node platform, the other replicas by symmetry. Best of N runs; wall is
# the whole process, peak RSS from /usr/bin/time; the platform file's size.
# Goals (the platform-scale issue): 2048 nodes in <= 2 s and <= 500 MB; the
# 4096-GPU step on 512 nodes in <= 5 s.
# usage: experiments/platform-scale/run.sh [path/to/loong] [runs]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LOONG=${1:-$HERE/../../build/loong}
RUNS=${2:-3}
FLOYD_MAX=${FLOYD_MAX:-256}
CAL=$HERE/../../topologies/h100.calib
T=$(mktemp -d /tmp/loong-platform-scale-XXXXXX)
trap 'rm -rf "$T"' EXIT
# best wall and its RSS of RUNS runs of "$@": prints "wall_s rss_MB"
best() {
    local b="" r
    for _ in $(seq "$RUNS"); do
        /usr/bin/time -o "$T/time" -f '%e %M' "$@" >/dev/null
        r=$(cat "$T/time")
        if [ -z "$b" ] || awk "BEGIN{exit !(${r%% *} < ${b%% *})}"; then b=$r; fi
    done
    awk -v w="${b%% *}" -v m="${b##* }" 'BEGIN {printf "%s %.0f\n", w, m / 1024}'
}
SIM8="--calib $CAL --model tiny --seq 8K --mesh 2x4 --strategy usp --scope attn --quiet --links 0"
printf '# %6s %6s %9s %10s %9s %10s %9s %11s %10s\n' nodes GPUs file_MB wall_s RSS_MB floyd_s floyd_MB superpod_s superpod_MB
for n in 8 64 128 256 512 1024 2048; do
    "$LOONG" topo --nodes "$n" --gpu h100 -o "$T/p.xml"
    mb=$(awk -v b="$(stat -c %s "$T/p.xml")" 'BEGIN {printf "%.2f", b / 1e6}')
    sed 's/routing="Floyd"/routing="DijkstraCache"/' "$T/p.xml" >"$T/d.xml"
    read -r w m < <(best "$LOONG" sim --platform "$T/d.xml" $SIM8)
    fw=- fm=-
    if [ "$n" -le "$FLOYD_MAX" ]; then
        sed 's/routing="DijkstraCache"/routing="Floyd"/' "$T/d.xml" >"$T/f.xml"
        read -r fw fm < <(best "$LOONG" sim --platform "$T/f.xml" $SIM8)
    fi
    "$LOONG" topo --preset superpod --nodes "$n" -o "$T/r.xml"
    read -r rw rm < <(best "$LOONG" sim --platform "$T/r.xml" $SIM8)
    printf '  %6d %6d %9s %10s %9s %10s %9s %11s %10s\n' "$n" $((n * 8)) "$mb" "$w" "$m" "$fw" "$fm" "$rw" "$rm"
done
"$LOONG" topo --nodes 512 --gpu h100 -o "$T/p.xml"
read -r w m < <(best "$LOONG" sim --platform "$T/p.xml" --calib "$CAL" --model llama3-70b --seq 1M --mesh 8x8 \
    --strategy loongtrain --window 4 --scope step --zero 3 --recompute sc++ --dp 64 --quiet --links 0)
echo "# llama3-70b S=1M 8x8 loongtrain x dp 64 (4096 GPUs), ZeRO-3, selective, 512-node platform: $w s, $m MB"

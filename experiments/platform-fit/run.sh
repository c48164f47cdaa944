#!/usr/bin/env bash
# The shipped platforms fitted to published nccl-tests logs, and how far
# every published log lands on the datasheet and on the fitted platforms.
#
#   experiments/platform-fit/run.sh [--write] [path/to/loong]
#
# For each of the 11 shipped platforms NAME (topologies/):
#   1. NAME-datasheet.xml: `loong topo` with the datasheet figures, the
#      command NAME.xml was made with before the fit (its loong_origin);
#   2. NAME.xml: `loong calibrate --nccl-tests` of NAME-datasheet.xml from
#      the logs logs.txt marks `fit` for its GPU kind; H100 with --hold
#      nic_bw,nvlink_bw: on 2 nodes NCCL runs NVLSTree, which loong does
#      not model, and the fit would otherwise raise the NIC above its 400
#      Gb/s line rate (56.9 GB/s), and NVLink above its 450 GB/s (546
#      GB/s, once rings ride NCCL's 0.824 of it), to reach those figures.
#   3. <gpu>.fit, one per GPU kind: the fitted link and NCCL values of
#      that kind's platforms (every size fits the same values), which
#      `loong topo --gpu KIND` applies over the datasheet by default;
#      a100-pcie.fit from SimuMax's measured collectives (a100-pcie.sh).
# Without --write all go to experiments/platform-fit/out/ and are compared
# with topologies/ (exit 1 when they differ: the shipped files are this
# script's output); with --write they replace topologies/.
# Then one table: every log of logs.txt, its role (fit residual or
# validation, never both), and the mean and largest |error| of the time per
# size on the datasheet and the fitted platform (loong coll --compare).
set -euo pipefail
WRITE=0
[ "${1:-}" = --write ] && { WRITE=1; shift; }
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
LOONG=$(readlink -f "${1:-$TOP/build/loong}")
[ -x "$LOONG" ] || { echo "platform-fit: no loong at ${1:-build/loong}" >&2; exit 2; }
LOGS=tests/data/nccl-tests/published
OUT=experiments/platform-fit/out
cd "$TOP"
rm -rf "$OUT" && mkdir -p "$OUT/topologies" "$OUT/fitted"

logs_of() { awk -v g="$1" '$1 == "fit" && $2 == g { printf "%s/%s.log ", "'$LOGS'", $4 }' "$HERE/logs.txt"; }
# NAME and the arguments of its datasheet loong_origin (without -o)
PLATFORMS=(
    "dgx-h100-1n|--nodes 1 --gpu h100" "dgx-h100-4n|--nodes 4 --gpu h100" "dgx-h100-8n|--nodes 8 --gpu h100"
    "dgx-h100-16n|--nodes 16 --gpu h100" "dgx-h100-32n|--nodes 32 --gpu h100"
    "a100-1n-4nic|--nodes 1 --gpu a100 --nics-per-node 4" "a100-1n-8nic|--nodes 1 --gpu a100 --nics-per-node 8"
    "a100-4n-4nic|--nodes 4 --gpu a100 --nics-per-node 4" "a100-4n-8nic|--nodes 4 --gpu a100 --nics-per-node 8"
    "a100-8n-4nic|--nodes 8 --gpu a100 --nics-per-node 4" "a100-8n-8nic|--nodes 8 --gpu a100 --nics-per-node 8"
)
for entry in "${PLATFORMS[@]}"; do
    name=${entry%%|*} args=${entry#*|}
    gpu=h100 hold="--hold nic_bw,nvlink_bw"
    case $name in a100-*) gpu=a100 hold="" ;; esac
    # the datasheet platform, by the command the shipped one was made with
    (cd "$OUT" && "$LOONG" topo --datasheet $args -o "topologies/$name.xml" >/dev/null)
    mv "$OUT/topologies/$name.xml" "$OUT/$name-datasheet.xml"
    cp "$OUT/$name-datasheet.xml" "$OUT/topologies/$name-datasheet.xml"
    # the fitted platform, from it
    (cd "$OUT" && "$LOONG" calibrate --nccl-tests $(logs_of $gpu | sed "s|$LOGS|../../../$LOGS|g") \
        --platform "topologies/$name-datasheet.xml" -o fitted $hold >"fit-$name.txt")
    mv "$OUT/fitted/$name-datasheet.xml" "$OUT/$name.xml"
done
rm -rf "$OUT/topologies" "$OUT/fitted"
# a GPU kind's fitted values, from one of its fitted platforms
fit_file() { # gpu platform
    echo "# loong topo --gpu $1's fitted link and NCCL values: loong calibrate --nccl-tests of the datasheet"
    echo "# platform on the published logs experiments/platform-fit/logs.txt marks 'fit' for $1 (the values"
    echo "# topologies/$2.xml carries). Written by experiments/platform-fit/run.sh --write."
    echo "gpu = $1"
    grep -o 'loong_spec" value="[^"]*' "$OUT/$2.xml" | tr ' ' '\n' |
        awk -F= '$1 ~ /^(nvlink_bw|nic_bw|nvlink_lat|nic_lat|uplink_lat|ll_eff|ll128_eff|tree_eff|nvls_eff)$/ { print $1 " = " $2 }'
}
fit_file h100 dgx-h100-8n >"$OUT/h100.fit"
fit_file a100 a100-8n-8nic >"$OUT/a100.fit"
echo "# the fits (one per GPU kind; every size of a kind fits the same values)"
sed -n '/^# loong calibrate/,$p' "$OUT/fit-dgx-h100-8n.txt" | grep -v '^# wrote'
sed -n '/^# loong calibrate/,$p' "$OUT/fit-a100-8n-8nic.txt" | grep -v '^# wrote'
differ=0
for entry in "${PLATFORMS[@]}"; do
    name=${entry%%|*}
    for f in "$name.xml" "$name-datasheet.xml"; do
        if [ $WRITE -eq 1 ]; then cp "$OUT/$f" "topologies/$f"
        elif ! cmp -s "$OUT/$f" "topologies/$f"; then echo "# differs from the shipped one: topologies/$f"; differ=1; fi
    done
done
experiments/platform-fit/a100-pcie.sh >"$OUT/a100-pcie.fit" # from SimuMax's measured collectives, no log
for f in h100.fit a100.fit a100-pcie.fit; do
    if [ $WRITE -eq 1 ]; then cp "$OUT/$f" "topologies/$f"
    elif ! cmp -s "$OUT/$f" "topologies/$f"; then echo "# differs from the shipped one: topologies/$f"; differ=1; fi
done

# mean and largest |error| of one log on one platform
errs() {
    "$LOONG" coll --platform "$1" --compare "$2" |
        awk '!/^#/ && NF >= 6 { e = $6 < 0 ? -$6 : $6; s += e; n++; if (e > m) m = e } END { printf "%6.1f %6.1f", s / n, m }'
}
echo "# every published log: mean and largest |error| of the time per size (%), datasheet -> fitted platform"
printf "#%-11s %-13s %-64s %6s %6s   %6s %6s\n" role platform log ds_mean ds_max fit_mean fit_max
while read -r role gpu plat log; do
    case $role in '#'* | '') continue ;; esac
    printf " %-11s %-13s %-64s %s   %s\n" "$role" "$plat" "$log" "$(errs "$OUT/$plat-datasheet.xml" "$LOGS/$log.log")" \
        "$(errs "$OUT/$plat.xml" "$LOGS/$log.log")"
done <"$HERE/logs.txt"
[ $WRITE -eq 1 ] && echo "# wrote topologies/: the fitted platforms, their -datasheet twins and the <gpu>.fit values"
exit $differ

# shellcheck shell=bash
# Sourced by the experiments of SimuMax's B200 release (simumax-b200,
# simumax-b200-dense, simumax-b200-moe): their common arguments and
# platform.
#
# b200_server WHO [LOONG [CALIB]]: sets L (default build/loong) and CALIB
# (default topologies/b200.calib), refusing either when unusable (exit 2,
# naming WHO), TMP (a directory removed on exit) and writes $TMP/b200.xml,
# one 8-GPU B200 node of `loong topo --gpu b200`. Needs TOP set.
b200_server() {
    local who=$1
    L=${2:-$TOP/build/loong}
    CALIB=${3:-$TOP/topologies/b200.calib}
    [ -x "$L" ] || { echo "$who: no loong at $L (build first)" >&2; exit 2; }
    [ -r "$CALIB" ] || { echo "$who: cannot read the calibration table $CALIB" >&2; exit 2; }
    TMP=$(mktemp -d)
    trap 'rm -rf "$TMP"' EXIT
    "$L" topo --gpu b200 -o "$TMP/b200.xml"
}

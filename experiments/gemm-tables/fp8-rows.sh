#!/usr/bin/env bash
# FP8 GEMM shape rows (`gemm shape fp8 M N K EFF`, docs/sim.md) from XLA's
# measured table (xla-b1.txt): EFF = the f8e4m3fn x f8e4m3fn -> bf16 dot's
# FLOP/s over the GPU's dense FP8 peak, 4 significant digits.
#
#   experiments/gemm-tables/fp8-rows.sh KEY PEAK     e.g. sm_100 4.5e15
#
# A key whose FP8 figures exceed PEAK anywhere is refused (exit 1) and the
# offending shapes printed: a dot faster than the hardware's dense peak is
# not a measurement loong can use. sm_90 is refused against the H100's
# 1979 TFLOP/s (its 4096^3 FP8 dot reads 2424 TFLOP/s, 1.22 x the peak,
# while the same table's bf16 4096^3 reads 780, 0.79 of 989), so the H100
# and H200 tables keep no FP8 rows.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 2 ] || { echo "usage: $0 KEY PEAK_FLOPS (e.g. sm_100 4.5e15)" >&2; exit 2; }
awk -v key="$1" -v peak="$2" '
$1 == key && !/^#/ { n++; e = $6 / peak; m[n] = $2; nn[n] = $3; k[n] = $4; eff[n] = e; if (e > 1) bad = bad sprintf("  %s %s %s: %.3f of the peak\n", $2, $3, $4, e) }
END {
    if (!n) { print "fp8-rows: no entries for " key > "/dev/stderr"; exit 2 }
    if (bad != "") { printf "fp8-rows: %s FP8 dots faster than the peak %s:\n%s", key, peak, bad > "/dev/stderr"; exit 1 }
    for (i = 1; i <= n; i++) printf "gemm shape fp8 %s %s %s %.4g\n", m[i], nn[i], k[i], eff[i]
}' "$HERE/xla-b1.txt"

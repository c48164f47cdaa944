#!/usr/bin/env bash
# SimuMax's published B200 runs with all-to-all context parallelism against
# loong's prediction, in time and memory (github.com/MooreThreads/SimuMax
# docs/b200/b200_release_v1.2_summary.md at 1b8ca90 and its .json at
# e691807, "CP long-seq" rows): Megatron-LM with Transformer Engine 2.11 on
# one 8-GPU B200 server, bf16 (system configs/system/b200_bf16_ceperm.json),
# Llama3-70B cut to 12 layers and Llama 3.1 405B cut to 4, TP x CP = 8 with
# TE's all-to-all CP (cp_comm_type a2a: Ulysses over the CP ranks; loong:
# --mesh CPx1 --strategy ulysses inside each TP rank's heads), pp 1, dp 1,
# 4 micro-batches of one sample of 32K or 128K tokens, cross-entropy fusion
# ("_cef"). Published: "real_ms", the measured step (steady iterations 2-3,
# rank 7), "real_alloc_gib" (torch max_allocated) and "real_reserved_gib"
# (torch max_reserved), against loong's step time and its allocated and
# reserved peaks in GiB.
#
# Assumed where the summary is silent, as SimuMax's A100 strategies set it
# (experiments/simumax-published): sequence parallelism with TP, ZeRO-1
# (the distributed optimizer, sharded over CP x DP as Megatron does), no
# recomputation, fp32 gradient accumulation.
#
# Not rows here: the DeepSeek-V2/V3 rows (experiments/simumax-b200-moe),
# the rows without CP (experiments/simumax-b200-dense), the VPP and
# DeepSeek-V2 CP rows (excluded by the source itself).
#
# Predicted with loong sim on `loong topo --gpu b200` (one node) and
# topologies/b200.calib; nothing fitted to these runs (SimuMax's B200
# kernel tables are not in b200.calib). About 1 s.
#
# usage: experiments/simumax-b200/run.sh [LOONG [CALIB]]   (default build/loong,
#        topologies/b200.calib; topologies/b200-simumax.calib is SimuMax's
#        measured kernels on the same server: docs/validation.md)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
# shellcheck source=experiments/fidelity/plausible.sh
. "$TOP/experiments/fidelity/plausible.sh"
# shellcheck source=experiments/simumax-b200/server.sh
. "$TOP/experiments/simumax-b200/server.sh"
b200_server simumax-b200 "${1:-}" "${2:-}"

# model  tp  cp  seq  real_ms  real_alloc_gib  real_reserved_gib
rows="llama3-70b-12l 2 4 32K 1758.0 68.43 70.33
llama3-70b-12l 1 8 32K 1768.1 104.51 111.94
llama3-405b-4l 2 4 32K 1984.7 87.03 91.15
llama3-405b-4l 1 8 32K 2003.6 139.22 152.14
llama3-70b-12l 2 4 128K 11315.7 112.67 121.4
llama3-70b-12l 1 8 128K 11301.9 147.99 159.65
llama3-405b-4l 2 4 128K 10577.6 118.13 127.5"

# A number of the --json summary by its key (each key used here occurs once

printf '# %-14s %2s %2s %4s %9s %9s %7s %9s %9s %7s %9s %9s %7s\n' model tp cp seq real_ms pred_ms err_% \
    alloc_GiB pred %  resv_GiB pred %
while read -r m tp cp seq rms ralloc rresv; do
    sp=""
    [ "$tp" -gt 1 ] && sp="--sequence-parallel on"
    # shellcheck disable=SC2086
    cfg="--platform $TMP/b200.xml --calib $CALIB --model $HERE/$m.model --seq $seq --batch 1
        --micro-batches 4 --tp $tp $sp --mesh ${cp}x1 --strategy ulysses --dp 1 --zero 1 --recompute none"
    # shellcheck disable=SC2086
    out=$("$L" sim --quiet $cfg --json "$TMP/r.json" 2>&1) ||
        { echo "simumax-b200: loong sim failed: $(echo "$out" | tail -n 1)" >&2; exit 2; }
    step=$(json_num step_s "$TMP/r.json") alloc=$(json_num allocated "$TMP/r.json") resv=$(json_num reserved "$TMP/r.json")
    # the published step: 4 micro-batches of seq tokens in real_ms
    # shellcheck disable=SC2086
    plausible simumax-b200 "$L" "$(awk -v s="$seq" -v ms="$rms" 'BEGIN {printf "%.6g", 4 * s / (ms / 1000)}')" $cfg
    awk -v m="$m" -v tp="$tp" -v cp="$cp" -v seq="$seq" -v rms="$rms" -v ra="$ralloc" -v rr="$rresv" \
        -v s="$step" -v a="$alloc" -v r="$resv" 'BEGIN {
        g = 1024 ^ 3; pms = 1000 * s; pa = a / g; pr = r / g
        printf "  %-14s %2s %2s %4s %9.1f %9.1f %+7.1f %9.2f %9.2f %+7.1f %9.2f %9.2f %+7.1f\n", m, tp, cp, seq, rms, pms,
            100 * (pms - rms) / rms, ra, pa, 100 * (pa - ra) / ra, rr, pr, 100 * (pr - rr) / rr }'
done <<<"$rows"

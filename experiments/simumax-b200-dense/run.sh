#!/usr/bin/env bash
# SimuMax's published B200 runs without context parallelism against
# loong's prediction, in time and memory (github.com/MooreThreads/SimuMax
# docs/b200/b200_release_v1.2_summary.md at 1b8ca90 and its .json, the 24
# Llama rows outside "CP long-seq"): Megatron-LM with Transformer Engine
# 2.11 on one 8-GPU B200 server, bf16, Llama3-70B cut to 12 layers and
# Llama 3.1 405B cut to 4 (experiments/simumax-b200's model files), TP 1 x
# PP 2 x DP 4, TP 2 x DP 4, TP 4 x DP 2 or TP 8, 4, 8 and 32 micro-batches
# of one 4096-token sample (tools/b200/run_params/b200_bf16_ceperm_sweep.json:
# seq_len 4096, mbs 1), cross-entropy fusion ("_cef"), synchronous pipeline
# sends (pp_comm_async false), no virtual stages. Published: "real_ms",
# the measured step (steady iterations 2-3, rank 7), "real_alloc_gib"
# (torch max_allocated over all ranks) and "real_reserved_gib" (torch
# max_reserved), against loong's step and its allocated and reserved peaks
# in GiB.
#
# Assumed where the summary is silent, as for its CP and MoE rows
# (experiments/simumax-b200, simumax-b200-moe): sequence parallelism with
# TP, ZeRO-1 (the distributed optimizer), no recomputation, fp32 gradient
# accumulation, Megatron-Core's default rank order tp-cp-ep-dp-pp.
#
# Predicted with loong sim on `loong topo --gpu b200` (one node) and
# topologies/b200.calib, or the table given, with --fold none (one GPU per
# replica); nothing fitted to these runs.
# A few seconds.
#
# usage: experiments/simumax-b200-dense/run.sh [LOONG [CALIB]]   (default
#        build/loong, topologies/b200.calib; topologies/b200-simumax.calib
#        is SimuMax's measured kernels on the same server: docs/validation.md)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
# shellcheck source=experiments/fidelity/plausible.sh
. "$TOP/experiments/fidelity/plausible.sh"
# shellcheck source=experiments/simumax-b200/server.sh
. "$TOP/experiments/simumax-b200/server.sh"
b200_server simumax-b200-dense "${1:-}" "${2:-}"

# model  tp  pp  micro-batches  real_ms  real_alloc_gib  real_reserved_gib
rows="llama3-70b-12l 1 2 4 843.0 66.55 70.88
llama3-70b-12l 2 1 4 725.5 60.68 62.53
llama3-70b-12l 4 1 4 409.8 39.07 40.18
llama3-70b-12l 8 1 4 280.9 28.29 29.12
llama3-70b-12l 1 2 8 1476.8 66.55 70.88
llama3-70b-12l 2 1 8 1387.0 60.68 62.53
llama3-70b-12l 4 1 8 765.6 39.07 40.18
llama3-70b-12l 8 1 8 556.7 28.29 29.12
llama3-70b-12l 1 2 32 5436.5 66.55 70.88
llama3-70b-12l 2 1 32 5376.5 60.68 62.53
llama3-70b-12l 4 1 32 2964.6 39.07 40.18
llama3-70b-12l 8 1 32 2073.7 28.29 29.12
llama3-405b-4l 1 2 4 1074.6 87.08 92.26
llama3-405b-4l 2 1 4 907.3 81.59 84.7
llama3-405b-4l 4 1 4 476.0 52.89 54.65
llama3-405b-4l 8 1 4 258.8 38.57 39.83
llama3-405b-4l 1 2 8 1935.4 87.08 92.26
llama3-405b-4l 2 1 8 1716.8 81.59 84.7
llama3-405b-4l 4 1 8 899.6 52.89 54.65
llama3-405b-4l 8 1 8 488.1 38.57 39.83
llama3-405b-4l 1 2 32 7046.4 87.08 92.26
llama3-405b-4l 2 1 32 6604.1 81.59 84.7
llama3-405b-4l 4 1 32 3455.4 52.89 54.65
llama3-405b-4l 8 1 32 1901.8 38.57 39.83"

printf '# %-14s %2s %2s %2s %3s %9s %9s %7s %9s %9s %7s %9s %9s %7s\n' model tp pp dp m real_ms pred_ms err_% \
    alloc_GiB pred % resv_GiB pred %
while read -r m tp pp mb rms ralloc rresv; do
    dp=$((8 / tp / pp)) sp=""
    [ "$tp" -gt 1 ] && sp="--sequence-parallel on"
    # shellcheck disable=SC2086
    cfg="--platform $TMP/b200.xml --calib $CALIB --model $TOP/experiments/simumax-b200/$m.model --seq 4K --batch 1
        --micro-batches $mb --tp $tp $sp --mesh 1x1 --strategy ulysses --dp $dp --pp $pp --placement tp-cp-ep-dp-pp
        --zero 1 --recompute none"
    # shellcheck disable=SC2086
    out=$("$L" sim --quiet $cfg --fold none --json "$TMP/r.json" 2>&1) ||
        { echo "simumax-b200-dense: loong sim failed: $(echo "$out" | tail -n 1)" >&2; exit 2; }
    step=$(json_num step_s "$TMP/r.json") alloc=$(json_num allocated "$TMP/r.json") resv=$(json_num reserved "$TMP/r.json")
    # the published step: mb micro-batches of 4096 tokens on each of dp replicas
    # shellcheck disable=SC2086
    plausible simumax-b200-dense "$L" "$(awk -v m="$mb" -v d="$dp" -v ms="$rms" 'BEGIN {printf "%.6g", m * d * 4096 / (ms / 1000)}')" $cfg
    awk -v m="$m" -v tp="$tp" -v pp="$pp" -v dp="$dp" -v mb="$mb" -v rms="$rms" -v ra="$ralloc" -v rr="$rresv" \
        -v s="$step" -v a="$alloc" -v r="$resv" 'BEGIN {
        g = 1024 ^ 3; pms = 1000 * s; pa = a / g; pr = r / g
        printf "  %-14s %2s %2s %2s %3s %9.1f %9.1f %+7.1f %9.2f %9.2f %+7.1f %9.2f %9.2f %+7.1f\n", m, tp, pp, dp, mb, rms,
            pms, 100 * (pms - rms) / rms, ra, pa, 100 * (pa - ra) / ra, rr, pr, 100 * (pr - rr) / rr }'
done <<<"$rows"

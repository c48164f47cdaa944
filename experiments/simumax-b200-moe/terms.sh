#!/usr/bin/env bash
# One micro-batch of SimuMax's B200 DeepSeek-V3 row (deepseek-v3-4l, TP 1,
# EP 8 over the 8 data-parallel ranks; run.sh beside this script), term by
# term: loong's predicted kernel time per micro-batch on rank 0, next to
# SimuMax's own per-module figures for the same run.
#
# SimuMax's column is quoted, not computed here: its model at 4dcaae5
# (github.com/MooreThreads/SimuMax), PerfLLM with
# configs/models/deepseekv3.json cut to 4 layers with dense_layers 1,
# configs/strategy/ep8_pp1_dp8_mbs1.json with dispatch_probs and
# cross_entropy_loss_fusion, moe_pad_expert_input_to_capacity with
# capacity 1, configs/system/b200_bf16_ceperm.json (the kernels and
# collectives its pipeline measured on the release's server); the per-
# module costs of its model_arch output (fwd + bwd, ms). With those
# settings it reproduces the release's perf_ms (584.91 ms at 4 micro-
# batches, 3872.2 ms at 32), so the column is the model SimuMax publishes.
# It measures kernels, so a term where the two differ names a kernel loong
# costs differently from a measurement on the server of the row.
#
# loong: loong sim on `loong topo --gpu b200` with topologies/b200-simumax
# .calib (SimuMax's measured GEMMs and attention; loong's own memory-bound
# and collective models), 4 micro-batches, the trace of rank 0 summed per
# term and divided by 4; one MoE block (block 1; blocks 2 and 3 are the
# same), the dense block 0, and the model-level kernels. The optimizer and
# the gradient collectives run once per step and are left out.
#
# usage: experiments/simumax-b200-moe/terms.sh [LOONG]   (needs jq)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
# shellcheck source=experiments/simumax-b200/server.sh
. "$TOP/experiments/simumax-b200/server.sh"
b200_server simumax-b200-moe/terms "${1:-}" "$TOP/topologies/b200-simumax.calib" >/dev/null
command -v jq >/dev/null || { echo "simumax-b200-moe/terms: needs jq (apt-get install jq)" >&2; exit 2; }

mb=4
"$L" sim --quiet --platform "$TMP/b200.xml" --calib "$CALIB" --model "$HERE/deepseek-v3-4l.model" --seq 4K --batch 1 \
    --micro-batches $mb --mesh 1x1 --strategy ulysses --dp 8 --ep 8 --pp 1 --placement tp-cp-ep-dp-pp --zero 1 \
    --recompute none --fold none --trace "$TMP/t.json" --trace-rank 0 >/dev/null ||
    { echo "simumax-b200-moe/terms: loong sim failed" >&2; exit 2; }

# "name<TAB>ms per micro-batch" per trace task name, its layer suffix kept
jq -r --argjson mb $mb '[.traceEvents[] | select(.ph == "X")] | group_by(.name)[]
    | "\(.[0].name)\t\(map(.dur) | add / 1000 / $mb)"' "$TMP/t.json" >"$TMP/names"

# term;loong's task names (a regex over the name);SimuMax's figure (ms)
# SimuMax's: Permutation/UnPermutation net (the dispatch and combine
# all-to-alls, 818.15 + 763.84 us each way) and compute (401.24 + 394.56 us
# forward, the same backward); MLACoreAttention; the four MLA projections
# (0.21 + 0.73 + 0.13 + 0.47); LinearCol 16384 -> 7168; the block's two
# norms and the latents' two (0.14 + 0.14 + 0.10 + 0.09); GroupLinearCol and
# GroupLinearRow (6.80 + 3.67); the grouped Swiglu; the shared ExpertMLP;
# the Router; the dense block LLMBlock (1); LinearCol 7168 -> 129280;
# ParallelCE; Embedding.
terms='EP all-to-all (dispatch, combine);^all_to_all ep_.* L1$;3.164
permute and unpermute;^add (un)?permute L1$;1.592
core attention (MLA, qk 192, v 128);^attn_(fwd|bwd) L1 ;3.11
MLA projections (4 GEMMs);^qkv .* L1$;1.54
output projection;^out_proj .* L1$;2.71
norms;^norm norm_.* L1$;0.47
rotary embedding;^rope rope L1$;0
residual adds;^add add_.* L1$;0
router and top-k;^(router .*|softmax route) L1$;0.13
routed experts (grouped GEMMs);^expert_(gate|up|down) .* L1$;10.47
routed experts SwiGLU;^act expert_act L1$;0.20
shared expert;^(mlp_.*|act act) L1$;1.23
dense block 0 (all of it); L0( |$);17.56
LM head;^lm_head ;22.34
cross-entropy loss (fused);^loss ;1.82
embedding;^embed ;1.69'

printf '# %-36s %9s %9s %9s\n' "term (one micro-batch; block 1 = each MoE block)" loong_ms simumax_ms diff_ms
echo "$terms" | while IFS=';' read -r term re sm; do
    ms=$(awk -F'\t' -v re="$re" '$1 ~ re {s += $2} END {printf "%.3f", s}' "$TMP/names")
    awk -v t="$term" -v a="$ms" -v b="$sm" 'BEGIN {printf "  %-36s %9.3f %9.3f %+9.3f\n", t, a, b, a - b}'
done
# totals: each MoE block (SimuMax's LLMBlock (2->4), 24.61 ms) and the
# micro-batch (its model's 117.40 ms; the measured step gives 126.4 ms per
# micro-batch between its 4- and 32-micro-batch rows, run.sh's 603.2 and
# 4141.2 ms)
blk=$(awk -F'\t' '$1 ~ / L1( |$)/ {s += $2} END {printf "%.3f", s}' "$TMP/names")
all=$(awk -F'\t' '$1 !~ /^(optim|reduce_scatter grad|all_gather param)/ {s += $2} END {printf "%.3f", s}' "$TMP/names")
awk -v a="$blk" -v b="$all" 'BEGIN {
    printf "  %-36s %9.3f %9.3f %+9.3f\n", "each MoE block (all of it)", a, 24.61, a - 24.61
    printf "  %-36s %9.3f %9.3f %+9.3f\n", "one micro-batch (all of it)", b, 117.40, b - 117.40 }'

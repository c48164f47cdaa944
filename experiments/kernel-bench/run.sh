#!/usr/bin/env bash
# CPU attention kernel throughput vs OpenBLAS sgemm, single-threaded:
# block forward and backward (full and causal) at n = 512, 1024, 2048 tokens,
# d = 128, 4 heads, against a square n x n x n sgemm in the same run.
# Best of 3 per point (the machine is shared). See bench_kernels.c for the
# FLOP conventions.
# usage: experiments/kernel-bench/run.sh [path/to/bench_kernels] [bench args...]
set -euo pipefail
BENCH=${1:-$(dirname "$0")/../../build/experiments/kernel-bench/bench_kernels}
shift || true
export OPENBLAS_NUM_THREADS=1
exec "$BENCH" "$@"

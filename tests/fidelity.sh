#!/usr/bin/env bash
# The fidelity check: experiments/fidelity/run.sh predicts every published
# figure the docs compare loong with (attention benchmarks, nccl-tests bus
# bandwidths, Megatron-LM runs) by deterministic simulation, and fails when
# a row's error moves by more than 2 points from its value recorded in
# experiments/fidelity/recorded.txt, or a row appears or disappears. A
# regression guard, not a target: re-recording is a commit that says why.
# Nothing here times the machine (the measured CPU loop is
# experiments/validate-cpu, run by hand: its noise is the machine's).
# Skipped (77) without loong sim (SimGrid), and in make distcheck, whose
# sanitizer build simulates the same numbers the normal build checked.
set -uo pipefail
top=${srcdir:-$(dirname "$0")/..}
loong=${LOONG:-./loong}
if [ -n "${LOONG_SKIP_FIDELITY:-}" ]; then
    echo "fidelity: SKIP: LOONG_SKIP_FIDELITY is set (setup.sh check ran it on the normal build before make distcheck)"
    exit 77
fi
if ! "$loong" sim --help >/dev/null 2>&1; then
    echo "fidelity: SKIP: this build lacks loong sim (SimGrid)"
    exit 77
fi
exec "$top/experiments/fidelity/run.sh" --check "$top/experiments/fidelity/recorded.txt" "$loong"

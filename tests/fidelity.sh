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
# The table's per-group rank correlation against hand-computed cases (needs
# no loong): one swap in five, rho = 1 - 6 * 4 / (5 * 24) = 0.80; a tie, x
# ranked 1 2.5 2.5 4 against 1 3 2 4, Pearson's r of the ranks 4.5 /
# sqrt(4.5 * 5) = 0.95; reversed, -1; two rows or a constant side, n/a.
spearman_case() { # expected, then 'x y' pairs
    local want=$1 got
    shift
    got=$(printf '%s\n' "$@" | "$top/experiments/fidelity/run.sh" --spearman)
    [ "$got" = "$want" ] || { echo "fidelity: Spearman of $* is $got, want $want"; exit 1; }
}
spearman_case 0.80 "1 2" "2 1" "3 4" "4 3" "5 5"
spearman_case 0.95 "1 1" "2 3" "2 2" "3 4"
spearman_case -1.00 "1 3" "2 2" "3 1"
spearman_case n/a "1 1" "2 3"
spearman_case n/a "1 1" "1 3" "1 2"
if [ -n "${LOONG_SKIP_FIDELITY:-}" ]; then
    echo "fidelity: SKIP: LOONG_SKIP_FIDELITY is set (setup.sh check ran it on the normal build before make distcheck)"
    exit 77
fi
if ! "$loong" sim --help >/dev/null 2>&1; then
    echo "fidelity: SKIP: this build lacks loong sim (SimGrid)"
    exit 77
fi
exec "$top/experiments/fidelity/run.sh" --check "$top/experiments/fidelity/recorded.txt" "$loong"

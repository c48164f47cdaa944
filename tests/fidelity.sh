#!/usr/bin/env bash
# The fidelity check: the validation loop, short (experiments/validate-cpu
# --quick: measure 5 small configurations with loong exec on 2 ranks,
# calibrate from 3, predict 2 with loong sim, compare), failing when the
# held-out step-time MAPE exceeds FIDELITY_MAX_MAPE (10 %) or when the loop
# cannot complete. A change that breaks prediction against measurement
# fails `make check`. The machine is shared: a slow spell during the
# measurements is not a regression: one run in eight went to 10.6 % (its
# rerun 1.4 %), and on 2026-11-30 the same binary gave 24.5 % then 15.1 %,
# and 13.3 % then 3.9 %, while an older binary gave 6.0 % between them. So
# a failed loop runs again, up to three times, and the check fails only
# when all three do; a change that breaks prediction fails every one. Skipped (77) without the executor or the simulator,
# and on a sanitizer build, whose timings are not measurements.
set -uo pipefail
top=${srcdir:-$(dirname "$0")/..}
loong=${LOONG:-./loong}
max=${FIDELITY_MAX_MAPE:-10}
if [ -n "${LOONG_SANITIZED:-}" ]; then
    echo "fidelity: SKIP: a sanitizer build times instrumented code, not the machine"
    exit 77
fi
if [ -n "${LOONG_SKIP_FIDELITY:-}" ]; then
    echo "fidelity: SKIP: LOONG_SKIP_FIDELITY is set (setup.sh check ran the loop on the normal build before make distcheck)"
    exit 77
fi
if ! "$loong" exec --help >/dev/null 2>&1 || ! "$loong" sim --help >/dev/null 2>&1; then
    echo "fidelity: SKIP: this build lacks loong exec (Open MPI) or loong sim (SimGrid)"
    exit 77
fi
out=$(mktemp -d /tmp/loong-fidelity-XXXXXX)
trap 'rm -rf "$out"' EXIT
for attempt in 1 2 3; do
    "$top/experiments/validate-cpu/run.sh" --quick --max-mape "$max" "$loong" "$out/$attempt"
    rc=$?
    if [ $rc -eq 0 ]; then
        echo "fidelity: held-out MAPE within $max % (attempt $attempt of 3)"
        exit 0
    fi
    [ $attempt -lt 3 ] && echo "fidelity: attempt $attempt failed (exit $rc); measuring again"
done
exit $rc

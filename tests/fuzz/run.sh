#!/usr/bin/env bash
# run.sh: the runner behind `make fuzz-run` (Makefile.am). Runs every fuzz
# target in turn for a fixed time and reports one table line per target.
#
#   run.sh BINDIR SRCDIR SECONDS TARGET...
#
# BINDIR holds the targets (BINDIR/fuzz_TARGET, built by `make fuzz`);
# SRCDIR is tests/fuzz, with the committed seeds SRCDIR/corpus/TARGET/ and
# dictionaries SRCDIR/TARGET.dict. Each target fuzzes a working corpus
# BINDIR/corpus-TARGET/, seeded from the committed one (which is never
# written), and keeps what it finds in BINDIR/crashes/TARGET/ (crash-*,
# leak-*, oom-*, timeout-*). Its libFuzzer output is BINDIR/logs/TARGET.log.
# FUZZ_ARGS adds libFuzzer flags (e.g. FUZZ_ARGS=-seed=1).
#
# Output: '#' lines, one per target (executions, exec/s, the final cov: and
# ft: figures, crashes, timeouts), then, for each input that crashed or
# hung, the end of its log and the input as a hex dump (so that it survives
# in a CI log), then one plain closing line. Exit status 1 when any target
# crashed, hung, leaked or failed to run.
set -euo pipefail

if [ $# -lt 4 ]; then
    echo "usage: $0 BINDIR SRCDIR SECONDS TARGET..." >&2
    exit 2
fi
bindir=$1 srcdir=$2 seconds=$3
shift 3

hexdump_of() {
    if command -v xxd >/dev/null; then xxd -g1 "$1"; else od -A x -t x1z -v "$1"; fi
}

# stat KEY LOG: the figure of a "stat::KEY: N" line of -print_final_stats
stat_of() { sed -n "s/^stat::$1: *\([0-9]*\).*/\1/p" "$2" | tail -n 1; }

mkdir -p "$bindir/logs"
printf '# %-9s %8s %12s %8s %6s %7s %8s %9s\n' target seconds executions exec/s cov ft crashes timeouts
total_execs=0 total_crashes=0 total_timeouts=0 failed=0 report=""
for t in "$@"; do
    bin=$bindir/fuzz_$t
    work=$bindir/corpus-$t
    crashes=$bindir/crashes/$t
    log=$bindir/logs/$t.log
    mkdir -p "$work" "$crashes"
    cp -n "$srcdir/corpus/$t"/* "$work"/ 2>/dev/null || true
    stamp=$(mktemp)
    rc=0
    # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
    "$bin" -dict="$srcdir/$t.dict" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$crashes/" ${FUZZ_ARGS:-} "$work" >"$log" 2>&1 || rc=$?
    found=$(find "$crashes" -type f -newer "$stamp" | sort)
    rm -f "$stamp"
    execs=$(stat_of number_of_executed_units "$log")
    rate=$(stat_of average_exec_per_sec "$log")
    covft=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -n 1 || true)
    cov=$(echo "$covft" | awk '{print $2}')
    ft=$(echo "$covft" | awk '{print $4}')
    nt=$(echo "$found" | grep -c '/timeout-' || true)
    nc=$(echo "$found" | grep -c . || true)
    nc=$((nc - nt))
    printf '# %-9s %8s %12s %8s %6s %7s %8s %9s\n' "$t" "$seconds" "${execs:--}" "${rate:--}" "${cov:--}" \
        "${ft:--}" "$nc" "$nt"
    total_execs=$((total_execs + ${execs:-0}))
    total_crashes=$((total_crashes + nc))
    total_timeouts=$((total_timeouts + nt))
    if [ -n "$found" ]; then
        for f in $found; do
            report+=$'\n'"== $t: $f (reproduce: $bin $f)"$'\n'
            # the log less libFuzzer's progress lines: the target's message, the sanitizer's report
            report+="$(grep -v -E '^(#[0-9]+[[:space:]]|INFO: )' "$log" | tail -n 80)"$'\n'
            report+="$(hexdump_of "$f" | head -n 256)"$'\n'
        done
    elif [ "$rc" -ne 0 ]; then
        failed=$((failed + 1))
        report+=$'\n'"== $t: libFuzzer exited with status $rc and kept no input; the end of $log:"$'\n'
        report+="$(tail -n 30 "$log")"$'\n'
    fi
done
[ -z "$report" ] || printf '%s' "$report"
status="no crash, no timeout"
[ $((total_crashes + total_timeouts + failed)) -eq 0 ] || status="FAILED: $total_crashes crashes, $total_timeouts timeouts, $failed targets that did not run"
echo "fuzz: $# targets x $seconds s, $total_execs executions: $status"
[ $((total_crashes + total_timeouts + failed)) -eq 0 ]

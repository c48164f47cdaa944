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
# Every target first replays, once each, its committed corpus (which holds
# the inputs of past crashes, regress-*) and whatever BINDIR/crashes/TARGET/
# kept from earlier runs; then it explores afresh for SECONDS. With
# FUZZ_SHORT=N and FUZZ_GREEN=FILE, a target whose sources (parsers.txt)
# have the fingerprint FILE records for the last green campaign explores
# for N seconds only: CI spends its time on the parsers that changed.
# `run.sh --fingerprints SRCDIR TOPSRCDIR TARGET...` prints the lines of
# such a FILE for the sources as they are now (make fuzz-record).
#
# Output: '#' lines, one per target (executions, exec/s, the final cov: and
# ft: figures, crashes, timeouts), then, for each input that crashed or
# hung, the end of its log and the input as a hex dump (so that it survives
# in a CI log), then one plain closing line. Exit status 1 when any target
# crashed, hung, leaked or failed to run.
set -euo pipefail

usage() {
    echo "usage: $0 BINDIR SRCDIR SECONDS TARGET...   or   $0 --fingerprints SRCDIR TOPSRCDIR TARGET..." >&2
    exit 2
}

# fingerprint SRCDIR TOPSRCDIR TARGET: sha256 over the target's sources
fingerprint() {
    local srcdir=$1 top=$2 t=$3 files
    files=$(sed -n -e "s/^all: //p" -e "s/^$t: //p" "$srcdir/parsers.txt")
    [ -n "$(sed -n "s/^$t: //p" "$srcdir/parsers.txt")" ] || {
        echo "$0: no line for target '$t' in $srcdir/parsers.txt" >&2
        return 1
    }
    # shellcheck disable=SC2086 # a list of files
    (cd "$top" && for f in $files; do echo "$f"; cat "$f"; done
     for f in "$srcdir/fuzz_$t.c" "$srcdir/$t.dict" $(find "$srcdir/corpus/$t" -type f | LC_ALL=C sort); do
         echo "${f#"$srcdir"/}"; cat "$f"; done) | sha256sum | cut -d' ' -f1
}

if [ "${1:-}" = --fingerprints ]; then
    [ $# -ge 4 ] || usage
    srcdir=$(cd "$2" && pwd) top=$3
    shift 3
    for t in "$@"; do
        echo "$t $(fingerprint "$srcdir" "$top" "$t")"
    done
    exit 0
fi
[ $# -ge 4 ] || usage
bindir=$1 srcdir=$(cd "$2" && pwd) seconds=$3
shift 3
top=$(cd "$srcdir/../.." && pwd)

hexdump_of() {
    if command -v xxd >/dev/null; then xxd -g1 "$1"; else od -A x -t x1z -v "$1"; fi
}

# stat KEY LOG: the figure of a "stat::KEY: N" line of -print_final_stats
stat_of() { sed -n "s/^stat::$1: *\([0-9]*\).*/\1/p" "$2" | tail -n 1; }

# the seconds of target t: the short slot when its sources are as recorded green
slot_of() {
    local t=$1 rec
    if [ -n "${FUZZ_SHORT:-}" ] && [ -f "${FUZZ_GREEN:-}" ]; then
        rec=$(sed -n "s/^$t //p" "$FUZZ_GREEN")
        if [ -n "$rec" ] && [ "$rec" = "$(fingerprint "$srcdir" "$top" "$t")" ]; then
            echo "$FUZZ_SHORT"
            return
        fi
    fi
    echo "$seconds"
}

mkdir -p "$bindir/logs"
printf '# %-9s %8s %8s %12s %8s %6s %7s %8s %9s\n' target replayed seconds executions exec/s cov ft crashes timeouts
total_execs=0 total_crashes=0 total_timeouts=0 total_secs=0 failed=0 report=""
for t in "$@"; do
    bin=$bindir/fuzz_$t
    work=$bindir/corpus-$t
    crashes=$bindir/crashes/$t
    log=$bindir/logs/$t.log
    mkdir -p "$work" "$crashes"
    cp -n "$srcdir/corpus/$t"/* "$work"/ 2>/dev/null || true
    stamp=$(mktemp)
    secs=$(slot_of "$t")
    rc=0
    # the replay: every committed input and every kept crash, once (the
    # kept ones copied into a directory: libFuzzer takes directories or
    # files, not both, and exits on a file after a directory)
    old=$(find "$crashes" -type f | sort)
    replayed=$(find "$srcdir/corpus/$t" -type f | wc -l)
    kept=$(mktemp -d)
    # shellcheck disable=SC2086 # a list of files
    [ -z "$old" ] || cp $old "$kept/"
    "$bin" -runs=0 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$crashes/replay-" "$srcdir/corpus/$t" \
        "$kept" >"$log.replay" 2>&1 || rc=$?
    rm -rf "$kept"
    replayed=$((replayed + $(echo "$old" | grep -c . || true)))
    if [ "$rc" -eq 0 ] && [ "$secs" -eq 0 ]; then
        cp "$log.replay" "$log" # a 0 s slot replays only: libFuzzer's -max_total_time=0 has no limit
    elif [ "$rc" -eq 0 ]; then
        # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
        "$bin" -dict="$srcdir/$t.dict" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
            -print_final_stats=1 -artifact_prefix="$crashes/" ${FUZZ_ARGS:-} "$work" >"$log" 2>&1 || rc=$?
    else
        cp "$log.replay" "$log"
    fi
    found=$(find "$crashes" -type f -newer "$stamp" | sort)
    [ "$rc" -eq 0 ] || [ -n "$found" ] || found=$old # a kept crash that still crashes
    rm -f "$stamp"
    execs=$(stat_of number_of_executed_units "$log")
    rate=$(stat_of average_exec_per_sec "$log")
    covft=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -n 1 || true)
    cov=$(echo "$covft" | awk '{print $2}')
    ft=$(echo "$covft" | awk '{print $4}')
    nt=$(echo "$found" | grep -c '/timeout-' || true)
    nc=$(echo "$found" | grep -c . || true)
    nc=$((nc - nt))
    printf '# %-9s %8s %8s %12s %8s %6s %7s %8s %9s\n' "$t" "$replayed" "$secs" "${execs:--}" "${rate:--}" \
        "${cov:--}" "${ft:--}" "$nc" "$nt"
    total_secs=$((total_secs + secs))
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
echo "fuzz: $# targets, corpora replayed, $total_secs s of exploration, $total_execs executions: $status"
[ $((total_crashes + total_timeouts + failed)) -eq 0 ]

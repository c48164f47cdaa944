#!/usr/bin/env bash
# The long fuzz campaign: every target explores for SECONDS (default 600),
# whatever tests/fuzz/green.txt records, after replaying its corpus. CI
# runs the short form (./setup.sh check: 60 s for the targets whose parser
# changed, 10 s for the others); this is the form to run after a parser
# changes and before recording its fingerprints (make fuzz-record).
#
#   experiments/fuzz-campaign/run.sh [SECONDS] [BUILD_DIR]
#
# Prints run.sh's table (executions, exec/s, coverage, crashes, timeouts
# per target) and keeps it in BUILD_DIR/fuzz/campaign.txt. Exit 1 on any
# crash or timeout; each input that failed is printed as a hex dump.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-600}
build=${2:-build}
case $seconds in '' | *[!0-9]*) echo "usage: $0 [SECONDS] [BUILD_DIR]" >&2; exit 2 ;; esac
[ -f "$build/Makefile" ] || { echo "$0: no configured build in '$build': run ./setup.sh first" >&2; exit 2; }
grep -q '^FUZZ_CC = .' "$build/Makefile" ||
    { echo "$0: '$build' was configured without clang: apt-get install clang libclang-rt-14-dev, then reconfigure" >&2; exit 2; }
mkdir -p "$build/fuzz"
make -s -C "$build" fuzz-run FUZZ_SECONDS="$seconds" FUZZ_SHORT= | tee "$build/fuzz/campaign.txt"

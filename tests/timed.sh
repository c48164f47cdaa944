#!/usr/bin/env bash
# timed.sh TEST [ARG...]: the LOG_COMPILER of `make check`. Runs one test
# as automake's driver would (its output is the test's log) and, with
# LOONG_TEST_RECORD=DIR, keeps a copy of that output and the test's wall
# time and exit status in DIR, where they outlive the build tree (make
# distcheck removes its own) for the closing summary (tests/record.sh).
set -u
dir=${LOONG_TEST_RECORD:-}
if [ -z "$dir" ]; then
    exec "$@"
fi
mkdir -p "$dir"
name=$(basename "$1")
start=$(date +%s.%N)
"$@" 2>&1 | tee "$dir/$name.log"
rc=${PIPESTATUS[0]}
end=$(date +%s.%N)
awk -v n="$name" -v a="$start" -v b="$end" -v rc="$rc" 'BEGIN { printf "%s %.2f %s\n", n, b - a, rc }' >"$dir/$name.time"
exit "$rc"

#!/usr/bin/env bash
# The bad-input catalogue (tests/badinput.cat): each entry runs loong once on
# one bad input, in a directory holding the fixtures of tests/data/bad and
# pre-existing output files (keep.*), as the first entry found them. Each
# must
#   - exit with status 2,
#   - print exactly one line on stderr, "loong CMD: error: ...", matching
#     the entry's pattern (the option or file it names),
#   - create no file or directory, and write no existing file (its size and
#     modification time stay).
# Under the sanitizer build any ASan/UBSan report adds lines and fails the
# entry; one notice is not a report and is dropped: SimGrid ends an actor by
# unwinding its stack with an exception, and ASan, seeing a throw on a stack
# that is not its thread's, says once per simulating process that it
# "is ignoring requested __asan_handle_no_return" (google/sanitizers#189).
# Usage: tests/badinput.sh [NAME-REGEX]   (LOONG=path/to/loong)
# LOONG_SKIP_BADINPUT=1 skips it (77): `setup.sh check` runs the catalogue
# once, in the sanitizer pass, where every entry is checked as here and its
# error path under ASan and UBSan besides.
set -u
if [ -n "${LOONG_SKIP_BADINPUT:-}" ]; then
    echo "badinput: SKIP: LOONG_SKIP_BADINPUT is set (setup.sh check runs the catalogue under make distcheck's sanitizers)"
    exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
LOONG=${LOONG:-$here/../build/loong}
catalogue=$here/badinput.cat
fixtures=$here/data/bad
topo=$(cd "$here/../topologies" && pwd)
only=${1:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d "${TMPDIR:-/tmp}/loong-badinput-XXXXXX")
trap 'rm -rf "$work"' EXIT
ulimit -f 1000000 # 500 MB: a broken size check must not fill the disk

# Every directory (path) and file (path, size, modification time in ns)
# under the current one: an entry that writes a file changes its time even
# when it writes the same bytes. Directories' own times are left out: a
# temporary created and removed again is no change. One find and one sort:
# a process more per entry costs seconds on a machine slow to fork.
snapshot() {
    find . -mindepth 1 \( -type d -printf 'd %p\n' \) -o -printf 'f %p %s %T@\n' | LC_ALL=C sort
}

setup() {
    mkdir -p "$1"
    cp -r "$fixtures"/. "$1"/
    printf 'kept\n' >"$1/keep.txt"
    printf '{"kept":true}\n' >"$1/keep.json"
    printf 'kept,1\n' >"$1/keep.csv"
    printf 'kept' >"$1/keep.png"
    mkdir -p "$1/outdir" "$1/adir"
    printf 'kept\n' >"$1/outdir/keep.txt"
}

pass=0 fail=0 n=0
while IFS= read -r line; do
    case "$line" in '' | '#'*) continue ;; esac
    # fields by bash alone: a process per field and line cost ~20 s on a
    # machine slow to fork, most of the catalogue's time
    IFS='|' read -r name args pattern <<<"$line"
    name=${name//[[:space:]]/}
    pattern=${pattern#"${pattern%%[![:space:]]*}"}
    pattern=${pattern%"${pattern##*[![:space:]]}"}
    [ -n "$only" ] && ! [[ $name =~ $only ]] && continue
    n=$((n + 1))
    # every entry starts from the same files: an entry that passed left
    # them as they were, so its directory serves the next; after any
    # change the next entry gets a fresh copy (and a fresh snapshot)
    if [ -z "${d:-}" ]; then
        d=$work/$n
        setup "$d"
        before=$(cd "$d" && snapshot)
    fi
    # Open MPI leaks at MPI_Finalize by design: exec entries run without
    # LeakSanitizer, as tests/check_exec.c does (ASan and UBSan stay on)
    asan=${ASAN_OPTIONS:-}
    case "$args" in *' exec '* | ' exec') asan="$asan:detect_leaks=0" ;; esac
    (cd "$d" && eval "ASAN_OPTIONS=\"\$asan\" timeout 60 \"\$LOONG\" $args" </dev/null >"$work/out" 2>"$work/err")
    rc=$?
    after=$(cd "$d" && snapshot)
    # the checks by bash alone where it can (a process each is most of an
    # entry's time on a machine slow to fork)
    err=$(<"$work/err")
    if [[ $err == *'ASan is ignoring requested'* ]]; then
        grep -v -e '^==[0-9]*==WARNING: ASan is ignoring requested __asan_handle_no_return: ' \
            -e '^False positive error reports may follow$' \
            -e '^For details see https://github.com/google/sanitizers/issues/189$' "$work/err" >"$work/err.kept"
        mv "$work/err.kept" "$work/err"
        err=$(<"$work/err")
    fi
    nl=${err//[!$'\n']/}
    lines=$((${#nl} + 1))
    [ -z "$err" ] && lines=0
    why=""
    if [ "$rc" -ne 2 ]; then
        why="exit status $rc, not 2"
    elif [ "$lines" -ne 1 ] || ! { IFS= read -r -d '' raw <"$work/err"; [[ $raw == *$'\n' ]]; }; then
        why="stderr has $lines lines, not exactly one"
    elif ! [[ $err =~ ^loong(\ [a-z]+)?:\ error:\  ]]; then
        why="stderr is not 'loong CMD: error: ...'"
    elif ! [[ $err =~ $pattern ]]; then
        why="stderr does not match /$pattern/"
    elif [ "$before" != "$after" ]; then
        why="files changed: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | head -n 3 | tr '\n' ' ')"
    fi
    if [ -z "$why" ]; then
        pass=$((pass + 1))
        printf 'ok   %-28s %s\n' "$name" "${err:0:150}"
    else
        fail=$((fail + 1))
        printf 'FAIL %-28s %s\n     loong%s\n' "$name" "$why" "$args"
        head -n 5 "$work/err" | sed 's/^/     | /'
    fi
    if [ "$before" != "$after" ]; then
        rm -rf "$d"
        d=""
    fi
done <"$catalogue"
echo "# bad-input catalogue: $n entries"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$n" -gt 0 ]

#!/usr/bin/env bash
# record.sh DIR...: the closing summary of test passes, from what each pass
# recorded in its DIR (LOONG_TEST_RECORD: tests/check_run.h writes every
# Check suite's XML report, tests/timed.sh every test program's output and
# wall time). Prints, over all DIRs: the 10 slowest Check tests, the 10
# slowest test programs, and one plain closing line "checks: N passed, M
# failed" counting every Check test, every bad-input catalogue entry and
# every installation check. A DIR that is missing counts nothing.
set -euo pipefail

pass=0 fail=0 tests="" progs=""
for dir in "$@"; do
    [ -d "$dir" ] || continue
    label=$(basename "$dir")
    for xml in "$dir"/*.xml; do
        [ -f "$xml" ] || continue
        prog=$(basename "$xml" .xml)
        # one line per test: result, duration, id, iteration
        rows=$(awk -v p="$prog" -v l="$label" '
            /<test result=/ { match($0, /result="[a-z]*"/); r = substr($0, RSTART + 8, RLENGTH - 9) }
            /<id>/          { gsub(/.*<id>|<\/id>.*/, ""); id = $0 }
            /<iteration>/   { gsub(/.*<iteration>|<\/iteration>.*/, ""); it = $0 }
            /<duration>/    { gsub(/.*<duration>|<\/duration>.*/, ""); d = $0 }
            /<\/test>/      { printf "%s %.2f %s %s:%s#%s\n", r, d, l, p, id, it }' "$xml")
        [ -n "$rows" ] || continue
        n=$(grep -c '^success ' <<<"$rows" || true)
        pass=$((pass + n))
        fail=$((fail + $(grep -c . <<<"$rows") - n))
        tests+=$(cut -d' ' -f2- <<<"$rows")$'\n'
    done
    for t in "$dir"/*.time; do
        [ -f "$t" ] || continue
        read -r name secs rc <"$t"
        progs+="$secs $label $name (exit $rc)"$'\n'
        # a program that died before its report: one failure more
        if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ "${name%.sh}" = "$name" ] && [ ! -f "$dir/$name.xml" ]; then
            fail=$((fail + 1))
        fi
    done
    # the bad-input catalogue closes with its own "N passed, M failed";
    # skipped (77: the normal pass of setup.sh check) it counts nothing
    skipped=""
    [ -f "$dir/badinput.sh.time" ] && read -r _ _ rc <"$dir/badinput.sh.time" && [ "$rc" = 77 ] && skipped=1
    if [ -f "$dir/badinput.sh.log" ] && [ -z "$skipped" ]; then
        line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$dir/badinput.sh.log" | tail -n 1 || true)
        if [ -n "$line" ]; then
            read -r n _ f _ <<<"$line"
            pass=$((pass + n))
            fail=$((fail + f))
        else
            fail=$((fail + 1)) # it never reached its count
        fi
    fi
    # the installation test: an "ok" or "FAIL" line per check
    if [ -f "$dir/install.sh.log" ]; then
        pass=$((pass + $(grep -c '^ok ' "$dir/install.sh.log" || true)))
        fail=$((fail + $(grep -c '^FAIL ' "$dir/install.sh.log" || true)))
    fi
done
echo "# the 10 slowest tests (seconds, pass, program:test#iteration)"
sort -rn <<<"$tests" | grep . | head -n 10 | sed 's/^/  /' || true
echo "# the 10 slowest test programs (seconds, pass, program)"
sort -rn <<<"$progs" | grep . | head -n 10 | sed 's/^/  /' || true
echo "checks: $pass passed, $fail failed"

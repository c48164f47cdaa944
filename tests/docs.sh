#!/usr/bin/env bash
# docs.sh: the documentation against the program (make check).
#   1. every option a command's --help lists appears, as `--name`, on that
#      command's page in docs/ (the shared configuration options may be on
#      docs/concepts.md instead, the what-if perturbations on docs/whatif.md);
#   2. every relative link of README.md and docs/*.md resolves to a file;
#   3. README.md stays at most 250 lines (details belong in docs/).
# One line per problem, then "docs: N passed, M failed"; exit 1 on any.
set -euo pipefail
top=${srcdir:-$(dirname "$0")/..}
loong=${LOONG:-./loong}
pass=0 fail=0
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
ok() { pass=$((pass + 1)); }

# page_of CMD: the docs page that documents CMD
page_of() {
    case $1 in
    dag) echo dag ;; sim) echo sim ;; exec) echo exec ;; plan) echo plan ;;
    coll | topo) echo network-model ;; compare | calibrate) echo validation ;; check) echo frameworks ;;
    *) echo "" ;;
    esac
}
# options CMD: the --options its --help lists (one per line)
options() { "$loong" "$1" --help | grep -oE '(^|[ ,[(])--[a-z][a-z0-9-]*' | sed 's/^[^-]*//' | sort -u; }
# documented FILE OPT: FILE names OPT (not as the prefix of a longer option)
documented() { grep -qE -- "$2([^a-z0-9-]|$)" "$1"; }

config_opts=$("$loong" dag --help | sed -n '/^Configuration (shared/,/^Models:/p' | grep -oE '^  --[a-z][a-z0-9-]*' |
    sed 's/^ *//' | sort -u)
whatif_opts=$("$loong" sim --help | sed -n '/^Perturbations (what-if/,/^$/p' | grep -oE '^  --[a-z][a-z0-9-]*' |
    sed 's/^ *//' | sort -u)
[ -n "$config_opts" ] && [ -n "$whatif_opts" ] || { bad "cannot read the configuration or what-if options from --help"; }
commands=$("$loong" --help | sed -n '/^commands:/,/^$/p' | awk 'NF > 1 { print $1 }' | grep -v '^commands:')
[ -n "$commands" ] || bad "loong --help lists no command"
for cmd in $commands; do
    page=$(page_of "$cmd")
    if [ -z "$page" ] || [ ! -f "$top/docs/$page.md" ]; then
        bad "loong $cmd has no page in docs/ (add it to page_of in tests/docs.sh)"
        continue
    fi
    for opt in $(options "$cmd"); do
        [ "$opt" != --help ] || continue
        if documented "$top/docs/$page.md" "$opt" ||
            { grep -qx -- "$opt" <<<"$config_opts" && documented "$top/docs/concepts.md" "$opt"; } ||
            { grep -qx -- "$opt" <<<"$whatif_opts" && documented "$top/docs/whatif.md" "$opt"; }; then
            ok
        else
            bad "loong $cmd $opt is not on docs/$page.md"
        fi
    done
done

# relative links: [text](target) and [text](target#anchor), outside code spans
for f in "$top/README.md" "$top"/docs/*.md; do
    dir=$(dirname "$f")
    while IFS= read -r target; do
        target=${target%%#*}
        [ -n "$target" ] || continue
        if [ -e "$dir/$target" ]; then ok; else bad "${f#"$top"/}: the link to '$target' leads nowhere"; fi
    done < <(sed 's/`[^`]*`//g' "$f" | grep -oE '\]\([^)[:space:]]+\)' | sed 's/^](//; s/)$//' |
        grep -vE '^(https?:|mailto:|#)' || true)
done

# 4. the README's compare loop runs as written: the exec example (mpirun,
#    8 ranks) writes measured.json, then each `$ ` command of the block
#    after <!-- compare-loop --> (./build/loong: the loong under test).
#    Once, in the normal pass: under the sanitizers mpirun's own reports
#    would be read as the example's failure.
if [ "${LOONG_DOCS_LOOP:-1}" = 1 ] && [ -z "${LOONG_SANITIZED:-}" ] && command -v mpirun >/dev/null; then
    tmp=$(mktemp -d)
    exec_cmd=$(sed -n '/^\$ mpirun -np 8 .*loong exec/,/^[^ ]/p' "$top/README.md" | sed '$d' |
        sed 's/^\$ //; s/ \\$//' | tr -d '\n')
    loop=$(awk '/<!-- compare-loop -->/ { on = 1; next } on && /^```/ { if (++fence == 2) exit; next } on' \
        "$top/README.md" | { grep -E '^(\$ |      )' || true; } |
        sed 's/^\$ //; s/^ *//' | sed -e :a -e '/\\$/N; s/\\\n//; ta')
    if [ -z "$exec_cmd" ] || [ -z "$loop" ]; then
        bad "README.md: the exec example or the compare loop (<!-- compare-loop -->) is not found"
    else
        run() { (cd "$tmp" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            bash -c "${1//.\/build\/loong/$loong}" >>log 2>&1); }
        if run "${exec_cmd/mpirun -np 8/mpirun --oversubscribe -np 8}" >/dev/null; then ok; else
            bad "README.md: its exec example fails: $(tail -n 1 "$tmp/log")"
        fi
        while IFS= read -r c; do
            if run "$c"; then ok; else bad "README.md: the compare loop's '$c' fails: $(tail -n 1 "$tmp/log")"; fi
        done <<<"$loop"
    fi
    rm -rf "$tmp"
fi

lines=$(wc -l <"$top/README.md")
if [ "$lines" -le 250 ]; then ok; else bad "README.md has $lines lines, over 250: move the detail to docs/"; fi
echo "docs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

# shellcheck shell=bash
# Sourced by the published-run experiments: `loong check` of each published
# run, so that the fidelity table's rows are also loong check's test cases
# (issue: every published run it compares with must read as plausible).
#
# plausible WHO LOONG TOKENS_PER_S ARGS...: loong check with the run's
# configuration ARGS (--platform and --calib among them) and its published
# throughput as the whole job's tokens per second; returns when loong check
# finds it plausible (exit 0: below the physical ceiling), else says which
# run and exits 2.
plausible() {
    local who=$1 loong=$2 tps=$3 out rc=0
    shift 3
    out=$("$loong" check "$@" --measured-tokens-per-s "$tps" 2>&1) || rc=$?
    [ "$rc" = 0 ] && return 0
    echo "$who: loong check calls a published run implausible (exit $rc): $(echo "$out" | tail -n 1)" >&2
    exit 2
}

# json_num KEY FILE: the number of loong's --json summary under KEY (each key
# the experiments read occurs once).
json_num() { grep -o "\"$1\": *[0-9.eE+-]*" "$2" | head -n 1 | sed 's/.*: *//'; }

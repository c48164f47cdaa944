#!/usr/bin/env bash
# loong set-up, idempotent.
#   ./setup.sh         install the Debian packages, build, run the main job
#   ./setup.sh check   install and build the same way (plus clang and libFuzzer),
#                      then run the whole test suite on the normal build, then
#                      make distcheck (the tarball built out of tree under
#                      ASan+UBSan, its suite, a staging install), then the fuzz
#                      targets; prints each pass's wall time against its budget
#                      and the slowest tests
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(build-essential autoconf automake pkg-config
          libjansson-dev libgsl-dev check zlib1g-dev libtomlplusplus-dev
          libsimgrid-dev libopenmpi-dev openmpi-bin libopenblas-dev gnuplot-nox
          help2man groff-base)
# jemalloc: the loong binary's malloc (simulations ~1.3x faster; docs/install.md)
PACKAGES+=(libjemalloc-dev)
# Chakra execution traces (loong dag --format chakra; protoc for their test)
PACKAGES+=(libprotobuf-c-dev protobuf-c-compiler protobuf-compiler)
# check only: clang with libFuzzer for the fuzz targets (make fuzz-run)
CHECK_PACKAGES=(clang libclang-rt-14-dev)
JOBS=$(nproc 2>/dev/null || echo 2)

say() { printf '==> %s\n' "$*"; }

# install_packages PACKAGE...: apt-get install those not installed yet
install_packages() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        say "Debian packages already installed"
        return
    fi
    say "installing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# build DIR [configure flags...]: out-of-tree build, reconfigured only when needed
build() {
    local dir=$1
    shift
    if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
        say "autoreconf"
        autoreconf -fi >/dev/null
    fi
    mkdir -p "$dir"
    if [ ! -f "$dir/Makefile" ] || [ configure -nt "$dir/config.status" ]; then
        say "configure $dir $*"
        (cd "$dir" && ../configure "$@")
    fi
    say "make -C $dir"
    make -s -C "$dir" -j"$JOBS"
}

# Each pass of `check`: its wall time and budget (seconds), for the closing
# table. The budgets add up to CI's 15 minutes on an idle 2-core machine; a
# pass past its budget is flagged loudly, so that growth is caught in the
# change that causes it (CI's hard limit, 90 minutes, is far beyond).
PASSES=() WALLS=() BUDGETS=()
TOTAL_BUDGET=900

# run_pass NAME BUDGET COMMAND...: run one pass, time it; on failure print
# the table so far and stop
run_pass() {
    local name=$1 budget=$2 start rc=0
    shift 2
    say "$name (budget $budget s)"
    start=$(date +%s)
    "$@" || rc=$?
    PASSES+=("$name") WALLS+=($(($(date +%s) - start))) BUDGETS+=("$budget")
    if [ "$rc" -ne 0 ]; then
        pass_table
        echo "setup.sh: $name failed (exit $rc)" >&2
        exit "$rc"
    fi
}

pass_table() {
    local i total=0 over=""
    echo "# pass                                              wall_s  budget_s"
    for i in "${!PASSES[@]}"; do
        printf '  %-48s %8d %9d%s\n' "${PASSES[$i]}" "${WALLS[$i]}" "${BUDGETS[$i]}" \
            "$([ "${WALLS[$i]}" -le "${BUDGETS[$i]}" ] || echo "   <-- OVER BUDGET")"
        total=$((total + WALLS[i]))
        [ "${WALLS[$i]}" -le "${BUDGETS[$i]}" ] || over+=" '${PASSES[$i]}'"
    done
    printf '  %-48s %8d %9d\n' "total" "$total" "$TOTAL_BUDGET"
    if [ -n "$over" ] || [ "$total" -gt "$TOTAL_BUDGET" ]; then
        echo "WARNING: over budget:${over:- the total} (${total} s of ${TOTAL_BUDGET} s): find the slow tests below"
    fi
}

if [ "${1:-main}" = check ]; then
    install_packages "${PACKAGES[@]}" "${CHECK_PACKAGES[@]}"
else
    install_packages "${PACKAGES[@]}"
fi
build build
case "${1:-main}" in
main)
    say "main job: loong plan (llama3-8b, S = 1M, 64 H100s in 8 nodes: topologies/dgx-h100-8n.xml)"
    ./build/loong plan
    ;;
check)
    record=$PWD/build/test-record
    rm -rf "$record"
    # a build configured before clang was installed finds it now
    grep -q '^FUZZ_CC = .' build/Makefile || (cd build && ./config.status --recheck >/dev/null && ./config.status >/dev/null)
    # the bad-input catalogue runs once, in the sanitizer pass below, which
    # checks each entry as this build would and its error path besides
    run_pass "test suite: normal build" 240 \
        env LOONG_TEST_RECORD="$record/normal" LOONG_SKIP_BADINPUT=1 make -s -C build -j"$JOBS" check
    # the tarball out of tree, source read-only, under ASan + UBSan
    # (AM_DISTCHECK_CONFIGURE_FLAGS): the sanitizer pass; the fidelity
    # table's simulations give the same numbers there and have just run
    run_pass "make distcheck: ASan + UBSan suite of the tarball" 540 \
        env LOONG_TEST_RECORD="$record/asan" LOONG_SKIP_FIDELITY=1 make -s -C build -j"$JOBS" distcheck
    run_pass "fuzz: replay corpora, explore changed parsers" 120 make -s -C build fuzz-run FUZZ_SECONDS=60
    pass_table
    bash tests/record.sh "$record/normal" "$record/asan"
    ;;
*)
    echo "usage: ./setup.sh [check]" >&2
    exit 2
    ;;
esac
# loong is built, not installed: say how to call it as `loong`
say "loong is $PWD/build/loong; to call it as 'loong', run: export PATH=\"$PWD/build:\$PATH\""
say "or install it: (cd build && ../configure --prefix=\$HOME/.local && make install), then PATH=\$HOME/.local/bin:\$PATH"

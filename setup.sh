#!/usr/bin/env bash
# loong set-up, idempotent.
#   ./setup.sh         install the Debian packages, build, run the main job
#   ./setup.sh check   install and build the same way (plus clang and libFuzzer),
#                      then run the whole test suite on the normal build and on
#                      an ASan+UBSan build, then every fuzz target for 60 s
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(build-essential autoconf automake pkg-config
          libjansson-dev libgsl-dev check
          libsimgrid-dev libopenmpi-dev openmpi-bin libopenblas-dev gnuplot-nox
          help2man groff-base)
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

# The plain closing line: individual Check tests over both builds.
summarize() {
    local pass=0 fail=0 line n f e log
    for log in $(for d in "$@"; do echo "$d"/tests/*.log; done); do
        line=$(grep -Eo 'Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+' "$log" | tail -n 1) || continue
        read -r n f e <<<"$(echo "$line" | grep -Eo '[0-9]+' | paste -sd' ')"
        pass=$((pass + n - f - e))
        fail=$((fail + f + e))
    done
    # the bad-input catalogue closes with its own "N passed, M failed"
    for log in $(for d in "$@"; do echo "$d"/tests/badinput.sh.log; done); do
        [ -f "$log" ] || continue
        line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1) || continue
        read -r n f <<<"$(echo "$line" | grep -Eo '[0-9]+' | paste -sd' ')"
        pass=$((pass + n))
        fail=$((fail + f))
    done
    # the installation test: an "ok" or "FAIL" line per check
    for log in $(for d in "$@"; do echo "$d"/tests/install.sh.log; done); do
        [ -f "$log" ] || continue
        # grep -c exits 1 on a count of 0, which set -e would take for a failure
        n=$(grep -c '^ok ' "$log" || true)
        f=$(grep -c '^FAIL ' "$log" || true)
        pass=$((pass + n))
        fail=$((fail + f))
    done
    echo "checks: $pass passed, $fail failed"
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
    say "test suite: normal build"
    make -s -C build -j"$JOBS" check
    say "make distcheck: the tarball builds out of tree, passes the suite, installs to a staging prefix"
    # the fidelity loop times this machine: once, on the normal build, is enough
    LOONG_SKIP_FIDELITY=1 make -s -C build -j"$JOBS" distcheck
    build build-asan --enable-sanitizers
    say "test suite: ASan + UBSan build"
    make -s -C build-asan -j"$JOBS" check
    say "fuzz targets: 60 s each (tests/fuzz/run.sh)"
    # a build configured before clang was installed finds it now
    grep -q '^FUZZ_CC = .' build/Makefile || (cd build && ./config.status --recheck >/dev/null && ./config.status >/dev/null)
    make -s -C build fuzz-run FUZZ_SECONDS=60
    summarize build build-asan
    ;;
*)
    echo "usage: ./setup.sh [check]" >&2
    exit 2
    ;;
esac

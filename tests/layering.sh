#!/usr/bin/env bash
# The layering rules of DESIGN.md ("Layout"), checked on every #include of
# src/: which libraries each library may include, and which third-party
# headers it may not (the core and the predictors know no backend; only the
# cli writes protobuf (Chakra traces); only the
# analysis fits with GSL, and the backends draw with GSL's generators;
# backends never include each other). Exits 1 and
# lists every broken arrow.
set -uo pipefail
src=${srcdir:-$(dirname "$0")/..}/src

# library: the libraries it may include (itself implied)
declare -A uses=(
    [core]=""
    [model]="core"
    [analysis]="core model"
    [sim]="core model"
    [exec]="core"
    [cuda]="exec core"
    [cli]="core model analysis sim exec cuda"
)
# library: an extended regex of system headers it must not include
declare -A forbids=(
    [core]='^(simgrid|xbt)/|^mpi\.h|^cuda|^nccl|^cublas|^gsl/|^cblas|^protobuf-c/'
    [model]='^(simgrid|xbt)/|^mpi\.h|^cuda|^nccl|^cublas|^gsl/|^cblas|^protobuf-c/'
    [analysis]='^(simgrid|xbt)/|^mpi\.h|^cuda|^nccl|^cublas|^protobuf-c/'
    [sim]='^mpi\.h|^cuda|^nccl|^cublas|^gsl/|^cblas|^protobuf-c/'
    [exec]='^(simgrid|xbt)/|^cuda|^nccl|^cublas|^protobuf-c/'
    [cuda]='^(simgrid|xbt)/|^gsl/|^protobuf-c/'
    [cli]='^$'
)
# library: an extended regex of forbidden headers it may include after all
# (the simulator draws --jitter with GSL's generators, as exec draws inputs)
declare -A allows=(
    [sim]='^gsl/gsl_(rng|randist)\.h$'
)

bad=0
for lib in "${!uses[@]}"; do
    [ -d "$src/$lib" ] || { echo "layering: missing library src/$lib"; bad=1; continue; }
    for f in "$src/$lib"/*.c "$src/$lib"/*.h "$src/$lib"/*.cu "$src/$lib"/*.cpp; do
        [ -f "$f" ] || continue
        while IFS= read -r inc; do
            case "$inc" in
            \"*/*\")
                dep=${inc#\"}
                dep=${dep%%/*}
                [ "$dep" = "$lib" ] && continue
                if [[ " ${uses[$lib]} " != *" $dep "* ]]; then
                    echo "layering: ${f#$src/} includes $inc: $lib may use only ${uses[$lib]:-itself}"
                    bad=1
                fi
                ;;
            \<*\>)
                h=${inc#<}
                h=${h%>}
                if [[ "$h" =~ ${forbids[$lib]} ]] && ! [[ -n "${allows[$lib]:-}" && "$h" =~ ${allows[$lib]} ]]; then
                    echo "layering: ${f#$src/} includes <$h>, a header $lib must not use"
                    bad=1
                fi
                ;;
            esac
        done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+([<"][^>"]+[>"]).*/\1/p' "$f")
    done
done
[ $bad -eq 0 ] && echo "layering: every include of src/ keeps the arrows of DESIGN.md"
exit $bad

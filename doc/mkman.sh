#!/usr/bin/env bash
# Man pages from the --help texts, so that the two cannot drift: loong(1)
# from `loong --help`, loong-CMD(1) from `loong CMD --help`, each page's
# one-line description from the command table `loong --help` prints, and
# its prose DESCRIPTION, EXAMPLES and SEE ALSO from INCDIR/PAGE.h2m (the
# include file beside the command's page in docs/).
# usage: doc/mkman.sh LOONG OUTDIR HELP2MAN VERSION INCDIR CMD...
set -euo pipefail
loong=$1 out=$2 help2man=$3 version=$4 inc=$5
shift 5
mkdir -p "$out"
page() { # NAME DESCRIPTION HELP-OPTION
    [ -f "$inc/$1.h2m" ] || { echo "mkman: no $inc/$1.h2m: every page has its include file" >&2; exit 1; }
    "$help2man" --no-info --no-discard-stderr --version-string="$version" --name="$2" --include="$inc/$1.h2m" \
        --help-option="$3" --source="loong $version" --manual="loong manual" -o "$out/$1.1.tmp" "$loong"
    # help2man names the page after the program: loong-CMD(1) for a command
    sed -e "s/^\.TH LOONG /.TH $(echo "$1" | tr a-z A-Z) /" -e "/^\.SH NAME/{n;s/^loong /$1 /}" \
        "$out/$1.1.tmp" >"$out/$1.1"
    rm -f "$out/$1.1.tmp"
}
page loong "plan, simulate and execute 2D head-context parallel attention" --help
for cmd in "$@"; do
    desc=$("$loong" --help | awk -v c="$cmd" '$1 == c { $1 = ""; sub(/^ +/, ""); print }')
    [ -n "$desc" ] || { echo "mkman: '$cmd' is not a command of $loong" >&2; exit 1; }
    page "loong-$cmd" "$desc" "$cmd --help"
done

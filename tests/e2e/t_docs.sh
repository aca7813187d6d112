#!/bin/sh
# The manual pages: every page is clean under mandoc -Tlint (nothing worse
# than a style note), every command parleyctl knows has its entry in
# parleyctl.8, and every option letter of parleyd's usage line is
# documented in parleyd.8.  (parleyd.conf.5's directives are checked by
# tests/unit/test_config.c.)  Run by tests/e2e/run with PARLEYD and SRCDIR.
: "${SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${PARLEYD:=$SRCDIR/parleyd}"
PARLEYCTL=${PARLEYCTL:-$(dirname "$PARLEYD")/parleyctl}
man=$SRCDIR/man
problems=0

problem() {
	echo "docs: $*"
	problems=$((problems + 1))
	last="$*"
}

command -v mandoc >/dev/null || {
	echo "E2E-FAIL: mandoc not found (apt-get install mandoc)"
	exit 1
}
[ -x "$PARLEYCTL" ] || {
	echo "E2E-FAIL: parleyctl not found or not executable: $PARLEYCTL"
	exit 1
}

# mandoc -W warning reports warnings and errors only; any line is one.
npages=0
for page in "$man"/*.[0-9]; do
	[ -f "$page" ] || continue
	npages=$((npages + 1))
	out=$(mandoc -Tlint -W warning "$page" 2>&1)
	[ -n "$out" ] && problem "mandoc -Tlint $(basename "$page"):" \
	    "$(echo "$out" | head -5 | tr '\n' ' ')"
done
[ "$npages" -ge 4 ] || problem "only $npages manual pages in $man"

# Each command is an item of a list in parleyctl.8: ".It Cm WORDS ...",
# and each such item is a command parleyctl knows.
cmds=$("$PARLEYCTL" commands) || problem "parleyctl commands failed"
[ -n "$cmds" ] || problem "parleyctl commands printed nothing"
documented=$(grep '^\.It Cm ' "$man/parleyctl.8" |
    sed 's/^\.It Cm //; s/ [A-Z][a-z] .*//; s/ [A-Z][a-z]$//')
nl='
'
oldifs=$IFS
IFS=$nl
for c in $cmds; do
	echo "$documented" | grep -qx "$c" ||
	    problem "parleyctl command '$c' has no '.It Cm $c' entry in parleyctl.8"
done
for c in $documented; do
	echo "$cmds" | grep -qx "$c" ||
	    problem "parleyctl.8 documents '$c', which parleyctl does not know"
done
IFS=$oldifs

# parleyd's usage line, e.g. "usage: parleyd [-dtvV] [-f file]": each
# letter needs an ".It Fl X" in parleyd.8's option list.
usage=$("$PARLEYD" -h 2>&1 | grep '^usage:')
[ -n "$usage" ] || problem "parleyd -h printed no usage line"
letters=$(echo "$usage" | grep -o '\[-[A-Za-z0-9]*' | cut -c3- |
    sed 's/./& /g')
[ -n "$letters" ] || problem "no option letters in '$usage'"
for l in $letters; do
	grep -q "^\.It Fl $l\( \|$\)" "$man/parleyd.8" ||
	    problem "parleyd option -$l has no '.It Fl $l' entry in parleyd.8"
done

# help, like -h, prints the usage.
"$PARLEYCTL" help | grep -q '^usage: parleyctl' ||
    problem "parleyctl help prints no usage line"

if [ "$problems" -gt 0 ]; then
	echo "E2E-FAIL: $problems problem(s) in the manual pages; last: $last"
	exit 1
fi
echo "ok docs ($npages pages)"

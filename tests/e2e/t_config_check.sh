#!/bin/sh
# parleyd -t: "configuration OK" and exit 0 on a good file; "FILE:LINE: reason"
# and exit 1 on a bad one.
. "$(dirname "$0")/lib/lib.sh"
TMPD=$(mktemp -d /tmp/parley-e2e.XXXXXX) || exit 1
trap 'rm -rf "$TMPD"' EXIT
good=$TMPD/good.conf
cat >"$good" <<CONF
# a comment
listen 127.0.0.1:7777
workers 2
state-dir $TMPD/state
retention 24h
idle-timeout 10m
flush-interval 20ms
heartbeat-interval 15s
max-output-buffer 4k
max-frame 64k
max-message 1m
max-body 1m
token s3cret role admin
token watch role observer session s1
provider demo {
    type script
    reply "Hello, \"world\" # not a comment"   # a comment
    chunk 4
    delay 20ms
}
default-provider demo
CONF
out=$("$PARLEYD" -t -f "$good" 2>&1)
rc=$?
[ $rc = 0 ] || fail "good file: exit $rc, output: $out"
echo "$out" | grep -q "configuration OK" || fail "good file: output '$out'"

n=0
# bad LINE TEXT...: the file's content (printf %b), the line the error is on
bad() {
	n=$((n + 1))
	f=$TMPD/bad$n.conf
	line=$1
	shift
	printf '%b' "$*" >"$f"
	out=$("$PARLEYD" -t -f "$f" 2>&1)
	rc=$?
	[ $rc = 1 ] || fail "bad file $n ($*): exit $rc, output: $out"
	echo "$out" | grep -q "^$f:$line: ." ||
	    fail "bad file $n ($*): output '$out' lacks '$f:$line: reason'"
}
bad 2 'workers 2\nlistn 127.0.0.1:1\n'
bad 1 'workers 0\n'
bad 1 'workers 257\n'
bad 3 'workers 2\n\nworkers 3\n'
bad 1 'listen 127.0.0.1:99999\n'
bad 1 'retention 5x\n'
bad 1 'flush-interval 2s\n'
bad 1 'max-frame 10\n'
bad 1 'state-dir relative/path\n'
bad 1 'token abc role wizard\n'
bad 2 'token abc role user\ntoken abc role admin\n'
bad 2 'provider p {\n    reply "unterminated\n}\n'
bad 2 'provider p {\n    type openai-magic\n    reply "x"\n}\n'
bad 1 'chunk 4\n'
bad 2 'listen 127.0.0.1:1\nlisten 127.0.0.1:1\n'
bad 1 'default-provider nosuch\n'
bad 1 'log-level \"bad\\q\"\n'
bad 1 'listen 0.0.0.0:7777\n'
bad 1 'tool-policy "fs__*" severe\n'
bad 2 'max-autonomy CAUTIOUS\nautonomy FULL_AUTO\n'
# an unterminated block is reported (at the end or at the block's line)
f=$TMPD/unterminated.conf
printf 'provider p {\n    type script\n    reply "x"\n' >"$f"
out=$("$PARLEYD" -t -f "$f" 2>&1)
[ $? = 1 ] || fail "unterminated block accepted: $out"
echo "$out" | grep -q "^$f:[0-9]*: ." || fail "unterminated block: output '$out'"
# a missing file
out=$("$PARLEYD" -t -f "$TMPD/missing.conf" 2>&1)
[ $? = 1 ] || fail "missing file: exit status not 1 ($out)"
echo "$out" | grep -q "missing.conf" || fail "missing file: output '$out' does not name it"
echo "ok config_check"

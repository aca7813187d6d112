#!/bin/sh
# POST /sessions/{id}/messages: 202 {"seq":N}, a repeated id answered 200 with
# "duplicate":true and not logged twice, and the SSE answer that streams one
# turn from its user_message to its done and then ends.
. "$(dirname "$0")/lib/lib.sh"
start_parleyd
S=post-1
J='Content-Type: application/json'

# 1. plain answer: 202 with the seq of the logged user_message
out=$(curl -s -m 10 -w '\n%{http_code}' -H "$J" \
    -d '{"v":1,"type":"chat","id":"p-1","message":"first"}' "$BASE/sessions/$S/messages")
code=$(echo "$out" | tail -1)
body=$(echo "$out" | head -1)
[ "$code" = 202 ] || fail "first POST: status $code body $body"
seq=$(echo "$body" | sed -n 's/.*"seq":\([0-9]*\).*/\1/p')
[ "$seq" = 1 ] || fail "first POST: expected seq 1, body $body"

# waits until turn $1 is over: the log has $1 agent_state idle events (the
# last event of a turn, logged after its done)
wait_idle() {
	i=0
	until [ "$(curl -s -m 5 "$BASE/sessions/$S/log?after=0&limit=1000" |
	    grep -o '"status":"idle"' | wc -l)" -ge "$1" ]; do
		i=$((i + 1)); [ $i -gt 100 ] && fail "turn $1 never logged agent_state idle"
		sleep 0.1
	done
}
wait_idle 1
last1=$(curl -s -m 5 "$BASE/sessions/$S" | sed -n 's/.*"lastSeq":\([0-9]*\).*/\1/p')
[ -n "$last1" ] || fail "GET /sessions/$S has no lastSeq"

# 2. the same id again: 200, duplicate, same seq, nothing logged
out=$(curl -s -m 10 -w '\n%{http_code}' -H "$J" \
    -d '{"v":1,"type":"chat","sessionId":"'$S'","id":"p-1","message":"first"}' \
    "$BASE/sessions/$S/messages")
code=$(echo "$out" | tail -1)
body=$(echo "$out" | head -1)
[ "$code" = 200 ] || fail "duplicate POST: status $code body $body"
echo "$body" | grep -q '"duplicate":true' || fail "duplicate POST: body $body lacks duplicate:true"
echo "$body" | grep -q '"seq":1[,}]' || fail "duplicate POST: body $body lacks seq 1"
sleep 0.3
last2=$(curl -s -m 5 "$BASE/sessions/$S" | sed -n 's/.*"lastSeq":\([0-9]*\).*/\1/p')
[ "$last1" = "$last2" ] || fail "duplicate POST changed lastSeq $last1 -> $last2"
n=$(curl -s -m 5 "$BASE/sessions/$S/log?after=0&limit=1000" | grep -o '"type":"user_message"' | wc -l)
[ "$n" = 1 ] || fail "user_message logged $n times after a duplicate"

# 3. SSE answer: streams that turn and ends by itself after done
curl -s -N -m 20 -D "$TMPD/h" -H "$J" -H 'Accept: text/event-stream' \
    -d '{"v":1,"type":"chat","id":"p-2","message":"second"}' \
    "$BASE/sessions/$S/messages" >"$TMPD/sse"
rc=$?
[ $rc = 0 ] || fail "SSE POST: curl exit $rc (28 = the stream did not end); got $(head -c 300 "$TMPD/sse")"
head -1 "$TMPD/h" | grep -q ' 200' || fail "SSE POST: status $(head -1 "$TMPD/h")"
grep -qi '^content-type: text/event-stream' "$TMPD/h" || fail "SSE POST: no text/event-stream content type"
events=$(grep '^event: ' "$TMPD/sse" | cut -c8- | tr -d '\r' | tr '\n' ' ')
ids=$(grep '^id: ' "$TMPD/sse" | cut -c5- | tr -d '\r' | tr '\n' ' ')
first=$(echo "$events" | awk '{print $1}')
lastev=$(echo "$events" | awk '{print $NF}')
[ "$first" = user_message ] || fail "SSE POST: first event $first (events: $events)"
[ "$lastev" = done ] || fail "SSE POST: last event $lastev, expected done (events: $events)"
echo "$events" | grep -q token || fail "SSE POST: no token events ($events)"
# ids: consecutive, starting right after the previous turn
want=$((last2 + 1))
for id in $ids; do
	[ "$id" = "$want" ] || fail "SSE POST: id $id, expected $want (ids: $ids)"
	want=$((want + 1))
done
text=$(grep '^data: ' "$TMPD/sse" | grep '"type":"token"' |
    sed 's/.*"content":"\([^"]*\)".*/\1/' | tr -d '\n')
[ "$text" = "Hello from the parley end-to-end script provider." ] ||
    fail "SSE POST: streamed text '$text'"

# 4. bad body over POST: 400 with a JSON error, nothing logged
wait_idle 2
last3=$(curl -s -m 5 "$BASE/sessions/$S" | sed -n 's/.*"lastSeq":\([0-9]*\).*/\1/p')
code=$(curl -s -m 10 -o "$TMPD/b" -w '%{http_code}' -H "$J" -d '{"v":1,"type":"chat",' \
    "$BASE/sessions/$S/messages")
[ "$code" = 400 ] || fail "malformed JSON POST: status $code"
grep -q '"code"\|"error"' "$TMPD/b" || fail "malformed JSON POST: body $(cat "$TMPD/b")"
code=$(curl -s -m 10 -o "$TMPD/b" -w '%{http_code}' -H "$J" \
    -d '{"v":1,"type":"chat","sessionId":"other","message":"x"}' "$BASE/sessions/$S/messages")
[ "$code" -ge 400 ] && [ "$code" -lt 500 ] || fail "POST naming another session: status $code"
sleep 0.3
last4=$(curl -s -m 5 "$BASE/sessions/$S" | sed -n 's/.*"lastSeq":\([0-9]*\).*/\1/p')
[ "$last3" = "$last4" ] || fail "bad POSTs changed lastSeq $last3 -> $last4"
stop_parleyd
echo "ok post_messages"

# Shell helpers for curl tests: start_parleyd [extra-conf-file], stop_parleyd.
# Sets PORT, TMPD, BASE; fail "reason" prints E2E-FAIL and exits 1.

fail() {
	echo "E2E-FAIL: $*"
	[ -n "$TMPD" ] && [ -f "$TMPD/parleyd.log" ] && tail -30 "$TMPD/parleyd.log"
	stop_parleyd
	exit 1
}

free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_parleyd: writes $TMPD/parleyd.conf (plus $EXTRA_CONF) and waits ready.
start_parleyd() {
	TMPD=$(mktemp -d /tmp/parley-e2e.XXXXXX) || exit 1
	PORT=$(free_port)
	BASE=http://127.0.0.1:$PORT
	mkdir "$TMPD/state"
	cat >"$TMPD/parleyd.conf" <<CONF
listen 127.0.0.1:$PORT
workers 2
state-dir $TMPD/state
control-socket $TMPD/control.sock
retention 24h
idle-timeout 10m
flush-interval 20ms
heartbeat-interval 15s
${EXTRA_CONF:-}
provider fast {
    type script
    reply "${REPLY:-Hello from the parley end-to-end script provider.}"
    chunk ${CHUNK:-4}
    delay ${DELAY:-2ms}
}
default-provider fast
CONF
	"$PARLEYD" -d -f "$TMPD/parleyd.conf" </dev/null >"$TMPD/parleyd.log" 2>&1 &
	PID=$!
	i=0
	while [ $i -lt 300 ]; do
		kill -0 $PID 2>/dev/null || { PID=; fail "parleyd exited before ready"; }
		code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$BASE/health/ready")
		[ "$code" = 200 ] && return 0
		sleep 0.1
		i=$((i + 1))
	done
	fail "parleyd not ready after 30 s"
}

stop_parleyd() {
	[ -z "$PID" ] && return 0
	p=$PID
	PID=
	kids=$(pgrep -P "$p")
	kill -TERM "$p" 2>/dev/null
	i=0
	while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -KILL "$p" $kids 2>/dev/null
	wait "$p" 2>/dev/null
	if grep -q -e 'ERROR: AddressSanitizer' -e 'runtime error:' -e 'LeakSanitizer' \
	    "$TMPD/parleyd.log"; then
		echo "E2E-FAIL: sanitizer report in parleyd log"
		grep -A20 -e 'ERROR: AddressSanitizer' -e 'runtime error:' -e 'LeakSanitizer' \
		    "$TMPD/parleyd.log" | head -40
		rm -rf "$TMPD"
		exit 1
	fi
	[ -z "$E2E_KEEP" ] && rm -rf "$TMPD"
	return 0
}

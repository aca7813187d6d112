#!/usr/bin/python3
# parleyctl drain with a turn streaming: the host stops taking new sessions
# (/health/ready 503, a new session is refused with OVERLOADED), the
# streaming client still gets its whole turn, then is closed with 1001; an
# idle client is closed at once; parleyctl and parleyd both exit 0 and the
# sessions resume, losing nothing, on the next start.
import sys, os, subprocess
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

LONG = "".join("part%03d " % i for i in range(120))


async def closed_code(ws, seen, secs):
    """Reads ws until it closes; returns the close code."""
    try:
        while True:
            e = await ws_recv(ws, secs)
            if "seq" in e:
                seen.append(e)
    except websockets.exceptions.ConnectionClosed as e:
        return e.code
    except asyncio.TimeoutError:
        raise Fail("client not closed within %d s of the drain" % secs)


async def test():
    d = Daemon(providers=provider_block("p", LONG, chunk=8, delay="15ms"),
               default="p", extra="drain-timeout 20s\n")
    with with_daemon(d):
        idle = await ws_connect(d.url("/sessions/dr-idle/stream"))
        await ws_recv(idle)
        await ws_send(idle, {"v": 1, "type": "chat", "sessionId": "dr-idle",
                             "message": "x"})
        idle_seen = logged(await ws_until(idle, is_idle, timeout=30))
        busy = await ws_connect(d.url("/sessions/dr-busy/stream"))
        await ws_recv(busy)
        await ws_send(busy, {"v": 1, "type": "chat", "sessionId": "dr-busy",
                             "message": "y"})
        ev = []
        await ws_until(busy, lambda e: sum(1 for x in ev if x.get("type") == "token") >= 3,
                       into=ev)
        busy_seen = logged(ev)
        ctl = subprocess.Popen([PARLEYCTL, "-s", d.ctlsock, "drain", "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # the idle session is let go at once
        code = await closed_code(idle, idle_seen, 10)
        check(code == 1001, "idle client closed with %s, want 1001" % code)
        st, _, _ = d.http("GET", "/health/ready")
        check(st == 503, "/health/ready while draining: %d, want 503" % st)
        st, _, body = d.http("POST", "/sessions", {"sessionId": "dr-new"})
        check(st == 503 and b"draining" in body, "new session while draining: "
              "%d %r" % (st, body[:120]))
        # the streaming one finishes its turn, then is let go
        ev = []
        try:
            await ws_until(busy, is_done, into=ev, timeout=30)
        except websockets.exceptions.ConnectionClosed as e:
            raise Fail("busy client closed (%s) before its turn's done" % e.code)
        busy_seen += logged(ev)
        code = await closed_code(busy, busy_seen, 25)
        check(code == 1001, "busy client closed with %s, want 1001" % code)
        try:
            out, err = ctl.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            ctl.kill()
            raise Fail("parleyctl drain did not return")
        check(ctl.returncode == 0, "parleyctl drain exit %d: %s" % (ctl.returncode, err[-300:]))
        try:
            rc = d.proc.wait(10)
        except subprocess.TimeoutExpired:
            raise Fail("parleyd still running after parleyctl drain returned")
        check(rc == 0, "parleyd exit status %d after a drain" % rc)
        check(not os.path.exists(d.ctlsock) or
              subprocess.run([PARLEYCTL, "-s", d.ctlsock, "status"],
                             capture_output=True).returncode == 69,
              "control socket still answers after the drain")
        text = "".join(e["content"] for e in busy_seen if e["type"] == "token")
        check(text == LONG, "the drained turn's reply differs: %r" % text[-60:])
        d.start()
        for sid, seen in (("dr-idle", idle_seen), ("dr-busy", busy_seen)):
            check_contiguous(seen, 1, sid + " as its client saw it")
            same_events(seen, d.log_events(sid), sid + ": client vs log")


run_test("drain", test)

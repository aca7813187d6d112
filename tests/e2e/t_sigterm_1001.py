#!/usr/bin/python3
# SIGTERM: WebSocket clients get close code 1001, SSE streams end, parleyd
# exits 0 and the log holds everything.
import sys, os, signal, subprocess
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *


async def test():
    d = Daemon()
    with with_daemon(d):
        wss = []
        for sid in ("term-1", "term-2"):
            ws = await ws_connect(d.url("/chat"))
            await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid, "message": "hi"})
            await ws_until(ws, is_idle)
            wss.append(ws)
        ws3 = await ws_connect(d.url("/sessions/term-3/stream"))
        await ws_recv(ws3)
        wss.append(ws3)
        sse = subprocess.Popen(["curl", "-s", "-N", "-m", "30",
                                d.url("/sessions/term-1/events", "http")],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        last = d.last_seq("term-1")
        d.signal(signal.SIGTERM)
        for i, ws in enumerate(wss):
            try:
                while True:
                    await ws_recv(ws, 15)
            except websockets.exceptions.ConnectionClosed as e:
                check(e.code == 1001, "client %d: close code %s, want 1001" % (i, e.code))
            except asyncio.TimeoutError:
                raise Fail("client %d not closed after SIGTERM" % i)
        try:
            out, _ = sse.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            sse.kill()
            raise Fail("SSE stream did not end after SIGTERM")
        check(sse.returncode == 0, "curl on SSE exit %d (18 = cut mid-chunk)" % sse.returncode)
        check(b"session_state" in out, "SSE got no session_state: %r" % out[:200])
        try:
            rc = d.proc.wait(15)
        except subprocess.TimeoutExpired:
            raise Fail("parleyd still running 15 s after SIGTERM")
        check(rc == 0, "parleyd exit status %d after SIGTERM" % rc)
        d.start()
        check(d.last_seq("term-1") == last, "log changed across SIGTERM")
        check_contiguous(d.log_events("term-2"), 1, "term-2 log after restart")

run_test("sigterm_1001", test)

#!/usr/bin/python3
# heartbeat-interval 1s: an idle WebSocket client gets {"type":"heartbeat"}
# events (no seq, not logged) about every second; an idle SSE client gets
# ": heartbeat" comment lines.
import sys, os, subprocess
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *


async def collect(ws, secs):
    got = []
    deadline = time.time() + secs
    while time.time() < deadline:
        try:
            m = await asyncio.wait_for(ws.recv(), max(0.01, deadline - time.time()))
        except asyncio.TimeoutError:
            break
        got.append((time.time(), json.loads(m)))
    return got


def check_heartbeats(got, what, sid=None):
    hb = [e for _, e in got if e.get("type") == "heartbeat"]
    check(len(hb) >= 2, "%s: %d heartbeats in 5 s with heartbeat-interval 1s "
          "(events: %s)" % (what, len(hb), [short(e) for _, e in got]))
    for e in hb:
        check("seq" not in e, "%s: heartbeat carries a seq: %s" % (what, e))
        check(e.get("v") == 1, "%s: heartbeat without v:1: %s" % (what, e))
        if sid is not None and "sessionId" in e:
            check(e["sessionId"] == sid, "%s: heartbeat for session %s" % (what, e["sessionId"]))
    others = [e for _, e in got if e.get("type") not in ("heartbeat", "session_state")]
    check(not others, "%s: unexpected events on an idle connection: %s"
          % (what, [short(e) for e in others]))
    # roughly periodic: not a burst (generous bound, no timing assertion
    # beyond "spread over more than one interval")
    ts = [t for t, e in got if e.get("type") == "heartbeat"]
    check(ts[-1] - ts[0] >= 0.5, "%s: heartbeats came in a burst: %s" % (what, ts))


async def test():
    d = Daemon(heartbeat="1s")
    with with_daemon(d):
        sid = "hb-1"
        # make the session have some history, so seq would be tempting
        ws = await ws_connect(d.url("/chat"))
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid, "message": "hi"})
        await ws_until(ws, is_idle, timeout=20)
        await ws.close()
        n = d.last_seq(sid)

        # The three idle clients at once, each watched for its own
        # window (they ran one after the other: 13.5 s of waiting).
        await asyncio.gather(idle_stream(d, sid, n), idle_chat(d, sid),
                             idle_sse(d, sid, n))
        check(d.last_seq(sid) == n, "heartbeats were logged: lastSeq %d -> %d"
              % (n, d.last_seq(sid)))


async def idle_stream(d, sid, n):
    """1. stream WebSocket client that sends nothing"""
    ws = await ws_connect(d.url("/sessions/%s/stream" % sid))
    got = await collect(ws, 5)
    check(got and got[0][1].get("type") == "session_state",
          "stream: first event %s" % (got and short(got[0][1])))
    check_heartbeats(got, "WS /stream", sid)
    # the connection is still healthy
    await ws_send(ws, {"v": 1, "type": "ping", "sessionId": sid})
    e = await ws_until(ws, lambda e: e.get("type") != "heartbeat", timeout=5)
    check(e[-1].get("type") == "pong", "ping after heartbeats answered with %s"
          % short(e[-1]))
    await ws.close()
    check(d.last_seq(sid) == n, "heartbeats were logged: lastSeq %d -> %d"
          % (n, d.last_seq(sid)))


async def idle_chat(d, sid):
    """2. /chat bound by a first message, then silent"""
    ws = await ws_connect(d.url("/chat"))
    await ws_send(ws, {"v": 1, "type": "ping", "sessionId": sid})
    got = await collect(ws, 5)
    check(any(e.get("type") == "pong" for _, e in got), "no pong on /chat: %s"
          % [short(e) for _, e in got])
    got = [(t, e) for t, e in got if e.get("type") != "pong"]
    check_heartbeats(got, "WS /chat", sid)
    await ws.close()


async def idle_sse(d, sid, n):
    """3. SSE client that just listens"""
    p = await asyncio.to_thread(
        subprocess.run, ["curl", "-sS", "-N", "--max-time", "3.5",
                         d.url("/sessions/%s/events" % sid, "http")],
        capture_output=True, text=True, timeout=15)
    check(p.returncode in (0, 28), "curl SSE rc %d: %s" % (p.returncode, p.stderr))
    lines = p.stdout.splitlines()
    hb = [l for l in lines if l.startswith(":") and "heartbeat" in l]
    check(len(hb) >= 2, "SSE: %d ': heartbeat' comments in 3.5 s; output: %r"
          % (len(hb), p.stdout[:600]))
    check(all(l.strip() == ": heartbeat" for l in hb),
          "SSE heartbeat comment lines look odd: %r" % hb)
    ids = [l for l in lines if l.startswith("id:")]
    check(not ids, "SSE: events with ids on an idle session: %r" % ids)
    check(d.last_seq(sid) == n, "lastSeq changed while idle")

run_test("heartbeat", test)

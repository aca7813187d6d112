#!/usr/bin/python3
# cancel stops the running turn: done with cancelled:true, then idle, no
# further token for that message, partial output stays logged; the next chat
# runs a full turn.  cancel with no running turn is harmless.  Both over
# WebSocket and over POST /sessions/{id}/messages.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

# ~110 chunks of 50 ms: long enough to cancel mid-way, short enough (~6 s)
# for the complete turn that follows.
LONG = "Cancel me somewhere in the middle of this long reply. " * 4
PROVIDERS = provider_block("slow", LONG, chunk=2, delay="50ms")


async def drain(ws, secs):
    """Everything received within secs."""
    got = []
    deadline = time.time() + secs
    while time.time() < deadline:
        try:
            got.append(await ws_recv(ws, max(0.01, deadline - time.time())))
        except asyncio.TimeoutError:
            break
    return got


def tokens_of(events, mid):
    return [e for e in events if e.get("type") == "token" and e.get("messageId") == mid]


async def cancel_over_ws(d, sid):
    ws = await ws_connect(d.url("/chat"))
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                       "id": "c-1", "message": "go on and on"})
    ev = []
    await ws_until(ws, lambda e: len([x for x in ev if x.get("type") == "token"]) >= 3,
                   into=ev, timeout=20)
    um = [e for e in ev if e.get("type") == "user_message"]
    check(um, "no user_message before the tokens: %s" % [short(e) for e in ev])
    mid = "m-%d" % um[0]["seq"]
    toks = [e for e in ev if e.get("type") == "token"]
    check(all(t.get("messageId") == mid for t in toks),
          "tokens carry messageId %s, expected %s" % (toks[0].get("messageId"), mid))
    await ws_send(ws, {"v": 1, "type": "cancel", "sessionId": sid, "id": "x"})
    after = []
    # the ack is connection-level: it may come before or after done/idle
    await ws_until(ws, lambda e: any(is_idle(x) for x in after) and
                   any(x.get("type") == "ack" and x.get("id") == "x" for x in after),
                   into=after, timeout=15)
    done = [e for e in after if is_done(e)]
    check(len(done) == 1, "expected one done after cancel, got %s"
          % [short(e) for e in after])
    check(done[0].get("messageId") == mid, "done.messageId %s, expected %s"
          % (done[0].get("messageId"), mid))
    check(done[0].get("cancelled") is True, "done after cancel lacks cancelled:true: %s"
          % done[0])
    u = done[0].get("usage", {})
    check(u.get("outputTokens", 0) > 0 and u.get("estimated") is True,
          "a cancelled turn must count what it streamed: usage %s" % u)
    acks = [e for e in after if e.get("type") == "ack"]
    check(acks and acks[0].get("id") == "x", "cancel with id x not acked: %s"
          % [short(e) for e in after])
    errs = [e for e in after if e.get("type") == "error"]
    check(not errs, "error after cancel: %s" % errs)
    # idle comes after done
    i_done = after.index(done[0])
    i_idle = after.index([x for x in after if is_idle(x)][0])
    check(i_done < i_idle, "idle before done")
    # no more tokens for that message: wait a while (the provider would
    # still be producing chunks every 50 ms)
    late = await drain(ws, 1.5)
    check(not tokens_of(late, mid), "token for %s after cancel: %s"
          % (mid, [short(e) for e in late]))
    check(not logged(late), "logged events after idle with nothing running: %s"
          % [short(e) for e in late])
    all_ev = ev + after + late
    check_contiguous(logged(all_ev), 1, "cancelled turn events")
    streamed = "".join(e["content"] for e in tokens_of(all_ev, mid))
    check(streamed and len(streamed) < len(LONG) and LONG.startswith(streamed),
          "partial text %d chars of %d (must be a proper prefix)" % (len(streamed), len(LONG)))
    # the partial tokens stay in the log
    logev = d.log_events(sid)
    same_events(logged(all_ev), logev, "client vs GET /log after cancel")
    check("".join(e["content"] for e in tokens_of(logev, mid)) == streamed,
          "logged partial text differs from streamed")
    n = logev[-1]["seq"]

    # cancel with nothing running: acked, nothing logged
    await ws_send(ws, {"v": 1, "type": "cancel", "sessionId": sid, "id": "x2"})
    e = await ws_recv(ws, 10)
    check(e.get("type") == "ack" and e.get("id") == "x2",
          "idle cancel answered with %s" % e)
    await ws_send(ws, {"v": 1, "type": "ping", "sessionId": sid})
    e = await ws_recv(ws, 10)
    check(e.get("type") == "pong", "ping after idle cancel answered with %s" % e)
    check(d.last_seq(sid) == n, "idle cancel changed lastSeq %d -> %d"
          % (n, d.last_seq(sid)))

    # a following chat runs a complete turn
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                       "id": "c-2", "message": "again"})
    ev2 = []
    await ws_until(ws, is_idle, into=ev2, timeout=30)
    l2 = logged(ev2)
    check_contiguous(l2, n + 1, "turn after cancel")
    check(l2[0]["type"] == "user_message", "first event after chat %s" % short(l2[0]))
    mid2 = "m-%d" % l2[0]["seq"]
    d2 = [e for e in l2 if is_done(e)]
    check(len(d2) == 1 and d2[0].get("messageId") == mid2 and not d2[0].get("cancelled"),
          "second turn done: %s" % d2)
    txt = "".join(e["content"] for e in tokens_of(l2, mid2))
    check(txt == LONG, "second turn text %d chars, expected full %d" % (len(txt), len(LONG)))
    await ws.close()


async def cancel_over_post(d, sid):
    st, js = d.http_json("POST", "/sessions/%s/messages" % sid,
                         {"v": 1, "type": "chat", "id": "p-1", "message": "long please"})
    check(st == 202 and isinstance(js, dict) and "seq" in js,
          "POST chat -> %s %s" % (st, js))
    useq = js["seq"]
    mid = "m-%d" % useq
    # wait for a few tokens in the log
    deadline = time.time() + 20
    while True:
        toks = tokens_of(d.log_events(sid, useq - 1), mid)
        if len(toks) >= 3:
            break
        check(time.time() < deadline, "no tokens for %s in the log" % mid)
        await asyncio.sleep(0.05)
    st, js = d.http_json("POST", "/sessions/%s/messages" % sid,
                         {"v": 1, "type": "cancel", "id": "px"})
    check(st in (200, 202), "POST cancel -> %s %s" % (st, js))
    deadline = time.time() + 15
    while True:
        evs = d.log_events(sid, useq - 1)
        if any(is_idle(e) for e in evs if e["seq"] > useq):
            break
        check(time.time() < deadline, "no idle after POST cancel; log: %s"
              % [short(e) for e in evs[-5:]])
        await asyncio.sleep(0.05)
    done = [e for e in evs if is_done(e)]
    check(len(done) == 1 and done[0].get("messageId") == mid and
          done[0].get("cancelled") is True, "done after POST cancel: %s" % done)
    n = d.last_seq(sid)
    await asyncio.sleep(1.0)
    check(d.last_seq(sid) == n, "events logged after the cancelled turn went idle: "
          "%s" % [short(e) for e in d.log_events(sid, n)])
    # cancel with nothing running over POST: harmless, nothing logged
    st, js = d.http_json("POST", "/sessions/%s/messages" % sid,
                         {"v": 1, "type": "cancel"})
    check(st in (200, 202), "POST idle cancel -> %s %s" % (st, js))
    check(d.last_seq(sid) == n, "idle POST cancel changed lastSeq")
    # and the session still runs complete turns
    st, js = d.http_json("POST", "/sessions/%s/messages" % sid,
                         {"v": 1, "type": "chat", "message": "again"})
    check(st == 202, "POST chat after cancel -> %s %s" % (st, js))
    mid2 = "m-%d" % js["seq"]
    deadline = time.time() + 40
    while True:
        evs = d.log_events(sid, js["seq"] - 1)
        dn = [e for e in evs if is_done(e)]
        if dn:
            break
        check(time.time() < deadline, "second POST turn did not finish")
        await asyncio.sleep(0.1)
    check(dn[0].get("messageId") == mid2 and not dn[0].get("cancelled"),
          "done of the turn after POST cancel: %s" % dn[0])


async def test():
    d = Daemon(providers=PROVIDERS, default="slow")
    with with_daemon(d):
        # cancel on a brand-new session before any turn: harmless, and
        # it creates nothing (only a first chat does): NOT_FOUND
        ws = await ws_connect(d.url("/chat"))
        await ws_send(ws, {"v": 1, "type": "cancel", "sessionId": "c-idle", "id": "k"})
        e = await ws_recv(ws)
        check(e.get("type") == "error" and e.get("code") == "NOT_FOUND",
              "cancel on a fresh session answered with %s" % e)
        await ws.close()
        st, js = d.http_json("GET", "/sessions/c-idle")
        check(st == 404, "GET fresh session -> %s (a cancel created it)" % st)

        await cancel_over_ws(d, "cancel-ws")
        await cancel_over_post(d, "cancel-post")

run_test("cancel", test)

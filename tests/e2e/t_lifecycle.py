#!/usr/bin/python3
# Session lifecycle with idle-timeout 1s: an idle, disconnected session leaves
# memory (activeSessions drops to 0) and is reloaded from the store with its
# seq numbering intact; status is "running" while a client watches a turn and
# "suspended" once every client left while the turn still runs (events keep
# being logged, a reconnecting client gets all of them); two chats sent back
# to back are answered as two turns in order.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

# 60 chunks of 50 ms: ~3 s per turn
REPLY = "Lifecycle reply text that takes a few seconds to stream out. " * 2
STATUSES = ("created", "running", "idle", "suspended", "paused", "completed", "failed")


def info(d):
    st, js = d.http_json("GET", "/api/info")
    check(st == 200 and isinstance(js, dict), "GET /api/info -> %s %s" % (st, js))
    return js


async def poll(what, fn, timeout=10, step=0.1):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        ok, last = fn()
        if ok:
            return last
        await asyncio.sleep(step)
    raise Fail("%s: not reached within %ss (last: %s)" % (what, timeout, last))


def sess(d, sid):
    st, js = d.http_json("GET", "/sessions/%s" % sid)
    check(st == 200, "GET /sessions/%s -> %s %s" % (sid, st, js))
    return js


def turn_text(events, mid):
    return "".join(e["content"] for e in events
                   if e.get("type") == "token" and e.get("messageId") == mid)


async def eviction_and_reload(d):
    sid = "life-evict"
    ws = await ws_connect(d.url("/chat"))
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid, "message": "one"})
    ev = await ws_until(ws, is_idle, timeout=20)
    await ws.close()
    n = logged(ev)[-1]["seq"]
    check_contiguous(logged(ev), 1, "first turn")
    await poll("activeSessions drops to 0 after idle-timeout 1s",
               lambda: (lambda i: (i.get("activeSessions") == 0, i))(info(d)))
    js = sess(d, sid)
    check(js.get("lastSeq") == n, "reloaded session lastSeq %s, expected %d"
          % (js.get("lastSeq"), n))
    check(js.get("status") in STATUSES, "reloaded session status %r" % js.get("status"))
    check(js.get("status") not in ("running", "failed", "completed"),
          "reloaded idle session has status %r" % js.get("status"))
    # a new chat continues the numbering
    ws = await ws_connect(d.url("/chat"))
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid, "id": "two",
                       "message": "two"})
    ev = await ws_until(ws, is_idle, timeout=20)
    await ws.close()
    st = ev[0]
    check(st.get("type") == "session_state" and st.get("lastSeq") == n,
          "session_state after reload: %s" % st)
    l = logged(ev)
    check_contiguous(l, n + 1, "turn after reload")
    check(l[0]["type"] == "user_message", "first event after reload %s" % short(l[0]))
    ack = [e for e in ev if e.get("type") == "ack"]
    check(ack and ack[0].get("eventSeq") == n + 1, "ack after reload: %s" % ack)
    check(turn_text(l, "m-%d" % (n + 1)) == REPLY, "turn after reload: wrong text")
    same_events(logged(ev), d.log_events(sid, n), "client vs log after reload")


async def running_suspended_resume(d):
    sid = "life-status"
    ws = await ws_connect(d.url("/chat"))
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid, "message": "go"})
    ev = []
    await ws_until(ws, lambda e: e.get("type") == "token", into=ev, timeout=20)
    js = sess(d, sid)
    check(js.get("status") == "running",
          "status with a client connected and a turn running: %r" % js.get("status"))
    await ws.close()
    seen = logged(ev)
    n = seen[-1]["seq"]
    js = await poll("status becomes suspended after the client left",
                    lambda: (lambda j: (j.get("status") == "suspended", j))(sess(d, sid)),
                    timeout=5, step=0.05)
    log_now = d.log_events(sid)
    check(not any(is_done(e) for e in log_now),
          "turn finished before the suspended check (make REPLY longer)")
    s1 = js["lastSeq"]
    await poll("events keep being logged while suspended",
               lambda: (lambda j: (j["lastSeq"] > s1, j["lastSeq"]))(sess(d, sid)),
               timeout=5, step=0.05)
    # reconnect with the last seq seen: everything, exactly once, through done
    ws = await ws_connect(d.url("/sessions/%s/stream?lastSeq=%d" % (sid, n)))
    ev2 = await ws_until(ws, is_idle, timeout=20)
    check(ev2[0].get("type") == "session_state", "first event %s" % short(ev2[0]))
    check_contiguous(logged(ev2), n + 1, "resume after suspension")
    seen += logged(ev2)
    check_contiguous(seen, 1, "whole turn across the suspension")
    check(turn_text(seen, "m-1") == REPLY, "text across the suspension differs")
    check(sum(1 for e in seen if is_done(e)) == 1, "done count")
    same_events(seen, d.log_events(sid), "client vs log (suspended turn)")
    js = sess(d, sid)
    check(js.get("status") == "idle", "status with a client connected, no turn: %r"
          % js.get("status"))
    await ws.close()


async def two_chats_in_order(d):
    sid = "life-queue"
    ws = await ws_connect(d.url("/chat"))
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid, "id": "q1",
                       "message": "first"})
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid, "id": "q2",
                       "message": "second"})
    ev = []
    await ws_until(ws, lambda e: sum(1 for x in ev if is_done(x)) >= 2 and is_idle(e),
                   into=ev, timeout=25)
    l = logged(ev)
    check_contiguous(l, 1, "two queued turns")
    um = [e for e in l if e["type"] == "user_message"]
    check([u.get("message") for u in um] == ["first", "second"],
          "user_messages: %s" % [u.get("message") for u in um])
    acks = {e["id"]: e["eventSeq"] for e in ev if e.get("type") == "ack"}
    check(acks.get("q1") == um[0]["seq"] and acks.get("q2") == um[1]["seq"],
          "acks %s vs user_message seqs %s" % (acks, [u["seq"] for u in um]))
    dn = [e for e in l if is_done(e)]
    m1, m2 = "m-%d" % um[0]["seq"], "m-%d" % um[1]["seq"]
    check([x.get("messageId") for x in dn] == [m1, m2],
          "done messageIds %s, expected [%s, %s]" % ([x.get("messageId") for x in dn], m1, m2))
    check(not any(x.get("cancelled") for x in dn), "a queued turn was cancelled")
    # turns do not interleave: every token of turn 2 after done of turn 1
    t2 = [e["seq"] for e in l if e["type"] == "token" and e.get("messageId") == m2]
    t1 = [e["seq"] for e in l if e["type"] == "token" and e.get("messageId") == m1]
    check(t1 and t2 and max(t1) < dn[0]["seq"] < min(t2),
          "turns interleave: tokens m1 %s..%s, done1 %d, tokens m2 from %s"
          % (t1[:1], t1[-1:], dn[0]["seq"], t2[:1]))
    check(turn_text(l, m1) == REPLY and turn_text(l, m2) == REPLY, "turn texts differ")
    await ws.close()


async def test():
    d = Daemon(providers=provider_block("slow", REPLY, chunk=2, delay="50ms"),
               default="slow", idle_timeout="1s")
    with with_daemon(d):
        # alone: it waits for activeSessions to drop to 0
        await eviction_and_reload(d)
        # two sessions of their own, at once (3 s and 6 s of turns)
        await asyncio.gather(running_suspended_resume(d),
                             two_chats_in_order(d))

run_test("lifecycle", test)

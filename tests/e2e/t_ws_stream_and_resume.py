#!/usr/bin/python3
# Chat over /chat, drop mid-reply, resume with ?lastSeq=N on /stream, drop
# again, resume with a first-message resume; the union is exactly-once.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

LONG = "The quick brown fox jumps over the lazy dog. " * 12


async def test():
    d = Daemon(providers=provider_block("slow", LONG, chunk=4, delay="5ms"),
               default="slow")
    with with_daemon(d):
        sid = "resume-1"
        seen = []
        ws = await ws_connect(d.url("/chat"))
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                           "id": "c-1", "message": "tell me a story"})
        ev = []
        # read until a few tokens arrived, then drop mid-reply
        await ws_until(ws, lambda e: sum(1 for x in ev if x.get("type") == "token") >= 3,
                       into=ev)
        await ws.close()
        check(ev[0]["type"] == "session_state", "first event %s" % short(ev[0]))
        check(ev[0]["lastSeq"] == 0, "new session lastSeq %s" % ev[0]["lastSeq"])
        acks = [e for e in ev if e.get("type") == "ack"]
        check(acks and acks[0]["id"] == "c-1" and acks[0]["eventSeq"] == 1 and "seq" not in acks[0],
              "ack for c-1: %s" % acks)
        part1 = logged(ev)
        check(not any(is_done(e) for e in part1), "reply finished before the drop; make it longer")
        check_contiguous(part1, 1, "first connection")
        seen += part1
        n = seen[-1]["seq"]

        # resume 1: ?lastSeq=N on the stream endpoint, drop after 2 more events
        ws = await ws_connect(d.url("/sessions/%s/stream?lastSeq=%d" % (sid, n)))
        st = await ws_recv(ws)
        check(st["type"] == "session_state", "resume 1 first event %s" % short(st))
        check(st["lastSeq"] >= n, "session_state.lastSeq %s < %d" % (st["lastSeq"], n))
        ev = []
        await ws_until(ws, lambda e: len(logged(ev)) >= 2, into=ev)
        await ws.close()
        part2 = logged(ev)
        check_contiguous(part2, n + 1, "resume with ?lastSeq=%d" % n)
        seen += part2
        n = seen[-1]["seq"]

        # resume 2: first message {"type":"resume"} on /chat, through done
        ws = await ws_connect(d.url("/chat"))
        await ws_send(ws, {"v": 1, "type": "resume", "sessionId": sid, "lastSeq": n})
        ev = []
        await ws_until(ws, is_idle, into=ev, timeout=30)
        check(ev[0]["type"] == "session_state", "resume 2 first event %s" % short(ev[0]))
        part3 = logged(ev)
        check_contiguous(part3, n + 1, "resume message lastSeq=%d" % n)
        seen += part3
        check_contiguous(seen, 1, "union of three connections")
        types = [e["type"] for e in seen]
        check(types[0] == "user_message", "seq 1 is %s" % types[0])
        check(types.count("done") == 1, "done count %d" % types.count("done"))
        text = "".join(e["content"] for e in seen if e["type"] == "token")
        check(text == LONG, "streamed text differs: %r..." % text[:80])
        done = [e for e in seen if is_done(e)][0]
        u = done.get("usage", {})
        for k in ("inputTokens", "outputTokens", "tokens", "cost"):
            check(k in u, "done.usage lacks %s: %s" % (k, u))
        # the log agrees with what the clients saw
        same_events(seen, d.log_events(sid), "clients vs GET /log")
        # a resume at the end replays nothing and goes live
        ws = await ws_connect(d.url("/sessions/%s/stream?lastSeq=%d" % (sid, seen[-1]["seq"])))
        st = await ws_recv(ws)
        check(st["lastSeq"] == seen[-1]["seq"], "final lastSeq %s" % st["lastSeq"])
        await ws_send(ws, {"v": 1, "type": "ping", "sessionId": sid})
        e = await ws_recv(ws)
        check(e["type"] == "pong", "ping answered with %s" % short(e))
        await ws.close()

run_test("ws_stream_and_resume", test)

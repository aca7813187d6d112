#!/usr/bin/python3
# One parleyd on `store redis://127.0.0.1:PORT` (its own redis-server, AOF):
# (1) stream a reply, drop the client mid-reply, resume with ?lastSeq and a
# resume message: exactly once, and what the clients saw is the log in
# Redis byte for byte (entry ids <seq>-0, meta last, the owner key);
# (2) SIGKILL the worker running a turn: recoverable INTERNAL error, the turn
# re-run (m-<seq>.1) to its done, nothing lost or repeated, the log in Redis
# agrees.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import *

STORY = "The quick brown fox jumps over the lazy dog. " * 12
LONG = "".join("chunk%03d " % i for i in range(300))  # 2700 bytes


def redis_agrees(red, d, sid, seen, what):
    """seen (a client's logged events from seq 1) is the Redis log."""
    log = redis_log(red.cmd, sid)
    ev = [e for _, _, e in log]
    check_contiguous(ev, 1, "%s: Redis log" % what)
    check(len(ev) >= len(seen), "%s: Redis has %d events, a client saw %d"
          % (what, len(ev), len(seen)))
    for a, b in zip(seen, ev):
        check(a == b, "%s: seq %s differs: client %s, Redis %s"
              % (what, a.get("seq"), a, b))
    last = red.cmd("HGET", "parley:{%s}:meta" % sid, "last")
    check(last is not None and int(last) == ev[-1]["seq"],
          "%s: meta last %r, log ends at %d" % (what, last, ev[-1]["seq"]))
    same_events(ev, d.log_events(sid), "%s: Redis vs GET /log" % what)
    return ev


async def resume_and_exactly_once(d, red):
    sid = "rs-1"
    ws = await ws_connect(d.url("/chat"))
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                       "id": "c-1", "message": "tell me a story"})
    ev = []
    await ws_until(ws, lambda e: len(of_type(ev, "token")) >= 3, into=ev)
    await ws.close()
    check(ev[0]["type"] == "session_state" and ev[0]["lastSeq"] == 0,
          "first event %s" % ev[0])
    acks = of_type(ev, "ack")
    check(acks and acks[0]["id"] == "c-1" and acks[0].get("eventSeq") == 1 and "seq" not in acks[0],
          "ack for c-1: %s" % acks)
    seen = logged(ev)
    check(not any(is_done(e) for e in seen), "reply finished before the drop")
    check_contiguous(seen, 1, "first connection")
    o = red.cmd("GET", "parley:{%s}:owner" % sid)
    check(o is not None and o.startswith(b"solo/") and b"#" in o,
          "owner key while the session is open: %r (want solo/<pid>#<fence>)" % o)

    n = seen[-1]["seq"]
    ws = await ws_connect(d.url("/sessions/%s/stream?lastSeq=%d" % (sid, n)))
    st = await ws_recv(ws)
    check(st["type"] == "session_state" and st["lastSeq"] >= n,
          "resume 1 first event %s" % st)
    ev = []
    await ws_until(ws, lambda e: len(logged(ev)) >= 2, into=ev)
    await ws.close()
    part = logged(ev)
    check_contiguous(part, n + 1, "resume with ?lastSeq=%d" % n)
    seen += part

    n = seen[-1]["seq"]
    ws = await ws_connect(d.url("/chat"))
    await ws_send(ws, {"v": 1, "type": "resume", "sessionId": sid, "lastSeq": n})
    ev = []
    await ws_until(ws, is_idle, into=ev, timeout=30)
    await ws.close()
    part = logged(ev)
    check_contiguous(part, n + 1, "resume message lastSeq=%d" % n)
    seen += part
    check_contiguous(seen, 1, "union of three connections")
    check([e["type"] for e in seen].count("done") == 1, "done count")
    check(tokens_text(seen) == STORY, "streamed text differs: %r"
          % tokens_text(seen)[:80])
    redis_agrees(red, d, sid, seen, "resume")

    # a whole replay from Redis (lastSeq=0) is the same again
    ws = await ws_connect(d.url("/sessions/%s/stream?lastSeq=0" % sid))
    ev = []
    await ws_until(ws, lambda e: e.get("seq") == seen[-1]["seq"], into=ev)
    await ws.close()
    check(logged(ev) == seen, "replay from 0 differs from the live view")
    # an id already accepted is acknowledged again, not applied twice
    ws = await ws_connect(d.url("/chat"))
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                       "id": "c-1", "message": "tell me a story"})
    ev = []
    await ws_until(ws, lambda e: e.get("type") == "ack", into=ev)
    await ws.close()
    a = of_type(ev, "ack")[0]
    check(a.get("duplicate") is True and a.get("eventSeq") == 1,
          "second c-1: %s" % a)
    check(d.last_seq(sid) == seen[-1]["seq"], "a duplicate chat was logged")


async def worker_sigkill(d, red):
    sid = "rs-crash"
    ws, ev = await stream_chat(d, sid, "k-1", "go", after_tokens(5))
    seen = await kill_owner(d, ws, ev)
    check(not any(is_done(e) for e in seen), "turn finished before the kill")
    after, attempts = await resume_until(
        d, sid, seen, lambda e: is_done(e) and "." in str(
            e.get("messageId", "")), "no done of the re-run turn")
    check_contiguous(after, seen[-1]["seq"] + 1, "after reconnect")
    allev = seen + after
    check_contiguous(allev, 1, "union across the kill")
    errs = of_type(after, "error")
    check(errs, "no error event reported the interrupted turn; got %s"
          % [short(e) for e in after[:10]])
    check(errs[0].get("severity") == "recoverable" and
          errs[0].get("code") == "INTERNAL", "error event: %s" % errs[0])
    dones = of_type(allev, "done")
    check(len(dones) == 1, "done events %s" % [e.get("messageId") for e in dones])
    orig = of_type(seen, "token")[0]["messageId"]
    check(dones[0]["messageId"].startswith(orig + "."),
          "re-run messageId %s, expected %s.1" % (dones[0]["messageId"], orig))
    rerun = "".join(e["content"] for e in of_type(allev, "token")
                    if e["messageId"] == dones[0]["messageId"])
    check(rerun == LONG, "re-run text differs (%d bytes vs %d)"
          % (len(rerun), len(LONG)))
    wait_until(lambda: len(d.workers_pids()) == d.workers, 10,
               "the worker to be replaced")
    ev = redis_agrees(red, d, sid, allev, "worker SIGKILL")
    # the original attempt wrote nothing after the re-run started
    i = ev.index(errs[0])
    late = [e for e in ev[i + 1:] if e.get("messageId") == orig]
    check(not late, "events of the killed attempt after its error: %s"
          % [short(e) for e in late])


async def test():
    need_redis()
    red = RedisServer(fsync_always=True).start()
    try:
        prov = provider_block("story", STORY, chunk=4, delay="5ms") + \
            provider_block("slow", LONG, chunk=9, delay="10ms")
        d = Daemon(providers=prov, default="story",
                   store="redis://127.0.0.1:%d" % red.port, host_id="solo",
                   lease="2s")
        with with_daemon(d):
            print("-- resume and exactly once", flush=True)
            await resume_and_exactly_once(d, red)
        # the worker test wants the slow default provider
        d = Daemon(providers=prov, default="slow",
                   store="redis://127.0.0.1:%d" % red.port, host_id="solo",
                   lease="2s")
        with with_daemon(d):
            print("-- worker SIGKILL mid-turn", flush=True)
            await worker_sigkill(d, red)
            # the first daemon's session is still there, from Redis
            st, js = d.http_json("GET", "/sessions/rs-1")
            check(st == 200 and js.get("lastSeq", 0) > 0,
                  "rs-1 from another parleyd on the same Redis: %s %s" % (st, js))
    finally:
        red.destroy()

run_test("redis_single", test)

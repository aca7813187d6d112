#!/usr/bin/python3
# Redis goes away and comes back (SIGKILL, restart on the same port and dir,
# AOF with appendfsync always):
# (1) between turns: /health/ready answers 503 within 5 s of the kill (and
#     /health/live stays 200), 200 again after the restart; a session
#     opened meanwhile is 503 OVERLOADED (the store unreachable), not
#     500; the session's log is the same as before, event for event; the
#     next turn runs and
#     every client sees every event exactly once;
# (2) in the middle of a turn: after Redis is back the session goes on (the
#     turn ends, a new chat is answered with done) and the clients' views
#     are the log, without gaps or duplicates.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import *

REPLY = "Redis went away and came back; this reply is the proof. " * 3
LONG = "".join("chunk%03d " % i for i in range(300))  # ~3 s at 10 ms/chunk


def ready(d):
    try:
        return d.http("GET", "/health/ready", timeout=2)[0]
    except OSError as e:
        return e


def wait_status(d, want, timeout, what):
    t0 = time.time()
    last = None
    while time.time() - t0 < timeout:
        last = ready(d)
        if last == want:
            return time.time() - t0
        time.sleep(0.05)
    raise Fail("%s: /health/ready still %s after %ss, expected %d; log: %s"
               % (what, last, timeout, want, d.log_tail(8)))


async def replay(d, sid, upto):
    ws = await ws_connect(d.url("/sessions/%s/stream?lastSeq=0" % sid))
    ev = []
    await ws_until(ws, lambda e: e.get("seq", 0) >= upto, into=ev)
    await ws.close()
    return logged(ev)


def check_redis(red, d, sid, seen, what):
    ev = [e for _, _, e in redis_log(red.cmd, sid)]
    check_contiguous(ev, 1, "%s: Redis log" % what)
    check(ev[:len(seen)] == seen, "%s: the clients' view differs from the "
          "Redis log" % what)
    check(len(ev) == len(seen), "%s: Redis has %d events, the clients saw %d"
          % (what, len(ev), len(seen)))
    same_events(ev, d.log_events(sid), "%s: Redis vs GET /log" % what)


async def between_turns(d, red):
    sid = "rh-1"
    t1, _ = await turn(d, sid, 0, "c-1")
    check(t1 and t1[0]["type"] == "user_message", "turn 1 starts with %s"
          % (short(t1[0]) if t1 else None))
    check(tokens_text(t1) == REPLY, "turn 1 text %r" % tokens_text(t1))
    before = await replay(d, sid, t1[-1]["seq"])
    check_contiguous(before, 1, "before the outage")
    check_redis(red, d, sid, before, "before the outage")
    live = await ws_connect(d.url("/sessions/%s/stream?lastSeq=%d"
                                  % (sid, before[-1]["seq"])))
    check((await ws_recv(live))["type"] == "session_state", "no session_state")

    red.kill()
    took = wait_status(d, 503, 5, "Redis killed")
    print("503 %.2fs after the kill" % took, flush=True)
    st, _, _ = d.http("GET", "/health/live")
    check(st == 200, "/health/live during the outage: %d" % st)
    # A session that must be read from the store: 503, to retry, not 500.
    st, _, body = d.http("GET", "/sessions/h-elsewhere/log")
    check(st == 503 and b"OVERLOADED" in body and b"unreachable" in body,
          "a session opened during the outage -> %s %r" % (st, body))
    await asyncio.sleep(1)
    red.start()
    took = wait_status(d, 200, 15, "Redis restarted")
    print("200 %.2fs after the restart" % took, flush=True)

    # the live client: whatever it got must not contradict the log; it may
    # have been closed (1001/1011) and then resumes with its lastSeq
    extra = logged(await read_for(live, 0.5, []))
    await live.close()
    check(not extra, "events arrived while the session was idle: %s"
          % [short(e) for e in extra])
    again = await replay(d, sid, before[-1]["seq"])
    check(again == before, "the log after the restart differs from before: "
          "%d vs %d events%s" % (len(again), len(before), "" if
                                 len(again) != len(before) else " (content)"))
    t2, _ = await turn(d, sid, before[-1]["seq"], "c-2")
    check(t2 and t2[0]["seq"] == before[-1]["seq"] + 1,
          "turn 2 starts at seq %s, expected %d"
          % (t2[0]["seq"] if t2 else None, before[-1]["seq"] + 1))
    check(tokens_text(t2) == REPLY, "turn 2 text %r" % tokens_text(t2))
    allev = before + t2
    check_contiguous(allev, 1, "across the outage")
    check(len(of_type(allev, "done")) == 2, "done events: %d"
          % len(of_type(allev, "done")))
    check_redis(red, d, sid, allev, "after the outage")


async def mid_turn(d, red):
    sid = "rh-2"
    ws, ev = await stream_chat(d, sid, "m-1", "go", after_tokens(5),
                               timeout=20)
    red.kill()
    seen = await drain_logged(ws, ev, 1.5)
    await ws.close()
    wait_status(d, 503, 5, "Redis killed mid-turn")
    await asyncio.sleep(1)
    red.start()
    took = wait_status(d, 200, 15, "Redis restarted (mid-turn)")
    print("mid-turn: 200 %.2fs after the restart; client saw up to seq %d"
          % (took, seen[-1]["seq"]), flush=True)
    # the turn ends: done (the same or a re-run attempt) or an error
    after, _ = await resume_until(
        d, sid, seen, lambda e: is_done(e) or (e.get("type") == "error" and
                                               e.get("seq") and
                                               e.get("severity") == "fatal"),
        "the interrupted turn never ended after Redis came back",
        patience=45, retry_fail=True)
    allev = seen + after
    check_contiguous(allev, 1, "mid-turn outage: the client's view")
    ends = [e for e in allev if is_done(e) or (e["type"] == "error" and
                                               e.get("severity") == "fatal")]
    check(len(ends) == 1, "mid-turn outage: turn ends %s"
          % [short(e) for e in ends])
    t2, _ = await turn(d, sid, allev[-1]["seq"], "m-2")
    check(of_type(t2, "done"), "mid-turn outage: next chat has no done: %s"
          % [short(e) for e in t2])
    full = await replay(d, sid, t2[-1]["seq"])
    check_contiguous(full, 1, "mid-turn outage: whole log")
    check(full[:len(allev)] == allev, "mid-turn outage: the log differs from "
          "what the client saw (same seq, other event)")
    check(full[len(allev):] == t2, "mid-turn outage: the next turn differs")
    check_redis(red, d, sid, full, "mid-turn outage")


async def test():
    need_redis()
    red = RedisServer(fsync_always=True).start()
    try:
        d = Daemon(providers=provider_block("short", REPLY, chunk=8,
                                            delay="2ms") +
                   provider_block("slow", LONG, chunk=9, delay="10ms"),
                   default="short", store="redis://127.0.0.1:%d" % red.port,
                   host_id="solo", lease="2s")
        with with_daemon(d):
            print("-- between turns", flush=True)
            await between_turns(d, red)
        d = Daemon(providers=provider_block("slow", LONG, chunk=9,
                                            delay="10ms"),
                   default="slow", store="redis://127.0.0.1:%d" % red.port,
                   host_id="solo", lease="2s")
        with with_daemon(d):
            print("-- in the middle of a turn", flush=True)
            await mid_turn(d, red)
    finally:
        red.destroy()

run_test("redis_health", test)

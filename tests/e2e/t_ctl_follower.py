#!/usr/bin/python3
# parleyctl against the host that does not own the session (two parleyd on
# one redis-server, hosts "a" and "b"): `chat` through b streams the reply
# of every line (b forwards the message to a's inbox and answers 202 with
# no seq; parleyctl learns the seq from the logged user_message), pause and
# resume through b reach the owner, `session log --from` through b matches
# a's log, and `session kill` through b answers "terminating" and the owner
# ends the session.
import sys, os, subprocess
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import *

REPLY = "Answered by the owner host."


async def poll(get, ok, what):
    """get() until ok(its value), for 10 s; returns the value."""
    deadline = time.time() + 10
    while True:
        v = get()
        if ok(v):
            return v
        check(time.time() < deadline, "%s: %s" % (what, v))
        await asyncio.sleep(0.1)


async def test():
    need_redis()
    red = RedisServer().start()
    try:
        url = "redis://127.0.0.1:%d" % red.port
        prov = provider_block("p", REPLY, chunk=4, delay="5ms")
        a = Daemon(providers=prov, default="p", store=url, host_id="a", lease="2s")
        b = Daemon(providers=prov, default="p", store=url, host_id="b", lease="2s")
        with with_daemon(a), with_daemon(b):
            ev = await chat_turn(a, "cf-1", "first, on the owner")
            one_done(ev, "chat on a")
            rc, out, err = b.ctl("chat", "cf-1", input="second\nthird\n",
                                 timeout=60)
            check(rc == 0, "parleyctl chat through b: exit %d: %s" % (rc, err[-300:]))
            check(out.count(REPLY) == 2, "chat through b printed %d replies, "
                  "want 2: %r" % (out.count(REPLY), out[-300:]))
            log = a.log_events("cf-1")
            msgs = [e["message"] for e in log if e["type"] == "user_message"]
            check(msgs == ["first, on the owner", "second", "third"],
                  "messages in the owner's log: %s" % msgs)
            rc, out, err = b.ctl("session", "pause", "cf-1", check_rc=0)
            check("handed to the host that owns it" in out,
                  "session pause through b: %r" % out)
            await poll(lambda: a.http_json("GET", "/sessions/cf-1")[1],
                       lambda js: js.get("status") == "paused",
                       "pause through b not applied by the owner")
            b.ctl("session", "resume", "cf-1", check_rc=0)
            rc, out, err = b.ctl("session", "log", "cf-1", "--from", "0", check_rc=0)
            got = [json.loads(l) for l in out.splitlines() if l.strip()]
            want = a.log_events("cf-1")
            check([e["seq"] for e in got] == [e["seq"] for e in want[:len(got)]]
                  and len(got) >= len(want) - 2,
                  "session log through b: seqs %s, the owner has %s"
                  % ([e["seq"] for e in got][-5:], [e["seq"] for e in want][-5:]))
            # kill through b: 202 "terminating" (the owner has it in its
            # inbox), then the owner logs session_complete(terminated)
            rc, out, err = b.ctl("session", "kill", "cf-1", check_rc=0)
            check("terminating" in out, "session kill through b: %r" % out)
            log = await poll(lambda: a.log_events("cf-1"),
                             lambda l: l[-1]["type"] == "session_complete",
                             "kill through b not logged by the owner")
            check(log[-1].get("reason") == "terminated",
                  "last event after kill through b: %s" % log[-1])
            st, js = a.http_json("DELETE", "/sessions/cf-1")
            check(st == 200 and js.get("status") == "completed",
                  "DELETE of an ended session on its owner: %d %s" % (st, js))
    finally:
        red.destroy()


run_test("ctl_follower", test)

#!/usr/bin/python3
# SIGKILL the supervisor and all workers mid-stream, restart on the same
# state-dir: the log holds every event the client saw, and the session goes
# on (the interrupted turn is re-run to its done).
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

LONG = "".join("piece%03d " % i for i in range(250))


async def test():
    d = Daemon(providers=provider_block("slow", LONG, chunk=9, delay="10ms"),
               default="slow", extra="fsync always\n")
    with with_daemon(d):
        sid = "sup-1"
        ws, ev = await stream_chat(d, sid, "c-1", "go", after_tokens(5))
        d.kill_all()
        seen = await drain_logged(ws, ev, 3)
        check(not any(is_done(e) for e in seen), "turn finished before the kill")
        d.start()
        log = d.log_events(sid)
        check(len(log) >= len(seen), "log has %d events, the client saw %d"
              % (len(log), len(seen)))
        same_events(seen, log[:len(seen)], "log after restart vs client")
        # resume; the interrupted turn is re-run to its done
        after, _ = await resume_until(d, sid, seen, is_done,
                                      "no done after restart")
        allev = seen + after
        check_contiguous(allev, 1, "across the restart")
        errs = [e for e in after if e["type"] == "error"]
        check(errs and errs[0].get("severity") == "recoverable",
              "no recoverable error for the interrupted turn: %s" % [short(e) for e in after[:6]])
        done = [e for e in allev if is_done(e)]
        check(len(done) == 1 and "." in done[0]["messageId"],
              "done of the re-run: %s" % [e.get("messageId") for e in done])
        text = "".join(e["content"] for e in allev if e["type"] == "token"
                       and e["messageId"] == done[0]["messageId"])
        check(text == LONG, "re-run text differs (%d vs %d bytes)" % (len(text), len(LONG)))
        # and a new turn works
        ws = await ws_connect(d.url("/chat"))
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid, "message": "more"})
        ev3 = await ws_until(ws, is_done, timeout=60)
        await ws.close()
        check_contiguous(logged(ev3), logged(ev3)[0]["seq"], "new turn")
        same_events(d.log_events(sid)[:len(allev)], allev, "final log vs clients")

run_test("supervisor_sigkill_restart", test)

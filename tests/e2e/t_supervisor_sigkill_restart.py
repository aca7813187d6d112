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
        ws = await ws_connect(d.url("/sessions/%s/stream" % sid))
        ev = [await ws_recv(ws)]
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid, "id": "c-1",
                           "message": "go"})
        await ws_until(ws, lambda e: sum(1 for x in ev if x.get("type") == "token") >= 5,
                       into=ev)
        d.kill_all()
        try:
            while True:
                ev.append(await ws_recv(ws, 3))
        except Exception:
            pass
        seen = logged(ev)
        check_contiguous(seen, 1, "before the kill")
        check(not any(is_done(e) for e in seen), "turn finished before the kill")
        d.start()
        log = d.log_events(sid)
        check(len(log) >= len(seen), "log has %d events, the client saw %d"
              % (len(log), len(seen)))
        same_events(seen, log[:len(seen)], "log after restart vs client")
        # resume; the interrupted turn is re-run to its done
        after = []
        deadline = time.time() + 60
        while True:
            last = (seen + after)[-1]["seq"]
            ev2 = []
            try:
                ws = await ws_connect(d.url("/sessions/%s/stream?lastSeq=%d" % (sid, last)))
                await ws_until(ws, lambda e: is_done(e), into=ev2, timeout=30)
                await ws.close()
                after += logged(ev2)
                break
            except (websockets.exceptions.WebSocketException, OSError,
                    asyncio.TimeoutError) as e:
                after += logged(ev2)
                if time.time() > deadline:
                    raise Fail("no done after restart: %s; got %s; parleyd exit status %s"
                               % (e, [short(x) for x in ev2[:8]], d.proc.poll()))
                await asyncio.sleep(0.2)
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

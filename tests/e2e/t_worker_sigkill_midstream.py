#!/usr/bin/python3
# SIGKILL the worker that owns a streaming session; the client reconnects
# with lastSeq (retrying until the replacement is up) and sees every logged
# event exactly once, a recoverable INTERNAL error, then the re-run turn
# (messageId m-<seq>.1) through its done.
import sys, os, signal
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

LONG = "".join("chunk%03d " % i for i in range(300))  # 2700 bytes


async def test():
    d = Daemon(providers=provider_block("slow", LONG, chunk=9, delay="10ms"),
               default="slow")
    with with_daemon(d):
        sid = "crash-1"
        ws = await ws_connect(d.url("/sessions/%s/stream" % sid))
        ev = [await ws_recv(ws)]
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid, "id": "c-1",
                           "message": "go"})
        await ws_until(ws, lambda e: sum(1 for x in ev if x.get("type") == "token") >= 5,
                       into=ev)
        local_port = ws.transport.get_extra_info("sockname")[1]
        pids = d.workers_pids()
        check(len(pids) == 2, "expected 2 workers, found %s" % pids)
        owner = owner_of(pids, local_port)
        check(owner is not None, "could not find the worker holding the connection")
        os.kill(owner, signal.SIGKILL)
        # whatever arrived before the kill still counts
        try:
            while True:
                ev.append(await ws_recv(ws, 5))
        except Exception:
            pass
        seen = logged(ev)
        check_contiguous(seen, 1, "before the kill")
        check(not any(is_done(e) for e in seen), "turn finished before the kill")
        # reconnect with lastSeq until the replacement worker has the turn
        # through its done; a client retries on a dropped connection.
        deadline = time.time() + 60
        after, drops, firsts = [], [], []
        while True:
            last = (seen + after)[-1]["seq"]
            ev2 = []
            try:
                ws = await ws_connect(d.url("/sessions/%s/stream?lastSeq=%d"
                                            % (sid, last)))
                await ws_until(ws, lambda e: is_done(e) and "." in str(
                    e.get("messageId", "")), into=ev2, timeout=30)
                await ws.close()
                firsts.append(ev2[0])
                after += logged(ev2)
                break
            except (websockets.exceptions.WebSocketException, OSError,
                    asyncio.TimeoutError) as e:
                drops.append("lastSeq=%d: %s after %s" % (
                    last, type(e).__name__, [short(x) for x in ev2[:4]]))
                if ev2:
                    firsts.append(ev2[0])
                after += logged(ev2)
                if time.time() > deadline:
                    raise Fail("no done of the re-run turn; attempts: %s" % drops)
                await asyncio.sleep(0.2)
        if drops:
            print("reconnects that dropped: %s" % drops)
        ev2 = firsts
        check(ev2[0]["type"] == "session_state", "first event %s" % short(ev2[0]))
        check_contiguous(after, seen[-1]["seq"] + 1, "after reconnect")
        allev = seen + after
        check_contiguous(allev, 1, "union across the kill")
        errs = [e for e in after if e["type"] == "error"]
        check(errs, "no error event reported the interrupted turn; got %s"
              % [short(e) for e in after[:10]])
        check(errs[0].get("severity") == "recoverable" and errs[0].get("code") == "INTERNAL",
              "error event: %s" % errs[0])
        dones = [e for e in allev if is_done(e)]
        check(len(dones) == 1, "done events %s" % [e.get("messageId") for e in dones])
        orig = [e for e in seen if e["type"] == "token"][0]["messageId"]
        check(dones[0]["messageId"].startswith(orig + "."),
              "re-run messageId %s, expected %s.1" % (dones[0]["messageId"], orig))
        check(allev.index(errs[0]) < allev.index(dones[0]), "error after done")
        rerun = "".join(e["content"] for e in allev if e["type"] == "token"
                        and e["messageId"] == dones[0]["messageId"])
        check(rerun == LONG, "re-run text differs (%d bytes vs %d)" % (len(rerun), len(LONG)))
        check(len(d.workers_pids()) == 2, "worker not replaced: %s" % d.workers_pids())
        same_events(allev, d.log_events(sid)[:len(allev)], "clients vs GET /log")

run_test("worker_sigkill_midstream", test)

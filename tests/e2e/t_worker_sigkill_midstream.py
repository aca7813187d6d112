#!/usr/bin/python3
# SIGKILL the worker that owns a streaming session; the client reconnects
# with lastSeq (retrying until the replacement is up) and sees every logged
# event exactly once, a recoverable INTERNAL error, then the re-run turn
# (messageId m-<seq>.1) through its done.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

LONG = "".join("chunk%03d " % i for i in range(300))  # 2700 bytes


async def test():
    d = Daemon(providers=provider_block("slow", LONG, chunk=9, delay="10ms"),
               default="slow")
    with with_daemon(d):
        sid = "crash-1"
        ws, ev = await stream_chat(d, sid, "c-1", "go", after_tokens(5))
        # whatever arrived before the kill still counts
        seen = await kill_owner(d, ws, ev)
        check(not any(is_done(e) for e in seen), "turn finished before the kill")
        # reconnect with lastSeq until the replacement worker has the turn
        # through its done; a client retries on a dropped connection.
        after, attempts = await resume_until(
            d, sid, seen, lambda e: is_done(e) and "." in str(
                e.get("messageId", "")), "no done of the re-run turn")
        ev2 = [a[0] for a in attempts if a]
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

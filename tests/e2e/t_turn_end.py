#!/usr/bin/python3
# A finished turn is never run again (local store).  The state a worker
# leaves when it dies between recording a turn's end in meta and logging
# its done is made by hand: the session is paused, a message is queued
# (logged, no turn), the daemon is stopped, and meta is edited to say the
# turn for that message ended ("end" in the turn's checkpoint, as
# turn_end writes it).  Restarted, the daemon logs that done once, adds
# the exchange to the history, runs no model call (no token of that
# messageId; the provider's reply would differ), and reports no
# interrupted turn.  A second restart changes nothing.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

SID = "te-1"


async def main():
    d = Daemon(token="adm", providers=provider_block("fast", "model reply"))
    with with_daemon(d):
        ev = await chat_turn(d, SID, "first")
        check(of_type(ev, "done"), "first turn: %s" % [short(e) for e in ev])
        s, js = post_message(d, SID, {"type": "pause"}, "adm")
        check(s == 202, "pause -> %s %s" % (s, js))
        s, js = post_message(d, SID, {"type": "chat", "message": "second"},
                             "adm")
        check(s == 202, "chat while paused -> %s %s" % (s, js))
        seq = js["seq"]
        time.sleep(0.3)
        d.stop()
        meta = store_meta_read(d.state, SID)
        mid = "m-%d" % seq
        check(meta.get("queue") == [seq], "queue %s" % meta.get("queue"))
        meta["queue"] = []
        meta["turn"] = {"messageId": mid, "inputSeq": seq, "attempt": 0,
                        "modelCalls": 1, "steps": [],
                        "end": {"type": "done", "reply": "crafted reply",
                                "body": {"agentId": "agent-1",
                                         "messageId": mid, "turns": 1,
                                         "usage": {"tokens": 0}}}}
        store_meta_write(d.state, SID, meta)
        for round in (1, 2):
            d.start()
            ws = await ws_connect(d.url("/sessions/%s/stream?lastSeq=0" % SID))
            got = []
            try:
                await ws_until(ws, lambda e: e.get("type") == "agent_state"
                               and e.get("status") == "idle" and
                               e.get("seq", 0) > seq, 20, into=got)
            finally:
                await ws.close()
            log = d.log_events(SID)
            dones = [e for e in log if e["type"] == "done" and
                     e.get("messageId") == mid]
            check(len(dones) == 1, "round %d: %d dones for %s: %s" %
                  (round, len(dones), mid, [short(e) for e in log]))
            check(not [e for e in log if e["type"] == "token" and
                       e.get("messageId", "").startswith(mid)],
                  "round %d: the ended turn was run again" % round)
            check(not [e for e in log if e["type"] == "error"],
                  "round %d: errors %s" % (round, of_type(log, "error")))
            d.stop()
            meta = store_meta_read(d.state, SID)
            check(meta.get("turn") is None, "round %d: meta turn %s" %
                  (round, meta.get("turn")))
            hist = [h.get("content") for h in meta.get("history", [])]
            check(hist.count("crafted reply") == 1 and
                  hist.count("second") == 1,
                  "round %d: history %s" % (round, hist))
            check(meta.get("turns") == 2, "round %d: turns %s" %
                  (round, meta.get("turns")))


run_test("turn_end", main)

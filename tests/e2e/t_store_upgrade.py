#!/usr/bin/python3
# A state directory of the v1 local-store format (before the shared
# segments: sessions/<id>/log, one "<seq> <unix-ms> <json>" line per event,
# and sessions/<id>/meta, plain JSON) keeps working.  A session is made by
# a daemon, then its directory is rewritten in the v1 format exactly as
# the v1 writer left it (main:src/store_local.c before the segments), with
# a torn last line as a crash leaves, and the segments removed.  Started
# again, parleyd converts it on open: a WebSocket resume from lastSeq=0
# gets every event, the torn one never; its meta (the conversation) is
# kept; a second turn appends; after a restart, everything again.
import sys, os, datetime, shutil
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

SID = "up-1"
REPLY = "converted and still here"


def ts_ms(iso):
    t = datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ")
    t = t.replace(tzinfo=datetime.timezone.utc)
    return int(t.timestamp() * 1000)


def to_v1(state, sid, events, meta):
    """Rewrites sid's directory as the v1 store wrote it."""
    sdir = os.path.join(state, "sessions", sid)
    for n in os.listdir(sdir):
        if n in ("index", "meta.0", "meta.1"):
            os.unlink(os.path.join(sdir, n))
    with open(os.path.join(sdir, "log"), "w") as f:
        for e in events:
            f.write("%d %d %s\n" % (e["seq"], ts_ms(e["ts"]),
                                    json.dumps(e, separators=(",", ":"))))
        # A record a crash cut short: never served.
        f.write('%d %d {"type":"token","con' % (events[-1]["seq"] + 1,
                                                ts_ms(events[-1]["ts"])))
    with open(os.path.join(sdir, "meta"), "w") as f:
        json.dump(meta, f)
    shutil.rmtree(os.path.join(state, "segments"))


async def replay(d, sid, last):
    """Every event of sid from lastSeq=0 over WebSocket, through last."""
    ws = await ws_connect(d.url("/sessions/%s/stream?lastSeq=0" % sid))
    got = []
    try:
        st = await ws_recv(ws)
        check(st["type"] == "session_state", "first event %s" % short(st))
        check(st["lastSeq"] == last, "lastSeq %s, want %d" %
              (st["lastSeq"], last))
        await ws_until(ws, lambda e: e.get("seq") == last, 20, into=got)
    finally:
        await ws.close()
    return logged(got)


def history(state):
    return [h.get("content") for h in
            store_meta_read(state, SID).get("history", [])]


async def main():
    d = Daemon(providers=provider_block("fast", REPLY))
    with with_daemon(d):
        ev = await chat_turn(d, SID, "before the upgrade")
        one_done(ev, "first turn")
        v1 = d.log_events(SID)
        check(len(v1) >= 5, "a short first turn: %d events" % len(v1))
        d.stop()
        meta = store_meta_read(d.state, SID)
        check("before the upgrade" in history(d.state),
              "meta history %s" % history(d.state))
        to_v1(d.state, SID, v1, meta)

        d.start()
        got = await replay(d, SID, v1[-1]["seq"])
        same_events(got, v1, "replay of the converted session")
        for a, b in zip(got, v1):
            check(a == b, "seq %s: replayed %s, was %s" % (b["seq"], a, b))
        sdir = os.path.join(d.state, "sessions", SID)
        check(not os.path.exists(os.path.join(sdir, "log")),
              "the v1 log is still there after the conversion")
        check(os.path.exists(os.path.join(sdir, "index")),
              "no index after the conversion")
        check(any(n.endswith(".seg") for n in
                  os.listdir(os.path.join(d.state, "segments"))),
              "no segment after the conversion")

        ev = await chat_turn(d, SID, "after the upgrade")
        one_done(ev, "second turn")
        check(tokens_text(ev) == REPLY, "reply %r" % tokens_text(ev))
        all1 = d.log_events(SID)
        check_contiguous(all1, 1, "log after the second turn")
        same_events(all1[:len(v1)], v1, "the v1 events after appending")

        d.stop()
        h = history(d.state)
        check("before the upgrade" in h and "after the upgrade" in h,
              "meta history lost the v1 conversation: %s" % h)
        d.start()
        got = await replay(d, SID, all1[-1]["seq"])
        same_events(got, all1, "replay after a restart")
        check(len([e for e in got if is_done(e)]) == 2,
              "dones %s" % [short(e) for e in got if is_done(e)])


run_test("store_upgrade", main)

#!/usr/bin/python3
# No silent loss on the local store after a machine crash (issue 21, part
# 6: "in every mode, a log epoch").  Under fsync batch an event is sent
# once it is in the page cache; a machine that crashes loses the last
# ones, and the next events take their seqs.  parleyd cannot see the
# crash itself, only that the last run, of another boot, did not stop
# clean (STATE_DIR/store-run); each session written then starts a new
# epoch at its next open.
#
# The crash is made by hand: parleyd SIGKILLed, the session's last
# events cut from its segment and index as a lost page cache leaves
# them, and store-run given another boot id.  Then:
#   - a client that saw the lost events resumes (lastSeq, no epoch) after
#     a new turn took their seqs: RESUME_GAP with the new epoch and from,
#     then the log's events, the same as GET /log;
#   - a client that saw none of them resumes with no gap;
#   - the AI SDK's resume (Last-Event-ID SEQ:K) from a lost seq is 409
#     RESUME_GAP, from before it is served, with ids SEQ:K.E;
#   - another session written before the crash starts an epoch too (its
#     clients resume with no gap); one made after it starts none;
#   - controls: a SIGKILL without a reboot and a clean stop followed by a
#     reboot start no epoch;
#   - a reload onto another state-dir begins the run there too.
import sys, os, struct, signal, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

SID, OTHER, LATER = "crash-1", "crash-2", "crash-3"
REPLY = "one two three four five six seven eight"
LOST = 3            # events of SID the "crash" takes


def run_file(d):
    with open(os.path.join(d.state, "store-run")) as f:
        return f.read().split()


def fake_reboot(d):
    """store-run as if the run was of another boot of the machine."""
    f = run_file(d)
    check(f[0] == "parley-run" and f[3] == "running",
          "store-run after a SIGKILL: %s" % f)
    f[2] = "00000000-0000-4000-8000-000000000000"
    with open(os.path.join(d.state, "store-run"), "w") as out:
        out.write(" ".join(f) + "\n")


def lose_after(d, sid, keep):
    """Cuts sid's frames after seq keep from the segments (and whatever
    follows them), and its index entries after keep."""
    sdir = os.path.join(d.state, "segments")
    cut = 0
    for name in os.listdir(sdir):
        path = os.path.join(sdir, name)
        with open(path, "rb") as f:
            data = f.read()
        off = 32
        while off + 32 <= len(data):
            flen, = struct.unpack_from("<I", data, off)
            seq, = struct.unpack_from("<Q", data, off + 8)
            idlen = data[off + 24]
            fid = data[off + 32:off + 32 + idlen].decode()
            if fid == sid and seq > keep:
                os.truncate(path, off)
                cut += 1
                break
            off += flen
    check(cut == 1, "frames of %s after %d in %d segments" % (sid, keep, cut))
    ix = os.path.join(d.state, "sessions", sid, "index")
    with open(ix, "rb") as f:
        hdr = f.read(64)
    base, = struct.unpack_from("<Q", hdr, 16)
    size = 64 + (keep - base + 1) * 40
    if os.path.getsize(ix) > size:
        os.truncate(ix, size)


async def resume(d, sid, last, epoch, until_seq):
    """A WebSocket resume after last (epoch): every event until seq
    until_seq."""
    ws = await ws_connect(d.url("/sessions/%s/stream?%s" %
                                (sid, resume_query(last, epoch))))
    got = []
    try:
        await ws_until(ws, lambda e: e.get("seq") == until_seq, 20, into=got)
    finally:
        await ws.close()
    return got


async def epoch_now(d, sid):
    ws = await ws_connect(d.url("/sessions/%s/stream" % sid))
    try:
        st = await ws_recv(ws)
    finally:
        await ws.close()
    check(st["type"] == "session_state", "first event %s" % short(st))
    return st.get("epoch", "")


async def main():
    # Slow enough that the AI SDK can resume the second turn while it runs.
    d = Daemon(providers=provider_block("fast", REPLY, chunk=2,
                                        delay="60ms"),
               extra="fsync batch\n")
    with with_daemon(d):
        check(run_file(d)[3] == "running", "store-run: %s" % run_file(d))
        one_done(await chat_turn(d, OTHER, "first"), "other's turn")
        one_done(await chat_turn(d, SID, "first"), "first turn")
        seen = d.log_events(SID)
        last = seen[-1]["seq"]
        keep = last - LOST
        check(keep > 1, "a short turn: %d events" % last)

        # Control: parleyd killed, the machine not restarted.
        d.kill_all()
        d.start()
        check(await epoch_now(d, SID) == "", "an epoch after a SIGKILL")
        # Control: a clean stop, then a reboot.
        d.stop()
        check(run_file(d)[3] == "clean", "store-run after a clean stop: %s"
              % run_file(d))
        f = run_file(d)
        f[2] = "00000000-0000-4000-8000-000000000000"
        with open(os.path.join(d.state, "store-run"), "w") as out:
            out.write(" ".join(f) + "\n")
        d.start()
        check(await epoch_now(d, SID) == "", "an epoch after a clean stop")

        # The crash: SIGKILL, the page cache's last events lost, a reboot.
        d.kill_all()
        lose_after(d, SID, keep)
        fake_reboot(d)
        d.start()
        check("the machine restarted while parleyd ran" in d.log_text(),
              "no word of the crash in the log")
        check(d.log_events(SID)[-1]["seq"] == keep,
              "the log after the crash ends at %d, not %d" %
              (d.log_events(SID)[-1]["seq"], keep))
        # A new turn takes the lost seqs; while it runs, the AI SDK's
        # resume of the chat (its ids SEQ:K, SEQ:K.E once there is an
        # epoch) is refused from a rewritten seq and served from before.
        ws = await ws_connect(d.url("/chat"))
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": SID,
                           "id": "c-2", "message": "second"})
        turn2 = await ws_until(ws, lambda e: e.get("type") == "token")
        st, _, body = d.http("GET", "/api/chat/%s/stream" % SID,
                             headers={"Last-Event-ID": "%d:1" % last})
        check(st == 409 and b"RESUME_GAP" in body,
              "AI SDK resume from lost seq %d -> %s %r" % (last, st, body))
        st, _, body = d.http("GET", "/api/chat/%s/stream" % SID,
                             headers={"Last-Event-ID": "%d:1" % keep})
        ids = [l[4:] for l in body.decode().split("\n")
               if l.startswith("id: ")]
        check(st == 200 and ids, "AI SDK resume from %d -> %s %r"
              % (keep, st, body[:200]))
        await ws_until(ws, is_idle, 20, into=turn2)
        await ws.close()
        one_done(turn2, "second turn")
        log = d.log_events(SID)
        end = log[-1]["seq"]
        check(end > last, "the second turn ended at %d" % end)
        epoch = await epoch_now(d, SID)
        check(epoch != "", "no epoch after the crash")
        check(all(i.endswith("." + epoch) for i in ids),
              "AI SDK ids without the epoch %s: %s" % (epoch, ids[:3]))
        st, _, body = d.http("GET", "/api/chat/%s/stream" % SID,
                             headers={"Last-Event-ID": "%d:1.%s" % (keep,
                                                                    epoch)})
        check(st in (200, 204), "AI SDK resume in the epoch -> %s %r"
              % (st, body[:200]))

        # Saw the lost events: told, and replayed from the rewrite.
        got = await resume(d, SID, last, "", end)
        gaps = [e for e in got if e.get("type") == "error" and
                e.get("code") == "RESUME_GAP"]
        check(len(gaps) == 1 and gaps[0].get("from") == keep + 1 and
              gaps[0].get("epoch") == epoch,
              "resume after %d (lost from %d): %s" %
              (last, keep + 1, [short(e) for e in got[:4]]))
        replayed = [e for e in got if "seq" in e and
                    e.get("type") not in ("ack", "pong")]
        same_events(replayed, [e for e in log if e["seq"] > keep],
                    "replay after RESUME_GAP")

        # Saw none of them: no gap, the new events.
        got = await resume(d, SID, keep, "", end)
        check(not [e for e in got if e.get("code") == "RESUME_GAP"],
              "a gap for a client that saw nothing lost: %s" %
              [short(e) for e in got[:4]])
        replayed = [e for e in got if "seq" in e and
                    e.get("type") not in ("ack", "pong")]
        same_events(replayed, [e for e in log if e["seq"] > keep],
                    "resume after %d" % keep)

        # The other session, written before the crash: an epoch past
        # its end, no gap for its clients.
        olog = d.log_events(OTHER)
        check(await epoch_now(d, OTHER) != "", "no epoch for %s" % OTHER)
        one_done(await chat_turn(d, OTHER, "second"), "other's second turn")
        olog2 = d.log_events(OTHER)
        got = await resume(d, OTHER, olog[-1]["seq"], "",
                           olog2[-1]["seq"])
        check(not [e for e in got if e.get("code") == "RESUME_GAP"],
              "%s: a gap: %s" % (OTHER, [short(e) for e in got[:4]]))

        # Made after the crash: no epoch, also after a restart.
        one_done(await chat_turn(d, LATER, "first"), "later's turn")
        d.stop()
        d.start()
        check(await epoch_now(d, LATER) == "", "an epoch for %s" % LATER)
        check(await epoch_now(d, SID) == epoch, "%s's epoch changed" % SID)

        # A reload onto another state directory begins the run there too
        # (or a crash would go unseen in it).
        d.state = os.path.join(d.tmp, "state2")
        d.write_conf()
        d.signal(signal.SIGHUP)
        deadline = time.time() + 20
        while not os.path.exists(os.path.join(d.state, "store-run")):
            check(time.time() < deadline, "no store-run in the new "
                  "state-dir after a reload: %s" % d.log_tail())
            time.sleep(0.1)
        check(run_file(d)[3] == "running", "store-run after the reload: %s"
              % run_file(d))
        d.stop()
        check(run_file(d)[3] == "clean", "the new state-dir's store-run "
              "after a clean stop: %s" % run_file(d))


run_test("store_crash_epoch", main)

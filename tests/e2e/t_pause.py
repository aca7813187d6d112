#!/usr/bin/python3
# pause / resume_session (admin only): a pause is logged as session_state
# "paused" with a seq; chat is still accepted and logged but no turn
# starts; pausing again is an acknowledged no-op; the pause survives a
# worker SIGKILL; resume (POST, or the /control WebSocket) logs
# session_state again and the queued turn runs.  Other roles get
# FORBIDDEN, and the control channel refuses them before the upgrade.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

ADMIN = "admin-secret"
USER = {"Authorization": "Bearer user-secret"}


def post(d, sid, body, headers=None):
    body = dict(body, v=1, sessionId=sid)
    return d.http_json("POST", "/sessions/%s/messages" % sid, body, headers)


wait_log = log_until


def states(evs):
    return [e for e in evs if e["type"] == "session_state"]


async def test():
    d = Daemon(token=ADMIN, extra="token user-secret role user\n")
    with with_daemon(d):
        # pausing, resuming or ending a session that never existed is a
        # mistake, and creates nothing
        for t in ("pause", "resume_session", "terminate"):
            st, js = post(d, "pause-none", {"type": t})
            check(st == 404, "%s of an unknown session: %d %s" % (t, st, js))
        st, _ = d.http_json("GET", "/sessions/pause-none")
        check(st == 404, "an unknown session exists after pause: %d" % st)
        sid = "pause-1"
        st, js = post(d, sid, {"type": "chat", "message": "before"})
        check(st == 202, "chat -> %d %s" % (st, js))
        await wait_log(d, sid, lambda e: sum(map(is_done, e)) == 1,
                       "first turn did not finish")

        # Only an admin may pause.
        st, js = post(d, sid, {"type": "pause"}, USER)
        check(st == 403 and js["error"]["code"] == "FORBIDDEN",
              "user pause -> %d %s" % (st, js))
        st, _, _ = d.http("GET", "/sessions/%s/control" % sid, headers=USER)
        check(st == 403, "user GET /control -> %d (want 403)" % st)

        # A client on the stream sees the pause as a logged event.
        ws = await ws_connect(d.url("/sessions/%s/stream" % sid))
        first = await ws_recv(ws)
        check(first["type"] == "session_state" and first["status"] == "idle",
              "first event %s" % first)
        st, js = post(d, sid, {"type": "pause"})
        check(st == 202 and js.get("seq"), "pause -> %d %s" % (st, js))
        pseq = js["seq"]
        ev = await ws_until(ws, lambda e: e.get("type") == "session_state")
        check(ev[-1].get("seq") == pseq and ev[-1]["status"] == "paused" and
              ev[-1].get("paused") is True, "live pause event %s" % ev[-1])
        evs = d.log_events(sid)
        check(states(evs)[-1]["seq"] == pseq and
              states(evs)[-1]["status"] == "paused", "logged pause %s" %
              states(evs))
        st, info = d.http_json("GET", "/sessions/%s" % sid)
        check(info["status"] == "paused", "GET status %s" % info["status"])

        # Idempotent: a second pause is acknowledged and logs nothing.
        st, js = post(d, sid, {"type": "pause"})
        check(st == 200 and "seq" not in js, "pause again -> %d %s" % (st, js))
        check(d.last_seq(sid) == pseq, "second pause logged something")

        # Chat is accepted and logged, but no turn starts.
        st, js = post(d, sid, {"type": "chat", "message": "while paused"})
        check(st == 202, "chat while paused -> %d %s" % (st, js))
        cseq = js["seq"]
        await asyncio.sleep(1.2)
        evs = d.log_events(sid)
        check(evs[-1]["seq"] == cseq and evs[-1]["type"] == "user_message",
              "a turn ran while paused: %s" % [short(e) for e in evs[-4:]])
        await ws.close()

        # The pause is durable: kill every worker; the new owner keeps it.
        for p in d.workers_pids():
            os.kill(p, signal.SIGKILL)
        deadline = time.time() + 15
        while True:
            try:
                st, info = d.http_json("GET", "/sessions/%s" % sid)
            except OSError:
                st = 0
            if st == 200:
                break
            check(time.time() < deadline, "no worker answered after the kill")
            await asyncio.sleep(0.2)
        check(info["status"] == "paused", "after SIGKILL status %s" % info)
        await asyncio.sleep(1.0)
        check(d.last_seq(sid) == cseq, "a turn started after the restart")

        # Resume on the control channel: logged, then the queued turn runs.
        ctl = await ws_connect(d.url("/sessions/%s/control" % sid))
        first = await ws_recv(ctl)
        check(first["type"] == "session_state" and
              first["status"] == "paused", "control first event %s" % first)
        await ws_send(ctl, {"v": 1, "type": "chat", "sessionId": sid,
                            "id": "x", "message": "no"})
        ev = await ws_until(ctl, lambda e: e.get("type") == "error")
        check(ev[-1]["code"] == "BAD_REQUEST", "chat on control: %s" % ev[-1])
        await ws_send(ctl, {"v": 1, "type": "resume_session",
                            "sessionId": sid, "id": "r-1"})
        ev = await ws_until(ctl, lambda e: e.get("type") == "ack")
        check(ev[-1].get("eventSeq") == cseq + 1, "resume ack %s" % ev[-1])
        evs = await wait_log(d, sid, lambda e: sum(map(is_done, e)) == 2,
                             "the queued turn did not run after resume")
        rs = states(evs)[-1]
        check(rs["seq"] == cseq + 1 and rs["status"] != "paused" and
              rs.get("paused") is False, "resume event %s" % rs)
        check(evs[cseq + 1]["type"] == "agent_state", "after resume %s" %
              short(evs[cseq + 1]))
        # Resuming a session that is not paused is a no-op, acknowledged.
        await ws_send(ctl, {"v": 1, "type": "resume_session",
                            "sessionId": sid, "id": "r-2"})
        ev = await ws_until(ctl, lambda e: e.get("type") == "ack")
        check("eventSeq" not in ev[-1] and "seq" not in ev[-1], "resume again %s" % ev[-1])
        # PROTOCOL.md's control "resume" (no lastSeq) is resume_session;
        # pause over the control channel works as over POST.
        await ws_send(ctl, {"v": 1, "type": "pause", "sessionId": sid,
                            "id": "p-2"})
        ev = await ws_until(ctl, lambda e: e.get("type") == "ack")
        check(ev[-1].get("eventSeq"), "control pause ack %s" % ev[-1])
        await ws_send(ctl, {"v": 1, "type": "resume", "sessionId": sid,
                            "id": "r-3"})
        ev = await ws_until(ctl, lambda e: e.get("type") == "ack" and
                            e.get("id") == "r-3")
        check(ev[-1].get("eventSeq"), "control resume ack %s" % ev[-1])
        await ctl.close()
        st, info = d.http_json("GET", "/sessions/%s" % sid)
        check(info["status"] != "paused", "still paused: %s" % info["status"])

        # Pause on a stream (admin), and a user's stream gets FORBIDDEN.
        ws = await ws_connect(d.url("/sessions/%s/stream?access_token="
                                    "user-secret" % sid))
        await ws_recv(ws)
        await ws_send(ws, {"v": 1, "type": "pause", "sessionId": sid,
                           "id": "u-1"})
        ev = await ws_until(ws, lambda e: e.get("type") == "error")
        check(ev[-1]["code"] == "FORBIDDEN", "user pause on stream %s" % ev[-1])
        await ws.close()
        ws = await ws_connect(d.url("/sessions/%s/stream" % sid))
        await ws_recv(ws)
        await ws_send(ws, {"v": 1, "type": "pause", "sessionId": sid,
                           "id": "a-1"})
        ev = await ws_until(ws, lambda e: e.get("type") == "ack")
        check(ev[-1].get("eventSeq"), "admin pause on stream %s" % ev[-1])
        await ws.close()
        st, info = d.http_json("GET", "/sessions/%s" % sid)
        check(info["status"] == "paused", "stream pause: %s" % info["status"])


run_test("pause", test)

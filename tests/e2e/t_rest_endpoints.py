#!/usr/bin/python3
# REST: health, /api/info, POST /sessions (201, 409), GET /sessions/{id},
# /log paging, DELETE then chat -> SESSION_ENDED, 404s.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *


async def wait_idle(d, sid, n_done):
    deadline = time.time() + 20
    while time.time() < deadline:
        evs = d.log_events(sid)
        if sum(1 for e in evs if is_idle(e)) >= n_done:
            return evs
        await asyncio.sleep(0.1)
    raise Fail("turn on %s did not finish" % sid)


async def test():
    d = Daemon()
    with with_daemon(d):
        # Ready is one worker ready (Daemon.start waits for it); /health
        # is every worker ready, which on a loaded machine comes later.
        deadline = time.time() + 20
        while d.http("GET", "/health")[0] != 200:
            check(time.time() < deadline, "GET /health never 200: %r" %
                  (d.http("GET", "/health")[2],))
            time.sleep(0.1)
        for p in ("/health", "/health/live", "/health/ready"):
            st, h, body = d.http("GET", p)
            check(st == 200, "GET %s -> %d %r" % (p, st, body))
            check(h.get("connection", "").lower() == "close",
                  "GET %s: no Connection: close (%s)" % (p, h.get("connection")))
            check(h.get("content-type", "").startswith("application/json"),
                  "GET %s content-type %s" % (p, h.get("content-type")))
            json.loads(body)
        st, info = d.http_json("GET", "/api/info")
        check(st == 200 and info.get("protocol") == 1 and "version" in info,
              "GET /api/info -> %d %s" % (st, info))

        st, js = d.http_json("POST", "/sessions", {})
        check(st == 201 and js.get("sessionId") and js.get("status") == "created"
              and js.get("createdAt"), "POST /sessions {} -> %d %s" % (st, js))
        st, js = d.http_json("POST", "/sessions", {"sessionId": "rest-1",
                                                   "objective": "test"})
        check(st == 201 and js.get("sessionId") == "rest-1",
              "POST /sessions rest-1 -> %d %s" % (st, js))
        st, js = d.http_json("POST", "/sessions", {"sessionId": "rest-1"})
        check(st == 409, "POST /sessions again -> %d %s (want 409)" % (st, js))
        st, js = d.http_json("POST", "/sessions", "{not json")
        check(st == 400, "POST /sessions bad JSON -> %d %s" % (st, js))

        st, js = d.http_json("GET", "/sessions/rest-1")
        check(st == 200 and js.get("lastSeq") == 0 and "status" in js
              and "agents" in js and "usage" in js, "GET /sessions/rest-1 -> %d %s" % (st, js))
        for m, p in (("GET", "/sessions/nope"), ("GET", "/sessions/nope/log"),
                     ("DELETE", "/sessions/nope"), ("GET", "/no/such/path")):
            st, js = d.http_json(m, p)
            check(st == 404, "%s %s -> %d %s (want 404)" % (m, p, st, js))

        # two turns, then page the log
        for i in (1, 2):
            st, js = d.http_json("POST", "/sessions/rest-1/messages",
                                 {"v": 1, "type": "chat", "message": "turn %d" % i})
            check(st == 202, "POST message %d -> %d %s" % (i, st, js))
            evs = await wait_idle(d, "rest-1", i)
        check_contiguous(evs, 1, "GET /log")
        last = evs[-1]["seq"]
        st, js = d.http_json("GET", "/sessions/rest-1")
        check(js["lastSeq"] == last, "lastSeq %s, log ends at %d" % (js["lastSeq"], last))
        st, page = d.http_json("GET", "/sessions/rest-1/log?after=0&limit=3")
        check([e["seq"] for e in page] == [1, 2, 3], "page 1: %s" % [short(e) for e in page])
        st, page = d.http_json("GET", "/sessions/rest-1/log?after=3&limit=3")
        check([e["seq"] for e in page] == [4, 5, 6], "page 2: %s" % [short(e) for e in page])
        st, page = d.http_json("GET", "/sessions/rest-1/log?after=%d" % (last - 1))
        check([e["seq"] for e in page] == [last], "last page: %s" % page)
        st, page = d.http_json("GET", "/sessions/rest-1/log?after=%d&limit=10" % last)
        check(st == 200 and page == [], "page after the end: %d %s" % (st, page))
        for q in ("after=abc", "limit=0", "limit=1001", "after=-1",
                  "after=99999999999999999999999"):
            st, js = d.http_json("GET", "/sessions/rest-1/log?" + q)
            check(st == 400 and js["error"]["code"] == "BAD_REQUEST",
                  "log?%s -> %d %s" % (q, st, js))
        st, _, body = d.http("GET", "/sessions/rest-1/events?lastSeq=x")
        check(st == 400, "events?lastSeq=x -> %d %r" % (st, body))
        st, js = d.http_json("GET", "/sessions/rest-1")
        check(js["usage"].get("tokens", 0) > 0, "usage after two turns: %s" % js["usage"])

        # terminate, then a chat gets SESSION_ENDED and nothing is logged
        st, _, body = d.http("DELETE", "/sessions/rest-1")
        # 200 only once session_complete is stored: the log has it now
        check(st == 200 and json.loads(body).get("status") == "completed",
              "DELETE -> %d %r" % (st, body))
        evs = d.log_events("rest-1")
        sc = [e for e in evs if e["type"] == "session_complete"]
        check(sc and sc[0].get("reason") == "terminated", "no session_complete(terminated): %s"
              % [short(e) for e in evs[-3:]])
        check_contiguous(evs, 1, "log after DELETE")
        st, js = d.http_json("GET", "/sessions/rest-1")
        check(st == 200 and js.get("status") == "completed", "GET after DELETE: %d %s" % (st, js))
        ws = await ws_connect(d.url("/chat"))
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": "rest-1", "message": "again"})
        ev = await ws_until(ws, lambda e: e.get("type") == "error", timeout=10)
        check(ev[-1].get("code") == "SESSION_ENDED", "chat after DELETE: %s" % ev[-1])
        await ws.close()
        check(d.last_seq("rest-1") == evs[-1]["seq"], "chat after DELETE was logged")
        st, js = d.http_json("POST", "/sessions/rest-1/messages",
                             {"v": 1, "type": "chat", "message": "again"})
        check(st in (409, 410) or (js and "SESSION_ENDED" in json.dumps(js)),
              "POST message after DELETE -> %d %s" % (st, js))

run_test("rest_endpoints", test)

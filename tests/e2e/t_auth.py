#!/usr/bin/python3
# Tokens: 401 without or with a bad token (before any upgrade), Bearer and
# ?access_token accepted, observers cannot chat, a session-scoped token gets
# 403 on another session.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

TOKENS = ("token admin-secret role admin\ntoken user-secret role user\n"
          "token obs-secret role observer\ntoken scoped-secret role user session auth-1\n")


def bearer(t):
    return {"Authorization": "Bearer " + t}


async def ws_status(url, headers=None):
    """HTTP status of a WebSocket handshake (101 on success)."""
    try:
        ws = await ws_connect(url, headers)
    except websockets.exceptions.InvalidStatusCode as e:
        return e.status_code
    await ws.close()
    return 101


async def test():
    d = Daemon(extra=TOKENS)
    with with_daemon(d):
        # REST
        for h, want in ((None, 401), (bearer("wrong"), 401), (bearer("user-secret"), 201)):
            st, js = d.http_json("POST", "/sessions", {"sessionId": "auth-1"}, h)
            check(st == want, "POST /sessions with %s -> %d %s (want %d)" % (h, st, js, want))
            if st == 401:
                check(js and "UNAUTHORIZED" in json.dumps(js), "401 body %s" % js)
        st, _ = d.http_json("GET", "/sessions/auth-1")
        check(st == 401, "GET /sessions without token -> %d" % st)
        st, _ = d.http_json("GET", "/sessions/auth-1?access_token=user-secret")
        check(st == 200, "GET /sessions?access_token -> %d" % st)
        st, _, _ = d.http("GET", "/sessions/auth-1/events")
        check(st == 401, "SSE without token -> %d" % st)
        # WebSocket handshakes
        for path, h, want in (
                ("/chat", None, 401),
                ("/chat", bearer("nope"), 401),
                ("/chat?access_token=nope", None, 401),
                ("/sessions/auth-1/stream", None, 401),
                ("/chat", bearer("user-secret"), 101),
                ("/chat?access_token=user-secret", None, 101),
                ("/sessions/auth-1/stream?access_token=obs-secret", None, 101),
                ("/sessions/auth-1/stream", bearer("scoped-secret"), 101),
                ("/sessions/auth-2/stream", bearer("scoped-secret"), 403),
                ("/sessions/auth-2/stream?access_token=scoped-secret", None, 403)):
            st = await ws_status(d.url(path), h)
            check(st == want, "WS %s with %s -> %s (want %d)" % (path, h, st, want))
        st, _ = d.http_json("GET", "/sessions/auth-2", headers=bearer("scoped-secret"))
        check(st == 403, "scoped token GET other session -> %d" % st)
        st, _ = d.http_json("POST", "/sessions/auth-2/messages",
                            {"v": 1, "type": "chat", "message": "x"}, bearer("scoped-secret"))
        check(st == 403, "scoped token POST to other session -> %d" % st)

        # user via access_token chats
        ws = await ws_connect(d.url("/chat?access_token=user-secret"))
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": "auth-1", "message": "hi"})
        # idle, the turn's last event: lastSeq below must not move after
        await ws_until(ws, is_idle)
        await ws.close()
        st, js = d.http_json("GET", "/sessions/auth-1", headers=bearer("admin-secret"))
        check(st == 200, "admin GET -> %d" % st)
        last = js["lastSeq"]

        # observer: can watch, cannot chat
        ws = await ws_connect(d.url("/sessions/auth-1/stream?role=observer"),
                              bearer("obs-secret"))
        e = await ws_recv(ws)
        check(e["type"] == "session_state", "observer first event %s" % short(e))
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": "auth-1", "message": "x"})
        ev = await ws_until(ws, lambda e: e.get("type") == "error")
        check(ev[-1].get("code") == "FORBIDDEN", "observer chat: %s" % ev[-1])
        await ws_send(ws, {"v": 1, "type": "ping", "sessionId": "auth-1"})
        e = await ws_recv(ws)
        check(e["type"] == "pong", "observer connection after FORBIDDEN: %s" % short(e))
        await ws.close()
        st, js = d.http_json("POST", "/sessions/auth-1/messages",
                             {"v": 1, "type": "chat", "message": "x"}, bearer("obs-secret"))
        check(st == 403, "observer POST message -> %d %s" % (st, js))
        # scoped token on /chat naming another session
        ws = await ws_connect(d.url("/chat"), bearer("scoped-secret"))
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": "auth-2", "message": "x"})
        ev = await ws_until(ws, lambda e: e.get("type") == "error")
        check(ev[-1].get("code") == "FORBIDDEN", "scoped token chat on other session: %s" % ev[-1])
        await ws.close()
        st, js = d.http_json("GET", "/sessions/auth-1", headers=bearer("admin-secret"))
        check(js["lastSeq"] == last, "refused messages changed lastSeq %d -> %s"
              % (last, js["lastSeq"]))
        st, js = d.http_json("GET", "/sessions/auth-2", headers=bearer("admin-secret"))
        check(st == 404, "refused chat created session auth-2: %d" % st)

run_test("auth", test)

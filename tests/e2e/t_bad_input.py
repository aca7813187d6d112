#!/usr/bin/python3
# Bad HTTP, bad JSON, bad envelopes and RFC 6455 violations: the right error
# or close code, the server stays healthy and the session does not change.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

LIMITS = ("max-body 2k\nmax-frame 4k\nmax-message 8k\nmax-request-line 1k\n"
          "max-header-size 4k\n")
SID = "bad-1"


def http_status(resp):
    try:
        line = resp.split(b"\r\n", 1)[0]
        return int(line.split(b" ")[1])
    except (IndexError, ValueError):
        raise Fail("not an HTTP response: %r" % resp[:120])


async def test():
    d = Daemon(extra=LIMITS)
    with with_daemon(d):
        ws = await ws_connect(d.url("/chat"))
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": SID, "message": "hi"})
        await ws_until(ws, is_idle)
        await ws.close()
        last = d.last_seq(SID)

        def healthy(what):
            st, _, _ = d.http("GET", "/health/ready")
            check(st == 200, "after %s: /health/ready -> %d" % (what, st))
            check(d.last_seq(SID) == last, "after %s: lastSeq %s != %d"
                  % (what, d.last_seq(SID), last))

        # malformed HTTP (Host names the listener, else 421 comes first)
        hx = b"Host: 127.0.0.1:%d" % d.port
        long_line = b"GET /" + b"a" * 2000 + b" HTTP/1.1\r\n" + hx + b"\r\n\r\n"
        many_hdrs = b"GET /health HTTP/1.1\r\n" + b"".join(
            b"X-H%d: %s\r\n" % (i, b"v" * 100) for i in range(60)) + b"\r\n"
        big_body = (b"POST /sessions/%s/messages HTTP/1.1\r\n%s\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
                    % (SID.encode(), hx)) + b"{" * 5000
        cases = [
            (b"GARBAGE\r\n\r\n", (400,)),
            (b"GET /health HTTP/1.1\r\nNoColonHere\r\n\r\n", (400,)),
            (b"GET /health HTTP/1.1\r\nContent-Length: -5\r\n\r\n", (400,)),
            (b"GET /health HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", (400,)),
            (b"GET /health HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", (400,)),
            (b"GET /\x00health HTTP/1.1\r\n\r\n", (400,)),
            (long_line, (414,)),
            (many_hdrs, (431,)),
            (b"GET /health HTTP/2.0\r\nHost: x\r\n\r\n", (505,)),
            (b"GET /health HTTP/9.9\r\nHost: x\r\n\r\n", (505,)),
            (b"BREW /health HTTP/1.1\r\nHost: x\r\n\r\n", (501,)),
            (big_body, (413,)),
            (b"GET /chat HTTP/1.1\r\n" + hx + b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             b"Sec-WebSocket-Version: 13\r\n\r\n", (400,)),          # no key
            (b"GET /chat HTTP/1.1\r\n" + hx + b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n",
             (400, 426)),
        ]
        for req, want in cases:
            resp = d.raw(req)
            st = http_status(resp)
            check(st in want, "raw %r... -> %d, want %s" % (req[:40], st, want))
            body = resp.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in resp else b""
            try:
                js = json.loads(body)
            except ValueError:
                raise Fail("raw %r... -> %d with non-JSON body %r" % (req[:40], st, body[:100]))
            check(isinstance(js, dict), "error body %r" % body[:100])
        # a client that sends half a request and closes
        s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
        s.sendall(b"GET /health HTTP/1.1\r\nHo")
        s.close()
        healthy("malformed HTTP")

        # bad messages on a bound /chat connection: error, connection stays
        ws = await ws_connect(d.url("/chat"))
        await ws_send(ws, {"v": 1, "type": "resume", "sessionId": SID, "lastSeq": last})
        await ws_until(ws, lambda e: e.get("type") == "session_state")
        await ws_send(ws, {"v": 1, "type": "ping", "sessionId": SID})
        check((await ws_recv(ws))["type"] == "pong", "no pong")
        bad = [
            ("{not json", "BAD_REQUEST", None),
            ("[1,2,3]", "BAD_REQUEST", None),
            ('"just a string"', "BAD_REQUEST", None),
            ('{"v":1,"type":"chat","sessionId":"%s","message":' % SID + "[" * 100 + "]" * 100 + "}",
             "BAD_REQUEST", None),
            (json.dumps({"v": 2, "type": "chat", "sessionId": SID, "message": "x"}),
             "PROTOCOL_MISMATCH", None),
            (json.dumps({"type": "chat", "sessionId": SID, "message": "x"}),
             ("PROTOCOL_MISMATCH", "BAD_REQUEST"), None),
            (json.dumps({"v": "1", "type": "chat", "sessionId": SID, "message": "x"}),
             ("PROTOCOL_MISMATCH", "BAD_REQUEST"), None),
            (json.dumps({"v": 1, "type": "chat", "message": "x"}), "BAD_REQUEST", "sessionId"),
            (json.dumps({"v": 1, "type": "chat", "sessionId": SID}), "BAD_REQUEST", "message"),
            (json.dumps({"v": 1, "type": "chat", "sessionId": SID, "message": 42}),
             "BAD_REQUEST", "message"),
            (json.dumps({"v": 1, "sessionId": SID}), "BAD_REQUEST", "type"),
            (json.dumps({"v": 1, "type": "no_such_type", "sessionId": SID}), "BAD_REQUEST", None),
            (json.dumps({"v": 1, "type": "chat", "sessionId": "other-session", "message": "x"}),
             "SESSION_MISMATCH", None),
        ]
        await ws.send("ping")  # the plain text ping is ignored
        for text, code, field in bad:
            await ws.send(text)
            e = await ws_recv(ws)
            codes = code if isinstance(code, tuple) else (code,)
            check(e.get("type") == "error" and e.get("code") in codes,
                  "sent %r: got %s, want error %s" % (text[:60], e, code))
            code = e["code"]
            check(e.get("severity") == "warning", "%s severity %s" % (code, e.get("severity")))
            check(isinstance(e.get("message"), str) and e["message"],
                  "%s without a message" % code)
            if field:
                check(field in e["message"], "error for %r does not name %s: %r"
                      % (text[:60], field, e["message"]))
            check("seq" not in e, "error about one bad message carries seq: %s" % e)
        await ws_send(ws, {"v": 1, "type": "ping", "sessionId": SID})
        e = await ws_recv(ws)
        check(e["type"] == "pong", "after bad messages: %s" % e)
        await ws.close()
        healthy("bad messages")
        st, _, _ = d.http("GET", "/sessions/other-session")
        check(st == 404, "SESSION_MISMATCH created the other session (%d)" % st)

        # RFC 6455 violations on raw sockets
        big = b'{"v":1,"type":"ping","sessionId":"%s","pad":"' % SID.encode()
        frames = [
            ("unmasked frame", lambda w: w.send_frame(1, b'{"v":1}', mask=False), 1002),
            ("RSV1 bit", lambda w: w.send_frame(1, b'{"v":1}', rsv=4), 1002),
            ("RSV3 bit", lambda w: w.send_frame(1, b'{"v":1}', rsv=1), 1002),
            ("reserved opcode", lambda w: w.send_frame(3, b"x"), 1002),
            ("fragmented ping", lambda w: w.send_frame(9, b"x", fin=False), 1002),
            ("continuation without start", lambda w: w.send_frame(0, b"x"), 1002),
            ("invalid UTF-8", lambda w: w.send_frame(1, b'{"v":1,"x":"\xc3\x28"}'), 1007),
            ("surrogate in UTF-8", lambda w: w.send_frame(1, b'"\xed\xa0\x80"'), 1007),
            ("frame over max-frame", lambda w: w.send_frame(1, big + b"a" * 5000 + b'"}'), 1009),
            ("message over max-message", lambda w: (
                w.send_frame(1, big + b"a" * 3000, fin=False),
                w.send_frame(0, b"a" * 3000, fin=False),
                w.send_frame(0, b"a" * 3000, fin=False),
                w.send_frame(0, b'"}')), 1009),
            ("binary frame", lambda w: w.send_frame(2, b"\x00\x01\x02"), 1003),
        ]
        for name, act, want in frames:
            w = RawWS(d.port, "/sessions/%s/stream" % SID)
            try:
                e = w.recv_event()
                check(isinstance(e, dict) and e.get("type") == "session_state",
                      "%s: first event %s" % (name, e))
                act(w)
                got = None
                for _ in range(20):
                    try:
                        e = w.recv_event()
                    except (EOFError, OSError) as ex:
                        raise Fail("%s: connection closed without a close frame (%s)"
                                   % (name, ex))
                    if isinstance(e, tuple):
                        got = e[1]
                        break
                check(got == want, "%s: close code %s, want %d" % (name, got, want))
            finally:
                w.close()
            healthy(name)
        # a valid fragmented message is reassembled and answered
        w = RawWS(d.port, "/sessions/%s/stream" % SID)
        w.recv_event()
        msg = json.dumps({"v": 1, "type": "ping", "sessionId": SID}).encode()
        w.send_frame(1, msg[:5], fin=False)
        w.send_frame(9, b"hb")             # a control frame between fragments
        w.send_frame(0, msg[5:10], fin=False)
        w.send_frame(0, msg[10:])
        e = w.recv_event()
        check(isinstance(e, dict) and e.get("type") == "pong", "fragmented ping: %s" % (e,))
        w.close()
        healthy("fragmented message")

run_test("bad_input", test)

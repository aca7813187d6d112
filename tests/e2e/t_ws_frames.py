#!/usr/bin/python3
# RFC 6455 framing details over a raw socket: fragmented text messages with
# a ping interleaved (pong echoes the payload, the reassembled chat is
# processed), a UTF-8 character split across fragments, close handshakes
# (code 1000 and empty), and the plain text frame "ping" being ignored.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

OP_CONT, OP_TEXT, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 8, 9, 10


def frames_until(ws, pred, what, limit=200):
    """Read frames until pred(op, payload); returns the list read."""
    got = []
    for _ in range(limit):
        try:
            op, p = ws.recv_frame()
        except socket.timeout:
            raise Fail("%s: timed out; frames so far: %s"
                       % (what, [(o, x[:60]) for o, x in got[-5:]]))
        except EOFError:
            raise Fail("%s: server closed the connection; frames so far: %s"
                       % (what, [(o, x[:60]) for o, x in got[-5:]]))
        got.append((op, p))
        if pred(op, p):
            return got
    raise Fail("%s: too many frames" % what)


def events_of(frames):
    return [json.loads(p) for op, p in frames if op == OP_TEXT]


def until_idle(ws, what):
    fr = frames_until(ws, lambda op, p: op == OP_TEXT and is_idle(json.loads(p)), what)
    return events_of(fr)


def expect_silence(ws, secs, what):
    ws.s.settimeout(secs)
    try:
        op, p = ws.recv_frame()
        raise Fail("%s: expected no frame, got opcode %d %r" % (what, op, p[:80]))
    except socket.timeout:
        pass
    finally:
        ws.s.settimeout(10)


def expect_close(ws, codes, what):
    fr = frames_until(ws, lambda op, p: op == OP_CLOSE, what)
    p = fr[-1][1]
    code = struct.unpack("!H", p[:2])[0] if len(p) >= 2 else None
    check(code in codes, "%s: close code %s, expected one of %s" % (what, code, codes))
    # then the server closes TCP
    ws.s.settimeout(5)
    try:
        rest = ws.s.recv(4096)
    except socket.timeout:
        raise Fail("%s: server did not close TCP after its close frame" % what)
    except ConnectionResetError:
        rest = b""
    check(rest == b"", "%s: data after close frame: %r" % (what, rest[:80]))


def test():
    d = Daemon()
    with with_daemon(d):
        sid = "frames-1"
        ws = RawWS(d.port, "/sessions/%s/stream" % sid)
        fr = frames_until(ws, lambda op, p: op == OP_TEXT, "session_state")
        st = json.loads(fr[-1][1])
        check(st.get("type") == "session_state", "first event %s" % st)

        # 1. a chat in 3 fragments with a ping between fragments 1 and 2
        text = "fragmented hello " + "x" * 40
        msg = json.dumps({"v": 1, "type": "chat", "sessionId": sid,
                          "id": "frag-1", "message": text}).encode()
        a, b = len(msg) // 3, 2 * len(msg) // 3
        ws.send_frame(OP_TEXT, msg[:a], fin=False)
        ws.send_frame(OP_PING, b"ping-payload-42")
        fr = frames_until(ws, lambda op, p: op == OP_PONG, "pong between fragments")
        check(fr[-1][1] == b"ping-payload-42", "pong payload %r, expected the ping's"
              % fr[-1][1])
        check(not events_of(fr), "events before the message was complete: %s"
              % events_of(fr))
        ws.send_frame(OP_CONT, msg[a:b], fin=False)
        ws.send_frame(OP_CONT, msg[b:], fin=True)
        ev = until_idle(ws, "fragmented chat")
        um = [e for e in ev if e.get("type") == "user_message"]
        check(len(um) == 1 and um[0].get("message") == text,
              "user_message for the fragmented chat: %s" % um)
        check(any(e.get("type") == "ack" and e.get("id") == "frag-1" for e in ev),
              "no ack for frag-1: %s" % [short(e) for e in ev])
        check(any(is_done(e) for e in ev), "no done for the fragmented chat")
        check_contiguous(logged(ev), 1, "fragmented chat turn")
        n = logged(ev)[-1]["seq"]

        # 2. a UTF-8 multi-byte character split across fragments
        utext = "h\u00e9llo w\u00f6rld \u20ac \U0001F600 end"
        msg = json.dumps({"v": 1, "type": "chat", "sessionId": sid,
                          "message": utext}, ensure_ascii=False).encode()
        i = msg.index("\u20ac".encode()) + 1          # inside the 3-byte euro
        j = msg.index("\U0001F600".encode()) + 2      # inside the 4-byte emoji
        ws.send_frame(OP_TEXT, msg[:i], fin=False)
        ws.send_frame(OP_CONT, msg[i:j], fin=False)
        ws.send_frame(OP_CONT, msg[j:], fin=True)
        ev = until_idle(ws, "chat with split UTF-8")
        errs = [e for e in ev if e.get("type") == "error"]
        check(not errs, "split UTF-8 rejected: %s" % errs)
        um = [e for e in ev if e.get("type") == "user_message"]
        check(len(um) == 1 and um[0].get("message") == utext,
              "user_message with split UTF-8: %r" % (um and um[0].get("message")))
        check_contiguous(logged(ev), n + 1, "split UTF-8 turn")
        n = logged(ev)[-1]["seq"]

        # 3. the plain text frame "ping" is ignored; JSON ping gets pong
        ws.send_frame(OP_TEXT, b"ping")
        expect_silence(ws, 1.0, "plain text frame ping")
        ws.send_json({"v": 1, "type": "ping", "sessionId": sid})
        fr = frames_until(ws, lambda op, p: op == OP_TEXT, "pong after plain ping")
        e = json.loads(fr[-1][1])
        check(e.get("type") == "pong", "JSON ping answered with %s" % e)
        check(d.last_seq(sid) == n, "plain ping / ping changed lastSeq")

        # 4. client close 1000 -> close 1000 and TCP close
        ws.send_frame(OP_CLOSE, struct.pack("!H", 1000) + b"bye")
        expect_close(ws, (1000,), "close 1000")
        ws.close()

        # 5. empty close frame -> close (1000 or empty) and TCP close
        ws = RawWS(d.port, "/sessions/%s/stream" % sid)
        frames_until(ws, lambda op, p: op == OP_TEXT, "session_state (2)")
        ws.send_frame(OP_CLOSE, b"")
        expect_close(ws, (1000, None), "empty close")
        ws.close()

        # 6. fragmented message on /chat binds the session like a plain one
        ws = RawWS(d.port, "/chat")
        msg = json.dumps({"v": 1, "type": "ping", "sessionId": sid}).encode()
        ws.send_frame(OP_TEXT, msg[:5], fin=False)
        ws.send_frame(OP_PING, b"")
        fr = frames_until(ws, lambda op, p: op == OP_PONG, "empty ping on /chat")
        check(fr[-1][1] == b"", "pong to an empty ping carries %r" % fr[-1][1])
        ws.send_frame(OP_CONT, msg[5:], fin=True)
        fr = frames_until(ws, lambda op, p: op == OP_TEXT and
                          json.loads(p).get("type") == "pong", "pong on /chat")
        ev = events_of(fr)
        check(ev[0].get("type") == "session_state" and ev[0].get("lastSeq") == n,
              "/chat bound by a fragmented message: first event %s" % ev[0])
        ws.send_frame(OP_CLOSE, struct.pack("!H", 1000))
        expect_close(ws, (1000,), "close 1000 on /chat")
        ws.close()

        st, _, _ = d.http("GET", "/health/ready")
        check(st == 200, "not ready after the frame tests: %s" % st)
        check(d.last_seq(sid) == n, "lastSeq changed: %d -> %d" % (n, d.last_seq(sid)))

run_test("ws_frames", test)

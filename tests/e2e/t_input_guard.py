#!/usr/bin/python3
# Input guards (issue 16): every way in validates JSON text the same way
# before anything is logged; only a valid request from a role that creates
# makes a session, within per-address bounds; a session's log has a quota;
# user_message.clientId is opaque.  Runs on the local store and on Redis.
import sys, os, re, subprocess, http.client, urllib.parse
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

# Daemon(token="atok") adds an admin token its helpers send by default.
TOKENS = "token utok role user\ntoken otok role observer\n"
SID = "guard-1"

# (name, the bad JSON string value, raw bytes, a word of the error, UTF-8?)
BAD = [
    ("ff fe", b'"a\xff\xfeb"', "UTF-8", True),
    ("CESU surrogate", b'"a\xed\xa0\x80b"', "UTF-8", True),
    ("overlong", b'"a\xc0\xafb"', "UTF-8", True),
    ("above U+10FFFF", b'"a\xf4\x90\x80\x80b"', "UTF-8", True),
    ("\\u0000", b'"a\\u0000b"', "u0000", False),
    ("lone high surrogate", b'"a\\ud800b"', "surrogate", False),
    ("lone low surrogate", b'"a\\udc00b"', "surrogate", False),
    ("raw control byte", b'"a\x01b"', "control", False),
]
MARK = "guard-mark"


def chat_bytes(sid, value, trailing=b""):
    return (b'{"v":1,"type":"chat","sessionId":"' + sid.encode() +
            b'","message":' + value + b'}' + trailing)


def post(d, path, body, token="utok", headers=None):
    """POST raw bytes; returns (status, headers, body bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=20)
    h = {"Content-Type": "application/json",
         "Authorization": "Bearer " + token}
    h.update(headers or {})
    try:
        c.request("POST", path, body=body, headers=h)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def err_of(st, data, what):
    try:
        js = json.loads(data)
    except ValueError:
        raise Fail("%s: %d with a body that is not JSON: %r" % (what, st, data[:200]))
    e = (js or {}).get("error") or {}
    return e.get("code"), e.get("message") or ""


def seed_err(d, body):
    """POST /api/agents/stream: (code, message) of its error chunk."""
    st, h, data = post(d, "/api/agents/stream", body)
    if st != 200:
        return err_of(st, data, "agents/stream")
    for block in data.decode("utf-8", "replace").split("\n\n"):
        if block.startswith("data: "):
            c = json.loads(block[6:])
            if c.get("type") == "error":
                return c["data"].get("code"), c["data"].get("message", "")
    raise Fail("agents/stream: no error chunk in %r" % data[:300])


def ws_first_answer(d, path, payload, token="utok"):
    """A text frame on a raw WebSocket: the first error event, or
    ('close', code)."""
    ws = RawWS(d.port, path + ("&" if "?" in path else "?") +
               "access_token=" + token)
    try:
        ws.send_frame(1, payload)
        while True:
            e = ws.recv_event()
            if isinstance(e, tuple) or e.get("type") == "error":
                return e
    finally:
        ws.close()


def stored(d, sid):
    """Where sid is in the store: paths under the state dir (local), or
    Redis keys (E2E_REDIS_URL, a server or a cluster)."""
    found = []
    for root, dirs, files in os.walk(d.state):
        for n in dirs + files:
            if n == sid:
                found.append(os.path.join(root, n))
    if d.store and d.store.startswith("redis://"):
        u = urllib.parse.urlparse(d.store)
        db = (u.path or "/0").strip("/") or "0"
        p = subprocess.run(["redis-cli", "-h", u.hostname, "-p",
                            str(u.port), "-n", db, "--scan", "--pattern",
                            "parley:{%s}*" % sid],
                           capture_output=True, timeout=20, text=True)
        found += [k for k in p.stdout.split() if k]
    if d.store and d.store.startswith("cluster://"):
        # E2E_STORE=cluster: every node, masters and replicas
        keys = set()
        for hp in d.store.split("@")[-1][len("cluster://"):].split(","):
            host, port = hp.rsplit(":", 1)
            p = subprocess.run(["redis-cli", "-h", host, "-p", port,
                                "--scan", "--pattern", "parley:{%s}*" % sid],
                               capture_output=True, timeout=20, text=True)
            keys.update(k for k in p.stdout.split() if k)
        found += sorted(keys)
    return found


async def same_validation(d):
    """The same bad text over POST, WebSocket, /chat, POST /sessions and
    /api/agents/stream: the same refusal, nothing logged."""
    ws = await ws_connect(d.url("/chat?access_token=utok"))
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": SID, "message": "hi"})
    await ws_until(ws, is_idle)
    await ws.close()
    last = d.last_seq(SID)
    cases = [(n, v, b"", w, u) for n, v, w, u in BAD]
    cases.append(("trailing bytes", b'"ok"', b" x", "follow", False))
    cases.append(("a second value", b'"ok"', b'{"v":1}', "follow", False))
    for name, value, trail, word, bad_utf8 in cases:
        body = chat_bytes(SID, value, trail)
        st, _, data = post(d, "/sessions/%s/messages" % SID, body)
        code, msg = err_of(st, data, name)
        check(st == 400 and code == "BAD_REQUEST" and word in msg,
              "POST %s -> %d %s %r" % (name, st, code, msg))
        for path in ("/sessions/%s/stream" % SID, "/chat"):
            e = ws_first_answer(d, path, body)
            if bad_utf8:
                # RFC 6455 8.1: invalid UTF-8 in a text frame fails the
                # connection with 1007, before any JSON is read.
                check(e == ("close", 1007), "WS %s %s -> %s" % (path, name, e))
            else:
                check(not isinstance(e, tuple) and
                      e.get("code") == "BAD_REQUEST" and
                      e.get("message") == msg,
                      "WS %s %s -> %s, POST said %r" % (path, name, e, msg))
        # the same text inside the other endpoints' bodies
        nid = "guard-new"
        sbody = (b'{"sessionId":"' + nid.encode() + b'","objective":' +
                 value + b'}' + trail)
        abody = (b'{"sessionId":"' + SID.encode() + b'","message":' +
                 value + b'}' + trail)
        st, _, data = post(d, "/sessions", sbody)
        code, smsg = err_of(st, data, name)
        check(st == 400 and code == "BAD_REQUEST" and word in smsg,
              "POST /sessions %s -> %d %s %r" % (name, st, code, smsg))
        check(not stored(d, nid), "POST /sessions %s left %s" % (name, stored(d, nid)))
        code, amsg = seed_err(d, abody)
        check(code == "BAD_REQUEST" and word in amsg,
              "agents/stream %s -> %s %r" % (name, code, amsg))
        if not trail:
            check(smsg == msg and amsg == msg,
                  "%s: messages differ: %r / %r / %r" % (name, msg, smsg, amsg))
    check(d.last_seq(SID) == last, "a refused body was logged: lastSeq %s != %s"
          % (d.last_seq(SID), last))
    text = json.dumps(d.log_events(SID))
    check("\\u0000" not in text and "\ufffd" not in text,
          "the log holds what was refused")
    print("validation: %d bad texts refused alike over POST, /stream, /chat, "
          "POST /sessions, /api/agents/stream" % len(cases))


async def creation(d):
    """Only a valid request from a creating role makes a session."""
    # an observer opening a stream of a new id: 404, nothing made
    st, _, data = d.http("GET", "/sessions/obs-new/stream",
                         headers={"Authorization": "Bearer otok",
                                  "Upgrade": "websocket",
                                  "Connection": "Upgrade",
                                  "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                                  "Sec-WebSocket-Version": "13"})
    check(st == 404, "observer /stream of a new id -> %d %r" % (st, data[:200]))
    check(not stored(d, "obs-new"), "observer stream left %s" % stored(d, "obs-new"))
    # ?role=observer narrows a user token: no creating either
    st, _, _ = d.http("GET", "/sessions/obs-new2/stream?role=observer",
                      headers={"Authorization": "Bearer utok",
                               "Upgrade": "websocket", "Connection": "Upgrade",
                               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                               "Sec-WebSocket-Version": "13"})
    check(st == 404 and not stored(d, "obs-new2"),
          "user ?role=observer /stream of a new id -> %d" % st)
    # /chat with a first resume for a new id
    e = ws_first_answer(d, "/chat", json.dumps(
        {"v": 1, "type": "resume", "sessionId": "res-new", "lastSeq": 0}).encode())
    check(not isinstance(e, tuple) and e.get("code") == "NOT_FOUND",
          "/chat first resume for a new id -> %s" % (e,))
    check(not stored(d, "res-new"), "resume left %s" % stored(d, "res-new"))
    # an observer's first chat on /chat
    e = ws_first_answer(d, "/chat", json.dumps(
        {"v": 1, "type": "chat", "sessionId": "obs-chat", "message": "x"}).encode(),
        token="otok")
    check(not isinstance(e, tuple) and e.get("code") in ("NOT_FOUND", "FORBIDDEN"),
          "observer first chat -> %s" % (e,))
    check(not stored(d, "obs-chat"), "observer chat left %s" % stored(d, "obs-chat"))
    # POST /sessions as an observer
    st, _, _ = post(d, "/sessions", b'{"sessionId":"obs-post"}', token="otok")
    check(st == 403 and not stored(d, "obs-post"), "observer POST /sessions -> %d" % st)
    # refused POSTs to new ids: nothing is left behind
    bodies = [b"not json", b'{"v":1,"type":"chat"} x', b'[1]',
              b'{"v":1,"type":"terminate"}', b'{"v":1,"type":"tool_approve",'
              b'"toolCallId":"x","decision":"approve"}', b'{"v":1,"type":"foo"}',
              b'{"v":1,"type":"chat"}', b'{"v":1,"type":"chat","message":7}',
              b'{"v":1,"type":"chat","message":"x","to":"nobody"}',
              b'{"v":1,"type":"cancel"}', b'{"v":2,"type":"chat","message":"x"}',
              chat_bytes("x", b'"\xed\xa0\x80"')]
    n = 0
    for rnd in range(25):
        for b in bodies:
            sid = "bad-new-%d" % n
            n += 1
            st, _, data = post(d, "/sessions/%s/messages" % sid,
                               b.replace(b'"sessionId":"x"', b'"sessionId":"%s"'
                                         % sid.encode()))
            check(400 <= st < 500, "refused POST %r -> %d" % (b, st))
        st, _, _ = post(d, "/sessions/obs-%d/messages" % rnd,
                        b'{"v":1,"type":"chat","message":"x"}', token="otok")
        check(st in (403, 404), "observer chat POST -> %d" % st)
    left = [s for i in range(n) for s in stored(d, "bad-new-%d" % i)]
    left += [s for i in range(25) for s in stored(d, "obs-%d" % i)]
    check(not left, "%d refused requests left %d things in the store: %s"
          % (n + 25, len(left), left[:5]))
    # and a valid chat does create (the control)
    st, _, data = post(d, "/sessions/good-new/messages",
                       b'{"v":1,"type":"chat","message":"hello"}')
    check(st == 202 and stored(d, "good-new"), "valid chat POST -> %d %r, %s"
          % (st, data[:200], stored(d, "good-new")))
    print("creation: %d refused requests left nothing; a valid chat creates"
          % (n + 31))


async def client_ids(d):
    """clientId is opaque, one per connection, not the request id."""
    sid = "guard-cid"
    a = await ws_connect(d.url("/sessions/%s/stream?access_token=utok" % sid))
    b = await ws_connect(d.url("/sessions/%s/stream?access_token=utok" % sid))
    rid = a.response_headers.get("X-Request-Id")
    for ws in (a, b):
        await ws_send(ws, {"v": 1, "type": "ping", "sessionId": sid})
    seen = []
    for i, ws in enumerate((a, a, b)):
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                           "message": "m%d" % i})
        ev = (await ws_until(b, lambda e: e.get("type") == "user_message" and
                            e.get("message") == "m%d" % i))[-1]
        seen.append(ev["clientId"])
        await ws_until(b, is_done)
    await a.close()
    await b.close()
    check(all(re.fullmatch(r"c-[0-9a-f]{16}", c) for c in seen),
          "clientIds %s" % seen)
    check(seen[0] == seen[1] and seen[0] != seen[2],
          "clientId is not one per connection: %s" % seen)
    check(rid and rid not in seen[0] and str(int(rid, 16)) not in seen[0],
          "clientId %s carries the request id %s" % (seen[0], rid))
    print("clientId: %s (request id %s)" % (seen, rid))


async def test_main():
    d = Daemon(extra=TOKENS, token="atok")
    with with_daemon(d):
        await same_validation(d)
        await creation(d)
        await client_ids(d)


async def test_bounds():
    # Sessions per address, over two workers; the log quota.
    d = Daemon(extra=TOKENS + "max-sessions-per-address 8\n"
               "session-create-window 1m\nsession-log-quota 40k\n", workers=2,
               token="atok")
    with with_daemon(d):
        for i in range(8):
            st, _, data = post(d, "/sessions", b'{"sessionId":"q-%d"}' % i)
            check(st == 201, "POST /sessions q-%d -> %d %r" % (i, st, data[:200]))
        # which workers hold them: the bound is the host's, not a worker's
        _, out, _ = d.ctl("--json", "sessions", check_rc=0)
        held = {s["sessionId"]: s["worker"] for s in json.loads(out)["sessions"]}
        slots = {held.get("q-%d" % i) for i in range(8)}
        st, _, data = post(d, "/sessions", b'{"sessionId":"q-over"}')
        code, msg = err_of(st, data, "over the bound")
        check(st == 429 and code == "RATE_LIMITED" and
              "max-sessions-per-address" in msg, "9th session -> %d %s %r"
              % (st, code, msg))
        check(not stored(d, "q-over"), "the refused session left %s"
              % stored(d, "q-over"))
        e = ws_first_answer(d, "/chat", json.dumps(
            {"v": 1, "type": "chat", "sessionId": "q-over2", "message": "x"}).encode())
        check(not isinstance(e, tuple) and e.get("code") == "RATE_LIMITED",
              "/chat over the bound -> %s" % (e,))
        check(not stored(d, "q-over2"), "the refused /chat left %s"
              % stored(d, "q-over2"))
        # opening existing sessions is not creating
        for i in range(8):
            st, _, _ = post(d, "/sessions/q-%d/messages" % i,
                            b'{"v":1,"type":"chat","message":"again"}')
            check(st == 202, "chat in existing q-%d -> %d" % (i, st))
        print("sessions per address: 8 made on workers %s, the 9th refused 429"
              % sorted(slots, key=str))
        if len(slots) < 2:
            print("note: all 8 landed on one worker this run; the bound "
                  "across workers is shown by test_quota's fork test")

        # log quota: 8k messages until refused
        sid = "q-0"
        big = "x" * 8000
        refused = None
        for i in range(20):
            last = d.last_seq(sid)
            st, _, data = post(d, "/sessions/%s/messages" % sid, json.dumps(
                {"v": 1, "type": "chat", "message": big + MARK + str(i)}).encode())
            if st != 202:
                refused = (i, st, err_of(st, data, "quota"), last)
                break
            await asyncio.sleep(0.2)
        check(refused is not None, "40k quota never refused a message")
        i, st, (code, msg), last = refused
        check(st == 413 and code == "QUOTA_EXCEEDED" and
              "session-log-quota" in msg, "quota refusal -> %d %s %r"
              % (st, code, msg))
        await asyncio.sleep(0.5)
        evs = d.log_events(sid)
        check(not any(MARK + str(i) in json.dumps(e) for e in evs),
              "the refused message was logged")
        # the same over a stream
        ws = await ws_connect(d.url("/sessions/%s/stream?access_token=utok" % sid))
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                           "message": big, "id": "q"})
        e = (await ws_until(ws, lambda e: e.get("type") == "error"))[-1]
        check(e.get("code") == "QUOTA_EXCEEDED", "stream over quota -> %s" % e)
        await ws.close()
        # a full session can still be ended
        st, _, _ = d.http("DELETE", "/sessions/%s" % sid,
                          headers={"Authorization": "Bearer atok"})
        check(st in (200, 202), "DELETE of a full session -> %d" % st)
        print("log quota: refused at message %d (%s), nothing half-logged" % (i, msg))


async def test():
    await test_main()
    await test_bounds()

run_test("input_guard", test)

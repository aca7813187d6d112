#!/usr/bin/python3
# Roles on every endpoint, and the browser checks (Origin, Host).
#
# The route list comes from parley-protocol(7): every endpoint ENDPOINTS
# documents must have a row in its "Endpoints and roles" table and a
# request here; then each row is tried with each kind of token (none,
# observer, user, agent, admin, metrics, an admin token scoped to another
# session) and the answer must be what the table says: "yes" is served,
# "no" is 401 without a token, else 403 (FORBIDDEN in the stream where an
# SSE endpoint reports it so).
#
# Then, with no token (the open mode): a WebSocket upgrade and a text/plain
# POST from another site's page are refused (403) and change nothing; the
# server's own origin, an allowed-origin and a client without Origin pass;
# Host: evil.example (DNS rebinding) gets 421 on /log, naming server-name;
# the listener's address, localhost and a server-name pass; a reload
# changes the names at once (and refuses the * forms without a token);
# health is public.
import re
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

SRC = os.environ.get("SRCDIR") or os.path.join(E2E, "..", "..")
MAN = os.path.join(SRC, "man", "parley-protocol.7")
SID, OTHER = "er-1", "er-other"
TOKENS = {"none": None, "observer": "t-obs", "user": "t-usr",
          "agent": "t-agt", "admin": "t-adm", "metrics": "t-met",
          "scoped": "t-sco"}
CONF = ("token t-obs role observer\ntoken t-usr role user\n"
        "token t-agt role agent\ntoken t-adm role admin\n"
        "token t-met role metrics\n"
        "token t-sco role admin session %s\n"
        "index-root %s\n" % (OTHER, os.path.dirname(MAN)))
CHAT = {"v": 1, "type": "chat", "message": "hi"}

# How to try each endpoint: (kind, body).  kind: http, ws (an upgrade),
# sse (read the head only), ssebody (read the stream: errors come in it).
REQUESTS = {
    "GET /health": ("http", None),
    "GET /health/live": ("http", None),
    "GET /health/ready": ("http", None),
    "GET /api/info": ("http", None),
    "GET /metrics": ("http", None),
    "GET /chat": ("ws", None),
    "GET /ui/": ("http", None),
    "GET /sessions": ("http", None),
    "POST /sessions": ("http", {"sessionId": SID}),
    "GET /sessions/ID": ("http", None),
    "DELETE /sessions/ID": ("http", None),
    "GET /sessions/ID/stream": ("ws", None),
    "GET /sessions/ID/events": ("sse", None),
    "POST /sessions/ID/messages": ("http", CHAT),
    "GET /sessions/ID/log": ("http", None),
    "GET /sessions/ID/thoughts": ("http", None),
    "GET /sessions/ID/kb": ("http", None),
    "POST /sessions/ID/kb": ("http", {"content": "x"}),
    "POST /sessions/ID/kb/search": ("http", {"query": "x"}),
    "DELETE /sessions/ID/kb/DOCUMENTID": ("http", None),
    "GET /sessions/ID/dashboard": ("ws", None),
    "GET /sessions/ID/control": ("ws", None),
    "POST /api/agents/stream": ("ssebody", {"sessionId": SID,
                                            "message": "hi"}),
    # the AI SDK's and AG-UI's (aisdk.c, agui.c): the head says enough;
    # a resume with no turn running is 204
    "POST /api/chat": ("sse", {"id": SID, "trigger": "submit-message",
                               "messages": [{"id": "er-u1", "role": "user",
                                             "parts": [{"type": "text",
                                                        "text": "hi"}]}]}),
    "GET /api/chat/ID/stream": ("sse", None),
    "POST /api/agui": ("sse", {"threadId": SID, "runId": "er-r1",
                               "messages": [{"id": "er-m1", "role": "user",
                                             "content": "hi"}]}),
    "GET /api/agui/ID/stream": ("sse", None),
    "GET /api/audit?sessionId=ID": ("http", None),
    # project P's knowledge (parley-knowledge(7)); the table lists the
    # write first, so that the reads find the project made
    "POST /knowledge/P/actions": ("http", {"actions": [
        ["record-principle", {"name": "er", "description": "d"}]]}),
    "GET /knowledge/P": ("http", None),
    "GET /knowledge/P/stream": ("ws", None),
    "POST /knowledge/P/query": ("http", {"query": "(get-principles)"}),
    "POST /mcp": ("http", {"jsonrpc": "2.0", "id": 1, "method": "ping"}),
    "POST /api/index": ("http", {"path": os.path.dirname(MAN)}),
    "GET /api/index/status": ("http", None),
    "POST /api/search": ("http", {"query": "session"}),
    "DELETE /api/index": ("http", None),
}


def section(text, start, end):
    i = text.index(start)
    j = text.index(end, i + len(start))
    return text[i:j]


def key(method_path):
    """'GET /x?a=1&b=2' -> 'GET /x', keeping ?sessionId=ID (a routing key)."""
    m, p = method_path.split(" ", 1)
    path, _, q = p.partition("?")
    keep = [kv for kv in q.split("&") if kv.startswith("sessionId=")]
    return "%s %s%s" % (m, path, ("?" + "&".join(keep)) if keep else "")


def roff_words(line):
    """An mdoc line's text: macros dropped, Ar id as ID, Ns joined."""
    out, glue, arg = "", False, False
    for w in line.split()[1:]:
        if w == "No":  # what follows is prose: (WebSocket)
            break
        if w in ("Li", "Ar", "Ns"):
            glue = glue or w == "Ns"
            arg = w == "Ar"
            continue
        w = w.upper() if arg else w
        out += w if glue or not out else " " + w
        glue = arg = False
    return out


def documented_endpoints(man):
    """METHOD PATH of every endpoint the ENDPOINTS section lists."""
    eps = set()
    for line in section(man, "\n.Sh ENDPOINTS", "\n.Sh ").splitlines():
        m = re.match(r"\.It Li (GET|POST|PUT|PATCH|DELETE|HEAD) ", line)
        if not m:
            continue
        text = roff_words(line)
        method, rest = text.split(" ", 1)
        for p in rest.split(" , "):
            eps.add(key("%s %s" % (method, p.strip())))
    return eps


def role_table(man):
    """{endpoint: {column: cell}} from "Endpoints and roles"."""
    sec = section(man, "\n.Ss Endpoints and roles", "\n.Ss ")
    rows, cols = {}, None
    for line in sec.splitlines():
        if not line.startswith(".It "):
            continue
        cells = [c.strip() for c in line[4:].split(" Ta ")]
        if cols is None:
            cols = [c.replace("Sy ", "") for c in cells[1:]]
            continue
        ep = cells[0].replace("Li ", "", 1)
        rows[key(ep)] = dict(zip(cols, cells[1:]))
    return cols, rows


def request(d, kind, method, path, token, body, headers=None,
            host=None):
    """(status, text of what was read) of one request on a fresh socket."""
    s = socket.create_connection((d.host, d.port), timeout=10)
    try:
        h = "%s %s HTTP/1.1\r\nHost: %s\r\n" % (
            method, path, host or "127.0.0.1:%d" % d.port)
        if token:
            h += "Authorization: Bearer %s\r\n" % token
        for k, v in (headers or {}).items():
            h += "%s: %s\r\n" % (k, v)
        if kind == "ws":
            h += ("Upgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
                  % base64.b64encode(os.urandom(16)).decode())
        data = b""
        if body is not None:
            data = body if isinstance(body, bytes) else \
                json.dumps(body).encode()
            if not any(k.lower() == "content-type" for k in headers or {}):
                h += "Content-Type: application/json\r\n"
            h += "Content-Length: %d\r\n" % len(data)
        s.sendall((h + "\r\n").encode() + data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            b = s.recv(65536)
            if not b:
                break
            buf += b
        check(b" " in buf, "%s %s: no answer (%r)" % (method, path, buf))
        status = int(buf.split(b" ")[1])
        if kind in ("http", "ssebody") or status not in (101, 200):
            end = time.time() + 10
            while time.time() < end:
                try:
                    b = s.recv(65536)
                except socket.timeout:
                    break
                if not b:
                    break
                buf += b
        return status, buf.decode("utf-8", "replace")
    finally:
        s.close()


def refused(status, text):
    # the error's code, not the word anywhere: a search answer may quote
    # the man page, which names FORBIDDEN
    return status in (401, 403) or re.search(
        r'"code":\s*"FORBIDDEN"', text) is not None


async def roles():
    man = open(MAN).read()
    documented = documented_endpoints(man)
    cols, table = role_table(man)
    check(cols == list(TOKENS), "table columns %s, want %s"
          % (cols, list(TOKENS)))
    check(documented == set(table), "ENDPOINTS and the roles table differ: "
          "not in the table %s, not in ENDPOINTS %s"
          % (sorted(documented - set(table)), sorted(set(table) - documented)))
    check(set(REQUESTS) == set(table), "the test's requests and the table "
          "differ: untested %s, undocumented %s"
          % (sorted(set(table) - set(REQUESTS)),
             sorted(set(REQUESTS) - set(table))))
    d = Daemon(extra=CONF)
    with with_daemon(d):
        # Ready is one worker ready; /health is 200 only with all of them
        # (degraded: 503), and the table says it is served.  A slow
        # worker (ASan on a loaded machine) is waited for, not failed.
        deadline = time.time() + 60
        while time.time() < deadline:
            st, _, body = d.http("GET", "/health")
            if st == 200:
                break
            time.sleep(0.2)
        check(st == 200, "GET /health not 200 within 60 s: %d %s"
              % (st, body[:200]))
        for sid in (SID, OTHER):
            st, js = d.http_json("POST", "/sessions", {"sessionId": sid},
                                 {"Authorization": "Bearer t-adm"})
            check(st == 201, "create %s -> %s %s" % (sid, st, js))
        # DELETE last: it ends the session the others use.
        order = sorted(table, key=lambda e: e.startswith("DELETE"))
        tried = 0
        for ep in order:
            kind, body = REQUESTS[ep]
            method, path = ep.split(" ", 1)
            path = path.replace("ID", SID)
            for col, tok in TOKENS.items():
                cell = table[ep][col]
                check(cell.startswith("yes") or cell.startswith("no"),
                      "%s / %s: cell %r" % (ep, col, cell))
                st, text = request(d, kind, method, path, tok, body)
                tried += 1
                what = "%s as %s -> %d %s" % (ep, col, st, text[-300:])
                if cell.startswith("yes"):
                    check(not refused(st, text) and st in
                          (101, 200, 201, 202, 204, 409), "allowed: " + what)
                else:
                    want = 401 if col == "none" else 403
                    check(st == want or (st == 200 and kind == "ssebody" and
                                         "FORBIDDEN" in text),
                          "refused (want %d): %s" % (want, what))
        # A metrics token reaches no worker, even on a path no one serves.
        st, text = request(d, "http", "GET", "/sessions/%s/nope" % SID,
                           "t-met", None)
        check(st == 404, "metrics on an unknown path -> %d %s" % (st, text))
        st, text = request(d, "http", "GET", "/api/info", "t-sco", None)
        check(st == 403 and "server-wide" in text, "scoped /api/info -> %d "
              "%s" % (st, text))
        print("roles: %d endpoints x %d tokens = %d requests as documented"
              % (len(table), len(TOKENS), tried))


async def ws_origin(d, path, origin):
    """Status of a websockets-library handshake with that Origin."""
    try:
        ws = await ws_connect(d.url(path), origin=origin)
    except websockets.exceptions.InvalidStatusCode as e:
        return e.status_code
    await ws.close()
    return 101


async def origins():
    d = Daemon(extra="allowed-origin http://app.example:8080\n"
               "server-name chat.example\nserver-name 127.0.0.2:9\n")
    with with_daemon(d):
        own = "http://127.0.0.1:%d" % d.port
        st, js = d.http_json("POST", "/sessions", {"sessionId": "og-1"})
        check(st == 201, "create -> %s %s" % (st, js))
        ctl = "/sessions/og-1/control"
        for origin, want in (("http://evil.example", 403), ("null", 403),
                             ("http://127.0.0.1:1", 403),
                             ("https://app.example:8080", 403),
                             (None, 101), (own, 101),
                             ("http://app.example:8080", 101),
                             ("HTTP://APP.EXAMPLE:8080", 101)):
            h = {"Origin": origin} if origin else {}
            st, text = request(d, "ws", "GET", ctl, None, None, h)
            check(st == want, "control upgrade, Origin %s -> %d %s (want %d)"
                  % (origin, st, text[:300], want))
            if st == 403:
                check("allowed-origin" in text, "403 names the keyword: %s"
                      % text)
        for path in ("/chat", "/sessions/og-1/stream",
                     "/sessions/og-1/dashboard"):
            st = await ws_origin(d, path, "http://evil.example")
            check(st == 403, "websockets %s from evil.example -> %s"
                  % (path, st))
            st = await ws_origin(d, path, own)
            check(st == 101, "websockets %s from its own origin -> %s"
                  % (path, st))
        # A form's text/plain POST from another site: refused, changes nothing.
        last = d.last_seq("og-1")
        for p, b in (("/sessions/og-1/messages",
                      b'{"v":1,"type":"terminate"}'),
                     ("/sessions", b'{"sessionId":"og-2"}'),
                     ("/api/agents/stream",
                      b'{"sessionId":"og-1","message":"x"}')):
            st, text = request(d, "http", "POST", p, None, b,
                               {"Origin": "http://evil.example",
                                "Content-Type": "text/plain"})
            check(st == 403, "cross-site POST %s -> %d %s" % (p, st, text))
        st, js = d.http_json("GET", "/sessions/og-1")
        check(st == 200 and js["status"] != "completed",
              "a refused terminate ended the session: %s" % js)
        check(d.last_seq("og-1") == last, "a refused POST was logged")
        st, _ = d.http_json("GET", "/sessions/og-2")
        check(st == 404, "a refused POST /sessions created it: %d" % st)
        # DNS rebinding: the page's own name in Host.
        log = "/sessions/og-1/log"
        st, text = request(d, "http", "GET", log, None, None,
                           host="evil.example")
        check(st == 421 and "server-name evil.example" in text,
              "Host evil.example -> %d %s" % (st, text))
        st, text = request(d, "http", "GET", log, None, None,
                           host="evil.example:%d" % d.port)
        check(st == 421, "Host evil.example:PORT -> %d %s" % (st, text))
        st, text = request(d, "ws", "GET", ctl, None, None,
                           host="evil.example:%d" % d.port)
        check(st == 421, "upgrade with Host evil.example -> %d" % st)
        for host, want in (("127.0.0.1:%d" % d.port, 200),
                           ("localhost:%d" % d.port, 200),
                           ("LocalHost:%d" % d.port, 200),
                           ("127.0.0.1", 421), ("localhost", 421),
                           ("127.0.0.1:%d" % (d.port + 1), 421),
                           ("chat.example", 200),
                           ("chat.example:%d" % d.port, 200),
                           ("CHAT.example:1", 200),
                           ("127.0.0.2:9", 200), ("127.0.0.2:10", 421),
                           ("[::1]:%d" % d.port, 421)):
            st, text = request(d, "http", "GET", log, None, None, host=host)
            check(st == want, "Host %s -> %d (want %d) %s"
                  % (host, st, want, text[-200:]))
        # Its own origin is the Host it reached.
        st, text = request(d, "http", "GET", log, None, None,
                           {"Origin": "http://chat.example"},
                           host="chat.example")
        check(st == 200, "same origin by server-name -> %d %s" % (st, text))
        # A reload takes new names at once; allowed-origin * and
        # server-name * need a token.
        extra = d.extra
        d.extra += "allowed-origin http://evil.example\nserver-name evil.example\n"
        d.write_conf()
        d.ctl("reload", check_rc=0)
        st, text = request(d, "http", "GET", log, None, None,
                           {"Origin": "http://evil.example"},
                           host="evil.example")
        check(st == 200, "after reload, evil.example named -> %d %s"
              % (st, text))
        d.extra = extra + "allowed-origin *\n"
        d.write_conf()
        rc, out, err = d.ctl("reload")
        check(rc != 0 and "allowed-origin *" in out + err,
              "reload with allowed-origin * and no token -> %d %s%s"
              % (rc, out, err))
        st, text = request(d, "http", "GET", log, None, None,
                           {"Origin": "http://other.example"})
        check(st == 403, "a refused reload let every origin in: %d" % st)
        # Health is public by design: no Host check either.  The reload
        # above restarts the workers; wait for them so that a 503 here
        # could only mean a refusal, not a worker still starting.
        d.wait_ready()
        for p in ("/health", "/health/live", "/health/ready"):
            st, text = request(d, "http", "GET", p, None, None,
                               {"Origin": "http://evil.example"},
                               host="evil.example")
            check(st == 200, "%s from anywhere -> %d %s" % (p, st, text))


async def test():
    await roles()
    await origins()


run_test("endpoint_roles", test)

#!/usr/bin/python3
# Ten reloads in a row under load.  Four sessions stream long replies over
# WebSocket and one over SSE, turn after turn, while parleyd is reloaded ten
# times (SIGHUP and `parleyctl reload` alternately, 0.4 s apart, the
# provider's reply changing every other time).  Clients reconnect with
# their last seq whenever they are closed.  At the end every session's
# events, as its client saw them, run from seq 1 without a gap or a
# duplicate and equal GET /sessions/ID/log; every turn ended with done and
# streamed one whole reply; no turn failed (recoverable errors only); the
# old workers are all gone within drain-timeout.
import sys, os, signal
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

REPLY_A = "".join("alpha%03d " % i for i in range(90))
REPLY_B = "".join("bravo%03d " % i for i in range(90))
# 810 bytes in 8-byte chunks every 10 ms: a turn streams for ~1 s, so
# turns start and end on workers of many generations.
DRAIN = 10          # drain-timeout, seconds
RELOADS = 10
GAP = 0.4           # between reloads
WS_SESSIONS = ["rm-ws-%d" % i for i in range(4)]
SSE_SESSION = "rm-sse"
CLOSE_OK = (1001, 1012)


class Client:
    """One session's client: its events, the closes it saw, its turns."""

    def __init__(self, sid):
        self.sid = sid
        self.seen = []          # logged events, in arrival order
        self.closes = []        # WebSocket close codes / SSE stream ends
        self.sent = 0           # chats sent (turn k has id "<sid>-k")
        self.acked = set()
        self.conn_errors = []   # connection-level error events
        self.turns_done = 0

    def last(self):
        return self.seen[-1]["seq"] if self.seen else 0

    def take(self, e):
        if "seq" not in e or e.get("type") in ("ack", "pong"):
            if e.get("type") == "ack":
                self.acked.add(e.get("id"))
            elif e.get("type") == "error":
                self.conn_errors.append(e)
            return
        self.seen.append(e)
        # A turn ends with done (or a fatal error), then agent_state idle.
        if e.get("type") == "done" or (e.get("type") == "error" and
                                       e.get("severity") == "fatal"):
            self.ending = True
        elif is_idle(e) and getattr(self, "ending", False):
            self.ending = False
            self.turns_done += 1

    def chat(self):
        """The chat of turn self.sent."""
        return {"v": 1, "type": "chat", "sessionId": self.sid,
                "id": "%s-%d" % (self.sid, self.sent),
                "message": "turn %d" % self.sent}


async def ws_client(d, c, more):
    """Turn after turn while more() is true, then until the last turn
    ended; reconnects with lastSeq whenever the server closes."""
    deadline = time.time() + 90
    first = True
    while True:
        check(time.time() < deadline, "%s: still going after 90 s; closes %s"
              % (c.sid, c.closes))
        path = "/sessions/%s/stream" % c.sid
        if not first:
            path += "?lastSeq=%d" % c.last()
        try:
            ws = await ws_connect(d.url(path))
        except (OSError, websockets.exceptions.WebSocketException,
                asyncio.TimeoutError) as e:
            c.closes.append("connect: %s" % e)
            await asyncio.sleep(0.1)
            continue
        first = False
        try:
            st = await ws_recv(ws, 10)
            check(st.get("type") == "session_state", "%s: first event %s"
                  % (c.sid, st))
            check(st.get("lastSeq", 0) >= c.last(), "%s: session_state "
                  "lastSeq %s behind the client's %d" % (c.sid,
                                                         st.get("lastSeq"), c.last()))
            sent_here = None
            while True:
                # Start the next turn when the last one ended; send its
                # chat again on a new connection until it is acknowledged
                # (its id makes it count once).
                if c.sent == c.turns_done:
                    if not more():
                        await ws.close()
                        return
                    c.sent += 1
                cur = "%s-%d" % (c.sid, c.sent)
                if cur not in c.acked and sent_here != cur:
                    await ws_send(ws, c.chat())
                    sent_here = cur
                e = await ws_recv(ws, 30)
                c.take(e)
                if e.get("type") == "error" and "seq" not in e:
                    sent_here = None    # refused: try again shortly
                    await asyncio.sleep(0.1)
        except websockets.exceptions.ConnectionClosed as e:
            c.closes.append(e.code)
        except asyncio.TimeoutError:
            raise Fail("%s: nothing for 30 s (sent %d, ended %d, last seq %d)"
                       % (c.sid, c.sent, c.turns_done, c.last()))
        finally:
            await ws.close()


async def sse_client(d, c, more):
    """The same over SSE: one GET /events stream kept open (reopened with
    Last-Event-ID when it ends); chats go by POST /sessions/ID/messages
    with an id, retried until accepted."""
    deadline = time.time() + 90
    while True:
        check(time.time() < deadline, "%s: still going after 90 s; closes %s"
              % (c.sid, c.closes))
        try:
            r, w = await asyncio.wait_for(
                asyncio.open_connection(d.host, d.port), 10)
        except (OSError, asyncio.TimeoutError) as e:
            c.closes.append("connect: %s" % e)
            await asyncio.sleep(0.1)
            continue
        try:
            w.write(("GET /sessions/%s/events HTTP/1.1\r\nHost: %s:%d\r\n"
                     "Accept: text/event-stream\r\nLast-Event-ID: %d\r\n\r\n"
                     % (c.sid, d.host, d.port, c.last())).encode())
            head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 10)
            status = int(head.split(b" ")[1])
            if status != 200:
                c.closes.append("HTTP %d" % status)
                await asyncio.sleep(0.1)
                continue
            chunked = b"chunked" in head.lower()
            buf = b""
            c._sse = b""
            while True:
                if c.sent == c.turns_done:
                    if not more():
                        return
                    c.sent += 1
                    await post_chat(d, c)
                data = await asyncio.wait_for(r.read(65536), 30)
                if not data:
                    c.closes.append("eof")
                    break
                buf += data
                buf = parse_sse(buf, c, chunked)
        except (OSError, asyncio.IncompleteReadError) as e:
            c.closes.append("%s" % type(e).__name__)
        except asyncio.TimeoutError:
            raise Fail("%s: nothing for 30 s (sent %d, ended %d, last seq %d)"
                       % (c.sid, c.sent, c.turns_done, c.last()))
        finally:
            w.close()


def parse_sse(buf, c, chunked):
    """Takes the complete events out of buf (chunked transfer coding or
    not); returns what is left."""
    if chunked:
        # de-chunk what is complete, keep the rest
        out, rest = b"", buf
        while True:
            i = rest.find(b"\r\n")
            if i < 0:
                break
            n = int(rest[:i].split(b";")[0] or b"0", 16)
            if len(rest) < i + 2 + n + 2:
                break
            out += rest[i + 2:i + 2 + n]
            rest = rest[i + 2 + n + 2:]
        c._sse = getattr(c, "_sse", b"") + out
        text, keep = c._sse, rest
    else:
        text, keep = buf, b""
    while b"\n\n" in text:
        block, text = text.split(b"\n\n", 1)
        data = [ln[5:].lstrip() for ln in block.split(b"\n")
                if ln.startswith(b"data:")]
        if data:
            c.take(json.loads(b"\n".join(data)))
    if chunked:
        c._sse = text
        return keep
    return text


async def post_chat(d, c):
    """POST turn c.sent until it is accepted (its id makes a retry once)."""
    body = {"v": 1, "type": "chat", "sessionId": c.sid,
            "id": "%s-%d" % (c.sid, c.sent), "message": "turn %d" % c.sent}
    deadline = time.time() + 30
    while True:
        try:
            st, js = await asyncio.to_thread(
                d.http_json, "POST", "/sessions/%s/messages" % c.sid, body)
            if st in (200, 202):
                return
            c.conn_errors.append({"status": st, "body": js})
        except (OSError, Fail, http.client.HTTPException) as e:
            c.conn_errors.append({"post": str(e)})
        check(time.time() < deadline, "%s: chat %d not accepted in 30 s: %s"
              % (c.sid, c.sent, c.conn_errors[-3:]))
        await asyncio.sleep(0.1)


def check_turns(c):
    """Every turn ended with one done, after a whole reply."""
    fatal = [e for e in c.seen if e.get("type") == "error"
             and e.get("severity") != "recoverable"]
    check(not fatal, "%s: turns failed: %s" % (c.sid, fatal))
    dones = of_type(c.seen, "done")
    check(len(dones) == c.sent, "%s: %d chats, %d done" % (c.sid, c.sent, len(dones)))
    users = of_type(c.seen, "user_message")
    check(len(users) == c.sent, "%s: %d chats sent, %d user_message logged "
          "(a chat applied twice or lost)" % (c.sid, c.sent, len(users)))
    start = 0
    for dn in dones:
        end = c.seen.index(dn)
        turn = c.seen[start:end]
        errs = [i for i, e in enumerate(turn) if e.get("type") == "error"]
        tail = turn[errs[-1] + 1:] if errs else turn
        text = "".join(e.get("content", "") for e in tail
                       if e.get("type") == "token" and
                       e.get("messageId") == dn.get("messageId"))
        check(text in (REPLY_A, REPLY_B), "%s: turn ending at seq %d streamed "
              "%r..., not one whole reply" % (c.sid, dn["seq"], text[:60]))
        start = end + 1


async def test():
    d = Daemon(providers=provider_block("p", REPLY_A, chunk=8, delay="10ms"),
               default="p", workers=2,
               extra="drain-timeout %ds\n" % DRAIN)
    with with_daemon(d):
        reloading = [True]
        more = lambda: reloading[0]
        clients = [Client(s) for s in WS_SESSIONS]
        sse = Client(SSE_SESSION)
        st, js = d.http_json("POST", "/sessions", {"sessionId": SSE_SESSION})
        check(st == 201, "POST /sessions -> %d %s" % (st, js))
        tasks = [asyncio.create_task(ws_client(d, c, more)) for c in clients]
        tasks.append(asyncio.create_task(sse_client(d, sse, more)))
        # every session mid-turn before the first reload
        deadline = time.time() + 20
        while time.time() < deadline and not all(
                of_type(c.seen, "token") for c in clients + [sse]):
            for t in tasks:
                if t.done():
                    t.result()
            await asyncio.sleep(0.05)
        check(all(of_type(c.seen, "token") for c in clients + [sse]),
              "not every session streaming after 20 s")

        old = set(d.workers_pids())
        how = []
        for i in range(RELOADS):
            old |= set(d.workers_pids())
            if i % 2 == 1:     # a changed reply every other reload
                d.providers = provider_block(
                    "p", REPLY_B if i % 4 == 1 else REPLY_A, chunk=8,
                    delay="10ms")
                d.write_conf()
            if i % 2 == 0:
                d.signal(signal.SIGHUP)
                how.append("SIGHUP")
            else:
                rc, out, err = await asyncio.to_thread(d.ctl, "reload")
                check(rc == 0, "parleyctl reload #%d exited %d: %s%s"
                      % (i + 1, rc, out, err))
                how.append("parleyctl")
            await asyncio.sleep(GAP)
            for t in tasks:
                if t.done():
                    t.result()
        last_reload = time.time()
        print("reloads: %s" % how, flush=True)
        reloading[0] = False
        await asyncio.wait_for(asyncio.gather(*tasks), 90)

        for c in clients + [sse]:
            print("%s: %d events, %d turns, closes %s, connection errors %s"
                  % (c.sid, len(c.seen), c.sent, c.closes,
                     [e.get("code") or e for e in c.conn_errors][:5]),
                  flush=True)
            check_contiguous(c.seen, 1, "%s as its client saw it" % c.sid)
            same_events(c.seen, d.log_events(c.sid),
                        "%s: client vs GET /log" % c.sid)
            check_turns(c)
            rec = [e for e in c.seen if e.get("type") == "error"]
            if rec:
                print("%s: recoverable errors %s" % (c.sid, [
                    (e.get("code"), e.get("message")) for e in rec]))
        for c in clients:
            bad = [x for x in c.closes if x not in CLOSE_OK]
            check(not bad, "%s: closed other than with %s: %s"
                  % (c.sid, CLOSE_OK, c.closes))
        check(any(c.closes for c in clients),
              "no WebSocket client was ever closed: were the workers replaced?")

        # the old generations gone within drain-timeout (+ slack)
        while time.time() < last_reload + DRAIN + 5 and \
                set(d.workers_pids()) & old:
            await asyncio.sleep(0.2)
        left = set(d.workers_pids()) & old
        check(not left, "old workers %s still running %.1f s after the last "
              "reload (drain-timeout %d s)" % (sorted(left),
                                               time.time() - last_reload, DRAIN))
        now = d.workers_pids()
        check(len(now) == d.workers, "%d workers after the reloads, want %d: %s"
              % (len(now), d.workers, now))
        st, _, _ = d.http("GET", "/health/ready")
        check(st == 200, "/health/ready %d after the reloads" % st)
        # the last configuration is the one serving
        ev = await chat_turn(d, "rm-after", "hi")
        want = REPLY_A
        for i in range(RELOADS):
            if i % 2 == 1:
                want = REPLY_B if i % 4 == 1 else REPLY_A
        check(tokens_text(ev) == want, "after the reloads the reply is %r..."
              % tokens_text(ev)[:40])

run_test("reload_many", test)

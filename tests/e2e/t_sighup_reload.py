#!/usr/bin/python3
# SIGHUP: the config is re-read and workers replaced; clients of idle
# sessions get 1001 and resume with lastSeq losing nothing; a session
# streaming across the reload loses nothing; an invalid config on SIGHUP
# leaves the old one serving.
import sys, os, signal
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

LONG = "".join("word%03d " % i for i in range(200))
NEW = "This reply comes from the reloaded configuration."


async def test():
    d = Daemon(providers=provider_block("p", LONG, chunk=8, delay="10ms"), default="p")
    with with_daemon(d):
        # idle session with a connected client
        a_seen = []
        wa = await ws_connect(d.url("/sessions/hup-a/stream"))
        await ws_recv(wa)
        await ws_send(wa, {"v": 1, "type": "chat", "sessionId": "hup-a", "message": "a"})
        a_seen += logged(await ws_until(wa, is_idle, timeout=30))
        # streaming session
        b_seen = []
        wb = await ws_connect(d.url("/sessions/hup-b/stream"))
        await ws_recv(wb)
        await ws_send(wb, {"v": 1, "type": "chat", "sessionId": "hup-b", "message": "b"})
        ev = []
        await ws_until(wb, lambda e: sum(1 for x in ev if x.get("type") == "token") >= 3, into=ev)
        b_seen += logged(ev)
        old_workers = set(d.workers_pids())
        d.providers = provider_block("p", NEW, chunk=8, delay="2ms")
        d.write_conf()
        d.signal(signal.SIGHUP)
        # idle client: closed with 1001
        try:
            while True:
                e = await ws_recv(wa, 20)
                if "seq" in e:
                    a_seen.append(e)
        except websockets.exceptions.ConnectionClosed as e:
            check(e.code == 1001, "idle client closed with %s, want 1001" % e.code)
        except asyncio.TimeoutError:
            raise Fail("idle client not closed within 20 s of SIGHUP")
        # streaming client: through done, reconnecting as needed
        wb2, b_closes = await follow_ws(d, wb, "hup-b", b_seen)
        check_contiguous(b_seen, 1, "session streamed across the reload")
        text = "".join(e["content"] for e in b_seen if e["type"] == "token"
                       and e["messageId"] == [x for x in b_seen if is_done(x)][-1]["messageId"])
        check(text == LONG or text == NEW, "reply across reload differs: %r" % text[:60])
        # workers replaced
        deadline = time.time() + 15
        while time.time() < deadline and (set(d.workers_pids()) & old_workers):
            await asyncio.sleep(0.1)
        check(not (set(d.workers_pids()) & old_workers),
              "old workers still running: %s" % (set(d.workers_pids()) & old_workers))
        # the idle session resumes losing nothing and uses the new config
        wa = await ws_connect(d.url("/sessions/hup-a/stream?lastSeq=%d" % a_seen[-1]["seq"]))
        st = await ws_recv(wa)
        check(st["lastSeq"] == a_seen[-1]["seq"], "hup-a lastSeq %s, client saw %d"
              % (st["lastSeq"], a_seen[-1]["seq"]))
        await ws_send(wa, {"v": 1, "type": "chat", "sessionId": "hup-a", "message": "again"})
        a_seen += logged(await ws_until(wa, is_done, timeout=30))
        await wa.close()
        check_contiguous(a_seen, 1, "idle session across reload")
        text = "".join(e["content"] for e in a_seen if e["type"] == "token"
                       and e["messageId"] == a_seen[-1]["messageId"])
        check(text == NEW, "turn after reload used the old config: %r" % text[:60])
        # invalid config on SIGHUP: old one keeps serving
        with open(d.conf, "w") as f:
            f.write("listen 127.0.0.1:%d\nworkers 2\nthis is not a directive\n" % d.port)
        pids = set(d.workers_pids())
        d.signal(signal.SIGHUP)
        await asyncio.sleep(1.5)
        check(d.proc.poll() is None, "parleyd exited after an invalid config on SIGHUP")
        st, _, _ = d.http("GET", "/health/ready")
        check(st == 200, "health after invalid reload: %d" % st)
        check(set(d.workers_pids()) == pids, "workers replaced by an invalid reload")
        check("parleyd.conf:3" in d.log_text(), "invalid reload not logged with FILE:LINE")
        ws = await ws_connect(d.url("/chat"))
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": "hup-c", "message": "c"})
        ev = await ws_until(ws, is_done, timeout=30)
        await ws.close()
        text = "".join(e["content"] for e in ev if e.get("type") == "token")
        check(text == NEW, "after an invalid reload the reply is %r" % text[:60])
        d.write_conf()  # so the final stop is clean
        # a second listen line: the first socket stays open across the
        # reload (a client connected before it is served after), the new
        # one serves too; removing it again closes only it
        held = socket.create_connection(("127.0.0.1", d.port), timeout=5)
        extra = free_port()
        base = d.conf_text
        d.conf_text = lambda: base() + "listen 127.0.0.1:%d\n" % extra
        d.write_conf()
        d.signal(signal.SIGHUP)
        await until_port(extra, True, "new listen line not served 10 s after SIGHUP")
        held.sendall(b"GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        check(b" 200 " in held.recv(4096), "a connection accepted before the "
              "reload was not served after it")
        held.close()
        d.conf_text = base
        d.write_conf()
        d.signal(signal.SIGHUP)
        await until_port(extra, False, "removed listen line still served")
        # the new generation comes up (slower under sanitizers)
        d.wait_ready(20)


async def until_port(port, served, what):
    """Waits up to 10 s for 127.0.0.1:port to accept (served) or refuse."""
    deadline = time.time() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            up = True
        except OSError:
            up = False
        if up == served:
            return
        check(time.time() < deadline, what)
        await asyncio.sleep(0.1)


async def follow_ws(d, ws, sid, seen):
    """Continue reading ws through a done, reconnecting with lastSeq on close."""
    closes = []
    deadline = time.time() + 60
    while True:
        ev = []
        try:
            await ws_until(ws, is_done, into=ev, timeout=max(1, deadline - time.time()))
            seen += logged(ev)
            return ws, closes
        except websockets.exceptions.ConnectionClosed as e:
            closes.append(e.code)
            seen += logged(ev)
        if time.time() > deadline:
            raise Fail("%s: no done; closes %s" % (sid, closes))
        while True:
            try:
                ws = await ws_connect(d.url("/sessions/%s/stream?lastSeq=%d"
                                            % (sid, seen[-1]["seq"])))
                await ws_recv(ws)
                break
            except (OSError, websockets.exceptions.WebSocketException) as e:
                closes.append(str(e))
                if time.time() > deadline:
                    raise Fail("%s: cannot reconnect: %s" % (sid, closes))
                await asyncio.sleep(0.1)

run_test("sighup_reload", test)

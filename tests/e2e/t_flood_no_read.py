#!/usr/bin/python3
# A client that keeps sending (pings) but never reads its replies must not
# grow the server's memory without bound: past 4 x max-output-buffer of
# unread replies the server drops it.  Other clients are unaffected.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

SID = "flood-1"


async def test():
    d = Daemon(extra="max-output-buffer 4k\n")
    with with_daemon(d):
        st, js = d.http_json("POST", "/sessions", {"sessionId": SID})
        check(st == 201, "create -> %d %s" % (st, js))
        w = RawWS(d.port, "/sessions/%s/stream?lastSeq=0" % SID, rcvbuf=4096)
        ping = RawWS.frame(1, json.dumps({"v": 1, "type": "ping", "sessionId": SID,
                                          "id": "p" * 100}).encode())
        sent = 0
        dropped = False
        deadline = time.time() + 60
        try:
            while time.time() < deadline and sent < 200000:
                w.s.sendall(ping * 100)
                sent += 100
        except (BrokenPipeError, ConnectionResetError, socket.timeout) as e:
            dropped = not isinstance(e, socket.timeout)
        if not dropped:
            # the server may have closed while our send buffer still had room
            try:
                w.s.settimeout(5)
                while w.s.recv(65536):
                    pass
                dropped = True
            except ConnectionResetError:
                dropped = True
            except socket.timeout:
                pass
        check(dropped, "server kept a client that sent %d pings without "
              "reading a reply" % sent)
        check("output over its bound" in d.log_text(),
              "no log line saying why the client was dropped")
        # others still served
        st, _, _ = d.http("GET", "/health/ready")
        check(st == 200, "health after flood -> %d" % st)
        st, js = d.http_json("POST", "/sessions/%s/messages" % SID,
                             {"v": 1, "type": "chat", "message": "still here"})
        check(st == 202, "chat after flood -> %d %s" % (st, js))


run_test("flood_no_read", test)

#!/usr/bin/python3
# A worker near its open-files limit refuses new clients (HTTP 503) instead
# of running out of descriptors (or, with room for the connection but not
# its session, closes it with OVERLOADED): before, a hand-off the kernel could not
# deliver broke the worker's IPC channel and it exited, dropping every
# client, again and again.  parleyd runs with RLIMIT_NOFILE 300 (soft and
# hard), 1 worker, local store (a session holds one descriptor).
import sys, os, socket
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

LIMIT = 300


class Limited(Daemon):
    def argv(self):
        return ["prlimit", "--nofile=%d:%d" % (LIMIT, LIMIT), "--"] + super().argv()


async def test():
    d = Limited(workers=1)
    with with_daemon(d):
        pids = d.workers_pids()
        held, refused = [], 0
        for i in range(LIMIT):
            try:
                ws = await ws_connect(d.url("/sessions/fd-%d/stream" % i))
                await ws_recv(ws)
                held.append(ws)
            except websockets.exceptions.InvalidStatusCode as e:
                # no room for the connection: refused before the upgrade
                check(e.status_code == 503, "refusal status %d" % e.status_code)
                refused += 1
            except websockets.exceptions.ConnectionClosed as e:
                # room for the connection, not for its session
                check("OVERLOADED" in (e.reason or ""), "closed with %s %r"
                      % (e.code, e.reason))
                refused += 1
        print("held %d, refused %d" % (len(held), refused))
        check(refused > 0, "no client refused under a %d-file limit" % LIMIT)
        check(len(held) >= 50, "only %d clients held" % len(held))
        check(d.workers_pids() == pids, "worker restarted: %s -> %s"
              % (pids, d.workers_pids()))
        # everyone held is still served
        for ws in held[:5] + held[-5:]:
            await ws_send(ws, {"v": 1, "type": "ping", "sessionId": "x"})
        for ws in held:
            await ws.close()
        # room again once they are gone
        deadline = time.time() + 20
        while True:
            try:
                ev = await chat_turn(d, "fd-after", "hi")
                break
            except Exception as e:
                check(time.time() < deadline, "no room after the clients "
                      "left: %s" % e)
                await asyncio.sleep(0.5)
        one_done(ev, "chat after the clients left")
        check(d.workers_pids() == pids, "worker restarted")
        check("near the open files limit" in d.log_text(),
              "the refusal is not logged")


run_test("fd_limit", test)

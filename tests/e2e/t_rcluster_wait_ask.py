#!/usr/bin/python3
# store-wait on `store cluster://`: a batch that runs on the importing
# master after ASK is waited for there, where it ran.  A session's keys
# all copied to the new master while its slot is moving (so the old one
# answers ASK and the new one runs the scripts), the OLD master's replica
# stopped: the turn is acknowledged (the new master's replica has it).
# A WAIT sent by slot went to the old master, whose stopped replica
# acknowledged nothing within the timeout: the turn failed.
import sys, os, asyncio, signal
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from rcluster import RedisCluster


async def test():
    c = RedisCluster(masters=3, replicas=1, node_timeout=1000)
    with c:
        d = Daemon(store=c.url(), host_id="h0",
                   extra="store-wait 1 500ms\n")
        with with_daemon(d):
            sid = "wa-1"
            key = "{%s}" % sid
            ev = await chat_turn(d, sid, "hello")
            one_done(ev, "first turn")
            slot = c.keyslot(key)
            src = c.master_for_slot(slot)
            dst = [m for m in c.masters() if m is not src][0]
            # Every key the session's scripts name exists, so the new
            # master runs them (none absent: no TRYAGAIN).
            src.cmd("XADD", "parley:%s:in" % key, "*", "m", "x")
            src.cmd("XTRIM", "parley:%s:in" % key, "MAXLEN", 0)
            src.cmd("HSET", "parley:%s:kb" % key, "t", "{}")
            c.begin_migration(slot, dst)
            keys = src.cmd("CLUSTER", "GETKEYSINSLOT", slot, 100)
            check(len(keys) >= 6, "keys of %s: %s" % (sid, keys))
            src.cmd("MIGRATE", dst.host, dst.port, "", 0, 5000, "KEYS",
                    *keys)
            rep = c.replicas_of(src)[0]
            os.kill(rep.proc.pid, signal.SIGSTOP)
            try:
                ev = await chat_turn(d, sid, "while moving")
                one_done(ev, "the turn under ASK")
            finally:
                os.kill(rep.proc.pid, signal.SIGCONT)
            check(not any("not acknowledged" in l for l in
                          d.log_text().splitlines()),
                  "a write was not acknowledged: %s" % [
                      l for l in d.log_text().splitlines()
                      if "not acknowledged" in l][:3])
            c.end_migration(slot, src, dst)
            ev = await chat_turn(d, sid, "moved")
            one_done(ev, "after the move")
            print("WAIT after ASK ok")


run_test("rcluster_wait_ask", test)

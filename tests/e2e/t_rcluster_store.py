#!/usr/bin/python3
# Two parleyd (h0, h1) on `store cluster://` over a Redis Cluster of three
# masters and three replicas on 127.0.0.1 (lib/rcluster.py):
# (1) sessions whose slots are on each of the three masters chat through
#     either host; what the clients saw is the log in the cluster (read on
#     each session's master) and GET /log on the other host; every worker's
#     heartbeat (a keyless PUBLISH) is heard;
# (2) resharding: one session's slot is moving (its keys already on the
#     new master, the slot not handed over yet): the old master answers
#     ASK, the new one (after ASKING) TRYAGAIN to the session's scripts
#     (several keys, some absent), which wait; the slot handed over, the
#     old master answers MOVED: the hosts route the slot to the new master
#     (no reconnection) and the turn that waited ends;
# (3) CLUSTER FAILOVER (a replica takes over its master's slots, the old
#     master now a replica): the hosts notice, and the session goes on;
# (4) a master SIGKILLed while idle (after WAIT: its replica has every
#     write), its replica promoted: both hosts come back (/health) and
#     every session goes on, its log whole.
# A master killed mid-stream with nothing acknowledged lost needs the
# store to WAIT for replicas before acknowledging (not in this test).
import sys, os, asyncio, time, socket
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import redis_log, wait_until, Resp
from rcluster import RedisCluster


def sessions_per_master(c, n=1):
    """{master: [sid...]}: n session ids whose slot each master serves."""
    out = {m: [] for m in c.masters()}
    i = 0
    while any(len(v) < n for v in out.values()):
        sid = "rc-%d" % i
        m = c.master_for_key("{%s}" % sid)
        if len(out[m]) < n:
            out[m].append(sid)
        i += 1
    return out


def agrees(c, hosts, sid, what):
    """The session's log in the cluster is contiguous from 1 and is what
    every host's GET /log says."""
    ev = [e for _, _, e in redis_log(c.rcmd, sid)]
    check_contiguous(ev, 1, "%s: %s's log in the cluster" % (what, sid))
    for d in hosts:
        # A follower hears of the owner's last appends a moment later.
        try:
            wait_until(lambda: len(d.log_events(sid)) >= len(ev), 10,
                       "%s: %s on %s to catch up" % (what, sid, d.host_id))
        except Fail:
            pass            # same_events says what differs
        same_events(ev, d.log_events(sid), "%s: %s in the cluster vs GET "
                    "/log on %s" % (what, sid, d.host_id))
    return ev


CL = None            # the RedisCluster, for turn()


async def turn(d, sid, msg, what):
    """A chat through d, once d's view of sid has every event in the
    cluster's log (else the end of a turn another host ran would reach
    this client live, mixed with its own turn's events)."""
    n = len(redis_log(CL.rcmd, sid))
    if n:
        try:
            wait_until(lambda: len(d.log_events(sid)) >= n, 10,
                       "%s: %s on %s to catch up" % (what, sid, d.host_id))
        except Fail:
            pass            # the turn's own checks say what differs
    ev = await chat_turn(d, sid, msg)
    one_done(ev, "%s: %s on %s" % (what, sid, d.host_id))
    return ev


CONNECTED = "store: redis: connected to"


def connects(hosts):
    return [d.log_text().count(CONNECTED) for d in hosts]


def reconnected(hosts, before, what, timeout=30):
    """Every worker of every host connected again (a link that went down
    logs its coming back) since connects() said before."""
    for d, n in zip(hosts, before):
        want = n + len(d.workers_pids())
        wait_until(lambda: d.log_text().count(CONNECTED) >= want, timeout,
                   "%s: every worker of %s to connect again (%d lines "
                   "of '%s')" % (what, d.host_id, want, CONNECTED))


def errorstat(node, name):
    """How many error replies name (ASK, TRYAGAIN...) node gave."""
    v = node.info("errorstats").get("errorstat_" + name, "count=0")
    return int(v.split("=")[1].split(",")[0])


def heartbeats(c, hosts, timeout=10):
    """Every worker of every host is heard on the heartbeat channel (a
    keyless PUBLISH: each host sends it to one master, and the cluster
    bus carries it to the one subscribed to here)."""
    want = sum(len(d.workers_pids()) for d in hosts)
    m = c.masters()[-1]
    heard = set()
    with Resp(m.host, m.port, timeout=1) as r:
        r.s.sendall(Resp.encode(["SUBSCRIBE", "parley:nodes"]))
        r._read()
        deadline = time.time() + timeout
        while len(heard) < want and time.time() < deadline:
            try:
                msg = r._read()
            except (socket.timeout, OSError):
                continue
            if isinstance(msg, list) and msg[0] == b"message":
                heard.add(msg[2])
    check(len(heard) >= want, "heartbeats on a cluster: heard %d of the "
          "%d workers (%s) on %d in %ds" % (len(heard), want,
                                           sorted(heard), m.port, timeout))


def healthy(hosts, what, timeout=30):
    for d in hosts:
        wait_until(lambda: d.http("GET", "/health", timeout=2)[0] == 200,
                   timeout, "%s: %s's store to be healthy" % (what,
                                                             d.host_id))


async def test():
    global CL
    c = CL = RedisCluster(masters=3, replicas=1, node_timeout=1000)
    with c:
        h0 = Daemon(store=c.url(), host_id="h0", lease="2s")
        h1 = Daemon(store=c.url(), host_id="h1", lease="2s")
        hosts = [h0, h1]
        with with_daemon(h0), with_daemon(h1):
            per = sessions_per_master(c)
            sids = [v[0] for v in per.values()]
            # (1) every master, both hosts
            for i, sid in enumerate(sids):
                await turn(hosts[i % 2], sid, "hello", "first")
                await turn(hosts[(i + 1) % 2], sid, "again", "other host")
                agrees(c, hosts, sid, "first")
            print("three masters ok: %s" % {m.port: v for m, v in
                                           per.items()})
            heartbeats(c, hosts)
            print("heartbeats ok")

            # (2) ASK, then MOVED
            sid = sids[0]
            slot = c.keyslot("{%s}" % sid)
            src = c.master_for_slot(slot)
            dst = [m for m in c.masters() if m is not src][0]
            c.begin_migration(slot, dst)
            keys = src.cmd("CLUSTER", "GETKEYSINSLOT", slot, 100)
            check(keys, "no keys of %s in slot %d" % (sid, slot))
            src.cmd("MIGRATE", dst.host, dst.port, "", 0, 5000, "KEYS",
                    *keys)
            ask0 = errorstat(src, "ASK")
            try0 = errorstat(dst, "TRYAGAIN")
            # The turn's writes are scripts of several keys, some absent:
            # the new master answers TRYAGAIN while the slot moves, and
            # they wait until it has moved.
            task = asyncio.ensure_future(turn(h0, sid, "while moving",
                                              "ASK"))
            deadline = time.time() + 20
            while errorstat(dst, "TRYAGAIN") == try0:
                check(time.time() < deadline and not task.done(),
                      "the turn's writes met no TRYAGAIN on %d (ASK %d "
                      "-> %d): the test moved nothing" % (
                          dst.port, ask0, errorstat(src, "ASK")))
                await asyncio.sleep(0.05)
            check(errorstat(src, "ASK") > ask0, "no ASK from %d"
                  % src.port)
            n0 = connects(hosts)
            c.end_migration(slot, src, dst)
            await task
            await turn(h1, sid, "moved", "MOVED")
            await turn(h0, sid, "moved again", "MOVED")
            check(connects(hosts) == n0, "a host connected again after "
                  "MOVED between connected masters: %s -> %s"
                  % (n0, connects(hosts)))
            agrees(c, hosts, sid, "ASK/MOVED")
            print("ASK (%d), TRYAGAIN (%d) and MOVED ok" % (
                errorstat(src, "ASK") - ask0,
                errorstat(dst, "TRYAGAIN") - try0))

            # (3) CLUSTER FAILOVER of the master of sids[1]
            sid = sids[1]
            old = c.master_for_key("{%s}" % sid)
            rep = c.replicas_of(old)[0]
            n0 = connects(hosts)
            c.failover(rep)
            c.wait_ok()
            # The new master is not connected: the hosts notice (their
            # poll of the map, or MOVED) and connect again.
            reconnected(hosts, n0, "failover")
            check(c.master_for_key("{%s}" % sid) is rep, "no failover")
            healthy(hosts, "failover")
            await turn(h1, sid, "after failover", "failover")
            healthy(hosts, "failover")
            await turn(h0, sid, "after failover", "failover")
            agrees(c, hosts, sid, "CLUSTER FAILOVER")
            print("CLUSTER FAILOVER ok")

            # (4) a master SIGKILLed (idle, every write on its replica)
            sid = sids[2]
            m = c.master_for_key("{%s}" % sid)
            with m.client() as cl:
                check(cl.cmd("WAIT", 1, 5000) == 1, "WAIT: no replica")
            before = agrees(c, hosts, sid, "before the kill")
            t0 = time.time()
            n0 = connects(hosts)
            new = c.kill_master(m)
            print("master %d killed, %d promoted in %.1fs"
                  % (m.port, new.port, time.time() - t0))
            reconnected(hosts, n0, "kill")
            healthy(hosts, "kill")
            for d in hosts:
                await turn(d, sid, "after the kill", "kill")
            after = agrees(c, hosts, sid, "after the kill")
            check(after[:len(before)] == before, "the log before the kill "
                  "changed")
            for s2 in sids:
                await turn(h0, s2, "last", "end")
                agrees(c, hosts, s2, "end")
            print("master kill ok")


run_test("rcluster_store", test)

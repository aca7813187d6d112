"""No silent loss on a Redis failover (issue 21): the scenario shared by
t_redis_failover (Sentinel) and t_rcluster_failover (Redis Cluster).

parleyd on the topology's store url, a client streaming a long reply; the
replica of the master that holds the session is cut off (SIGSTOP, its
link killed on the master) so that the master's last events are not
replicated, then the master and the owning worker are SIGKILLed and the
replica is promoted.  The client resumes (lastSeq and epoch) until the
turn is done; its view must then be the log (GET /log) event for event.
(a) store-wait 1: the events the master could not replicate were never
    sent: everything the client saw is in the promoted replica's log, the
    same; where the topology can bring the old master back as the new
    one's replica (rejoin), the session goes on, and that part of the log
    is still the same at the end.
(b) no WAIT: the client saw events the promoted replica lacks (checked:
    the test cannot pass without cutting anything); the new owner starts
    an epoch after the replica's last seq, and the client's resume gets
    RESUME_GAP with it and `from`, drops what it had from there and is
    replayed the log's history; so does a client of a second host that
    followed the session (and SSE, with its ids).

The Redis side is a Topology (below); each test gives its own.
"""

import asyncio
import os
import signal
import time
from contextlib import nullcontext

from parley import (Daemon, Fail, check, check_contiguous, epoch_of,
                    is_done, is_idle, of_type, provider_block, resume_query,
                    same_events, short, sse_get, with_daemon, ws_connect,
                    ws_recv, ws_send, websockets)
from cluster import need_redis, redis_log, s, wait_until

LONG = "".join("chunk%03d " % i for i in range(400))


class Topology:
    """The Redis servers of a scenario, around t (a SentinelSet, a
    RedisCluster: start(), destroy(), url()).  A subclass says
    master_of(sid) (the node serving sid's keys), replica_of(master),
    synced(master) (waits until the replica holds every write) and
    promoted(master, replica) (waits until replica serves in master's
    place); reader(node) is a function sending one command to node, a
    replica too; rejoin(master) brings the old master back as the new
    one's replica (True), or cannot (False)."""

    def __init__(self, t):
        self.t = t

    def start(self):
        self.t.start()

    def destroy(self):
        self.t.destroy()

    def url(self):
        return self.t.url()

    def reader(self, node):
        return node.cmd

    def rejoin(self, master):
        return False


class Client:
    """A client's view of the session across reconnects: view[seq] is the
    event it holds for seq; events everything it received."""

    def __init__(self, d, sid):
        self.d, self.sid = d, sid
        self.view, self.events, self.gaps = {}, [], []
        self.ws = None

    def take(self, e):
        self.events.append(e)
        if e.get("type") == "error" and e.get("code") == "RESUME_GAP" \
                and "from" in e:
            self.gaps.append(e)
            for k in [k for k in self.view if k >= e["from"]]:
                del self.view[k]
        if "seq" in e and e.get("type") not in ("ack", "pong"):
            old = self.view.get(e["seq"])
            # The same seq twice with other content and no RESUME_GAP in
            # between: the silent loss this test is about.
            if old is not None and old != e:
                raise Fail("seq %d seen twice, differing: %s then %s"
                           % (e["seq"], old, e))
            self.view[e["seq"]] = e

    async def start(self, msg=None):
        """Sends msg on /chat, or (None) watches the session's stream
        from its start."""
        if msg is None:
            self.ws = await ws_connect(self.d.url(
                "/sessions/%s/stream?lastSeq=0" % self.sid))
            return
        self.ws = await ws_connect(self.d.url("/chat"))
        await ws_send(self.ws, {"v": 1, "type": "chat", "sessionId": self.sid,
                                "id": "c-1", "message": msg})

    async def until(self, pred, timeout=20):
        deadline = time.time() + timeout
        while not pred():
            check(time.time() < deadline, "timed out; view up to %s"
                  % max(self.view or [0]))
            self.take(await ws_recv(self.ws, max(0.1, deadline - time.time())))

    def last(self):
        return max(self.view) if self.view else 0

    async def drain(self, timeout=5):
        """Reads what the connection still holds until it closes (its
        worker was killed): everything the daemon sent counts as seen,
        read or not when it died."""
        deadline = time.time() + timeout
        try:
            while True:
                check(time.time() < deadline, "the connection stayed "
                      "open %ds after its worker was killed" % timeout)
                self.take(await ws_recv(self.ws, max(0.1, deadline -
                                                     time.time())))
        except (websockets.exceptions.ConnectionClosed, OSError):
            pass
        self.ws = None

    async def follow_to_done(self, patience=90):
        """Reads (resuming with lastSeq and epoch after every drop) until
        a done with seq, then idle."""
        deadline = time.time() + patience
        drops = []
        done = lambda: any(is_done(e) for e in self.view.values()) and \
            any(is_idle(e) and e["seq"] > max(k for k, v in self.view.items()
                                              if is_done(v))
                for e in self.view.values())
        while not done():
            try:
                if self.ws is None:
                    q = resume_query(self.last(), epoch_of(self.events))
                    self.ws = await ws_connect(self.d.url(
                        "/sessions/%s/stream?%s" % (self.sid, q)))
                while not done():
                    self.take(await ws_recv(self.ws, 15))
            except (websockets.exceptions.WebSocketException, OSError,
                    asyncio.TimeoutError) as e:
                drops.append("%s after %d" % (type(e).__name__, self.last()))
                self.ws = None
                check(time.time() < deadline, "no done: %s" % drops)
                await asyncio.sleep(0.3)
        if self.ws is not None:
            await self.ws.close()
        print("drops: %s" % drops, flush=True)

    def equals_log(self, what):
        log = self.d.log_events(self.sid)
        mine = [self.view[k] for k in sorted(self.view)]
        check_contiguous(mine, 1, "%s: the client's view" % what)
        check(len(log) >= len(mine), "%s: the log has %d events, the "
              "client %d" % (what, len(log), len(mine)))
        same_events(mine, log[:len(mine)], "%s: client vs GET /log" % what)
        for a, b in zip(mine, log):
            check(a == b, "%s: seq %d: client %s, log %s"
                  % (what, a["seq"], short(a), short(b)))
        return log


def meta_last(rcmd, sid):
    """The session's last seq in its meta hash, read with rcmd."""
    v = rcmd("HGET", "parley:{%s}:meta" % sid, "last")
    return int(v) if v is not None else 0


def same_prefix(mine, red, what):
    """Every event of mine (the client's, in seq order from 1) is in red
    (a log read from Redis), the same."""
    check(len(red) >= len(mine), "%s: the client saw seq %d, the log in "
          "Redis ends at %d" % (what, len(mine), len(red)))
    for a, b in zip(mine, red):
        check(a == b, "%s: seq %d: client %s, Redis %s"
              % (what, a["seq"], short(a), short(b)))


async def scenario(topo, wait):
    tag = "wait" if wait else "nowait"
    sid = "fo-" + tag
    try:
        topo.start()
        prov = provider_block("slow", LONG, chunk=8, delay="10ms")
        d = Daemon(providers=prov, default="slow", store=topo.url(),
                   host_id="fo", lease="2s", workers=1,
                   extra="store-wait 1 300ms\n" if wait else "")
        # (b) a second host follows the session: its client must be
        # told too (its follower read the lost events from the master).
        d2 = Daemon(providers=prov, default="slow", store=topo.url(),
                    host_id="fo2", lease="2s", workers=1) if not wait \
            else None
        with with_daemon(d), (with_daemon(d2) if d2 else nullcontext()):
            c = Client(d, sid)
            await c.start("go")
            await c.until(lambda: len(of_type(c.view.values(), "token")) >= 10)
            c2 = None
            if d2:
                c2 = Client(d2, sid)
                await c2.start()
                await c2.until(lambda: c2.last() >= c.last())
            master = topo.master_of(sid)
            replica = topo.replica_of(master)
            topo.synced(master)
            # The replica stops hearing the master: what it has buffered
            # it applies later; nothing after the kill reaches it.
            os.kill(replica.proc.pid, signal.SIGSTOP)
            try:
                master.cmd("CLIENT", "KILL", "TYPE", "replica")
                if wait:
                    # Appends land on the master only: WAIT fails them
                    # (300ms) and the session is let go unsent.  At
                    # least one lands after the cut (else nothing is at
                    # stake: the test would pass without store-wait).
                    cut = meta_last(master.cmd, sid)
                    wait_until(lambda: meta_last(master.cmd, sid) > cut, 3,
                               "an append on %s after its replica's link "
                               "was cut (seq %d)" % (tag, cut))
                    await asyncio.sleep(0.45)
                    held = meta_last(master.cmd, sid)
                else:
                    seen = c.last()
                    await c.until(lambda: c.last() >= seen + 5, timeout=5)
                    await c2.until(lambda: c2.last() >= seen + 5, timeout=3)
                master.kill()
                pids = d.workers_pids()
                for p in pids:
                    os.kill(p, signal.SIGKILL)
            finally:
                os.kill(replica.proc.pid, signal.SIGCONT)
            await c.drain()
            saw = c.last()
            rread = topo.reader(replica)
            wait_until(lambda: meta_last(rread, sid) > 0, 5,
                       "the replica to apply what it had")
            time.sleep(0.3)
            kept = meta_last(rread, sid)
            print("%s: the client saw up to %d, the replica holds %d%s"
                  % (tag, saw, kept, ", the master held %d" % held
                     if wait else ""), flush=True)
            topo.promoted(master, replica)
            if wait:
                # Nothing the client saw may be missing or different in
                # the promoted replica's log.
                red = [e for _, _, e in redis_log(rread, sid)]
                mine = [c.view[k] for k in sorted(c.view)]
                check_contiguous(mine, 1, "wait: the client's view")
                check(held > kept, "the master held nothing its replica "
                      "lacks (%d, %d): the test did not cut the replica "
                      "off" % (held, kept))
                check(saw <= kept, "store-wait 1: the client saw seq %d, "
                      "the promoted replica only has %d" % (saw, kept))
                same_prefix(mine, red, "wait: the promoted replica")
                # The session cannot go on until the promoted replica
                # has a replica (WAIT fails every write): where the old
                # master can come back as one, it does, and the turn
                # is re-run to its end.
                if topo.rejoin(master):
                    await c.follow_to_done()
                    log = c.equals_log(tag)
                    same_prefix(red, log, "wait: the log at the end vs "
                                "the promoted replica's")
                    check(any(is_done(e) for e in log), "%s: no done in "
                          "the log" % tag)
                check(not c.gaps, "store-wait 1: a rewrite was reported: %s"
                      % c.gaps)
                return
            await c.follow_to_done()
            log = c.equals_log(tag)
            # On the connection it had, if it is still open: the
            # follower host must cut it (or it would go on past the lost
            # events with the new history's).
            await c2.follow_to_done()
            c2.equals_log(tag + " (the follower host)")
            check(c2.gaps and c2.gaps[0].get("from") == kept + 1,
                  "the follower host's client saw up to %d and got no "
                  "RESUME_GAP from %d: %s" % (seen + 5, kept + 1, c2.gaps))
            ep = s(rread("HGET", "parley:{%s}:meta" % sid, "epochs") or b"")
            print("%s: epochs %r, gaps %s" % (tag, ep, c.gaps), flush=True)
            check(saw > kept, "the failover lost nothing (the client "
                  "saw %d, the replica has %d): the test did not cut "
                  "the replica off" % (saw, kept))
            check(len(c.gaps) >= 1, "no RESUME_GAP after the client "
                  "saw %d and the log was rewritten from %d"
                  % (saw, kept + 1))
            g = c.gaps[0]
            check(g.get("from") == kept + 1 and g.get("epoch") and
                  g["epoch"] in ep and g.get("oldestSeq") == 1,
                  "RESUME_GAP %s; want from %d and the log's epoch "
                  "(%s)" % (g, kept + 1, ep))
            st = of_type(c.events, "session_state")[-1]
            check(st.get("epoch") == g["epoch"], "session_state "
                  "epoch %r, RESUME_GAP's %r" % (st.get("epoch"),
                                                 g["epoch"]))
            check(any(is_done(e) for e in log), "%s: no done in the log"
                  % tag)
            # SSE: ids carry the epoch; Last-Event-ID without it is stale,
            # with it current.
            ev = sse_get(d, sid, "%d" % (kept + 3))
            check(len(ev) > 3 and ev[0][1]["type"] == "session_state" and
                  ev[1][1].get("code") == "RESUME_GAP" and
                  ev[1][1].get("from") == kept + 1 and
                  ev[2][0] == "%d.%s" % (kept + 1, g["epoch"]),
                  "SSE after %d, no epoch: %s" % (kept + 3, ev[:3]))
            ev = sse_get(d, sid, "%d.%s" % (kept + 3, g["epoch"]))
            check(len(ev) > 2 and ev[0][1]["type"] == "session_state" and
                  ev[1][0] == "%d.%s" % (kept + 4, g["epoch"]),
                  "SSE after %d.%s: %s" % (kept + 3, g["epoch"], ev[:2]))
    finally:
        topo.destroy()


async def both(topology):
    """(a) then (b), each on a new topology() (a Topology class)."""
    need_redis()
    print("-- (a) store-wait 1", flush=True)
    await scenario(topology(), True)
    print("-- (b) no WAIT: epoch and RESUME_GAP", flush=True)
    await scenario(topology(), False)

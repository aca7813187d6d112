#!/usr/bin/python3
# No silent loss on a Redis failover (issue 21): parleyd on sentinel://
# (master, replica, 3 sentinels), a client streaming a long reply; the
# replica is cut off (SIGSTOP, its link killed on the master) so that the
# master's last events are not replicated, then the master and the owning
# worker are SIGKILLed and Sentinel promotes the replica.  The client
# resumes (lastSeq and epoch) until the turn is done (b); its view must
# then be the log (GET /log) event for event.
# (a) store-wait 1: the events the master could not replicate were never
#     sent: everything the client saw is in the promoted replica's log, the
#     same (the session then waits for a replica: WAIT fails its writes).
# (b) no WAIT: the client saw events the promoted replica lacks (checked);
#     the new owner starts an epoch after the replica's last seq, and the
#     client's resume gets RESUME_GAP with it and `from`, drops what it had
#     from there and is replayed the log's history; so does a client of a
#     second host that followed the session (and SSE, with its ids).
import sys, os, signal, time, asyncio, json, subprocess
from contextlib import nullcontext
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import *

LONG = "".join("chunk%03d " % i for i in range(400))


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


def sse_get(d, sid, last_event_id):
    """GET /events with Last-Event-ID for 2 s: [(id line, event)]."""
    out = subprocess.run(["curl", "-s", "-N", "-m", "2", "-H",
                          "Last-Event-ID: " + last_event_id,
                          d.url("/sessions/%s/events" % sid, "http")],
                         capture_output=True, text=True).stdout
    evs = []
    for block in out.split("\n\n"):
        lines = block.split("\n")
        i = [l[4:] for l in lines if l.startswith("id: ")]
        data = "".join(l[6:] for l in lines if l.startswith("data: "))
        if data:
            evs.append((i[0] if i else None, json.loads(data)))
    return evs


def meta_last(red, sid):
    v = red.cmd("HGET", "parley:{%s}:meta" % sid, "last")
    return int(v) if v is not None else 0


async def scenario(wait):
    tag = "wait" if wait else "nowait"
    sid = "fo-" + tag
    ss = SentinelSet("127.0.0.1", n=3)
    try:
        ss.start()
        prov = provider_block("slow", LONG, chunk=8, delay="10ms")
        d = Daemon(providers=prov, default="slow", store=ss.url(),
                   host_id="fo", lease="2s", workers=1,
                   extra="store-wait 1 300ms\n" if wait else "")
        # (b) a second host follows the session: its client must be
        # told too (its follower read the lost events from the master).
        d2 = Daemon(providers=prov, default="slow", store=ss.url(),
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
            ss.wait_synced()
            # The replica stops hearing the master: what it has buffered
            # it applies later; nothing after the kill reaches it.
            os.kill(ss.replica.proc.pid, signal.SIGSTOP)
            try:
                ss.master.cmd("CLIENT", "KILL", "TYPE", "replica")
                if wait:
                    # Appends land on the master only: WAIT fails them
                    # (300ms) and the session is let go unsent.
                    await asyncio.sleep(0.45)
                else:
                    seen = c.last()
                    await c.until(lambda: c.last() >= seen + 5, timeout=5)
                    await c2.until(lambda: c2.last() >= seen + 5, timeout=3)
                ss.master.kill()
                pids = d.workers_pids()
                for p in pids:
                    os.kill(p, signal.SIGKILL)
            finally:
                os.kill(ss.replica.proc.pid, signal.SIGCONT)
            saw = c.last()
            wait_until(lambda: meta_last(ss.replica, sid) > 0, 5,
                       "the replica to apply what it had")
            time.sleep(0.3)
            kept = meta_last(ss.replica, sid)
            print("%s: the client saw up to %d, the replica holds %d"
                  % (tag, saw, kept), flush=True)
            wait_until(lambda: all(ss.master_addr(sv) == (ss.ip,
                                                          ss.replica.port)
                                   for sv in ss.sentinels), 30,
                       "the sentinels to promote the replica")
            if wait:
                # Nothing the client saw may be missing or different in
                # the promoted replica's log.  (The session cannot go on:
                # with its one replica gone, WAIT fails every write until
                # another replica joins.)
                red = [e for _, _, e in redis_log(ss.replica.cmd, sid)]
                mine = [c.view[k] for k in sorted(c.view)]
                check_contiguous(mine, 1, "wait: the client's view")
                check(saw <= kept and len(red) >= len(mine),
                      "store-wait 1: the client saw seq %d, the promoted "
                      "replica only has %d" % (saw, kept))
                for a, b in zip(mine, red):
                    check(a == b, "wait: seq %d: client %s, Redis %s"
                          % (a["seq"], short(a), short(b)))
                check(not c.gaps, "store-wait 1: a rewrite was reported: %s"
                      % c.gaps)
                return
            c.ws = None
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
            ep = s(ss.replica.cmd("HGET", "parley:{%s}:meta" % sid,
                                  "epochs") or b"")
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
        ss.destroy()


async def test():
    need_redis()
    print("-- (a) store-wait 1", flush=True)
    await scenario(True)
    print("-- (b) no WAIT: epoch and RESUME_GAP", flush=True)
    await scenario(False)

run_test("redis_failover", test)

#!/usr/bin/python3
# Chaos on a 3-host cluster sharing one Redis (store redis://, lease 2s):
# several WebSocket clients follow several sessions, each through a random
# host, resuming with their lastSeq whenever their connection drops, while
# every round does one random thing: a chat POSTed through a random host,
# a chat sent on a client's WebSocket (to whatever host it is on), a worker
# SIGKILLed, a whole host killed and restarted a few rounds later (a crash,
# where nothing of it runs on, or its supervisor SIGKILLed first, so that
# its workers see that and stop on their own), a host's network cut and
# restored a few rounds later (not with --local), a client's connection
# dropped.  Each client checks every event as it arrives (seq = its last
# + 1: no gap, no duplicate, no reordering); at every checkpoint and at the
# end (all hosts up, every turn ended) each client's view of its session
# must be the log read from Redis (XRANGE parley:{ID}:log) event for event,
# every chat a host accepted must be logged exactly once, and no chat twice.
# Every turn calls a client-side tool (ide__write, high risk, so asked
# about); one session has it registered (mcp_tools), the others answer the
# model "no such tool".  In that session each call waits for an approval
# and then for the client's mcp_result, both given (and repeated) by the
# "answer" action through random hosts while hosts and workers die: each
# call must be asked once, decided once, asked of the client once and
# answered once.
# A violation prints the last actions and, next to the log, what the client
# saw around it and from which host and connection.
#
#   t_chaos.py [--rounds N] [--seed S] [--checkpoint K]
#   (or CHAOS_ROUNDS, CHAOS_SEED); default 500 rounds, a checkpoint every
#   100.  Prints the rounds run and the events checked.
#   --local runs the same against one parleyd on the local store (the log
#   read with GET /log): a check of the harness without Redis.
import sys, os, argparse, random, collections
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import *

# ~20 chunks of 8 bytes 5 ms apart: a turn takes ~0.1 s, so kills and cuts
# often land in the middle of one
REPLY = "chaos reply %s." % ("0123456789" * 15)
N_HOSTS = 3
N_SESSIONS = 4
N_CLIENTS = 6
MAX_PENDING = 6             # accepted chats not yet logged, per session
TOOL = "ide__write"
# Every turn asks for TOOL, then streams REPLY.
TOOL_REPLY = "@tool " + json.dumps({"calls": [{"name": TOOL, "arguments":
                                               {"n": 1}}], "then": REPLY},
                                   separators=(",", ":"))


class Client:
    def __init__(self, k, sid, cx):
        self.k = k
        self.sid = sid
        self.cx = cx
        self.view = []          # logged events, from seq 1
        self.srcs = []          # for each: "h<host>#<connection number>"
        self.ws = None
        self.host = None
        self.connects = 0
        self.task = None
        self.stop = False

    def last(self):
        return self.view[-1]["seq"] if self.view else 0

    async def run(self):
        while not self.stop:
            up = self.cx.up_hosts()
            if not up:
                await asyncio.sleep(0.1)
                continue
            d = random.choice(up)
            self.host = d.index
            try:
                asked = self.last()
                t_conn = time.time()
                self.ws = await ws_connect(d.url(
                    "/sessions/%s/stream?lastSeq=%d" % (self.sid, asked)))
                self.connects += 1
                on_conn = []
                while not self.stop:
                    e = await ws_recv(self.ws, 3600)
                    if e.get("type") == "ack":
                        self.cx.acked(self.sid, e)
                        continue
                    if "seq" not in e or e.get("type") == "pong":
                        continue
                    if e["seq"] != self.last() + 1:
                        self.cx.violation(
                            "client %d (%s via h%d): seq %d after %d (%s); "
                            "this connection (lastSeq=%d, opened %.2fs "
                            "before, %s) had delivered %s; the event: %s"
                            % (self.k, self.sid, d.index, e["seq"],
                               self.last(), "duplicate or reordered"
                               if e["seq"] <= self.last() else "gap",
                               asked, time.time() - t_conn,
                               time.strftime("%H:%M:%S", time.localtime(
                                   t_conn)),
                               [short(x) for x in on_conn[-6:]],
                               json.dumps(e)[:300]),
                            (self.sid, self, min(e["seq"], self.last())))
                        return
                    on_conn.append(e)
                    self.view.append(e)
                    self.srcs.append("h%d#%d" % (d.index, self.connects))
            except asyncio.CancelledError:
                raise
            except Exception:
                pass
            finally:
                ws, self.ws = self.ws, None
                if ws is not None:
                    try:
                        await asyncio.wait_for(ws.close(), 2)
                    except Exception:
                        pass
            await asyncio.sleep(random.uniform(0.02, 0.15))

    async def drop(self):
        ws = self.ws
        if ws is not None:
            try:
                await asyncio.wait_for(ws.close(), 2)
            except Exception:
                pass


class Chaos:
    def __init__(self, c, rounds, every):
        self.c = c
        self.rounds = rounds
        self.every = every
        self.down = {}              # host index -> round to restart it
        self.cut = {}               # host index -> round to restore it
        self.sessions = ["cx-%d" % i for i in range(N_SESSIONS)]
        self.accepted = {s: set() for s in self.sessions}
        self.maybe = {s: set() for s in self.sessions}
        self.clients = [Client(k, self.sessions[k % N_SESSIONS], self)
                        for k in range(N_CLIENTS)]
        self.violations = []
        self.stats = dict(chats=0, ws_chats=0, refused=0, unknown=0,
                          worker_kills=0, host_kills=0, cuts=0, drops=0,
                          idle=0, answers=0)
        self.asking = self.sessions[0]   # has TOOL registered
        self.local = isinstance(c, LocalCluster)
        self.trace = collections.deque(maxlen=60)   # the last actions
        self.t0 = time.time()
        self.rnd = 0
        self.checked = 0
        self.checkpoints = 0
        self.where = []             # (sid, client, seq) of each violation

    def note(self, what):
        self.trace.append("%7.2fs r%d %s" % (time.time() - self.t0,
                                             self.rnd, what))

    def up_hosts(self):
        return [d for d in self.c.hosts if d.index not in self.down and
                d.index not in self.cut]

    def violation(self, msg, where=None):
        self.note("VIOLATION " + msg[:120])
        self.violations.append(msg)
        if where:
            self.where.append(where)
        print("VIOLATION: %s" % msg, flush=True)

    def check_violations(self):
        check(not self.violations, self.violations[0] if self.violations
              else "")

    # actions

    def seen_ids(self, sid):
        ids = set()
        for cl in self.clients:
            if cl.sid == sid:
                ids.update(e.get("id") for e in cl.view
                           if e["type"] == "user_message")
        return ids

    async def chat(self, rnd):
        if not self.up_hosts():
            return
        sid = random.choice(self.sessions)
        if len(self.accepted[sid] - self.seen_ids(sid)) >= MAX_PENDING:
            self.stats["idle"] += 1
            return
        d = random.choice(self.up_hosts())
        mid = "r%d" % rnd
        body = {"v": 1, "type": "chat", "id": mid, "message": "round %d" % rnd}
        try:
            st, _, data = await asyncio.to_thread(
                d.http, "POST", "/sessions/%s/messages" % sid, body, None, 5)
        except Exception:
            st, data = None, b""
        self.note("chat %s %s via h%d -> %s" % (sid, mid, d.index, st))
        if st in (200, 202):
            self.accepted[sid].add(mid)
            self.stats["chats"] += 1
        elif st in (429, 503):
            self.stats["refused"] += 1
        elif st is None or st >= 500:
            self.maybe[sid].add(mid)
            self.stats["unknown"] += 1
        else:
            raise Fail("POST chat on h%d -> %s %r" % (d.index, st, data[:200]))

    async def post(self, sid, body):
        """POSTs body to sid through a random host; the status, or None."""
        if not self.up_hosts():
            return None
        d = random.choice(self.up_hosts())
        try:
            st, _, _ = await asyncio.to_thread(
                d.http, "POST", "/sessions/%s/messages" % sid,
                dict(body, v=1), None, 5)
        except Exception:
            st = None
        self.note("%s %s via h%d -> %s" % (body["type"],
                                          body.get("toolCallId"), d.index,
                                          st))
        return st

    async def answer(self):
        """Approves the asking session's pending requests and answers its
        pending client calls, as read from the log (perhaps again: a
        repeat must change nothing)."""
        if not self.up_hosts():
            return
        try:
            log = self.c.log_events(self.asking)
        except TRANSIENT:
            return              # --local: its one host is down
        done = lambda t: {e.get("toolCallId") for e in log if e["type"] == t}
        for cid in done("tool_approve_request") - done("audit_entry"):
            st = await self.post(self.asking, {
                "type": "tool_approve", "toolCallId": cid,
                "decision": "approve"})
            self.stats["answers"] += st in (200, 202)
        for cid in done("mcp_call") - done("tool_result"):
            st = await self.post(self.asking, {
                "type": "mcp_result", "toolCallId": cid,
                "result": "written " + cid})
            self.stats["answers"] += st in (200, 202)

    def check_asked(self, rnd, log):
        """Each call of the asking session: asked once, decided once, and
        if started, asked of the client once and answered once."""
        calls = collections.defaultdict(collections.Counter)
        for e in log:
            if e.get("toolCallId") and e["type"] in (
                    "tool_approve_request", "audit_entry", "tool_start",
                    "mcp_call", "tool_result"):
                calls[e["toolCallId"]][e["type"]] += 1
        for cid, n in list(calls.items()):
            if not n["tool_approve_request"] and not n["mcp_call"]:
                del calls[cid]  # the init turn's, before TOOL was there
                continue
            # A turn reported failed (interrupted three times) closes its
            # requests "cancelled": then nothing follows the audit_entry.
            ok = (all(k == 1 for k in n.values()) and
                  n["tool_approve_request"] == n["audit_entry"] == 1 and
                  n["tool_start"] == n["mcp_call"] == n["tool_result"])
            check(ok, "checkpoint %d: call %s of %s: %s" %
                  (rnd, cid, self.asking, dict(n)))
        return len(calls)

    def acked(self, sid, e):
        mid = e.get("id")
        if mid in self.maybe[sid]:
            self.maybe[sid].discard(mid)
            self.accepted[sid].add(mid)
            self.stats["ws_chats"] += 1

    async def ws_chat(self, rnd):
        cl = random.choice(self.clients)
        ws = cl.ws
        sid = cl.sid
        if ws is None or len(self.accepted[sid] - self.seen_ids(sid)) >= \
                MAX_PENDING:
            self.stats["idle"] += 1
            return
        mid = "w%d" % rnd
        self.note("ws chat %s %s on client %d (h%s)" % (sid, mid, cl.k,
                                                        cl.host))
        self.maybe[sid].add(mid)    # accepted once acked
        try:
            await asyncio.wait_for(ws_send(ws, {
                "v": 1, "type": "chat", "sessionId": sid, "id": mid,
                "message": "round %d" % rnd}), 2)
        except Exception:
            pass

    def cut_host(self, rnd):
        if self.local or self.down or self.cut:
            return
        d = random.choice(self.up_hosts())
        self.c.net.cut(d.index)
        self.cut[d.index] = rnd + random.randint(5, 40)
        self.note("cut h%d until r%d" % (d.index, self.cut[d.index]))
        self.stats["cuts"] += 1

    def restore_due(self, rnd, all_now=False):
        for i, when in list(self.cut.items()):
            if all_now or rnd >= when:
                self.c.net.restore(i)
                del self.cut[i]
                self.note("restored h%d" % i)

    def kill_worker(self):
        if not self.up_hosts():
            return
        d = random.choice(self.up_hosts())
        pids = d.workers_pids()
        if pids:
            p = random.choice(pids)
            self.note("kill worker %d of h%d" % (p, d.index))
            kill_pid(p)
            self.stats["worker_kills"] += 1

    def kill_host(self, rnd):
        if self.down or len(self.up_hosts()) < min(2, len(self.c.hosts)):
            return
        d = random.choice(self.up_hosts())
        if random.random() < 0.5:
            # a crash: nothing of the host runs another instruction
            self.note("crash h%d" % d.index)
            d.crash()
        else:
            # the supervisor dies first: the workers see their channel
            # close and stop on their own (releasing what they hold)
            self.note("kill h%d (supervisor first)" % d.index)
            d.kill_all()
        self.down[d.index] = rnd + random.randint(3, 15)
        self.stats["host_kills"] += 1

    def restart_due(self, rnd, all_now=False):
        for i, when in list(self.down.items()):
            if all_now or rnd >= when:
                t = time.time()
                self.c.start_host(self.c.hosts[i])
                del self.down[i]
                self.note("restarted h%d in %.2fs" % (i, time.time() - t))

    async def drop(self):
        cl = random.choice(self.clients)
        self.note("drop client %d (%s on h%s)" % (cl.k, cl.sid, cl.host))
        await cl.drop()
        self.stats["drops"] += 1

    async def round(self, rnd):
        self.restart_due(rnd)
        self.restore_due(rnd)
        x = random.random()
        if x < 0.35:
            await self.chat(rnd)
        elif x < 0.45:
            await self.ws_chat(rnd)
        elif x < 0.63:
            await self.drop()
        elif x < 0.75:
            self.kill_worker()
        elif x < 0.79:
            self.kill_host(rnd)
        elif x < 0.82:
            self.cut_host(rnd)
        elif x < 0.92:
            await self.answer()
        await asyncio.sleep(random.uniform(0.03, 0.12))

    # checks

    def turns_open(self, log):
        """user_messages of log whose turn has not ended."""
        return [u for u in log if u["type"] == "user_message" and not any(
            ends_turn(e, "m-%d" % u["seq"]) for e in log)]

    async def checkpoint(self, rnd, timeout=60):
        self.restart_due(rnd, all_now=True)
        self.restore_due(rnd, all_now=True)
        self.check_violations()
        deadline = time.time() + timeout
        while True:
            why = []
            logs = {}
            for sid in self.sessions:
                log = self.c.log_events(sid)
                logs[sid] = log
                ids = [e.get("id") for e in log if e["type"] == "user_message"]
                missing = self.accepted[sid] - set(ids)
                if missing:
                    why.append("%s: accepted chats not logged: %s"
                               % (sid, sorted(missing)[:5]))
                op = self.turns_open(log)
                if op:
                    why.append("%s: turns not ended: %s"
                               % (sid, ["m-%d" % u["seq"] for u in op[:5]]))
                for cl in self.clients:
                    if cl.sid == sid and cl.last() != (log[-1]["seq"]
                                                       if log else 0):
                        why.append("client %d at seq %d of %s, the log "
                                   "ends at %s (connected to h%s: %s)"
                                   % (cl.k, cl.last(), sid, log[-1]["seq"]
                                      if log else 0, cl.host,
                                      cl.ws is not None))
            self.check_violations()
            if not why:
                break
            await self.answer()
            if time.time() > deadline:
                print("the asking session's log ends: %s" % [
                    (e["seq"], e["type"], e.get("toolCallId") or
                     e.get("messageId") or e.get("status"))
                    for e in logs[self.asking][-25:]], flush=True)
                raise Fail("checkpoint after round %d: not quiet after %ds: "
                           "%s" % (rnd, timeout, "; ".join(why[:6])))
            await asyncio.sleep(0.2)
        self.stats["calls"] = self.check_asked(rnd, logs[self.asking])
        for sid, log in logs.items():
            check_contiguous(log, 1, "checkpoint %d: Redis log of %s"
                             % (rnd, sid))
            meta_last = self.c.meta(sid).get("last")
            check(meta_last is not None and int(meta_last) == log[-1]["seq"],
                  "checkpoint %d: %s meta last %s, log ends at %d"
                  % (rnd, sid, meta_last, log[-1]["seq"]))
            ids = [e.get("id") for e in log if e["type"] == "user_message"]
            dup = sorted(set(i for i in ids if ids.count(i) > 1))
            check(not dup, "checkpoint %d: %s: chats logged twice: %s"
                  % (rnd, sid, dup[:5]))
            stray = set(ids) - self.accepted[sid] - self.maybe[sid] - {"init"}
            check(not stray, "checkpoint %d: %s: chats logged that were never "
                  "sent: %s" % (rnd, sid, sorted(stray)[:5]))
            for cl in self.clients:
                if cl.sid != sid:
                    continue
                for a, b in zip(cl.view, log):
                    if a != b:
                        raise Fail("checkpoint %d: client %d of %s: seq %s "
                                   "differs from the log: %s vs %s"
                                   % (rnd, cl.k, sid, a.get("seq"), a, b))
                check(len(cl.view) == len(log), "checkpoint %d: client %d of "
                      "%s has %d events, the log %d" % (rnd, cl.k, sid,
                                                        len(cl.view), len(log)))
                self.checked += len(cl.view)
        self.checkpoints += 1
        print("checkpoint after round %d: %s; log lengths %s; %d events "
              "checked so far" % (rnd, self.stats, [len(logs[s]) for s in
                                                   self.sessions],
                                  self.checked), flush=True)

    def explain(self):
        """For each violation: what the client saw around it (and from
        which host and connection) next to the log as it is now."""
        for sid, cl, seq in self.where[:3]:
            try:
                log = {e["seq"]: e for e in self.c.log_events(sid)}
            except Exception as e:
                print("cannot read the log of %s: %s" % (sid, e))
                log = {}
            print("%s around seq %d: client %d's view | the log now" %
                  (sid, seq, cl.k))
            lo = max(1, seq - 3)
            hi = cl.last() + 2
            for q in range(lo, hi + 1):
                i = q - 1
                mine = cl.view[i] if 0 <= i < len(cl.view) else None
                print("  %4d  %-52s | %s" % (
                    q, "%s from %s" % (brief(mine), cl.srcs[i])
                    if mine else "-", brief(log.get(q))))

    async def run(self):
        # create the sessions, then start the clients
        for i, sid in enumerate(self.sessions):
            await turn(self.c.hosts[i % N_HOSTS], sid, 0, "init", patience=30)
        while await self.post(self.asking, {
                "type": "mcp_tools", "id": "tools",
                "tools": [{"server": "ide", "name": "write"}]}) != 202:
            await asyncio.sleep(0.2)
        for cl in self.clients:
            cl.task = asyncio.ensure_future(cl.run())
        t0 = time.time()
        try:
            for rnd in range(1, self.rounds + 1):
                self.rnd = rnd
                await self.round(rnd)
                self.check_violations()
                if rnd % self.every == 0 or rnd == self.rounds:
                    await self.checkpoint(rnd)
        except BaseException:
            print("the last actions:\n  " + "\n  ".join(self.trace),
                  flush=True)
            self.explain()
            raise
        finally:
            for cl in self.clients:
                cl.stop = True
                if cl.task:
                    cl.task.cancel()
            await asyncio.gather(*[cl.task for cl in self.clients if cl.task],
                                 return_exceptions=True)
        print("chaos: %d rounds in %.0fs, %d checkpoints, %d events checked "
              "(%d distinct client events at the end), %s, client connects "
              "%s" % (self.rounds, time.time() - t0, self.checkpoints,
                      self.checked, sum(len(cl.view) for cl in self.clients),
                      self.stats, [cl.connects for cl in self.clients]),
              flush=True)


def args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int,
                    default=int(os.environ.get("CHAOS_ROUNDS", "500")))
    ap.add_argument("--seed", type=int,
                    default=int(os.environ.get("CHAOS_SEED", "0")) or None)
    ap.add_argument("--checkpoint", type=int, default=100,
                    help="rounds between checkpoints")
    ap.add_argument("--local", action="store_true",
                    help="one parleyd on the local store, no Redis")
    return ap.parse_args()


A = args()


def brief(e):
    if not e:
        return "-"
    what = e.get("id") or e.get("messageId") or e.get("status") or ""
    return "%s %s %s %s" % (e.get("type"), what, e.get("ts", "")[11:23],
                            (e.get("content") or "")[:8])


class LocalCluster:
    """The little of Cluster that Chaos uses, for one local-store parleyd."""

    def __init__(self, d):
        d.index = 0
        self.hosts = [d]

    def log_events(self, sid):
        return self.hosts[0].log_events(sid)

    def meta(self, sid):
        return {"last": str(self.hosts[0].last_seq(sid))}

    def start_host(self, d):
        d.start()


async def local_main():
    global N_HOSTS
    N_HOSTS = 1
    seed = A.seed or random.randrange(1, 1 << 30)
    random.seed(seed)
    print("chaos --local: %d rounds, seed %d" % (A.rounds, seed), flush=True)
    d = Daemon(providers=provider_block("fast", TOOL_REPLY, chunk=8,
                                        delay="2ms"))
    with with_daemon(d):
        await Chaos(LocalCluster(d), A.rounds, max(1, A.checkpoint)).run()


async def main():
    if A.local:
        return await local_main()
    why = netns_available()
    if why:
        skip(why)
    need_redis()
    seed = A.seed or random.randrange(1, 1 << 30)
    random.seed(seed)
    print("chaos: %d rounds, seed %d (CHAOS_SEED=%d to repeat)"
          % (A.rounds, seed, seed), flush=True)
    with Cluster(N_HOSTS, lease="2s", workers=2,
                 providers=script_provider("fast", TOOL_REPLY, chunk=8,
                                           delay="2ms"),
                 default="fast") as c:
        await Chaos(c, A.rounds, max(1, A.checkpoint)).run()

def test():
    # not a coroutine: run_test would bound it to 180 s; the run script's
    # timeout (CHAOS_TIMEOUT) bounds it instead
    asyncio.run(main())

run_test("chaos", test)

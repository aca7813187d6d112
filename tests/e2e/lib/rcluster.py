"""A Redis Cluster on loopback for the Redis store's cluster mode.

RedisCluster(masters=3, replicas=1).start() starts 2 x 3 redis-servers
(--cluster-enabled yes, 127.0.0.1, free ports for clients and for the
cluster bus), joins them with `redis-cli --cluster create ...
--cluster-replicas 1 --cluster-yes` and waits (bounded) until every node
says cluster_state:ok, knows every node, sees all 16384 slots assigned,
and every replica's link to its master is up.

    c = RedisCluster().start()
    c.url()                     # cluster://127.0.0.1:P0,...
    c.masters(), c.replicas_of(m), c.master_for_key(k)
    c.cmd(key, *args)           # sent to the key's master (MOVED followed)
    new = c.kill_master(m)      # SIGKILL; returns the promoted replica
    c.restart(m)                # back, as a replica of whoever took over
    c.destroy()

Every node's directory is under one directory of the cluster,
/tmp/parley-e2e-rcluster-PID-XXXX/nN (AOF, nodes.conf, redis.log).
Everything is stopped at exit, also on a failure or a signal (cluster.py's
at_cleanup); the servers die with the test (PR_SET_PDEATHSIG), and what a
SIGKILLed run left behind is removed by the next start() (the directory's
PID no longer runs).

cluster-node-timeout is node_timeout ms (default 1000): a killed master is
seen failed and its replica promoted in about 2-4 s.
"""

import os
import re
import shutil
import subprocess
import tempfile
import time

from parley import Fail, check, free_port
from cluster import (REDIS_CLI, RedisServer, RespError, at_cleanup,
                     cancel_cleanup, info_fields, kill_pid, need_redis,
                     pid_is_ours, resp_once, s, wait_until)

DIR_RE = re.compile(r"^parley-e2e-rcluster-(\d+)-")
SLOTS = 16384


def cleanup_stale(verbose=True):
    """Removes the cluster directories of runs that no longer exist and
    kills the redis-servers still running from them."""
    removed = []
    for d in os.listdir("/tmp"):
        m = DIR_RE.match(d)
        if not m or pid_is_ours(int(m.group(1))):
            continue
        path = os.path.join("/tmp", d)
        for sub in sorted(os.listdir(path)) if os.path.isdir(path) else []:
            try:
                with open(os.path.join(path, sub, "redis.pid")) as f:
                    rp = int(f.read().strip())
                with open("/proc/%d/cmdline" % rp, "rb") as f:
                    cmd = f.read()
                if b"redis-server" in cmd:
                    kill_pid(rp)
                    removed.append("redis-server %d" % rp)
            except (OSError, ValueError):
                pass
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    if removed and verbose:
        print("removed stale: %s" % " ".join(removed), flush=True)
    return removed


class Node(RedisServer):
    """One cluster node: a RedisServer with a cluster bus port."""

    def __init__(self, dir, node_timeout, fsync_always, extra=(),
                 ip="127.0.0.1"):
        self.bus_port = free_port()
        super().__init__(dir=dir, fsync_always=fsync_always, bind=(ip,),
                         extra=[
            "cluster-enabled yes",
            "cluster-config-file nodes.conf",
            "cluster-node-timeout %d" % node_timeout,
            "cluster-port %d" % self.bus_port,
        ] + list(extra))
        self.node_id = None

    def new_ports(self):
        RedisServer.new_ports(self)
        old = "cluster-port %d" % self.bus_port
        self.bus_port = free_port()
        self.extra = [("cluster-port %d" % self.bus_port) if x == old else x
                      for x in self.extra]

    def addr(self):
        return "%s:%d" % (self.host, self.port)

    def info(self, section):
        return info_fields(self.cmd("INFO", section))

    def cluster_info(self):
        return info_fields(self.cmd("CLUSTER", "INFO"))

    def read(self, *args):
        """A read on this node even when it is a replica (READONLY)."""
        with self.client() as c:
            c.cmd("READONLY")
            return c.cmd(*args)

    def role(self):
        """"master" or "slave" (ROLE's first field)."""
        return s(self.cmd("ROLE")[0])


def parse_nodes(text):
    """CLUSTER NODES -> {id: dict(addr, port, flags, master, slots)}."""
    out = {}
    for ln in s(text).splitlines():
        f = ln.split()
        if len(f) < 8:
            continue
        hostport = f[1].split("@")[0]
        out[f[0]] = dict(id=f[0], addr=hostport,
                         port=int(hostport.rsplit(":", 1)[1]),
                         flags=set(f[2].split(",")),
                         master=None if f[3] == "-" else f[3],
                         link=f[7], slots=f[8:])
    return out


class RedisCluster:
    def __init__(self, masters=3, replicas=1, node_timeout=1000,
                 fsync_always=True, full_coverage=True, extra=(),
                 ip="127.0.0.1"):
        need_redis()
        check(ip not in ("0.0.0.0", "::"), "never bind %s" % ip)
        self.ip = ip
        check(masters >= 3, "Redis Cluster needs 3 masters or more")
        self.nmasters = masters
        self.nreplicas = replicas
        self.node_timeout = node_timeout
        self.fsync_always = fsync_always
        self.extra = list(extra)
        if not full_coverage:
            self.extra.append("cluster-require-full-coverage no")
        self.dir = None
        self.nodes = []
        self._cleanup = None

    # -- set up / tear down

    def start(self, timeout=60):
        cleanup_stale()
        self.dir = tempfile.mkdtemp(
            prefix="parley-e2e-rcluster-%d-" % os.getpid(), dir="/tmp")
        self._cleanup = at_cleanup(self.destroy)
        try:
            n = self.nmasters * (1 + self.nreplicas)
            for i in range(n):
                sub = os.path.join(self.dir, "n%d" % i)
                os.mkdir(sub)
                self.nodes.append(Node(sub, self.node_timeout,
                                       self.fsync_always, self.extra,
                                       self.ip))
            for nd in self.nodes:
                nd.start()
                nd.node_id = s(nd.cmd("CLUSTER", "MYID"))
            argv = [REDIS_CLI, "--cluster", "create"] + \
                [nd.addr() for nd in self.nodes] + \
                ["--cluster-replicas", str(self.nreplicas), "--cluster-yes"]
            r = subprocess.run(argv, capture_output=True, text=True,
                               timeout=timeout)
            if r.returncode != 0 or "[OK] All 16384 slots covered" \
                    not in r.stdout:
                raise Fail("redis-cli --cluster create failed (%d): %s %s"
                           % (r.returncode, r.stdout[-800:], r.stderr[-400:]))
            self.wait_ok(timeout)
        except BaseException:
            self.dump()
            self.destroy()
            raise
        return self

    def destroy(self):
        for nd in self.nodes:
            nd.destroy()
        if self._cleanup is not None:
            cancel_cleanup(self._cleanup)
            self._cleanup = None
        if self.dir and not os.environ.get("E2E_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, et, ev, tb):
        if et is not None:
            self.dump()
        self.destroy()
        return False

    def dump(self, n=8):
        for nd in self.nodes:
            print("--- redis node %d (%s) log tail:\n%s" % (
                nd.port, "up" if nd.running() else "down", "\n".join(
                    ln[:200] for ln in nd.log_tail(n).split(" | "))),
                flush=True)

    # -- state

    def running(self):
        return [nd for nd in self.nodes if nd.running()]

    def by_port(self, port):
        for nd in self.nodes:
            if nd.port == port:
                return nd
        raise Fail("no cluster node on port %d" % port)

    def by_id(self, node_id):
        for nd in self.nodes:
            if nd.node_id == node_id:
                return nd
        raise Fail("no cluster node %s" % node_id)

    def view(self, via=None):
        """CLUSTER NODES as one running node (via) sees it."""
        via = via or self.running()[0]
        return parse_nodes(via.cmd("CLUSTER", "NODES"))

    def masters(self, via=None):
        """The nodes that are masters with slots, as via sees it."""
        out = []
        for n in self.view(via).values():
            if "master" in n["flags"] and "fail" not in n["flags"] and \
                    n["slots"]:
                out.append(self.by_id(n["id"]))
        return sorted(out, key=lambda nd: nd.port)

    def replicas_of(self, master, via=None):
        return sorted((self.by_id(n["id"]) for n in self.view(via).values()
                       if n["master"] == master.node_id),
                      key=lambda nd: nd.port)

    def slots_of(self, master, via=None):
        """The slot ranges [(lo, hi)] CLUSTER SLOTS gives master."""
        via = via or self.running()[0]
        return [(int(e[0]), int(e[1])) for e in via.cmd("CLUSTER", "SLOTS")
                if int(e[2][1]) == master.port]

    def keyslot(self, key):
        return int(self.running()[0].cmd("CLUSTER", "KEYSLOT", key))

    def master_for_slot(self, slot, via=None):
        via = via or self.running()[0]
        for e in via.cmd("CLUSTER", "SLOTS"):
            if int(e[0]) <= slot <= int(e[1]):
                return self.by_port(int(e[2][1]))
        raise Fail("slot %d has no master" % slot)

    def master_for_key(self, key):
        return self.master_for_slot(self.keyslot(key))

    def url(self, password=None):
        """cluster://[:password@]IP:P,... naming every node."""
        auth = ":%s@" % password if password else ""
        return "cluster://%s%s" % (auth, ",".join(
            nd.addr() for nd in self.nodes))

    def cmd(self, key, *args, hops=5):
        """args sent to key's master, following MOVED and ASK (as a
        cluster client does), at most hops times."""
        nd = self.master_for_key(key)
        asking = False
        for _ in range(hops):
            try:
                if asking:
                    with nd.client() as c:
                        c.cmd("ASKING")
                        return c.cmd(*args)
                return nd.cmd(*args)
            except RespError as e:
                f = str(e).split()
                if f and f[0] in ("MOVED", "ASK") and len(f) == 3:
                    nd = self.by_port(int(f[2].rsplit(":", 1)[1]))
                    asking = f[0] == "ASK"
                    continue
                raise
        raise Fail("%s: more than %d redirections" % (args[0], hops))

    def flush(self):
        """FLUSHALL on every running master (between tests)."""
        for m in self.masters():
            m.cmd("FLUSHALL")

    def rcmd(self, *args):
        """A command whose first argument after the name is its key
        (cluster.py's redis_log() and the like take this)."""
        return self.cmd(args[1], *args)

    def is_ok(self, full=True):
        """Every running node: cluster_state ok, all slots assigned,
        knows every running node as such; each replica's link up; all
        agree on the slot table, where (full) every master has its
        replicas."""
        up = self.running()
        for nd in up:
            ci = nd.cluster_info()
            if ci.get("cluster_state") != "ok" or \
                    ci.get("cluster_slots_assigned") != str(SLOTS) or \
                    int(ci.get("cluster_known_nodes", 0)) < len(up):
                return False
            if nd.role() == "slave" and \
                    nd.info("replication").get("master_link_status") != "up":
                return False
            view = self.view(nd)
            for other in up:
                v = view.get(other.node_id)
                if v is None or v["flags"] & {"fail", "fail?", "handshake",
                                              "noaddr"}:
                    return False
        # every running node agrees on who serves which slots
        tables = set()
        for nd in up:
            t = nd.cmd("CLUSTER", "SLOTS")
            if full and any(len(e) != 3 + self.nreplicas for e in t):
                return False
            tables.add(tuple(sorted((int(e[0]), int(e[1]), int(e[2][1]))
                                    for e in t)))
        return len(tables) == 1

    def wait_ok(self, timeout=30, full=True):
        wait_until(lambda: self.is_ok(full), timeout,
                   "the cluster to be ok on every running node")

    # -- failures

    def kill_master(self, master, timeout=30):
        """SIGKILLs master and waits (bounded) until one of its replicas
        serves its slots on every running node; returns that replica."""
        check(master.role() == "master", "%s is not a master" % master.addr())
        slots = self.slots_of(master)
        was = set(self.replicas_of(master))
        check(was, "%s has no replica to promote" % master.addr())
        master.kill()

        def promoted():
            new = None
            for nd in self.running():
                owners = {int(e[2][1]) for e in nd.cmd("CLUSTER", "SLOTS")
                          if (int(e[0]), int(e[1])) in slots}
                if len(owners) != 1:
                    return None
                o = self.by_port(owners.pop())
                if o not in was or (new and o is not new):
                    return None
                new = o
            return new if new.role() == "master" else None
        new = wait_until(promoted, timeout, "a replica of %s to take over "
                         "its slots" % master.addr())
        wait_until(lambda: self.is_ok(full=False), timeout,
                   "the cluster to be ok after %s's promotion" % new.addr())
        return new

    def failover(self, replica, timeout=30):
        """CLUSTER FAILOVER on replica (its master agrees first: nothing
        acknowledged is lost); waits until every node sees it master."""
        old = self.by_id(self.view(replica)[replica.node_id]["master"])
        check(replica.cmd("CLUSTER", "FAILOVER") == b"OK",
              "CLUSTER FAILOVER refused")
        wait_until(lambda: replica.role() == "master" and all(
            "master" in self.view(nd)[replica.node_id]["flags"]
            for nd in self.running()), timeout,
            "%s to be master after CLUSTER FAILOVER" % replica.addr())
        return old

    # -- resharding

    def begin_migration(self, slot, dst):
        """Marks slot migrating from its master to dst (a master): the
        source answers ASK for a key it does not hold."""
        src = self.master_for_slot(slot)
        check(src is not dst, "slot %d is on %s already" % (slot, dst.addr()))
        dst.cmd("CLUSTER", "SETSLOT", slot, "IMPORTING", src.node_id)
        src.cmd("CLUSTER", "SETSLOT", slot, "MIGRATING", dst.node_id)
        return src

    def end_migration(self, slot, src, dst, timeout=30):
        """Moves slot's keys from src to dst and gives dst the slot on
        every master: src then answers MOVED."""
        while True:
            keys = src.cmd("CLUSTER", "GETKEYSINSLOT", slot, 100)
            if not keys:
                break
            src.cmd("MIGRATE", dst.host, dst.port, "", 0, 5000, "KEYS",
                    *keys)
        for nd in [dst, src] + [m for m in self.masters()
                                if m not in (src, dst)]:
            nd.cmd("CLUSTER", "SETSLOT", slot, "NODE", dst.node_id)
        self.wait_ok(timeout)

    def migrate_slot(self, slot, dst, timeout=30):
        src = self.begin_migration(slot, dst)
        self.end_migration(slot, src, dst, timeout)
        return src

    def restart(self, nd, timeout=30):
        """Starts a stopped node again (same port, dir, nodes.conf): it
        rejoins the cluster; waits until the cluster is ok again."""
        check(not nd.running(), "%s is running" % nd.addr())
        nd.start(timeout)
        self.wait_ok(timeout)
        return nd


def serve():
    """`rcluster.py serve`: starts a 3+3 cluster, prints its url, then runs
    until stdin closes or a signal comes (tests/e2e/run, E2E_STORE=cluster);
    `rcluster.py flush URL` empties every master of a running one."""
    import sys
    if len(sys.argv) == 3 and sys.argv[1] == "flush":
        for hp in sys.argv[2].split("://", 1)[1].split(","):
            host, port = hp.rsplit(":", 1)
            try:
                resp_once(host, int(port), "FLUSHALL")
            except RespError:       # a replica: READONLY
                pass
        return
    check(sys.argv[1:] == ["serve"], "usage: rcluster.py serve | "
          "rcluster.py flush URL")
    c = RedisCluster().start()
    print(c.url(), flush=True)
    try:
        sys.stdin.read()
    finally:
        c.destroy()


if __name__ == "__main__":
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    serve()

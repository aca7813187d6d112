"""Redis, Sentinel and network-namespace helpers for the multi-host tests.

RedisServer     a private /usr/bin/redis-server (own port and data dir,
                AOF), stop/kill/restart on the same port and dir.
Resp            a minimal Redis client (no python3-redis needed).
SentinelSet     a master, a replica and 1 or 3 sentinels; failover().
Netns           N "host" namespaces on a private bridge 10.231.X.0/24:
                the bridge is 10.231.X.1 in the root namespace, host i is
                10.231.X.(10+i); cut(i)/restore(i) its link.
Cluster         Netns + Redis (or Sentinel) + one parleyd per namespace,
                all sharing the store; log(sid) reads a session's log
                from Redis.

Everything a test starts here is stopped at the end, also on a failure,
on SIGTERM/SIGINT/SIGHUP (the run script's timeout) and at exit; what a
SIGKILLed run left behind (namespaces, the bridge, processes inside those
namespaces, redis-servers) is removed by the next run: names carry the
creating process's pid, and whatever belongs to a pid that no longer runs
is stale.  Nothing binds 0.0.0.0: Redis binds 127.0.0.1 or the bridge
address, parleyd binds its namespace address.

A test that cannot have namespaces (not root, no CAP_NET_ADMIN, no `ip`)
calls skip(reason): it prints E2E-SKIP and exits 77, which the run script
reports as SKIP.
"""

import asyncio
import atexit
import errno
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from parley import (EPOCHS, Daemon, Fail, check, check_seqs, free_port,
                    resume_query, short, ws_connect, ws_recv, ws_send)

REDIS_SERVER = os.environ.get("REDIS_SERVER", "/usr/bin/redis-server")
REDIS_CLI = os.environ.get("REDIS_CLI", "/usr/bin/redis-cli")
IP = shutil.which("ip") or "/usr/sbin/ip"
SKIP_STATUS = 77
TOKEN = "e2e-cluster-admin-token"
NS_RE = re.compile(r"^pe2e-(\d+)-h(\d+)$")
BR_RE = re.compile(r"^pb(\d+)$")
VETH_RE = re.compile(r"^pv(\d+)h(\d+)$")
REDIS_DIR_RE = re.compile(r"^parley-e2e-redis-(\d+)-")


def skip(reason):
    """Reports the test as skipped (exit status 77), from anywhere: the
    clean-ups run first, then the process exits at once."""
    print("E2E-SKIP: %s" % reason, flush=True)
    _run_cleanups()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(SKIP_STATUS)


def need_redis():
    """Fails clearly when redis-server is missing."""
    if not os.access(REDIS_SERVER, os.X_OK):
        raise Fail("%s not found (apt-get install redis-server)" % REDIS_SERVER)


# -- clean-up at exit and on signals ------------------------------------------

_cleanups = []
_lock = threading.Lock()


def at_cleanup(fn):
    """Runs fn() at exit (or on SIGTERM/SIGINT/SIGHUP), latest first,
    unless it was removed with cancel_cleanup(fn) (after it ran normally)."""
    with _lock:
        _cleanups.append(fn)
    return fn


def cancel_cleanup(fn):
    with _lock:
        if fn in _cleanups:
            _cleanups.remove(fn)


def _run_cleanups():
    while True:
        with _lock:
            if not _cleanups:
                return
            fn = _cleanups.pop()
        try:
            fn()
        except Exception as e:  # keep cleaning
            print("cleanup %r: %s" % (fn, e), file=sys.stderr)


def _on_signal(sig, frame):
    # unwinds with-blocks and finally clauses, then atexit runs the rest
    raise SystemExit(128 + sig)


atexit.register(_run_cleanups)
for _s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    try:
        signal.signal(_s, _on_signal)
    except (ValueError, OSError):
        pass


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno != errno.ESRCH
    return True


def pid_is_ours(pid):
    """pid is alive and still a Python process (not a reused pid): a run
    of this harness that is still going."""
    if not pid_alive(pid):
        return False
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return b"python" in f.read()
    except OSError:
        return False


def _set_pdeathsig():
    """In the child: SIGKILL when the parent thread dies (a SIGKILLed test
    leaves no redis-server behind)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except Exception:
        pass


def _preexec():
    # Only from the main thread: PR_SET_PDEATHSIG fires when the creating
    # *thread* exits.
    return _set_pdeathsig if threading.current_thread() is \
        threading.main_thread() else None


def kill_pid(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


# -- a minimal RESP client ------------------------------------------------------

class RespError(Exception):
    pass


class Resp:
    """Resp(host, port).cmd("XRANGE", key, "-", "+"): the reply as Python
    values (bytes, int, list, None); an error reply raises RespError."""

    def __init__(self, host, port, timeout=5):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.f = self.s.makefile("rb")

    def close(self):
        for x in (self.f, self.s):
            try:
                x.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
        return False

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if not isinstance(a, bytes):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def _read(self):
        line = self.f.readline()
        if not line:
            raise ConnectionError("redis closed the connection")
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest
        if t == b"-":
            return RespError(rest.decode(errors="replace"))
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self._read() for _ in range(n)]
        raise ConnectionError("bad RESP reply %r" % line[:80])

    def cmd(self, *args):
        self.s.sendall(self.encode(args))
        r = self._read()
        if isinstance(r, RespError):
            raise r
        return r


def resp_once(host, port, *args, timeout=3):
    with Resp(host, port, timeout) as r:
        return r.cmd(*args)


def s(x):
    """bytes -> str (None stays None)."""
    return x.decode(errors="replace") if isinstance(x, bytes) else x


# -- redis-server ------------------------------------------------------------------

class RedisServer:
    """RedisServer(bind=("127.0.0.1",)).start(); stop(), kill(), restart()
    keep the port and the data dir, so with AOF the data survives."""

    def __init__(self, port=None, dir=None, appendonly=True,
                 fsync_always=False, bind=("127.0.0.1",), replicaof=None,
                 announce_ip=None, extra=()):
        need_redis()
        self.port = port or free_port()
        self.own_port = port is None
        self.own_dir = dir is None
        self.dir = dir or tempfile.mkdtemp(
            prefix="parley-e2e-redis-%d-" % os.getpid(), dir="/tmp")
        self.appendonly = appendonly
        self.fsync_always = fsync_always
        self.bind = tuple(bind)
        for a in self.bind:
            check(a not in ("0.0.0.0", "::", "*"), "never bind %s" % a)
        self.host = self.bind[0]
        self.replicaof = replicaof
        self.announce_ip = announce_ip
        self.extra = list(extra)
        self.conf = os.path.join(self.dir, "redis.conf")
        self.logpath = os.path.join(self.dir, "redis.log")
        self.proc = None
        self._cleanup = None

    def conf_text(self):
        lines = ["port %d" % self.port,
                 "bind %s" % " ".join(self.bind),
                 "protected-mode no",
                 "daemonize no",
                 "dir %s" % self.dir,
                 "logfile %s" % self.logpath,
                 "pidfile %s" % os.path.join(self.dir, "redis.pid"),
                 "save ''",
                 "appendonly %s" % ("yes" if self.appendonly else "no"),
                 "appendfsync %s" % ("always" if self.fsync_always
                                     else "everysec")]
        if self.replicaof:
            lines.append("replicaof %s %d" % self.replicaof)
        if self.announce_ip:
            lines.append("replica-announce-ip %s" % self.announce_ip)
        return "\n".join(lines + self.extra) + "\n"

    def start(self, timeout=10):
        # free_port() only finds a port that was free: another test
        # running beside this one may bind it first.  A port we chose
        # ourselves is chosen again then (a few times).
        for attempt in range(5):
            with open(self.conf, "w") as f:
                f.write(self.conf_text())
            if attempt > 0:
                try:
                    os.unlink(self.logpath)
                except OSError:
                    pass
            self.proc = subprocess.Popen(
                [REDIS_SERVER, self.conf], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                close_fds=True, cwd=self.dir, preexec_fn=_preexec())
            if self._cleanup is None:
                self._cleanup = at_cleanup(self.destroy)
            try:
                self.wait_ready(timeout)
                return self
            except Fail:
                if (not self.own_port or attempt == 4 or
                        self.proc.poll() is None or
                        "Failed listening on port" not in self.log_tail()):
                    raise
                self.new_ports()
        return self

    def new_ports(self):
        self.port = free_port()

    def wait_ready(self, timeout=10):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise Fail("redis-server on %d exited (%s): %s"
                           % (self.port, self.proc.returncode,
                              self.log_tail()))
            try:
                # The pid: a server of another test that took our port
                # answers PING too.
                if self.cmd("PING") == b"PONG" and b"process_id:%d\r\n" % \
                        self.proc.pid in self.cmd("INFO", "server"):
                    return
            except (OSError, RespError) as e:  # LOADING while reading AOF
                last = e
            time.sleep(0.05)
        raise Fail("redis-server on %d not ready after %ss (%s): %s"
                   % (self.port, timeout, last, self.log_tail()))

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def cmd(self, *args):
        return resp_once(self.host, self.port, *args)

    def client(self, timeout=5):
        return Resp(self.host, self.port, timeout)

    def cli(self, *args, netns=None, timeout=10):
        """redis-cli -h HOST -p PORT args (inside netns if given); returns
        (exit status, output)."""
        argv = [REDIS_CLI, "-h", self.host, "-p", str(self.port)] + \
            [str(a) for a in args]
        if netns:
            argv = [IP, "netns", "exec", netns] + argv
        r = subprocess.run(argv, capture_output=True, text=True,
                           timeout=timeout)
        return r.returncode, (r.stdout + r.stderr).strip()

    def stop(self, grace=10):
        """SIGTERM (Redis fsyncs the AOF and exits); SIGKILL after grace."""
        if self.running():
            self.proc.terminate()
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def kill(self):
        """SIGKILL: what appendfsync always wrote survives."""
        if self.running():
            self.proc.kill()
            self.proc.wait(5)

    def restart(self, timeout=15):
        self.stop()
        return self.start(timeout)

    def log_tail(self, n=10):
        try:
            with open(self.logpath, errors="replace") as f:
                return " | ".join(f.read().splitlines()[-n:])
        except OSError:
            return ""

    def destroy(self):
        self.kill()
        if self._cleanup is not None:
            cancel_cleanup(self._cleanup)
            self._cleanup = None
        if self.own_dir and not os.environ.get("E2E_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)


def wait_until(pred, timeout, what, interval=0.1):
    """Polls pred() (exceptions count as false) until true; returns its
    value, or raises Fail naming what and the last exception."""
    deadline = time.time() + timeout
    last = None
    while True:
        try:
            v = pred()
            if v:
                return v
        except Exception as e:
            last = e
        if time.time() > deadline:
            raise Fail("timed out after %ss waiting for %s%s"
                       % (timeout, what, " (last: %s)" % last if last else ""))
        time.sleep(interval)


def info_fields(text):
    out = {}
    for ln in s(text).splitlines():
        if ":" in ln and not ln.startswith("#"):
            k, v = ln.split(":", 1)
            out[k] = v.strip()
    return out


# -- Sentinel ---------------------------------------------------------------------

class SentinelSet:
    """A master, one replica and n (1 or 3) sentinels on address ip, master
    name `name`.  start(); url() for parleyd; failover() kills the master
    and waits for the replica to be reported as master."""

    def __init__(self, ip="127.0.0.1", n=1, name="m", fsync_always=True):
        need_redis()
        self.ip = ip
        self.name = name
        self.master = RedisServer(bind=(ip,), fsync_always=fsync_always,
                                  announce_ip=ip,
                                  extra=["repl-diskless-sync-delay 0"])
        self.replica = RedisServer(bind=(ip,), fsync_always=fsync_always,
                                   announce_ip=ip,
                                   replicaof=(ip, self.master.port),
                                   extra=["repl-diskless-sync-delay 0"])
        self.sentinels = [RedisServer(bind=(ip,), appendonly=False)
                          for _ in range(n)]
        self.quorum = 1

    def sentinel_conf(self, sv):
        return "\n".join([
            "port %d" % sv.port, "bind %s" % self.ip, "daemonize no",
            "protected-mode no",
            "dir %s" % sv.dir, "logfile %s" % sv.logpath,
            "sentinel announce-ip %s" % self.ip,
            "sentinel monitor %s %s %d %d" % (self.name, self.ip,
                                              self.master.port, self.quorum),
            "sentinel down-after-milliseconds %s 1000" % self.name,
            "sentinel failover-timeout %s 3000" % self.name,
            "sentinel parallel-syncs %s 1" % self.name]) + "\n"

    def start(self, timeout=20):
        self.master.start()
        self.replica.start()
        wait_until(lambda: info_fields(self.replica.cmd("INFO", "replication"))
                   .get("master_link_status") == "up", timeout,
                   "the replica to sync with the master")
        for sv in self.sentinels:
            with open(sv.conf, "w") as f:
                f.write(self.sentinel_conf(sv))
            # redis-server CONF --sentinel: no redis-sentinel binary needed;
            # the sentinel rewrites its (own, writable) conf file
            sv.proc = subprocess.Popen(
                [REDIS_SERVER, sv.conf, "--sentinel"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT, close_fds=True, cwd=sv.dir,
                preexec_fn=_preexec())
            if sv._cleanup is None:
                sv._cleanup = at_cleanup(sv.destroy)
            sv.wait_ready(timeout)
        # failover needs the sentinels to know the replica (and each other)
        wait_until(lambda: all(self._knows_replica(sv)
                               for sv in self.sentinels), timeout,
                   "the sentinels to discover the replica")
        if len(self.sentinels) > 1:
            wait_until(lambda: all(
                len(sv.cmd("SENTINEL", "sentinels", self.name)) ==
                len(self.sentinels) - 1 for sv in self.sentinels), timeout,
                "the sentinels to discover each other")
        return self

    def _knows_replica(self, sv):
        for r in sv.cmd("SENTINEL", "replicas", self.name) or []:
            d = dict(zip(map(s, r[0::2]), map(s, r[1::2])))
            if int(d.get("port", 0)) == self.replica.port and \
                    "s_down" not in d.get("flags", "") and \
                    "disconnected" not in d.get("flags", ""):
                return True
        return False

    def url(self):
        return "sentinel://%s/%s" % (",".join(
            "%s:%d" % (self.ip, sv.port) for sv in self.sentinels), self.name)

    def master_addr(self, sv=None):
        """(ip, port) the sentinel reports for the master."""
        r = (sv or self.sentinels[0]).cmd("SENTINEL",
                                           "get-master-addr-by-name", self.name)
        return (s(r[0]), int(r[1])) if r else None

    def current(self):
        """The RedisServer that is the master now."""
        addr = self.master_addr()
        return self.replica if addr and addr[1] == self.replica.port \
            else self.master

    def wait_synced(self, timeout=10):
        """The replica has everything the master has (offsets equal)."""
        def synced():
            m = info_fields(self.master.cmd("INFO", "replication"))
            r = info_fields(self.replica.cmd("INFO", "replication"))
            return r.get("master_link_status") == "up" and \
                m.get("master_repl_offset") == r.get("slave_repl_offset")
        wait_until(synced, timeout, "the replica to catch up")

    def failover(self, timeout=30, sync_first=True):
        """SIGKILLs the master; waits until every sentinel names the replica
        as master and the replica's ROLE is master.  Returns the seconds
        from the kill to the promotion."""
        if sync_first:
            self.wait_synced()
        t0 = time.time()
        self.master.kill()
        want = (self.ip, self.replica.port)
        wait_until(lambda: all(self.master_addr(sv) == want
                               for sv in self.sentinels), timeout,
                   "the sentinels to promote the replica on %d"
                   % self.replica.port)
        wait_until(lambda: s(self.replica.cmd("ROLE")[0]) == "master",
                   timeout, "the replica to report ROLE master")
        return time.time() - t0

    def all(self):
        return [self.master, self.replica] + self.sentinels

    def destroy(self):
        for r in self.all():
            r.destroy()


# -- network namespaces ---------------------------------------------------------

def _ip(*args, check_rc=True, ns=None):
    argv = [IP] + (["-n", ns] if ns else []) + [str(a) for a in args]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    if check_rc and r.returncode != 0:
        raise Fail("%s: %s" % (" ".join(argv), (r.stderr or r.stdout).strip()))
    return r


def netns_pids(ns):
    r = subprocess.run([IP, "netns", "pids", ns], capture_output=True,
                       text=True, timeout=10)
    return [int(x) for x in r.stdout.split()]


def _kill_ns_procs(ns, timeout=5):
    """SIGKILLs every process inside namespace ns (ours: we made it)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        pids = netns_pids(ns)
        if not pids:
            return
        for p in pids:
            kill_pid(p)
        time.sleep(0.05)


def cleanup_stale(verbose=True):
    """Removes what a run that no longer exists left behind: namespaces
    pe2e-PID-hN (and the processes in them), bridges pbPID, veths pvPIDhN,
    and redis-servers running from /tmp/parley-e2e-redis-PID-*."""
    removed = []
    try:
        names = _ip("netns", "list", check_rc=False).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        names = []
    for ln in names:
        name = ln.split(" ")[0].strip()
        m = NS_RE.match(name)
        if m and not pid_is_ours(int(m.group(1))):
            _kill_ns_procs(name)
            _ip("netns", "del", name, check_rc=False)
            removed.append(name)
    try:
        links = _ip("-o", "link", "show", check_rc=False).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        links = []
    for ln in links:
        parts = ln.split(":")
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@")[0]
        m = BR_RE.match(name) or VETH_RE.match(name)
        if m and not pid_is_ours(int(m.group(1))):
            _ip("link", "del", name, check_rc=False)
            removed.append(name)
    for d in os.listdir("/tmp"):
        m = REDIS_DIR_RE.match(d)
        if not m or pid_is_ours(int(m.group(1))):
            continue
        path = os.path.join("/tmp", d)
        try:
            with open(os.path.join(path, "redis.pid")) as f:
                rp = int(f.read().strip())
            with open("/proc/%d/cmdline" % rp, "rb") as f:
                cmd = f.read()
            if b"redis-server" in cmd or os.path.realpath(
                    "/proc/%d/cwd" % rp) == os.path.realpath(path):
                kill_pid(rp)
                removed.append("redis-server %d" % rp)
        except (OSError, ValueError):
            pass
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    if removed and verbose:
        print("removed stale: %s" % " ".join(removed), flush=True)
    return removed


def netns_available():
    """None if namespaces can be made here, else the reason why not."""
    if not os.path.exists(IP):
        return "the ip command (iproute2) is missing"
    if os.geteuid() != 0:
        return "not root: network namespaces need CAP_NET_ADMIN"
    # What the tests do, not only `ip netns add`: `ip netns exec` also
    # needs a private mount namespace and `mount --make-rslave /`, which a
    # plain chroot refuses.  The probe's names match the clean-up's
    # patterns (pe2e-PID-hN, pbPID), so a probe killed half-way is removed
    # by the next run.
    name = "pe2e-%d-h999" % os.getpid()
    r = subprocess.run([IP, "netns", "add", name], capture_output=True,
                       text=True)
    if r.returncode != 0:
        return "cannot create a network namespace: %s" % r.stderr.strip()
    try:
        r = subprocess.run([IP, "netns", "exec", name, "true"],
                           capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            return ("cannot run a process in a network namespace "
                    "(ip netns exec): %s" % r.stderr.strip())
    finally:
        subprocess.run([IP, "netns", "del", name], capture_output=True)
    br = "pb%d" % os.getpid()
    r = subprocess.run([IP, "link", "add", br, "type", "bridge"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return "cannot create a bridge (CAP_NET_ADMIN?): %s" % r.stderr.strip()
    subprocess.run([IP, "link", "del", br], capture_output=True)
    return None


class Netns:
    """n host namespaces pe2e-PID-h0.., a bridge pbPID with 10.231.X.1/24
    in the root namespace, host i at 10.231.X.(10+i)/24 on its eth0."""

    def __init__(self, n):
        self.n = n
        self.pid = os.getpid()
        self.bridge = "pb%d" % self.pid
        self.names = ["pe2e-%d-h%d" % (self.pid, i) for i in range(n)]
        self.veths = ["pv%dh%d" % (self.pid, i) for i in range(n)]
        self.inner = ["pv%dn%d" % (self.pid, i) for i in range(n)]
        self.x = None
        self.up = False
        self._cleanup = None

    @property
    def gw(self):
        return "10.231.%d.1" % self.x

    def addr(self, i):
        return "10.231.%d.%d" % (self.x, 10 + i)

    def _used_subnets(self):
        used = set()
        out = _ip("-o", "-4", "addr", "show", check_rc=False).stdout
        for m in re.finditer(r"inet 10\.231\.(\d+)\.", out):
            used.add(int(m.group(1)))
        return used

    def setup(self):
        why = netns_available()
        if why:
            skip(why)       # exits 77; the clean-ups run at exit
        cleanup_stale()
        self._cleanup = at_cleanup(self.teardown)
        _ip("link", "add", self.bridge, "type", "bridge")
        # a /24 of 10.231.0.0/16 nobody else here uses; re-checked after
        # taking it in case a parallel run picked the same one
        start = self.pid % 250
        for k in range(250):
            x = 1 + (start + k) % 250
            if x in self._used_subnets():
                continue
            _ip("addr", "add", "10.231.%d.1/24" % x, "dev", self.bridge)
            out = _ip("-o", "-4", "addr", "show", check_rc=False).stdout
            if len(re.findall(r"inet 10\.231\.%d\." % x, out)) == 1:
                self.x = x
                break
            _ip("addr", "del", "10.231.%d.1/24" % x, "dev", self.bridge,
                check_rc=False)
        check(self.x is not None, "no free 10.231.X.0/24 subnet")
        _ip("link", "set", self.bridge, "up")
        for i, ns in enumerate(self.names):
            _ip("netns", "add", ns)
            _ip("link", "set", "lo", "up", ns=ns)
            _ip("link", "add", self.veths[i], "type", "veth", "peer", "name",
                self.inner[i], "netns", ns)
            _ip("link", "set", self.veths[i], "master", self.bridge)
            _ip("link", "set", self.veths[i], "up")
            _ip("link", "set", self.inner[i], "name", "eth0", ns=ns)
            _ip("addr", "add", "%s/24" % self.addr(i), "dev", "eth0", ns=ns)
            _ip("link", "set", "eth0", "up", ns=ns)
        self.up = True
        # no STP on the bridge: its ports forward at once
        return self

    def cut(self, i, both=False):
        """Host i loses the network: its veth's root end goes down (and the
        inner end too with both).  Connections stay open, packets are lost."""
        _ip("link", "set", self.veths[i], "down")
        if both:
            _ip("link", "set", "eth0", "down", ns=self.names[i])

    def restore(self, i):
        _ip("link", "set", "eth0", "up", ns=self.names[i])
        _ip("link", "set", self.veths[i], "up")

    def exec_argv(self, i, argv):
        return [IP, "netns", "exec", self.names[i]] + list(argv)

    def teardown(self):
        """Kills what runs in our namespaces, deletes them and the bridge.
        Safe to call twice."""
        for ns in self.names:
            if os.path.exists("/var/run/netns/" + ns) or \
                    os.path.exists("/run/netns/" + ns):
                _kill_ns_procs(ns)
                _ip("netns", "del", ns, check_rc=False)
        _ip("link", "del", self.bridge, check_rc=False)
        for v in self.veths:  # gone with their namespace; just in case
            if os.path.exists("/sys/class/net/" + v):
                _ip("link", "del", v, check_rc=False)
        self.up = False
        if self._cleanup is not None:
            cancel_cleanup(self._cleanup)
            self._cleanup = None

    def leftovers(self):
        """What of ours is still there (for the self-test)."""
        left = []
        out = _ip("netns", "list", check_rc=False).stdout
        left += [n for n in self.names if re.search(r"^%s\b" % n, out, re.M)]
        for v in [self.bridge] + self.veths:
            if os.path.exists("/sys/class/net/" + v):
                left.append(v)
        return left


# -- finding the worker that serves a connection, in any namespace ---------------

def _tcp_rows(pid):
    for path in ("/proc/%d/net/tcp" % pid, "/proc/%d/net/tcp6" % pid):
        try:
            with open(path) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            yield ln.split()


def conn_worker(d, ws):
    """The worker pid of Daemon d holding the server end of ws (whatever
    namespace d runs in)."""
    local_port = ws.transport.get_extra_info("sockname")[1]
    pids = d.workers_pids()
    for p in pids:
        inodes = set(f[9] for f in _tcp_rows(p)
                     if len(f) > 9 and int(f[2].split(":")[1], 16) == local_port)
        if not inodes:
            continue
        try:
            fds = os.listdir("/proc/%d/fd" % p)
        except OSError:
            continue
        for fd in fds:
            try:
                t = os.readlink("/proc/%d/fd/%s" % (p, fd))
            except OSError:
                continue
            if t.startswith("socket:[") and t[8:-1] in inodes:
                return p
    return None


# -- the cluster ----------------------------------------------------------------

def script_provider(name, reply, chunk=4, delay="2ms"):
    r = reply.replace("\\", "\\\\").replace('"', '\\"')
    return ('provider %s {\n    type script\n    reply "%s"\n'
            '    chunk %d\n    delay %s\n}\n' % (name, r, chunk, delay))


class Cluster:
    """n parleyd hosts h0..h(n-1), each in its own namespace, sharing one
    Redis (or a Sentinel set) on the bridge address.

        with Cluster(3, lease="2s", providers=..., default=...) as c:
            a, b = c.hosts[0], c.hosts[1]     # Daemon objects
            c.log(sid)                        # the log, read from Redis

    netns=False puts every host on 127.0.0.1 (own ports), Redis too: for
    tests that need several hosts but no network cuts.  With E2E_STORE=
    cluster in the environment, Redis is a Redis Cluster of three masters
    and three replicas (lib/rcluster.py) instead of one server, unless the
    test asks for Sentinel; rcmd() then sends each command to its key's
    master."""

    def __init__(self, n=2, lease="2s", workers=2, providers=None,
                 default="fast", sentinel=False, n_sentinels=1,
                 fsync_always=True, netns=True, extra="", flush="20ms",
                 idle_timeout="10m"):
        self.n = n
        self.lease = lease
        self.use_netns = netns
        self.sentinel = sentinel
        self.n_sentinels = n_sentinels
        self.fsync_always = fsync_always
        self.daemon_kw = dict(workers=workers, providers=providers,
                              default=default, extra=extra, flush=flush,
                              idle_timeout=idle_timeout)
        self.net = None
        self.redis = None       # RedisServer (plain mode)
        self.sset = None        # SentinelSet (sentinel mode)
        self.rcluster = None    # RedisCluster (E2E_STORE=cluster)
        self.hosts = []
        self.failed = False

    # set up / tear down

    def start(self):
        try:
            if self.use_netns:
                self.net = Netns(self.n).setup()
                rip = self.net.gw
            else:
                rip = "127.0.0.1"
            if self.sentinel:
                self.sset = SentinelSet(rip, self.n_sentinels,
                                        fsync_always=self.fsync_always).start()
                url = self.sset.url()
            elif os.environ.get("E2E_STORE") == "cluster":
                from rcluster import RedisCluster
                self.rcluster = RedisCluster(
                    ip=rip, fsync_always=self.fsync_always).start()
                url = self.rcluster.url()
            else:
                self.redis = RedisServer(bind=(rip,),
                                         fsync_always=self.fsync_always).start()
                url = "redis://%s:%d" % (rip, self.redis.port)
            self.store_url = url
            print("store %s" % url.split("@")[-1], flush=True)
            for i in range(self.n):
                kw = dict(self.daemon_kw)
                if kw["providers"] is None:
                    kw.pop("providers")
                if self.use_netns:
                    kw.update(netns=self.net.names[i], host=self.net.addr(i),
                              token=TOKEN)
                d = Daemon(store=url, host_id="h%d" % i, lease=self.lease,
                           **kw)
                d.index = i
                self.hosts.append(d)
            for d in self.hosts:
                self.start_host(d)
        except BaseException:
            self.failed = True
            self.stop()
            raise
        return self

    def start_host(self, d, timeout=30):
        d.start(timeout)
        return d

    def restart_host(self, d, timeout=30):
        if d.proc is not None and d.proc.poll() is None:
            d.crash()
        return self.start_host(d, timeout)

    def stop(self):
        """Stops the hosts, then Redis, then the namespaces; raises Fail
        for a sanitizer report in a host's log (unless already failing)."""
        reports = []
        for d in self.hosts:
            try:
                d.stop()
            except Exception as e:
                print("stopping h%d: %s" % (d.index, e))
            rep = d.sanitizer_report()
            if rep:
                reports.append("h%d: %s" % (d.index, rep))
        if self.failed or os.environ.get("E2E_VERBOSE"):
            self.dump_logs()
        if self.sset:
            self.sset.destroy()
        if self.rcluster:
            self.rcluster.destroy()
        if self.redis:
            self.redis.destroy()
        if self.net:
            self.net.teardown()
        for d in self.hosts:
            if os.environ.get("E2E_KEEP"):
                print("kept", d.tmp)
            else:
                d.cleanup()
        if reports and not self.failed:
            raise Fail("sanitizer report in parleyd log: %s" % reports[0])

    def dump_logs(self, n=40):
        for d in self.hosts:
            print("--- h%d parleyd log tail (%s):\n%s" % (
                d.index, d.logpath,
                "\n".join(d.log_text().splitlines()[-n:])), flush=True)
        for r in ([self.redis] if self.redis else []) + \
                (self.sset.all() if self.sset else []) + \
                (self.rcluster.nodes if self.rcluster else []):
            print("--- redis %d log tail:\n%s" % (r.port, "\n".join(
                ln[:200] for ln in r.log_tail(4).split(" | "))))

    def __enter__(self):
        return self.start()

    def __exit__(self, et, ev, tb):
        if et is not None:
            self.failed = True
        self.stop()
        return False

    # Redis access

    def rcmd(self, *args):
        """A command to the current master (on a cluster, the master of
        the key args[1])."""
        if self.rcluster:
            return self.rcluster.rcmd(*args)
        r = self.sset.current() if self.sset else self.redis
        return r.cmd(*args)

    def log(self, sid):
        """The session's log in Redis: [(seq, t, event dict)] (redis_log)."""
        return redis_log(self.rcmd, sid)

    def log_events(self, sid):
        return [e for _, _, e in self.log(sid)]

    def log_until(self, sid, pred, what, timeout=30):
        """Polls the session's log until pred(events); returns them."""
        deadline = time.time() + timeout
        while True:
            log = self.log_events(sid)
            if pred(log):
                return log
            check(time.time() < deadline, "%s: log %s" %
                  (what, [short(e) for e in log]))
            time.sleep(0.1)

    def meta(self, sid):
        r = self.rcmd("HGETALL", "parley:{%s}:meta" % sid) or []
        return dict(zip(map(s, r[0::2]), map(s, r[1::2])))

    def owner(self, sid):
        """The owner key's value "<host-id>/<pid>#<fence>", or None."""
        return s(self.rcmd("GET", "parley:{%s}:owner" % sid))

    def owner_host(self, sid):
        o = self.owner(sid)
        return o.split("/")[0] if o else None

    def check_log(self, sid, what=""):
        """The Redis log is contiguous from its first seq, meta last agrees;
        returns the events."""
        ev = self.log_events(sid)
        check(ev, "%s: no log in Redis for %s" % (what, sid))
        check_seqs([e["seq"] for e in ev], ev[0]["seq"],
                   "%s: Redis log of %s" % (what, sid))
        last = self.meta(sid).get("last")
        check(last is None or int(last) >= ev[-1]["seq"],
              "%s: meta last %s < last log entry %d"
              % (what, last, ev[-1]["seq"]))
        return ev


def redis_log(rcmd, sid):
    """The session's log read from Redis with rcmd (a function sending one
    command): [(seq, t, event dict)] in stream order; checks that each
    entry id is <seq>-0 and holds the event of that seq, with t in ms."""
    out = []
    start = "-"
    while True:
        rows = rcmd("XRANGE", "parley:{%s}:log" % sid, start, "+",
                    "COUNT", 1000)
        for eid, fields in rows:
            eid = s(eid)
            f = dict(zip(map(s, fields[0::2]), fields[1::2]))
            check(eid.endswith("-0"), "%s: stream entry id %s is not "
                  "<seq>-0" % (sid, eid))
            seq = int(eid[:-2])
            try:
                e = json.loads(f.get("e"))
            except (TypeError, ValueError):
                raise Fail("%s: entry %s has no JSON field e: %r"
                           % (sid, eid, fields[:4]))
            check(e.get("seq") == seq, "%s: entry %s holds an event "
                  "with seq %s" % (sid, eid, e.get("seq")))
            check(s(f.get("t", b"")).isdigit(), "%s: entry %s has t=%r"
                  % (sid, eid, f.get("t")))
            out.append((seq, int(f["t"]), e))
        if len(rows) < 1000:
            return out
        start = "(" + s(rows[-1][0])


def agrees_with_log(seen, log, what):
    """Every event a client saw is the log's event of that seq, byte for
    byte as JSON (same seq means same event); returns how many."""
    by_seq = {e["seq"]: e for e in log}
    for e in seen:
        want = by_seq.get(e["seq"])
        check(want is not None, "%s: a client saw seq %d (%s), which is not "
              "in the log (log %s..%s)" % (what, e["seq"], short(e),
                                           log[0]["seq"] if log else None,
                                           log[-1]["seq"] if log else None))
        if want != e:
            diff = {k: (e.get(k), want.get(k)) for k in set(e) | set(want)
                    if e.get(k) != want.get(k)}
            raise Fail("%s: seq %d differs between a client and the log: "
                       "%s (client, log)" % (what, e["seq"], diff))
    return len(seen)


# -- small async client helpers ------------------------------------------------

async def collect(ws, into):
    """Background reader (ensure_future it): appends every event until the
    connection ends."""
    try:
        while True:
            into.append(await ws_recv(ws, 3600))
    except Exception:
        pass


async def read_for(ws, seconds, into):
    """Reads ws for up to seconds (or until it closes); appends to into."""
    deadline = time.time() + seconds
    try:
        while True:
            left = deadline - time.time()
            if left <= 0:
                return into
            into.append(await ws_recv(ws, left))
    except Exception:
        return into


async def follow(d, sid, last, until, timeout=30, into=None):
    """Opens /sessions/sid/stream?lastSeq=last on d and reads until
    until(event); returns (ws, events).  The ws stays open."""
    ws = await ws_connect(d.url("/sessions/%s/stream?lastSeq=%d" % (sid, last)))
    ev = [] if into is None else into
    deadline = time.time() + timeout
    while True:
        left = deadline - time.time()
        if left <= 0:
            await ws.close()
            raise Fail("%s on h%s: timed out after %ss; last events %s"
                       % (sid, getattr(d, "index", "?"), timeout,
                          [short(e) for e in ev[-8:]]))
        e = await ws_recv(ws, left)
        ev.append(e)
        if until(e):
            return ws, ev


def turn_of(e, mid):
    """e belongs to the turn whose messageId is mid (or a re-run mid.N)."""
    m = str(e.get("messageId", ""))
    return m == mid or m.startswith(mid + ".")


def ends_turn(e, mid):
    """done of the turn, or an error that ends it (fatal, or LLM_ERROR
    without retrying)."""
    if not turn_of(e, mid):
        return False
    if e.get("type") == "done":
        return True
    return e.get("type") == "error" and "seq" in e and (
        e.get("severity") == "fatal" or
        (e.get("code") == "LLM_ERROR" and not e.get("retrying")))


TRANSIENT = (OSError, asyncio.TimeoutError, EOFError)


async def turn(d, sid, last, msg_id, message="go on", patience=30, into=None,
               hosts=None, send=True):
    """Sends a chat with id msg_id on /sessions/sid/stream?lastSeq=last of d
    (or, after a dropped connection, of the next of hosts) and reads until
    the turn it starts has ended and the agent is idle again.  Retries a
    dropped connection or a refusal (OVERLOADED) with lastSeq = what it has
    seen, resending the same id (a repeat is acknowledged, not applied).
    send=False only follows the turn of a chat msg_id sent otherwise.
    Returns (logged events with seq > last, in order, the acks)."""
    import websockets
    got = [] if into is None else into
    acks = []
    deadline = time.time() + patience
    hosts = hosts or [d]
    k = 0
    tries = []
    while True:
        h = hosts[k % len(hosts)]
        k += 1
        seen_last = got[-1]["seq"] if got else last
        ws = None
        try:
            ws = await ws_connect(h.url("/sessions/%s/stream?%s" % (
                sid, resume_query(seen_last, EPOCHS.get(sid, "")))))
            pending = None
            if send:
                await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                                   "id": msg_id, "message": message})
            um = [x for x in got if x.get("type") == "user_message" and
                  x.get("id") == msg_id]
            mid = "m-%d" % um[0]["seq"] if um else None
            ended = bool(mid) and any(ends_turn(x, mid) for x in got)
            while True:
                left = deadline - time.time()
                if left <= 0:
                    raise asyncio.TimeoutError()
                e = await ws_recv(ws, left)
                if e.get("type") == "session_state":
                    pending = e.get("epoch", "")
                elif "seq" in e and pending is not None:
                    EPOCHS[sid], pending = pending, None
                if e.get("type") == "ack":
                    acks.append(e)
                    continue
                if e.get("type") == "error" and "seq" not in e:
                    if e.get("code") in ("OVERLOADED",):
                        raise OSError("refused: %s" % e.get("message"))
                    raise Fail("chat %s refused on h%s: %s"
                               % (msg_id, getattr(h, "index", "?"), e))
                if "seq" not in e:
                    continue
                if e["seq"] != (got[-1]["seq"] if got else last) + 1:
                    raise Fail("%s via h%s: seq %d after %d (gap or "
                               "duplicate)" % (sid, getattr(h, "index", "?"),
                                               e["seq"], got[-1]["seq"]
                                               if got else last))
                got.append(e)
                if e.get("type") == "user_message" and e.get("id") == msg_id:
                    mid = "m-%d" % e["seq"]
                if mid and ends_turn(e, mid):
                    ended = True
                if ended and e.get("type") == "agent_state":
                    return got, acks  # idle, or the next queued turn
        except (Fail,):
            raise
        except TRANSIENT + (websockets.exceptions.WebSocketException,) as e:
            tries.append("h%s: %s %s" % (getattr(h, "index", "?"),
                                         type(e).__name__, e))
            if time.time() > deadline:
                raise Fail("turn %s in %s did not end within %ss; tries %s; "
                           "last events %s" % (msg_id, sid, patience,
                                               tries[-4:],
                                               [short(x) for x in got[-8:]]))
            await asyncio.sleep(0.2)
        finally:
            if ws is not None:
                await ws.close()


def is_idle(e):
    return e.get("type") == "agent_state" and e.get("status") == "idle"


class Follower:
    """A client that follows session sid on host d in the background,
    reconnecting to d with its lastSeq whenever the connection drops, and
    checks each logged event as it arrives (seq = last + 1).
    view: the logged events after `last`; problems: what went wrong."""

    def __init__(self, d, sid, last=0):
        self.d = d
        self.sid = sid
        self.first = last
        self.view = []
        self.problems = []
        self.connects = 0
        self.task = None
        self.ws = None
        self.stopping = False

    def last(self):
        return self.view[-1]["seq"] if self.view else self.first

    def start(self):
        self.task = asyncio.ensure_future(self.run())
        return self

    async def run(self):
        while not self.stopping:
            try:
                self.ws = await ws_connect(self.d.url(
                    "/sessions/%s/stream?lastSeq=%d" % (self.sid, self.last())))
                self.connects += 1
                while not self.stopping:
                    e = await ws_recv(self.ws, 3600)
                    if "seq" not in e or e.get("type") in ("ack", "pong"):
                        continue
                    if e["seq"] != self.last() + 1:
                        self.problems.append(
                            "%s on h%s: seq %d after %d" % (
                                self.sid, getattr(self.d, "index", "?"),
                                e["seq"], self.last()))
                        return
                    self.view.append(e)
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
            await asyncio.sleep(0.2)

    async def wait_seq(self, seq, timeout, what):
        deadline = time.time() + timeout
        while self.last() < seq and time.time() < deadline:
            check(not self.problems, "%s: %s" % (what, self.problems))
            await asyncio.sleep(0.05)
        check(not self.problems, "%s: %s" % (what, self.problems))
        check(self.last() >= seq, "%s: follower on h%s at seq %d after %ss, "
              "expected %d (%d connects)" % (what, getattr(self.d, "index", "?"),
                                             self.last(), timeout, seq,
                                             self.connects))

    async def stop(self):
        if self.task:
            # Python 3.11's wait_for (under ws_recv) can swallow a cancel
            # that comes as an event arrives; the task then waited for
            # the next event for an hour.  Cancel until it is done.
            self.stopping = True
            for _ in range(100):
                self.task.cancel()
                done, _ = await asyncio.wait({self.task}, timeout=0.2)
                if done:
                    break
            await asyncio.gather(self.task, return_exceptions=True)
        check(not self.problems, "follower: %s" % self.problems)
        return self.view

"""bench/run's multihost scenario: the network, Redis' counters and the
scaling model (bench/README.md, "Scaling model").  Python 3 standard
library; bench/run drives the processes.

Hosts      n network namespaces pbn-PID-hI on a bridge pbbPID, the bridge
           10.77.X.1/24 in the root namespace, host i at 10.77.X.(10+i):
           private addresses only, nothing on 0.0.0.0.  teardown() at exit
           (bench/run's cleanup, also on SIGINT/SIGTERM); what a SIGKILLed
           run left behind is removed by the next one (names carry the pid).
redis_info parses INFO sections (commandstats, cpu) over a socket.
scaling_model / model_text / mh_rows: the figures bench/run prints.

The same ideas as tests/e2e/lib/cluster.py's Netns (written again here so
that bench/ does not depend on the test tree); the names differ, so
neither clean-up touches the other's.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import time

IP = shutil.which("ip") or "/usr/sbin/ip"
NS_RE = re.compile(r"^pbn-(\d+)-h(\d+)$")
LINK_RE = re.compile(r"^pb[bv](\d+)(h\d+)?$")
MAX_HOSTS = 8
SLOTS = 16384               # a Redis Cluster's hash slots

# The model's assumptions (bench/README.md says why).
MODEL_HOSTS = 100
MODEL_MASTERS = 10
MODEL_CORES = 2             # per host: this VM's
MODEL_HEADROOM = 0.7        # of each core (host or master) we plan to use
MODEL_RATE = 50             # events/s of a streaming session


def ip(*args, ns=None, check=True):
    argv = [IP] + (["-n", ns] if ns else []) + [str(a) for a in args]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv),
                                       (r.stderr or r.stdout).strip()))
    return r


def netns_unavailable():
    """None if we can make namespaces, else why not (and what to do)."""
    if not os.access(IP, os.X_OK):
        return "the ip command is missing (apt-get install iproute2)"
    if os.geteuid() != 0:
        return ("network namespaces need root (CAP_NET_ADMIN): run "
                "bench/run --only multihost as root")
    return None


def _pid_is_run(pid):
    """pid is a running Python process: a bench/run that still goes."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return b"python" in f.read()
    except OSError:
        return False


def _ns_pids(ns):
    r = subprocess.run([IP, "netns", "pids", ns], capture_output=True,
                       text=True, timeout=10)
    return [int(x) for x in r.stdout.split() if x.isdigit()]


def _kill_ns(ns, timeout=5):
    """SIGKILLs whatever runs in namespace ns (ours), then deletes it."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pids = _ns_pids(ns)
        if not pids:
            break
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)
    ip("netns", "del", ns, check=False)


def cleanup_stale():
    """Removes namespaces, bridges and veths of runs that no longer exist."""
    out = ip("netns", "list", check=False).stdout
    for ln in out.splitlines():
        name = ln.split(" ")[0].strip()
        m = NS_RE.match(name)
        if m and not _pid_is_run(int(m.group(1))):
            _kill_ns(name)
    out = ip("-o", "link", "show", check=False).stdout
    for ln in out.splitlines():
        parts = ln.split(":")
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@")[0]
        m = LINK_RE.match(name)
        if m and not _pid_is_run(int(m.group(1))):
            ip("link", "del", name, check=False)


class Hosts:
    """n namespaces, each a host with its own address, on one bridge."""

    def __init__(self, n):
        self.n, self.pid = n, os.getpid()
        self.bridge = "pbb%d" % self.pid
        self.names = ["pbn-%d-h%d" % (self.pid, i) for i in range(n)]
        self.veths = ["pbv%dh%d" % (self.pid, i) for i in range(n)]
        self.x = None

    @property
    def gw(self):
        return "10.77.%d.1" % self.x

    def addr(self, i):
        return "10.77.%d.%d" % (self.x, 10 + i)

    def setup(self):
        cleanup_stale()
        ip("link", "add", self.bridge, "type", "bridge")
        used = set(int(m) for m in re.findall(
            r"inet 10\.77\.(\d+)\.", ip("-o", "-4", "addr", "show",
                                        check=False).stdout))
        for k in range(250):
            x = 1 + (self.pid + k) % 250
            if x not in used:
                self.x = x
                break
        if self.x is None:
            raise RuntimeError("no free 10.77.X.0/24 subnet for the hosts")
        ip("addr", "add", "%s/24" % self.gw, "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for i, ns in enumerate(self.names):
            inner = "pbi%dh%d" % (self.pid, i)
            ip("netns", "add", ns)
            ip("link", "set", "lo", "up", ns=ns)
            ip("link", "add", self.veths[i], "type", "veth", "peer", "name",
               inner, "netns", ns)
            ip("link", "set", self.veths[i], "master", self.bridge)
            ip("link", "set", self.veths[i], "up")
            ip("link", "set", inner, "name", "eth0", ns=ns)
            ip("addr", "add", "%s/24" % self.addr(i), "dev", "eth0", ns=ns)
            ip("link", "set", "eth0", "up", ns=ns)
        return self

    def exec_argv(self, i, argv):
        return [IP, "netns", "exec", self.names[i]] + list(argv)

    def teardown(self):
        """Kills what runs in our namespaces, deletes them and the bridge;
        safe to call twice."""
        for ns in self.names:
            if os.path.exists("/run/netns/" + ns) or \
                    os.path.exists("/var/run/netns/" + ns):
                _kill_ns(ns)
        ip("link", "del", self.bridge, check=False)
        for v in self.veths:
            if os.path.exists("/sys/class/net/" + v):
                ip("link", "del", v, check=False)


# ------------------------------------------------------------------ Redis

def redis_cmd(host, port, *args, timeout=10):
    """One command over RESP; returns the reply's bulk string or simple
    string as text (enough for INFO, PING and CLUSTER INFO)."""
    enc = [b"*%d\r\n" % len(args)]
    for a in args:
        a = str(a).encode()
        enc.append(b"$%d\r\n%s\r\n" % (len(a), a))
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(b"".join(enc))
        f = s.makefile("rb")
        line = f.readline()
        if line[:1] == b"$":
            n = int(line[1:])
            return f.read(n + 2)[:-2].decode() if n >= 0 else None
        if line[:1] in (b"+", b":"):
            return line[1:].strip().decode()
        raise RuntimeError("redis %s:%d %s: %s" % (host, port, args[0],
                                                   line.strip().decode()))


def redis_info(host, port):
    """{"calls": {cmd: n}, "usec": {cmd: n}, "cpu_s": user+sys seconds}."""
    txt = redis_cmd(host, port, "INFO", "all")
    calls, usec, cpu = {}, {}, 0.0
    for ln in txt.splitlines():
        m = re.match(r"cmdstat_([^:]+):calls=(\d+),usec=(\d+)", ln)
        if m:
            calls[m.group(1)] = int(m.group(2))
            usec[m.group(1)] = int(m.group(3))
        m = re.match(r"used_cpu_(sys|user):([\d.]+)", ln)
        if m:
            cpu += float(m.group(2))
    return {"calls": calls, "usec": usec, "cpu_s": cpu}


def info_delta(a, b):
    """What Redis did between two redis_info() snapshots (several
    masters: lists of them, summed).  The bench's own calls (INFO, PING,
    CLUSTER INFO; Redis 7 names a subcommand cmd|sub) are left out;
    parleyd's CLUSTER SLOTS, its watch of the map, stays in."""
    if isinstance(a, dict):
        a, b = [a], [b]
    calls, usec, cpu = {}, {}, 0.0
    for x, y in zip(a, b):
        for k, v in y["calls"].items():
            if k in ("info", "ping", "cluster", "cluster|info"):
                continue
            d = v - x["calls"].get(k, 0)
            if d:
                calls[k] = calls.get(k, 0) + d
                usec[k] = usec.get(k, 0) + y["usec"][k] - \
                    x["usec"].get(k, 0)
        cpu += y["cpu_s"] - x["cpu_s"]
    return {"calls": calls, "usec": usec, "cpu_s": round(cpu, 3),
            "total_calls": sum(calls.values()),
            # commands called from a script are counted under their own
            # names too: the scripts alone are the round trips' upper part
            "scripts": calls.get("evalsha", 0) + calls.get("eval", 0)}


# ------------------------------------------------------------ the model

def _med(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2.0


def scaling_model(runs):
    """From every run's multihost result, the medians of the per-event and
    per-session costs at the largest host count measured, and what
    MODEL_HOSTS hosts and MODEL_MASTERS masters carry (bench/README.md,
    "Scaling model")."""
    per = []
    for res in runs:
        mh = res.get("multihost") or {}
        h = max((int(k) for k in (mh.get("hosts") or {})), default=None)
        if h is not None:
            per.append(mh["hosts"][str(h)])
    if not per:
        return None

    def m(*path):
        vals = []
        for r in per:
            for k in path:
                r = r.get(k) if isinstance(r, dict) else None
            vals.append(r)
        return _med(vals)
    # the worst count's cost per append (fewest events per script call)
    worst = []
    for res in runs:
        for x in ((res.get("multihost") or {}).get("hosts") or {}).values():
            worst.append((x.get("stream") or {}).get(
                "redis_cpu_us_per_append"))
    worst = max((w for w in worst if w is not None), default=None)
    host_us = m("stream", "host_cpu_us_per_event")
    redis_us = m("stream", "redis_cpu_us_per_append")
    idle_redis = m("idle", "redis_cpu_us_per_session_s")
    idle_cmds = m("idle", "redis_calls_per_session_s")
    idle_host = m("idle", "host_cpu_us_per_session_s")
    cmds_app = m("stream", "redis_calls_per_append")
    out = {"measured_at_hosts": max(int(k) for res in runs for k in
                                    ((res.get("multihost") or {})
                                     .get("hosts") or {"0": 0})),
           # 0: one redis-server; M: Redis CPU summed over M masters
           "measured_on_masters": max((res.get("multihost") or {}).get(
               "cluster_masters") or 0 for res in runs),
           "host_cpu_us_per_event": host_us,
           "redis_cpu_us_per_append": redis_us,
           "redis_cpu_pct_per_1000_appends_s":
           None if redis_us is None else round(redis_us / 10.0, 3),
           "redis_calls_per_append": cmds_app,
           "events_per_script": m("stream", "events_per_script"),
           "redis_cpu_us_per_append_worst": worst,
           "idle_redis_calls_per_session_s": idle_cmds,
           "idle_redis_cpu_us_per_session_s": idle_redis,
           "idle_host_cpu_us_per_session_s": idle_host,
           "assumptions": {"hosts": MODEL_HOSTS, "masters": MODEL_MASTERS,
                           "cores_per_host": MODEL_CORES,
                           "headroom": MODEL_HEADROOM,
                           "events_per_s_per_streaming_session":
                           MODEL_RATE}}
    budget_h = MODEL_HOSTS * MODEL_CORES * MODEL_HEADROOM * 1e6
    budget_m = MODEL_MASTERS * MODEL_HEADROOM * 1e6
    if host_us:
        out["hosts_events_per_s"] = round(budget_h / host_us)
    if redis_us:
        out["masters_appends_per_s"] = round(budget_m / redis_us)
    if worst:
        out["masters_appends_per_s_worst"] = round(budget_m / worst)
    if host_us and redis_us:
        ev = min(out["hosts_events_per_s"], out["masters_appends_per_s"])
        out["events_per_s"] = ev
        out["bound_by"] = "hosts" if out["hosts_events_per_s"] <= \
            out["masters_appends_per_s"] else "masters"
        out["streaming_sessions"] = round(ev / MODEL_RATE)
        if worst:
            out["streaming_sessions_worst"] = round(min(
                out["hosts_events_per_s"],
                out["masters_appends_per_s_worst"]) / MODEL_RATE)
    # an idle session's host CPU can measure 0 (clock ticks of 10 ms over
    # the idle seconds): then only the masters bound it
    bounds = {}
    if idle_redis:
        bounds["masters"] = budget_m / idle_redis
    if idle_host:
        bounds["hosts"] = budget_h / idle_host
    if bounds:
        by = min(bounds, key=bounds.get)
        out["idle_sessions"] = round(bounds[by])
        out["idle_bound_by"] = by
    return out


def summary(r):
    """bench/run's raw-numbers line of the scenario: the figures of each
    host count, without the parley-load reports (they are in the JSON)."""
    import json
    parts = []
    for h, x in sorted((r.get("hosts") or {}).items()):
        if x.get("errors"):
            parts.append("%s hosts: ERROR %s" % (h, "; ".join(x["errors"])))
            continue
        s, i = x.get("stream") or {}, x.get("idle") or {}
        keep = {k: s.get(k) for k in (
            "appended", "delivered", "seconds", "appended_per_s",
            "delivered_per_s", "host_cpu_us_per_event",
            "redis_cpu_us_per_append", "redis_calls_per_append",
            "events_per_script", "lost",
            "duplicated", "clients_done", "exit", "masters")
            if s.get(k) is not None}
        keep["idle"] = {k: i.get(k) for k in (
            "clients_held", "redis_calls_per_session_s",
            "redis_scripts_per_session_s", "redis_cpu_us_per_session_s",
            "host_cpu_us_per_session_s")}
        keep["idle"]["calls"] = (i.get("redis") or {}).get("calls")
        errs = (s.get("errors") or []) + (i.get("errors") or [])
        if errs:
            keep["errors"] = errs[:2]
        parts.append("%s hosts %s" % (h, json.dumps(
            keep, separators=(",", ":"))))
    return "\n    ".join(parts)


def model_text(mo):
    """The model as a few lines under the table."""
    def f(v, spec="{:,.0f}"):
        return "-" if v is None else spec.format(v)
    a = mo["assumptions"]
    return "\n".join([
        "scaling model (%d hosts of %d cores, %d masters, %.0f %% of each "
        "core; from the %d-host run on %s):" % (
            a["hosts"], a["cores_per_host"], a["masters"],
            100 * a["headroom"], mo["measured_at_hosts"],
            "one redis-server" if not mo.get("measured_on_masters") else
            "a cluster of %d master%s, Redis CPU summed over them" % (
                mo["measured_on_masters"],
                "s" if mo["measured_on_masters"] > 1 else "")),
        "  per appended event (2 deliveries): host CPU %s us, Redis CPU %s "
        "us (%s %% of a core per 1,000 appends/s; %s events a script "
        "call; worst count %s us), %s Redis calls" % (
            f(mo["host_cpu_us_per_event"], "{:.1f}"),
            f(mo["redis_cpu_us_per_append"], "{:.2f}"),
            f(mo["redis_cpu_pct_per_1000_appends_s"], "{:.2f}"),
            f(mo.get("events_per_script"), "{:.1f}"),
            f(mo.get("redis_cpu_us_per_append_worst"), "{:.2f}"),
            f(mo["redis_calls_per_append"], "{:.2f}")),
        "  per open session, idle: %s Redis calls/s, Redis CPU %s us/s, "
        "host CPU %s us/s" % (
            f(mo["idle_redis_calls_per_session_s"], "{:.3f}"),
            f(mo["idle_redis_cpu_us_per_session_s"], "{:.2f}"),
            f(mo["idle_host_cpu_us_per_session_s"], "{:.2f}")),
        "  hosts carry %s events/s, masters %s appends/s (%s at the "
        "worst count's cost): %s events/s "
        "(bound by %s), %s sessions streaming %d events/s (%s at the "
        "worst cost); %s idle sessions (bound by %s)" % (
            f(mo.get("hosts_events_per_s")), f(mo.get("masters_appends_per_s")),
            f(mo.get("masters_appends_per_s_worst")),
            f(mo.get("events_per_s")), mo.get("bound_by", "-"),
            f(mo.get("streaming_sessions")), a[
                "events_per_s_per_streaming_session"],
            f(mo.get("streaming_sessions_worst")),
            f(mo.get("idle_sessions")), mo.get("idle_bound_by", "-"))])


def mh_rows(r, add, host_counts):
    """The multihost rows of the table (the same rows in every run, so
    that --repeat can take their medians): per host count, the aggregate
    events appended and delivered per second, and Redis calls per session
    per second while idle; the ratio is against one host."""
    hosts = r.get("hosts") or {}
    m = r.get("cluster_masters")
    store = ("cluster, %d master%s" % (m, "s" if m > 1 else "")) if m \
        else "redis"
    base = (hosts.get(str(host_counts[0])) or {}).get("stream") or {}
    for h in host_counts:
        s = (hosts.get(str(h)) or {}).get("stream") or {}
        pv = s.get("appended_per_s")
        qv = base.get("appended_per_s")
        add("multihost %d host%s, appends/s (%s)" % (h, "s" if h > 1 else "",
                                                     store),
            pv, "%d host%s" % (host_counts[0],
                               "s" if host_counts[0] > 1 else ""),
            qv, "higher", "", None)
        add("multihost %d host%s, deliveries/s" % (h, "s" if h > 1 else ""),
            s.get("delivered_per_s"), "-", None, None, "", None)
    # what the masters' capacity depends on: with a cluster, summed over
    # its masters (every master also takes every append's notice)
    for h in host_counts:
        s = (hosts.get(str(h)) or {}).get("stream") or {}
        add("multihost %d host%s, Redis CPU per append"
            % (h, "s" if h > 1 else ""), s.get("redis_cpu_us_per_append"),
            "-", None, None, "", None, unit=" us")
    for h in host_counts:
        i = (hosts.get(str(h)) or {}).get("idle") or {}
        add("multihost %d host%s, Redis calls/s per idle session"
            % (h, "s" if h > 1 else ""), i.get("redis_calls_per_session_s"),
            "-", None, None, "", None)


# ------------------------------------------------------------ the scenario

TOKEN = "bench-multihost-token"     # parleyd wants one off loopback
PORT = 7070                         # each host has its own namespace
# One worker a host: on this 2-core machine a host is then one core, so
# that two and three hosts have cores to grow into (beside Redis and the
# load generator), and the model's per-host figure is per core.
WORKERS = 1


def _bindable(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def cluster_port():
    """A free port P whose cluster bus port P + 10000 is free too (an
    ephemeral port above 55535 has no bus port)."""
    import random
    for _ in range(200):
        p = random.randint(20000, 55000)
        if _bindable(p) and _bindable(p + 10000):
            return p
    raise RuntimeError("no free port pair P, P+10000 for a cluster master")


def start_redis(b, net, masters):
    """One redis-server, or `masters` cluster masters (no replicas), on the
    bridge address (and loopback); returns (store URL, [(host, port)],
    [process])."""
    nodes, procs = [], []
    for k in range(max(1, masters)):
        port = cluster_port() if masters else b.free_port()
        d = os.path.join(b.TMP, "mh-redis%d" % k)
        os.makedirs(d, exist_ok=True)
        argv = ["redis-server", "--port", str(port), "--bind",
                "127.0.0.1 %s" % net.gw, "--save", "", "--appendonly",
                "yes", "--appendfsync", "everysec", "--maxclients", "50000",
                # the bridge is private (10.77.X.0/24, our namespaces)
                "--protected-mode", "no",
                "--dir", d]
        if masters:
            # announced: the address CLUSTER SLOTS gives the hosts, which
            # reach the masters over the bridge only
            argv += ["--cluster-enabled", "yes", "--cluster-config-file",
                     os.path.join(d, "nodes.conf"),
                     "--cluster-announce-ip", net.gw]
        procs.append(b.start(argv, "mh-redis%d" % k))
        b.wait_port(port, procs[-1])
        nodes.append((net.gw, port))
    if not masters:
        return "redis://%s:%d" % nodes[0], nodes, procs
    try:
        form_cluster(nodes)
    except (OSError, RuntimeError):
        for p in procs:         # not left running into the next --repeat
            b.stop(p)
        raise
    return "cluster://" + ",".join("%s:%d" % n for n in nodes), nodes, procs


def form_cluster(nodes, timeout=30):
    """Makes a cluster of the empty nodes, all masters: the 16384 slots in
    equal ranges, then every node meets the first.  By hand rather than
    with `redis-cli --cluster create`, which wants 3 masters at least (the
    comparison needs one).  Waits, bounded, until every node has the whole
    map and says cluster_state:ok."""
    n = len(nodes)
    for k, (h, p) in enumerate(nodes):
        lo, hi = k * SLOTS // n, (k + 1) * SLOTS // n - 1
        redis_cmd(h, p, "CLUSTER", "ADDSLOTSRANGE", lo, hi)
    for h, p in nodes[1:]:
        redis_cmd(nodes[0][0], nodes[0][1], "CLUSTER", "MEET", h, p)
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = [redis_cmd(h, p, "CLUSTER", "INFO") for h, p in nodes]
        if all("cluster_state:ok" in t and
               "cluster_known_nodes:%d" % n in t and
               "cluster_slots_assigned:%d" % SLOTS in t for t in last):
            return
        time.sleep(0.2)
    raise RuntimeError("the cluster of %d masters is not ok after %d s: %s"
                       % (n, timeout, (last or ["?"])[0].split()[:3]))


def host_conf(b, net, i, store, reply):
    d = os.path.join(b.TMP, "mh-h%d" % i)
    os.makedirs(os.path.join(d, "state"), exist_ok=True)
    conf = os.path.join(d, "parleyd.conf")
    lines = ["listen %s:%d" % (net.addr(i), PORT),
             "workers %d" % WORKERS,
             "state-dir %s/state" % d,
             "control-socket none",
             "log-level warn",
             "token %s role admin" % TOKEN,
             "store %s" % store,
             "host-id mh-%d" % i,
             "max-connections 1000000",
             "max-sessions 1000000",
             "max-connections-per-address 0",
             "max-sessions-per-address 0",
             "flush-interval 0",
             "provider bench {", " type script",
             " reply %s" % b.quote(reply), " chunk 1", " delay 0", "}",
             "default-provider bench"]
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    return conf


def http(addr, method, path, body=None, timeout=10):
    import json
    import urllib.request
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        "http://%s:%d%s" % (addr, PORT, path), data=data, method=method,
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer " + TOKEN})
    with urllib.request.urlopen(req, timeout=timeout) as f:
        return f.status, f.read()


def wait_ready(addr, proc, timeout=30):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("parleyd on %s exited (%s): see its log"
                               % (addr, proc.returncode))
        try:
            st, _ = http(addr, "GET", "/health/ready", timeout=2)
            if st == 200:
                return
            last = st
        except OSError as e:
            last = e
        time.sleep(0.1)
    raise RuntimeError("parleyd on %s not ready after %d s (%s)"
                       % (addr, timeout, last))


def _cpu_between(samplers, a, b):
    secs = [s.seconds_between(a, b) for s in samplers]
    return None if any(x is None for x in secs) else sum(secs)


def one_count(b, net, h, nodes, redis_pids, hosts, sessions, tokens,
              idle_s):
    """h hosts on the store: sessions created on each (so each owns its
    own), held idle with an observer each on the next host, then one turn
    each with the owner's client and that observer reading it."""
    addrs = [net.addr(i) for i in range(h)]
    stamp = "mh%x" % (time.time_ns() & 0xffffffffff)
    prefixes = ["%s-h%d" % (stamp, i) for i in range(h)]
    nxt = [(i + 1) % h for i in range(h)]
    out = {"hosts": h, "sessions_per_host": sessions,
           "tokens_per_turn": tokens}
    def info():
        return [redis_info(hh, pp) for hh, pp in nodes]

    def ticks():
        return [b.cpu_ticks(b.tree(p.pid)) for p in hosts]

    # What Redis and the hosts cost with no session at all (Redis' own
    # timers, the hosts' health checks): taken off the idle sessions' cost
    bspan = max(1.0, idle_s / 3.0)
    i0, c0, t0 = info(), ticks(), time.monotonic()
    time.sleep(bspan)
    i1, c1, t1 = info(), ticks(), time.monotonic()
    base = info_delta(i0, i1)
    base_redis_cpu_s = base["cpu_s"] / (t1 - t0)
    base_host_cpu_s = (sum(c1) - sum(c0)) / b.CLK_TCK / (t1 - t0)
    base_calls_s = base["total_calls"] / (t1 - t0)
    out["baseline"] = {"seconds": round(t1 - t0, 2), "redis": base,
                       "host_cpu_s_per_s": round(base_host_cpu_s, 4)}
    for i in range(h):
        for k in range(sessions):
            http(addrs[i], "POST", "/sessions",
                 {"sessionId": "%s-%d" % (prefixes[i], k)})

    def mk(i, mode, prefix, extra, timeout, sampler=None):
        return b.Load("parley", PORT, mode, sessions, sessions=sessions,
                      procs=1, extra=extra, timeout=timeout, prefix=prefix,
                      host=addrs[i], sources=net.gw, token=TOKEN,
                      sampler=sampler)

    # idle: owners first, so that each session's lease stays its owner's,
    # then the observers on the next host (followers when h > 1)
    b.log("multihost: %d host%s, %d sessions each, idle %d s" %
          (h, "s" if h > 1 else "", sessions, idle_s))
    owners = [mk(i, "idle", prefixes[i], ["--duration", 600], 120)
              for i in range(h)]
    for ld in owners:
        ld.holding.wait(120)
    obs = [mk(nxt[i], "idle", prefixes[i], ["--duration", idle_s + 3], 120)
           for i in range(h)]
    for ld in obs:
        ld.holding.wait(120)
    time.sleep(1.0)         # the followers' first reads are done
    i0, c0, t0 = info(), ticks(), time.monotonic()
    time.sleep(idle_s)
    i1, c1, t1 = info(), ticks(), time.monotonic()
    ores = [ld.result() for ld in obs]
    for ld in owners:
        b.stop(ld.p)
    d = info_delta(i0, i1)
    n = h * sessions
    span = t1 - t0
    held = sum(ld.held for ld in owners) + sum(ld.held for ld in obs)
    out["idle"] = {
        "seconds": round(span, 2), "clients_held": held,
        "redis": d,
        # less the baseline (no sessions) over the same span
        "redis_calls_per_session_s": round(
            max(0.0, d["total_calls"] / span - base_calls_s) / n, 4),
        "redis_scripts_per_session_s": round(d["scripts"] / span / n, 4),
        "redis_cpu_us_per_session_s": round(
            max(0.0, d["cpu_s"] / span - base_redis_cpu_s) * 1e6 / n, 3),
        "host_cpu_us_per_session_s": round(max(
            0.0, (sum(c1) - sum(c0)) / b.CLK_TCK / span - base_host_cpu_s)
            * 1e6 / n, 3),
        "errors": [e for r in ores for e in (r.get("errors") or [])][:4]}

    # a turn each: the observers first (from seq 0, so they read all of
    # it however late they come), then the owners' clients, who chat
    b.log("multihost: %d host%s, a turn of %d events in each session" %
          (h, "s" if h > 1 else "", tokens))
    obs = [mk(nxt[i], "stream", prefixes[i],
              ["--observe", "--from", 0, "--chat", "go"], 300)
           for i in range(h)]
    for ld in obs:
        ld.holding.wait(120)
    # 0.25 s: each sample walks /proc, which costs CPU the hosts need
    samplers = [b.CpuSampler(p.pid, clock=time.time) for p in hosts]
    rsamp = [b.CpuSampler(p.pid, clock=time.time) for p in redis_pids]
    for smp in samplers + rsamp:
        smp.start()
    i0 = info()
    senders = [mk(i, "stream", prefixes[i], ["--chat", "go"], 300)
               for i in range(h)]
    sres = [ld.result() for ld in senders]
    ores = [ld.result() for ld in obs]
    i1 = info()
    for smp in samplers + rsamp:
        smp.stop()
    allr = sres + ores
    tf = min((r.get("t_first_us") or 0) for r in allr) / 1e6
    tl = max((r.get("t_last_us") or 0) for r in allr) / 1e6
    appended = sum(r.get("events") or 0 for r in sres)
    delivered = sum(r.get("events") or 0 for r in allr)
    d = info_delta(i0, i1)
    st = out["stream"] = {
        "appended": appended, "delivered": delivered, "redis": d,
        "exit": max(r.get("exit") or 0 for r in allr),
        "lost": sum(r.get("lost") or 0 for r in allr),
        "duplicated": sum(r.get("duplicated") or 0 for r in allr),
        "clients_done": sum(r.get("clients_done") or 0 for r in allr),
        "errors": [e for r in allr for e in (r.get("errors") or [])][:4],
        "senders": sres, "observers": ores}
    if tl > tf > 0 and appended:
        st["seconds"] = round(tl - tf, 3)
        st["appended_per_s"] = round(appended / (tl - tf))
        st["delivered_per_s"] = round(delivered / (tl - tf))
        hc = _cpu_between(samplers, tf, tl)
        rc = _cpu_between(rsamp, tf, tl)
        if hc is not None:
            st["host_cpu_s"] = round(hc, 3)
            st["host_cpu_us_per_event"] = round(hc * 1e6 / appended, 3)
        if rc is not None:
            st["redis_cpu_s"] = round(rc, 3)
            st["redis_cpu_us_per_append"] = round(rc * 1e6 / appended, 3)
        st["redis_calls_per_append"] = round(d["total_calls"] / appended,
                                             3)
        if len(nodes) > 1:
            # how the sessions' hash tags spread the appends over the
            # masters, and what each master spent (every master also
            # takes every PUBLISH, forwarded on the cluster bus)
            st["masters"] = [{
                "node": "%s:%d" % n, "xadd": x["calls"].get("xadd", 0),
                "publish": x["calls"].get("publish", 0),
                "cpu_s": round(y["cpu_s"] - x0["cpu_s"], 3)}
                for n, x0, y, x in zip(
                    nodes, i0, i1,
                    [info_delta(p, q) for p, q in zip(i0, i1)])]
        # how many events one append script carried: what Redis' cost per
        # event mostly depends on (each call also renews every key's TTL)
        if d["scripts"]:
            st["events_per_script"] = round(
                d["calls"].get("xadd", 0) / d["scripts"], 2)
    return out


def run_scenario(b):
    """bench/run's sc_multihost: b is bench/run itself (its helpers, OPTS
    and TMP)."""
    why = netns_unavailable()
    if why:
        raise RuntimeError(why)
    quick = b.OPTS.quick
    counts = b.OPTS.hosts_list
    sessions = 20 if quick else b.scale(200)
    tokens = 100 if quick else 500
    idle_s = 3 if quick else 10
    masters = b.OPTS.cluster_masters
    res = {"hosts": {}, "cluster_masters": masters, "workers": WORKERS,
           "sessions_per_host": sessions, "tokens_per_turn": tokens}
    net = Hosts(max(counts))
    b.NETS.append(net)
    net.setup()
    rprocs = []
    try:
        store, nodes, rprocs = start_redis(b, net, masters)
        res["store"] = store.split("://")[0]
        for h in counts:
            hosts = []
            try:
                for i in range(h):
                    conf = host_conf(b, net, i, store, "m" * tokens)
                    p = b.start(net.exec_argv(i, [b.PARLEYD, "-d", "-f",
                                                  conf]), "mh-h%d" % i)
                    hosts.append(p)
                for i, p in enumerate(hosts):
                    wait_ready(net.addr(i), p)
                res["hosts"][str(h)] = one_count(b, net, h, nodes, rprocs,
                                                 hosts, sessions, tokens,
                                                 idle_s)
            except Exception as e:      # reported, the next count runs
                b.log("multihost %d hosts failed: %s" % (h, e))
                res["hosts"][str(h)] = {"errors": [str(e)]}
            finally:
                for p in hosts:
                    b.stop(p)
                for hh, pp in nodes:
                    try:
                        redis_cmd(hh, pp, "FLUSHALL")
                    except (OSError, RuntimeError):
                        pass
    finally:
        for p in rprocs:
            b.stop(p)
        net.teardown()
        if net in b.NETS:       # not when a signal's clean-up ran first
            b.NETS.remove(net)
    return res


def cluster_refusal(parleyd, tmp):
    """None when this parleyd takes `store cluster://`, else what it said
    (parleyd -t on a configuration that has one)."""
    conf = os.path.join(tmp, "cluster-check.conf")
    with open(conf, "w") as f:
        f.write("listen 127.0.0.1:%d\nstate-dir %s\ncontrol-socket none\n"
                "store cluster://127.0.0.1:7000,127.0.0.1:7001\n"
                % (PORT, tmp))
    r = subprocess.run([parleyd, "-t", "-f", conf], capture_output=True,
                       text=True)
    if r.returncode == 0:
        return None
    return (r.stderr or r.stdout).strip() or "exit %d" % r.returncode

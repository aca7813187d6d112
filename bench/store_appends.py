#!/usr/bin/env python3
"""Appends per second through parleyd to its store, beside the store's own
ceiling measured in the same run.

  store_appends.py PARLEYD [--events N] [--sessions S] [--redis-port P]

Starts a private redis-server (appendonly yes, appendfsync everysec, on
127.0.0.1) and parleyd with `store redis://`, then runs S sessions at once,
each a turn whose demo reply streams N/S one-character tokens with no delay
and flush-interval 0, so every token is one appended event.  Events/s is
the events the store holds at the end over the time from the first chat to
the last `done`.  Beside it: `redis-benchmark` XADD of an event-sized
record, 50 clients, plain and pipelined (-P 16), against the same server.
The same sessions against the local store are run too, as the other
baseline.  The Redis server has one replica, and the same sessions run
once more with `store-wait 1` (a WAIT for the replica after every batch
of appends): redis_wait1_appends_per_s and its ratio to the run without,
and redis_wait1_calls, the WAITs and script calls Redis ran for it.
Prints one JSON object.  Needs redis-server, redis-benchmark
(Debian's redis-server and redis-tools) and curl.
"""
import argparse
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("nothing listens on %d" % port)


def wait_replica(port, timeout=10):
    """Until the master on port has its replica online."""
    end = time.time() + timeout
    while time.time() < end:
        out = subprocess.run(["redis-cli", "-p", str(port), "INFO",
                              "replication"], capture_output=True,
                             text=True).stdout
        if "state=online" in out:
            return
        time.sleep(0.1)
    raise SystemExit("the replica of %d did not come online" % port)


TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    """CPU seconds (user + system) of pid and its children, 0 if gone."""
    total = 0.0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/stat" % p) as f:
                st = f.read().rsplit(")", 1)[1].split()
            total += (int(st[11]) + int(st[12])) / TICK
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, IndexError, ValueError):
            pass
    return total


def clients_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cmd_calls(port, names):
    """How often the Redis server on port ran each command since the last
    CONFIG RESETSTAT (a script's calls count under their own names)."""
    out = subprocess.run(["redis-cli", "-p", str(port), "INFO",
                          "commandstats"], capture_output=True,
                         text=True).stdout
    calls = {}
    for name in names:
        m = re.search(r"cmdstat_%s:calls=(\d+)" % name, out)
        calls[name] = int(m.group(1)) if m else 0
    return calls


def run_parley(parleyd, tmp, store, sessions, per, redis_pid=None):
    """Runs the sessions; returns (events, seconds, cpu) where cpu holds
    the CPU seconds parleyd, the redis-server (when given) and the curl
    clients spent over the run."""
    port = free_port()
    conf = os.path.join(tmp, "p.conf")
    reply = "x" * per
    with open(conf, "w") as f:
        f.write("listen 127.0.0.1:%d\nworkers 2\nstate-dir %s/state\n"
                "%sflush-interval 0\nlog-level warn\nfsync batch\n"
                "provider bench {\n type script\n reply \"%s\"\n chunk 1\n"
                " delay 0\n}\ndefault-provider bench\n"
                % (port, tmp, store, reply))
    proc = subprocess.Popen([parleyd, "-d", "-f", conf],
                            stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(tmp, "p.log"), "ab"))
    try:
        wait_port(port)
        time.sleep(0.3)
        tag = "%d" % time.time_ns()
        errs = []

        def one(i):
            out = subprocess.run(
                ["curl", "-s", "-N", "-m", "300", "-X", "POST",
                 "http://127.0.0.1:%d/sessions/b%s-%d/messages" % (port, tag, i),
                 "-H", "Accept: text/event-stream",
                 "-d", '{"v":1,"type":"chat","message":"go"}'],
                capture_output=True, text=True).stdout
            if "event: done" not in out:
                errs.append(out[-300:])
        c_parley = cpu_s(proc.pid)
        c_redis = cpu_s(redis_pid) if redis_pid else 0.0
        c_clients = clients_cpu_s()
        t0 = time.monotonic()
        th = [threading.Thread(target=one, args=(i,)) for i in range(sessions)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        dt = time.monotonic() - t0
        cpu = {"parleyd": cpu_s(proc.pid) - c_parley,
               "redis": (cpu_s(redis_pid) - c_redis) if redis_pid else 0.0,
               "clients": clients_cpu_s() - c_clients}
        if errs:
            raise SystemExit("a turn did not finish: %s" % errs[0])
        total = 0
        for i in range(sessions):
            out = subprocess.run(
                ["curl", "-s", "http://127.0.0.1:%d/sessions/b%s-%d" %
                 (port, tag, i)], capture_output=True, text=True).stdout
            total += json.loads(out)["lastSeq"]
        return total, dt, cpu
    finally:
        proc.terminate()
        proc.wait(10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("parleyd")
    ap.add_argument("--events", type=int, default=200000)
    ap.add_argument("--sessions", type=int, default=20)
    args = ap.parse_args()
    for tool in ("redis-server", "redis-benchmark", "redis-cli", "curl"):
        if shutil.which(tool) is None:
            raise SystemExit("%s not found (apt-get install redis-server "
                             "redis-tools curl)" % tool)
    tmp = tempfile.mkdtemp(prefix="parley-bench-")
    rport = free_port()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(rport), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
         "--dir", tmp], stdout=subprocess.DEVNULL)
    rdir = os.path.join(tmp, "replica")
    os.mkdir(rdir)
    rep_port = free_port()
    replica = None
    try:
        wait_port(rport)
        replica = subprocess.Popen(
            ["redis-server", "--port", str(rep_port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", rdir,
             "--replicaof", "127.0.0.1", str(rport)],
            stdout=subprocess.DEVNULL)
        wait_replica(rport)
        per = max(1, args.events // args.sessions)
        ev, dt, rcpu = run_parley(args.parleyd, tmp,
                                  "store redis://127.0.0.1:%d\n" % rport,
                                  args.sessions, per, redis.pid)
        subprocess.run(["redis-cli", "-p", str(rport), "CONFIG",
                        "RESETSTAT"], capture_output=True)
        wev, wdt, _ = run_parley(args.parleyd, tmp,
                              "store redis://127.0.0.1:%d\nstore-wait 1\n"
                              % rport, args.sessions, per)
        wcalls = cmd_calls(rport, ("wait", "evalsha", "eval"))
        rec = ('{"v":1,"type":"token","sessionId":"bench-session-0001",'
               '"seq":123456,"ts":"2026-11-21T22:44:54.646Z","agentId":'
               '"assistant-86b9a5ff","messageId":"m-1","content":"x"}')
        bench = {}
        for name, extra in (("plain", []), ("pipelined16", ["-P", "16"])):
            out = subprocess.run(
                ["redis-benchmark", "-p", str(rport), "-n", "200000", "-q",
                 "-c", "50"] + extra + ["XADD", "benchstream", "*", "e", rec],
                capture_output=True, text=True).stdout
            m = re.findall(r"([\d.]+) requests per second", out)
            bench[name] = float(m[-1]) if m else None
        lev, ldt, lcpu = run_parley(args.parleyd, tmp, "", args.sessions,
                                    per)
    finally:
        if replica is not None:
            replica.terminate()
            replica.wait(10)
        redis.terminate()
        redis.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    res = {
        "cores": os.cpu_count(),
        "sessions": args.sessions,
        "events": ev,
        "redis_appends_per_s": round(ev / dt),
        "local_appends_per_s": round(lev / ldt),
        "redis_wait1_appends_per_s": round(wev / wdt),
        "ratio_local_vs_redis": round((lev / ldt) / (ev / dt), 3),
        # CPU per append (µs): the store's own work is parleyd's plus,
        # on the Redis path, the master's (the replica is left out: the
        # local store has none); the clients' is the curls' reading the
        # streams, one read per delivery.
        "local_cpu_us_per_append": {
            "parleyd": round(lcpu["parleyd"] / lev * 1e6, 2),
            "clients": round(lcpu["clients"] / lev * 1e6, 2)},
        "redis_cpu_us_per_append": {
            "parleyd": round(rcpu["parleyd"] / ev * 1e6, 2),
            "redis_server": round(rcpu["redis"] / ev * 1e6, 2),
            "clients": round(rcpu["clients"] / ev * 1e6, 2)},
        "ratio_wait1_vs_no_wait": round((wev / wdt) / (ev / dt), 3),
        # With store-wait: WAITs against script calls (appends, meta and
        # the durable marks), one WAIT covering every batch its
        # connection sent before it.
        "redis_wait1_calls": wcalls,
        "redis_benchmark_xadd_per_s": bench,
        "ratio_vs_xadd_plain": round(ev / dt / bench["plain"], 3)
        if bench.get("plain") else None,
        "ratio_vs_xadd_pipelined16": round(ev / dt / bench["pipelined16"], 3)
        if bench.get("pipelined16") else None,
    }
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()

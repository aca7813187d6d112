#!/usr/bin/python3
# The multi-host harness itself (lib/cluster.py), without the daemon's Redis
# store: namespaces, bridge and veths come up and go away; Redis on the
# bridge answers from inside a namespace; a cut link cuts and a restored one
# works again; parleyd (local store) runs inside a namespace on its address
# with a token and serves a chat; the worker holding a connection is found
# across namespaces; Redis keeps its AOF data across a SIGKILL and restart;
# a Sentinel failover promotes the replica; and what a SIGKILLed run left
# behind is removed by the next one.
import sys, os, subprocess, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import *


def listening_addrs(pid, port):
    """Local addresses (hex) of listening sockets on port, seen by pid."""
    out = []
    for path in ("/proc/%d/net/tcp" % pid, "/proc/%d/net/tcp6" % pid):
        try:
            rows = open(path).read().splitlines()[1:]
        except OSError:
            continue
        for ln in rows:
            f = ln.split()
            a, p = f[1].split(":")
            if int(p, 16) == port and f[3] == "0A":
                out.append(a)
    return out


def hex_ip(ip):
    return "%08X" % int.from_bytes(bytes(int(x) for x in reversed(ip.split("."))), "big")


CHILD = r'''
import sys, os, time
sys.path.insert(0, %r)
from cluster import *
n = Netns(1).setup()
r = RedisServer(bind=(n.gw,)).start()
print("ready", n.names[0], n.bridge, r.proc.pid, r.dir, flush=True)
time.sleep(600)
'''


async def test():
    why = netns_available()
    if why:
        skip(why)
    need_redis()
    t0 = time.time()
    net = Netns(2).setup()
    print("namespaces %s on %s up in %.2fs" % (net.names, net.gw, time.time() - t0))
    red = None
    d = None
    try:
        red = RedisServer(bind=(net.gw, "127.0.0.1"), fsync_always=True).start()
        for i in range(2):
            rc, out = red.cli("ping", netns=net.names[i])
            check(rc == 0 and out == "PONG", "redis-cli ping from %s: %s %s"
                  % (net.names[i], rc, out))
        rc, out = red.cli("set", "harness", "from-h0", netns=net.names[0])
        check(out == "OK", "SET from h0: %s" % out)
        rc, out = red.cli("get", "harness", netns=net.names[1])
        check(out == "from-h0", "GET from h1: %s" % out)

        # cut and restore host 0's link
        net.cut(0)
        r = subprocess.run(["timeout", "3"] + net.exec_argv(
            0, [REDIS_CLI, "-h", net.gw, "-p", str(red.port), "ping"]),
            capture_output=True, text=True)
        check(r.returncode != 0 or "PONG" not in r.stdout,
              "h0 still reaches Redis with its link cut: %r" % r.stdout)
        rc, out = red.cli("ping", netns=net.names[1])
        check(out == "PONG", "h1 lost Redis when h0 was cut: %s" % out)
        net.restore(0)
        wait_until(lambda: red.cli("ping", netns=net.names[0], timeout=3)[1]
                   == "PONG", 10, "h0 to reach Redis after the restore")
        print("cut/restore ok")

        # parleyd (local store) inside namespace 1 on its own address
        d = Daemon(netns=net.names[1], host=net.addr(1), token=TOKEN)
        with with_daemon(d):
            addrs = listening_addrs(d.proc.pid, d.port)
            check(addrs == [hex_ip(net.addr(1))], "parleyd in %s listens on "
                  "%s, expected only %s" % (net.names[1], addrs, net.addr(1)))
            st, _, _ = d.http("GET", "/sessions/x", headers={"Authorization": "Bearer no"})
            check(st == 401, "wrong token -> %d" % st)
            ev = await chat_turn(d, "ns-1", "hello")
            check(tokens_text(ev) == FAST_REPLY, "reply in the namespace: %r"
                  % tokens_text(ev))
            one_done(ev, "chat inside the namespace")
            # the worker holding a connection, found across namespaces
            ws = await ws_connect(d.url("/sessions/ns-1/stream?lastSeq=0"))
            await ws_until(ws, is_done)
            w = conn_worker(d, ws)
            check(w in d.workers_pids(), "conn_worker %s not among %s"
                  % (w, d.workers_pids()))
            await ws.close()
            check(d.proc.pid in netns_pids(net.names[1]),
                  "parleyd is not in %s" % net.names[1])
        print("parleyd in a namespace ok")

        # AOF survives SIGKILL + restart on the same port and dir
        red.cmd("XADD", "parley:{aof}:log", "1-0", "t", "1", "e", '{"seq":1}')
        red.cmd("HSET", "parley:{aof}:meta", "last", "1")
        port = red.port
        red.kill()
        red.start()
        check(red.port == port, "port changed")
        rows = red.cmd("XRANGE", "parley:{aof}:log", "-", "+")
        check(len(rows) == 1 and rows[0][0] == b"1-0", "after restart: %s" % rows)
        check(red.cmd("HGET", "parley:{aof}:meta", "last") == b"1", "meta lost")
        check(red.cmd("GET", "harness") == b"from-h0", "key lost")
        print("AOF restart ok")
    finally:
        if d is not None:
            d.stop()
        if red is not None:
            red.destroy()
        net.teardown()
    check(not net.leftovers(), "left after teardown: %s" % net.leftovers())

    # Sentinel: master, replica, 3 sentinels; failover
    ss = SentinelSet("127.0.0.1", n=3)
    try:
        ss.start()
        ss.master.cmd("SET", "k", "before")
        took = ss.failover()
        print("failover in %.1fs, master now %s" % (took, ss.master_addr()))
        check(ss.current() is ss.replica, "current() is not the replica")
        check(ss.replica.cmd("GET", "k") == b"before", "data lost in failover")
        ss.replica.cmd("SET", "k", "after")  # writable now
    finally:
        ss.destroy()

    # a SIGKILLed run leaves namespaces, a bridge and redis; the next cleans
    p = subprocess.Popen(["/usr/bin/python3", "-c", CHILD % HERE],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    check(line and line[0] == "ready", "child harness did not start: %s" % line)
    ns, br, rpid, rdir = line[1], line[2], int(line[3]), line[4]
    p.kill()
    p.wait()
    check(os.path.exists("/run/netns/" + ns), "child namespace missing")
    removed = cleanup_stale()
    check(ns in removed and br in removed, "stale %s/%s not removed: %s"
          % (ns, br, removed))
    check(not os.path.exists("/run/netns/" + ns), "stale namespace still there")
    check(not os.path.exists("/sys/class/net/" + br), "stale bridge still there")
    wait_until(lambda: not proc_running(rpid), 5,
               "the stale redis-server to die")
    check(not os.path.exists(rdir), "stale redis dir %s still there" % rdir)
    print("stale clean-up ok")

run_test("cluster_harness", test)

#!/usr/bin/python3
# The Redis Cluster harness itself (lib/rcluster.py), without parleyd:
# three masters and three replicas on loopback come up with every slot
# served and every replica linked; a session's keys share one slot; the
# replies the store's routing reads (CLUSTER SLOTS, MOVED, ASK) have the
# shape src/rcluster.c expects; a write acknowledged by WAIT survives a
# SIGKILLed master, whose replica takes its slots; the old master comes
# back as a replica; a manual failover hands a master's slots over; and
# what a SIGKILLed run left behind is removed by the next one.
import os
import subprocess
import sys
import time

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")
sys.path.insert(0, HERE)
from parley import *
from cluster import RespError, s, wait_until
from rcluster import RedisCluster, SLOTS, cleanup_stale

SID = "s-0123456789abcdef"
KEYS = ["parley:{%s}:%s" % (SID, k) for k in
        ("log", "meta", "owner", "fence", "in", "kb")]

CHILD = r'''
import sys, os, threading, time, tempfile
sys.path.insert(0, %r)
from rcluster import Node
d = tempfile.mkdtemp(prefix="parley-e2e-rcluster-%%d-" %% os.getpid(),
                     dir="/tmp")
os.mkdir(os.path.join(d, "n0"))
nd = Node(os.path.join(d, "n0"), 1000, False)
# Started from a thread: no PR_SET_PDEATHSIG, so the server outlives
# this process as after a crash of the harness.
t = threading.Thread(target=nd.start)
t.start()
t.join()
print("ready", d, nd.proc.pid, flush=True)
time.sleep(600)
'''


def redirect(node, *args):
    """The MOVED/ASK error args get from node, split."""
    try:
        node.cmd(*args)
    except RespError as e:
        return str(e).split()
    raise Fail("%s answered %s without a redirection" % (node.addr(), args))


def test():
    t0 = time.time()
    c = RedisCluster(masters=3, replicas=1, node_timeout=1000)
    with c:
        print("3+3 cluster up in %.1fs: %s" % (time.time() - t0, c.url()))
        ms = c.masters()
        check(len(ms) == 3, "masters: %s" % [m.addr() for m in ms])
        for m in ms:
            reps = c.replicas_of(m)
            check(len(reps) == 1, "%s has replicas %s"
                  % (m.addr(), [r.addr() for r in reps]))
            check(reps[0].role() == "slave", "replica role %s"
                  % reps[0].role())
        check(sum(hi - lo + 1 for m in ms for lo, hi in c.slots_of(m))
              == SLOTS, "the masters' ranges do not add up to 16384")
        check(c.url().count(",") == 5 and c.url().startswith(
            "cluster://127.0.0.1:"), "url %s" % c.url())

        # CLUSTER SLOTS: [start, end, [ip, port, id, [...]], replica...]
        for e in c.nodes[0].cmd("CLUSTER", "SLOTS"):
            check(isinstance(e[0], int) and isinstance(e[1], int) and
                  e[0] <= e[1] < SLOTS, "range %r" % e[:2])
            check(len(e) == 4, "range with %d elements, expected "
                  "start, end, master, replica" % len(e))
            ip, port, nid = e[2][:3]
            check(ip == b"127.0.0.1" and isinstance(port, int) and
                  len(nid) == 40 and isinstance(e[2][3], list),
                  "master element %r" % e[2])

        # A session's keys, tag {SID}: one slot (15376, test_rcluster.c)
        slots = {c.keyslot(k) for k in KEYS}
        check(slots == {15376}, "slots of a session's keys: %s" % slots)
        home = c.master_for_key(KEYS[0])
        other = [m for m in ms if m is not home][0]
        check(c.cmd(KEYS[1], "HSET", KEYS[1], "last", "7") == 1, "HSET")
        f = redirect(other, "HGET", KEYS[1], "last")
        check(f == ["MOVED", "15376", home.addr()], "MOVED reply %s" % f)
        check(c.cmd(KEYS[1], "HGET", KEYS[1], "last") == b"7", "HGET")

        # ASK while the slot migrates, MOVED once it has moved
        mig = c.keyslot("{mig}")
        src = c.master_for_slot(mig)
        dst = [m for m in ms if m is not src][0]
        c.cmd("{mig}a", "SET", "{mig}a", "1")
        c.begin_migration(mig, dst)
        f = redirect(src, "GET", "{mig}absent")
        check(f == ["ASK", str(mig), dst.addr()], "ASK reply %s" % f)
        check(c.cmd("{mig}absent", "GET", "{mig}absent") is None,
              "GET after ASK")
        check(c.cmd("{mig}a", "GET", "{mig}a") == b"1", "a key not moved "
              "yet is read on the source")
        c.end_migration(mig, src, dst)
        check(c.master_for_slot(mig) is dst, "slot %d not on %s"
              % (mig, dst.addr()))
        f = redirect(src, "GET", "{mig}a")
        check(f == ["MOVED", str(mig), dst.addr()], "MOVED after the "
              "migration: %s" % f)
        check(c.cmd("{mig}a", "GET", "{mig}a") == b"1", "key lost in the "
              "migration")
        print("MOVED/ASK ok")

        # Acknowledged by WAIT (the replica has it), then the master dies
        for i in range(200):
            c.cmd(KEYS[0], "XADD", KEYS[0], "%d-0" % (i + 1), "e", str(i))
        with home.client() as cl:
            n = cl.cmd("WAIT", 1, 5000)
        check(n == 1, "WAIT 1 5000 answered %s" % n)
        rep = c.replicas_of(home)[0]
        t1 = time.time()
        new = c.kill_master(home)
        print("master %s killed, replica %s promoted in %.1fs"
              % (home.addr(), new.addr(), time.time() - t1))
        check(new is rep, "promoted %s, not the replica %s"
              % (new.addr(), rep.addr()))
        check(c.master_for_key(KEYS[0]) is new, "the session's slot is "
              "not on the promoted replica")
        check(c.cmd(KEYS[0], "XLEN", KEYS[0]) == 200, "acknowledged "
              "entries lost in the failover")
        check(c.cmd(KEYS[1], "HGET", KEYS[1], "last") == b"7", "meta lost")
        c.cmd(KEYS[0], "XADD", KEYS[0], "201-0", "e", "after")

        # The old master rejoins as the new one's replica
        c.restart(home)
        wait_until(lambda: home.role() == "slave", 30, "%s to rejoin as a "
                   "replica" % home.addr())
        check(c.replicas_of(new) == [home], "replicas of %s: %s" % (
            new.addr(), [r.addr() for r in c.replicas_of(new)]))
        wait_until(lambda: home.read("XLEN", KEYS[0]) == 201, 30,
                   "the rejoined node to replicate the stream")

        # A manual failover hands the slots back without loss
        c.failover(home)
        c.wait_ok()
        check(c.master_for_key(KEYS[0]) is home, "slot not back on %s"
              % home.addr())
        check(c.cmd(KEYS[0], "XLEN", KEYS[0]) == 201, "entries lost in "
              "CLUSTER FAILOVER")
        print("failover ok")

    check(not any(nd.running() for nd in c.nodes), "a node still runs")
    check(not os.path.exists(c.dir), "%s still there" % c.dir)

    # A SIGKILLed run leaves a server and its directory; the next cleans
    p = subprocess.Popen(["/usr/bin/python3", "-c", CHILD % HERE],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    check(line and line[0] == "ready", "child harness did not start: %s"
          % line)
    d, rpid = line[1], int(line[2])
    p.kill()
    p.wait()
    check(proc_running(rpid), "the child's redis-server died with it: "
          "nothing left to clean")
    removed = cleanup_stale()
    check(d in removed, "stale %s not removed: %s" % (d, removed))
    wait_until(lambda: not proc_running(rpid), 5,
               "the stale redis-server to die")
    check(not os.path.exists(d), "stale dir %s still there" % d)
    print("stale clean-up ok")


run_test("rcluster_harness", test)

#!/usr/bin/python3
# No silent loss on a Redis Cluster failover (issue 21, part 5): parleyd on
# `store cluster://` over three masters and three replicas on 127.0.0.1
# (lib/rcluster.py, started here); the scenario is lib/failover.py's, on
# the master serving the session's slot (CLUSTER KEYSLOT of its hash tag,
# {SID}) and that master's replica: the replica cut off, the master and
# the owning worker SIGKILLed, the cluster promotes the replica.
# (a) store-wait 1: everything the client saw is in the promoted
#     replica's log, the same; the old master then comes back as the new
#     one's replica, the turn is re-run to its end, and the client's view
#     is GET /log, with no RESUME_GAP.
# (b) no WAIT: the client saw events the promoted replica lacks; RESUME_GAP
#     with the new epoch and `from`, on both hosts and over SSE; the
#     client's view is then GET /log.
# cluster-replica-validity-factor stays at its default (10): a replica
# refuses to fail over when its data is older than 10 x node-timeout +
# repl-ping-replica-period (20 s here), counted from when it saw its
# master link go down (after SIGCONT), and the cut lasts about a second.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import wait_until
from failover import Topology, both
from rcluster import RedisCluster


class Cluster(Topology):
    def __init__(self):
        # No diskless-sync delay: the old master, back as a replica, is
        # synced at once rather than 5 s later.
        Topology.__init__(self, RedisCluster(
            masters=3, replicas=1, node_timeout=1000,
            extra=["repl-diskless-sync-delay 0"]))
        self.slot = None

    def master_of(self, sid):
        self.slot = self.t.keyslot("{%s}" % sid)
        return self.t.master_for_slot(self.slot)

    def replica_of(self, master):
        return self.t.replicas_of(master)[0]

    def synced(self, master):
        with master.client() as cl:
            check(cl.cmd("WAIT", 1, 5000) == 1, "WAIT on %s: its replica "
                  "did not acknowledge" % master.addr())

    def reader(self, node):
        return node.read

    def promoted(self, master, replica):
        c = self.t
        wait_until(lambda: replica.role() == "master" and all(
            c.master_for_slot(self.slot, via=nd) is replica
            for nd in c.running()), 30,
            "the cluster to promote %s in %s's place" % (replica.addr(),
                                                         master.addr()))
        c.wait_ok(30, full=False)

    def rejoin(self, master):
        self.t.restart(master)
        check(master.role() == "slave", "%s came back as a master"
              % master.addr())
        return True


run_test("rcluster_failover", lambda: both(Cluster))

#!/usr/bin/python3
# No silent loss on a Redis failover (issue 21), on Sentinel: parleyd on
# sentinel:// (master, replica, 3 sentinels); the scenario is
# lib/failover.py's: the replica cut off, the master and the owning
# worker SIGKILLed, Sentinel promotes the replica.
# (a) store-wait 1: everything the client saw is in the promoted
#     replica's log, the same (the session then waits for a replica: WAIT
#     fails its writes; the old master is not brought back here).
# (b) no WAIT: RESUME_GAP with the new epoch and `from`, on both hosts
#     and over SSE; the client's view is then GET /log.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from cluster import *
from failover import Topology, both


class Sentinel(Topology):
    def __init__(self):
        Topology.__init__(self, SentinelSet("127.0.0.1", n=3))

    def master_of(self, sid):
        return self.t.master

    def replica_of(self, master):
        return self.t.replica

    def synced(self, master):
        self.t.wait_synced()

    def promoted(self, master, replica):
        ss = self.t
        wait_until(lambda: all(ss.master_addr(sv) == (ss.ip, replica.port)
                               for sv in ss.sentinels), 30,
                   "the sentinels to promote the replica")


run_test("redis_failover", lambda: both(Sentinel))

#!/usr/bin/python3
# Parts e (Sentinel failover) and f (a stale follower resuming a client) of
# t_multihost.py, as a test of their own so that each stays under a minute.
# MH2_PARTS="f" runs one of them.
import os, runpy
os.environ["MH_PARTS"] = os.environ.get("MH2_PARTS", "e f")
os.environ["MH_NAME"] = "multihost2"
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "t_multihost.py"), run_name="__main__")

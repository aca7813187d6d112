#!/usr/bin/python3
# The example from PROTOCOL.md, unchanged except the port, run with node + ws,
# with localhost resolving to ::1 first (Node.js 18's default order).
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *


def test():
    # `listen PORT` answers on both loopback addresses; node resolves
    # localhost to ::1 first (js/localhost-v6.js), as Node.js 18 does on a
    # stock Debian 12.
    d = Daemon(bare_port=True)
    with with_daemon(d):
        src = open(os.path.join(E2E, "js", "protocol_example.js")).read()
        env = dict(os.environ, NODE_PATH=os.path.join(E2E, "node_modules"))
        # No fallback to the next address, as Node.js 18: ::1 must answer.
        text, err = run_example(
            ["node", "--no-network-family-autoselection",
             "-r", os.path.join(E2E, "js", "localhost-v6.js"),
             "-r", os.path.join(E2E, "js", "ws-global.js")],
            src, d.port, d.tmp, "example.js", 20, until=b"cost:", env=env)
        check(FAST_REPLY in text, "reply text not in output: %r (stderr %r)"
              % (text[:300], err[:300]))
        check("[Done]" in text, "no [Done] in output: %r" % text[:300])
        after = text.split("[Done]")[1]
        check("outputTokens" in after and "inputTokens" in after,
              "usage not printed after [Done]: %r" % after[:200])
        check("[Error]" not in err, "example printed an error: %r" % err[:300])

run_test("protocol_example", test)

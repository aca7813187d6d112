#!/usr/bin/python3
# The example from PROTOCOL.md, unchanged except the port, run with node + ws.
import sys, os, subprocess, select
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *


def test():
    d = Daemon()
    with with_daemon(d):
        src = open(os.path.join(E2E, "js", "protocol_example.js")).read()
        check("ws://localhost:7777/chat" in src, "example file changed")
        path = os.path.join(d.tmp, "example.js")
        with open(path, "w") as f:
            f.write(src.replace("localhost:7777", "localhost:%d" % d.port))
        env = dict(os.environ, NODE_PATH=os.path.join(E2E, "node_modules"))
        p = subprocess.Popen(["node", "-r", os.path.join(E2E, "js", "ws-global.js"), path],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        out = b""
        deadline = time.time() + 20
        try:
            while b"[Done]" not in out or b"}" not in out.split(b"[Done]")[-1]:
                left = deadline - time.time()
                if left <= 0 or p.poll() is not None:
                    break
                r, _, _ = select.select([p.stdout], [], [], left)
                if r:
                    b = os.read(p.stdout.fileno(), 4096)
                    if not b:
                        break
                    out += b
        finally:
            p.kill()
            err = p.communicate(timeout=5)[1]
        text = out.decode(errors="replace")
        print(text)
        check(FAST_REPLY in text, "reply text not in output: %r (stderr %r)"
              % (text[:300], err[:300]))
        check("[Done]" in text, "no [Done] in output: %r" % text[:300])
        after = text.split("[Done]")[1]
        check("outputTokens" in after and "inputTokens" in after,
              "usage not printed after [Done]: %r" % after[:200])
        check(b"[Error]" not in err, "example printed an error: %r" % err[:300])

run_test("protocol_example", test)

#!/usr/bin/python3
# sd_notify without systemd: a datagram socket of our own stands in for
# $NOTIFY_SOCKET (a path, then an abstract '@name').  READY=1 with STATUS=
# comes only once /health/ready answers 200; SIGHUP sends RELOADING=1 with
# a MONOTONIC_USEC of now, then READY=1; an invalid file on SIGHUP sends a
# STATUS that says the reload failed, and READY=1 again; STATUS= is
# refreshed while serving; SIGTERM sends STOPPING=1 and parleyd exits 0.
# Every datagram comes from the supervisor itself (NotifyAccess=main).
# Also checks etc/parleyd.service (systemd-analyze verify when present).
import sys, os, signal, re, shutil, subprocess
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

SRCDIR = os.environ.get("SRCDIR") or os.path.join(E2E, "..", "..")
SERVING = re.compile(r"serving (\d+) sessions?, (\d+) connections?, (\d+) workers?")


class Notify:
    """A SOCK_DGRAM socket bound where $NOTIFY_SOCKET will point; each
    datagram is kept as (CLOCK_MONOTONIC µs at receipt, sender pid,
    {KEY: VALUE}, raw text)."""

    def __init__(self, tmp, abstract=False):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = "parley-e2e-notify-%d-%s" % (os.getpid(), os.urandom(4).hex())
            self.s.bind("\0" + name)
            self.env = "@" + name
        else:
            path = os.path.join(tmp, "notify.sock")
            self.s.bind(path)
            os.chmod(path, 0o666)
            self.env = path
        # Ask for the sender's credentials, as systemd does.
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.got = []

    def recv(self, timeout):
        self.s.settimeout(max(0.01, timeout))
        data, anc, _, _ = self.s.recvmsg(4096, socket.CMSG_SPACE(12))
        now = time.monotonic_ns() // 1000
        pid = None
        for level, typ, cdata in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_CREDENTIALS:
                pid = struct.unpack("iII", cdata[:12])[0]
        text = data.decode("utf-8", "replace")
        kv = {}
        for ln in text.split("\n"):
            if "=" in ln:
                k, v = ln.split("=", 1)
                kv[k] = v
        self.got.append((now, pid, kv, text))
        print("notify from %s: %r" % (pid, text), flush=True)
        return now, pid, kv, text

    def wait(self, pred, timeout, what):
        """Receives until pred(kv); returns (usec, pid, kv, text)."""
        deadline = time.time() + timeout
        while True:
            left = deadline - time.time()
            if left <= 0:
                raise Fail("no %s within %ss; got %s" % (
                    what, timeout, [t for _, _, _, t in self.got[-6:]]))
            try:
                m = self.recv(left)
            except socket.timeout:
                continue
            if pred(m[2]):
                return m

    def close(self):
        self.s.close()


def check_unit():
    """The unit file says what parleyd(8) documents."""
    # made by `make` from etc/parleyd.service.in with the install paths
    path = os.path.join(os.path.dirname(PARLEYD), "etc", "parleyd.service")
    if not os.path.exists(path):
        path = os.path.join(SRCDIR, "etc", "parleyd.service")
    check(os.path.exists(path), "etc/parleyd.service not built (make)")
    text = open(path).read()
    check("@" + "sbindir@" not in text, "%s: install paths not filled in" % path)
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    for want in ("Type=notify", "NotifyAccess=main", "KillMode=mixed",
                 "Restart=on-failure", "RuntimeDirectory=parleyd",
                 "StateDirectory=parleyd", "NoNewPrivileges=yes",
                 "ProtectSystem=strict", "PrivateTmp=yes"):
        check(want in lines, "etc/parleyd.service has no %s line" % want)
    start = [ln for ln in lines if ln.startswith("ExecStart=")]
    check(len(start) == 1 and " -d" in start[0],
          "ExecStart must run parleyd -d (foreground): %s" % start)
    rel = [ln for ln in lines if ln.startswith("ExecReload=")]
    check(len(rel) == 2 and " -t " in rel[0] and "-HUP $MAINPID" in rel[1],
          "ExecReload must check the file, then send SIGHUP: %s" % rel)
    stop = [ln for ln in lines if ln.startswith("TimeoutStopSec=")]
    check(stop and int(stop[0].split("=")[1].rstrip("s")) > 11,
          "TimeoutStopSec must exceed shutdown-timeout + 1s: %s" % stop)
    sa = shutil.which("systemd-analyze")
    check(sa is not None, "systemd-analyze not found: apt-get install systemd "
          "(.ci/run installs it)")
    tmp = tempfile.mkdtemp(prefix="parley-unit-", dir="/tmp")
    try:
        # The unit names the installed parleyd (SBINDIR/parleyd), which
        # need not be installed yet: point it at the one under test.
        with open(os.path.join(tmp, "parleyd.service"), "w") as f:
            f.write(re.sub(r"(?<==)/\S*/parleyd(?= )", os.path.abspath(PARLEYD),
                           text))
        r = subprocess.run([sa, "verify", "--man=no", "parleyd.service"],
                           cwd=tmp, capture_output=True, text=True, timeout=60)
        out = (r.stdout + r.stderr).strip()
        # Outside a booted systemd it may only complain about the host.
        bad = [ln for ln in out.splitlines() if "parleyd.service" in ln]
        check(r.returncode == 0 and not bad,
              "systemd-analyze verify etc/parleyd.service: %s" % out[-600:])
        print("systemd-analyze verify: ok")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def unwaited(d):
    """with_daemon(d) that does not wait for /health/ready (Daemon.start
    does): the test waits for READY=1 instead."""
    d.wait_ready = lambda timeout=30: None
    return with_daemon(d)


def wait_ready_message(d, n):
    """READY=1 with STATUS=, and /health/ready already 200 when it came."""
    del d.wait_ready    # the class's again
    _, pid, kv, text = n.wait(lambda kv: kv.get("READY") == "1", 30,
                              "READY=1 at start")
    st, _, _ = d.http("GET", "/health/ready")
    check(st == 200, "READY=1 sent while /health/ready answers %d" % st)
    check(pid == d.proc.pid, "READY=1 sent by pid %s, not the supervisor %d"
          % (pid, d.proc.pid))
    check("STATUS" in kv, "READY=1 without STATUS=: %r" % text)
    check(not [t for _, _, kv2, t in n.got[:-1] if kv2.get("READY") == "1"],
          "READY=1 sent twice at start: %s" % [t for _, _, _, t in n.got])


def stop_and_check(d, n):
    d.signal(signal.SIGTERM)
    n.wait(lambda kv: kv.get("STOPPING") == "1", 15, "STOPPING=1 on SIGTERM")
    try:
        rc = d.proc.wait(20)
    except subprocess.TimeoutExpired:
        raise Fail("parleyd did not exit within 20 s of SIGTERM")
    check(rc == 0, "parleyd exited %s after SIGTERM, want 0" % rc)
    others = [(pid, t) for _, pid, _, t in n.got if pid != d.proc.pid]
    check(not others, "notifications from processes other than the "
          "supervisor: %s" % others)


async def path_socket():
    d = Daemon(workers=2)
    n = Notify(d.tmp)
    d.env = {"NOTIFY_SOCKET": n.env}
    try:
        with unwaited(d):
            wait_ready_message(d, n)
            # A session and a connection, so the STATUS line has something
            # to count.
            ws = await ws_connect(d.url("/sessions/nt-1/stream"))
            await ws_recv(ws)
            await ws_send(ws, {"v": 1, "type": "chat", "sessionId": "nt-1",
                               "message": "hi"})
            await ws_until(ws, is_idle, timeout=30)

            # SIGHUP with a changed file.
            d.providers = provider_block("fast", "Reloaded reply.")
            d.write_conf()
            t0 = time.monotonic_ns() // 1000
            d.signal(signal.SIGHUP)
            at, pid, kv, text = n.wait(lambda kv: kv.get("RELOADING") == "1",
                                       10, "RELOADING=1 on SIGHUP")
            check("READY" not in kv, "RELOADING=1 and READY=1 in one "
                  "datagram: %r" % text)
            check("MONOTONIC_USEC" in kv, "RELOADING=1 without "
                  "MONOTONIC_USEC: %r" % text)
            try:
                usec = int(kv["MONOTONIC_USEC"])
            except ValueError:
                raise Fail("MONOTONIC_USEC not a number: %r" % text)
            check(t0 - 1000 <= usec <= at + 1000,
                  "MONOTONIC_USEC %d is not CLOCK_MONOTONIC between the "
                  "signal (%d) and its receipt (%d)" % (usec, t0, at))
            _, _, kv, text = n.wait(lambda kv: kv.get("READY") == "1", 20,
                                    "READY=1 after the reload")
            check("fail" not in kv.get("STATUS", "").lower(),
                  "a valid reload reported %r" % text)
            check("STATUS" in kv, "READY=1 after a reload without STATUS=")

            # An invalid file: the failure is in STATUS, then READY=1.
            with open(d.conf, "w") as f:
                f.write("listen 127.0.0.1:%d\nstate-dir %s\nno-such-thing 1\n"
                        % (d.port, d.state))
            mark = len(n.got)
            d.signal(signal.SIGHUP)
            _, _, kv, text = n.wait(lambda kv: kv.get("READY") == "1", 10,
                                    "READY=1 after a failed reload")
            statuses = [kv2.get("STATUS", "") for _, _, kv2, _ in n.got[mark:]]
            failed = [s for s in statuses if "reload failed" in s]
            check(failed, "a failed reload left no STATUS saying so: %s"
                  % [t for _, _, _, t in n.got[mark:]])
            check(len(failed[-1].split("reload failed", 1)[1].strip(" :")) > 0,
                  "STATUS %r does not say why the reload failed" % failed[-1])
            check("parleyd.conf:3" in d.log_text(),
                  "the failed reload is not logged with FILE:LINE")
            st, _, _ = d.http("GET", "/health/ready")
            check(st == 200, "/health/ready %d after a failed reload" % st)
            d.write_conf()

            # STATUS= refreshed every 10 s while serving; the reload let
            # our client go, so connect again for the count.
            try:
                await ws.close()
            except Exception:
                pass
            ws = await ws_connect(d.url("/sessions/nt-1/stream"))
            await ws_recv(ws)
            def serving(kv):
                m = "READY" not in kv and SERVING.search(kv.get("STATUS", ""))
                return m and int(m.group(1)) >= 1 and int(m.group(2)) >= 1
            _, _, kv, text = n.wait(serving, 12, "a periodic STATUS=serving "
                                    "N sessions, M connections, K workers "
                                    "counting our session and connection")
            m = SERVING.search(kv["STATUS"])
            check(int(m.group(3)) == d.workers, "periodic STATUS %r: expected "
                  "%d workers" % (kv["STATUS"], d.workers))
            await ws.close()

            stop_and_check(d, n)
    finally:
        n.close()


async def abstract_socket():
    d = Daemon(workers=1)
    n = Notify(d.tmp, abstract=True)
    d.env = {"NOTIFY_SOCKET": n.env}
    try:
        with unwaited(d):
            wait_ready_message(d, n)
            ev = await chat_turn(d, "nt-2", "hi")
            one_done(ev, "chat with an abstract NOTIFY_SOCKET")
            stop_and_check(d, n)
    finally:
        n.close()


async def test():
    check_unit()
    print("-- NOTIFY_SOCKET a path", flush=True)
    await path_socket()
    print("-- NOTIFY_SOCKET an abstract name", flush=True)
    await abstract_socket()

run_test("ops_notify", test)

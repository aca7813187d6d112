#!/usr/bin/python3
# parleyctl against a running parleyd: status, workers, sessions (and their
# --json and --state), session show/log/kill/pause/resume, log --follow
# while a chat streams, chat through a pipe across a restart of parleyd
# (each reply exactly once, a line typed while the daemon is down applied
# once), reload (valid and invalid), log level, config check, the exit
# statuses (69, 3, 2), and drain last (parleyd and parleyctl exit 0).
import sys, os, signal, threading
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *


def ctl(d, *args, rc=0, input=None, timeout=30):
    """d.ctl(args) that must exit rc and leave no sanitizer report."""
    r, out, err = d.ctl(*args, input=input, timeout=timeout)
    for m in SANITIZER_MARKS:
        check(m not in err, "parleyctl %s: sanitizer report: %s"
              % (" ".join(args), err[err.find(m):err.find(m) + 800]))
    check(rc is None or r == rc, "parleyctl %s exited %d (want %s); "
          "stdout %r; stderr %r" % (" ".join(args), r, rc, out[-400:],
                                    err[-400:]))
    return r, out, err


class Bg:
    """parleyctl in the background; its output gathered by threads."""

    def __init__(self, d, *args):
        self.args = args
        self.p = subprocess.Popen([PARLEYCTL, "-s", d.ctlsock] + list(args),
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.out, self.err = [], []
        self.threads = [threading.Thread(target=self.pump, args=(s, into),
                                         daemon=True)
                        for s, into in ((self.p.stdout, self.out),
                                        (self.p.stderr, self.err))]
        for t in self.threads:
            t.start()

    @staticmethod
    def pump(stream, into):
        for line in stream:
            into.append(line)

    def text(self):
        return "".join(self.out)

    def write(self, s):
        self.p.stdin.write(s)
        self.p.stdin.flush()

    def wait_for(self, pred, what, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred():
                return
            check(self.p.poll() is None, "parleyctl %s exited %s waiting "
                  "for %s; stderr %r" % (" ".join(self.args), self.p.poll(),
                                         what, "".join(self.err)[-400:]))
            time.sleep(0.05)
        raise Fail("parleyctl %s: no %s after %d s; stdout %r; stderr %r" % (
            " ".join(self.args), what, timeout, self.text()[-400:],
            "".join(self.err)[-400:]))

    def finish(self, timeout=30):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(5)
            raise Fail("parleyctl %s did not exit within %d s; stdout %r; "
                       "stderr %r" % (" ".join(self.args), timeout,
                                      self.text()[-400:],
                                      "".join(self.err)[-400:]))
        for t in self.threads:
            t.join(5)
        err = "".join(self.err)
        for m in SANITIZER_MARKS:
            check(m not in err, "parleyctl %s: sanitizer report: %s" % (
                " ".join(self.args), err[err.find(m):err.find(m) + 800]))
        return rc


def wait_idle(d, sid, n_idle, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        evs = d.log_events(sid)
        if sum(1 for e in evs if is_idle(e)) >= n_idle:
            return evs
        time.sleep(0.05)
    raise Fail("session %s: turn %d did not finish" % (sid, n_idle))


def chat_across_restart(d):
    """chat through a pipe; parleyd restarts between the two messages and
    the second is typed while it is down."""
    c = Bg(d, "chat", "ctl-1")
    c.write("first message\n")
    c.wait_for(lambda: FAST_REPLY in c.text(), "first reply")
    # a follower of the log rides the restart too
    f = Bg(d, "session", "log", "--follow", "ctl-1")
    f.wait_for(lambda: f.out and json.loads(f.out[-1])["seq"] ==
               d.last_seq("ctl-1"), "the first turn's events")
    check(d.stop() == 0, "parleyd did not stop cleanly")
    c.write("second message\n")
    time.sleep(0.5)
    d.start()
    rc = c.finish(timeout=40)
    last = d.last_seq("ctl-1")
    f.wait_for(lambda: json.loads(f.out[-1])["seq"] >= last,
               "events up to seq %d after the restart" % last)
    f.p.send_signal(signal.SIGINT)
    check(f.finish(10) == 0, "log --follow across the restart: exit status")
    check_seqs([json.loads(l)["seq"] for l in f.out], 1,
               "session log --follow across a restart")
    out = c.text()
    check(rc == 0, "chat exited %d; stderr %r" % (rc, "".join(c.err)[-400:]))
    check(out.count(FAST_REPLY) == 2 and
          out == (FAST_REPLY + "\n") * 2,
          "chat output is not the two replies once each: %r" % out)
    evs = d.log_events("ctl-1")
    check_contiguous(evs, 1, "ctl-1 log")
    msgs = [e["message"] for e in evs if e["type"] == "user_message"]
    check(msgs == ["first message", "second message"],
          "messages logged: %s (the retried one must be applied once)" % msgs)
    check("".join(c.err).strip() == "", "chat stderr: %r" % "".join(c.err))


def listings(d):
    r, out, _ = ctl(d, "status")
    for word in ("serving", "2 ready of 2", "uptime", "local, ok"):
        check(word in out, "status lacks %r: %r" % (word, out))
    _, out, _ = ctl(d, "status", "--json")
    st = json.loads(out)
    check(st["name"] == "parleyd" and st["workers"]["total"] == 2 and
          st["pid"] == d.proc.pid and st["state"] == "serving",
          "status --json: %s" % st)
    _, out2, _ = ctl(d, "--json", "status")
    check(json.loads(out2)["pid"] == d.proc.pid, "--json before the command")

    _, out, _ = ctl(d, "workers")
    lines = out.splitlines()
    check(len(lines) == 3 and lines[0].split()[:3] == ["SLOT", "PID", "STATE"],
          "workers table: %r" % out)
    _, out, _ = ctl(d, "workers", "--json")
    ws = json.loads(out)["workers"]
    check(sorted(w["pid"] for w in ws) == sorted(d.workers_pids()),
          "workers --json pids %s, children %s" % (
              [w["pid"] for w in ws], d.workers_pids()))
    check(all(w["state"] == "ready" for w in ws), "workers: %s" % ws)

    _, out, _ = ctl(d, "sessions")
    check(out.splitlines()[0].split()[:2] == ["SESSION", "STATUS"],
          "sessions table: %r" % out)
    check(any(l.split()[0] == "ctl-1" for l in out.splitlines()[1:]),
          "sessions lacks ctl-1: %r" % out)
    _, out, _ = ctl(d, "sessions", "--json")
    ss = {s["sessionId"]: s for s in json.loads(out)["sessions"]}
    check("ctl-1" in ss and ss["ctl-1"]["lastSeq"] == d.last_seq("ctl-1"),
          "sessions --json: %s" % ss)
    status = ss["ctl-1"]["status"]
    _, out, _ = ctl(d, "sessions", "--state", status, "--json")
    check("ctl-1" in [s["sessionId"] for s in json.loads(out)["sessions"]],
          "sessions --state %s lacks ctl-1: %s" % (status, out))
    other = "running" if status != "running" else "completed"
    _, out, _ = ctl(d, "sessions", "--json", "--state", other)
    check("ctl-1" not in [s["sessionId"] for s in json.loads(out)["sessions"]],
          "sessions --state %s lists ctl-1 (%s): %s" % (other, status, out))
    ctl(d, "sessions", "--state", "Not A State", rc=2)

    _, out, _ = ctl(d, "session", "show", "ctl-1")
    check("lastSeq" in out and "ctl-1" in out, "session show: %r" % out)
    _, out, _ = ctl(d, "session", "show", "--json", "ctl-1")
    st, js = d.http_json("GET", "/sessions/ctl-1")
    shown = json.loads(out)
    check(shown["lastSeq"] == js["lastSeq"] and
          shown["status"] == js["status"], "show --json %s, GET %s"
          % (shown, js))


def log_commands(d):
    evs = d.log_events("ctl-1")
    _, out, _ = ctl(d, "session", "log", "ctl-1")
    got = [json.loads(l) for l in out.splitlines()]
    check(got == evs, "session log differs from GET /log: %d vs %d events"
          % (len(got), len(evs)))
    _, out, _ = ctl(d, "session", "log", "--from", "3", "ctl-1")
    got = [json.loads(l) for l in out.splitlines()]
    check(got == evs[3:], "session log --from 3: seqs %s"
          % [e["seq"] for e in got][:5])
    _, out, _ = ctl(d, "session", "log", "--from", str(evs[-1]["seq"]),
                    "ctl-1")
    check(out == "", "log after the end: %r" % out)
    ctl(d, "session", "log", "--from", "x", "ctl-1", rc=2)

    # --follow from the start while a chat streams, then SIGINT
    f = Bg(d, "session", "log", "--follow", "ctl-1")
    f.wait_for(lambda: len(f.out) >= len(evs), "the logged events")
    _, out, err = ctl(d, "chat", "ctl-1", input="third message\n")
    check(out == FAST_REPLY + "\n", "chat third: %r %r" % (out, err))
    last = d.last_seq("ctl-1")
    f.wait_for(lambda: f.out and json.loads(f.out[-1])["seq"] >= last,
               "events up to seq %d" % last)
    time.sleep(0.3)
    f.p.send_signal(signal.SIGINT)
    rc = f.finish(10)
    check(rc == 0, "log --follow after SIGINT exited %d" % rc)
    seqs = [json.loads(l)["seq"] for l in f.out]
    check_seqs(seqs, 1, "session log --follow")
    check(seqs[-1] == last, "follow ended at %d, log at %d" % (seqs[-1], last))
    same_events([json.loads(l) for l in f.out], d.log_events("ctl-1"),
                "follow vs GET /log")


def session_control(d):
    # pause and resume (an admin control event through POST .../messages)
    r, out, err = ctl(d, "session", "pause", "ctl-1", rc=None)
    check(r == 0, "session pause exited %d: %s %s" % (r, out, err))
    _, out, _ = ctl(d, "sessions", "--json")
    ss = {s["sessionId"]: s for s in json.loads(out)["sessions"]}
    check(ss.get("ctl-1", {}).get("paused") is True,
          "ctl-1 not paused: %s" % ss.get("ctl-1"))
    ctl(d, "session", "resume", "ctl-1")
    _, out, _ = ctl(d, "sessions", "--json")
    ss = {s["sessionId"]: s for s in json.loads(out)["sessions"]}
    check(ss.get("ctl-1", {}).get("paused") is False,
          "ctl-1 still paused: %s" % ss.get("ctl-1"))
    ctl(d, "session", "pause", "no-such-session", rc=3)

    # kill: a session of its own, then it shows completed
    st, js = d.http_json("POST", "/sessions/ctl-2/messages",
                         {"v": 1, "type": "chat", "message": "hi"})
    check(st == 202, "POST ctl-2 -> %d %s" % (st, js))
    wait_idle(d, "ctl-2", 1)
    _, out, _ = ctl(d, "session", "kill", "ctl-2")
    check("ctl-2" in out, "session kill: %r" % out)
    _, out, _ = ctl(d, "session", "show", "--json", "ctl-2")
    check(json.loads(out)["status"] == "completed", "after kill: %s" % out)
    evs = d.log_events("ctl-2")
    check(evs[-1]["type"] == "session_complete" and
          evs[-1]["reason"] == "terminated", "last event after kill: %s"
          % evs[-1])
    _, out, err = ctl(d, "chat", "ctl-2", input="after the end\n", rc=1)
    check("SESSION_ENDED" in err, "chat to an ended session: %r" % err)


def config_commands(d):
    ctl(d, "reload")
    good = open(d.conf).read()
    with open(d.conf, "w") as f:
        f.write(good + "no-such-directive 1\n")
    line = good.count("\n") + 1
    _, _, err = ctl(d, "reload", rc=1)
    check("%s:%d:" % (d.conf, line) in err, "invalid reload: %r" % err)
    st, _, _ = d.http("GET", "/health/ready")
    check(st == 200, "ready after an invalid reload: %d" % st)
    _, out, err = ctl(d, "config", "check", d.conf, rc=1)
    check(("%s:%d:" % (d.conf, line)) in err, "config check bad: %r" % err)
    with open(d.conf, "w") as f:
        f.write(good)
    _, out, _ = ctl(d, "config", "check", d.conf)
    check(out.strip() == "%s: configuration OK" % d.conf,
          "config check good: %r" % out)
    ctl(d, "config", "check", os.path.join(d.tmp, "missing.conf"), rc=1)

    _, out, _ = ctl(d, "log", "level", "debug")
    check("debug" in out, "log level: %r" % out)
    _, out, _ = ctl(d, "status", "--json")
    check(json.loads(out)["logLevel"] == "debug", "logLevel: %s" % out)
    ctl(d, "log", "level", "info")
    ctl(d, "log", "level", "loud", rc=2)


def exit_codes(d):
    r = subprocess.run([PARLEYCTL, "-s", os.path.join(d.tmp, "nope.sock"),
                        "status"], capture_output=True, text=True, timeout=20)
    check(r.returncode == 69 and "nope.sock" in r.stderr,
          "bad socket: %d %r" % (r.returncode, r.stderr))
    env = dict(os.environ, PARLEYCTL_SOCKET=d.ctlsock)
    r = subprocess.run([PARLEYCTL, "status", "--json"], capture_output=True,
                       text=True, timeout=20, env=env)
    check(r.returncode == 0 and json.loads(r.stdout)["pid"] == d.proc.pid,
          "PARLEYCTL_SOCKET: %d %r" % (r.returncode, r.stderr))
    env["PARLEYCTL_SOCKET"] = os.path.join(d.tmp, "nope.sock")
    r = subprocess.run([PARLEYCTL, "-s", d.ctlsock, "status"],
                       capture_output=True, text=True, timeout=20, env=env)
    check(r.returncode == 0, "-s does not win over PARLEYCTL_SOCKET")
    _, _, err = ctl(d, "session", "show", "no-such-session", rc=3)
    check("no-such-session" in err, "unknown session: %r" % err)
    ctl(d, "session", "log", "no-such-session", rc=3)
    ctl(d, "session", "kill", "no-such-session", rc=3)
    for args in ((), ("frobnicate",), ("session",), ("session", "show"),
                 ("session", "show", "a", "b"), ("status", "extra"),
                 ("log", "level"), ("drain", "--timeout", "soon"),
                 ("status", "--bogus")):
        _, _, err = ctl(d, *args, rc=2)
        check("parleyctl" in err, "usage %s: %r" % (args, err))
    _, out, _ = ctl(d, "help")
    check(out.startswith("usage: parleyctl"), "help: %r" % out)
    _, out, _ = ctl(d, "commands")
    for c in ("status", "session log", "chat", "drain", "config check"):
        check(c in out.splitlines(), "commands lacks %s: %r" % (c, out))


def drain(d):
    _, _, err = ctl(d, "drain", "--timeout", "5s", timeout=40)
    check("exited" in err, "drain progress: %r" % err)
    try:
        rc = d.proc.wait(10)
    except subprocess.TimeoutExpired:
        raise Fail("parleyd still runs after parleyctl drain returned")
    check(rc == 0, "parleyd exited %d after drain" % rc)
    ctl(d, "status", rc=69)


def test():
    d = Daemon()
    with with_daemon(d):
        t0 = time.time()
        chat_across_restart(d)
        listings(d)
        log_commands(d)
        session_control(d)
        config_commands(d)
        exit_codes(d)
        drain(d)
        print("parleyctl checks took %.1f s" % (time.time() - t0))

run_test("parleyctl", test)

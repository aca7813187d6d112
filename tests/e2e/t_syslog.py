#!/usr/bin/python3
# log-file syslog: parleyd (supervisor and workers) logs to syslog(3).  A
# private mount namespace puts the test's own datagram socket at /dev/log,
# so the real syslog() path is exercised without touching the host's.
# Checks: facility daemon, the ident and pid, priorities by level, text
# and JSON formats, and a worker's lines (workers log after fork).
import sys, os, re, socket, subprocess
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

NS_SETUP = r'''
set -e
mount --make-rprivate /
mkdir -p "$T/olddev"
mount --rbind /dev "$T/olddev"
mount -t tmpfs -o mode=755 tmpfs /dev
for n in null zero full random urandom; do
	touch "/dev/$n"; mount --bind "$T/olddev/$n" "/dev/$n"
done
ln -s /proc/self/fd /dev/fd
touch /dev/log
mount --bind "$T/devlog" /dev/log
exec "$@"
'''


class SyslogDaemon(Daemon):
    def argv(self):
        return ["unshare", "--mount", "sh", "-c", NS_SETUP, "sh"] + \
            super().argv()


def recv_all(s, secs):
    out = []
    deadline = time.time() + secs
    while time.time() < deadline:
        s.settimeout(max(0.01, deadline - time.time()))
        try:
            out.append(s.recv(65536).decode("utf-8", "replace"))
        except socket.timeout:
            break
    return out


def run(fmt):
    d = SyslogDaemon(extra="log-file syslog\nlog-format %s\nlog-level debug\n" % fmt)
    sock_path = os.path.join(d.tmp, "devlog")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(sock_path)
    d.env = {"T": d.tmp}
    try:
        with with_daemon(d):
            st, _, _ = d.http("GET", "/sessions/nope")
            check(st == 404, "GET unknown session: %d" % st)
            msgs = recv_all(s, 1.5)
    finally:
        s.close()
    check(msgs, "%s: no syslog datagram arrived at /dev/log" % fmt)
    pids = set()
    for m in msgs:
        # RFC 3164 as glibc writes it: <PRI>Mmm dd hh:mm:ss ident[pid]: msg
        check(re.match(r"<(\d+)>\w{3} [ \d]\d \d\d:\d\d:\d\d parleyd\[(\d+)\]: ", m),
              "%s: not a syslog line: %r" % (fmt, m[:120]))
        pri = int(re.match(r"<(\d+)>", m).group(1))
        check(pri >> 3 == 3, "%s: facility %d, want daemon (3): %r" % (fmt, pri >> 3, m[:80]))
        pids.add(int(re.search(r"parleyd\[(\d+)\]", m).group(1)))
        body = m.split("]: ", 1)[1]
        if fmt == "json":
            o = json.loads(body)
            check(o.get("level") in ("error", "warn", "info", "debug") and o.get("msg"),
                  "json: fields missing: %r" % body[:120])
            want = {"error": 3, "warn": 4, "info": 6, "debug": 7}[o["level"]]
            check(pri & 7 == want, "json: severity %d for level %s" % (pri & 7, o["level"]))
    check(any("listening on" in m for m in msgs), "%s: no 'listening on' line" % fmt)
    check(len(pids) >= 2, "%s: only pids %s logged: workers' lines missing" % (fmt, pids))


def test():
    if os.geteuid() != 0:
        print("E2E-SKIP: needs root for a private mount namespace")
        sys.exit(77)
    # What NS_SETUP needs first; a plain chroot, whose / is no mount
    # point, refuses it.
    r = subprocess.run(["unshare", "--mount", "sh", "-c",
                        "mount --make-rprivate /"], capture_output=True,
                       text=True, timeout=20)
    if r.returncode != 0:
        print("E2E-SKIP: cannot make a private mount namespace "
              "(unshare --mount; mount --make-rprivate /): %s"
              % (r.stderr.strip() or "exit %d" % r.returncode))
        sys.exit(77)
    run("text")
    run("json")


if __name__ == "__main__":
    run_test("syslog", test)

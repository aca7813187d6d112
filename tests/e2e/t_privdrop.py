#!/usr/bin/python3
# Started as root with `user nobody` and `group nogroup`, parleyd binds,
# prepares its directories and drops to nobody before any worker runs:
# the supervisor and every worker run as uid/gid 65534 with no
# capabilities and no supplementary group of root's; state-dir and the
# session files belong to nobody; the control socket is mode 0660, owned
# by nobody:nogroup; a chat works; parleyctl works for root.  A process of
# another uid is refused: by the socket's mode, and, on a socket of mode
# 0666, by parleyd's SO_PEERCRED check, while nobody itself and a member
# of nogroup are let in.  A reload that needs a port below 1024 fails and
# the running configuration stays.  The audit-log, in a directory of
# root's, is made before the drop and given to nobody.
import sys, os, signal, stat, pwd, grp
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

OTHER = 12345       # a uid and gid nothing on the system uses

# Run as another user: connect to the control socket, ask for the status,
# print the status line (or the error).
PROBE = r'''
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect: %s" % e.strerror); sys.exit(0)
try:
    s.sendall(b"GET /control/v1/status HTTP/1.1\r\nHost: parleyd\r\n"
              b"Connection: close\r\n\r\n")
    out = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        out += b
except OSError as e:
    print("io: %s %r" % (e.strerror, out[:200])); sys.exit(0)
print(repr(out[:300]))
'''


def ids(pid):
    """(Uid line, Gid line, Groups, CapEff) of /proc/pid/status."""
    f = {}
    with open("/proc/%d/status" % pid) as st:
        for ln in st:
            k, _, v = ln.partition(":")
            f[k] = v.split()
    return f["Uid"], f["Gid"], f.get("Groups", []), f["CapEff"][0]


_ctl_copy = None


def ctl_for_others():
    """PARLEYCTL as another uid can run it: the checkout may be under a
    directory only root may enter (/root is mode 700), so a copy in a
    directory of mode 755."""
    global _ctl_copy
    if _ctl_copy is None:
        d = tempfile.mkdtemp(prefix="parley-e2e-ctl-", dir="/tmp")
        os.chmod(d, 0o755)
        _ctl_copy = os.path.join(d, "parleyctl")
        shutil.copy2(PARLEYCTL, _ctl_copy)
        os.chmod(_ctl_copy, 0o755)
    return _ctl_copy


def as_user(uid, gid, argv, groups=()):
    return subprocess.run(argv, user=uid, group=gid, extra_groups=list(groups),
                          capture_output=True, text=True, timeout=30)


def probe(d, uid, gid, groups=()):
    r = as_user(uid, gid, ["/usr/bin/python3", "-c", PROBE, d.ctlsock], groups)
    check(r.returncode == 0, "probe as %d: %s" % (uid, r.stderr[-300:]))
    return r.stdout.strip()


def low_port():
    """A port below 1024 nothing listens on (we are root)."""
    for p in range(990, 900, -1):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            return p
        except OSError:
            continue
        finally:
            s.close()
    raise Fail("no free port below 1024")


def open_tmp(d):
    # The test's directory is root's 0700: nobody must reach the files
    # parleyd reads again after the drop (the config, on a reload) and the
    # control socket.
    os.chmod(d.tmp, 0o755)


def nogroup():
    for name in ("nogroup", "nobody"):
        try:
            return name, grp.getgrnam(name).gr_gid
        except KeyError:
            pass
    raise Fail("no group nogroup or nobody on this system")


async def dropped(gname, gid):
    d = Daemon(extra="user nobody\ngroup %s\n" % gname, workers=2)
    open_tmp(d)
    audit = os.path.join(d.tmp, "audit.jsonl")
    d.extra += "audit-log %s\n" % audit
    d.write_conf()
    nobody = pwd.getpwnam("nobody").pw_uid
    with with_daemon(d):
        pids = [d.proc.pid] + d.workers_pids()
        check(len(pids) == 1 + d.workers, "processes: %s" % pids)
        for p in pids:
            uid, g, groups, cap = ids(p)
            what = "supervisor" if p == d.proc.pid else "worker %d" % p
            check(uid == [str(nobody)] * 4, "%s Uid: %s, want %d everywhere"
                  % (what, uid, nobody))
            check(g == [str(gid)] * 4, "%s Gid: %s, want %d everywhere"
                  % (what, g, gid))
            check(groups in ([], [str(gid)]), "%s kept supplementary groups %s"
                  % (what, groups))
            check(int(cap, 16) == 0, "%s still has capabilities %s" % (what, cap))
        st = os.stat(d.state)
        check(st.st_uid == nobody, "state-dir owned by uid %d, want nobody"
              % st.st_uid)
        sk = os.stat(d.ctlsock)
        check(stat.S_ISSOCK(sk.st_mode), "%s is not a socket" % d.ctlsock)
        check(stat.S_IMODE(sk.st_mode) == 0o660, "control socket mode %o, "
              "want 660" % stat.S_IMODE(sk.st_mode))
        check(sk.st_uid == nobody and sk.st_gid == gid, "control socket owned "
              "by %d:%d, want %d:%d" % (sk.st_uid, sk.st_gid, nobody, gid))

        ev = await chat_turn(d, "pd-1", "hi")
        one_done(ev, "chat after the drop")
        check(tokens_text(ev) == FAST_REPLY, "reply %r" % tokens_text(ev))
        for root, dirs, files in os.walk(d.state):
            for n in dirs + files:
                p = os.path.join(root, n)
                check(os.lstat(p).st_uid == nobody, "%s owned by uid %d, "
                      "want nobody" % (p, os.lstat(p).st_uid))

        # The audit-log, in a directory of root's: made before the drop
        # and given to nobody, as whom the workers append to it.
        s, js = d.http_json("POST", "/sessions/pd-1/messages", {
            "v": 1, "type": "set_autonomy", "level": "MANUAL"})
        check(s == 202, "set_autonomy -> %s %s" % (s, js))
        au = os.stat(audit)
        check(au.st_uid == nobody and au.st_gid == gid and
              stat.S_IMODE(au.st_mode) == 0o640, "audit-log %d:%d mode %o, "
              "want %d:%d 640" % (au.st_uid, au.st_gid,
                                  stat.S_IMODE(au.st_mode), nobody, gid))
        with open(audit) as f:
            lines = [json.loads(ln) for ln in f]
        check([(e["type"], e["level"]) for e in lines] ==
              [("autonomy_changed", "MANUAL")], "audit-log %s" % lines)

        rc, out, err = d.ctl("status", check_rc=0)
        # Refused by the socket's mode 0660 before parleyd sees it.
        out = probe(d, OTHER, OTHER)
        check("200 OK" not in out, "uid %d got the status through a 0660 "
              "socket: %s" % (OTHER, out))
        r = as_user(OTHER, OTHER, [ctl_for_others(), "-s", d.ctlsock, "status"])
        check(r.returncode != 0, "parleyctl as uid %d succeeded: %s"
              % (OTHER, r.stdout[-200:]))
        print("parleyctl as uid %d: exit %d: %s" % (OTHER, r.returncode,
                                                    r.stderr.strip()[-200:]))

        # Not root any more: a reload that needs a port below 1024 fails,
        # the running configuration stays; first by SIGHUP, then by
        # parleyctl reload, which reports the error.
        lp = low_port()
        d.extra += "listen 127.0.0.1:%d\n" % lp
        d.write_conf()
        workers = set(d.workers_pids())
        for how in ("SIGHUP", "parleyctl reload"):
            if how == "SIGHUP":
                d.signal(signal.SIGHUP)
            else:
                rc, out, err = d.ctl("reload")
                print("parleyctl reload needing port %d: exit %d: %s"
                      % (lp, rc, (out + err).strip()))
            await asyncio.sleep(0.5)
            check(d.proc.poll() is None, "parleyd exited (status %s) after a "
                  "reload (%s) that needs port %d failed"
                  % (d.proc.returncode, how, lp))
            if how != "SIGHUP":
                check(rc != 0, "parleyctl reload with listen :%d as nobody "
                      "exited 0: %s" % (lp, out))
                check(":%d" % lp in out + err, "parleyctl reload does not "
                      "say which listen failed: %s" % (out + err))
            st, _, _ = d.http("GET", "/health/ready")
            check(st == 200, "/health/ready %d after the failed reload (%s)"
                  % (st, how))
            check(set(d.workers_pids()) == workers,
                  "workers replaced by a reload that failed (%s)" % how)
            ev = await chat_turn(d, "pd-2", "hi")
            one_done(ev, "chat after the failed reload (%s)" % how)
        check("127.0.0.1:%d" % lp in d.log_text(),
              "the failed reload's reason is not logged")
        d.extra = d.extra.replace("listen 127.0.0.1:%d\n" % lp, "")
        d.write_conf()


async def peercred(gname, gid):
    """A 0666 socket: the kernel lets anyone connect, parleyd decides."""
    d = Daemon(extra="user nobody\ngroup %s\n" % gname, workers=1)
    open_tmp(d)
    base = d.conf_text
    d.conf_text = lambda: base().replace(
        "control-socket %s\n" % d.ctlsock,
        "control-socket %s mode 0666\n" % d.ctlsock)
    d.write_conf()
    nobody = pwd.getpwnam("nobody").pw_uid
    with with_daemon(d):
        sk = os.stat(d.ctlsock)
        check(stat.S_IMODE(sk.st_mode) == 0o666, "control socket mode %o, "
              "want 666 as configured" % stat.S_IMODE(sk.st_mode))
        out = probe(d, OTHER, OTHER)
        print("uid %d on a 0666 socket: %s" % (OTHER, out))
        check("200 OK" not in out and "connect:" not in out,
              "uid %d, neither owner nor in the group, was not refused by "
              "parleyd: %s" % (OTHER, out))
        r = as_user(OTHER, OTHER, [ctl_for_others(), "-s", d.ctlsock, "status"])
        check(r.returncode != 0, "parleyctl as uid %d succeeded" % OTHER)
        print("parleyctl as uid %d: exit %d: %s" % (OTHER, r.returncode,
                                                    r.stderr.strip()[-200:]))
        out = probe(d, nobody, gid)
        check("200 OK" in out, "nobody (parleyd's own uid) refused: %s" % out)
        out = probe(d, OTHER, gid)
        check("200 OK" in out, "uid %d with gid %s (the socket's group) "
              "refused: %s" % (OTHER, gname, out))
        # a member of the group (usermod -aG) whose primary group differs
        out = probe(d, OTHER, OTHER, groups=(gid,))
        check("200 OK" in out, "uid %d with %s as a supplementary group "
              "refused: %s" % (OTHER, gname, out))
        rc, out, err = d.ctl("status", check_rc=0)


async def test():
    gname, gid = nogroup()
    print("-- user nobody, group %s" % gname, flush=True)
    await dropped(gname, gid)
    print("-- SO_PEERCRED on a 0666 socket", flush=True)
    await peercred(gname, gid)

if os.geteuid() != 0:
    print("E2E-SKIP: needs root")
    sys.exit(77)
try:
    run_test("privdrop", test)
finally:
    if _ctl_copy is not None:
        shutil.rmtree(os.path.dirname(_ctl_copy), ignore_errors=True)

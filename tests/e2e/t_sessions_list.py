#!/usr/bin/python3
# GET /sessions: the sessions in memory that the token may open.  A scoped
# token sees its scope; a JWT subject sees the sessions it owns (and the
# unowned ones), not another subject's; admin sees all; no token is 401;
# the list never says which worker or process holds a session.
import sys, os, base64, hashlib, hmac
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

HS = b"e2e-sessions-list-hs256-secret-32-bytes!!"


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def jwt(sub, role="user"):
    now = int(time.time())
    si = (b64u(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." +
          b64u(json.dumps({"sub": sub, "role": role, "iat": now,
                           "exp": now + 300}).encode()))
    return si + "." + b64u(hmac.new(HS, si.encode(), hashlib.sha256).digest())


def bearer(t):
    return {"Authorization": "Bearer " + t}


def listed(d, token, query=""):
    st, js = d.http_json("GET", "/sessions" + query, headers=bearer(token))
    check(st == 200, "GET /sessions%s -> %d %s" % (query, st, js))
    check(js.get("truncated") is False, "truncated: %s" % js)
    for s in js["sessions"]:
        for k in ("worker", "pid", "owner", "follower"):
            check(k not in s, "a client is told %s: %s" % (k, s))
    return sorted(s["sessionId"] for s in js["sessions"])


async def test():
    d = Daemon(extra="token adm role admin\ntoken ua role user session a*\n"
                     "jwt-key %s HS256\n")
    secret = os.path.join(d.tmp, "hs.secret")
    with open(secret, "wb") as f:
        f.write(HS + b"\n")
    d.extra = d.extra % secret
    d.write_conf()
    with with_daemon(d):
        alice, bob = jwt("alice"), jwt("bob")
        for sid, tok in (("a1", "adm"), ("a2", "ua"), ("b1", "adm"),
                         ("al-1", alice), ("bo-1", bob)):
            st, js = d.http_json("POST", "/sessions", {"sessionId": sid},
                                 bearer(tok))
            check(st == 201, "create %s -> %d %s" % (sid, st, js))
        every = ["a1", "a2", "al-1", "b1", "bo-1"]
        check(listed(d, "adm") == every, "admin sees %s" % listed(d, "adm"))
        check(listed(d, "ua") == ["a1", "a2"], "scope a* sees %s" % listed(d, "ua"))
        got = listed(d, alice)
        check(got == ["a1", "a2", "al-1", "b1"], "alice sees %s" % got)
        got = listed(d, bob)
        check("al-1" not in got and "bo-1" in got, "bob sees %s" % got)
        st, js = d.http_json("GET", "/sessions")
        check(st == 401, "no token -> %d %s" % (st, js))
        st, js = d.http_json("GET", "/sessions?state=nope", headers=bearer("adm"))
        check(st == 400 and "state must be" in json.dumps(js), "bad state -> %d %s" % (st, js))
        check(listed(d, "adm", "?state=completed") == [], "state filter")
        # Tokens reach the daemon in headers only here; none is logged.
        log = d.log_text()
        for t in ("adm", alice, bob):
            check(t not in log.replace("admin", ""), "a token is in the log")


run_test("sessions_list", test)

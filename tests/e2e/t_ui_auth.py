#!/usr/bin/python3
# The web UI's HTTP side and its token handling:
#  a. (no browser) /ui/ and its scripts are served with the strict headers:
#     a Content-Security-Policy with default-src 'none', script-src and
#     style-src 'self' only (no 'unsafe-inline' or 'unsafe-eval', no other
#     origin), frame-ancestors 'none'; X-Content-Type-Options nosniff; the
#     right types; / redirects to /ui/; a path out of the tree is not
#     served; with tokens configured the page itself needs none, the API
#     still does;
#  b. (headless chromium, js/ui_auth.mjs) the page asks for a token, asks
#     again after a wrong one, works with the right one, keeps it in
#     sessionStorage only and never puts it in a URL; parleyd's log (its
#     access log included) never holds the token; a token a subprotocol
#     cannot carry (base64's / and =) works, through ?access_token=.
#  Screenshots: E2E_LOGDIR/ui-auth-*.png.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from ui import *

ADMIN = "ui-admin-5d8e2f"
# A token as base64 makes them: '/' and '=' cannot be in a WebSocket
# subprotocol, so the page sends this one as ?access_token=.
B64 = "uiB64+tok/9Qx=="
USER = "ui-user-7c1f0a9e4b3d"


def csp_parts(v):
    out = {}
    for part in v.split(";"):
        w = part.split()
        if w:
            out[w[0].lower()] = w[1:]
    return out


def check_headers(d, path, ctype):
    st, h, body = d.http("GET", path, headers={"Authorization": "x"})
    check(st == 200, "GET %s -> %d" % (path, st))
    check(h.get("content-type", "").startswith(ctype),
          "GET %s: Content-Type %r" % (path, h.get("content-type")))
    check(h.get("x-content-type-options", "").lower() == "nosniff",
          "GET %s: X-Content-Type-Options %r" % (path, h.get("x-content-type-options")))
    csp = h.get("content-security-policy")
    check(csp, "GET %s: no Content-Security-Policy" % path)
    p = csp_parts(csp)
    check(p.get("default-src") == ["'none'"], "%s: default-src %s" % (path, p.get("default-src")))
    for k in ("script-src", "style-src", "connect-src"):
        check(p.get(k) == ["'self'"], "%s: %s %s (want 'self' only)" % (path, k, p.get(k)))
    check(p.get("frame-ancestors") == ["'none'"], "%s: frame-ancestors %s" % (path, p.get("frame-ancestors")))
    check(p.get("base-uri") == ["'none'"], "%s: base-uri %s" % (path, p.get("base-uri")))
    for bad in ("'unsafe-inline'", "'unsafe-eval'", "http:", "https:", "*"):
        check(bad not in csp.split(), "%s: CSP allows %s: %s" % (path, bad, csp))
    return body


def headers_part(d):
    html = check_headers(d, "/ui/", "text/html").decode()
    check("<script>" not in html.replace('<script type="module" src=', "")
          and "style=" not in html and " on" + "click=" not in html,
          "inline script or style in index.html")
    for ref in ("js/app.js", "css/base.css"):
        check(ref in html, "index.html does not load %s" % ref)
    check_headers(d, "/ui/js/app.js", "text/javascript")
    for js in ("dom", "api", "conn", "chat", "team", "dash", "markdown", "graph", "charts"):
        st, h, _ = d.http("GET", "/ui/js/%s.js" % js)
        check(st == 200, "GET /ui/js/%s.js -> %d" % (js, st))
    st, h, _ = d.http("GET", "/ui/css/base.css")
    check(st == 200 and h.get("content-type", "").startswith("text/css"),
          "GET /ui/css/base.css -> %d %s" % (st, h.get("content-type")))
    st, h, _ = d.http("GET", "/")
    check(st in (301, 302, 303, 307, 308) and h.get("location") in ("/ui/", "http://%s:%d/ui/" % (d.host, d.port)),
          "GET / -> %d Location %r (want a redirect to /ui/)" % (st, h.get("location")))
    for bad in ("/ui/../parleyd.conf", "/ui/%2e%2e/parleyd.conf", "/ui/js/../../etc/passwd",
                "/ui/nope.js"):
        st, _, body = d.http("GET", bad)
        check(st in (400, 404), "GET %s -> %d %r" % (bad, st, body[:80]))
    # the page needs no token; the API does
    st, _, _ = d.http("GET", "/ui/", headers={"Authorization": "Bearer not-a-token"})
    check(st == 200, "GET /ui/ with a wrong token -> %d" % st)
    c = http.client.HTTPConnection(d.host, d.port, timeout=10)
    c.request("GET", "/sessions/x")
    r = c.getresponse(); r.read(); c.close()
    check(r.status == 401, "GET /sessions/x without a token -> %d" % r.status)


async def test():
    need_browser()
    with with_fakellm() as f:
        d = Daemon(providers=oa_provider(f.port), default="oa", token=ADMIN,
                   extra="token %s role user\ntoken %s role user\n" % (USER, B64))
        with with_daemon(d):
            headers_part(d)
            run_ui("ui_auth.mjs", d, f, env={"UI_USER_TOKEN": USER,
                                             "UI_B64_TOKEN": B64})
            log = d.log_text()
            check(B64 not in log and B64.split("/")[0] not in log,
                  "the base64 token is in parleyd's log")
            check(USER not in log, "the user's token is in parleyd's log: %s" %
                  [ln for ln in log.splitlines() if USER in ln][:2])
            wrong = "wrong-" + USER[::-1]
            check(wrong not in log, "the wrong token is in parleyd's log")
            check("/ui/" in log or "websocket open" in log,
                  "parleyd's log shows no request at all: %s" % d.log_tail())

run_test("ui_auth", test)

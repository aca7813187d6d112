#!/usr/bin/python3
# JWTs: keys made and tokens signed with the openssl command inside the
# test; every algorithm accepted (and a JWKS file's keys), every refusal
# answered 401 with its reason, session scopes with prefix* patterns, the
# token by header, ?access_token= and Sec-WebSocket-Protocol, static
# tokens beside JWTs, sub in the log and the audit trail, a renewed token
# on a live WebSocket and the 4001 close when the grace runs out, an SSE
# stream closed at exp + grace, `parleyd -t` on a bad key.
import sys, os, hashlib, hmac
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

ISS, AUD = "https://idp.example", "parley-e2e"
HS = b"e2e-hs256-secret-of-at-least-32-bytes!!"
HS512 = HS * 2
GRACE = 2


def b64u(b):
    if isinstance(b, str):
        b = b.encode()
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def ossl(*args, data=None):
    r = subprocess.run(("openssl",) + args, input=data, capture_output=True)
    if r.returncode != 0:
        raise Fail("openssl %s: %s" % (" ".join(args), r.stderr.decode()[:300]))
    return r.stdout


def der_to_jose(der, half):
    """ECDSA-Sig-Value (DER) to r||s of half bytes each (RFC 7518 3.4)."""
    i = 2 if der[1] < 0x80 else 3
    out = b""
    for _ in range(2):
        assert der[i] == 2
        n = der[i + 1]
        v = der[i + 2:i + 2 + n].lstrip(b"\0")
        out += v.rjust(half, b"\0")
        i += 2 + n
    return out


class Keys:
    def __init__(self, tmp):
        self.tmp = tmp
        self.priv, self.pub = {}, {}
        for name, args in (("rsa", ("-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048")),
                           ("p256", ("-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")),
                           ("p384", ("-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384")),
                           ("ed", ("-algorithm", "ed25519",))):
            k = os.path.join(tmp, name + ".key")
            p = os.path.join(tmp, name + ".pub")
            ossl("genpkey", *args, "-out", k)
            ossl("pkey", "-in", k, "-pubout", "-out", p)
            self.priv[name], self.pub[name] = k, p
        self.hs = os.path.join(tmp, "hs.secret")
        with open(self.hs, "wb") as f:
            f.write(HS + b"\n")

    def sign(self, alg, data):
        if alg == "HS256":
            return hmac.new(HS, data, hashlib.sha256).digest()
        if alg == "HS512":
            return hmac.new(HS512, data, hashlib.sha512).digest()
        key = {"RS256": "rsa", "PS256": "rsa", "ES256": "p256",
               "ES384": "p384", "EdDSA": "ed"}[alg]
        path = os.path.join(self.tmp, "in")
        with open(path, "wb") as f:
            f.write(data)
        k = self.priv[key]
        if alg == "EdDSA":
            return ossl("pkeyutl", "-sign", "-inkey", k, "-rawin", "-in", path)
        if alg == "PS256":
            return ossl("dgst", "-sha256", "-sign", k, "-sigopt",
                        "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest", path)
        if alg == "RS256":
            return ossl("dgst", "-sha256", "-sign", k, path)
        sig = ossl("dgst", "-sha256" if alg == "ES256" else "-sha384", "-sign", k, path)
        return der_to_jose(sig, 32 if alg == "ES256" else 48)


KIDS = {"RS256": "rs", "PS256": "ps", "ES256": "es256", "ES384": "es384",
        "EdDSA": "ed", "HS256": "hs"}


def make(keys, alg="EdDSA", kid=None, sub="alice", role="user", ttl=300,
         sessions=None, extra=None, header=None, sign_alg=None):
    now = int(time.time())
    h = header or {"alg": alg, "typ": "JWT", "kid": kid or KIDS.get(alg, "x")}
    c = {"sub": sub, "role": role, "iss": ISS, "aud": AUD, "iat": now,
         "exp": now + ttl}
    if sessions is not None:
        c["sessions"] = sessions
    c.update(extra or {})
    c = {k: v for k, v in c.items() if v is not None}
    si = (b64u(json.dumps(h)) + "." + b64u(json.dumps(c))).encode()
    return si.decode() + "." + b64u(keys.sign(sign_alg or alg, si))


def bearer(t):
    return {"Authorization": "Bearer " + t}


async def ws_status(url, headers=None, **kw):
    try:
        ws = await ws_connect(url, headers, **kw)
    except websockets.exceptions.InvalidStatusCode as e:
        return e.status_code
    await ws.close()
    return 101


async def test():
    tmp = tempfile.mkdtemp(prefix="parley-jwt-", dir="/tmp")
    try:
        await run(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def run(tmp):
    keys = Keys(tmp)
    conf = ""
    for alg, kid in KIDS.items():
        f = keys.hs if alg == "HS256" else keys.pub[
            {"RS256": "rsa", "PS256": "rsa", "ES256": "p256", "ES384": "p384",
             "EdDSA": "ed"}[alg]]
        conf += "jwt-key %s %s kid %s\n" % (f, alg, kid)
    # a JWKS: the Ed25519 key again (raw: the last 32 bytes of its DER
    # SubjectPublicKeyInfo) and an HS512 secret
    raw = ossl("pkey", "-pubin", "-in", keys.pub["ed"], "-outform", "DER")[-32:]
    jwks = os.path.join(tmp, "jwks.json")
    with open(jwks, "w") as f:
        json.dump({"keys": [
            {"kty": "OKP", "crv": "Ed25519", "kid": "jwks-ed", "use": "sig", "x": b64u(raw)},
            {"kty": "oct", "alg": "HS512", "kid": "jwks-hs", "k": b64u(HS512)}]}, f)
    conf += "jwt-jwks %s\n" % jwks
    conf += ("jwt-issuer %s\njwt-audience %s\njwt-leeway 0s\njwt-grace %ds\n"
             "token static-admin role admin\ntoken static-user role user\n"
             % (ISS, AUD, GRACE))
    d = Daemon(extra=conf)
    with with_daemon(d):
        # every algorithm, each by its kid; the token goes in the header
        for alg in KIDS:
            t = make(keys, alg, sub="sub-" + alg)
            st, js = d.http_json("POST", "/sessions", {"sessionId": "jwt-" + alg.lower()},
                                 bearer(t))
            check(st == 201, "%s token: POST /sessions -> %s %s" % (alg, st, js))
        # the keys of the JWKS file, by kid
        for alg, kid in (("EdDSA", "jwks-ed"), ("HS512", "jwks-hs")):
            st, js = d.http_json("POST", "/sessions", {"sessionId": "jwt-" + kid},
                                 bearer(make(keys, alg, kid=kid)))
            check(st == 201, "JWKS %s token: POST /sessions -> %s %s" % (kid, st, js))
        # static tokens keep working beside JWTs
        st, _ = d.http_json("GET", "/sessions/jwt-eddsa", headers=bearer("static-admin"))
        check(st == 200, "static token beside JWTs -> %d %s" % (st, _))

        # owners: a session alice's JWT created is hers; others need the
        # admin role or a token whose sessions name it (a share)
        alice = make(keys, sub="alice")
        st, js = d.http_json("POST", "/sessions", {"sessionId": "own-1"}, bearer(alice))
        check(st == 201, "alice creates own-1 -> %s %s" % (st, js))
        for who, tok, want in (
                ("alice herself", alice, 200),
                ("bob, any session", make(keys, sub="bob"), 403),
                ("bob, prefix own-*", make(keys, sub="bob", sessions=["own-*"]), 403),
                ("bob, shared own-1", make(keys, sub="bob", sessions=["own-1"]), 200),
                ("carol, JWT admin", make(keys, sub="carol", role="admin"), 200),
                ("static user token", "static-user", 403),
                ("static admin token", "static-admin", 200)):
            st, js = d.http_json("GET", "/sessions/own-1", headers=bearer(tok))
            check(st == want, "owner: %s GET /sessions/own-1 -> %s (want %d) %s"
                  % (who, st, want, js))
        st, js = d.http_json("POST", "/sessions/own-1/messages",
                             {"type": "chat", "message": "bob-was-here"},
                             bearer(make(keys, sub="bob")))
        check(st == 403, "owner: bob posts to alice's session -> %s %s" % (st, js))
        st, _, data = d.http("GET", "/sessions/own-1/log", headers=bearer("static-admin"))
        check(st == 200 and b"bob-was-here" not in data,
              "owner: bob's refused chat in the log: %d %r" % (st, data[:300]))

        # refusals: 401 with the reason, nothing secret in it
        pem = open(keys.pub["rsa"], "rb").read()
        si = (b64u(json.dumps({"alg": "HS256", "kid": "rs"})) + "." +
              b64u(json.dumps({"sub": "mallory", "role": "admin", "iss": ISS,
                               "aud": AUD, "exp": int(time.time()) + 300}))).encode()
        hs_with_pub = si.decode() + "." + b64u(hmac.new(pem, si, hashlib.sha256).digest())
        good = make(keys)
        badsig = good[:-6] + ("AAAAAA" if not good.endswith("AAAAAA") else "BBBBBB")
        none = (b64u(json.dumps({"alg": "none"})) + "." +
                b64u(json.dumps({"sub": "mallory", "role": "admin", "iss": ISS,
                                 "aud": AUD, "exp": int(time.time()) + 300})) + ".")
        cases = (
            ("alg none", none, "not signed"),
            ("HS256 keyed with the RSA public key", hs_with_pub, "algorithm"),
            ("bad signature", badsig, "bad signature"),
            ("expired", make(keys, ttl=-10), "expired"),
            ("nbf in the future", make(keys, extra={"nbf": int(time.time()) + 600}), "not valid"),
            ("wrong issuer", make(keys, extra={"iss": "https://evil.example"}), "issuer"),
            ("wrong audience", make(keys, extra={"aud": "other"}), "audience"),
            ("unknown kid", make(keys, kid="nope"), "kid"),
            ("EdDSA token under an ES256 kid", make(keys, "EdDSA", kid="es256"), "algorithm"),
            ("malformed", "abc.def.ghi", "not a JWT"),
            ("bad role", make(keys, role="root"), "role"),
            ("no exp", make(keys, extra={"exp": None}), "exp"),
            ("oversized", make(keys, extra={"pad": "x" * 9000}), "longer than"),
        )
        for what, tok, word in cases:
            st, js = d.http_json("GET", "/sessions/jwt-eddsa", headers=bearer(tok))
            msg = json.dumps(js)
            check(st == 401 and word in msg,
                  "%s: -> %s %s (want 401 naming '%s')" % (what, st, msg[:300], word))
            check(tok[-20:] not in msg and "BEGIN" not in msg,
                  "%s: the answer echoes the token" % what)

        # scopes: ids and prefix* patterns; 403 outside
        sc = make(keys, sessions=["jwt-s1", "team-*"])
        for sid, want in (("jwt-s1", 201), ("team-7", 201), ("jwt-s2", 403), ("teamx", 403)):
            st, js = d.http_json("POST", "/sessions", {"sessionId": sid}, bearer(sc))
            check(st == want, "scoped POST /sessions %s -> %s %s (want %d)" % (sid, st, js, want))
        st = await ws_status(d.url("/sessions/jwt-s2/stream"), bearer(sc))
        check(st == 403, "scoped WS outside its scope -> %s" % st)

        # sub reaches the audit trail
        st, js = d.http_json("POST", "/sessions/jwt-s1/messages",
                             {"v": 1, "type": "set_autonomy", "sessionId": "jwt-s1",
                              "level": "CAUTIOUS"}, bearer(sc))
        check(st == 202, "set_autonomy with a JWT -> %s %s" % (st, js))
        st, js = d.http_json("GET", "/api/audit?sessionId=jwt-s1",
                             headers=bearer("static-admin"))
        ch = [e for e in (js or {}).get("entries", []) if e.get("type") == "autonomy_changed"]
        check(st == 200 and ch and ch[-1].get("subject") == "alice",
              "audit trail without the JWT's sub: %s %s" % (st, js))

        # the three ways in; the query one is longer than 255 bytes
        t = make(keys, "RS256")
        check(len(t) > 255, "an RS256 token is %d bytes" % len(t))
        st, _ = d.http_json("GET", "/sessions/jwt-s1?access_token=" + t)
        check(st == 200, "?access_token= of %d bytes -> %d" % (len(t), st))
        check(await ws_status(d.url("/sessions/jwt-s1/stream?access_token=" + t)) == 101,
              "WS with ?access_token=")
        check(await ws_status(d.url("/sessions/jwt-s1/stream"), bearer(t)) == 101,
              "WS with Authorization")
        ws = await ws_connect(d.url("/sessions/jwt-s1/stream"),
                              subprotocols=["parley", "bearer." + t])
        check(ws.subprotocol == "parley", "101 chose subprotocol %r" % ws.subprotocol)
        hdr = str(ws.response_headers)
        check(t not in hdr, "the 101 echoes the token")
        await ws.close()
        st = await ws_status(d.url("/sessions/jwt-s1/stream"),
                             subprotocols=["parley", "bearer." + badsig])
        check(st == 401, "WS with a bad token as subprotocol -> %s" % st)
        # the query token is never logged
        log = d.log_text()
        check(t not in log and t[-40:] not in log, "a token is in the log")
        check("sub sub-RS256" in log or "sub alice" in log,
              "no 'sub NAME' on connection log lines")

        # The renewal and the two expiries wait on clocks of their own
        # (exp, exp + grace): they run at once (one after the other they
        # took 14 s).

        async def renewal():
            # renewal on a live WebSocket
            short = make(keys, sub="bob", ttl=3, sessions=["jwt-r*"])
            ws = await ws_connect(d.url("/sessions/jwt-r1/stream"), bearer(short))
            await ws_until(ws, lambda e: e.get("type") == "token_expiring", timeout=10)
            await ws_send(ws, {"v": 1, "type": "auth", "sessionId": "jwt-r1", "id": "a1",
                               "token": make(keys, sub="eve", ttl=60)})
            ev = await ws_until(ws, lambda e: e.get("type") == "error", timeout=5)
            check(ev[-1].get("code") == "FORBIDDEN", "renewal with another sub: %s" % ev[-1])
            await ws_send(ws, {"v": 1, "type": "auth", "sessionId": "jwt-r1", "id": "a2",
                               "token": make(keys, sub="bob", ttl=-5)})
            ev = await ws_until(ws, lambda e: e.get("type") == "error", timeout=5)
            check(ev[-1].get("code") == "UNAUTHORIZED" and "expired" in ev[-1].get("message", ""),
                  "renewal with an expired token: %s" % ev[-1])
            await ws_send(ws, {"v": 1, "type": "auth", "sessionId": "jwt-r1", "id": "a3",
                               "token": make(keys, sub="bob", ttl=60, sessions=["jwt-r*"])})
            ev = await ws_until(ws, lambda e: e.get("type") == "auth_ok", timeout=5)
            check(ev[-1].get("id") == "a3", "auth_ok %s" % ev[-1])
            # past the old exp + grace, still open and answering
            await asyncio.sleep(GRACE + 2)
            await ws_send(ws, {"v": 1, "type": "ping", "sessionId": "jwt-r1", "id": "p"})
            await ws_until(ws, lambda e: e.get("type") == "pong", timeout=5)
            await ws.close()

        async def no_renewal():
            # no renewal: closed with 4001 when the grace runs out
            exp = int(time.time()) + 3
            ws = await ws_connect(d.url("/sessions/jwt-r2/stream"),
                                  bearer(make(keys, sub="bob", extra={"exp": exp})))
            try:
                while True:
                    await ws_recv(ws, timeout=15)
            except websockets.exceptions.ConnectionClosed as e:
                check(e.code == 4001, "close code %s (want 4001)" % e.code)
            # not before exp + grace, and soon after
            check(exp + GRACE - 0.1 <= time.time() < exp + GRACE + 3,
                  "closed %.1f s after exp" % (time.time() - exp))

        async def sse_expiry():
            # SSE: closed at exp + grace
            exp = int(time.time()) + 3
            st, _, _ = await asyncio.to_thread(
                d.http, "GET", "/sessions/jwt-r3/events", timeout=20,
                headers=bearer(make(keys, sub="bob", extra={"exp": exp})))
            check(st == 200, "SSE -> %d" % st)
            check(exp + GRACE - 0.1 <= time.time() < exp + GRACE + 3,
                  "SSE closed %.1f s after exp" % (time.time() - exp))

        await asyncio.gather(renewal(), no_renewal(), sse_expiry())

    # parleyd -t names the bad key file's line
    bad = os.path.join(tmp, "bad.conf")
    with open(bad, "w") as f:
        f.write("listen 127.0.0.1:1\njwt-key %s RS256\n" % keys.pub["ed"])
    r = subprocess.run([PARLEYD, "-t", "-f", bad], capture_output=True, text=True)
    check(r.returncode != 0 and "bad.conf:2:" in r.stderr + r.stdout,
          "parleyd -t on a bad key: %s %s" % (r.returncode, r.stderr))


run_test("jwt", test)

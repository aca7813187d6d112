#!/usr/bin/python3
# TLS listeners (`listen ADDR:PORT tls`), beside a plain one, with a CA and
# server certificates this test makes with the openssl command: HTTPS with
# curl (POST /sessions, GET /log, an SSE stream), wss with python3-websockets,
# an exact resume over wss after a drop, TLS 1.1 refused, 1.2 and 1.3
# accepted, a half-done handshake closed after handshake-timeout, a refused
# body's answer through the relay, `parleyd -t` naming the line of a bad key,
# a reload with a bad key refused, and SIGHUP with a new certificate: the
# open wss connection keeps its stream, new connections get the new one.
import sys, os, signal, ssl, shutil
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

LONG = "".join("word%03d " % i for i in range(120))


def openssl(*args):
    r = subprocess.run(["openssl"] + list(args), capture_output=True,
                       text=True, timeout=30)
    check(r.returncode == 0, "openssl %s failed: %s" % (args[0], r.stderr[-300:]))


def make_certs(tmp):
    """A CA and two server certificates (CN parley-a, parley-b) for
    localhost and 127.0.0.1; returns a dict of paths."""
    p = {k: os.path.join(tmp, k) for k in (
        "ca.pem", "ca.key", "a.pem", "a.key", "b.pem", "b.key", "ext")}
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", p["ca.key"],
            "-out", p["ca.pem"], "-days", "2", "-subj", "/CN=parley-test-ca")
    with open(p["ext"], "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for n in ("a", "b"):
        csr = os.path.join(tmp, n + ".csr")
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", p[n + ".key"], "-out", csr,
                "-subj", "/CN=parley-" + n)
        openssl("x509", "-req", "-in", csr, "-CA", p["ca.pem"], "-CAkey",
                p["ca.key"], "-CAcreateserial", "-out", p[n + ".pem"],
                "-days", "2", "-extfile", p["ext"])
    return p


def tls_conf(port, cert, key):
    return ("listen 127.0.0.1:%d tls\ntls-certificate %s\ntls-key %s\n"
            % (port, cert, key))


def peer_cn(port, ctx):
    """The CN of the certificate a new connection to port gets."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        with ctx.wrap_socket(s, server_hostname="localhost") as t:
            subj = dict(x[0] for x in t.getpeercert()["subject"])
            return subj.get("commonName"), t.version()


def curl(ca, *args, timeout=20):
    r = subprocess.run(["curl", "-sS", "--cacert", ca] + list(args),
                       capture_output=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def curl_sse(ca, url, max_time):
    """Events of an SSE stream read with curl for max_time s."""
    _, out, _ = curl(ca, "-N", "-m", str(max_time), url,
                     timeout=max_time + 10)
    evs, cur = [], {}
    for ln in out.decode(errors="replace").split("\n"):
        ln = ln.rstrip("\r")
        if not ln:
            if "data" in cur:
                evs.append(json.loads(cur["data"]))
            cur = {}
        elif not ln.startswith(":") and ":" in ln:
            k, v = ln.split(":", 1)
            cur[k] = v[1:] if v.startswith(" ") else v
    return evs


async def test():
    if not shutil.which("openssl"):
        raise Fail("t_tls needs the openssl command (apt-get install openssl)")
    tport = free_port()
    d = Daemon(providers=provider_block("slow", LONG, chunk=8, delay="15ms"),
               default="slow")
    c = make_certs(d.tmp)
    ca = c["ca.pem"]
    d.extra = tls_conf(tport, c["a.pem"], c["a.key"]) + "handshake-timeout 2s\n"
    d.write_conf()
    ctx = ssl.create_default_context(cafile=ca)
    base = "https://localhost:%d" % tport
    wss = "wss://localhost:%d" % tport

    # -t names the line of a key that does not match the certificate
    bad = os.path.join(d.tmp, "bad.conf")
    with open(bad, "w") as f:
        f.write(d.conf_text().replace("tls-key " + c["a.key"],
                                      "tls-key " + c["b.key"]))
    r = subprocess.run([PARLEYD, "-t", "-f", bad], capture_output=True,
                       text=True, timeout=30)
    line = [i + 1 for i, l in enumerate(open(bad)) if l.startswith("tls-key")][0]
    check(r.returncode == 1 and ("%s:%d: tls-key" % (bad, line)) in r.stderr
          and "does not match" in r.stderr,
          "parleyd -t with a mismatched key: rc %d, %r" % (r.returncode, r.stderr))

    with with_daemon(d):
        # HTTPS with curl: create, chat over wss, read the log and SSE
        rc, out, err = curl(ca, "-X", "POST", "-H", "Content-Type: application/json",
                            "-d", '{"sessionId":"tls-1"}', base + "/sessions")
        check(rc == 0 and json.loads(out).get("sessionId") == "tls-1",
              "curl POST /sessions over TLS: rc %d %r %s" % (rc, out, err))
        ws = await ws_connect(wss + "/sessions/tls-1/stream", ssl=ctx)
        await ws_recv(ws)
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": "tls-1",
                           "message": "hello over wss"})
        ev = await ws_until(ws, is_done, timeout=30)
        await ws.close()
        seen = logged(ev)
        text = "".join(e["content"] for e in seen if e["type"] == "token")
        check(text == LONG, "reply over wss: %r" % text[:80])
        rc, out, err = curl(ca, base + "/sessions/tls-1/log?limit=500")
        check(rc == 0, "curl GET /log over TLS: rc %d %s" % (rc, err))
        log = json.loads(out)
        same_events(seen, [e for e in log if e["seq"] <= seen[-1]["seq"]],
                    "wss events vs GET /log over https")
        sse = curl_sse(ca, base + "/sessions/tls-1/events?lastSeq=0", 3)
        check([e["seq"] for e in sse if "seq" in e][:len(log)] ==
              [e["seq"] for e in log], "SSE over https: seqs %s, log %s"
              % ([e.get("seq") for e in sse][:10], [e["seq"] for e in log][:10]))
        # plain and TLS side by side: the same session either way
        st, js = d.http_json("GET", "/sessions/tls-1/log?limit=500")
        check(st == 200 and js == log, "plain GET /log differs from https")
        rc, _, _ = curl(ca, "https://127.0.0.1:%d/health" % d.port, timeout=10)
        check(rc != 0, "TLS to the plain listener succeeded")
        try:
            with socket.create_connection(("127.0.0.1", tport), timeout=5) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                got = s.recv(100)
        except OSError:
            got = b""
        check(not got.startswith(b"HTTP/"), "plain HTTP on the TLS port answered %r" % got)

        # a client that never finishes its handshake is closed in time
        s = socket.create_connection(("127.0.0.1", tport), timeout=10)
        t0 = time.time()
        s.sendall(b"\x16\x03\x01")   # the start of a ClientHello, no more
        try:
            got = s.recv(100)
        except OSError:
            got = b""
        s.close()
        check(got == b"" and time.time() - t0 < 6,
              "half a handshake: %r after %.1f s (handshake-timeout 2s)"
              % (got, time.time() - t0))
        # a refused body: the answer reaches the client through the relay
        big = os.path.join(d.tmp, "big")
        with open(big, "wb") as f:
            f.write(b"a" * (1200 * 1024))
        rc, out, err = curl(ca, "-X", "POST", "-H", "Content-Type: application/json",
                            "--data-binary", "@" + big, "-w", " %{http_code}",
                            base + "/sessions")
        check(rc == 0 and out.endswith(b" 413"), "1.2 MB body over TLS: rc %d %r %s"
              % (rc, out[-120:], err))

        # versions: 1.2 and 1.3 served, 1.1 refused by the server
        for opt, want in (("--tlsv1.2", "TLSv1.2"), ("--tlsv1.3", "TLSv1.3")):
            rc, out, err = curl(ca, opt, "--tls-max", want[4:], "-w",
                                "%{http_code}", "-o", "/dev/null", base + "/health")
            check(rc == 0 and out == b"200", "%s: rc %d %r %s" % (want, rc, out, err))
        rc, out, err = curl(ca, "--tlsv1.1", "--tls-max", "1.1", "--ciphers",
                            "DEFAULT@SECLEVEL=0", base + "/health")
        check(rc != 0 and "protocol version" in err,
              "TLS 1.1 not refused by the server: rc %d %s" % (rc, err))

        # exact resume over wss after a dropped connection
        ws = await ws_connect(wss + "/sessions/tls-2/stream", ssl=ctx)
        await ws_recv(ws)
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": "tls-2",
                           "message": "resume me"})
        ev = []
        await ws_until(ws, lambda e: sum(1 for x in ev if x.get("type") == "token") >= 4,
                       into=ev)
        seen = logged(ev)
        ws.transport.abort()   # a drop, not a close
        ws = await ws_connect(wss + "/sessions/tls-2/stream?lastSeq=%d"
                              % seen[-1]["seq"], ssl=ctx)
        st = await ws_recv(ws)
        ev = await ws_until(ws, is_done, timeout=30)
        await ws.close()
        seen += logged(ev)
        check_contiguous(seen, 1, "wss resume after a drop")
        same_events(seen, d.log_events("tls-2")[:len(seen)], "resumed wss vs log")
        text = "".join(e["content"] for e in seen if e["type"] == "token")
        check(text == LONG, "resumed reply: %r" % text[-80:])

        # SIGHUP with a new certificate, a wss stream open across it
        cn, _ = peer_cn(tport, ctx)
        check(cn == "parley-a", "certificate before the reload: %s" % cn)
        ws = await ws_connect(wss + "/sessions/tls-3/stream", ssl=ctx)
        await ws_recv(ws)
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": "tls-3",
                           "message": "across the reload"})
        ev = []
        await ws_until(ws, lambda e: sum(1 for x in ev if x.get("type") == "token") >= 2,
                       into=ev)
        # a reload with a key that does not match is refused: the running
        # certificate stays
        d.extra = tls_conf(tport, c["b.pem"], c["a.key"])
        d.write_conf()
        d.signal(signal.SIGHUP)
        deadline = time.time() + 15
        while "reload failed" not in d.log_text():
            check(time.time() < deadline, "no 'reload failed' for a bad key")
            await asyncio.sleep(0.1)
        check(peer_cn(tport, ctx)[0] == "parley-a",
              "a refused reload changed the certificate")
        d.extra = tls_conf(tport, c["b.pem"], c["b.key"])
        d.write_conf()
        d.signal(signal.SIGHUP)
        deadline = time.time() + 15
        while peer_cn(tport, ctx)[0] != "parley-b":
            check(time.time() < deadline, "new connections still get the old "
                  "certificate 15 s after SIGHUP")
            await asyncio.sleep(0.1)
        # The connection opened before is the same TLS connection: it
        # reads on, through the reply's end or a clean 1001 from the
        # old worker generation, never a dropped stream.
        after = []
        try:
            await ws_until(ws, is_done, timeout=30, into=after)
            how = "done"
        except websockets.exceptions.ConnectionClosed as e:
            how = e.code
        print("reload: stream ended with %s after %d events" % (how, len(after)))
        check(how in ("done", 1001), "wss stream across the reload ended %s" % how)
        check(any(x.get("type") == "token" for x in after) or how == 1001,
              "no event on the open wss connection after the reload")
        rc, out, err = curl(ca, "-w", "%{http_code}", "-o", "/dev/null",
                            base + "/health")
        check(rc == 0 and out == b"200", "https after the reload: rc %d %s" % (rc, err))
        # /metrics counts the handshakes: the failed ones above too
        st, _, body = d.http("GET", "/metrics")
        from prometheus_client.parser import text_string_to_metric_families
        fams = {f.name: f for f in text_string_to_metric_families(body.decode())}
        check("parley_tls_handshakes" in fams and "parley_tls_connections" in fams
              and fams["parley_tls_connections"].documentation,
              "TLS families not read by the Prometheus parser: %s"
              % [n for n in fams if "tls" in n])
        m = dict(l.rsplit(" ", 1) for l in body.decode().splitlines()
                 if l.startswith("parley_tls_"))
        check(st == 200 and int(m.get('parley_tls_handshakes_total{result="ok"}', 0)) >= 10
              and int(m.get('parley_tls_handshakes_total{result="failed"}', 0)) >= 2
              and 'parley_tls_connections{state="relay"}' in m,
              "/metrics TLS families: %s" % m)


run_test("tls", test)

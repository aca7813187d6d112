#!/usr/bin/python3
"""What TLS costs against the plain listener beside it.

One parleyd (2 workers, script provider) listens twice: plain on one port
and `tls` on another, with a P-256 certificate this script makes with the
openssl command.  Rounds alternate plain and TLS so both see the same
machine:

  connect   N new connections one after another, each GET /health/live
            (a full handshake each: no session resumption); the daemon's
            CPU (supervisor + workers, /proc) per connection and the
            client's connect+answer latency (p50, p99);
  replay    a WebSocket client resumes one session from lastSeq=0 and reads
            its E one-character token events; events/s and the daemon's
            CPU per event.

The Python client runs on the same machine and is slower than the daemon:
compare the daemon's CPU figures, and the plain/TLS ratios, not the rates.

usage: bench/tls_cost.py [PARLEYD] [--conns N] [--events E] [--rounds R]
                         (default 1500, 50000, 3; about a minute)
                         [--out FILE]
Prints one JSON object (and writes it to --out).
"""
import argparse, asyncio, json, os, socket, ssl, statistics, subprocess
import sys, tempfile, time

try:
    import websockets
except ImportError:
    sys.exit("needs Debian's python3-websockets: run with /usr/bin/python3")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True,
                   capture_output=True, timeout=30)


def certs(tmp):
    ca, cak = os.path.join(tmp, "ca.pem"), os.path.join(tmp, "ca.key")
    crt, key = os.path.join(tmp, "srv.pem"), os.path.join(tmp, "srv.key")
    csr, ext = os.path.join(tmp, "srv.csr"), os.path.join(tmp, "ext")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", cak, "-out", ca, "-days", "1",
            "-subj", "/CN=bench-ca")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", cak,
            "-CAcreateserial", "-out", crt, "-days", "1", "-extfile", ext)
    return ca, crt, key


def cpu_ticks(pid):
    """utime + stime of pid and its children (the workers), in ticks:
    (supervisor, all)."""
    pids = [pid]
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            pids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    t = sup = 0
    for p in pids:
        try:
            with open("/proc/%d/stat" % p) as f:
                st = f.read().rsplit(")", 1)[1].split()
            t += int(st[11]) + int(st[12])
            if p == pid:
                sup = t
        except OSError:
            pass
    return sup, t


def cpu_us(pid, c0, n):
    """Per-unit CPU (us) of the supervisor and of all since c0."""
    c1 = cpu_ticks(pid)
    return ((c1[0] - c0[0]) / TCK / n * 1e6, (c1[1] - c0[1]) / TCK / n * 1e6)


def health(port, ctx):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if ctx is not None:
        s = ctx.wrap_socket(s, server_hostname="localhost")
    s.sendall(b"GET /health/live HTTP/1.1\r\nHost: localhost\r\n"
              b"Connection: close\r\n\r\n")
    got = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        got += b
    s.close()
    if not got.startswith(b"HTTP/1.1 200"):
        raise RuntimeError("bad answer %r" % got[:80])


def connect_round(pid, port, ctx, n):
    lat = []
    c0 = cpu_ticks(pid)
    t0 = time.monotonic()
    for _ in range(n):
        a = time.monotonic()
        health(port, ctx)
        lat.append((time.monotonic() - a) * 1000)
    wall = time.monotonic() - t0
    sup, cpu = cpu_us(pid, c0, n)
    lat.sort()
    return {"conns_per_s": n / wall, "daemon_cpu_us_per_conn": cpu,
            "supervisor_cpu_us_per_conn": sup,
            "p50_ms": lat[len(lat) // 2], "p99_ms": lat[int(len(lat) * 0.99)]}


async def replay_round(pid, url, ctx, sid):
    c0 = cpu_ticks(pid)
    t0 = time.monotonic()
    n = 0
    async with websockets.connect(url + "/sessions/%s/stream?lastSeq=0" % sid,
                                  ssl=ctx, max_size=None,
                                  ping_interval=None) as ws:
        while True:
            e = json.loads(await ws.recv())
            if "seq" in e:
                n += 1
            if e.get("type") == "done":
                break
    wall = time.monotonic() - t0
    sup, cpu = cpu_us(pid, c0, n)
    return {"events": n, "events_per_s": n / wall,
            "daemon_cpu_us_per_event": cpu,
            "supervisor_cpu_us_per_event": sup}


async def fill(port, sid, timeout=300):
    async with websockets.connect("ws://127.0.0.1:%d/sessions/%s/stream"
                                  % (port, sid), max_size=None,
                                  ping_interval=None) as ws:
        await ws.recv()
        await ws.send(json.dumps({"v": 1, "type": "chat", "sessionId": sid,
                                  "message": "fill"}))
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            e = json.loads(await asyncio.wait_for(ws.recv(), timeout))
            if e.get("type") == "done":
                return
    raise RuntimeError("fill: no done")


def median_of(rows, key):
    return statistics.median(r[key] for r in rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("parleyd", nargs="?", default=os.path.join(ROOT, "parleyd"))
    ap.add_argument("--conns", type=int, default=1500)
    ap.add_argument("--events", type=int, default=50000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="parley-tlsbench-")
    ca, crt, key = certs(tmp)
    plain, tls = free_port(), free_port()
    conf = os.path.join(tmp, "parleyd.conf")
    with open(conf, "w") as f:
        f.write("listen 127.0.0.1:%d\nlisten 127.0.0.1:%d tls\n"
                "tls-certificate %s\ntls-key %s\nworkers 2\nstate-dir %s\n"
                "control-socket none\nflush-interval 0\n"
                "max-connections-per-address 0\nlog-level warn\n"
                "provider fill {\n type script\n reply \"%s\"\n chunk 1\n"
                " delay 0\n}\ndefault-provider fill\n"
                % (plain, tls, crt, key, os.path.join(tmp, "state"),
                   "x" * a.events))
    log = open(os.path.join(tmp, "parleyd.log"), "wb")
    d = subprocess.Popen([a.parleyd, "-d", "-f", conf], stdout=log,
                         stderr=subprocess.STDOUT)
    try:
        end = time.time() + 20
        while True:
            try:
                health(plain, None)
                break
            except (OSError, RuntimeError):
                if time.time() > end or d.poll() is not None:
                    sys.exit("parleyd did not start; see %s" % tmp)
                time.sleep(0.1)
        ctx = ssl.create_default_context(cafile=ca)
        asyncio.run(fill(plain, "bench-tls"))
        res = {"plain": {"connect": [], "replay": []},
               "tls": {"connect": [], "replay": []}}
        for _ in range(a.rounds):
            for name, port, c, scheme in (("plain", plain, None, "ws"),
                                          ("tls", tls, ctx, "wss")):
                res[name]["connect"].append(connect_round(d.pid, port, c,
                                                          a.conns))
                url = "%s://localhost:%d" % (scheme, port)
                res[name]["replay"].append(asyncio.run(
                    replay_round(d.pid, url, c, "bench-tls")))
        summary = {}
        for name in ("plain", "tls"):
            summary[name] = {
                "conns_per_s": median_of(res[name]["connect"], "conns_per_s"),
                "daemon_cpu_us_per_conn": median_of(res[name]["connect"],
                                                    "daemon_cpu_us_per_conn"),
                "supervisor_cpu_us_per_conn": median_of(
                    res[name]["connect"], "supervisor_cpu_us_per_conn"),
                "connect_p50_ms": median_of(res[name]["connect"], "p50_ms"),
                "connect_p99_ms": median_of(res[name]["connect"], "p99_ms"),
                "replay_events_per_s": median_of(res[name]["replay"],
                                                 "events_per_s"),
                "daemon_cpu_us_per_event": median_of(
                    res[name]["replay"], "daemon_cpu_us_per_event"),
                "supervisor_cpu_us_per_event": median_of(
                    res[name]["replay"], "supervisor_cpu_us_per_event")}
        out = {"scenario": "tls", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                         time.gmtime()),
               "host": socket.gethostname(), "nproc": os.cpu_count(),
               "conns": a.conns, "events": a.events, "rounds": a.rounds,
               "tls_version": "TLSv1.3", "certificate": "EC P-256",
               "median": summary, "rounds_raw": res}
        js = json.dumps(out, indent=1)
        print(js)
        if a.out:
            with open(a.out, "w") as f:
                f.write(js + "\n")
    finally:
        d.terminate()
        try:
            d.wait(15)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait()
        log.close()


if __name__ == "__main__":
    main()

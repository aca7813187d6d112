"""Shared helpers for the parleyd end-to-end tests.

A test script calls run_test(name, fn); fn gets nothing and raises (usually
Fail or AssertionError) when something is wrong.  Daemon() starts a private
parleyd on a free loopback port with a fresh state directory and stops it at
the end, failing the test if a sanitizer reported anything in its log.
"""

import asyncio
import base64
import json
import os
import shutil
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import http.client

try:
    import websockets
except ImportError:  # the run script checks first; be clear anyway
    print("E2E-FAIL: /usr/bin/python3 cannot import websockets "
          "(apt-get install python3-websockets)")
    sys.exit(1)

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.dirname(HERE)
PARLEYD = os.environ.get("PARLEYD") or os.path.join(E2E, "..", "..", "parleyd")
PARLEYCTL = os.environ.get("PARLEYCTL") or os.path.join(os.path.dirname(PARLEYD), "parleyctl")
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "runtime error:", "LeakSanitizer")

# Reply of the default fast provider; tests look for it in streamed output.
FAST_REPLY = "Hello from the parley end-to-end script provider."


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def stop_proc(proc, grace):
    """SIGTERM proc, SIGKILL it if still there after grace seconds; waits."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def provider_block(name, reply, chunk=4, delay="2ms"):
    r = reply.replace("\\", "\\\\").replace('"', '\\"')
    return ('provider %s {\n    type script\n    reply "%s"\n'
            '    chunk %d\n    delay %s\n}\n' % (name, r, chunk, delay))


def proc_running(pid):
    """Whether pid runs (a zombie does not).  It may go between the open
    and the read of its stat: reading it then fails with ESRCH."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            # "pid (comm) state ...": comm may hold spaces
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Daemon:
    """A private parleyd: Daemon(extra=..., providers=...).start().

    For the multi-host tests (tests/e2e/lib/cluster.py): netns runs it
    under `ip netns exec NETNS`; host is the address it listens on (and
    the one the helpers below connect to); token adds `token TOKEN role
    admin` (parleyd refuses a non-loopback listener without one), which
    http() then sends as a bearer token and url() as ?access_token=;
    store, host_id and lease add those directives; port fixes the port
    (default: a free one)."""

    def __init__(self, extra="", providers=None, default="fast",
                 flush="20ms", workers=2, retention="24h",
                 heartbeat="15s", idle_timeout="10m", env=None,
                 netns=None, host="127.0.0.1", token=None, store=None,
                 host_id=None, lease=None, port=None, bare_port=False):
        self.env = env
        # bare_port: `listen PORT`, the loopback addresses 127.0.0.1 and ::1
        self.bare_port = bare_port
        self.netns = netns
        self.host = host
        self.token = token
        # E2E_REDIS_URL (set by `run` with E2E_STORE=redis): every test
        # that does not choose a store runs on that Redis instead.
        self.store = store or os.environ.get("E2E_REDIS_URL")
        self.host_id = host_id
        self.lease = lease
        self.tmp = tempfile.mkdtemp(prefix="parley-e2e-", dir="/tmp")
        self.state = os.path.join(self.tmp, "state")
        os.mkdir(self.state)
        self.conf = os.path.join(self.tmp, "parleyd.conf")
        self.logpath = os.path.join(self.tmp, "parleyd.log")
        self.ctlsock = os.path.join(self.tmp, "control.sock")
        self.port = port or free_port()
        self.extra = extra
        self.workers = workers
        self.flush = flush
        self.retention = retention
        self.heartbeat = heartbeat
        self.idle_timeout = idle_timeout
        self.default = default
        self.providers = providers if providers is not None else \
            provider_block("fast", FAST_REPLY)
        self.proc = None
        self.logs = []
        self.write_conf()

    def conf_text(self):
        listen = str(self.port) if self.bare_port else \
            "%s:%d" % (self.host, self.port)
        return ("listen %s\nworkers %d\nstate-dir %s\n"
                "control-socket %s\n"
                "retention %s\nidle-timeout %s\nflush-interval %s\n"
                "heartbeat-interval %s\n%s%s%sdefault-provider %s\n" %
                (listen, self.workers, self.state, self.ctlsock,
                 self.retention, self.idle_timeout, self.flush,
                 self.heartbeat, self.cluster_conf(), self.extra,
                 self.providers, self.default))

    def cluster_conf(self):
        """The directives of the token, store, host_id and lease settings."""
        out = ""
        if self.token:
            out += "token %s role admin\n" % self.token
        if self.store:
            out += "store %s\n" % self.store
        if self.host_id:
            out += "host-id %s\n" % self.host_id
        if self.lease:
            out += "lease-time %s\n" % self.lease
        return out

    def argv(self):
        argv = [PARLEYD, "-d", "-f", self.conf]
        if self.netns:  # ip netns exec execs parleyd: proc.pid is parleyd
            argv = [shutil.which("ip") or "/usr/sbin/ip", "netns", "exec",
                    self.netns] + argv
        return argv

    def write_conf(self, text=None):
        with open(self.conf, "w") as f:
            f.write(self.conf_text() if text is None else text)

    def start(self, timeout=30):
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        env.update(self.env or {})
        logf = open(self.logpath, "ab")
        self.proc = subprocess.Popen(self.argv(),
                                     stdin=subprocess.DEVNULL, stdout=logf,
                                     stderr=subprocess.STDOUT, env=env,
                                     close_fds=True)
        logf.close()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout=30):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise Fail("parleyd exited with %s before ready; log tail: %s"
                           % (self.proc.returncode, self.log_tail()))
            try:
                st, _, _ = self.http("GET", "/health/ready", timeout=2)
                last = st
                if st == 200:
                    return
            except OSError as e:
                last = e
            time.sleep(0.1)
        raise Fail("parleyd not ready after %ss (last: %s); log tail: %s"
                   % (timeout, last, self.log_tail()))

    def ctl(self, *args, timeout=30, input=None, check_rc=None):
        """Runs parleyctl -s <this daemon's control socket> ARGS; returns
        (exit status, stdout, stderr).  check_rc: fail unless it exits so."""
        r = subprocess.run([PARLEYCTL, "-s", self.ctlsock] + list(args),
                           capture_output=True, text=True, timeout=timeout,
                           input=input)
        if check_rc is not None and r.returncode != check_rc:
            raise Fail("parleyctl %s exited %d (want %d): %s%s" %
                       (" ".join(args), r.returncode, check_rc,
                        r.stdout[-400:], r.stderr[-400:]))
        return r.returncode, r.stdout, r.stderr

    def workers_pids(self):
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)],
                             capture_output=True, text=True).stdout
        return [int(x) for x in out.split()]

    def signal(self, sig):
        self.proc.send_signal(sig)

    def kill_workers(self, timeout=30):
        """SIGKILL every worker; returns once as many new ones are up and
        /health says every worker is ready."""
        old = self.workers_pids()
        for p in old:
            os.kill(p, signal.SIGKILL)
        deadline = time.time() + timeout
        while True:
            new = self.workers_pids()
            if len(new) >= len(old) and not set(new) & set(old):
                st, _, _ = self.http("GET", "/health")
                if st == 200:
                    return
            check(time.time() < deadline, "workers not back after SIGKILL")
            time.sleep(0.1)

    def stop(self):
        """SIGTERM, wait, SIGKILL after 10 s; returns the exit status."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        pids = self.workers_pids()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        for p in pids:  # no orphaned workers left behind
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        return self.proc.returncode

    def kill_all(self):
        """SIGKILL the supervisor and every worker at once."""
        pids = self.workers_pids()
        for p in [self.proc.pid] + pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        self.proc.wait(10)
        deadline = time.time() + 10
        while time.time() < deadline and any(map(proc_running, pids)):
            time.sleep(0.05)

    def crash(self):
        """A host crash: SIGSTOP the supervisor and every worker first, so
        that none runs another instruction (kill_all's SIGKILL of the
        supervisor lets a worker see its channel close and stop cleanly,
        releasing what it holds, before its own SIGKILL lands), then
        SIGKILL them all; waits like kill_all."""
        pids = self.workers_pids()
        stopped = [self.proc.pid] + pids
        for p in stopped:
            try:
                os.kill(p, signal.SIGSTOP)
            except OSError:
                pass
        for p in self.workers_pids():   # one forked in between
            if p not in stopped:
                stopped.append(p)
                try:
                    os.kill(p, signal.SIGSTOP)
                except OSError:
                    pass
        for p in stopped:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        self.proc.wait(10)
        deadline = time.time() + 10
        while time.time() < deadline and any(map(proc_running,
                                                 stopped[1:])):
            time.sleep(0.05)

    def log_text(self):
        try:
            with open(self.logpath, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_tail(self, n=15):
        return " | ".join(self.log_text().splitlines()[-n:])

    def sanitizer_report(self):
        text = self.log_text()
        for m in SANITIZER_MARKS:
            i = text.find(m)
            if i >= 0:
                return text[i:i + 600]
        return None

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- HTTP ---------------------------------------------------------------

    def http(self, method, path, body=None, headers=None, timeout=10):
        """One request; returns (status, headers dict lower-case, body bytes)."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        if self.token and not any(k.lower() == "authorization"
                                  for k in (headers or {})):
            headers = dict(headers or {})
            headers["Authorization"] = "Bearer " + self.token
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
                headers = dict(headers or {})
                headers.setdefault("Content-Type", "application/json")
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            c.close()

    def http_json(self, method, path, body=None, headers=None):
        st, h, data = self.http(method, path, body, headers)
        try:
            js = json.loads(data) if data else None
        except ValueError:
            raise Fail("%s %s: %d with non-JSON body %r"
                       % (method, path, st, data[:200]))
        return st, js

    def raw(self, data, timeout=5):
        """Send raw bytes, read until the server closes; returns the bytes."""
        s = socket.create_connection((self.host, self.port), timeout=timeout)
        try:
            s.sendall(data)
            out = b""
            while True:
                try:
                    b = s.recv(65536)
                except socket.timeout:
                    raise Fail("no close after raw request %r (got %r)"
                               % (data[:60], out[:200]))
                if not b:
                    return out
                out += b
        finally:
            s.close()

    def url(self, path, scheme="ws"):
        if self.token and "access_token=" not in path:
            path += ("&" if "?" in path else "?") + "access_token=" + self.token
        return "%s://%s:%d%s" % (scheme, self.host, self.port, path)

    def last_seq(self, sid):
        st, js = self.http_json("GET", "/sessions/%s" % sid)
        check(st == 200, "GET /sessions/%s -> %s %s" % (sid, st, js))
        return js["lastSeq"]

    def log_events(self, sid, after=0):
        events = []
        while True:
            st, js = self.http_json("GET", "/sessions/%s/log?after=%d&limit=500"
                                    % (sid, after))
            check(st == 200 and isinstance(js, list),
                  "GET log -> %s %r" % (st, js))
            if not js:
                return events
            events += js
            after = js[-1]["seq"]


# -- WebSocket helpers (python3-websockets 10.4 client API) ------------------

async def ws_connect(url, headers=None, **kw):
    return await asyncio.wait_for(websockets.connect(
        url, extra_headers=headers or {}, max_size=None, open_timeout=10,
        close_timeout=2, ping_interval=None, **kw), 15)


async def ws_recv(ws, timeout=10):
    m = await asyncio.wait_for(ws.recv(), timeout)
    return json.loads(m)


async def ws_send(ws, obj):
    await ws.send(json.dumps(obj))


async def log_until(d, sid, pred, what, timeout=20):
    """Polls sid's log until pred(events); returns them, or fails with
    what and the log's end."""
    deadline = time.time() + timeout
    while True:
        evs = d.log_events(sid)
        if pred(evs):
            return evs
        if time.time() > deadline:
            raise Fail("%s; log ends %s" % (what, [short(e) for e in evs[-8:]]))
        await asyncio.sleep(0.1)


async def ws_until(ws, pred, timeout=20, into=None):
    """Receive until pred(event) is true; returns the events read."""
    got = [] if into is None else into
    deadline = time.time() + timeout
    while True:
        left = deadline - time.time()
        if left <= 0:
            raise Fail("timed out waiting; last events: %s"
                       % [short(e) for e in got[-5:]])
        e = await ws_recv(ws, left)
        got.append(e)
        if pred(e):
            return got


def _crc32c(data, crc=0):
    """CRC-32C, as src/store_seg.c computes it (slow, for small texts)."""
    c = crc ^ 0xffffffff
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82f63b78 if c & 1 else c >> 1
    return c ^ 0xffffffff


def _meta_slots(state, sid):
    """[(generation, text, slot)] of the valid meta slots of a local-store
    session (the format in src/store_seg.c), newest first."""
    out = []
    for i in (0, 1):
        try:
            with open(os.path.join(state, "sessions", sid, "meta.%d" % i),
                      "rb") as f:
                b = f.read()
        except FileNotFoundError:
            continue
        if len(b) < 32 or b[:8] != b"PARLEYMT":
            continue
        gen, n, ver, _, crc = struct.unpack("<QIIII", b[8:32])
        if n > len(b) - 32 or ver != 1 or \
                _crc32c(b[32:32 + n], _crc32c(b[8:28])) != crc:
            continue
        out.append((gen, b[32:32 + n].decode(), i))
    return sorted(out, reverse=True)


def store_meta_read(state, sid):
    """A local-store session's meta as parleyd reads it (the newest valid
    slot, else the v1 meta file), parsed."""
    s = _meta_slots(state, sid)
    if s:
        return json.loads(s[0][1])
    with open(os.path.join(state, "sessions", sid, "meta")) as f:
        return json.load(f)


def store_meta_write(state, sid, obj):
    """Replaces a stopped daemon's session meta the way parleyd does: the
    next generation into the slot that does not hold the newest."""
    s = _meta_slots(state, sid)
    gen, slot = (s[0][0] + 1, 1 - s[0][2]) if s else (1, 0)
    text = json.dumps(obj).encode()
    hdr = struct.pack("<QIII", gen, len(text), 1, 0)
    crc = _crc32c(text, _crc32c(hdr))
    with open(os.path.join(state, "sessions", sid, "meta.%d" % slot),
              "wb") as f:
        f.write(b"PARLEYMT" + hdr + struct.pack("<I", crc) + text)


def short(e):
    return "%s/%s" % (e.get("type"), e.get("seq", "-"))


def is_done(e):
    return e.get("type") == "done"


def is_idle(e):
    return e.get("type") == "agent_state" and e.get("status") == "idle"


def logged(events):
    return [e for e in events if "seq" in e and e.get("type") not in
            ("ack", "pong")]


def check_contiguous(events, first, what):
    """events (logged only) must have seq first, first+1, ... exactly."""
    check_seqs([e["seq"] for e in events], first, what)


def check_seqs(seqs, first, what):
    """seqs must be first, first+1, ... exactly."""
    want = list(range(first, first + len(seqs)))
    if seqs != want:
        # name the first difference, not the whole list
        for i, (a, b) in enumerate(zip(seqs, want)):
            if a != b:
                raise Fail("%s: seq %d at position %d, expected %d "
                           "(gap or duplicate); seqs around: %s"
                           % (what, a, i, b, seqs[max(0, i - 3):i + 4]))
        raise Fail("%s: bad seq list %s" % (what, seqs[:20]))


def same_events(a, b, what):
    """Two views of the log must agree on seq, type and content."""
    check(len(a) == len(b), "%s: %d events vs %d" % (what, len(a), len(b)))
    for x, y in zip(a, b):
        kx = (x.get("seq"), x.get("type"), x.get("content"), x.get("messageId"))
        ky = (y.get("seq"), y.get("type"), y.get("content"), y.get("messageId"))
        check(kx == ky, "%s: %s differs from %s" % (what, kx, ky))


def run_example(argv, src, port, tmp, name, timeout, until=None, env=None):
    """A client example src, written for localhost:7777: writes it for
    port to tmp/name, runs argv + [path] and returns (stdout, stderr) as
    text.  until: stop once stdout holds it (a client that stays connected
    after done), else wait for a zero exit."""
    check("localhost:7777" in src, "%s: no localhost:7777 in the example"
          % name)
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(src.replace("localhost:7777", "localhost:%d" % port))
    p = subprocess.Popen(argv + [path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, cwd=tmp)
    out = b""
    deadline = time.time() + timeout
    try:
        while until is None or until not in out:
            left = deadline - time.time()
            if left <= 0:
                raise Fail("%s: no %r after %d s; output %r" %
                           (name, until or "exit", timeout, out[-300:]))
            r, _, _ = select.select([p.stdout], [], [], left)
            if r:
                b = os.read(p.stdout.fileno(), 4096)
                if not b:
                    break
                out += b
        if until is None:
            p.wait(max(1, deadline - time.time()))
    finally:
        if p.poll() is None:
            p.kill()
        err = p.communicate(timeout=10)[1]
    text, etext = out.decode(errors="replace"), err.decode(errors="replace")
    print("--- %s\n%s\n--- stderr: %s" % (name, text, etext[-500:]))
    if until is None:
        check(p.returncode == 0, "%s exited %d: %r" % (name, p.returncode,
                                                       etext[-300:]))
    return text, etext


def run_test(name, fn):
    """Run fn(); print the outcome; exit 0 on pass."""
    try:
        r = fn()
        if asyncio.iscoroutine(r):
            asyncio.run(asyncio.wait_for(r, 180))
    except (Fail, AssertionError) as e:
        print("E2E-FAIL: %s" % e)
        sys.exit(1)
    except Exception as e:  # any surprise is a failure with its reason
        traceback.print_exc()
        print("E2E-FAIL: %s: %s" % (type(e).__name__, e))
        sys.exit(1)
    print("ok %s" % name)
    sys.exit(0)


class with_daemon:
    """Context manager: start, yield, stop, fail on sanitizer reports."""

    def __init__(self, d):
        self.d = d

    def __enter__(self):
        try:
            return self.d.start()
        except BaseException:
            self.d.stop()
            self.d.cleanup()
            raise

    def __exit__(self, et, ev, tb):
        try:
            self.d.stop()
            rep = self.d.sanitizer_report()
            if rep and et is None:
                raise Fail("sanitizer report in parleyd log: %s" % rep)
            if et is not None:
                print("parleyd log tail:\n" + "\n".join(
                    self.d.log_text().splitlines()[-30:]))
        finally:
            if os.environ.get("E2E_KEEP"):
                print("kept", self.d.tmp)
            else:
                self.d.cleanup()
        return False


# -- raw WebSocket client, for frames the websockets module will not send ----

class RawWS:
    def __init__(self, port, path, rcvbuf=None, timeout=10, headers=""):
        self.s = socket.socket()
        if rcvbuf:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.settimeout(timeout)
        self.s.connect(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
                        "%s\r\n" % (path, port, key, headers)).encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            b = self.s.recv(4096)
            if not b:
                raise Fail("connection closed during handshake: %r" % self.buf)
            self.buf += b
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        self.status = int(head.split(b" ")[1])
        if self.status != 101:
            raise Fail("handshake %s: %r" % (path, head[:200]))

    @staticmethod
    def frame(opcode, payload, mask=True, fin=True, rsv=0):
        b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
        n = len(payload)
        if n < 126:
            hdr = struct.pack("!BB", b0, (0x80 if mask else 0) | n)
        elif n < 65536:
            hdr = struct.pack("!BBH", b0, (0x80 if mask else 0) | 126, n)
        else:
            hdr = struct.pack("!BBQ", b0, (0x80 if mask else 0) | 127, n)
        if not mask:
            return hdr + payload
        k = os.urandom(4)
        return hdr + k + bytes(c ^ k[i % 4] for i, c in enumerate(payload))

    def send_frame(self, opcode, payload, **kw):
        self.s.sendall(self.frame(opcode, payload, **kw))

    def send_json(self, obj):
        self.send_frame(1, json.dumps(obj).encode())

    def _need(self, n):
        while len(self.buf) < n:
            b = self.s.recv(65536)
            if not b:
                raise EOFError("server closed the TCP connection")
            self.buf += b

    def recv_frame(self):
        """Returns (opcode, payload); answers nothing by itself."""
        self._need(2)
        b0, b1 = self.buf[0], self.buf[1]
        n = b1 & 0x7F
        off = 2
        if n == 126:
            self._need(4)
            n = struct.unpack("!H", self.buf[2:4])[0]
            off = 4
        elif n == 127:
            self._need(10)
            n = struct.unpack("!Q", self.buf[2:10])[0]
            off = 10
        check(not (b1 & 0x80), "server sent a masked frame")
        self._need(off + n)
        payload = self.buf[off:off + n]
        self.buf = self.buf[off + n:]
        return b0 & 0x0F, payload

    def recv_event(self):
        """Next JSON text event, or ('close', code) tuple on a close frame."""
        while True:
            op, p = self.recv_frame()
            if op == 1:
                return json.loads(p)
            if op == 8:
                code = struct.unpack("!H", p[:2])[0] if len(p) >= 2 else None
                return ("close", code)
            # ping/pong and others: skip

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def tcp_table():
    """The rows of /proc/net/tcp and tcp6, each split into its fields."""
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(path).read().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            yield ln.split()


def sock_inodes_for_port(local_port):
    """Inodes of server-side sockets whose peer is our local_port."""
    inodes = set()
    for f in tcp_table():
        if int(f[2].split(":")[1], 16) == local_port:
            inodes.add(f[9])
    return inodes


def owner_of(pids, local_port):
    """The worker pid among pids holding the server end of our socket."""
    inodes = sock_inodes_for_port(local_port)
    for p in pids:
        try:
            for fd in os.listdir("/proc/%d/fd" % p):
                try:
                    t = os.readlink("/proc/%d/fd/%s" % (p, fd))
                except OSError:
                    continue
                if t.startswith("socket:[") and t[8:-1] in inodes:
                    return p
        except OSError:
            continue
    return None


# -- fake LLM provider (tests/fixtures/fakellm.py) -----------------------------

FAKELLM = os.path.join(E2E, "..", "fixtures", "fakellm.py")


class FakeLLM:
    """A private fakellm on a free loopback port: FakeLLM().start().

    script(steps) queues what the next requests get; requests() is what it
    received; wait_for(pred) polls requests() until pred(list) is true.
    """

    def __init__(self, logdir=None, tls=None):
        self.tls = tls          # (certfile, keyfile) to serve HTTPS
        self.proc = None
        self.port = None
        self.logdir = logdir or tempfile.mkdtemp(prefix="parley-fakellm-",
                                                 dir="/tmp")
        self.own_dir = logdir is None
        self.logpath = os.path.join(self.logdir, "fakellm.log")

    def start(self, timeout=10):
        logf = open(self.logpath, "ab")
        argv = ["/usr/bin/python3", "-u", FAKELLM, "0"]
        if self.tls:
            argv += ["--tls", self.tls[0], self.tls[1]]
        self.proc = subprocess.Popen(argv,
                                     stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=logf,
                                     close_fds=True)
        logf.close()
        import select as _select
        line = b""
        deadline = time.time() + timeout
        while not line.endswith(b"\n"):
            left = deadline - time.time()
            r, _, _ = _select.select([self.proc.stdout], [], [], max(0, left))
            if not r:
                self.stop()
                raise Fail("fakellm did not start within %ss" % timeout)
            b = os.read(self.proc.stdout.fileno(), 256)
            if not b:
                self.stop()
                raise Fail("fakellm exited: %s" % self.log_tail())
            line += b
        self.port = int(line.split()[-1])
        return self

    def stop(self):
        if self.proc is not None:
            stop_proc(self.proc, 5)
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()

    def cleanup(self):
        if self.own_dir:
            shutil.rmtree(self.logdir, ignore_errors=True)

    def log_tail(self, n=15):
        try:
            with open(self.logpath, errors="replace") as f:
                return " | ".join(f.read().splitlines()[-n:])
        except OSError:
            return ""

    def base(self, path=""):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def _call(self, method, path, body=None):
        if self.tls:
            import ssl
            c = http.client.HTTPSConnection(
                "127.0.0.1", self.port, timeout=10,
                context=ssl._create_unverified_context())
        else:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            data = None if body is None else json.dumps(body)
            c.request(method, path, body=data,
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            out = r.read()
            check(r.status == 200, "fakellm %s %s -> %d %r"
                  % (method, path, r.status, out[:200]))
            return json.loads(out)
        finally:
            c.close()

    def script(self, steps, append=False):
        return self._call("POST", "/_script", {"queue": steps,
                                               "append": append})

    def reset(self):
        return self._call("POST", "/_reset", {})

    def requests(self):
        return self._call("GET", "/_requests")

    def script_embeddings(self, steps, append=False):
        return self._call("POST", "/_embeddings_script", {"queue": steps,
                                                          "append": append})

    def requests_of(self, api):
        """Only the requests of one api: openai, anthropic, embeddings."""
        return self._call("GET", "/_requests?api=" + api)

    def wait_for(self, pred, timeout=10, what="fakellm requests"):
        deadline = time.time() + timeout
        while True:
            reqs = self.requests()
            if pred(reqs):
                return reqs
            if time.time() > deadline:
                raise Fail("timed out waiting for %s; have %s" % (what, [
                    (r.get("kind"), r.get("state")) for r in reqs]))
            time.sleep(0.05)


class with_fakellm:
    """Context manager: start a FakeLLM, stop and clean it up at the end."""

    def __init__(self, f=None):
        self.f = f or FakeLLM()

    def __enter__(self):
        return self.f.start()

    def __exit__(self, et, ev, tb):
        self.f.stop()
        if et is not None:
            print("fakellm log tail:\n" + "\n".join(
                self.f.log_tail(30).split(" | ")))
        self.f.cleanup()
        return False


# -- one chat turn over WebSocket, for provider tests ---------------------------

async def chat_turn(d, sid, message, timeout=40, on_event=None):
    """Sends one chat on a fresh /chat connection and returns every event
    received until the turn's session goes idle again (done or error).
    on_event(ws, event, events) may act mid-turn (e.g. send a cancel)."""
    ws = await ws_connect(d.url("/chat"))
    got = []
    try:
        await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid,
                           "id": "turn-%s-%d" % (sid, int(time.time() * 1000)),
                           "message": message})
        deadline = time.time() + timeout
        seen_user = False
        while True:
            left = deadline - time.time()
            if left <= 0:
                raise Fail("turn in %s did not end within %ss; last events: %s"
                           % (sid, timeout, [short(e) for e in got[-8:]]))
            e = await ws_recv(ws, left)
            got.append(e)
            if e.get("type") == "user_message":
                seen_user = True
            if on_event is not None:
                await on_event(ws, e, got)
            if seen_user and is_idle(e):
                return got
    finally:
        await ws.close()


def err_code(js):
    """The code of an {"error":{"code",...}} answer, or None."""
    return ((js or {}).get("error") or {}).get("code")


def post_message(d, sid, body, token):
    """POST /sessions/SID/messages of body (v and sessionId added)."""
    body = dict(body, v=1, sessionId=sid)
    return d.http_json("POST", "/sessions/%s/messages" % sid, body,
                       headers={"Authorization": "Bearer " + token})


def of_type(events, t):
    return [e for e in events if e.get("type") == t]


def tokens_text(events):
    return "".join(e.get("content", "") for e in of_type(events, "token"))


# -- scenarios of provider tests (fakellm f, daemon d) --------------------------

UTF8 = "Grüße aus Köln 🌍 — naïve café, 日本語 ok."


def final_error(ev, what):
    """The turn ended with an LLM_ERROR error and no done; returns it."""
    check(not of_type(ev, "done"), "%s: turn ended with done, expected an "
          "error: %s" % (what, of_type(ev, "done")))
    errs = of_type(ev, "error")
    check(errs, "%s: no error event; events %s" % (what, [short(e) for e in ev]))
    e = errs[-1]
    check(e.get("code") == "LLM_ERROR", "%s: error code %r, expected "
          "LLM_ERROR: %s" % (what, e.get("code"), e))
    check(isinstance(e.get("message"), str) and e["message"],
          "%s: error without message: %s" % (what, e))
    return e


def one_done(ev, what):
    """Exactly one done among ev; returns it."""
    dn = of_type(ev, "done")
    check(len(dn) == 1, "%s: expected one done, got %d; events %s; errors %s"
          % (what, len(dn), [short(e) for e in ev], of_type(ev, "error")))
    return dn[0]


def approx(a, b):
    return abs(a - b) <= 1e-9 + 1e-6 * abs(b)


def clean_turn(ev, text, n_in, n_out, price_in, price_out):
    """A turn without errors that streamed text and ended in one done whose
    usage is n_in + n_out tokens at the per-million prices; returns it."""
    check(not of_type(ev, "error"), "error in a clean turn: %s" % of_type(ev, "error"))
    check(tokens_text(ev) == text, "streamed text %r, expected %r"
          % (tokens_text(ev), text))
    u = one_done(ev, "text").get("usage") or {}
    check(u.get("inputTokens") == n_in and u.get("outputTokens") == n_out and
          u.get("tokens") == n_in + n_out, "done.usage %s, expected the "
          "provider's %d in / %d out" % (u, n_in, n_out))
    want = n_in * price_in / 1e6 + n_out * price_out / 1e6
    check(isinstance(u.get("cost"), (int, float)) and approx(u["cost"], want),
          "done.usage.cost %r, expected %r" % (u.get("cost"), want))
    return u


async def run_scenarios(d, f, scenarios, keep_going=False):
    """Runs each scenario(d, f) on a reset fakellm; parleyd must be ready
    after each.  keep_going runs them all (one daemon bug must not hide
    another) and then fails naming every one that failed."""
    failed = []
    for fn in scenarios:
        f.reset()
        print("-- %s" % fn.__name__, flush=True)
        t0 = time.time()
        try:
            await fn(d, f)
            print("   ok %.1fs" % (time.time() - t0), flush=True)
        except Fail as e:
            if not keep_going:
                raise Fail("%s: %s" % (fn.__name__, e))
            print("   FAILED: %s" % e, flush=True)
            failed.append("%s: %s" % (fn.__name__, e))
        st, _, _ = d.http("GET", "/health/ready")
        check(st == 200, "%s: parleyd not ready afterwards (%d)"
              % (fn.__name__, st))
    check(not failed, " || ".join(failed))


async def provider_suite(f, providers, default, key, scenarios):
    """A parleyd with providers (FAKE_KEY=key in its environment) runs
    run_scenarios(scenarios); the key must never reach its log."""
    d = Daemon(providers=providers, default=default, env={"FAKE_KEY": key})
    with with_daemon(d):
        await run_scenarios(d, f, scenarios)
        check(key not in d.log_text(), "the API key appears in parleyd's log")


def check_rerun(ev, text, what):
    """A reply broken after tokens and re-run: recoverable errors, part of
    text before the first, the whole text after it, one done."""
    errs = of_type(ev, "error")
    check(errs, "no error event when the stream broke after tokens: %s"
          % [short(e) for e in ev])
    check(all(e.get("severity") == "recoverable" for e in errs),
          "retrying error severity: %s" % errs)
    i = ev.index(errs[0])
    before, after = tokens_text(ev[:i]), tokens_text(ev[i:])
    check(text.startswith(before) and before != text,
          "tokens before the break %r" % before)
    check(after == text, "tokens after the retrying error %r, expected the "
          "whole reply" % after)
    one_done(ev, what)


async def truncated_then_ok(d, f, sid, raw, text):
    """The body raw ends cleanly but before the reply was complete, after a
    token: a broken stream, re-run through an error "recoverable", done."""
    f.script([{"kind": "raw", "data": raw},
              {"kind": "text", "text": text}])
    ev = await chat_turn(d, sid, "hi")
    errs = of_type(ev, "error")
    check(errs and all(e.get("severity") == "recoverable" for e in errs),
          "truncated stream: errors %s" % errs)
    check(tokens_text(ev[ev.index(errs[0]):]) == text,
          "text after the re-run %r" % tokens_text(ev))
    one_done(ev, "truncated then ok")
    check(len(f.requests()) == 2, "%d requests" % len(f.requests()))


async def first_byte_timeout(d, f, sid):
    """No first byte within the provider's `timeout 1s`: LLM_ERROR timeout,
    the provider connections closed; returns the turn's events."""
    f.script([{"kind": "text", "first_byte_ms": 4000, "repeat": 3}])
    ev = await chat_turn(d, sid, "hi")
    e = final_error(ev, "first byte timeout")
    check("timeout" in e["message"], "timeout message %r" % e["message"])
    f.wait_for(lambda rs: rs and all(r["state"] == "client_closed" for r in rs),
               timeout=5, what="timed-out requests closed by parleyd")
    return ev


async def cancel_in_stall(d, f, sid, text):
    """cancel (on the first token) while the provider stalls: done
    cancelled, the provider connection closed, no retry; returns the
    turn's events."""
    f.script([{"kind": "stall", "after_chunks": 1, "seconds": 20, "text": text}])
    sent = []

    async def on_event(ws, e, got):
        if e.get("type") == "token" and not sent:
            sent.append(1)
            await ws_send(ws, {"v": 1, "type": "cancel", "sessionId": sid})
    ev = await chat_turn(d, sid, "hi", on_event=on_event)
    check(sent, "no token arrived before the stall")
    dn = one_done(ev, "cancel")
    check(dn.get("cancelled") is True, "done after cancel: %s" % dn)
    f.wait_for(lambda rs: len(rs) == 1 and rs[0]["state"] == "client_closed",
               timeout=5, what="the cancelled provider connection to close")
    await asyncio.sleep(1.0)
    check(len(f.requests()) == 1, "requests after cancel: %d" % len(f.requests()))
    return ev


async def provider_bounds(f, ptype, url, text):
    """attempt-timeout and max-reply of a `ptype` provider at url (fakellm
    f): keep-alive pings after a token reach the deadline, which is retried
    (a recoverable error, then the final one naming the directive); a reply
    without end passes max-reply and is not retried; both are logged; each
    provider connection is closed; a normal reply still fits."""
    d = Daemon(providers='provider bound {\n    type %s\n    url "%s"\n'
               '    model "m"\n    timeout 1s\n    idle-timeout 1s\n'
               '    max-retries 1\n    attempt-timeout 2s\n'
               '    max-reply 64k\n}\n' % (ptype, url), default="bound")
    with with_daemon(d):
        f.reset()
        f.script([{"kind": "pings", "after_chunks": 1, "interval_ms": 100,
                   "text": text, "seconds": 30, "repeat": 2}])
        t0 = time.monotonic()
        ev = await chat_turn(d, "bound-pings", "hi")
        took = time.monotonic() - t0
        e = final_error(ev, "pings past attempt-timeout")
        check("attempt-timeout 2s" in e["message"] and
              "provider bound" in e["message"],
              "deadline message %r" % e["message"])
        check(not e.get("retrying"), "final error %s" % e)
        check([x for x in of_type(ev, "error") if x.get("retrying")],
              "the deadline was not retried: %s" % of_type(ev, "error"))
        check(3.5 <= took < 15, "two 2s attempts took %.1fs" % took)
        f.wait_for(lambda rs: len(rs) == 2 and
                   all(r["state"] == "client_closed" for r in rs),
                   timeout=5, what="both pinging requests closed by parleyd")

        f.reset()
        f.script([{"kind": "endless", "text": "y" * 500, "delay_ms": 1,
                   "seconds": 30, "repeat": 2}])
        ev = await chat_turn(d, "bound-endless", "hi")
        e = final_error(ev, "reply past max-reply")
        check("max-reply 64k" in e["message"] and
              "provider bound" in e["message"],
              "size message %r" % e["message"])
        f.wait_for(lambda rs: len(rs) == 1 and
                   rs[0]["state"] == "client_closed", timeout=5,
                   what="the endless request closed by parleyd")
        await asyncio.sleep(1.0)
        check(len(f.requests()) == 1, "a reply past max-reply was retried: "
              "%d requests" % len(f.requests()))
        log = d.log_text()
        check("attempt-timeout 2s" in log and "max-reply 64k" in log,
              "the bounds are not in parleyd's log: %s" % d.log_tail())

        f.reset()
        f.script([{"kind": "text", "text": text}])
        ev = await chat_turn(d, "bound-fine", "hi")
        check(tokens_text(ev) == text, "text within the bounds %r"
              % tokens_text(ev))
        one_done(ev, "within the bounds")


async def garbage_then_ok(d, f, sid, junk):
    """The body junk (broken JSON, an endless line): the turn ends (no
    crash, bounded memory) and the session still works."""
    f.script([{"kind": "raw", "data": junk, "repeat": 3}])
    ev = await chat_turn(d, sid, "hi")
    check(of_type(ev, "done") or of_type(ev, "error"), "no end of turn")
    f.reset()
    f.script([{"kind": "text", "text": "fine"}])
    ev = await chat_turn(d, sid, "again")
    check(tokens_text(ev) == "fine", "turn after garbage: %r" % tokens_text(ev))
    one_done(ev, "turn after garbage")


# -- killing a worker or the daemon mid-turn, then resuming ---------------------

def after_tokens(n):
    """A ws_until predicate true once n token events have arrived."""
    seen = []

    def pred(e):
        if e.get("type") == "token":
            seen.append(e)
        return len(seen) >= n
    return pred


async def stream_chat(d, sid, msg_id, message, until, timeout=20):
    """Opens /sessions/sid/stream, sends a chat, reads until until(event);
    returns (ws, every event read)."""
    ws = await ws_connect(d.url("/sessions/%s/stream" % sid))
    ev = [await ws_recv(ws)]
    await ws_send(ws, {"v": 1, "type": "chat", "sessionId": sid, "id": msg_id,
                       "message": message})
    await ws_until(ws, until, into=ev, timeout=timeout)
    return ws, ev


async def drain_logged(ws, ev, timeout):
    """Appends to ev whatever still arrives on ws (a killed peer's last
    words); returns ev's logged events, which must run from seq 1."""
    try:
        while True:
            ev.append(await ws_recv(ws, timeout))
    except Exception:
        pass
    seen = logged(ev)
    check_contiguous(seen, 1, "before the kill")
    return seen


async def kill_owner(d, ws, ev):
    """SIGKILLs the worker holding the server end of ws; returns
    drain_logged(ws, ev)."""
    local_port = ws.transport.get_extra_info("sockname")[1]
    pids = d.workers_pids()
    check(len(pids) == d.workers, "expected %d workers, found %s"
          % (d.workers, pids))
    owner = owner_of(pids, local_port)
    check(owner is not None, "could not find the worker holding the session")
    os.kill(owner, signal.SIGKILL)
    return await drain_logged(ws, ev, 5)


# The log epoch the helpers resume a session with, by session id (learned
# from the session_state an event followed, or a RESUME_GAP): a Redis
# restart or failover starts one, and a resume that names none is told to
# drop what it has from the rewrite on.
EPOCHS = {}


def epoch_of(events, epoch=""):
    """The log epoch a client that received events (in order, across
    connections) resumes with: a session_state's once an event with a seq
    follows it (a RESUME_GAP would have come first), a RESUME_GAP's at
    once.  PROTOCOL: "Resume"."""
    pending = None
    for e in events:
        if e.get("type") == "session_state":
            pending = e.get("epoch", "")
        elif e.get("type") == "error" and e.get("code") == "RESUME_GAP" \
                and "epoch" in e:
            epoch, pending = e["epoch"], None
        elif "seq" in e and pending is not None:
            epoch, pending = pending, None
    return epoch


def resume_query(last, epoch):
    """?lastSeq=N[&epoch=E] for a resume."""
    return "lastSeq=%d%s" % (last, "&epoch=" + epoch if epoch else "")


def sse_get(d, sid, last_event_id):
    """GET /events with Last-Event-ID for 2 s: [(id line, event)]."""
    out = subprocess.run(["curl", "-s", "-N", "-m", "2", "-H",
                          "Last-Event-ID: " + last_event_id,
                          d.url("/sessions/%s/events" % sid, "http")],
                         capture_output=True, text=True).stdout
    evs = []
    for block in out.split("\n\n"):
        lines = block.split("\n")
        i = [l[4:] for l in lines if l.startswith("id: ")]
        data = "".join(l[6:] for l in lines if l.startswith("data: "))
        if data:
            evs.append((i[0] if i else None, json.loads(data)))
    return evs


async def resume_until(d, sid, seen, until, what, patience=60,
                       retry_fail=False):
    """Reconnects with lastSeq after seen (logged events) until until(event),
    retrying a dropped connection (and, with retry_fail, a ws_until timeout)
    for patience seconds.  Returns (logged events after seen, the events of
    each attempt, the successful one last)."""
    deadline = time.time() + patience
    after, drops, attempts = [], [], []
    errors = (websockets.exceptions.WebSocketException, OSError,
              asyncio.TimeoutError) + ((Fail,) if retry_fail else ())
    while True:
        last = (seen + after)[-1]["seq"]
        epoch = epoch_of([e for a in attempts for e in a],
                         epoch_of(seen, EPOCHS.get(sid, "")))
        EPOCHS[sid] = epoch
        ev2 = []
        attempts.append(ev2)
        try:
            ws = await ws_connect(d.url("/sessions/%s/stream?%s"
                                        % (sid, resume_query(last, epoch))))
            await ws_until(ws, until, into=ev2, timeout=30)
            await ws.close()
            after += logged(ev2)
            break
        except errors as e:
            drops.append("lastSeq=%d: %s %s after %s" % (
                last, type(e).__name__, e, [short(x) for x in ev2[:6]]))
            after += logged(ev2)
            if time.time() > deadline:
                raise Fail("%s; attempts: %s; parleyd exit status %s"
                           % (what, drops, d.proc.poll()))
            await asyncio.sleep(0.2)
    EPOCHS[sid] = epoch_of(attempts[-1], EPOCHS[sid])
    if drops:
        print("reconnects that dropped: %s" % drops)
    return after, attempts


# -- @modelcontextprotocol/server-everything ------------------------------------

SERVER_JS = os.path.join(E2E, "node_modules", "@modelcontextprotocol",
                         "server-everything", "dist", "index.js")


class Everything:
    """server-everything on a free loopback port (lib/loopback.cjs); with
    script, that MCP server of tests/e2e/js instead (it reads PORT)."""

    def __init__(self, script=None, env=None):
        if not os.path.exists(SERVER_JS):
            raise Fail("%s is missing: run npm ci in tests/e2e" % SERVER_JS)
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="parley-mcp-",
                                               suffix=".log", dir="/tmp",
                                               delete=False)
        env = dict(os.environ, PORT=str(self.port), **(env or {}))
        env.pop("ASAN_OPTIONS", None)
        args = ([SERVER_JS, "streamableHttp"] if script is None else
                [os.path.join(E2E, "js", script)])
        self.proc = subprocess.Popen(
            ["node", "--require", os.path.join(HERE, "loopback.cjs")] + args,
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            env=env, close_fds=True)
        try:
            self.wait_listening(30)
        except BaseException:
            self.stop()
            raise

    def wait_listening(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            check(self.proc.poll() is None, "server-everything exited: %s"
                  % self.text()[-600:])
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise Fail("server-everything not listening after %d s: %s"
                   % (timeout, self.text()[-600:]))

    def url(self):
        return "http://127.0.0.1:%d/mcp" % self.port

    def text(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def check_loopback_only(self):
        """Every listening socket on our port is bound to loopback."""
        found = []
        for f in tcp_table():
            addr, port = f[1].split(":")
            if int(port, 16) == self.port and f[3] == "0A":
                found.append(addr)
        check(found, "no listening socket found for port %d" % self.port)
        for a in found:
            check(a in ("0100007F", "00000000000000000000000001000000",
                        "0000000000000000FFFF00000100007F"),
                  "server-everything listens on %s, not only 127.0.0.1" % a)

    def rpc(self, method, params, sid=None, rid=1):
        """One JSON-RPC request; returns (result or None, session id)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            h = {"Content-Type": "application/json",
                 "Accept": "application/json, text/event-stream"}
            if sid:
                h["Mcp-Session-Id"] = sid
                h["MCP-Protocol-Version"] = "2025-06-18"
            msg = {"jsonrpc": "2.0", "method": method, "params": params}
            if rid is not None:
                msg["id"] = rid
            c.request("POST", "/mcp", body=json.dumps(msg), headers=h)
            r = c.getresponse()
            body = r.read().decode("utf-8", "replace")
            sid = r.getheader("mcp-session-id") or sid
            check(r.status in (200, 202), "MCP %s -> %d %s"
                  % (method, r.status, body[:300]))
            if rid is None:
                return None, sid
            if "text/event-stream" in (r.getheader("content-type") or ""):
                for ln in body.splitlines():
                    if ln.startswith("data:"):
                        js = json.loads(ln[5:])
                        if js.get("id") == rid:
                            return js.get("result"), sid
                raise Fail("MCP %s: no response in %r" % (method, body[:300]))
            return json.loads(body).get("result"), sid
        finally:
            c.close()

    def tool_names(self):
        _, sid = self.rpc("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "parley-e2e", "version": "1"}})
        self.rpc("notifications/initialized", {}, sid, rid=None)
        names, cursor = [], None
        while True:
            res, sid = self.rpc("tools/list", {"cursor": cursor} if cursor
                                else {}, sid, rid=2)
            names += [t["name"] for t in (res or {}).get("tools", [])]
            cursor = (res or {}).get("nextCursor")
            if not cursor:
                return names

    def stop(self):
        stop_proc(self.proc, 10)
        os.unlink(self.log.name)


class EffectServer(Everything):
    """js/effect_mcp.mjs, an MCP server (the MCP SDK's) whose one tool,
    append, has an effect: count() says how often it ran."""

    def __init__(self):
        fd, self.file = tempfile.mkstemp(prefix="parley-effect-", dir="/tmp")
        os.close(fd)
        super().__init__("effect_mcp.mjs", {"EFFECT_FILE": self.file})

    def count(self):
        with open(self.file) as f:
            return len(f.read().splitlines())

    def stop(self):
        super().stop()
        os.unlink(self.file)

#!/usr/bin/python3
# The strict HTTP/1.1 reader: chunked request bodies end to end (curl and
# raw sockets), request-smuggling shapes refused and closed, the lingering
# close after an error bounded in total (a client trickling a byte a
# second), per-address limits answered 503/429 with Retry-After while
# health checks still get through, and the client address taken from
# X-Forwarded-For or a PROXY header only from a trusted-proxy.
import sys, os, json, socket, struct, subprocess, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

PROXY = "127.0.0.2"      # a trusted proxy: the tests connect from it
SID = "strict-1"


def conn(d, port=None, src=None, timeout=10):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    if src:
        s.bind((src, 0))
    s.connect((d.host, port or d.port))
    return s


def read_all(s, timeout=10):
    """Reads until the server closes (EOF or reset); returns the bytes."""
    s.settimeout(timeout)
    out = b""
    while True:
        try:
            b = s.recv(65536)
        except ConnectionResetError:
            return out
        except socket.timeout:
            raise Fail("no close in %ss (got %r)" % (timeout, out[:200]))
        if not b:
            return out
        out += b


def status_of(resp):
    try:
        return int(resp.split(b"\r\n", 1)[0].split(b" ")[1])
    except (IndexError, ValueError):
        raise Fail("not an HTTP response: %r" % resp[:200])


def header_of(resp, name):
    head = resp.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    for line in head.split("\r\n")[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == name.lower():
            return v.strip()
    return None


def body_json(resp):
    return json.loads(resp.split(b"\r\n\r\n", 1)[1] or b"null")


def raw(d, data, port=None, src=None, timeout=10):
    s = conn(d, port, src, timeout)
    try:
        s.sendall(data)
        return read_all(s, timeout)
    finally:
        s.close()


def msg(text, mid):
    return json.dumps({"v": 1, "type": "chat", "id": mid,
                       "message": text}).encode()


def chunked(body, size):
    out = b""
    for i in range(0, len(body), size):
        part = body[i:i + size]
        out += b"%x;n=%d\r\n%s\r\n" % (len(part), i, part)
    return out + b"0\r\nX-Checksum: none\r\n\r\n"


def logged_messages(d, sid):
    return [e.get("message") for e in d.log_events(sid)
            if e.get("type") == "user_message"]


def test_chunked(d):
    # curl sends a body of unknown length chunked (with Expect: 100-continue)
    body = msg("from curl, chunked", "c-1")
    p = subprocess.run(["curl", "-s", "-m", "10", "-w", "\n%{http_code}",
                        "-H", "Content-Type: application/json",
                        "-H", "Transfer-Encoding: chunked",
                        "--data-binary", "@-",
                        "http://%s:%d/sessions/%s/messages" % (d.host, d.port, SID)],
                       input=body, capture_output=True, timeout=20)
    out = p.stdout.decode().rsplit("\n", 1)
    check(out[-1] == "202", "curl chunked POST: %r %r" % (out, p.stderr[:200]))
    # raw: 3-byte chunks with extensions and a trailer, sent in pieces
    body = msg("raw, small chunks", "c-2")
    req = (b"POST /sessions/%s/messages HTTP/1.1\r\nHost: x\r\n"
           b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
           % SID.encode()) + chunked(body, 3)
    s = conn(d)
    for i in range(0, len(req), 50):
        s.sendall(req[i:i + 50])
        time.sleep(0.005)
    resp = read_all(s)
    s.close()
    check(status_of(resp) == 202, "raw chunked POST: %r" % resp[:200])
    deadline = time.time() + 10
    while time.time() < deadline:
        got = logged_messages(d, SID)
        if "raw, small chunks" in got and "from curl, chunked" in got:
            break
        time.sleep(0.1)
    check("from curl, chunked" in got and "raw, small chunks" in got,
          "chunked bodies not logged as sent: %r" % got)
    # a chunked body over max-body (2k) is 413
    big = msg("x" * 3000, "c-3")
    resp = raw(d, b"POST /sessions/%s/messages HTTP/1.1\r\nHost: x\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n" % SID.encode() + chunked(big, 500))
    check(status_of(resp) == 413, "chunked body over max-body: %r" % resp[:120])


def test_smuggling(d):
    last = d.last_seq(SID)
    post = b"POST /sessions/%s/messages HTTP/1.1\r\nHost: x\r\n" % SID.encode()
    body = msg("smuggled", "s-1")
    cases = [
        (post + b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n"
         % len(body) + chunked(body, 100), 400, "both Content-Length"),
        (post + b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n"
         + chunked(body, 100), 400, "both Content-Length"),
        (post + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
         % (len(body), len(body) + 1) + body + b"x", 400, "Content-Length"),
        (post + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
         % (len(body), len(body)) + body, 400, "duplicate Content-Length"),
        (post + b"Content-Length: 1e3\r\n\r\n" + body, 400, "non-numeric"),
        (post + b"Transfer-Encoding: gzip\r\n\r\n" + body, 400, "chunked"),
        (post + b"Transfer-Encoding: chunked, identity\r\n\r\n" + body, 400,
         "chunked"),
        (post + b"Transfer-Encoding: gzip, chunked\r\n\r\n" + chunked(body, 9),
         501, "only chunked"),
        (post + b"Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", 400,
         "bare LF"),
        (post + b"Transfer-Encoding: chunked\r\n\r\n2\r\nhello\r\n0\r\n\r\n",
         400, "longer than its size"),
    ]
    for req, want, part in cases:
        # a second request pipelined behind it must never be answered
        follow = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        resp = raw(d, req + follow)
        check(status_of(resp) == want, "%r...: %d, want %d (%r)"
              % (req[-60:], status_of(resp), want, resp[:200]))
        check(resp.count(b"HTTP/1.1 ") == 1, "a second answer after %r: %r"
              % (req[-40:], resp))
        js = body_json(resp)
        check(part in js["error"]["message"], "%d message %r lacks %r"
              % (want, js["error"]["message"], part))
        check(header_of(resp, "Connection") == "close", "no Connection: close")
        time.sleep(0.06)         # under the rate limit of 127.0.0.1
    check(d.last_seq(SID) == last, "a refused request changed the session")


def fully_closed(s, t0, every, limit):
    """Sends a byte every `every` seconds until the server has closed the
    socket (a send fails: it answered the first one past its close with a
    reset); returns the seconds since t0, or None after limit."""
    while time.time() - t0 < limit:
        try:
            s.send(b"z")
        except OSError:
            return time.time() - t0
        time.sleep(every)
    return None


def test_linger(d):
    # handshake-timeout 2s, lingering-time 3s, lingering-timeout 2s: a
    # head trickled a byte a second gets its 408 at 2s, then the close
    # lingers while the trickle goes on, until lingering-time ends it
    s = conn(d)
    s.settimeout(0.05)
    t0 = time.time()
    got = b""
    while b"\r\n\r\n" not in got and time.time() - t0 < 10:
        try:
            s.send(b"G")
            got += s.recv(4096)
        except socket.timeout:
            pass
        time.sleep(1)
    check(status_of(got) == 408, "trickled head: %r" % got[:120])
    answered = time.time() - t0
    closed = fully_closed(s, t0, 1.0, 20)
    s.close()
    check(closed is not None, "a client trickling a byte a second kept the "
          "connection 20s")
    print("trickled head: 408 after %.1fs, closed %.1fs after the first byte"
          % (answered, closed))
    check(closed <= 2 + 3 + 2.5, "closed %.1fs after the start: the bound is "
          "handshake-timeout 2s + lingering-time 3s" % closed)
    # a silent client after its error: lingering-timeout (2s) ends it
    s = conn(d)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    resp = read_all(s, 10)      # the answer, then the half-close
    check(status_of(resp) == 400, "CL+TE: %r" % resp[:100])
    time.sleep(2.5)
    t0 = time.time()
    took = fully_closed(s, t0, 0.2, 1)
    s.close()
    check(took is not None, "a silent client still connected 2.5s after its "
          "answer (lingering-timeout 2s)")


def test_limits(d):
    # max-connections-per-address 3: three held open, the fourth 503
    held = [conn(d) for _ in range(3)]
    for s in held:
        s.sendall(b"GET /api/info HTTP/1.1\r\n")
    time.sleep(0.3)
    resp = raw(d, b"GET /api/info HTTP/1.1\r\nHost: x\r\n\r\n")
    check(status_of(resp) == 503, "4th connection: %r" % resp[:150])
    check(header_of(resp, "Retry-After") is not None, "503 lacks Retry-After")
    js = body_json(resp)
    check(js["error"]["code"] == "OVERLOADED" and
          "max-connections-per-address" in js["error"]["message"],
          "503 body: %r" % js)
    # health checks from the limited address still get through
    for path in (b"/health", b"/health/live", b"/health/ready"):
        resp = raw(d, b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path)
        check(status_of(resp) == 200, "%s under the limit: %r" % (path, resp[:150]))
    # another address is not limited by this one
    resp = raw(d, b"GET /api/info HTTP/1.1\r\nHost: x\r\n\r\n", src="127.0.0.3")
    check(status_of(resp) == 200, "other address: %r" % resp[:150])
    # limited ones still sending their head count too: past twice the
    # count (6), new connections are closed unanswered
    for _ in range(3):
        s = conn(d)
        s.sendall(b"GET /health HTTP/1.1\r\n")
        held.append(s)
    time.sleep(0.3)
    resp = raw(d, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    check(resp == b"", "past twice the count: %r" % resp[:150])
    for s in held[3:]:
        s.sendall(b"Host: x\r\n\r\n")
        resp = read_all(s)
        check(status_of(resp) == 200, "a limited health check finishing its "
              "head: %r" % resp[:150])
    for s in held:
        s.close()
    time.sleep(0.3)
    resp = raw(d, b"GET /api/info HTTP/1.1\r\nHost: x\r\n\r\n")
    check(status_of(resp) == 200, "after the held ones closed: %r" % resp[:150])


def test_rate(d):
    # rate 20: a burst of 50 gets 429s with Retry-After: 1
    codes = []
    retry = None
    for _ in range(50):
        resp = raw(d, b"GET /api/info HTTP/1.1\r\nHost: x\r\n\r\n", src="127.0.0.4")
        codes.append(status_of(resp))
        if codes[-1] == 429:
            retry = header_of(resp, "Retry-After")
            check(body_json(resp)["error"]["code"] == "OVERLOADED", "429 body")
    check(429 in codes and codes.count(200) <= 40, "rate 20/s, burst: %r" % codes)
    check(retry == "1", "429 Retry-After: %r" % retry)
    print("burst of 50 at rate 20: %d answered 200, %d 429"
          % (codes.count(200), codes.count(429)))
    # health still answered while rate-limited
    for _ in range(5):
        resp = raw(d, b"GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n",
                   src="127.0.0.4")
        check(status_of(resp) == 200, "health while rate-limited: %r" % resp[:100])
    time.sleep(1.1)
    resp = raw(d, b"GET /api/info HTTP/1.1\r\nHost: x\r\n\r\n", src="127.0.0.4")
    check(status_of(resp) == 200, "a second later: %r" % resp[:150])


def v2_header(src, sport):
    a = socket.inet_aton(src) + socket.inet_aton("127.0.0.1") + \
        struct.pack("!HH", sport, 80)
    return b"\r\n\r\n\x00\r\nQUIT\n" + bytes([0x21, 0x11]) + \
        struct.pack("!H", len(a)) + a


def wait_log(d, text, what, timeout=5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if text in d.log_text():
            return
        time.sleep(0.1)
    raise Fail("%s: %r not in the log" % (what, text))


def test_proxies(d, pport):
    sess = b"/sessions/%s" % SID.encode()
    get = b"GET %s HTTP/1.1\r\nHost: x\r\n" % sess
    # X-Forwarded-For from a trusted proxy: the rightmost untrusted hop
    resp = raw(d, get + b"X-Forwarded-For: 6.6.6.6, 198.51.100.23, 127.0.0.2"
               b"\r\n\r\n", src=PROXY)
    check(status_of(resp) == 200, "XFF via trusted proxy: %r" % resp[:150])
    wait_log(d, "from 198.51.100.23", "XFF client in the worker's log")
    # ...and ignored from anyone else
    resp = raw(d, get + b"X-Forwarded-For: 198.51.100.99\r\n\r\n")
    check(status_of(resp) == 200, "XFF from untrusted: %r" % resp[:150])
    time.sleep(0.3)
    check("198.51.100.99" not in d.log_text(), "XFF from an untrusted peer "
          "was believed")
    # PROXY v1 and v2 from the trusted proxy on the proxy-protocol listener
    resp = raw(d, b"PROXY TCP4 192.0.2.41 127.0.0.1 4000 80\r\n" + get +
               b"\r\n", port=pport, src=PROXY)
    check(status_of(resp) == 200, "PROXY v1: %r" % resp[:150])
    wait_log(d, "from 192.0.2.41", "PROXY v1 client in the worker's log")
    resp = raw(d, v2_header("192.0.2.42", 4001) + get + b"\r\n", port=pport,
               src=PROXY)
    check(status_of(resp) == 200, "PROXY v2: %r" % resp[:150])
    wait_log(d, "from 192.0.2.42", "PROXY v2 client in the worker's log")
    # a chunked POST behind a PROXY header reaches the worker intact
    body = msg("behind a proxy", "p-1")
    resp = raw(d, b"PROXY TCP4 192.0.2.43 127.0.0.1 4000 80\r\n"
               b"POST %s/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
               b"chunked\r\n\r\n" % sess + chunked(body, 7), port=pport, src=PROXY)
    check(status_of(resp) == 202, "chunked behind PROXY: %r" % resp[:150])
    # a trusted proxy that forgets the header on that listener: 400
    resp = raw(d, get + b"\r\n", port=pport, src=PROXY)
    check(status_of(resp) == 400, "no PROXY header from the proxy: %r" % resp[:150])
    resp = raw(d, b"PROXY TCP4 192.0.2.41 127.0.0.1 99999 80\r\n" + get + b"\r\n",
               port=pport, src=PROXY)
    check(status_of(resp) == 400, "bad PROXY header: %r" % resp[:150])
    # a PROXY header from an untrusted peer, on either listener: 400
    for port in (d.port, pport):
        resp = raw(d, b"PROXY TCP4 192.0.2.66 127.0.0.1 4000 80\r\n" + get +
                   b"\r\n", port=port)
        check(status_of(resp) == 400, "PROXY from untrusted on %d: %r"
              % (port, resp[:150]))
        resp = raw(d, v2_header("192.0.2.66", 1) + get + b"\r\n", port=port)
        check(status_of(resp) == 400, "PROXY v2 from untrusted: %r" % resp[:150])
    # the untrusted peer speaks plain HTTP on the proxy-protocol listener
    resp = raw(d, get + b"\r\n", port=pport)
    check(status_of(resp) == 200, "plain HTTP from untrusted on the "
          "proxy-protocol listener: %r" % resp[:150])
    # the limits count the client behind the proxy, not the proxy
    held = []
    for i in range(3):
        s = conn(d, pport, PROXY)
        s.sendall(b"PROXY TCP4 192.0.2.77 127.0.0.1 %d 80\r\nGET /api" % (5000 + i))
        held.append(s)
    time.sleep(0.3)
    resp = raw(d, b"PROXY TCP4 192.0.2.77 127.0.0.1 5009 80\r\n"
               b"GET /api/info HTTP/1.1\r\nHost: x\r\n\r\n", port=pport, src=PROXY)
    check(status_of(resp) == 503, "4th from one client behind the proxy: %r"
          % resp[:150])
    resp = raw(d, b"PROXY TCP4 192.0.2.78 127.0.0.1 5010 80\r\n"
               b"GET /api/info HTTP/1.1\r\nHost: x\r\n\r\n", port=pport, src=PROXY)
    check(status_of(resp) == 200, "another client behind the same proxy: %r"
          % resp[:150])
    for s in held:
        s.close()


def test():
    pport = free_port()
    # Raw requests below say "Host: x": a name this server answers to.
    d = Daemon(extra="server-name x\n"
               "max-body 2k\nhandshake-timeout 2s\nlingering-time 3s\n"
               "lingering-timeout 2s\nmax-connections-per-address 3 rate 20\n"
               "trusted-proxy %s\nlisten 127.0.0.1:%d proxy-protocol\n"
               % (PROXY, pport))
    with with_daemon(d):
        st, _, _ = d.http("POST", "/sessions", {"sessionId": SID})
        check(st in (200, 201), "create session: %d" % st)
        test_chunked(d)
        time.sleep(1.1)          # a fresh rate window for 127.0.0.1
        test_smuggling(d)
        test_linger(d)
        time.sleep(1.1)
        test_limits(d)
        test_rate(d)
        time.sleep(1.1)
        test_proxies(d, pport)
        st, _, _ = d.http("GET", "/health/ready")
        check(st == 200, "healthy at the end: %d" % st)


run_test("http_strict", test)

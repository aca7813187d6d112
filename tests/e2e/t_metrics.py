#!/usr/bin/python3
# GET /metrics, read with the Prometheus text-format parser: chats move
# events appended, provider requests, tokens and cost by what the log and
# `done` say; connection gauges follow open clients by transport and drop
# once they close; a resume from lastSeq is a replay of its size; a resume
# past retention is a resume gap; a SIGKILLed worker is a restart; no
# counter ever goes backwards.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("E2E-FAIL: /usr/bin/python3 cannot import prometheus_client "
          "(apt-get install python3-prometheus-client)")
    sys.exit(1)

PUSH = 4.0      # workers push every second; allow for a loaded machine


class Scraper:
    """Scrapes one daemon, keeping every scrape's counters so that any
    counter that goes backwards fails the test."""

    def __init__(self, d):
        self.d = d
        self.prev = {}

    def scrape(self):
        st, h, body = self.d.http("GET", "/metrics")
        check(st == 200, "GET /metrics -> %d %r" % (st, body[:200]))
        ctype = h.get("content-type", "")
        check(ctype.startswith("text/plain"), "content-type %s" % ctype)
        check("version=0.0.4" in ctype, "content-type %s" % ctype)
        text = body.decode()
        check(text.endswith("\n"), "exposition does not end in a newline")
        out = {}
        for fam in text_string_to_metric_families(text):
            check(fam.name.startswith("parley_"), "family %s" % fam.name)
            check(fam.documentation, "family %s has no HELP" % fam.name)
            for s in fam.samples:
                key = (s.name, tuple(sorted(s.labels.items())))
                check(key not in out, "sample %s twice" % (key,))
                out[key] = (s.value, fam.type)
        for key, (v, typ) in out.items():
            if typ in ("counter", "histogram") and key in self.prev:
                check(v >= self.prev[key][0] - 1e-9,
                      "%s went backwards: %s -> %s"
                      % (key, self.prev[key][0], v))
        self.prev = out
        return Metrics(out)


class Metrics:
    def __init__(self, samples):
        self.s = samples

    def get(self, name, **labels):
        key = (name, tuple(sorted(labels.items())))
        check(key in self.s, "no sample %s%s" % (name, labels))
        return self.s[key][0]

    def hist(self, name, **labels):
        """(count, sum) of a histogram, after checking its buckets."""
        bk = sorted(((float(dict(k[1])["le"]), v) for k, (v, _) in
                     self.s.items() if k[0] == name + "_bucket" and
                     all(dict(k[1]).get(a) == b for a, b in labels.items())))
        check(bk and bk[-1][0] == float("inf"), "%s: no +Inf bucket" % name)
        for (_, a), (_, b) in zip(bk, bk[1:]):
            check(b >= a, "%s%s: buckets not cumulative %s"
                  % (name, labels, bk))
        n = self.get(name + "_count", **labels)
        check(bk[-1][1] == n, "%s: +Inf %s != count %s" % (name, bk[-1][1], n))
        return n, self.get(name + "_sum", **labels)


async def wait_metrics(sc, pred, what, timeout=PUSH):
    """Scrapes until pred(metrics) holds; fails naming what."""
    deadline = time.time() + timeout
    while True:
        m = sc.scrape()
        if pred(m):
            return m
        if time.time() > deadline:
            raise Fail("metrics: %s" % what)
        await asyncio.sleep(0.2)


def sse_open(d, sid, last=None):
    s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
    q = "" if last is None else "?lastSeq=%d" % last
    s.sendall(("GET /sessions/%s/events%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
               "Accept: text/event-stream\r\n\r\n" % (sid, q, d.port)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(4096)
        check(b, "SSE closed before its head")
        head += b
    check(head.startswith(b"HTTP/1.1 200"), "SSE head %r" % head[:100])
    check(b"X-Request-Id: " in head, "SSE head has no X-Request-Id: %r" % head)
    return s


async def test():
    d = Daemon(workers=2)
    with with_daemon(d):
        sc = Scraper(d)
        m0 = sc.scrape()
        for name in ("parley_build_info", "parley_uptime_seconds",
                     "parley_store_up", "parley_worker_restarts_total"):
            check(any(k[0] == name for k in m0.s), "no %s" % name)
        check(m0.get("parley_store_up") == 1, "store down")
        w0 = m0.get("parley_worker_restarts_total")
        a0 = m0.get("parley_events_appended_total")
        r0 = m0.get("parley_provider_requests_total", provider="script")
        ti0 = m0.get("parley_tokens_total", direction="input")
        to0 = m0.get("parley_tokens_total", direction="output")
        c0 = m0.get("parley_cost_usd_total")
        lat0, _ = m0.hist("parley_provider_latency_seconds", provider="script")
        sl0, _ = m0.hist("parley_store_latency_seconds")

        # N chats on one session: every logged event was appended once.
        n = 3
        dones, got = [], 0
        for i in range(n):
            ev = await chat_turn(d, "met-1", "hello %d" % i)
            dones += of_type(ev, "done")
            got += len(logged(ev))
        check(len(dones) == n, "%d done events for %d chats" % (len(dones), n))
        last = d.last_seq("met-1")
        tin = sum(e["usage"]["inputTokens"] for e in dones)
        tout = sum(e["usage"]["outputTokens"] for e in dones)
        cost = sum(e["usage"]["cost"] for e in dones)
        # Each worker pushes its own counters: the opens are counted by
        # the worker that took each /chat and handed it to the owner.
        m1 = await wait_metrics(sc, lambda m: m.get(
            "parley_events_appended_total") - a0 >= last and m.get(
            "parley_provider_requests_total", provider="script") - r0 >= n
            and m.get("parley_connections_opened_total",
                      transport="websocket") >= n,
            "events appended, provider requests or websocket opens did "
            "not move")
        check(m1.get("parley_events_appended_total") - a0 == last,
              "events appended moved by %s, the log holds %d" %
              (m1.get("parley_events_appended_total") - a0, last))
        check(m1.get("parley_provider_requests_total", provider="script")
              - r0 == n, "provider requests moved by %s for %d chats" %
              (m1.get("parley_provider_requests_total", provider="script")
               - r0, n))
        check(m1.get("parley_provider_errors_total", provider="script") == 0,
              "provider errors without any failure")
        check(m1.get("parley_tokens_total", direction="input") - ti0 == tin,
              "input tokens moved by %s, done said %s" %
              (m1.get("parley_tokens_total", direction="input") - ti0, tin))
        check(m1.get("parley_tokens_total", direction="output") - to0 == tout,
              "output tokens moved by %s, done said %s" %
              (m1.get("parley_tokens_total", direction="output") - to0, tout))
        check(approx(m1.get("parley_cost_usd_total") - c0, cost),
              "cost moved by %s, done said %s" %
              (m1.get("parley_cost_usd_total") - c0, cost))
        check(m1.get("parley_events_delivered_total") >= got,
              "events delivered %s, the clients got %d" %
              (m1.get("parley_events_delivered_total"), got))
        lat1, _ = m1.hist("parley_provider_latency_seconds", provider="script")
        check(lat1 - lat0 == n, "provider latency observations %s for %d "
              "calls" % (lat1 - lat0, n))
        sl1, _ = m1.hist("parley_store_latency_seconds")
        check(sl1 - sl0 == last, "store latency observations %s for %d "
              "appends" % (sl1 - sl0, last))
        check(m1.get("parley_tool_calls_total") == 0, "tool calls without "
              "tools")
        check(m1.get("parley_connections_opened_total",
                     transport="websocket") >= n, "websocket opens")

        # Gauges by transport while clients are connected, then after.
        ws1 = await ws_connect(d.url("/sessions/met-1/stream"))
        ws2 = await ws_connect(d.url("/sessions/met-2/stream"))
        await ws_recv(ws1)
        await ws_recv(ws2)
        sse = sse_open(d, "met-1")
        m2 = await wait_metrics(sc, lambda m: m.get(
            "parley_connections", transport="websocket") == 2 and m.get(
            "parley_connections", transport="sse") == 1,
            "connection gauges did not show 2 websocket and 1 sse")
        check(m2.get("parley_sessions", state="idle") >= 1 and
              m2.get("parley_sessions", state="created") >= 1,
              "session gauges: %s" % {k: v for k, v in m2.s.items()
                                      if k[0] == "parley_sessions"})
        # Left alone, a session holds its meta as text (frozen 250 ms
        # after its last use); its state counts the same, clients or not.
        await asyncio.sleep(1.5)
        m2 = sc.scrape()
        check(m2.get("parley_sessions", state="idle") >= 1 and
              m2.get("parley_sessions", state="created") >= 1,
              "session gauges once left alone: %s" % {
                  k: v for k, v in m2.s.items() if k[0] == "parley_sessions"})
        await ws1.close()
        await ws2.close()
        sse.close()
        await wait_metrics(sc, lambda m: m.get(
            "parley_connections", transport="websocket") == 0 and m.get(
            "parley_connections", transport="sse") == 0,
            "connection gauges did not drop after the clients closed")
        await wait_metrics(sc, lambda m: m.get(
            "parley_sessions", state="suspended") >= 2 and m.get(
            "parley_sessions", state="idle") == 0 and m.get(
            "parley_sessions", state="created") == 0,
            "met-1 and met-2 did not count as suspended without clients")
        m3 = sc.scrape()
        check(m3.get("parley_connections_opened_total", transport="sse") >= 1,
              "sse opens")
        check(m3.get("parley_connections_opened_total", transport="http") >= 1,
              "http requests (GET /sessions/ID) not counted")

        # A resume from lastSeq=1 replays last-1 events.
        rp0 = m3.get("parley_replays_total")
        rc0, rs0 = m3.hist("parley_replay_events")
        async with websockets.connect(d.url("/sessions/met-1/stream?lastSeq=1")) as ws:
            evs = await ws_until(ws, lambda e: e.get("seq") == last)
        check_contiguous([e for e in evs if "seq" in e], 2, "replay")
        await wait_metrics(sc, lambda m: m.get("parley_replays_total") ==
                           rp0 + 1 and m.hist("parley_replay_events") ==
                           (rc0 + 1, rs0 + last - 1),
                           "replay of %d events not counted" % (last - 1))

        # A worker SIGKILL is a restart; the counters keep their values.
        before = sc.scrape()
        pid = d.workers_pids()[0]
        os.kill(pid, signal.SIGKILL)
        m4 = await wait_metrics(sc, lambda m: m.get(
            "parley_worker_restarts_total") >= w0 + 1,
            "worker_restarts_total did not move after a SIGKILL", timeout=10)
        check(m4.get("parley_events_appended_total") >=
              before.get("parley_events_appended_total"), "appended dropped")
        # The new worker serves; the totals go on from there.
        await chat_turn(d, "met-3", "after the kill")
        await wait_metrics(sc, lambda m: m.get(
            "parley_provider_requests_total", provider="script") >= r0 + n + 1,
            "provider requests did not move after the restart", timeout=8)
        await wait_metrics(sc, lambda m: m.get(
            "parley_workers", state="ready") == 2, "workers not ready")

    # Retention: a resume from before the oldest kept event is a gap.
    d = Daemon(retention="2s")
    with with_daemon(d):
        sc = Scraper(d)
        g0 = sc.scrape().get("parley_resume_gaps_total")
        for text in ("first", "second"):
            st, js = d.http_json("POST", "/sessions/gap-1/messages",
                                 {"v": 1, "type": "chat", "message": text})
            check(st == 202, "POST chat -> %d %s" % (st, js))
            deadline = time.time() + 20
            while not (d.log_events("gap-1") and
                       is_idle(d.log_events("gap-1")[-1])):
                check(time.time() < deadline, "turn did not finish")
                await asyncio.sleep(0.1)
            if text == "first":
                await asyncio.sleep(2.5)
        deadline = time.time() + 10
        while d.http_json("GET", "/sessions/gap-1")[1].get("firstSeq", 1) <= 1:
            check(time.time() < deadline, "nothing was trimmed")
            await asyncio.sleep(0.2)
        async with websockets.connect(d.url("/sessions/gap-1/stream?lastSeq=0")) as ws:
            await ws_until(ws, lambda e: e.get("code") == "RESUME_GAP")
        await wait_metrics(sc, lambda m: m.get("parley_resume_gaps_total") ==
                           g0 + 1, "RESUME_GAP not counted")


run_test("metrics", test)

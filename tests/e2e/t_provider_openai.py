#!/usr/bin/python3
# `type openai` against tests/fixtures/fakellm.py: streamed text becomes
# token events and done carries the provider's usage and the configured
# price; the request Parley sends (path, bearer key, model, stream,
# stream_options, messages with history, max tokens, temperature); retries
# (429 + retry-after, x-should-retry false, 5xx exhausting retries, 400 not
# retried, a broken stream after tokens re-run through an error
# "recoverable"); an error chunk mid-stream; first-byte and idle timeouts;
# cancel during a stall closes the provider connection; parallel tool_calls run
# and every finish_reason end the turn; no key configured sends no
# Authorization; a base URL with a path prefix; the key never reaches the log;
# keep-alive comments without end meet attempt-timeout, a reply without end
# max-reply (lib/parley.py provider_bounds).
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

KEY = "sk-fake-openai-0123456789abcdef"
TEXT = "Hello from the fake OpenAI, streamed in pieces."
PRICE_IN, PRICE_OUT = 1.0, 2.0


def providers(port):
    return ('provider oa {\n'
            '    type openai\n'
            '    url "http://127.0.0.1:%d/v1"\n'
            '    api-key-env FAKE_KEY\n'
            '    model "gpt-test"\n'
            '    max-tokens 300\n'
            '    temperature 0.5\n'
            '    timeout 1s\n'
            '    idle-timeout 1s\n'
            '    price-input 1\n'
            '    price-output 2\n'
            '    max-retries 2\n'
            '}\n' % port)


async def s_text(d, f):
    """Plain streamed text; usage, cost, the request; then history."""
    f.script([{"kind": "text", "text": TEXT, "chunks": 5, "delay_ms": 10,
               "usage": {"in": 12, "out": 5}}])
    ev = await chat_turn(d, "oa-text", "hi")
    check(len(of_type(ev, "token")) >= 1, "no token events")
    u = clean_turn(ev, TEXT, 12, 5, PRICE_IN, PRICE_OUT)
    check(not u.get("estimated"), "provider usage marked estimated: %s" % u)

    reqs = f.requests()
    check(len(reqs) == 1, "expected 1 provider request, got %d" % len(reqs))
    r = reqs[0]
    check(r["path"] == "/v1/chat/completions", "request path %s" % r["path"])
    h = r["headers"]
    check(h.get("authorization") == "Bearer <redacted len=%d>" % len(KEY),
          "Authorization header %r (expected Bearer and the %d-byte key)"
          % (h.get("authorization"), len(KEY)))
    check("application/json" in h.get("content-type", ""),
          "content-type %r" % h.get("content-type"))
    b = r["body"]
    check(isinstance(b, dict), "request body not JSON: %r" % r.get("raw_body"))
    check(b.get("model") == "gpt-test", "model %r" % b.get("model"))
    check(b.get("stream") is True, "stream %r" % b.get("stream"))
    check(b.get("stream_options") == {"include_usage": True},
          "stream_options %r" % b.get("stream_options"))
    check(b.get("messages") == [{"role": "user", "content": "hi"}],
          "messages %r" % b.get("messages"))
    mt = b.get("max_tokens", b.get("max_completion_tokens"))
    check(mt == 300, "max tokens %r (max-tokens 300 configured)" % mt)
    check(b.get("temperature") == 0.5, "temperature %r" % b.get("temperature"))

    # the next turn sends the history
    f.reset()
    f.script([{"kind": "text", "text": "Second.", "usage": {"in": 30, "out": 2}}])
    ev = await chat_turn(d, "oa-text", "again")
    check(tokens_text(ev) == "Second.", "second turn text %r" % tokens_text(ev))
    one_done(ev, "second turn")
    msgs = f.requests()[0]["body"].get("messages")
    check(msgs == [{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": TEXT},
                   {"role": "user", "content": "again"}],
          "second turn messages %r" % msgs)
    st, js = d.http_json("GET", "/sessions/oa-text")
    tu = (js or {}).get("usage") or {}
    check(tu.get("inputTokens") == 42 and tu.get("outputTokens") == 7,
          "session usage %s, expected 42 in / 7 out" % tu)


async def s_retry_after(d, f):
    """429 with retry-after: 1, then success: one turn, no error."""
    f.script([{"kind": "http_error", "status": 429, "retry_after": "1"},
              {"kind": "text", "text": TEXT, "usage": {"in": 3, "out": 4}}])
    ev = await chat_turn(d, "oa-429", "hi")
    check(not of_type(ev, "error"), "error event for a retried 429: %s"
          % of_type(ev, "error"))
    check(tokens_text(ev) == TEXT, "text after retry %r" % tokens_text(ev))
    dn = one_done(ev, "429 then ok")
    check(dn["usage"].get("inputTokens") == 3, "usage of the retried call %s"
          % dn["usage"])
    reqs = f.requests()
    check(len(reqs) == 2, "expected 2 requests (429, then ok), got %d" % len(reqs))
    gap = reqs[1]["t_start"] - reqs[0]["t_start"]
    check(gap >= 0.9, "retry came %.2fs after a 429 with retry-after: 1" % gap)


async def s_should_retry_false(d, f):
    """500 with x-should-retry: false: not retried, LLM_ERROR at once."""
    f.script([{"kind": "http_error", "status": 500, "should_retry": False}])
    ev = await chat_turn(d, "oa-noretry", "hi")
    e = final_error(ev, "500 should_retry false")
    check("500" in e["message"] and "The server had an error" in e["message"],
          "message must name the status and the provider's message: %r"
          % e["message"])
    await asyncio.sleep(1.2)
    n = len(f.requests())
    check(n == 1, "x-should-retry: false was retried (%d requests)" % n)


async def s_exhaust(d, f):
    """503 three times with max-retries 2: 3 requests, then LLM_ERROR."""
    f.script([{"kind": "http_error", "status": 503, "retry_after_ms": "50",
               "repeat": 3}])
    ev = await chat_turn(d, "oa-503", "hi")
    e = final_error(ev, "503 x3")
    check("503" in e["message"] and "overloaded" in e["message"],
          "message must name 503 and the provider's message: %r" % e["message"])
    await asyncio.sleep(0.5)
    n = len(f.requests())
    check(n == 3, "max-retries 2 should make 3 requests, made %d" % n)


async def s_400(d, f):
    """A 400 is not retried."""
    f.script([{"kind": "http_error", "status": 400, "body": {"error": {
        "message": "Unrecognized request argument supplied: bogus",
        "type": "invalid_request_error", "param": None, "code": None}}}])
    ev = await chat_turn(d, "oa-400", "hi")
    e = final_error(ev, "400")
    check("400" in e["message"] and "Unrecognized request argument" in e["message"],
          "400 message %r" % e["message"])
    await asyncio.sleep(1.2)
    check(len(f.requests()) == 1, "400 retried: %d requests" % len(f.requests()))


async def s_should_retry_true(d, f):
    """x-should-retry: true makes even a 400 retried."""
    f.script([{"kind": "http_error", "status": 400, "should_retry": True},
              {"kind": "text", "text": TEXT}])
    ev = await chat_turn(d, "oa-sr-true", "hi")
    check(not of_type(ev, "error"), "error despite x-should-retry true: %s"
          % of_type(ev, "error"))
    one_done(ev, "400 should_retry true")
    check(len(f.requests()) == 2, "%d requests" % len(f.requests()))


async def s_cut_after_tokens(d, f):
    """The connection breaks after tokens; retries remain: an error with
    severity recoverable, the reply starts over, and the turn completes."""
    f.script([{"kind": "cut", "after_chunks": 2, "text": TEXT, "chunks": 5,
               "delay_ms": 80},
              {"kind": "text", "text": TEXT, "chunks": 5}])
    ev = await chat_turn(d, "oa-cut", "hi")
    check_rerun(ev, TEXT, "cut then ok")
    check(len(f.requests()) == 2, "%d requests" % len(f.requests()))
    # the reply that was reset does not reach the history
    f.reset()
    f.script([{"kind": "text", "text": "ok"}])
    await chat_turn(d, "oa-cut", "next")
    msgs = f.requests()[0]["body"]["messages"]
    check(msgs[1] == {"role": "assistant", "content": TEXT},
          "history after a re-run reply: %r" % msgs)


async def s_cut_before_tokens(d, f):
    """A connection error before any token is retried silently."""
    f.script([{"kind": "cut", "after_chunks": 0},
              {"kind": "text", "text": TEXT}])
    ev = await chat_turn(d, "oa-cut0", "hi")
    check(not of_type(ev, "error"), "error for a retried connection error: %s"
          % of_type(ev, "error"))
    check(tokens_text(ev) == TEXT, "text %r" % tokens_text(ev))
    one_done(ev, "cut0")


async def s_error_chunk(d, f):
    """An {"error":{...}} chunk after tokens: in the end an LLM_ERROR that
    carries the provider's message (retried or not), no done."""
    msg = "The model produced invalid content."
    f.script([{"kind": "stream_error", "after_chunks": 2, "text": TEXT,
               "chunks": 5, "error": {"message": msg, "type": "model_error"},
               "repeat": 3}])
    ev = await chat_turn(d, "oa-errchunk", "hi")
    check(of_type(ev, "token"), "no tokens before the error chunk")
    e = final_error(ev, "error chunk")
    check(msg in e["message"], "error message %r does not carry the "
          "provider's %r" % (e["message"], msg))


async def s_first_byte_timeout(d, f):
    """No first byte within `timeout 1s`: LLM_ERROR timeout; the provider
    connection is closed."""
    ev = await first_byte_timeout(d, f, "oa-timeout")
    check(not of_type(ev, "token"), "tokens from a call that timed out")


async def s_idle_timeout(d, f):
    """Bytes stop for longer than `idle-timeout 1s`: LLM_ERROR timeout."""
    f.script([{"kind": "stall", "after_chunks": 1, "seconds": 6, "text": TEXT,
               "repeat": 3}])
    ev = await chat_turn(d, "oa-idle", "hi")
    e = final_error(ev, "idle timeout")
    check("timeout" in e["message"], "idle timeout message %r" % e["message"])
    f.wait_for(lambda rs: rs and all(r["state"] == "client_closed" for r in rs),
               timeout=5, what="stalled requests closed by parleyd")


async def s_cancel_stall(d, f):
    """cancel while the provider stalls: done cancelled, connection closed."""
    # idle-timeout 1s would end the stall by itself: cancel is sent on the
    # first token, well before.
    ev = await cancel_in_stall(d, f, "oa-cancel", TEXT)
    check(not of_type(ev, "error"), "error after cancel: %s" % of_type(ev, "error"))


async def s_tool_calls(d, f):
    """Parallel tool_calls arriving in interleaved fragments are assembled
    per index and run (no MCP server here: each answers TOOL_ERROR); the
    results go back as tool messages and the next reply ends the turn."""
    f.script([{"kind": "tool_calls", "text": "Let me compute.", "interleave": True,
               "calls": [{"id": "call_1", "name": "srv__add",
                          "arguments": "{\"a\":1,\"b\":2}"},
                         {"id": "call_2", "name": "srv__mul",
                          "arguments": "{\"x\":3,\"y\":4}"}]},
              {"kind": "text", "text": " Done."}])
    ev = await chat_turn(d, "oa-tools", "add")
    check(tokens_text(ev) == "Let me compute. Done.",
          "text %r" % tokens_text(ev))
    starts = of_type(ev, "tool_start")
    check([(e["toolCallId"], e["tool"], e["args"]) for e in starts] ==
          [("call_1", "srv__add", {"a": 1, "b": 2}),
           ("call_2", "srv__mul", {"x": 3, "y": 4})], "tool_start %s" % starts)
    results = of_type(ev, "tool_result")
    check(sorted(e["toolCallId"] for e in results) == ["call_1", "call_2"] and
          all(e.get("error", {}).get("code") == "TOOL_ERROR" for e in results),
          "tool_result %s" % results)
    done = of_type(ev, "done")
    check(len(done) == 1 and done[0]["turns"] == 2, "done %s" % done)
    msgs = f.requests()[-1]["body"]["messages"]
    tc = msgs[-3].get("tool_calls") or []
    check(msgs[-3]["role"] == "assistant" and [c["id"] for c in tc] ==
          ["call_1", "call_2"] and tc[0]["function"]["arguments"] == "{\"a\":1,\"b\":2}",
          "assistant message with tool_calls %s" % msgs[-3])
    check([(m["role"], m.get("tool_call_id")) for m in msgs[-2:]] ==
          [("tool", "call_1"), ("tool", "call_2")], "tool messages %s" % msgs[-2:])


async def s_finish_reasons(d, f):
    """length, content_filter and function_call end the turn cleanly."""
    for fr in ("length", "content_filter", "function_call"):
        f.reset()
        f.script([{"kind": "text", "text": "Cut short", "finish_reason": fr}])
        ev = await chat_turn(d, "oa-fin-" + fr.replace("_", "-"), "hi")
        check(tokens_text(ev) == "Cut short", "%s: text %r" % (fr, tokens_text(ev)))
        check(len(of_type(ev, "done")) + len(of_type(ev, "error")) >= 1,
              "%s: turn ended without done or error" % fr)
        if fr == "length":
            check(of_type(ev, "done"), "finish_reason length gave %s"
                  % of_type(ev, "error"))


async def s_split_utf8(d, f):
    """The body arrives a byte at a time: lines, JSON and multi-byte UTF-8
    characters split across reads still make the exact text."""
    f.script([{"kind": "text", "text": UTF8, "chunks": 6, "write_size": 1,
               "delay_ms": 0, "usage": {"in": 4, "out": 6}}])
    ev = await chat_turn(d, "oa-split", "hi")
    check(tokens_text(ev) == UTF8, "split text %r, expected %r"
          % (tokens_text(ev), UTF8))
    dn = one_done(ev, "byte-split stream")
    check(dn["usage"].get("outputTokens") == 6, "usage %s" % dn["usage"])


async def s_garbage(d, f):
    """Broken JSON and an endless line: the turn ends (no crash, bounded
    memory) and the session still works."""
    junk = ("data: {not json\n\n"
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":7}}]}\n\n"
            "data: " + "x" * (3 << 20))
    await garbage_then_ok(d, f, "oa-junk", junk)


async def s_retry_after_date(d, f):
    """retry-after as an HTTP date is honoured too."""
    when = time.strftime("%a, %d %b %Y %H:%M:%S GMT",
                         time.gmtime(time.time() + 3))
    f.script([{"kind": "http_error", "status": 503, "retry_after": when},
              {"kind": "text", "text": TEXT}])
    ev = await chat_turn(d, "oa-date", "hi")
    one_done(ev, "retry-after date")
    reqs = f.requests()
    check(len(reqs) == 2, "%d requests" % len(reqs))
    gap = reqs[1]["t_start"] - reqs[0]["t_start"]
    # whole seconds: the date is at least 2 s ahead when it is parsed
    check(gap >= 1.5, "retry %.2fs after retry-after: %s" % (gap, when))


async def s_cancel_backoff(d, f):
    """cancel while waiting to retry a 429: no further request is made."""
    f.script([{"kind": "http_error", "status": 429, "retry_after": "3"},
              {"kind": "text", "text": TEXT}])

    async def later(ws):
        await asyncio.sleep(0.7)
        await ws_send(ws, {"v": 1, "type": "cancel", "sessionId": "oa-cback"})
    tasks = []

    async def on_event(ws, e, got):
        if e.get("type") == "agent_state" and e.get("status") == "thinking":
            tasks.append(asyncio.ensure_future(later(ws)))
    ev = await chat_turn(d, "oa-cback", "hi", on_event=on_event)
    for t in tasks:
        await t
    dn = one_done(ev, "cancel in backoff")
    check(dn.get("cancelled") is True, "done %s" % dn)
    await asyncio.sleep(3.0)
    n = len(f.requests())
    check(n == 1, "a cancelled call was retried: %d requests" % n)


async def s_no_usage_chunk(d, f):
    """A server that ignores stream_options sends no usage chunk: the turn
    still completes with its text."""
    f.script([{"kind": "text", "text": TEXT, "include_usage": False}])
    ev = await chat_turn(d, "oa-nousage", "hi")
    check(tokens_text(ev) == TEXT, "text %r" % tokens_text(ev))
    dn = one_done(ev, "no usage chunk")
    check(isinstance(dn.get("usage"), dict), "done without usage: %s" % dn)


async def s_concurrent(d, f):
    """Eight sessions stream at once through one worker's curl multi: each
    gets its own reply, whole."""
    f.script([{"kind": "text", "text": "reply %d, in several words" % i,
               "chunks": 8, "delay_ms": 25} for i in range(8)])
    res = await asyncio.gather(*[chat_turn(d, "oa-cc-%d" % i, "hi")
                                 for i in range(8)])
    got = sorted(tokens_text(ev) for ev in res)
    check(got == sorted("reply %d, in several words" % i for i in range(8)),
          "concurrent replies mixed up: %s" % got)
    for ev in res:
        one_done(ev, "concurrent")


TRUNCATED = 'data: {"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}\n\n'


async def s_truncated(d, f):
    """No finish_reason and no [DONE] after a token."""
    await truncated_then_ok(d, f, "oa-trunc", TRUNCATED, TEXT)


SCENARIOS = [s_text, s_truncated, s_retry_after, s_should_retry_false,
             s_exhaust, s_400,
             s_should_retry_true, s_cut_before_tokens, s_cut_after_tokens,
             s_error_chunk, s_first_byte_timeout, s_idle_timeout,
             s_cancel_stall, s_tool_calls, s_finish_reasons, s_split_utf8,
             s_garbage, s_retry_after_date, s_cancel_backoff, s_no_usage_chunk,
             s_concurrent]


async def test():
    with with_fakellm() as f:
        await provider_suite(f, providers(f.port), "oa", KEY, SCENARIOS)

        # No api-key-env: no Authorization header; a base URL with a path
        # prefix, as proxies (LiteLLM, vLLM behind a gateway) have.
        f.reset()
        d2 = Daemon(providers='provider local {\n    type openai\n'
                    '    url "http://127.0.0.1:%d/proxy/openai/v1"\n'
                    '    model "llama"\n}\n' % f.port, default="local",
                    env={"FAKE_KEY": KEY})
        with with_daemon(d2):
            f.script([{"kind": "text", "text": "local"}])
            ev = await chat_turn(d2, "local-1", "hi")
            check(tokens_text(ev) == "local", "text %r" % tokens_text(ev))
            dn = one_done(ev, "no key")
            check(dn["usage"].get("cost") == 0, "cost without prices: %s"
                  % dn["usage"])
            r = f.requests()[0]
            check(r["path"] == "/proxy/openai/v1/chat/completions",
                  "path under a prefixed base URL: %s" % r["path"])
            check("authorization" not in r["headers"],
                  "Authorization sent with no key configured: %r"
                  % r["headers"].get("authorization"))
            check(r["body"].get("model") == "llama", "model %r" % r["body"].get("model"))

        # api-key-env names a variable that is not set: an error naming it,
        # and no request without the key.
        f.reset()
        d3 = Daemon(providers='provider nokey {\n    type openai\n'
                    '    url "http://127.0.0.1:%d/v1"\n'
                    '    model "m"\n'
                    '    api-key-env PARLEY_E2E_UNSET_KEY\n}\n' % f.port,
                    default="nokey")
        with with_daemon(d3):
            ev = await chat_turn(d3, "unset-1", "hi")
            e = final_error(ev, "unset key variable")
            check("PARLEY_E2E_UNSET_KEY" in e["message"],
                  "error does not name the unset variable: %r" % e["message"])
            check(not f.requests(), "a request went out without the key")

        await provider_bounds(f, "openai", "http://127.0.0.1:%d/v1" % f.port,
                              TEXT)

    # HTTPS with a self-signed certificate: verification is on, so the
    # call fails with a certificate error before any request is made.
    await tls_refused()


async def tls_refused():
    if not shutil.which("openssl"):
        raise Fail("tls_refused needs the openssl command (apt-get install "
                   "openssl; .ci/run installs it)")
    tmp = tempfile.mkdtemp(prefix="parley-e2e-tls-", dir="/tmp")
    try:
        cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                            "-nodes", "-keyout", key, "-out", cert, "-days", "2",
                            "-subj", "/CN=127.0.0.1",
                            "-addext", "subjectAltName=IP:127.0.0.1"],
                           capture_output=True, timeout=60)
        check(r.returncode == 0, "openssl req failed: %s" % r.stderr[-300:])
        with with_fakellm(FakeLLM(tls=(cert, key))) as f:
            d = Daemon(providers='provider tls {\n    type openai\n'
                       '    url "https://127.0.0.1:%d/v1"\n'
                       '    model "m"\n'
                       '    api-key-env FAKE_KEY\n    max-retries 0\n}\n'
                       % f.port, default="tls", env={"FAKE_KEY": KEY})
            with with_daemon(d):
                ev = await chat_turn(d, "tls-1", "hi")
                e = final_error(ev, "self-signed https")
                m = e["message"].lower()
                check("certificate" in m or "ssl" in m,
                      "error for a self-signed certificate: %r" % e["message"])
                check(not f.requests(), "a request reached a server whose "
                      "certificate failed verification")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

run_test("provider_openai", test)

#!/usr/bin/python3
# `type anthropic` against tests/fixtures/fakellm.py: text_delta events
# become token events; done carries input_tokens from message_start and the
# cumulative output_tokens from message_delta, priced as configured; the
# request (POST {url}/v1/messages, x-api-key, anthropic-version 2023-06-01,
# content-type, model, max_tokens, stream, messages with history);
# errors classified by error.type, not by HTTP status: 529 overloaded_error
# exhausting retries names the provider error, an overloaded error event in
# a 200 response is retried, api_error after tokens re-runs the reply
# through an error "recoverable", invalid_request_error after tokens is
# final; 429 + retry-after; 401 not retried; first-byte timeout; cancel
# during a stall closes the connection; tool_use blocks run as tool calls
# and their results go back to the model; ping events without end meet
# attempt-timeout, a reply without end max-reply (provider_bounds).
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

KEY = "sk-ant-fake-0123456789abcdefXYZ"
TEXT = "Hello from the fake Anthropic, streamed in pieces."
PRICE_IN, PRICE_OUT = 3.0, 15.0


def providers(port):
    return ('provider an {\n'
            '    type anthropic\n'
            '    url "http://127.0.0.1:%d"\n'
            '    api-key-env FAKE_KEY\n'
            '    model "claude-test"\n'
            '    max-tokens 256\n'
            '    timeout 1s\n'
            '    idle-timeout 1s\n'
            '    price-input 3\n'
            '    price-output 15\n'
            '    max-retries 2\n'
            '}\n' % port)


def content_text(c):
    """A message content as a string (plain, or a list of text blocks)."""
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(b.get("text", "") for b in c
                       if isinstance(b, dict) and b.get("type") == "text")
    return None


def plain_messages(msgs):
    return [(m.get("role"), content_text(m.get("content"))) for m in msgs or []]


async def s_text(d, f):
    f.script([{"kind": "text", "text": TEXT, "chunks": 5, "delay_ms": 10,
               "usage": {"in": 7, "out": 9}}])
    ev = await chat_turn(d, "an-text", "hi")
    # usage: message_start's 7 in, message_delta's cumulative 9 out
    clean_turn(ev, TEXT, 7, 9, PRICE_IN, PRICE_OUT)

    reqs = f.requests()
    check(len(reqs) == 1, "expected 1 provider request, got %d" % len(reqs))
    r = reqs[0]
    check(r["path"] == "/v1/messages", "request path %s" % r["path"])
    h = r["headers"]
    check(h.get("x-api-key") == "<redacted len=%d>" % len(KEY),
          "x-api-key header %r (expected the %d-byte key)"
          % (h.get("x-api-key"), len(KEY)))
    check(h.get("anthropic-version") == "2023-06-01",
          "anthropic-version %r" % h.get("anthropic-version"))
    check("application/json" in h.get("content-type", ""),
          "content-type %r" % h.get("content-type"))
    b = r["body"]
    check(isinstance(b, dict), "request body not JSON: %r" % r.get("raw_body"))
    check(b.get("model") == "claude-test", "model %r" % b.get("model"))
    check(b.get("stream") is True, "stream %r" % b.get("stream"))
    check(b.get("max_tokens") == 256, "max_tokens %r" % b.get("max_tokens"))
    check(plain_messages(b.get("messages")) == [("user", "hi")],
          "messages %r" % b.get("messages"))
    check(not any(m.get("role") == "system" for m in b.get("messages") or []),
          "a system role inside messages: %r" % b.get("messages"))

    f.reset()
    f.script([{"kind": "text", "text": "Second.", "usage": {"in": 20, "out": 2}}])
    ev = await chat_turn(d, "an-text", "again")
    one_done(ev, "second turn")
    msgs = f.requests()[0]["body"].get("messages")
    check(plain_messages(msgs) == [("user", "hi"), ("assistant", TEXT),
                                   ("user", "again")],
          "second turn messages %r" % msgs)


async def s_529_exhaust(d, f):
    f.script([{"kind": "http_error", "status": 529, "retry_after_ms": "50",
               "repeat": 3}])
    ev = await chat_turn(d, "an-529", "hi")
    e = final_error(ev, "529 x3")
    for w in ("529", "overloaded_error", "Overloaded"):
        check(w in e["message"], "message %r lacks %r" % (e["message"], w))
    await asyncio.sleep(0.5)
    n = len(f.requests())
    check(n == 3, "max-retries 2 should make 3 requests, made %d" % n)


async def s_overloaded_200_retried(d, f):
    """An overloaded_error event in a 200 response, before any token, is
    retried like a 529."""
    f.script([{"kind": "stream_error", "after_chunks": -1},
              {"kind": "text", "text": TEXT}])
    ev = await chat_turn(d, "an-ovl200", "hi")
    check(not of_type(ev, "error"), "error event for a retried overloaded "
          "error: %s" % of_type(ev, "error"))
    check(tokens_text(ev) == TEXT, "text %r" % tokens_text(ev))
    one_done(ev, "overloaded 200 then ok")
    check(len(f.requests()) == 2, "%d requests" % len(f.requests()))


async def s_overloaded_200_exhaust(d, f):
    f.script([{"kind": "stream_error", "after_chunks": -1, "repeat": 3}])
    ev = await chat_turn(d, "an-ovl200x", "hi")
    e = final_error(ev, "overloaded 200 x3")
    for w in ("overloaded_error", "Overloaded"):
        check(w in e["message"], "message %r lacks %r" % (e["message"], w))
    await asyncio.sleep(0.5)
    check(len(f.requests()) == 3, "%d requests" % len(f.requests()))


async def s_api_error_after_tokens(d, f):
    """api_error after tokens with retries left: error recoverable, the
    reply starts over, done."""
    f.script([{"kind": "stream_error", "after_chunks": 2, "text": TEXT,
               "chunks": 5, "delay_ms": 80,
               "error": {"type": "api_error", "message": "Internal server error"}},
              {"kind": "text", "text": TEXT, "chunks": 5}])
    ev = await chat_turn(d, "an-apierr", "hi")
    check_rerun(ev, TEXT, "api_error then ok")
    check(len(f.requests()) == 2, "%d requests" % len(f.requests()))


async def s_invalid_after_tokens(d, f):
    """invalid_request_error after tokens is not retried."""
    f.script([{"kind": "stream_error", "after_chunks": 2, "text": TEXT,
               "chunks": 5, "error": {"type": "invalid_request_error",
                                      "message": "prompt is too long"}}])
    ev = await chat_turn(d, "an-invalid", "hi")
    check(of_type(ev, "token"), "no tokens before the error")
    e = final_error(ev, "invalid_request_error")
    for w in ("invalid_request_error", "prompt is too long"):
        check(w in e["message"], "message %r lacks %r" % (e["message"], w))
    await asyncio.sleep(1.2)
    check(len(f.requests()) == 1, "invalid_request_error retried: %d requests"
          % len(f.requests()))


async def s_429(d, f):
    f.script([{"kind": "http_error", "status": 429, "retry_after": "1"},
              {"kind": "text", "text": TEXT}])
    ev = await chat_turn(d, "an-429", "hi")
    check(not of_type(ev, "error"), "error for a retried 429: %s" % of_type(ev, "error"))
    one_done(ev, "429 then ok")
    reqs = f.requests()
    check(len(reqs) == 2, "%d requests" % len(reqs))
    gap = reqs[1]["t_start"] - reqs[0]["t_start"]
    check(gap >= 0.9, "retry came %.2fs after a 429 with retry-after: 1" % gap)


async def s_401(d, f):
    f.script([{"kind": "http_error", "status": 401}])
    ev = await chat_turn(d, "an-401", "hi")
    e = final_error(ev, "401")
    for w in ("401", "authentication_error", "invalid x-api-key"):
        check(w in e["message"], "message %r lacks %r" % (e["message"], w))
    await asyncio.sleep(1.2)
    check(len(f.requests()) == 1, "401 retried: %d requests" % len(f.requests()))


async def s_first_byte_timeout(d, f):
    await first_byte_timeout(d, f, "an-timeout")


async def s_cancel_stall(d, f):
    await cancel_in_stall(d, f, "an-cancel", TEXT)


async def s_tool_use(d, f):
    """tool_use blocks run as tool calls (no MCP server here, so each
    answers TOOL_ERROR), their results go back as tool_result blocks in one
    user message, and the model's next reply ends the turn."""
    f.script([{"kind": "tool_calls", "text": "Let me add.",
               "calls": [{"id": "toolu_01", "name": "srv__add",
                          "arguments": "{\"a\":1,\"b\":2}"},
                         {"id": "toolu_02", "name": "srv__mul",
                          "arguments": "{\"x\":3}"}]},
              {"kind": "text", "text": " Tools are down."}])
    ev = await chat_turn(d, "an-tools", "add")
    check(tokens_text(ev) == "Let me add. Tools are down.", "text %r" % tokens_text(ev))
    starts = of_type(ev, "tool_start")
    results = of_type(ev, "tool_result")
    check([e["toolCallId"] for e in starts] == ["toolu_01", "toolu_02"] and
          starts[0]["args"] == {"a": 1, "b": 2} and starts[0]["tool"] == "srv__add",
          "tool_start events %s" % starts)
    check(sorted(e["toolCallId"] for e in results) == ["toolu_01", "toolu_02"] and
          all(e.get("error", {}).get("code") == "TOOL_ERROR" for e in results),
          "tool_result events %s" % results)
    done = of_type(ev, "done")
    check(len(done) == 1 and done[0]["turns"] == 2, "done %s" % done)
    body = f.requests()[-1]["body"]
    msgs = body["messages"]
    check(msgs[-2]["role"] == "assistant" and
          [b["type"] for b in msgs[-2]["content"]] == ["text", "tool_use", "tool_use"] and
          msgs[-2]["content"][1]["input"] == {"a": 1, "b": 2},
          "second request's assistant turn %s" % msgs[-2])
    check(msgs[-1]["role"] == "user" and
          [b["type"] for b in msgs[-1]["content"]] == ["tool_result", "tool_result"] and
          msgs[-1]["content"][0]["tool_use_id"] == "toolu_01" and
          msgs[-1]["content"][0].get("is_error") is True,
          "second request's tool results %s" % msgs[-1])


async def s_max_tokens_stop(d, f):
    f.script([{"kind": "text", "text": "Cut short", "finish_reason": "max_tokens"}])
    ev = await chat_turn(d, "an-maxtok", "hi")
    check(tokens_text(ev) == "Cut short", "text %r" % tokens_text(ev))
    one_done(ev, "stop_reason max_tokens")


async def s_split_utf8(d, f):
    """Event lines, JSON and UTF-8 characters split across reads."""
    f.script([{"kind": "tool_calls", "text": UTF8, "chunks": 5, "write_size": 1,
               "delay_ms": 0, "usage": {"in": 4, "out": 6},
               "calls": [{"id": "toolu_09", "name": "srv__echo",
                          "arguments": "{\"s\":\"ü🌍\"}"}]},
              {"kind": "text", "text": "!"}])
    ev = await chat_turn(d, "an-split", "hi")
    check(tokens_text(ev) == UTF8 + "!", "split text %r, expected %r"
          % (tokens_text(ev), UTF8 + "!"))
    st = of_type(ev, "tool_start")
    check(st and st[0]["args"] == {"s": "ü🌍"}, "split tool arguments %s" % st)
    check(of_type(ev, "done") or of_type(ev, "error"), "no end of turn")


async def s_garbage(d, f):
    junk = ("event: message_start\ndata: {not json\n\n"
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
            "\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":null}}\n\n"
            "event: content_block_delta\ndata: " + "x" * (3 << 20))
    await garbage_then_ok(d, f, "an-junk", junk)


TRUNCATED = 'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_t","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}\n\nevent: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}\n\n'


async def s_truncated(d, f):
    """No message_stop after a token."""
    await truncated_then_ok(d, f, "an-trunc", TRUNCATED, TEXT)


SCENARIOS = [s_text, s_truncated, s_529_exhaust, s_overloaded_200_retried,
             s_overloaded_200_exhaust, s_api_error_after_tokens,
             s_invalid_after_tokens, s_429, s_401, s_first_byte_timeout,
             s_cancel_stall, s_tool_use, s_max_tokens_stop, s_split_utf8,
             s_garbage]


async def test():
    with with_fakellm() as f:
        await provider_suite(f, providers(f.port), "an", KEY, SCENARIOS)
        await provider_bounds(f, "anthropic", "http://127.0.0.1:%d" % f.port,
                              TEXT)

run_test("provider_anthropic", test)

#!/usr/bin/python3
# Token coalescing (flush-interval): at most one token event per interval,
# and the first chunk after a quiet interval is sent at once rather than
# held for the interval.  A reply of six one-character chunks streamed
# back to back becomes "a" (at once) and "bcdef" (the rest of the
# interval, flushed by done) with flush-interval 1s; six events with
# flush-interval 0; the text and the log are the same either way.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *

REPLY = "abcdef"


async def one(flush, want):
    d = Daemon(flush=flush, default="burst",
               providers=provider_block("burst", REPLY, chunk=1, delay="0ms"))
    with with_daemon(d):
        sid = "coalesce-%s" % flush
        ev = await chat_turn(d, sid, "go")
        toks = [e["content"] for e in of_type(ev, "token")]
        check(toks == want, "flush-interval %s: token events %r, want %r"
              % (flush, toks, want))
        check(tokens_text(ev) == REPLY, "text %r" % tokens_text(ev))
        logged_toks = [e["content"] for e in of_type(d.log_events(sid),
                                                     "token")]
        check(logged_toks == want, "flush-interval %s: logged token events "
              "%r, want %r" % (flush, logged_toks, want))


async def test():
    await one("1s", ["a", "bcdef"])
    await one("0", list(REPLY))


run_test("coalesce", test)

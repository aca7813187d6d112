"""The web UI tests' python side: run_ui() runs one tests/e2e/js/ui_*.mjs
(puppeteer-core driving Debian's chromium, js/ui_lib.mjs) against a
parleyd (and fakellm) the test started, and fails with the script's
reason.  The script saves its screenshots as E2E_LOGDIR/ui-*.png."""

import json
import os
import subprocess
import time

from parley import E2E, Fail, check

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
LOGDIR = os.environ.get("E2E_LOGDIR") or os.path.join(os.getcwd(), "tests", "e2e")


def need_browser():
    """Fails (never skips: the issue wants these tests run) without a
    browser or puppeteer-core."""
    check(os.access(CHROMIUM, os.X_OK), "%s not found: apt-get install "
          "chromium (or set CHROMIUM)" % CHROMIUM)
    pkg = os.path.join(E2E, "node_modules", "puppeteer-core", "package.json")
    check(os.path.exists(pkg), "%s is missing: npm ci in tests/e2e" % pkg)


def run_ui(script, d, fakellm=None, token="", env=None, timeout=120,
           args=()):
    """Runs node js/SCRIPT against daemon d; returns its output.  Every
    line is echoed (it lands in the test's log)."""
    need_browser()
    os.makedirs(LOGDIR, exist_ok=True)
    e = dict(os.environ)
    e.pop("ASAN_OPTIONS", None)
    e.update({"UI_BASE": "http://%s:%d" % (d.host, d.port),
              "UI_TOKEN": token or (d.token or ""),
              "UI_PARLEYD_PID": str(d.proc.pid),
              "UI_FAKELLM": fakellm.base() if fakellm else "",
              "E2E_LOGDIR": LOGDIR, "CHROMIUM": CHROMIUM})
    e.update(env or {})
    t0 = time.time()
    try:
        r = subprocess.run(["node", os.path.join(E2E, "js", script)] +
                           list(args), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           env=e, timeout=timeout, cwd=E2E)
    except subprocess.TimeoutExpired as x:
        out = (x.stdout or b"").decode(errors="replace")
        print(out)
        raise Fail("%s did not finish within %d s" % (script, timeout))
    out = r.stdout.decode(errors="replace")
    print("--- %s (%.1f s, exit %d)\n%s" % (script, time.time() - t0,
                                           r.returncode, out))
    fails = [ln[9:] for ln in out.splitlines() if ln.startswith("UI-FAIL: ")]
    if fails:
        raise Fail(fails[-1])
    check(r.returncode == 0, "%s exited %d: %s" % (script, r.returncode,
                                                    out[-400:]))
    return out


def oa_provider(port, name="oa"):
    """An openai provider on fakellm at port (tests script its replies)."""
    return ('provider %s {\n    type openai\n'
            '    url "http://127.0.0.1:%d/v1"\n    model "gpt-test"\n'
            '    price-input 1\n    price-output 2\n}\n' % (name, port))


def mcp_everything(srv):
    """server-everything srv as MCP server "everything", its echo high risk
    (so asked under SUPERVISED, the default)."""
    return ("mcp-server everything {\n    url %s\n    timeout 10s\n}\n"
            "tool-policy everything__echo high\n" % srv.url())


async def warm_mcp(d, f, timeout=30):
    """Turns in FULL_AUTO sessions of their own until a tool call of
    server-everything works: the workers know its tools.  Leaves fakellm's
    queue empty."""
    from parley import chat_turn, of_type
    import asyncio
    deadline = time.time() + timeout
    n = 0
    while True:
        n += 1
        sid = "ui-warm-%d" % n
        st, js = d.http_json("POST", "/sessions", {
            "sessionId": sid, "config": {"autonomy": "FULL_AUTO"}})
        check(st == 201, "POST /sessions %s -> %s %s" % (sid, st, js))
        f.script([{"kind": "tool_calls", "calls": [{
            "id": "warm-%d" % n, "name": "everything__get-sum",
            "arguments": json.dumps({"a": 1, "b": 2})}]},
            {"kind": "text", "text": "warm"}])
        ev = await chat_turn(d, sid, "warm up")
        res = of_type(ev, "tool_result")
        if res and not any(e.get("error") for e in res):
            f.reset()
            return
        check(time.time() < deadline, "server-everything's tools never "
              "known: %s" % res)
        await asyncio.sleep(0.5)


def browser_test(name):
    """Runs js/NAME.mjs as e2e test NAME against one parleyd (1 worker)
    with fakellm as the model and server-everything as its MCP server,
    warmed up first."""
    from parley import Daemon, Everything, run_test, with_daemon, with_fakellm

    async def test():
        need_browser()
        srv = Everything()
        try:
            with with_fakellm() as f:
                d = Daemon(providers=oa_provider(f.port), default="oa",
                           extra=mcp_everything(srv), workers=1)
                with with_daemon(d):
                    await warm_mcp(d, f)
                    run_ui(name + ".mjs", d, f)
        finally:
            srv.stop()

    run_test(name, test)

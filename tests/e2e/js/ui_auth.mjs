// ui_auth: the page with tokens configured (t_ui_auth.py: parleyd with an
// admin token and a user token, UI_USER_TOKEN; fakellm as the model).
// The page asks for a token (#token-dialog); a wrong one is asked for
// again; the right one works (a session made, a chat streamed and equal
// to /log); it is kept in sessionStorage only (not localStorage), survives
// a reload without asking again, and is never in a URL the page requests
// (HTTP or WebSocket).  The python side then checks parleyd's log.
import { main, check, sleep, log, logUntil, doneCount, fakeScript, waitLive,
  sendChat } from "./ui_lib.mjs";

const TOK = process.env.UI_USER_TOKEN;
const WRONG = "wrong-" + TOK.split("").reverse().join("");
const SID = "ui-auth-1";
const REPLY = "Authenticated and streaming fine";

const dialogOpen = () => {
  const d = document.querySelector("#token-dialog");
  return !!d && (d.open === true || (d.getAttribute("hidden") === null && d.offsetParent !== null));
};

async function giveToken(t, tok) {
  await t.page.click("#token-input", { clickCount: 3 });
  await t.page.keyboard.press("Backspace");
  await t.page.type("#token-input", tok);
  await t.page.click("#token-submit");
}

await main("ui_auth", async (t) => {
  const { page } = t;
  check(TOK, "UI_USER_TOKEN is not set");
  await t.goto("/ui/");
  await t.waitFn("#token-dialog shown without a token", dialogOpen, null, 10000);
  await t.shot("auth-token-dialog");

  await giveToken(t, WRONG);
  await sleep(500);
  await t.waitFn("#token-dialog shown again after a wrong token", dialogOpen, null, 15000);

  await giveToken(t, TOK);
  await t.waitFn("#token-dialog closed after the right token", () => {
    const d = document.querySelector("#token-dialog");
    return !d.open && (d.hasAttribute("hidden") || d.offsetParent === null || d.tagName === "DIALOG");
  }, null, 10000);
  await t.waitSel("#session-id-input");
  await page.type("#session-id-input", SID);
  await page.click("#new-session");
  await t.waitFn("the chat route of the new session", (sid) => location.hash === "#/s/" + sid + "/chat", SID);
  await waitLive(t);
  await fakeScript([{ kind: "text", text: REPLY, chunks: 5, delay_ms: 30 }]);
  await sendChat(t, "hello with a token");
  await logUntil(SID, (e) => doneCount(e) === 1, "done of the turn");
  const { texts } = await t.chatMatchesLog(SID);
  check([...texts.values()].includes(REPLY), "the reply is not fakellm's");
  await t.shot("auth-chat");

  const store = await page.evaluate(() => ({ s: JSON.stringify(sessionStorage), l: JSON.stringify(localStorage), href: location.href }));
  check(store.s.includes(TOK), "the token is not in sessionStorage");
  check(!store.l.includes(TOK), "the token is in localStorage");
  check(!store.href.includes(TOK), "the token is in the page's URL");

  await t.reload();
  await waitLive(t);
  await sleep(500);
  check(!(await page.evaluate(dialogOpen)), "the page asked for the token again after a reload (sessionStorage)");
  await t.chatMatchesLog(SID);

  const leaks = t.requests.filter((u) => u.includes(TOK) || u.includes(encodeURIComponent(TOK)));
  check(leaks.length === 0, `the token is in a requested URL: ${leaks[0]}`);
  check(t.wsHandshakes.length > 0, "no WebSocket handshake seen");
  for (const h of t.wsHandshakes) {
    check(!h.url.includes(TOK), `the token is in a WebSocket URL: ${h.url}`);
  }
  const proto = t.wsHandshakes.map((h) => Object.entries(h.headers)
    .filter(([k]) => k.toLowerCase() === "sec-websocket-protocol").map(([, v]) => v).join()).filter(Boolean);
  check(proto.some((p) => p.split(/\s*,\s*/).includes("bearer." + TOK)),
    `no WebSocket handshake offered the token as subprotocol bearer.<token>: ${proto.map((p) => p.replace(TOK, "<token>")).join(" | ")}`);
  const api = t.requestHeaders.filter((r) => /\/(sessions|api)(\/|\?|$)/.test(new URL(r.url).pathname));
  check(api.some((r) => r.auth === "Bearer " + TOK), "no API request carried Authorization: Bearer <token>");
  const wrongAuth = api.filter((r) => r.auth && r.auth !== "Bearer " + TOK && r.auth !== "Bearer " + WRONG);
  check(wrongAuth.length === 0, `API request with an unexpected Authorization: ${wrongAuth[0] && wrongAuth[0].url}`);
  // A token with characters a subprotocol cannot hold (base64's / and =)
  // goes in the WebSocket's query instead; the page still works.
  const B64 = process.env.UI_B64_TOKEN;
  check(B64, "UI_B64_TOKEN is not set");
  const before = t.wsHandshakes.length;
  await page.evaluate((b) => sessionStorage.setItem("parley.token", b), B64);
  await t.reload();
  await waitLive(t);
  await t.chatMatchesLog(SID);
  const b64ws = t.wsHandshakes.slice(before);
  check(b64ws.length > 0, "no WebSocket handshake with the base64 token");
  check(b64ws.every((h) => new URL(h.url).searchParams.get("access_token") === B64),
    "the base64 token did not travel as ?access_token=: " + b64ws.map((h) => h.url.replace(/access_token=[^&]*/, "access_token=<token>")).join(" "));
  check(!(await page.evaluate(dialogOpen)), "the page asked for a token with a valid base64 one");

  log(`WebSocket subprotocols offered: ${proto.length} handshakes (${proto.length ? "bearer.<token> among them: " + proto.some((p) => p.includes("bearer.")) : "none"})`);
  console.log(`UI-REQUESTS ${t.requests.length}`);
}, { allowStatus: (url, st) => st === 401 });

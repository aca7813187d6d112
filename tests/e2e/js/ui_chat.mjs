// ui_chat: the chat view in a real browser (t_ui_chat.py starts parleyd
// with fakellm as its model and server-everything's echo as a high-risk
// tool).
//  a. /ui/ opens; a session is made from #session-id-input + #new-session;
//     Shift+Enter starts a new line, Enter sends; the streamed reply shows
//     in .msg-body exactly as /log has it (character for character, UTF-8
//     included), with its .usage after done, through an aria-live region;
//  b. a tool call that needs approval shows .approval; approve is clicked;
//     the tool runs exactly once (one tool_start, one tool_result, one
//     audit_entry approved in /log), the prompt goes or is (aria-)disabled, the
//     tool card ends data-state="done" with its result;
//  c. #autonomy sets the session's level (autonomy_changed in /log).
import { main, check, fail, sleep, log, logEvents, logUntil, ofType, doneCount,
  fakeScript, waitLive, sendChat } from "./ui_lib.mjs";

const SID = "ui-chat-1";
const REPLY = "Grüße aus Köln 🌍 — naïve café, 日本語 ok. The quick brown fox jumps over the lazy dog again and again";

await main("ui_chat", async (t) => {
  const { page } = t;
  await t.goto("/ui/");
  await t.waitSel("#new-session");
  await t.waitSel("#session-id-input");
  await t.shot("start");
  await page.type("#session-id-input", SID);
  await page.click("#new-session");
  await t.waitFn("the chat route of the new session", (sid) =>
    location.hash === "#/s/" + sid + "/chat", SID);
  await waitLive(t);
  await t.waitSel(`#session-list [data-session-id="${SID}"]`, 10000,
    "the new session in #session-list");

  // a. Shift+Enter is a new line, Enter sends.
  await fakeScript([{ kind: "text", text: REPLY, chunks: 24, delay_ms: 40,
    usage: { in: 11, out: 22 } }]);
  await t.waitSel("#chat-input");
  await page.focus("#chat-input");
  await page.keyboard.type("first line");
  await page.keyboard.down("Shift");
  await page.keyboard.press("Enter");
  await page.keyboard.up("Shift");
  await page.keyboard.type("second line");
  const v = await page.$eval("#chat-input", (e) => e.value);
  check(v === "first line\nsecond line", `#chat-input after Shift+Enter holds ${JSON.stringify(v)}`);
  await sleep(300);
  check(ofType(await logEvents(SID), "user_message").length === 0,
    "Shift+Enter sent the message");
  await page.keyboard.press("Enter");
  // streaming: a part of the reply is shown before done
  await t.waitFn("part of the streamed reply", () => {
    const b = document.querySelector("#chat-log .msg.msg-agent .msg-body");
    return b && b.textContent.length > 0;
  });
  const early = await logEvents(SID);
  log(`first text shown with ${doneCount(early)} done in the log`);
  const evs = await logUntil(SID, (e) => doneCount(e) === 1, "done of the first turn");
  const um = ofType(evs, "user_message");
  check(um.length === 1 && um[0].message === "first line\nsecond line",
    `user_message in /log: ${JSON.stringify(um.map((e) => e.message))}`);
  check((await page.$eval("#chat-input", (e) => e.value)) === "", "#chat-input not emptied after sending");
  const { texts } = await t.chatMatchesLog(SID);
  check([...texts.values()].includes(REPLY), `logged reply ${JSON.stringify([...texts.values()])} is not fakellm's`);
  const users = await t.texts("#chat-log .msg.msg-user .msg-body");
  check(users.some((s) => s.includes("first line") && s.includes("second line")),
    `user message not shown: ${JSON.stringify(users)}`);
  const mid = ofType(evs, "done")[0].messageId;
  await t.waitSel(`#chat-log .msg[data-message-id="${mid}"] .usage`, 5000, ".usage of the finished reply");
  const usage = await page.$eval(`#chat-log .msg[data-message-id="${mid}"] .usage`, (e) => e.textContent);
  check(/33|\b22\b/.test(usage), `.usage ${JSON.stringify(usage)} shows neither the tokens (33) nor the output tokens (22)`);
  const live = await page.evaluate(() => [...document.querySelectorAll('[aria-live="polite"]')]
    .filter((e) => e.id !== "conn-status" && e.closest("#main")).length);
  check(live > 0, "no aria-live=\"polite\" region in the chat view");
  await t.shot("chat");

  // b. approval, clicked, runs once.
  await fakeScript([
    { kind: "tool_calls", calls: [{ id: "call_ui_1", name: "everything__echo",
      arguments: JSON.stringify({ message: "approved-echo" }) }] },
    { kind: "text", text: "The echo ran once" }]);
  await sendChat(t, "please echo");
  const req = ofType(await logUntil(SID, (e) => ofType(e, "tool_approve_request").length === 1,
    "tool_approve_request (is the echo tool known and high risk?)"), "tool_approve_request")[0];
  const call = req.toolCallId;
  const sel = `section:has(#chat-log) .approval[data-tool-call-id="${call}"]`;
  await t.waitSel(sel, 10000, `.approval for ${call}`);
  for (const d of ["approve", "reject", "always"])
    check(await t.count(`${sel} button[data-decision="${d}"]`) === 1, `no ${d} button in the approval prompt`);
  await t.shot("chat-approval");
  await page.click(`${sel} button[data-decision="approve"]`);
  const after = await logUntil(SID, (e) => doneCount(e) === 2, "done of the approved turn");
  const starts = ofType(after, "tool_start").filter((e) => e.toolCallId === call);
  const results = ofType(after, "tool_result").filter((e) => e.toolCallId === call);
  const audits = ofType(after, "audit_entry").filter((e) => e.toolCallId === call);
  check(starts.length === 1 && results.length === 1,
    `the approved tool ran ${starts.length} time(s) (${results.length} results)`);
  check(audits.length === 1 && audits[0].decision === "approved" && ["user", "admin"].includes(audits[0].by),
    `audit entries ${JSON.stringify(audits)}`);
  check(results[0].result === "Echo: approved-echo", `tool_result ${JSON.stringify(results[0])}`);
  // answered: the prompt is gone or its buttons disabled
  await t.waitFn("the answered approval prompt removed or disabled", (s) => {
    const a = document.querySelector(s);
    return !a || [...a.querySelectorAll("button[data-decision]")].every((b) => b.disabled || b.getAttribute("aria-disabled") === "true");
  }, sel, 5000);
  const card = `#chat-log .tool-card[data-tool-call-id="${call}"]`;
  await t.waitSel(`${card}[data-state="done"]`, 5000, `tool card of ${call} in state done`);
  const res = await page.$eval(`${card} .tool-result`, (e) => e.textContent).catch(() => null);
  check(res !== null && res.includes("Echo: approved-echo"), `.tool-result ${JSON.stringify(res)}`);
  const args = await page.$eval(`${card} .tool-args`, (e) => e.textContent).catch(() => null);
  check(args !== null && args.includes("approved-echo"), `.tool-args ${JSON.stringify(args)}`);
  check(await t.count(`${card} .tool-duration`) === 1, "no .tool-duration on the tool card");
  const risk = await page.$eval(`${card} .tool-risk`, (e) => e.textContent).catch(() => null);
  check(risk !== null && /high/i.test(risk), `.tool-risk ${JSON.stringify(risk)}`);
  await sleep(500);
  const again = await logEvents(SID);
  check(ofType(again, "tool_start").filter((e) => e.toolCallId === call).length === 1,
    "the tool started again after its result");
  await t.chatMatchesLog(SID);
  await t.shot("chat-tool");

  // c. the autonomy selector
  const opts = await page.$$eval("#autonomy option", (os) => os.map((o) => o.value));
  for (const l of ["FULL_AUTO", "SUPERVISED", "CAUTIOUS", "MANUAL"])
    check(opts.includes(l), `#autonomy has no ${l}: ${opts}`);
  await page.select("#autonomy", "MANUAL");
  await logUntil(SID, (e) => ofType(e, "autonomy_changed").some((x) => x.level === "MANUAL"),
    "autonomy_changed MANUAL after #autonomy was set");
  check(await t.count("#cancel") === 1, "no #cancel button");
  check(await t.count("#chat-send") === 1, "no #chat-send button");
});

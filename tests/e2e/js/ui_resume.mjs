// ui_resume: exact resume in the page (t_ui_resume.py: parleyd with one
// worker, fakellm as the model, server-everything's echo as a high-risk
// tool).
//  a. a reload in the middle of a streaming turn: the turn is still
//     streaming after the reload, the text shown is a prefix of the reply,
//     and at done every agent message equals /log character for character
//     (nothing duplicated or missing); a reload after done again;
//  b. a pending approval is still shown after a reload, is answered there,
//     and the tool runs exactly once;
//  c. the worker is SIGKILLed mid-turn: #conn-status goes reconnecting,
//     then live; the interrupted message and the re-run one both equal
//     /log; the error is shown (.error-banner).
import { main, check, sleep, log, logEvents, logUntil, ofType, doneCount,
  fakeScript, openChat, waitLive, sendChat, killWorkers, watchConnStates,
  agentTexts } from "./ui_lib.mjs";

const words = (p, n) => Array.from({ length: n }, (_, i) => `${p}${String(i).padStart(3, "0")}`).join(" ");
const LONG = words("alpha", 160);	// 1,439 chars in 160 pieces
const LONG2 = words("beta", 120);

async function agentShown(t) {
  return t.page.$$eval("#chat-log .msg.msg-agent .msg-body", (els) => els.map((e) => e.textContent));
}

await main("ui_resume", async (t) => {
  const { page } = t;

  // a. reload mid-stream
  const SID = "ui-resume-1";
  await openChat(t, SID);
  await fakeScript([{ kind: "text", text: LONG, chunks: 160, delay_ms: 40 }]);
  await sendChat(t, "a long answer please");
  await t.waitFn("some streamed text before the reload", () => {
    const b = [...document.querySelectorAll("#chat-log .msg.msg-agent .msg-body")].pop();
    return b && b.textContent.length >= 40;
  });
  await t.reload();
  await waitLive(t);
  const mid = await logEvents(SID);
  check(doneCount(mid) === 0, "the turn ended before the reload was done: the reload was not mid-stream (make the reply slower)");
  await t.waitFn("the replayed text after the reload", () => {
    const b = [...document.querySelectorAll("#chat-log .msg.msg-agent .msg-body")].pop();
    return b && b.textContent.length >= 40;
  });
  const shown = (await agentShown(t)).pop();
  check(LONG.startsWith(shown), `after the reload the page shows ${JSON.stringify(shown.slice(0, 80))}..., not a prefix of the reply`);
  await t.shot("resume-after-reload");
  await logUntil(SID, (e) => doneCount(e) === 1, "done of the reloaded turn");
  const { texts } = await t.chatMatchesLog(SID);
  check([...texts.values()].join("") === LONG, "the logged reply is not fakellm's");
  await t.reload();
  await waitLive(t);
  await t.chatMatchesLog(SID);
  check((await t.texts("#chat-log .msg.msg-user .msg-body")).filter((s) => s.includes("a long answer please")).length === 1,
    "the user message is not shown exactly once after the reloads");

  // b. a pending approval survives a reload
  const SID2 = "ui-resume-2";
  await openChat(t, SID2);
  await fakeScript([
    { kind: "tool_calls", calls: [{ id: "call_rl_1", name: "everything__echo",
      arguments: JSON.stringify({ message: "after-reload" }) }] },
    { kind: "text", text: "Echoed after the reload" }]);
  await sendChat(t, "echo after a reload");
  const req = ofType(await logUntil(SID2, (e) => ofType(e, "tool_approve_request").length === 1,
    "tool_approve_request"), "tool_approve_request")[0];
  const sel = `section:has(#chat-log) .approval[data-tool-call-id="${req.toolCallId}"]`;
  await t.waitSel(sel, 10000, "the approval prompt before the reload");
  await t.reload();
  await waitLive(t);
  await t.waitSel(sel, 10000, "the pending approval prompt after the reload");
  check(await t.count(sel) === 1, `${await t.count(sel)} approval prompts for one call after the reload`);
  await t.shot("resume-approval-after-reload");
  await page.click(`${sel} button[data-decision="approve"]`);
  const evs = await logUntil(SID2, (e) => doneCount(e) === 1, "done after approving");
  const n = ofType(evs, "tool_start").filter((e) => e.toolCallId === req.toolCallId).length;
  const r = ofType(evs, "tool_result").filter((e) => e.toolCallId === req.toolCallId);
  check(n === 1 && r.length === 1 && r[0].result === "Echo: after-reload",
    `the tool approved after a reload ran ${n} time(s): ${JSON.stringify(r)}`);
  await t.chatMatchesLog(SID2);

  // c. the worker dies mid-turn
  const SID3 = "ui-resume-3";
  await openChat(t, SID3);
  await watchConnStates(t);
  await fakeScript([{ kind: "text", text: LONG2, chunks: 120, delay_ms: 50 },
    { kind: "text", text: LONG2, chunks: 30, delay_ms: 20 }]);
  await sendChat(t, "stream while the worker dies");
  await t.waitFn("some streamed text before the kill", () => {
    const b = [...document.querySelectorAll("#chat-log .msg.msg-agent .msg-body")].pop();
    return b && b.textContent.length >= 40;
  });
  await killWorkers();
  log("workers killed and back");
  await t.waitFn("#conn-status reconnecting after the kill", () =>
    window.__connStates.includes("reconnecting"), null, 10000);
  await t.shot("resume-reconnecting");
  await t.waitFn("#conn-status live again after reconnecting", () =>
    window.__connStates.lastIndexOf("live") > window.__connStates.indexOf("reconnecting"), null, 20000);
  const fin = await logUntil(SID3, (e) => ofType(e, "done").some((d) => String(d.messageId).includes(".")),
    "done of the re-run turn", 30000);
  log("connection states:", await page.evaluate(() => window.__connStates.join(" -> ")));
  const { texts: t3 } = await t.chatMatchesLog(SID3);
  check([...agentTexts(fin).values()].pop() === LONG2 && [...t3.values()].pop() === LONG2,
    "the re-run reply is not the whole text");
  const errs = ofType(fin, "error");
  check(errs.length > 0, "no error event for the interrupted turn in /log");
  const banners = await t.texts(".error-banner");
  check(banners.some((b) => b.includes(errs[0].code)),
    `the interrupted turn's error ${errs[0].code} is not shown in an .error-banner: ${JSON.stringify(banners)}`);
  await t.shot("resume-after-kill");
});

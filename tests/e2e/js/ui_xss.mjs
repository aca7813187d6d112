// ui_xss: text is text (t_ui_xss.py: parleyd, fakellm as the model,
// server-everything's echo as the tool).  A markup payload arrives as the
// user's message, the model's output, a tool's arguments and result, an
// external agent's thought (over its own WebSocket), a proposed action and
// another user's directive.  In every view: window.__xss stays undefined,
// no <img>/<script> element appears inside the views' containers, no
// element carries an on* attribute, no CSP violation is reported (a
// blocked inline handler would be one), and the payload is visible as text.
import { main, check, sleep, log, logUntil, ofType, doneCount, fakeScript,
  openChat, sendChat, socket, sendAcked, xssFindings, rest } from "./ui_lib.mjs";

const SID = "ui-xss-1";
const IMG = '<img src=x onerror="window.__xss=1">';
const SCRIPT = "<script>window.__xss=1</script>";
const PAYLOAD = `${IMG} and ${SCRIPT}`;
// what must be readable (a Markdown renderer may take the "__" pairs)
const VISIBLE = ['<img src=x onerror="window.', "<script>window.", "</script>"];

async function noXss(t, where) {
  const f = await xssFindings(t);
  check(f.length === 0, `${where}: ${f.join("; ")}`);
}

async function visible(t, where, parts = VISIBLE) {
  const text = await t.page.evaluate(() => document.querySelector("#main").innerText);
  for (const p of parts)
    check(text.includes(p), `${where}: ${JSON.stringify(p)} is not visible as text`);
}

await main("ui_xss", async (t) => {
  const { page } = t;
  const r = await rest("POST", "/sessions", { sessionId: SID, config: { autonomy: "FULL_AUTO" } });
  check(r.status === 201, `POST /sessions -> ${r.status} ${JSON.stringify(r.body)}`);

  // the external agent's thought, an action it proposes, another user's
  // directive: before the page opens (replayed) ...
  const agent = await socket(SID, "role=agent&agentId=xss-agent");
  await sendAcked(agent, { type: "thought_share", thought: { thoughtId: "th_xss1",
    content: PAYLOAD, category: "analysis", confidence: 0.8, references: [], actionable: true } });
  await sendAcked(agent, { type: "action_propose", action: { type: "code_change",
    description: PAYLOAD, params: { file: IMG } } });
  const user = await socket(SID, "role=user");
  await sendAcked(user, { type: "directive", message: PAYLOAD });

  await openChat(t, SID);
  await fakeScript([
    { kind: "tool_calls", calls: [{ id: "call_xss_1", name: "everything__echo",
      arguments: JSON.stringify({ message: PAYLOAD }) }] },
    { kind: "text", text: `Model says ${PAYLOAD} end`, chunks: 7, delay_ms: 20 }]);
  await sendChat(t, `User says ${PAYLOAD}`);
  // ... and one thought while the page is live
  await sendAcked(agent, { type: "thought_share", thought: { thoughtId: "th_xss2",
    content: `live ${PAYLOAD}`, category: "hypothesis", confidence: 0.4,
    references: ["th_xss1"], inResponseTo: "th_xss1", actionable: false } });
  const evs = await logUntil(SID, (e) => doneCount(e) === 1, "done of the turn");
  const res = ofType(evs, "tool_result");
  check(res.length === 1 && res[0].result === `Echo: ${PAYLOAD}`, `tool_result ${JSON.stringify(res)}`);
  await t.chatMatchesLog(SID).catch((e) => log(`(chat vs log, payload has Markdown-like "__": ${e.message})`));
  const call = res[0].toolCallId;
  await t.waitSel(`#chat-log .tool-card[data-tool-call-id="${call}"]`, 5000, "the tool card");
  await sleep(300);
  await noXss(t, "chat");
  await visible(t, "chat (user message, model output)");
  const user_ = await t.texts("#chat-log .msg.msg-user .msg-body");
  check(user_.some((s) => s.includes(IMG) && s.includes(SCRIPT)), `the user's message is not shown verbatim: ${JSON.stringify(user_)}`);
  const card = `#chat-log .tool-card[data-tool-call-id="${call}"]`;
  // a collapsed card still holds its text; open it if it is a <details>
  await page.$$eval(`${card} details`, (ds) => ds.forEach((d) => { d.open = true; }));
  const tr = await page.$eval(`${card} .tool-result`, (e) => e.textContent).catch(() => "");
  const ta = await page.$eval(`${card} .tool-args`, (e) => e.textContent).catch(() => "");
  check(tr.includes(`Echo: ${IMG}`) && tr.includes(SCRIPT), `.tool-result ${JSON.stringify(tr)}`);
  check(ta.includes("<img src=x onerror=") && ta.includes("<script>"), `.tool-args ${JSON.stringify(ta)}`);
  await t.shot("xss-chat");

  // the team view: the thoughts, the action, the directive
  await page.click('a[data-view="team"]');
  await t.waitFn("the team route", (sid) => location.hash === `#/s/${sid}/team`, SID);
  await t.waitFn("both thoughts in #thought-graph", () =>
    document.querySelectorAll("#thought-graph [data-thought-id]").length >= 2, null, 10000);
  await t.waitSel("#actions .action[data-action-id]", 10000, "the proposed action");
  await page.click('#thought-graph [data-thought-id="th_xss1"]').catch((e) => log(`click on the thought: ${e.message}`));
  await sleep(300);
  await noXss(t, "team");
  await visible(t, "team (thought, action or directive)", ["<img src=x onerror="]);
  const act = await page.$eval("#actions .action[data-action-id]", (e) => e.textContent);
  check(act.includes("<img src=x onerror="), `the action's description is not shown as text: ${JSON.stringify(act.slice(0, 200))}`);
  await t.shot("xss-team");

  // the dashboard: the audit trail holds the call's summary
  await page.click('a[data-view="dashboard"]');
  await t.waitFn("the dashboard route", (sid) => location.hash === `#/s/${sid}/dashboard`, SID);
  await t.waitSel(`#audit-table tr[data-tool-call-id="${call}"]`, 10000, "the call's audit row");
  await sleep(300);
  await noXss(t, "dashboard");
  await t.shot("xss-dashboard");
  check(await page.evaluate(() => typeof window.__xss) === "undefined", "window.__xss was set");

  // Markdown built to make a renderer work for seconds or overflow its
  // stack (3,000 nested quotes, thousands of openers that never close):
  // the reply is shown, and the page keeps answering.
  const DEEP = ">".repeat(3000) + " deep-quote";
  const HOSTILE = `${DEEP}\n\n${"_a ".repeat(4000)}\n\n${"*b ".repeat(4000)}\n\n${"[".repeat(5000)} tail-end`;
  await page.click('a[data-view="chat"]');
  await t.waitFn("the chat route", (sid) => location.hash === `#/s/${sid}/chat`, SID);
  await fakeScript([{ kind: "text", text: HOSTILE, chunks: 40, delay_ms: 5 }]);
  await sendChat(t, "hostile markdown please");
  await logUntil(SID, (e) => doneCount(e) === 2, "done of the hostile turn");
  await t.waitFn("the hostile reply shown", () => {
    const b = [...document.querySelectorAll("#chat-log .msg.msg-agent .msg-body")].pop();
    return !!b && b.textContent.includes("deep-quote") && b.textContent.includes("tail-end");
  }, null, 15000);
  const t0 = Date.now();
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
  const lag = Date.now() - t0;
  check(lag < 5000, `the page took ${lag} ms to paint a frame after the hostile reply`);
  log(`a frame after the hostile Markdown: ${lag} ms`);
  await t.shot("xss-hostile-markdown");
  agent.close();
  user.close();
});

// Follow /sessions/{id}/events with the eventsource package, drop after a
// few tokens, reconnect with Last-Event-ID, print what was seen as JSON.
// usage: node sse_resume.js PORT SESSION
"use strict";
const EventSource = require("eventsource");
const [port, sid] = process.argv.slice(2);
const base = `http://127.0.0.1:${port}`;
const types = ["session_state", "user_message", "agent_state", "token", "done",
	"error", "session_complete"];
const out = { conns: [] };
const timer = setTimeout(() => finish("timeout"), 30000);

function finish(why) {
	clearTimeout(timer);
	out.end = why;
	console.log(JSON.stringify(out));
	process.exit(why === "ok" ? 0 : 1);
}

function follow(headers, onEvent) {
	const seen = [];
	out.conns.push(seen);
	const es = new EventSource(`${base}/sessions/${sid}/events`, { headers });
	es.onerror = (e) => seen.push({ type: "_error", status: e && e.status });
	for (const t of types)
		es.addEventListener(t, (m) => {
			const d = JSON.parse(m.data);
			seen.push({ type: t, id: m.lastEventId, seq: d.seq,
				content: d.content, messageId: d.messageId,
				status: d.status, lastSeq: d.lastSeq });
			onEvent(es, d, seen);
		});
	return es;
}

async function main() {
	const r = await fetch(`${base}/sessions`, { method: "POST",
		headers: { "Content-Type": "application/json" },
		body: JSON.stringify({ sessionId: sid }) });
	if (r.status !== 201)
		return finish(`POST /sessions -> ${r.status}`);
	let sent = false, tokens = 0, last = 0;
	follow({}, async (es, d) => {
		if (d.seq) last = d.seq;
		if (d.type === "session_state" && !sent) {
			sent = true;
			const p = await fetch(`${base}/sessions/${sid}/messages`, {
				method: "POST", headers: { "Content-Type": "application/json" },
				body: JSON.stringify({ v: 1, type: "chat", message: "hi" }) });
			if (p.status !== 202)
				finish(`POST messages -> ${p.status}`);
		}
		if (d.type === "token" && ++tokens === 3) {
			es.close();
			out.resumeFrom = last;
			follow({ "Last-Event-ID": String(last) }, (es2, d2) => {
				if (d2.type === "agent_state" && d2.status === "idle") {
					es2.close();
					finish("ok");
				}
			});
		}
	});
}
main().catch((e) => finish(`exception ${e}`));

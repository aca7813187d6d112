// A client of POST /api/agents/stream written as seed 001's useNexusAgent
// reads it: fetch, then split the body on blank lines and parse each block
// that starts with "data: " (its formatSSE / parse loop, unchanged), with
// processChunk's accumulation of content and tool calls.  Prints what it
// got as one JSON line.
// usage: node seed_client.mjs PORT TOKEN SESSION MESSAGE
const [port, token, sessionId, message] = process.argv.slice(2);
const out = { status: 0, chunks: [], content: "", toolCalls: [] };

async function processChunk(chunk) {
	out.chunks.push(chunk);
	switch (chunk.type) {
	case "content":
		out.content += chunk.data;
		break;
	case "tool_call":
		out.toolCalls.push(chunk.data);
		break;
	}
}

const timer = setTimeout(() => { out.end = "timeout"; finish(1); }, 30000);

function finish(rc) {
	clearTimeout(timer);
	console.log(JSON.stringify(out));
	process.exit(rc);
}

const response = await fetch(`http://127.0.0.1:${port}/api/agents/stream`, {
	method: "POST",
	headers: { "Content-Type": "application/json",
		Authorization: `Bearer ${token}` },
	body: JSON.stringify({ sessionId, message }),
});
out.status = response.status;
out.contentType = response.headers.get("content-type");
const reader = response.body.getReader();
const decoder = new TextDecoder();
let buffer = "";
for (;;) {
	const { done, value } = await reader.read();
	if (done)
		break;
	buffer += decoder.decode(value, { stream: true });
	const lines = buffer.split("\n\n");
	buffer = lines.pop();
	for (const line of lines) {
		if (line.startsWith("data: ")) {
			const chunk = JSON.parse(line.substring(6));
			await processChunk(chunk);
		}
	}
}
out.rest = buffer;
out.end = "eof";
finish(0);

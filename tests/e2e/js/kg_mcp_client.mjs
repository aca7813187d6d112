// Parley's knowledge MCP server (POST /mcp) through the MCP TypeScript
// SDK's own client: Client + StreamableHTTPClientTransport.  Connects with
// the token given, does what the step says and prints one JSON line of
// what it saw; the Python test (t_knowledge_mcp.py) judges it.
// usage: node kg_mcp_client.mjs PORT TOKEN PROJECT STEP
//   STEP full: list tools and templates, record, query, read both
//              resources, an invalid batch, an unknown tool
//   STEP observer: query and read, then try to record
//   STEP scoped: query a project the token does not reach
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from
    "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [port, token, project, step] = process.argv.slice(2);
const out = { step };

function text(r) {
	return (r.content || []).filter((c) => c.type === "text")
	    .map((c) => c.text).join("");
}

async function tryCall(client, name, args) {
	try {
		const r = await client.callTool({ name, arguments: args });
		return { isError: !!r.isError, text: text(r) };
	} catch (e) {
		return { thrown: true, code: e.code, message: String(e.message) };
	}
}

const transport = new StreamableHTTPClientTransport(
    new URL(`http://127.0.0.1:${port}/mcp`),
    { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
const client = new Client({ name: "parley-e2e", version: "1.0.0" });

try {
	await client.connect(transport);
	out.sessionId = transport.sessionId;
	out.protocolVersion = transport.protocolVersion;
	out.server = client.getServerVersion();
	out.capabilities = client.getServerCapabilities();
	if (step === "full") {
		const tools = await client.listTools();
		out.tools = tools.tools;
		out.templates = (await client.listResourceTemplates())
		    .resourceTemplates;
		out.resources = (await client.listResources()).resources;
		out.act = await tryCall(client, "knowledge_act", {
			projectId: project,
			actions: [
				["record-principle", { name: "mcp-principle",
				    description: "Recorded over MCP",
				    confidence: 0.75, tags: ["mcp"] }],
				["record-decision", { name: "mcp-decision",
				    description: "Serve knowledge over MCP",
				    rationale: "IDE agents speak it",
				    status: "active", impact: 7 }],
				["link-entities", { from: "mcp-decision",
				    to: "mcp-principle", type: "supports" }],
			],
		});
		out.query = await tryCall(client, "knowledge_query", {
			projectId: project,
			query: "(list (get-principles) (get-decisions))",
		});
		out.queryJson = await tryCall(client, "knowledge_query", {
			projectId: project, query: "(get-principles)",
			format: "json",
		});
		const md = await client.readResource({
			uri: `parley-knowledge://${project}` });
		out.md = md.contents;
		const js = await client.readResource({
			uri: `parley-knowledge://${project}/json` });
		out.json = js.contents;
		out.invalid = await tryCall(client, "knowledge_act", {
			projectId: project,
			actions: [["record-decision", { name: "bad",
			    description: "d", status: "maybe" }]],
		});
		out.unknownTool = await tryCall(client, "no_such_tool", {});
		out.badArgs = await tryCall(client, "knowledge_query",
		    { projectId: project });
		try {
			await client.readResource({ uri: "file:///etc/passwd" });
			out.badUri = { thrown: false };
		} catch (e) {
			out.badUri = { thrown: true, code: e.code };
		}
		out.ping = await client.ping();
	} else if (step === "observer") {
		out.query = await tryCall(client, "knowledge_query",
		    { projectId: project, query: "(get-principles)" });
		out.md = (await client.readResource({
			uri: `parley-knowledge://${project}` })).contents;
		out.act = await tryCall(client, "knowledge_act", {
			projectId: project,
			actions: [["record-principle", { name: "from-observer",
			    description: "must not land" }]],
		});
	} else if (step === "scoped") {
		out.query = await tryCall(client, "knowledge_query",
		    { projectId: project, query: "(get-principles)" });
		try {
			await client.readResource({
				uri: `parley-knowledge://${project}` });
			out.read = { thrown: false };
		} catch (e) {
			out.read = { thrown: true, code: e.code,
			    message: String(e.message) };
		}
	}
	await client.close();
} catch (e) {
	out.error = String(e && e.stack || e);
}
console.log(JSON.stringify(out));
process.exit(out.error ? 1 : 0);

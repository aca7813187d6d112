// A Model Context Protocol server, built on the MCP project's own SDK, whose
// one tool has an effect the test can count: "append" waits args.ms, then
// appends a line to $EFFECT_FILE.  No annotations: per the MCP
// specification it is then destructive and not read-only.  Stateless
// Streamable HTTP on 127.0.0.1:$PORT/mcp.
import fs from "node:fs";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { serveMcp } from "./mcp_http.mjs";
import { ListToolsRequestSchema, CallToolRequestSchema } from "@modelcontextprotocol/sdk/types.js";

function server() {
  const s = new Server({ name: "effect", version: "1.0.0" },
                       { capabilities: { tools: {} } });
  s.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{
      name: "append",
      description: "Appends a line to a file, after waiting ms",
      inputSchema: { type: "object", properties: {
        ms: { type: "number" }, line: { type: "string" } } },
    }],
  }));
  s.setRequestHandler(CallToolRequestSchema, async (req) => {
    const a = req.params.arguments || {};
    await new Promise((r) => setTimeout(r, Number(a.ms) || 0));
    fs.appendFileSync(process.env.EFFECT_FILE, (a.line || "x") + "\n");
    return { content: [{ type: "text", text: "appended" }] };
  });
  return s;
}

serveMcp(server);

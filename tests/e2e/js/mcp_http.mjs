// What the tests' own MCP servers share: serving one made by makeServer()
// per request, stateless Streamable HTTP on 127.0.0.1:$PORT/mcp; prints
// "listening" once it does.
import http from "node:http";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";

export function serveMcp(makeServer) {
  http.createServer(async (req, res) => {
    if (req.url !== "/mcp") {
      res.writeHead(404).end();
      return;
    }
    if (req.method !== "POST") {
      res.writeHead(405).end();
      return;
    }
    const t = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    const s = makeServer();
    res.on("close", () => { t.close(); s.close(); });
    await s.connect(t);
    await t.handleRequest(req, res);
  }).listen(Number(process.env.PORT), "127.0.0.1", () => {
    console.log("listening");
  });
}

const ws = new WebSocket("ws://localhost:7777/chat");
ws.onopen = () => ws.send(JSON.stringify({v: 1, type: "chat", sessionId: "my-session",
                                          message: "Explain the WebSocket protocol"}));
ws.onmessage = (event) => {
  const data = JSON.parse(event.data);
  switch (data.type) {
    case "token": process.stdout.write(data.content); break;
    case "tool_approve_request":
      ws.send(JSON.stringify({v: 1, type: "tool_approve", sessionId: data.sessionId,
                              toolCallId: data.toolCallId, decision: "approve"}));
      break;
    case "done": console.log("\n[Done]", data.usage); break;
    case "error": console.error("[Error]", data.message); break;
  }
};

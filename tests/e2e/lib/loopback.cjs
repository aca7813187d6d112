// Preloaded with `node --require` into servers that listen on every
// interface with no option to choose (server-everything calls
// app.listen(PORT)): a listen() without a host gets 127.0.0.1, so test
// servers are never reachable from outside the machine.
"use strict";
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const a = args[0];
  if (a !== null && typeof a === "object" && !Array.isArray(a)) {
    if (a.port !== undefined && a.host === undefined && a.path === undefined)
      args[0] = Object.assign({}, a, { host: "127.0.0.1" });
  } else if ((typeof a === "number" || (typeof a === "string" && /^\d+$/.test(a))) &&
             (args.length < 2 || typeof args[1] !== "string")) {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};

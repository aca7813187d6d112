// Preloaded into the example's node: `localhost` resolves to ::1 first, then
// 127.0.0.1, as on a stock Debian 12 (/etc/hosts lists ::1 localhost) with
// its Node.js 18, whatever this machine's /etc/hosts and Node.js say.  A
// daemon that answered on 127.0.0.1 only would refuse the example.
"use strict";
const dns = require("dns");
const lookup = dns.lookup;
dns.lookup = function (host, opts, cb) {
  if (typeof opts === "function") {
    cb = opts;
    opts = {};
  } else if (typeof opts === "number") {
    opts = { family: opts };
  }
  opts = opts || {};
  if (String(host).toLowerCase() !== "localhost")
    return lookup.call(this, host, opts, cb);
  let all = [{ address: "::1", family: 6 }, { address: "127.0.0.1", family: 4 }];
  if (opts.family === 4 || opts.family === 6)
    all = all.filter((a) => a.family === opts.family);
  process.nextTick(() => {
    if (opts.all) cb(null, all);
    else cb(null, all[0].address, all[0].family);
  });
  return {};
};

// What both peers share: their command line and the token stamp.
'use strict';

const { performance } = require('perf_hooks');

// --name VALUE from the command line, or dflt.
function option(name, dflt) {
  const i = process.argv.indexOf('--' + name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : dflt;
}

// Wall-clock microseconds: the stamp the load generator subtracts from its
// own receive time.
function stampUs() {
  return Math.round((performance.timeOrigin + performance.now()) * 1000);
}

module.exports = { option, stampUs };

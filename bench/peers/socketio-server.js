#!/usr/bin/env node
// A Socket.IO 4 session server the way its documentation sets one up for
// several nodes: the Redis Streams adapter (every broadcast is XADDed to a
// Redis stream first) and connection state recovery (a client that comes
// back within maxDisconnectionDuration gets the packets it missed).
//
//   node socketio-server.js --port P --redis redis://127.0.0.1:PORT
//                           [--host 127.0.0.1] [--max-len 1000000]
//                           [--workers N]
//
// Handshake auth {session, role}; the socket joins the room `session`.
// Client event "chat" {message, tokens, interval} (from a user): the server
// emits to the room "token" {seq, content: "<wall-clock µs> "} `tokens`
// times, one every `interval` ms (0: as fast as possible), then
// "done" {seq}.  Seq is per session, kept in the process that runs the turn.
// --workers N runs N processes (node:cluster) sharing the port, the way
// Socket.IO is scaled over the cores of one machine: websocket-only
// transport needs no sticky sessions, and the adapter and the recovered
// sessions go through Redis, so a client may come back to any of them.
// See README.md.
'use strict';

const cluster = require('cluster');
const http = require('http');
const { option, stampUs } = require('./common');
const { Server } = require('socket.io');
const { createClient } = require('redis');
const { createAdapter } = require('@socket.io/redis-streams-adapter');


const port = Number(option('port', '0'));
const host = option('host', '127.0.0.1');
const redisUrl = option('redis', 'redis://127.0.0.1:6379');
const maxLen = Number(option('max-len', '1000000'));
const workers = Math.max(1, Number(option('workers', '1')));
const BATCH = 64;            // tokens emitted between yields when interval is 0

if (!/^127\.|^localhost$|^::1$/.test(host)) {
  console.error('socketio-server: binds a loopback address only');
  process.exit(2);
}


async function main() {
  const redisClient = createClient({ url: redisUrl });
  redisClient.on('error', (err) => console.error('redis: %s', err.message));
  await redisClient.connect();

  const httpServer = http.createServer((req, res) => {
    res.writeHead(404);
    res.end();
  });
  const io = new Server(httpServer, {
    serveClient: false,
    transports: ['websocket'],
    perMessageDeflate: false,
    maxHttpBufferSize: 1024 * 1024,
    connectionStateRecovery: {
      maxDisconnectionDuration: 2 * 60 * 1000,
      skipMiddlewares: true,
    },
    adapter: createAdapter(redisClient, { maxLen }),
  });

  // session id -> { seq, busy, queue }
  const sessions = new Map();
  const getSession = (id) => {
    let s = sessions.get(id);
    if (s === undefined) {
      s = { seq: 0, busy: false, queue: [] };
      sessions.set(id, s);
    }
    return s;
  };

  function runTurn(id, s, tokens, interval) {
    s.busy = true;
    let left = tokens;
    const room = io.to(id);
    const finish = () => {
      room.emit('done', { seq: ++s.seq });
      s.busy = false;
      const next = s.queue.shift();
      if (next !== undefined)
        runTurn(id, s, next.tokens, next.interval);
    };
    if (interval > 0) {
      const tick = () => {
        if (left <= 0)
          return finish();
        left--;
        io.to(id).emit('token', { seq: ++s.seq, content: stampUs() + ' ' });
        setTimeout(tick, interval);
      };
      setTimeout(tick, interval);
    } else {
      const burst = () => {
        for (let i = 0; i < BATCH && left > 0; i++, left--)
          io.to(id).emit('token', { seq: ++s.seq, content: stampUs() + ' ' });
        if (left > 0)
          setImmediate(burst);
        else
          finish();
      };
      setImmediate(burst);
    }
  }

  io.on('connection', (socket) => {
    const auth = socket.handshake.auth || {};
    const id = typeof auth.session === 'string' ? auth.session : '';
    if (!id) {
      socket.disconnect(true);
      return;
    }
    const role = auth.role === 'observer' ? 'observer' : 'user';
    // A recovered socket is already back in its room; joining again is a
    // no-op.
    socket.join(id);
    if (role === 'user') {
      socket.on('chat', (msg) => {
        const s = getSession(id);
        const tokens = Math.max(0, Math.min(10000000,
                                            Number(msg && msg.tokens) || 0));
        const interval = Math.max(0, Number(msg && msg.interval) || 0);
        if (s.busy)
          s.queue.push({ tokens, interval });
        else
          runTurn(id, s, tokens, interval);
      });
    }
  });

  httpServer.listen({ port, host, backlog: 1024 }, () => {
    console.error('socketio-server listening on %s:%d (redis %s)', host,
                  httpServer.address().port, redisUrl);
  });
}

if (workers > 1 && cluster.isPrimary) {
  for (let i = 0; i < workers; i++)
    cluster.fork();
  let stopping = false;
  cluster.on('exit', (w, code) => {
    if (!stopping) {
      console.error('socketio-server: worker %d exited (%s)', w.process.pid,
                    code);
      stopping = true;
      for (const id in cluster.workers)
        cluster.workers[id].kill();
      process.exitCode = 1;
    }
  });
  for (const sig of ['SIGINT', 'SIGTERM'])
    process.on(sig, () => {
      stopping = true;
      for (const id in cluster.workers)
        cluster.workers[id].kill();
    });
} else {
  main().catch((err) => {
    console.error('socketio-server: %s', err.stack || err);
    process.exit(1);
  });
  for (const sig of ['SIGINT', 'SIGTERM'])
    process.on(sig, () => process.exit(0));
}

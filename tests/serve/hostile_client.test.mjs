// aff-serve against clients that misbehave, over raw sockets: idle connections that
// would hold every slot, a body nesting brackets 100 000 deep, and a shutdown by SIGTERM
// with a stream running and a request queued. The server runs the scripted test engine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { startServer } from './server.mjs';

function connect(port) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s));
    s.on('error', reject);
  });
}

// Sends one raw request and collects everything until the server closes the connection.
async function rawRequest(port, text) {
  const s = await connect(port);
  let got = '';
  s.on('data', (d) => { got += d; });
  s.write(text);
  await once(s, 'close');
  return got;
}

test('300 idle connections do not lock a client out', { timeout: 60000 }, async () => {
  const server = await startServer(['--test-engine', '--max-tokens-floor', '0']);
  try {
    const idle = [];
    let closedByServer = 0;
    for (let i = 0; i < 300; i++) {
      const s = await connect(server.port).catch(() => null);
      if (!s) continue;
      s.on('error', () => {});
      s.on('close', () => { closedByServer++; });
      idle.push(s);
    }
    const r = await fetch(`${server.base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(r.status, 200, await r.text());
    // The cap held: the server closed idle sockets to stay at 256 open connections.
    assert.ok(closedByServer >= 300 - 256, `only ${closedByServer} idle connections were closed`);
    for (const s of idle) s.destroy();
  } finally {
    await server.stop();
  }
});

test('a connection that sends nothing is closed after the 10 s header timeout', { timeout: 60000 }, async () => {
  const server = await startServer(['--test-engine']);
  try {
    const s = await connect(server.port);
    const t0 = Date.now();
    const closed = once(s, 'close');
    const timer = new Promise((r) => setTimeout(() => r('still open'), 15000));
    assert.notEqual(await Promise.race([closed, timer]), 'still open', 'held past 15 s (it was 60 s)');
    const ms = Date.now() - t0;
    assert.ok(ms > 9000, `closed after ${ms} ms`);
  } finally {
    await server.stop();
  }
});

test('a body nesting 100 000 brackets deep is a 400, and the server lives on', { timeout: 30000 }, async () => {
  const server = await startServer(['--test-engine', '--max-tokens-floor', '0']);
  try {
    const body = '{"messages": [{"role": "user", "content": "hi"}], "ignored": ' + '['.repeat(100000) +
      ']'.repeat(100000) + '}';
    const reply = await rawRequest(server.port, 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n' +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    assert.match(reply, /^HTTP\/1\.1 400 /);
    const json = JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4));
    assert.equal(json.error.code, 'invalid_json');
    assert.match(json.error.message, /deeper than 512 levels/);
    const health = await fetch(`${server.base}/health`);
    assert.equal(health.status, 200);
  } finally {
    await server.stop();
  }
});

// Reads an SSE stream to its end: the finish reasons seen and whether [DONE] came.
async function readStream(response) {
  const text = await response.text();
  const finish = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
    const chunk = JSON.parse(line.slice(6));
    const f = chunk.choices?.[0]?.finish_reason;
    if (f) finish.push(f);
  }
  return { finish, done: text.includes('data: [DONE]') };
}

test('SIGTERM: the running stream ends cleanly, the queued request gets 503, exit 0', { timeout: 60000 }, async () => {
  const server = await startServer(['--test-engine', '--test-engine-delay-ms', '25', '--max-tokens-floor', '0']);
  const ask = (stream, maxTokens) => fetch(`${server.base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ stream, max_tokens: maxTokens, messages: [{ role: 'user', content: 'count' }] }),
  });
  // 1000 tokens at 25 ms: longer than the 10 s grace period, so it is cut short.
  const running = await ask(true, 1000);
  assert.equal(running.status, 200);
  const runningDone = readStream(running);
  await new Promise((r) => setTimeout(r, 200));
  const queued = ask(false, 4);
  await new Promise((r) => setTimeout(r, 200));
  const t0 = Date.now();
  const exited = server.exited();
  server.signal('SIGTERM');
  const q = await queued;
  assert.equal(q.status, 503);
  assert.equal((await q.json()).error.code, 'shutting_down');
  // No new connection once shutting down.
  await new Promise((r) => setTimeout(r, 200));
  await assert.rejects(fetch(`${server.base}/health`));
  const s = await runningDone;
  assert.deepEqual(s.finish, ['length']);
  assert.ok(s.done, 'the stream ended without [DONE]');
  const code = await exited;
  assert.equal(code, 0, server.log());
  const seconds = (Date.now() - t0) / 1000;
  assert.ok(seconds > 9 && seconds < 14, `stopped after ${seconds} s (grace period 10 s)`);
  assert.match(server.log(), /SIGTERM: shutting down/);
});

test('SIGINT with a short stream running: it finishes normally, then exit 0', { timeout: 30000 }, async () => {
  const server = await startServer(['--test-engine', '--test-engine-delay-ms', '20', '--max-tokens-floor', '0']);
  const running = await fetch(`${server.base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ stream: true, max_tokens: 30, messages: [{ role: 'user', content: 'count' }] }),
  });
  const done = readStream(running);
  await new Promise((r) => setTimeout(r, 100));
  const exited = server.exited();
  server.signal('SIGINT');
  const s = await done;
  assert.deepEqual(s.finish, ['length']);
  assert.ok(s.done);
  assert.equal(await exited, 0, server.log());
});

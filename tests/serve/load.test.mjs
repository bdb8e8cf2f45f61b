// The bounded load test: 32 openai clients stream chat replies at once over loopback.
// One generation runs at a time and the others queue (the queue holds 64), so every
// client must finish with its full, uninterleaved reply. Bounded: 32 replies of 40
// tokens at 1 ms a token, a few seconds in all; node's runner stops it at 60 s.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './server.mjs';

let server;
before(async () => {
  server = await startServer(['--test-engine', '--test-engine-delay-ms', '1', '--max-tokens-floor', '0']);
});
after(async () => { await server.stop(); });

test('32 concurrent streaming clients all complete', { timeout: 60000 }, async () => {
  const clients = Array.from({ length: 32 }, () => new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'x', maxRetries: 0 }));
  const expected = '1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17';  // 40 bytes, then cut
  const t0 = Date.now();
  const results = await Promise.all(clients.map(async (client, i) => {
    const stream = await client.chat.completions.create({
      model: 'm', stream: true, max_tokens: 40, stream_options: { include_usage: true },
      messages: [{ role: 'user', content: `count for client ${i}` }],
    });
    let text = '';
    let finish = null;
    let usage = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    return { text, finish, usage };
  }));
  const ms = Date.now() - t0;
  for (const r of results) {
    assert.equal(r.text, expected.slice(0, 40));
    assert.equal(r.finish, 'length');
    assert.equal(r.usage.completion_tokens, 40);
  }
  assert.equal(await server.metric('aff_generated_tokens_total'), 32 * 40);
  assert.equal(await server.metric('aff_queue_length'), 0);
  console.log(`32 streams x 40 tokens in ${ms} ms`);
});

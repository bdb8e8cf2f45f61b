// aff-serve through the official openai client, as agents use it: models, chat
// (plain, streamed, thinking, logprobs, seeds), a full tool-call round trip in both
// modes, completions, client disconnects and the errors a client can provoke. The
// server runs the scripted test engine (not a model), so replies are known.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { expectError, startServer } from './server.mjs';

let server, client;
const KEY = 'test-key';
const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

before(async () => {
  server = await startServer(['--test-engine', '--test-engine-delay-ms', '2', '--max-tokens-floor', '0',
    '--api-key', KEY, '--ctx-size', '2048']);
  client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: KEY, maxRetries: 0 });
});
after(async () => { await server.stop(); });

// Collects a streamed chat reply the way an agent would.
async function collect(stream) {
  const out = { content: '', reasoning: '', calls: [], finish: null, usage: null, chunks: 0, ids: new Set() };
  for await (const chunk of stream) {
    out.chunks++;
    out.ids.add(chunk.id);
    if (chunk.usage) out.usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    const d = choice.delta;
    if (d.content) out.content += d.content;
    if (d.reasoning_content) out.reasoning += d.reasoning_content;
    for (const tc of d.tool_calls ?? []) {
      if (!out.calls[tc.index]) out.calls[tc.index] = { id: tc.id, name: tc.function?.name, arguments: '' };
      out.calls[tc.index].arguments += tc.function?.arguments ?? '';
    }
    if (choice.finish_reason) out.finish = choice.finish_reason;
  }
  return out;
}

test('models lists the served engine', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ['aff-test-engine']);
});

test('chat without streaming returns the reply, usage and timings', async () => {
  const r = await client.chat.completions.create({ model: 'aff-test-engine', messages: [{ role: 'user', content: 'hello' }] });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.content, 'You said: hello');
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.usage.completion_tokens, 'You said: hello'.length + 1);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(r.timings.predicted_n, r.usage.completion_tokens);
});

test('chat streaming yields the same text, then usage', async () => {
  const s = await client.chat.completions.create({
    model: 'm', stream: true, stream_options: { include_usage: true },
    messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'héllo wörld' }],
  });
  const out = await collect(s);
  assert.equal(out.content, 'You said: héllo wörld');
  assert.equal(out.finish, 'stop');
  assert.equal(out.ids.size, 1);
  assert.ok(out.chunks > 5);
  assert.equal(out.usage.completion_tokens, Buffer.byteLength('You said: héllo wörld') + 1);
});

test('thinking is selected per request and returned as reasoning_content', async () => {
  const on = await client.chat.completions.create({
    model: 'm', messages: [{ role: 'user', content: 'hello' }], chat_template_kwargs: { thinking: true },
  });
  assert.equal(on.choices[0].message.reasoning_content, 'The user wrote 5 bytes.');
  assert.equal(on.choices[0].message.content, 'You said: hello');
  const streamed = await collect(await client.chat.completions.create({
    model: 'm', stream: true, reasoning_effort: 'high', messages: [{ role: 'user', content: 'hello' }],
  }));
  assert.equal(streamed.reasoning, 'The user wrote 5 bytes.');
  assert.equal(streamed.content, 'You said: hello');
  const off = await client.chat.completions.create({
    model: 'm', messages: [{ role: 'user', content: 'hello' }], reasoning_effort: 'none',
  });
  assert.equal(off.choices[0].message.reasoning_content, undefined);
});

test('a full tool-call round trip, streamed', async () => {
  const messages = [{ role: 'user', content: 'Paris' }];
  const first = await collect(await client.chat.completions.create({ model: 'm', stream: true, tools: [weatherTool], messages }));
  assert.equal(first.finish, 'tool_calls');
  assert.equal(first.calls.length, 1);
  assert.equal(first.calls[0].name, 'get_weather');
  assert.match(first.calls[0].id, /^call_/);
  assert.deepEqual(JSON.parse(first.calls[0].arguments), { city: 'Paris' });
  messages.push({ role: 'assistant', content: null, tool_calls: first.calls.map((c) => ({
    id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) });
  messages.push({ role: 'tool', tool_call_id: first.calls[0].id, content: '{"t": 18}' });
  const second = await collect(await client.chat.completions.create({ model: 'm', stream: true, tools: [weatherTool], messages }));
  assert.equal(second.content, 'The tool returned: {"t": 18}');
  assert.equal(second.finish, 'stop');
});

test('a full tool-call round trip, not streamed; tool_choice none hides the tools', async () => {
  const messages = [{ role: 'user', content: 'Oslo' }];
  const r = await client.chat.completions.create({ model: 'm', tools: [weatherTool], tool_choice: 'auto', messages });
  const msg = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(msg.content, null);
  assert.deepEqual(JSON.parse(msg.tool_calls[0].function.arguments), { city: 'Oslo' });
  messages.push(msg, { role: 'tool', tool_call_id: msg.tool_calls[0].id, content: 'snow' });
  const r2 = await client.chat.completions.create({ model: 'm', tools: [weatherTool], messages });
  assert.equal(r2.choices[0].message.content, 'The tool returned: snow');
  const none = await client.chat.completions.create({ model: 'm', tools: [weatherTool], tool_choice: 'none',
    messages: [{ role: 'user', content: 'Oslo' }] });
  assert.equal(none.choices[0].message.content, 'You said: Oslo');
});

test('a reply cut by max_tokens inside a tool call shows no markup, streamed or not', async () => {
  // The scripted tool call is well over 40 bytes of DSML; 40 tokens end inside it.
  const messages = [{ role: 'user', content: 'Lisbon' }];
  const r = await client.chat.completions.create({ model: 'm', tools: [weatherTool], max_tokens: 40, messages });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 40);
  assert.equal(r.choices[0].message.content, '');  // the unfinished call is dropped, not shown as text
  assert.equal(r.choices[0].message.tool_calls, undefined);
  const s = await collect(await client.chat.completions.create({ model: 'm', stream: true, tools: [weatherTool],
    max_tokens: 40, messages }));
  assert.equal(s.finish, 'length');
  assert.equal(s.content, '');
  assert.equal(s.calls.length, 0);
});

test('max_tokens, stop, seed and logprobs', async () => {
  const cut = await client.chat.completions.create({ model: 'm', max_tokens: 6, messages: [{ role: 'user', content: 'count' }] });
  assert.equal(cut.choices[0].message.content, '1 2 3 ');
  assert.equal(cut.choices[0].finish_reason, 'length');
  const stopped = await client.chat.completions.create({ model: 'm', max_completion_tokens: 100, stop: [' 5'],
    messages: [{ role: 'user', content: 'count' }] });
  assert.equal(stopped.choices[0].message.content, '1 2 3 4');
  assert.equal(stopped.choices[0].finish_reason, 'stop');
  const seeded = async (seed) => (await client.chat.completions.create({ model: 'm', seed, temperature: 1,
    messages: [{ role: 'user', content: 'random' }] })).choices[0].message.content;
  const a = await seeded(7);
  assert.equal(a.length, 24);
  assert.equal(await seeded(7), a);
  assert.notEqual(await seeded(8), a);
  const lp = await client.chat.completions.create({ model: 'm', logprobs: true, top_logprobs: 2,
    messages: [{ role: 'user', content: 'hi' }] });
  const content = lp.choices[0].logprobs.content;
  assert.equal(content.length, lp.usage.completion_tokens);
  assert.equal(content[0].token, 'Y');
  assert.equal(content[0].top_logprobs.length, 2);
  assert.ok(Math.abs(content[0].logprob) < 1e-6);
});

test('completions: text and token prompts, streaming', async () => {
  const r = await client.completions.create({ model: 'm', prompt: 'abc', max_tokens: 50 });
  assert.equal(r.choices[0].text, ' echo: abc');
  assert.equal(r.choices[0].finish_reason, 'stop');
  const ids = await client.completions.create({ model: 'm', prompt: [99, 100], max_tokens: 50 });
  assert.equal(ids.choices[0].text, ' echo: ab');  // test engine: token id = byte + 2
  let text = '';
  let finish = null;
  for await (const c of await client.completions.create({ model: 'm', prompt: 'xyz', max_tokens: 4, stream: true })) {
    text += c.choices[0]?.text ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, ' ech');
  assert.equal(finish, 'length');
});

test('errors come back as OpenAI errors', async () => {
  await expectError(client.chat.completions.create({ model: 'm', messages: [{ role: 'robot', content: 'x' }] }), 400,
    (e) => { assert.equal(e.param, 'messages[0].role'); assert.equal(e.type, 'invalid_request_error'); });
  await expectError(client.chat.completions.create({ model: 'm', n: 2, messages: [{ role: 'user', content: 'x' }] }), 400,
    (e) => assert.equal(e.param, 'n'));
  await expectError(client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(3000) }] }), 400,
    (e) => assert.equal(e.code, 'context_length_exceeded'));
  await expectError(client.chat.completions.create({ model: 'm', temperature: 'warm', messages: [{ role: 'user', content: 'x' }] }), 400,
    (e) => assert.equal(e.param, 'temperature'));
  const wrongKey = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'nope', maxRetries: 0 });
  await expectError(wrongKey.models.list(), 401, (e) => assert.equal(e.code, 'invalid_api_key'));
  assert.equal((await fetch(`${server.base}/health`)).status, 200);  // open without a key
});

test('a client that disconnects mid-stream stops its generation; the next request is not delayed', async () => {
  const auth = { Authorization: `Bearer ${KEY}` };
  const before = await server.metric('aff_generated_tokens_total', auth);
  const stream = await client.chat.completions.create({ model: 'm', stream: true, max_tokens: 100000,
    messages: [{ role: 'user', content: 'count' }] });
  let chunks = 0;
  for await (const _ of stream) { if (++chunks === 10) break; }  // break aborts the request
  // The server notices before its next token (2 ms apart here): well within 500 ms.
  const t0 = Date.now();
  while (await server.metric('aff_generations_cancelled_total', auth) < 1) {
    assert.ok(Date.now() - t0 < 500, 'generation still running 500 ms after the client left');
    await new Promise((r) => setTimeout(r, 5));
  }
  const stoppedAt = await server.metric('aff_generated_tokens_total', auth);
  assert.ok(stoppedAt - before < 1000, `generated ${stoppedAt - before} tokens`);
  const t1 = Date.now();
  const r = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'next' }] });
  assert.equal(r.choices[0].message.content, 'You said: next');
  assert.ok(Date.now() - t1 < 2000, `next request took ${Date.now() - t1} ms`);
  // Nothing more was generated for the abandoned stream.
  assert.equal(await server.metric('aff_generated_tokens_total', auth) - stoppedAt, 'You said: next'.length + 1);
});

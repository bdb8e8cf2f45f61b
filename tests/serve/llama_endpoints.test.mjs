// llama-server's utility endpoints (/tokenize, /detokenize, /apply-template, /props),
// CORS (--cors-origin, preflight), the API key in x-api-key, and /metrics read by a
// strict exposition-format parser (prometheus_text.mjs) with its latency histograms.
// The server runs the scripted test engine: its tokens are bytes (id = byte + 2, BOS 0).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './server.mjs';
import { parseExposition } from './prometheus_text.mjs';

let server, client;
const KEY = 'test-key';
const ORIGIN = 'http://front.example';
const auth = { authorization: `Bearer ${KEY}` };

before(async () => {
  server = await startServer(['--test-engine', '--max-tokens-floor', '0', '--api-key', KEY, '--ctx-size', '2048',
    '--cors-origin', ORIGIN, '--temp', '0.6']);
  client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: KEY, maxRetries: 0 });
});
after(async () => { await server.stop(); });

const post = (path, body, headers = auth) =>
  fetch(server.base + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body) });
const bytesAsIds = (text) => [...Buffer.from(text)].map((b) => b + 2);

test('/tokenize and /detokenize: ids, BOS, pieces, and the errors', async () => {
  assert.deepEqual(await (await post('/tokenize', { content: 'hi' })).json(), { tokens: [106, 107] });
  assert.deepEqual(await (await post('/tokenize', { content: 'hi', add_special: true })).json(), { tokens: [0, 106, 107] });
  assert.deepEqual(await (await post('/tokenize', { content: 'hé', with_pieces: true })).json(),
    { tokens: [{ id: 106, piece: 'h' }, { id: 197, piece: [195] }, { id: 171, piece: [169] }] });
  assert.deepEqual(await (await post('/detokenize', { tokens: [106, 197, 171] })).json(), { content: 'hé' });
  assert.deepEqual(await (await post('/detokenize', { tokens: [] })).json(), { content: '' });
  let r = await post('/tokenize', { text: 'hi' });
  assert.equal(r.status, 400);
  assert.equal((await r.json()).error.param, 'content');
  r = await post('/detokenize', { tokens: [5, 999] });
  assert.equal(r.status, 400);
  assert.match((await r.json()).error.message, /tokens\[1\] = 999 is not a token id/);
  r = await fetch(`${server.base}/tokenize`, { headers: auth });
  assert.equal(r.status, 405);
  r = await post('/tokenize', { content: 'hi' }, {});
  assert.equal(r.status, 401);
});

test('/apply-template renders a chat to the prompt the model sees, as text and ids', async () => {
  const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hi' }];
  const j = await (await post('/apply-template', { messages })).json();
  assert.equal(j.prompt, '<｜begin▁of▁sentence｜>Be brief.<｜User｜>hi<｜Assistant｜></think>');
  assert.deepEqual(j.tokens, bytesAsIds(j.prompt));
  // The same prompt a chat request runs: its prompt_tokens count.
  const chat = await client.chat.completions.create({ model: 'm', messages, max_tokens: 1 });
  assert.equal(chat.usage.prompt_tokens, j.tokens.length);
  const tool = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } };
  const withTools = await (await post('/apply-template', { messages, tools: [tool] })).json();
  assert.match(withTools.prompt, /get_weather/);
  const hidden = await (await post('/apply-template', { messages, tools: [tool], tool_choice: 'none' })).json();
  assert.equal(hidden.prompt, j.prompt);
  const thinking = await (await post('/apply-template', { messages, reasoning_effort: 'high' })).json();
  assert.match(thinking.prompt, /<｜Assistant｜><think>$/);
  const bad = await post('/apply-template', { messages: [{ role: 'wizard', content: 'x' }] });
  assert.equal(bad.status, 400);
});

test('/props reports the model, the context and the settings as llama-server does', async () => {
  const r = await fetch(`${server.base}/props`, { headers: auth });
  assert.equal(r.status, 200);
  const p = await r.json();
  assert.equal(p.default_generation_settings.n_ctx, 2048);
  assert.equal(p.n_ctx, 2048);
  assert.equal(p.default_generation_settings.params.temperature, 0.6);
  assert.equal(p.default_generation_settings.params.top_p, 1);
  assert.equal(p.default_generation_settings.params.thinking, false);
  assert.equal(p.total_slots, 1);
  assert.equal(p.model_alias, 'aff-test-engine');
  assert.equal(p.n_vocab, 258);
  assert.equal(p.queue_size, 64);
  assert.match(p.build_info, /^aff \d+\.\d+\.\d+$/);
  assert.equal((await post('/props', {})).status, 405);
});

test('CORS: an allowed origin gets the headers and its preflight is answered without a key', async () => {
  const pre = await fetch(`${server.base}/v1/chat/completions`, { method: 'OPTIONS',
    headers: { origin: ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization' } });
  assert.equal(pre.status, 204);
  assert.equal(pre.headers.get('access-control-allow-origin'), ORIGIN);
  assert.match(pre.headers.get('access-control-allow-methods'), /POST/);
  assert.match(pre.headers.get('access-control-allow-headers'), /Authorization/);
  const ok = await fetch(`${server.base}/v1/models`, { headers: { origin: ORIGIN, ...auth } });
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get('access-control-allow-origin'), ORIGIN);
  assert.equal(ok.headers.get('vary'), 'Origin');
  // A refusal carries it too, so the page can read the error.
  const refused = await fetch(`${server.base}/v1/models`, { headers: { origin: ORIGIN } });
  assert.equal(refused.status, 401);
  assert.equal(refused.headers.get('access-control-allow-origin'), ORIGIN);
  const other = await fetch(`${server.base}/v1/models`, { headers: { origin: 'http://evil.example', ...auth } });
  assert.equal(other.status, 200);
  assert.equal(other.headers.get('access-control-allow-origin'), null);
  const otherPre = await fetch(`${server.base}/v1/models`, { method: 'OPTIONS',
    headers: { origin: 'http://evil.example', 'access-control-request-method': 'GET' } });
  assert.equal(otherPre.status, 401);
});

test('CORS is off by default', async () => {
  const plain = await startServer(['--test-engine']);
  try {
    const r = await fetch(`${plain.base}/v1/models`, { headers: { origin: ORIGIN } });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('access-control-allow-origin'), null);
    const pre = await fetch(`${plain.base}/v1/models`, { method: 'OPTIONS',
      headers: { origin: ORIGIN, 'access-control-request-method': 'GET' } });
    assert.equal(pre.status, 405);
  } finally {
    await plain.stop();
  }
});

test('the API key is also accepted as x-api-key', async () => {
  assert.equal((await fetch(`${server.base}/v1/models`, { headers: { 'x-api-key': KEY } })).status, 200);
  const wrong = await fetch(`${server.base}/v1/models`, { headers: { 'x-api-key': 'nope' } });
  assert.equal(wrong.status, 401);
  assert.equal((await wrong.json()).error.code, 'invalid_api_key');
  const missing = await (await fetch(`${server.base}/v1/models`)).json();
  assert.match(missing.error.message, /x-api-key/);
});

test('/metrics parses strictly and its histograms count first tokens and token intervals', async () => {
  const before = parseExposition(await (await fetch(`${server.base}/metrics`, { headers: auth })).text());
  const count = (m, name) => m.families.get(name).samples.find((s) => s.name === `${name}_count`).value;
  const first0 = count(before, 'aff_time_to_first_token_seconds');
  const step0 = count(before, 'aff_time_per_output_token_seconds');
  const r = await client.chat.completions.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'count' }] });
  assert.equal(r.usage.completion_tokens, 5);
  const text = await (await fetch(`${server.base}/metrics`, { headers: auth })).text();
  const m = parseExposition(text);
  assert.equal(m.families.get('aff_time_to_first_token_seconds').type, 'histogram');
  assert.equal(m.families.get('aff_time_per_output_token_seconds').type, 'histogram');
  assert.equal(count(m, 'aff_time_to_first_token_seconds'), first0 + 1);
  assert.equal(count(m, 'aff_time_per_output_token_seconds'), step0 + 4);
  assert.equal(m.families.get('aff_queue_length').type, 'gauge');
  assert.equal(m.families.get('aff_queue_length').samples[0].value, 0);
});

test('the exposition parser refuses what is not the format', () => {
  const ok = '# TYPE a_total counter\na_total 1\n';
  assert.doesNotThrow(() => parseExposition(ok));
  const bad = [
    'a_total 1',                                               // no final newline
    '# TYPE a_total counter\na_total one\n',                   // value
    '# TYPE a_total counter\na_total{x="1} 1\n',               // unterminated label
    '# TYPE a_total counter\na_total{x="\\q"} 1\n',            // escape
    '# TYPE a_total counter\na_total{9x="1"} 1\n',             // label name
    '# TYPE a_total counter\n# TYPE a_total counter\na_total 1\n',
    '# TYPE a_total widget\na_total 1\n',
    '# TYPE a counter\na 1\n',                                 // counter without _total
    '# TYPE a gauge\n# TYPE b gauge\na 1\nb 1\na 2\n',         // family split
    '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n',
    '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n',  // no +Inf
    '# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 1\n',
  ];
  for (const text of bad) assert.throws(() => parseExposition(text), Error, JSON.stringify(text));
});

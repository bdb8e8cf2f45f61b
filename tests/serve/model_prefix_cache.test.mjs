// aff-serve's prefix cache end to end, through the official openai client, on the random
// tiny DeepSeek-V4 checkpoint with the real tokenizer ($AFF_MODEL_DIR, $AFF_TOKENIZER_JSON):
// two servers, one with the cache (the default) and one with --prefix-cache-mib 0, hold the
// same two-turn chats at temperature 0. The second turn on the cached server reports the
// tokens it took from the cache (usage.prompt_tokens_details.cached_tokens, timings.cache_n,
// /metrics) and writes exactly the reply of the server without the cache.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './server.mjs';

let cached, plain;
const MODEL = 'random-v4';

before(async () => {
  const dir = process.env.AFF_MODEL_DIR, tok = process.env.AFF_TOKENIZER_JSON;
  if (!dir || !tok) throw new Error('AFF_MODEL_DIR and AFF_TOKENIZER_JSON must be set (ctest does it)');
  const common = ['-m', dir, '--tokenizer', tok, '--threads', '2', '--max-tokens-floor', '0', '--ctx-size', '1024'];
  const start = async (extra) => {
    const server = await startServer([...common, ...extra]);
    return { server, client: new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused', maxRetries: 0 }) };
  };
  cached = await start([]);
  plain = await start(['--prefix-cache-mib', '0']);
});
after(async () => {
  await cached?.server.stop();
  await plain?.server.stop();
});

// Tokens of "Hello world" up to and including <｜Assistant｜>, the point the server
// snapshots a chat prompt at: BOS <｜User｜> "Hello" " world" <｜Assistant｜>.
const HELLO_WORLD_TO_ASSISTANT = 5;
// After <｜Assistant｜> a prompt ends in "<think>" or "</think>", three tokens either way:
// "<" or "</", "think", ">".
const THINK_TAG = 3;

// Both turns of one chat on one server; the second resends the first and its reply.
async function twoTurns(client, question, extra) {
  const ask = (messages) => client.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 12,
    messages, ...extra });
  const first = await ask([{ role: 'user', content: question }]);
  const reply = first.choices[0].message;
  const second = await ask([
    { role: 'user', content: question },
    { role: 'assistant', content: reply.content ?? '', reasoning_content: reply.reasoning_content },
    { role: 'user', content: 'And then?' },
  ]);
  return { first, second };
}

// Each mode its own question: chats that start alike share cached prefixes across tests.
for (const [mode, question, extra] of [['without thinking', 'Hello world', {}],
  ['in thinking mode', 'Tell me a story', { thinking: { type: 'enabled' } }]]) {
  test(`second turn ${mode}: cached tokens reported, the same reply as without the cache`, async () => {
    const before = await cached.server.metric('aff_prompt_cached_tokens_total');
    const c = await twoTurns(cached.client, question, extra);
    const p = await twoTurns(plain.client, question, extra);
    // The first turn computes everything on both.
    assert.equal(c.first.usage.prompt_tokens_details.cached_tokens, 0);
    assert.equal(c.first.choices[0].message.content, p.first.choices[0].message.content);
    // The second turn: the first turn's prompt to <｜Assistant｜> at least came from the cache
    // (more when the reply's text tokenizes back to the tokens the model wrote), never all.
    const got = c.second.usage.prompt_tokens_details.cached_tokens;
    assert.ok(got >= c.first.usage.prompt_tokens - THINK_TAG, `cached_tokens ${got}`);
    assert.ok(got < c.second.usage.prompt_tokens, `cached_tokens ${got} of ${c.second.usage.prompt_tokens}`);
    assert.equal(c.second.timings.cache_n, got);
    assert.equal(c.second.timings.prompt_n, c.second.usage.prompt_tokens - got);
    assert.equal(c.second.usage.prompt_tokens, p.second.usage.prompt_tokens);
    assert.equal(p.second.usage.prompt_tokens_details.cached_tokens, 0);
    // Exactly the reply the uncached server writes.
    assert.equal(c.second.choices[0].message.content, p.second.choices[0].message.content);
    assert.equal(c.second.choices[0].message.reasoning_content, p.second.choices[0].message.reasoning_content);
    assert.equal(c.second.usage.completion_tokens, p.second.usage.completion_tokens);
    assert.equal(await cached.server.metric('aff_prompt_cached_tokens_total') - before, got);
  });
}

test('a streamed repeat reports its cached tokens in the usage chunk', async () => {
  const messages = [{ role: 'user', content: 'Stream me' }];
  const ask = async (client) => {
    let text = '', usage = null;
    for await (const chunk of await client.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 8,
      messages, stream: true, stream_options: { include_usage: true } })) {
      if (chunk.usage) usage = chunk.usage;
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    return { text, usage };
  };
  await ask(cached.client);
  const again = await ask(cached.client);
  const ref = await ask(plain.client);
  // The repeated prompt restores its own snapshot (to <｜Assistant｜>) or the first one's end.
  assert.ok(again.usage.prompt_tokens_details.cached_tokens >= HELLO_WORLD_TO_ASSISTANT - 1,
    JSON.stringify(again.usage));
  assert.equal(again.text, ref.text);
  assert.equal(ref.usage.prompt_tokens_details.cached_tokens, 0);
});

test('/metrics shows the cache on one server and leaves it out on the other', async () => {
  assert.ok(await cached.server.metric('aff_prefix_cache_hits_total') >= 3);
  assert.equal(await cached.server.metric('aff_prefix_cache_capacity_bytes'), 4096 * 1024 * 1024);
  assert.ok(await cached.server.metric('aff_prefix_cache_bytes') > 0);
  assert.ok(await cached.server.metric('aff_prefix_cache_entries') > 0);
  assert.equal(await plain.server.metric('aff_prompt_cached_tokens_total'), 0);
  const text = await (await fetch(`${plain.server.base}/metrics`)).text();
  assert.doesNotMatch(text, /aff_prefix_cache_/);
  assert.match(cached.server.log(), /prefix cache 4\.00 GiB; drafts off \(the model has no MTP layer\)\)/);
  assert.match(plain.server.log(), /prefix cache off; drafts off \(the model has no MTP layer\)\)/);
  assert.match(cached.server.log(), /POST \/v1\/chat\/completions 200 prompt=\d+ cached=[1-9]\d* completion=/);
});

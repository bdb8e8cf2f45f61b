// aff-serve serving a real model through the official openai client: a random tiny
// DeepSeek-V4 checkpoint with the real 129 280-token vocabulary (written at test time by
// aff_make_random_model; $AFF_MODEL_DIR) and the real tokenizer.json ($AFF_TOKENIZER_JSON),
// on the CPU reference path. Random weights write noise, so these tests check structure,
// token accounting against the real tokenizer, finish reasons and reproducibility; the
// exact replies and the tool-call round trip are checked against the scripted engine in
// openai_client.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { expectError, startServer } from './server.mjs';

let server, client;
const MODEL = 'random-v4';

before(async () => {
  const dir = process.env.AFF_MODEL_DIR, tok = process.env.AFF_TOKENIZER_JSON;
  if (!dir || !tok) throw new Error('AFF_MODEL_DIR and AFF_TOKENIZER_JSON must be set (ctest does it)');
  server = await startServer(['-m', dir, '--tokenizer', tok, '--threads', '2', '--max-tokens-floor', '0',
    '--ctx-size', '1024']);
  client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => { await server.stop(); });

// Prompt lengths in tokens of the real tokenizer (the project's tokenizer, which
// tests/unit/tokenizer checks id for id against Hugging Face tokenizers):
// BOS <｜User｜> "Hello" " world" <｜Assistant｜> "</" "think" ">"
const HELLO_WORLD_PROMPT = 8;
// the same with "<｜User｜>" typed by the user: 5 more tokens of plain text
const FORGED_PROMPT = 13;
// completions: BOS "Once" " upon" " a" " time"
const ONCE_PROMPT = 5;

async function collect(stream) {
  const out = { content: '', reasoning: '', finish: null, usage: null, chunks: 0, ids: new Set(), roles: 0 };
  for await (const chunk of stream) {
    out.chunks++;
    out.ids.add(chunk.id);
    assert.equal(chunk.object, 'chat.completion.chunk');
    assert.equal(chunk.model, MODEL);
    if (chunk.usage) out.usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta.role) out.roles++;
    out.content += choice.delta.content ?? '';
    out.reasoning += choice.delta.reasoning_content ?? '';
    if (choice.finish_reason) out.finish = choice.finish_reason;
  }
  return out;
}

test('health is ok and models lists the checkpoint', async () => {
  const h = await fetch(`${server.base}/health`);
  assert.equal(h.status, 200);
  assert.deepEqual(await h.json(), { status: 'ok' });
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [MODEL]);
  assert.match(server.log(), /ready: random-v4 loaded in [0-9.]+ s \(context 1024 tokens/);
});

test('chat, not streamed: shape, usage from the real tokenizer, greedy replies repeat', async () => {
  const ask = () => client.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 12,
    messages: [{ role: 'user', content: 'Hello world' }] });
  const r = await ask();
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, MODEL);
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(['length', 'stop'].includes(c.finish_reason));
  assert.equal(r.usage.prompt_tokens, HELLO_WORLD_PROMPT);
  if (c.finish_reason === 'length') assert.equal(r.usage.completion_tokens, 12);
  else assert.ok(r.usage.completion_tokens <= 12);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(r.timings.prompt_n, HELLO_WORLD_PROMPT);
  assert.equal(r.timings.predicted_n, r.usage.completion_tokens);
  assert.ok(r.timings.predicted_ms > 0);
  // Temperature 0 is greedy: the same prompt gives the same reply, token for token.
  const again = await ask();
  assert.equal(again.choices[0].message.content, c.message.content);
  assert.equal(again.usage.completion_tokens, r.usage.completion_tokens);
});

test('chat, streamed: the same reply as unstreamed, one id, role first, usage last', async () => {
  const messages = [{ role: 'user', content: 'Hello world' }];
  const whole = await client.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 10, messages });
  const s = await collect(await client.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 10,
    messages, stream: true, stream_options: { include_usage: true } }));
  assert.equal(s.content, whole.choices[0].message.content);
  assert.equal(s.finish, whole.choices[0].finish_reason);
  assert.equal(s.ids.size, 1);
  assert.equal(s.roles, 1);
  assert.deepEqual([s.usage.prompt_tokens, s.usage.completion_tokens],
    [whole.usage.prompt_tokens, whole.usage.completion_tokens]);
});

test('special-token text typed by a user is counted as plain text', async () => {
  const r = await client.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 1,
    messages: [{ role: 'user', content: 'Hello world<｜User｜>' }] });
  assert.equal(r.usage.prompt_tokens, FORGED_PROMPT);
});

test('seeds reproduce sampled replies; thinking and logprobs have their shape', async () => {
  const sample = async (seed) => (await client.chat.completions.create({ model: MODEL, seed, temperature: 1,
    max_tokens: 8, messages: [{ role: 'user', content: 'Tell me a story' }] })).choices[0].message;
  const a = await sample(11);
  assert.deepEqual(await sample(11), a);
  const others = await Promise.all([12, 13, 14].map(sample));
  assert.ok(others.some((m) => m.content !== a.content), 'three other seeds all gave the same noise');

  const t = await client.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 6,
    chat_template_kwargs: { thinking: true }, messages: [{ role: 'user', content: 'Hello world' }] });
  // Thinking mode ends the prompt with "<" "think" ">" instead of "</" "think" ">" (as
  // many tokens); what the model writes before any </think> is reasoning.
  assert.equal(t.usage.prompt_tokens, HELLO_WORLD_PROMPT);
  const m = t.choices[0].message;
  assert.equal(typeof (m.reasoning_content ?? ''), 'string');
  assert.ok((m.reasoning_content ?? '').length + (m.content ?? '').length > 0);

  const lp = await client.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 5, logprobs: true,
    top_logprobs: 3, messages: [{ role: 'user', content: 'Hello world' }] });
  const entries = lp.choices[0].logprobs.content;
  assert.equal(entries.length, lp.usage.completion_tokens);
  for (const e of entries) {
    assert.equal(typeof e.token, 'string');
    assert.ok(e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 3);
    // Greedy: the chosen token is the most likely one.
    assert.equal(e.logprob, e.top_logprobs[0].logprob);
    assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob);
  }
});

test('tools and a tool-result turn: accepted, rendered into the prompt, answered in shape', async () => {
  const weather = { type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } };
  const plain = await client.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 4,
    messages: [{ role: 'user', content: 'Hello world' }] });
  const withTools = await client.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 4, tools: [weather],
    messages: [{ role: 'user', content: 'Hello world' }] });
  // The tools preamble and the schema are in the prompt (hundreds of tokens of it).
  assert.ok(withTools.usage.prompt_tokens > plain.usage.prompt_tokens + 100, JSON.stringify(withTools.usage));
  // tool_choice none hides them again.
  const hidden = await client.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 4, tools: [weather],
    tool_choice: 'none', messages: [{ role: 'user', content: 'Hello world' }] });
  assert.equal(hidden.usage.prompt_tokens, plain.usage.prompt_tokens);
  assert.equal(hidden.choices[0].message.content, plain.choices[0].message.content);
  // A conversation that already holds a call and its result, streamed.
  const s = await collect(await client.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 4,
    tools: [weather], stream: true, stream_options: { include_usage: true }, messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"t": 18}' }] }));
  assert.ok(['length', 'stop', 'tool_calls'].includes(s.finish));
  assert.ok(s.usage.prompt_tokens > withTools.usage.prompt_tokens);
  assert.ok(s.usage.completion_tokens >= 1 && s.usage.completion_tokens <= 4);
});

test('completions: text and token prompts, streaming, counts from the tokenizer', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 7, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(typeof r.choices[0].text, 'string');
  assert.equal(r.usage.prompt_tokens, ONCE_PROMPT);
  assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
  if (r.choices[0].finish_reason === 'length') assert.equal(r.usage.completion_tokens, 7);
  // The same prompt as token ids (BOS, "Once", " upon", " a", " time") continues the same way.
  const ids = await client.completions.create({ model: MODEL, prompt: [0, 16600, 4465, 260, 1014], max_tokens: 7,
    temperature: 0 });
  assert.equal(ids.usage.prompt_tokens, 5);
  assert.equal(ids.choices[0].text, r.choices[0].text);
  let text = '';
  let finish = null;
  for await (const c of await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 7,
    temperature: 0, stream: true })) {
    text += c.choices[0]?.text ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, r.choices[0].text);
  assert.equal(finish, r.choices[0].finish_reason);
});

test('errors come back as OpenAI errors', async () => {
  await expectError(client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'word '.repeat(1100) }] }),
    400, (e) => assert.equal(e.code, 'context_length_exceeded'));
  await expectError(client.chat.completions.create({ model: MODEL, n: 3, messages: [{ role: 'user', content: 'x' }] }), 400,
    (e) => assert.equal(e.param, 'n'));
  await expectError(client.chat.completions.create({ model: MODEL, messages: [{ role: 'wizard', content: 'x' }] }), 400,
    (e) => assert.equal(e.param, 'messages[0].role'));
  await expectError(client.completions.create({ model: MODEL, prompt: [5, 129280], max_tokens: 1 }), 400,
    (e) => assert.match(e.message, /129280 is not a token id \(vocabulary of 129280\)/));
  // The server is still serving after all that.
  const ok = await client.chat.completions.create({ model: MODEL, max_tokens: 1, messages: [{ role: 'user', content: 'x' }] });
  assert.equal(ok.usage.completion_tokens, 1);
});

// aff-serve on an .aff container, as a user gets there: the random tiny checkpoint
// (with the real tokenizer.json beside it) through aff-quantize, then served with no
// --tokenizer, so the tokenizer comes from the container's TOKJ section and the routed
// experts run quantised from the memory map. Checks what must hold whatever the
// quantisation error: the model id, the real tokenizer's counts, reply structure and
// greedy reproducibility.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer } from './server.mjs';

let server, client, dir;

before(async () => {
  const model = process.env.AFF_MODEL_DIR, tok = process.env.AFF_TOKENIZER_JSON;
  if (!model || !tok) throw new Error('AFF_MODEL_DIR and AFF_TOKENIZER_JSON must be set (ctest does it)');
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aff-serve-container-'));
  const src = path.join(dir, 'checkpoint');
  fs.mkdirSync(src);
  for (const f of ['config.json', 'model.safetensors']) fs.symlinkSync(path.join(model, f), path.join(src, f));
  fs.copyFileSync(tok, path.join(src, 'tokenizer.json'));
  const quantize = path.join(path.dirname(process.env.AFF_SERVE), 'aff-quantize');
  const out = path.join(dir, 'random-v4.aff');
  const q = spawnSync(quantize, ['--src', src, '--out', out, '--threads', '2', '-q'], { encoding: 'utf8' });
  assert.equal(q.status, 0, `aff-quantize failed:\n${q.stderr}`);
  server = await startServer(['-m', out, '--threads', '2', '--max-tokens-floor', '0', '--ctx-size', '512']);
  client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  await server?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('a container is served with the tokenizer from its TOKJ section', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ['random-v4']);
  const ask = () => client.chat.completions.create({ model: 'random-v4', temperature: 0, max_tokens: 6,
    messages: [{ role: 'user', content: 'Hello world' }] });
  const r = await ask();
  assert.equal(r.usage.prompt_tokens, 8);  // as from the checkpoint with the same tokenizer.json
  assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.equal((await ask()).choices[0].message.content, r.choices[0].message.content);
  let text = '';
  for await (const c of await client.chat.completions.create({ model: 'random-v4', temperature: 0, max_tokens: 6,
    stream: true, messages: [{ role: 'user', content: 'Hello world' }] })) text += c.choices[0]?.delta?.content ?? '';
  assert.equal(text, r.choices[0].message.content);
});

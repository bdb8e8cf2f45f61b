// Structured output through the official openai client: response_format json_schema
// (nested objects, arrays, enums, integers, required keys) read back by the client's
// own parse helper, json_object, strict function tools whose arguments the helper
// parses, tool_choice "required" and a named function, and schemas the server refuses.
// The server runs the scripted test engine in its structured-output mode: its logits
// only lean towards closing brackets and quotes, so the text is what the grammar mask
// lets through (a different valid value per seed), and every reply is checked against
// the schema here.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { expectError, startServer } from './server.mjs';

let server, client;

before(async () => {
  server = await startServer(['--test-engine', '--max-tokens-floor', '0']);
  client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'none', maxRetries: 0 });
});
after(async () => { await server.stop(); });

const schema = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    color: { type: 'string', enum: ['red', 'green', 'blue'] },
    count: { type: 'integer' },
    size: { enum: [1, 2.5, 'huge', null] },
    tags: { type: 'array', items: { type: 'string' } },
    owner: {
      type: 'object',
      properties: { id: { type: 'integer' }, admin: { type: 'boolean' }, note: { type: 'null' },
        pets: { type: 'array', items: { type: 'object', properties: { kind: { enum: ['cat', 'dog'] } },
          required: ['kind'], additionalProperties: false } } },
      required: ['id', 'admin', 'pets'], additionalProperties: false,
    },
  },
  required: ['name', 'color', 'count', 'size', 'tags', 'owner'],
  additionalProperties: false,
};

// A small validator for the schema subset above: throws naming the path.
function check(value, s, path = '$') {
  if (s.enum) return assert.ok(s.enum.some((e) => e === value), `${path}: ${JSON.stringify(value)} not in enum`);
  switch (s.type) {
    case 'object': {
      assert.ok(value && typeof value === 'object' && !Array.isArray(value), `${path}: not an object`);
      for (const k of s.required ?? []) assert.ok(k in value, `${path}: missing ${k}`);
      for (const [k, v] of Object.entries(value)) {
        assert.ok(k in s.properties, `${path}: unknown key ${k}`);
        check(v, s.properties[k], `${path}.${k}`);
      }
      return;
    }
    case 'array': assert.ok(Array.isArray(value), `${path}: not an array`); value.forEach((v, i) => check(v, s.items, `${path}[${i}]`)); return;
    case 'string': return assert.equal(typeof value, 'string', path);
    case 'integer': return assert.ok(Number.isInteger(value), `${path}: not an integer`);
    case 'boolean': return assert.equal(typeof value, 'boolean', path);
    case 'null': return assert.equal(value, null, path);
    default: throw new Error(`${path}: no type`);
  }
}

test('json_schema: the parse helper reads a reply that follows a nested schema with enums, for several seeds', async () => {
  const texts = new Set();
  for (const seed of [1, 2, 3, 4, 5]) {
    const r = await client.chat.completions.parse({
      model: 'm', seed, max_tokens: 2000,
      messages: [{ role: 'user', content: 'Describe a thing.' }],
      response_format: { type: 'json_schema', json_schema: { name: 'thing', strict: true, schema } },
    });
    const choice = r.choices[0];
    assert.equal(choice.finish_reason, 'stop', choice.message.content);
    assert.ok(choice.message.parsed, 'the helper parsed the content');
    check(choice.message.parsed, schema);
    texts.add(choice.message.content);
  }
  assert.ok(texts.size > 1, 'different seeds walk the grammar differently');
});

test('json_schema streamed: the concatenated deltas are one value of the schema', async () => {
  const stream = await client.chat.completions.create({
    model: 'm', seed: 9, stream: true, max_tokens: 2000, messages: [{ role: 'user', content: 'hi' }],
    response_format: { type: 'json_schema', json_schema: { name: 'thing', schema } },
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  check(JSON.parse(text), schema);
});

test('json_object: the reply is one JSON object; thinking replies are constrained after the reasoning', async () => {
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({ model: 'm', seed, max_tokens: 2000,
      messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'json_object' } });
    const v = JSON.parse(r.choices[0].message.content);
    assert.ok(v && typeof v === 'object' && !Array.isArray(v));
  }
  const t = await client.chat.completions.create({ model: 'm', seed: 1, max_tokens: 2000, reasoning_effort: 'high',
    messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'json_schema', json_schema: { name: 's', schema } } });
  assert.equal(t.choices[0].message.reasoning_content, 'The user wrote 2 bytes.');
  check(JSON.parse(t.choices[0].message.content), schema);
});

const tools = [
  { type: 'function', function: { name: 'get_weather', strict: true,
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false } } },
  { type: 'function', function: { name: 'get_time', strict: true,
    parameters: { type: 'object', properties: { zone: { type: 'string' } }, required: ['zone'], additionalProperties: false } } },
];

test('tool_choice required and a named function: a call is made, and the parse helper reads its arguments', async () => {
  const r = await client.chat.completions.parse({ model: 'm', tools, tool_choice: 'required',
    messages: [{ role: 'user', content: 'Oslo' }] });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'get_weather');
  assert.deepEqual(call.function.parsed_arguments, { city: 'Oslo' });
  const named = await client.chat.completions.create({ model: 'm', tools: [tools[0]],
    tool_choice: { type: 'function', function: { name: 'get_weather' } }, messages: [{ role: 'user', content: 'Rome' }] });
  assert.equal(named.choices[0].message.tool_calls[0].function.name, 'get_weather');
});

test('schemas outside the supported subset are refused with the keyword named', async () => {
  await expectError(client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }],
    response_format: { type: 'json_schema', json_schema: { name: 's', schema: { anyOf: [{ type: 'string' }] } } } }), 400,
  (e) => { assert.equal(e.param, 'response_format.json_schema.schema'); assert.match(e.message, /'anyOf' is not supported/); });
  await expectError(client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }],
    response_format: { type: 'xml' } }), 400, (e) => assert.equal(e.param, 'response_format.type'));
});

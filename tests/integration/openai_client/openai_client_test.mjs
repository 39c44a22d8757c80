// headroom serve driven by the official `openai` npm client, as an application would use it:
// chat, streamed chat, legacy completions, a JSON-schema request, and requests that must fail
// with the right 4xx. Usage: node openai_client_test.mjs BASE_URL API_KEY
import assert from "node:assert/strict";
import OpenAI from "openai";

const [baseUrl, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey, maxRetries: 0 });

const models = await client.models.list();
const model = models.data[0].id;
assert.equal(model, "stories260K");

// Chat, greedy.
const messages = [{ role: "user", content: "Tell me a story about a dog." }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
assert.equal(chat.object, "chat.completion");
assert.equal(chat.choices.length, 1);
assert.equal(chat.choices[0].message.role, "assistant");
assert.ok(chat.choices[0].message.content.length > 0);
assert.ok(["stop", "length"].includes(chat.choices[0].finish_reason));
assert.ok(chat.usage.prompt_tokens > 0);
assert.ok(chat.usage.completion_tokens > 0 && chat.usage.completion_tokens <= 24);
assert.equal(chat.usage.total_tokens, chat.usage.prompt_tokens + chat.usage.completion_tokens);

// The same request streamed: the deltas add up to the same text, usage comes last.
const stream = await client.chat.completions.create({
  model, messages, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true },
});
let text = "";
let finish = null;
let usage = null;
let chunks = 0;
for await (const chunk of stream) {
  chunks++;
  assert.equal(chunk.object, "chat.completion.chunk");
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    text += choice.delta?.content ?? "";
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
assert.ok(chunks >= 3, `only ${chunks} chunks`);
assert.equal(text, chat.choices[0].message.content);
assert.equal(finish, chat.choices[0].finish_reason);
// The same prompt again: its whole blocks of KV come from the prefix cache, reported as OpenAI
// does; the counts are otherwise the same.
assert.equal(chat.usage.prompt_tokens_details.cached_tokens, 0);
assert.ok(usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(usage));
assert.ok(usage.prompt_tokens_details.cached_tokens < usage.prompt_tokens);
assert.deepEqual({ ...usage, prompt_tokens_details: null }, { ...chat.usage, prompt_tokens_details: null });

// Legacy completions with a seed: the same seed gives the same text.
const legacy = { model, prompt: "Once upon a time", max_tokens: 16, temperature: 0.9, seed: 7 };
const a = await client.completions.create(legacy);
const b = await client.completions.create(legacy);
assert.equal(a.object, "text_completion");
assert.equal(a.choices[0].text, b.choices[0].text);

// Structured output: the content parses and follows the schema.
const schema = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 16 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    pets: { type: "array", items: { type: "string", maxLength: 10 }, maxItems: 3 },
  },
  required: ["name", "age", "pets"],
  additionalProperties: false,
};
for (const seed of [1, 2, 3]) {
  const r = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Describe Tim as JSON." }], max_tokens: 200, temperature: 1, seed,
    response_format: { type: "json_schema", json_schema: { name: "person", schema, strict: true } },
  });
  assert.equal(r.choices[0].finish_reason, "stop");
  const doc = JSON.parse(r.choices[0].message.content);
  assert.deepEqual(Object.keys(doc), ["name", "age", "pets"]);
  assert.equal(typeof doc.name, "string");
  assert.ok(Number.isInteger(doc.age) && doc.age >= 0 && doc.age <= 120);
  assert.ok(Array.isArray(doc.pets) && doc.pets.length <= 3);
}

// Requests that must fail, with the status and the field named.
async function rejects(promise, status, check) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, `not an APIError: ${e}`);
    assert.equal(e.status, status, `${e.status}: ${e.message}`);
    check?.(e);
    return;
  }
  assert.fail(`expected HTTP ${status}`);
}
await rejects(client.chat.completions.create({ model, messages, max_tokens: -3 }), 400,
  (e) => assert.equal(e.param, "max_tokens"));
await rejects(client.chat.completions.create({ model, messages: [{ role: "user", content: "x".repeat(50000) }] }), 400,
  (e) => assert.equal(e.code, "context_length_exceeded"));
await rejects(client.chat.completions.create({
  model, messages, response_format: { type: "json_schema", json_schema: { name: "x", schema: { not: {} } } },
}), 400, (e) => assert.equal(e.param, "response_format"));
const stranger = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: "wrong-key", maxRetries: 0 });
await rejects(stranger.models.list(), 401);

console.log(`openai ${OpenAI.VERSION ?? ""} client: chat, stream (${chunks} chunks), completions, json_schema, 4xx: ok`);

// headroom serve on the tiny Gemma 4 synth model, driven by the official `openai` npm client as an
// agent framework drives a model: loops of turns with two tools where the constraint makes every
// call valid (whole, and streamed through the SDK's own stream assembler), each tool_choice, and
// reasoning_content. The weights are random: the calls' arguments are written to CALLS_FILE for
// python3-jsonschema to validate against the tools' schemas; meaning is not tested.
// Usage: node agents_client_test.mjs BASE_URL CALLS_FILE
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import OpenAI from "openai";

const [baseUrl, callsFile] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: "unused", maxRetries: 0 });
const model = (await client.models.list()).data[0].id;

const tools = [
  {
    type: "function",
    function: {
      name: "weather",
      description: "Forecast",
      parameters: {
        type: "object",
        properties: {
          city: { type: "string", minLength: 1, maxLength: 6 },
          days: { type: "integer", minimum: 1, maximum: 7 },
          unit: { enum: ["c", "f"] },
        },
        required: ["city", "days"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "note",
      description: "Save",
      parameters: {
        type: "object",
        properties: {
          text: { type: "string", maxLength: 5 },
          tags: { type: "array", items: { type: "string", maxLength: 3 }, maxItems: 2 },
          done: { type: "boolean" },
        },
        required: ["done"],
        additionalProperties: false,
      },
    },
  },
];
const schemas = Object.fromEntries(tools.map((t) => [t.function.name, t.function.parameters]));
const recorded = [];

function checkCalls(message, where) {
  assert.ok(Array.isArray(message.tool_calls) && message.tool_calls.length >= 1, `${where}: no tool_calls`);
  for (const call of message.tool_calls) {
    assert.equal(call.type, "function", where);
    assert.ok(call.id, `${where}: call without id`);
    assert.ok(call.function.name in schemas, `${where}: undeclared function ${call.function.name}`);
    const args = JSON.parse(call.function.arguments);  // must parse
    recorded.push({ where, name: call.function.name, schema: schemas[call.function.name], arguments: args });
  }
}

// What a tool answers (the loop feeds it back as role "tool").
const answer = (call) => (call.function.name === "weather" ? "rain, 12C" : "saved");

// An agent loop: each turn must call a tool; the results go back and the next turn runs on them.
async function agentLoop(label, turns, { stream }) {
  const messages = [{ role: "user", content: "Plan a trip" }];
  for (let turn = 0; turn < turns; turn++) {
    // The first turn may call several tools. Random weights rarely end a turn on their own, so it
    // biases <turn|> (106), which the constraint allows only between calls.
    const request = {
      model, messages, tools, max_tokens: 400, temperature: 1, seed: 100 * turns + turn,
      tool_choice: turn === turns - 1 ? { type: "function", function: { name: "note" } } : "required",
      parallel_tool_calls: turn === 0,
      ...(turn === 0 ? { logit_bias: { 106: 8 } } : {}),
    };
    let completion;
    if (stream) {
      // The SDK assembles the streamed deltas (ids, names, argument pieces) itself.
      const runner = client.beta.chat.completions.stream(request);
      completion = await runner.finalChatCompletion();
    } else {
      completion = await client.chat.completions.create(request);
    }
    const choice = completion.choices[0];
    assert.equal(choice.finish_reason, "tool_calls", `${label} turn ${turn}: ${JSON.stringify(choice)}`);
    checkCalls(choice.message, `${label} turn ${turn}`);
    if (request.tool_choice.function) assert.ok(choice.message.tool_calls.every((c) => c.function.name === "note"));
    if (!request.parallel_tool_calls) assert.equal(choice.message.tool_calls.length, 1);
    messages.push({ role: "assistant", content: choice.message.content, tool_calls: choice.message.tool_calls });
    for (const call of choice.message.tool_calls) {
      messages.push({ role: "tool", tool_call_id: call.id, content: answer(call) });
    }
  }
  // The loop ends with the model free to answer or call again.
  const last = await client.chat.completions.create({ model, messages, tools, max_tokens: 16, seed: 7 });
  assert.ok(["stop", "length", "tool_calls"].includes(last.choices[0].finish_reason));
  return messages.length;
}

const wholeTurns = await agentLoop("whole", 3, { stream: false });
const streamedTurns = await agentLoop("streamed", 3, { stream: true });

// tool_choice none: tools declared, no call; auto: whatever the model does is well formed.
const none = await client.chat.completions.create({
  model, tools, tool_choice: "none", max_tokens: 12, seed: 3, logit_bias: { 48: 50 },
  messages: [{ role: "user", content: "Hi" }],
});
assert.equal(none.choices[0].message.tool_calls, undefined);
assert.ok(!none.choices[0].message.content.includes("<|tool_call>"));
const auto = await client.chat.completions.create({
  model, tools, tool_choice: "auto", max_tokens: 24, seed: 4, messages: [{ role: "user", content: "Hi" }],
});
assert.ok(["stop", "length", "tool_calls"].includes(auto.choices[0].finish_reason));
if (auto.choices[0].message.tool_calls) checkCalls(auto.choices[0].message, "auto");

// Thinking: Gemma 4's thought channel comes back as reasoning_content (the bias opens it, as a
// thinking model would), whole and streamed, and is counted in usage.
const thinking = {
  model, tools, tool_choice: "required", max_tokens: 400, temperature: 1, seed: 9, parallel_tool_calls: false,
  chat_template_kwargs: { enable_thinking: true },
  logit_bias: { 100: 40, 107: 20, 101: 12 }, repeat_penalty: 10,
  messages: [{ role: "user", content: "Think first" }],
};
const thought = await client.chat.completions.create(thinking);
const reasoning = thought.choices[0].message.reasoning_content;
assert.ok(typeof reasoning === "string" && reasoning.length > 0, JSON.stringify(thought));
assert.ok(thought.usage.completion_tokens_details.reasoning_tokens > 0);
checkCalls(thought.choices[0].message, "thinking");
let streamedReasoning = "";
for await (const chunk of await client.chat.completions.create({ ...thinking, stream: true })) {
  for (const choice of chunk.choices) streamedReasoning += choice.delta?.reasoning_content ?? "";
}
assert.equal(streamedReasoning, reasoning);

writeFileSync(callsFile, JSON.stringify(recorded));
console.log(`openai ${OpenAI.VERSION ?? ""} client: agent loops (${wholeTurns} and ${streamedTurns} messages), ` +
  `${recorded.length} calls, tool_choice none/auto/named/required, reasoning_content: ok`);

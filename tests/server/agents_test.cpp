// The agent-facing API over loopback HTTP: tool calls (forced, named, none, multi-turn) on the
// tiny Gemma 4 synth model with Gemma 4's own template, reasoning_content, logprobs against the
// golden stories260K logits, n choices, ignore_eos, model names, CORS, and llama-server's
// /tokenize, /detokenize and /apply-template. Random weights: calls are checked for validity
// (declared name, arguments of the declared types), never for meaning.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "chat/template.h"
#include "model/synth.h"
#include "running_server.h"
#include "testing/testing.h"

namespace {

using nlohmann::json;
using server_test::Running;
using server_test::sse_events;

json post_json(httplib::Client& c, const std::string& path, const json& body, int* status) {
  return server_test::post(c, path, body, status);
}

// tiny-e (spec §7.1) with synth's Gemma 4 vocabulary and template, written once.
std::string gemma_model() {
  static const std::string path = [] {
    const auto p = testing_util::program_dir() / "tiny-e.gguf";
    auto w = model::synth_writer({.arch = "gemma4",
                                  .shape = "tiny-e",
                                  .chat_template = std::string(*chat::builtin_template("gemma4"))});
    EXPECT_TRUE(w.ok());
    EXPECT_TRUE(w->write(p.string()).ok());
    return p.string();
  }();
  return path;
}

std::unique_ptr<Running> gemma_server(server::ServerOptions so = {}) {
  so.model_id = "tiny-e";
  so.chat_template = std::string(*chat::builtin_template("gemma4"));
  return std::make_unique<Running>(
      engine::EngineOptions{.model_path = gemma_model(),
                            .request = {.n_ctx = 1024, .n_slots = 4, .n_ubatch = 64}},
      so);
}

// stories260K with an f32 KV cache, so logprobs can be held to the golden float64 logits.
std::unique_ptr<Running> stories_server(server::ServerOptions so = {}) {
  engine::EngineOptions eo = server_test::small();
  eo.request.k_type = eo.request.v_type = tensor::DType::kF32;
  return std::make_unique<Running>(eo, so);
}

// Short declarations: the tiny model's context is small and its vocabulary mostly characters.
json tools() {
  return json::parse(R"([
    {"type": "function", "function": {"name": "weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "maxLength": 6}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
      "required": ["city", "days"]}}},
    {"type": "function", "function": {"name": "note", "parameters": {"type": "object",
      "properties": {"text": {"type": "string", "maxLength": 5}, "done": {"type": "boolean"}},
      "required": ["done"]}}}])");
}

// Random weights may chain calls a while: the budget leaves room for a few.
json chat_body(json extra = json::object()) {
  json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
               {"max_tokens", 300},
               {"temperature", 1.0}};
  for (const auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

// A call is valid when it names a declared function and its arguments have the declared keys
// and types (the schemas above, checked by hand).
void expect_valid_call(const json& call) {
  ASSERT_EQ(call["type"], "function");
  ASSERT_TRUE(call["id"].is_string() && !call["id"].get<std::string>().empty());
  const std::string name = call["function"]["name"];
  const json args = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object()) << call.dump();
  if (name == "weather") {
    EXPECT_TRUE(args["city"].is_string() && args["city"].get<std::string>().size() <= 6 * 4)
        << args.dump();
    EXPECT_TRUE(args["days"].is_number_integer() && args["days"] >= 1 && args["days"] <= 7)
        << args.dump();
    EXPECT_EQ(args.size(), 2u) << args.dump();
  } else {
    ASSERT_EQ(name, "note");
    EXPECT_TRUE(args["done"].is_boolean()) << args.dump();
    if (args.contains("text")) {
      EXPECT_TRUE(args["text"].is_string()) << args.dump();
    }
  }
}

TEST(Agents, RequiredToolChoiceAlwaysGivesValidCalls) {
  auto s = gemma_server();
  auto c = s->client();
  // One call per reply, then several: random weights rarely end a turn on their own, so the
  // parallel request biases <turn|> (106), which the constraint allows only between calls.
  for (int seed = 0; seed < 5; ++seed) {
    const bool parallel = seed == 4;
    json extra = {{"tools", tools()},
                  {"tool_choice", "required"},
                  {"seed", seed},
                  {"parallel_tool_calls", parallel}};
    if (parallel) extra["logit_bias"] = {{"106", 8}};
    int status = 0;
    const json r = post_json(c, "/v1/chat/completions", chat_body(extra), &status);
    ASSERT_EQ(status, 200) << r.dump();
    const json& choice = r["choices"][0];
    ASSERT_EQ(choice["finish_reason"], "tool_calls") << r.dump();
    ASSERT_GE(choice["message"]["tool_calls"].size(), 1u);
    if (!parallel) {
      EXPECT_EQ(choice["message"]["tool_calls"].size(), 1u);
    }
    EXPECT_TRUE(choice["message"]["content"].is_null()) << r.dump();
    for (const auto& call : choice["message"]["tool_calls"]) expect_valid_call(call);
  }
}

TEST(Agents, NamedToolChoiceCallsThatFunctionOnce) {
  auto s = gemma_server();
  auto c = s->client();
  int status = 0;
  const json r = post_json(
      c, "/v1/chat/completions",
      chat_body({{"tools", tools()},
                 {"tool_choice", {{"type", "function"}, {"function", {{"name", "note"}}}}},
                 {"parallel_tool_calls", false},
                 {"seed", 3}}),
      &status);
  ASSERT_EQ(status, 200) << r.dump();
  const json& calls = r["choices"][0]["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), 1u) << r.dump();
  EXPECT_EQ(calls[0]["function"]["name"], "note");
  expect_valid_call(calls[0]);
}

TEST(Agents, StreamedCallsEqualTheWholeResponse) {
  auto s = gemma_server();
  auto c = s->client();
  const json body = chat_body({{"tools", tools()}, {"tool_choice", "required"}, {"seed", 11}});
  int status = 0;
  const json whole = post_json(c, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200);
  json streaming = body;
  streaming["stream"] = true;
  auto res = c.Post("/v1/chat/completions", streaming.dump(), "application/json");
  ASSERT_TRUE(res && res->status == 200);
  json calls = json::array();
  std::string finish;
  for (const std::string& event : sse_events(res->body)) {
    if (event == "[DONE]") break;
    const json chunk = json::parse(event);
    for (const auto& choice : chunk["choices"]) {
      for (const auto& d : choice["delta"].value("tool_calls", json::array())) {
        const size_t index = d["index"];
        if (d.contains("id")) {
          ASSERT_EQ(index, calls.size());
          calls.push_back({{"id", d["id"]},
                           {"type", d["type"]},
                           {"function", {{"name", d["function"]["name"]}, {"arguments", ""}}}});
        }
        ASSERT_LT(index, calls.size());
        calls[index]["function"]["arguments"] =
            calls[index]["function"]["arguments"].get<std::string>() +
            d["function"]["arguments"].get<std::string>();
      }
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
  }
  EXPECT_EQ(finish, "tool_calls");
  // The same calls; ids are each response's own (unique across a conversation's turns).
  json expected = whole["choices"][0]["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), expected.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_NE(calls[i]["id"], expected[i]["id"]);
    calls[i].erase("id");
    expected[i].erase("id");
  }
  EXPECT_EQ(calls, expected);
}

TEST(Agents, ToolChoiceNoneNeverCalls) {
  auto s = gemma_server();
  auto c = s->client();
  for (int seed = 0; seed < 3; ++seed) {
    int status = 0;
    // The call marker is the likeliest token by far, yet "none" bans it.
    const json r = post_json(c, "/v1/chat/completions",
                             chat_body({{"tools", tools()},
                                        {"tool_choice", "none"},
                                        {"seed", seed},
                                        {"logit_bias", {{"48", 50}}},
                                        {"max_tokens", 8}}),
                             &status);
    ASSERT_EQ(status, 200) << r.dump();
    EXPECT_FALSE(r["choices"][0]["message"].contains("tool_calls")) << r.dump();
    EXPECT_EQ(r["choices"][0]["message"]["content"].get<std::string>().find("<|tool_call>"),
              std::string::npos);
  }
}

TEST(Agents, ToolResultsRenderBackNatively) {
  auto s = gemma_server();
  auto c = s->client();
  const json messages = json::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_0", "type": "function",
      "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\", \"days\": 2}"}}]},
    {"role": "tool", "tool_call_id": "call_0", "content": "rain"}])");
  int status = 0;
  const json t =
      post_json(c, "/apply-template", {{"messages", messages}, {"tools", tools()}}, &status);
  ASSERT_EQ(status, 200) << t.dump();
  const std::string prompt = t["prompt"];
  EXPECT_NE(prompt.find("<|tool>declaration:weather{"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<|tool_call>call:weather{city:<|\"|>Oslo<|\"|>,days:2}<tool_call|>"),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("<|tool_response>response:weather{value:<|\"|>rain<|\"|>}<tool_response|>"),
            std::string::npos)
      << prompt;
  // The next turn runs from there.
  const json r = post_json(
      c, "/v1/chat/completions",
      {{"messages", messages}, {"tools", tools()}, {"max_tokens", 8}, {"seed", 1}}, &status);
  ASSERT_EQ(status, 200) << r.dump();
  // Arguments that are not a JSON object are refused, naming the field.
  json bad = messages;
  bad[1]["tool_calls"][0]["function"]["arguments"] = "{city";
  const json e =
      post_json(c, "/v1/chat/completions", {{"messages", bad}, {"tools", tools()}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "messages[1].tool_calls[0].function.arguments");
}

TEST(Agents, ThinkingIsSwitchedPerRequest) {
  auto s = gemma_server();
  auto c = s->client();
  auto prompt = [&](json extra) {
    int status = 0;
    json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
    for (const auto& [k, v] : extra.items()) body[k] = v;
    const json t = post_json(c, "/apply-template", body, &status);
    EXPECT_EQ(status, 200) << t.dump();
    return t["prompt"].get<std::string>();
  };
  // Off by default, as in the model's template: the empty thought channel closes the prompt.
  EXPECT_EQ(prompt({}), "<bos><|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  const std::string on =
      "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n";
  EXPECT_EQ(prompt({{"chat_template_kwargs", {{"enable_thinking", true}}}}), on);
  EXPECT_EQ(prompt({{"reasoning_effort", "high"}}), on);
  EXPECT_EQ(prompt({{"reasoning_effort", "none"}}), prompt({}));
  int status = 0;
  const json e = post_json(
      c, "/apply-template",
      {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"reasoning_effort", "max"}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "reasoning_effort");
}

TEST(Agents, ReasoningContentStreamsAndIsCounted) {
  // A template whose generation prompt opens the reasoning: everything stories260K writes is
  // reasoning until </think>, which it never writes.
  auto s = std::make_unique<Running>(
      server_test::small(2),
      server::ServerOptions{.chat_template =
                                "{% for m in messages %}{{ m['content'] }}{% endfor %} <think>\n"});
  auto c = s->client();
  const json body = {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                     {"max_tokens", 20},
                     {"temperature", 0}};
  int status = 0;
  const json whole = post_json(c, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << whole.dump();
  const json& message = whole["choices"][0]["message"];
  ASSERT_TRUE(message.contains("reasoning_content")) << whole.dump();
  EXPECT_FALSE(message["reasoning_content"].get<std::string>().empty());
  EXPECT_EQ(message["content"], "");
  EXPECT_EQ(whole["usage"]["completion_tokens_details"]["reasoning_tokens"],
            whole["usage"]["completion_tokens"]);
  json streaming = body;
  streaming["stream"] = true;
  streaming["stream_options"] = {{"include_usage", true}};
  auto res = c.Post("/v1/chat/completions", streaming.dump(), "application/json");
  ASSERT_TRUE(res && res->status == 200);
  std::string reasoning;
  json usage;
  for (const std::string& event : sse_events(res->body)) {
    if (event == "[DONE]") break;
    const json chunk = json::parse(event);
    if (chunk.contains("usage")) usage = chunk["usage"];
    for (const auto& choice : chunk["choices"])
      reasoning += choice["delta"].value("reasoning_content", "");
  }
  EXPECT_EQ(reasoning, message["reasoning_content"]);
  EXPECT_EQ(usage, whole["usage"]);
}

// log-softmax of the golden logits after the prompt (pure-Python float64 reference).
TEST(Agents, LogprobsAreTheModelsOwnWithTopAlternatives) {
  auto g = json::parse(testing_util::read_text(testing_util::shared_dir() /
                                               "models/stories260K.golden.json"))["cases"][0];
  std::vector<double> logits = g["logits_after_prompt"];
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (double x : logits) sum += std::exp(x - max);
  auto expected = [&](int id) { return logits[id] - max - std::log(sum); };
  auto s = stories_server();
  auto c = s->client();
  for (bool stream : {false, true}) {
    // Hot sampling: the reported numbers must still be the model's, before temperature.
    const json body = {{"prompt", g["prompt"]}, {"max_tokens", 3},
                       {"temperature", 1.8},    {"seed", 5},
                       {"logprobs", 5},         {"stream", stream}};
    auto res = c.Post("/v1/completions", body.dump(), "application/json");
    ASSERT_TRUE(res && res->status == 200);
    json first;
    if (stream) {
      first = json::parse(sse_events(res->body)[0])["choices"][0]["logprobs"];
    } else {
      first = json::parse(res->body)["choices"][0]["logprobs"];
    }
    const json& tops = first["top_logprobs"][0];
    ASSERT_EQ(tops.size(), 5u) << first.dump();
    // Completions name alternatives by text (two ids with one text keep the likelier): check each
    // against the golden value of the likeliest id with that text.
    for (const auto& [text, logprob] : tops.items()) {
      double best = -INFINITY;
      for (int32_t k = 0; k < s->tokenizer().n_vocab(); ++k) {
        if (s->tokenizer().piece(k, true) == text) best = std::max(best, expected(k));
      }
      EXPECT_NEAR(logprob.get<double>(), best, 1e-4) << text;
    }
  }
  // Chat: logprobs with top_logprobs, the chosen token among them at greedy.
  int status = 0;
  const json r = post_json(c, "/v1/chat/completions",
                           {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                            {"max_tokens", 4},
                            {"temperature", 0},
                            {"logprobs", true},
                            {"top_logprobs", 3}},
                           &status);
  ASSERT_EQ(status, 200) << r.dump();
  for (const auto& item : r["choices"][0]["logprobs"]["content"]) {
    ASSERT_EQ(item["top_logprobs"].size(), 3u);
    EXPECT_EQ(item["top_logprobs"][0]["token"], item["token"]);
    EXPECT_FLOAT_EQ(item["top_logprobs"][0]["logprob"].get<float>(), item["logprob"].get<float>());
    EXPECT_LT(item["logprob"].get<double>(),
              0.0);  // the model's probability, not the sampler's certainty
    EXPECT_GE(item["top_logprobs"][0]["logprob"], item["top_logprobs"][1]["logprob"]);
  }
  post_json(c, "/v1/chat/completions",
            {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
             {"top_logprobs", 21},
             {"logprobs", true}},
            &status);
  EXPECT_EQ(status, 400);
}

TEST(Agents, SeveralChoicesEachSampledAlone) {
  auto s = stories_server();
  auto c = s->client();
  const json body = {{"prompt", "Once upon a time"},
                     {"max_tokens", 12},
                     {"temperature", 1.0},
                     {"seed", 42},
                     {"n", 3}};
  int status = 0;
  const json whole = post_json(c, "/v1/completions", body, &status);
  ASSERT_EQ(status, 200) << whole.dump();
  ASSERT_EQ(whole["choices"].size(), 3u);
  std::set<std::string> texts;
  int total = 0;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(whole["choices"][i]["index"], i);
    texts.insert(whole["choices"][i]["text"].get<std::string>());
    // Each choice is what a request with that choice's seed gives alone.
    const json alone = post_json(c, "/v1/completions",
                                 {{"prompt", "Once upon a time"},
                                  {"max_tokens", 12},
                                  {"temperature", 1.0},
                                  {"seed", 42 + i}},
                                 &status);
    EXPECT_EQ(alone["choices"][0]["text"], whole["choices"][i]["text"]);
    total += alone["usage"]["completion_tokens"].get<int>();
  }
  EXPECT_GE(texts.size(), 2u);
  EXPECT_EQ(whole["usage"]["completion_tokens"], total);
  // Streamed: chunks carry their choice's index and add up to the same texts.
  json streaming = body;
  streaming["stream"] = true;
  auto res = c.Post("/v1/completions", streaming.dump(), "application/json");
  ASSERT_TRUE(res && res->status == 200);
  std::vector<std::string> streamed(3);
  int finished = 0;
  for (const std::string& event : sse_events(res->body)) {
    if (event == "[DONE]") break;
    const json chunk = json::parse(event);
    for (const auto& choice : chunk["choices"]) {
      streamed[choice["index"].get<int>()] += choice["text"].get<std::string>();
      if (!choice["finish_reason"].is_null()) ++finished;
    }
  }
  EXPECT_EQ(finished, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(streamed[i], whole["choices"][i]["text"]);
}

TEST(Agents, IgnoreEosRunsToMaxTokens) {
  auto s = stories_server();
  auto c = s->client();
  const json eos_first = {
      {"prompt", "Once"}, {"max_tokens", 10}, {"temperature", 0}, {"logit_bias", {{"2", 100}}}};
  int status = 0;
  json r = post_json(c, "/v1/completions", eos_first, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r["usage"]["completion_tokens"], 1);
  json ignoring = eos_first;
  ignoring["ignore_eos"] = true;
  r = post_json(c, "/v1/completions", ignoring, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["completion_tokens"], 10);
}

TEST(Agents, UnknownModelsAre404UnlessAllowed) {
  auto s = stories_server();
  auto c = s->client();
  int status = 0;
  json r = post_json(c, "/v1/completions",
                     {{"model", "gpt-4o"}, {"prompt", "x"}, {"max_tokens", 1}}, &status);
  EXPECT_EQ(status, 404);
  EXPECT_EQ(r["error"]["code"], "model_not_found");
  EXPECT_EQ(r["error"]["param"], "model");
  post_json(c, "/v1/completions", {{"model", "stories260K"}, {"prompt", "x"}, {"max_tokens", 1}},
            &status);
  EXPECT_EQ(status, 200);
  auto any = stories_server({.any_model = true});
  auto c2 = any->client();
  post_json(c2, "/v1/completions", {{"model", "gpt-4o"}, {"prompt", "x"}, {"max_tokens", 1}},
            &status);
  EXPECT_EQ(status, 200);
}

TEST(Agents, CorsIsOffUnlessAnOriginIsAllowed) {
  {
    auto s = stories_server();
    auto c = s->client();
    auto res = c.Get("/v1/models", {{"Origin", "http://app.example"}});
    ASSERT_TRUE(res);
    EXPECT_FALSE(res->has_header("Access-Control-Allow-Origin"));
  }
  auto s = stories_server({.api_key = "k", .cors_origins = {"http://app.example"}});
  auto c = s->client();
  // The preflight needs no key.
  auto pre = c.Options("/v1/chat/completions", {{"Origin", "http://app.example"},
                                                {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_NE(pre->get_header_value("Access-Control-Allow-Headers").find("Authorization"),
            std::string::npos);
  auto res = c.Get("/v1/models", {{"Origin", "http://app.example"}, {"Authorization", "Bearer k"}});
  ASSERT_TRUE(res && res->status == 200);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  auto other =
      c.Get("/v1/models", {{"Origin", "http://evil.example"}, {"Authorization", "Bearer k"}});
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
}

TEST(Agents, TokenizeAndDetokenizeAsLlamaServer) {
  auto s = gemma_server();
  auto c = s->client();
  int status = 0;
  json r = post_json(c, "/tokenize", {{"content", "<|turn>Hi é"}}, &status);
  ASSERT_EQ(status, 200) << r.dump();
  std::vector<int32_t> ids = r["tokens"];
  EXPECT_EQ(ids.front(), 105);  // parse_special defaults to true
  EXPECT_EQ(ids, s->tokenizer().encode("<|turn>Hi é", {.add_bos = false, .parse_special = true}));
  r = post_json(c, "/tokenize", {{"content", "Hi"}, {"add_special", true}}, &status);
  EXPECT_EQ(r["tokens"][0], 2);  // BOS
  r = post_json(c, "/tokenize", {{"content", "<|turn>"}, {"parse_special", false}}, &status);
  EXPECT_GT(r["tokens"].size(), 1u);
  r = post_json(c, "/tokenize", {{"content", "é"}, {"with_pieces", true}}, &status);
  ASSERT_EQ(r["tokens"].size(), 2u);  // byte fallback: pieces that are not UTF-8 come as bytes
  EXPECT_EQ(r["tokens"][0]["piece"], json::array({0xC3}));
  EXPECT_EQ(r["tokens"][0]["id"], 238 + 0xC3);
  r = post_json(c, "/detokenize", {{"tokens", ids}}, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(r["content"], "<|turn>Hi é");
  r = post_json(c, "/detokenize", {{"tokens", {1, 99999}}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"]["param"], "tokens");
  r = post_json(c, "/tokenize", {{"text", "x"}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"]["param"], "content");
}

TEST(Agents, RefusalsNameTheField) {
  auto s = gemma_server();
  auto c = s->client();
  struct Case {
    json extra;
    std::string param, code;
  };
  const std::vector<Case> cases = {
      {{{"tools", {{{"type", "function"}, {"function", {{"name", "bad name"}}}}}}},
       "tools[0].function.name",
       ""},
      {{{"tool_choice", "required"}}, "tool_choice", ""},
      {{{"tools", tools()},
        {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
       "tool_choice.function.name",
       ""},
      {{{"tools",
         json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",
          "properties":{"x":{"not":{}}}}}}])")},
        {"tool_choice", "required"}},
       "tools",
       "unsupported_tool_schema"},
      {{{"n", 17}}, "n", ""},
      {{{"chat_template_kwargs", {{"enable_thinking", "yes"}}}},
       "chat_template_kwargs.enable_thinking",
       ""},
      {{{"tools", tools()}, {"tool_choice", "required"}, {"ignore_eos", true}}, "ignore_eos", ""},
  };
  for (const auto& k : cases) {
    int status = 0;
    const json e = post_json(c, "/v1/chat/completions", chat_body(k.extra), &status);
    EXPECT_EQ(status, 400) << k.extra.dump() << " → " << e.dump();
    EXPECT_EQ(e["error"]["param"], k.param) << e.dump();
    if (!k.code.empty()) {
      EXPECT_EQ(e["error"]["code"], k.code) << e.dump();
    }
  }
}

}  // namespace

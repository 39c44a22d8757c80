// The OpenAI-compatible server on the real stories260K, driven over loopback HTTP as a client
// would: golden greedy text, streaming, auth, limits, admission errors, disconnects, structured
// output, concurrency, and /metrics agreeing with what the clients received.
#include <atomic>
#include <regex>
#include <thread>

#include "model/synth.h"
#include "running_server.h"

namespace {

using namespace server_test;

TEST(Server, ModelsHealthAndMetricsRoutes) {
  Running s(small());
  auto c = s.client();
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models && models->status == 200);
  const json m = json::parse(models->body);
  EXPECT_EQ(m["object"], "list");
  EXPECT_EQ(m["data"][0]["id"], "stories260K");
  auto health = c.Get("/health");
  ASSERT_TRUE(health && health->status == 200);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");
  const std::string text = metrics_text(s);
  EXPECT_EQ(metric(text, "headroom_slots_total"), 4);
  EXPECT_EQ(metric(text, "headroom_kv_cache_bytes_total{device=\"cpu\"}"),
            static_cast<double>(s.engine().cache().bytes_allocated()));
  for (const char* name :
       {"headroom_time_to_first_token_seconds", "headroom_inter_token_latency_seconds",
        "headroom_request_duration_seconds", "headroom_queue_time_seconds"}) {
    EXPECT_NE(text.find(std::string("# TYPE ") + name + " histogram"), std::string::npos) << name;
  }
  auto missing = c.Get("/v1/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_TRUE(json::parse(missing->body)["error"]["message"].is_string());
}

TEST(Server, GreedyCompletionsMatchTheGoldenText) {
  Running s(small());
  auto c = s.client();
  for (const Golden& g : golden()) {
    const int max_tokens = 40;
    bool stopped = false;
    const auto [text, n] = golden_text(s.tokenizer(), g, max_tokens, &stopped);
    int status = 0;
    const json r =
        post(c, "/v1/completions",
             {{"prompt", g.prompt}, {"max_tokens", max_tokens}, {"temperature", 0}}, &status);
    ASSERT_EQ(status, 200) << r.dump();
    EXPECT_EQ(r["object"], "text_completion");
    EXPECT_EQ(r["choices"][0]["text"], text) << g.prompt;
    EXPECT_EQ(r["choices"][0]["finish_reason"], stopped ? "stop" : "length");
    EXPECT_EQ(r["usage"]["prompt_tokens"], g.prompt_ids.size());
    EXPECT_EQ(r["usage"]["completion_tokens"], n);
    EXPECT_EQ(r["usage"]["total_tokens"], g.prompt_ids.size() + n);
  }
}

// --draft: the same golden text with drafts verified, counted in usage and /metrics; a request
// may turn drafting off, and a bad value is a 400 naming the field.
TEST(Server, SpeculativeDecodingKeepsTheGoldenTextAndCountsTheDrafts) {
  engine::EngineOptions o = small();
  o.request.n_draft = 4;
  Running s(o);
  auto c = s.client();
  int kept = 0, drafted = 0;
  for (const Golden& g : golden()) {
    const int max_tokens = 60;
    bool stopped = false;
    const auto [text, n] = golden_text(s.tokenizer(), g, max_tokens, &stopped);
    for (int n_max : {-1, 0}) {
      json body = {{"prompt", g.prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
      if (n_max >= 0) body["speculative.n_max"] = n_max;
      int status = 0;
      const json r = post(c, "/v1/completions", body, &status);
      ASSERT_EQ(status, 200) << r.dump();
      EXPECT_EQ(r["choices"][0]["text"], text) << g.prompt;
      const json& details = r["usage"]["completion_tokens_details"];
      const int accepted = details["accepted_prediction_tokens"].get<int>();
      const int rejected = details["rejected_prediction_tokens"].get<int>();
      if (n_max == 0) {
        EXPECT_EQ(accepted + rejected, 0) << r.dump();
      } else {
        kept += accepted;
        drafted += accepted + rejected;
      }
    }
  }
  // Whether drafts are kept depends on the row cost the scheduler measures (on this tiny model a
  // row costs nearly a step, so it soon stops drafting): tests/engine/speculative_test.cpp checks
  // kept drafts with the cost fixed. The first drafts are tried before any cost is measured.
  EXPECT_GT(drafted, 0);
  const std::string m = metrics_text(s);
  EXPECT_EQ(metric(m, "headroom_draft_tokens_total"), drafted);
  EXPECT_EQ(metric(m, "headroom_draft_accepted_tokens_total"), kept);
  int status = 0;
  const json bad =
      post(c, "/v1/completions", {{"prompt", "Once"}, {"speculative.n_max", -2}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(bad["error"]["param"], "speculative.n_max") << bad.dump();
}

// --draft-model: the drafter drafts for every request that does not turn drafting off; four
// concurrent greedy completions, batched together, give the text one gives without drafts, and
// their drafts are counted in /metrics. Returns the drafts (kept, drafted) of the four.
std::pair<int, int> drafted_completions(const std::string& target, const std::string& drafter) {
  engine::EngineOptions o = small();
  o.model_path = target;
  o.draft_model_path = drafter;
  o.request.n_draft = 3;
  Running s(o);
  auto c = s.client();
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}};
  json plain_body = body;
  plain_body["speculative.n_max"] = 0;
  int status = 0;
  const json plain = post(c, "/v1/completions", plain_body, &status);
  EXPECT_EQ(status, 200) << plain.dump();
  std::vector<json> results(4);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < results.size(); ++i) {
    clients.emplace_back([&, i] {
      auto ci = s.client();
      results[i] = post(ci, "/v1/completions", body);
    });
  }
  for (auto& t : clients) t.join();
  int kept = 0, drafted = 0;
  for (const json& r : results) {
    if (!r.contains("choices")) {
      ADD_FAILURE() << r.dump();
      continue;
    }
    EXPECT_EQ(r["choices"][0]["text"], plain["choices"][0]["text"]) << r.dump();
    const json& d = r["usage"]["completion_tokens_details"];
    kept += d["accepted_prediction_tokens"].get<int>();
    drafted +=
        d["accepted_prediction_tokens"].get<int>() + d["rejected_prediction_tokens"].get<int>();
  }
  EXPECT_GT(drafted, 0);
  EXPECT_EQ(metric(metrics_text(s), "headroom_draft_tokens_total"), drafted);
  return {kept, drafted};
}

// A Gemma 4 assistant drafter (a tiny random one, for a tiny Gemma 4 model).
TEST(Server, AnAssistantDrafterLeavesConcurrentCompletionsAsTheyAre) {
  const auto dir = testing_util::temp_dir();
  const std::string target = (dir / "tiny-e.gguf").string(), drafter = (dir / "mtp.gguf").string();
  auto w = model::synth_writer({.arch = "gemma4", .shape = "tiny-e"});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->write(target).ok());
  testing_util::write_assistant(target, drafter);
  ASSERT_FALSE(HasFailure());
  drafted_completions(target, drafter);
}

// A draft model with a cache of its own: the model itself, so each of its drafts is kept.
TEST(Server, ADraftModelLeavesConcurrentCompletionsAsTheyAre) {
  const std::string target = (testing_util::temp_dir() / "tiny-e.gguf").string();
  auto w = model::synth_writer({.arch = "gemma4", .shape = "tiny-e"});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->write(target).ok());
  const auto [kept, drafted] = drafted_completions(target, target);
  EXPECT_EQ(kept, drafted);
}

TEST(Server, StreamedChatEqualsTheWholeResponse) {
  Running s(small());
  auto c = s.client();
  const json body = {
      {"messages", {{{"role", "user"}, {"content", "Tell me a story about a dog."}}}},
      {"max_tokens", 30},
      {"temperature", 0},
      {"logprobs", true}};
  int status = 0;
  const json whole = post(c, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << whole.dump();
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["choices"][0]["message"]["role"], "assistant");
  const std::string expected = whole["choices"][0]["message"]["content"];
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(whole["choices"][0]["logprobs"]["content"].size(),
            whole["usage"]["completion_tokens"].get<size_t>());

  json streaming = body;
  streaming["stream"] = true;
  streaming["stream_options"] = {{"include_usage", true}};
  auto res = c.Post("/v1/chat/completions", streaming.dump(), "application/json");
  ASSERT_TRUE(res && res->status == 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  const auto events = sse_events(res->body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  std::string finish;
  json usage;
  size_t content_chunks = 0, n_logprobs = 0;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    EXPECT_EQ(chunk["id"], json::parse(events[0])["id"]);
    if (chunk.contains("usage") && !chunk["usage"].is_null()) usage = chunk["usage"];
    if (chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    if (i == 0) {
      EXPECT_EQ(choice["delta"]["role"], "assistant");
    }
    if (choice["delta"].contains("content")) {
      text += choice["delta"]["content"].get<std::string>();
      if (!choice["delta"]["content"].get<std::string>().empty()) ++content_chunks;
    }
    if (choice["logprobs"].is_object()) n_logprobs += choice["logprobs"]["content"].size();
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(text, expected);
  // A chunk per token, as OpenAI streams: every token's logprob arrives, and (this vocabulary
  // has no multi-token characters) every generated token carries text.
  EXPECT_EQ(n_logprobs, whole["choices"][0]["logprobs"]["content"].size());
  EXPECT_EQ(content_chunks, n_logprobs);
  EXPECT_EQ(finish, whole["choices"][0]["finish_reason"]);
  EXPECT_EQ(usage["completion_tokens"], whole["usage"]["completion_tokens"]);
  EXPECT_EQ(usage["prompt_tokens"], whole["usage"]["prompt_tokens"]);
}

TEST(Server, StopStringsEndTheTextBeforeTheStop) {
  Running s(small());
  auto c = s.client();
  const Golden g = golden()[0];
  bool stopped = false;
  const std::string text = golden_text(s.tokenizer(), g, 40, &stopped).first;
  const size_t cut = text.find(' ', 5);
  ASSERT_NE(cut, std::string::npos);
  const std::string stop = text.substr(cut, 3);
  int status = 0;
  const json r =
      post(c, "/v1/completions",
           {{"prompt", g.prompt}, {"max_tokens", 40}, {"temperature", 0}, {"stop", stop}}, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(r["choices"][0]["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
}

TEST(Server, ApiKeyGuardsEveryV1Route) {
  Running s(small(), {.api_key = "sekret"});
  auto c = s.client();
  const json body = {{"prompt", "Once"}, {"max_tokens", 2}};
  int status = 0;
  json r = post(c, "/v1/completions", body, &status);
  EXPECT_EQ(status, 401);
  EXPECT_EQ(r["error"]["code"], "invalid_api_key");
  post(c, "/v1/completions", body, &status, {{"Authorization", "Bearer wrong"}});
  EXPECT_EQ(status, 401);
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
  post(c, "/v1/completions", body, &status, {{"Authorization", "Bearer sekret"}});
  EXPECT_EQ(status, 200);
  auto health = c.Get("/health");  // probes stay open
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST(Server, BadRequestsGetTheRightStatusNamingTheField) {
  Running s(small(4, 64), {.max_body_bytes = 4096});
  auto c = s.client();
  struct Case {
    std::string body;
    int status;
    std::string param, code;
  };
  const std::string long_prompt(2000, 'a');
  const std::vector<Case> cases = {
      {"{not json", 400, "", ""},
      {R"({"prompt":"x","max_tokens":"ten"})", 400, "max_tokens", ""},
      {R"({"prompt":"x","temperature":-1})", 400, "temperature", ""},
      {R"({"prompt":"x","n":17})", 400, "n", ""},
      {R"({"prompt":"x","stop":[1,2]})", 400, "stop[0]", ""},
      {R"({"max_tokens":3})", 400, "prompt", ""},
      {json{{"prompt", std::string(5000, 'x')}}.dump(), 413, "", ""},
      {json{{"prompt",
             std::string(1000, ' ') + "Once upon a time there was a dog. " + std::string(400, '.')}}
           .dump(),
       400, "prompt", "context_length_exceeded"},
      {R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object","patternProperties":{"a":{}}}}}})",
       400, "response_format", "unsupported_response_format"},
  };
  for (const Case& k : cases) {
    auto res = c.Post("/v1/completions", k.body, "application/json");
    ASSERT_TRUE(res) << k.body.substr(0, 80);
    EXPECT_EQ(res->status, k.status) << k.body.substr(0, 80) << " → " << res->body;
    const json e = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(e.contains("error")) << res->body;
    EXPECT_FALSE(e["error"]["message"].get<std::string>().empty());
    if (!k.param.empty()) {
      EXPECT_EQ(e["error"]["param"], k.param) << res->body;
    }
    if (!k.code.empty()) {
      EXPECT_EQ(e["error"]["code"], k.code) << res->body;
    }
  }
  // The context error gives both counts.
  auto res = c.Post("/v1/completions", cases[7].body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_TRUE(std::regex_search(
      res->body, std::regex("the prompt has [0-9]+ tokens but the context holds 64")))
      << res->body;
  const std::string text = metrics_text(s);
  EXPECT_EQ(metric(text, "headroom_errors_total{type=\"too_large\"}"), 1);
  EXPECT_EQ(metric(text, "headroom_errors_total{type=\"context_length_exceeded\"}"), 2);
  EXPECT_EQ(metric(text, "headroom_errors_total{type=\"unsupported_response_format\"}"), 1);
}

TEST(Server, AFullQueueAnswers503WithRetryAfterAndNothingIsLost) {
  Running s(small(1, 2048), {.max_queue = 1});
  constexpr int kClients = 8;
  std::vector<int> status(kClients);
  std::vector<std::string> retry_after(kClients), finish(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      auto c = s.client();
      auto res = c.Post("/v1/completions",
                        json{{"prompt", "Once upon a time"},
                             {"max_tokens", 1500},
                             {"temperature", 1.0},
                             {"seed", i}}
                            .dump(),
                        "application/json");
      if (!res) return;
      status[i] = res->status;
      retry_after[i] = res->get_header_value("Retry-After");
      const json r = json::parse(res->body, nullptr, false);
      if (res->status == 200) finish[i] = r["choices"][0]["finish_reason"];
    });
  }
  for (auto& t : clients) t.join();
  int ok = 0, busy = 0;
  for (int i = 0; i < kClients; ++i) {
    if (status[i] == 200) {
      ++ok;
      EXPECT_TRUE(finish[i] == "stop" || finish[i] == "length") << finish[i];
    } else {
      EXPECT_EQ(status[i], 503) << i;
      EXPECT_EQ(retry_after[i], "1");
      ++busy;
    }
  }
  EXPECT_EQ(ok + busy, kClients);  // every client got exactly one answer
  EXPECT_GE(ok, 1);
  EXPECT_GE(busy, 1);  // one slot and one queue place cannot hold eight long requests
  const std::string text = metrics_text(s);
  EXPECT_EQ(metric(text, "headroom_errors_total{type=\"queue_full\"}"), busy);
  EXPECT_EQ(metric(text, "headroom_requests_total{finish_reason=\"length\"}") +
                metric(text, "headroom_requests_total{finish_reason=\"stop\"}"),
            ok);
}

TEST(Server, AClientThatGoesAwayIsCancelledAndItsCacheFreed) {
  Running s(small(1, 2048));
  auto c = s.client();
  int chunks = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.set_header("Content-Type", "application/json");
  req.body = json{
      {"prompt", "Once upon a time"},
      {"max_tokens", 2000},
      {"stream", true},
      {"temperature",
       1}}.dump();
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 2; };
  (void)c.send(req);
  EXPECT_GE(chunks, 2);  // it read, then hung up
  // The server notices on its next write; the cancel lands at the next step boundary.
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text = metrics_text(s);
    if (metric(text, "headroom_requests_total{finish_reason=\"cancelled\"}") == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(metric(text, "headroom_requests_total{finish_reason=\"cancelled\"}"), 1);
  EXPECT_EQ(metric(text, "headroom_errors_total{type=\"client_disconnected\"}"), 1);
  EXPECT_EQ(s.engine().cache().bytes_in_use(), 0u);
  // The slot serves the next request.
  int status = 0;
  post(c, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 3}}, &status);
  EXPECT_EQ(status, 200);
}

TEST(Server, JsonSchemaOutputAlwaysParsesAndHasTheRequiredFields) {
  Running s(small());
  auto c = s.client();
  // Parsed keeping key order (a plain json would sort "age" before "name").
  const auto schema = nlohmann::ordered_json::parse(R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":120},
      "mood":{"enum":["happy","sad"]}},"required":["name","age","mood"],"additionalProperties":false})");
  for (int seed = 0; seed < 6; ++seed) {
    nlohmann::ordered_json body = {{"messages", {{{"role", "user"}, {"content", "Who is Tim?"}}}},
                                   {"max_tokens", 200},
                                   {"temperature", 1.0},
                                   {"seed", seed}};
    body["response_format"] = {{"type", "json_schema"},
                               {"json_schema", {{"name", "p"}, {"schema", schema}}}};
    auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(res);
    const int status = res->status;
    const json r = json::parse(res->body);
    ASSERT_EQ(status, 200) << r.dump();
    ASSERT_EQ(r["choices"][0]["finish_reason"], "stop") << r.dump();
    const json doc =
        json::parse(r["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(doc.is_object()) << r.dump();
    EXPECT_EQ(doc.size(), 3u) << doc.dump();
    EXPECT_TRUE(doc["name"].is_string() && doc["name"].get<std::string>().size() <= 12)
        << doc.dump();
    EXPECT_TRUE(doc["age"].is_number_integer() && doc["age"] >= 0 && doc["age"] <= 120)
        << doc.dump();
    EXPECT_TRUE(doc["mood"] == "happy" || doc["mood"] == "sad") << doc.dump();
    // Properties come in the order the schema lists them.
    const std::string content = r["choices"][0]["message"]["content"];
    EXPECT_LT(content.find("\"name\""), content.find("\"age\"")) << content;
  }
}

TEST(Server, GreedyOutputsAreTheSameAloneAndAmong31Others) {
  Running s(small(8, 256));
  const auto cases = golden();
  auto body = [&](int i) {
    return json{{"prompt", cases[i % cases.size()].prompt +
                               (i >= static_cast<int>(cases.size()) ? " and" : "")},
                {"max_tokens", 24 + i % 9},
                {"temperature", 0}};
  };
  constexpr int kRequests = 32;
  std::vector<std::string> alone(kRequests), together(kRequests);
  auto c = s.client();
  for (int i = 0; i < kRequests; ++i) {
    int status = 0;
    alone[i] = post(c, "/v1/completions", body(i), &status)["choices"][0]["text"];
    ASSERT_EQ(status, 200);
  }
  std::vector<std::thread> clients;
  std::atomic<int> answered{0};
  for (int i = 0; i < kRequests; ++i) {
    clients.emplace_back([&, i] {
      auto ci = s.client();
      int status = 0;
      const json r = post(ci, "/v1/completions", body(i), &status);
      if (status == 200) together[i] = r["choices"][0]["text"];
      ++answered;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(answered, kRequests);
  for (int i = 0; i < kRequests; ++i) EXPECT_EQ(together[i], alone[i]) << i;
  const std::string text = metrics_text(s);
  EXPECT_EQ(metric(text, "headroom_request_duration_seconds_count"), 2 * kRequests);
  EXPECT_EQ(metric(text, "headroom_requests_active"), 0);
  EXPECT_EQ(metric(text, "headroom_kv_cache_bytes_used{device=\"cpu\"}"), 0);
}

// With NVML (the fake library: two GPUs), /metrics carries per-GPU gauges read at each scrape;
// without it, no GPU series at all.
TEST(Server, MetricsCarryGpuGaugesReadAtEachScrapeOnlyWhenNvmlIsThere) {
  {
    testing_util::ScopedEnv lib("HEADROOM_NVML_LIB", FAKE_NVML);
    testing_util::ScopedEnv temperature("FAKE_NVML_TEMPERATURE", std::nullopt);
    Running s(small(1, 256));
    std::string text = metrics_text(s);
    EXPECT_EQ(metric(text, "headroom_gpu_memory_used_bytes{gpu=\"0\"}"), 10737418240.0);
    EXPECT_EQ(metric(text, "headroom_gpu_memory_total_bytes{gpu=\"1\"}"), 25769803776.0);
    EXPECT_EQ(metric(text, "headroom_gpu_sm_clock_hertz{gpu=\"1\"}"), 1.2e9);
    EXPECT_EQ(metric(text, "headroom_gpu_power_watts{gpu=\"0\"}"), 250);
    EXPECT_EQ(
        metric(text,
               "headroom_gpu_throttle_reason_active{gpu=\"1\",reason=\"hw_thermal_slowdown\"}"),
        1);
    EXPECT_EQ(metric(text, "headroom_gpu_temperature_celsius{gpu=\"1\"}"), 89);
    ::setenv("FAKE_NVML_TEMPERATURE", "93", 1);
    text = metrics_text(s);
    EXPECT_EQ(metric(text, "headroom_gpu_temperature_celsius{gpu=\"1\"}"), 93);
    // The engine still runs on the CPU: the GPUs are watched, not used.
    EXPECT_EQ(s.engine().plan().devices.size(), 1u);
  }
  testing_util::ScopedEnv lib("HEADROOM_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");
  Running s(small(1, 256));
  const std::string text = metrics_text(s);
  EXPECT_EQ(text.find("headroom_gpu_"), std::string::npos);
  EXPECT_NE(text.find("headroom_requests_active"), std::string::npos);
}

}  // namespace

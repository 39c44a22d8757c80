// LoRA adapters over HTTP on the real stories260K: /v1/models lists the base and each adapter
// (vLLM's shape), a request chooses one by "model" (and scales it with lora_scale), adapters are
// loaded and unloaded while the server runs (vLLM's /v1/load_lora_adapter and
// /v1/unload_lora_adapter), bad requests get one-line errors and the server keeps serving, and
// /metrics' vllm:lora_requests_info says how many it holds.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "raw_client.h"
#include "running_server.h"
#include "testing/lora_files.h"

namespace {

using server_test::json;
using server_test::post;

struct Fixture {
  std::filesystem::path dir = testing_util::temp_dir();
  std::string a, b;
  Fixture() {
    auto base = gguf::File::open(server_test::model_path());
    EXPECT_TRUE(base.ok());
    a = (dir / "a.gguf").string();
    b = (dir / "b.gguf").string();
    // Large enough to change stories260K's greedy text within a few tokens.
    testing_util::write_adapter(*base, a, {.rank = 4, .seed = 1, .sd = 0.3f});
    testing_util::write_adapter(*base, b, {.rank = 4, .seed = 2, .sd = 0.3f});
  }
};

engine::EngineOptions with_adapter(const Fixture& f) {
  engine::EngineOptions eo = server_test::small();
  eo.adapters = {{"a", f.a, 1.0f}};
  eo.request.lora = {.max_loras = 2, .max_rank = 4};
  return eo;
}

std::vector<std::string> model_ids(httplib::Client& c) {
  auto res = c.Get("/v1/models");
  EXPECT_TRUE(res && res->status == 200);
  std::vector<std::string> ids;
  if (!res) return ids;
  const json models = json::parse(res->body);
  for (const auto& m : models["data"]) ids.push_back(m["id"]);
  return ids;
}

json greedy(httplib::Client& c, const std::string& model, int* status, json extra = {}) {
  json body = {
      {"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}, {"model", model}};
  if (!extra.is_null()) body.update(extra);
  return post(c, "/v1/completions", body, status);
}

TEST(ServerLora, ModelsListTheBaseAndEachAdapter) {
  Fixture f;
  server_test::Running s(with_adapter(f));
  auto c = s.client();
  auto res = c.Get("/v1/models");
  ASSERT_TRUE(res && res->status == 200);
  const json data = json::parse(res->body)["data"];
  ASSERT_EQ(data.size(), 2u);
  EXPECT_EQ(data[0]["id"], "stories260K");
  EXPECT_TRUE(data[0]["parent"].is_null());
  EXPECT_EQ(data[1]["id"], "a");
  EXPECT_EQ(data[1]["parent"], "stories260K");
  EXPECT_EQ(data[1]["root"], f.a);
}

TEST(ServerLora, RequestsChooseAnAdapterByModel) {
  Fixture f;
  server_test::Running s(with_adapter(f));
  auto c = s.client();
  int status = 0;
  const json base = greedy(c, "stories260K", &status);
  ASSERT_EQ(status, 200) << base.dump();
  const json adapted = greedy(c, "a", &status);
  ASSERT_EQ(status, 200) << adapted.dump();
  EXPECT_EQ(adapted["model"], "a");
  EXPECT_NE(adapted["choices"][0]["text"], base["choices"][0]["text"]);
  // Scale 0: the adapter adds nothing, so the base model's text.
  const json zero = greedy(c, "a", &status, {{"lora_scale", 0.0}});
  ASSERT_EQ(status, 200) << zero.dump();
  EXPECT_EQ(zero["choices"][0]["text"], base["choices"][0]["text"]);
  // Same adapter and scale: the same text again (its prefix may come from the cache).
  EXPECT_EQ(greedy(c, "a", &status)["choices"][0]["text"], adapted["choices"][0]["text"]);
  // Chat completions take the same field.
  const json chat = post(
      c, "/v1/chat/completions",
      {{"model", "a"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 4}},
      &status);
  EXPECT_EQ(status, 200) << chat.dump();
  EXPECT_EQ(chat["model"], "a");
}

TEST(ServerLora, BadRequestsGetOneLineErrors) {
  Fixture f;
  server_test::Running s(with_adapter(f));
  auto c = s.client();
  int status = 0;
  const json unknown = greedy(c, "nope", &status);
  EXPECT_EQ(status, 404);
  EXPECT_EQ(unknown["error"]["code"], "model_not_found");
  EXPECT_NE(unknown["error"]["message"].get<std::string>().find("'a'"), std::string::npos)
      << "lists the adapters: " << unknown.dump();
  const json scaled_base = greedy(c, "stories260K", &status, {{"lora_scale", 0.5}});
  EXPECT_EQ(status, 400) << scaled_base.dump();
  EXPECT_EQ(scaled_base["error"]["param"], "lora_scale");
  const json bad_file =
      post(c, "/v1/load_lora_adapter",
           {{"lora_name", "x"}, {"lora_path", server_test::model_path()}}, &status);
  EXPECT_EQ(status, 400);
  const std::string message = bad_file["error"]["message"];
  EXPECT_NE(message.find("is not an adapter"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  post(c, "/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", f.b}}, &status);
  EXPECT_EQ(status, 400) << "the name is taken";
  post(c, "/v1/load_lora_adapter", {{"lora_path", f.b}}, &status);
  EXPECT_EQ(status, 400) << "no lora_name";
  post(c, "/v1/unload_lora_adapter", {{"lora_name", "nope"}}, &status);
  EXPECT_EQ(status, 404);
  server_test::expect_golden_answer(s);
}

TEST(ServerLora, AdaptersLoadAndUnloadWhileServing) {
  Fixture f;
  server_test::Running s(with_adapter(f));
  auto c = s.client();
  int status = 0;
  const json via_a = greedy(c, "a", &status);
  ASSERT_EQ(status, 200) << via_a.dump();
  auto res = c.Post("/v1/load_lora_adapter", json{{"lora_name", "b"}, {"lora_path", f.b}}.dump(),
                    "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->body, "Success: LoRA adapter 'b' added successfully.");
  EXPECT_EQ(model_ids(c), (std::vector<std::string>{"stories260K", "a", "b"}));
  const json via_b = greedy(c, "b", &status);
  EXPECT_EQ(status, 200) << via_b.dump();
  // Both slots are held: a third adapter is refused until one goes.
  post(c, "/v1/load_lora_adapter", {{"lora_name", "c"}, {"lora_path", f.b}}, &status);
  EXPECT_EQ(status, 400);
  res = c.Post("/v1/unload_lora_adapter", json{{"lora_name", "a"}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->body, "Success: LoRA adapter 'a' removed successfully.");
  EXPECT_EQ(model_ids(c), (std::vector<std::string>{"stories260K", "b"}));
  greedy(c, "a", &status);
  EXPECT_EQ(status, 404);
  post(c, "/v1/load_lora_adapter", {{"lora_name", "c"}, {"lora_path", f.a}}, &status);
  EXPECT_EQ(status, 200);
  // a's file under another name gives a's text.
  EXPECT_EQ(greedy(c, "c", &status)["choices"][0]["text"], via_a["choices"][0]["text"]);
  const std::string m = server_test::metrics_text(s);
  EXPECT_NE(m.find("vllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"\","
                   "waiting_lora_adapters=\"\"}"),
            std::string::npos)
      << m;
}

// With one slot, a long stream under "a" runs while one under "b" waits: the LoRA series names
// them, then goes back to empty lists when the clients leave — one series at a time.
TEST(ServerLora, MetricsNameTheAdaptersOfRunningAndWaitingRequests) {
  Fixture f;
  engine::EngineOptions eo = with_adapter(f);
  eo.request.n_slots = 1;
  eo.request.n_ctx = 4096;  // streams long enough to be seen running
  eo.adapters.push_back({"b", f.b, 1.0f});
  server_test::Running s(eo);
  auto request = [](const std::string& model) {
    const std::string body = json{
        {"prompt", "Once upon a time"},
        {"max_tokens", 4000},
        {"ignore_eos", true},  // an early end of text would finish the stream before it is seen
        {"stream", true},
        {"model", model}}.dump();
    return "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  auto series = [](const std::string& running, const std::string& waiting) {
    return "vllm:lora_requests_info{max_lora=\"2\",running_lora_adapters=\"" + running +
           "\",waiting_lora_adapters=\"" + waiting + "\"}";
  };
  auto wait_for = [&](const std::string& line) {
    std::string text;
    for (int i = 0; i < 500 && text.find(line) == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      text = server_test::metrics_text(s);
    }
    EXPECT_NE(text.find(line), std::string::npos) << text;
    EXPECT_EQ(text.find("vllm:lora_requests_info{"), text.rfind("vllm:lora_requests_info{"))
        << "one series at a time";
  };
  {
    server_test::RawClient first(s.port()), second(s.port());
    first.send(request("a"));
    wait_for(series("a", ""));
    second.send(request("b"));
    wait_for(series("a", "b"));
  }
  wait_for(series("", ""));
}

}  // namespace

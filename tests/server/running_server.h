// Test helpers for the server on the real stories260K: a server on a free loopback port for a
// test's lifetime, JSON posts, /metrics values, the golden greedy continuations and SSE events.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "server/server.h"
#include "testing/testing.h"
#include "tokenizer/tokenizer.h"

namespace server_test {

using nlohmann::json;

inline std::string model_path() {
  return (testing_util::shared_dir() / "models/stories260K.gguf").string();
}

// A server on a free loopback port, running on its own thread for the test's lifetime: stories260K
// with a plain chat template unless the options name another model, template and id.
class Running {
 public:
  explicit Running(engine::EngineOptions eo, server::ServerOptions so = {}) {
    if (eo.model_path.empty()) eo.model_path = model_path();
    auto e = engine::Engine::load(eo);
    EXPECT_TRUE(e.ok()) << e.error().message();
    engine_ = std::move(*e);
    auto t = tokenizer::Tokenizer::from_gguf(engine_->file());
    EXPECT_TRUE(t.ok());
    tokenizer_ = std::make_unique<tokenizer::Tokenizer>(std::move(*t));
    so.port = 0;
    if (so.model_id.empty()) so.model_id = "stories260K";
    if (so.chat_template.empty()) {
      so.chat_template =
          "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:";
    }
    auto s = server::Server::create(*engine_, *tokenizer_, so);
    EXPECT_TRUE(s.ok()) << s.error().message();
    server_ = std::move(*s);
    auto bound = server_->bind();
    EXPECT_TRUE(bound.ok()) << bound.error().message();
    thread_ = std::thread([this] { (void)server_->run(); });
  }
  ~Running() {
    server_->stop();
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return server_->port(); }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(60, 0);
    return c;
  }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  engine::Engine& engine() { return *engine_; }
  server::Server& server() { return *server_; }
  // Waits for run() to return (after a drain).
  void join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<server::Server> server_;
  std::thread thread_;
};

inline engine::EngineOptions small(int slots = 4, int ctx = 256) {
  return {.request = {.n_ctx = ctx, .n_slots = slots, .n_ubatch = 64}};
}

inline json post(httplib::Client& c, const std::string& path, const json& body,
                 int* status = nullptr, httplib::Headers headers = {}) {
  auto res = c.Post(path.c_str(), headers, body.dump(), "application/json");
  EXPECT_TRUE(res) << "no response from " << path << ": " << httplib::to_string(res.error());
  if (!res) return json();
  if (status) *status = res->status;
  return json::parse(res->body, nullptr, false);
}

// The value of one series in a Prometheus exposition (0 when absent).
inline double metric(const std::string& exposition, const std::string& series) {
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return 0;
}

inline std::string metrics_text(const Running& s) {
  auto c = s.client();
  auto res = c.Get("/metrics");
  EXPECT_TRUE(res && res->status == 200);
  return res ? res->body : "";
}

struct Golden {
  std::string prompt;
  std::vector<int32_t> prompt_ids, generated;
};

inline std::vector<Golden> golden() {
  auto g = json::parse(
      testing_util::read_text(testing_util::shared_dir() / "models/stories260K.golden.json"));
  std::vector<Golden> out;
  for (const auto& c : g["cases"]) {
    out.push_back({c["prompt"].get<std::string>(), c["prompt_ids"].get<std::vector<int32_t>>(),
                   c["greedy_generated_ids"].get<std::vector<int32_t>>()});
  }
  return out;
}

// The golden continuation as text (its pieces joined: a continuation keeps its leading space) and
// token count, cut at the end token or at `max_tokens`.
inline std::pair<std::string, int> golden_text(const tokenizer::Tokenizer& tok, const Golden& g,
                                               int max_tokens, bool* stopped) {
  std::string text;
  *stopped = false;
  int n = 0;
  for (int32_t id : g.generated) {
    if (n == max_tokens) break;
    ++n;
    if (tok.is_end_of_generation(id)) {
      *stopped = true;
      break;
    }
    text += tok.piece(id);
  }
  return {text, n};
}

// Reads a whole SSE response: the data payloads in order.
inline std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> events;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("data: ", 0) == 0) events.push_back(line.substr(6));
  }
  return events;
}

// A greedy completion of the first golden prompt on a fresh connection equals the golden text:
// the server still answers correctly (called after each hostile case).
inline void expect_golden_answer(const Running& s, const httplib::Headers& headers = {}) {
  const Golden g = golden()[0];
  bool stopped = false;
  const auto [text, n] = golden_text(s.tokenizer(), g, 16, &stopped);
  auto c = s.client();
  int status = 0;
  const json r =
      post(c, "/v1/completions", {{"prompt", g.prompt}, {"max_tokens", 16}, {"temperature", 0}},
           &status, headers);
  EXPECT_EQ(status, 200) << r.dump();
  if (status == 200) {
    EXPECT_EQ(r["choices"][0]["text"], text);
  }
}

}  // namespace server_test

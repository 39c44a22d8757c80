// Graceful drain, in process: a draining server stops accepting connections, answers /health
// with 503 "draining" (and new requests with a retryable 503) on connections still open, lets
// running and queued requests finish; past its deadline it ends streams properly (finish_reason
// "length", [DONE]) and answers requests that never started with a retryable 503. Then run()
// returns. (tests/integration/drain_test.py sends the real SIGTERM to `headroom serve`.)
#include <chrono>
#include <string>
#include <thread>

#include "raw_client.h"
#include "running_server.h"

namespace {

using namespace server_test;
using namespace std::chrono_literals;

std::string json_completion_request(const json& body) {
  return completion_request(body.dump());
}

// Waits for the first streamed event of a response on `c`.
void wait_for_first_event(RawClient& c) {
  for (int i = 0; i < 300 && c.received().find("data: ") == std::string::npos; ++i)
    c.receive(100ms);
  ASSERT_NE(c.received().find("data: "), std::string::npos) << c.received();
}

void wait_until_queued(const Running& s, int n) {
  for (int i = 0; i < 400 && metric(metrics_text(s), "headroom_requests_queued") != n; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(metric(metrics_text(s), "headroom_requests_queued"), n);
}

// The listener is closed once a connection attempt is refused.
void wait_until_not_accepting(int port) {
  for (int i = 0; i < 400; ++i) {
    if (!RawClient(port).connected()) return;
    std::this_thread::sleep_for(10ms);
  }
  FAIL() << "the server still accepts connections";
}

// The SSE events of a finished stream: every chunk parses, the last two are the finish chunk
// (and usage, when asked) and [DONE]. Returns the finish reason and the completion tokens.
std::pair<std::string, int> finished_stream(const RawResponse& r) {
  const auto events = sse_events(r.body);
  EXPECT_GE(events.size(), 2u);
  if (events.size() < 2) return {"", 0};
  EXPECT_EQ(events.back(), "[DONE]");
  std::string finish;
  int tokens = -1;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json chunk = json::parse(events[i], nullptr, false);
    EXPECT_TRUE(chunk.is_object()) << events[i];
    if (chunk.contains("usage") && chunk["usage"].is_object())
      tokens = chunk["usage"]["completion_tokens"];
    if (chunk.contains("choices") && !chunk["choices"].empty() &&
        !chunk["choices"][0]["finish_reason"].is_null()) {
      finish = chunk["choices"][0]["finish_reason"];
    }
  }
  return {finish, tokens};
}

TEST(Drain, RunningAndQueuedRequestsFinishWhileHealthSaysDraining) {
  Running s(small(1, 4096));
  const int port = s.port();
  // Connections a balancer keeps open.
  RawClient probe(port), client(port);
  probe.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n");
  auto health = probe.read_response(10s);
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  client.send("GET /v1/models HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(client.read_response(10s));
  // A long stream holds the one slot; a second request waits behind it.
  RawClient running(port), queued(port);
  running.send(json_completion_request({{"prompt", "Once upon a time"},
                                        {"max_tokens", 2000},
                                        {"stream", true},
                                        {"temperature", 1},
                                        {"seed", 1},
                                        {"stream_options", {{"include_usage", true}}}}));
  wait_for_first_event(running);
  queued.send(json_completion_request(
      {{"prompt", golden()[0].prompt}, {"max_tokens", 8}, {"temperature", 0}}));
  wait_until_queued(s, 1);

  std::thread drainer([&] { s.server().drain(60s); });
  wait_until_not_accepting(port);
  probe.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n");
  health = probe.read_response(10s);
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(json::parse(health->body)["status"], "draining");
  EXPECT_TRUE(health->has_header("Connection: close"));
  client.send(json_completion_request({{"prompt", "Once"}, {"max_tokens", 2}}));
  const auto refused = client.read_response(10s);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_TRUE(refused->has_header("Retry-After: 1"));
  EXPECT_EQ(json::parse(refused->body)["error"]["code"], "draining");

  // Both requests that were in finish in full.
  const auto streamed = running.read_response(60s);
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->status, 200);
  const auto [finish, tokens] = finished_stream(*streamed);
  EXPECT_TRUE(finish == "length" || finish == "stop") << finish;
  EXPECT_GT(tokens, 0);
  const auto waited = queued.read_response(60s);
  ASSERT_TRUE(waited);
  EXPECT_EQ(waited->status, 200);
  bool stopped = false;
  EXPECT_EQ(json::parse(waited->body)["choices"][0]["text"],
            golden_text(s.tokenizer(), golden()[0], 8, &stopped).first);
  drainer.join();
  s.join();  // run() has returned
}

TEST(Drain, PastTheDeadlineStreamsEndProperlyAndUnstartedRequestsGet503) {
  Running s(small(1, 8192));
  const int port = s.port();
  RawClient running(port), queued(port);
  running.send(json_completion_request({{"prompt", "Once upon a time"},
                                        {"max_tokens", 8000},
                                        {"stream", true},
                                        {"temperature", 1},
                                        {"stream_options", {{"include_usage", true}}}}));
  wait_for_first_event(running);
  queued.send(json_completion_request({{"prompt", "Once"}, {"max_tokens", 8}, {"stream", true}}));
  wait_until_queued(s, 1);

  std::thread drainer([&] { s.server().drain(1ms); });
  const auto streamed = running.read_response(60s);
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->status, 200);
  const auto [finish, tokens] = finished_stream(*streamed);
  EXPECT_EQ(finish, "length");  // cut: truncated, as by max_tokens
  EXPECT_GT(tokens, 0);
  EXPECT_LT(tokens, 8000);
  const auto never_started = queued.read_response(60s);
  ASSERT_TRUE(never_started);
  EXPECT_EQ(never_started->status, 503);
  EXPECT_TRUE(never_started->has_header("Retry-After: 1"));
  EXPECT_EQ(json::parse(never_started->body)["error"]["code"], "draining");
  drainer.join();
  s.join();
  EXPECT_EQ(s.engine().cache().bytes_in_use(), 0u);
}

}  // namespace

// The server against hostile clients, over loopback with raw sockets: nested JSON, oversized
// bodies and heads, slow heads and bodies, thousands of idle connections, smuggling attempts,
// invalid UTF-8, clients that leave at every stage. Each case checks the status the server
// answers with, and that it still answers a normal request with the golden text afterwards.
// Deadlines are set to a second so the slow cases stay short; nothing here asserts a duration.
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "raw_client.h"
#include "running_server.h"

namespace {

using namespace server_test;
using namespace std::chrono_literals;

// Deadlines of a second, a 64 KiB body limit; `tweak` changes more.
server::ServerOptions hostile_options(
    const std::function<void(server::ServerOptions&)>& tweak = {}) {
  server::ServerOptions o;
  o.request_timeout = 1000ms;
  o.idle_timeout = 1000ms;
  o.max_body_bytes = 64u << 10;
  if (tweak) tweak(o);
  return o;
}

// One request on a fresh connection; the responses it got before the server closed or `limit`.
std::vector<RawResponse> round_trip(int port, const std::string& bytes,
                                    std::chrono::milliseconds limit = 20s) {
  RawClient c(port);
  EXPECT_TRUE(c.connected());
  c.send(bytes);
  return parse_responses(c.read_until_closed(limit));
}

json error_of(const RawResponse& r) {
  const json e = json::parse(r.body, nullptr, false);  // fails on invalid UTF-8 as well
  EXPECT_TRUE(e.is_object() && e.contains("error")) << r.body.substr(0, 200);
  return e.is_object() && e.contains("error") ? e["error"] : json();
}

std::string nested(int depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

TEST(Hostile, NestedJsonPastTheDepthLimitIs400SayingTheLimit) {
  Running s(small(), hostile_options([](auto& o) { o.max_body_bytes = 1u << 20; }));
  auto c = s.client();
  // An unknown field may nest as deep as the limit allows; one level more, or 60000 (the body
  // that used to crash the process), is refused before parsing.
  for (const int depth : {1, 10, 63, 64, 65, 1000, 60000}) {
    const std::string extra = depth == 1 ? "0" : nested(depth - 1);
    const std::string body = R"({"prompt":"Once","max_tokens":2,"extra":)" + extra + "}";
    auto res = c.Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(res) << depth;
    if (depth <= 64) {
      EXPECT_EQ(res->status, 200) << depth << ": " << res->body.substr(0, 200);
    } else {
      EXPECT_EQ(res->status, 400) << depth;
      EXPECT_NE(res->body.find("more than 64 deep"), std::string::npos) << res->body;
    }
  }
  // A deeply nested schema is refused the same way, or compiled, never a crash.
  std::string schema = R"({"type":"string"})";
  for (int i = 0; i < 40; ++i) schema = R"({"type":"array","items":)" + schema + "}";
  const std::string body =
      R"({"prompt":"Once","max_tokens":4,"response_format":{"type":"json_schema","json_schema":{"schema":)" +
      schema + "}}}";
  auto res = c.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_TRUE(res->status == 200 || res->status == 400)
      << res->status << " " << res->body.substr(0, 200);
  expect_golden_answer(s);
}

// Found by fuzz/request_fuzz.cpp: a number past double's range made the parser throw an error
// that was not a parse error, and the request a 500.
TEST(Hostile, NumbersPastDoubleRangeAre400) {
  Running s(small(), hostile_options());
  auto c = s.client();
  for (const char* body :
       {R"({"prompt":"x","temperature":1e400})", R"({"prompt":"x","extra":[-0.5e+3555]})"}) {
    auto res = c.Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << body << " → " << res->body;
  }
  expect_golden_answer(s);
}

TEST(Hostile, OversizedBodiesAndHeadsAreRefusedWithoutReadingThem) {
  Running s(small(), hostile_options());
  const int port = s.port();
  // A declared body over the limit: 413 at once, before a byte of it is sent.
  auto r = round_trip(
      port, "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 100000000\r\n\r\n");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, 413);
  EXPECT_NE(error_of(r[0])["message"].get<std::string>().find("65536 byte limit"),
            std::string::npos);
  EXPECT_TRUE(r[0].has_header("Connection: close"));
  // A chunked body that grows past it.
  std::string chunked =
      "POST /v1/completions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 40; ++i) chunked += "1000\r\n" + std::string(0x1000, 'a') + "\r\n";
  r = round_trip(port, chunked);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, 413);
  // A header line, many headers, a target: each over the 16 KiB head limit.
  const std::vector<std::string> heads = {
      "GET /health HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(20000, 'x') + "\r\n\r\n",
      [] {
        std::string h = "GET /health HTTP/1.1\r\nHost: t\r\n";
        for (int i = 0; i < 2000; ++i) h += "X-" + std::to_string(i) + ": y\r\n";
        return h + "\r\n";
      }(),
      "GET /health?" + std::string(30000, 'q') + " HTTP/1.1\r\nHost: t\r\n\r\n",
  };
  for (const std::string& head : heads) {
    r = round_trip(port, head);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, 431);
    EXPECT_FALSE(error_of(r[0])["message"].get<std::string>().empty());
  }
  const std::string text = metrics_text(s);
  EXPECT_EQ(metric(text, "headroom_errors_total{type=\"too_large\"}"), 2);
  EXPECT_EQ(metric(text, "headroom_errors_total{type=\"header_too_large\"}"), 3);
  expect_golden_answer(s);
}

TEST(Hostile, SlowHeadsAndBodiesGet408AtTheRequestDeadlineAndStarveNobody) {
  Running s(small(), hostile_options());
  const int port = s.port();
  // Twenty connections that trickle a head, twenty that trickle a body, a byte every 100 ms:
  // each gets 408 once its request deadline passes, however long it would go on.
  std::vector<RawClient> heads, bodies;
  for (int i = 0; i < 20; ++i) {
    heads.emplace_back(port);
    heads.back().send("POST /v1/completions HTTP/1.1\r\n");
    bodies.emplace_back(port);
    bodies.back().send("POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n{");
  }
  // Meanwhile the server answers probes and requests.
  auto c = s.client();
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  expect_golden_answer(s);
  for (int tick = 0; tick < 300; ++tick) {  // 30 s at most, far past the 1 s deadline
    bool open = false;
    for (auto& h : heads) open |= h.send("X: y\r\n") && h.receive(0ms) && !h.closed();
    for (auto& b : bodies) open |= b.send("a") && b.receive(0ms) && !b.closed();
    if (!open) break;
    std::this_thread::sleep_for(100ms);
  }
  for (auto* group : {&heads, &bodies}) {
    for (auto& client : *group) {
      const auto r = parse_responses(client.read_until_closed(5s));
      ASSERT_EQ(r.size(), 1u) << client.received().substr(0, 200);
      EXPECT_EQ(r[0].status, 408);
      EXPECT_NE(error_of(r[0])["message"].get<std::string>().find("--request-timeout"),
                std::string::npos);
    }
  }
  EXPECT_EQ(metric(metrics_text(s), "headroom_errors_total{type=\"request_timeout\"}"), 40);
  expect_golden_answer(s);
}

TEST(Hostile, IdleKeepAliveConnectionsAreClosed) {
  Running s(small(), hostile_options());
  RawClient c(s.port());
  c.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n");
  auto r = c.read_response(10s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->has_header("Connection: keep-alive"));
  // Kept open, then closed by the server once idle past --idle-timeout.
  c.read_until_closed(30s);
  EXPECT_TRUE(c.closed());
  expect_golden_answer(s);
}

TEST(Hostile, ThousandsOfIdleConnectionsGet503WhileProbesAreStillAnswered) {
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_max < 4096)
    GTEST_SKIP() << "needs 4096 open files (ulimit -Hn is " << files.rlim_max << ")";
  Running s(small(), hostile_options([](auto& o) {
              o.idle_timeout = 60000ms;
              o.max_connections = 64;
            }));
  const int port = s.port();
  // Fill the cap with idle connections; the server keeps them (--idle-timeout 60 s).
  std::vector<RawClient> held;
  for (int i = 0; i < 64; ++i) held.emplace_back(port);
  // Two thousand more: beyond the 32 kept for probes, each is answered 503 unread and closed.
  std::vector<RawClient> flood;
  for (int i = 0; i < 2000; ++i) flood.emplace_back(port);
  int refused = 0;
  for (auto& c : flood) {
    const auto r = parse_responses(c.read_until_closed(20s));
    if (r.size() == 1 && r[0].status == 503) ++refused;
  }
  EXPECT_GE(refused, 2000 - 32);
  flood.clear();
  // The cap still holds 64 idle connections, yet a probe gets through, and a request gets a fast
  // 503 (the probe places free once the flood's connections are gone).
  std::optional<RawResponse> health;
  for (int attempt = 0; attempt < 100 && !(health && health->status == 200); ++attempt) {
    RawClient probe(port);
    probe.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n");
    health = probe.read_response(5s);
    if (!health || health->status != 200) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto r = round_trip(port, "GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, 200);
  EXPECT_GE(metric(r[0].body, "headroom_http_connections"), 64);
  r = round_trip(port, completion_request(R"({"prompt":"Once","max_tokens":2})"));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, 503);
  EXPECT_EQ(error_of(r[0])["code"], "over_capacity");
  // Once the idle connections go, requests are served again.
  held.clear();
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (metric(metrics_text(s), "headroom_http_connections") <= 1) break;
    std::this_thread::sleep_for(50ms);
  }
  expect_golden_answer(s);
}

TEST(Hostile, SmugglingAttemptsGetOneAnswerAndAClosedConnection) {
  Running s(small(), hostile_options([](auto& o) { o.api_key = "sekret"; }));
  const int port = s.port();
  const std::string auth = "Authorization: Bearer sekret\r\n";
  const std::string smuggled = "GET /v1/models HTTP/1.1\r\nHost: t\r\n" + auth + "\r\n";
  const std::string tail = "0\r\n\r\n" + smuggled;
  struct Case {
    std::string name, bytes;
    int status;
  };
  const std::vector<Case> cases = {
      {"CL and TE",
       "POST /v1/completions HTTP/1.1\r\nHost: t\r\n" + auth + "Content-Length: " +
           std::to_string(tail.size()) + "\r\nTransfer-Encoding: chunked\r\n\r\n" + tail,
       400},
      {"TE and CL",
       "POST /v1/completions HTTP/1.1\r\nHost: t\r\n" + auth +
           "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n" + tail,
       400},
      {"two lengths",
       "POST /v1/completions HTTP/1.1\r\nHost: t\r\n" + auth +
           "Content-Length: 0\r\nContent-Length: 40\r\n\r\n" + smuggled,
       400},
      {"TE xchunked",
       "POST /v1/completions HTTP/1.1\r\nHost: t\r\n" + auth +
           "Transfer-Encoding: xchunked\r\n\r\n" + tail,
       400},
      {"TE chunked, identity",
       "POST /v1/completions HTTP/1.1\r\nHost: t\r\n" + auth +
           "Transfer-Encoding: chunked, identity\r\n\r\n" + tail,
       400},
      {"TE on HTTP/1.0",
       "POST /v1/completions HTTP/1.0\r\nHost: t\r\n" + auth +
           "Transfer-Encoding: chunked\r\n\r\n" + tail,
       400},
      {"space before colon",
       "POST /v1/completions HTTP/1.1\r\nHost: t\r\n" + auth +
           "Transfer-Encoding : chunked\r\n\r\n" + tail,
       400},
      {"folded header",
       "POST /v1/completions HTTP/1.1\r\nHost: t\r\n" + auth +
           "X: a\r\n Transfer-Encoding: chunked\r\n\r\n" + tail,
       400},
      {"bad chunk size",
       "POST /v1/completions HTTP/1.1\r\nHost: t\r\n" + auth +
           "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n" + smuggled,
       400},
      // The body of a refused request, sent after its head, is never read as a request.
      {"body after 401",
       "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: " +
           std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled,
       401},
      {"body after 413",
       "POST /v1/completions HTTP/1.1\r\nHost: t\r\n" + auth + "Content-Length: 1000000\r\n\r\n" +
           smuggled,
       413},
      {"body after 404",
       "POST /v1/nothing HTTP/1.1\r\nHost: t\r\n" + auth +
           "Content-Length: " + std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled,
       404},
  };
  for (const Case& k : cases) {
    const auto r = round_trip(port, k.bytes);
    ASSERT_FALSE(r.empty()) << k.name;
    EXPECT_EQ(r[0].status, k.status) << k.name << ": " << r[0].body;
    EXPECT_TRUE(r.back().has_header("Connection: close")) << k.name;
    for (const RawResponse& answer : r) {
      EXPECT_NE(answer.status, 200)
          << k.name << ": the smuggled request was answered: " << answer.body;
    }
  }
  // Honest pipelining still works: two requests in one write, two answers in order.
  const auto r =
      round_trip(port, smuggled + "GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(json::parse(r[0].body)["object"], "list");
  EXPECT_EQ(json::parse(r[1].body)["status"], "ok");
  EXPECT_EQ(metric(metrics_text(s), "headroom_requests_total{finish_reason=\"stop\"}") +
                metric(metrics_text(s), "headroom_requests_total{finish_reason=\"length\"}"),
            0);
  expect_golden_answer(s, {{"Authorization", "Bearer sekret"}});
}

TEST(Hostile, InvalidUtf8AnywhereIs400NeverA500) {
  Running s(small(), hostile_options([](auto& o) { o.api_key = "sekret"; }));
  const int port = s.port();
  const std::string auth = "Authorization: Bearer sekret\r\n";
  const std::vector<std::string> bodies = {
      "{\"prompt\":\"Once \xff upon\",\"max_tokens\":2}",
      "{\"prompt\":\"\xc3\x28\",\"max_tokens\":2}",
      "{\"prompt\":\"x\",\"stop\":\"\xed\xa0\x80\"}",
      "{\"prompt\":\"x\",\"\xfe\":1}",
      "{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
      "{\"enum\":[\"\xff\"]}}}}",
      "{\"prompt\":\"x\\ud800\"}",
  };
  for (const std::string& body : bodies) {
    const auto r = round_trip(port, completion_request(body, auth + "Connection: close\r\n"));
    ASSERT_EQ(r.size(), 1u) << body;
    EXPECT_EQ(r[0].status, 400) << body;
    error_of(r[0]);
  }
  const std::string chat = "{\"messages\":[{\"role\":\"us\xffr\",\"content\":\"hi\"}]}";
  auto r = round_trip(
      port, "POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + auth +
                "Content-Length: " + std::to_string(chat.size()) + "\r\n\r\n" + chat);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, 400);
  error_of(r[0]);
  // In the target, a header value, a header name.
  r = round_trip(port, "GET /v1/\xff\xfe HTTP/1.1\r\nHost: t\r\n" + auth + "\r\n");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, 404);
  error_of(r[0]);
  r = round_trip(port, "GET /v1/models HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer \xff\r\n\r\n");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, 401);
  error_of(r[0]);
  r = round_trip(port, "GET /health HTTP/1.1\r\nHost: t\r\nX-\xff: 1\r\n\r\n");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, 400);
  // The model's own output as lone bytes: a byte token forced by logit_bias, with logprobs.
  int32_t byte_token = -1;
  for (int32_t id = 0; id < 400 && byte_token < 0; ++id) {
    if (s.tokenizer().token_text(id) == "<0x80>") byte_token = id;
  }
  ASSERT_GE(byte_token, 0);
  for (const bool stream : {false, true}) {
    const json body = {{"prompt", "Once"},
                       {"max_tokens", 3},
                       {"logprobs", 0},
                       {"stream", stream},
                       {"logit_bias", {{std::to_string(byte_token), 100}}}};
    r = round_trip(port, completion_request(body.dump(), auth + "Connection: close\r\n"));
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, 200) << r[0].body;
    if (!stream) {
      EXPECT_TRUE(json::parse(r[0].body, nullptr, false).is_object()) << r[0].body;
    } else {
      for (const std::string& event : sse_events(r[0].body)) {
        EXPECT_TRUE(event == "[DONE]" || json::parse(event, nullptr, false).is_object()) << event;
      }
    }
  }
  const std::string text = metrics_text(s);
  EXPECT_EQ(metric(text, "headroom_errors_total{type=\"internal\"}"), 0);
  expect_golden_answer(s, {{"Authorization", "Bearer sekret"}});
}

TEST(Hostile, ClientsThatLeaveAtAnyStageCostNothing) {
  Running s(small(1, 2048), hostile_options());
  const int port = s.port();
  const std::string body = R"({"prompt":"Once upon a time","max_tokens":1500,"temperature":1})";
  const std::string request = completion_request(body);
  // Connect only; part of a head; a head without its body; part of the body; the whole request
  // (then gone before the answer); gone in the middle of a stream.
  const std::vector<std::string> cut_at = {
      "",
      request.substr(0, 20),
      request.substr(0, request.find("\r\n\r\n") + 4),
      request.substr(0, request.size() - 10),
      request,
  };
  for (const std::string& bytes : cut_at) {
    RawClient c(port);
    c.send(bytes);
    c.receive(50ms);
    c.close();
  }
  {
    RawClient c(port);
    c.send(completion_request(
        R"({"prompt":"Once upon a time","max_tokens":1500,"temperature":1,"stream":true})"));
    while (c.received().find("data: ") == std::string::npos && c.receive(1000ms)) {
    }
    c.close();
  }
  // Both requests that started were cancelled and freed their cache.
  std::string text;
  for (int i = 0; i < 400; ++i) {
    text = metrics_text(s);
    if (metric(text, "headroom_requests_total{finish_reason=\"cancelled\"}") == 2) break;
    std::this_thread::sleep_for(25ms);
  }
  EXPECT_EQ(metric(text, "headroom_requests_total{finish_reason=\"cancelled\"}"), 2);
  EXPECT_EQ(metric(text, "headroom_errors_total{type=\"client_disconnected\"}"), 2);
  EXPECT_EQ(metric(text, "headroom_requests_active"), 0);
  EXPECT_EQ(s.engine().cache().bytes_in_use(), 0u);
  expect_golden_answer(s);
}

}  // namespace

// Streaming chat completions against an OpenAI-compatible endpoint, timed per token (SSE chunk).
#include "doctor/endpoint_probe.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

namespace doctor {
namespace {

using Clock = std::chrono::steady_clock;

struct Target {
  std::string origin;  // scheme://host:port
  std::string path;    // …/v1/chat/completions
  std::string models;  // …/v1/models
};

std::optional<Target> parse_url(std::string url) {
  const auto scheme = url.find("://");
  if (scheme == std::string::npos || url.substr(0, scheme) != "http") return std::nullopt;
  const auto slash = url.find('/', scheme + 3);
  Target t{url.substr(0, slash), slash == std::string::npos ? "" : url.substr(slash), ""};
  while (!t.path.empty() && t.path.back() == '/') t.path.pop_back();
  if (t.path.size() < 3 || t.path.substr(t.path.size() - 3) != "/v1") t.path += "/v1";
  t.models = t.path + "/models";
  t.path += "/chat/completions";
  return t;
}

struct Stream {
  bool ok = false;
  std::string error;
  int tokens = 0;
  Clock::time_point start, first, last;
};

Stream stream_once(const Target& target, const std::string& model, const EndpointOptions& o) {
  Stream s;
  httplib::Client client(target.origin);
  client.set_connection_timeout(std::chrono::seconds(3));
  client.set_read_timeout(std::chrono::milliseconds(static_cast<int64_t>(o.timeout_seconds * 1e3)));
  nlohmann::json body = {
      {"model", model},
      {"messages", {{{"role", "user"}, {"content", "Tell me a short story about a cat."}}}},
      {"max_tokens", o.max_tokens},
      {"temperature", 0},
      {"stream", true}};
  httplib::Request req;
  req.method = "POST";
  req.path = target.path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  std::string pending;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    pending.append(data, n);
    for (size_t eol; (eol = pending.find('\n')) != std::string::npos; pending.erase(0, eol + 1)) {
      const std::string line = pending.substr(0, eol);
      if (line.rfind("data:", 0) != 0) continue;
      const std::string payload = line.substr(
          line.find_first_not_of(' ', 5) == std::string::npos ? 5 : line.find_first_not_of(' ', 5));
      if (payload.rfind("[DONE]", 0) == 0) continue;
      auto chunk = nlohmann::json::parse(payload, nullptr, false);
      if (chunk.is_discarded() || !chunk.contains("choices") || chunk["choices"].empty()) continue;
      const auto& choice = chunk["choices"][0];
      const bool text = (choice.contains("delta") && choice["delta"].contains("content") &&
                         choice["delta"]["content"].is_string() &&
                         !choice["delta"]["content"].get<std::string>().empty()) ||
                        (choice.contains("text") && choice["text"].is_string() &&
                         !choice["text"].get<std::string>().empty());
      if (!text) continue;
      const auto now = Clock::now();
      if (s.tokens++ == 0) s.first = now;
      s.last = now;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  s.start = Clock::now();
  if (!client.send(req, res, err)) {
    s.error = fmt::format("{} ({})", httplib::to_string(err), target.origin);
    return s;
  }
  if (res.status != 200) {
    s.error = fmt::format("HTTP {} from {}", res.status, target.path);
    return s;
  }
  if (s.tokens == 0) {
    s.error = "the stream carried no tokens (is it an OpenAI-compatible streaming endpoint?)";
    return s;
  }
  s.ok = true;
  return s;
}

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The first model the server lists, or "default" (many servers ignore the name).
std::string server_model(const Target& target) {
  httplib::Client client(target.origin);
  client.set_connection_timeout(std::chrono::seconds(3));
  client.set_read_timeout(std::chrono::seconds(10));
  auto res = client.Get(target.models);
  if (!res || res->status != 200) return "default";
  auto doc = nlohmann::json::parse(res->body, nullptr, false);
  if (doc.is_discarded() || !doc.contains("data") || !doc["data"].is_array() ||
      doc["data"].empty() || !doc["data"][0].contains("id") || !doc["data"][0]["id"].is_string()) {
    return "default";
  }
  return doc["data"][0]["id"].get<std::string>();
}

}  // namespace

Probe<EndpointFacts> probe_endpoint(const EndpointOptions& o) {
  using P = Probe<EndpointFacts>;
  const auto target = parse_url(o.url);
  if (!target)
    return P::skipped(
        fmt::format("--endpoint '{}': give an http:// URL, e.g. http://127.0.0.1:8080", o.url));
  const std::string model = server_model(*target);
  // An untimed first request: a server may load its model or warm its caches on it.
  const Stream warm_up = stream_once(*target, model, o);
  if (!warm_up.ok) {
    return P::skipped(
        fmt::format("could not complete one request at {}: {}", o.url, warm_up.error));
  }
  const Stream single = stream_once(*target, model, o);
  if (!single.ok) {
    return P::skipped(fmt::format("could not complete one request at {}: {}", o.url, single.error));
  }
  EndpointFacts f;
  f.url = o.url;
  f.single_ttft = seconds(single.start, single.first);
  // Delivered rates (request sent → last token) for both, so they compare like with like.
  f.single_tps = single.tokens / std::max(1e-9, seconds(single.start, single.last));
  f.n_concurrent = o.n_concurrent;
  std::vector<Stream> streams(o.n_concurrent);
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int i = 0; i < o.n_concurrent; ++i)
    threads.emplace_back([&, i] { streams[i] = stream_once(*target, model, o); });
  for (auto& t : threads) t.join();
  std::vector<double> ttfts;
  int tokens = 0;
  Clock::time_point end = start;
  for (const auto& s : streams) {
    if (!s.ok) {
      if (f.errors++ == 0) f.first_error = s.error;
      continue;
    }
    ttfts.push_back(seconds(s.start, s.first));
    tokens += s.tokens;
    end = std::max(end, s.last);
  }
  if (!ttfts.empty()) {
    std::sort(ttfts.begin(), ttfts.end());
    f.concurrent_ttft_p50 = ttfts[ttfts.size() / 2];
    f.concurrent_tps = tokens / std::max(1e-9, seconds(start, end));
  }
  return P{f, ""};
}

}  // namespace doctor

// The load driver: one HTTP client per worker, streamed requests timed chunk by chunk.
#include "load/runner.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <regex>
#include <thread>

#include "load/sse.h"

namespace load {

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::microseconds micros(double seconds) {
  return std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

httplib::Headers request_headers(const std::string& api_key) {
  httplib::Headers headers = {{"Accept", "text/event-stream"}};
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  return headers;
}

void configure(httplib::Client& client, double timeout) {
  client.set_connection_timeout(micros(std::min(timeout, 10.0)));
  client.set_read_timeout(micros(timeout));
  client.set_write_timeout(micros(timeout));
  client.set_keep_alive(true);
}

// The outcome of one HTTP attempt.
struct Attempt {
  std::vector<double> token_times;
  int64_t completion_tokens = -1, prompt_tokens = -1, cached_tokens = -1;  // from usage
  std::string error, detail;
};

bool retryable(const Attempt& a) {
  return a.token_times.empty() &&
         (a.error == "connect" || a.error == "timeout" || a.error == "http_429" ||
          (a.error.rfind("http_5", 0) == 0));
}

std::string first_line(std::string text, size_t limit = 200) {
  text = text.substr(0, text.find_first_of("\r\n"));
  if (text.size() > limit) text = text.substr(0, limit) + "…";
  return text;
}

class Driver {
 public:
  Driver(const LoadOptions& options, const std::string& model)
      : options_(options), schedule_(options.mix), start_(Clock::now()) {
    for (const auto& item : options.mix.items)
      bodies_.push_back(request_body(item, model, options.max_tokens).dump());
    path_ = options.endpoint.api_prefix + "/chat/completions";
  }

  double now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  std::vector<RequestRecord> run() {
    std::vector<std::vector<RequestRecord>> per_worker(options_.concurrency);
    std::vector<std::thread> workers;
    for (int w = 0; w < options_.concurrency; ++w)
      workers.emplace_back([this, &per_worker, w] { work(per_worker[w]); });
    for (auto& t : workers) t.join();
    std::vector<RequestRecord> records;
    for (auto& list : per_worker) {
      for (auto& r : list) records.push_back(std::move(r));
    }
    std::sort(records.begin(), records.end(),
              [](const auto& a, const auto& b) { return a.start < b.start; });
    return records;
  }

 private:
  // Whether a worker sends another request at time t (and counts it when in request mode).
  bool send_another(double t) {
    if (t < options_.warmup) return true;
    if (options_.requests > 0) return measured_issued_.fetch_add(1) < options_.requests;
    return t < options_.warmup + options_.duration;
  }

  void work(std::vector<RequestRecord>& records) {
    httplib::Client client(options_.endpoint.origin);
    configure(client, options_.timeout);
    const httplib::Headers headers = request_headers(options_.api_key);
    for (double t = now(); send_another(t); t = now()) {
      const size_t index = schedule_.next();
      RequestRecord r;
      r.item = options_.mix.items[index].name;
      r.start = t;
      Attempt attempt;
      for (int a = 0;; ++a) {
        attempt = send(client, headers, bodies_[index]);
        if (!retryable(attempt) || a >= options_.retries) break;
        r.retried.push_back(attempt.error);
        std::this_thread::sleep_for(micros(0.1 * (1 << std::min(a, 6))));
      }
      r.end = now();
      r.error = attempt.error;
      r.error_detail = attempt.detail;
      r.token_times = std::move(attempt.token_times);
      if (!r.token_times.empty()) r.ttft = r.token_times.front() - r.start;
      r.usage_reported = attempt.completion_tokens >= 0;
      r.completion_tokens = r.usage_reported ? attempt.completion_tokens
                                             : static_cast<int64_t>(r.token_times.size());
      r.prompt_tokens = attempt.prompt_tokens;
      r.cached_tokens = attempt.cached_tokens;
      records.push_back(std::move(r));
      // A refused connection fails at once: pause so a dead server is not hammered in a loop.
      if (attempt.error == "connect") std::this_thread::sleep_for(micros(0.1));
    }
  }

  Attempt send(httplib::Client& client, const httplib::Headers& headers, const std::string& body) {
    Attempt a;
    int status = 0;
    std::string error_body;
    bool done = false;
    double last_byte = now();
    SseParser parser;
    httplib::Request req;
    req.method = "POST";
    req.path = path_;
    req.headers = headers;
    req.body = body;
    req.set_header("Content-Type", "application/json");
    req.response_handler = [&](const httplib::Response& res) {
      status = res.status;
      return true;
    };
    req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
      const double t = now();
      last_byte = t;
      if (status != 200) {
        if (error_body.size() < 4096) error_body.append(data, size);
        return true;
      }
      parser.feed(std::string_view(data, size), [&](std::string_view event_data) {
        if (done || !a.error.empty()) return;
        const StreamEvent e = interpret_event(event_data);
        if (e.completion_tokens >= 0) a.completion_tokens = e.completion_tokens;
        if (e.prompt_tokens >= 0) a.prompt_tokens = e.prompt_tokens;
        if (e.cached_tokens >= 0) a.cached_tokens = e.cached_tokens;
        switch (e.kind) {
          case StreamEvent::Kind::kTokens: a.token_times.push_back(t); break;
          case StreamEvent::Kind::kEmpty: break;
          case StreamEvent::Kind::kDone: done = true; break;
          case StreamEvent::Kind::kError:
            a.error = "stream_error";
            a.detail = first_line(e.detail);
            break;
          case StreamEvent::Kind::kMalformed:
            a.error = "malformed_stream";
            a.detail = e.detail;
            break;
        }
      });
      return a.error.empty();  // stop reading a failed stream
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    const bool sent = client.send(req, res, error);
    if (!a.error.empty()) return a;
    if (!sent) {
      switch (error) {
        case httplib::Error::Connection:
        case httplib::Error::ConnectionTimeout:
        case httplib::Error::BindIPAddress:
        case httplib::Error::SSLConnection:
        case httplib::Error::SSLServerVerification:
        case httplib::Error::SSLLoadingCerts:
          a.error = "connect";
          break;
        case httplib::Error::Read:
          a.error = now() - last_byte >= 0.95 * options_.timeout ? "timeout" : "disconnect";
          break;
        default:
          a.error = "disconnect";
          break;
      }
      a.detail = httplib::to_string(error);
      return a;
    }
    if (status != 200) {
      a.error = fmt::format("http_{}", status);
      a.detail = first_line(error_body);
    } else if (!done) {
      a.error = "malformed_stream";
      a.detail = parser.has_partial_event() ? "the stream ended inside an event"
                                            : "the stream ended without data: [DONE]";
    }
    return a;
  }

  const LoadOptions& options_;
  MixSchedule schedule_;
  std::vector<std::string> bodies_;
  std::string path_;
  std::atomic<int64_t> measured_issued_{0};
  Clock::time_point start_;
};

}  // namespace

util::Result<Endpoint> parse_endpoint(const std::string& url) {
  static const std::regex pattern(R"(^(https?://[^/?#\s]+)(/[^?#\s]*)?$)");
  std::smatch m;
  if (!std::regex_match(url, m, pattern))
    return util::errorf("--endpoint {}: expected http(s)://HOST[:PORT][/PATH], e.g. "
                        "http://127.0.0.1:8080",
                        url);
  Endpoint e;
  e.origin = m[1].str();
  std::string prefix = m[2].str();
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (prefix.size() < 3 || prefix.compare(prefix.size() - 3, 3, "/v1") != 0) prefix += "/v1";
  e.api_prefix = prefix;
  return e;
}

util::Result<std::optional<std::string>> first_model(const Endpoint& endpoint,
                                                     const std::string& api_key, double timeout) {
  httplib::Client client(endpoint.origin);
  configure(client, std::min(timeout, 10.0));
  const std::string path = endpoint.api_prefix + "/models";
  auto res = client.Get(path.c_str(), request_headers(api_key));
  if (!res)
    return util::errorf("cannot reach {}: {}; is the server running?", endpoint.origin,
                        httplib::to_string(res.error()));
  const auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (res->status != 200 || j.is_discarded() || !j.contains("data") || !j["data"].is_array() ||
      j["data"].empty() || !j["data"][0].is_object() || !j["data"][0].contains("id") ||
      !j["data"][0]["id"].is_string())
    return std::optional<std::string>();
  return std::optional<std::string>(j["data"][0]["id"].get<std::string>());
}

util::Result<LoadRun> run_load(const LoadOptions& options) {
  if (options.concurrency < 1) return util::Error("--concurrency must be ≥ 1");
  if ((options.duration > 0) == (options.requests > 0))
    return util::Error("give either --duration SECONDS or --requests N (one, > 0)");
  if (options.warmup < 0 || options.timeout <= 0 || options.retries < 0 || options.max_tokens < 1)
    return util::Error("--warmup must be ≥ 0, --timeout > 0, --retries ≥ 0, --max-tokens ≥ 1");
  LoadRun run;
  run.model = options.model;
  Driver driver(options, run.model);
  MetricsSampler sampler(options.endpoint.origin, options.api_key);
  sampler.start();
  run.records = driver.run();
  run.server = sampler.stop();
  run.window_start = options.warmup;
  if (options.duration > 0) {
    run.window_end = options.warmup + options.duration;
  } else {
    run.window_end = options.warmup;
    for (const auto& r : run.records) {
      if (r.start >= options.warmup) run.window_end = std::max(run.window_end, r.end);
    }
  }
  return run;
}

}  // namespace load

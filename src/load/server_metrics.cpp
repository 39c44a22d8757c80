// Sampling and reading a headroom server's /metrics during a load run.
#include "load/server_metrics.h"

#include <httplib.h>

#include <fmt/format.h>

namespace load {

std::map<std::string, double> parse_prometheus(std::string_view text) {
  std::map<std::string, double> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line.front() == '#') continue;
    // The value follows the last space (label values may hold spaces inside their quotes).
    const size_t space = line.rfind(' ');
    if (space == std::string_view::npos) continue;
    const std::string value(line.substr(space + 1));
    char* parsed_end = nullptr;
    const double v = std::strtod(value.c_str(), &parsed_end);
    if (parsed_end == value.c_str()) continue;
    out[std::string(line.substr(0, space))] = v;
  }
  return out;
}

ServerMetrics summarize_metrics(const std::vector<std::map<std::string, double>>& samples) {
  ServerMetrics m;
  m.samples = static_cast<int>(samples.size());
  auto value = [](const std::map<std::string, double>& s, const std::string& key, double& out) {
    auto it = s.find(key);
    if (it == s.end()) return false;
    out = it->second;
    return true;
  };
  for (const auto& s : samples) {
    for (const char* group : {"full", "sliding"}) {
      const std::string prefix =
          fmt::format("headroom_kv_pool_blocks{{group=\"{}\",state=\"", group);
      double total = 0, used = 0, cached = 0;
      if (!value(s, prefix + "total\"}", total)) continue;
      KvGroupUse& use = m.kv[group];
      use.blocks = total;
      if (value(s, prefix + "used\"}", used)) use.used_peak = std::max(use.used_peak, used);
      if (value(s, prefix + "cached\"}", cached)) use.cached_end = cached;
    }
  }
  double first = 0, last = 0;
  if (!samples.empty() && value(samples.front(), "headroom_preemptions_total", first) &&
      value(samples.back(), "headroom_preemptions_total", last)) {
    m.preemptions = last - first;
  }
  if (!samples.empty()) value(samples.back(), "headroom_prefix_cache_hit_rate", m.prefix_hit_rate);
  m.available = !m.kv.empty();
  if (!m.available) m.unavailable = "the server's /metrics has no headroom KV pool series";
  return m;
}

MetricsSampler::MetricsSampler(std::string origin, std::string api_key, double period)
    : origin_(std::move(origin)), api_key_(std::move(api_key)), period_(period) {}

MetricsSampler::~MetricsSampler() {
  if (thread_.joinable()) stop();
}

void MetricsSampler::scrape() {
  httplib::Client client(origin_);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  httplib::Headers headers;
  if (!api_key_.empty()) headers.emplace("Authorization", "Bearer " + api_key_);
  auto res = client.Get("/metrics", headers);
  std::lock_guard lock(mutex_);
  if (!res || res->status != 200) {
    if (error_.empty()) {
      error_ = res ? fmt::format("GET /metrics answered {}", res->status)
                   : fmt::format("GET /metrics failed: {}", httplib::to_string(res.error()));
    }
    return;
  }
  samples_.push_back(parse_prometheus(res->body));
}

void MetricsSampler::start() {
  scrape();  // the baseline, before any request
  thread_ = std::thread([this] {
    std::unique_lock lock(mutex_);
    while (
        !wake_.wait_for(lock, std::chrono::duration<double>(period_), [&] { return stopping_; })) {
      lock.unlock();
      scrape();
      lock.lock();
    }
  });
}

ServerMetrics MetricsSampler::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  scrape();  // the state after the last request
  ServerMetrics m = summarize_metrics(samples_);
  if (!m.available && !error_.empty()) m.unavailable = error_;
  return m;
}

}  // namespace load

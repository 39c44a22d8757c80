// What a headroom server's Prometheus /metrics says during a load run: its KV pool (blocks per
// group, the most in use at once, cached at the end), preemptions and prefix-cache hit rate. Other
// servers have no such series, and the report says so.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace load {

// One series value per "name{labels}" exactly as the text writes it; comments skipped.
std::map<std::string, double> parse_prometheus(std::string_view text);

struct KvGroupUse {
  double blocks = 0;      // the pool
  double used_peak = 0;   // most blocks held by running sequences in any sample
  double cached_end = 0;  // blocks holding a reusable prefix at the end
};

struct ServerMetrics {
  bool available = false;
  std::string unavailable;               // why not, when not
  std::map<std::string, KvGroupUse> kv;  // by group: "full", "sliding"
  double preemptions = 0;                // during the run
  double prefix_hit_rate = -1;           // at the end, since the server started (-1: not reported)
  int samples = 0;
};

// Folds samples of /metrics, taken in order, into the figures above.
ServerMetrics summarize_metrics(const std::vector<std::map<std::string, double>>& samples);

// Scrapes GET {origin}/metrics every `period` seconds from start() to stop().
class MetricsSampler {
 public:
  MetricsSampler(std::string origin, std::string api_key, double period = 0.5);
  ~MetricsSampler();
  void start();
  ServerMetrics stop();

 private:
  void scrape();

  std::string origin_;
  std::string api_key_;
  double period_;
  std::string error_;  // the first failure
  std::vector<std::map<std::string, double>> samples_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace load

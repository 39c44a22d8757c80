// telemetry::Registry — counters, gauges and fixed-bucket histograms with labels, exposed in the
// Prometheus text format (version 0.0.4) for /metrics. Safe to update from any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace telemetry {

// Label names and values in the order they are written, e.g. {{"device", "cpu"}}.
using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void inc(double amount = 1.0);  // amount must be ≥ 0: a counter never goes down
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double value) { value_.store(value, std::memory_order_relaxed); }
  void add(double amount) { value_.fetch_add(amount, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;  // the finite bounds; +Inf is implied
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> upper_bounds_;
  mutable std::mutex mutex_;      // one observation updates bucket, sum and count together
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), the last one is +Inf
  double sum_ = 0;
};

// Bucket bounds for latencies in seconds: 1 ms … 60 s.
std::vector<double> latency_buckets();

class Registry {
 public:
  // Each returns the series of family `name` with these labels, creating it on first use. A
  // family keeps the type and help of its first registration. References stay valid for the
  // registry's lifetime.
  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help,
                       const std::vector<double>& upper_bounds, const Labels& labels = {});

  // Drops the series of family `name` with these labels, if there is one: a series whose labels
  // describe a state that has passed (an info metric's). References to it become invalid.
  void remove(const std::string& name, const Labels& labels);

  // Holds scrapes off while the returned lock lives: updates made under it are exposed together
  // or not at all, so series that must agree (one value under two names, a used/total pair) never
  // tear in one scrape. Registration under it is fine; expose() under it deadlocks.
  [[nodiscard]] std::unique_lock<std::mutex> batch() { return std::unique_lock(batch_mutex_); }

  // Every family in name order, series in creation order, in the Prometheus text format.
  std::string expose() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Series {
    Labels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  struct Family {
    Type type;
    std::string help;
    std::vector<std::unique_ptr<Series>> series;
  };
  Series& series(const std::string& name, const std::string& help, Type type, const Labels& labels);

  mutable std::mutex batch_mutex_;  // taken before mutex_, never after
  mutable std::mutex mutex_;
  std::map<std::string, Family> families_;
};

}  // namespace telemetry

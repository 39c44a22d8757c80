// The Prometheus registry: series storage and the text exposition format.
#include "telemetry/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace telemetry {

void Counter::inc(double amount) {
  if (amount > 0) value_.fetch_add(amount, std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {
  std::sort(upper_bounds_.begin(), upper_bounds_.end());
}

void Histogram::observe(double value) {
  // Prometheus buckets are "less than or equal": a value on a bound counts in that bucket.
  const size_t bucket =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  std::lock_guard lock(mutex_);
  ++counts_[bucket];
  sum_ += value;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.upper_bounds = upper_bounds_;
  std::lock_guard lock(mutex_);
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = sum_;
  return s;
}

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

Registry::Series& Registry::series(const std::string& name, const std::string& help, Type type,
                                   const Labels& labels) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = families_.try_emplace(name, Family{type, help, {}});
  Family& family = it->second;
  // One name, one type: a mismatch is a programming error, not bad input.
  if (family.type != type) throw std::logic_error("metric " + name + " registered with two types");
  for (auto& s : family.series) {
    if (s->labels == labels) return *s;
  }
  family.series.push_back(std::make_unique<Series>());
  family.series.back()->labels = labels;
  return *family.series.back();
}

void Registry::remove(const std::string& name, const Labels& labels) {
  std::lock_guard lock(mutex_);
  const auto it = families_.find(name);
  if (it == families_.end()) return;
  std::erase_if(it->second.series, [&](const auto& s) { return s->labels == labels; });
}

Counter& Registry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  Series& s = series(name, help, Type::kCounter, labels);
  std::lock_guard lock(mutex_);
  if (!s.counter) s.counter = std::make_unique<Counter>();
  return *s.counter;
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  Series& s = series(name, help, Type::kGauge, labels);
  std::lock_guard lock(mutex_);
  if (!s.gauge) s.gauge = std::make_unique<Gauge>();
  return *s.gauge;
}

Histogram& Registry::histogram(const std::string& name, const std::string& help,
                               const std::vector<double>& upper_bounds, const Labels& labels) {
  Series& s = series(name, help, Type::kHistogram, labels);
  std::lock_guard lock(mutex_);
  if (!s.histogram) s.histogram = std::make_unique<Histogram>(upper_bounds);
  return *s.histogram;
}

namespace {

// Label values escape backslash, double quote and newline; help text escapes backslash and newline.
std::string escape(const std::string& text, bool quote) {
  std::string out;
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && quote)
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

std::string label_set(const Labels& labels,
                      const std::pair<std::string, std::string>* extra = nullptr) {
  if (labels.empty() && !extra) return "";
  std::string out = "{";
  auto add = [&](const std::pair<std::string, std::string>& l) {
    if (out.size() > 1) out += ',';
    out += fmt::format("{}=\"{}\"", l.first, escape(l.second, true));
  };
  for (const auto& l : labels) add(l);
  if (extra) add(*extra);
  return out + "}";
}

}  // namespace

std::string Registry::expose() const {
  std::lock_guard batch(batch_mutex_);
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [name, family] : families_) {
    static constexpr const char* kTypeNames[] = {"counter", "gauge", "histogram"};
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, escape(family.help, false), name,
                       kTypeNames[static_cast<int>(family.type)]);
    for (const auto& s : family.series) {
      if (s->counter)
        out += fmt::format("{}{} {}\n", name, label_set(s->labels), number(s->counter->value()));
      if (s->gauge)
        out += fmt::format("{}{} {}\n", name, label_set(s->labels), number(s->gauge->value()));
      if (s->histogram) {
        const Histogram::Snapshot snap = s->histogram->snapshot();
        for (size_t i = 0; i <= snap.upper_bounds.size(); ++i) {
          const std::pair<std::string, std::string> le{
              "le", i < snap.upper_bounds.size() ? number(snap.upper_bounds[i]) : "+Inf"};
          out +=
              fmt::format("{}_bucket{} {}\n", name, label_set(s->labels, &le), snap.cumulative[i]);
        }
        out += fmt::format("{}_sum{} {}\n", name, label_set(s->labels), number(snap.sum));
        out += fmt::format("{}_count{} {}\n", name, label_set(s->labels), snap.count);
      }
    }
  }
  return out;
}

}  // namespace telemetry

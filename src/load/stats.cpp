// Percentiles, the measurement window and the time series of a load run.
#include "load/stats.h"

#include <algorithm>
#include <cmath>

namespace load {

double percentile_sorted(const std::vector<double>& sorted, double p) {
  const double n = static_cast<double>(sorted.size());
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * n - 1e-9));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

Distribution distribution(std::vector<double> samples) {
  Distribution d;
  d.count = samples.size();
  if (samples.empty()) return d;
  std::sort(samples.begin(), samples.end());
  double sum = 0;
  for (double s : samples) sum += s;
  d.mean = sum / static_cast<double>(samples.size());
  d.min = samples.front();
  d.max = samples.back();
  d.p50 = percentile_sorted(samples, 50);
  d.p95 = percentile_sorted(samples, 95);
  d.p99 = percentile_sorted(samples, 99);
  return d;
}

namespace {

// Each chunk's share of its request's tokens (usage may count more tokens than chunks).
double chunk_weight(const RequestRecord& r) {
  if (r.token_times.empty()) return 0;
  return static_cast<double>(r.completion_tokens) / static_cast<double>(r.token_times.size());
}

}  // namespace

Summary summarize(const std::vector<RequestRecord>& records, double window_start,
                  double window_end, double bucket_seconds) {
  Summary s;
  s.window_start = window_start;
  s.window_end = window_end;
  for (const auto& r : records) s.run_end = std::max(s.run_end, r.end);
  std::vector<double> ttft, itl, e2e, stream_rates, ttft_cached, ttft_uncached;
  for (const auto& r : records) {
    const double weight = chunk_weight(r);
    for (double t : r.token_times) {
      if (t >= window_start && t < window_end) s.tokens_in_window += weight;
    }
    if (r.start < window_start || r.start >= window_end) {
      if (r.start < window_start) ++s.warmup_requests;
      continue;
    }
    ++s.measured_requests;
    for (const auto& kind : r.retried) ++s.retries[kind];
    if (!r.ok()) {
      ++s.failed;
      ++s.errors[r.error];
      continue;
    }
    ++s.succeeded;
    s.completion_tokens += r.completion_tokens;
    if (r.prompt_tokens > 0) s.prompt_tokens += r.prompt_tokens;
    if (r.cached_tokens > 0) s.cached_tokens += r.cached_tokens;
    e2e.push_back(r.end - r.start);
    if (r.ttft >= 0) {
      ttft.push_back(r.ttft);
      if (r.cached_tokens >= 0)
        (r.cached_tokens > 0 ? ttft_cached : ttft_uncached).push_back(r.ttft);
    }
    for (size_t i = 1; i < r.token_times.size(); ++i)
      itl.push_back(r.token_times[i] - r.token_times[i - 1]);
    if (r.token_times.size() >= 2 && r.token_times.back() > r.token_times.front()) {
      stream_rates.push_back((static_cast<double>(r.completion_tokens) - weight) /
                             (r.token_times.back() - r.token_times.front()));
    }
  }
  s.ttft = distribution(std::move(ttft));
  s.ttft_cached = distribution(std::move(ttft_cached));
  s.ttft_uncached = distribution(std::move(ttft_uncached));
  s.itl = distribution(std::move(itl));
  s.e2e = distribution(std::move(e2e));
  s.stream_tokens_per_second = distribution(std::move(stream_rates));
  const double window = window_end - window_start;
  s.total_tokens_per_second = window > 0 ? s.tokens_in_window / window : 0;

  const double span = std::max(s.run_end, window_end);
  if (bucket_seconds <= 0) bucket_seconds = std::max(1.0, std::ceil(span / 120.0));
  s.bucket_seconds = bucket_seconds;
  const auto n_buckets = static_cast<size_t>(std::max(1.0, std::ceil(span / bucket_seconds)));
  s.series.resize(n_buckets);
  for (size_t i = 0; i < n_buckets; ++i) {
    s.series[i].start = static_cast<double>(i) * bucket_seconds;
    s.series[i].end = static_cast<double>(i + 1) * bucket_seconds;
  }
  auto bucket_of = [&](double t) {
    return std::min(n_buckets - 1, static_cast<size_t>(std::max(0.0, t) / bucket_seconds));
  };
  for (const auto& r : records) {
    const double weight = chunk_weight(r);
    for (double t : r.token_times) s.series[bucket_of(t)].tokens += weight;
    ++(r.ok() ? s.series[bucket_of(r.end)].completed : s.series[bucket_of(r.end)].errors);
  }
  for (auto& b : s.series) b.tokens_per_second = b.tokens / bucket_seconds;
  return s;
}

}  // namespace load

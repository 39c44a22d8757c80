// Percentiles by nearest rank, distributions and the measurement window, checked against
// hand-computed values and a brute-force reading of the definition.
#include "load/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace {

std::vector<double> one_to(int n) {
  std::vector<double> v;
  for (int i = 1; i <= n; ++i) v.push_back(i);
  return v;
}

TEST(Percentile, NearestRankOnHandComputedExamples) {
  const auto ten = one_to(10);
  EXPECT_EQ(load::percentile_sorted(ten, 50), 5);   // rank ceil(5) = 5
  EXPECT_EQ(load::percentile_sorted(ten, 51), 6);   // rank ceil(5.1) = 6
  EXPECT_EQ(load::percentile_sorted(ten, 95), 10);  // rank ceil(9.5) = 10
  EXPECT_EQ(load::percentile_sorted(ten, 100), 10);
  EXPECT_EQ(load::percentile_sorted(ten, 1), 1);  // rank ceil(0.1) = 1
  // 0.7 * 10 is 7.000000000000001 in doubles: rank 7, not 8.
  EXPECT_EQ(load::percentile_sorted(ten, 70), 7);
  const auto hundred = one_to(100);
  EXPECT_EQ(load::percentile_sorted(hundred, 7), 7);  // 0.07 * 100 is not exactly 7 either
  EXPECT_EQ(load::percentile_sorted(hundred, 99), 99);
  EXPECT_EQ(load::percentile_sorted(hundred, 99.5), 100);
  const std::vector<double> three = {10, 20, 30};
  EXPECT_EQ(load::percentile_sorted(three, 33), 10);  // rank ceil(0.99) = 1
  EXPECT_EQ(load::percentile_sorted(three, 34), 20);  // rank ceil(1.02) = 2
  EXPECT_EQ(load::percentile_sorted(three, 50), 20);
  EXPECT_EQ(load::percentile_sorted(three, 67), 30);
  EXPECT_EQ(load::percentile_sorted({42}, 1), 42);
  EXPECT_EQ(load::percentile_sorted({42}, 99), 42);
  const std::vector<double> ties = {1, 2, 2, 2, 9};
  EXPECT_EQ(load::percentile_sorted(ties, 80), 2);  // 4 of 5 samples are ≤ 2
  EXPECT_EQ(load::percentile_sorted(ties, 81), 9);
}

// The definition read literally: the smallest sample with at least p% of the samples at or below
// it, counted in integers (count * 100 >= p * n), so no rounding is shared with the code.
TEST(Percentile, MatchesTheDefinitionOnRandomSamples) {
  std::mt19937 rng(7);
  for (int n = 1; n <= 60; ++n) {
    std::vector<double> v(n);
    for (auto& x : v) x = static_cast<double>(rng() % 20);  // many ties
    std::sort(v.begin(), v.end());
    for (int p = 1; p <= 100; ++p) {
      double expected = v.back();
      for (double candidate : v) {
        const auto at_or_below =
            std::count_if(v.begin(), v.end(), [&](double x) { return x <= candidate; });
        if (at_or_below * 100 >= static_cast<long>(p) * n) {
          expected = candidate;
          break;
        }
      }
      ASSERT_EQ(load::percentile_sorted(v, p), expected) << "n=" << n << " p=" << p;
    }
  }
}

TEST(Distribution, SortsAndSummarizes) {
  const auto d = load::distribution({4, 1, 3, 2});
  EXPECT_EQ(d.count, 4u);
  EXPECT_DOUBLE_EQ(d.mean, 2.5);
  EXPECT_EQ(d.min, 1);
  EXPECT_EQ(d.max, 4);
  EXPECT_EQ(d.p50, 2);  // rank 2 of 4
  EXPECT_EQ(d.p95, 4);
  EXPECT_EQ(d.p99, 4);
  std::vector<double> twenty = one_to(20);
  std::reverse(twenty.begin(), twenty.end());
  const auto t = load::distribution(twenty);
  EXPECT_EQ(t.p50, 10);
  EXPECT_EQ(t.p95, 19);  // rank 19 of 20
  EXPECT_EQ(t.p99, 20);
  EXPECT_DOUBLE_EQ(t.mean, 10.5);
}

TEST(Distribution, EmptyIsAllZero) {
  const auto d = load::distribution({});
  EXPECT_EQ(d.count, 0u);
  EXPECT_EQ(d.mean, 0);
  EXPECT_EQ(d.min, 0);
  EXPECT_EQ(d.max, 0);
  EXPECT_EQ(d.p50, 0);
  EXPECT_EQ(d.p99, 0);
}

load::RequestRecord record(const char* item, double start, double end, std::vector<double> tokens,
                           int64_t completion_tokens, std::string error = "") {
  load::RequestRecord r;
  r.item = item;
  r.start = start;
  r.end = end;
  r.token_times = std::move(tokens);
  if (!r.token_times.empty()) r.ttft = r.token_times.front() - start;
  r.completion_tokens = completion_tokens;
  r.error = std::move(error);
  return r;
}

TEST(Summarize, WindowExcludesWarmupAndCountsTokensByArrival) {
  std::vector<load::RequestRecord> records = {
      // Starts in the warm-up: not measured, but its tokens after t=1 count toward throughput.
      record("a", 0.5, 1.5, {0.8, 1.2, 1.4}, 3),
      // Measured; usage says 4 tokens over 2 chunks, so each chunk weighs 2.
      record("b", 1.0, 2.0, {1.5, 1.9}, 4),
      // Measured failure.
      record("c", 1.2, 1.3, {}, 0, "http_500"),
      // Starts after the window: not measured.
      record("d", 3.5, 3.8, {3.6}, 1),
  };
  records[2].retried = {"http_500"};
  const auto s = load::summarize(records, 1.0, 3.0, 1.0);
  EXPECT_EQ(s.warmup_requests, 1);
  EXPECT_EQ(s.measured_requests, 2);
  EXPECT_EQ(s.succeeded, 1);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.errors.at("http_500"), 1);
  EXPECT_EQ(s.retries.at("http_500"), 1);
  // Tokens in [1, 3): 1.2 and 1.4 from a (weight 1), 1.5 and 1.9 from b (weight 2).
  EXPECT_DOUBLE_EQ(s.tokens_in_window, 6);
  EXPECT_DOUBLE_EQ(s.total_tokens_per_second, 3);
  EXPECT_EQ(s.completion_tokens, 4);
  EXPECT_EQ(s.ttft.count, 1u);
  EXPECT_DOUBLE_EQ(s.ttft.p50, 0.5);
  EXPECT_DOUBLE_EQ(s.e2e.p50, 1.0);
  ASSERT_EQ(s.itl.count, 1u);
  EXPECT_DOUBLE_EQ(s.itl.p50, 0.4);
  // Per stream: the tokens after the first chunk over the time from first to last chunk.
  EXPECT_DOUBLE_EQ(s.stream_tokens_per_second.p50, 2 / 0.4);
  // Series: the whole run in 1 s buckets, warm-up included.
  ASSERT_EQ(s.series.size(), 4u);
  EXPECT_DOUBLE_EQ(s.series[0].tokens, 1);
  EXPECT_DOUBLE_EQ(s.series[1].tokens, 2 + 4);
  EXPECT_DOUBLE_EQ(s.series[3].tokens, 1);
  EXPECT_EQ(s.series[1].completed, 1);  // a ends at 1.5
  EXPECT_EQ(s.series[1].errors, 1);     // c ends at 1.3
  EXPECT_EQ(s.series[2].completed, 1);  // b ends at 2.0
}

}  // namespace

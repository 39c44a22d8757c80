// Reading a headroom server's /metrics: the Prometheus text, and the KV pool, preemptions and hit
// rate a load run reports from samples of it.
#include "load/server_metrics.h"

#include <gtest/gtest.h>

namespace {

TEST(ServerMetrics, ParsesSeriesWithAndWithoutLabels) {
  const auto m = load::parse_prometheus(
      "# HELP headroom_preemptions_total Times …\n"
      "# TYPE headroom_preemptions_total counter\n"
      "headroom_preemptions_total 3\n"
      "headroom_kv_pool_blocks{group=\"full\",state=\"used\"} 12\n"
      "headroom_errors_total{type=\"a b\"} 1e2\n"
      "not a series\n");
  EXPECT_EQ(m.at("headroom_preemptions_total"), 3);
  EXPECT_EQ(m.at("headroom_kv_pool_blocks{group=\"full\",state=\"used\"}"), 12);
  EXPECT_EQ(m.at("headroom_errors_total{type=\"a b\"}"), 100);
  EXPECT_EQ(m.size(), 3u);
}

TEST(ServerMetrics, PeakUseLastCacheAndPreemptionsDuringTheRun) {
  auto sample = [](double used, double cached, double preemptions, double hit_rate) {
    return std::map<std::string, double>{
        {"headroom_kv_pool_blocks{group=\"full\",state=\"total\"}", 64},
        {"headroom_kv_pool_blocks{group=\"full\",state=\"used\"}", used},
        {"headroom_kv_pool_blocks{group=\"full\",state=\"cached\"}", cached},
        {"headroom_preemptions_total", preemptions},
        {"headroom_prefix_cache_hit_rate", hit_rate}};
  };
  const auto m = load::summarize_metrics(
      {sample(0, 5, 2, 0.1), sample(40, 9, 4, 0.3), sample(10, 20, 7, 0.5)});
  ASSERT_TRUE(m.available);
  ASSERT_EQ(m.kv.count("full"), 1u);
  EXPECT_EQ(m.kv.count("sliding"), 0u);
  EXPECT_EQ(m.kv.at("full").blocks, 64);
  EXPECT_EQ(m.kv.at("full").used_peak, 40);
  EXPECT_EQ(m.kv.at("full").cached_end, 20);
  EXPECT_EQ(m.preemptions, 5);  // 7 at the end − 2 before the first request
  EXPECT_EQ(m.prefix_hit_rate, 0.5);
  EXPECT_EQ(m.samples, 3);
}

TEST(ServerMetrics, AServerWithoutTheSeriesIsSaidSo) {
  const auto m = load::summarize_metrics({{{"vllm:num_requests_running", 2}}});
  EXPECT_FALSE(m.available);
  EXPECT_FALSE(m.unavailable.empty());
}

}  // namespace

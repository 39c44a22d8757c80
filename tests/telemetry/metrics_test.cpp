// The Prometheus registry: exposition parses line by line, buckets are cumulative and inclusive.
#include "telemetry/metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

namespace {

// Parses the text format the way a scraper does: comment lines, then `name{labels} value`.
std::map<std::string, double> parse(const std::string& text) {
  static const std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})? (\S+)$)");
  static const std::regex comment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*$)");
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("#")) {
      EXPECT_TRUE(std::regex_match(line, comment)) << line;
      continue;
    }
    std::smatch m;
    EXPECT_TRUE(std::regex_match(line, m, sample)) << line;
    if (m.empty()) continue;
    const std::string value = m[5];
    out[line.substr(0, line.size() - value.size() - 1)] =
        value == "+Inf" ? INFINITY : std::stod(value);
  }
  return out;
}

TEST(Metrics, CountersAndGaugesWithLabels) {
  telemetry::Registry r;
  r.counter("requests_total", "Requests.", {{"status", "200"}}).inc();
  r.counter("requests_total", "Requests.", {{"status", "200"}}).inc(2);
  r.counter("requests_total", "Requests.", {{"status", "503"}}).inc();
  r.counter("requests_total", "Requests.", {{"status", "503"}})
      .inc(-5);  // ignored: counters only grow
  r.gauge("kv_bytes", "KV.", {{"device", "cpu"}}).set(1024);
  r.gauge("kv_bytes", "KV.", {{"device", "cpu"}}).add(-24);
  auto m = parse(r.expose());
  EXPECT_EQ(m["requests_total{status=\"200\"}"], 3);
  EXPECT_EQ(m["requests_total{status=\"503\"}"], 1);
  EXPECT_EQ(m["kv_bytes{device=\"cpu\"}"], 1000);
  EXPECT_NE(r.expose().find("# TYPE requests_total counter\n"), std::string::npos);
  EXPECT_NE(r.expose().find("# TYPE kv_bytes gauge\n"), std::string::npos);
}

TEST(Metrics, HistogramBucketsAreCumulativeAndInclusive) {
  telemetry::Registry r;
  auto& h = r.histogram("latency_seconds", "Latency.", {0.1, 1.0, 0.5});  // unsorted on purpose
  for (double v : {0.05, 0.1, 0.3, 0.7, 2.0, 5.0}) h.observe(v);
  auto m = parse(r.expose());
  EXPECT_EQ(m["latency_seconds_bucket{le=\"0.1\"}"], 2);  // 0.05 and 0.1 (le is inclusive)
  EXPECT_EQ(m["latency_seconds_bucket{le=\"0.5\"}"], 3);
  EXPECT_EQ(m["latency_seconds_bucket{le=\"1\"}"], 4);
  EXPECT_EQ(m["latency_seconds_bucket{le=\"+Inf\"}"], 6);
  EXPECT_EQ(m["latency_seconds_count"], 6);
  EXPECT_DOUBLE_EQ(m["latency_seconds_sum"], 0.05 + 0.1 + 0.3 + 0.7 + 2.0 + 5.0);
}

TEST(Metrics, LabelValuesAreEscaped) {
  telemetry::Registry r;
  r.counter("errors_total", "Errors by type.", {{"type", "a\"b\\c\nd"}}).inc();
  const std::string text = r.expose();
  EXPECT_NE(text.find(R"(errors_total{type="a\"b\\c\nd"} 1)"), std::string::npos) << text;
  parse(text);
}

TEST(Metrics, OneNameOneType) {
  telemetry::Registry r;
  r.counter("x", "X.");
  EXPECT_THROW(r.gauge("x", "X."), std::logic_error);
}

TEST(Metrics, ConcurrentUpdatesAreAllCounted) {
  telemetry::Registry r;
  auto& c = r.counter("n_total", "N.");
  auto& h = r.histogram("h", "H.", telemetry::latency_buckets());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.inc();
        h.observe(0.002);
      }
    });
  }
  for (auto& t : threads) t.join();
  auto m = parse(r.expose());
  EXPECT_EQ(m["n_total"], 40000);
  EXPECT_EQ(m["h_count"], 40000);
  EXPECT_EQ(m["h_bucket{le=\"0.001\"}"], 0);
  EXPECT_EQ(m["h_bucket{le=\"0.0025\"}"], 40000);
}

// Two names for one value, written under a batch while another thread scrapes: every scrape
// sees them equal (without the batch, a scrape between the two writes sees them differ).
TEST(Metrics, ABatchIsExposedWhole) {
  telemetry::Registry r;
  auto& first = r.gauge("a_running", "A.");
  auto& last = r.gauge("z_running", "Z.");
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 1; !done; ++i) {
      const auto batch = r.batch();
      last.set(i);
      first.set(i);
    }
  });
  constexpr int kScrapes = 2000;
  int torn = 0;
  for (int scrape = 0; scrape < kScrapes; ++scrape) {
    auto m = parse(r.expose());
    torn += m["a_running"] != m["z_running"];
  }
  done = true;
  writer.join();
  EXPECT_EQ(torn, 0) << "of " << kScrapes << " scrapes";
}

}  // namespace

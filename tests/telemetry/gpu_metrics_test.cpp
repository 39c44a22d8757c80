// The GPU gauges from fake NVML readings: names, labels and units as scraped, absent fields have
// no series, and a field that disappears reads NaN instead of its last value.
#include "telemetry/gpu_metrics.h"

#include <gtest/gtest.h>

#include <sstream>

#include "testing/testing.h"

namespace {

using telemetry::GpuMetrics;
using telemetry::Nvml;
using telemetry::Registry;

// The value text of one exact series line (`name{labels} value`), or "absent".
std::string sample(const std::string& exposition, const std::string& series) {
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return line.substr(series.size() + 1);
  }
  return "absent";
}

std::vector<telemetry::GpuReading> read_fake(const char* path) {
  testing_util::ScopedEnv lib("HEADROOM_NVML_LIB", path);
  auto nvml = Nvml::open();
  EXPECT_TRUE(nvml.ok()) << nvml.error().message();
  return nvml ? nvml->read_all() : std::vector<telemetry::GpuReading>{};
}

TEST(GpuMetrics, EveryFieldOfTheFakeGpusIsAGaugeInBaseUnits) {
  Registry registry;
  GpuMetrics gpu(registry);
  gpu.update(read_fake(FAKE_NVML));
  const std::string text = registry.expose();
  EXPECT_EQ(sample(text, R"(headroom_gpu_info{gpu="0",name="NVIDIA Fake A100"})"), "1");
  EXPECT_EQ(sample(text, R"(headroom_gpu_memory_total_bytes{gpu="0"})"), "42949672960");
  EXPECT_EQ(sample(text, R"(headroom_gpu_memory_used_bytes{gpu="0"})"), "10737418240");
  EXPECT_EQ(sample(text, R"(headroom_gpu_utilization_ratio{gpu="0"})"), "0.87");
  EXPECT_EQ(sample(text, R"(headroom_gpu_memory_utilization_ratio{gpu="1"})"), "0.7");
  EXPECT_EQ(sample(text, R"(headroom_gpu_sm_clock_hertz{gpu="1"})"), "1200000000");
  EXPECT_EQ(sample(text, R"(headroom_gpu_sm_clock_max_hertz{gpu="1"})"), "2520000000");
  EXPECT_EQ(sample(text, R"(headroom_gpu_memory_clock_hertz{gpu="0"})"), "1215000000");
  EXPECT_EQ(sample(text, R"(headroom_gpu_temperature_celsius{gpu="1"})"), "89");
  EXPECT_EQ(sample(text, R"(headroom_gpu_power_watts{gpu="0"})"), "250");
  EXPECT_EQ(sample(text, R"(headroom_gpu_power_limit_watts{gpu="1"})"), "450");
  EXPECT_EQ(sample(text, R"(headroom_gpu_throttle_reasons{gpu="0"})"), "0");
  EXPECT_EQ(sample(text, R"(headroom_gpu_throttle_reasons{gpu="1"})"), "96");  // 0x20 | 0x40
  EXPECT_EQ(
      sample(text, R"(headroom_gpu_throttle_reason_active{gpu="1",reason="sw_thermal_slowdown"})"),
      "1");
  EXPECT_EQ(
      sample(text, R"(headroom_gpu_throttle_reason_active{gpu="1",reason="hw_thermal_slowdown"})"),
      "1");
  EXPECT_EQ(sample(text, R"(headroom_gpu_throttle_reason_active{gpu="1",reason="sw_power_cap"})"),
            "0");
  EXPECT_EQ(
      sample(text, R"(headroom_gpu_throttle_reason_active{gpu="0",reason="sw_thermal_slowdown"})"),
      "0");
  EXPECT_EQ(sample(text, R"(headroom_gpu_pcie_tx_bytes_per_second{gpu="0"})"), "1024000");
  EXPECT_EQ(sample(text, R"(headroom_gpu_pcie_rx_bytes_per_second{gpu="1"})"), "716800");
  EXPECT_NE(text.find("# TYPE headroom_gpu_temperature_celsius gauge"), std::string::npos);
}

TEST(GpuMetrics, UnreadableFieldsHaveNoSeriesAndNoGpusMeanNoGpuSeriesAtAll) {
  Registry registry;
  GpuMetrics gpu(registry);
  gpu.update({});
  EXPECT_EQ(registry.expose().find("headroom_gpu_"), std::string::npos);
  gpu.update(read_fake(FAKE_NVML_PARTIAL));
  const std::string text = registry.expose();
  EXPECT_EQ(sample(text, R"(headroom_gpu_temperature_celsius{gpu="0"})"), "absent");
  EXPECT_EQ(sample(text, R"(headroom_gpu_power_watts{gpu="0"})"), "absent");
  EXPECT_EQ(sample(text, R"(headroom_gpu_utilization_ratio{gpu="0"})"), "absent");
  EXPECT_EQ(sample(text, R"(headroom_gpu_pcie_tx_bytes_per_second{gpu="0"})"), "absent");
  EXPECT_EQ(sample(text, R"(headroom_gpu_power_limit_watts{gpu="0"})"), "400");
}

TEST(GpuMetrics, AFieldThatStopsReadingIsNaNNotItsLastValue) {
  Registry registry;
  GpuMetrics gpu(registry);
  auto readings = read_fake(FAKE_NVML);
  gpu.update(readings);
  EXPECT_EQ(sample(registry.expose(), R"(headroom_gpu_temperature_celsius{gpu="0"})"), "65");
  readings[0].temperature_c.reset();
  gpu.update(readings);
  const std::string text = registry.expose();
  EXPECT_EQ(sample(text, R"(headroom_gpu_temperature_celsius{gpu="0"})"), "NaN");
  EXPECT_EQ(sample(text, R"(headroom_gpu_temperature_celsius{gpu="1"})"), "89");
}

}  // namespace

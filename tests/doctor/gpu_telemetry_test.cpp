// The doctor's GPU telemetry through NVML, on the fake libnvidia-ml (tests/telemetry/fake_nvml.c):
// readings become the samples the throttling rules read, and `headroom doctor` names the fake
// GPU's thermal slowdown and the GPU this build leaves unused.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "doctor/gpu_telemetry.h"
#include "doctor/rules.h"
#include "testing/testing.h"

namespace doctor {
namespace {

using testing_util::ScopedEnv;

TEST(DoctorGpuTelemetry, ThrottleReasonBitsFoldIntoTheRulesFlags) {
  namespace t = telemetry::throttle;
  telemetry::GpuReading r;
  r.index = 3;
  r.name = "NVIDIA Test";
  r.sm_clock_mhz = 990;
  r.max_sm_clock_mhz = 1980;
  r.temperature_c = 71;
  r.power_w = 349.5;
  r.power_limit_w = 350;
  r.utilization_gpu = 0.96;
  r.throttle_reasons = t::kSwPowerCap | t::kGpuIdle;
  GpuSample s = gpu_sample(r);
  EXPECT_EQ(s.name, "cuda:3 NVIDIA Test");
  EXPECT_EQ(s.sm_clock_mhz, 990);
  EXPECT_EQ(s.max_sm_clock_mhz, 1980);
  EXPECT_EQ(s.temperature_c, 71);
  EXPECT_EQ(s.power_w, 349.5);
  EXPECT_EQ(s.power_limit_w, 350);
  EXPECT_EQ(s.utilization, 0.96);
  EXPECT_TRUE(s.power_cap);
  EXPECT_FALSE(s.thermal_slowdown);
  EXPECT_FALSE(s.hw_slowdown);
  for (uint64_t bit : {t::kSwThermalSlowdown, t::kHwThermalSlowdown}) {
    r.throttle_reasons = bit;
    s = gpu_sample(r);
    EXPECT_TRUE(s.thermal_slowdown && !s.power_cap && !s.hw_slowdown) << bit;
  }
  for (uint64_t bit : {t::kHwSlowdown, t::kHwPowerBrakeSlowdown}) {
    r.throttle_reasons = bit;
    s = gpu_sample(r);
    EXPECT_TRUE(s.hw_slowdown && !s.power_cap && !s.thermal_slowdown) << bit;
  }
  // Absent fields are NaN, never a made-up 0.
  s = gpu_sample(telemetry::GpuReading{.index = 0, .name = "bare"});
  for (double v : {s.sm_clock_mhz, s.max_sm_clock_mhz, s.temperature_c, s.power_w, s.power_limit_w,
                   s.utilization}) {
    EXPECT_TRUE(std::isnan(v)) << v;
  }
  EXPECT_FALSE(s.thermal_slowdown || s.power_cap || s.hw_slowdown);
}

TEST(DoctorGpuTelemetry, FieldsTheDriverDoesNotGiveAreUnknownAndNoRuleFiresOnThem) {
  telemetry::GpuReading r{.index = 0, .name = "NVIDIA Old"};
  r.sm_clock_mhz = 500;  // a quarter of the maximum, but utilisation is not known
  r.max_sm_clock_mhz = 2000;
  r.power_limit_w = 250;
  Observations o;
  o.throttle.value = ThrottleFacts{{gpu_sample(r)}};
  const auto verdicts = diagnose(o);
  const Verdict* throttling = nullptr;
  for (const auto& v : verdicts) {
    if (v.check == "throttling") throttling = &v;
  }
  ASSERT_NE(throttling, nullptr);
  EXPECT_EQ(throttling->rule, "throttle.none");
  EXPECT_EQ(throttling->observation,
            "cuda:0 NVIDIA Old: SM clock 500 of 2000 MHz (25%), temperature unknown, power "
            "unknown, utilisation unknown");
}

TEST(DoctorGpuTelemetry, TheDefaultSourceReadsNvmlWhenItOpens) {
  ScopedEnv lib("HEADROOM_NVML_LIB", FAKE_NVML);
  auto gpu = default_gpu_telemetry();
  EXPECT_EQ(gpu->unavailable(), "");
  const auto samples = gpu->read();
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].name, "cuda:0 NVIDIA Fake A100");
  EXPECT_EQ(samples[0].sm_clock_mhz, 1410);
  EXPECT_FALSE(samples[0].thermal_slowdown);
  EXPECT_EQ(samples[1].name, "cuda:1 NVIDIA Fake RTX 4090");
  EXPECT_EQ(samples[1].temperature_c, 89);
  EXPECT_EQ(samples[1].power_limit_w, 450);
  EXPECT_DOUBLE_EQ(samples[1].utilization, 0.99);
  EXPECT_TRUE(samples[1].thermal_slowdown);
}

TEST(DoctorGpuTelemetry, WithoutNvmlTheSourceSaysWhyInOneLine) {
  ScopedEnv lib("HEADROOM_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");
  auto gpu = default_gpu_telemetry();
  const std::string why = gpu->unavailable();
  EXPECT_NE(why.find("HEADROOM_NVML_LIB=/nonexistent/libnvidia-ml.so.1: cannot load it"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find('\n'), std::string::npos);
  EXPECT_TRUE(gpu->read().empty());
  if (nvidia_gpu_present().empty()) {
    EXPECT_EQ(why.rfind("no GPU: not applicable — ", 0), 0u) << why;
  }
}

nlohmann::json verdict_of(const nlohmann::json& report, const std::string& check) {
  for (const auto& v : report["verdicts"]) {
    if (v["check"] == check) return v;
  }
  return nullptr;
}

TEST(DoctorGpuTelemetry, DoctorNamesTheThermalSlowdownAndTheUnusedGpu) {
  ScopedEnv lib("HEADROOM_NVML_LIB", FAKE_NVML);
  std::string out, err;
  ASSERT_EQ(testing_util::run_command(
                testing_util::headroom_binary().string() + " doctor --json --ctx 128", &out, &err),
            0)
      << err;
  const auto report = nlohmann::json::parse(out);
  const auto throttling = verdict_of(report, "throttling");
  EXPECT_EQ(throttling["rule"], "throttle.thermal") << throttling.dump();
  EXPECT_NE(throttling["observation"].get<std::string>().find("cuda:1 NVIDIA Fake RTX 4090"),
            std::string::npos)
      << throttling.dump();
  EXPECT_GE(report["observations"]["throttling"]["samples"].size(), 2u);
  // The GPU is there, this build leaves it empty, and the backend check says so.
  EXPECT_EQ(verdict_of(report, "backend")["rule"], "backend.gpu-unused");
  EXPECT_EQ(verdict_of(report, "placement")["rule"], "placement.cpu-only");
}

}  // namespace
}  // namespace doctor

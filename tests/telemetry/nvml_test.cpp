// The NVML loader against fake libnvidia-ml builds (fake_nvml.c): every field with its unit
// converted, fields absent when unsupported or missing, one-line errors, and safe open/close.
#include "telemetry/nvml.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "testing/testing.h"

namespace {

using telemetry::GpuReading;
using telemetry::Nvml;
using testing_util::ScopedEnv;

constexpr uint64_t kGiB = 1ull << 30;

telemetry::Nvml open_fake(const char* path) {
  ScopedEnv lib("HEADROOM_NVML_LIB", path);
  auto nvml = Nvml::open();
  EXPECT_TRUE(nvml.ok()) << nvml.error().message();
  return std::move(*nvml);
}

// nvmlInit_v2 calls the fake has seen without a matching nvmlShutdown. The test holds its own
// handle to the library, so the counter survives the loader's dlclose.
int live_inits(void* handle) {
  auto fn = reinterpret_cast<int (*)()>(::dlsym(handle, "fake_nvml_live_inits"));
  EXPECT_NE(fn, nullptr);
  return fn ? fn() : -1;
}

TEST(Nvml, ReadsEveryFieldOfBothFakeGpusWithUnitsConverted) {
  const Nvml nvml = open_fake(FAKE_NVML);
  ASSERT_EQ(nvml.count(), 2);
  const GpuReading a = nvml.read(0);
  EXPECT_TRUE(a.errors.empty()) << a.errors.front();
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(a.name, "NVIDIA Fake A100");
  EXPECT_EQ(a.memory_total, 40 * kGiB);
  EXPECT_EQ(a.memory_free, 30 * kGiB);
  EXPECT_EQ(a.memory_used, 10 * kGiB);
  EXPECT_DOUBLE_EQ(*a.utilization_gpu, 0.87);
  EXPECT_DOUBLE_EQ(*a.utilization_memory, 0.45);
  EXPECT_EQ(a.sm_clock_mhz, 1410u);
  EXPECT_EQ(a.max_sm_clock_mhz, 1410u);
  EXPECT_EQ(a.memory_clock_mhz, 1215u);
  EXPECT_EQ(a.max_memory_clock_mhz, 1215u);
  EXPECT_EQ(a.memory_bus_width_bits, 5120u);
  EXPECT_EQ(a.temperature_c, 65u);
  EXPECT_DOUBLE_EQ(*a.power_w, 250.0);  // NVML reports milliwatts
  EXPECT_DOUBLE_EQ(*a.power_limit_w, 400.0);
  EXPECT_EQ(a.throttle_reasons, 0u);
  EXPECT_EQ(a.pcie_tx_bytes_per_s, 1000u * 1024);  // NVML reports KB/s
  EXPECT_EQ(a.pcie_rx_bytes_per_s, 2000u * 1024);
  EXPECT_EQ(a.max_pcie_generation, 4u);
  EXPECT_EQ(a.max_pcie_width, 16u);

  const GpuReading b = nvml.read(1);
  EXPECT_EQ(b.name, "NVIDIA Fake RTX 4090");
  EXPECT_EQ(b.memory_total, 24 * kGiB);
  EXPECT_EQ(b.sm_clock_mhz, 1200u);
  EXPECT_EQ(b.max_sm_clock_mhz, 2520u);
  EXPECT_EQ(b.temperature_c, 89u);
  ASSERT_TRUE(b.throttle_reasons.has_value());
  EXPECT_EQ(*b.throttle_reasons,
            telemetry::throttle::kSwThermalSlowdown | telemetry::throttle::kHwThermalSlowdown);
  EXPECT_EQ(nvml.read_all().size(), 2u);
}

TEST(Nvml, LeavingOutPcieThroughputLeavesOnlyThoseFieldsAbsent) {
  const Nvml nvml = open_fake(FAKE_NVML);
  const GpuReading a = nvml.read(0, /*pcie_throughput=*/false);
  EXPECT_FALSE(a.pcie_tx_bytes_per_s.has_value());
  EXPECT_FALSE(a.pcie_rx_bytes_per_s.has_value());
  EXPECT_EQ(a.sm_clock_mhz, 1410u);
  EXPECT_EQ(a.max_pcie_width, 16u);
}

TEST(Nvml, UnsupportedCallsAndMissingSymbolsLeaveFieldsAbsentAndOtherErrorsSayWhy) {
  const Nvml nvml = open_fake(FAKE_NVML_PARTIAL);
  ASSERT_EQ(nvml.count(), 2);
  const GpuReading b = nvml.read(1);
  // Not supported: absent, and not an error.
  EXPECT_FALSE(b.temperature_c.has_value());
  EXPECT_FALSE(b.power_w.has_value());
  // Symbols this older library lacks: absent.
  EXPECT_FALSE(b.pcie_tx_bytes_per_s.has_value());
  EXPECT_FALSE(b.pcie_rx_bytes_per_s.has_value());
  EXPECT_FALSE(b.memory_bus_width_bits.has_value());
  // Another failure (GPU is lost): absent, with exactly one line naming the call and the error.
  EXPECT_FALSE(b.utilization_gpu.has_value());
  EXPECT_FALSE(b.utilization_memory.has_value());
  ASSERT_EQ(b.errors.size(), 1u);
  EXPECT_EQ(b.errors[0], "GPU 1 utilization: GPU is lost (NVML error 15)");
  // Everything else still reads, the throttle reasons through the deprecated entry point.
  EXPECT_EQ(b.name, "NVIDIA Fake RTX 4090");
  EXPECT_DOUBLE_EQ(*b.power_limit_w, 450.0);
  EXPECT_EQ(b.throttle_reasons, 0x60u);
  EXPECT_EQ(b.memory_free, 20 * kGiB);
}

TEST(Nvml, MissingLibraryIsOneLineNamingItAndWhatToDo) {
  {
    ScopedEnv lib("HEADROOM_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");
    auto nvml = Nvml::open();
    ASSERT_FALSE(nvml.ok());
    const std::string& m = nvml.error().message();
    EXPECT_NE(m.find("HEADROOM_NVML_LIB=/nonexistent/libnvidia-ml.so.1: cannot load it"),
              std::string::npos)
        << m;
    EXPECT_EQ(m.find('\n'), std::string::npos);
  }
  ScopedEnv lib("HEADROOM_NVML_LIB", std::nullopt);
  EXPECT_EQ(Nvml::library_path(), "libnvidia-ml.so.1");
  if (void* real = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
    ::dlclose(real);
    GTEST_SKIP() << "this machine has the NVIDIA driver, so the no-driver message cannot show";
  }
  auto nvml = Nvml::open();
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.error().message(),
            "no NVIDIA driver: libnvidia-ml.so.1 not found — install the NVIDIA driver to use a "
            "GPU; headroom runs on the CPU");
}

TEST(Nvml, DriverTooOldOrNotLoadedIsOneLine) {
  {
    ScopedEnv lib("HEADROOM_NVML_LIB", FAKE_NVML_NO_INIT);
    auto nvml = Nvml::open();
    ASSERT_FALSE(nvml.ok());
    EXPECT_NE(nvml.error().message().find("has no nvmlInit_v2: the NVIDIA driver is too old"),
              std::string::npos)
        << nvml.error().message();
  }
  ScopedEnv lib("HEADROOM_NVML_LIB", FAKE_NVML);
  ScopedEnv fail("FAKE_NVML_INIT_ERROR", "9");
  auto nvml = Nvml::open();
  ASSERT_FALSE(nvml.ok());
  const std::string& m = nvml.error().message();
  EXPECT_NE(m.find("could not start: Driver Not Loaded (NVML error 9)"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos);
}

TEST(Nvml, RepeatedAndOverlappingOpensShutDownExactlyWhatTheyInitialised) {
  void* handle = ::dlopen(FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  ASSERT_EQ(live_inits(handle), 0);
  for (int i = 0; i < 20; ++i) {
    Nvml nvml = open_fake(FAKE_NVML);
    EXPECT_EQ(live_inits(handle), 1);
    EXPECT_EQ(nvml.read(i % 2).index, i % 2);
  }
  EXPECT_EQ(live_inits(handle), 0);
  {
    Nvml first = open_fake(FAKE_NVML);
    Nvml second = open_fake(FAKE_NVML);
    EXPECT_EQ(live_inits(handle), 2);
    first = std::move(second);  // shuts down the first's NVML, takes the second's
    EXPECT_EQ(live_inits(handle), 1);
    EXPECT_EQ(first.count(), 2);
    EXPECT_EQ(first.read(0).name, "NVIDIA Fake A100");
  }
  EXPECT_EQ(live_inits(handle), 0);
  ::dlclose(handle);
}

TEST(Nvml, AnIndexWithoutAGpuIsAnErrorLineNotACrash) {
  ScopedEnv count("FAKE_NVML_COUNT", "3");  // the library counts a GPU it cannot hand out
  const Nvml nvml = open_fake(FAKE_NVML);
  ASSERT_EQ(nvml.count(), 3);
  const GpuReading lost = nvml.read(2);
  EXPECT_EQ(lost.name, "GPU 2");
  EXPECT_FALSE(lost.memory_total.has_value());
  ASSERT_EQ(lost.errors.size(), 1u);
  EXPECT_NE(lost.errors[0].find("GPU 2 handle:"), std::string::npos) << lost.errors[0];
  const GpuReading outside = nvml.read(7);
  ASSERT_EQ(outside.errors.size(), 1u);
  EXPECT_EQ(outside.errors[0], "GPU 7: NVML reports 3 GPUs");
}

}  // namespace

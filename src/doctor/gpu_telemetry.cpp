// GPU presence from the kernel driver's /proc files, and GPU telemetry read through NVML.
#include "doctor/gpu_telemetry.h"

#include <filesystem>
#include <fstream>
#include <limits>

namespace doctor {
namespace {

class NoGpuTelemetry final : public GpuTelemetry {
 public:
  explicit NoGpuTelemetry(std::string why) : why_(std::move(why)) {}
  std::string unavailable() const override { return why_; }
  std::vector<GpuSample> read() override { return {}; }

 private:
  std::string why_;
};

class NvmlGpuTelemetry final : public GpuTelemetry {
 public:
  explicit NvmlGpuTelemetry(telemetry::Nvml nvml) : nvml_(std::move(nvml)) {}
  std::string unavailable() const override { return ""; }
  std::vector<GpuSample> read() override {
    std::vector<GpuSample> samples;
    // Without PCIe throughput: it blocks 40 ms per GPU, and the sampler reads every 50 ms.
    for (const auto& reading : nvml_.read_all(/*pcie_throughput=*/false)) {
      samples.push_back(gpu_sample(reading));
    }
    return samples;
  }

 private:
  telemetry::Nvml nvml_;
};

}  // namespace

GpuSample gpu_sample(const telemetry::GpuReading& g) {
  namespace t = telemetry::throttle;
  // Absent fields are NaN: every rule comparison with them is false, so nothing fires on a value
  // that was not read, and the report says "unknown".
  auto value = [](const auto& field) {
    return field ? static_cast<double>(*field) : std::numeric_limits<double>::quiet_NaN();
  };
  const uint64_t reasons = g.throttle_reasons.value_or(0);
  return {.name = fmt::format("cuda:{} {}", g.index, g.name),
          .sm_clock_mhz = value(g.sm_clock_mhz),
          .max_sm_clock_mhz = value(g.max_sm_clock_mhz),
          .temperature_c = value(g.temperature_c),
          .power_w = value(g.power_w),
          .power_limit_w = value(g.power_limit_w),
          .utilization = value(g.utilization_gpu),
          .thermal_slowdown = (reasons & (t::kSwThermalSlowdown | t::kHwThermalSlowdown)) != 0,
          .power_cap = (reasons & t::kSwPowerCap) != 0,
          .hw_slowdown = (reasons & (t::kHwSlowdown | t::kHwPowerBrakeSlowdown)) != 0};
}

std::string nvidia_gpu_present() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    std::ifstream in(entry.path() / "information");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("Model:", 0) == 0) return line.substr(line.find_first_not_of(" \t", 6));
    }
    return "NVIDIA GPU";
  }
  return std::filesystem::exists("/dev/nvidia0", ec) ? "NVIDIA GPU (/dev/nvidia0)" : "";
}

std::unique_ptr<GpuTelemetry> default_gpu_telemetry() {
  auto nvml = telemetry::Nvml::open();
  if (nvml && nvml->count() > 0) return std::make_unique<NvmlGpuTelemetry>(std::move(*nvml));
  const std::string why = nvml ? "NVML reports no GPU" : nvml.error().message();
  const std::string gpu = nvidia_gpu_present();
  if (gpu.empty()) {
    return std::make_unique<NoGpuTelemetry>("no GPU: not applicable — " + why);
  }
  return std::make_unique<NoGpuTelemetry>(
      fmt::format("a GPU is present ({}) but its clocks cannot be read: {}; check `nvidia-smi -q "
                  "-d PERFORMANCE` by hand",
                  gpu, why));
}

}  // namespace doctor

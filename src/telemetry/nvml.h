// telemetry::Nvml — NVIDIA's management library (NVML) loaded at run time with dlopen, so the
// binary has no link dependency on the driver: per-GPU memory, utilisation, clocks, temperature,
// power, throttle reasons and PCIe throughput. Without the library it says why, in one line.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/result.h"

namespace telemetry {

// Bits of NVML's clock event ("throttle") reasons mask, with the values NVML documents.
namespace throttle {
inline constexpr uint64_t kGpuIdle = 0x1;
inline constexpr uint64_t kApplicationsClocks = 0x2;
inline constexpr uint64_t kSwPowerCap = 0x4;
inline constexpr uint64_t kHwSlowdown = 0x8;
inline constexpr uint64_t kSyncBoost = 0x10;
inline constexpr uint64_t kSwThermalSlowdown = 0x20;
inline constexpr uint64_t kHwThermalSlowdown = 0x40;
inline constexpr uint64_t kHwPowerBrakeSlowdown = 0x80;
inline constexpr uint64_t kDisplayClocks = 0x100;
}  // namespace throttle

// Every reason bit above with a short name ("sw_thermal_slowdown"), in bit order.
const std::vector<std::pair<uint64_t, std::string_view>>& throttle_reason_names();

// One GPU, now. A field NVML does not support on this GPU (or this driver lacks) is absent.
struct GpuReading {
  int index = 0;
  std::string name;                                                // "NVIDIA H100 80GB HBM3"
  std::optional<uint64_t> memory_total, memory_free, memory_used;  // bytes
  std::optional<double> utilization_gpu;     // 0..1: share of time a kernel ran
  std::optional<double> utilization_memory;  // 0..1: share of time memory was read or written
  std::optional<unsigned> sm_clock_mhz, max_sm_clock_mhz;
  std::optional<unsigned> memory_clock_mhz, max_memory_clock_mhz;
  std::optional<unsigned> memory_bus_width_bits;
  std::optional<unsigned> temperature_c;
  std::optional<double> power_w, power_limit_w;  // draw and the limit the driver enforces
  std::optional<uint64_t> throttle_reasons;      // throttle:: bits
  std::optional<uint64_t> pcie_tx_bytes_per_s, pcie_rx_bytes_per_s;
  std::optional<unsigned> max_pcie_generation, max_pcie_width;
  // Calls that failed for another reason than "not supported", one line each ("power: GPU is
  // lost").
  std::vector<std::string> errors;
};

class Nvml {
 public:
  // The library path: $HEADROOM_NVML_LIB when set (tests point it at a fake), else the driver's
  // libnvidia-ml.so.1.
  static std::string library_path();
  // Loads the library and initialises NVML; the error says what is missing and what to do.
  static util::Result<Nvml> open();

  Nvml(Nvml&&) noexcept;
  Nvml& operator=(Nvml&&) noexcept;
  ~Nvml();  // shuts NVML down and unloads the library

  int count() const { return count_; }
  // PCIe throughput blocks about 20 ms per direction inside NVML, so callers that sample often
  // (the doctor's sampler) leave it out.
  GpuReading read(int index, bool pcie_throughput = true) const;
  std::vector<GpuReading> read_all(bool pcie_throughput = true) const;

  struct Api;  // the resolved entry points (nvml.cpp)

 private:
  Nvml() = default;
  void close();

  void* library_ = nullptr;
  std::unique_ptr<Api> api_;
  int count_ = 0;
};

}  // namespace telemetry

// The NVML loader: dlopen, our own minimal declarations of the few entry points used (checked
// against NVML's published API reference), and readings where unsupported fields stay absent.
#include "telemetry/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>

namespace telemetry {
namespace {

// NVML's C types as its API reference defines them: return codes and enums are C ints, a
// device is an opaque pointer, and the two structs below are read by value.
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlMemory {
  unsigned long long total, free, used;  // bytes
};
struct NvmlUtilization {
  unsigned int gpu, memory;  // percent over the driver's last sample period
};

constexpr NvmlReturn kSuccess = 0;
constexpr NvmlReturn kErrorNotSupported = 3;
constexpr NvmlReturn kErrorFunctionNotFound = 13;
constexpr int kClockSm = 1;               // nvmlClockType_t NVML_CLOCK_SM
constexpr int kClockMem = 2;              // NVML_CLOCK_MEM
constexpr int kTemperatureGpu = 0;        // nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU
constexpr int kPcieTxBytes = 0;           // nvmlPcieUtilCounter_t NVML_PCIE_UTIL_TX_BYTES
constexpr int kPcieRxBytes = 1;           // NVML_PCIE_UTIL_RX_BYTES
constexpr unsigned kNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
// NVML reports PCIe throughput in "KB/s"; we read its KB as 1024 bytes.
constexpr uint64_t kPcieUnit = 1024;
// More than any machine holds: a library that answers more is broken, not large.
constexpr unsigned kMaxGpus = 64;

const char* default_library() {
  return "libnvidia-ml.so.1";
}

}  // namespace

struct Nvml::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*get_count)(unsigned*) = nullptr;
  NvmlReturn (*get_handle)(unsigned, NvmlDevice*) = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  // Optional: a driver without one leaves that field absent.
  NvmlReturn (*get_name)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*get_memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*get_utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*get_clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*get_max_clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*get_temperature)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*get_power)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*get_power_limit)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*get_reasons)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*get_pcie_throughput)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*get_bus_width)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*get_max_link_generation)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*get_max_link_width)(NvmlDevice, unsigned*) = nullptr;

  std::string describe(NvmlReturn r) const {
    const char* text = error_string ? error_string(r) : nullptr;
    return text && *text ? fmt::format("{} (NVML error {})", text, r)
                         : fmt::format("NVML error {}", r);
  }
};

namespace {

template <class F>
void resolve(void* library, F& out, const char* name) {
  out = reinterpret_cast<F>(::dlsym(library, name));
}

std::string dl_error() {
  const char* e = ::dlerror();
  return e ? e : "unknown dlopen error";
}

}  // namespace

const std::vector<std::pair<uint64_t, std::string_view>>& throttle_reason_names() {
  static const std::vector<std::pair<uint64_t, std::string_view>> names = {
      {throttle::kGpuIdle, "gpu_idle"},
      {throttle::kApplicationsClocks, "applications_clocks"},
      {throttle::kSwPowerCap, "sw_power_cap"},
      {throttle::kHwSlowdown, "hw_slowdown"},
      {throttle::kSyncBoost, "sync_boost"},
      {throttle::kSwThermalSlowdown, "sw_thermal_slowdown"},
      {throttle::kHwThermalSlowdown, "hw_thermal_slowdown"},
      {throttle::kHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
      {throttle::kDisplayClocks, "display_clocks"},
  };
  return names;
}

std::string Nvml::library_path() {
  const char* env = std::getenv("HEADROOM_NVML_LIB");
  return env && *env ? env : default_library();
}

util::Result<Nvml> Nvml::open() {
  const std::string path = library_path();
  const bool overridden = path != default_library();
  Nvml nvml;
  ::dlerror();
  nvml.library_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!nvml.library_) {
    if (overridden) {
      return util::errorf(
          "HEADROOM_NVML_LIB={}: cannot load it ({}); unset it to use the driver's {}", path,
          dl_error(), default_library());
    }
    return util::errorf(
        "no NVIDIA driver: {} not found — install the NVIDIA driver to use a GPU; headroom runs "
        "on the CPU",
        path);
  }
  nvml.api_ = std::make_unique<Api>();
  Api& a = *nvml.api_;
  void* lib = nvml.library_;
  resolve(lib, a.init, "nvmlInit_v2");
  resolve(lib, a.shutdown, "nvmlShutdown");
  resolve(lib, a.get_count, "nvmlDeviceGetCount_v2");
  resolve(lib, a.get_handle, "nvmlDeviceGetHandleByIndex_v2");
  resolve(lib, a.error_string, "nvmlErrorString");
  for (auto [fn, name] :
       {std::pair{reinterpret_cast<void*>(a.init), "nvmlInit_v2"},
        {reinterpret_cast<void*>(a.shutdown), "nvmlShutdown"},
        {reinterpret_cast<void*>(a.get_count), "nvmlDeviceGetCount_v2"},
        {reinterpret_cast<void*>(a.get_handle), "nvmlDeviceGetHandleByIndex_v2"}}) {
    if (!fn) {
      return util::errorf(
          "{} has no {}: the NVIDIA driver is too old for headroom's GPU support; "
          "update the driver",
          path, name);
    }
  }
  resolve(lib, a.get_name, "nvmlDeviceGetName");
  resolve(lib, a.get_memory, "nvmlDeviceGetMemoryInfo");
  resolve(lib, a.get_utilization, "nvmlDeviceGetUtilizationRates");
  resolve(lib, a.get_clock, "nvmlDeviceGetClockInfo");
  resolve(lib, a.get_max_clock, "nvmlDeviceGetMaxClockInfo");
  resolve(lib, a.get_temperature, "nvmlDeviceGetTemperature");
  resolve(lib, a.get_power, "nvmlDeviceGetPowerUsage");
  resolve(lib, a.get_power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  // Drivers from 535 on call them clock event reasons; older ones only know the throttle name.
  resolve(lib, a.get_reasons, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!a.get_reasons) resolve(lib, a.get_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  resolve(lib, a.get_pcie_throughput, "nvmlDeviceGetPcieThroughput");
  resolve(lib, a.get_bus_width, "nvmlDeviceGetMemoryBusWidth");
  resolve(lib, a.get_max_link_generation, "nvmlDeviceGetMaxPcieLinkGeneration");
  resolve(lib, a.get_max_link_width, "nvmlDeviceGetMaxPcieLinkWidth");

  if (const NvmlReturn r = a.init(); r != kSuccess) {
    a.shutdown = nullptr;  // NVML did not start, so there is nothing to shut down
    return util::errorf(
        "NVML ({}) could not start: {} — check that the NVIDIA driver is loaded "
        "(nvidia-smi)",
        path, a.describe(r));
  }
  unsigned n = 0;
  if (const NvmlReturn r = a.get_count(&n); r != kSuccess) {
    return util::errorf("NVML could not count the GPUs: {} — check nvidia-smi", a.describe(r));
  }
  nvml.count_ = static_cast<int>(std::min(n, kMaxGpus));
  return nvml;
}

Nvml::Nvml(Nvml&& other) noexcept
    : library_(std::exchange(other.library_, nullptr)),
      api_(std::move(other.api_)),
      count_(std::exchange(other.count_, 0)) {}

Nvml& Nvml::operator=(Nvml&& other) noexcept {
  if (this != &other) {
    close();
    library_ = std::exchange(other.library_, nullptr);
    api_ = std::move(other.api_);
    count_ = std::exchange(other.count_, 0);
  }
  return *this;
}

Nvml::~Nvml() {
  close();
}

void Nvml::close() {
  // NVML counts nvmlInit calls, so each open Nvml shuts down exactly its own.
  if (api_ && api_->shutdown) api_->shutdown();
  api_.reset();
  if (library_) ::dlclose(library_);
  library_ = nullptr;
  count_ = 0;
}

GpuReading Nvml::read(int index, bool pcie_throughput) const {
  GpuReading g;
  g.index = index;
  g.name = fmt::format("GPU {}", index);
  if (!api_ || index < 0 || index >= count_) {
    g.errors.push_back(fmt::format("GPU {}: NVML reports {} GPUs", index, count_));
    return g;
  }
  const Api& a = *api_;
  // A call that is not supported (by this GPU, or by this driver's library) leaves its field
  // absent; any other failure also leaves it absent, and says why in one line.
  auto ok = [&](const char* what, NvmlReturn r) {
    if (r == kSuccess) return true;
    if (r != kErrorNotSupported && r != kErrorFunctionNotFound) {
      g.errors.push_back(fmt::format("GPU {} {}: {}", index, what, a.describe(r)));
    }
    return false;
  };
  NvmlDevice device = nullptr;
  if (!ok("handle", a.get_handle(static_cast<unsigned>(index), &device))) return g;

  if (a.get_name) {
    char name[kNameBufferSize] = {};
    if (ok("name", a.get_name(device, name, sizeof(name)))) {
      name[sizeof(name) - 1] = '\0';
      if (name[0]) g.name = name;
    }
  }
  if (a.get_memory) {
    NvmlMemory m{};
    if (ok("memory", a.get_memory(device, &m))) {
      g.memory_total = m.total;
      g.memory_free = m.free;
      g.memory_used = m.used;
    }
  }
  if (a.get_utilization) {
    NvmlUtilization u{};
    if (ok("utilization", a.get_utilization(device, &u))) {
      g.utilization_gpu = u.gpu / 100.0;
      g.utilization_memory = u.memory / 100.0;
    }
  }
  auto unsigned_field = [&](const char* what, auto fn, auto&&... args) -> std::optional<unsigned> {
    if (!fn) return std::nullopt;
    unsigned value = 0;
    if (!ok(what, fn(device, args..., &value))) return std::nullopt;
    return value;
  };
  g.sm_clock_mhz = unsigned_field("SM clock", a.get_clock, kClockSm);
  g.max_sm_clock_mhz = unsigned_field("max SM clock", a.get_max_clock, kClockSm);
  g.memory_clock_mhz = unsigned_field("memory clock", a.get_clock, kClockMem);
  g.max_memory_clock_mhz = unsigned_field("max memory clock", a.get_max_clock, kClockMem);
  g.memory_bus_width_bits = unsigned_field("memory bus width", a.get_bus_width);
  g.temperature_c = unsigned_field("temperature", a.get_temperature, kTemperatureGpu);
  if (auto mw = unsigned_field("power", a.get_power)) g.power_w = *mw / 1000.0;
  if (auto mw = unsigned_field("power limit", a.get_power_limit)) g.power_limit_w = *mw / 1000.0;
  if (a.get_reasons) {
    unsigned long long reasons = 0;
    if (ok("throttle reasons", a.get_reasons(device, &reasons))) g.throttle_reasons = reasons;
  }
  if (pcie_throughput) {
    if (auto kb = unsigned_field("PCIe TX", a.get_pcie_throughput, kPcieTxBytes))
      g.pcie_tx_bytes_per_s = *kb * kPcieUnit;
    if (auto kb = unsigned_field("PCIe RX", a.get_pcie_throughput, kPcieRxBytes))
      g.pcie_rx_bytes_per_s = *kb * kPcieUnit;
  }
  g.max_pcie_generation = unsigned_field("max PCIe generation", a.get_max_link_generation);
  g.max_pcie_width = unsigned_field("max PCIe width", a.get_max_link_width);
  return g;
}

std::vector<GpuReading> Nvml::read_all(bool pcie_throughput) const {
  std::vector<GpuReading> out;
  for (int i = 0; i < count_; ++i) out.push_back(read(i, pcie_throughput));
  return out;
}

}  // namespace telemetry

// Device detection: RAM budgets from /proc/meminfo, a cached CPU bandwidth probe, NVIDIA GPUs from
// NVML (loaded at run time), what-if GPUs.
#include "plan/devices.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "telemetry/nvml.h"
#include "util/aligned_buffer.h"
#include "util/units.h"

namespace plan {
namespace {

uint64_t meminfo_kib(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream ss(line.substr(key.size() + 1));
      uint64_t kib = 0;
      ss >> kib;
      return kib;
    }
  }
  return 0;
}

std::filesystem::path cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "headroom";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "headroom";
  return std::filesystem::temp_directory_path() / "headroom";
}

// A GPU NVML reports. Its budget is the driver's free memory (other processes' use already
// subtracted) less a margin; its bandwidth is the peak the memory clock and bus allow (not
// measured yet: a device copy reaches ~90 % of it on an H100, bench/RESULTS.md).
Device gpu_device(const telemetry::GpuReading& g, const DeviceOptions& options) {
  Device gpu;
  gpu.kind = DeviceKind::kGpu;
  gpu.gpu_index = g.index;
  gpu.unusable_reason = options.gpu_backend
                            ? options.gpu_backend(g.index)
                            : "this build runs on the CPU: it has no GPU backend yet";
  gpu.placeable = gpu.unusable_reason.empty();
  gpu.name = fmt::format("cuda:{} {}", g.index, g.name);
  gpu.total_bytes = g.memory_total.value_or(0);
  if (options.gpu_mem) {
    gpu.budget_bytes =
        gpu.total_bytes ? std::min(*options.gpu_mem, gpu.total_bytes) : *options.gpu_mem;
    gpu.budget_source = "--gpu-mem";
  } else if (g.memory_free) {
    const uint64_t margin = gpu_margin_bytes(gpu.total_bytes);
    gpu.budget_bytes = *g.memory_free > margin ? *g.memory_free - margin : 0;
    gpu.budget_source = fmt::format(
        "the driver's free memory {} minus a {} margin (512 MiB or 2% of its memory, the larger, "
        "for the CUDA context)",
        util::format_bytes(*g.memory_free), util::format_bytes(margin));
  } else {
    gpu.budget_source = "none: NVML could not read its memory (give one with --gpu-mem)";
  }
  if (g.max_memory_clock_mhz && g.memory_bus_width_bits) {
    // Double data rate: two transfers per memory clock, bus width bits each.
    gpu.bandwidth = *g.max_memory_clock_mhz * 1e6 * 2 * *g.memory_bus_width_bits / 8;
    gpu.bandwidth_source = fmt::format(
        "peak from NVML: max memory clock {} MHz × 2 (double data rate) × {}-bit bus, not measured",
        *g.max_memory_clock_mhz, *g.memory_bus_width_bits);
  } else {
    gpu.bandwidth_source = "unknown: NVML gives no memory clock or bus width for it";
  }
  const double link = g.max_pcie_generation && g.max_pcie_width
                          ? pcie_link_bandwidth(*g.max_pcie_generation, *g.max_pcie_width)
                          : 0;
  if (link > 0) {
    gpu.link_bandwidth = link;
    gpu.bandwidth_source += fmt::format("; host link PCIe gen {} x{}, {:.1f} GB/s (its maximum)",
                                        *g.max_pcie_generation, *g.max_pcie_width, link / 1e9);
  } else {
    gpu.link_bandwidth = 25e9;  // PCIe 4.0 x16 in practice
    gpu.bandwidth_source += "; host link assumed 25 GB/s (NVML gives no PCIe link)";
  }
  return gpu;
}

}  // namespace

uint64_t available_ram() { return meminfo_kib("MemAvailable") * 1024; }
uint64_t total_ram() { return meminfo_kib("MemTotal") * 1024; }

uint64_t cpu_margin_bytes(uint64_t total) { return std::max<uint64_t>(1ull << 30, total / 20); }

uint64_t gpu_margin_bytes(uint64_t total) {
  // A CUDA context takes a few hundred MiB before the first allocation; the allocator rounds up.
  return std::max<uint64_t>(512ull << 20, total / 50);
}

double pcie_link_bandwidth(unsigned generation, unsigned width) {
  // Per lane per direction: transfers/s × payload share of the line code / 8 bits.
  double lane = 0;
  switch (generation) {
    case 1:
      lane = 2.5e9 * 8 / 10 / 8;
      break;
    case 2:
      lane = 5e9 * 8 / 10 / 8;
      break;
    case 3:
      lane = 8e9 * 128 / 130 / 8;
      break;
    case 4:
      lane = 16e9 * 128 / 130 / 8;
      break;
    case 5:
      lane = 32e9 * 128 / 130 / 8;
      break;
    case 6:
      lane = 64e9 * 242 / 256 / 8;
      break;  // PAM4 with 256-byte FLITs
    default:
      return 0;
  }
  return lane * width;
}

int physical_cores() {
  // Distinct (physical id, core id) pairs; hyperthreads share a core and its memory bandwidth.
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::pair<int, int>> cores;
  int physical = 0;
  while (std::getline(in, line)) {
    if (line.rfind("physical id", 0) == 0) physical = std::atoi(line.substr(line.find(':') + 1).c_str());
    if (line.rfind("core id", 0) == 0) cores.insert({physical, std::atoi(line.substr(line.find(':') + 1).c_str())});
  }
  const int logical = static_cast<int>(std::thread::hardware_concurrency());
  if (cores.empty()) return std::max(1, logical);
  return std::max(1, std::min(static_cast<int>(cores.size()), logical));
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      std::string name = line.substr(line.find(':') + 1);
      name.erase(0, name.find_first_not_of(' '));
      return name;
    }
  }
  return "unknown CPU";
}

double measure_cpu_bandwidth(int threads, size_t bytes) {
  threads = std::max(1, threads);
  util::AlignedBuffer buffer(bytes);
  if (!buffer.ok()) return 0;
  const size_t n = bytes / sizeof(uint64_t);
  auto* data = buffer.as<uint64_t>();
  for (size_t i = 0; i < n; i += 512) data[i] = i;  // fault every page in before timing
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<uint64_t> sums(threads);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t begin = n * t / threads, end = n * (t + 1) / threads;
        uint64_t a = 0, b = 0, c = 0, d = 0;
        for (size_t i = begin; i + 4 <= end; i += 4) {
          a += data[i];
          b += data[i + 1];
          c += data[i + 2];
          d += data[i + 3];
        }
        sums[t] = a + b + c + d;
      });
    }
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    volatile uint64_t sink = 0;
    for (uint64_t v : sums) sink = sink + v;
    best = std::max(best, static_cast<double>(bytes) / s);
  }
  return best;
}

double cpu_bandwidth(int threads, std::string* source) {
  const std::string key = fmt::format("{}|{} threads|{} bytes", cpu_model_name(), threads, total_ram());
  const auto path = cache_dir() / "cpu-bandwidth.json";
  nlohmann::json cache = nlohmann::json::object();
  if (std::ifstream in(path); in) {
    try {
      cache = nlohmann::json::parse(in);
    } catch (const std::exception&) {
      cache = nlohmann::json::object();  // a damaged cache is simply measured again
    }
  }
  if (cache.contains(key) && cache[key].is_number()) {
    if (source) *source = fmt::format("measured earlier, cached in {}", path.string());
    return cache[key].get<double>();
  }
  const double bw = measure_cpu_bandwidth(threads, 256ull << 20);
  cache[key] = bw;
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (std::ofstream out(path); out) out << cache.dump(1) << "\n";
  if (source) *source = fmt::format("measured now ({} threads, 256 MiB read, best of 3)", threads);
  return bw;
}

util::Result<std::vector<Device>> detect_devices(const DeviceOptions& options) {
  std::vector<Device> devices;
  Device cpu;
  cpu.kind = DeviceKind::kCpu;
  const int threads = options.threads > 0 ? options.threads : physical_cores();
  cpu.name = fmt::format("cpu ({}, {} threads)", cpu_model_name(), threads);
  cpu.total_bytes = total_ram();
  if (options.cpu_mem) {
    cpu.budget_bytes = *options.cpu_mem;
    cpu.budget_source = "--cpu-mem";
  } else {
    const uint64_t avail = available_ram(), margin = cpu_margin_bytes(cpu.total_bytes);
    cpu.budget_bytes = avail > margin ? avail - margin : 0;
    cpu.budget_source = fmt::format("available RAM {} minus a {} margin (1 GiB or 5% of RAM, the larger)",
                                    util::format_bytes(avail), util::format_bytes(margin));
  }
  if (options.probe) {
    cpu.bandwidth = cpu_bandwidth(threads, &cpu.bandwidth_source);
  } else {
    cpu.bandwidth = 10e9;
    cpu.bandwidth_source = "assumed 10 GB/s (probe disabled)";
  }
  devices.push_back(cpu);

  // Present NVIDIA GPUs. Without NVML (no driver) there are none, and the CPU runs everything.
  if (auto nvml = telemetry::Nvml::open(); nvml) {
    for (const telemetry::GpuReading& g : nvml->read_all(/*pcie_throughput=*/false)) {
      devices.push_back(gpu_device(g, options));
    }
  }

  if (!options.assume_gpu.empty()) {
    // MEM[@BANDWIDTH], e.g. "8G@300" (GB/s). A what-if GPU: nothing is allocated on it.
    Device gpu;
    gpu.kind = DeviceKind::kGpu;
    gpu.simulated = true;
    const auto at = options.assume_gpu.find('@');
    HR_ASSIGN_OR_RETURN(gpu.total_bytes, util::parse_bytes(options.assume_gpu.substr(0, at)));
    double gbps = 300;
    if (at != std::string::npos) {
      char* end = nullptr;
      gbps = std::strtod(options.assume_gpu.c_str() + at + 1, &end);
      if (gbps <= 0 || (end && *end && std::string(end) != "GB/s")) {
        return util::errorf("--assume-gpu '{}': bandwidth must be a positive number of GB/s, e.g. 8G@300",
                            options.assume_gpu);
      }
    }
    gpu.name = fmt::format("assumed GPU ({}, {:.0f} GB/s)", util::format_bytes(gpu.total_bytes), gbps);
    gpu.budget_bytes = options.gpu_mem ? std::min(*options.gpu_mem, gpu.total_bytes) : gpu.total_bytes;
    gpu.budget_source = options.gpu_mem ? "--gpu-mem" : "--assume-gpu";
    gpu.bandwidth = gbps * 1e9;
    gpu.bandwidth_source = "--assume-gpu";
    gpu.link_bandwidth = 25e9;  // PCIe 4.0 x16 in practice
    devices.push_back(gpu);
  }
  return devices;
}

}  // namespace plan

// plan::Device — where bytes can live: the CPU's RAM and each GPU, with a budget and a measured
// bandwidth (the roofline of decode speed).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace plan {

enum class DeviceKind { kCpu, kGpu };

struct Device {
  std::string name;  // "cpu (AMD EPYC, 2 threads)", "cuda:0 NVIDIA H100"
  DeviceKind kind = DeviceKind::kCpu;
  uint64_t total_bytes = 0;              // physical memory
  uint64_t budget_bytes = 0;             // what a plan may use
  std::string budget_source;             // how the budget was set, for the report
  bool budget_is_available_ram = false;  // the budget is what other processes left free now
  double bandwidth = 0;                  // bytes/s a decode step can read, measured
  std::string bandwidth_source;
  double link_bandwidth = 0;    // host ↔ device bytes/s (PCIe) for GPUs
  bool simulated = false;       // from --assume-gpu: a what-if, not present hardware
  bool placeable = true;        // false: present, but headroom cannot run on it (why: below);
                                // the planner leaves it empty
  std::string unusable_reason;  // "this build runs on the CPU: it has no GPU backend yet", …
  int gpu_index = -1;           // GPUs: the index NVML and the GPU backend know it by
};

// The margin of RAM a CPU budget leaves for the OS and other programs.
uint64_t cpu_margin_bytes(uint64_t total);
// The margin of a GPU's free memory its budget leaves for the CUDA context and allocator slack.
uint64_t gpu_margin_bytes(uint64_t total);
// Host ↔ device bytes/s of a PCIe link (after line encoding), or 0 for an unknown generation.
double pcie_link_bandwidth(unsigned generation, unsigned width);

struct DeviceOptions {
  std::optional<uint64_t> cpu_mem;  // --cpu-mem
  std::optional<uint64_t> gpu_mem;  // --gpu-mem
  std::string assume_gpu;           // --assume-gpu MEM[@BANDWIDTH]: plan for a GPU that is not here
  int threads = 0;                  // threads the CPU bandwidth probe uses (0 = all cores)
  bool probe = true;                // measure bandwidth (cached); false = use a stated default
  // Whether headroom can run on GPU `index`: "" when it can, else why not (the plan says it).
  // Null: this build has no GPU backend. The engine supplies it (engine::gpu_backend_check).
  std::function<std::string(int index)> gpu_backend;
};

// The CPU first, then each NVIDIA GPU NVML reports (placeable when options.gpu_backend says so),
// then an --assume-gpu what-if. Without NVML there are no real GPUs; that is not an error.
util::Result<std::vector<Device>> detect_devices(const DeviceOptions& options);

// Best-of-3 streaming read bandwidth (bytes/s) with `threads` threads over `bytes` of RAM.
double measure_cpu_bandwidth(int threads, size_t bytes);

// A bandwidth measurement and the load it was taken under.
struct BandwidthProbe {
  double bytes_per_second = 0;
  double other_cpus_busy = 0;  // CPUs other processes kept busy meanwhile (a build, a second model)
};
BandwidthProbe probe_cpu_bandwidth(int threads, size_t bytes);

// The bytes the plan's probe reads: short enough to keep `plan` instant, past any CPU cache.
inline constexpr size_t kPlanProbeBytes = size_t{256} << 20;

// The CPU's bandwidth with `threads` threads for the plan: cached per machine in
// $XDG_CACHE_HOME/headroom/cpu-bandwidth.json (or ~/.cache/headroom) with when and under what
// load it was measured, and measured again when it no longer holds: older than a week, a
// different CPU, kernel or RAM size, taken under load, or beaten by a run. `source` says which.
double cpu_bandwidth(int threads, std::string* source);
// Stores a measurement for the plans that follow (a loaded one does not replace a quiet one).
void remember_cpu_bandwidth(int threads, const BandwidthProbe& probe);
// A run read memory at `bytes_per_second` from RAM (not from the caches): a cached figure below
// it is stale and is measured again next time.
void report_cpu_bandwidth_achieved(int threads, double bytes_per_second);

int physical_cores();
// The CPU's last-level cache in bytes (what CPU 0 sees): from sysfs, else from CPUID; 0 unknown.
uint64_t last_level_cache_bytes();
// The CPUID figure alone (0 off x86), so tests can check sysfs against it.
uint64_t cpuid_last_level_cache_bytes();
// Where neither describes the caches (some VMs): the largest working set of 1, 2, 4 … 256 MiB
// that `threads` threads read at least 1.5× as fast as RAM (`ram_bytes_per_second`, measured over
// a larger buffer) — the cache these cores can use, as they see it; 0 when even 1 MiB is not.
// "Not even 1 MiB" is confirmed by two more reads, 20 ms apart.
uint64_t measure_cache_bytes(int threads, double ram_bytes_per_second);
std::string cpu_model_name();
// MemAvailable and MemTotal from /proc/meminfo.
uint64_t available_ram();
uint64_t total_ram();

}  // namespace plan

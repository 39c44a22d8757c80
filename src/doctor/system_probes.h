// doctor system probes — memory and CPU use of this process and of the machine, from /proc.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "doctor/gpu_telemetry.h"
#include "doctor/observations.h"
#include "util/cpu_time.h"

namespace doctor {

// Memory now: this process's RSS and major faults, the system's MemAvailable and swap, and how
// much of `weights` (ranges of the model's mapping) is resident.
MemorySample sample_memory(std::span<const std::span<const uint8_t>> weights);

// CPU time counters at one instant, to be differenced.
struct CpuSnapshot {
  util::CpuTicks ticks;
  std::map<int, std::pair<std::string, uint64_t>> processes;  // pid → (name, ticks)
};
CpuSnapshot cpu_snapshot();

// CPUs kept busy by everything but this process between the snapshots, and who.
void fill_cpu_use(const CpuSnapshot& before, const CpuSnapshot& after, ContentionFacts& facts);

int online_cpus();

// Samples memory (and the GPU source, when it can read) every `interval` on its own thread.
class Sampler {
 public:
  Sampler(std::vector<std::span<const uint8_t>> weights, GpuTelemetry* gpu,
          std::chrono::milliseconds interval);
  ~Sampler();
  // Stops sampling (once) and returns what was sampled.
  std::pair<std::vector<MemorySample>, std::vector<GpuSample>> stop();

 private:
  void run();
  std::vector<std::span<const uint8_t>> weights_;
  GpuTelemetry* gpu_;
  std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::vector<MemorySample> memory_;
  std::vector<GpuSample> gpu_samples_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace doctor

// CPU time counters from /proc, to be differenced over an interval: how busy the machine was,
// and how much of that was this process.
#pragma once

#include <chrono>
#include <cstdint>

namespace util {

struct CpuTicks {
  std::chrono::steady_clock::time_point when;
  uint64_t busy = 0, steal = 0;  // clock ticks, all CPUs (/proc/stat)
  uint64_t self = 0;             // this process's user + system ticks (/proc/self/stat)
};
CpuTicks cpu_ticks();

// CPUs kept busy on average between the readings by everything but this process (0 when the
// interval is empty). Tick resolution is 1/CLK_TCK s, so short intervals read coarsely.
double other_busy_cpus(const CpuTicks& before, const CpuTicks& after);

}  // namespace util

// telemetry::GpuMetrics — NVML readings as Prometheus gauges, one set per GPU (label gpu="N"),
// refreshed whenever the caller reads the GPUs (the server does on each /metrics scrape).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "telemetry/metrics.h"
#include "telemetry/nvml.h"

namespace telemetry {

class GpuMetrics {
 public:
  explicit GpuMetrics(Registry& registry) : registry_(registry) {}

  // Sets a gauge for every field each reading has. A series set before whose field is absent
  // now reads NaN, so a scraper never sees a stale value as a current one. Safe from any thread.
  void update(const std::vector<GpuReading>& readings);

 private:
  Registry& registry_;
  std::mutex mutex_;
  std::map<Gauge*, bool> series_;  // every gauge this has set, and whether the last update did
};

}  // namespace telemetry

// doctor::GpuTelemetry — where GPU clocks, temperatures and throttle reasons come from: NVML,
// loaded at run time (telemetry/nvml.h), when the driver is there; tests inject synthetic ones.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "doctor/observations.h"
#include "telemetry/nvml.h"

namespace doctor {

class GpuTelemetry {
 public:
  virtual ~GpuTelemetry() = default;
  // Empty when the source can read; otherwise why it cannot (shown as the check's "not run").
  virtual std::string unavailable() const = 0;
  // One reading per GPU, now.
  virtual std::vector<GpuSample> read() = 0;
};

// The NVIDIA GPU this machine shows the kernel driver ("NVIDIA H100 80GB HBM3"), or empty.
std::string nvidia_gpu_present();

// One NVML reading as the throttling rules read it: absent fields are NaN (no rule fires on them),
// throttle reason bits folded into thermal slowdown, power cap and hardware slowdown.
GpuSample gpu_sample(const telemetry::GpuReading& reading);

// NVML when it opens and reports a GPU; otherwise a source that says why it cannot read (no
// driver, NVML failing, or no GPU), in one line.
std::unique_ptr<GpuTelemetry> default_gpu_telemetry();

}  // namespace doctor

// doctor::GpuTelemetry — where GPU clocks, temperatures and throttle reasons come from. The real
// source (NVML, loaded at run time) comes with the CUDA backend; tests inject synthetic ones.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "doctor/observations.h"

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

// The source for this build: none yet, so it says why (no GPU, or no NVML source in this build).
std::unique_ptr<GpuTelemetry> default_gpu_telemetry();

}  // namespace doctor

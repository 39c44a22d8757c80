// GPU presence from the kernel driver's /proc files, and the telemetry source of this build.
#include "doctor/gpu_telemetry.h"

#include <filesystem>
#include <fstream>

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

}  // namespace

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
  const std::string gpu = nvidia_gpu_present();
  if (gpu.empty()) {
    return std::make_unique<NoGpuTelemetry>(
        "no GPU: not applicable — no NVIDIA GPU found (/proc/driver/nvidia/gpus is absent), so "
        "there are no GPU "
        "clocks to read");
  }
  return std::make_unique<NoGpuTelemetry>("a GPU is present (" + gpu +
                                          ") but this build has no NVML telemetry source yet (it "
                                          "comes with the CUDA backend); check `nvidia-smi -q -d "
                                          "PERFORMANCE` by hand");
}

}  // namespace doctor

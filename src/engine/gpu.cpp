// engine/gpu.h: the CUDA backend when this build has it (HEADROOM_WITH_CUDA), else none.
#include "engine/gpu.h"

#include <fmt/format.h>

#ifdef HEADROOM_WITH_CUDA
#include "kernels/cuda/backend.h"
#endif

namespace engine {

#ifdef HEADROOM_WITH_CUDA

bool gpu_backend_built() {
  return true;
}

std::function<std::string(int)> gpu_backend_check() {
  return [](int index) -> std::string {
    auto devices = kernels::cuda::cuda_devices();
    if (!devices) return fmt::format("CUDA cannot use it ({})", devices.error().message());
    for (const auto& d : *devices) {
      if (d.index == index) return "";
    }
    return fmt::format("CUDA does not list GPU {} (it sees {})", index, devices->size());
  };
}

util::Result<std::unique_ptr<kernels::Backend>> make_gpu_backend(int index) {
  HR_ASSIGN_OR_RETURN(auto backend, kernels::cuda::make_cuda_backend(index));
  return std::unique_ptr<kernels::Backend>(std::move(backend));
}

#else

bool gpu_backend_built() {
  return false;
}

std::function<std::string(int)> gpu_backend_check() {
  return nullptr;
}

util::Result<std::unique_ptr<kernels::Backend>> make_gpu_backend(int index) {
  return util::errorf(
      "GPU {}: this build has no GPU backend — rebuild with nvcc on PATH (docs/cuda.md)", index);
}

#endif

}  // namespace engine

// The GPU backend of this build, for the engine and for whoever plans (the planner asks, through
// plan::DeviceOptions::gpu_backend, which GPUs it may place bytes on).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "kernels/ops.h"
#include "util/result.h"

namespace engine {

// Whether this build has a GPU backend (CUDA, when nvcc was found at configure time).
bool gpu_backend_built();
// For plan::DeviceOptions::gpu_backend: "" when this build can run on GPU `index`, else why not
// (no GPU backend built, no driver, a GPU too old for the architectures built). Null when this
// build has no GPU backend.
std::function<std::string(int index)> gpu_backend_check();
// The backend of GPU `index`, or why there is none.
util::Result<std::unique_ptr<kernels::Backend>> make_gpu_backend(int index);

}  // namespace engine

// The Gemma 4 architecture's loader (its forward pass lives in gemma4.cpp).
#pragma once

#include "model/model.h"

namespace model {

util::Result<std::unique_ptr<Model>> load_gemma4(const gguf::File& file, const Spec& spec, kernels::Backend& ops,
                                                 const LoadOptions& options);
size_t gemma4_workspace_bytes(const Spec& spec, int max_batch, bool device);

}  // namespace model

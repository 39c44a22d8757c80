// The llama architecture's loader (its forward pass lives in llama.cpp).
#pragma once

#include "model/model.h"

namespace model {

util::Result<std::unique_ptr<Model>> load_llama(const gguf::File& file, const Spec& spec, kernels::Backend& ops,
                                                const LoadOptions& options);
size_t llama_workspace_bytes(const Spec& spec, int max_batch, bool device);

}  // namespace model

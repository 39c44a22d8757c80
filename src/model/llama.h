// The llama architecture's loader (its forward pass lives in llama.cpp).
#pragma once

#include "model/model.h"

namespace model {

util::Result<std::unique_ptr<Model>> load_llama(const gguf::File& file, const Spec& spec, kernels::Backend& ops,
                                                const LoadOptions& options);
size_t llama_workspace_bytes(const Spec& spec, int max_batch);

// Shared by the architectures.
kernels::RopeStyle to_kernel(RopeStyle style);
// Fills rows[] with the batch indices whose logits are wanted; returns how many.
int gather_output_rows(const Batch& batch, int32_t* rows);

}  // namespace model

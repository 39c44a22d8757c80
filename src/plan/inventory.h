// plan::Inventory — every weight byte of a model from its GGUF header, by class and layer, and
// how many of those bytes one decoded token reads.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "model/spec.h"

namespace plan {

struct WeightItem {
  std::string name;
  model::TensorClass cls = model::TensorClass::kOther;
  int layer = -1;
  gguf::TensorType type = gguf::TensorType::kF32;
  uint64_t bytes = 0;
  // Bytes one token reads: whole matrices are read in full; gathered tables (embeddings) only
  // one row; MoE experts the chosen share; tensors the model ignores (unused KV on shared layers)
  // none.
  uint64_t bytes_per_token = 0;
  // A table a token looks up by rows (an embedding that is not also the output matrix): it is read
  // row by row, never streamed whole.
  bool gathered = false;
  bool used = true;
  bool host_value = false;  // model::TensorClassification::host_value: stays in the mapping
};

struct Inventory {
  std::vector<WeightItem> weights;
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;       // excludes tensors the forward pass never reads
  uint64_t bytes_per_token = 0;  // weights read per decoded token
  std::array<uint64_t, model::kTensorClassCount> bytes_by_class{};
};

// With `requantized`, the matrices are priced as a file re-quantized to that one type would hold
// them (headroom quantize --type T --pure): each weight matrix whose type has more bits per weight
// and whose rows are whole blocks of T; norms, routers and smaller types stay as they are.
Inventory inventory(const gguf::File& file, const model::Spec& spec,
                    std::optional<gguf::TensorType> requantized = std::nullopt);

}  // namespace plan

// KV geometry per layer and cache row sizes.
#include "kv/geometry.h"

#include <algorithm>

#include "gguf/types.h"

namespace kv {

size_t row_bytes(DType type, int kv_dim) {
  const auto& info = gguf::tensor_type_info(type);
  return static_cast<size_t>(kv_dim) / info.block_size * info.block_bytes;
}

bool is_cache_type(DType type) {
  return type == DType::kF32 || type == DType::kF16 || type == DType::kQ8_0 || type == DType::kQ4_0;
}

util::Status check_cache_type(DType type, int kv_dim, const char* which) {
  const auto& info = gguf::tensor_type_info(type);
  if (!is_cache_type(type)) {
    return util::errorf("KV cache type {} for {} is not supported — use f16, f32, q8_0 or q4_0",
                        info.name, which);
  }
  if (kv_dim % static_cast<int>(info.block_size) != 0) {
    return util::errorf(
        "{} cache type {} stores blocks of {} values but a row has {} — use f16 for this model",
        which, info.name, info.block_size, kv_dim);
  }
  return {};
}

}  // namespace kv

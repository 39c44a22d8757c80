// kv::LayerGeometry — what one layer's KV cache holds; read by the cache and by the planner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor/dtype.h"
#include "util/result.h"

namespace kv {

using tensor::DType;

struct LayerGeometry {
  int il = 0;
  int source = 0;  // layer whose cache this layer reads; == il when it owns one
  bool sliding = false;
  int window = 0;  // W on sliding layers
  int n_head_kv = 0;
  int head_dim = 0;

  bool owns() const { return source == il; }
  int kv_dim() const { return n_head_kv * head_dim; }
};

// Bytes of one token's K (or V) row of `kv_dim` values stored as `type`.
size_t row_bytes(DType type, int kv_dim);
// Whether `type` can hold rows of kv_dim values (block formats need whole blocks); error says why.
util::Status check_cache_type(DType type, int kv_dim, const char* which);
// The cache types headroom can write and read: f32, f16, q8_0, q4_0.
bool is_cache_type(DType type);

}  // namespace kv

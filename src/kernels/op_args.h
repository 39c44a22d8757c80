// The arguments of the ops (kernels/ops.h): plain structs of sizes and device pointers.
//
// Kept apart from ops.h so that CUDA device code can use them: this header includes only
// gguf/types.h, none of the host-only headers (fmt) that nvcc cannot parse.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/types.h"

namespace kernels {

using DType = gguf::TensorType;  // tensor::DType

// The most experts a MoE layer may have (the CPU router keeps one token's probabilities on the
// stack; model::Spec refuses larger files). The largest released models use 384.
inline constexpr int kMaxExperts = 512;

// A weight matrix in its stored format.
struct Matrix {
  const void* data = nullptr;
  DType type = DType::kF32;
  int64_t n_cols = 0;    // input features (GGUF ne[0])
  int64_t n_rows = 0;    // output features (GGUF ne[1])
  size_t row_bytes = 0;  // bytes of one stored row

  // Rows [first, first + count): one expert of a 3-D tensor, or the gate half of gate_up.
  Matrix rows(int64_t first, int64_t count) const {
    return {static_cast<const uint8_t*>(data) + first * row_bytes, type, n_cols, count, row_bytes};
  }
};

// One layer's K/V cache for one sequence, as attention reads it. Cells are grouped in storage
// blocks of `cells_per_block`; cell c lives in block c / cells_per_block at row c %
// cells_per_block.
struct KvSpan {
  DType k_type = DType::kF32;
  DType v_type = DType::kF32;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_cells = 0;  // logical cells to scan
  int cells_per_block = 0;
  const uint8_t* const* k_blocks = nullptr;  // [n_cells / cells_per_block] → rows of k_row_bytes
  const uint8_t* const* v_blocks = nullptr;
  size_t k_row_bytes = 0;  // one token's K for all KV heads ([n_head_kv][head_dim])
  size_t v_row_bytes = 0;
  const int32_t* cell_pos = nullptr;  // [n_cells] position held by each cell, −1 when empty
};

// Attention of a batch of query tokens over their sequences' caches.
struct AttentionBatch {
  int n_tokens = 0;
  int n_head = 0;
  int head_dim = 0;
  const float* q = nullptr;           // [T][n_head][head_dim]
  float* out = nullptr;               // [T][n_head][head_dim]
  const int32_t* pos = nullptr;       // [T] query positions
  const KvSpan* const* kv = nullptr;  // [T] the cache each token attends to
  int window = 0;                     // 0: causal over all keys; W: only keys in (pos − W, pos]
  float scale = 1.0f;                 // multiplies q·k
};

// Where one token's new K and V rows go in the cache.
struct KvWrite {
  uint8_t* k = nullptr;
  uint8_t* v = nullptr;
};

enum class RopeStyle { kAdjacent, kRotateHalf };

struct RopeParams {
  RopeStyle style = RopeStyle::kAdjacent;
  int n_rot = 0;                    // dims of the head that rotate (even)
  const float* inv_freq = nullptr;  // [n_rot/2] angle per position of each pair
};

}  // namespace kernels

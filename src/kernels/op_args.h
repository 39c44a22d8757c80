// The arguments of the ops (kernels/ops.h): plain structs of sizes and device pointers.
//
// Kept apart from ops.h so that CUDA device code can use them: this header includes only
// gguf/types.h, none of the host-only headers (fmt) that nvcc cannot parse.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/types.h"

// Functions both the host and CUDA device code call.
#if defined(__CUDACC__)
#define HR_HOST_DEVICE __host__ __device__
#else
#define HR_HOST_DEVICE
#endif

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
  // [T] or null. A token inside an image its model sees both ways (Gemma 4 31B/26B) also sees
  // the keys after it up to attend_until[t] (the image's last position); the window then bounds
  // both sides: |p − pos| < W. Equal to pos[t] for every other token.
  const int32_t* attend_until = nullptr;
};

// Whether a cache cell holding position p (−1: empty) is visible to a query at q_pos that may
// see up to `until` (≥ q_pos): the rule every attention kernel applies (AttentionBatch).
HR_HOST_DEVICE inline bool key_visible(int32_t p, int32_t q_pos, int32_t until, int window) {
  if (p < 0 || p > (until > q_pos ? until : q_pos)) return false;
  return window == 0 || (p > q_pos - window && p < q_pos + window);
}

// Where one token's new K and V rows go in the cache.
struct KvWrite {
  uint8_t* k = nullptr;
  uint8_t* v = nullptr;
};

// Local attention of an audio conformer (Gemma 4's, after USM): token t attends the tokens j in
// (t − window, t] of the one sequence, with a learned bias by distance and a logit softcap:
//   s_j = softcap · tanh((q_t · k_j + q_t · rel[t − j]) / softcap),  out_t = Σ_j softmax(s)_j v_j
struct LocalAttention {
  int n_tokens = 0;
  int n_head = 0;
  int head_dim = 0;
  int window = 0;
  float softcap = 0;
  const float* q = nullptr;    // [T][n_head][head_dim]
  const float* k = nullptr;    // [T][n_head][head_dim]
  const float* v = nullptr;    // [T][n_head][head_dim]
  const float* rel = nullptr;  // [window][n_head][head_dim], row d for distance d
  float* out = nullptr;        // [T][n_head][head_dim]
};

// The patches of a 3×3, stride-2, padding-1 convolution over (time, frequency) of a channels-last
// input x [time][n_freq][n_channels], for output times [t_out_first, t_out_first + t_out_count):
//   out[(t − t_out_first)·F' + f][(c·3 + i)·3 + j] = x[2t + i − 1][2f + j − 1][c],  F' = ⌈F/2⌉
// (the column order of a PyTorch Conv2d weight [out][in][3][3]). Inputs outside time
// [0, t_valid) or frequency [0, n_freq) read as 0. `x` holds input times [t_first, t_first +
// t_count); every time the patches read below t_valid must be among them.
struct Im2Col3x3S2 {
  const float* x = nullptr;
  int64_t t_first = 0, t_count = 0, t_valid = 0;
  int n_freq = 0, n_channels = 0;
  int64_t t_out_first = 0, t_out_count = 0;
  float* out = nullptr;  // [t_out_count · ⌈n_freq/2⌉][n_channels · 9]
};

enum class RopeStyle { kAdjacent, kRotateHalf };

struct RopeParams {
  RopeStyle style = RopeStyle::kAdjacent;
  int n_rot = 0;                    // dims of the head that rotate (even)
  const float* inv_freq = nullptr;  // [n_rot/2] angle per position of each pair
};

}  // namespace kernels

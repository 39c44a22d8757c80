// The op interface: every operation a forward pass needs, implemented once per device.
//
// Shapes use the vocabulary of spec §0.1: T tokens in the batch, H = n_embd, activations are
// f32 row-major [T][width]. A weight matrix is stored as GGUF stores it: n_rows rows of n_cols
// values, so `y = W·x` means y[r] = dot(row r, x). Pointers are on the backend's device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tensor/dtype.h"

namespace kernels {

using tensor::DType;

// The most experts a MoE layer may have (the CPU router keeps one token's probabilities on the
// stack; model::Spec refuses larger files). The largest released models use 384.
inline constexpr int kMaxExperts = 512;

// A weight matrix in its stored format.
struct Matrix {
  const void* data = nullptr;
  DType type = DType::kF32;
  int64_t n_cols = 0;      // input features (GGUF ne[0])
  int64_t n_rows = 0;      // output features (GGUF ne[1])
  size_t row_bytes = 0;    // bytes of one stored row

  // Rows [first, first + count): one expert of a 3-D tensor, or the gate half of gate_up.
  Matrix rows(int64_t first, int64_t count) const {
    return {static_cast<const uint8_t*>(data) + first * row_bytes, type, n_cols, count, row_bytes};
  }
};

// One layer's K/V cache for one sequence, as attention reads it. Cells are grouped in storage
// blocks of `cells_per_block`; cell c lives in block c / cells_per_block at row c % cells_per_block.
struct KvSpan {
  DType k_type = DType::kF32;
  DType v_type = DType::kF32;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_cells = 0;                     // logical cells to scan
  int cells_per_block = 0;
  const uint8_t* const* k_blocks = nullptr;  // [n_cells / cells_per_block] → rows of k_row_bytes
  const uint8_t* const* v_blocks = nullptr;
  size_t k_row_bytes = 0;              // one token's K for all KV heads ([n_head_kv][head_dim])
  size_t v_row_bytes = 0;
  const int32_t* cell_pos = nullptr;   // [n_cells] position held by each cell, −1 when empty
};

// Attention of a batch of query tokens over their sequences' caches.
struct AttentionBatch {
  int n_tokens = 0;
  int n_head = 0;
  int head_dim = 0;
  const float* q = nullptr;        // [T][n_head][head_dim]
  float* out = nullptr;            // [T][n_head][head_dim]
  const int32_t* pos = nullptr;    // [T] query positions
  const KvSpan* const* kv = nullptr;  // [T] the cache each token attends to
  int window = 0;                  // 0: causal over all keys; W: only keys in (pos − W, pos]
  float scale = 1.0f;              // multiplies q·k
};

// Where one token's new K and V rows go in the cache.
struct KvWrite {
  uint8_t* k = nullptr;
  uint8_t* v = nullptr;
};

enum class RopeStyle { kAdjacent, kRotateHalf };

struct RopeParams {
  RopeStyle style = RopeStyle::kAdjacent;
  int n_rot = 0;                   // dims of the head that rotate (even)
  const float* inv_freq = nullptr; // [n_rot/2] angle per position of each pair
};

// A device's implementation of every op. One instance per device; the CPU one carries its
// thread pool. Implementations: kernels::ref (scalar truth), kernels::cpu, kernels::cuda.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // Bytes of working memory the backend holds for its kernels (planned with the activations).
  virtual size_t scratch_bytes() const { return 0; }

  // y[t] = W · x[t] for t < T.   x: [T][n_cols], y: [T][n_rows]
  virtual void matmul(const Matrix& w, const float* x, float* y, int n_tokens) = 0;
  // out[i] = scale · row ids[i] of `table` dequantized.   out: [n][n_cols]
  virtual void get_rows(const Matrix& table, const int32_t* ids, int n, float scale, float* out) = 0;
  // Each of n_rows rows of length n: y = x / sqrt(mean(x²) + eps) ⊙ w (w may be null). In place ok.
  virtual void rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows, float eps) = 0;
  // Rotates the first n_rot dims of every head of x: [T][n_head][head_dim], in place.
  virtual void rope(float* x, int n_tokens, int n_head, int head_dim, const int32_t* pos,
                    const RopeParams& p) = 0;
  virtual void attention(const AttentionBatch& batch) = 0;
  // Quantizes K/V rows ([T][kv_dim] each) into the cache rows named by `dst`.
  virtual void store_kv(DType k_type, DType v_type, int kv_dim, const float* k, const float* v,
                        const KvWrite* dst, int n_tokens) = 0;

  // Elementwise over n values.
  virtual void add(float* y, const float* x, int64_t n) = 0;          // y += x
  virtual void mul(float* y, const float* x, int64_t n) = 0;          // y *= x
  virtual void scale(float* y, float s, int64_t n) = 0;               // y *= s
  virtual void softcap(float* y, float cap, int64_t n) = 0;           // y = cap·tanh(y/cap)
  // out = act(gate) ⊙ up over [n_rows][n]; gate/up rows are `stride` apart (fused gate_up).
  virtual void silu_mul(const float* gate, const float* up, float* out, int64_t n, int64_t n_rows,
                        int64_t stride) = 0;
  virtual void gelu_mul(const float* gate, const float* up, float* out, int64_t n, int64_t n_rows,
                        int64_t stride) = 0;
  virtual void copy(float* y, const float* x, int64_t n) = 0;
  // MoE routing per token (spec §2.3 step 7): softmax over n_expert logits, the top k by
  // probability (ties → lower id), weights renormalised over the k, then times expert_scale[e]
  // (null = 1).   logits: [T][n_expert] → ids, weights: [T][k]
  virtual void moe_route(const float* logits, int n_tokens, int n_expert, int k, const float* expert_scale,
                         int32_t* ids, float* weights) = 0;
  // Copies an [n_rows][n] block between row strides (slicing per-layer inputs, gathering rows).
  virtual void copy_rows(float* y, int64_t y_stride, const float* x, int64_t x_stride, int64_t n,
                         int64_t n_rows) = 0;
};

}  // namespace kernels

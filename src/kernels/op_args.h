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
  // [T] each, or both null. A token inside an image its model sees both ways (Gemma 4 31B/26B, on
  // sliding layers) also sees every key of that image, [attend_from[t], attend_until[t]] (its
  // first and last positions), whatever the window — Hugging Face's mask for image groups, OR'ed
  // with the causal one. Both equal to pos[t] for every other token.
  const int32_t* attend_from = nullptr;
  const int32_t* attend_until = nullptr;
  // The 8-bit form of `out` (act_q8.h) for the matmul after it, or null.
  void* out_q8 = nullptr;
  // Working memory for a device that splits a decode batch's context into chunks (each chunk's
  // softmax state, then their combination): [T][n_head][kAttnMaxSplits][head_dim + 2] floats, given
  // for T ≤ kActQ8MaxTokens; null: no split. Host backends ignore it.
  float* partials = nullptr;
};

// The most chunks a device splits one query head's context into (AttentionBatch::partials).
inline constexpr int kAttnMaxSplits = 16;

// Floats of AttentionBatch::partials for n_tokens tokens of n_head query heads of head_dim.
inline constexpr size_t attn_partials_floats(size_t n_tokens, size_t n_head, size_t head_dim) {
  return n_tokens * n_head * kAttnMaxSplits * (head_dim + 2);
}

// Whether a cache cell holding position p (−1: empty) is visible to a query at q_pos whose image
// spans [from, until] (from = until = q_pos outside images): the rule every attention kernel
// applies (AttentionBatch).
HR_HOST_DEVICE inline bool key_visible(int32_t p, int32_t q_pos, int32_t from, int32_t until,
                                       int window) {
  if (p < 0) return false;
  if (p >= from && p <= until) return true;
  return p <= q_pos && (window == 0 || p > q_pos - window);
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

// --- The fused ops' arguments (ops.h, "Fused ops") -------------------------------------------

enum class GluActivation { kSilu, kGelu };

// One product of matmuls(): y = w · x.
struct MatmulOut {
  Matrix w;
  float* y = nullptr;  // [T][w.n_rows]
};

// Activations a matmul reads: f32 rows and, for decode batches on a backend that quantizes
// activations (Backend::quantizes_activations), their 8-bit form (act_q8.h) written by the op that
// produced them — null where there is none.
struct Activations {
  const float* f32 = nullptr;  // [T][n_cols]
  const void* q8 = nullptr;
};

// out = act(gate · x) ⊙ up, where up is (up_w · x), or, without up_w, rows of a given array
// (Gemma 4's per-layer-input gate: up_rows[t · up_stride + i]).
struct GluMatmul {
  Matrix gate;
  Matrix up;  // data null: up_rows is the second factor
  const float* up_rows = nullptr;
  int64_t up_stride = 0;
  GluActivation act = GluActivation::kGelu;
  Activations x;
  int n_tokens = 0;
  float* out = nullptr;      // [T][gate.n_rows]
  void* out_q8 = nullptr;    // its 8-bit form, or null
  float* scratch = nullptr;  // [T][gate.n_rows]: where the composed default puts the second factor
};

// The step of the residual stream between two matmuls (one kernel on a device):
//   b = Σ_i norm(branch_i; branch_norm_i)      a branch without a norm weight is added as it is
//   b = norm(b; sum_norm)                      when sum_norm is set
//   x = (x + b) · x_scale
//   then each output j: y_j = (normalize_j ? rmsnorm(x) ⊙ w_j : x) · scale_j ⊙ mul_j
// The final b is written back over branch[0] (the traced "attn_out"/"ffn_out"), and a normed
// branch[1] over itself, so nothing a trace reads is lost. Without branch[0] x is left as it is and
// only the outputs are made (the first layer's input norm).
struct ResidualNorm {
  int64_t n = 0;   // values per row (n_embd)
  int n_rows = 0;  // tokens
  float eps = 0;
  float* x = nullptr;                     // [T][n], updated in place
  float* branch[2] = {nullptr, nullptr};  // [T][n] or null
  const float* branch_norm[2] = {nullptr, nullptr};
  const float* sum_norm = nullptr;
  float x_scale = 1.0f;
  struct Output {
    bool normalize = false;
    const float* w = nullptr;  // [n] or null (normalize without a weight)
    float scale = 1.0f;
    const float* mul = nullptr;  // [n] or null
    float* y = nullptr;          // [T][n]; null when y would be x itself (only y_q8 is wanted)
    void* y_q8 = nullptr;        // 8-bit form of y (of x when y is null), or null
  };
  Output out[3];
  int n_out = 0;
};

// Before attention: per-head RMSNorm and RoPE of q and k, V's weightless norm, and K/V into the
// cache, in the order the reference computes them:
//   v = k (before k's norm) when v_from_k; q = rope(norm(q; q_norm)); k = rope(norm(k; k_norm));
//   v = norm(v) when v_norm; store k, v at dst.
// A norm weight that is null means no norm (llama). Without k (a KV-shared layer) only q is
// prepared. q, k and v are written back in place.
struct AttnPrep {
  int n_tokens = 0;
  int n_head = 0, n_head_kv = 0, head_dim = 0;
  float eps = 0;
  float* q = nullptr;  // [T][n_head][head_dim]
  const float* q_norm = nullptr;
  float* k = nullptr;  // [T][n_head_kv][head_dim], null for a layer that reads another's cache
  const float* k_norm = nullptr;
  float* v = nullptr;  // [T][n_head_kv][head_dim]
  bool v_from_k = false;
  bool v_norm = false;
  const int32_t* pos = nullptr;  // [T]
  RopeParams rope;
  DType k_type = DType::kF32, v_type = DType::kF32;
  const KvWrite* dst = nullptr;  // [T]
};

// A MoE layer's routing and its experts' gate/up (Gemma 4 26B-A4B), for each token t and each of
// its k chosen experts e (slot j): h[t][j] = gelu(G_e · x_t) ⊙ (U_e · x_t). The routing is
// moe_route's over router_logits, written to ids and weights for moe_down.
struct MoeGlu {
  const float* router_logits = nullptr;  // [T][n_expert]
  int n_expert = 0, k = 0;
  const float* expert_scale = nullptr;  // [n_expert] or null
  int32_t* ids = nullptr;               // [T][k]
  float* weights = nullptr;             // [T][k]
  Matrix gate_up;   // fused: [n_expert · 2F] rows, gate then up per expert; data null when unfused
  Matrix gate, up;  // unfused: [n_expert · F] rows each
  int64_t n_ff = 0;  // F
  Activations x;     // [T][n_cols]
  int n_tokens = 0;
  float* h = nullptr;    // [T][k][F]
  void* h_q8 = nullptr;  // its 8-bit form ([T·k] rows), or null
  // Where the composed default gathers an expert's tokens: [T][n_cols], [T][2F], [T][F].
  float *scratch_in = nullptr, *scratch_gu = nullptr, *scratch_h = nullptr;
};

// The experts' down projections, weighted and summed per token:
//   out[t] = Σ_j weights[t][j] · D_ids[t][j] · h[t][j]      (experts in ascending id order)
struct MoeDown {
  Matrix down;  // [n_expert · H] rows
  int n_expert = 0, k = 0;
  const int32_t* ids = nullptr;  // [T][k]
  const float* weights = nullptr;
  Activations h;  // [T·k][F]
  int n_tokens = 0;
  float* out = nullptr;  // [T][H]
  // Where the composed default gathers an expert's rows: [T][F] and [T][H].
  float *scratch_in = nullptr, *scratch_out = nullptr;
};

// --- LoRA adapters (model/lora.h) ------------------------------------------------------------

// One adapter's low-rank update of a matrix product, in f32: A [rank][n_cols], B [n_rows][rank]
// with the adapter's alpha / rank already multiplied into B. scale[t] is, per token of the batch,
// the scale of the request the token belongs to when it runs under this adapter, else 0: the
// token is left alone.
struct LoraTerm {
  const float* a = nullptr;  // [rank][n_cols]
  const float* b = nullptr;  // [n_rows][rank]
  int rank = 0;
  const float* scale = nullptr;  // [T]
};

// The LoRA terms of one product y = W · x, added to what it made, term after term:
//   y[t] += scale_i[t] · B_i · (A_i · x[t])      for the tokens with scale_i[t] ≠ 0
struct LoraDelta {
  const LoraTerm* terms = nullptr;  // [n_terms], read on the host (like matmuls' outputs)
  int n_terms = 0;
  int64_t n_cols = 0, n_rows = 0;
  const float* x = nullptr;  // [T][n_cols]
  float* y = nullptr;        // [T][n_rows]
  int n_tokens = 0;
  float* scratch = nullptr;  // [T][largest rank]: working memory (scale · A · x); ref needs none
};

// A piece of the step upload that scatter() moves to where it belongs.
struct ScatterPiece {
  void* dst = nullptr;
  uint32_t offset = 0;  // into the uploaded block
  uint32_t bytes = 0;
};

}  // namespace kernels

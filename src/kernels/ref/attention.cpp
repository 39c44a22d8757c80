// Reference attention over a paged, possibly quantized KV cache (two-pass softmax).
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/ref/ref.h"
#include "tensor/dequantize.h"

namespace kernels::ref {
namespace {

const uint8_t* cell_row(const uint8_t* const* blocks, int cells_per_block, size_t row_bytes, int cell) {
  return blocks[cell / cells_per_block] + static_cast<size_t>(cell % cells_per_block) * row_bytes;
}

}  // namespace

// For query token t, head h (KV head g = h / (n_head / n_head_kv)):
//   s_c = scale · q[t][h] · K[c][g]     over cells c whose position p satisfies
//         p ≤ pos[t] and (window == 0 or p > pos[t] − window)
//   or attend_from[t] ≤ p ≤ attend_until[t] (the token's image, when it sees it both ways)
//   out[t][h] = Σ_c softmax(s)_c · V[c][g]
void attention(const AttentionBatch& b) {
  std::vector<float> k_row, v_row, scores;
  std::vector<double> acc(b.head_dim);
  for (int t = 0; t < b.n_tokens; ++t) {
    const KvSpan& kv = *b.kv[t];
    const int kv_dim = kv.n_head_kv * kv.head_dim;
    const int group = b.n_head / kv.n_head_kv;
    const int32_t q_pos = b.pos[t];
    const int32_t from = b.attend_from ? b.attend_from[t] : q_pos;
    const int32_t until = b.attend_until ? b.attend_until[t] : q_pos;
    k_row.resize(kv_dim);
    v_row.resize(kv_dim);
    for (int h = 0; h < b.n_head; ++h) {
      const int g = h / group;
      const float* q = b.q + (static_cast<int64_t>(t) * b.n_head + h) * b.head_dim;
      float* out = b.out + (static_cast<int64_t>(t) * b.n_head + h) * b.head_dim;
      // Pass 1: scores of visible cells and their maximum.
      scores.assign(kv.n_cells, -std::numeric_limits<float>::infinity());
      float max_score = -std::numeric_limits<float>::infinity();
      for (int c = 0; c < kv.n_cells; ++c) {
        const int32_t p = kv.cell_pos[c];
        if (!key_visible(p, q_pos, from, until, b.window)) continue;
        (void)tensor::dequantize_row(kv.k_type, cell_row(kv.k_blocks, kv.cells_per_block, kv.k_row_bytes, c),
                                     k_row.data(), kv_dim);
        double dot = 0;
        for (int i = 0; i < b.head_dim; ++i) dot += static_cast<double>(q[i]) * k_row[g * kv.head_dim + i];
        scores[c] = static_cast<float>(dot * b.scale);
        max_score = std::max(max_score, scores[c]);
      }
      // Pass 2: normalised weights and the weighted sum of values.
      std::fill(acc.begin(), acc.end(), 0.0);
      double denom = 0;
      for (int c = 0; c < kv.n_cells; ++c) {
        if (scores[c] == -std::numeric_limits<float>::infinity()) continue;
        const double w = std::exp(static_cast<double>(scores[c]) - max_score);
        denom += w;
        (void)tensor::dequantize_row(kv.v_type, cell_row(kv.v_blocks, kv.cells_per_block, kv.v_row_bytes, c),
                                     v_row.data(), kv_dim);
        for (int i = 0; i < b.head_dim; ++i) acc[i] += w * v_row[g * kv.head_dim + i];
      }
      for (int i = 0; i < b.head_dim; ++i) out[i] = denom > 0 ? static_cast<float>(acc[i] / denom) : 0.0f;
    }
  }
}

}  // namespace kernels::ref

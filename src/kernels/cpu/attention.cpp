// CpuBackend::attention: one pass over the cache per (token, head) with an online softmax (running
// maximum and sum), reading K and V rows in their stored type and dequantizing only the blocks
// that cover the head into a small buffer on the stack.
#include <cmath>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu/backend.h"
#include "tensor/dequantize.h"

namespace kernels::cpu {
namespace {

constexpr int kMaxHeadDim = 1024;  // model::kMaxHeadDim: the kernels sit below model
constexpr int kMaxBlock = 32;  // values per block of the cache types (f32/f16: 1, q8_0/q4_0: 32)

#if defined(__x86_64__)
// f16 → f32 with F16C, 8 at a time (the portable converter is bit-exact too, but ~10× slower,
// and f16 is the default cache type).
__attribute__((target("avx2,f16c"))) void f16_to_f32_f16c(const uint16_t* src, float* dst, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
}
const bool kHasF16c = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#endif

// Dequantizes the values [first, first + count) of a cache row into `out`, decoding only the
// blocks that cover them. Returns a pointer to value `first`.
const float* head_slice(DType type, const uint8_t* row, int first, int count, float* buffer) {
#if defined(__x86_64__)
  if (type == DType::kF16 && kHasF16c) {
    f16_to_f32_f16c(reinterpret_cast<const uint16_t*>(row) + first, buffer, count);
    return buffer;
  }
#endif
  const int block = static_cast<int>(tensor::block_values(type));
  const int b0 = first / block, b1 = (first + count + block - 1) / block;
  const uint8_t* src = row + tensor::row_bytes(type, static_cast<int64_t>(b0) * block);
  // Cache types are checked when the cache is planned (kv::check_cache_type): always decodable.
  (void)tensor::dequantize_row(type, src, buffer, static_cast<int64_t>(b1 - b0) * block);
  return buffer + (first - b0 * block);
}

}  // namespace

void CpuBackend::attention(const AttentionBatch& b) {
  pool_.parallel_for(b.n_tokens * b.n_head, [&](int task, int) {
    const int t = task / b.n_head, h = task % b.n_head;
    const KvSpan& kv = *b.kv[t];
    const int g = h / (b.n_head / kv.n_head_kv);
    const int d = b.head_dim;
    const int32_t q_pos = b.pos[t];
    const float* q = b.q + (static_cast<int64_t>(t) * b.n_head + h) * d;
    float* out = b.out + (static_cast<int64_t>(t) * b.n_head + h) * d;

    float k_buffer[kMaxHeadDim + 2 * kMaxBlock], v_buffer[kMaxHeadDim + 2 * kMaxBlock],
        acc[kMaxHeadDim];
    float max_score = -std::numeric_limits<float>::infinity(), sum = 0.0f;
    for (int i = 0; i < d; ++i) acc[i] = 0.0f;
    for (int c = 0; c < kv.n_cells; ++c) {
      const int32_t p = kv.cell_pos[c];
      if (p < 0 || p > q_pos || (b.window > 0 && p <= q_pos - b.window)) continue;
      const size_t in_block = static_cast<size_t>(c % kv.cells_per_block);
      const uint8_t* k_row = kv.k_blocks[c / kv.cells_per_block] + in_block * kv.k_row_bytes;
      const float* k = head_slice(kv.k_type, k_row, g * kv.head_dim, d, k_buffer);
      float dot = 0.0f;
      for (int i = 0; i < d; ++i) dot += q[i] * k[i];
      const float score = dot * b.scale;
      // Rescale what was accumulated when a new maximum appears; exp(−inf) = 0 on the first cell.
      if (score > max_score) {
        const float correction = std::exp(max_score - score);
        for (int i = 0; i < d; ++i) acc[i] *= correction;
        sum *= correction;
        max_score = score;
      }
      const float weight = std::exp(score - max_score);
      sum += weight;
      const uint8_t* v_row = kv.v_blocks[c / kv.cells_per_block] + in_block * kv.v_row_bytes;
      const float* v = head_slice(kv.v_type, v_row, g * kv.head_dim, d, v_buffer);
      for (int i = 0; i < d; ++i) acc[i] += weight * v[i];
    }
    for (int i = 0; i < d; ++i) out[i] = sum > 0.0f ? acc[i] / sum : 0.0f;
  });
}

}  // namespace kernels::cpu

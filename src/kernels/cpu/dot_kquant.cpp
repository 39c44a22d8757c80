// Dot kernels of the K-quant super-block types (Q4_K, Q5_K, Q6_K) against Q8_K activations, at
// the portable scalar level and with AVX2. AVX-512 machines use the AVX2 kernels (dot_kernel()
// steps down). IQ4_XS has no kernel yet: matmul dequantizes its rows.
//
// Tokens are processed one after another, each with its own accumulators and the same order of
// operations, so a token's result never depends on the batch.
#include <cstring>

#include "kernels/cpu/dot.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/quantize.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kernels::cpu::detail {
namespace {

using tensor::BlockQ4_K;
using tensor::BlockQ5_K;
using tensor::BlockQ6_K;
using tensor::BlockQ8_K;
using tensor::f16_to_f32;

void to_q8_k(const float* x, void* out, int64_t n) {
  tensor::quantize_row_q8_k(x, static_cast<BlockQ8_K*>(out), n);
}

// The 6-bit scale and min of sub-block j of a Q4_K / Q5_K super-block (layout in blocks.h).
void scale_min(const uint8_t* scales, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Σ_j m_j · (sum of the 32 activations of sub-block j), the min term of Q4_K and Q5_K.
int min_term(const uint8_t* scales, const BlockQ8_K& y) {
  int total = 0;
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    scale_min(scales, j, &sc, &m);
    total += m * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
  }
  return total;
}

// --- Portable scalar kernels ---------------------------------------------------------------------

// The 256 unsigned quants of a Q4_K / Q5_K super-block in value order.
void unpack(const BlockQ4_K& b, uint8_t q[256]) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = b.qs[32 * c + l] & 0x0F;
      q[64 * c + 32 + l] = b.qs[32 * c + l] >> 4;
    }
  }
}
void unpack(const BlockQ5_K& b, uint8_t q[256]) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = (b.qs[32 * c + l] & 0x0F) | ((b.qh[l] >> (2 * c)) & 1) << 4;
      q[64 * c + 32 + l] = (b.qs[32 * c + l] >> 4) | ((b.qh[l] >> (2 * c + 1)) & 1) << 4;
    }
  }
}

template <class Block>
void scalar_q45_k(int64_t n, const void* w, const void* x, size_t x_stride, int n_tokens,
                  float* out, size_t out_stride) {
  const auto* wb = static_cast<const Block*>(w);
  for (int t = 0; t < n_tokens; ++t) {
    const auto* yb =
        reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) + t * x_stride);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 256; ++b) {
      uint8_t q[256];
      unpack(wb[b], q);
      int sumi = 0;
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        scale_min(wb[b].scales, j, &sc, &m);
        int dot = 0;
        for (int i = 32 * j; i < 32 * j + 32; ++i) dot += q[i] * yb[b].qs[i];
        sumi += sc * dot;
      }
      const float d = f16_to_f32(wb[b].d) * yb[b].d, dmin = f16_to_f32(wb[b].dmin) * yb[b].d;
      sum +=
          d * static_cast<float>(sumi) - dmin * static_cast<float>(min_term(wb[b].scales, yb[b]));
    }
    out[t * out_stride] = sum;
  }
}

// Value i of a Q6_K super-block, 0..63 (layout in blocks.h).
int q6(const BlockQ6_K& b, int i) {
  const int h = i / 128, r = i % 128, l = r % 32, quarter = r / 32;
  const uint8_t* ql = b.ql + 64 * h;
  const uint8_t* qh = b.qh + 32 * h;
  const int low = quarter == 0   ? ql[l] & 0x0F
                  : quarter == 1 ? ql[l + 32] & 0x0F
                  : quarter == 2 ? ql[l] >> 4
                                 : ql[l + 32] >> 4;
  return low | ((qh[l] >> (2 * quarter)) & 3) << 4;
}

// Σ_s sc_s · bsum_s: with it the −32 offset of Q6_K is applied once per super-block.
int q6_offset_term(const BlockQ6_K& b, const BlockQ8_K& y) {
  int total = 0;
  for (int s = 0; s < 16; ++s) total += b.scales[s] * y.bsums[s];
  return total;
}

void scalar_q6_k(int64_t n, const void* w, const void* x, size_t x_stride, int n_tokens, float* out,
                 size_t out_stride) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  for (int t = 0; t < n_tokens; ++t) {
    const auto* yb =
        reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) + t * x_stride);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 256; ++b) {
      int sumi = 0;
      for (int s = 0; s < 16; ++s) {
        int dot = 0;
        for (int i = 16 * s; i < 16 * s + 16; ++i) dot += q6(wb[b], i) * yb[b].qs[i];
        sumi += wb[b].scales[s] * dot;
      }
      sumi -= 32 * q6_offset_term(wb[b], yb[b]);
      sum += f16_to_f32(wb[b].d) * yb[b].d * static_cast<float>(sumi);
    }
    out[t * out_stride] = sum;
  }
}

// --- AVX2 kernels
// ---------------------------------------------------------------------------------

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

__m256i load32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// Σ_j sc_j · Σ_{i∈j} q_i·y_i for a Q4_K / Q5_K super-block, exact in int32 (like the scalar one).
template <bool kFifthBit, class Block>
int q45_k_sumi(const Block& b, const BlockQ8_K& y) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256i qh = _mm256_setzero_si256();
  if constexpr (kFifthBit) qh = load32(b.qh);
  __m256i acc = _mm256_setzero_si256();
  for (int c = 0; c < 4; ++c) {
    int sc_lo, sc_hi, m;
    scale_min(b.scales, 2 * c, &sc_lo, &m);
    scale_min(b.scales, 2 * c + 1, &sc_hi, &m);
    const __m256i packed = load32(b.qs + 32 * c);
    __m256i lo = _mm256_and_si256(packed, low4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
    if constexpr (kFifthBit) {
      const __m256i bit = _mm256_set1_epi8(1);
      lo = _mm256_or_si256(
          lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), bit), 4));
      hi = _mm256_or_si256(
          hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), bit), 4));
    }
    const __m256i p_lo = _mm256_maddubs_epi16(lo, load32(y.qs + 64 * c));
    const __m256i p_hi = _mm256_maddubs_epi16(hi, load32(y.qs + 64 * c + 32));
    acc = _mm256_add_epi32(acc,
                           _mm256_madd_epi16(p_lo, _mm256_set1_epi16(static_cast<int16_t>(sc_lo))));
    acc = _mm256_add_epi32(acc,
                           _mm256_madd_epi16(p_hi, _mm256_set1_epi16(static_cast<int16_t>(sc_hi))));
  }
  return hsum_i32(acc);
}

template <bool kFifthBit, class Block>
void avx2_q45_k(int64_t n, const void* w, const void* x, size_t x_stride, int n_tokens, float* out,
                size_t out_stride) {
  const auto* wb = static_cast<const Block*>(w);
  for (int t = 0; t < n_tokens; ++t) {
    const auto* yb =
        reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) + t * x_stride);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 256; ++b) {
      const int sumi = q45_k_sumi<kFifthBit>(wb[b], yb[b]);
      const float d = _cvtsh_ss(wb[b].d) * yb[b].d, dmin = _cvtsh_ss(wb[b].dmin) * yb[b].d;
      sum +=
          d * static_cast<float>(sumi) - dmin * static_cast<float>(min_term(wb[b].scales, yb[b]));
    }
    out[t * out_stride] = sum;
  }
}

// Σ_s sc_s · Σ_{i∈s} q_i·y_i over a Q6_K super-block with q unsigned (0..63).
int q6_k_sumi(const BlockQ6_K& b, const BlockQ8_K& y) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(3);
  __m256i acc = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    const __m256i ql0 = load32(b.ql + 64 * h), ql1 = load32(b.ql + 64 * h + 32),
                  qh = load32(b.qh + 32 * h);
    const __m256i quarters[4] = {
        _mm256_or_si256(_mm256_and_si256(ql0, low4),
                        _mm256_slli_epi16(_mm256_and_si256(qh, two), 4)),
        _mm256_or_si256(_mm256_and_si256(ql1, low4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), two), 4)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), two), 4)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), two), 4)),
    };
    for (int k = 0; k < 4; ++k) {
      // 32 values = sub-blocks s and s + 1 (16 each): the low 8 int16 lanes hold s, the high 8 s
      // + 1.
      const int s = 8 * h + 2 * k;
      const __m256i p = _mm256_maddubs_epi16(quarters[k], load32(y.qs + 128 * h + 32 * k));
      const __m256i scales =
          _mm256_set_m128i(_mm_set1_epi16(b.scales[s + 1]), _mm_set1_epi16(b.scales[s]));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, scales));
    }
  }
  return hsum_i32(acc);
}

void avx2_q6_k(int64_t n, const void* w, const void* x, size_t x_stride, int n_tokens, float* out,
               size_t out_stride) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  for (int t = 0; t < n_tokens; ++t) {
    const auto* yb =
        reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) + t * x_stride);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 256; ++b) {
      const int sumi = q6_k_sumi(wb[b], yb[b]) - 32 * q6_offset_term(wb[b], yb[b]);
      sum += _cvtsh_ss(wb[b].d) * yb[b].d * static_cast<float>(sumi);
    }
    out[t * out_stride] = sum;
  }
}

#pragma GCC pop_options
#endif

}  // namespace

DotKernel dot_kernel_kquant(DType weight, Isa isa) {
  if (isa == Isa::kScalar) {
    switch (weight) {
      case DType::kQ4_K:
        return {DType::kQ8_K, to_q8_k, scalar_q45_k<BlockQ4_K>};
      case DType::kQ5_K:
        return {DType::kQ8_K, to_q8_k, scalar_q45_k<BlockQ5_K>};
      case DType::kQ6_K:
        return {DType::kQ8_K, to_q8_k, scalar_q6_k};
      default:
        return {};
    }
  }
#if defined(__x86_64__)
  if (isa == Isa::kAvx2) {
    switch (weight) {
      case DType::kQ4_K:
        return {DType::kQ8_K, to_q8_k, avx2_q45_k<false, BlockQ4_K>};
      case DType::kQ5_K:
        return {DType::kQ8_K, to_q8_k, avx2_q45_k<true, BlockQ5_K>};
      case DType::kQ6_K:
        return {DType::kQ8_K, to_q8_k, avx2_q6_k};
      default:
        return {};
    }
  }
#endif
  return {};
}

}  // namespace kernels::cpu::detail

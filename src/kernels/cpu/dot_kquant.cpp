// Dot kernels of the K-quant super-block types (Q4_K, Q5_K, Q6_K) against Q8_K activations, at
// the portable scalar level and with AVX2. AVX-512 machines use the AVX2 kernels (dot_kernel()
// steps down). IQ4_XS (non-linear 4-bit levels) has the same partner and sub-block scales.
//
// Each weight super-block is unpacked once for a tile of up to 4 tokens; every token keeps its own
// accumulators, updated in the same order whatever the tile, so its result never depends on the
// batch.
#include <algorithm>
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

using tensor::BlockIQ4_XS;
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

// The signed scale (ls − 32) of sub-block `sub` of an IQ4_XS super-block.
int iq4_xs_scale(const BlockIQ4_XS& b, int sub) {
  const int low = (b.scales_l[sub / 2] >> (4 * (sub % 2))) & 0x0F;
  const int high = (b.scales_h >> (2 * sub)) & 3;
  return (low | high << 4) - 32;
}

void scalar_iq4_xs(int64_t n, const void* w, const void* x, size_t x_stride, int n_tokens,
                   float* out, size_t out_stride) {
  const auto* wb = static_cast<const BlockIQ4_XS*>(w);
  for (int t = 0; t < n_tokens; ++t) {
    const auto* yb =
        reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) + t * x_stride);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / 256; ++b) {
      int sumi = 0;
      for (int sub = 0; sub < 8; ++sub) {
        const uint8_t* qs = wb[b].qs + 16 * sub;
        const int8_t* y = yb[b].qs + 32 * sub;
        int dot = 0;
        for (int j = 0; j < 16; ++j) {
          dot += tensor::kIq4NlLevels[qs[j] & 0x0F] * y[j] +
                 tensor::kIq4NlLevels[qs[j] >> 4] * y[j + 16];
        }
        sumi += iq4_xs_scale(wb[b], sub) * dot;
      }
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

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

__m256i load32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// Tokens whose activation rows share one unpacking of a weight super-block.
constexpr int kTile = 4;

// A Q4_K / Q5_K super-block unpacked once: 8 vectors of 32 unsigned quants (sub-blocks in value
// order) and the 8 scales broadcast as int16.
struct Q45Unpacked {
  __m256i q[8];
  __m256i scale[8];
  int min[8];
};

template <bool kFifthBit, class Block>
void unpack_q45(const Block& b, Q45Unpacked& u) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256i qh = _mm256_setzero_si256();
  if constexpr (kFifthBit) qh = load32(b.qh);
  for (int c = 0; c < 4; ++c) {
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
    u.q[2 * c] = lo;
    u.q[2 * c + 1] = hi;
  }
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    scale_min(b.scales, j, &sc, &m);
    u.scale[j] = _mm256_set1_epi16(static_cast<int16_t>(sc));
    u.min[j] = m;
  }
}

// Σ_j sc_j · Σ_{i∈j} q_i·y_i as 8 int32 partial sums (exact).
__m256i q45_k_sumi(const Q45Unpacked& u, const BlockQ8_K& y) {
  __m256i acc = _mm256_setzero_si256();
  for (int j = 0; j < 8; ++j) {
    const __m256i p = _mm256_maddubs_epi16(u.q[j], load32(y.qs + 32 * j));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, u.scale[j]));
  }
  return acc;
}

template <bool kFifthBit, class Block>
void avx2_q45_k(int64_t n, const void* w, const void* x, size_t x_stride, int n_tokens, float* out,
                size_t out_stride) {
  const auto* wb = static_cast<const Block*>(w);
  for (int t0 = 0; t0 < n_tokens; t0 += kTile) {
    const int nt = std::min(kTile, n_tokens - t0);
    const BlockQ8_K* yb[kTile];
    __m256 acc[kTile];
    float mins[kTile];
    for (int i = 0; i < nt; ++i) {
      yb[i] =
          reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) + (t0 + i) * x_stride);
      acc[i] = _mm256_setzero_ps();
      mins[i] = 0.0f;
    }
    for (int64_t b = 0; b < n / 256; ++b) {
      Q45Unpacked u;
      unpack_q45<kFifthBit>(wb[b], u);
      const float d = _cvtsh_ss(wb[b].d), dmin = _cvtsh_ss(wb[b].dmin);
      for (int i = 0; i < nt; ++i) {
        const BlockQ8_K& y = yb[i][b];
        acc[i] =
            _mm256_fmadd_ps(_mm256_set1_ps(d * y.d), _mm256_cvtepi32_ps(q45_k_sumi(u, y)), acc[i]);
        int m = 0;
        for (int j = 0; j < 8; ++j) m += u.min[j] * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
        mins[i] += dmin * y.d * static_cast<float>(m);
      }
    }
    for (int i = 0; i < nt; ++i) out[(t0 + i) * out_stride] = hsum(acc[i]) - mins[i];
  }
}

// A Q6_K super-block unpacked once: 8 vectors of 32 unsigned quants (0..63) in value order, and
// the 16 int8 scales as int16 pairs (low 8 lanes sub-block 2k, high 8 lanes sub-block 2k + 1).
struct Q6Unpacked {
  __m256i q[8];
  __m256i scale[8];
  __m256i offset_scale;  // −32 · scale of each of the 16 sub-blocks, as int16
};

void unpack_q6(const BlockQ6_K& b, Q6Unpacked& u) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {
    const __m256i ql0 = load32(b.ql + 64 * h), ql1 = load32(b.ql + 64 * h + 32),
                  qh = load32(b.qh + 32 * h);
    u.q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(ql0, low4),
                                     _mm256_slli_epi16(_mm256_and_si256(qh, two), 4));
    u.q[4 * h + 1] =
        _mm256_or_si256(_mm256_and_si256(ql1, low4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), two), 4));
    u.q[4 * h + 2] =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), two), 4));
    u.q[4 * h + 3] =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), two), 4));
  }
  for (int k = 0; k < 8; ++k) {
    u.scale[k] =
        _mm256_set_m128i(_mm_set1_epi16(b.scales[2 * k + 1]), _mm_set1_epi16(b.scales[2 * k]));
  }
  const __m256i scales16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  u.offset_scale = _mm256_mullo_epi16(scales16, _mm256_set1_epi16(-32));
}

// Σ_s sc_s · Σ_{i∈s} (q_i − 32)·y_i as 8 int32 partial sums (exact): the products use q unsigned
// (0..63; vector k covers values 32k .. 32k + 31) and the −32 comes in through the bsums.
__m256i q6_k_sumi(const Q6Unpacked& u, const BlockQ8_K& y) {
  __m256i acc = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)),
                                  u.offset_scale);
  for (int k = 0; k < 8; ++k) {
    const __m256i p = _mm256_maddubs_epi16(u.q[k], load32(y.qs + 32 * k));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, u.scale[k]));
  }
  return acc;
}

void avx2_q6_k(int64_t n, const void* w, const void* x, size_t x_stride, int n_tokens, float* out,
               size_t out_stride) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  for (int t0 = 0; t0 < n_tokens; t0 += kTile) {
    const int nt = std::min(kTile, n_tokens - t0);
    const BlockQ8_K* yb[kTile];
    __m256 acc[kTile];
    for (int i = 0; i < nt; ++i) {
      yb[i] =
          reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) + (t0 + i) * x_stride);
      acc[i] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < n / 256; ++b) {
      Q6Unpacked u;
      unpack_q6(wb[b], u);
      const float d = _cvtsh_ss(wb[b].d);
      for (int i = 0; i < nt; ++i) {
        const BlockQ8_K& y = yb[i][b];
        acc[i] =
            _mm256_fmadd_ps(_mm256_set1_ps(d * y.d), _mm256_cvtepi32_ps(q6_k_sumi(u, y)), acc[i]);
      }
    }
    for (int i = 0; i < nt; ++i) out[(t0 + i) * out_stride] = hsum(acc[i]);
  }
}

// IQ4_XS: each sub-block's nibbles looked up in the 16-level table (a byte shuffle), then a signed
// 8-bit dot product scaled by the sub-block's signed scale. Unpacked once per token tile.
struct Iq4Unpacked {
  __m256i q[8];
  __m256i scale[8];
};

void unpack_iq4_xs(const BlockIQ4_XS& b, Iq4Unpacked& u) {
  const __m256i levels = _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(tensor::kIq4NlLevels)));
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int sub = 0; sub < 8; ++sub) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * sub));
    const __m256i nibbles =
        _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), low4);
    u.q[sub] = _mm256_shuffle_epi8(levels, nibbles);
    u.scale[sub] = _mm256_set1_epi16(static_cast<int16_t>(iq4_xs_scale(b, sub)));
  }
}

void avx2_iq4_xs(int64_t n, const void* w, const void* x, size_t x_stride, int n_tokens, float* out,
                 size_t out_stride) {
  const auto* wb = static_cast<const BlockIQ4_XS*>(w);
  for (int t0 = 0; t0 < n_tokens; t0 += kTile) {
    const int nt = std::min(kTile, n_tokens - t0);
    const BlockQ8_K* yb[kTile];
    __m256 acc[kTile];
    for (int i = 0; i < nt; ++i) {
      yb[i] =
          reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) + (t0 + i) * x_stride);
      acc[i] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < n / 256; ++b) {
      Iq4Unpacked u;
      unpack_iq4_xs(wb[b], u);
      const float d = _cvtsh_ss(wb[b].d);
      for (int i = 0; i < nt; ++i) {
        const BlockQ8_K& y = yb[i][b];
        __m256i sumi = _mm256_setzero_si256();
        for (int sub = 0; sub < 8; ++sub) {
          // Sign trick: |w| × (y with w's sign), an unsigned × signed byte product.
          const __m256i yv = load32(y.qs + 32 * sub);
          const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(u.q[sub], u.q[sub]),
                                                 _mm256_sign_epi8(yv, u.q[sub]));
          sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, u.scale[sub]));
        }
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(d * y.d), _mm256_cvtepi32_ps(sumi), acc[i]);
      }
    }
    for (int i = 0; i < nt; ++i) out[(t0 + i) * out_stride] = hsum(acc[i]);
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
      case DType::kIQ4_XS:
        return {DType::kQ8_K, to_q8_k, scalar_iq4_xs};
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
      case DType::kIQ4_XS:
        return {DType::kQ8_K, to_q8_k, avx2_iq4_xs};
      default:
        return {};
    }
  }
#endif
  return {};
}

}  // namespace kernels::cpu::detail

// Reference quantizers for the K-quants (Q2_K .. Q6_K) and the Q8_K activation format, with and
// without an importance matrix.
//
// A K-quant super-block has 8 or 16 sub-blocks, each with its own scale (and min), and those
// scales are themselves stored as 4-, 6- or 8-bit integers times one f16 per super-block. So each
// quantizer runs in three passes:
//   1. per sub-block, search the best float scale (and min) for its values;
//   2. quantize the sub-block scales against one super-block scale and store them;
//   3. re-quantize every value with the scales as they were stored (rounded), which is what the
//      decoder will use, and pack the bits.
// Without importance the searches are the GGUF ecosystem's plain reference ones; with it, they
// are its importance-weighted ones (weights w_i = importance_i · sqrt(σ² + x_i²), and the
// sub-block scales fitted by weighted least squares too). Both follow the reference step for step
// so the bytes come out the same (quantize_search.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/k_scales.h"
#include "tensor/quantize.h"
#include "tensor/quantize_search.h"

namespace tensor {
namespace {

using search::fit_positive;
using search::fit_scale_min;
using search::fit_symmetric;
using search::kGroupMaxEps;
using search::nearest_int;
using search::ScaleMinSearch;

// The plain searches of Q2_K, Q4_K and Q5_K, and the one all importance-weighted K-quants share.
constexpr ScaleMinSearch kQ2KSearch{
    .nmax = 3, .rmin = -0.5f, .rdelta = 0.1f, .nstep = 15, .absolute_error = true};
constexpr ScaleMinSearch kQ4KSearch{.nmax = 15, .rmin = -1.0f, .rdelta = 0.1f, .nstep = 20};
constexpr ScaleMinSearch kQ5KSearch{.nmax = 31, .rmin = -0.5f, .rdelta = 0.1f, .nstep = 15};
ScaleMinSearch weighted_search(int nmax) {
  return {.nmax = nmax, .rmin = -0.9f, .rdelta = 0.05f, .nstep = 36};
}

float sum_of_squares(const float* x, int n) {
  float sum = 0;
  for (int i = 0; i < n; ++i) sum += x[i] * x[i];
  return sum;
}

// Weights of one sub-block from the importance matrix: the column's importance times the value's
// size against the super-block's spread (σ² = sigma2).
void importance_weights(const float* importance, const float* x, int n, float sigma2,
                        float* weights) {
  for (int i = 0; i < n; ++i) weights[i] = importance[i] * std::sqrt(sigma2 + x[i] * x[i]);
}

// Packs 2-bit levels: two halves of 128 values; byte l of half h holds values 128h + l + 32k in
// bits 2k..2k+1 (Q2_K's qs, and the low bits of Q3_K).
void pack_2bit(const uint8_t* levels, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* l = levels + 128 * h;
    for (int i = 0; i < 32; ++i) {
      qs[32 * h + i] =
          static_cast<uint8_t>(l[i] | l[i + 32] << 2 | l[i + 64] << 4 | l[i + 96] << 6);
    }
  }
}

// --- Q2_K --------------------------------------------------------------------------------------

// Pass 3 and packing of Q2_K, from the stored scales.
void finish_q2_k(const float* x, BlockQ2_K& block, uint8_t* levels) {
  const float d = f16_to_f32(block.d);
  const float dmin = f16_to_f32(block.dmin);
  for (int j = 0; j < 16; ++j) {
    const float dl = d * static_cast<float>(block.scales[j] & 0x0f);
    if (dl == 0) continue;
    const float ml = dmin * static_cast<float>(block.scales[j] >> 4);
    for (int i = 0; i < 16; ++i) {
      levels[16 * j + i] =
          static_cast<uint8_t>(std::clamp(nearest_int((x[16 * j + i] + ml) / dl), 0, 3));
    }
  }
  pack_2bit(levels, block.qs);
}

void quantize_block_q2_k(const float* x, BlockQ2_K& block) {
  uint8_t levels[256];
  float scales[16];
  float mins[16];
  float weights[16];
  float max_scale = 0;  // scales and mins are both non-negative: the min is subtracted
  float max_min = 0;
  for (int j = 0; j < 16; ++j) {
    for (int i = 0; i < 16; ++i) weights[i] = std::fabs(x[16 * j + i]);
    scales[j] = fit_scale_min(kQ2KSearch, 16, x + 16 * j, weights, levels + 16 * j, &mins[j]);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  // Scales and mins as 4-bit multiples of their maxima.
  std::memset(block.scales, 0, sizeof block.scales);
  block.d = f32_to_f16(0.0f);
  block.dmin = f32_to_f16(0.0f);
  if (max_scale > 0) {
    const float iscale = 15.0f / max_scale;
    for (int j = 0; j < 16; ++j)
      block.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
    block.d = f32_to_f16(max_scale / 15.0f);
  }
  if (max_min > 0) {
    const float iscale = 15.0f / max_min;
    for (int j = 0; j < 16; ++j) {
      block.scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
    }
    block.dmin = f32_to_f16(max_min / 15.0f);
  }
  finish_q2_k(x, block, levels);
}

void quantize_block_q2_k_weighted(const float* x, const float* importance, BlockQ2_K& block) {
  uint8_t levels[256];
  float scales[16];
  float mins[16];
  float weights[16];
  float sum_weights[16];
  const float sigma2 = sum_of_squares(x, 256) / 256;
  for (int j = 0; j < 16; ++j) {
    importance_weights(importance + 16 * j, x + 16 * j, 16, sigma2, weights);
    sum_weights[j] = 0;
    for (int i = 0; i < 16; ++i) sum_weights[j] += weights[i];
    scales[j] =
        fit_scale_min(weighted_search(3), 16, x + 16 * j, weights, levels + 16 * j, &mins[j]);
  }
  uint8_t scale_levels[16];
  uint8_t min_levels[16];
  block.d = f32_to_f16(fit_positive(16, 15, scales, sum_weights, scale_levels));
  block.dmin = f32_to_f16(fit_positive(16, 15, mins, sum_weights, min_levels));
  for (int j = 0; j < 16; ++j)
    block.scales[j] = static_cast<uint8_t>(scale_levels[j] | min_levels[j] << 4);
  finish_q2_k(x, block, levels);
}

// --- Q3_K --------------------------------------------------------------------------------------

// Stores 6-bit scale levels (0..63, bias 32) in Q3_K's layout (k_scales.h reads them back).
void pack_q3_k_scales(const int* levels, uint8_t* scales) {
  std::memset(scales, 0, 12);
  for (int j = 0; j < 16; ++j) {
    const int l = levels[j];
    if (j < 8) {
      scales[j] = static_cast<uint8_t>(l & 0x0f);
    } else {
      scales[j - 8] |= static_cast<uint8_t>((l & 0x0f) << 4);
    }
    scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
  }
}

// Pass 3 and packing of Q3_K: levels from the stored scales, the third bit into hmask (bit b of
// hmask[i] for value 32b + i), the low two bits as Q2_K.
void finish_q3_k(const float* x, BlockQ3_K& block, int8_t* levels) {
  const float d = f16_to_f32(block.d);
  for (int j = 0; j < 16; ++j) {
    const float dl = d * static_cast<float>(q3_k_scale(block.scales, j) - 32);
    if (dl == 0) continue;
    for (int i = 0; i < 16; ++i) {
      levels[16 * j + i] =
          static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + i] / dl), -4, 3) + 4);
    }
  }
  std::memset(block.hmask, 0, sizeof block.hmask);
  uint8_t low[256];
  for (int i = 0; i < 256; ++i) {
    low[i] = static_cast<uint8_t>(levels[i] & 3);
    if (levels[i] > 3) block.hmask[i % 32] |= static_cast<uint8_t>(1 << (i / 32));
  }
  pack_2bit(low, block.qs);
}

void quantize_block_q3_k(const float* x, BlockQ3_K& block) {
  int8_t levels[256];
  float scales[16];
  float max_scale = 0;  // the scale of largest magnitude, with its sign
  float amax = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = search::fit_symmetric_refined(16, 4, x + 16 * j, levels + 16 * j);
    if (std::fabs(scales[j]) > amax) {
      amax = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  int scale_levels[16] = {};
  block.d = f32_to_f16(0.0f);
  if (max_scale != 0) {
    const float iscale = -32.0f / max_scale;
    for (int j = 0; j < 16; ++j) {
      scale_levels[j] = std::clamp(nearest_int(iscale * scales[j]), -32, 31) + 32;
    }
    block.d = f32_to_f16(1 / iscale);
  }
  pack_q3_k_scales(scale_levels, block.scales);  // all zero bytes when max_scale is 0
  finish_q3_k(x, block, levels);
}

void quantize_block_q3_k_weighted(const float* x, const float* importance, BlockQ3_K& block) {
  int8_t levels[256];
  float scales[16];
  float weights[16];
  float sum_weights[16];
  const float sigma2 = 2 * sum_of_squares(x, 256) / 256;
  for (int j = 0; j < 16; ++j) {
    importance_weights(importance + 16 * j, x + 16 * j, 16, sigma2, weights);
    sum_weights[j] = 0;
    for (int i = 0; i < 16; ++i) sum_weights[j] += weights[i];
    scales[j] = fit_symmetric(16, 4, x + 16 * j, weights, levels + 16 * j);
  }
  int8_t stored[16];
  block.d = f32_to_f16(fit_symmetric(16, 32, scales, sum_weights, stored));
  int scale_levels[16];
  for (int j = 0; j < 16; ++j) scale_levels[j] = stored[j];
  pack_q3_k_scales(scale_levels, block.scales);
  finish_q3_k(x, block, levels);
}

// --- Q4_K and Q5_K -----------------------------------------------------------------------------

// Stores 8 (scale, min) pairs of 6 bits in the Q4_K/Q5_K layout (k_scales.h reads them back).
void pack_k4_scales(const uint8_t* ls, const uint8_t* lm, uint8_t* scales) {
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] = ls[j];
      scales[j + 4] = lm[j];
    } else {  // low nibbles in bytes 8..11, top two bits in the spare bits 6..7 of bytes 0..7
      scales[j + 4] = static_cast<uint8_t>((ls[j] & 0x0f) | (lm[j] & 0x0f) << 4);
      scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// Pass 1 + 2 for Q4_K and Q5_K without importance: per 32-value sub-block a scale/min search
// weighted by rms + |x|, then both sets quantized to 6 bits against their maximum.
template <class Block>
void fit_k4_scales(const float* x, const ScaleMinSearch& search, Block* block, uint8_t* levels) {
  float scales[8];
  float mins[8];
  float weights[32];
  float max_scale = 0;  // scales and mins are both non-negative: the min is subtracted
  float max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    const float rms = std::sqrt(sum_of_squares(xs, 32) / 32);
    for (int l = 0; l < 32; ++l) weights[l] = rms + std::fabs(xs[l]);
    scales[j] = fit_scale_min(search, 32, xs, weights, levels + 32 * j, &mins[j]);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t ls[8];
  uint8_t lm[8];
  for (int j = 0; j < 8; ++j) {
    // Narrowed to 8 bits before clamping, exactly as the reference does.
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
  }
  pack_k4_scales(ls, lm, block->scales);
  block->d = f32_to_f16(max_scale / 63.0f);
  block->dmin = f32_to_f16(max_min / 63.0f);
}

// Pass 1 + 2 for Q4_K and Q5_K with importance: weighted scale/min searches, then the sub-block
// scales and mins fitted to 6 bits by weighted least squares (weights: each sub-block's total).
template <class Block>
void fit_k4_scales_weighted(const float* x, const float* importance, int nmax, Block* block,
                            uint8_t* levels) {
  float scales[8];
  float mins[8];
  float weights[32];
  float sum_weights[8];
  const float sigma2 = 2 * sum_of_squares(x, 256) / 256;
  for (int j = 0; j < 8; ++j) {
    importance_weights(importance + 32 * j, x + 32 * j, 32, sigma2, weights);
    sum_weights[j] = 0;
    for (int l = 0; l < 32; ++l) sum_weights[j] += weights[l];
    scales[j] =
        fit_scale_min(weighted_search(nmax), 32, x + 32 * j, weights, levels + 32 * j, &mins[j]);
  }
  uint8_t ls[8];
  uint8_t lm[8];
  const float d = fit_positive(8, 63, scales, sum_weights, ls);
  const float dmin = fit_positive(8, 63, mins, sum_weights, lm);
  pack_k4_scales(ls, lm, block->scales);
  block->d = f32_to_f16(d);
  block->dmin = f32_to_f16(dmin);
}

// Pass 3 for Q4_K and Q5_K: levels from the stored (rounded) scales. A sub-block whose stored
// scale is zero keeps its pass-1 levels (they decode to -min whatever they are).
template <class Block>
void requantize_k4(const float* x, int nmax, const Block& block, uint8_t* levels) {
  const float d = f16_to_f32(block.d);
  const float dmin = f16_to_f32(block.dmin);
  for (int j = 0; j < 8; ++j) {
    const KScaleMin sm = k4_scale_min(block.scales, j);
    const float dl = d * static_cast<float>(sm.scale);
    if (dl == 0) continue;
    const float ml = dmin * static_cast<float>(sm.min);
    for (int i = 0; i < 32; ++i) {
      levels[32 * j + i] =
          static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + i] + ml) / dl), 0, nmax));
    }
  }
}

// Chunk c of 64 values: the first 32 in the low nibbles, the next 32 in the high nibbles.
void pack_q4_k(const uint8_t* levels, BlockQ4_K& block) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      block.qs[32 * c + l] =
          static_cast<uint8_t>(levels[64 * c + l] | levels[64 * c + 32 + l] << 4);
    }
  }
}

// As Q4_K for the low 4 bits; bit 4 goes to qh[l], bit 2c (first 32) or 2c + 1 (next 32).
void pack_q5_k(const uint8_t* levels, BlockQ5_K& block) {
  std::memset(block.qh, 0, sizeof block.qh);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int lo = levels[64 * c + l];
      const int hi = levels[64 * c + 32 + l];
      block.qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0f) | (hi & 0x0f) << 4);
      block.qh[l] |= static_cast<uint8_t>((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
    }
  }
}

// --- Q6_K --------------------------------------------------------------------------------------

// Q6_K: per 16 values a symmetric fit (weights: the importance as given, else x²), the 16 scales
// as int8 against the largest, then levels from the stored scales.
void quantize_block_q6_k(const float* x, const float* importance, BlockQ6_K& block) {
  int8_t levels[256];
  float scales[16];
  float max_scale = 0;  // the scale of largest magnitude, with its sign
  float max_abs_scale = 0;
  for (int s = 0; s < 16; ++s) {
    scales[s] = fit_symmetric(16, 32, x + 16 * s, importance ? importance + 16 * s : nullptr,
                              levels + 16 * s);
    if (std::fabs(scales[s]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[s]);
      max_scale = scales[s];
    }
  }
  if (max_abs_scale < kGroupMaxEps) {  // an all-zero super-block
    std::memset(&block, 0, sizeof block);
    return;
  }
  // Sub-block scales as int8 against the largest, which maps to -128 (the extra negative step).
  const float iscale = -128.0f / max_scale;
  block.d = f32_to_f16(1 / iscale);
  for (int s = 0; s < 16; ++s) {
    block.scales[s] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[s])));
  }
  const float d = f16_to_f32(block.d);
  for (int s = 0; s < 16; ++s) {
    const float ds = d * static_cast<float>(block.scales[s]);
    if (ds == 0) continue;
    for (int i = 0; i < 16; ++i) {
      const int l = std::clamp(nearest_int(x[16 * s + i] / ds), -32, 31);
      levels[16 * s + i] = static_cast<int8_t>(l + 32);
    }
  }
  // Half h packs values 128h + l + 32k (k = 0..3): low nibbles into ql, top two bits into qh.
  for (int h = 0; h < 2; ++h) {
    uint8_t* ql = block.ql + 64 * h;
    uint8_t* qh = block.qh + 32 * h;
    const int8_t* q = levels + 128 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((q[l] & 0x0f) | (q[l + 64] & 0x0f) << 4);
      ql[l + 32] = static_cast<uint8_t>((q[l + 32] & 0x0f) | (q[l + 96] & 0x0f) << 4);
      qh[l] = static_cast<uint8_t>((q[l] >> 4) | (q[l + 32] >> 4) << 2 | (q[l + 64] >> 4) << 4 |
                                   (q[l + 96] >> 4) << 6);
    }
  }
}

}  // namespace

void quantize_row_q2_k(const float* src, BlockQ2_K* dst, int64_t n, const float* importance) {
  for (int64_t b = 0; b < n / 256; ++b, src += 256) {
    if (importance) {
      quantize_block_q2_k_weighted(src, importance + 256 * b, dst[b]);
    } else {
      quantize_block_q2_k(src, dst[b]);
    }
  }
}

void quantize_row_q3_k(const float* src, BlockQ3_K* dst, int64_t n, const float* importance) {
  for (int64_t b = 0; b < n / 256; ++b, src += 256) {
    if (importance) {
      quantize_block_q3_k_weighted(src, importance + 256 * b, dst[b]);
    } else {
      quantize_block_q3_k(src, dst[b]);
    }
  }
}

void quantize_row_q4_k(const float* src, BlockQ4_K* dst, int64_t n, const float* importance) {
  for (int64_t b = 0; b < n / 256; ++b, src += 256) {
    uint8_t levels[256];
    if (importance) {
      fit_k4_scales_weighted(src, importance + 256 * b, 15, &dst[b], levels);
    } else {
      fit_k4_scales(src, kQ4KSearch, &dst[b], levels);
    }
    requantize_k4(src, 15, dst[b], levels);
    pack_q4_k(levels, dst[b]);
  }
}

void quantize_row_q5_k(const float* src, BlockQ5_K* dst, int64_t n, const float* importance) {
  for (int64_t b = 0; b < n / 256; ++b, src += 256) {
    uint8_t levels[256];
    if (importance) {
      fit_k4_scales_weighted(src, importance + 256 * b, 31, &dst[b], levels);
    } else {
      fit_k4_scales(src, kQ5KSearch, &dst[b], levels);
    }
    requantize_k4(src, 31, dst[b], levels);
    pack_q5_k(levels, dst[b]);
  }
}

void quantize_row_q6_k(const float* src, BlockQ6_K* dst, int64_t n, const float* importance) {
  for (int64_t b = 0; b < n / 256; ++b, src += 256) {
    quantize_block_q6_k(src, importance ? importance + 256 * b : nullptr, dst[b]);
  }
}

void quantize_row_q8_k(const float* src, BlockQ8_K* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ8_K::kValues; ++b, src += BlockQ8_K::kValues) {
    BlockQ8_K& block = dst[b];
    float max = 0;
    float amax = 0;
    for (int j = 0; j < 256; ++j) {
      if (std::fabs(src[j]) > amax) {
        amax = std::fabs(src[j]);
        max = src[j];
      }
    }
    if (amax == 0) {
      std::memset(&block, 0, sizeof block);
      continue;
    }
    // -127 rather than -128 keeps q symmetric, which SIMD dot products rely on (no -128 * -1).
    const float iscale = -127.0f / max;
    for (int j = 0; j < 256; ++j) {
      block.qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * src[j])));
    }
    for (int k = 0; k < 16; ++k) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += block.qs[16 * k + i];
      block.bsums[k] = static_cast<int16_t>(sum);
    }
    block.d = 1 / iscale;
  }
}

}  // namespace tensor

// Reference quantizers for the K-quants (Q4_K, Q5_K, Q6_K) and the Q8_K activation format.
//
// A K-quant super-block has 8 or 16 sub-blocks, each with its own scale (and min), and those
// scales are themselves stored as 6- or 8-bit integers times one f16 per super-block. So each
// quantizer runs in three passes:
//   1. per sub-block, search the best float scale (and min) for its values;
//   2. quantize the sub-block scales against the largest one and store them;
//   3. re-quantize every value with the scales as they were stored (rounded), which is what the
//      decoder will use, and pack the bits.
// The searches follow the GGUF ecosystem's reference quantizer step for step (same candidates,
// same weights, same float operation order) so the bytes come out the same.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/k_scales.h"
#include "tensor/quantize.h"

namespace tensor {
namespace {

// Scales below this count as zero: the group is all zeros (or denormal noise).
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, for |x| < 2^22: adding 1.5 * 2^23 leaves x's integer part in
// the low mantissa bits, rounded by the f32 addition itself. This is the rounding the reference
// uses; std::lround would round ties away from zero and give different bytes.
int nearest_int(float x) {
  const float biased = x + 12582912.0f;
  uint32_t bits;
  std::memcpy(&bits, &biased, sizeof bits);
  return static_cast<int>(bits & 0x007fffffu) - 0x00400000;
}

// Values per sub-block of Q4_K and Q5_K, each with its own scale and min.
constexpr int kSubBlock = 32;

// How Q4_K and Q5_K search a sub-block's scale and min: levels 0..nmax, and nstep + 1 candidate
// grids with nmax + rmin + rdelta * k steps across the value range (the reference's constants).
struct ScaleMinSearch {
  int nmax;
  float rmin;
  float rdelta;
  int nstep;
};
constexpr ScaleMinSearch kQ4KSearch{.nmax = 15, .rmin = -1.0f, .rdelta = 0.1f, .nstep = 20};
constexpr ScaleMinSearch kQ5KSearch{.nmax = 31, .rmin = -0.5f, .rdelta = 0.1f, .nstep = 15};

// Pass 1 for the types with a min (Q4_K, Q5_K): fits x ≈ scale * L - min with L in 0..nmax by
// weighted least squares. Starts from the plain (max - min) / nmax grid, then tries the
// candidate inverse scales (nmax + rmin + rdelta * k) / (max - min); for each, the levels are
// fixed and the best scale and min for them have a closed form (2x2 normal equations). Keeps the
// candidate with the lowest weighted squared error. Returns the scale; *min_out gets the min as
// a non-negative offset (x ≈ scale * L - *min_out).
float search_scale_min(const ScaleMinSearch& search, const float* x, const float* weights,
                       uint8_t* levels, float* min_out) {
  constexpr int n = kSubBlock;
  const int nmax = search.nmax;
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;  // the offset only ever shifts down: all-positive groups keep min 0
  if (max == min) {
    std::fill(levels, levels + n, uint8_t{0});
    *min_out = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    levels[i] = static_cast<uint8_t>(std::clamp(l, 0, nmax));
    const float diff = scale * static_cast<float>(levels[i]) + min - x[i];
    best_error += weights[i] * (diff * diff);
  }
  uint8_t trial[n];
  for (int step = 0; step <= search.nstep; ++step) {
    iscale = (search.rmin + search.rdelta * static_cast<float>(step) + static_cast<float>(nmax)) /
             (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      const float wl = weights[i] * static_cast<float>(l);
      sum_l += wl;
      sum_l2 += wl * static_cast<float>(l);
      sum_xl += wl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;  // degenerate (all levels equal) or nan: no fit to try
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {  // a positive min cannot be stored: refit the scale alone with min 0
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * static_cast<float>(trial[i]) + this_min - x[i];
      error += weights[i] * (diff * diff);
    }
    if (error < best_error) {
      std::copy(trial, trial + n, levels);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *min_out = -min;
  return scale;
}

// Pass 1 for Q6_K: fits x ≈ scale * (L - nmax) with L - nmax in -nmax..nmax-1, weighting each
// value by x^2 (large values matter most for the error the model sees). The value of largest
// magnitude anchors the grid at -nmax; 18 nearby grids (nmax ± 0.1k) are tried and the one with
// the best weighted least-squares fit kept. Returns the scale (signed: it carries the anchor's
// sign).
float search_symmetric_scale(int n, int nmax, const float* x, int8_t* levels) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(levels, levels + n, int8_t{0});
    return 0.0f;
  }
  // Σ w·x·l and Σ w·l² for the grid 1 / iscale; the least-squares scale is their ratio.
  auto fit = [&](float iscale, float* sum_lx, float* sum_l2) {
    *sum_lx = 0;
    *sum_l2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      *sum_lx += w * x[i] * static_cast<float>(l);
      *sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
  };
  auto assign = [&](float iscale) {
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      levels[i] = static_cast<int8_t>(l + nmax);
    }
  };
  float iscale = static_cast<float>(-nmax) / max;
  float sum_lx, sum_l2;
  fit(iscale, &sum_lx, &sum_l2);
  assign(iscale);
  float scale = sum_l2 != 0 ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;  // the reduction in squared error this fit achieves
  for (int k = -9; k <= 9; ++k) {
    if (k == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max;
    fit(iscale, &sum_lx, &sum_l2);
    // sum_lx² / sum_l2 > best, without dividing.
    if (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2) {
      assign(iscale);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

// Pass 1 + 2 for Q4_K and Q5_K, which share the super-block layout: per 32-value sub-block a
// scale/min search weighted by rms + |x|, then both sets quantized to 6 bits against their
// maximum. Fills d, dmin and scales; leaves the levels of pass 1 in `levels`.
template <class Block>
void fit_k4_scales(const float* x, const ScaleMinSearch& search, Block* block, uint8_t* levels) {
  float scales[8];
  float mins[8];
  float weights[32];
  float max_scale = 0;  // scales and mins are both non-negative: the min is subtracted
  float max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float rms = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = rms + std::fabs(xs[l]);
    scales[j] = search_scale_min(search, xs, weights, levels + 32 * j, &mins[j]);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  std::memset(block->scales, 0, sizeof block->scales);
  for (int j = 0; j < 8; ++j) {
    // Narrowed to 8 bits before clamping, exactly as the reference does.
    const uint8_t ls =
        std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      block->scales[j] = ls;
      block->scales[j + 4] = lm;
    } else {  // low nibbles in bytes 8..11, top two bits in the spare bits 6..7 of bytes 0..7
      block->scales[j + 4] = static_cast<uint8_t>((ls & 0x0f) | (lm & 0x0f) << 4);
      block->scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      block->scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  block->d = f32_to_f16(max_scale / 63.0f);
  block->dmin = f32_to_f16(max_min / 63.0f);
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

}  // namespace

void quantize_row_q4_k(const float* src, BlockQ4_K* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ4_K::kValues; ++b, src += BlockQ4_K::kValues) {
    BlockQ4_K& block = dst[b];
    uint8_t levels[256];
    fit_k4_scales(src, kQ4KSearch, &block, levels);
    requantize_k4(src, kQ4KSearch.nmax, block, levels);
    // Chunk c of 64 values: the first 32 in the low nibbles, the next 32 in the high nibbles.
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        block.qs[32 * c + l] =
            static_cast<uint8_t>(levels[64 * c + l] | levels[64 * c + 32 + l] << 4);
      }
    }
  }
}

void quantize_row_q5_k(const float* src, BlockQ5_K* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ5_K::kValues; ++b, src += BlockQ5_K::kValues) {
    BlockQ5_K& block = dst[b];
    uint8_t levels[256];
    fit_k4_scales(src, kQ5KSearch, &block, levels);
    requantize_k4(src, kQ5KSearch.nmax, block, levels);
    // As Q4_K for the low 4 bits; bit 4 goes to qh[l], bit 2c (first 32) or 2c + 1 (next 32).
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
}

void quantize_row_q6_k(const float* src, BlockQ6_K* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ6_K::kValues; ++b, src += BlockQ6_K::kValues) {
    BlockQ6_K& block = dst[b];
    int8_t levels[256];
    float scales[16];
    float max_scale = 0;  // the scale of largest magnitude, with its sign
    float max_abs_scale = 0;
    for (int s = 0; s < 16; ++s) {
      scales[s] = search_symmetric_scale(16, 32, src + 16 * s, levels + 16 * s);
      if (std::fabs(scales[s]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[s]);
        max_scale = scales[s];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {  // an all-zero super-block
      std::memset(&block, 0, sizeof block);
      continue;
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
        const int l = std::clamp(nearest_int(src[16 * s + i] / ds), -32, 31);
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

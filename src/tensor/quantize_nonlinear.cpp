// Reference quantizers for the types whose levels are not evenly spaced integers: the IQ4
// codebook types (IQ4_NL, IQ4_XS), the ternary types (TQ1_0, TQ2_0) and the FP4 types (MXFP4,
// NVFP4). Each follows the GGUF ecosystem's own quantizer for the type step for step, so the bytes
// match its files (tests/tensor/quantize_test.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/fp8_scales.h"
#include "tensor/quantize.h"
#include "tensor/quantize_search.h"

namespace tensor {
namespace {

using search::kGroupMaxEps;
using search::nearest_int;

constexpr int kIq4Trials = 7;  // grids tried on each side of the plain one (the file quantizer's)

int iq4_level(float x) {
  return search::nearest_level(16, kIq4NlLevels, x);
}

// Best IQ4 scale for one 32-value block: start from the block's extreme on the outermost level,
// refit the scale by weighted least squares for the levels it picks, then try 2·kIq4Trials + 1
// nearby grids and keep the best fit. Leaves the first grid's levels in `levels`; returns the
// scale (0 for an all-zero block).
float fit_iq4_block(const float* x, const float* weights, uint8_t* levels) {
  float amax = 0;
  float max = 0;
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;
  auto fit = [&](float id, float* sum_qx, float* sum_q2, bool keep) {
    *sum_qx = 0;
    *sum_q2 = 0;
    for (int j = 0; j < 32; ++j) {
      const int l = iq4_level(id * x[j]);
      if (keep) levels[j] = static_cast<uint8_t>(l);
      const float q = kIq4NlLevels[l];
      *sum_qx += weights[j] * q * x[j];
      *sum_q2 += weights[j] * q * q;
    }
  };
  float sum_qx, sum_q2;
  const float d0 = -max / kIq4NlLevels[0];
  fit(1 / d0, &sum_qx, &sum_q2, true);
  float d = sum_q2 > 0 ? sum_qx / sum_q2 : 0.0f;
  float best = d * sum_qx;
  for (int t = -kIq4Trials; t <= kIq4Trials; ++t) {
    fit(static_cast<float>(t + kIq4NlLevels[0]) / max, &sum_qx, &sum_q2, false);
    if (sum_q2 > 0 && sum_qx * sum_qx > best * sum_q2) {
      d = sum_qx / sum_q2;
      best = d * sum_qx;
    }
  }
  return d;
}

// Per-value weights of an IQ4 block: the importance against the super-block's spread, else x².
void iq4_weights(const float* x, const float* importance, float sigma2, float* weights) {
  for (int j = 0; j < 32; ++j) {
    weights[j] = importance ? importance[j] * std::sqrt(sigma2 + x[j] * x[j]) : x[j] * x[j];
  }
}

float iq4_sigma2(const float* x, int n) {
  float sum = 0;
  for (int j = 0; j < n; ++j) sum += x[j] * x[j];
  return sum * (2.0f / static_cast<float>(n));
}

// Nibble order of Q4_0: value j of each 32 in the low nibble of byte j, value j + 16 in the high.
void pack_nibbles(const uint8_t* levels, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(levels[j] | levels[j + 16] << 4);
}

// The nearest of the 16 FP4 levels to x at scale e (first on ties).
uint8_t fp4_level(float x, float e) {
  int best = 0;
  float best_error = std::fabs(static_cast<float>(kFp4Levels[0]) * e - x);
  for (int i = 1; i < 16; ++i) {
    const float error = std::fabs(static_cast<float>(kFp4Levels[i]) * e - x);
    if (error < best_error) {
      best = i;
      best_error = error;
    }
  }
  return static_cast<uint8_t>(best);
}

float block_absmax(const float* x, int n) {
  float amax = 0;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

// -1, 0, 1 → 0, 1, 2 (rounding half away from zero, as lroundf).
int trit(float x, float id) {
  return static_cast<int>(std::lround(x * id)) + 1;
}

// Digits as a fixed-point fraction of 3^5: the byte is ceil(value · 256 / 243), so that
// multiplying by 3^k and keeping the top "trit" reads digit k back (blocks.h).
uint8_t trits_to_byte(int value) {
  return static_cast<uint8_t>((value * 256 + 242) / 243);
}

}  // namespace

void quantize_row_iq4_nl(const float* src, BlockIQ4_NL* dst, int64_t n, const float* importance) {
  for (int64_t b = 0; b < n / 32; ++b, src += 32) {
    const float* imp = importance ? importance + 32 * b : nullptr;
    float weights[32];
    uint8_t levels[32];
    iq4_weights(src, imp, iq4_sigma2(src, 32), weights);
    const float d = fit_iq4_block(src, weights, levels);
    dst[b].d = f32_to_f16(d);
    // One block per scale: the levels are re-picked with the fitted (unrounded) scale.
    const float id = d != 0 ? 1 / d : 0.0f;
    for (int j = 0; j < 32; ++j) levels[j] = static_cast<uint8_t>(iq4_level(id * src[j]));
    pack_nibbles(levels, dst[b].qs);
  }
}

void quantize_row_iq4_xs(const float* src, BlockIQ4_XS* dst, int64_t n, const float* importance) {
  for (int64_t b = 0; b < n / 256; ++b, src += 256) {
    BlockIQ4_XS& block = dst[b];
    const float sigma2 = iq4_sigma2(src, 256);
    float scales[8];
    float max_scale = 0;  // the scale of largest magnitude, with its sign
    float amax_scale = 0;
    uint8_t levels[256];
    for (int s = 0; s < 8; ++s) {
      float weights[32];
      iq4_weights(src + 32 * s, importance ? importance + 256 * b + 32 * s : nullptr, sigma2,
                  weights);
      scales[s] = fit_iq4_block(src + 32 * s, weights, levels + 32 * s);
      if (std::fabs(scales[s]) > amax_scale) {
        amax_scale = std::fabs(scales[s]);
        max_scale = scales[s];
      }
    }
    // Sub-block scales as 6-bit levels (bias 32) against one f16 scale; the values are then
    // re-picked with each sub-block's stored scale.
    const float d = -max_scale / 32;
    block.d = f32_to_f16(d);
    block.scales_h = 0;
    std::memset(block.scales_l, 0, sizeof block.scales_l);
    const float id = d != 0 ? 1 / d : 0.0f;
    for (int s = 0; s < 8; ++s) {
      const int l = std::clamp(nearest_int(id * scales[s]), -32, 31);
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0 ? 1 / dl : 0.0f;
      for (int j = 0; j < 32; ++j) {
        levels[32 * s + j] = static_cast<uint8_t>(iq4_level(idl * src[32 * s + j]));
      }
      const int biased = l + 32;
      block.scales_l[s / 2] |= static_cast<uint8_t>((biased & 0x0f) << (4 * (s % 2)));
      block.scales_h |= static_cast<uint16_t>((biased >> 4) << (2 * s));
      pack_nibbles(levels + 32 * s, block.qs + 16 * s);
    }
  }
}

void quantize_row_tq1_0(const float* src, BlockTQ1_0* dst, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b) {
    BlockTQ1_0& block = dst[b];
    const float d = block_absmax(src, 256);
    const float id = d != 0 ? 1.0f / d : 0.0f;
    block.d = f32_to_f16(d);
    // qs[0..31] take 5 digits each from values m + 32k, qs[32..47] from m + 16k of the next 80,
    // qh[0..3] 4 digits from m + 4k (the top digit left at 0).
    for (int m = 0; m < 32; ++m) {
      int value = 0;
      for (int k = 0; k < 5; ++k) value = value * 3 + trit(src[m + 32 * k], id);
      block.qs[m] = trits_to_byte(value);
    }
    src += 160;
    for (int m = 0; m < 16; ++m) {
      int value = 0;
      for (int k = 0; k < 5; ++k) value = value * 3 + trit(src[m + 16 * k], id);
      block.qs[32 + m] = trits_to_byte(value);
    }
    src += 80;
    for (int m = 0; m < 4; ++m) {
      int value = 0;
      for (int k = 0; k < 4; ++k) value = value * 3 + trit(src[m + 4 * k], id);
      block.qh[m] = trits_to_byte(value * 3);
    }
    src += 16;
  }
}

void quantize_row_tq2_0(const float* src, BlockTQ2_0* dst, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b, src += 256) {
    BlockTQ2_0& block = dst[b];
    const float d = block_absmax(src, 256);
    const float id = d != 0 ? 1.0f / d : 0.0f;
    block.d = f32_to_f16(d);
    for (int group = 0; group < 2; ++group) {
      for (int m = 0; m < 32; ++m) {
        int q = 0;
        for (int k = 0; k < 4; ++k) q |= (trit(src[128 * group + m + 32 * k], id) & 3) << (2 * k);
        block.qs[32 * group + m] = static_cast<uint8_t>(q);
      }
    }
  }
}

void quantize_row_mxfp4(const float* src, BlockMXFP4* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, src += 32) {
    // The shared exponent puts the extreme value in the top binade of E2M1 (4..6): 2^⌊log2 amax⌋
    // / 4. Clamped to the encodable range, where the reference's cast would be undefined.
    const float amax = block_absmax(src, 32);
    int e = 0;
    if (amax > 0) e = std::clamp(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127, 0, 254);
    dst[b].e = static_cast<uint8_t>(e);
    const float d = mxfp4_half_scale(dst[b].e);
    for (int j = 0; j < 16; ++j) {
      dst[b].qs[j] = static_cast<uint8_t>(fp4_level(src[j], d) | fp4_level(src[j + 16], d) << 4);
    }
  }
}

void quantize_row_nvfp4(const float* src, BlockNVFP4* dst, int64_t n) {
  for (int64_t b = 0; b < n / 64; ++b) {
    for (int s = 0; s < 4; ++s, src += 16) {
      // The largest E2M1 value is 6: amax / 6 maps the extreme value onto it.
      const uint8_t scale = f32_to_ue4m3(block_absmax(src, 16) / 6.0f);
      dst[b].d[s] = scale;
      const float d = nvfp4_half_scale(scale);
      for (int j = 0; j < 8; ++j) {
        dst[b].qs[8 * s + j] =
            static_cast<uint8_t>(fp4_level(src[j], d) | fp4_level(src[j + 8], d) << 4);
      }
    }
  }
}

}  // namespace tensor

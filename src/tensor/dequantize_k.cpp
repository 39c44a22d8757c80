// Scalar reference dequantizers for the K-quants (256-value super-blocks) and Q8_K.
#include <cstdint>

#include "tensor/dequantize.h"
#include "tensor/fp16.h"
#include "tensor/k_scales.h"

namespace tensor {

void dequantize_row_q2_k(const BlockQ2_K* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ2_K::kValues; ++b) {
    const BlockQ2_K& block = src[b];
    const float d = f16_to_f32(block.d);
    const float dmin = f16_to_f32(block.dmin);
    // 16 sub-blocks of 16 values, in order: sub-block s lives in half s / 8, at bit pair
    // (s % 8) / 2, bytes 16 * (s % 2) .. +15 of that half's 32 bytes.
    for (int s = 0; s < 16; ++s, dst += 16) {
      const uint8_t* qs = block.qs + 32 * (s / 8) + 16 * (s % 2);
      const int shift = 2 * ((s % 8) / 2);
      const float dl = d * static_cast<float>(block.scales[s] & 0x0f);
      const float ml = dmin * static_cast<float>(block.scales[s] >> 4);
      for (int l = 0; l < 16; ++l) dst[l] = dl * static_cast<float>((qs[l] >> shift) & 0x3) - ml;
    }
  }
}

void dequantize_row_q3_k(const BlockQ3_K* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ3_K::kValues; ++b) {
    const BlockQ3_K& block = src[b];
    const float d = f16_to_f32(block.d);
    // Same 2-bit layout as Q2_K; the third bit of value i is bit i / 32 of hmask[i % 32]. A set
    // bit means q = low bits, a clear bit q = low bits - 4 (stored with a +4 bias).
    for (int s = 0; s < 16; ++s, dst += 16) {
      const int offset = 16 * (s % 2);  // position within the 32-byte rows of qs and hmask
      const uint8_t* qs = block.qs + 32 * (s / 8) + offset;
      const uint8_t* hmask = block.hmask + offset;
      const int shift = 2 * ((s % 8) / 2);
      const uint8_t high_bit = static_cast<uint8_t>(1u << (s / 2));
      const float dl = d * static_cast<float>(q3_k_scale(block.scales, s) - 32);
      for (int l = 0; l < 16; ++l) {
        const int q = ((qs[l] >> shift) & 0x3) - ((hmask[l] & high_bit) ? 0 : 4);
        dst[l] = dl * static_cast<float>(q);
      }
    }
  }
}

void dequantize_row_q4_k(const BlockQ4_K* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ4_K::kValues; ++b) {
    const BlockQ4_K& block = src[b];
    const float d = f16_to_f32(block.d);
    const float dmin = f16_to_f32(block.dmin);
    // Four chunks of 64 values: sub-block 2c in the low nibbles, 2c + 1 in the high nibbles.
    for (int c = 0; c < 4; ++c) {
      const uint8_t* qs = block.qs + 32 * c;
      const KScaleMin low = k4_scale_min(block.scales, 2 * c);
      const KScaleMin high = k4_scale_min(block.scales, 2 * c + 1);
      const float d1 = d * static_cast<float>(low.scale);
      const float m1 = dmin * static_cast<float>(low.min);
      const float d2 = d * static_cast<float>(high.scale);
      const float m2 = dmin * static_cast<float>(high.min);
      for (int l = 0; l < 32; ++l) *dst++ = d1 * static_cast<float>(qs[l] & 0x0f) - m1;
      for (int l = 0; l < 32; ++l) *dst++ = d2 * static_cast<float>(qs[l] >> 4) - m2;
    }
  }
}

void dequantize_row_q5_k(const BlockQ5_K* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ5_K::kValues; ++b) {
    const BlockQ5_K& block = src[b];
    const float d = f16_to_f32(block.d);
    const float dmin = f16_to_f32(block.dmin);
    for (int c = 0; c < 4; ++c) {
      const uint8_t* qs = block.qs + 32 * c;
      const uint8_t bit_low = static_cast<uint8_t>(1u << (2 * c));
      const uint8_t bit_high = static_cast<uint8_t>(2u << (2 * c));
      const KScaleMin low = k4_scale_min(block.scales, 2 * c);
      const KScaleMin high = k4_scale_min(block.scales, 2 * c + 1);
      const float d1 = d * static_cast<float>(low.scale);
      const float m1 = dmin * static_cast<float>(low.min);
      const float d2 = d * static_cast<float>(high.scale);
      const float m2 = dmin * static_cast<float>(high.min);
      for (int l = 0; l < 32; ++l) {
        const int q = (qs[l] & 0x0f) + ((block.qh[l] & bit_low) ? 16 : 0);
        *dst++ = d1 * static_cast<float>(q) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        const int q = (qs[l] >> 4) + ((block.qh[l] & bit_high) ? 16 : 0);
        *dst++ = d2 * static_cast<float>(q) - m2;
      }
    }
  }
}

void dequantize_row_q6_k(const BlockQ6_K* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ6_K::kValues; ++b) {
    const BlockQ6_K& block = src[b];
    const float d = f16_to_f32(block.d);
    for (int half = 0; half < 2; ++half, dst += 128) {
      const uint8_t* ql = block.ql + 64 * half;
      const uint8_t* qh = block.qh + 32 * half;
      const int8_t* scales = block.scales + 8 * half;
      for (int l = 0; l < 32; ++l) {
        const int s = l / 16;  // sub-block within each 32-value quarter
        const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 0x3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 0x3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 0x3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 0x3) << 4)) - 32;
        // (d * scale) * q, in that order: the reference rounds the product d * scale first.
        dst[l] = d * static_cast<float>(scales[s]) * static_cast<float>(q1);
        dst[l + 32] = d * static_cast<float>(scales[s + 2]) * static_cast<float>(q2);
        dst[l + 64] = d * static_cast<float>(scales[s + 4]) * static_cast<float>(q3);
        dst[l + 96] = d * static_cast<float>(scales[s + 6]) * static_cast<float>(q4);
      }
    }
  }
}

void dequantize_row_q8_k(const BlockQ8_K* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / BlockQ8_K::kValues; ++b, dst += BlockQ8_K::kValues) {
    const BlockQ8_K& block = src[b];
    for (int j = 0; j < BlockQ8_K::kValues; ++j) dst[j] = block.d * static_cast<float>(block.qs[j]);
  }
}

}  // namespace tensor

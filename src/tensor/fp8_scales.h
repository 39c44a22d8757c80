// The 8-bit block scales of the FP4 types: E8M0 (MXFP4) and unsigned E4M3 (NVFP4), to and from
// f32. Decoded scales are halved because kFp4Levels (blocks.h) are the E2M1 values doubled.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace tensor {

// E8M0 exponent e → 2^(e - 128). e = 0 and 1 give f32 subnormals (2^-128, 2^-127).
inline float mxfp4_half_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

// Unsigned E4M3 (bias 7, no sign bit used) → f32 / 2. 0x00 and 0x7F (E4M3's nan) decode to 0, as
// the reference decoders do.
inline float nvfp4_half_scale(uint8_t x) {
  if (x == 0 || x == 0x7f) return 0.0f;
  const uint32_t exponent = (x >> 3) & 0xfu;
  const uint32_t mantissa = x & 0x7u;
  if (exponent == 0) return static_cast<float>(mantissa) * 0x1p-10f;  // subnormal m/8 * 2^-6 / 2
  // (1 + m/8) * 2^(exponent - 7) / 2, built directly: every such value is exact in f32.
  return std::bit_cast<float>((exponent + 119) << 23 | mantissa << 20);
}

// f32 → unsigned E4M3 as the reference encoder rounds it: non-positive values give 0, values
// past 448 saturate to 0x7E (the largest finite), the mantissa rounds half up on its first
// dropped bit, and the subnormal range rounds x · 2^9 half up.
inline uint8_t f32_to_ue4m3(float x) {
  if (!(x > 0.0f)) return 0;
  if (x > 448.0f) x = 448.0f;
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  int exponent = static_cast<int>((bits >> 23) & 0xffu) - 127 + 7;
  if (exponent <= 0) {
    const int mantissa = static_cast<int>(x * 512.0f + 0.5f);
    if (mantissa < 1) return 0;
    return static_cast<uint8_t>(mantissa > 7 ? 7 : mantissa);
  }
  if (exponent >= 15) return 0x7e;
  int mantissa = static_cast<int>((bits >> 20) & 0x7u) + static_cast<int>((bits >> 19) & 1u);
  if (mantissa > 7) {
    mantissa = 0;
    if (++exponent >= 15) return 0x7e;
  }
  return static_cast<uint8_t>(exponent << 3 | mantissa);
}

}  // namespace tensor

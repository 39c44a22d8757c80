// Bit-exact conversions between f32 and the 16-bit floats GGUF stores (IEEE f16 and bfloat16).
//
// f16 and bf16 values travel as their raw uint16_t bit patterns: that is how block structs and
// files hold them, and it keeps these functions plain integer code (no compiler _Float16, no
// host-only intrinsics), so CUDA can use the same rules. Narrowing rounds to nearest, ties to
// even (what hardware converters and every GGUF writer do); subnormals are kept, not flushed.
#pragma once

#include <bit>
#include <cstdint>

namespace tensor {

// f16 → f32 is exact: every f16 (subnormals included) is representable as an f32.
constexpr float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {  // inf or nan; the nan payload moves to the top of the f32 mantissa
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent != 0) {  // normal: rebias the exponent from 15 to 127
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal: mantissa * 2^-24 with its top set bit at position p becomes 1.f * 2^(p - 24).
  const int top = std::bit_width(mantissa) - 1;
  const uint32_t f32_exponent = static_cast<uint32_t>(top + 103);  // (top - 24) + 127
  const uint32_t f32_mantissa = (mantissa << (23 - top)) & 0x7fffffu;
  return std::bit_cast<float>(sign | (f32_exponent << 23) | f32_mantissa);
}

// f32 → f16, round to nearest even. Magnitudes from 65520 up (the midpoint between 65504, the
// largest f16, and 65536) become inf; nan stays nan (quiet, top payload bits kept, as x86 F16C).
constexpr uint16_t f32_to_f16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // nan
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // ≥ 65520, or inf
  if (magnitude >= 0x38800000u) {
    // Normal f16 (≥ 2^-14): rebias the exponent, round away the 13 low mantissa bits. A carry out
    // of the mantissa correctly bumps the exponent.
    uint32_t h = (((magnitude >> 23) - 112) << 10) | ((magnitude >> 13) & 0x3ffu);
    const uint32_t rest = magnitude & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  // Subnormal f16 or zero: the result is round(|f| / 2^-24). |f| = m * 2^(e - 150) with m the
  // 24-bit significand, so |f| / 2^-24 = m >> (126 - e). At or below 2^-25 (the midpoint between
  // 0 and the smallest subnormal, a tie that goes to the even 0) everything becomes zero.
  if (magnitude <= 0x33000000u) return sign;
  const uint32_t e = magnitude >> 23;
  const uint32_t m = (magnitude & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 14..24 here
  uint32_t h = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u))) ++h;  // may round up to 0x400, the smallest normal
  return static_cast<uint16_t>(sign | h);
}

// bf16 is the top half of an f32, so widening is a shift.
constexpr float bf16_to_f32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// f32 → bf16, round to nearest even; nan stays nan (quiet bit forced so it cannot become inf).
constexpr uint16_t f32_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7fff plus the lowest kept bit rounds the discarded half to nearest, ties to even;
  // overflow past the largest finite value carries into the exponent and gives inf, as it should.
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace tensor

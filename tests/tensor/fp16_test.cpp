// f16 and bf16 conversions: exhaustive over all 65536 f16 patterns, rounding cases checked against
// values computed from the definition, and (where the compiler has _Float16) against its
// conversions on many random f32 values.
#include "tensor/fp16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace {

using tensor::bf16_to_f32;
using tensor::f16_to_f32;
using tensor::f32_to_bf16;
using tensor::f32_to_f16;

// The value of an f16 pattern from its definition, in double: (-1)^s * 2^(e-15) * 1.m, or
// 2^-14 * 0.m for subnormals.
double f16_value_by_definition(uint16_t h) {
  const int sign = h >> 15;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double magnitude;
  if (exponent == 0x1f) {
    magnitude = mantissa ? std::numeric_limits<double>::quiet_NaN()
                         : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);
  } else {
    magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

TEST(Fp16, EveryF16WidensToItsDefinedValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double want = f16_value_by_definition(static_cast<uint16_t>(h));
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << h;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << std::hex << h;  // -0 stays -0
    }
  }
}

// f16 → f32 → f16 returns every pattern unchanged, nan payloads included.
TEST(Fp16, EveryF16RoundTripsExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const bool signaling_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0 && (h & 0x200) == 0;
    // A signaling nan comes back quiet (the quiet bit set); everything else bit for bit.
    const uint16_t want = signaling_nan ? static_cast<uint16_t>(h | 0x200) : half;
    ASSERT_EQ(f32_to_f16(f16_to_f32(half)), want) << std::hex << h;
  }
}

TEST(Fp16, F32ToF16RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and the next f16 (1 + 2^-10): ties go to the even 1.
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even): rounds up.
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
  // Just above a tie rounds up; just below rounds down.
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f - 0x1p-23f), 0x3c00);
  // Largest finite, and the overflow threshold 65520 (a tie that rounds to even = inf).
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.996f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
  // Subnormals: 2^-24 is the smallest; 2^-25 is the tie to 0 (even); just above goes up.
  EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);
  EXPECT_EQ(f32_to_f16(0x1p-25f * 1.0000001f), 0x0001);
  EXPECT_EQ(f32_to_f16(3 * 0x1p-25f), 0x0002);  // 1.5 steps: tie between 1 and 2 → 2 (even)
  EXPECT_EQ(f32_to_f16(5 * 0x1p-25f), 0x0002);  // 2.5 steps → 2 (even)
  EXPECT_EQ(f32_to_f16(-0x1p-26f), 0x8000);     // underflows to -0
  EXPECT_EQ(f32_to_f16(0x1p-14f - 0x1p-26f), 0x0400);  // rounds up into the smallest normal
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  const uint16_t nan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x3ff, 0);
}

// Every f32 rounds to one of the two f16 values around it, the nearer one, ties to even. Checked
// on random bit patterns over the whole f16 range (and beyond) against the widened neighbours.
TEST(Fp16, RandomF32RoundToNearestF16) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<uint32_t> exponent(100, 145);  // f16 subnormals … overflow
  std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t pattern = (bits(rng) & 0x807fffffu) | exponent(rng) << 23;
    const float f = std::bit_cast<float>(pattern);
    const uint16_t h = f32_to_f16(f);
    const double x = std::fabs(static_cast<double>(f));
    const double got = std::fabs(static_cast<double>(f16_to_f32(h)));
    if (std::isinf(got)) {
      ASSERT_GE(x, 65520.0) << f;
      continue;
    }
    // The neighbour on the other side of x, one f16 step away.
    const uint16_t magnitude = h & 0x7fff;
    const uint16_t other = got <= x ? magnitude + 1 : magnitude - 1;
    const double alternative = static_cast<double>(f16_to_f32(other));
    const double error = std::fabs(got - x);
    const double other_error = std::fabs(alternative - x);
    ASSERT_LE(error, other_error) << f;
    if (error == other_error) {
      ASSERT_EQ(h & 1, 0) << "tie not to even for " << f;
    }
    ASSERT_EQ(h >> 15, pattern >> 31) << f;
  }
}

#if defined(__FLT16_MAX__)
// The compiler's own f16 type rounds by IEEE rules in a different implementation (libgcc or
// F16C): an independent check of narrowing on random finite f32.
TEST(Fp16, MatchesCompilerFloat16Conversion) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu);
  for (int i = 0; i < 1000000; ++i) {
    const float f = std::bit_cast<float>(bits(rng));
    if (std::isnan(f)) continue;
    const auto want = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    ASSERT_EQ(f32_to_f16(f), want) << f;
  }
}
#endif

TEST(Bf16, WidensByShifting) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(bf16_to_f32(0x0001), std::bit_cast<float>(0x00010000u));  // a subnormal
  EXPECT_TRUE(std::isinf(bf16_to_f32(0x7f80)));
  EXPECT_TRUE(std::isnan(bf16_to_f32(0x7fc0)));
}

TEST(Bf16, F32ToBf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 (even) and 1 + 2^-7: stays 1.
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f + 0x1p-23f), 0x3f81);
  // Overflow to inf past the largest finite bf16; inf and -0 kept.
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  // f32 subnormals round like any other value (not flushed).
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x00018000u)), 0x0002);  // tie, odd 1 → even 2
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x00008000u)), 0x0000);  // tie, even 0 stays
  // nan stays nan, even when its payload is only in the low bits that get dropped.
  const uint16_t nan = f32_to_bf16(std::bit_cast<float>(0x7f800001u));
  EXPECT_TRUE(std::isnan(bf16_to_f32(nan)));
}

// Exhaustive over all bf16 patterns: widening then narrowing is the identity (bar sNaN quieting).
TEST(Bf16, EveryBf16RoundTripsExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
    const uint16_t want = nan ? static_cast<uint16_t>(h | 0x40) : half;
    ASSERT_EQ(f32_to_bf16(bf16_to_f32(half)), want) << std::hex << h;
  }
}

}  // namespace

// The K-quant dot kernels (Q4_K, Q5_K, Q6_K, IQ4_XS against Q8_K activations) at every
// instruction-set level this CPU supports: the partner conversion byte for byte against the
// reference quantizer, the multi-token dot against an exact product of what the kernel reads and
// against ref::matmul on the f32 activations, and batch invariance bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/ref/ref.h"
#include "tensor/blocks.h"
#include "tensor/dequantize.h"
#include "tensor/fp16.h"
#include "tensor/quantize.h"
#include "testing/testing.h"

namespace {

using kernels::cpu::DotKernel;
using kernels::cpu::Isa;
using tensor::BlockQ8_K;
using tensor::DType;

using testing_util::random_floats;

// rows × cols weights: random normal values through the reference quantizer (Q4_K, Q5_K, Q6_K),
// or, for IQ4_XS (no quantizer), random bytes with small positive f16 scales, so every level
// index, sub-block scale (ls − 32 from −32 to 31) and bit pattern occurs.
std::vector<uint8_t> kquant_weights(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  const size_t row_bytes = static_cast<size_t>(tensor::row_bytes(type, cols));
  std::vector<uint8_t> bytes(row_bytes * rows);
  if (type == DType::kIQ4_XS) {
    std::mt19937 rng(seed);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    for (size_t off = 0; off < bytes.size(); off += sizeof(tensor::BlockIQ4_XS)) {
      const uint16_t d = tensor::f32_to_f16(0.001f * (1 + rng() % 16));
      std::memcpy(&bytes[off + offsetof(tensor::BlockIQ4_XS, d)], &d, 2);
    }
  } else {
    const auto values = random_floats(static_cast<size_t>(rows * cols), seed, 0.5f);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(
          tensor::quantize_row(type, values.data() + r * cols, bytes.data() + r * row_bytes, cols)
              .ok());
    }
  }
  return bytes;
}

class CpuDotKquant : public testing::TestWithParam<std::tuple<DType, Isa>> {
 protected:
  void SetUp() override {
    type_ = std::get<0>(GetParam());
    level_ = std::get<1>(GetParam());
    if (!kernels::cpu::cpu_supports(level_)) {
      GTEST_SKIP() << "level " << kernels::cpu::isa_name(level_) << " not supported by this CPU";
    }
    kernel_ = kernels::cpu::detail::dot_kernel_kquant(type_, level_);
    if (kernel_.dot == nullptr) {
      // AVX-512 without VNNI has no dedicated code: dot_kernel() steps down to AVX2.
      ASSERT_EQ(level_, Isa::kAvx512) << "no kernel at " << kernels::cpu::isa_name(level_);
      kernel_ = kernels::cpu::dot_kernel(type_, level_);
    }
    ASSERT_NE(kernel_.dot, nullptr);
    ASSERT_EQ(kernel_.partner, DType::kQ8_K);
  }

  DType type_ = DType::kF32;
  Isa level_ = Isa::kScalar;
  DotKernel kernel_;
};

// The conversion to Q8_K is the reference quantizer's, byte for byte, including an all-zero
// super-block, a constant one, exact rounding ties and a maximum that appears with both signs.
TEST_P(CpuDotKquant, PartnerIsTheReferenceQ8K) {
  constexpr int64_t kCols = 256 * 6;
  auto x = random_floats(kCols, 21, 3.0f);
  std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
  std::fill(x.begin() + 512, x.begin() + 768, -1.5f);
  // Scale 1 (max −127) and halves: every other value is a rounding tie.
  for (int i = 0; i < 256; ++i) x[768 + i] = 0.5f * static_cast<float>(i - 128);
  x[768] = -127.0f;
  x[1024 + 3] = -7.0f;
  x[1024 + 200] = 7.0f;                              // |max| tie: the first one's sign wins
  for (int i = 1280; i < 1536; ++i) x[i] *= 1e-30f;  // tiny values, large inverse scale
  std::vector<BlockQ8_K> got(kCols / 256), want(kCols / 256);
  std::memset(got.data(), 0xA5, got.size() * sizeof(BlockQ8_K));
  kernel_.to_partner(x.data(), got.data(), kCols);
  tensor::quantize_row_q8_k(x.data(), want.data(), kCols);
  for (size_t b = 0; b < got.size(); ++b) {
    EXPECT_EQ(std::memcmp(&got[b], &want[b], sizeof(BlockQ8_K)), 0) << "super-block " << b;
  }
}

// Every row of awkward matrices, 1, 3 and 17 tokens in one call:
// (a) against the exact product of the dequantized weights and the dequantized Q8_K rows the
//     kernel reads. Only f32 rounding separates them (the kernel's integer sums are exact; it
//     rounds each super-block's sum to f32, scales and adds them, and the dequantizer rounds each
//     weight): a few units of 2^-24 relative to Σ|w·x| for up to 17 super-blocks, so 2e-6 ·
//     Σ|w·x| is tight — one wrong value of 4352 already moves the result by ~1/4352 of that sum —
//     and in proportion beyond: 84 super-blocks (21504 columns) allow 9.9e-6, where one wrong
//     value moves it by ~1/21504.
// (b) against ref::matmul on the original f32 activations, within Q8_K's rounding: a value in a
//     super-block with largest magnitude amax is stored as d·q with |d| = amax/127, off by at most
//     half a step, amax/254, so |y − ref| ≤ Σ_c |w_c| · amax(block of c) / 254 (+ the f32 term).
//     The bound is the same for the four types (they share the partner); their weights differ.
// (c) out_stride is the number of rows, as in matmul: out[t · rows + r].
// 21504 columns (31B's down projection) is an activation row too long for L1 beside the weight
// stream, where decode prefetches into L2 instead (simd::RowPrefetch).
TEST_P(CpuDotKquant, MatchesExactProductAndReference) {
  for (int64_t cols : {256, 768, 4352, 21504}) {
    const double relative = 2e-6 * std::max(1.0, static_cast<double>(cols / 256) / 17);
    for (int64_t rows : {1, 7, 33}) {
      for (int tokens : {1, 3, 17}) {
        SCOPED_TRACE(testing::Message()
                     << "rows " << rows << " cols " << cols << " tokens " << tokens);
        const auto w = kquant_weights(type_, rows, cols, static_cast<uint32_t>(rows * 7919 + cols));
        const size_t w_row_bytes = static_cast<size_t>(tensor::row_bytes(type_, cols));
        const auto x =
            random_floats(static_cast<size_t>(cols * tokens), static_cast<uint32_t>(cols + tokens));
        const size_t stride = static_cast<size_t>(tensor::row_bytes(DType::kQ8_K, cols));
        std::vector<uint8_t> partner(stride * tokens);
        std::vector<float> xq(static_cast<size_t>(cols * tokens));
        for (int t = 0; t < tokens; ++t) {
          kernel_.to_partner(x.data() + t * cols, partner.data() + t * stride, cols);
          ASSERT_TRUE(tensor::dequantize_row(DType::kQ8_K, partner.data() + t * stride,
                                             xq.data() + t * cols, cols)
                          .ok());
        }
        std::vector<float> y(static_cast<size_t>(rows * tokens)), ref(y.size());
        const kernels::Matrix m{w.data(), type_, cols, rows, w_row_bytes};
        kernels::ref::matmul(m, x.data(), ref.data(), tokens);
        for (int64_t r = 0; r < rows; ++r) {
          kernel_.dot(cols, w.data() + r * w_row_bytes, partner.data(), stride, tokens,
                      y.data() + r, static_cast<size_t>(rows));
        }
        std::vector<float> amax(static_cast<size_t>(cols / 256 * tokens), 0.0f);
        for (int64_t i = 0; i < cols * tokens; ++i) {
          float& a = amax[static_cast<size_t>(i / 256)];
          a = std::max(a, std::fabs(x[static_cast<size_t>(i)]));
        }
        std::vector<float> wf(cols);
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_TRUE(
              tensor::dequantize_row(type_, w.data() + r * w_row_bytes, wf.data(), cols).ok());
          for (int t = 0; t < tokens; ++t) {
            const float* xqt = xq.data() + t * cols;
            double exact = 0, magnitude = 0, rounding = 0;
            for (int64_t c = 0; c < cols; ++c) {
              exact += static_cast<double>(wf[c]) * xqt[c];
              magnitude += std::fabs(static_cast<double>(wf[c]) * xqt[c]);
              rounding +=
                  std::fabs(wf[c]) * static_cast<double>(amax[(t * cols + c) / 256]) / 254.0;
            }
            const float got = y[static_cast<size_t>(t * rows + r)];
            ASSERT_NEAR(got, exact, relative * magnitude + 1e-30)
                << "row " << r << " token " << t << " (kernel vs exact partner product)";
            ASSERT_NEAR(got, ref[static_cast<size_t>(t * rows + r)],
                        rounding * 1.001 + relative * magnitude + 1e-30)
                << "row " << r << " token " << t << " (vs ref::matmul)";
          }
        }
      }
    }
  }
}

// A token's result does not depend on how many tokens share the call or where it sits in the
// batch: 17 tokens at once, each alone, and every split into 1..16-token calls give equal bits.
TEST_P(CpuDotKquant, BatchInvariantBitForBit) {
  constexpr int kTokens = 17;
  constexpr int64_t kCols = 4352;
  const auto w = kquant_weights(type_, 1, kCols, 3);
  const auto x = random_floats(static_cast<size_t>(kCols) * kTokens, 11);
  const size_t stride = static_cast<size_t>(tensor::row_bytes(DType::kQ8_K, kCols));
  std::vector<uint8_t> partner(stride * kTokens);
  for (int t = 0; t < kTokens; ++t) {
    kernel_.to_partner(x.data() + t * kCols, partner.data() + t * stride, kCols);
  }
  std::vector<float> batched(kTokens);
  kernel_.dot(kCols, w.data(), partner.data(), stride, kTokens, batched.data(), 1);
  for (int split = 1; split < kTokens; ++split) {
    std::vector<float> pieces(kTokens);
    for (int t0 = 0; t0 < kTokens; t0 += split) {
      kernel_.dot(kCols, w.data(), partner.data() + t0 * stride, stride,
                  std::min(split, kTokens - t0), pieces.data() + t0, 1);
    }
    for (int t = 0; t < kTokens; ++t) {
      EXPECT_EQ(std::memcmp(&batched[t], &pieces[t], sizeof(float)), 0)
          << "token " << t << " in calls of " << split << ": " << batched[t] << " vs " << pieces[t];
    }
  }
}

// Types outside this file's list get no kernel here (dot_simple.cpp or the f32 fallback serves
// them).
TEST(CpuDotKquantTypes, OtherTypesHaveNoKernel) {
  for (DType type : {DType::kF32, DType::kQ8_0, DType::kQ4_0, DType::kQ2_K, DType::kQ3_K,
                     DType::kQ8_K, DType::kIQ4_NL}) {
    for (Isa level : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni}) {
      EXPECT_EQ(kernels::cpu::detail::dot_kernel_kquant(type, level).dot, nullptr)
          << tensor::dtype_name(type) << " " << kernels::cpu::isa_name(level);
    }
  }
}

std::string name(const testing::TestParamInfo<std::tuple<DType, Isa>>& info) {
  return std::string(tensor::dtype_name(std::get<0>(info.param))) + "_" +
         std::string(kernels::cpu::isa_name(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(
    TypesAndLevels, CpuDotKquant,
    testing::Combine(testing::Values(DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS),
                     testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni)),
    name);

}  // namespace

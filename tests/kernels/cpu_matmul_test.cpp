// The SIMD dot kernels and the threaded matmul against the scalar reference (kernels::ref), on
// random data of awkward sizes, at every instruction-set level this CPU supports.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/matmul.h"
#include "kernels/ref/ref.h"
#include "tensor/blocks.h"
#include "tensor/dequantize.h"
#include "tensor/fp16.h"
#include "tensor/quantize.h"
#include "util/aligned_buffer.h"

namespace {

using kernels::Matrix;
using kernels::cpu::DotKernel;
using kernels::cpu::Isa;
using tensor::DType;

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& f : v) f = dist(rng);
  return v;
}

// A weight matrix of `type`: random normal values quantized by the reference quantizer, or, for
// types without one, random bytes with sane f16 scales (every field then holds random bits).
struct Weights {
  std::vector<uint8_t> bytes;
  Matrix m;
};

Weights make_weights(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  Weights w;
  const size_t row_bytes = static_cast<size_t>(tensor::row_bytes(type, cols));
  w.bytes.resize(row_bytes * rows);
  const auto values = random_floats(static_cast<size_t>(rows * cols), seed, 0.5f);
  if (tensor::can_quantize(type)) {
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(
          tensor::quantize_row(type, values.data() + r * cols, w.bytes.data() + r * row_bytes, cols)
              .ok());
    }
  } else {
    std::mt19937 rng(seed);
    for (auto& b : w.bytes) b = static_cast<uint8_t>(rng());
    // Overwrite the f16 super-block scales with small finite ones, so values stay finite.
    std::vector<size_t> scales;
    if (type == DType::kQ2_K)
      scales = {offsetof(tensor::BlockQ2_K, d), offsetof(tensor::BlockQ2_K, dmin)};
    if (type == DType::kQ3_K) scales = {offsetof(tensor::BlockQ3_K, d)};
    if (type == DType::kIQ4_XS) scales = {offsetof(tensor::BlockIQ4_XS, d)};
    if (type == DType::kIQ4_NL) scales = {offsetof(tensor::BlockIQ4_NL, d)};
    EXPECT_FALSE(scales.empty()) << "no scale layout for " << tensor::dtype_name(type);
    const int64_t block_bytes = tensor::row_bytes(type, tensor::block_values(type));
    for (size_t off = 0; off < w.bytes.size(); off += block_bytes) {
      for (size_t field : scales) {
        const uint16_t d = tensor::f32_to_f16(0.01f * (1 + rng() % 8));
        std::memcpy(&w.bytes[off + field], &d, 2);
      }
    }
  }
  w.m = {w.bytes.data(), type, cols, rows, row_bytes};
  return w;
}

// The activation row a kernel reads, rebuilt in f32 (what the integer kernel multiplies exactly).
std::vector<float> partner_values(const DotKernel& k, const std::vector<uint8_t>& partner,
                                  int64_t n) {
  std::vector<float> out(n);
  if (k.partner == DType::kF32) {
    std::memcpy(out.data(), partner.data(), n * sizeof(float));
  } else if (k.partner == DType::kQ8_1) {
    const auto* b = reinterpret_cast<const tensor::BlockQ8_1*>(partner.data());
    for (int64_t i = 0; i < n; ++i) out[i] = tensor::f16_to_f32(b[i / 32].d) * b[i / 32].qs[i % 32];
  } else {
    EXPECT_TRUE(tensor::dequantize_row(k.partner, partner.data(), out.data(), n).ok());
  }
  return out;
}

struct Case {
  DType type;
  std::vector<int64_t> cols;
};

const std::vector<Case> kCases = {
    {DType::kF32, {1, 7, 33, 4099}},  {DType::kF16, {1, 9, 40, 4103}},
    {DType::kBF16, {3, 16, 4100}},    {DType::kQ8_0, {32, 96, 4128}},
    {DType::kQ4_0, {32, 96, 4128}},   {DType::kQ5_0, {32, 96, 4128}},
    {DType::kQ4_1, {32, 96, 4128}},   {DType::kQ5_1, {32, 96, 4128}},
    {DType::kQ4_K, {256, 768, 4352}}, {DType::kQ5_K, {256, 768, 4352}},
    {DType::kQ6_K, {256, 768, 4352}}, {DType::kIQ4_XS, {256, 768, 4352}},
};

constexpr Isa kLevels[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni};

// Per level and type: (a) against the exact product of the dequantized weights and the partner
// activations the kernel reads (only f32 rounding differs: 1e-5 of Σ|w·x|); (b) against
// ref::matmul on the original f32 activations within the partner's rounding: a Q8_0/Q8_1 value
// is off by at most half a step, d/2 = amax(block)/254, so |error| ≤ Σ|w_c|·amax(block of c)/254
// (blocks of 32 for Q8_0/Q8_1, of 256 for the K-quants' Q8_K).
TEST(CpuDot, EveryTypeAtEverySupportedLevelMatchesTheReference) {
  for (Isa level : kLevels) {
    if (!kernels::cpu::cpu_supports(level)) {
      std::printf("[ skipped  ] level %s: not supported by this CPU\n",
                  std::string(kernels::cpu::isa_name(level)).c_str());
      continue;
    }
    for (const Case& c : kCases) {
      const DotKernel k = kernels::cpu::dot_kernel(c.type, level);
      ASSERT_NE(k.dot, nullptr) << tensor::dtype_name(c.type);
      for (int64_t cols : c.cols) {
        for (int64_t rows : {1, 7, 33}) {
          SCOPED_TRACE(testing::Message()
                       << kernels::cpu::isa_name(level) << " " << tensor::dtype_name(c.type)
                       << " rows " << rows << " cols " << cols);
          const Weights w =
              make_weights(c.type, rows, cols, static_cast<uint32_t>(rows * 1000 + cols));
          const auto x = random_floats(cols, static_cast<uint32_t>(cols + 7));
          std::vector<uint8_t> partner(tensor::row_bytes(k.partner, cols) + 64);
          k.to_partner(x.data(), partner.data(), cols);
          const auto xq = partner_values(k, partner, cols);
          std::vector<float> y(rows), ref(rows), row(cols);
          kernels::ref::matmul(w.m, x.data(), ref.data(), 1);
          for (int64_t r = 0; r < rows; ++r) {
            k.dot(cols, w.bytes.data() + r * w.m.row_bytes, partner.data(), 0, 1, &y[r], 1);
            ASSERT_TRUE(
                tensor::dequantize_row(c.type, w.bytes.data() + r * w.m.row_bytes, row.data(), cols)
                    .ok());
            double exact = 0, magnitude = 0, rounding = 0;
            for (int64_t i = 0; i < cols; ++i) {
              exact += static_cast<double>(row[i]) * xq[i];
              magnitude += std::fabs(static_cast<double>(row[i]) * xq[i]);
              if (k.partner != DType::kF32) {
                const int64_t block = tensor::block_values(k.partner);
                float amax = 0;
                for (int64_t j = i / block * block; j < i / block * block + block; ++j) {
                  amax = std::max(amax, std::fabs(x[j]));
                }
                rounding += std::fabs(row[i]) * amax / 254.0;
              }
            }
            if (k.partner == DType::kQ8_1) {
              // Q8_1 stores s = d·Σq rounded to f16, and the kernel adds m·s for the block minimum
              // m: the exact product of what the kernel reads uses that stored s.
              const auto* xb = reinterpret_cast<const tensor::BlockQ8_1*>(partner.data());
              const uint8_t* wrow = w.bytes.data() + r * w.m.row_bytes;
              const size_t block_bytes = tensor::row_bytes(c.type, 32);
              for (int64_t b = 0; b < cols / 32; ++b) {
                uint16_t m;
                std::memcpy(&m, wrow + b * block_bytes + 2, 2);  // Q4_1 / Q5_1: d, then m
                int sum = 0;
                for (int j = 0; j < 32; ++j) sum += xb[b].qs[j];
                exact += tensor::f16_to_f32(m) *
                         (tensor::f16_to_f32(xb[b].s) -
                          static_cast<double>(tensor::f16_to_f32(xb[b].d)) * sum);
              }
            }
            EXPECT_NEAR(y[r], exact, 1e-5 * magnitude + 1e-6)
                << "row " << r << " (kernel vs exact partner product)";
            EXPECT_NEAR(y[r], ref[r], rounding * 1.01 + 1e-5 * magnitude + 1e-6)
                << "row " << r << " (vs ref::matmul)";
          }
        }
      }
    }
  }
}

// A token's result never depends on the tokens beside it (batch invariance), at every level.
TEST(CpuDot, ATokenAloneAndInsideABatchGiveTheSameBits) {
  constexpr int kTokens = 17;
  for (Isa level : kLevels) {
    if (!kernels::cpu::cpu_supports(level)) continue;
    for (const Case& c : kCases) {
      const DotKernel k = kernels::cpu::dot_kernel(c.type, level);
      const int64_t cols = c.cols.back();
      const Weights w = make_weights(c.type, 1, cols, 3);
      const auto x = random_floats(static_cast<size_t>(cols) * kTokens, 11);
      const size_t stride = tensor::row_bytes(k.partner, cols);
      std::vector<uint8_t> partner(stride * kTokens);
      for (int t = 0; t < kTokens; ++t)
        k.to_partner(x.data() + t * cols, partner.data() + t * stride, cols);
      std::vector<float> batched(kTokens), alone(kTokens);
      k.dot(cols, w.bytes.data(), partner.data(), stride, kTokens, batched.data(), 1);
      for (int t = 0; t < kTokens; ++t)
        k.dot(cols, w.bytes.data(), partner.data() + t * stride, 0, 1, &alone[t], 1);
      for (int t = 0; t < kTokens; ++t) {
        EXPECT_EQ(std::memcmp(&batched[t], &alone[t], 4), 0)
            << kernels::cpu::isa_name(level) << " " << tensor::dtype_name(c.type) << " token " << t;
      }
    }
  }
}

// The threaded matmul, including the types that take the dequantize-a-row path: same bits on
// 1, 2 and 3 threads and in any batch, and within the partner tolerance of ref::matmul.
TEST(CpuMatmul, ThreadsAndBatchesNeverChangeTheResult) {
  std::vector<DType> types;
  for (const Case& c : kCases) types.push_back(c.type);
  for (DType t : {DType::kQ2_K, DType::kQ3_K, DType::kIQ4_NL}) {  // no kernel: rows are dequantized
    types.push_back(t);
  }
  constexpr int kTokens = 70;  // more than one token block of 64
  for (DType type : types) {
    SCOPED_TRACE(tensor::dtype_name(type));
    const int64_t cols = tensor::block_values(type) == 1 ? 100 : tensor::block_values(type) * 3;
    const int64_t rows = 37;
    const Weights w = make_weights(type, rows, cols, 5);
    const auto x = random_floats(static_cast<size_t>(cols) * kTokens, 9);
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
      util::ThreadPool pool(threads);
      util::AlignedBuffer scratch(kernels::cpu::matmul_scratch_bytes(kTokens, cols, threads));
      std::vector<float> y(static_cast<size_t>(rows) * kTokens);
      kernels::cpu::matmul(w.m, x.data(), y.data(), kTokens, pool, scratch.data());
      if (first.empty()) {
        first = y;
        std::vector<float> ref(y.size());
        kernels::ref::matmul(w.m, x.data(), ref.data(), kTokens);
        double worst = 0, largest = 0;
        for (size_t i = 0; i < y.size(); ++i) {
          worst = std::max(worst, std::fabs(static_cast<double>(y[i]) - ref[i]));
          largest = std::max(largest, std::fabs(static_cast<double>(ref[i])));
        }
        // A loose end-to-end bound (the per-element bound is checked above): activation rounding
        // moves each value by at most 1/254 of its block's largest, so outputs stay within 2% of
        // the largest output; rows dequantized to f32 agree to rounding.
        EXPECT_LT(worst, 0.02 * largest) << "vs ref::matmul";
      } else {
        EXPECT_EQ(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)), 0)
            << threads << " threads";
      }
      // One token alone gives the bits it got inside the batch.
      std::vector<float> one(rows);
      kernels::cpu::matmul(w.m, x.data() + 5 * cols, one.data(), 1, pool, scratch.data());
      EXPECT_EQ(std::memcmp(one.data(), first.data() + 5 * rows, rows * sizeof(float)), 0);
    }
  }
}

}  // namespace

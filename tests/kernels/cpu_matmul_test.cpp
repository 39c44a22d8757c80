// The SIMD dot kernels and their activation converters against the scalar reference (kernels::ref)
// and the exact product of what they read, and the threaded matmul's bit-for-bit promises (threads,
// batches, the scalar level), on random data of awkward sizes, at every instruction-set level: each
// level is its own test instance, skipped (by name) on a CPU without it, so a CI machine with
// AVX-512 runs those. The matmul against the reference is in the table of kernel cases
// (backend_cases_test.cpp), on every level too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/matmul.h"
#include "kernels/ref/ref.h"
#include "tensor/blocks.h"
#include "tensor/dequantize.h"
#include "tensor/fp16.h"
#include "tensor/quantize.h"
#include "testing/testing.h"
#include "util/aligned_buffer.h"
#include "util/thread_pool.h"

namespace {

using kernels::Matrix;
using kernels::cpu::DotKernel;
using kernels::cpu::Isa;
using tensor::DType;

using testing_util::random_floats;

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
    if (type == DType::kTQ1_0) scales = {offsetof(tensor::BlockTQ1_0, d)};
    if (type == DType::kTQ2_0) scales = {offsetof(tensor::BlockTQ2_0, d)};
    const int64_t block_bytes = tensor::row_bytes(type, tensor::block_values(type));
    if (type == DType::kMXFP4) {  // a power-of-two scale of 2^-8 .. 2^-1
      for (size_t off = 0; off < w.bytes.size(); off += block_bytes) w.bytes[off] = 120 + rng() % 8;
      w.m = {w.bytes.data(), type, cols, rows, row_bytes};
      return w;
    }
    if (type == DType::kNVFP4) {  // UE4M3 scales of 2^-4 .. 2^-1 (exponent field 3..6)
      for (size_t off = 0; off < w.bytes.size(); off += block_bytes) {
        for (int s = 0; s < 4; ++s) w.bytes[off + s] = static_cast<uint8_t>(0x18 + rng() % 32);
      }
      w.m = {w.bytes.data(), type, cols, rows, row_bytes};
      return w;
    }
    EXPECT_FALSE(scales.empty()) << "no scale layout for " << tensor::dtype_name(type);
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
    {DType::kF32, {1, 7, 33, 4099}},       {DType::kF16, {1, 9, 40, 4103}},
    {DType::kBF16, {3, 16, 4100}},         {DType::kQ8_0, {32, 64, 96, 4128}},
    {DType::kQ4_0, {32, 64, 96, 4128}},    {DType::kQ5_0, {32, 64, 96, 4128}},
    {DType::kQ4_1, {32, 64, 96, 4128}},    {DType::kQ5_1, {32, 64, 96, 4128}},
    {DType::kQ4_K, {256, 512, 768, 4352}}, {DType::kQ5_K, {256, 512, 768, 4352}},
    {DType::kQ6_K, {256, 512, 768, 4352}}, {DType::kIQ4_XS, {256, 512, 768, 4352}},
};

// Types with no dot kernel at any level: matmul dequantizes their rows and dots them in f32.
const std::vector<DType> kDequantizedTypes = {DType::kQ2_K,  DType::kQ3_K,  DType::kIQ4_NL,
                                              DType::kTQ1_0, DType::kTQ2_0, DType::kMXFP4,
                                              DType::kNVFP4};

std::string level_name(const testing::TestParamInfo<Isa>& info) {
  return std::string(kernels::cpu::isa_name(info.param));
}

class CpuLevel : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!kernels::cpu::cpu_supports(GetParam())) {
      GTEST_SKIP() << "level " << kernels::cpu::isa_name(GetParam())
                   << " is not supported by this CPU";
    }
  }
  Isa level() const { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Levels, CpuLevel,
                         testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni),
                         level_name);

// Tolerance of a kernel result against ref::matmul (which dequantizes the row and sums in double
// on the original f32 activations), per output:
// - f32 summation order: 1e-5 of Σ|w_c·x_c| (a 4352-term f32 sum drifts far less);
// - partner rounding: a Q8_0/Q8_1/Q8_K activation is off by at most half a step, d/2 =
//   amax(block)/254, so the product moves by at most Σ|w_c|·amax(block of c)/254 (blocks of 32
//   for Q8_0/Q8_1, of 256 for the K-quants' Q8_K; f32 partners: none). Q8_1 also carries
//   s = d·Σq rounded to f16 for the min term: within the same bound, with 1 % to spare.
double tolerance(DType partner, const float* w_row, const float* x, int64_t n) {
  double magnitude = 0, rounding = 0;
  const int64_t block = partner == DType::kF32 ? 1 : tensor::block_values(partner);
  for (int64_t b = 0; b < n; b += block) {
    float amax = 0;
    for (int64_t i = b; i < b + block; ++i) amax = std::max(amax, std::fabs(x[i]));
    for (int64_t i = b; i < b + block; ++i) {
      magnitude += std::fabs(static_cast<double>(w_row[i]) * x[i]);
      if (partner != DType::kF32) rounding += std::fabs(w_row[i]) * amax / 254.0;
    }
  }
  return rounding * 1.01 + 1e-5 * magnitude + 1e-6;
}

// Per type: (a) against the exact product of the dequantized weights and the partner activations
// the kernel reads (only f32 rounding differs: 1e-5 of Σ|w·x|); (b) against ref::matmul on the
// original f32 activations within tolerance() above.
TEST_P(CpuLevel, EveryTypeMatchesTheReference) {
  for (const Case& c : kCases) {
    const DotKernel k = kernels::cpu::dot_kernel(c.type, level());
    ASSERT_NE(k.dot, nullptr) << tensor::dtype_name(c.type);
    for (int64_t cols : c.cols) {
      for (int64_t rows : {1, 7, 33}) {
        SCOPED_TRACE(testing::Message()
                     << tensor::dtype_name(c.type) << " rows " << rows << " cols " << cols);
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
          double exact = 0, magnitude = 0;
          for (int64_t i = 0; i < cols; ++i) {
            exact += static_cast<double>(row[i]) * xq[i];
            magnitude += std::fabs(static_cast<double>(row[i]) * xq[i]);
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
              exact +=
                  tensor::f16_to_f32(m) * (tensor::f16_to_f32(xb[b].s) -
                                           static_cast<double>(tensor::f16_to_f32(xb[b].d)) * sum);
            }
          }
          EXPECT_NEAR(y[r], exact, 1e-5 * magnitude + 1e-6)
              << "row " << r << " (kernel vs exact partner product)";
          EXPECT_NEAR(y[r], ref[r], tolerance(k.partner, row.data(), x.data(), cols))
              << "row " << r << " (vs ref::matmul)";
        }
      }
    }
  }
}

// A token's result never depends on the tokens beside it (batch invariance): every tile size the
// kernels split a batch into gives the bits of the token alone.
TEST_P(CpuLevel, ATokenAloneAndInsideABatchGiveTheSameBits) {
  constexpr int kTokens = 17;
  for (const Case& c : kCases) {
    const DotKernel k = kernels::cpu::dot_kernel(c.type, level());
    const int64_t cols = c.cols.back();
    const Weights w = make_weights(c.type, 1, cols, 3);
    const auto x = random_floats(static_cast<size_t>(cols) * kTokens, 11);
    const size_t stride = tensor::row_bytes(k.partner, cols);
    std::vector<uint8_t> partner(stride * kTokens);
    for (int t = 0; t < kTokens; ++t)
      k.to_partner(x.data() + t * cols, partner.data() + t * stride, cols);
    std::vector<float> alone(kTokens);
    for (int t = 0; t < kTokens; ++t)
      k.dot(cols, w.bytes.data(), partner.data() + t * stride, 0, 1, &alone[t], 1);
    for (int n_tokens = 2; n_tokens <= kTokens; ++n_tokens) {
      std::vector<float> batched(n_tokens);
      k.dot(cols, w.bytes.data(), partner.data(), stride, n_tokens, batched.data(), 1);
      for (int t = 0; t < n_tokens; ++t) {
        EXPECT_EQ(std::memcmp(&batched[t], &alone[t], 4), 0)
            << tensor::dtype_name(c.type) << " token " << t << " of " << n_tokens;
      }
    }
  }
}

// The kernel over kDotRows rows gives every row and token the bits of the one-row kernel, in
// decode (one token) and in prefill batches that end in every tile remainder.
TEST_P(CpuLevel, RowsKernelGivesEachRowTheBitsOfTheRowKernel) {
  constexpr int kRows = kernels::cpu::kDotRows;
  int covered = 0;
  for (const Case& c : kCases) {
    const DotKernel k = kernels::cpu::dot_kernel(c.type, level());
    if (!k.dot_rows) continue;
    ++covered;
    for (int64_t cols : c.cols) {
      for (int n_tokens : {1, 2, 3, 4, 5, 7, 9}) {
        const Weights w = make_weights(c.type, kRows, cols, 5);
        const auto x = random_floats(static_cast<size_t>(cols) * n_tokens, 17);
        const size_t stride = tensor::row_bytes(k.partner, cols);
        std::vector<uint8_t> partner(stride * n_tokens);
        for (int t = 0; t < n_tokens; ++t)
          k.to_partner(x.data() + t * cols, partner.data() + t * stride, cols);
        // out[t][r] with a row stride wider than kRows, as matmul writes into [T][n_rows].
        constexpr size_t kOutStride = kRows + 3;
        std::vector<float> out(kOutStride * n_tokens, NAN);
        k.dot_rows(cols, w.bytes.data(), w.m.row_bytes, partner.data(), stride, n_tokens,
                   out.data(), kOutStride);
        for (int t = 0; t < n_tokens; ++t) {
          for (int r = 0; r < kRows; ++r) {
            float one = 0;
            k.dot(cols, w.bytes.data() + r * w.m.row_bytes, partner.data() + t * stride, 0, 1, &one,
                  1);
            EXPECT_EQ(std::memcmp(&one, &out[t * kOutStride + r], 4), 0)
                << tensor::dtype_name(c.type) << " cols " << cols << " tokens " << n_tokens
                << " token " << t << " row " << r;
          }
        }
      }
    }
  }
  if (level() != Isa::kScalar) {
    EXPECT_GE(covered, 5);  // Q8_0, Q4_0, Q5_0, Q4_1, Q5_1
  }
}

// The Q8_K converter (the K-quants' partner) of every level writes the scalar's bytes: random
// blocks, a block whose largest |x| comes first as −a and later as +a (the first sets the sign
// of the scale), exact halves, zeros, subnormals, and inf / nan.
TEST_P(CpuLevel, Q8KConverterWritesTheScalarBytes) {
  constexpr int64_t kCols = 256 * 8;
  auto x = random_floats(kCols, 33);
  x[256 + 17] = -9.0f;  // block 1: |max| 9 first negative, then positive
  x[256 + 200] = 9.0f;
  for (int j = 0; j < 256; ++j) {
    x[512 + j] = static_cast<float>(j % 255) - 127.0f + (j % 2 ? 0.5f : 0.0f);  // block 2: halves
    x[768 + j] = 0.0f;                                                          // block 3: zero
    x[1024 + j] = 1e-44f * static_cast<float>(j % 5);  // block 4: subnormal
  }
  x[1280 + 3] = INFINITY;  // block 5
  x[1536 + 9] = NAN;       // block 6
  const DotKernel k = kernels::cpu::dot_kernel(DType::kQ4_K, level());
  const DotKernel scalar = kernels::cpu::dot_kernel(DType::kQ4_K, Isa::kScalar);
  ASSERT_EQ(k.partner, DType::kQ8_K);
  const size_t bytes = tensor::row_bytes(k.partner, kCols);
  std::vector<uint8_t> got(bytes, 0xAA), want(bytes, 0x55);
  k.to_partner(x.data(), got.data(), kCols);
  scalar.to_partner(x.data(), want.data(), kCols);
  const size_t block_bytes = sizeof(tensor::BlockQ8_K);
  for (size_t b = 0; b < bytes / block_bytes; ++b) {
    EXPECT_EQ(std::memcmp(got.data() + b * block_bytes, want.data() + b * block_bytes, block_bytes),
              0)
        << "block " << b;
  }
}

// The activation converters of every level write the scalar converter's bytes, on random rows and
// on the blocks where rounding is delicate: exact halves (x·id = k + 0.5 rounds away from zero),
// values a hair below a half, an all-zero block, subnormals (1/d overflows), inf and nan.
TEST_P(CpuLevel, ActivationConvertersWriteTheScalarBytes) {
  constexpr int64_t kCols = 32 * 12;
  auto x = random_floats(kCols, 21);
  for (int j = 0; j < 32; ++j) {
    x[j] = static_cast<float>(j) - 15.5f;                        // block 0: amax 15.5, d 1/8.19...
    x[32 + j] = j == 0 ? 127.0f : static_cast<float>(j) + 0.5f;  // block 1: d = 1, halves
    x[64 + j] = j == 0 ? -127.0f : std::nextafter(j - 0.5f, 0.0f);  // block 2: just below halves
    x[96 + j] = 0.0f;                                               // block 3: zero
    x[128 + j] = 1e-44f * static_cast<float>(j % 5);                // block 4: subnormal, 1/d = inf
    x[160 + j] = 3e-39f * static_cast<float>(j % 7 - 3);  // block 5: subnormal d, finite 1/d
  }
  x[192 + 3] = INFINITY;
  x[224 + 30] = -INFINITY;
  x[256 + 7] = NAN;
  for (DType weight : {DType::kQ8_0, DType::kQ4_1}) {  // a Q8_0 and a Q8_1 partner
    const DotKernel k = kernels::cpu::dot_kernel(weight, level());
    const DotKernel scalar = kernels::cpu::dot_kernel(weight, Isa::kScalar);
    ASSERT_EQ(k.partner, scalar.partner);
    const size_t bytes = tensor::row_bytes(k.partner, kCols);
    std::vector<uint8_t> got(bytes, 0xAA), want(bytes, 0x55);
    k.to_partner(x.data(), got.data(), kCols);
    scalar.to_partner(x.data(), want.data(), kCols);
    const size_t block_bytes = tensor::row_bytes(k.partner, 32);
    for (size_t b = 0; b < bytes / block_bytes; ++b) {
      EXPECT_EQ(
          std::memcmp(got.data() + b * block_bytes, want.data() + b * block_bytes, block_bytes), 0)
          << tensor::dtype_name(k.partner) << " block " << b;
    }
  }
}

// The threaded matmul at this level, for every type (those without a kernel are dequantized a row
// at a time): the same bits on 1, 2 and 3 threads; a token alone gets the bits it gets inside a
// batch of 17; and within f32 summation order of the scalar level (the converters agree bit for
// bit, so only the order of the f32 sums differs). Its distance from ref::matmul is checked by the
// table of kernel cases on every level (backend_cases_test.cpp).
TEST_P(CpuLevel, MatmulGivesTheSameBitsOnAnyThreadsAndBatchAndFollowsTheScalarLevel) {
  std::vector<Case> cases = kCases;
  for (DType t : kDequantizedTypes) {
    const int64_t block = tensor::block_values(t);
    cases.push_back({t, {block, 3 * block, 17 * block}});
  }
  constexpr int kMaxTokens = 17;
  std::vector<std::unique_ptr<util::ThreadPool>> pools;
  for (int threads : {1, 2, 3}) pools.push_back(std::make_unique<util::ThreadPool>(threads));
  for (const Case& c : cases) {
    for (int64_t cols : c.cols) {
      util::AlignedBuffer scratch(kernels::cpu::matmul_scratch_bytes(kMaxTokens, cols, 3));
      for (int64_t rows : {1, 7, 33}) {
        const Weights w = make_weights(c.type, rows, cols, static_cast<uint32_t>(rows + cols));
        const auto x = random_floats(static_cast<size_t>(cols) * kMaxTokens, 13);
        std::vector<float> w_rows(static_cast<size_t>(rows * cols));
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_TRUE(tensor::dequantize_row(c.type, w.bytes.data() + r * w.m.row_bytes,
                                             w_rows.data() + r * cols, cols)
                          .ok());
        }
        std::vector<float> scalar(static_cast<size_t>(rows) * kMaxTokens);
        kernels::cpu::matmul(w.m, x.data(), scalar.data(), kMaxTokens, *pools[0], scratch.data(),
                             Isa::kScalar);
        std::vector<float> batch17;
        for (int n_tokens : {17, 3, 1}) {
          SCOPED_TRACE(testing::Message() << tensor::dtype_name(c.type) << " rows " << rows
                                          << " cols " << cols << " tokens " << n_tokens);
          std::vector<float> first;
          for (auto& pool : pools) {
            std::vector<float> y(static_cast<size_t>(rows) * n_tokens);
            kernels::cpu::matmul(w.m, x.data(), y.data(), n_tokens, *pool, scratch.data(), level());
            if (first.empty()) {
              first = y;
            } else {
              ASSERT_EQ(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)), 0)
                  << pool->size() << " threads";
            }
          }
          // Fewer tokens (1 takes the multi-row decode kernel) give the first tokens' bits.
          if (batch17.empty()) batch17 = first;
          ASSERT_EQ(std::memcmp(first.data(), batch17.data(), first.size() * sizeof(float)), 0)
              << "the first " << n_tokens << " tokens differ from the same tokens in a batch of 17";
          for (int t = 0; t < n_tokens; ++t) {
            const float* xt = x.data() + t * cols;
            for (int64_t r = 0; r < rows; ++r) {
              const float* wr = w_rows.data() + r * cols;
              const size_t i = static_cast<size_t>(t * rows + r);
              ASSERT_NEAR(first[i], scalar[i], tolerance(DType::kF32, wr, xt, cols))
                  << "token " << t << " row " << r << " vs the scalar level";
            }
          }
        }
        // Batch invariance: each token alone gets the bits it gets inside the batch of 17.
        std::vector<float> batch(static_cast<size_t>(rows) * kMaxTokens), alone(rows);
        kernels::cpu::matmul(w.m, x.data(), batch.data(), kMaxTokens, *pools[1], scratch.data(),
                             level());
        for (int t = 0; t < kMaxTokens; ++t) {
          kernels::cpu::matmul(w.m, x.data() + t * cols, alone.data(), 1, *pools[1], scratch.data(),
                               level());
          ASSERT_EQ(std::memcmp(alone.data(), batch.data() + t * rows, rows * sizeof(float)), 0)
              << tensor::dtype_name(c.type) << " rows " << rows << " cols " << cols << ": token "
              << t << " alone vs inside a batch of " << kMaxTokens;
        }
      }
    }
  }
}

// The bench's kernel ceilings: every type with a dot kernel gets a positive, finite decode rate
// from cache at this level (and, at the CPU's own level, from memory); types decoded through f32
// rows get none (the bench then says so instead of guessing). No speed is asserted: speed is the
// benchmarks' business.
TEST_P(CpuLevel, DecodeRateIsMeasuredForEveryKernelType) {
  using kernels::cpu::Residence;
  util::ThreadPool pool(2);
  for (const Case& c : kCases) {
    const double rate = kernels::cpu::decode_rate(c.type, Residence::kCache, pool, level());
    EXPECT_GT(rate, 0) << tensor::dtype_name(c.type);
    EXPECT_TRUE(std::isfinite(rate)) << tensor::dtype_name(c.type);
  }
  if (level() == kernels::cpu::cpu_isa()) {
    for (DType t : {DType::kQ8_0, DType::kQ4_K}) {
      const double rate = kernels::cpu::decode_rate(t, Residence::kMemory, pool, level());
      EXPECT_GT(rate, 0) << tensor::dtype_name(t);
      EXPECT_TRUE(std::isfinite(rate)) << tensor::dtype_name(t);
    }
  }
  for (DType t : kDequantizedTypes) {
    EXPECT_EQ(kernels::cpu::decode_rate(t, Residence::kCache, pool, level()), 0)
        << tensor::dtype_name(t);
  }
}

}  // namespace

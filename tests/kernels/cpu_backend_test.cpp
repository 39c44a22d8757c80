// CpuBackend's own ops against the reference backend on random inputs: attention over a paged,
// quantized cache (awkward cell counts, empty cells, windows, grouped heads), RoPE, and the
// threaded elementwise ops; and thread counts that never change a result.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/backend.h"
#include "kernels/ref/ref.h"
#include "tensor/quantize.h"

namespace {

using kernels::AttentionBatch;
using kernels::KvSpan;
using tensor::DType;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& f : v) f = dist(rng);
  return v;
}

// A cache of `n_cells` cells in blocks of 16, holding random K/V rows in the given types; some
// cells empty (−1), positions not in cell order (as a ring leaves them).
struct Cache {
  std::vector<std::vector<uint8_t>> k_storage, v_storage;
  std::vector<const uint8_t*> k_blocks, v_blocks;
  std::vector<int32_t> pos;
  KvSpan span;

  Cache(DType k_type, DType v_type, int n_head_kv, int head_dim, int n_cells, uint32_t seed) {
    constexpr int kCellsPerBlock = 16;
    const int kv_dim = n_head_kv * head_dim;
    const size_t k_row = tensor::row_bytes(k_type, kv_dim),
                 v_row = tensor::row_bytes(v_type, kv_dim);
    const int n_blocks = (n_cells + kCellsPerBlock - 1) / kCellsPerBlock;
    for (int b = 0; b < n_blocks; ++b) {
      k_storage.emplace_back(k_row * kCellsPerBlock);
      v_storage.emplace_back(v_row * kCellsPerBlock);
    }
    const auto k = random_floats(static_cast<size_t>(n_cells) * kv_dim, seed);
    const auto v = random_floats(static_cast<size_t>(n_cells) * kv_dim, seed + 1);
    std::mt19937 rng(seed);
    for (int c = 0; c < n_cells; ++c) {
      uint8_t* kd = k_storage[c / kCellsPerBlock].data() + (c % kCellsPerBlock) * k_row;
      uint8_t* vd = v_storage[c / kCellsPerBlock].data() + (c % kCellsPerBlock) * v_row;
      EXPECT_TRUE(tensor::quantize_row(k_type, k.data() + c * kv_dim, kd, kv_dim).ok());
      EXPECT_TRUE(tensor::quantize_row(v_type, v.data() + c * kv_dim, vd, kv_dim).ok());
      // Ring-like: positions rotated by 5; every 7th cell empty.
      pos.push_back(c % 7 == 6 ? -1 : (c + 5) % n_cells);
    }
    for (auto& s : k_storage) k_blocks.push_back(s.data());
    for (auto& s : v_storage) v_blocks.push_back(s.data());
    span = {k_type,          v_type,          n_head_kv, head_dim, n_cells,   kCellsPerBlock,
            k_blocks.data(), v_blocks.data(), k_row,     v_row,    pos.data()};
  }
};

TEST(CpuBackend, AttentionMatchesTheReferenceOverQuantizedPagedCaches) {
  const DType types[] = {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0};
  for (int head_dim : {8, 64, 256, 512}) {
    for (DType k_type : types) {
      for (DType v_type : types) {
        if ((k_type == DType::kQ8_0 || k_type == DType::kQ4_0 || v_type == DType::kQ8_0 ||
             v_type == DType::kQ4_0) &&
            (2 * head_dim) % 32 != 0) {
          continue;  // the cache row (2 heads) must fill whole blocks
        }
        for (int window : {0, 6}) {
          SCOPED_TRACE(testing::Message()
                       << "head_dim " << head_dim << " K " << tensor::dtype_name(k_type) << " V "
                       << tensor::dtype_name(v_type) << " window " << window);
          constexpr int kHeads = 8, kHeadsKv = 2, kTokens = 3, kCells = 37;
          Cache cache(k_type, v_type, kHeadsKv, head_dim, kCells, static_cast<uint32_t>(head_dim));
          const auto q = random_floats(static_cast<size_t>(kTokens) * kHeads * head_dim, 99);
          const int32_t pos[kTokens] = {3, 20, 36};
          const KvSpan* spans[kTokens] = {&cache.span, &cache.span, &cache.span};
          std::vector<float> ref(q.size()), cpu(q.size()), cpu1(q.size());
          AttentionBatch b{kTokens,  kHeads,     head_dim,
                           q.data(), ref.data(), pos,
                           spans,    window,     1.0f / std::sqrt(static_cast<float>(head_dim))};
          kernels::ref::attention(b);
          util::ThreadPool pool(3), single(1);
          kernels::cpu::CpuBackend backend(pool, 4, 64), backend1(single, 4, 64);
          b.out = cpu.data();
          backend.attention(b);
          b.out = cpu1.data();
          backend1.attention(b);
          // The reference accumulates in double in two passes; the kernel in f32 in one pass.
          for (size_t i = 0; i < q.size(); ++i)
            ASSERT_NEAR(cpu[i], ref[i], 2e-5f + 2e-5f * std::fabs(ref[i])) << i;
          EXPECT_EQ(std::memcmp(cpu.data(), cpu1.data(), cpu.size() * sizeof(float)), 0)
              << "1 vs 3 threads";
        }
      }
    }
  }
}

TEST(CpuBackend, RopeNormAndActivationsMatchTheReference) {
  util::ThreadPool pool(2);
  kernels::cpu::CpuBackend cpu(pool, 4, 64);
  kernels::ref::RefBackend ref;
  for (auto style : {kernels::RopeStyle::kAdjacent, kernels::RopeStyle::kRotateHalf}) {
    constexpr int kTokens = 5, kHeads = 3, kHeadDim = 24, kRot = 16;
    std::vector<float> inv_freq(kRot / 2);
    for (int i = 0; i < kRot / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / kRot);
    const kernels::RopeParams p{style, kRot, inv_freq.data()};
    const int32_t pos[kTokens] = {0, 1, 7, 100, 4095};
    auto a = random_floats(kTokens * kHeads * kHeadDim, 5), b = a;
    cpu.rope(a.data(), kTokens, kHeads, kHeadDim, pos, p);
    ref.rope(b.data(), kTokens, kHeads, kHeadDim, pos, p);
    EXPECT_EQ(a, b) << "same angles, same arithmetic";
  }
  // Sizes both below and above the threading threshold (16384 values).
  for (int64_t n : {int64_t{7}, int64_t{3000}, int64_t{40001}}) {
    const auto x = random_floats(static_cast<size_t>(2 * n), static_cast<uint32_t>(n));
    const auto w = random_floats(static_cast<size_t>(n), 3);
    std::vector<float> a(2 * n), b(2 * n);
    cpu.rmsnorm(x.data(), w.data(), a.data(), n, 2, 1e-6f);
    ref.rmsnorm(x.data(), w.data(), b.data(), n, 2, 1e-6f);
    EXPECT_EQ(a, b) << "rmsnorm " << n;
    cpu.gelu_mul(x.data(), x.data() + n, a.data(), n, 1, n);
    ref.gelu_mul(x.data(), x.data() + n, b.data(), n, 1, n);
    EXPECT_EQ(std::vector<float>(a.begin(), a.begin() + n),
              std::vector<float>(b.begin(), b.begin() + n));
    // Two rows of a fused gate_up buffer: row r's gate at x + r·n, its up half n/2 further.
    cpu.silu_mul(x.data(), x.data() + n / 2, a.data(), n / 2, 2, n);
    ref.silu_mul(x.data(), x.data() + n / 2, b.data(), n / 2, 2, n);
    EXPECT_EQ(std::vector<float>(a.begin(), a.begin() + n),
              std::vector<float>(b.begin(), b.begin() + n));
    a = x;
    b = x;
    cpu.softcap(a.data(), 30.0f, 2 * n);
    ref.softcap(b.data(), 30.0f, 2 * n);
    EXPECT_EQ(a, b) << "softcap " << n;
  }
}

}  // namespace

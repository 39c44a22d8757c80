// CpuBackend's ops against the reference backend on random inputs of awkward sizes, on every
// instruction-set path this CPU has (the portable scalar path and AVX2), each with a stated
// tolerance; and on 1, 2 and 3 threads, which must give bit-identical results, as must a token
// evaluated alone and inside a batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "kernels/cpu/backend.h"
#include "kernels/ref/ref.h"
#include "tensor/quantize.h"

namespace {

using kernels::AttentionBatch;
using kernels::KvSpan;
using kernels::cpu::CpuBackend;
using kernels::cpu::Isa;
using tensor::DType;

std::vector<float> random_floats(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> v(n);
  for (auto& f : v) f = dist(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The instruction-set paths to test: always the portable one, and the CPU's own if better.
std::vector<Isa> isas() {
  std::vector<Isa> out{Isa::kScalar};
  if (kernels::cpu::cpu_isa() != Isa::kScalar) out.push_back(kernels::cpu::cpu_isa());
  return out;
}

// CpuBackends on 1, 2 and 3 threads for one instruction set.
struct Backends {
  explicit Backends(Isa isa) {
    for (int threads : {1, 2, 3}) {
      pools.push_back(std::make_unique<util::ThreadPool>(threads));
      cpu.push_back(std::make_unique<CpuBackend>(*pools.back(), 8, 256, isa));
    }
  }
  // Runs `op` (which writes its result into the vector it is given, starting from `init`) on
  // every thread count; checks they agree bit for bit and returns the result.
  template <class Op>
  std::vector<float> run(const std::vector<float>& init, Op op) {
    std::vector<float> first;
    for (size_t i = 0; i < cpu.size(); ++i) {
      std::vector<float> out = init;
      op(*cpu[i], out);
      if (i == 0) {
        first = out;
      } else {
        EXPECT_TRUE(same_bits(first, out)) << "1 thread vs " << pools[i]->size();
      }
    }
    return first;
  }
  std::vector<std::unique_ptr<util::ThreadPool>> pools;
  std::vector<std::unique_ptr<CpuBackend>> cpu;
};

// |a − b| ≤ abs + rel·|b| at every index; reports the worst index.
void expect_close(const std::vector<float>& a, const std::vector<float>& b, float rel,
                  float abs = 0.0f) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_LE(std::fabs(a[i] - b[i]), abs + rel * std::fabs(b[i]))
        << "at " << i << ": " << a[i] << " vs reference " << b[i];
  }
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

bool is_block_type(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_0;
}

// Attention tolerance: the reference accumulates in double in two passes; the kernel in f32 in
// one pass, with a polynomial exp (≤ 2e-7 relative) on the AVX2 path. Outputs are weighted means
// of N(0, 1) values; the worst error measured over this sweep is ~3e-6.
constexpr float kAttentionTolerance = 2e-5f;

TEST(CpuBackend, AttentionMatchesTheReferenceOverQuantizedPagedCaches) {
  const DType types[] = {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0};
  for (Isa isa : isas()) {
    Backends backends(isa);
    for (int head_dim : {8, 64, 256, 512}) {
      for (int n_head_kv : {4, 1}) {  // grouped queries: 8 heads over 4 KV heads, or over 1
        for (DType k_type : types) {
          for (DType v_type : types) {
            if ((is_block_type(k_type) || is_block_type(v_type)) && (n_head_kv * head_dim) % 32)
              continue;  // a cache row must fill whole blocks
            for (int window : {0, 6}) {
              SCOPED_TRACE(testing::Message()
                           << kernels::cpu::isa_name(isa) << " head_dim " << head_dim
                           << " n_head_kv " << n_head_kv << " K " << tensor::dtype_name(k_type)
                           << " V " << tensor::dtype_name(v_type) << " window " << window);
              constexpr int kHeads = 8, kTokens = 3;
              // Two sequences (37 and 21 cells, neither a multiple of the block), tokens of both.
              Cache a(k_type, v_type, n_head_kv, head_dim, 37, static_cast<uint32_t>(head_dim));
              Cache b(k_type, v_type, n_head_kv, head_dim, 21, 7);
              const auto q = random_floats(static_cast<size_t>(kTokens) * kHeads * head_dim, 99);
              const int32_t pos[kTokens] = {3, 20, 36};
              const KvSpan* spans[kTokens] = {&a.span, &b.span, &a.span};
              const size_t n = q.size(), per_token = n / kTokens;
              std::vector<float> ref(n);
              AttentionBatch batch{kTokens,  kHeads,     head_dim,
                                   q.data(), ref.data(), pos,
                                   spans,    window,     1.0f / std::sqrt(float(head_dim))};
              kernels::ref::attention(batch);
              const auto out = backends.run(std::vector<float>(n), [&](CpuBackend& cpu, auto& o) {
                batch.out = o.data();
                cpu.attention(batch);
              });
              expect_close(out, ref, kAttentionTolerance, kAttentionTolerance);
              // Batch invariance: the middle token alone gives the same bits.
              std::vector<float> alone(per_token);
              AttentionBatch one = batch;
              one.n_tokens = 1;
              one.q = q.data() + per_token;
              one.out = alone.data();
              one.pos = pos + 1;
              one.kv = spans + 1;
              backends.cpu[2]->attention(one);
              EXPECT_EQ(
                  std::memcmp(alone.data(), out.data() + per_token, per_token * sizeof(float)), 0)
                  << "a token alone vs in a batch";
            }
          }
        }
      }
    }
  }
}

TEST(CpuBackend, AttentionWithNothingVisibleIsZero) {
  for (Isa isa : isas()) {
    Backends backends(isa);
    Cache cache(DType::kF16, DType::kQ8_0, 1, 64, 20, 3);
    std::fill(cache.pos.begin(), cache.pos.end(), 50);  // every key is in the query's future
    const auto q = random_floats(2 * 64, 4);
    const int32_t pos = 10;
    const KvSpan* span = &cache.span;
    const auto out =
        backends.run(std::vector<float>(q.size(), 1.0f), [&](CpuBackend& cpu, auto& o) {
          cpu.attention({1, 2, 64, q.data(), o.data(), &pos, &span, 0, 0.125f});
        });
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return v == 0.0f; }));
  }
}

TEST(CpuBackend, RopeIsExact) {
  kernels::ref::RefBackend ref;
  for (Isa isa : isas()) {
    Backends backends(isa);
    for (auto style : {kernels::RopeStyle::kAdjacent, kernels::RopeStyle::kRotateHalf}) {
      for (int n_tokens : {1, 5, 300}) {  // 300 × 3 heads × 16: above the threading threshold
        constexpr int kHeads = 3, kHeadDim = 24, kRot = 16;
        std::vector<float> inv_freq(kRot / 2);
        for (int i = 0; i < kRot / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / kRot);
        const kernels::RopeParams p{style, kRot, inv_freq.data()};
        std::vector<int32_t> pos(n_tokens);
        for (int t = 0; t < n_tokens; ++t) pos[t] = (t * 37) % 5000;
        const auto x = random_floats(static_cast<size_t>(n_tokens) * kHeads * kHeadDim, 5);
        auto expected = x;
        ref.rope(expected.data(), n_tokens, kHeads, kHeadDim, pos.data(), p);
        const auto out = backends.run(x, [&](CpuBackend& cpu, auto& o) {
          cpu.rope(o.data(), n_tokens, kHeads, kHeadDim, pos.data(), p);
        });
        EXPECT_TRUE(same_bits(out, expected)) << "same angles, same arithmetic";
      }
    }
  }
}

// Sizes around the 8-lane vectors and the threading threshold (16384 values).
constexpr int64_t kSizes[] = {1, 7, 8, 9, 100, 40001};

TEST(CpuBackend, ExactElementwiseOpsMatchTheReference) {
  kernels::ref::RefBackend ref;
  for (Isa isa : isas()) {
    Backends backends(isa);
    for (int64_t n : kSizes) {
      SCOPED_TRACE(testing::Message() << kernels::cpu::isa_name(isa) << " n " << n);
      const auto y = random_floats(n, 1), x = random_floats(n, 2);
      auto expected = y;
      ref.add(expected.data(), x.data(), n);
      EXPECT_TRUE(
          same_bits(backends.run(y, [&](CpuBackend& c, auto& o) { c.add(o.data(), x.data(), n); }),
                    expected));
      expected = y;
      ref.mul(expected.data(), x.data(), n);
      EXPECT_TRUE(
          same_bits(backends.run(y, [&](CpuBackend& c, auto& o) { c.mul(o.data(), x.data(), n); }),
                    expected));
      expected = y;
      ref.scale(expected.data(), -0.37f, n);
      EXPECT_TRUE(
          same_bits(backends.run(y, [&](CpuBackend& c, auto& o) { c.scale(o.data(), -0.37f, n); }),
                    expected));
      EXPECT_TRUE(same_bits(
          backends.run(y, [&](CpuBackend& c, auto& o) { c.copy(o.data(), x.data(), n); }), x));
    }
    // Rows between strides (a slice of wider rows into a packed block), and overlapping blocks.
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{300}}) {
      const int64_t n = 70, xs = 101, ys = 83;
      const auto x = random_floats(static_cast<size_t>(rows * xs), 3);
      const auto y = random_floats(static_cast<size_t>(rows * ys), 4);
      auto expected = y;
      ref.copy_rows(expected.data(), ys, x.data(), xs, n, rows);
      EXPECT_TRUE(same_bits(
          backends.run(
              y, [&](CpuBackend& c, auto& o) { c.copy_rows(o.data(), ys, x.data(), xs, n, rows); }),
          expected))
          << "copy_rows " << rows;
      expected = y;
      ref.copy_rows(expected.data() + 5, ys, expected.data(), ys, n, rows);
      EXPECT_TRUE(same_bits(
          backends.run(y, [&](CpuBackend& c,
                              auto& o) { c.copy_rows(o.data() + 5, ys, o.data(), ys, n, rows); }),
          expected))
          << "overlapping copy_rows " << rows;
    }
  }
}

TEST(CpuBackend, RmsnormMatchesTheReference) {
  for (Isa isa : isas()) {
    Backends backends(isa);
    for (int64_t n : kSizes) {
      for (int64_t rows : {int64_t{1}, int64_t{3}}) {
        for (bool weighted : {true, false}) {
          SCOPED_TRACE(testing::Message() << kernels::cpu::isa_name(isa) << " n " << n << " rows "
                                          << rows << (weighted ? " weighted" : ""));
          const auto x =
              random_floats(static_cast<size_t>(n * rows), static_cast<uint32_t>(n), 3.0f);
          const auto w = random_floats(static_cast<size_t>(n), 3);
          const float* wp = weighted ? w.data() : nullptr;
          std::vector<float> expected(x.size());
          kernels::ref::rmsnorm(x.data(), wp, expected.data(), n, rows, 1e-6f);
          // The sum of squares is in double as in the reference, added in another order: the
          // 1/rms factor may differ in its last bit, so each value by ≤ 2 ulp.
          expect_close(backends.run(std::vector<float>(x.size()),
                                    [&](CpuBackend& c, auto& o) {
                                      c.rmsnorm(x.data(), wp, o.data(), n, rows, 1e-6f);
                                    }),
                       expected, 2.5e-7f);
          // In place, as the models call it.
          expect_close(
              backends.run(x, [&](CpuBackend& c,
                                  auto& o) { c.rmsnorm(o.data(), wp, o.data(), n, rows, 1e-6f); }),
              expected, 2.5e-7f);
        }
      }
    }
  }
}

// Inputs for the activations: normal values and the extremes where exp saturates.
std::vector<float> activation_inputs(int64_t n, uint32_t seed) {
  auto v = random_floats(static_cast<size_t>(n), seed, 4.0f);
  const float extremes[] = {0.0f,   -0.0f, 1e-30f, -1e-30f, 20.0f,
                            -20.0f, 90.0f, -90.0f, 1e4f,    -1e4f};
  for (size_t i = 0; i < std::size(extremes) && i < v.size(); ++i)
    v[v.size() - 1 - i] = extremes[i];
  return v;
}

TEST(CpuBackend, ActivationsMatchTheReferenceWithinTheirTolerance) {
  for (Isa isa : isas()) {
    Backends backends(isa);
    for (int64_t n : kSizes) {
      for (int64_t rows : {int64_t{1}, int64_t{3}}) {
        SCOPED_TRACE(testing::Message()
                     << kernels::cpu::isa_name(isa) << " n " << n << " rows " << rows);
        // A fused gate_up buffer: row r's gate at r·2n, its up half n further.
        const auto gu = activation_inputs(2 * n * rows, static_cast<uint32_t>(n));
        const float *g = gu.data(), *u = gu.data() + n;
        for (bool gelu : {false, true}) {
          std::vector<float> expected(n * rows);
          (gelu ? kernels::ref::gelu_mul : kernels::ref::silu_mul)(g, u, expected.data(), n, rows,
                                                                   2 * n);
          const auto out = backends.run(std::vector<float>(n * rows), [&](CpuBackend& c, auto& o) {
            if (gelu)
              c.gelu_mul(g, u, o.data(), n, rows, 2 * n);
            else
              c.silu_mul(g, u, o.data(), n, rows, 2 * n);
          });
          // AVX2: x·sigmoid(y) with a polynomial exp, ≤ 1e-6 relative. The reference's gelu
          // computes 1 + tanh(z), which loses up to one ulp of 1 where tanh(z) → −1, so the
          // bound also allows 1.2e-7·|gate·up| (0.5·|gate|·2⁻²³·|up|, twice over).
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t i = 0; i < n; ++i) {
              const float want = expected[r * n + i], got = out[r * n + i];
              const float gate = g[r * 2 * n + i], up = u[r * 2 * n + i];
              ASSERT_LE(std::fabs(got - want),
                        1e-6f * std::fabs(want) + 1.2e-7f * std::fabs(gate * up))
                  << (gelu ? "gelu" : "silu") << " at " << r << "," << i << " gate " << gate;
            }
          }
        }
        // In place over a packed buffer (the models write the product over the gate).
        std::vector<float> packed(gu.begin(), gu.begin() + 2 * n);
        std::vector<float> expected(n);
        kernels::ref::gelu_mul(packed.data(), packed.data() + n, expected.data(), n, 1, n);
        const auto in_place = backends.run(packed, [&](CpuBackend& c, auto& o) {
          c.gelu_mul(o.data(), o.data() + n, o.data(), n, 1, n);
        });
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_LE(
              std::fabs(in_place[i] - expected[i]),
              1e-6f * std::fabs(expected[i]) + 1.2e-7f * std::fabs(packed[i] * packed[n + i]));
        }
      }
      // softcap: cap·tanh(y/cap) with a polynomial tanh, ≤ 1e-6 relative.
      const auto y = activation_inputs(n, 11);
      auto expected = y;
      kernels::ref::RefBackend().softcap(expected.data(), 30.0f, n);
      expect_close(backends.run(y, [&](CpuBackend& c, auto& o) { c.softcap(o.data(), 30.0f, n); }),
                   expected, 1e-6f, 1e-37f);
    }
  }
}

TEST(CpuBackend, GetRowsIsExact) {
  for (Isa isa : isas()) {
    Backends backends(isa);
    for (DType type : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0}) {
      constexpr int64_t kRows = 50, kCols = 96;
      const auto values = random_floats(kRows * kCols, 8);
      std::vector<uint8_t> data(tensor::row_bytes(type, kCols) * kRows);
      ASSERT_TRUE(tensor::quantize_row(type, values.data(), data.data(), kRows * kCols).ok());
      const kernels::Matrix table{data.data(), type, kCols, kRows, static_cast<size_t>(tensor::row_bytes(type, kCols))};
      for (int n : {1, 3, 200}) {  // 200 × 96: above the threading threshold
        std::vector<int32_t> ids(n);
        for (int i = 0; i < n; ++i) ids[i] = (i * 31 + 7) % kRows;
        for (float s : {1.0f, 3.5f}) {
          std::vector<float> expected(n * kCols);
          kernels::ref::get_rows(table, ids.data(), n, s, expected.data());
          EXPECT_TRUE(same_bits(backends.run(std::vector<float>(n * kCols),
                                             [&](CpuBackend& c, auto& o) {
                                               c.get_rows(table, ids.data(), n, s, o.data());
                                             }),
                                expected))
              << tensor::dtype_name(type) << " n " << n << " scale " << s;
        }
      }
    }
  }
}

TEST(CpuBackend, StoreKvWritesTheReferenceBytes) {
  const DType types[] = {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0};
  for (Isa isa : isas()) {
    Backends backends(isa);
    for (DType k_type : types) {
      for (DType v_type : types) {
        for (int n : {1, 5, 130}) {  // 130 × 2 × 96: above the threading threshold
          constexpr int kKvDim = 96;
          auto k = random_floats(static_cast<size_t>(n) * kKvDim, 12, 2.0f);
          const auto v = random_floats(static_cast<size_t>(n) * kKvDim, 13);
          // f16 edge cases: subnormal, overflow to inf, a rounding tie.
          k[0] = 3e-6f;
          k[1] = 7e4f;
          k[2] = 1.0f + 1.0f / 2048.0f;
          const size_t k_row = tensor::row_bytes(k_type, kKvDim),
                       v_row = tensor::row_bytes(v_type, kKvDim);
          auto store = [&](auto&& op) {
            std::vector<uint8_t> bytes(n * (k_row + v_row), 0xAB);
            std::vector<kernels::KvWrite> dst(n);
            for (int t = 0; t < n; ++t)
              dst[t] = {bytes.data() + t * k_row, bytes.data() + n * k_row + t * v_row};
            op(dst.data());
            return bytes;
          };
          const auto expected = store([&](const kernels::KvWrite* d) {
            kernels::ref::store_kv(k_type, v_type, kKvDim, k.data(), v.data(), d, n);
          });
          for (auto& cpu : backends.cpu) {
            EXPECT_EQ(store([&](const kernels::KvWrite* d) {
                        cpu->store_kv(k_type, v_type, kKvDim, k.data(), v.data(), d, n);
                      }),
                      expected)
                << kernels::cpu::isa_name(isa) << " K " << tensor::dtype_name(k_type) << " V "
                << tensor::dtype_name(v_type) << " n " << n;
          }
        }
      }
    }
  }
}

TEST(CpuBackend, MoeRouteIsExact) {
  for (Isa isa : isas()) {
    Backends backends(isa);
    for (int n_expert : {4, 128}) {
      for (int k : {1, 2, 4}) {
        for (bool scaled : {false, true}) {
          constexpr int kTokens = 200;  // 200 × 128 × 8: above the threading threshold
          auto logits = random_floats(static_cast<size_t>(kTokens) * n_expert, 21);
          // Ties: token 0's experts all equal; token 1's best two equal.
          std::fill(logits.begin(), logits.begin() + n_expert, 0.5f);
          logits[n_expert + 1] = logits[n_expert + 2] = 9.0f;
          const auto scale = random_floats(n_expert, 22);
          const float* s = scaled ? scale.data() : nullptr;
          std::vector<int32_t> ref_ids(kTokens * k), ids(kTokens * k);
          std::vector<float> ref_w(kTokens * k), w(kTokens * k);
          kernels::ref::moe_route(logits.data(), kTokens, n_expert, k, s, ref_ids.data(),
                                  ref_w.data());
          for (auto& cpu : backends.cpu) {
            cpu->moe_route(logits.data(), kTokens, n_expert, k, s, ids.data(), w.data());
            EXPECT_EQ(ids, ref_ids) << n_expert << " experts, top " << k;
            EXPECT_TRUE(same_bits(w, ref_w)) << n_expert << " experts, top " << k;
          }
        }
      }
    }
  }
}

}  // namespace

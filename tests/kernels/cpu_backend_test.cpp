// CpuBackend's own promises (kernels/cpu/backend.h, "Results contract"), beyond matching the
// reference, which backend_cases_test.cpp checks for every backend from one table: every case of
// that table gives the same bits on 1, 2 and 3 threads, on the portable scalar path, AVX2 and this
// CPU's own; and a token's attention alone has the bits it has inside a batch. The table's sizes
// reach past the threading threshold (16384 values) so that the work is really split.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend_cases.h"
#include "kernels/cpu/backend.h"
#include "testing/testing.h"
#include "util/thread_pool.h"

namespace {

using backend_cases::Outputs;
using kernels::cpu::CpuBackend;
using kernels::cpu::Isa;
using tensor::DType;

// The instruction-set paths whose small ops and attention differ: the portable one, AVX2 and the
// CPU's own, where it has them (cpu_matmul_test.cpp covers every level of the matmul kernels).
std::vector<Isa> isas() {
  std::vector<Isa> out{Isa::kScalar};
  const Isa best = kernels::cpu::cpu_isa();
  if (best > Isa::kAvx2) out.push_back(Isa::kAvx2);
  if (best != Isa::kScalar) out.push_back(best);
  return out;
}

class CpuThreads : public testing::TestWithParam<std::tuple<Isa, std::string>> {};

TEST_P(CpuThreads, EveryCaseOfTheTableGivesTheSameBitsOnAnyThreadCount) {
  const auto& [isa, family] = GetParam();
  std::vector<std::unique_ptr<util::ThreadPool>> pools;
  std::vector<std::unique_ptr<CpuBackend>> cpus;
  for (int threads : {1, 2, 3}) {
    pools.push_back(std::make_unique<util::ThreadPool>(threads));
    cpus.push_back(std::make_unique<CpuBackend>(*pools.back(), backend_cases::kMaxTokens,
                                                backend_cases::kMaxCols, isa));
  }
  for (const auto& c : backend_cases::cases(family)) {
    SCOPED_TRACE(c->name());
    Outputs one_thread;
    if (!backend_cases::run_case(*c, *cpus[0], false, one_thread)) continue;
    for (size_t i = 1; i < cpus.size(); ++i) {
      Outputs more;
      if (!backend_cases::run_case(*c, *cpus[i], false, more)) continue;
      EXPECT_EQ(backend_cases::difference(more, one_thread), "")
          << pools[i]->size() << " threads vs 1";
    }
  }
}

std::string threads_name(const testing::TestParamInfo<CpuThreads::ParamType>& param) {
  return std::string(kernels::cpu::isa_name(std::get<0>(param.param))) + "_" +
         testing_util::test_name(std::get<1>(param.param));
}

INSTANTIATE_TEST_SUITE_P(Table, CpuThreads,
                         testing::Combine(testing::ValuesIn(isas()),
                                          testing::ValuesIn(backend_cases::families())),
                         threads_name);

// The scheduler's "32 concurrent = alone": a token's attention does not depend on the tokens
// batched with it, over every cache type, head size (rows of 4 KV heads fill whole blocks) and
// window, nor in a prefill's batch of 24 tokens in runs of three of two sequences.
TEST(CpuBackend, ATokensAttentionAloneHasTheBitsItHasInsideABatch) {
  const DType types[] = {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0};
  for (Isa isa : isas()) {
    util::ThreadPool pool(3);
    CpuBackend cpu(pool, 8, 512, isa);
    for (int head_dim : {8, 64, 256}) {
      for (DType k_type : types) {
        for (DType v_type : types) {
          for (int window : {0, 6}) {
            SCOPED_TRACE(testing::Message()
                         << kernels::cpu::isa_name(isa) << " head_dim " << head_dim << " K "
                         << tensor::dtype_name(k_type) << " V " << tensor::dtype_name(v_type)
                         << " window " << window);
            constexpr int kHeads = 8, kTokens = 3;
            backend_cases::Rig rig(cpu);
            const backend_cases::PagedCache a(k_type, v_type, 4, head_dim, 37, 5);
            const backend_cases::PagedCache b(k_type, v_type, 4, head_dim, 21, 7);
            const kernels::KvSpan* a_span = a.place(rig);
            const kernels::KvSpan* spans[kTokens] = {a_span, b.place(rig), a_span};
            const auto q =
                backend_cases::random_floats(static_cast<size_t>(kTokens) * kHeads * head_dim, 99);
            const int32_t pos[kTokens] = {3, 20, 36};
            const size_t per_token = q.size() / kTokens;
            std::vector<float> batch(q.size(), NAN), alone(per_token, NAN);
            const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
            cpu.attention(
                {kTokens, kHeads, head_dim, q.data(), batch.data(), pos, spans, window, scale});
            cpu.attention({1, kHeads, head_dim, q.data() + per_token, alone.data(), pos + 1,
                           spans + 1, window, scale});
            EXPECT_EQ(
                std::memcmp(alone.data(), batch.data() + per_token, per_token * sizeof(float)), 0);
            constexpr int kPrefill = 24;
            const kernels::KvSpan* prefill_spans[kPrefill];
            int32_t prefill_pos[kPrefill];
            for (int t = 0; t < kPrefill; ++t) {
              const bool in_a = t / 3 % 2 == 0;
              prefill_spans[t] = in_a ? a_span : spans[1];
              prefill_pos[t] = in_a ? 12 + t : t % 21;
            }
            const auto pq = backend_cases::random_floats(per_token * kPrefill, 7);
            std::vector<float> tiled(pq.size(), NAN);
            cpu.attention({kPrefill, kHeads, head_dim, pq.data(), tiled.data(), prefill_pos,
                           prefill_spans, window, scale});
            for (int t = 0; t < kPrefill; ++t) {
              cpu.attention({1, kHeads, head_dim, pq.data() + t * per_token, alone.data(),
                             prefill_pos + t, prefill_spans + t, window, scale});
              EXPECT_EQ(std::memcmp(alone.data(), tiled.data() + t * per_token,
                                    per_token * sizeof(float)),
                        0)
                  << "token " << t << " of a prefill";
            }
          }
        }
      }
    }
  }
}

}  // namespace

// The CPU backend against the scalar reference backend on the layer structures of Gemma 4 E2B,
// E4B and 26B-A4B at small widths with f32 weights: the truth the GPU's structure tests
// (cuda_forward_test.cpp) compare with, and how far two f32 paths drift through them.
#include <gtest/gtest.h>

#include "kernels/cpu/backend.h"
#include "kernels/ref/ref.h"
#include "model/model.h"
#include "testing/model_passes.h"
#include "testing/structure_models.h"
#include "testing/testing.h"
#include "util/thread_pool.h"

namespace {

using tensor::DType;

class StructureReference : public ::testing::TestWithParam<std::string> {};

// Prefill of 8 tokens, then 16 decoded one by one, on the CPU; all 24 in one pass on the reference.
// Bound: 1e-3 of the largest logit (measured up to 1.4e-4: f32 sums in another order, amplified
// by a random network 35–60 layers deep).
TEST_P(StructureReference, CpuMatchesTheReferenceInF32) {
  testing_util::OpenedModel m = testing_util::open_structure_model(GetParam(), "f32");
  ASSERT_TRUE(m.spec);
  const model::Spec& spec = *m.spec;
  const int V = spec.n_vocab;
  const auto ids = testing_util::spread_token_ids(24);
  util::ThreadPool pool(2);
  kernels::cpu::CpuBackend cpu(pool, 8, model::max_matmul_cols(spec));
  auto on_cpu = testing_util::load_with_cache(*m.file, spec, cpu, 64, 8, DType::kF32);
  const auto got = testing_util::logits_of_passes(on_cpu, ids, 8, 8, V);
  kernels::ref::RefBackend ref;
  auto on_ref = testing_util::load_with_cache(*m.file, spec, ref, 64, 24, DType::kF32);
  const auto want = testing_util::logits_of_passes(on_ref, ids, 24, 24, V);
  const auto errors = testing_util::errors_by_position(got, want, V);
  for (size_t p = 0; p < errors.size(); ++p) EXPECT_LE(errors[p], 1e-3f) << "position " << p;
}

INSTANTIATE_TEST_SUITE_P(Shapes, StructureReference, ::testing::Values("e2b", "e4b", "26b-a4b"),
                         [](const auto& p) { return testing_util::test_name(p.param); });

}  // namespace

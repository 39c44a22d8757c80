// Gemma 4's assistant drafter (model/assistant.h) against the independent float64 reference
// (tests/reference/reference_assistant.py, written from docs/gemma4-assistant.md and the spec
// without headroom's code), on tiny random drafters that tests/reference/write_assistant.py writes
// for the tiny Gemma 4 shapes: the target prefills a prompt past its sliding window in
// micro-batches of 5, hands back its hidden state at the last position, and the drafter runs three
// chained steps at the next position over the target's cache (f32, f16 and q8_0 KV; KV-sharing,
// k_eq_v and MoE targets) — on the CPU, and with target and drafter on testing_util::EmulatedGpu
// (a backend with memory of its own that checks the device contract on every call: the hidden
// state comes back from the device, the input rows go up, the drafter reads the cache there).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cpu/backend.h"
#include "model/assistant.h"
#include "model/model.h"
#include "model/synth.h"
#include "testing/assistant_files.h"
#include "testing/emulated_gpu.h"
#include "testing/model_passes.h"
#include "testing/testing.h"
#include "util/thread_pool.h"

namespace {

namespace fs = std::filesystem;
using tensor::DType;

struct Case : testing_util::AssistantCase {
  bool gpu = false;  // target and drafter on testing_util::EmulatedGpu
};

class AssistantOracle : public ::testing::TestWithParam<Case> {};

// The bounds are the target oracle's (gemma4_oracle_test.cpp: f32 1e-4, f16 KV 3e-3, q8_0 KV
// 5e-2, each with ~2.5–20× room over measured worst cases); the drafter reads the same cache.
TEST_P(AssistantOracle, DraftStepsMatchTheReference) {
  const Case& c = GetParam();
  util::ThreadPool pool(2);
  std::unique_ptr<kernels::Backend> ops;
  testing_util::expect_draft_steps_match_reference(c, [&](int64_t cols) -> kernels::Backend& {
    if (c.gpu)
      ops = std::make_unique<testing_util::EmulatedGpu>(pool, 8, cols);
    else
      ops = std::make_unique<kernels::cpu::CpuBackend>(pool, 8, cols);
    return *ops;
  });
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AssistantOracle,
    ::testing::Values(
        Case{{"tiny_e", "tiny-e", "f32", DType::kF32, "f32", 1e-4}},
        Case{{"tiny_dense_keqv", "tiny-dense-keqv", "f32", DType::kF32, "f32", 1e-4}},
        Case{{"tiny_moe_kv_f16", "tiny-moe", "f32", DType::kF16, "f16", 3e-3}},
        Case{{"tiny_e_q8_0", "tiny-e", "q8_0", DType::kQ8_0, "q8_0", 5e-2}},
        Case{{"tiny_e_gpu", "tiny-e", "f32", DType::kF32, "f32", 1e-4}, true},
        Case{{"tiny_moe_kv_f16_gpu", "tiny-moe", "f32", DType::kF16, "f16", 3e-3}, true},
        Case{{"tiny_dense_keqv_q8_0_gpu", "tiny-dense-keqv", "q8_0", DType::kQ8_0, "q8_0", 5e-2},
             true}),
    [](const auto& p) { return p.param.name; });

// A drafter made for another target is refused with what does not fit.
TEST(Assistant, ADrafterForAnotherWidthIsRefused) {
  const fs::path dir = testing_util::temp_dir();
  const testing_util::AssistantFiles f = testing_util::write_assistant_files("tiny-e", "f32", dir);
  auto drafter_file = gguf::File::open(f.drafter.string());
  ASSERT_TRUE(drafter_file.ok());
  auto drafter = model::drafter_spec_from_gguf(*drafter_file);
  ASSERT_TRUE(drafter.ok()) << drafter.error().message();
  auto moe = model::synth_writer({.arch = "gemma4", .shape = "tiny-moe"});
  ASSERT_TRUE(moe.ok());
  const fs::path other = dir / "tiny-moe-other.gguf";
  ASSERT_TRUE(moe->write(other.string()).ok());
  auto other_file = gguf::File::open(other.string());
  ASSERT_TRUE(other_file.ok());
  auto other_spec = model::spec_from_gguf(*other_file);
  ASSERT_TRUE(other_spec.ok());
  model::Spec wider = *other_spec;
  wider.n_embd = drafter->n_embd_out + 16;
  auto layers = model::assistant_cache_layers(*drafter, wider);
  ASSERT_FALSE(layers.ok());
  EXPECT_NE(layers.error().message().find("hidden states of width"), std::string::npos)
      << layers.error().message();
  // Queries turned unlike the keys they read (another RoPE base) would never match a key.
  auto target_file = gguf::File::open(f.target.string());
  ASSERT_TRUE(target_file.ok());
  auto target = model::spec_from_gguf(*target_file);
  ASSERT_TRUE(target.ok());
  ASSERT_TRUE(model::assistant_cache_layers(*drafter, *target).ok());
  model::Spec turned = *drafter;
  turned.layers.back().rope.inv_freq[1] *= 2.0f;
  auto misturned = model::assistant_cache_layers(turned, *target);
  ASSERT_FALSE(misturned.ok());
  EXPECT_NE(misturned.error().message().find("applies RoPE"), std::string::npos)
      << misturned.error().message();
  // Given as the model to run, a drafter file says how it is meant to be used.
  auto as_model = model::spec_from_gguf(*drafter_file);
  ASSERT_FALSE(as_model.ok());
  EXPECT_NE(as_model.error().message().find("--draft-model"), std::string::npos);
}

}  // namespace

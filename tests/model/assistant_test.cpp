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
#include "testing/emulated_gpu.h"
#include "testing/model_passes.h"
#include "testing/testing.h"
#include "util/thread_pool.h"

namespace {

namespace fs = std::filesystem;
using tensor::DType;

constexpr const char* kPython = "/usr/bin/python3";  // Debian's, with python3-numpy
constexpr int kPrompt = 21;                          // past the tiny shapes' window of 8

std::string joined(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

void run_or_fail(const std::string& command) {
  std::string out, err;
  ASSERT_EQ(testing_util::run_command(command, &out, &err), 0) << command << "\n" << out << err;
}

struct Files {
  fs::path target, drafter;
};

// A tiny target of `shape` and a drafter written for it (output norm scaled so that a misread
// step moves the logits far).
Files write_models(const std::string& shape, const std::string& weight_type, const fs::path& dir) {
  Files f;
  f.target = dir / (shape + "-target.gguf");
  f.drafter = dir / (shape + "-assistant.gguf");
  auto w = model::synth_writer({.arch = "gemma4", .shape = shape});
  EXPECT_TRUE(w.ok()) << w.error().message();
  if (!w.ok()) return f;
  EXPECT_TRUE(w->write(f.target.string()).ok());
  const fs::path script = testing_util::source_dir() / "tests/reference/write_assistant.py";
  run_or_fail(std::string(kPython) + " " + script.string() + " " + f.target.string() + " -o " +
              f.drafter.string() + " --type " + weight_type +
              " --n-embd 64 --output-norm-scale 16");
  return f;
}

std::vector<float> reference_steps(const Files& f, const std::vector<int32_t>& prompt,
                                   const std::vector<int32_t>& tokens, const std::string& kv,
                                   const fs::path& dir) {
  const fs::path out = dir / "assistant-reference.f32";
  const fs::path script = testing_util::source_dir() / "tests/reference/reference_assistant.py";
  std::string stdout_text, stderr_text;
  const std::string command = std::string(kPython) + " " + script.string() + " " +
                              f.target.string() + " " + f.drafter.string() + " --ids " +
                              joined(prompt) + " --tokens " + joined(tokens) + " -o " +
                              out.string() + " --kv-type " + kv;
  EXPECT_EQ(testing_util::run_command(command, &stdout_text, &stderr_text), 0)
      << command << "\n"
      << stdout_text << stderr_text;
  // A drafter that does not fit its target is warned about: agreeing on it would prove nothing.
  EXPECT_EQ(stderr_text.find("warning"), std::string::npos) << stderr_text;
  return testing_util::read_f32(out);
}

struct Case {
  std::string name, shape, weights;
  DType kv;
  std::string kv_name;  // the reference's --kv-type
  double tolerance;     // max |Δlogit| / max |logit|, per step
  bool gpu = false;     // target and drafter on testing_util::EmulatedGpu
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

class AssistantOracle : public ::testing::TestWithParam<Case> {};

// The bounds are the target oracle's (gemma4_oracle_test.cpp: f32 1e-4, f16 KV 3e-3, q8_0 KV
// 5e-2, each with ~2.5–20× room over measured worst cases); the drafter reads the same cache.
TEST_P(AssistantOracle, DraftStepsMatchTheReference) {
  const Case& c = GetParam();
  const fs::path dir = testing_util::temp_dir();
  const Files f = write_models(c.shape, c.weights, dir);
  auto target_file = gguf::File::open(f.target.string());
  auto drafter_file = gguf::File::open(f.drafter.string());
  ASSERT_TRUE(target_file.ok() && drafter_file.ok());
  auto target = model::spec_from_gguf(*target_file);
  auto drafter = model::drafter_spec_from_gguf(*drafter_file);
  ASSERT_TRUE(target.ok()) << target.error().message();
  ASSERT_TRUE(drafter.ok()) << drafter.error().message();
  const int V = target->n_vocab, NB = target->n_embd;

  util::ThreadPool pool(2);
  const int64_t cols = std::max(model::max_matmul_cols(*target), model::max_matmul_cols(*drafter));
  std::unique_ptr<kernels::Backend> ops;
  if (c.gpu) {
    ops = std::make_unique<testing_util::EmulatedGpu>(pool, 8, cols);
  } else {
    ops = std::make_unique<kernels::cpu::CpuBackend>(pool, 8, cols);
  }
  testing_util::LoadedModel loaded =
      testing_util::load_with_cache(*target_file, *target, *ops, 64, 5, c.kv, c.gpu);
  ASSERT_TRUE(loaded.model && loaded.cache);
  auto assistant = model::load_assistant(*drafter_file, *drafter, *target_file, *target, *ops, 4);
  ASSERT_TRUE(assistant.ok()) << assistant.error().message();

  // The prompt in micro-batches of 5 (straddling the window), the hidden state of its last row.
  const std::vector<int32_t> prompt = testing_util::spread_token_ids(kPrompt);
  ASSERT_TRUE(loaded.cache->reserve(0, kPrompt));
  std::vector<float> logits(5 * V), hidden(NB);
  for (int start = 0; start < kPrompt; start += 5) {
    const int n = std::min(5, kPrompt - start);
    std::vector<int32_t> pos(n), slot(n, 0);
    for (int i = 0; i < n; ++i) pos[i] = start + i;
    const model::Batch batch{
        .tokens = std::span(prompt).subspan(start, n), .pos = pos, .slot = slot};
    const bool last = start + n == kPrompt;
    ASSERT_TRUE(loaded.model
                    ->forward(batch, *loaded.cache,
                              {.logits = logits.data(), .hidden = last ? hidden.data() : nullptr})
                    .ok());
  }

  const std::vector<int32_t> tokens = {7, 300, 41};
  const std::vector<float> expected = reference_steps(f, prompt, tokens, c.kv_name, dir);
  ASSERT_EQ(expected.size(), tokens.size() * V);
  const int32_t pos = kPrompt - 1, slot = 0;
  double worst = 0;
  for (size_t k = 0; k < tokens.size(); ++k) {
    const model::DraftBatch step{.tokens = std::span(&tokens[k], 1),
                                 .pos = std::span(&pos, 1),
                                 .slot = std::span(&slot, 1),
                                 .hidden = hidden.data()};
    ASSERT_TRUE(
        (*assistant)->step(step, *loaded.cache, {.logits = logits.data()}, hidden.data()).ok());
    double max_diff = 0, max_logit = 0;
    for (int i = 0; i < V; ++i) {
      const double e = expected[k * V + i];
      max_logit = std::max(max_logit, std::fabs(e));
      max_diff = std::max(max_diff, std::fabs(e - logits[i]));
    }
    const double rel = max_diff / max_logit;
    std::printf("[ assistant ] %-18s step %zu max|dlogit| %.3g (max|logit| %.3g, rel %.2g)\n",
                c.name.c_str(), k, max_diff, max_logit, rel);
    EXPECT_LE(rel, c.tolerance) << "step " << k;
    worst = std::max(worst, rel);
  }
  std::printf("[ assistant ] %-18s worst relative difference %.3g (tolerance %.3g)\n",
              c.name.c_str(), worst, c.tolerance);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AssistantOracle,
    ::testing::Values(Case{"tiny_e", "tiny-e", "f32", DType::kF32, "f32", 1e-4},
                      Case{"tiny_dense_keqv", "tiny-dense-keqv", "f32", DType::kF32, "f32", 1e-4},
                      Case{"tiny_moe_kv_f16", "tiny-moe", "f32", DType::kF16, "f16", 3e-3},
                      Case{"tiny_e_q8_0", "tiny-e", "q8_0", DType::kQ8_0, "q8_0", 5e-2},
                      Case{"tiny_e_gpu", "tiny-e", "f32", DType::kF32, "f32", 1e-4, true},
                      Case{"tiny_moe_kv_f16_gpu", "tiny-moe", "f32", DType::kF16, "f16", 3e-3,
                           true},
                      Case{"tiny_dense_keqv_q8_0_gpu", "tiny-dense-keqv", "q8_0", DType::kQ8_0,
                           "q8_0", 5e-2, true}),
    [](const auto& p) { return p.param.name; });

// A drafter made for another target is refused with what does not fit.
TEST(Assistant, ADrafterForAnotherWidthIsRefused) {
  const fs::path dir = testing_util::temp_dir();
  const Files f = write_models("tiny-e", "f32", dir);
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

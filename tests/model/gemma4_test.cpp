// Gemma 4 on the tiny synth shapes (spec §7): prefill, decode and micro-batches agree, and the
// §7.4 paths (PLE, shared sliding layers, MoE, proportional RoPE) are really taken.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/scheduler.h"
#include "kernels/ref/ref.h"
#include "model/synth.h"
#include "testing/testing.h"

namespace {

std::string write_synth(const model::SynthOptions& o, const std::string& file_name) {
  auto w = model::synth_writer(o);
  EXPECT_TRUE(w.ok()) << w.error().message();
  auto path = (testing_util::temp_dir() / file_name).string();
  EXPECT_TRUE(w->write(path).ok());
  return path;
}

// All-position logits of `ids` evaluated through the scheduler with micro-batches of `ubatch` (or
// one token at a time).
std::vector<float> logits_of(const std::string& path, const std::vector<int32_t>& ids, int ubatch, bool decode) {
  auto e = engine::Engine::load({.model_path = path,
                                 .request = {.n_ctx = 64,
                                             .k_type = tensor::DType::kF32,
                                             .v_type = tensor::DType::kF32,
                                             .n_ubatch = decode ? 1 : ubatch,
                                             .logits_all_positions = true}});
  EXPECT_TRUE(e.ok()) << e.error().message();
  auto logits = engine::prompt_logits(**e, ids);
  EXPECT_TRUE(logits.ok()) << logits.error().message();
  return logits.ok() ? *logits : std::vector<float>{};
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

class Gemma4Tiny : public ::testing::TestWithParam<std::string> {};

TEST_P(Gemma4Tiny, PrefillDecodeAndMicroBatchesAgree) {
  const std::string path = write_synth({.arch = "gemma4", .shape = GetParam()}, GetParam() + ".gguf");
  constexpr int W = 8;
  for (int n : {1, W - 1, W, W + 1, 2 * W + 3, 40}) {
    SCOPED_TRACE("length " + std::to_string(n));
    const auto ids = testing_util::spread_token_ids(n);
    const auto prefill = logits_of(path, ids, 64, false);
    // The same arithmetic in a different order: f32 rounding only (1e-5 of logits up to 30).
    EXPECT_LE(max_abs_diff(prefill, logits_of(path, ids, 64, true)), 1e-5f * 30);
    EXPECT_LE(max_abs_diff(prefill, logits_of(path, ids, 3, false)), 1e-5f * 30);
    EXPECT_LE(max_abs_diff(prefill, logits_of(path, ids, 5, false)), 1e-5f * 30);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Gemma4Tiny,
                         ::testing::Values("tiny-e", "tiny-moe", "tiny-dense-keqv"),
                         [](const auto& p) { return testing_util::test_name(p.param); });

TEST(Gemma4, UnusedSharedKvTensorsAreIgnored) {
  const auto ids = testing_util::spread_token_ids(20);
  const auto without = logits_of(write_synth({.shape = "tiny-e"}, "a.gguf"), ids, 64, false);
  const auto with = logits_of(write_synth({.shape = "tiny-e", .shared_kv_tensors = true}, "b.gguf"), ids, 64, false);
  EXPECT_EQ(max_abs_diff(without, with), 0.0f);
}

TEST(Gemma4, PerLayerEmbeddingsChangeTheOutput) {
  const auto ids = testing_util::spread_token_ids(12);
  const auto normal = logits_of(write_synth({.shape = "tiny-e"}, "a.gguf"), ids, 64, false);
  const auto zeroed = logits_of(write_synth({.shape = "tiny-e", .zero_ple = true}, "b.gguf"), ids, 64, false);
  EXPECT_GT(max_abs_diff(normal, zeroed), 0.1f) << "zeroing the PLE table must change the logits";
}

TEST(Gemma4, DecodeFarPastTheWindowMatchesOnePrefill) {
  // 40 tokens = 5 windows: decoding one by one wraps every sliding ring (own and shared layers)
  // many times, a single prefill never does; both must see exactly the same keys. Whether they
  // are the right keys is checked against the independent reference (gemma4_oracle_test).
  const std::string path = write_synth({.shape = "tiny-e"}, "a.gguf");
  const auto ids = testing_util::spread_token_ids(40);
  EXPECT_LE(max_abs_diff(logits_of(path, ids, 1, false), logits_of(path, ids, 40, false)), 1e-5f * 30);
}

TEST(Gemma4, ProportionalRopeRotatesOnlyTheFirstQuarterOfPairs) {
  const std::string path = write_synth({.shape = "tiny-e"}, "a.gguf");
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file.ok());
  auto spec = model::spec_from_gguf(*file);
  ASSERT_TRUE(spec.ok());
  const model::LayerSpec& full = spec->layers[2];
  ASSERT_FALSE(full.is_sliding());
  ASSERT_EQ(full.head_dim, 64);
  std::vector<float> x(64), rotated;
  for (int i = 0; i < 64; ++i) x[i] = 0.01f * (i + 1);
  for (int32_t pos : {0, 1, 7, 100}) {
    rotated = x;
    const kernels::RopeParams p{kernels::RopeStyle::kRotateHalf, full.rope.n_rot, full.rope.inv_freq.data()};
    kernels::ref::rope(rotated.data(), 1, 1, 64, &pos, p);
    for (int i = 0; i < 32; ++i) {
      const bool rotates = i < 8;  // ω_i = 1e6^(−2i/64) for i < 8, zero beyond (spec §7.4)
      if (!rotates || pos == 0) {
        EXPECT_NEAR(rotated[i], x[i], 1e-6f) << "dim " << i << " pos " << pos;
        EXPECT_NEAR(rotated[i + 32], x[i + 32], 1e-6f) << "dim " << i + 32 << " pos " << pos;
      } else {
        const double angle = pos * std::pow(1e6, -2.0 * i / 64);
        EXPECT_NEAR(rotated[i], x[i] * std::cos(angle) - x[i + 32] * std::sin(angle), 1e-6);
        EXPECT_NEAR(rotated[i + 32], x[i + 32] * std::cos(angle) + x[i] * std::sin(angle), 1e-6);
      }
    }
  }
}

TEST(Gemma4, TinyShapesFollowTheSpec) {
  auto check = [](const std::string& shape, auto&& body) {
    auto w = model::synth_writer({.shape = shape, .no_weights = true});
    ASSERT_TRUE(w.ok());
    auto path = (testing_util::temp_dir() / (shape + ".gguf")).string();
    ASSERT_TRUE(w->write(path).ok());
    auto file = gguf::File::open(path);
    ASSERT_TRUE(file.ok());
    auto spec = model::spec_from_gguf(*file);
    ASSERT_TRUE(spec.ok()) << spec.error().message();
    body(*spec);
  };
  check("tiny-e", [](const model::Spec& s) {
    ASSERT_EQ(s.n_layer, 8);
    const int sources[] = {0, 1, 2, 3, 4, 3, 3, 4};  // §7.1: shared from layer 5; sliding → 3, full → 4
    for (int il = 0; il < 8; ++il) EXPECT_EQ(s.layers[il].kv_source, sources[il]) << il;
    EXPECT_EQ(s.layers[5].n_ff, 512);  // double-wide on shared layers
    EXPECT_EQ(s.layers[2].head_dim, 64);
    EXPECT_EQ(s.layers[1].head_dim, 32);
    EXPECT_EQ(s.n_embd_per_layer, 16);
    EXPECT_FLOAT_EQ(s.final_logit_softcap, 30.0f);
  });
  check("tiny-moe", [](const model::Spec& s) {
    EXPECT_EQ(s.layers[2].n_head_kv, 1);
    EXPECT_EQ(s.layers[1].n_head_kv, 2);
    EXPECT_FALSE(s.layers[2].has_v_proj);  // k_eq_v full layer
    EXPECT_TRUE(s.layers[1].has_v_proj);
    EXPECT_EQ(s.layers[0].n_expert, 8);
    EXPECT_EQ(s.layers[0].n_expert_used, 2);
  });
}

}  // namespace

// Sampler behaviour on small, hand-checkable distributions.
#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "kernels/ref/ref.h"

namespace {

TEST(Sampler, GreedyTakesTheArgmaxAndLowerIdOnTies) {
  sample::Sampler s({.temperature = 0});
  std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(logits, {}), 1);
}

TEST(Sampler, SameSeedSameTokens) {
  std::vector<float> logits(50);
  for (int i = 0; i < 50; ++i) logits[i] = std::sin(i * 0.7f) * 3;
  auto draw = [&](uint64_t seed) {
    sample::Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0, .seed = seed});
    std::vector<int32_t> out;
    for (int i = 0; i < 100; ++i) out.push_back(s.sample(logits, {}));
    return out;
  };
  EXPECT_EQ(draw(7), draw(7));
  EXPECT_NE(draw(7), draw(8));
}

TEST(Sampler, TopKOneIsGreedy) {
  std::vector<float> logits = {0.5f, 1.5f, 1.4f, -3.0f};
  sample::Sampler s({.temperature = 5.0f, .top_k = 1, .top_p = 1.0f, .min_p = 0});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(logits, {}), 1);
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: top-p 0.75 keeps the first two only.
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  sample::Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 0.75f, .min_p = 0});
  std::map<int, int> seen;
  for (int i = 0; i < 2000; ++i) ++seen[s.sample(logits, {})];
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_NEAR(seen[0] / 2000.0, 0.5 / 0.8, 0.04);  // renormalised over the kept set
}

TEST(Sampler, MinPDropsTokensFarBelowTheTop) {
  std::vector<float> logits = {std::log(0.6f), std::log(0.3f), std::log(0.05f), std::log(0.05f)};
  sample::Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.2f});  // threshold 0.12
  std::map<int, int> seen;
  for (int i = 0; i < 1000; ++i) ++seen[s.sample(logits, {})];
  EXPECT_EQ(seen.count(2) + seen.count(3), 0u);
  EXPECT_EQ(s.candidates().size(), 2u);
}

TEST(Sampler, TemperatureSharpensTheDistribution) {
  std::vector<float> logits = {1.0f, 0.0f};
  sample::Sampler cold({.temperature = 0.25f, .top_k = 0, .top_p = 1.0f, .min_p = 0});
  int zeros = 0;
  for (int i = 0; i < 2000; ++i) zeros += cold.sample(logits, {}) == 0;
  // p(0) = e^4 / (e^4 + 1) = 0.982 at T = 0.25
  EXPECT_NEAR(zeros / 2000.0, 0.982, 0.015);
}

TEST(Sampler, PenaltiesFollowTheirDefinitions) {
  // repeat penalty 2: a positive logit halves, a negative one doubles; presence and frequency
  // subtract once and per occurrence. Greedy makes the result observable.
  std::vector<float> logits = {3.0f, 2.0f, -1.0f};
  sample::Sampler repeat({.temperature = 0, .repeat_penalty = 2.0f});
  std::vector<int32_t> recent = {0};
  EXPECT_EQ(repeat.sample(logits, recent), 1);  // 3 → 1.5 < 2
  sample::Sampler frequency({.temperature = 0, .frequency_penalty = 0.6f});
  recent = {0, 0};
  EXPECT_EQ(frequency.sample(logits, recent), 1);  // 3 − 1.2 = 1.8 < 2
  recent = {0};
  EXPECT_EQ(frequency.sample(logits, recent), 0);  // 3 − 0.6 = 2.4 > 2
  sample::Sampler presence({.temperature = 0, .presence_penalty = 1.5f});
  EXPECT_EQ(presence.sample(logits, recent), 1);   // 3 − 1.5 = 1.5 < 2
  sample::Sampler window({.temperature = 0, .repeat_penalty = 2.0f, .repeat_last_n = 1});
  recent = {0, 1};
  EXPECT_EQ(window.sample(logits, recent), 0);     // only the last token (1) is penalised
}

// Picking from each row's top candidates (what a GPU hands back: kernels::ref::top_k, the
// reference selection) draws the very tokens picking from whole logits draws, for greedy and
// top-k chains with top-p, min-p and temperature, with ties in the logits, seed by seed.
TEST(Sampler, PickingFromTheTopCandidatesEqualsPickingFromAllLogits) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  const int n_vocab = 1000;
  const std::vector<sample::SamplingParams> chains = {
      {.temperature = 0},
      {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = 11},
      {.temperature = 1.5f, .top_k = 64, .top_p = 1.0f, .min_p = 0, .seed = 12},
      {.temperature = 0.3f, .top_k = 5, .top_p = 0.5f, .min_p = 0.2f, .seed = 13}};
  for (const auto& params : chains) {
    SCOPED_TRACE(params.describe());
    const int k = params.candidates_needed();
    ASSERT_GT(k, 0);
    sample::Sampler whole(params), top(params);
    for (int step = 0; step < 200; ++step) {
      std::vector<float> logits(n_vocab);
      for (auto& l : logits) l = std::round(dist(rng) * 4) / 4;  // quarter steps: many ties
      std::vector<int32_t> ids(k);
      std::vector<float> values(k);
      kernels::ref::top_k(logits.data(), n_vocab, 1, k, ids.data(), values.data());
      ASSERT_EQ(top.sample_top(ids, values), whole.sample(logits, {})) << "step " << step;
      EXPECT_EQ(top.last_probability(), whole.last_probability());
    }
  }
}

TEST(Sampler, PenaltiesOrUnboundedChainsNeedEveryLogit) {
  EXPECT_EQ(sample::SamplingParams{.temperature = 0}.candidates_needed(), 1);
  EXPECT_EQ((sample::SamplingParams{.temperature = 1, .top_k = 40}).candidates_needed(), 40);
  EXPECT_EQ((sample::SamplingParams{.temperature = 1, .top_k = 0}).candidates_needed(), 0);
  EXPECT_EQ((sample::SamplingParams{.temperature = 0, .repeat_penalty = 1.1f}).candidates_needed(),
            0);
  EXPECT_EQ((sample::SamplingParams{.temperature = 1, .top_k = 40, .presence_penalty = 0.5f})
                .candidates_needed(),
            0);
}

}  // namespace

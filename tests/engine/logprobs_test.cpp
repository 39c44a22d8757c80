// Logprobs through the scheduler are the model's own: on the real stories260K the first
// generated token's log-probability and top-20 equal the log-softmax of the golden logits
// (pure-Python float64 reference, stories260K.golden.json), whatever temperature, penalties, bias
// or constraint the sampler applies afterwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "engine/scheduler.h"
#include "testing/testing.h"

namespace {

struct GoldenStart {
  std::vector<int32_t> prompt;
  std::vector<double> logits;  // after the prompt
};

GoldenStart golden() {
  auto g = nlohmann::json::parse(
      testing_util::read_text(testing_util::shared_dir() / "models/stories260K.golden.json"));
  const auto& c = g["cases"][0];
  return {c["prompt_ids"].get<std::vector<int32_t>>(),
          c["logits_after_prompt"].get<std::vector<double>>()};
}

std::vector<double> log_softmax(const std::vector<double>& x) {
  const double max = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (double v : x) sum += std::exp(v - max);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] - max - std::log(sum);
  return out;
}

struct Seen {
  std::vector<sample::TokenLogprobs> logprobs;
  std::vector<int32_t> tokens;
};

void run(const engine::Request& base, Seen& seen) {
  auto e = engine::Engine::load(
      {.model_path = (testing_util::shared_dir() / "models/stories260K.gguf").string(),
       .request = {.n_ctx = 64,
                   .k_type = tensor::DType::kF32,
                   .v_type = tensor::DType::kF32,
                   .n_slots = 1,
                   .n_ubatch = 64}});
  ASSERT_TRUE(e.ok()) << e.error().message();
  engine::Scheduler s(**e);
  engine::Request r = base;
  r.on_logprobs = [&seen](const sample::TokenLogprobs& l) { seen.logprobs.push_back(l); };
  r.on_token = [&seen](int32_t t, float) {
    seen.tokens.push_back(t);
    return true;
  };
  ASSERT_EQ(s.submit(std::move(r)).refusal, engine::Refusal::kNone);
  for (int i = 0; i < 1000 && !s.idle(); ++i) ASSERT_TRUE(s.step().ok());
}

TEST(Logprobs, FirstTokenMatchesTheGoldenLogSoftmaxWhateverTheSampler) {
  const GoldenStart g = golden();
  const std::vector<double> want = log_softmax(g.logits);
  std::vector<int32_t> order(want.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return want[a] > want[b]; });

  // Greedy (the reported logprob must not be 0: it is the model's, not the sampler's certainty),
  // then hot sampling with penalties, and a bias that forbids the argmax.
  for (int variant = 0; variant < 3; ++variant) {
    engine::Request r;
    r.prompt = g.prompt;
    r.max_tokens = 4;
    r.n_top_logprobs = 20;
    r.sampling.temperature = variant == 0 ? 0.0f : 1.7f;
    r.sampling.top_k = 5;
    r.sampling.repeat_penalty = variant == 0 ? 1.0f : 1.3f;
    r.sampling.presence_penalty = variant == 0 ? 0.0f : 1.5f;
    r.sampling.seed = 11 + variant;
    const int32_t argmax = order[0];
    if (variant == 2)
      r.constrain = [argmax](std::span<float> logits, std::span<const int32_t>) {
        logits[argmax] = -INFINITY;
      };
    Seen seen;
    run(r, seen);
    ASSERT_EQ(seen.logprobs.size(), seen.tokens.size());
    ASSERT_GE(seen.tokens.size(), 1u);
    const auto& first = seen.logprobs[0];
    EXPECT_EQ(first.chosen.id, seen.tokens[0]);
    EXPECT_NEAR(first.chosen.logprob, want[seen.tokens[0]], 1e-4) << "variant " << variant;
    ASSERT_EQ(first.top.size(), 20u);
    for (size_t k = 0; k < 20; ++k) {
      EXPECT_EQ(first.top[k].id, order[k]) << "rank " << k;
      EXPECT_NEAR(first.top[k].logprob, want[order[k]], 1e-4) << "rank " << k;
    }
    if (variant == 0) {
      EXPECT_EQ(seen.tokens[0], argmax);
    }
    if (variant == 2) {
      EXPECT_NE(seen.tokens[0], argmax);
    }
  }
}

TEST(Logprobs, ZeroAlternativesGivesTheChosenTokensOnly) {
  const GoldenStart g = golden();
  engine::Request r;
  r.prompt = g.prompt;
  r.max_tokens = 2;
  r.sampling.temperature = 0;
  Seen seen;
  run(r, seen);
  ASSERT_EQ(seen.logprobs.size(), 2u);
  EXPECT_TRUE(seen.logprobs[0].top.empty());
  EXPECT_NEAR(seen.logprobs[0].chosen.logprob, log_softmax(g.logits)[seen.tokens[0]], 1e-4);
}

}  // namespace

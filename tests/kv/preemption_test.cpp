// A KV pool smaller than the running sequences need: the scheduler preempts the youngest, resumes
// it later, loses no request, and every greedy output equals the request run alone.
#include <gtest/gtest.h>

#include "engine/scheduler.h"
#include "testing/golden_cases.h"
#include "testing/testing.h"

namespace {

struct Outcome {
  std::vector<int32_t> tokens;
  engine::FinishReason reason = engine::FinishReason::kNone;
  engine::RequestStats stats;
  int done_calls = 0;
};

engine::Request greedy(const std::vector<int32_t>& prompt, int max_tokens, Outcome& out) {
  engine::Request r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.on_token = [&out](int32_t t, float) {
    out.tokens.push_back(t);
    return true;
  };
  r.on_done = [&out](engine::FinishReason reason, const engine::RequestStats& s,
                     const std::string&) {
    out.reason = reason;
    out.stats = s;
    ++out.done_calls;
  };
  return r;
}

// stories260K, f32 KV: 5 layers × 2 × 32 values × 4 bytes = 1280 bytes per position, so one
// 128-position context is 160 KiB.
std::unique_ptr<engine::Engine> load(int n_slots, uint64_t kv_budget, bool prefix_cache = true) {
  auto e = engine::Engine::load(
      {.model_path = (testing_util::shared_dir() / "models/stories260K.gguf").string(),
       .request = {.n_ctx = 128,
                   .k_type = tensor::DType::kF32,
                   .v_type = tensor::DType::kF32,
                   .n_slots = n_slots,
                   .n_ubatch = 7,
                   .kv_budget = kv_budget,
                   .prefix_cache = prefix_cache}});
  EXPECT_TRUE(e.ok()) << e.error().message();
  return e.ok() ? std::move(*e) : nullptr;
}

constexpr uint64_t kOneContext = 128 * 1280;

// Eight requests on four slots whose KV together would take ~2.5 contexts, in a pool of one:
// sequences are preempted (their blocks given back) and resumed, by recomputing what the prefix
// cache no longer holds or without it, and each one's greedy text is the golden one.
TEST(KvPreemption, ThePoolRunsOutAndEveryRequestStillFinishesAsIfAlone) {
  for (bool prefix_cache : {true, false}) {
    SCOPED_TRACE(prefix_cache ? "with the prefix cache" : "without the prefix cache");
    auto e = load(4, kOneContext, prefix_cache);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->plan().kv_positions(), 128);
    engine::Scheduler s(*e);
    const auto cases = testing_util::golden_greedy_cases();
    std::vector<Outcome> outs(8);
    for (int i = 0; i < 8; ++i) {
      ASSERT_EQ(s.submit(greedy(cases[i % 2].prompt, 30 + 4 * i, outs[i])).refusal,
                engine::Refusal::kNone);
    }
    int most_running = 0;
    while (!s.idle()) {
      ASSERT_TRUE(s.step().ok());
      most_running = std::max(most_running, s.n_running());
      // Blocks held never exceed the pool, whatever runs.
      ASSERT_LE(e->cache().usage()[0].held, 8);
    }
    EXPECT_GT(s.counters().preemptions, 0u);
    EXPECT_GT(most_running, 1);
    uint64_t preempted = 0;
    for (int i = 0; i < 8; ++i) {
      SCOPED_TRACE("request " + std::to_string(i));
      EXPECT_EQ(outs[i].done_calls, 1);
      EXPECT_EQ(outs[i].reason, engine::FinishReason::kLength);
      const auto& golden = cases[i % 2].generated;
      ASSERT_EQ(outs[i].tokens.size(), static_cast<size_t>(30 + 4 * i));
      EXPECT_TRUE(std::equal(outs[i].tokens.begin(), outs[i].tokens.end(), golden.begin()));
      preempted += outs[i].stats.n_preempted;
    }
    EXPECT_EQ(preempted, s.counters().preemptions);
    EXPECT_EQ(e->cache().bytes_in_use(), 0u);
  }
}

// A pool too small for one context is refused when planned, with what would fit.
TEST(KvPreemption, ABudgetBelowOneContextIsRefusedWithTheFix) {
  auto e = engine::Engine::load(
      {.model_path = (testing_util::shared_dir() / "models/stories260K.gguf").string(),
       .request = {.n_ctx = 128,
                   .k_type = tensor::DType::kF32,
                   .v_type = tensor::DType::kF32,
                   .kv_budget = kOneContext / 2}});
  ASSERT_FALSE(e.ok());
  const std::string m = e.error().message();
  EXPECT_NE(m.find("--kv-budget"), std::string::npos) << m;
  EXPECT_NE(m.find("less than one context"), std::string::npos) << m;
  EXPECT_NE(m.find("--ctx 64"), std::string::npos) << m;  // the alternative that fits
}

}  // namespace

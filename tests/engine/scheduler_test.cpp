// Continuous batching on the real stories260K: golden greedy output alone and among many.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include "testing/golden_cases.h"
#include "testing/testing.h"

namespace {

std::unique_ptr<engine::Engine> load(int n_slots, int n_ubatch) {
  auto e = engine::Engine::load(
      {.model_path = (testing_util::shared_dir() / "models/stories260K.gguf").string(),
       .request = {.n_ctx = 128,
                   .k_type = tensor::DType::kF32,
                   .v_type = tensor::DType::kF32,
                   .n_slots = n_slots,
                   .n_ubatch = n_ubatch}});
  EXPECT_TRUE(e.ok()) << e.error().message();
  return std::move(*e);
}

struct Outcome {
  std::vector<int32_t> tokens;
  engine::FinishReason reason = engine::FinishReason::kNone;
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
  r.on_done = [&out](engine::FinishReason reason, const engine::RequestStats&, const std::string&) {
    out.reason = reason;
    ++out.done_calls;
  };
  return r;
}

void drain(engine::Scheduler& s) {
  ASSERT_TRUE(engine::run_until_idle(s).ok());
}

TEST(Scheduler, AloneMatchesGolden) {
  auto e = load(1, 512);
  engine::Scheduler s(*e);
  for (const auto& g : testing_util::golden_greedy_cases()) {
    Outcome out;
    // No limit: generation ends when the context (128, the golden n_positions) is full.
    ASSERT_EQ(s.submit(greedy(g.prompt, -1, out)).refusal, engine::Refusal::kNone);
    drain(s);
    EXPECT_EQ(out.tokens, g.generated);
    EXPECT_EQ(out.reason, engine::FinishReason::kLength);
    EXPECT_EQ(out.done_calls, 1);
  }
}

TEST(Scheduler, ThirtyTwoConcurrentGreedyOutputsEqualAlone) {
  // Micro-batch 7: prompts are chunked and share steps with decoding sequences.
  auto e = load(32, 7);
  engine::Scheduler s(*e);
  const auto cases = testing_util::golden_greedy_cases();
  std::vector<Outcome> outs(32);
  for (int i = 0; i < 32; ++i) {
    const auto& g = cases[i % 2];
    const int n = 40 + i;  // different lengths, so sequences finish at different steps
    ASSERT_EQ(s.submit(greedy(g.prompt, n, outs[i])).refusal, engine::Refusal::kNone);
    if (i % 5 == 0) {
      ASSERT_TRUE(s.step().ok());  // later requests join running ones
    }
  }
  drain(s);
  for (int i = 0; i < 32; ++i) {
    const auto& g = cases[i % 2];
    EXPECT_EQ(outs[i].done_calls, 1) << i;
    ASSERT_EQ(outs[i].tokens.size(), static_cast<size_t>(40 + i)) << i;
    EXPECT_TRUE(std::equal(outs[i].tokens.begin(), outs[i].tokens.end(), g.generated.begin()))
        << "request " << i;
  }
  EXPECT_EQ(e->cache().bytes_in_use(), 0u);  // every finished request gave its blocks back
}

TEST(Scheduler, RefusesPromptsLongerThanTheContext) {
  auto e = load(1, 16);
  engine::Scheduler s(*e);
  Outcome out;
  std::vector<int32_t> prompt(129, 5);
  auto r = s.submit(greedy(prompt, 4, out));
  EXPECT_EQ(r.refusal, engine::Refusal::kContextExceeded);
  EXPECT_NE(r.message.find("129 tokens"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("context holds 128"), std::string::npos) << r.message;
}

TEST(Scheduler, CancelFreesTheCacheAtOnce) {
  auto e = load(2, 16);
  engine::Scheduler s(*e);
  Outcome a, b;
  const int id = s.submit(greedy(testing_util::golden_greedy_cases()[0].prompt, 100, a)).id;
  s.submit(greedy(testing_util::golden_greedy_cases()[1].prompt, 10, b));
  ASSERT_TRUE(s.step().ok());
  const size_t in_use = e->cache().bytes_in_use();
  s.cancel(id);
  ASSERT_TRUE(s.step().ok());
  EXPECT_LT(e->cache().bytes_in_use(), in_use);
  drain(s);
  EXPECT_EQ(a.reason, engine::FinishReason::kCancelled);
  EXPECT_EQ(b.reason, engine::FinishReason::kLength);
  EXPECT_EQ(a.done_calls + b.done_calls, 2);
}

}  // namespace

// Three requests with one 70-token prompt arrive together (a request's n choices, say): the first
// prefills it in micro-batches of 16 while the others wait, then take its 4 whole blocks from the
// prefix cache and prefill only the rest; all three give the same greedy tokens.
TEST(Scheduler, RequestsWaitForAPrefillOfTheirPromptInsteadOfRepeatingIt) {
  auto e = load(4, 16);
  engine::Scheduler s(*e);
  std::vector<int32_t> prompt = testing_util::golden_greedy_cases()[0].prompt;
  while (prompt.size() < 70) prompt.push_back(prompt[prompt.size() % 5 + 1]);
  std::vector<Outcome> outs(3);
  std::vector<int> cached(3, -1);
  for (int i = 0; i < 3; ++i) {
    engine::Request r = greedy(prompt, 8, outs[i]);
    auto done = r.on_done;
    r.on_done = [&cached, i, done](engine::FinishReason reason, const engine::RequestStats& st,
                                   const std::string& error) {
      cached[i] = st.n_cached;
      done(reason, st, error);
    };
    ASSERT_EQ(s.submit(std::move(r)).refusal, engine::Refusal::kNone);
  }
  drain(s);
  EXPECT_EQ(cached[0], 0);
  EXPECT_EQ(cached[1], 64);
  EXPECT_EQ(cached[2], 64);
  EXPECT_EQ(s.counters().cached_tokens, 128u);
  for (int i = 1; i < 3; ++i) EXPECT_EQ(outs[i].tokens, outs[0].tokens) << "request " << i;
}

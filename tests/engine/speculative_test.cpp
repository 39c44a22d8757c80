// Speculative decoding (prompt lookup) through the scheduler: the output is token for token what
// decoding without drafts gives — the golden greedy text of stories260K (llama.cpp's), alone and
// among concurrent sequences in small micro-batches; seeded sampling; and Gemma 4's sliding and
// KV-shared layers, with f16 and 8-bit caches — while drafts are made and kept.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/draft.h"
#include "engine/draft_model.h"
#include "engine/scheduler.h"
#include "model/synth.h"
#include "testing/emulated_gpu.h"
#include "testing/golden_cases.h"
#include "testing/testing.h"

namespace {

namespace fs = std::filesystem;

TEST(NgramDraft, ProposesWhatFollowedTheLatestOccurrenceOfTheLongestSuffix) {
  std::vector<int32_t> out(8);
  // "5 6" occurs at 1 and 6 (the latest earlier occurrence): 7 8 9 followed it there.
  const std::vector<int32_t> t = {4, 5, 6, 1, 2, 9, 5, 6, 7, 8, 9, 3, 5, 6};
  ASSERT_EQ(engine::ngram_draft(t, 3, out), 3);
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 3), (std::vector<int32_t>{7, 8, 9}));
  // The 3-gram "3 5 6" never occurred before, "5 6" did: the longer match wins over "6" alone.
  EXPECT_EQ(engine::ngram_draft(t, 1, out), 1);
  EXPECT_EQ(out[0], 7);
  // Only what exists after the match: "9 3" → [5 6].
  const std::vector<int32_t> u = {9, 3, 5, 6, 9, 3};
  EXPECT_EQ(engine::ngram_draft(u, 8, out), 4);
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 4), (std::vector<int32_t>{5, 6, 9, 3}));
  EXPECT_EQ(engine::ngram_draft(std::vector<int32_t>{1, 2, 3}, 4, out), 0);  // no repeat
  EXPECT_EQ(engine::ngram_draft(std::vector<int32_t>{7}, 4, out), 0);
}

// Expected lengths: argmax over n of (1 + a + … + aⁿ) / (1 + c·n), worked out in float64 apart
// from this code (no near-ties among them).
TEST(DraftLength, BestLengthMaximizesTokensPerUnitOfTime) {
  EXPECT_EQ(engine::best_draft_length(0.9, 0.1, 16), 10);
  EXPECT_EQ(engine::best_draft_length(0.8, 0.1, 16), 6);
  EXPECT_EQ(engine::best_draft_length(0.6, 0.2, 8), 2);
  EXPECT_EQ(engine::best_draft_length(0.5, 0.05, 8), 3);
  EXPECT_EQ(engine::best_draft_length(0.9, 0.1, 4), 4);  // the limit
  EXPECT_EQ(engine::best_draft_length(1.0, 0.02, 8), 8);
  EXPECT_EQ(engine::best_draft_length(0.3, 0.5, 4), 0);  // a row costs more than it brings
  EXPECT_EQ(engine::best_draft_length(0.0, 0.02, 8), 0);
}

TEST(DraftLength, AcceptanceIsKeptOverKeptPlusRejectionsWithOlderStepsDecayed) {
  engine::Acceptance a;
  // The optimistic prior: 0.8 kept of 1 trial.
  EXPECT_DOUBLE_EQ(a.rate(), 0.8);
  // Kept 0.8·0.8 + 1 = 1.64 of trials 0.8·1 + 1 + 1 = 2.8 (one kept, then a rejection).
  a.record(5, 1);
  EXPECT_DOUBLE_EQ(a.rate(), 1.64 / 2.8);
  // Kept 0.8·1.64 + 3 = 4.312 of 0.8·2.8 + 3 = 5.24: all kept, no rejection.
  a.record(3, 3);
  EXPECT_DOUBLE_EQ(a.rate(), 4.312 / 5.24);
  // Nothing drafted: no evidence.
  a.record(0, 0);
  EXPECT_DOUBLE_EQ(a.rate(), 4.312 / 5.24);
}

TEST(DraftLength, StepCostIsTheFittedSlopeOverTheStep) {
  engine::StepCost cost;
  EXPECT_DOUBLE_EQ(cost.row_share(1), engine::StepCost::kMinShare);
  for (int i = 0; i < 20; ++i) cost.record(1, 0.012);
  // One row count: no slope to fit.
  EXPECT_DOUBLE_EQ(cost.row_share(1), engine::StepCost::kMinShare);
  // t = 10 ms + 2 ms·rows: a row is 2 / 12 of a one-row step, 2 / 20 of a five-row one.
  for (int i = 0; i < 20; ++i) cost.record(1 + i % 5, 0.010 + 0.002 * (1 + i % 5));
  EXPECT_NEAR(cost.row_share(1), 2.0 / 12, 1e-9);
  EXPECT_NEAR(cost.row_share(5), 2.0 / 20, 1e-9);
  // Steps that got faster with more rows (noise): the floor, never a free or negative row.
  engine::StepCost noisy;
  for (int i = 0; i < 20; ++i) noisy.record(1 + i % 2, 0.010 - 0.001 * (i % 2));
  EXPECT_DOUBLE_EQ(noisy.row_share(1), engine::StepCost::kMinShare);
}

TEST(DraftLength, ADrafterPassAddsItsTimeToARowsShare) {
  engine::StepCost cost;
  EXPECT_DOUBLE_EQ(cost.seconds(1), 0);  // nothing measured
  EXPECT_DOUBLE_EQ(cost.row_share(1, 0.005), engine::StepCost::kMinShare);
  // One row count: a step is their mean, 12 ms; a 6 ms drafter pass is half of it.
  for (int i = 0; i < 20; ++i) cost.record(1, 0.012);
  EXPECT_NEAR(cost.seconds(1), 0.012, 1e-12);
  EXPECT_NEAR(cost.seconds(4), 0.012, 1e-12);
  EXPECT_NEAR(cost.row_share(1, 0.006), 0.5, 1e-9);
  // t = 10 ms + 2 ms·rows: a drafted row verified in a one-row step is (2 + 6) / 12 of it.
  for (int i = 0; i < 40; ++i) cost.record(1 + i % 5, 0.010 + 0.002 * (1 + i % 5));
  EXPECT_NEAR(cost.seconds(3), 0.016, 1e-9);
  EXPECT_NEAR(cost.row_share(1, 0.006), 8.0 / 12, 1e-9);
  EXPECT_NEAR(cost.row_share(5, 0.006), 8.0 / 20, 1e-9);
  // Then only steps of 4 rows (every one verifying 3 drafts): the slope fitted before still says
  // what a one-row step takes, 18 - 3·2 ms, not their mean.
  for (int i = 0; i < 300; ++i) cost.record(4, 0.018);
  EXPECT_NEAR(cost.seconds(1), 0.012, 1e-6);
  EXPECT_NEAR(cost.row_share(1, 0.006), 8.0 / 12, 1e-6);
}

// A drafter whose pass costs half a step pays only while most drafts are kept: after one step of
// rejections (acceptance 0.64 / 1.8) one draft would bring 1.36 tokens for 1.5 steps' time.
TEST(DraftLength, ACostlyDrafterStopsAfterOneRejectedStep) {
  engine::DraftLength d(3);
  const double share = 0.5;
  EXPECT_EQ(d.next(share), 2);  // acceptance 0.8: (1 + 0.8 + 0.64) / 2 beats 1.8 / 1.5, 2.95 / 2.5
  d.record(2, 0);
  EXPECT_EQ(d.next(share), 0);
  // A drafter as costly as the step it saves: no draft could pay, nor could a probe show one does.
  engine::DraftLength same(3);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(same.next(1.0), 0) << i;
  // Its pass measured cheaper later (the steps got longer: more sequences), it drafts again.
  EXPECT_EQ(same.next(0.5), 2);
}

TEST(DraftLength, StopsWhenDraftsMissAndProbesLessOftenAsProbesMiss) {
  engine::DraftLength d(8);
  const double share = 0.1;
  // Acceptance 0.8, 0.36, 0.21, 0.14, then 0.098: below a row's share, it stops.
  std::vector<int> drafted;
  for (int n; (n = d.next(share)) > 0;) drafted.push_back(n), d.record(n, 0);
  EXPECT_EQ(drafted, (std::vector<int>{6, 2, 1, 1}));
  // Stopped, it probes with one token kProbeEvery calls later (the call that stopped is the
  // first), and waits twice as long after each probe rejected, up to kProbeMost calls.
  std::vector<int> gaps;
  for (int i = 1, last = 0; i <= 1000; ++i) {
    const int n = d.next(share);
    EXPECT_LE(n, 1);
    if (n > 0) gaps.push_back(i - last), last = i, d.record(n, 0);
  }
  EXPECT_EQ(gaps, (std::vector<int>{15, 32, 64, 128, 256, 256}));
  // A probe kept: drafting again until rejections stop it, then the first wait again.
  int n = 0;
  while ((n = d.next(share)) == 0) {
  }
  d.record(n, n);
  while ((n = d.next(share)) > 0) d.record(n, 0);
  int calls = 1;
  while (d.next(share) == 0) ++calls;
  EXPECT_EQ(calls + 1, engine::DraftLength::kProbeEvery);
  d.record(1, 1);
  // Probes kept make it draft again, longer as they keep being kept.
  for (int i = 0; i < 4 * engine::DraftLength::kProbeEvery && n < 8; ++i) {
    n = d.next(share);
    if (n > 0) d.record(n, n);
  }
  EXPECT_EQ(n, 8);
}

// Rows priced at nothing: every sequence drafts all it may, whatever the steps' timing, so the
// tests below verify the most drafts and do not depend on how fast this machine is.
const engine::SchedulerOptions kAlwaysDraft{.draft_row_share = 0.0};

// `on_gpu`: on testing_util::EmulatedGpu standing in for a GPU, with recorded passes (a
// verification step is one: every row wants logits). `drafter`: a --draft-model file, or empty.
std::unique_ptr<engine::Engine> load(const std::string& path, plan::Request request,
                                     bool on_gpu = false, const std::string& drafter = "") {
  engine::EngineOptions o{.model_path = path, .draft_model_path = drafter, .request = request};
  if (on_gpu) {
    o.devices.assume_gpu = "1G@100";
    o.gpu_backend = [max =
                         request.n_ubatch](int) -> util::Result<std::unique_ptr<kernels::Backend>> {
      return std::unique_ptr<kernels::Backend>(
          std::make_unique<testing_util::EmulatedGpu>(2, max, 4096));
    };
  }
  auto e = engine::Engine::load(o);
  EXPECT_TRUE(e.ok()) << e.error().message();
  return e.ok() ? std::move(*e) : nullptr;
}

using testing_util::stories_model;

struct DraftedOutcome {
  std::vector<int32_t> tokens;
  engine::RequestStats stats;
  int done_calls = 0;
};

engine::Request request(const std::vector<int32_t>& prompt, int max_tokens, DraftedOutcome& out,
                        int n_draft = -1, float temperature = 0, uint64_t seed = 1) {
  engine::Request r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.n_draft = n_draft;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.on_token = [&out](int32_t t, float) {
    out.tokens.push_back(t);
    return true;
  };
  r.on_done = [&out](engine::FinishReason, const engine::RequestStats& s, const std::string&) {
    out.stats = s;
    ++out.done_calls;
  };
  return r;
}

TEST(Speculative, GreedyOutputIsTheGoldenTextAloneAndAmongOthers) {
  const auto cases = testing_util::golden_greedy_cases();
  // Alone, to the end of the context (the golden run's 128 positions).
  auto alone = load(
      stories_model(),
      {.n_ctx = 128, .k_type = tensor::DType::kF32, .v_type = tensor::DType::kF32, .n_draft = 6});
  engine::Scheduler s(*alone, kAlwaysDraft);
  for (const auto& g : cases) {
    DraftedOutcome out;
    ASSERT_EQ(s.submit(request(g.prompt, -1, out)).refusal, engine::Refusal::kNone);
    ASSERT_TRUE(engine::run_until_idle(s).ok());
    EXPECT_EQ(out.tokens, g.generated);
    EXPECT_GT(out.stats.n_drafted, 0);
    EXPECT_GT(out.stats.n_accepted, 0);
  }
  // Twelve at once in micro-batches of 7: drafts compete with prefill chunks for the budget.
  auto many = load(stories_model(), {.n_ctx = 128,
                                     .k_type = tensor::DType::kF16,
                                     .v_type = tensor::DType::kF16,
                                     .n_slots = 12,
                                     .n_ubatch = 7,
                                     .n_draft = 4});
  engine::Scheduler m(*many, kAlwaysDraft);
  std::vector<DraftedOutcome> outs(12);
  for (int i = 0; i < 12; ++i) {
    ASSERT_EQ(m.submit(request(cases[i % 2].prompt, 40 + 3 * i, outs[i])).refusal,
              engine::Refusal::kNone);
    if (i % 4 == 0) {
      ASSERT_TRUE(m.step().ok());  // later requests join running ones
    }
  }
  ASSERT_TRUE(engine::run_until_idle(m).ok());
  for (int i = 0; i < 12; ++i) {
    const auto& want = cases[i % 2].generated;
    EXPECT_EQ(outs[i].done_calls, 1) << i;
    ASSERT_EQ(outs[i].tokens.size(), static_cast<size_t>(40 + 3 * i)) << i;
    EXPECT_TRUE(std::equal(outs[i].tokens.begin(), outs[i].tokens.end(), want.begin())) << i;
  }
  EXPECT_GT(m.counters().accepted_tokens, 0u);
  EXPECT_EQ(many->cache().bytes_in_use(), 0u);
}

// With the row cost measured (the default), a drafter that is always wrong soon stops being asked,
// but for a one-token probe every DraftLength::kProbeEvery steps. However the steps are timed:
// after m rejections the acceptance estimate is at most 0.8·0.8^m (Acceptance's prior and decay),
// at most the floor of a row's share (0.02) from m = 17 on, and a sequence drafts only while the
// estimate exceeds the share. With drafts at no cost it would be asked at every step.
TEST(Speculative, ADrafterThatKeepsMissingStopsBeingAsked) {
  const auto g = testing_util::golden_greedy_cases()[0];
  auto e = load(stories_model(), {.n_ctx = 128, .n_draft = 8});
  const int n_vocab = e->spec().n_vocab;
  engine::Scheduler s(*e);
  DraftedOutcome out;
  engine::Request r = request(g.prompt, -1, out);
  int calls = 0;
  r.drafter = [&](std::span<const int32_t> tokens, std::span<int32_t> draft) {
    const size_t at = tokens.size() - g.prompt.size();
    ++calls;
    for (size_t i = 0; i < draft.size(); ++i)
      draft[i] = (g.generated[std::min(at + i, g.generated.size() - 1)] + 1) % n_vocab;
    return static_cast<int>(draft.size());
  };
  ASSERT_EQ(s.submit(std::move(r)).refusal, engine::Refusal::kNone);
  ASSERT_TRUE(engine::run_until_idle(s).ok());
  EXPECT_EQ(out.tokens, g.generated);
  EXPECT_EQ(out.stats.n_accepted, 0);
  const int n_gen = static_cast<int>(g.generated.size());
  EXPECT_LE(calls, 17 + n_gen / engine::DraftLength::kProbeEvery + 1) << n_gen << " generated";
  EXPECT_GE(calls, 1);
}

TEST(Speculative, SeededSamplingPicksTheSameTokensWithAndWithoutDrafts) {
  auto e = load(stories_model(), {.n_ctx = 128, .n_draft = 5});
  const auto prompt = testing_util::golden_greedy_cases()[0].prompt;
  int kept = 0;
  for (uint64_t seed : {1, 2, 3, 4}) {
    DraftedOutcome plain, drafted;
    engine::Scheduler s(*e, kAlwaysDraft);
    ASSERT_EQ(s.submit(request(prompt, 100, plain, 0, 0.8f, seed)).refusal,
              engine::Refusal::kNone);  // this request does not draft
    ASSERT_EQ(s.submit(request(prompt, 100, drafted, -1, 0.8f, seed)).refusal,
              engine::Refusal::kNone);
    ASSERT_TRUE(engine::run_until_idle(s).ok());
    EXPECT_EQ(plain.stats.n_drafted, 0);
    EXPECT_EQ(drafted.tokens, plain.tokens) << "seed " << seed;
    kept += drafted.stats.n_accepted;
  }
  EXPECT_GT(kept, 0);
}

// Gemma 4's layer structures at small widths with a window of 8: drafts write past the sequence's
// end into the sliding rings and the shared caches, and are rejected and written again. Random
// weights rarely repeat themselves, so beside prompt lookup an oracle drafts the plain run's own
// output, wrong at every fifth token: drafts are kept, cut short and rejected at every length.
struct Case {
  std::string shape;
  tensor::DType kv;
  bool gpu = false;  // on testing_util::EmulatedGpu (SpeculativeAssistant)
};

// A random-weight Gemma 4 model of a tiny shape (model::synth_writer) at `path`.
void write_gemma4(const std::string& shape, const std::string& path, uint64_t seed = 1) {
  auto w = model::synth_writer({.arch = "gemma4", .shape = shape, .seed = seed});
  ASSERT_TRUE(w.ok()) << w.error().message();
  ASSERT_TRUE(w->write(path).ok());
}

class SpeculativeGemma4 : public ::testing::TestWithParam<Case> {};

TEST_P(SpeculativeGemma4, GreedyOutputIsTheSameWithAndWithoutDrafts) {
  const Case& c = GetParam();
  const auto path = (testing_util::temp_dir() / (c.shape + ".gguf")).string();
  ASSERT_NO_FATAL_FAILURE(write_gemma4(c.shape, path));
  // A prompt that repeats, so prompt lookup has something to propose.
  std::vector<int32_t> prompt;
  const auto ids = testing_util::spread_token_ids(12);
  for (int r = 0; r < 3; ++r) prompt.insert(prompt.end(), ids.begin(), ids.end());
  constexpr int kGen = 80;
  // Micro-batch 8: three decoding sequences leave five tokens for the drafts, so drafts are cut
  // short by the budget as well. Micro-batch 64 also on the emulated GPU.
  for (auto [ubatch, on_gpu] : {std::pair{8, false}, {64, false}, {64, true}}) {
    SCOPED_TRACE(testing::Message() << "micro-batch " << ubatch << (on_gpu ? " on a GPU" : ""));
    auto e = load(path,
                  {.n_ctx = 128,
                   .k_type = c.kv,
                   .v_type = c.kv,
                   .n_slots = 3,
                   .n_ubatch = ubatch,
                   .n_draft = 6},
                  on_gpu);
    ASSERT_NE(e, nullptr);
    ASSERT_EQ(e->plan().uses_gpu(), on_gpu);
    engine::Scheduler s(*e, kAlwaysDraft);
    DraftedOutcome first;
    ASSERT_EQ(s.submit(request(prompt, kGen, first, 0)).refusal, engine::Refusal::kNone);
    ASSERT_TRUE(engine::run_until_idle(s).ok());
    ASSERT_EQ(first.tokens.size(), static_cast<size_t>(kGen));
    const int n_vocab = e->spec().n_vocab;
    // Three at once: without drafts, with prompt lookup, with the oracle.
    DraftedOutcome plain, lookup, oracle;
    engine::Request o = request(prompt, kGen, oracle);
    o.drafter = [&](std::span<const int32_t> tokens, std::span<int32_t> out) {
      const size_t at = tokens.size() - prompt.size();
      size_t n = 0;
      for (; n < out.size() && at + n < first.tokens.size(); ++n) {
        const int32_t t = first.tokens[at + n];
        out[n] = (at + n) % 5 == 4 ? (t + 1) % n_vocab : t;
      }
      return static_cast<int>(n);
    };
    ASSERT_EQ(s.submit(request(prompt, kGen, plain, 0)).refusal, engine::Refusal::kNone);
    ASSERT_EQ(s.submit(std::move(o)).refusal, engine::Refusal::kNone);
    ASSERT_EQ(s.submit(request(prompt, kGen, lookup)).refusal, engine::Refusal::kNone);
    ASSERT_TRUE(engine::run_until_idle(s).ok());
    EXPECT_EQ(plain.tokens, first.tokens);
    EXPECT_EQ(lookup.tokens, first.tokens);
    EXPECT_EQ(oracle.tokens, first.tokens);
    std::printf("[ drafts ] %s %s ubatch %d%s: lookup %d of %d kept, oracle %d of %d\n",
                c.shape.c_str(), std::string(gguf::tensor_type_name(c.kv)).c_str(), ubatch,
                on_gpu ? " (emulated GPU)" : "", lookup.stats.n_accepted, lookup.stats.n_drafted,
                oracle.stats.n_accepted, oracle.stats.n_drafted);
    EXPECT_EQ(plain.stats.n_drafted, 0);
    EXPECT_GT(lookup.stats.n_drafted, 0);
    // Four of every five oracle drafts are right: most are kept.
    EXPECT_GT(oracle.stats.n_accepted, kGen / 2);
    EXPECT_EQ(e->cache().bytes_in_use(), 0u);
  }
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.shape << " " << gguf::tensor_type_name(c.kv);
}

// A Gemma 4 assistant drafter for the target at `target` (tests/reference/write_assistant.py;
// `options` are that script's).
std::string assistant_for(const std::string& target, const std::string& options = "") {
  const std::string path = target + ".assistant.gguf";
  testing_util::write_assistant(target, path, "--n-embd 64 " + options);
  return path;
}

// With the engine's drafter (`label` names it in the log): greedy and seeded (T = 0.8) requests
// alone without drafts give the expected outputs; then, twice in one scheduler (the second round's
// requests take over the first's slots, and a fifth waits for one), the same requests drafting,
// beside one that does not draft and one with a drafter of its own, and one of `other`, a prompt
// of another length, give them again, while drafts are made.
void expect_drafting_leaves_outputs(engine::Engine& e, const std::vector<int32_t>& prompt,
                                    const std::vector<int32_t>& other, int n_gen,
                                    const std::string& label) {
  DraftedOutcome greedy, sampled, greedy_other;
  {
    engine::Scheduler s(e, kAlwaysDraft);
    ASSERT_EQ(s.submit(request(prompt, n_gen, greedy, 0)).refusal, engine::Refusal::kNone);
    ASSERT_EQ(s.submit(request(prompt, n_gen, sampled, 0, 0.8f, 7)).refusal,
              engine::Refusal::kNone);
    ASSERT_EQ(s.submit(request(other, n_gen, greedy_other, 0)).refusal, engine::Refusal::kNone);
    ASSERT_TRUE(engine::run_until_idle(s).ok());
  }
  ASSERT_EQ(greedy.tokens.size(), static_cast<size_t>(n_gen));
  engine::Scheduler s(e, kAlwaysDraft);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(testing::Message() << "round " << round);
    DraftedOutcome plain, drafted, drafted_sampled, drafted_other, own;
    engine::Request mine = request(prompt, n_gen, own);
    mine.drafter = [&](std::span<const int32_t> tokens, std::span<int32_t> out) {
      const size_t at = tokens.size() - prompt.size();
      size_t n = 0;
      for (; n < out.size() && at + n < greedy.tokens.size(); ++n) out[n] = greedy.tokens[at + n];
      return static_cast<int>(n);
    };
    ASSERT_EQ(s.submit(request(prompt, n_gen, plain, 0)).refusal, engine::Refusal::kNone);
    ASSERT_EQ(
        s.submit(request(round == 0 ? prompt : other, n_gen, round == 0 ? drafted : drafted_other))
            .refusal,
        engine::Refusal::kNone);
    ASSERT_EQ(s.submit(request(prompt, n_gen, drafted_sampled, -1, 0.8f, 7)).refusal,
              engine::Refusal::kNone);
    ASSERT_EQ(s.submit(std::move(mine)).refusal, engine::Refusal::kNone);
    if (round == 1) {
      ASSERT_EQ(s.submit(request(prompt, n_gen, drafted)).refusal, engine::Refusal::kNone);
    }
    ASSERT_TRUE(engine::run_until_idle(s).ok());
    EXPECT_EQ(plain.tokens, greedy.tokens);
    EXPECT_EQ(drafted.tokens, greedy.tokens);
    EXPECT_EQ(own.tokens, greedy.tokens);
    EXPECT_EQ(drafted_sampled.tokens, sampled.tokens);
    if (round == 1) {
      EXPECT_EQ(drafted_other.tokens, greedy_other.tokens);
    }
    EXPECT_EQ(plain.stats.n_drafted, 0);
    EXPECT_GT(drafted.stats.n_drafted, 0);
    EXPECT_GT(drafted_sampled.stats.n_drafted, 0);
    EXPECT_GT(own.stats.n_accepted, n_gen / 2);  // its own drafter, not the engine's
    std::printf("[ %s ] round %d: greedy %d of %d kept, T=0.8 %d of %d\n", label.c_str(), round,
                drafted.stats.n_accepted, drafted.stats.n_drafted, drafted_sampled.stats.n_accepted,
                drafted_sampled.stats.n_drafted);
  }
  EXPECT_EQ(e.cache().bytes_in_use(), 0u);
}

// Random drafters draft tokens the target rarely picks: what this checks is that drafting with
// one, among sequences drafting otherwise and not at all, in micro-batches that cut drafts short,
// over sliding rings and shared caches holding rejected drafts, leaves the output unchanged,
// greedy and seeded at T = 0.8 (expect_drafting_leaves_outputs) — on the CPU, and with the whole
// model and its drafter on testing_util::EmulatedGpu, where every byte they allocate is priced.
class SpeculativeAssistant : public ::testing::TestWithParam<Case> {};

TEST_P(SpeculativeAssistant, OutputIsTheSameWithAndWithoutTheDrafter) {
  const Case& c = GetParam();
  const auto path = (testing_util::temp_dir() / (c.shape + ".gguf")).string();
  ASSERT_NO_FATAL_FAILURE(write_gemma4(c.shape, path));
  const std::string drafter = assistant_for(path);
  const auto prompt = testing_util::spread_token_ids(20);
  constexpr int kGen = 60;
  for (int ubatch : {8, 64}) {
    SCOPED_TRACE(testing::Message() << "micro-batch " << ubatch);
    const plan::Request r{.n_ctx = 128,
                          .k_type = c.kv,
                          .v_type = c.kv,
                          .n_slots = 4,
                          .n_ubatch = ubatch,
                          .n_draft = 4};
    auto e = load(path, r, c.gpu, drafter);
    ASSERT_NE(e, nullptr);
    ASSERT_NE(e->assistant(), nullptr);
    ASSERT_EQ(e->plan().uses_gpu(), c.gpu);
    expect_drafting_leaves_outputs(
        *e, prompt, std::vector<int32_t>(prompt.begin() + 3, prompt.begin() + 12), kGen,
        fmt::format("assistant drafts, {} {} ubatch {}{}", c.shape, gguf::tensor_type_name(c.kv),
                    ubatch, c.gpu ? " on a GPU" : ""));
    const engine::Verification v = e->verify();
    for (const engine::MemoryCheck& m : v.classes) {
      if (m.name == "kv cache" || m.name == "activations" || c.gpu) {
        EXPECT_EQ(m.allocated, m.planned) << m.name;
      }
    }
    // On a GPU its weights and activations are there, their staging on the host.
    for (const plan::Item& item : e->plan().items) {
      if (item.name == plan::kDrafterActivationsItem) {
        EXPECT_EQ(item.device, c.gpu ? 1 : 0);
      }
      if (item.name == plan::kDrafterStagingItem) {
        EXPECT_TRUE(c.gpu && item.device == 0);
      }
    }
  }
}

// Drafters that agree with the model by construction (write_assistant.py --oracle, from the
// model's own greedy output): one reads only the token it is fed (it picks the token that first
// followed it in that output), the other only the hidden state (a hidden state at P − 1 picks the
// token at P + 1). Their drafts are kept only if the scheduler feeds each the right token, the
// hidden state of the row that sampled the last token and the right position — a wiring mistake
// would leave the output right and the drafts all wrong. On the CPU and on the emulated GPU (where
// the hidden state comes back from the device and the drafter's input rows go up).
TEST(SpeculativeAssistant, DraftersThatAgreeByConstructionAreKept) {
  const fs::path dir = testing_util::temp_dir();
  const std::string path = (dir / "tiny-e.gguf").string();
  ASSERT_NO_FATAL_FAILURE(write_gemma4("tiny-e", path));
  const auto prompt = testing_util::spread_token_ids(12);
  constexpr int kGen = 40;
  const plan::Request r{.n_ctx = 128,
                        .k_type = tensor::DType::kF32,
                        .v_type = tensor::DType::kF32,
                        .n_slots = 2,
                        .n_ubatch = 16,
                        .n_draft = 3};
  DraftedOutcome greedy;
  {
    auto e = load(path, r);
    ASSERT_NE(e, nullptr);
    engine::Scheduler s(*e, kAlwaysDraft);
    ASSERT_EQ(s.submit(request(prompt, kGen, greedy, 0)).refusal, engine::Refusal::kNone);
    ASSERT_TRUE(engine::run_until_idle(s).ok());
  }
  ASSERT_EQ(greedy.tokens.size(), static_cast<size_t>(kGen));
  std::vector<int32_t> sequence = prompt;
  sequence.insert(sequence.end(), greedy.tokens.begin(), greedy.tokens.end());
  const fs::path seq_file = dir / "greedy.seq";
  {
    std::ofstream out(seq_file);
    for (size_t i = 0; i < sequence.size(); ++i) out << (i ? "," : "") << sequence[i];
    out << "\n";
  }
  for (const std::string input : {"token", "hidden"}) {
    const std::string drafter =
        assistant_for(path, "--oracle " + seq_file.string() + " --oracle-input " + input);
    for (bool gpu : {false, true}) {
      SCOPED_TRACE(input + " oracle" + (gpu ? " on a GPU" : ""));
      auto e = load(path, r, gpu, drafter);
      ASSERT_NE(e, nullptr);
      ASSERT_EQ(e->plan().uses_gpu(), gpu);
      engine::Scheduler s(*e, kAlwaysDraft);
      DraftedOutcome drafted;
      ASSERT_EQ(s.submit(request(prompt, kGen, drafted)).refusal, engine::Refusal::kNone);
      ASSERT_TRUE(engine::run_until_idle(s).ok());
      EXPECT_EQ(drafted.tokens, greedy.tokens);
      std::printf("[ assistant oracle ] %s%s: %d of %d drafted tokens kept\n", input.c_str(),
                  gpu ? " on a GPU" : "", drafted.stats.n_accepted, drafted.stats.n_drafted);
      // The token path follows the output as long as each token's first successor is the next one
      // (measured: 24 of 39 kept); the hidden path is right for the first draft of a step only (its
      // next hidden state is not the model's), so about one in three of its drafts of up to three
      // (measured: 20 of 55; with the hidden state of a step's first row instead of the sampling
      // row's, 13 of 74).
      const double kept = static_cast<double>(drafted.stats.n_accepted) / drafted.stats.n_drafted;
      EXPECT_GE(kept, input == "token" ? 0.5 : 0.3);
    }
  }
}

// An assistant reads the cache of the model's last layers where the model computes: beside a plan
// that keeps part of the model on the CPU and the rest on a GPU, it is refused, with what to do.
TEST(SpeculativeAssistant, BesideASplitPlanItIsRefused) {
  const fs::path dir = testing_util::temp_dir();
  const std::string path = (dir / "tiny-e.gguf").string();
  ASSERT_NO_FATAL_FAILURE(write_gemma4("tiny-e", path));
  const std::string drafter = assistant_for(path);
  engine::EngineOptions o{.model_path = path,
                          .draft_model_path = drafter,
                          .request = {.n_ctx = 64, .n_ubatch = 8, .ple_on_host = true}};
  o.devices.assume_gpu = "1G@100";
  o.gpu_backend = [](int) -> util::Result<std::unique_ptr<kernels::Backend>> {
    return std::unique_ptr<kernels::Backend>(
        std::make_unique<testing_util::EmulatedGpu>(2, 8, 4096));
  };
  auto e = engine::Engine::load(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("splits them between the CPU and the GPU"), std::string::npos)
      << e.error().message();
}

// A draft model (engine/draft_model.h): a tiny Gemma 4 of another shape, random, so its drafts
// are mostly rejected — the output must not change, greedy and seeded at T = 0.8, among sequences
// drafting otherwise and not at all, with prompts longer than a micro-batch (it catches up on them
// in several passes) and slots that a second round of requests takes over; and it allocates
// exactly what the plan prices, on the CPU or (`gpu`) whole in a GPU's memory beside the model, on
// testing_util::EmulatedGpu.
struct DraftCase {
  std::string shape, draft_shape;
  tensor::DType kv;
  bool gpu = false;
};

void PrintTo(const DraftCase& c, std::ostream* os) {
  *os << c.shape << " drafted by " << c.draft_shape << " " << gguf::tensor_type_name(c.kv)
      << (c.gpu ? " on a GPU" : "");
}

class SpeculativeDraftModel : public ::testing::TestWithParam<DraftCase> {};

TEST_P(SpeculativeDraftModel, OutputIsTheSameWithAndWithoutTheDraftModel) {
  const DraftCase& c = GetParam();
  const fs::path dir = testing_util::temp_dir();
  const auto path = (dir / (c.shape + ".gguf")).string();
  const auto draft_path = (dir / (c.draft_shape + "-draft.gguf")).string();
  ASSERT_NO_FATAL_FAILURE(write_gemma4(c.shape, path));
  ASSERT_NO_FATAL_FAILURE(write_gemma4(c.draft_shape, draft_path));
  const auto long_prompt = testing_util::spread_token_ids(37);
  const auto short_prompt = std::vector<int32_t>(long_prompt.begin() + 5, long_prompt.begin() + 14);
  constexpr int kGen = 40;
  // Micro-batch 16: four decoding sequences leave 12 rows, 4 drafts each for three. (At 8 the
  // first drafting sequence — never kept, yet always drafting at no cost — would take them all,
  // and the second would never catch up on its prompt: a sequence catches up only when drafting.)
  for (int ubatch : {16, 64}) {
    SCOPED_TRACE(testing::Message() << "micro-batch " << ubatch);
    const plan::Request r{.n_ctx = 128,
                          .k_type = c.kv,
                          .v_type = c.kv,
                          .n_slots = 4,
                          .n_ubatch = ubatch,
                          .n_draft = 4};
    engine::EngineOptions o{.model_path = path, .draft_model_path = draft_path, .request = r};
    if (c.gpu) {
      o.devices.assume_gpu = "1G@100";
      o.gpu_backend = [ubatch](int) -> util::Result<std::unique_ptr<kernels::Backend>> {
        return std::unique_ptr<kernels::Backend>(
            std::make_unique<testing_util::EmulatedGpu>(2, ubatch, 4096));
      };
    }
    auto e = engine::Engine::load(o);
    ASSERT_TRUE(e.ok()) << e.error().message();
    ASSERT_NE((*e)->draft_model(), nullptr);
    ASSERT_EQ((*e)->assistant(), nullptr);
    ASSERT_EQ((*e)->plan().uses_gpu(), c.gpu);
    expect_drafting_leaves_outputs(
        **e, long_prompt, short_prompt, kGen,
        fmt::format("draft model, {} by {} {} ubatch {}{}", c.shape, c.draft_shape,
                    gguf::tensor_type_name(c.kv), ubatch, c.gpu ? " on a GPU" : ""));
    // The draft model's cache and activations are what the plan priced, and on a GPU (where
    // weights are copied, not mapped) its weights too.
    const engine::Verification v = (*e)->verify();
    for (const engine::MemoryCheck& m : v.classes) {
      if (m.name == "kv cache" || m.name == "activations" || c.gpu) {
        EXPECT_EQ(m.allocated, m.planned) << m.name;
      }
    }
    const auto items = (*e)->plan().items;
    for (const std::string_view name : {plan::kDrafterWeightsItem, plan::kDrafterKvItem,
                                        plan::kDrafterActivationsItem, plan::kDrafterLogitsItem}) {
      // Weights, cache and activations where the model computes; logits read on the host.
      const int device = c.gpu && name != plan::kDrafterLogitsItem ? 1 : 0;
      EXPECT_TRUE(std::ranges::any_of(items, [&](const auto& i) {
        return i.name == name && i.device == device;
      })) << name;
    }
    EXPECT_EQ(std::ranges::any_of(
                  items, [](const auto& i) { return i.name == plan::kDrafterStagingItem; }),
              c.gpu);
  }
}

// The model as its own draft model drafts exactly what it picks: greedy, every draft is kept —
// provided the draft model is fed each sequence's tokens at the right positions in the right slot
// and catches up on exactly what the last step kept (a token off anywhere and drafts are lost).
// Two sequences at once, one prompt longer than the micro-batch.
TEST(SpeculativeDraftModel, TheModelAsItsOwnDraftModelHasEveryDraftKept) {
  const fs::path dir = testing_util::temp_dir();
  const std::string path = (dir / "tiny-e.gguf").string();
  ASSERT_NO_FATAL_FAILURE(write_gemma4("tiny-e", path));
  const auto long_prompt = testing_util::spread_token_ids(29);
  const auto short_prompt = std::vector<int32_t>(long_prompt.begin(), long_prompt.begin() + 6);
  constexpr int kGen = 40;
  const plan::Request r{.n_ctx = 128,
                        .k_type = tensor::DType::kF32,
                        .v_type = tensor::DType::kF32,
                        .n_slots = 2,
                        .n_ubatch = 16,
                        .n_draft = 3};
  auto e = engine::Engine::load({.model_path = path, .draft_model_path = path, .request = r});
  ASSERT_TRUE(e.ok()) << e.error().message();
  ASSERT_NE((*e)->draft_model(), nullptr);
  engine::Scheduler s(**e, kAlwaysDraft);
  DraftedOutcome plain_long, plain_short, drafted_long, drafted_short;
  ASSERT_EQ(s.submit(request(long_prompt, kGen, plain_long, 0)).refusal, engine::Refusal::kNone);
  ASSERT_EQ(s.submit(request(short_prompt, kGen, plain_short, 0)).refusal, engine::Refusal::kNone);
  ASSERT_TRUE(engine::run_until_idle(s).ok());
  ASSERT_EQ(s.submit(request(long_prompt, kGen, drafted_long)).refusal, engine::Refusal::kNone);
  ASSERT_EQ(s.submit(request(short_prompt, kGen, drafted_short)).refusal, engine::Refusal::kNone);
  ASSERT_TRUE(engine::run_until_idle(s).ok());
  EXPECT_EQ(drafted_long.tokens, plain_long.tokens);
  EXPECT_EQ(drafted_short.tokens, plain_short.tokens);
  for (const DraftedOutcome* o : {&drafted_long, &drafted_short}) {
    std::printf("[ draft model: itself ] %d of %d drafted tokens kept\n", o->stats.n_accepted,
                o->stats.n_drafted);
    EXPECT_GT(o->stats.n_drafted, kGen / 2);
    EXPECT_EQ(o->stats.n_accepted, o->stats.n_drafted);
  }
}

// A draft model as costly as the model (its shape, other weights: its drafts are rejected), its
// passes priced by their measured time: once its first drafting steps have measured them, a draft
// costs about a step, so it stops drafting and, as no draft could pay even if kept, probing too
// (or, where its pass measures a little cheaper than a step, probes 16, 32 and 64 steps apart:
// three in 120 steps). With its passes priced at nothing and a probe every 16 steps (before) it
// drafted 16 tokens here.
TEST(SpeculativeDraftModel, ADraftModelThatIsNeverRightSoonStopsDrafting) {
  const fs::path dir = testing_util::temp_dir();
  const std::string path = (dir / "tiny-e.gguf").string(),
                    draft_path = (dir / "tiny-e-2.gguf").string();
  ASSERT_NO_FATAL_FAILURE(write_gemma4("tiny-e", path));
  ASSERT_NO_FATAL_FAILURE(write_gemma4("tiny-e", draft_path, 2));
  const plan::Request r{.n_ctx = 256, .n_draft = 3};
  auto e = engine::Engine::load({.model_path = path, .draft_model_path = draft_path, .request = r});
  ASSERT_TRUE(e.ok()) << e.error().message();
  engine::Scheduler s(**e);  // rows and drafter passes priced as measured
  DraftedOutcome out;
  ASSERT_EQ(s.submit(request(testing_util::spread_token_ids(8), 120, out)).refusal,
            engine::Refusal::kNone);
  ASSERT_TRUE(engine::run_until_idle(s).ok());
  std::printf("[ draft model: never right ] %d of %d drafted tokens kept\n", out.stats.n_accepted,
              out.stats.n_drafted);
  EXPECT_GE(out.stats.n_drafted, r.n_draft);  // its first drafting step: nothing measured yet
  EXPECT_LE(out.stats.n_drafted, 2 * r.n_draft + 3);
}

// The model as its own draft model, driven directly: whatever it was fed before — drafts a step
// rejected, a wrong token, a sequence further on, another sequence in the slot — drafting after a
// prefix of the model's greedy output proposes that output's next tokens, so it caught up on
// exactly what its cache lacked and rewound or started over where it had to.
TEST(SpeculativeDraftModel, DraftsAfterAnyHistoryAreTheGreedyContinuation) {
  const std::string path = (testing_util::temp_dir() / "tiny-e.gguf").string();
  ASSERT_NO_FATAL_FAILURE(write_gemma4("tiny-e", path));
  const auto ids = testing_util::spread_token_ids(40);
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 29),
      other(ids.begin() + 29, ids.end());
  const plan::Request r{.n_ctx = 128,
                        .k_type = tensor::DType::kF32,
                        .v_type = tensor::DType::kF32,
                        .n_slots = 2,
                        .n_ubatch = 16,
                        .n_draft = 4};  // rewinds of 4 stay in place
  auto e = engine::Engine::load({.model_path = path, .draft_model_path = path, .request = r});
  ASSERT_TRUE(e.ok()) << e.error().message();
  DraftedOutcome greedy, greedy_other;
  {
    engine::Scheduler s(**e);
    ASSERT_EQ(s.submit(request(prompt, 90, greedy, 0)).refusal, engine::Refusal::kNone);
    ASSERT_EQ(s.submit(request(other, 10, greedy_other, 0)).refusal, engine::Refusal::kNone);
    ASSERT_TRUE(engine::run_until_idle(s).ok());
  }
  ASSERT_EQ(greedy.tokens.size(), 90u);
  engine::DraftModel& d = *(*e)->draft_model();
  // The drafts after `tokens` in `slot`, and the calls it took: a call catches up on at most a
  // pass (16 tokens) and drafts only once it has caught up.
  struct Drafted {
    std::vector<int32_t> drafts;
    int calls = 0;
  };
  auto draft_tokens = [&](int slot, const std::vector<int32_t>& tokens, int most) {
    Drafted got;
    got.drafts.reserve(most);
    const engine::DraftModel::Want want{
        .tokens = tokens, .slot = slot, .most = most, .out = &got.drafts};
    while (got.drafts.empty() && got.calls < 10) {
      EXPECT_TRUE(d.draft(std::span(&want, 1)).ok());
      ++got.calls;
    }
    return got;
  };
  // After the prompt and the first `n` picks (then `wrong`, if not -1).
  auto draft = [&](int slot, int n, int most, int32_t wrong = -1) {
    std::vector<int32_t> tokens = prompt;
    tokens.insert(tokens.end(), greedy.tokens.begin(), greedy.tokens.begin() + n);
    if (wrong >= 0) tokens.push_back(wrong);
    return draft_tokens(slot, tokens, most);
  };
  auto picks = [&](int from, int most) {
    return std::vector<int32_t>(greedy.tokens.begin() + from, greedy.tokens.begin() + from + most);
  };
  auto expect = [&](const Drafted& got, const std::vector<int32_t>& drafts, int calls) {
    EXPECT_EQ(got.drafts, drafts);
    EXPECT_EQ(got.calls, calls);
  };
  expect(draft(0, 0, 3), picks(0, 3), 2);  // the prompt: 29 tokens, two passes
  expect(draft(0, 2, 3), picks(2, 3), 1);  // two kept, one rejected
  expect(draft(0, 5, 3), picks(5, 3), 1);  // all kept
  // A wrong token, then back before it: its K/V (and its drafts') written again, 4 back at most.
  draft(0, 8, 3, (greedy.tokens[8] + 1) % (*e)->spec().n_vocab);
  expect(draft(0, 8, 3), picks(8, 3), 1);
  // 72 tokens on, then 68 back: past what the sliding layers' rings (48 cells) still hold, so it
  // starts over (41 tokens, three passes).
  expect(draft(0, 80, 2), picks(80, 2), 5);
  expect(draft(0, 12, 3), picks(12, 3), 3);
  // Another sequence in slot 0, then the first again in slot 1 and back in slot 0.
  expect(draft_tokens(0, other, 3),
         std::vector<int32_t>(greedy_other.tokens.begin(), greedy_other.tokens.begin() + 3), 1);
  expect(draft(1, 20, 3), picks(20, 3), 4);
  expect(draft(0, 20, 3), picks(20, 3), 4);
}

// A draft model must propose the model's own token ids: another vocabulary is refused.
TEST(SpeculativeDraftModel, AnotherVocabularyIsRefused) {
  const std::string path = (testing_util::temp_dir() / "tiny-e.gguf").string();
  ASSERT_NO_FATAL_FAILURE(write_gemma4("tiny-e", path));
  auto e = engine::Engine::load({.model_path = path,
                                 .draft_model_path = stories_model(),
                                 .request = {.n_ctx = 64, .n_draft = 3}});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("does not share the vocabulary"), std::string::npos)
      << e.error().message();
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SpeculativeDraftModel,
    ::testing::Values(DraftCase{"tiny-e", "tiny-dense-keqv", tensor::DType::kF16},
                      DraftCase{"tiny-moe", "tiny-e", tensor::DType::kQ8_0},
                      DraftCase{"tiny-dense-keqv", "tiny-moe", tensor::DType::kF32},
                      DraftCase{"tiny-e", "tiny-dense-keqv", tensor::DType::kF16, true},
                      DraftCase{"tiny-moe", "tiny-e", tensor::DType::kQ8_0, true}),
    [](const ::testing::TestParamInfo<DraftCase>& p) {
      return testing_util::test_name(p.param.shape) + "_by_" +
             testing_util::test_name(p.param.draft_shape) + "_" +
             std::string(gguf::tensor_type_name(p.param.kv)) + (p.param.gpu ? "_gpu" : "");
    });

INSTANTIATE_TEST_SUITE_P(Shapes, SpeculativeAssistant,
                         ::testing::Values(Case{"tiny-e", tensor::DType::kF16},
                                           Case{"tiny-moe", tensor::DType::kQ8_0},
                                           Case{"tiny-dense-keqv", tensor::DType::kF32},
                                           Case{"tiny-e", tensor::DType::kF16, true},
                                           Case{"tiny-moe", tensor::DType::kQ8_0, true}),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return testing_util::test_name(p.param.shape) + "_" +
                                  std::string(gguf::tensor_type_name(p.param.kv)) +
                                  (p.param.gpu ? "_gpu" : "");
                         });

INSTANTIATE_TEST_SUITE_P(Shapes, SpeculativeGemma4,
                         ::testing::Values(Case{"tiny-e", tensor::DType::kF16},
                                           Case{"tiny-e", tensor::DType::kQ8_0},
                                           Case{"tiny-moe", tensor::DType::kF16},
                                           Case{"tiny-dense-keqv", tensor::DType::kQ8_0}),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return testing_util::test_name(p.param.shape) + "_" +
                                  std::string(gguf::tensor_type_name(p.param.kv));
                         });

}  // namespace

// LoRA adapters through the engine on the real stories260K: requests under different adapters
// (and none) share forward passes and each gets its solo logits; the prefix cache reuses a prefix
// only under the adapter and scale that computed it; unloading waits for the requests that hold
// an adapter; an unknown name is refused; the slots are allocated exactly as planned.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/adapters.h"
#include "engine/scheduler.h"
#include "testing/lora_files.h"
#include "testing/testing.h"

namespace {

namespace fs = std::filesystem;

std::string model_path() {
  return (testing_util::shared_dir() / "models/stories260K.gguf").string();
}

// Two adapters for stories260K (q/k/v/o/gate/up/down, and v/o/up at rank 2) in `dir`.
std::vector<engine::AdapterFile> write_adapters(const fs::path& dir) {
  auto base = gguf::File::open(model_path());
  EXPECT_TRUE(base.ok());
  testing_util::write_adapter(*base, dir / "a.gguf", {.rank = 4, .seed = 1});
  testing_util::write_adapter(
      *base, dir / "b.gguf",
      {.rank = 2, .seed = 2, .targets = {"attn_v", "attn_output", "ffn_up"}});
  return {{"a", (dir / "a.gguf").string(), 1.0f}, {"b", (dir / "b.gguf").string(), 0.5f}};
}

std::unique_ptr<engine::Engine> load(std::vector<engine::AdapterFile> adapters, int n_slots = 3,
                                     model::LoraLimits lora = {}) {
  auto e = engine::Engine::load({.model_path = model_path(),
                                 .request = {.n_ctx = 128,
                                             .k_type = tensor::DType::kF32,
                                             .v_type = tensor::DType::kF32,
                                             .n_slots = n_slots,
                                             .n_ubatch = 64,
                                             .logits_all_positions = true,
                                             .lora = lora},
                                 .adapters = std::move(adapters)});
  EXPECT_TRUE(e.ok()) << e.error().message();
  return e.ok() ? std::move(*e) : nullptr;
}

// Prompt logits of a request under `adapter` (empty: none), as the scheduler hands them over.
struct Logits {
  std::vector<float> values;
  engine::RequestStats stats;
};
engine::Request logits_request(const std::vector<int32_t>& prompt, const std::string& adapter,
                               Logits& out, int n_vocab, bool reuse_prefix = false) {
  engine::Request r;
  r.prompt = prompt;
  r.max_tokens = 0;
  r.adapter = adapter;
  r.reuse_prefix = reuse_prefix;
  out.values.assign(prompt.size() * n_vocab, 0.0f);
  r.prompt_logits = [&out, n_vocab](int pos, std::span<const float> row) {
    std::copy(row.begin(), row.end(), out.values.begin() + static_cast<ptrdiff_t>(pos) * n_vocab);
  };
  r.on_done = [&out](engine::FinishReason, const engine::RequestStats& s, const std::string& e) {
    EXPECT_TRUE(e.empty()) << e;
    out.stats = s;
  };
  return r;
}

using testing_util::same_bits;

TEST(Adapters, RequestsUnderDifferentAdaptersBatchAndGetTheirSoloLogits) {
  const auto dir = testing_util::temp_dir();
  auto engine = load(write_adapters(dir));
  ASSERT_TRUE(engine);
  const int V = engine->spec().n_vocab;
  const auto prompt = testing_util::spread_token_ids(20);
  const char* names[3] = {"a", "b", ""};
  Logits solo[3], together[3];
  for (int i = 0; i < 3; ++i) {
    engine::Scheduler s(*engine);
    ASSERT_EQ(s.submit(logits_request(prompt, names[i], solo[i], V)).refusal,
              engine::Refusal::kNone);
    ASSERT_TRUE(engine::run_until_idle(s).ok());
  }
  engine::Scheduler s(*engine);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(s.submit(logits_request(prompt, names[i], together[i], V)).refusal,
              engine::Refusal::kNone);
  auto step = s.step();  // the three prompts fit one micro-batch of 64: one pass
  ASSERT_TRUE(step.ok());
  EXPECT_EQ(step->n_sequences, 3);
  EXPECT_EQ(step->n_tokens, 60);
  ASSERT_TRUE(engine::run_until_idle(s).ok());
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(same_bits(together[i].values, solo[i].values)) << "request " << i;
  EXPECT_FALSE(same_bits(solo[0].values, solo[2].values));
  EXPECT_FALSE(same_bits(solo[1].values, solo[2].values));
}

TEST(Adapters, PrefixCacheReusesOnlyUnderTheSameAdapterAndScale) {
  const auto dir = testing_util::temp_dir();
  auto engine = load(write_adapters(dir), 1);
  ASSERT_TRUE(engine);
  const int V = engine->spec().n_vocab;
  const auto prompt = testing_util::spread_token_ids(40);  // two and a half KV blocks of 16
  auto run = [&](const std::string& adapter, std::optional<float> scale) {
    Logits out;
    engine::Scheduler s(*engine);
    engine::Request r = logits_request(prompt, adapter, out, V, /*reuse_prefix=*/true);
    r.adapter_scale = scale;
    EXPECT_EQ(s.submit(std::move(r)).refusal, engine::Refusal::kNone);
    EXPECT_TRUE(engine::run_until_idle(s).ok());
    return out;
  };
  const Logits first = run("a", std::nullopt);
  EXPECT_EQ(first.stats.n_cached, 0);
  EXPECT_EQ(run("a", std::nullopt).stats.n_cached, 32) << "same adapter: the prefix is reused";
  EXPECT_EQ(run("", std::nullopt).stats.n_cached, 0) << "the base model cannot reuse it";
  EXPECT_EQ(run("b", std::nullopt).stats.n_cached, 0) << "nor another adapter";
  EXPECT_EQ(run("a", 0.5f).stats.n_cached, 0) << "nor the same adapter at another scale";
  // Reloaded under the same name, it is another adapter to the cache.
  ASSERT_TRUE(engine->adapters().unload("a").ok());
  ASSERT_TRUE(engine->adapters().load("a", (dir / "a.gguf").string(), 1.0f).ok());
  const Logits reloaded = run("a", std::nullopt);
  EXPECT_EQ(reloaded.stats.n_cached, 0);
  // What the cache served is what a fresh computation gives (positions after the reused ones).
  const Logits reused = run("a", std::nullopt);
  ASSERT_EQ(reused.stats.n_cached, 32);
  EXPECT_EQ(std::memcmp(reused.values.data() + 32 * V, first.values.data() + 32 * V,
                        8 * V * sizeof(float)),
            0);
}

TEST(Adapters, UnknownNamesAreRefusedAndUnloadWaitsForItsRequests) {
  const auto dir = testing_util::temp_dir();
  auto engine = load(write_adapters(dir), 2);
  ASSERT_TRUE(engine);
  const int V = engine->spec().n_vocab;
  engine::Scheduler s(*engine);
  Logits out;
  const auto refused = s.submit(logits_request({1, 2, 3}, "nope", out, V));
  EXPECT_EQ(refused.refusal, engine::Refusal::kUnknownAdapter);
  EXPECT_NE(refused.message.find("no adapter named 'nope'"), std::string::npos);

  // A request holds "b" while it is unloaded: the name goes at once, the slot when it ends.
  Logits held;
  ASSERT_EQ(s.submit(logits_request(testing_util::spread_token_ids(20), "b", held, V)).refusal,
            engine::Refusal::kNone);
  EXPECT_EQ(s.waiting_adapters(), std::vector<std::string>{"b"});
  ASSERT_TRUE(engine->adapters().unload("b").ok());
  EXPECT_FALSE(engine->adapters().find("b"));
  EXPECT_EQ(s.submit(logits_request({1, 2}, "b", out, V)).refusal,
            engine::Refusal::kUnknownAdapter);
  auto load_c = engine->adapters().load("c", (dir / "b.gguf").string(), 1.0f);
  EXPECT_FALSE(load_c.ok()) << "both slots are still held";
  ASSERT_TRUE(engine::run_until_idle(s).ok());
  EXPECT_GT(held.stats.n_prompt, 0);
  EXPECT_TRUE(engine->adapters().load("c", (dir / "b.gguf").string(), 1.0f).ok());
  EXPECT_FALSE(engine->adapters().unload("zzz").ok());
}

TEST(Adapters, SlotsAreAllocatedExactlyAsPlanned) {
  const auto dir = testing_util::temp_dir();
  auto engine = load(write_adapters(dir), 2, {.max_loras = 3, .max_rank = 8});
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->plan().request.lora.max_loras, 3);
  EXPECT_EQ(engine->plan().request.lora.max_rank, 8);
  const engine::Verification v = engine->verify();
  for (const auto& c : v.classes) EXPECT_EQ(c.allocated, c.planned) << c.name;
  bool listed = false;
  for (const auto& item : engine->plan().items) listed = listed || item.name == "lora adapters";
  EXPECT_TRUE(listed);
}

}  // namespace

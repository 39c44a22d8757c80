// kv::Cache: reserving from a pool that can say no, prefix hits, misses and eviction, and the
// sliding-window boundary of reuse — a prefix is reused only as far as the window its next token
// needs is still cached, and then gives the logits of a fresh prefill bit for bit.
#include "kv/cache.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernels/cpu/backend.h"
#include "model/model.h"
#include "model/synth.h"
#include "testing/testing.h"
#include "util/thread_pool.h"

namespace {

// Two full-attention layers of 64 values: no model needed to exercise the block bookkeeping.
std::vector<kv::LayerGeometry> two_full_layers() {
  return {{.il = 0, .source = 0, .n_head_kv = 2, .head_dim = 32},
          {.il = 1, .source = 1, .n_head_kv = 2, .head_dim = 32}};
}

kv::CacheConfig small_config(int pool_blocks, int n_slots = 2) {
  return {.n_ctx = 16,
          .n_ubatch = 4,
          .n_slots = n_slots,
          .k_type = tensor::DType::kF32,
          .v_type = tensor::DType::kF32,
          .block_cells = 4,
          .pool_blocks = {pool_blocks}};
}

std::vector<int32_t> tokens(int n, int first = 1) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = first + i;
  return t;
}

TEST(KvCache, ReserveFailsWhenThePoolIsShortAndChangesNothing) {
  auto cache = kv::Cache::create(two_full_layers(), small_config(5));
  ASSERT_TRUE(cache.ok()) << cache.error().message();
  ASSERT_TRUE(cache->reserve(0, 16));  // 4 blocks of the 5
  const auto before = cache->usage();
  EXPECT_FALSE(cache->reserve(1, 8));  // 2 more blocks: only 1 left
  EXPECT_EQ(cache->usage()[0].held, before[0].held);
  EXPECT_EQ(cache->reserved_positions(1), 0);
  EXPECT_FALSE(cache->reserve(0, 17));  // past the context
  EXPECT_TRUE(cache->reserve(1, 4));
  cache->release(0);
  EXPECT_TRUE(cache->reserve(1, 16));
  EXPECT_EQ(cache->usage()[0].held, 4);
  // A pool that cannot hold one context is refused when the cache is made.
  EXPECT_FALSE(kv::Cache::create(two_full_layers(), small_config(3)).ok());
}

TEST(KvCache, PrefixHitsMissesAndEviction) {
  auto cache = kv::Cache::create(two_full_layers(), small_config(6));
  ASSERT_TRUE(cache.ok());
  const auto a = tokens(12);
  ASSERT_TRUE(cache->reserve(0, 12));
  cache->commit(0, a, 12);  // three complete blocks
  cache->release(0);
  EXPECT_EQ(cache->usage()[0].cached, 3);

  auto longer = a;
  longer.push_back(100);
  EXPECT_EQ(cache->reuse_prefix(1, longer), 12);  // a hit on every block
  cache->release(1);
  EXPECT_EQ(cache->reuse_prefix(1, a), 8);  // the last token is always evaluated
  cache->release(1);
  auto inside = a;
  inside[9] = 77;  // differs inside the third block
  EXPECT_EQ(cache->reuse_prefix(1, inside), 8);
  cache->release(1);
  auto other = a;
  other[0] = 55;  // differs in the first token: a miss
  EXPECT_EQ(cache->reuse_prefix(1, other), 0);

  // Another sequence that needs the whole pool evicts the idle cached blocks, and a cached
  // prefix held by a running sequence is never evicted.
  EXPECT_EQ(cache->reuse_prefix(1, longer), 12);
  EXPECT_FALSE(cache->reserve(0, 16));  // 4 blocks: 3 free, the other 3 held by slot 1
  cache->release(1);
  ASSERT_TRUE(cache->reserve(0, 16));  // now it takes the least recently released
  EXPECT_LT(cache->usage()[0].cached, 3);
  cache->release(0);
  EXPECT_LT(cache->reuse_prefix(1, longer), 12);
}

// Tiny Gemma 4 (spec §7.1: window 8, full and sliding layers, both kinds of KV sharing) on the CPU
// kernels, with 4-cell blocks so that a window spans several blocks.
class SlidingReuse : public ::testing::Test {
 protected:
  static constexpr int kBlock = 4, kUbatch = 4, kCtx = 64;

  void SetUp() override {
    auto w = model::synth_writer({.arch = "gemma4", .shape = "tiny-e"});
    ASSERT_TRUE(w.ok());
    const auto path = (testing_util::temp_dir() / "tiny-e.gguf").string();
    ASSERT_TRUE(w->write(path).ok());
    auto file = gguf::File::open(path);
    ASSERT_TRUE(file.ok());
    file_.emplace(std::move(*file));
    auto spec = model::spec_from_gguf(*file_);
    ASSERT_TRUE(spec.ok());
    spec_ = *spec;
    cpu_ =
        std::make_unique<kernels::cpu::CpuBackend>(pool_, kUbatch, model::max_matmul_cols(spec_));
    auto m = model::load_model(*file_, spec_, *cpu_, {.max_batch = kUbatch});
    ASSERT_TRUE(m.ok()) << m.error().message();
    model_ = std::move(*m);
  }

  // A cache whose sliding pool is one ring and one spare block: only the newest blocks of
  // positions stay cached there.
  kv::Cache make_cache(bool prefix_cache) {
    kv::CacheConfig c{.n_ctx = kCtx,
                      .n_ubatch = kUbatch,
                      .n_slots = 1,
                      .k_type = tensor::DType::kF32,
                      .v_type = tensor::DType::kF32,
                      .block_cells = kBlock,
                      .prefix_cache = prefix_cache};
    auto groups = kv::plan_groups(model::kv_layers(spec_), c);
    EXPECT_TRUE(groups.ok());
    for (const auto& g : *groups)
      c.pool_blocks.push_back(g.sliding ? g.blocks_per_sequence + 1 : g.n_blocks);
    auto cache = kv::Cache::create(model::kv_layers(spec_), c);
    EXPECT_TRUE(cache.ok()) << cache.error().message();
    return std::move(*cache);
  }

  // Logits of positions [from, ids.size()) of slot 0, in micro-batches, committing as it goes.
  std::vector<float> evaluate(kv::Cache& cache, const std::vector<int32_t>& ids, int from) {
    const int V = spec_.n_vocab;
    std::vector<float> logits((ids.size() - from) * V);
    for (int start = from; start < static_cast<int>(ids.size()); start += kUbatch) {
      const int n = std::min<int>(kUbatch, static_cast<int>(ids.size()) - start);
      EXPECT_TRUE(cache.reserve(0, start + n));
      std::vector<int32_t> pos(n), slot(n, 0);
      std::vector<uint8_t> output(n, 1);
      for (int i = 0; i < n; ++i) pos[i] = start + i;
      model::Batch batch{
          .tokens = std::span(ids).subspan(start, n), .pos = pos, .slot = slot, .output = output};
      auto s = model_->forward(batch, cache, logits.data() + static_cast<size_t>(start - from) * V);
      EXPECT_TRUE(s.ok()) << s.error().message();
      cache.commit(0, ids, start + n);
    }
    return logits;
  }

  // The logits of `ids` from `from` on, from a fresh cache that prefills everything.
  std::vector<float> fresh(const std::vector<int32_t>& ids, int from) {
    kv::Cache cache = make_cache(false);
    auto all = evaluate(cache, ids, 0);
    return {all.begin() + static_cast<ptrdiff_t>(from) * spec_.n_vocab, all.end()};
  }

  util::ThreadPool pool_{2};
  std::optional<gguf::File> file_;
  model::Spec spec_;
  std::unique_ptr<kernels::cpu::CpuBackend> cpu_;
  std::unique_ptr<model::Model> model_;
};

using testing_util::same_bits;

TEST_F(SlidingReuse, APrefixIsReusedOnlyAsFarAsItsWindowIsCached) {
  ASSERT_TRUE(model_);
  kv::Cache cache = make_cache(true);
  const auto a = testing_util::spread_token_ids(40);
  evaluate(cache, a, 0);
  cache.release(0);

  // Late: 37 tokens shared (the prefix ends inside a block); the window of position 36 — 29..35,
  // blocks 7 and 8 — is among the newest blocks, still cached: 36 positions reused, and the
  // logits after them are a fresh prefill's, bit for bit.
  auto late = a;
  late.resize(37);
  for (int t : {300, 301, 302, 303, 304}) late.push_back(t);
  const int reused = cache.reuse_prefix(0, late);
  EXPECT_EQ(reused, 36);
  EXPECT_TRUE(same_bits(evaluate(cache, late, reused), fresh(late, reused)));
  cache.release(0);

  // Early: 21 shared. Every full block up to 20 is cached, but the window of position 20 — blocks
  // 3 and 4 — left the sliding pool long ago, and so did every earlier window: nothing is reused,
  // and the logits are still right.
  auto early = a;
  early.resize(21);
  for (int t : {310, 311, 312}) early.push_back(t);
  const int reused_early = cache.reuse_prefix(0, early);
  EXPECT_EQ(reused_early, 0);
  EXPECT_TRUE(same_bits(evaluate(cache, early, reused_early), fresh(early, reused_early)));
}

// Without the prefix cache nothing is indexed and a ring block is rewritten in place: the sliding
// pool never needs more than a ring per slot.
TEST_F(SlidingReuse, WithoutThePrefixCacheNothingIsKept) {
  ASSERT_TRUE(model_);
  kv::Cache cache = make_cache(false);
  const auto a = testing_util::spread_token_ids(40);
  evaluate(cache, a, 0);
  cache.release(0);
  for (const auto& u : cache.usage()) EXPECT_EQ(u.cached, 0);
  EXPECT_EQ(cache.reuse_prefix(0, a), 0);
}

}  // namespace

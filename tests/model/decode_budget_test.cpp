// The GPU decode step's budget (issue 18), counted on the emulated GPU for the layer structure of
// Gemma 4 E2B, E4B and 26B-A4B (every layer as the real model has it — sliding and full, KV
// sharing, per-layer inputs, 128 experts of which 8 run — at small widths, since the count of
// kernels and copies depends on the structure, not the widths): a decode step issues at most 12
// kernel launches per layer, no blocking copy, at most one host→device copy (the step block) and
// one device→host copy (the sampled candidates), whether it runs op by op or replays a recording,
// and also on the steps where a sequence enters a new KV block.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "model/model.h"
#include "model/placement.h"
#include "model/spec.h"
#include "testing/emulated_gpu.h"
#include "testing/structure_models.h"
#include "testing/testing.h"
#include "util/thread_pool.h"

namespace {

constexpr int kMaxLaunchesPerLayer = 12;
// The step's own launches beside its layers: the scatter of the cache's changes, the embedding
// lookup, Gemma 4's per-layer inputs (lookup, projection, norms), the first layer's input norm,
// and the head (final norm, logits, softcap, selection).
constexpr int kMaxLaunchesOutsideLayers = 14;

// The launches of one decode step, split into each layer's (a layer starts with its q/k/v
// products, the op before its attn_prep, and the last one ends where the head's norm starts) and
// the step's own.
struct StepLaunches {
  std::vector<std::vector<std::string>> per_layer;
  std::vector<std::string> outside;
};

StepLaunches split_by_layer(const std::vector<std::string>& launches, int n_layer) {
  std::vector<size_t> starts;
  for (size_t i = 1; i < launches.size(); ++i) {
    if (launches[i] == "attn_prep") starts.push_back(i - 1);
  }
  EXPECT_EQ(static_cast<int>(starts.size()), n_layer) << "one attn_prep per layer";
  StepLaunches out;
  if (starts.empty()) return out;
  // The head begins at the final norm: the step's last norm (layers end in theirs before it).
  size_t head = launches.size();
  while (head > starts.back() && launches[head - 1] != "rmsnorm" &&
         launches[head - 1] != "residual_norm")
    --head;
  if (head > starts.back()) --head;
  out.outside.assign(launches.begin(), launches.begin() + starts.front());
  for (size_t l = 0; l < starts.size(); ++l) {
    const size_t end = l + 1 < starts.size() ? starts[l + 1] : head;
    out.per_layer.emplace_back(launches.begin() + starts[l], launches.begin() + end);
  }
  out.outside.insert(out.outside.end(), launches.begin() + head, launches.end());
  return out;
}

std::string listing(const std::vector<std::string>& launches) {
  std::string out;
  for (const auto& l : launches) out += (out.empty() ? "" : " ") + l;
  return out;
}

class DecodeBudget : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(DecodeBudget, AStepStaysWithinItsLaunchesAndCopies) {
  const auto& [name, recorded] = GetParam();
  std::optional<testing_util::ScopedEnv> record;
  if (!recorded) record.emplace("HEADROOM_RECORD_PASSES", "0");
  testing_util::OpenedModel m = testing_util::open_structure_model(name);
  ASSERT_TRUE(m.spec);
  const model::Spec& spec = *m.spec;
  util::ThreadPool pool(2);
  testing_util::EmulatedGpu gpu(pool, 8, model::max_matmul_cols(spec));
  const model::Placement placement = model::place(spec, 1, 0, false, false);
  auto loaded = model::load_model(*m.file, spec, gpu, {.max_batch = 8, .placement = placement});
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  auto cache = kv::Cache::create(model::kv_layers(spec),
                                 {.n_ctx = 64,
                                  .n_ubatch = 8,
                                  .n_slots = 1,
                                  .k_type = tensor::DType::kQ8_0,
                                  .v_type = tensor::DType::kQ8_0},
                                 &gpu, placement.layer_device);
  ASSERT_TRUE(cache.ok()) << cache.error().message();
  ASSERT_TRUE(cache->reserve(0, 40));
  std::vector<float> logits(8 * spec.n_vocab);
  const int k = 40;
  std::vector<int32_t> top_ids(8 * k);
  std::vector<float> top_logits(8 * k);
  const auto ids = testing_util::spread_token_ids(40);
  // A prompt of 14 tokens in two micro-batches, then decode steps across the KV blocks' edges
  // (16 cells each) at positions 16 and 32.
  int pos = 0;
  for (int n : {8, 6}) {
    std::vector<int32_t> p(n), slot(n, 0);
    std::iota(p.begin(), p.end(), pos);
    model::Batch batch{.tokens = std::span(ids).subspan(pos, n), .pos = p, .slot = slot};
    ASSERT_TRUE((*loaded)->forward(batch, *cache, logits.data()).ok());
    pos += n;
  }
  for (; pos < 40; ++pos) {
    SCOPED_TRACE("decode at position " + std::to_string(pos));
    const int32_t p = pos, slot = 0;
    const uint8_t out = 1;
    model::Batch batch{.tokens = std::span(ids).subspan(pos, 1),
                       .pos = std::span(&p, 1),
                       .slot = std::span(&slot, 1),
                       .output = std::span(&out, 1)};
    gpu.clear_counts();
    auto s = (*loaded)->forward(batch, *cache,
                                {.logits = logits.data(),
                                 .top_k = k,
                                 .top_ids = top_ids.data(),
                                 .top_logits = top_logits.data()});
    ASSERT_TRUE(s.ok()) << s.error().message();
    const auto& c = gpu.copies();
    EXPECT_EQ(c.blocking_uploads, 0);
    EXPECT_EQ(c.blocking_downloads, 0);
    EXPECT_LE(c.async_uploads, 1);
    EXPECT_LE(c.async_downloads, 1);
    const StepLaunches step = split_by_layer(gpu.launches(), spec.n_layer);
    for (size_t l = 0; l < step.per_layer.size(); ++l) {
      EXPECT_LE(static_cast<int>(step.per_layer[l].size()), kMaxLaunchesPerLayer)
          << "layer " << l << ": " << listing(step.per_layer[l]);
    }
    EXPECT_LE(static_cast<int>(step.outside.size()), kMaxLaunchesOutsideLayers)
        << listing(step.outside);
    if (pos == 14) {  // said once: what one step of this structure launches
      std::cout << name << ": " << gpu.launches().size() << " launches per decode step ("
                << spec.n_layer << " layers, " << step.outside.size() << " outside them)\n";
    }
  }
  if (recorded) {
    EXPECT_EQ(gpu.replays(), 40 - 14 - 1) << "every decode step after the first";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeBudget,
                         ::testing::Combine(::testing::Values("e2b", "e4b", "26b-a4b"),
                                            ::testing::Bool()),
                         [](const auto& p) {
                           return testing_util::test_name(std::get<0>(p.param)) +
                                  (std::get<1>(p.param) ? "_recorded" : "_op_by_op");
                         });

}  // namespace

// Forward passes of a loaded model over a token sequence, for the model tests that compare
// backends (CPU, the emulated GPU, CUDA) logit by logit.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kv/cache.h"
#include "model/model.h"

namespace testing_util {

struct LoadedModel {
  std::unique_ptr<model::Model> model;
  std::optional<kv::Cache> cache;
};

// The model on `ops` with a one-slot cache of n_ctx cells (in the backend's memory when it has its
// own). Empty parts, with the failure reported, if loading failed.
inline LoadedModel load_with_cache(const gguf::File& file, const model::Spec& spec,
                                   kernels::Backend& ops, int n_ctx, int ubatch,
                                   tensor::DType kv_type, bool hidden = false) {
  LoadedModel r;
  auto m = model::load_model(file, spec, ops, {.max_batch = ubatch, .hidden = hidden});
  EXPECT_TRUE(m.ok()) << m.error().message();
  if (!m.ok()) return r;
  r.model = std::move(*m);
  auto cache = kv::Cache::create(
      model::kv_layers(spec),
      {.n_ctx = n_ctx, .n_ubatch = ubatch, .n_slots = 1, .k_type = kv_type, .v_type = kv_type},
      ops.host_memory() ? nullptr : &ops);
  EXPECT_TRUE(cache.ok()) << cache.error().message();
  if (cache.ok()) r.cache.emplace(std::move(*cache));
  return r;
}

// Every position's logits in slot 0: the first `prefill` tokens in micro-batches of `ubatch`,
// then one token per pass (decode), each pass's status checked. Zeros if loading failed. With
// `hidden`, each position's hidden state too ([ids][n_embd], Outputs::hidden).
inline std::vector<float> logits_of_passes(LoadedModel& r, const std::vector<int32_t>& ids,
                                           int prefill, int ubatch, int n_vocab,
                                           float* hidden = nullptr, int64_t n_embd = 0) {
  std::vector<float> logits(ids.size() * n_vocab);
  if (!r.model || !r.cache) return logits;
  EXPECT_TRUE(r.cache->reserve(0, static_cast<int>(ids.size())));
  for (size_t start = 0; start < ids.size();) {
    const int step = start < static_cast<size_t>(prefill) ? ubatch : 1;
    const int n = static_cast<int>(std::min<size_t>(step, ids.size() - start));
    std::vector<int32_t> pos(n), slot(n, 0);
    std::vector<uint8_t> output(n, 1);
    for (int i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(start + i);
    model::Batch batch{
        .tokens = std::span(ids).subspan(start, n), .pos = pos, .slot = slot, .output = output};
    auto s = r.model->forward(
        batch, *r.cache,
        {.logits = logits.data() + start * n_vocab,
         .hidden = hidden != nullptr ? hidden + static_cast<int64_t>(start) * n_embd : nullptr});
    EXPECT_TRUE(s.ok()) << s.error().message();
    start += n;
  }
  return logits;
}

// Every position's top-k selection in slot 0 (ids, then their logits), passes as logits_of_passes
// makes them: what a sampling step reads instead of whole logits. `hidden` as there.
struct Selections {
  std::vector<int32_t> ids;
  std::vector<float> logits;
};
inline Selections selections_of_passes(LoadedModel& r, const std::vector<int32_t>& ids, int prefill,
                                       int ubatch, int n_vocab, int k, float* hidden = nullptr,
                                       int64_t n_embd = 0) {
  Selections out{std::vector<int32_t>(ids.size() * k), std::vector<float>(ids.size() * k)};
  if (!r.model || !r.cache) return out;
  EXPECT_TRUE(r.cache->reserve(0, static_cast<int>(ids.size())));
  std::vector<float> logits(static_cast<size_t>(ubatch) * n_vocab);
  for (size_t start = 0; start < ids.size();) {
    const int step = start < static_cast<size_t>(prefill) ? ubatch : 1;
    const int n = static_cast<int>(std::min<size_t>(step, ids.size() - start));
    std::vector<int32_t> pos(n), slot(n, 0);
    std::vector<uint8_t> output(n, 1);
    for (int i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(start + i);
    model::Batch batch{
        .tokens = std::span(ids).subspan(start, n), .pos = pos, .slot = slot, .output = output};
    auto s = r.model->forward(
        batch, *r.cache,
        {.logits = logits.data(),
         .top_k = k,
         .top_ids = out.ids.data() + start * k,
         .top_logits = out.logits.data() + start * k,
         .hidden = hidden != nullptr ? hidden + static_cast<int64_t>(start) * n_embd : nullptr});
    EXPECT_TRUE(s.ok()) << s.error().message();
    start += n;
  }
  return out;
}

// max |got − want| over max |want| (infinite if a difference is NaN).
inline float relative_error(std::span<const float> got, std::span<const float> want) {
  float max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(want[i]));
    max_diff = std::max(max_diff, std::fabs(got[i] - want[i]));
  }
  return std::isnan(max_diff) ? INFINITY : max_diff / max_abs;
}

// relative_error of each position's row of logits.
inline std::vector<float> errors_by_position(const std::vector<float>& got,
                                             const std::vector<float>& want, int n_vocab) {
  std::vector<float> e(want.size() / n_vocab);
  for (size_t p = 0; p < e.size(); ++p)
    e[p] = relative_error(std::span(got).subspan(p * n_vocab, n_vocab),
                          std::span(want).subspan(p * n_vocab, n_vocab));
  return e;
}

}  // namespace testing_util

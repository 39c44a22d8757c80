// Engine loading and token evaluation in micro-batches.
#include "engine/engine.h"

#include <algorithm>

#include "kernels/ref/ref.h"

namespace engine {

util::Result<std::unique_ptr<Engine>> Engine::load(const EngineOptions& options) {
  std::unique_ptr<Engine> e(new Engine());
  e->options_ = options;
  HR_ASSIGN_OR_RETURN(e->file_, gguf::File::open(options.model_path));
  HR_ASSIGN_OR_RETURN(e->spec_, model::spec_from_gguf(e->file_));
  e->backend_ = std::make_unique<kernels::ref::RefBackend>();
  const int n_ctx = options.n_ctx > 0 ? options.n_ctx : std::min(e->spec_.n_ctx_train, 4096);
  const int n_ubatch = std::max(1, std::min(options.n_ubatch, n_ctx));
  e->options_.n_ubatch = n_ubatch;
  HR_ASSIGN_OR_RETURN(e->model_, model::load_model(e->file_, e->spec_, *e->backend_, {.max_batch = n_ubatch}));
  HR_ASSIGN_OR_RETURN(e->cache_, kv::Cache::create(model::kv_layers(e->spec_),
                                                   {.n_ctx = n_ctx, .n_ubatch = n_ubatch, .n_slots = options.n_slots,
                                                    .k_type = options.k_type, .v_type = options.v_type}));
  return e;
}

util::Status Engine::eval(int slot, std::span<const int32_t> ids, int n_past, bool all_logits, bool one_by_one,
                          std::vector<float>& logits) {
  const int n = static_cast<int>(ids.size());
  const int n_vocab = spec_.n_vocab;
  if (n_past + n > n_ctx()) {
    return util::errorf("{} tokens do not fit the context of {} ({} already held) — raise --ctx or shorten the "
                        "prompt", n, n_ctx(), n_past);
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= n_vocab) return util::errorf("token id {} is outside the vocabulary (0..{})", id, n_vocab - 1);
  }
  if (!cache_.reserve(slot, n_past + n)) {
    return util::errorf("the KV cache has no room for {} more positions in slot {}", n, slot);
  }
  logits.resize(static_cast<size_t>(all_logits ? n : 1) * n_vocab);
  const int step = one_by_one ? 1 : options_.n_ubatch;
  std::vector<int32_t> pos(step), slots(step, slot);
  std::vector<uint8_t> output(step, 1);
  for (int start = 0; start < n; start += step) {
    const int m = std::min(step, n - start);
    for (int i = 0; i < m; ++i) pos[i] = n_past + start + i;
    model::Batch batch{.tokens = ids.subspan(start, m), .pos = std::span(pos).first(m),
                       .slot = std::span(slots).first(m),
                       .output = all_logits ? std::span<const uint8_t>(output).first(m) : std::span<const uint8_t>()};
    float* out = all_logits ? logits.data() + static_cast<size_t>(start) * n_vocab : logits.data();
    HR_TRY(model_->forward(batch, cache_, out));
  }
  return {};
}

}  // namespace engine

// Engine loading from a plan, token evaluation in micro-batches, and plan verification.
#include "engine/engine.h"

#include <algorithm>

#include "kernels/ref/ref.h"
#include "util/memory.h"
#include "util/units.h"

namespace engine {

util::Result<std::unique_ptr<Engine>> Engine::load(const EngineOptions& options) {
  const uint64_t rss_before = util::process_rss();
  HR_ASSIGN_OR_RETURN(gguf::File opened, gguf::File::open(options.model_path));
  auto file = std::make_shared<gguf::File>(std::move(opened));
  HR_ASSIGN_OR_RETURN(model::Spec spec, model::spec_from_gguf(*file));
  HR_ASSIGN_OR_RETURN(auto devices, plan::detect_devices(options.devices));
  plan::Request r;
  r.n_ctx = options.n_ctx > 0 ? options.n_ctx : std::min(spec.n_ctx_train, 4096);
  r.n_ubatch = options.n_ubatch;
  r.n_slots = options.n_slots;
  r.k_type = options.k_type;
  r.v_type = options.v_type;
  HR_ASSIGN_OR_RETURN(plan::Plan p, plan::plan_with_fit({*file, spec, devices}, r, options.fit));
  if (!p.fits) return util::Error(p.refusal());
  HR_ASSIGN_OR_RETURN(auto engine, create(std::move(file), std::move(spec), std::move(p)));
  engine->rss_before_load_ = rss_before;
  return engine;
}

util::Result<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<gguf::File> file, model::Spec spec,
                                                     plan::Plan plan) {
  std::unique_ptr<Engine> e(new Engine());
  e->rss_before_load_ = util::process_rss();
  e->file_ = std::move(file);
  e->spec_ = std::move(spec);
  e->plan_ = std::move(plan);
  e->backend_ = std::make_unique<kernels::ref::RefBackend>();
  HR_ASSIGN_OR_RETURN(e->model_, model::load_model(*e->file_, e->spec_, *e->backend_, {.max_batch = e->n_ubatch()}));
  HR_ASSIGN_OR_RETURN(e->cache_, kv::Cache::create(model::kv_layers(e->spec_), e->plan_.kv_config));
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
  const int step = one_by_one ? 1 : n_ubatch();
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

Verification Engine::verify() const {
  Verification v;
  // Weights: bound straight into the file mapping; resident = the mapped pages of used tensors.
  MemoryCheck weights{.name = "weights", .planned = plan_.bytes_of(plan::ItemKind::kWeights)};
  const plan::Inventory inv = plan::inventory(*file_, spec_);
  for (const auto& w : inv.weights) {
    if (!w.used) continue;
    const auto* t = file_->find_tensor(w.name);
    weights.allocated += t->n_bytes;
    weights.resident += util::resident_bytes(t->data.data(), t->data.size());
  }
  MemoryCheck kv{.name = "kv cache", .planned = plan_.bytes_of(plan::ItemKind::kKvCache),
                 .allocated = cache_.bytes_allocated(), .resident = cache_.bytes_resident()};
  MemoryCheck act{.name = "activations", .planned = plan_.bytes_of(plan::ItemKind::kActivations),
                  .allocated = model_->workspace_bytes(), .resident = model_->workspace_bytes()};
  v.classes = {weights, kv, act};
  for (const auto& c : v.classes) {
    v.planned_total += c.planned;
    v.allocated_total += c.allocated;
  }
  v.rss_before_load = rss_before_load_;
  v.rss_now = util::process_rss();
  return v;
}

std::string Verification::format() const {
  std::string out = fmt::format("{:<14} {:>12} {:>12} {:>12} {:>9}\n", "class", "planned", "allocated", "resident",
                                "alloc/plan");
  for (const auto& c : classes) {
    out += fmt::format("{:<14} {:>12} {:>12} {:>12} {:>8.2f}%\n", c.name, util::format_bytes(c.planned),
                       util::format_bytes(c.allocated), util::format_bytes(c.resident),
                       c.planned ? 100.0 * c.allocated / c.planned : 100.0);
  }
  out += fmt::format("process RSS grew {} since loading began (planned total {})\n", util::format_bytes(rss_growth()),
                     util::format_bytes(planned_total));
  return out;
}

}  // namespace engine

// Engine loading from a plan, token evaluation in micro-batches, and plan verification.
#include "engine/engine.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/gpu.h"
#include "kernels/cpu/backend.h"
#include "kernels/ref/ref.h"
#include "util/memory.h"
#include "util/units.h"

namespace engine {

namespace {

// A plan that uses a GPU runs as planned — the whole model there, or split with the CPU
// (model/lanes.h) — except for a what-if GPU (--assume-gpu), which runs only when a backend for it
// is given (tests).
util::Status check_gpu_plan(const plan::Plan& p, bool have_backend) {
  const plan::Device& gpu = p.compute_device();
  if (gpu.simulated && !have_backend) {
    return util::errorf(
        "the plan puts the model on {}, a GPU that is not here (--assume-gpu plans a what-if) — "
        "drop --assume-gpu to run",
        gpu.name);
  }
  return {};
}

}  // namespace

util::Result<std::unique_ptr<Engine>> Engine::load(const EngineOptions& options) {
  util::reset_peak_rss();  // so verify()'s peak covers this engine's life, not what ran before
  const uint64_t rss_before = util::process_rss();
  HR_ASSIGN_OR_RETURN(gguf::File opened, gguf::File::open(options.model_path));
  auto file = std::make_shared<gguf::File>(std::move(opened));
  HR_ASSIGN_OR_RETURN(model::Spec spec, model::spec_from_gguf(*file));
  plan::DeviceOptions device_options = options.devices;
  // The scalar reference kernels are a CPU baseline: they never run on a GPU.
  if (!device_options.gpu_backend && !options.reference_kernels)
    device_options.gpu_backend = gpu_backend_check();
  HR_ASSIGN_OR_RETURN(auto devices, plan::detect_devices(device_options));
  plan::Request r;
  r.n_ctx = options.n_ctx > 0 ? options.n_ctx : std::min(spec.n_ctx_train, 4096);
  r.n_ubatch = options.n_ubatch;
  r.n_slots = options.n_slots;
  r.k_type = options.k_type;
  r.v_type = options.v_type;
  r.n_threads = options.n_threads;
  r.reference_kernels = options.reference_kernels;
  r.n_cpu_layers = options.cpu_layers;
  r.ple_on_host = options.ple_on_host;
  r.experts_on_host = options.experts_on_host;
  HR_ASSIGN_OR_RETURN(plan::Plan p, plan::plan_with_fit({*file, spec, devices}, r, options.fit));
  if (!p.fits) return util::Error(p.refusal());
  HR_ASSIGN_OR_RETURN(auto engine,
                      create(std::move(file), std::move(spec), std::move(p), options.gpu_backend));
  engine->rss_before_load_ = rss_before;
  return engine;
}

util::Result<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<gguf::File> file,
                                                     model::Spec spec, plan::Plan plan,
                                                     const GpuBackendFactory& gpu_backend) {
  std::unique_ptr<Engine> e(new Engine());
  e->rss_before_load_ = util::process_rss();
  e->file_ = std::move(file);
  e->spec_ = std::move(spec);
  e->plan_ = std::move(plan);
  const plan::Request& r = e->plan_.request;
  e->pool_ =
      std::make_unique<util::ThreadPool>(r.n_threads > 0 ? r.n_threads : plan::physical_cores());
  const bool on_gpu = e->plan_.uses_gpu();
  auto cpu_backend = [&] {
    return std::make_unique<kernels::cpu::CpuBackend>(*e->pool_, e->n_ubatch(),
                                                      model::max_matmul_cols(e->spec_));
  };
  model::LoadOptions load{.max_batch = e->n_ubatch()};
  int first_gpu_layer = 0;
  if (on_gpu) {
    HR_TRY(check_gpu_plan(e->plan_, static_cast<bool>(gpu_backend)));
    const int index = e->plan_.compute_device().gpu_index;
    HR_ASSIGN_OR_RETURN(e->backend_, gpu_backend ? gpu_backend(index) : make_gpu_backend(index));
    const bool ple_on_host = r.ple_on_host && e->spec_.n_embd_per_layer > 0;
    const bool experts_on_host =
        r.experts_on_host && std::any_of(e->spec_.layers.begin(), e->spec_.layers.end(),
                                         [](const model::LayerSpec& l) { return l.is_moe(); });
    if (r.n_cpu_layers > 0 || ple_on_host || experts_on_host) {
      e->host_backend_ = cpu_backend();
      load.host = e->host_backend_.get();
      load.n_host_layers = r.n_cpu_layers;
      load.ple_on_host = ple_on_host;
      load.experts_on_host = experts_on_host;
      first_gpu_layer = r.n_cpu_layers;
    }
  } else if (r.reference_kernels) {
    e->backend_ = std::make_unique<kernels::ref::RefBackend>();
  } else {
    e->backend_ = cpu_backend();
  }
  HR_ASSIGN_OR_RETURN(e->model_, model::load_model(*e->file_, e->spec_, *e->backend_, load));
  HR_ASSIGN_OR_RETURN(e->cache_,
                      kv::Cache::create(model::kv_layers(e->spec_), e->plan_.kv_config,
                                        on_gpu ? e->backend_.get() : nullptr, first_gpu_layer));
  return e;
}

util::Status Engine::eval(int slot, std::span<const int32_t> ids, int n_past, bool all_logits,
                          bool one_by_one, std::vector<float>& logits) {
  const int n = static_cast<int>(ids.size());
  const int n_vocab = spec_.n_vocab;
  if (n_past + n > n_ctx()) {
    return util::errorf(
        "{} tokens do not fit the context of {} ({} already held) — raise --ctx or shorten the "
        "prompt",
        n, n_ctx(), n_past);
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= n_vocab)
      return util::errorf("token id {} is outside the vocabulary (0..{})", id, n_vocab - 1);
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
    model::Batch batch{.tokens = ids.subspan(start, m),
                       .pos = std::span(pos).first(m),
                       .slot = std::span(slots).first(m),
                       .output = all_logits ? std::span<const uint8_t>(output).first(m)
                                            : std::span<const uint8_t>()};
    float* out = all_logits ? logits.data() + static_cast<size_t>(start) * n_vocab : logits.data();
    HR_TRY(model_->forward(batch, cache_, out));
  }
  return {};
}

Verification Engine::verify() const {
  Verification v;
  // Weights: on a GPU copied into its memory; on the CPU bound straight into the file mapping
  // (resident = the mapped pages of used tensors). A split plan has both.
  MemoryCheck weights{.name = "weights", .planned = plan_.bytes_of(plan::ItemKind::kWeights)};
  weights.allocated = weights.resident = model_->placed_weight_bytes();
  const plan::Inventory inv = plan::inventory(*file_, spec_);
  for (const auto& w : inv.weights) {
    if (!w.used || plan::weight_device(w, plan_.request, plan_.uses_gpu()) != 0) continue;
    const auto* t = file_->find_tensor(w.name);
    weights.allocated += t->n_bytes;
    weights.resident += util::resident_bytes(t->data.data(), t->data.size());
  }
  MemoryCheck kv{.name = "kv cache",
                 .planned = plan_.bytes_of(plan::ItemKind::kKvCache),
                 .allocated = cache_.bytes_allocated(),
                 .resident = cache_.bytes_resident()};
  MemoryCheck act{.name = "activations",
                  .planned = plan_.bytes_of(plan::ItemKind::kActivations),
                  .allocated = model_->workspace_bytes() + backend_->scratch_bytes() +
                               (host_backend_ ? host_backend_->scratch_bytes() : 0)};
  act.resident = act.allocated;
  v.classes = {weights, kv, act};
  for (const auto& c : v.classes) {
    v.planned_total += c.planned;
    v.allocated_total += c.allocated;
  }
  v.rss_before_load = rss_before_load_;
  v.rss_now = util::process_rss();
  v.rss_peak = util::peak_rss();
  return v;
}

std::string Verification::format() const {
  std::string out = fmt::format("{:<14} {:>12} {:>12} {:>12} {:>9}\n", "class", "planned",
                                "allocated", "resident", "alloc/plan");
  for (const auto& c : classes) {
    out += fmt::format("{:<14} {:>12} {:>12} {:>12} {:>8.2f}%\n", c.name,
                       util::format_bytes(c.planned), util::format_bytes(c.allocated),
                       util::format_bytes(c.resident),
                       c.planned ? 100.0 * c.allocated / c.planned : 100.0);
  }
  out += fmt::format("process RSS grew {} since loading began, {} at its peak (planned total {})\n",
                     util::format_bytes(rss_growth()), util::format_bytes(peak_growth()),
                     util::format_bytes(planned_total));
  return out;
}

}  // namespace engine

// Engine loading exactly as its plan places things, and plan verification.
#include "engine/engine.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/gpu.h"
#include "kernels/cpu/backend.h"
#include "kernels/ref/ref.h"
#include "plan/media.h"
#include "util/memory.h"
#include "util/text_wrap.h"
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

// Counts a tensor bound in place in its file's mapping; returns the bytes of it read so far.
uint64_t add_mapped(MemoryCheck& m, const gguf::TensorInfo& t) {
  const uint64_t read = util::mapped_in_bytes(t.data.data(), t.data.size());
  m.allocated += t.n_bytes;
  m.resident += util::resident_bytes(t.data.data(), t.data.size());
  m.in_rss += std::min<uint64_t>(read, t.n_bytes);
  return read;
}

// Hints 2 MiB pages (util::MappedFile::advise_huge_pages) for the weights the CPU reads in place
// whole, every token, before anything reads them: in 4 KiB pages E2B's decode streamed ~10 %
// slower after a cold load (bench/RESULTS.md). Gathered tables stay in 4 KiB pages, so a token's
// row does not bring 2 MiB of the table with it. `plan` places the weights (those it puts on a GPU
// are copied there, not streamed from the mapping); null: the whole file runs on the CPU.
void advise_streamed_weights(const gguf::File& file, const model::Spec& spec,
                             const plan::Plan* plan) {
  const util::MappedFile* mapping = file.mapping();
  if (mapping == nullptr) return;
  for (const auto& w : plan::inventory(file, spec).weights) {
    const bool on_host = plan == nullptr || plan->device_of(w) == 0;
    if (!w.used || w.host_value || w.gathered || !on_host) continue;
    const gguf::TensorInfo* t = file.find_tensor(w.name);
    mapping->advise_huge_pages(static_cast<size_t>(t->data.data() - mapping->bytes().data()),
                               t->n_bytes);
  }
}

}  // namespace

util::Result<Projector> open_projector(const std::string& path) {
  HR_ASSIGN_OR_RETURN(gguf::File opened, gguf::File::open(path));
  Projector p{.file = std::make_shared<gguf::File>(std::move(opened))};
  HR_ASSIGN_OR_RETURN(p.spec, mm::projector_from_gguf(*p.file));
  return p;
}

util::Result<Drafter> open_drafter(const std::string& path) {
  HR_ASSIGN_OR_RETURN(gguf::File opened, gguf::File::open(path));
  Drafter d{.file = std::make_shared<gguf::File>(std::move(opened))};
  HR_ASSIGN_OR_RETURN(auto arch, d.file->get_string("general.architecture"));
  if (arch.value_or("") == model::arch_name(model::Arch::kGemma4Assistant)) {
    HR_ASSIGN_OR_RETURN(d.spec, model::drafter_spec_from_gguf(*d.file));
  } else {
    HR_ASSIGN_OR_RETURN(d.spec, model::spec_from_gguf(*d.file));
  }
  return d;
}

util::Result<std::unique_ptr<Engine>> Engine::load(const EngineOptions& options) {
  util::reset_peak_rss();  // so verify()'s peak covers this engine's life, not what ran before
  const uint64_t rss_before = util::process_rss();
  HR_ASSIGN_OR_RETURN(gguf::File opened, gguf::File::open(options.model_path));
  auto file = std::make_shared<gguf::File>(std::move(opened));
  HR_ASSIGN_OR_RETURN(model::Spec spec, model::spec_from_gguf(*file));
  std::optional<Projector> projector;
  if (!options.mmproj_path.empty()) {
    HR_ASSIGN_OR_RETURN(projector, open_projector(options.mmproj_path));
  }
  std::optional<Drafter> drafter;
  if (!options.draft_model_path.empty()) {
    HR_ASSIGN_OR_RETURN(drafter, open_drafter(options.draft_model_path));
  }
  plan::DeviceOptions device_options = options.devices;
  // The scalar reference kernels are a CPU baseline: they never run on a GPU.
  if (!device_options.gpu_backend && !options.request.reference_kernels)
    device_options.gpu_backend = gpu_backend_check();
  HR_ASSIGN_OR_RETURN(auto devices, plan::detect_devices(device_options));
  plan::Request request = options.request;
  HR_ASSIGN_OR_RETURN(request.lora, adapter_limits(options.adapters, *file, spec, request.lora));
  const plan::PlanInput in{.file = *file,
                           .spec = spec,
                           .devices = std::move(devices),
                           .projector_file = projector ? projector->file.get() : nullptr,
                           .projector = projector ? &projector->spec : nullptr,
                           .drafter_file = drafter ? drafter->file.get() : nullptr,
                           .drafter = drafter ? &drafter->spec : nullptr};
  HR_ASSIGN_OR_RETURN(plan::Plan p, plan::plan_with_fit(in, request, options.fit));
  if (!p.fits) return util::Error(p.refusal());
  HR_ASSIGN_OR_RETURN(auto engine, create(std::move(file), std::move(spec), std::move(p),
                                          {.gpu_backend = options.gpu_backend,
                                           .trace = options.trace,
                                           .projector = std::move(projector),
                                           .drafter = std::move(drafter)}));
  for (const AdapterFile& a : options.adapters) {
    HR_TRY(engine->adapters().load(a.name, a.path, a.scale));
  }
  engine->rss_before_load_ = rss_before;
  return engine;
}

util::Result<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<gguf::File> file,
                                                     model::Spec spec, plan::Plan plan,
                                                     Parts parts) {
  std::unique_ptr<Engine> e(new Engine());
  e->rss_before_load_ = util::process_rss();
  e->file_ = std::move(file);
  e->spec_ = std::move(spec);
  e->plan_ = std::move(plan);
  e->projector_ = std::move(parts.projector);
  e->drafter_ = std::move(parts.drafter);
  const plan::Request& r = e->plan_.request;
  const model::Placement& placement = e->plan_.placement;
  const plan::PlanInput in = e->plan_input();
  e->pool_ =
      std::make_unique<util::ThreadPool>(r.n_threads > 0 ? r.n_threads : plan::physical_cores());
  auto cpu_backend = [&] {
    return std::make_unique<kernels::cpu::CpuBackend>(*e->pool_, e->n_ubatch(),
                                                      plan::cpu_matmul_cols(in, r));
  };
  const GpuBackendFactory& gpu_backend = parts.gpu_backend;
  model::LoadOptions load{.max_batch = e->n_ubatch(),
                          .placement = placement,
                          .trace = std::move(parts.trace),
                          .lora = r.lora,
                          .hidden = plan::model_hands_back_hidden(in)};
  if (placement.main_device != 0) {
    HR_TRY(check_gpu_plan(e->plan_, static_cast<bool>(gpu_backend)));
    const int index = e->plan_.compute_device().gpu_index;
    HR_ASSIGN_OR_RETURN(e->backend_, gpu_backend ? gpu_backend(index) : make_gpu_backend(index));
    if (placement.split()) {
      e->host_backend_ = cpu_backend();
      load.host = e->host_backend_.get();
    }
  } else if (r.reference_kernels) {
    e->backend_ = std::make_unique<kernels::ref::RefBackend>();
  } else {
    e->backend_ = cpu_backend();
  }
  advise_streamed_weights(*e->file_, e->spec_, &e->plan_);
  HR_ASSIGN_OR_RETURN(e->model_, model::load_model(*e->file_, e->spec_, *e->backend_, load));
  e->adapters_ = std::make_unique<Adapters>(*e->model_, *e->file_, e->spec_, r.lora);
  HR_ASSIGN_OR_RETURN(e->cache_,
                      kv::Cache::create(model::kv_layers(e->spec_), e->plan_.kv_config,
                                        placement.main_device != 0 ? e->backend_.get() : nullptr,
                                        placement.layer_device));
  HR_TRY(e->load_encoders());
  // A drafter runs where the plan put it (plan::add_drafter): where the model computes, beside the
  // cache an assistant reads.
  if (e->drafter_ && e->backend_->host_memory()) {
    advise_streamed_weights(*e->drafter_->file, e->drafter_->spec, nullptr);
  }
  if (e->drafter_ && e->drafter_->spec.arch == model::Arch::kGemma4Assistant) {
    HR_ASSIGN_OR_RETURN(e->assistant_,
                        model::load_assistant(*e->drafter_->file, e->drafter_->spec, *e->file_,
                                              e->spec_, *e->backend_, plan::drafter_rows(r)));
  } else if (e->drafter_) {
    HR_ASSIGN_OR_RETURN(e->draft_model_,
                        DraftModel::load(*e->drafter_->file, e->drafter_->spec, *e->backend_, r));
  }
  return e;
}

plan::PlanInput Engine::plan_input() const {
  return {.file = *file_,
          .spec = spec_,
          .projector_file = projector_ ? projector_->file.get() : nullptr,
          .projector = projector_ ? &projector_->spec : nullptr,
          .drafter_file = drafter_ ? drafter_->file.get() : nullptr,
          .drafter = drafter_ ? &drafter_->spec : nullptr};
}

// The encoders as the plan prices them (plan/media.cpp): vision where the layers compute, audio on
// the host — beside a GPU on a CPU backend of its own, sized for the encoders' matrix products.
util::Status Engine::load_encoders() {
  const plan::Request& r = plan_.request;
  const mm::MediaLimits limits = plan::media_limits(r);
  if (!projector_ || (limits.image_tokens <= 0 && limits.audio_seconds <= 0)) return {};
  HR_TRY(mm::check_projector_fits(projector_->spec, spec_, file_->name()));
  kernels::Backend* audio_ops = backend_.get();
  if (limits.audio_seconds > 0 && !backend_->host_memory()) {
    audio_backend_ = std::make_unique<kernels::cpu::CpuBackend>(
        *pool_, n_ubatch(), plan::media_matmul_cols(plan_input(), r));
    audio_ops = audio_backend_.get();
  }
  HR_ASSIGN_OR_RETURN(encoders_, mm::Encoders::load(*projector_->file, projector_->spec, limits,
                                                    *backend_, *audio_ops));
  media_rows_.assign(
      static_cast<size_t>(plan::media_embedding_rows(plan_input(), r)) * spec_.n_embd, 0.0f);
  return {};
}

util::Status Engine::takes(mm::MediaKind kind) const {
  const bool image = kind == mm::MediaKind::kImage;
  if (encoders_ &&
      (image ? encoders_->limits().image_tokens > 0 : encoders_->limits().audio_seconds > 0))
    return {};
  return util::errorf(
      "this model was loaded without {} input — start it with --mmproj and a projector that has {} "
      "encoder{}",
      mm::media_kind_name(kind), image ? "an image" : "an audio",
      encoders_ ? (image ? " (and --image-tokens above 0)" : " (and --audio-seconds above 0)")
                : "");
}

// Projector weights the encoders read in place from the file mapping (those on a host backend).
MemoryCheck Engine::mapped_encoder_weights() const {
  MemoryCheck m;
  if (!encoders_) return m;
  const mm::MediaLimits& limits = encoders_->limits();
  for (const auto& t : projector_->file->tensors()) {
    const bool mapped = (mm::held_by_encoder(t, mm::Tower::kVision) && limits.image_tokens > 0 &&
                         backend_->host_memory()) ||
                        (mm::held_by_encoder(t, mm::Tower::kAudio) && limits.audio_seconds > 0);
    if (mapped) add_mapped(m, t);
  }
  return m;
}

Verification Engine::verify() const {
  Verification v;
  v.uses_gpu = plan_.uses_gpu();
  const bool host_only = !v.uses_gpu;
  // Weights: on a GPU copied into its memory; on the CPU bound straight into the file mapping
  // (resident = the mapped pages of used tensors). A split plan has both.
  MemoryCheck weights{.name = "weights", .planned = plan_.bytes_of(plan::ItemKind::kWeights)};
  // Placed weights and LoRA slots: allocated when loaded, held in full (a host lane's slots only
  // once touched, but the plan holds them whole).
  weights.allocated = weights.resident = model_->placed_weight_bytes() + model_->lora_pool_bytes();
  weights.in_rss = host_only ? weights.allocated : 0;
  const plan::Inventory inv = plan::inventory(*file_, spec_);
  for (const auto& w : inv.weights) {
    if (!w.used || plan_.device_of(w) != 0) continue;
    const auto* t = file_->find_tensor(w.name);
    const uint64_t read = add_mapped(weights, *t);
    if (read > 0 && read < t->n_bytes) v.partly_read.push_back({w.name, t->n_bytes, read});
  }
  std::sort(v.partly_read.begin(), v.partly_read.end(),
            [](const auto& a, const auto& b) { return a.bytes - a.read > b.bytes - b.read; });
  if (v.partly_read.size() > 3) v.partly_read.resize(3);
  // The encoders' weights: placed in a GPU's memory, or read from the projector's mapping.
  const MemoryCheck mapped = mapped_encoder_weights();
  weights.allocated += mapped.allocated + (encoders_ ? encoders_->placed_weight_bytes() : 0);
  weights.resident += mapped.resident + (encoders_ ? encoders_->placed_weight_bytes() : 0);
  weights.in_rss += mapped.in_rss + (encoders_ && host_only ? encoders_->placed_weight_bytes() : 0);
  // The drafter's weights: on a GPU placed in its memory but for its host values
  // (plan::add_drafter); otherwise its whole file's mapping.
  const size_t drafter_placed = draft_model_ ? draft_model_->placed_weight_bytes()
                                : assistant_ ? assistant_->placed_weight_bytes()
                                             : 0;
  if (drafter_placed > 0) {
    weights.allocated += drafter_placed;
    weights.resident += drafter_placed;
    for (const auto& w : plan::inventory(*drafter_->file, drafter_->spec).weights) {
      if (w.used && w.host_value) add_mapped(weights, *drafter_->file->find_tensor(w.name));
    }
  } else if (drafter_) {
    for (const auto& t : drafter_->file->tensors()) add_mapped(weights, t);
  }
  uint64_t kv_on_host = 0;
  for (const auto& item : plan_.items)
    kv_on_host += item.kind == plan::ItemKind::kKvCache && item.device == 0 ? item.bytes : 0;
  MemoryCheck kv{.name = "kv cache",
                 .planned = plan_.bytes_of(plan::ItemKind::kKvCache),
                 .allocated = cache_.bytes_allocated() +
                              (draft_model_ ? draft_model_->cache().bytes_allocated() : 0),
                 .resident = cache_.bytes_resident() +
                             (draft_model_ ? draft_model_->cache().bytes_resident() : 0)};
  kv.in_rss = kv_on_host == kv.planned ? kv.resident : 0;  // anonymous memory: resident = touched
  MemoryCheck act{.name = "activations",
                  .planned = plan_.bytes_of(plan::ItemKind::kActivations),
                  .allocated = model_->workspace_bytes() + model_->staging_bytes() +
                               backend_->scratch_bytes() +
                               (host_backend_ ? host_backend_->scratch_bytes() : 0) +
                               (encoders_ ? encoders_->workspace_bytes() : 0) +
                               (assistant_ ? assistant_->workspace_bytes() : 0) +
                               (draft_model_ ? draft_model_->workspace_bytes() : 0) +
                               (audio_backend_ ? audio_backend_->scratch_bytes() : 0)};
  act.resident = act.allocated;
  act.in_rss = host_only ? act.allocated : 0;
  v.classes = {weights, kv, act};
  if (encoders_) {
    MemoryCheck media{.name = "media rows",
                      .allocated = media_rows_.size() * sizeof(float),
                      .resident = media_rows_.size() * sizeof(float),
                      .in_rss = media_rows_.size() * sizeof(float)};
    for (const auto& item : plan_.items)
      media.planned += item.name == plan::kMediaEmbeddingsItem ? item.bytes : 0;
    v.classes.push_back(media);
  }
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
  using util::format_bytes;
  std::string out = fmt::format("{:<14} {:>12} {:>12} {:>12} {:>12} {:>9}\n", "class", "planned",
                                "allocated", "resident", "in RSS", "alloc/plan");
  for (const auto& c : classes) {
    out += fmt::format("{:<14} {:>12} {:>12} {:>12} {:>12} {:>8.2f}%\n", c.name,
                       format_bytes(c.planned), format_bytes(c.allocated), format_bytes(c.resident),
                       format_bytes(c.in_rss), c.planned ? 100.0 * c.allocated / c.planned : 100.0);
  }
  out += fmt::format("process RSS grew {} since loading began, {} at its peak; planned total {}\n",
                     format_bytes(rss_growth()), format_bytes(peak_growth()),
                     format_bytes(planned_total));
  // Why the growth is not the planned total: each class's bytes outside the RSS, then the rest.
  constexpr uint64_t kNoise = 1 << 20;
  constexpr size_t kWidth = 100;
  auto line = [&](const std::string& text) { out += util::wrap(text, kWidth, "  ", "    "); };
  uint64_t in_rss = 0;
  for (const auto& c : classes) {
    in_rss += c.in_rss;
    if (c.allocated != c.planned) {
      line(fmt::format("{}: allocated {} than planned by {} — the plan is wrong here: report it",
                       c.name, c.allocated > c.planned ? "more" : "less",
                       format_bytes(c.allocated > c.planned ? c.allocated - c.planned
                                                            : c.planned - c.allocated)));
    }
    if (c.allocated < c.in_rss + kNoise) continue;
    const uint64_t outside = c.allocated - c.in_rss;
    if (c.name == "weights") {
      std::string text = fmt::format(
          "weights: {} of them not in RSS — {}a mapped file's pages join the RSS when this "
          "process first reads them",
          format_bytes(outside), uses_gpu ? "those on a GPU are in its memory; " : "");
      for (size_t i = 0; i < partly_read.size(); ++i) {
        const PartlyRead& t = partly_read[i];
        text += fmt::format("{}{} ({} of {})", i == 0 ? "; read in part: " : ", ", t.name,
                            format_bytes(t.read), format_bytes(t.bytes));
      }
      if (!partly_read.empty()) text += ", as a table indexed by token is read: a row per token";
      line(text);
    } else if (c.resident < c.allocated) {
      line(
          fmt::format("{}: {} not yet written — its pages join the RSS as they are first written "
                      "(the KV cache's as the context fills)",
                      c.name, format_bytes(c.allocated - c.resident)));
    } else {
      line(fmt::format("{}: {} in GPU memory, not in RSS", c.name, format_bytes(outside)));
    }
  }
  const int64_t other = static_cast<int64_t>(rss_growth()) - static_cast<int64_t>(in_rss);
  line(
      fmt::format("outside the plan's classes: {}{} (code pages, libc arenas, thread stacks, the "
                  "tokenizer: not priced by the plan)",
                  other < 0 ? "-" : "+", format_bytes(static_cast<uint64_t>(std::abs(other)))));
  return out;
}

double Engine::drafter_pass_seconds() const {
  const StepCost* passes = assistant_ != nullptr     ? &assistant_steps_
                           : draft_model_ != nullptr ? &draft_model_->pass_cost()
                                                     : nullptr;
  // Priced from a few passes on: one slow pass (another process, a page fault) alone would stop
  // a sequence's drafting, and with it the passes that would correct the figure.
  constexpr int kPassesToPrice = 4;
  return passes != nullptr && passes->passes() >= kPassesToPrice ? passes->seconds(1) : 0;
}

}  // namespace engine

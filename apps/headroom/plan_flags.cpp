// Shared planning flags: open the model (or synthesize its header), detect devices, plan.
#include "plan_flags.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "commands.h"
#include "engine/gpu.h"
#include "mm/audio.h"
#include "mm/image_preprocess.h"
#include "model/synth.h"
#include "util/log.h"
#include "util/units.h"

namespace cli {

void add_plan_flags(CLI::App* cmd, PlanFlags& f, bool with_shape, int default_slots,
                    bool lora_slots) {
  f.slots = default_slots;
  cmd->add_option("-m,--model", f.model, "GGUF model (default: the shipped stories260K)");
  if (with_shape) {
    cmd->add_option("--shape", f.shape,
                    "Plan a model shape without a file, e.g. gemma4-e2b, gemma4-26b-a4b, llama-8b");
    cmd->add_option("--quant", f.quant,
                    "Weight type for --shape: f16, q8_0, q4_k_m, … (default q4_k_m)");
  }
  cmd->add_option("-c,--ctx", f.ctx,
                  "Context length in tokens (default: the model's, at most 4096)");
  cmd->add_option("--kv-type-k", f.kv_type_k, "KV cache type for K: f16, f32, q8_0, q4_0")
      ->capture_default_str();
  cmd->add_option("--kv-type-v", f.kv_type_v, "KV cache type for V: f16, f32, q8_0, q4_0")
      ->capture_default_str();
  cmd->add_option("--slots", f.slots,
                  "Sequences running at once (parallel requests); a cap, not a memory reservation")
      ->capture_default_str();
  cmd->add_option("--kv-budget", f.kv_budget,
                  "Bytes of KV cache, e.g. 2G (default: what the device budget leaves after "
                  "weights and activations, at most --slots full contexts); sequences take blocks "
                  "as they grow and the youngest is preempted when it runs out");
  cmd->add_flag("--no-prefix-cache", f.no_prefix_cache,
                "Do not keep computed KV blocks for reuse by later requests with the same prefix");
  cmd->add_option("--ubatch", f.ubatch, "Micro-batch size in tokens (prefill chunk)")
      ->capture_default_str();
  cmd->add_option("--draft,--draft-max", f.draft,
                  "Speculative decoding: draft up to N tokens per step by prompt lookup (the "
                  "tokens that followed the last earlier occurrence of the latest n-gram), or "
                  "with --draft-model, and verify them in one pass, fewer or none while drafts do "
                  "not pay for their measured cost; the output is unchanged (default 0: off; 3 "
                  "with --draft-model)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--draft-model", f.draft_model,
                  "Speculative decoding with a drafter GGUF, for every request that does not "
                  "turn drafting off: a Gemma 4 assistant (MTP) drafter in the form llama.cpp "
                  "reads (it drafts from the model's own hidden state and KV cache: on the CPU, "
                  "or on a GPU that holds the whole model), or a small model with the same "
                  "vocabulary (its own KV cache, like llama.cpp's -md; it runs where the model "
                  "computes, a GPU included)");
  cmd->add_option("--cpu-mem", f.cpu_mem,
                  "RAM budget, e.g. 8G (default: available RAM minus a margin)");
  cmd->add_option("--gpu-mem", f.gpu_mem,
                  "GPU memory budget, e.g. 6G (default: the driver's free memory minus a margin)");
  cmd->add_option("--assume-gpu", f.assume_gpu,
                  "Plan for a GPU that is not here: MEM[@GB/s], e.g. 8G@300");
  cmd->add_option("--cpu-layers", f.cpu_layers,
                  "With a GPU: run the first N layers on the CPU (weights and KV cache in RAM)");
  cmd->add_flag(
      "--ple-on-host", f.ple_on_host,
      "With a GPU: keep Gemma 4's per-layer embedding table on the host (looked up there)");
  cmd->add_flag("--experts-on-host", f.experts_on_host,
                "With a GPU: keep MoE routers and experts on the host (they run on the CPU)");
  cmd->add_flag("--fit", f.fit,
                "If the request does not fit, apply the fastest combination of KV types, context, "
                "slots and placement that does (and say so); a smaller weight type is only "
                "listed, as it needs a re-quantized file");
  cmd->add_option("--mmproj", f.mmproj,
                  "Gemma 4 projector GGUF (llama.cpp's mmproj): loads its image and audio "
                  "encoders beside the model, as planned");
  cmd->add_option("--image-tokens", f.image_tokens,
                  "With --mmproj: soft tokens per image, 70, 140, 280, 560 or 1120 (default 280, "
                  "the model's processor's; more reads small text better); the largest a run "
                  "takes, 0 for no images");
  cmd->add_option("--audio-seconds", f.audio_seconds,
                  "With --mmproj: the longest audio clip, at most 30 (default 30 when the "
                  "projector has an audio encoder); 0 for no audio");
  add_kernel_flags(cmd, f.kernels);
  add_lora_flags(cmd, f.lora, lora_slots);
}

void add_kernel_flags(CLI::App* cmd, KernelFlags& f) {
  cmd->add_option("-t,--threads", f.threads, "CPU threads (default: physical cores)");
  cmd->add_option(
         "--backend", f.backend,
         "Kernels: auto (the GPU when this build and machine allow, else cpu), cuda (the GPU, "
         "or an error), cpu (SIMD and threads) or ref (scalar reference, a CPU baseline)")
      ->check(CLI::IsMember({"auto", "cuda", "cpu", "ref"}))
      ->capture_default_str();
}

std::function<std::string(int)> KernelFlags::gpu_backend() const {
  if (backend == "cpu" || backend == "ref") {
    return [b = backend](int) { return fmt::format("--backend {} runs on the CPU", b); };
  }
  return engine::gpu_backend_check();
}

namespace {

// Drafts per step with --draft-model and no --draft: llama.cpp's default for its MTP drafters.
constexpr int kDefaultModelDrafts = 3;

util::Result<tensor::DType> kv_type(const std::string& name, const char* flag) {
  auto t = gguf::tensor_type_from_name(name);
  if (!t || !kv::is_cache_type(*t)) {
    return util::errorf("{} '{}': use f16, f32, q8_0 or q4_0", flag, name);
  }
  return *t;
}

// --shape ARCH-NAME: the header of a synthetic model, written sparse (no weight bytes) to a
// temporary file so the plan reads exactly what a real file of that shape would hold.
util::Result<std::shared_ptr<gguf::File>> open_shape(const std::string& shape,
                                                     const std::string& quant) {
  const auto dash = shape.find('-');
  if (dash == std::string::npos) {
    return util::errorf("--shape '{}': write ARCH-SHAPE, e.g. gemma4-e2b or llama-8b", shape);
  }
  model::SynthOptions o{.arch = shape.substr(0, dash),
                        .shape = shape.substr(dash + 1),
                        .type = quant.empty() ? "q4_k_m" : quant,
                        .no_weights = true};
  HR_ASSIGN_OR_RETURN(gguf::Writer w, model::synth_writer(o));
  const auto path =
      std::filesystem::temp_directory_path() / fmt::format("headroom-shape-{}.gguf", ::getpid());
  HR_TRY(w.write(path.string()));
  auto file = gguf::File::open(path.string());
  std::filesystem::remove(path);  // the mapping stays valid after the name is gone
  if (!file) return std::move(file).error();
  return std::make_shared<gguf::File>(std::move(*file));
}

}  // namespace

namespace {

// --mmproj and the limits its encoders are planned for (defaults: what the projector takes).
util::Status add_projector(const PlanFlags& f, PlannedModel& m, plan::Request& r) {
  if (f.mmproj.empty()) {
    if (f.image_tokens > 0 || f.audio_seconds > 0)
      return util::errorf("--image-tokens and --audio-seconds need --mmproj (a projector file)");
    return {};
  }
  HR_ASSIGN_OR_RETURN(m.projector, engine::open_projector(f.mmproj));
  const mm::ProjectorSpec& p = m.projector->spec;
  r.image_tokens = f.image_tokens >= 0 ? f.image_tokens : p.vision ? mm::kDefaultImageTokens : 0;
  r.audio_seconds = f.audio_seconds >= 0 ? f.audio_seconds : p.audio ? mm::kMaxAudioSeconds : 0;
  return {};
}

}  // namespace

util::Result<PlannedModel> plan_model(const PlanFlags& f) {
  PlannedModel m;
  if (!f.shape.empty()) {
    HR_ASSIGN_OR_RETURN(m.file, open_shape(f.shape, f.quant));
    m.source = fmt::format("shape {} ({})", f.shape, f.quant.empty() ? "q4_k_m" : f.quant);
  } else {
    m.source = f.model.empty() ? default_model_path() : f.model;
    HR_ASSIGN_OR_RETURN(gguf::File file, gguf::File::open(m.source));
    m.file = std::make_shared<gguf::File>(std::move(file));
  }
  HR_ASSIGN_OR_RETURN(m.spec, model::spec_from_gguf(*m.file));

  plan::DeviceOptions d;
  if (!f.cpu_mem.empty()) {
    HR_ASSIGN_OR_RETURN(d.cpu_mem, util::parse_bytes(f.cpu_mem));
  }
  if (!f.gpu_mem.empty()) {
    HR_ASSIGN_OR_RETURN(d.gpu_mem, util::parse_bytes(f.gpu_mem));
  }
  d.assume_gpu = f.assume_gpu;
  d.threads = f.kernels.threads;
  d.gpu_backend = f.kernels.gpu_backend();
  HR_ASSIGN_OR_RETURN(auto devices, plan::detect_devices(d));
  const auto real_gpu = std::find_if(devices.begin(), devices.end(), [](const auto& dev) {
    return dev.kind == plan::DeviceKind::kGpu && !dev.simulated;
  });
  auto placeable_gpu = [&](bool real) {
    return std::any_of(devices.begin(), devices.end(), [&](const auto& dev) {
      return dev.kind == plan::DeviceKind::kGpu && dev.placeable && !(real && dev.simulated);
    });
  };
  const std::string no_gpu =
      real_gpu == devices.end() ? "no GPU is present" : real_gpu->unusable_reason;
  if (f.kernels.backend == "cuda" && !placeable_gpu(true)) {
    return util::errorf("--backend cuda: {} — use --backend auto or cpu", no_gpu);
  }
  if (!f.gpu_mem.empty() && !placeable_gpu(false)) {
    util::log_warn("--gpu-mem {}: {}, so the budget is not used (plan a what-if with --assume-gpu)",
                   f.gpu_mem, no_gpu);
  }

  plan::Request r;
  r.n_ctx = f.ctx;  // 0: the planner's default
  if (!f.kv_budget.empty()) {
    auto budget = util::parse_bytes(f.kv_budget);
    if (!budget) return util::errorf("--kv-budget: {}", budget.error().message());
    r.kv_budget = *budget;
  }
  r.prefix_cache = !f.no_prefix_cache;
  HR_ASSIGN_OR_RETURN(r.k_type, kv_type(f.kv_type_k, "--kv-type-k"));
  HR_ASSIGN_OR_RETURN(r.v_type, kv_type(f.kv_type_v, "--kv-type-v"));
  r.n_slots = f.slots;
  r.n_ubatch = f.ubatch;
  if (f.draft == 0 && !f.draft_model.empty())
    return util::errorf("--draft 0 turns drafting off: drop --draft-model, or give --draft N > 0");
  r.n_draft = f.draft >= 0 ? f.draft : f.draft_model.empty() ? 0 : kDefaultModelDrafts;
  r.n_threads = f.kernels.threads;
  r.reference_kernels = f.kernels.reference();
  r.n_cpu_layers = f.cpu_layers;
  r.ple_on_host = f.ple_on_host;
  r.experts_on_host = f.experts_on_host;
  HR_ASSIGN_OR_RETURN(m.adapters, lora_files(f.lora));
  if (!m.adapters.empty() && !f.shape.empty())
    return util::errorf("--lora is checked against the model's file: give -m, not --shape");
  HR_ASSIGN_OR_RETURN(r.lora, engine::adapter_limits(m.adapters, *m.file, m.spec, f.lora.slots));
  HR_TRY(add_projector(f, m, r));
  if (!f.draft_model.empty()) {
    HR_ASSIGN_OR_RETURN(m.drafter, engine::open_drafter(f.draft_model));
  }
  const plan::PlanInput in{.file = *m.file,
                           .spec = m.spec,
                           .devices = std::move(devices),
                           .projector_file = m.projector ? m.projector->file.get() : nullptr,
                           .projector = m.projector ? &m.projector->spec : nullptr,
                           .drafter_file = m.drafter ? m.drafter->file.get() : nullptr,
                           .drafter = m.drafter ? &m.drafter->spec : nullptr};
  HR_ASSIGN_OR_RETURN(m.plan, plan::plan_with_fit(in, r, f.fit));
  return m;
}

}  // namespace cli

// engine::Engine — a model loaded exactly as its Plan says, with its KV cache and backends; the
// Scheduler (engine/scheduler.h) evaluates tokens on it. It can prove its allocations against the
// plan (verify()).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/adapters.h"
#include "engine/draft.h"
#include "engine/draft_model.h"
#include "gguf/file.h"
#include "kernels/ops.h"
#include "kv/cache.h"
#include "mm/encoders.h"
#include "mm/projector.h"
#include "model/assistant.h"
#include "model/model.h"
#include "model/spec.h"
#include "plan/planner.h"
#include "util/result.h"
#include "util/thread_pool.h"

namespace engine {

// Makes the backend of GPU `index`.
using GpuBackendFactory = std::function<util::Result<std::unique_ptr<kernels::Backend>>(int index)>;

// A projector (--mmproj: Gemma 4's image and audio encoders) loaded beside the text model.
struct Projector {
  std::shared_ptr<gguf::File> file;
  mm::ProjectorSpec spec;
};
// Opens a projector file and reads its encoders' description; errors are one line.
util::Result<Projector> open_projector(const std::string& path);

// A drafter (--draft-model) loaded beside the model: a Gemma 4 assistant drafter
// (model/assistant.h, spec.arch kGemma4Assistant) or a small model of its vocabulary
// (engine/draft_model.h).
struct Drafter {
  std::shared_ptr<gguf::File> file;
  model::Spec spec;
};
util::Result<Drafter> open_drafter(const std::string& path);

// What loading a model needs besides the request the planner answers.
struct EngineOptions {
  std::string model_path;
  // A projector whose encoders the run loads, sized by request.image_tokens and
  // request.audio_seconds (0 leaves a modality off); empty: none.
  std::string mmproj_path;
  std::string draft_model_path;  // a drafter the scheduler drafts with (Drafter); empty: none
  plan::Request request;
  bool fit = false;  // apply the fastest alternative when the request does not fit
  plan::DeviceOptions devices{.probe = false};
  // The backend of GPU `index` (null: this build's, engine/gpu.h). Tests supply an emulated one,
  // which also runs plans for an --assume-gpu what-if.
  GpuBackendFactory gpu_backend;
  model::TraceHook trace;  // sees the forward passes' named intermediates (null: none)
  // LoRA adapters loaded once the model is; the plan gets the slots they need (adapter_limits).
  std::vector<AdapterFile> adapters;
};

// Plan vs. reality for one class of memory.
struct MemoryCheck {
  std::string name;
  uint64_t planned = 0;
  uint64_t allocated = 0;  // what the allocators hold for it
  uint64_t resident = 0;   // of that, pages in RAM now (mincore; a GPU's bytes count whole)
  uint64_t in_rss = 0;     // of that, host pages this process has mapped in: its share of the RSS
};

// A mapped tensor that decoding has read only in part (a table indexed by token).
struct PartlyRead {
  std::string name;
  uint64_t bytes = 0, read = 0;  // its size, and the bytes of it in this process's RSS
};

struct Verification {
  std::vector<MemoryCheck> classes;
  uint64_t planned_total = 0;
  uint64_t allocated_total = 0;
  uint64_t rss_before_load = 0;
  uint64_t rss_now = 0;
  // The process's highest RSS since loading began (see util::reset_peak_rss).
  uint64_t rss_peak = 0;
  bool uses_gpu = false;
  std::vector<PartlyRead> partly_read;  // mapped tensors read in part, most unread bytes first
  uint64_t rss_growth() const { return rss_now > rss_before_load ? rss_now - rss_before_load : 0; }
  uint64_t peak_growth() const {
    return rss_peak > rss_before_load ? rss_peak - rss_before_load : 0;
  }
  // The table, then why the RSS growth differs from the planned total, one line per cause.
  std::string format() const;
};

class Engine {
 public:
  // Opens the model, plans the request, refuses (with the plan's alternatives) if it does not
  // fit, and allocates exactly the plan.
  static util::Result<std::unique_ptr<Engine>> load(const EngineOptions& options);
  // What create() takes besides the model and its plan.
  struct Parts {
    GpuBackendFactory gpu_backend;  // null: this build's (engine/gpu.h)
    model::TraceHook trace;
    std::optional<Projector> projector;  // the one the plan was made with, if any
    std::optional<Drafter> drafter;      // likewise
  };
  static util::Result<std::unique_ptr<Engine>> create(std::shared_ptr<gguf::File> file,
                                                      model::Spec spec, plan::Plan plan,
                                                      Parts parts = {});

  const model::Spec& spec() const { return spec_; }
  const gguf::File& file() const { return *file_; }
  const plan::Plan& plan() const { return plan_; }
  kv::Cache& cache() { return cache_; }
  const kv::Cache& cache() const { return cache_; }
  model::Model& model() { return *model_; }
  // The LoRA adapters it serves (engine/adapters.h).
  Adapters& adapters() { return *adapters_; }
  const Adapters& adapters() const { return *adapters_; }
  int n_ctx() const { return cache_.config().n_ctx; }
  int n_ubatch() const { return plan_.request.n_ubatch; }
  int n_slots() const { return cache_.config().n_slots; }
  // The CPU thread count.
  int n_threads() const { return pool_->size(); }
  // The drafter the plan priced: an assistant drafter (on the CPU, beside the model) or a draft
  // model (where the model computes); null unless it is one of those.
  model::Assistant* assistant() { return assistant_.get(); }
  DraftModel* draft_model() { return draft_model_.get(); }
  // The assistant's steps by rows, timed by the scheduler that runs them (a draft model times its
  // own passes), so that what a draft costs outlives any one scheduler.
  StepCost& assistant_steps() { return assistant_steps_; }
  // One pass of the drafter for a lone sequence, as measured so far: what making one more draft
  // costs (0 before its first few passes, or without an assistant or draft model).
  double drafter_pass_seconds() const;
  // The projector's encoders, sized as planned; null without a projector.
  mm::Encoders* encoders() { return encoders_.get(); }
  const mm::Encoders* encoders() const { return encoders_.get(); }
  // Whether this run takes images (or audio): an error saying how to start one that does if not.
  util::Status takes(mm::MediaKind kind) const;
  // Host rows a micro-batch's media embeddings are encoded into: [n_ubatch][n_embd]; and rows
  // that hold one medium encoded whole, [largest medium's tokens][n_embd], for a micro-batch that
  // takes only its end (plan/media.h, "media embeddings"). Empty without encoders.
  std::span<float> media_rows() {
    return std::span(media_rows_).first(media_rows_.empty() ? 0 : n_ubatch() * spec_.n_embd);
  }
  std::span<float> media_whole() {
    return std::span(media_rows_).subspan(media_rows_.empty() ? 0 : n_ubatch() * spec_.n_embd);
  }

  // Compares what the allocators hold, and which of it is resident, with the plan, per class.
  Verification verify() const;

 private:
  Engine() = default;
  plan::PlanInput plan_input() const;
  util::Status load_encoders();
  MemoryCheck mapped_encoder_weights() const;
  std::shared_ptr<gguf::File> file_;
  model::Spec spec_;
  plan::Plan plan_;
  std::unique_ptr<util::ThreadPool> pool_;
  std::unique_ptr<kernels::Backend> backend_;  // computes the layers (a GPU's, when placed there)
  std::unique_ptr<kernels::Backend> host_backend_;  // split runs: the CPU's, for the host's layers
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<Adapters> adapters_;
  kv::Cache cache_;
  std::optional<Projector> projector_;
  std::optional<Drafter> drafter_;
  std::unique_ptr<model::Assistant> assistant_;
  std::unique_ptr<DraftModel> draft_model_;
  StepCost assistant_steps_;
  // Beside a GPU the audio encoder runs on a CPU backend of its own (its ops compute in host
  // memory); on the CPU it shares backend_.
  std::unique_ptr<kernels::Backend> audio_backend_;
  std::unique_ptr<mm::Encoders> encoders_;
  std::vector<float> media_rows_;
  uint64_t rss_before_load_ = 0;
};

}  // namespace engine

// plan::Plan — where every byte of a run will live, what speed that allows, and, when it does not
// fit, the configurations that would, fastest first (or what alone is too big). The Engine
// allocates exactly this.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "kv/cache.h"
#include "mm/projector.h"
#include "model/lora.h"
#include "model/placement.h"
#include "model/spec.h"
#include "plan/devices.h"
#include "plan/inventory.h"
#include "util/result.h"

namespace plan {

struct Request {
  int n_ctx = 0;  // 0: the model's training context, at most 4096 (default_context)
  tensor::DType k_type = tensor::DType::kF16;
  tensor::DType v_type = tensor::DType::kF16;
  int n_slots = 1;  // sequences running at once; a cap on concurrency, not memory
  int n_ubatch = 512;
  // Bytes of KV cache storage (every group, every device); 0: what the device budgets leave after
  // everything else, at most what n_slots full contexts need (more could only cache prefixes).
  uint64_t kv_budget = 0;
  bool prefix_cache = true;           // keep complete KV blocks for reuse by a later request
  bool logits_all_positions = false;  // logits of every prompt position (logits, kld)
  // Speculative decoding (engine/draft.h): the most tokens a sequence drafts per step, each
  // verified with a row of logits; 0: none.
  int n_draft = 0;
  static constexpr int kMaxDraft = 64;
  int n_threads = 0;               // CPU threads for the kernels (0 = physical cores)
  bool reference_kernels = false;  // the scalar reference backend (a baseline), not the CPU kernels
  // Placement changes (defaults keep everything where it is fastest; --fit may set them).
  int n_cpu_layers = 0;      // with a GPU: the first N layers stay on the CPU (partial offload)
  bool ple_on_host = false;  // with a GPU: Gemma 4's per-layer-embedding table stays on the host
  bool experts_on_host = false;  // with a GPU: MoE expert weights stay on the host
  // Images and audio (a projector, plan/media.h): the budget of the largest image and the longest
  // clip a run takes; 0 takes none.
  int image_tokens = 0;
  double audio_seconds = 0;
  // LoRA adapters (model/lora.h): slots for this many at once, of rank up to this, on the devices
  // of the layers they adapt; none by default.
  model::LoraLimits lora;
  // A what-if only the fit search sets: the weights priced as a file re-quantized to this type
  // would hold them (plan/inventory.h). That file does not exist yet, so no run is made of it.
  std::optional<gguf::TensorType> requantized;
};

// The context a request gets without --ctx: the model's training context, at most 4096.
int default_context(const model::Spec& spec);
// Rows of logits one step computes: one per sequence sampled and one per drafted token it
// verifies, or a whole micro-batch when every prompt position's logits are wanted.
int logit_rows(const Request& r);

enum class ItemKind { kWeights, kKvCache, kActivations, kLogits, kHost };
std::string_view item_kind_name(ItemKind kind);

struct Item {
  std::string name;
  ItemKind kind = ItemKind::kWeights;
  model::TensorClass weight_class = model::TensorClass::kOther;  // for weights
  int device = 0;                                                // index into Plan::devices
  uint64_t bytes = 0;
  uint64_t bytes_per_token = 0;  // read per decoded token at depth 0
};

struct Prediction {
  double tokens_per_second = 0;       // decode of one sequence at depth 0
  double tokens_per_second_full = 0;  // decode with the context full
  uint64_t bytes_per_token = 0;       // weights + KV read per token at depth 0
  uint64_t bytes_per_token_full = 0;
  std::vector<double> seconds_per_device;  // at depth 0
  double transfer_seconds = 0;             // per token, host ↔ GPU
};

struct Alternative {
  std::string change;  // what to change, in words a user can act on
  std::string flags;   // the command-line flags that make the change
  Request request;
  bool automatic = true;         // --fit can apply it (a re-quantized file cannot be made for you)
  double tokens_per_second = 0;  // at depth 0
  double tokens_per_second_full = 0;  // with the context full
};

struct Plan {
  Request request;  // as asked, with the defaults resolved
  std::vector<Device> devices;
  // Where each part computes and keeps its weights and KV cache: what the engine executes.
  model::Placement placement;
  std::vector<Item> items;
  // The KV cache as kv::Cache allocates it: settings, and each group's pool (pool_blocks).
  kv::CacheConfig kv_config;
  std::vector<kv::GroupGeometry> kv_groups;
  uint64_t kv_budget = 0;        // bytes of KV storage the pool was sized to
  std::string kv_budget_source;  // "--kv-budget", or what limited the default
  Prediction prediction;
  bool fits = true;
  std::vector<std::string> problems;      // one per device over budget
  std::vector<Alternative> alternatives;  // when it does not fit: fastest first
  // When no alternative fits: which part alone exceeds which budget, with the numbers.
  std::string nothing_fits;
  std::string applied;  // what --fit changed, if anything
  // Present devices the plan leaves empty (a GPU headroom cannot run on), and what the plan says
  // about them once per reason, e.g. "GPU present (cuda:0 …) but this build runs on the CPU: …".
  std::vector<Device> unused_devices;
  std::vector<std::string> notes;
  // What one medium of the largest planned size costs (with a projector): its tokens hold that
  // many positions of the context and that many bytes of KV cache per sequence.
  struct MediaCost {
    int image_tokens = 0, audio_tokens = 0;
    uint64_t image_kv_bytes = 0, audio_kv_bytes = 0;
  } media;

  uint64_t bytes_on(int device) const;
  uint64_t bytes_of(ItemKind kind) const;
  // Whether the plan places layers on a GPU (devices[1]), and the device that runs the layers:
  // that GPU, else the CPU.
  bool uses_gpu() const { return devices.size() > 1; }
  const Device& compute_device() const { return devices[uses_gpu() ? 1 : 0]; }
  uint64_t weight_bytes(model::TensorClass cls) const;
  // The device a weight tensor lives on, as placed.
  int device_of(const WeightItem& w) const;
  // Positions of full-attention KV the pool holds (all sequences together).
  int kv_positions() const;
  // One line: why it does not fit and the alternatives, for refusals.
  std::string refusal() const;
};

struct PlanInput {
  const gguf::File& file;
  const model::Spec& spec;
  std::vector<Device> devices;  // [0] the CPU; devices that are not placeable are left empty
  // A projector (--mmproj) whose encoders the run loads; null for none.
  const gguf::File* projector_file = nullptr;
  const mm::ProjectorSpec* projector = nullptr;
  // The drafter (--draft-model) the run drafts with; null for none: a Gemma 4 assistant drafter
  // (model/assistant.h; spec.arch kGemma4Assistant) or a small model of the same vocabulary
  // (engine/draft_model.h). An assistant runs on the CPU, its weights in its file's mapping; a
  // draft model runs whole where the model computes.
  const gguf::File* drafter_file = nullptr;
  const model::Spec* drafter = nullptr;
};

// The plan items of a drafter: its weights and its activations; an assistant's rows of hidden
// states the scheduler keeps for it; a draft model's KV cache, its bookkeeping, its logits and, on
// a GPU, its staging.
inline constexpr std::string_view kDrafterWeightsItem = "drafter";
inline constexpr std::string_view kDrafterActivationsItem = "drafter activations";
inline constexpr std::string_view kDrafterStagingItem = "drafter staging (page-locked)";
inline constexpr std::string_view kDraftHiddenItem = "draft hidden states";
inline constexpr std::string_view kDrafterKvItem = "drafter kv cache";
inline constexpr std::string_view kDrafterKvBookkeepingItem = "drafter kv bookkeeping";
inline constexpr std::string_view kDrafterLogitsItem = "drafter logits";
// Rows of one drafter step: a row per drafting sequence, within a micro-batch.
int drafter_rows(const Request& r);
// A draft model's KV cache: every slot at the whole context, the model's micro-batch and KV types,
// no prefix cache (a draft model's cache follows its slot's sequence; nothing is shared).
kv::CacheConfig draft_kv_config(const Request& r);
// Rows of hidden states the scheduler holds for a drafter: each output row of a step, then each
// slot's latest, then a draft step's.
int64_t draft_hidden_rows(const Request& r);
// Whether the model's passes hand back hidden states (model::LoadOptions::hidden): for a Gemma 4
// assistant drafter, which starts from them.
bool model_hands_back_hidden(const PlanInput& in);

// Whether the first n layers can compute on the CPU and the rest on the GPU: no layer reads the
// KV cache of a layer on the other side of the split.
bool keeps_kv_sharing_together(const std::vector<kv::LayerGeometry>& layers, int n);

// The plan for exactly this request (fits or not, with its problems).
util::Result<Plan> make_plan(const PlanInput& input, const Request& request);
// The plan; if it does not fit, the alternatives (plan/fit.cpp: combinations of weight type, KV
// types, context, slots and placement, fastest first) or why nothing fits; with `fit`, the best
// automatic one applied.
util::Result<Plan> plan_with_fit(const PlanInput& input, const Request& request, bool fit);

}  // namespace plan

// Placement, byte accounting and speed prediction (the fit policy is in fit.cpp).
#include "plan/planner.h"

#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cmath>

#include "model/assistant.h"
#include "model/model.h"
#include "plan/media.h"
#include "util/units.h"

namespace plan {
namespace {

uint64_t tokenizer_bytes(const gguf::File& file) {
  uint64_t bytes = 0;
  for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.merges"}) {
    const gguf::Value* v = file.find(key);
    if (!v || !v->is_array() || v->array_type() != gguf::ValueType::kString) continue;
    for (auto s : v->array_strings()) bytes += s.size() + 48;  // the string and its index entries
  }
  if (const gguf::Value* v = file.find("tokenizer.ggml.tokens"))
    bytes += v->array_size() * 8;  // score, type
  return bytes;
}

}  // namespace

bool keeps_kv_sharing_together(const std::vector<kv::LayerGeometry>& layers, int n) {
  return std::none_of(layers.begin(), layers.end(),
                      [&](const kv::LayerGeometry& l) { return (l.il < n) != (l.source < n); });
}

int default_context(const model::Spec& spec) {
  return std::min(spec.n_ctx_train, 4096);
}

int logit_rows(const Request& r) {
  return r.logits_all_positions ? r.n_ubatch : std::min(r.n_slots * (1 + r.n_draft), r.n_ubatch);
}

int drafter_rows(const Request& r) {
  return std::min(r.n_slots, r.n_ubatch);
}

kv::CacheConfig draft_kv_config(const Request& r) {
  return {.n_ctx = r.n_ctx,
          .n_ubatch = r.n_ubatch,
          .n_slots = r.n_slots,
          .k_type = r.k_type,
          .v_type = r.v_type,
          .prefix_cache = false};
}

int64_t draft_hidden_rows(const Request& r) {
  return logit_rows(r) + int64_t{r.n_slots} + drafter_rows(r);
}

bool model_hands_back_hidden(const PlanInput& in) {
  return in.drafter != nullptr && in.drafter->arch == model::Arch::kGemma4Assistant;
}

int Plan::device_of(const WeightItem& w) const {
  if (w.host_value) return 0;
  if (w.name == "per_layer_token_embd.weight") return placement.ple_device;
  if (w.layer < 0) return placement.main_device;
  if (w.cls == model::TensorClass::kExperts) return placement.experts(w.layer);
  return placement.layer(w.layer);
}

int Plan::kv_positions() const {
  for (const auto& g : kv_groups) {
    if (!g.sliding) return g.n_blocks * kv_config.block_cells;
  }
  return 0;
}

std::string_view item_kind_name(ItemKind kind) {
  switch (kind) {
    case ItemKind::kWeights:
      return "weights";
    case ItemKind::kKvCache:
      return "kv cache";
    case ItemKind::kActivations:
      return "activations";
    case ItemKind::kLogits:
      return "logits";
    case ItemKind::kHost:
      return "host";
  }
  return "?";
}

uint64_t Plan::bytes_on(int device) const {
  uint64_t total = 0;
  for (const auto& i : items) total += i.device == device ? i.bytes : 0;
  return total;
}

uint64_t Plan::bytes_of(ItemKind kind) const {
  uint64_t total = 0;
  for (const auto& i : items) total += i.kind == kind ? i.bytes : 0;
  return total;
}

uint64_t Plan::weight_bytes(model::TensorClass cls) const {
  uint64_t total = 0;
  for (const auto& i : items)
    total += i.kind == ItemKind::kWeights && i.weight_class == cls ? i.bytes : 0;
  return total;
}

std::string Plan::refusal() const {
  std::string text = "the request does not fit: ";
  for (size_t i = 0; i < problems.size(); ++i) text += (i ? "; " : "") + problems[i];
  if (alternatives.empty()) return text + " — " + nothing_fits + "; use a smaller model";
  text += " — changes that fit, fastest first:";
  for (size_t i = 0; i < alternatives.size() && i < 5; ++i) {
    const auto& a = alternatives[i];
    text +=
        fmt::format(" ({}) {} [{}] ≈{:.1f} tok/s;", i + 1, a.change, a.flags, a.tokens_per_second);
  }
  return text + " or add --fit to apply the first automatic one";
}

namespace {

// Only placeable devices take bytes; the present GPUs headroom cannot run on are named once per
// reason (usually one: no GPU backend in this build, or no driver).
util::Status choose_devices(Plan& p, const std::vector<Device>& devices) {
  std::vector<std::pair<std::string, std::string>> unused_gpus;  // reason → names
  for (const Device& d : devices) {
    if (d.placeable) {
      p.devices.push_back(d);
      continue;
    }
    p.unused_devices.push_back(d);
    if (d.kind != DeviceKind::kGpu) continue;
    auto same = std::find_if(unused_gpus.begin(), unused_gpus.end(),
                             [&](const auto& u) { return u.first == d.unusable_reason; });
    if (same == unused_gpus.end())
      unused_gpus.emplace_back(d.unusable_reason, d.name);
    else
      same->second += ", " + d.name;
  }
  for (const auto& [reason, names] : unused_gpus) {
    p.notes.push_back(fmt::format("GPU present ({}) but {}, so the plan places nothing on the GPU",
                                  names, reason));
  }
  if (p.devices.empty() || p.devices[0].kind != DeviceKind::kCpu) {
    return util::errorf("plan: the first device must be the CPU");
  }
  return {};
}

// A layer reading another's KV cache must compute where that cache lives: name the nearest
// splits that keep every such pair together.
util::Status check_split(const Request& r, const std::vector<kv::LayerGeometry>& layers,
                         int n_layer) {
  if (r.n_cpu_layers > n_layer) {
    return util::errorf("plan: --cpu-layers {}, but the model has {} layers — use at most {}",
                        r.n_cpu_layers, n_layer, n_layer);
  }
  auto splits = [&](int n) { return keeps_kv_sharing_together(layers, n); };
  if (r.n_cpu_layers <= 0 || splits(r.n_cpu_layers)) return {};
  int below = r.n_cpu_layers, above = r.n_cpu_layers;
  while (below > 0 && !splits(below)) --below;
  while (above < n_layer && !splits(above)) ++above;
  const auto across = std::find_if(layers.begin(), layers.end(), [&](const kv::LayerGeometry& l) {
    return (l.il < r.n_cpu_layers) != (l.source < r.n_cpu_layers);
  });
  return util::errorf(
      "plan: --cpu-layers {} separates layer {} from layer {}, whose KV cache it reads — use "
      "--cpu-layers {} or {}",
      r.n_cpu_layers, across->il, across->source, below, above);
}

// Weights, by class and device.
void add_weights(Plan& p, const Inventory& inv) {
  for (int d = 0; d < static_cast<int>(p.devices.size()); ++d) {
    for (int c = 0; c < model::kTensorClassCount; ++c) {
      Item item{.name = std::string(model::tensor_class_name(static_cast<model::TensorClass>(c))),
                .kind = ItemKind::kWeights,
                .weight_class = static_cast<model::TensorClass>(c),
                .device = d};
      for (const auto& w : inv.weights) {
        if (w.used && w.cls == item.weight_class && p.device_of(w) == d) {
          item.bytes += w.bytes;
          item.bytes_per_token += w.bytes_per_token;
        }
      }
      if (item.bytes > 0) p.items.push_back(item);
    }
  }
}

// Activations for one micro-batch on each device that computes layers: the forward pass's
// workspace (on a GPU with its decode's 8-bit activations and staging areas), plus the CPU
// kernels' activation scratch (matmul converts a micro-batch to 8-bit partner rows;
// kernels::cpu::CpuBackend holds it) and, for a GPU, the page-locked host memory its passes stage
// through. A GPU's kernels hold no scratch of their own. Logits only for the rows a step computes
// them for.
void add_activations(Plan& p, const PlanInput& in) {
  const Request& r = p.request;
  const model::Spec& spec = in.spec;
  const int threads = r.n_threads > 0 ? r.n_threads : physical_cores();
  const uint64_t workspace = model::workspace_bytes(spec, r.n_ubatch, false);
  const int64_t cols = cpu_matmul_cols(in, r);  // the model's or a media encoder's (plan/media.h)
  const uint64_t cpu_scratch =
      r.reference_kernels ? 0 : kernels::cpu::matmul_scratch_bytes(r.n_ubatch, cols, threads);
  const int main = p.placement.main_device;
  if (main != 0) {
    p.items.push_back({.name = "activations",
                       .kind = ItemKind::kActivations,
                       .device = main,
                       .bytes = model::workspace_bytes(spec, r.n_ubatch, true)});
    p.items.push_back(
        {.name = "staging (page-locked)",
         .kind = ItemKind::kActivations,
         .device = 0,
         .bytes = model::staging_bytes(spec, r.n_ubatch, true, model_hands_back_hidden(in))});
  }
  if (main == 0 || p.placement.split()) {
    p.items.push_back({.name = "activations",
                       .kind = ItemKind::kActivations,
                       .device = 0,
                       .bytes = workspace + cpu_scratch});
  }
  p.items.push_back({.name = "logits",
                     .kind = ItemKind::kLogits,
                     .device = 0,
                     // Whole rows, or each row's selection of the most likely (model::Outputs).
                     .bytes = static_cast<uint64_t>(logit_rows(r)) *
                              (spec.n_vocab * sizeof(float) +
                               model::Outputs::kMaxTopK * (sizeof(int32_t) + sizeof(float)))});
}

// A draft model proposes token ids the model reads as its own: the two vocabularies must be one.
util::Status check_same_vocabulary(const gguf::File& draft, const gguf::File& model) {
  const gguf::Value* a = draft.find("tokenizer.ggml.tokens");
  const gguf::Value* b = model.find("tokenizer.ggml.tokens");
  auto strings = [](const gguf::Value* v) {
    return v != nullptr && v->is_array() && v->array_type() == gguf::ValueType::kString;
  };
  if (!strings(a) || !strings(b) || a->array_strings() != b->array_strings()) {
    return util::errorf(
        "plan: the draft model {} does not share the vocabulary of {} ({} and {} tokens, or "
        "different token texts) — draft with a model of the same family and tokenizer",
        draft.name(), model.name(), strings(a) ? a->array_size() : 0,
        strings(b) ? b->array_size() : 0);
  }
  return {};
}

// A drafter's weights, where the model computes — on the CPU its whole file's mapping; beside a GPU
// what its forward pass binds, in the GPU's memory, but for what it reads into host values at load
// (those stay in the mapping) — its activations there (`workspace`) and, beside a GPU, their
// page-locked staging on the host (`staging`).
void add_drafter_memory(Plan& p, const PlanInput& in, uint64_t workspace, uint64_t staging) {
  const int device = p.placement.main_device;
  uint64_t placed = 0, mapped = 0;
  for (const WeightItem& w : inventory(*in.drafter_file, *in.drafter).weights) {
    if (device == 0) {
      mapped += w.bytes;
    } else if (w.used) {
      (w.host_value ? mapped : placed) += w.bytes;
    }
  }
  if (device != 0) {
    p.items.push_back({.name = std::string(kDrafterWeightsItem),
                       .kind = ItemKind::kWeights,
                       .device = device,
                       .bytes = placed});
  }
  if (device == 0 || mapped > 0) {
    p.items.push_back({.name = std::string(kDrafterWeightsItem),
                       .kind = ItemKind::kWeights,
                       .device = 0,
                       .bytes = mapped});
  }
  p.items.push_back({.name = std::string(kDrafterActivationsItem),
                     .kind = ItemKind::kActivations,
                     .device = device,
                     .bytes = workspace});
  if (device != 0) {
    p.items.push_back({.name = std::string(kDrafterStagingItem),
                       .kind = ItemKind::kActivations,
                       .device = 0,
                       .bytes = staging});
  }
}

// A Gemma 4 assistant drafter (model/assistant.h) reads the model's KV cache and hidden state, so
// it computes where the model's layers do (add_drafter_memory), which must be one device; the
// scheduler keeps its rows of hidden states on the host.
util::Status add_assistant(Plan& p, const PlanInput& in) {
  if (auto read = model::assistant_cache_layers(*in.drafter, in.spec); !read) {
    return util::errorf("plan: {}", read.error().message());
  }
  if (p.placement.split()) {
    return util::errorf(
        "plan: a Gemma 4 assistant drafter computes where the model's layers do, and this plan "
        "splits them between the CPU and the GPU — fit the model on one of them, or draft with a "
        "small model of the same vocabulary (--draft-model) or by prompt lookup (--draft alone)");
  }
  const Request& r = p.request;
  const int rows = drafter_rows(r);
  const bool gpu = p.placement.main_device != 0;
  add_drafter_memory(p, in, model::assistant_workspace_bytes(*in.drafter, rows, gpu),
                     model::assistant_staging_bytes(*in.drafter, rows, gpu));
  p.items.push_back(
      {.name = std::string(kDraftHiddenItem),
       .kind = ItemKind::kHost,
       .device = 0,
       .bytes = static_cast<uint64_t>(draft_hidden_rows(r)) * in.spec.n_embd * sizeof(float)});
  return {};
}

// A draft model (engine/draft_model.h) is a model of its own, whole where the model computes: its
// weights, its activations for a micro-batch (it catches up on a prompt in micro-batches), a logits
// row per drafting sequence, and its KV cache (draft_kv_config).
util::Status add_draft_model(Plan& p, const PlanInput& in) {
  HR_TRY(check_same_vocabulary(*in.drafter_file, in.file));
  const Request& r = p.request;
  const model::Spec& spec = *in.drafter;
  const int device = p.placement.main_device;
  add_drafter_memory(p, in, model::workspace_bytes(spec, r.n_ubatch, device != 0),
                     model::staging_bytes(spec, r.n_ubatch, device != 0));
  p.items.push_back(
      {.name = std::string(kDrafterLogitsItem),
       .kind = ItemKind::kLogits,
       .device = 0,
       .bytes = static_cast<uint64_t>(drafter_rows(r)) * spec.n_vocab * sizeof(float)});
  const auto layers = model::kv_layers(spec);
  HR_ASSIGN_OR_RETURN(uint64_t kv, kv::storage_bytes(layers, draft_kv_config(r)));
  HR_ASSIGN_OR_RETURN(uint64_t bookkeeping, kv::bookkeeping_bytes(layers, draft_kv_config(r)));
  p.items.push_back({.name = std::string(kDrafterKvItem),
                     .kind = ItemKind::kKvCache,
                     .device = device,
                     .bytes = kv});
  // Its bookkeeping, and the tokens each slot's cache holds (to know what a sequence kept).
  p.items.push_back({.name = std::string(kDrafterKvBookkeepingItem),
                     .kind = ItemKind::kHost,
                     .device = 0,
                     .bytes = bookkeeping + uint64_t{4} * r.n_slots * r.n_ctx});
  return {};
}

// None of a drafter's weights is read per token of the model: a draft step reads them all once
// for every drafting sequence.
util::Status add_drafter(Plan& p, const PlanInput& in) {
  if (in.drafter == nullptr) return {};
  if (in.drafter->arch != model::Arch::kGemma4Assistant) return add_draft_model(p, in);
  return add_assistant(p, in);
}

// LoRA adapters: each device holds max_loras slots for the layers it computes (model/lora.h),
// and the working memory of the terms beside its activations (the per-token scales' page-locked
// host side with a GPU's staging).
void add_lora(Plan& p, const model::Spec& spec) {
  const model::LoraLimits& l = p.request.lora;
  if (!l.enabled()) return;
  for (int d = 0; d < static_cast<int>(p.devices.size()); ++d) {
    const uint64_t slot = model::lora_slot_bytes(
        spec, l.max_rank, [&](int il) { return p.placement.layer(il) == d; });
    if (slot == 0) continue;
    p.items.push_back({.name = "lora adapters",
                       .kind = ItemKind::kWeights,
                       .device = d,
                       .bytes = slot * l.max_loras});
    const model::LoraWorkspace w = model::lora_workspace_bytes(l, p.request.n_ubatch, d != 0);
    p.items.push_back({.name = "lora activations",
                       .kind = ItemKind::kActivations,
                       .device = d,
                       .bytes = w.ops_bytes});
    if (w.staging_bytes > 0) {
      p.items.push_back({.name = "lora staging (page-locked)",
                         .kind = ItemKind::kActivations,
                         .device = 0,
                         .bytes = w.staging_bytes});
    }
  }
}

// K/V storage bytes per block of each group on device d, and of every group's block on all.
std::vector<uint64_t> block_bytes_on(const Plan& p, const std::vector<kv::LayerGeometry>& layers,
                                     int d) {
  std::vector<uint64_t> out(p.kv_groups.size(), 0);
  const kv::CacheConfig& c = p.kv_config;
  for (const auto& l : layers) {
    if (!l.owns() || p.placement.layer(l.il) != d) continue;
    for (size_t g = 0; g < p.kv_groups.size(); ++g) {
      if (p.kv_groups[g].sliding == l.sliding &&
          p.kv_groups[g].window == (l.sliding ? l.window : 0))
        out[g] += static_cast<uint64_t>(c.block_cells) *
                  (kv::row_bytes(c.k_type, l.kv_dim()) + kv::row_bytes(c.v_type, l.kv_dim()));
    }
  }
  return out;
}

// The full-attention pool's size in blocks: from --kv-budget, else from what each device's
// budget leaves once everything else (sliding rings and bookkeeping included) is placed — at most
// every slot at its full context, at least one context (below that the plan does not fit). Items
// other than the KV cache and its bookkeeping must already be in the plan.
util::Status size_kv_pool(Plan& p, const std::vector<kv::LayerGeometry>& layers) {
  const Request& r = p.request;
  HR_ASSIGN_OR_RETURN(p.kv_groups, kv::plan_groups(layers, p.kv_config));
  const auto full = std::find_if(p.kv_groups.begin(), p.kv_groups.end(),
                                 [](const kv::GroupGeometry& g) { return !g.sliding; });
  if (full == p.kv_groups.end()) {
    p.kv_budget_source = "sliding-window rings only: a ring per slot";
    return {};
  }
  const size_t fg = static_cast<size_t>(full - p.kv_groups.begin());
  const int one_context = full->blocks_per_sequence;
  const int all_slots = one_context * r.n_slots;
  uint64_t sliding_bytes = 0;
  for (const auto& g : p.kv_groups) sliding_bytes += g.sliding ? g.bytes_per_block * g.n_blocks : 0;
  int blocks = all_slots;
  if (r.kv_budget > 0) {
    blocks = r.kv_budget > sliding_bytes
                 ? static_cast<int>(std::min<uint64_t>(
                       (r.kv_budget - sliding_bytes) / full->bytes_per_block, INT32_MAX))
                 : 0;
    p.kv_budget_source = fmt::format("--kv-budget {}", util::format_bytes(r.kv_budget));
    if (blocks < one_context) {
      p.fits = false;
      p.problems.push_back(fmt::format(
          "--kv-budget {} holds {} positions of full-attention KV, less than one context ({}) — "
          "raise it to {} or lower --ctx",
          util::format_bytes(r.kv_budget), blocks * p.kv_config.block_cells, r.n_ctx,
          util::format_bytes(sliding_bytes + one_context * full->bytes_per_block)));
    }
  } else {
    // Bookkeeping grows with the pool: its bytes per block, measured between two pool sizes.
    auto bookkeeping = [&](int n) {
      kv::CacheConfig c = p.kv_config;
      c.pool_blocks.clear();
      for (const auto& g : p.kv_groups) c.pool_blocks.push_back(g.sliding ? g.n_blocks : n);
      return kv::bookkeeping_bytes(layers, c);
    };
    HR_ASSIGN_OR_RETURN(uint64_t bk_one, bookkeeping(one_context));
    HR_ASSIGN_OR_RETURN(uint64_t bk_two, bookkeeping(2 * one_context));
    const uint64_t bk_per_block = (bk_two - bk_one) / one_context;
    const uint64_t bk_fixed = bk_one - bk_per_block * one_context;
    p.kv_budget_source =
        fmt::format("{} slot{} × {} positions", r.n_slots, r.n_slots == 1 ? "" : "s", r.n_ctx);
    for (int d = 0; d < static_cast<int>(p.devices.size()); ++d) {
      const auto per_block = block_bytes_on(p, layers, d);
      uint64_t taken = p.bytes_on(d), block = per_block[fg];
      for (size_t g = 0; g < p.kv_groups.size(); ++g)
        taken += p.kv_groups[g].sliding ? per_block[g] * p.kv_groups[g].n_blocks : 0;
      if (d == 0) {
        taken += bk_fixed;
        block += bk_per_block;
      }
      if (block == 0) continue;
      const uint64_t left =
          p.devices[d].budget_bytes > taken ? p.devices[d].budget_bytes - taken : 0;
      const int fit = static_cast<int>(std::min<uint64_t>(left / block, INT32_MAX));
      if (fit < blocks) {
        blocks = std::max(fit, one_context);  // below one context the budget check refuses
        p.kv_budget_source = fmt::format("what the {} budget leaves", p.devices[d].name);
      }
    }
  }
  blocks = std::max(blocks, one_context);
  p.kv_config.pool_blocks.clear();
  for (const auto& g : p.kv_groups)
    p.kv_config.pool_blocks.push_back(g.sliding ? g.n_blocks : blocks);
  HR_ASSIGN_OR_RETURN(p.kv_groups, kv::plan_groups(layers, p.kv_config));
  p.kv_budget = 0;
  for (const auto& g : p.kv_groups) p.kv_budget += g.bytes_per_block * g.n_blocks;
  if (blocks < all_slots) {
    p.notes.push_back(fmt::format(
        "the KV pool holds {} positions, less than {} slots × {}: sequences take blocks as they "
        "grow, and when the pool runs out the youngest is preempted and resumed later",
        blocks * p.kv_config.block_cells, r.n_slots, r.n_ctx));
  }
  return {};
}

// The KV cache per device, exactly as kv::Cache will allocate it, and its host bookkeeping.
util::Status add_kv(Plan& p, const std::vector<kv::LayerGeometry>& layers) {
  for (int d = 0; d < static_cast<int>(p.devices.size()); ++d) {
    const auto per_block = block_bytes_on(p, layers, d);
    uint64_t kv_bytes = 0;
    for (size_t g = 0; g < p.kv_groups.size(); ++g)
      kv_bytes += per_block[g] * p.kv_groups[g].n_blocks;
    // Shared layers on this device read a source that may live elsewhere; storage counts owners.
    std::vector<kv::LayerGeometry> mine;
    for (const auto& l : layers) {
      if (p.placement.layer(l.il) == d) mine.push_back(l);
    }
    const uint64_t read = kv::read_bytes_per_token(mine, p.kv_config, 0);
    if (kv_bytes > 0 || read > 0) {
      p.items.push_back({.name = "kv cache",
                         .kind = ItemKind::kKvCache,
                         .device = d,
                         .bytes = kv_bytes,
                         .bytes_per_token = read});
    }
  }
  HR_ASSIGN_OR_RETURN(uint64_t bookkeeping, kv::bookkeeping_bytes(layers, p.kv_config));
  p.items.push_back(
      {.name = "kv bookkeeping", .kind = ItemKind::kHost, .device = 0, .bytes = bookkeeping});
  return {};
}

// Decode reads every byte it needs once per token; time = bytes / bandwidth per device, plus the
// activations that cross between host and GPU.
void predict(Plan& p, const model::Spec& spec, const std::vector<kv::LayerGeometry>& layers) {
  const Request& r = p.request;
  p.prediction.seconds_per_device.assign(p.devices.size(), 0.0);
  for (const auto& i : p.items) {
    p.prediction.bytes_per_token += i.bytes_per_token;
    p.prediction.seconds_per_device[i.device] += i.bytes_per_token / p.devices[i.device].bandwidth;
  }
  if (p.uses_gpu()) {
    // What crosses per token (model/lanes.h): with layers on the CPU the residual stream goes
    // there and back, and the per-layer inputs go there once; the per-layer-embedding rows come
    // up from a host table; experts on the host take the router's and their own input down and
    // their sum up, per MoE layer.
    const double x = spec.n_embd * 4.0, ple = 4.0 * spec.n_embd_per_layer * spec.n_layer;
    const double link = p.devices[1].link_bandwidth;
    constexpr double kLatency = 10e-6;  // per copy
    auto copy = [&](double bytes) { return bytes / link + kLatency; };
    double t = 0;
    if (r.n_cpu_layers > 0) t += 2 * copy(x) + (ple > 0 ? copy(ple) : 0);
    if (p.placement.ple_device != p.placement.main_device && ple > 0) t += copy(ple);
    for (const auto& l : spec.layers) {
      if (l.is_moe() && p.placement.experts(l.il) != p.placement.layer(l.il)) t += 3 * copy(x);
    }
    p.prediction.transfer_seconds = t;
  }
  double seconds = p.prediction.transfer_seconds;
  for (double s : p.prediction.seconds_per_device) seconds += s;
  p.prediction.tokens_per_second = seconds > 0 ? 1.0 / seconds : 0;
  // At the full context the KV reads grow; the weights do not.
  const uint64_t kv_full = kv::read_bytes_per_token(layers, p.kv_config, r.n_ctx - 1);
  const uint64_t kv_zero = kv::read_bytes_per_token(layers, p.kv_config, 0);
  p.prediction.bytes_per_token_full = p.prediction.bytes_per_token + (kv_full - kv_zero);
  const double kv_device_bw = p.compute_device().bandwidth;
  p.prediction.tokens_per_second_full = 1.0 / (seconds + (kv_full - kv_zero) / kv_device_bw);
}

void check_budgets(Plan& p) {
  for (int d = 0; d < static_cast<int>(p.devices.size()); ++d) {
    const uint64_t used = p.bytes_on(d);
    if (used > p.devices[d].budget_bytes) {
      p.fits = false;
      p.problems.push_back(fmt::format("{} needs {} but its budget is {}", p.devices[d].name,
                                       util::format_bytes(used),
                                       util::format_bytes(p.devices[d].budget_bytes)));
    }
  }
}

// The request with its defaults resolved.
Request resolved(const Request& r, const model::Spec& spec) {
  Request out = r;
  if (out.n_ctx <= 0) out.n_ctx = default_context(spec);
  out.n_ubatch = std::min(out.n_ubatch, out.n_ctx);
  return out;
}

}  // namespace

util::Result<Plan> make_plan(const PlanInput& in, const Request& request) {
  const model::Spec& spec = in.spec;
  if (in.devices.empty()) return util::errorf("plan: no devices");
  if (request.n_ctx < 0 || request.n_slots <= 0 || request.n_ubatch <= 0) {
    return util::errorf("plan: context {}, slots {} and micro-batch {} must be positive",
                        request.n_ctx, request.n_slots, request.n_ubatch);
  }
  if (request.lora.max_loras < 0 || request.lora.max_rank < 0 ||
      (request.lora.max_loras > 0) != (request.lora.max_rank > 0)) {
    return util::errorf(
        "plan: --max-loras {} and --max-lora-rank {}: both positive (adapter slots) or both 0",
        request.lora.max_loras, request.lora.max_rank);
  }
  Plan p;
  p.request = resolved(request, spec);
  const Request& r = p.request;
  if (r.n_draft < 0 || r.n_draft > Request::kMaxDraft || r.n_draft >= r.n_ubatch) {
    return util::errorf("plan: --draft {}: 0 to {}, and below the micro-batch ({})", r.n_draft,
                        Request::kMaxDraft, r.n_ubatch);
  }
  HR_TRY(choose_devices(p, in.devices));
  HR_TRY(fit_media_batch(in, p));
  const auto layers = model::kv_layers(spec);
  if (p.uses_gpu()) HR_TRY(check_split(r, layers, spec.n_layer));
  p.placement =
      model::place(spec, p.uses_gpu() ? 1 : 0, r.n_cpu_layers, r.ple_on_host, r.experts_on_host);

  add_weights(p, inventory(in.file, spec, r.requantized));
  add_activations(p, in);
  add_lora(p, spec);
  p.items.push_back({.name = "tokenizer",
                     .kind = ItemKind::kHost,
                     .device = 0,
                     .bytes = tokenizer_bytes(in.file)});
  p.items.push_back({.name = "samplers",
                     .kind = ItemKind::kHost,
                     .device = 0,
                     .bytes = static_cast<uint64_t>(r.n_slots) * spec.n_vocab * 16});
  HR_TRY(add_media_items(in, p, r.n_threads > 0 ? r.n_threads : physical_cores()));
  HR_TRY(add_drafter(p, in));
  p.kv_config = {.n_ctx = r.n_ctx,
                 .n_ubatch = r.n_ubatch,
                 .n_slots = r.n_slots,
                 .k_type = r.k_type,
                 .v_type = r.v_type,
                 .prefix_cache = r.prefix_cache};
  HR_TRY(size_kv_pool(p, layers));
  HR_TRY(add_kv(p, layers));
  predict(p, spec, layers);
  check_budgets(p);
  return p;
}

}  // namespace plan

// LoRA adapters: reading and checking the GGUF form, the slots that hold them, and each pass's
// terms (lora.h).
#include "model/lora.h"

#include <algorithm>
#include <charconv>

#include "model/model.h"
#include "tensor/dequantize.h"
#include "tensor/dtype.h"

namespace model {
namespace {

constexpr std::array<std::string_view, kLoraTargets> kTargetTensors = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

// A target of layer l as the forward pass computes it: the product's input and output widths,
// and whether the layer computes that product at all (a KV-shared layer computes no K or V; a
// layer whose V is its raw K has no V projection).
struct TargetShape {
  int64_t n_cols = 0, n_rows = 0;
  bool computed = true;
};

TargetShape target_shape(const Spec& spec, const LayerSpec& l, LoraTarget t) {
  const int64_t H = spec.n_embd;
  switch (t) {
    case LoraTarget::kQ:
      return {H, l.q_dim()};
    case LoraTarget::kK:
      return {H, l.kv_dim(), l.owns_kv()};
    case LoraTarget::kV:
      return {H, l.kv_dim(), l.owns_kv() && l.has_v_proj};
    case LoraTarget::kO:
      return {l.q_dim(), H};
    case LoraTarget::kGate:
    case LoraTarget::kUp:
      return {H, l.n_ff};
    case LoraTarget::kDown:
      return {l.n_ff, H};
  }
  return {};
}

// "blk.N.attn_q.weight" → (N, kQ); nullopt for any other name.
std::optional<std::pair<int, LoraTarget>> parse_target(std::string_view name) {
  if (!name.starts_with("blk.") || !name.ends_with(".weight")) return std::nullopt;
  name.remove_prefix(4);
  name.remove_suffix(7);
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  int il = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + dot, il);
  if (ec != std::errc() || end != name.data() + dot || il < 0) return std::nullopt;
  const std::string_view suffix = name.substr(dot + 1);
  for (int t = 0; t < kLoraTargets; ++t) {
    if (suffix == kTargetTensors[t]) return std::pair{il, static_cast<LoraTarget>(t)};
  }
  return std::nullopt;
}

size_t floats_bytes(int64_t n) {
  return (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64;
}

}  // namespace

std::string lora_base_tensor(int il, LoraTarget target) {
  return fmt::format("blk.{}.{}.weight", il, kTargetTensors[static_cast<int>(target)]);
}

util::Result<LoraAdapter> LoraAdapter::open(const std::string& path, const gguf::File& base,
                                            const Spec& spec) {
  HR_ASSIGN_OR_RETURN(gguf::File opened, gguf::File::open(path));
  LoraAdapter out;
  out.path_ = path;
  out.file_ = std::make_shared<const gguf::File>(std::move(opened));
  const gguf::File& f = *out.file_;
  HR_ASSIGN_OR_RETURN(auto type, f.get_string("general.type"));
  if (type.value_or("") != "adapter") {
    return util::errorf(
        "lora: {} is not an adapter (general.type '{}') — give the base model with -m and "
        "adapters with --lora; convert a PEFT adapter with `headroom convert --lora`",
        path, type.value_or("absent"));
  }
  HR_ASSIGN_OR_RETURN(auto kind, f.get_string("adapter.type"));
  if (kind.value_or("") != "lora") {
    return util::errorf("lora: {} is a '{}' adapter — headroom applies LoRA adapters only", path,
                        kind.value_or("absent"));
  }
  HR_ASSIGN_OR_RETURN(auto arch, f.get_string("general.architecture"));
  if (arch.value_or("") != arch_name(spec.arch)) {
    return util::errorf(
        "lora: {} is an adapter for a {} model, but the base model {} is {} — use an adapter "
        "trained on this model",
        path, arch.value_or("(unnamed)"), base.name(), arch_name(spec.arch));
  }
  HR_ASSIGN_OR_RETURN(auto alpha, f.get_f64("adapter.lora.alpha"));
  out.alpha_ = static_cast<float>(alpha.value_or(0.0));

  // Pair the halves by the base tensor's name, in file order.
  struct Halves {
    std::string base;
    const gguf::TensorInfo *a = nullptr, *b = nullptr;
  };
  std::vector<Halves> halves;
  for (const gguf::TensorInfo& t : f.tensors()) {
    const bool is_a = t.name.ends_with(".lora_a"), is_b = t.name.ends_with(".lora_b");
    if (!is_a && !is_b) {
      return util::errorf(
          "lora: {}: tensor {} is neither a .lora_a nor a .lora_b half — not an adapter headroom "
          "can apply",
          path, t.name);
    }
    const std::string base_name(t.name.substr(0, t.name.size() - 7));
    auto it = std::find_if(halves.begin(), halves.end(),
                           [&](const Halves& h) { return h.base == base_name; });
    if (it == halves.end()) it = halves.insert(halves.end(), Halves{base_name});
    (is_a ? it->a : it->b) = &t;
  }
  if (halves.empty()) return util::errorf("lora: {} holds no lora_a/lora_b tensors", path);

  for (const Halves& h : halves) {
    if (h.a == nullptr || h.b == nullptr) {
      return util::errorf("lora: {}: {}.{} has no {} half — incomplete adapter", path, h.base,
                          h.a ? "lora_a" : "lora_b", h.a ? "lora_b" : "lora_a");
    }
    for (const gguf::TensorInfo* t : {h.a, h.b}) {
      if (t->n_dims != 2 || !tensor::can_dequantize(t->type)) {
        return util::errorf("lora: {}: {} is not a matrix headroom can read ({} dims, type {})",
                            path, t->name, t->n_dims, gguf::tensor_type_name(t->type));
      }
    }
    if (h.a->ne[1] != h.b->ne[0] || h.a->ne[1] == 0) {
      return util::errorf(
          "lora: {}: {}.lora_a has rank {} but {}.lora_b has rank {} — the halves do not match",
          path, h.base, h.a->ne[1], h.base, h.b->ne[0]);
    }
    const auto target = parse_target(h.base);
    if (!target || target->first >= spec.n_layer) {
      if (base.find_tensor(h.base) != nullptr) {
        return util::errorf(
            "lora: {}: {} adapts {}, which headroom does not adapt (q, k, v, output, gate, up and "
            "down projections only)",
            path, h.a->name, h.base);
      }
      return util::errorf(
          "lora: {}: {} adapts {}, which the base model {} does not have — an adapter for another "
          "base model?",
          path, h.a->name, h.base, base.name());
    }
    const auto [il, t] = *target;
    const LayerSpec& l = spec.layers[il];
    const TargetShape shape = target_shape(spec, l, t);
    const bool kv_shared = !l.owns_kv() && (t == LoraTarget::kK || t == LoraTarget::kV);
    if (!shape.computed && !kv_shared) {
      return util::errorf(
          "lora: {}: {} adapts {}, which the base model {} does not have (its V is the raw K "
          "projection) — an adapter for another base model?",
          path, h.a->name, h.base, base.name());
    }
    const int64_t n_cols = static_cast<int64_t>(h.a->ne[0]);
    const int64_t n_rows = static_cast<int64_t>(h.b->ne[1]);
    if (n_cols != shape.n_cols || n_rows != shape.n_rows) {
      return util::errorf(
          "lora: {}: {} maps {} inputs to {} outputs, but the base model's {} maps {} to {} — an "
          "adapter for another base model?",
          path, h.base, n_cols, n_rows, h.base, shape.n_cols, shape.n_rows);
    }
    if (kv_shared) {
      ++out.n_ignored_;  // the layer computes no K or V: see the file comment
      continue;
    }
    const int rank = static_cast<int>(h.a->ne[1]);
    out.pairs_.push_back({il, t, h.a, h.b, rank, n_cols, n_rows});
    out.max_rank_ = std::max(out.max_rank_, rank);
  }
  if (out.pairs_.empty()) {
    return util::errorf(
        "lora: {} changes nothing: each of its {} pairs adapts the k or v of a KV-shared layer, "
        "which computes neither",
        path, out.n_ignored_);
  }
  return out;
}

size_t LoraAdapter::bytes() const {
  size_t total = 0;
  for (const LoraPair& p : pairs_) total += (p.n_cols + p.n_rows) * p.rank * sizeof(float);
  return total;
}

size_t lora_slot_bytes(const Spec& spec, int max_rank, const std::function<bool(int il)>& holds) {
  size_t total = 0;
  for (const LayerSpec& l : spec.layers) {
    if (!holds(l.il)) continue;
    for (int t = 0; t < kLoraTargets; ++t) {
      const TargetShape s = target_shape(spec, l, static_cast<LoraTarget>(t));
      if (s.computed)
        total += floats_bytes(max_rank * s.n_cols) + floats_bytes(max_rank * s.n_rows);
    }
  }
  return total;
}

LoraWorkspace lora_workspace_bytes(const LoraLimits& limits, int max_batch, bool device) {
  if (!limits.enabled()) return {};
  const size_t scales = static_cast<size_t>(limits.max_loras) * max_batch * sizeof(float);
  const size_t scratch = static_cast<size_t>(max_batch) * limits.max_rank * sizeof(float);
  return {.ops_bytes = scratch + scales, .staging_bytes = device ? scales : 0};
}

util::Status LoraBank::init(const Spec& spec, const LoraLimits& limits, int max_batch,
                            std::vector<kernels::Backend*> backends, std::vector<int> lane_of) {
  limits_ = limits;
  max_batch_ = max_batch;
  lane_of_ = std::move(lane_of);
  if (!limits.enabled()) return {};
  const int R = limits.max_rank;
  places_.assign(static_cast<size_t>(spec.n_layer) * kLoraTargets, Place{});
  std::vector<size_t> offset(backends.size(), 0);  // floats into a slot, per lane
  for (const LayerSpec& l : spec.layers) {
    for (int t = 0; t < kLoraTargets; ++t) {
      const TargetShape s = target_shape(spec, l, static_cast<LoraTarget>(t));
      if (!s.computed) continue;
      size_t& at = offset[lane_of_[l.il]];
      Place& p = place(l.il, static_cast<LoraTarget>(t));
      p = {.a = at, .n_cols = s.n_cols, .n_rows = s.n_rows, .exists = true};
      at += floats_bytes(R * s.n_cols) / sizeof(float);
      p.b = at;
      at += floats_bytes(R * s.n_rows) / sizeof(float);
    }
  }
  lanes_.resize(backends.size());
  for (size_t i = 0; i < backends.size(); ++i) {
    Lane& lane = lanes_[i];
    kernels::Backend& ops = *backends[i];
    lane.ops = &ops;
    lane.slot_bytes = offset[i] * sizeof(float);
    const size_t pool = limits.max_loras * lane.slot_bytes;
    if (pool > 0) {
      auto b = kernels::Buffer::make(ops, pool);
      if (!b)
        return util::errorf("model: cannot allocate {} bytes of LoRA slots on {}", pool,
                            ops.name());
      lane.pool = std::move(*b);
    }
    HR_ASSIGN_OR_RETURN(lane.scratch, kernels::Buffer::make(
                                          ops, static_cast<size_t>(max_batch) * R * sizeof(float)));
    HR_TRY(lane.scales.init(ops, static_cast<size_t>(limits.max_loras) * max_batch));
  }
  ranks_.assign(limits.max_loras, std::vector<int>(places_.size(), 0));
  used_.assign(limits.max_loras, false);
  terms_.reserve(limits.max_loras);
  in_pass_.reserve(limits.max_loras);
  return {};
}

util::Result<int> LoraBank::attach(const LoraAdapter& adapter) {
  if (!limits_.enabled())
    return util::errorf(
        "lora: this model was loaded without adapter slots — start it with --lora "
        "or --max-loras");
  const auto free = std::find(used_.begin(), used_.end(), false);
  if (free == used_.end()) {
    return util::errorf(
        "lora: all {} adapter slots are taken — unload an adapter or raise "
        "--max-loras",
        limits_.max_loras);
  }
  if (adapter.max_rank() > limits_.max_rank) {
    return util::errorf(
        "lora: {} has rank {}, above the {} its slots were planned for — raise "
        "--max-lora-rank",
        adapter.path(), adapter.max_rank(), limits_.max_rank);
  }
  const int slot = static_cast<int>(free - used_.begin());
  std::vector<float> a, b;
  for (const LoraPair& p : adapter.pairs()) {
    const Place& pl = place(p.il, p.target);
    Lane& lane = lanes_[lane_of_[p.il]];
    a.resize(static_cast<size_t>(p.rank) * p.n_cols);
    b.resize(static_cast<size_t>(p.n_rows) * p.rank);
    for (int k = 0; k < p.rank; ++k) {
      HR_TRY(tensor::dequantize_row(p.a->type, p.a->data.data() + k * p.a->row_bytes(),
                                    a.data() + static_cast<size_t>(k) * p.n_cols, p.n_cols));
    }
    for (int64_t r = 0; r < p.n_rows; ++r) {
      HR_TRY(tensor::dequantize_row(p.b->type, p.b->data.data() + r * p.b->row_bytes(),
                                    b.data() + r * p.rank, p.rank));
    }
    const float factor = adapter.factor(p);
    for (float& v : b) v *= factor;
    auto* base = lane.pool.get<float>() + slot * (lane.slot_bytes / sizeof(float));
    HR_TRY(lane.ops->upload(base + pl.a, a.data(), a.size() * sizeof(float)));
    HR_TRY(lane.ops->upload(base + pl.b, b.data(), b.size() * sizeof(float)));
  }
  std::vector<int>& ranks = ranks_[slot];
  std::fill(ranks.begin(), ranks.end(), 0);
  for (const LoraPair& p : adapter.pairs())
    ranks[p.il * kLoraTargets + static_cast<int>(p.target)] = p.rank;
  used_[slot] = true;
  return slot;
}

void LoraBank::detach(int slot) {
  if (slot < 0 || slot >= static_cast<int>(used_.size())) return;
  used_[slot] = false;
  std::fill(ranks_[slot].begin(), ranks_[slot].end(), 0);
}

void LoraBank::begin(const Batch& batch) {
  in_pass_.clear();
  n_tokens_ = batch.size();
  if (!limits_.enabled() || batch.adapter.empty()) return;
  for (const int32_t s : batch.adapter) {
    if (s >= 0 && s < limits_.max_loras && used_[s] &&
        std::find(in_pass_.begin(), in_pass_.end(), s) == in_pass_.end())
      in_pass_.push_back(s);
  }
  const int T = n_tokens_;
  for (Lane& lane : lanes_) {
    float* rows = lane.scales.host();
    for (size_t i = 0; i < in_pass_.size(); ++i) {
      for (int t = 0; t < T; ++t)
        rows[i * T + t] = batch.adapter[t] == in_pass_[i] ? batch.adapter_scale[t] : 0.0f;
    }
    lane.scales.push(in_pass_.size() * T);
  }
}

bool LoraBank::adapts(int il, LoraTarget target) const {
  const size_t at = static_cast<size_t>(il) * kLoraTargets + static_cast<int>(target);
  return std::any_of(in_pass_.begin(), in_pass_.end(),
                     [&](int slot) { return ranks_[slot][at] > 0; });
}

void LoraBank::apply(int lane_index, int il, LoraTarget target, const float* x, float* y,
                     int n_tokens) {
  const size_t at = static_cast<size_t>(il) * kLoraTargets + static_cast<int>(target);
  const Place& pl = place(il, target);
  Lane& lane = lanes_[lane_index];
  terms_.clear();
  for (size_t i = 0; i < in_pass_.size(); ++i) {
    const int slot = in_pass_[i];
    const int rank = ranks_[slot][at];
    if (rank == 0) continue;
    const float* base = lane.pool.get<const float>() + slot * (lane.slot_bytes / sizeof(float));
    terms_.push_back({.a = base + pl.a,
                      .b = base + pl.b,
                      .rank = rank,
                      .scale = lane.scales.ops() + i * n_tokens_});
  }
  if (terms_.empty()) return;
  lane.ops->lora({.terms = terms_.data(),
                  .n_terms = static_cast<int>(terms_.size()),
                  .n_cols = pl.n_cols,
                  .n_rows = pl.n_rows,
                  .x = x,
                  .y = y,
                  .n_tokens = n_tokens,
                  .scratch = lane.scratch.get<float>()});
}

size_t LoraBank::pool_bytes() const {
  size_t total = 0;
  for (const Lane& lane : lanes_) total += lane.pool.size();
  return total;
}

LoraWorkspace LoraBank::workspace_bytes() const {
  LoraWorkspace total;
  for (const Lane& lane : lanes_) {
    const LoraWorkspace w = lora_workspace_bytes(limits_, max_batch_, !lane.ops->host_memory());
    total.ops_bytes += w.ops_bytes;
    total.staging_bytes += w.staging_bytes;
  }
  return total;
}

}  // namespace model

// Weight inventory from the tensor table: sums of real tensor sizes, never per-model formulas.
#include "plan/inventory.h"

namespace plan {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Whether the forward pass reads this tensor at all (Gemma 4's shared layers ignore their K/V).
bool is_used(const model::Spec& spec, std::string_view name, int layer) {
  if (layer < 0 || layer >= spec.n_layer) return true;
  const auto& l = spec.layers[layer];
  if (l.owns_kv()) return true;
  return !(ends_with(name, "attn_k.weight") || ends_with(name, "attn_v.weight") || ends_with(name, "attn_k_norm.weight"));
}

}  // namespace

Inventory inventory(const gguf::File& file, const model::Spec& spec) {
  Inventory inv;
  for (const auto& t : file.tensors()) {
    WeightItem w;
    w.name = std::string(t.name);
    const auto c = model::classify_tensor(t.name);
    w.cls = c.cls;
    w.layer = c.layer;
    w.type = t.type;
    w.bytes = t.n_bytes;
    w.used = is_used(spec, t.name, c.layer);
    if (!w.used) {
      w.bytes_per_token = 0;
    } else if (t.name == "token_embd.weight") {
      // A tied embedding is also the output matrix, read whole for every token's logits.
      w.bytes_per_token = spec.tied_output ? t.n_bytes : t.row_bytes();
    } else if (t.name == "per_layer_token_embd.weight") {
      w.bytes_per_token = t.row_bytes();  // one row gathered per token (spec §2.2)
    } else if (c.cls == model::TensorClass::kExperts && t.ne[2] > 1 && c.layer >= 0) {
      const auto& l = spec.layers[c.layer];
      w.bytes_per_token = l.n_expert > 0 ? t.n_bytes * l.n_expert_used / l.n_expert : t.n_bytes;
    } else {
      w.bytes_per_token = t.n_bytes;
    }
    inv.total_bytes += w.bytes;
    if (w.used) inv.used_bytes += w.bytes;
    inv.bytes_per_token += w.bytes_per_token;
    inv.bytes_by_class[static_cast<int>(w.cls)] += w.bytes;
    inv.weights.push_back(std::move(w));
  }
  return inv;
}

}  // namespace plan

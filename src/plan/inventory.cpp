// Weight inventory from the tensor table: sums of real tensor sizes, never per-model formulas.
#include "plan/inventory.h"

#include "tensor/dtype.h"

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
  return !(ends_with(name, "attn_k.weight") || ends_with(name, "attn_v.weight") ||
           ends_with(name, "attn_k_norm.weight"));
}

// The type a tensor would have in a file re-quantized to `target`: the quantizer leaves norms,
// routers and 1-D tensors alone, and never adds bits.
gguf::TensorType requantized_type(const gguf::TensorInfo& t, model::TensorClass cls,
                                  gguf::TensorType target) {
  const bool matrix = t.n_dims >= 2 && cls != model::TensorClass::kNorm &&
                      cls != model::TensorClass::kOther &&
                      t.name.find("ffn_gate_inp") == std::string_view::npos;
  const bool fewer_bits = gguf::bits_per_weight(target) < gguf::bits_per_weight(t.type);
  const bool whole_blocks = t.ne[0] % gguf::tensor_type_info(target).block_size == 0;
  return matrix && fewer_bits && whole_blocks ? target : t.type;
}

}  // namespace

Inventory inventory(const gguf::File& file, const model::Spec& spec,
                    std::optional<gguf::TensorType> requantized) {
  Inventory inv;
  for (const auto& t : file.tensors()) {
    WeightItem w;
    w.name = std::string(t.name);
    const auto c = model::classify_tensor(t.name);
    w.cls = c.cls;
    w.layer = c.layer;
    w.type = requantized ? requantized_type(t, c.cls, *requantized) : t.type;
    const uint64_t row_bytes =
        w.type == t.type
            ? t.row_bytes()
            : static_cast<uint64_t>(tensor::row_bytes(w.type, static_cast<int64_t>(t.ne[0])));
    w.bytes = w.type == t.type ? t.n_bytes : row_bytes * t.n_rows();
    w.used = is_used(spec, t.name, c.layer);
    w.host_value = c.host_value;
    if (!w.used || w.host_value) {
      w.bytes_per_token = 0;  // host values are read once, when the model loads
    } else if (t.name == "token_embd.weight") {
      // A tied embedding is also the output matrix, read whole for every token's logits.
      w.bytes_per_token = spec.tied_output ? w.bytes : row_bytes;
      w.gathered = !spec.tied_output;
    } else if (t.name == "per_layer_token_embd.weight") {
      w.bytes_per_token = row_bytes;  // one row gathered per token (spec §2.2)
      w.gathered = true;
    } else if (c.cls == model::TensorClass::kExperts && t.ne[2] > 1 && c.layer >= 0) {
      const auto& l = spec.layers[c.layer];
      w.bytes_per_token = l.n_expert > 0 ? w.bytes * l.n_expert_used / l.n_expert : w.bytes;
    } else {
      w.bytes_per_token = w.bytes;
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

// Tensor classes by GGUF tensor name (the naming used by llama.cpp's converters).
#include <charconv>

#include "model/spec.h"

namespace model {
namespace {

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}
bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

}  // namespace

std::string_view tensor_class_name(TensorClass cls) {
  switch (cls) {
    case TensorClass::kTokenEmbedding:
      return "token embedding";
    case TensorClass::kPerLayerEmbedding:
      return "per-layer embedding";
    case TensorClass::kAttention:
      return "attention";
    case TensorClass::kFeedForward:
      return "feed-forward";
    case TensorClass::kExperts:
      return "experts";
    case TensorClass::kNorm:
      return "norms";
    case TensorClass::kOutput:
      return "output";
    case TensorClass::kOther:
      return "other";
  }
  return "?";
}

TensorClassification classify_tensor(std::string_view name) {
  TensorClassification c;
  std::string_view rest = name;
  if (starts_with(name, "blk.")) {
    std::string_view tail = name.substr(4);
    int layer = -1;
    auto [end, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), layer);
    if (ec == std::errc() && end < tail.data() + tail.size() && *end == '.') {
      c.layer = layer;
      rest = std::string_view(end + 1, tail.data() + tail.size() - end - 1);
    }
  }
  c.host_value = rest == "rope_freqs.weight" || rest == "layer_output_scale.weight";
  if (c.layer < 0) {
    if (starts_with(rest, "token_embd"))
      c.cls = TensorClass::kTokenEmbedding;
    else if (starts_with(rest, "per_layer_proj_norm"))
      c.cls = TensorClass::kNorm;
    else if (starts_with(rest, "per_layer_"))
      c.cls = TensorClass::kPerLayerEmbedding;
    else if (starts_with(rest, "output_norm"))
      c.cls = TensorClass::kNorm;
    else if (starts_with(rest, "output"))
      c.cls = TensorClass::kOutput;
    else
      c.cls = TensorClass::kOther;
    return c;
  }
  if (contains(rest, "_exps") || starts_with(rest, "ffn_gate_inp"))
    c.cls = TensorClass::kExperts;
  else if (contains(rest, "norm") || starts_with(rest, "layer_output_scale"))
    c.cls = TensorClass::kNorm;
  else if (starts_with(rest, "attn_"))
    c.cls = TensorClass::kAttention;
  else if (starts_with(rest, "ffn_"))
    c.cls = TensorClass::kFeedForward;
  else if (starts_with(rest, "inp_gate") || starts_with(rest, "proj"))
    c.cls = TensorClass::kPerLayerEmbedding;
  else
    c.cls = TensorClass::kOther;
  return c;
}

}  // namespace model

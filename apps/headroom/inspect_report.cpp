// Builds the inspect report (JSON) from a parsed GGUF file and, when known, its model::Spec.
#include "inspect_report.h"

#include <cstring>
#include <map>
#include <tuple>

#include "kv/geometry.h"
#include "mm/audio_encoder.h"
#include "mm/image_preprocess.h"
#include "mm/projector.h"
#include "model/model.h"
#include "model/spec.h"
#include "tensor/dtype.h"

namespace cli {
namespace {

// The KV cache type that "bytes per token" assumes: the usual default of inference runtimes.
constexpr tensor::DType kReportCacheType = tensor::DType::kF16;

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// An f32 as the shortest decimal that reads back as the same f32 (1e-05, not 9.99999974e-06).
Json f32_json(float f) {
  return std::stod(fmt::format("{}", f));
}

// One scalar element of `type` stored at p.
Json element_json(gguf::ValueType type, const uint8_t* p) {
  using gguf::ValueType;
  switch (type) {
    case ValueType::kU8:
      return load<uint8_t>(p);
    case ValueType::kI8:
      return load<int8_t>(p);
    case ValueType::kU16:
      return load<uint16_t>(p);
    case ValueType::kI16:
      return load<int16_t>(p);
    case ValueType::kU32:
      return load<uint32_t>(p);
    case ValueType::kI32:
      return load<int32_t>(p);
    case ValueType::kU64:
      return load<uint64_t>(p);
    case ValueType::kI64:
      return load<int64_t>(p);
    case ValueType::kF32:
      return f32_json(load<float>(p));
    case ValueType::kF64:
      return load<double>(p);
    case ValueType::kBool:
      return load<uint8_t>(p) != 0;
    case ValueType::kString:
    case ValueType::kArray:
      break;
  }
  return nullptr;
}

// {"type": "u32", "value": 5} for scalars; arrays give their element type, length and first
// kArrayPreview values (nested arrays summarised the same way).
Json value_json(const gguf::Value& v) {
  using gguf::ValueType;
  Json out;
  out["type"] = std::string(gguf::value_type_name(v.type()));
  if (v.type() == ValueType::kString) {
    out["value"] = std::string(*v.as_string());
  } else if (v.is_array()) {
    out["element_type"] = std::string(gguf::value_type_name(v.array_type()));
    out["length"] = v.array_size();
    Json values = Json::array();
    const size_t shown = std::min<uint64_t>(v.array_size(), kArrayPreview);
    const uint32_t size = gguf::value_type_size(v.array_type());
    for (size_t i = 0; i < shown; ++i) {
      if (v.array_type() == ValueType::kString) {
        values.push_back(std::string(v.array_string(i)));
      } else if (v.array_type() == ValueType::kArray) {
        values.push_back(value_json(v.array_nested(i)));
      } else {
        values.push_back(element_json(v.array_type(), v.array_raw().data() + i * size));
      }
    }
    out["values"] = std::move(values);
  } else {
    out["value"] = element_json(v.type(), v.scalar_raw().data());
  }
  return out;
}

Json tensor_json(const gguf::File& file, const gguf::TensorInfo& t) {
  const model::TensorClassification c = model::classify_tensor(t.name);
  Json shape = Json::array();
  for (uint32_t d = 0; d < t.n_dims; ++d) shape.push_back(t.ne[d]);
  Json out;
  out["name"] = std::string(t.name);
  out["type"] = std::string(gguf::tensor_type_name(t.type));
  out["shape"] = std::move(shape);
  out["elements"] = t.n_elements;
  out["bytes"] = t.n_bytes;
  out["offset"] = t.offset;
  out["file_offset"] = file.data_offset() + t.offset;
  out["class"] = std::string(model::tensor_class_name(c.cls));
  out["layer"] = c.layer >= 0 ? Json(c.layer) : Json(nullptr);
  return out;
}

struct Total {
  uint64_t tensors = 0;
  uint64_t parameters = 0;
  uint64_t bytes = 0;
  void add(const gguf::TensorInfo& t) {
    ++tensors;
    parameters += t.n_elements;
    bytes += t.n_bytes;
  }
  Json json() const { return {{"tensors", tensors}, {"parameters", parameters}, {"bytes", bytes}}; }
};

Json totals_json(const gguf::File& file) {
  Total all;
  std::map<gguf::TensorType, Total> by_type;
  std::array<Total, model::kTensorClassCount> by_class{};
  for (const auto& t : file.tensors()) {
    all.add(t);
    by_type[t.type].add(t);
    by_class[static_cast<size_t>(model::classify_tensor(t.name).cls)].add(t);
  }
  Json out = all.json();
  // Types by bytes, largest first: what dominates the file comes first.
  std::vector<std::pair<gguf::TensorType, Total>> types(by_type.begin(), by_type.end());
  std::stable_sort(types.begin(), types.end(),
                   [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
  Json type_rows = Json::array();
  for (const auto& [type, total] : types) {
    Json row = {{"type", std::string(gguf::tensor_type_name(type))}};
    row.update(total.json());
    type_rows.push_back(std::move(row));
  }
  out["by_type"] = std::move(type_rows);
  // Every class, in a fixed order (empty ones too), so the schema does not depend on the file.
  Json class_rows = Json::array();
  for (int c = 0; c < model::kTensorClassCount; ++c) {
    Json row = {
        {"class", std::string(model::tensor_class_name(static_cast<model::TensorClass>(c)))}};
    row.update(by_class[c].json());
    class_rows.push_back(std::move(row));
  }
  out["by_class"] = std::move(class_rows);
  return out;
}

// Bytes one token adds to a layer's KV cache (K and V rows) in the report's cache type.
uint64_t kv_bytes_per_token(const kv::LayerGeometry& g) {
  return g.owns() ? 2 * kv::row_bytes(kReportCacheType, g.kv_dim()) : 0;
}

Json layer_json(const model::LayerSpec& l, const kv::LayerGeometry& g) {
  Json out;
  out["layer"] = l.il;
  out["attention"] = std::string(model::attention_kind_name(l.kind));
  out["heads"] = l.n_head;
  out["kv_heads"] = l.n_head_kv;
  out["head_dim"] = l.head_dim;
  out["window"] = l.window;
  out["kv_source"] = l.kv_source;
  out["kv_bytes_per_token"] = kv_bytes_per_token(g);
  out["ffn_length"] = l.n_ff;
  out["rope_theta"] = f32_json(l.rope.theta);
  out["rope_dims"] = l.rope.n_rot;
  out["experts"] = l.n_expert;
  out["experts_used"] = l.n_expert_used;
  return out;
}

// Layers with the same attention geometry, in order of first appearance.
Json groups_json(const model::Spec& spec, const std::vector<kv::LayerGeometry>& geometry) {
  using Key = std::tuple<model::AttentionKind, int, int, int, int>;
  std::vector<std::pair<Key, Json>> groups;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const auto& l = spec.layers[i];
    const Key key{l.kind, l.n_head, l.n_head_kv, l.head_dim, l.window};
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) {
      Json g;
      g["attention"] = std::string(model::attention_kind_name(l.kind));
      g["heads"] = l.n_head;
      g["kv_heads"] = l.n_head_kv;
      g["head_dim"] = l.head_dim;
      g["window"] = l.window;
      g["layers"] = Json::array();
      g["layers_owning_kv"] = 0;
      g["kv_bytes_per_token"] = 0;
      groups.emplace_back(key, std::move(g));
      it = groups.end() - 1;
    }
    Json& g = it->second;
    g["layers"].push_back(l.il);
    if (l.owns_kv()) g["layers_owning_kv"] = g["layers_owning_kv"].get<int>() + 1;
    g["kv_bytes_per_token"] =
        g["kv_bytes_per_token"].get<uint64_t>() + kv_bytes_per_token(geometry[i]);
  }
  Json out = Json::array();
  for (auto& [key, g] : groups) out.push_back(std::move(g));
  return out;
}

// A projector (mmproj): its encoders' shapes and weights, and what they take.
Json projector_json(const gguf::File& file) {
  Json out;
  auto p = mm::projector_from_gguf(file);
  if (!p) {
    out["error"] = p.error().message();
    return out;
  }
  out["name"] = p->name;
  out["projects_to"] = p->n_embd_text;
  auto tower_bytes = [&](mm::Tower tower) {
    uint64_t bytes = 0;
    for (const auto& t : file.tensors()) bytes += mm::tower_of(t.name) == tower ? t.n_bytes : 0;
    return bytes;
  };
  if (p->vision) {
    const mm::VisionSpec& v = *p->vision;
    out["vision"] = {{"layers", v.n_layer}, {"embedding_length", v.n_embd}, {"heads", v.n_head},
                     {"kv_heads", v.n_head_kv}, {"head_dim", v.head_dim}, {"ffn_length", v.n_ff},
                     {"patch_size", v.patch_size}, {"pooling", v.pooling}, {"positions", v.n_positions},
                     {"rope_theta", f32_json(v.rope_theta)}, {"standardize", v.standardize},
                     {"clipped_linears", v.clipped}, {"weights_bytes", tower_bytes(mm::Tower::kVision)},
                     {"image_token_budgets", mm::kImageTokenBudgets},
                     {"default_image_tokens", mm::kDefaultImageTokens}};
  }
  if (p->audio) {
    const mm::AudioSpec& a = *p->audio;
    out["audio"] = {{"layers", a.n_layer}, {"embedding_length", a.n_embd}, {"heads", a.n_head},
                    {"head_dim", a.head_dim}, {"ffn_length", a.n_ff}, {"mel_bins", a.n_mel},
                    {"conv_channels", {a.conv_channels[0], a.conv_channels[1]}},
                    {"conv_kernel", a.conv_kernel}, {"output_length", a.n_out},
                    {"attention_window", a.window}, {"attention_softcap", f32_json(a.softcap)},
                    {"clipped_linears", a.clipped}, {"weights_bytes", tower_bytes(mm::Tower::kAudio)},
                    {"sample_rate", a.sample_rate}, {"tokens_per_second", 25},
                    {"max_seconds", mm::kMaxAudioSeconds},
                    {"max_tokens", mm::AudioEncoder::max_tokens(mm::kMaxAudioSeconds)}};
  }
  return out;
}

Json architecture_json(const gguf::File& file) {
  auto arch = file.get_string("general.architecture");
  if (!arch) return {{"name", nullptr}, {"error", arch.error().message()}};
  if (!*arch) return nullptr;  // no model in this file (e.g. a vocabulary)
  Json out;
  out["name"] = std::string(**arch);
  if (**arch == "clip") {
    out["projector"] = projector_json(file);
    return out;
  }
  auto spec = model::spec_from_gguf(file);
  if (!spec) {
    out["error"] = spec.error().message();
    return out;
  }
  const std::vector<kv::LayerGeometry> geometry = model::kv_layers(*spec);
  out["model_name"] = spec->name;
  out["layers"] = spec->n_layer;
  out["embedding_length"] = spec->n_embd;
  out["vocab_size"] = spec->n_vocab;
  out["context_length"] = spec->n_ctx_train;
  out["per_layer_embedding_length"] = spec->n_embd_per_layer;
  out["tied_output"] = spec->tied_output;
  out["final_logit_softcap"] = f32_json(spec->final_logit_softcap);
  out["attention_groups"] = groups_json(*spec, geometry);

  std::string pattern;
  Json shared = Json::array();
  uint64_t full_bytes = 0, sliding_bytes = 0;
  int window = 0;
  for (size_t i = 0; i < spec->layers.size(); ++i) {
    const auto& l = spec->layers[i];
    pattern += l.is_sliding() ? 'S' : 'F';
    if (!l.owns_kv()) shared.push_back(l.il);
    (l.is_sliding() ? sliding_bytes : full_bytes) += kv_bytes_per_token(geometry[i]);
    if (l.is_sliding()) window = std::max(window, l.window);
  }
  out["sliding_pattern"] = pattern;  // per layer: S sliding, F full
  out["sliding_window"] = window;
  out["shared_kv_layers"] = std::move(shared);
  // Sliding layers stop growing at their window; full layers grow with every token (spec §4.2).
  out["kv_cache_type"] = std::string(gguf::tensor_type_name(kReportCacheType));
  out["kv_bytes_per_token"] = {{"full_layers", full_bytes},
                               {"sliding_layers", sliding_bytes},
                               {"total", full_bytes + sliding_bytes}};
  Json layers = Json::array();
  for (size_t i = 0; i < spec->layers.size(); ++i) {
    layers.push_back(layer_json(spec->layers[i], geometry[i]));
  }
  out["per_layer"] = std::move(layers);
  return out;
}

}  // namespace

Json inspect_report(const gguf::File& file) {
  Json report;
  report["file"] = file.name();
  report["file_bytes"] = file.bytes().size();
  report["gguf_version"] = file.version();
  report["alignment"] = file.alignment();
  report["data_offset"] = file.data_offset();
  Json metadata = Json::object();
  for (const auto& kv : file.metadata()) metadata[std::string(kv.key)] = value_json(kv.value);
  report["metadata"] = std::move(metadata);
  Json tensors = Json::array();
  for (const auto& t : file.tensors()) tensors.push_back(tensor_json(file, t));
  report["tensors"] = std::move(tensors);
  report["totals"] = totals_json(file);
  report["architecture"] = architecture_json(file);
  return report;
}

}  // namespace cli

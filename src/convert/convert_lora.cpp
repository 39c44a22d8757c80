// convert_lora: PEFT names → the base model's tensors, each pair checked, one GGUF write.
#include "convert/convert_lora.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <filesystem>
#include <functional>
#include <optional>

#include "convert/hf_model.h"
#include "convert/safetensors.h"
#include "gguf/file.h"
#include "model/spec.h"
#include "util/mapped_file.h"

namespace convert {
namespace {

namespace fs = std::filesystem;

// PEFT's module names (under layers.N.) and the GGUF tensors they adapt (blk.N.SUFFIX.weight).
constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kModules = {{
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
}};

struct MappedName {
  int il = -1;
  std::string_view suffix;  // attn_q, …
  bool is_a = false;
  std::string base() const { return fmt::format("blk.{}.{}.weight", il, suffix); }
};

// "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight" → (3, attn_q, A); the text
// model of a multimodal checkpoint sits under model.language_model.
std::optional<MappedName> map_name(std::string_view name) {
  MappedName m;
  if (name.ends_with(".lora_A.weight")) {
    m.is_a = true;
  } else if (!name.ends_with(".lora_B.weight")) {
    return std::nullopt;
  }
  name.remove_suffix(14);
  bool prefixed = false;
  for (std::string_view p :
       {"base_model.model.model.language_model.layers.",
        "base_model.model.language_model.model.layers.", "base_model.model.model.layers."}) {
    if (name.starts_with(p)) {
      name.remove_prefix(p.size());
      prefixed = true;
      break;
    }
  }
  const size_t dot = name.find('.');
  if (!prefixed || dot == std::string_view::npos) return std::nullopt;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + dot, m.il);
  if (ec != std::errc() || end != name.data() + dot || m.il < 0) return std::nullopt;
  for (const auto& [module, suffix] : kModules) {
    if (name.substr(dot + 1) == module) {
      m.suffix = suffix;
      return m;
    }
  }
  return std::nullopt;
}

// Why a tensor that is not a q/k/v/o/gate/up/down half cannot be converted, in words.
std::string refusal(const std::string& name) {
  if (name.find("lora_magnitude_vector") != std::string::npos)
    return "is a DoRA magnitude, which the GGUF adapter form cannot carry — train without DoRA";
  if (name.find("embed") != std::string::npos || name.find("lm_head") != std::string::npos)
    return "adapts the embeddings or the output head, which headroom does not adapt";
  return "is not a LoRA half of a q, k, v, o, gate, up or down projection (the targets headroom "
         "adapts)";
}

util::Result<nlohmann::json> read_adapter_config(const fs::path& dir) {
  const fs::path path = dir / "adapter_config.json";
  if (!fs::exists(path)) {
    return util::errorf(
        "convert --lora: {} has no adapter_config.json — not a PEFT adapter directory",
        dir.string());
  }
  HR_ASSIGN_OR_RETURN(util::MappedFile file, util::MappedFile::open(path.string()));
  nlohmann::json c =
      nlohmann::json::parse(file.bytes().begin(), file.bytes().end(), nullptr, false);
  if (c.is_discarded() || !c.is_object())
    return util::errorf("convert --lora: {} is not a JSON object", path.string());
  if (c.contains("peft_type") && c["peft_type"] != "LORA")
    return util::errorf("convert --lora: {}: peft_type {} is not LORA", path.string(),
                        c["peft_type"].dump());
  if (c.value("use_dora", false))
    return util::errorf(
        "convert --lora: {}: a DoRA adapter (use_dora) cannot be written in the GGUF LoRA form",
        path.string());
  if (c.value("use_rslora", false) ||
      (c.contains("alpha_pattern") && c["alpha_pattern"].is_object() &&
       !c["alpha_pattern"].empty())) {
    return util::errorf(
        "convert --lora: {}: use_rslora or alpha_pattern scale modules apart, which the GGUF "
        "form's one alpha cannot carry",
        path.string());
  }
  if (!c.contains("r") || !c["r"].is_number_integer() || !c.contains("lora_alpha") ||
      !c["lora_alpha"].is_number()) {
    return util::errorf("convert --lora: {} lacks r or lora_alpha", path.string());
  }
  return c;
}

// The shape the base model gives the adapted matrix: its GGUF tensor's, or for a KV-shared
// layer's k or v (which files may leave out: spec §3.3 note a) the one the layer's geometry says.
util::Result<std::pair<int64_t, int64_t>> base_shape(const gguf::File& base,
                                                     const model::Spec& spec, const MappedName& m,
                                                     const std::string& tensor_name) {
  const std::string name = m.base();
  if (const gguf::TensorInfo* t = base.find_tensor(name)) {
    return std::pair{static_cast<int64_t>(t->ne[0]), static_cast<int64_t>(t->ne[1])};
  }
  if (m.il < spec.n_layer && !spec.layers[m.il].owns_kv() &&
      (m.suffix == "attn_k" || m.suffix == "attn_v")) {
    return std::pair{int64_t{spec.n_embd}, int64_t{spec.layers[m.il].kv_dim()}};
  }
  return util::errorf(
      "convert --lora: {} adapts {}, which the base model {} does not have — an adapter for "
      "another base model?",
      tensor_name, name, base.name());
}

}  // namespace

util::Result<LoraConvertResult> convert_lora(const std::string& peft_dir, const std::string& out,
                                             const LoraConvertOptions& options,
                                             util::ThreadPool& pool, const ProgressFn& progress) {
  HR_ASSIGN_OR_RETURN(const nlohmann::json config, read_adapter_config(peft_dir));
  const fs::path weights = fs::path(peft_dir) / "adapter_model.safetensors";
  if (!fs::exists(weights)) {
    return util::errorf(
        "convert --lora: {} has no adapter_model.safetensors{} — save the adapter as safetensors",
        peft_dir,
        fs::exists(fs::path(peft_dir) / "adapter_model.bin") ? " (only a pickled .bin)" : "");
  }
  if (options.base.empty())
    return util::errorf("convert --lora: give the base model's GGUF with --base");
  HR_ASSIGN_OR_RETURN(gguf::File base, gguf::File::open(options.base));
  HR_ASSIGN_OR_RETURN(const model::Spec spec, model::spec_from_gguf(base));
  DType type = DType::kF32;
  if (options.outtype == "f16") {
    type = DType::kF16;
  } else if (options.outtype == "bf16") {
    type = DType::kBF16;
  } else if (options.outtype != "f32" && options.outtype != "auto") {
    return util::errorf("convert --lora: --outtype {}: an adapter is written as f32, f16 or bf16",
                        options.outtype);
  }
  HR_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(weights.string()));

  // The halves by base tensor, in file order.
  struct Pair {
    MappedName name;
    const SafeTensor *a = nullptr, *b = nullptr;
  };
  std::vector<Pair> pairs;
  for (const SafeTensor& t : file.tensors()) {
    const auto m = map_name(t.name);
    if (!m)
      return util::errorf("convert --lora: {}: tensor {} {}", t.file, t.name, refusal(t.name));
    auto it = std::find_if(pairs.begin(), pairs.end(), [&](const Pair& p) {
      return p.name.il == m->il && p.name.suffix == m->suffix;
    });
    if (it == pairs.end()) it = pairs.insert(pairs.end(), Pair{*m});
    (m->is_a ? it->a : it->b) = &t;
  }
  if (pairs.empty())
    return util::errorf("convert --lora: {} holds no LoRA tensors", weights.string());

  LoraConvertResult result;
  result.arch = std::string(model::arch_name(spec.arch));
  result.alpha = config["lora_alpha"].get<double>();
  std::vector<SourceTensor> sources;
  for (const Pair& p : pairs) {
    const std::string base_name = p.name.base();
    if (!p.a || !p.b) {
      return util::errorf("convert --lora: {}: the {} half adapting {} has no partner",
                          weights.string(), p.a ? "lora_A" : "lora_B", base_name);
    }
    if (p.a->shape.size() != 2 || p.b->shape.size() != 2 || p.a->shape[0] != p.b->shape[1] ||
        p.a->shape[0] == 0) {
      return util::errorf(
          "convert --lora: {}: {} is {} and {} is {} — lora_A must be [r, in] and lora_B "
          "[out, r] of one rank",
          weights.string(), p.a->name, fmt::join(p.a->shape, "×"), p.b->name,
          fmt::join(p.b->shape, "×"));
    }
    HR_ASSIGN_OR_RETURN(const auto shape, base_shape(base, spec, p.name, p.a->name));
    if (p.a->shape[1] != shape.first || p.b->shape[0] != shape.second) {
      return util::errorf(
          "convert --lora: {}: the pair adapting {} maps {} inputs to {} outputs, but the base "
          "model's tensor maps {} to {} — an adapter for another base model?",
          weights.string(), base_name, p.a->shape[1], p.b->shape[0], shape.first, shape.second);
    }
    // llama's converter permuted Q and K rows for its adjacent-pair RoPE: B's rows follow them.
    std::function<int64_t(int64_t)> rows;
    if (spec.arch == model::Arch::kLlama &&
        (p.name.suffix == "attn_q" || p.name.suffix == "attn_k"))
      rows = rope_pair_rows(spec.layers[p.name.il].head_dim);
    HR_ASSIGN_OR_RETURN(SourceTensor a, checkpoint_tensor(*p.a, base_name + ".lora_a"));
    HR_ASSIGN_OR_RETURN(SourceTensor b, checkpoint_tensor(*p.b, base_name + ".lora_b", rows));
    sources.push_back(std::move(a));
    sources.push_back(std::move(b));
    ++result.n_pairs;
    result.max_rank = std::max(result.max_rank, static_cast<int>(p.a->shape[0]));
  }

  gguf::Writer writer;
  writer.set("general.architecture", gguf::MetaValue::string(result.arch));
  writer.set("general.type", gguf::MetaValue::string("adapter"));
  const std::string name =
      !options.name.empty() ? options.name : fs::path(peft_dir).filename().string();
  writer.set("general.name", gguf::MetaValue::string(name.empty() ? "adapter" : name));
  writer.set("adapter.type", gguf::MetaValue::string("lora"));
  writer.set("adapter.lora.alpha", gguf::MetaValue::f32(static_cast<float>(result.alpha)));
  std::vector<TensorChoice> choices(sources.size(), TensorChoice{.type = type, .wanted = type});
  const ConvertContext context{&pool, nullptr, progress};
  HR_TRY(add_converted_tensors(writer, sources, choices, context, result.totals));
  if (util::Status s = writer.write(out); !s) {
    return std::move(s).error().with_context(fmt::format("convert --lora {}", peft_dir));
  }
  return result;
}

}  // namespace convert

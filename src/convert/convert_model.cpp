// convert_checkpoint: config → architecture converter → tokenizer → types → one GGUF write.
#include "convert/convert_model.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>

#include "convert/hf_model.h"
#include "convert/quantize_model.h"
#include "util/mapped_file.h"

namespace convert {
namespace {

namespace fs = std::filesystem;

// config.json with a multimodal checkpoint's text_config merged over it (the text model's
// fields win), as llama.cpp's converter reads it.
util::Result<nlohmann::json> read_config(const fs::path& dir) {
  const fs::path path = dir / "config.json";
  if (!fs::exists(path)) {
    return util::errorf("convert: {} has no config.json — not a Hugging Face checkpoint directory",
                        dir.string());
  }
  HR_ASSIGN_OR_RETURN(util::MappedFile file, util::MappedFile::open(path.string()));
  nlohmann::json config =
      nlohmann::json::parse(file.bytes().begin(), file.bytes().end(), nullptr, false);
  if (config.is_discarded() || !config.is_object()) {
    return util::errorf("convert: {} is not a JSON object — damaged download?", path.string());
  }
  if (config.contains("text_config") && config["text_config"].is_object()) {
    for (auto it = config["text_config"].begin(); it != config["text_config"].end(); ++it) {
      config[it.key()] = *it;
    }
  }
  return config;
}

std::string architecture_of(const nlohmann::json& config) {
  if (config.contains("architectures") && config["architectures"].is_array() &&
      !config["architectures"].empty() && config["architectures"][0].is_string()) {
    return config["architectures"][0].get<std::string>();
  }
  return "";
}

// The float type of the output's matrices for --outtype (and for the unquantized matrices of a
// quantized file): auto keeps BF16 checkpoints in BF16 and writes F16 otherwise.
DType matrix_float_type(const std::string& outtype, const std::vector<SourceTensor>& tensors) {
  if (outtype == "f32") return DType::kF32;
  if (outtype == "f16") return DType::kF16;
  if (outtype == "bf16") return DType::kBF16;
  for (const SourceTensor& t : tensors) {
    if (t.type == DType::kBF16) return DType::kBF16;
  }
  return DType::kF16;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

DType converted_float_type(const SourceTensor& t, size_t source_dims, DType matrices) {
  const std::string& n = t.name;
  if (source_dims <= 1 || n.ends_with("_norm.weight") || n.ends_with("ffn_gate_inp.weight") ||
      !n.ends_with(".weight")) {
    return DType::kF32;
  }
  return matrices;
}

util::Result<ConvertResult> convert_checkpoint(const std::string& dir, const std::string& out,
                                               const ConvertOptions& options,
                                               util::ThreadPool& pool, const ProgressFn& progress) {
  HR_ASSIGN_OR_RETURN(nlohmann::json config_json, read_config(dir));
  const HfConfig config{config_json, (fs::path(dir) / "config.json").string()};
  const std::string hf_arch = architecture_of(config_json);
  HR_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(dir));
  std::optional<HfConversion> conversion;
  if (hf_arch == "LlamaForCausalLM" || hf_arch == "MistralForCausalLM") {
    HR_ASSIGN_OR_RETURN(conversion, convert_llama_checkpoint(config, ckpt));
  } else if (hf_arch == "Gemma4ForCausalLM" || hf_arch == "Gemma4ForConditionalGeneration") {
    HR_ASSIGN_OR_RETURN(conversion, convert_gemma4_checkpoint(config, ckpt));
  } else {
    return util::errorf(
        "convert: {}: architecture '{}' is not supported (supported: "
        "LlamaForCausalLM, MistralForCausalLM, Gemma4ForCausalLM, "
        "Gemma4ForConditionalGeneration)",
        config.file, hf_arch.empty() ? "(none)" : hf_arch);
  }
  HfConversion& c = *conversion;

  // The output's types: the converter's float types, then a quantization mix if asked for.
  const std::string outtype = lower(options.outtype);
  const bool float_out =
      outtype == "auto" || outtype == "f32" || outtype == "f16" || outtype == "bf16";
  const DType matrices = matrix_float_type(float_out ? outtype : "auto", c.tensors);
  MixOptions mix = options.mix;
  HR_ASSIGN_OR_RETURN(
      mix.file_type,
      parse_file_type(float_out ? std::string(tensor::dtype_name(matrices)) : outtype));
  std::vector<TensorDesc> descs;
  for (SourceTensor& t : c.tensors) {
    const DType stored = converted_float_type(t, t.ne.size(), matrices);
    if (stored != t.type) t.raw = {};  // converted, not copied
    t.type = stored;
    descs.push_back(t.desc());
  }
  std::optional<ImportanceMatrix> imatrix;
  if (!options.imatrix_path.empty()) {
    HR_ASSIGN_OR_RETURN(imatrix, load_imatrix(options.imatrix_path));
  }
  mix.has_imatrix = imatrix.has_value();
  ConvertResult result;
  HR_ASSIGN_OR_RETURN(result.choices, choose_types(c.facts, descs, mix));

  gguf::Writer writer;
  writer.set("general.architecture", gguf::MetaValue::string(c.arch));
  const std::string name = !options.name.empty() ? options.name : fs::path(dir).filename().string();
  writer.set("general.name", gguf::MetaValue::string(name.empty() ? c.arch : name));
  for (auto& [key, value] : c.metadata) writer.set(key, std::move(value));
  HR_ASSIGN_OR_RETURN(result.vocab,
                      add_hf_tokenizer(writer, dir, c.vocab, config.integer_or("vocab_size", 0)));
  set_quantization_metadata(writer, mix.file_type, options.imatrix_path,
                            imatrix ? &*imatrix : nullptr);
  const ConvertContext context{&pool, imatrix ? &*imatrix : nullptr, progress};
  HR_TRY(add_converted_tensors(writer, c.tensors, result.choices, context, result.totals));
  if (util::Status s = writer.write(out); !s) {
    return std::move(s).error().with_context(fmt::format("convert {}", dir));
  }
  result.arch = c.arch;
  result.skipped_tensors = c.skipped_tensors;
  return result;
}

}  // namespace convert

// quantize_model: GGUF in, GGUF out, in the types a mix chooses.
#include "convert/quantize_model.h"

#include <optional>

#include "tensor/dequantize.h"

namespace convert {
namespace {

// A count stored as one number, or per layer as an array (Gemma 4's head_count_kv): layer 0's.
util::Result<int> first_count(const gguf::File& file, const std::string& key) {
  const gguf::Value* v = file.find(key);
  if (!v) return 0;
  if (v->is_array()) {
    auto first = v->array_size() > 0 ? v->array_i64(0) : std::nullopt;
    if (!first) return util::errorf("{}: {} is not an array of counts", file.name(), key);
    return static_cast<int>(*first);
  }
  auto n = v->as_u64();
  if (!n) return util::errorf("{}: {} is not a count", file.name(), key);
  return static_cast<int>(*n);
}

bool is_float_type(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
}

}  // namespace

util::Result<ModelFacts> model_facts(const gguf::File& file) {
  HR_ASSIGN_OR_RETURN(auto arch, file.get_string("general.architecture"));
  if (!arch) {
    return util::errorf("{}: no general.architecture — not a model file", file.name());
  }
  ModelFacts f;
  f.arch = std::string(*arch);
  HR_ASSIGN_OR_RETURN(f.n_layer, first_count(file, f.arch + ".block_count"));
  HR_ASSIGN_OR_RETURN(f.n_head, first_count(file, f.arch + ".attention.head_count"));
  HR_ASSIGN_OR_RETURN(f.n_head_kv, first_count(file, f.arch + ".attention.head_count_kv"));
  HR_ASSIGN_OR_RETURN(f.n_expert, first_count(file, f.arch + ".expert_count"));
  if (f.n_head_kv == 0) f.n_head_kv = f.n_head;
  return f;
}

std::vector<SourceTensor> gguf_sources(const gguf::File& file) {
  std::vector<SourceTensor> out;
  for (const gguf::TensorInfo& t : file.tensors()) {
    SourceTensor s;
    s.name = std::string(t.name);
    s.ne.assign(t.ne.begin(), t.ne.begin() + t.n_dims);
    s.type = t.type;
    s.raw = t.data;
    const gguf::TensorInfo* info = &t;
    const tensor::DequantizeRowFn decode = tensor::find_dequantizer(t.type);
    s.read_rows = [info, decode](int64_t first, int64_t count, float* rows) -> util::Status {
      if (!decode) {
        return util::errorf("tensor {} is {}, which headroom cannot decode", info->name,
                            gguf::tensor_type_name(info->type));
      }
      const uint64_t row_bytes = info->row_bytes();
      for (int64_t r = 0; r < count; ++r) {
        decode(info->data.data() + static_cast<uint64_t>(first + r) * row_bytes,
               rows + r * static_cast<int64_t>(info->ne[0]), static_cast<int64_t>(info->ne[0]));
      }
      return {};
    };
    const util::MappedFile* mapping = file.mapping();
    const uint64_t offset = file.data_offset() + t.offset;
    const uint64_t size = t.n_bytes;
    if (mapping) s.done = [mapping, offset, size] { mapping->release(offset, size); };
    out.push_back(std::move(s));
  }
  return out;
}

util::Result<std::vector<TensorChoice>> plan_quantization(const gguf::File& file,
                                                          const std::vector<SourceTensor>& sources,
                                                          const QuantizeOptions& options) {
  HR_ASSIGN_OR_RETURN(ModelFacts facts, model_facts(file));
  std::vector<TensorDesc> descs;
  for (const SourceTensor& s : sources) descs.push_back(s.desc());
  HR_ASSIGN_OR_RETURN(std::vector<TensorChoice> choices, choose_types(facts, descs, options.mix));
  for (size_t i = 0; i < sources.size(); ++i) {
    const SourceTensor& s = sources[i];
    if (!choices[i].quantized) continue;
    if (!tensor::can_dequantize(s.type)) {
      return util::errorf(
          "{}: tensor {} is {}, which headroom cannot decode — keep it with "
          "--tensor-type '{}={}' or start from an F16/F32 file",
          file.name(), s.name, tensor::dtype_name(s.type), s.name, tensor::dtype_name(s.type));
    }
    if (!is_float_type(s.type) && !options.allow_requantize) {
      return util::errorf(
          "{}: tensor {} is already {}; quantizing it again to {} compounds the "
          "error — start from the F16/BF16/F32 model, or pass --allow-requantize",
          file.name(), s.name, tensor::dtype_name(s.type), tensor::dtype_name(choices[i].type));
    }
  }
  return choices;
}

void set_quantization_metadata(gguf::Writer& writer, const FileType& file_type,
                               const std::string& imatrix_path, const ImportanceMatrix* imatrix) {
  writer.set("general.quantization_version", gguf::MetaValue::u32(2));
  writer.set("general.file_type", gguf::MetaValue::u32(file_type.code));
  if (!imatrix) return;
  writer.set("quantize.imatrix.file", gguf::MetaValue::string(imatrix_path));
  if (!imatrix->dataset.empty()) {
    writer.set("quantize.imatrix.dataset", gguf::MetaValue::string(imatrix->dataset));
  }
  writer.set("quantize.imatrix.entries_count",
             gguf::MetaValue::u32(static_cast<uint32_t>(imatrix->columns.size())));
  if (imatrix->chunk_count > 0) {
    writer.set("quantize.imatrix.chunks_count",
               gguf::MetaValue::u32(static_cast<uint32_t>(imatrix->chunk_count)));
  }
}

util::Result<QuantizeResult> quantize_model(const std::string& in, const std::string& out,
                                            const QuantizeOptions& options, util::ThreadPool& pool,
                                            const ProgressFn& progress) {
  HR_ASSIGN_OR_RETURN(gguf::File file, gguf::File::open(in));
  std::optional<ImportanceMatrix> imatrix;
  if (!options.imatrix_path.empty()) {
    HR_ASSIGN_OR_RETURN(imatrix, load_imatrix(options.imatrix_path));
  }
  QuantizeOptions effective = options;
  effective.mix.has_imatrix = imatrix.has_value();
  std::vector<SourceTensor> sources = gguf_sources(file);
  QuantizeResult result;
  HR_ASSIGN_OR_RETURN(result.choices, plan_quantization(file, sources, effective));

  gguf::Writer writer(file.version() >= 3 ? 3 : file.version());
  for (const gguf::KeyValue& kv : file.metadata()) {
    const std::string key(kv.key);
    if (key.starts_with("split.")) continue;  // one output file, whatever the input was
    writer.set(key, gguf::MetaValue::from(kv.value));
  }
  set_quantization_metadata(writer, effective.mix.file_type, options.imatrix_path,
                            imatrix ? &*imatrix : nullptr);
  const ConvertContext context{&pool, imatrix ? &*imatrix : nullptr, progress};
  if (util::Status s =
          add_converted_tensors(writer, sources, result.choices, context, result.totals);
      !s) {
    return std::move(s).error().with_context(in);
  }
  if (util::Status s = writer.write(out); !s) {
    return std::move(s).error().with_context(fmt::format("quantize {}", in));
  }
  return result;
}

}  // namespace convert

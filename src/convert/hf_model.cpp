// Helpers every architecture's checkpoint converter uses: config lookups, checkpoint tensors as
// sources, shape checks.
#include "convert/hf_model.h"

#include <nlohmann/json.hpp>

#include "tensor/dequantize.h"

namespace convert {

bool HfConfig::has(const std::string& key) const {
  return json.contains(key) && !json[key].is_null();
}

util::Result<int64_t> HfConfig::integer(const std::string& key) const {
  if (!has(key) || !json[key].is_number_integer()) {
    return util::errorf("convert: {} has no integer '{}' — not a complete model config", file, key);
  }
  return json[key].get<int64_t>();
}

int64_t HfConfig::integer_or(const std::string& key, int64_t fallback) const {
  return has(key) && json[key].is_number_integer() ? json[key].get<int64_t>() : fallback;
}

double HfConfig::number_or(const std::string& key, double fallback) const {
  return has(key) && json[key].is_number() ? json[key].get<double>() : fallback;
}

bool HfConfig::boolean_or(const std::string& key, bool fallback) const {
  return has(key) && json[key].is_boolean() ? json[key].get<bool>() : fallback;
}

util::Result<SourceTensor> checkpoint_tensor(const SafeTensor& t, std::string gguf_name,
                                             std::function<int64_t(int64_t)> row_of,
                                             int64_t n_rows) {
  HR_ASSIGN_OR_RETURN(const DType type, t.gguf_type());
  SourceTensor s;
  s.name = std::move(gguf_name);
  s.type = type;
  // PyTorch [d0, d1, …] with the last axis contiguous is ggml {…, d1, d0}: the same bytes.
  s.ne.assign(t.shape.rbegin(), t.shape.rend());
  if (s.ne.empty()) s.ne.push_back(1);  // a scalar is one value
  const int64_t ne0 = s.ne[0];
  if (n_rows >= 0) {
    int64_t rest = 1;
    for (size_t d = 2; d < s.ne.size(); ++d) rest *= s.ne[d];
    s.ne[1] = n_rows / rest;
  }
  const int64_t row_bytes = tensor::row_bytes(type, ne0);
  if (!row_of && n_rows < 0) s.raw = t.data;
  const tensor::DequantizeRowFn decode = tensor::find_dequantizer(type);
  const std::span<const uint8_t> data = t.data;
  s.read_rows = [decode, data, ne0, row_bytes, row_of](int64_t first, int64_t count,
                                                       float* out) -> util::Status {
    for (int64_t r = 0; r < count; ++r) {
      const int64_t src = row_of ? row_of(first + r) : first + r;
      decode(data.data() + src * row_bytes, out + r * ne0, ne0);
    }
    return {};
  };
  return s;
}

util::Status check_shape(const SafeTensor& t, const std::vector<int64_t>& expected) {
  if (t.shape == expected) return {};
  auto dims = [](const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  return util::errorf(
      "convert: tensor {} in {} has shape {} but config.json implies {} — the "
      "weights and the config are from different models",
      t.name, t.file, dims(t.shape), dims(expected));
}

SourceTensor f32_tensor(std::string name, std::vector<float> values) {
  SourceTensor s;
  s.name = std::move(name);
  s.type = DType::kF32;
  s.ne = {static_cast<int64_t>(values.size())};
  auto shared = std::make_shared<std::vector<float>>(std::move(values));
  s.raw = std::span(reinterpret_cast<const uint8_t*>(shared->data()), shared->size() * 4);
  s.read_rows = [shared](int64_t, int64_t, float* out) -> util::Status {
    std::copy(shared->begin(), shared->end(), out);
    return {};
  };
  return s;
}

}  // namespace convert

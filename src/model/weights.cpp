// Tensor binding with shape checks; errors name the tensor, what was expected and what was found.
#include "model/weights.h"

#include "tensor/dequantize.h"
#include "tensor/dtype.h"

namespace model {

std::string Binder::layer_name(int il, std::string_view suffix) { return fmt::format("blk.{}.{}", il, suffix); }

util::Result<const gguf::TensorInfo*> Binder::find(const std::string& name) const {
  const gguf::TensorInfo* t = file_.find_tensor(name);
  if (!t) {
    return util::errorf("model: {}: required tensor '{}' is missing — the file is incomplete or was converted "
                        "for another architecture", file_.name(), name);
  }
  return t;
}

util::Status Binder::check_shape(const gguf::TensorInfo& t, std::initializer_list<int64_t> expected) const {
  std::vector<int64_t> want(expected);
  bool ok = true;
  for (size_t d = 0; d < gguf::kMaxDims; ++d) {
    const int64_t w = d < want.size() ? want[d] : 1;
    if (static_cast<int64_t>(t.ne[d]) != w) ok = false;
  }
  if (!ok) {
    std::string got = fmt::format("{}", t.ne[0]);
    for (uint32_t d = 1; d < t.n_dims; ++d) got += fmt::format(", {}", t.ne[d]);
    std::string exp = fmt::format("{}", want[0]);
    for (size_t d = 1; d < want.size(); ++d) exp += fmt::format(", {}", want[d]);
    return util::errorf("model: {}: tensor '{}' has shape [{}] but the metadata implies [{}] — the file is "
                        "inconsistent; re-convert it", file_.name(), t.name, got, exp);
  }
  return {};
}

util::Result<kernels::Matrix> Binder::matrix(const std::string& name, int64_t n_cols, int64_t n_rows, int64_t n_mats) {
  HR_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, find(name));
  if (n_mats > 1) HR_TRY(check_shape(*t, {n_cols, n_rows, n_mats}));
  else HR_TRY(check_shape(*t, {n_cols, n_rows}));
  // Kernels trust bound weights: a type the engine cannot compute with is refused here, once.
  if (!tensor::can_dequantize(t->type)) {
    return util::errorf("model: {}: tensor '{}' is stored as {}, which headroom cannot compute with yet — "
                        "re-quantize the model to a supported type (e.g. Q4_K_M, Q8_0, F16)", file_.name(), name,
                        gguf::tensor_type_name(t->type));
  }
  kernels::Matrix m;
  m.type = t->type;
  m.n_cols = n_cols;
  m.n_rows = n_rows * n_mats;
  m.row_bytes = t->row_bytes();
  m.data = t->data.data();
  if (placer_) {
    HR_ASSIGN_OR_RETURN(m.data, placer_->place(name, t->data));
  }
  return m;
}

std::optional<util::Result<kernels::Matrix>> Binder::optional_matrix(const std::string& name, int64_t n_cols,
                                                                     int64_t n_rows, int64_t n_mats) {
  if (!has(name)) return std::nullopt;
  return matrix(name, n_cols, n_rows, n_mats);
}

util::Result<const float*> Binder::vector(const std::string& name, int64_t n) {
  HR_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, find(name));
  HR_TRY(check_shape(*t, {n}));
  std::span<const uint8_t> bytes = t->data;
  if (t->type != gguf::TensorType::kF32) {
    auto values = std::make_unique<float[]>(n);
    auto status = tensor::dequantize_row(t->type, t->data.data(), values.get(), n);
    if (!status) return std::move(status).error().with_context(fmt::format("model: tensor '{}'", name));
    bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(values.get()), n * sizeof(float));
    converted_.push_back(std::move(values));
  }
  if (placer_) {
    HR_ASSIGN_OR_RETURN(const void* p, placer_->place(name, bytes));
    return static_cast<const float*>(p);
  }
  return reinterpret_cast<const float*>(bytes.data());
}

util::Result<const void*> BackendPlacer::place(std::string_view name,
                                               std::span<const uint8_t> bytes) {
  auto buffer = kernels::Buffer::make(backend_, bytes.size());
  if (!buffer)
    return std::move(buffer).error().with_context(fmt::format("model: tensor '{}'", name));
  HR_TRY(backend_.upload(buffer->get(), bytes.data(), bytes.size()));
  bytes_ += bytes.size();
  buffers_.push_back(std::move(*buffer));
  return buffers_.back().get<const void>();
}

std::optional<util::Result<const float*>> Binder::optional_vector(const std::string& name, int64_t n) {
  if (!has(name)) return std::nullopt;
  return vector(name, n);
}

std::optional<util::Result<float>> Binder::optional_scalar(const std::string& name) {
  if (!has(name)) return std::nullopt;
  auto t = find(name);
  if (!t) return std::move(t).error();
  if (auto shape = check_shape(**t, {1}); !shape) return std::move(shape).error();
  float value = 0;
  if (auto s = tensor::dequantize_row((*t)->type, (*t)->data.data(), &value, 1); !s) {
    return std::move(s).error().with_context(fmt::format("model: tensor '{}'", name));
  }
  return value;
}

}  // namespace model

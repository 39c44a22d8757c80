// Encoder tensor binding and the clipped linear layer (weights.h).
#include "mm/weights.h"

#include <cmath>

#include "tensor/dequantize.h"
#include "tensor/dtype.h"

namespace mm {

void apply(kernels::Backend& ops, const Linear& l, const float* x, float* y, int rows,
           float* scratch) {
  const int64_t n_in = l.w.n_cols;
  if (l.clamp_in) {
    ops.copy(scratch, x, rows * n_in);
    ops.clamp(scratch, l.in_lo, l.in_hi, rows * n_in);
    x = scratch;
  }
  ops.matmul(l.w, x, y, rows);
  if (l.clamp_out) ops.clamp(y, l.out_lo, l.out_hi, rows * l.w.n_rows);
}

Weights::Weights(const gguf::File& file, kernels::Backend& backend) : file_(file) {
  if (!backend.host_memory()) placer_ = std::make_unique<model::BackendPlacer>(backend);
  binder_ = std::make_unique<model::Binder>(file, placer_.get());
  host_ = std::make_unique<model::Binder>(file, nullptr);
}

util::Result<Linear> Weights::linear(const std::string& base, int64_t n_in, int64_t n_out) {
  Linear l;
  HR_ASSIGN_OR_RETURN(l.w, binder_->matrix(base + ".weight", n_in, n_out));
  auto bound = [&](const char* suffix, float& value) -> util::Result<bool> {
    auto s = binder_->optional_scalar(base + "." + suffix);
    if (!s) return false;
    HR_ASSIGN_OR_RETURN(value, std::move(*s));
    return true;
  };
  HR_ASSIGN_OR_RETURN(bool has_in_lo, bound("input_min", l.in_lo));
  HR_ASSIGN_OR_RETURN(bool has_in_hi, bound("input_max", l.in_hi));
  HR_ASSIGN_OR_RETURN(bool has_out_lo, bound("output_min", l.out_lo));
  HR_ASSIGN_OR_RETURN(bool has_out_hi, bound("output_max", l.out_hi));
  // A missing side of a pair is unbounded, as the reference's ±inf defaults.
  if (!has_in_lo) l.in_lo = -INFINITY;
  if (!has_in_hi) l.in_hi = INFINITY;
  if (!has_out_lo) l.out_lo = -INFINITY;
  if (!has_out_hi) l.out_hi = INFINITY;
  l.clamp_in = has_in_lo || has_in_hi;
  l.clamp_out = has_out_lo || has_out_hi;
  return l;
}

util::Result<const gguf::TensorInfo*> Weights::find(const std::string& name,
                                                    std::initializer_list<int64_t> shape) const {
  const gguf::TensorInfo* t = file_.find_tensor(name);
  if (!t) return util::errorf("mmproj: {}: required tensor '{}' is missing", file_.name(), name);
  const std::vector<int64_t> want(shape);
  for (size_t d = 0; d < gguf::kMaxDims; ++d) {
    if (static_cast<int64_t>(t->ne[d]) != (d < want.size() ? want[d] : 1)) {
      return util::errorf("mmproj: {}: tensor '{}' does not have the shape the metadata implies",
                          file_.name(), name);
    }
  }
  return t;
}

util::Result<const float*> Weights::host_floats(const std::string& name,
                                                std::initializer_list<int64_t> shape) {
  HR_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, find(name, shape));
  if (t->type == gguf::TensorType::kF32) return reinterpret_cast<const float*>(t->data.data());
  std::vector<float> values(t->n_elements);
  auto status = tensor::dequantize_row(t->type, t->data.data(), values.data(),
                                       static_cast<int64_t>(t->n_elements));
  if (!status)
    return std::move(status).error().with_context(fmt::format("mmproj: tensor '{}'", name));
  converted_.push_back(std::move(values));
  return converted_.back().data();
}

util::Result<kernels::Matrix> Weights::flat_matrix(const std::string& name,
                                                   std::initializer_list<int64_t> shape) {
  HR_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, find(name, shape));
  const std::vector<int64_t> want(shape);
  if (!tensor::can_dequantize(t->type)) {
    return util::errorf(
        "mmproj: {}: tensor '{}' is stored as {}, which headroom cannot compute with", file_.name(),
        name, gguf::tensor_type_name(t->type));
  }
  kernels::Matrix m;
  m.type = t->type;
  m.n_rows = want.back();
  m.n_cols = static_cast<int64_t>(t->n_elements) / m.n_rows;
  if (tensor::block_values(t->type) > 1 && m.n_cols % tensor::block_values(t->type) != 0) {
    return util::errorf("mmproj: {}: tensor '{}' rows are not whole blocks of {}", file_.name(),
                        name, gguf::tensor_type_name(t->type));
  }
  m.row_bytes = static_cast<size_t>(tensor::row_bytes(t->type, m.n_cols));
  m.data = t->data.data();
  if (placer_) {
    HR_ASSIGN_OR_RETURN(m.data, placer_->place(name, t->data));
  }
  return m;
}

}  // namespace mm

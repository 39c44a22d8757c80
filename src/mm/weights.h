// Binding an encoder's tensors from the projector file (model::Binder underneath), the clipped
// linear layers of Gemma 4's encoders, and the 4-D convolution kernels stored flat.
#pragma once

#include <memory>
#include <string>

#include "kernels/ops.h"
#include "model/weights.h"
#include "util/result.h"

namespace mm {

// Gemma4ClippableLinear: y = clamp(W · clamp(x, in_lo, in_hi), out_lo, out_hi). The bounds are
// optional [1] tensors beside the weight (NAME.input_min, …); absent ones do not clamp.
struct Linear {
  kernels::Matrix w;  // [n_out] × [n_in]
  bool clamp_in = false, clamp_out = false;
  float in_lo = 0, in_hi = 0, out_lo = 0, out_hi = 0;
};

// y [rows][n_out] = Linear(x [rows][n_in]). A clamped input is copied to `scratch` first (x may
// feed other layers with other bounds).
void apply(kernels::Backend& ops, const Linear& l, const float* x, float* y, int rows,
           float* scratch);

class Weights {
 public:
  // Binds into the file mapping on a host backend, into the backend's memory otherwise.
  Weights(const gguf::File& file, kernels::Backend& backend);

  util::Result<Linear> linear(const std::string& base, int64_t n_in, int64_t n_out);
  // A matrix [n_mats · n_out] × [n_in] (ggml {n_in, n_out, n_mats}).
  util::Result<kernels::Matrix> matrix(const std::string& name, int64_t n_in, int64_t n_out,
                                       int64_t n_mats = 1) {
    return binder_->matrix(name, n_in, n_out, n_mats);
  }
  std::optional<util::Result<float>> optional_scalar(const std::string& name) {
    return binder_->optional_scalar(name);
  }
  util::Result<const float*> vector(const std::string& name, int64_t n) {
    return binder_->vector(name, n);
  }
  // A vector's values in host memory whatever the backend (for the host to compute with).
  util::Result<const float*> host_vector(const std::string& name, int64_t n) {
    return host_->vector(name, n);
  }
  std::optional<util::Result<const float*>> optional_vector(const std::string& name, int64_t n) {
    return binder_->optional_vector(name, n);
  }
  // A tensor whose first dims make one row: shape {ne0, …} with rows = the last dim, as a matrix
  // of n_cols = the product of the others (a convolution kernel [out][in][kh][kw]).
  util::Result<kernels::Matrix> flat_matrix(const std::string& name,
                                            std::initializer_list<int64_t> shape);
  // A tensor of any shape as f32 values in host memory (converted once if stored otherwise), for
  // the host-memory ops: a depthwise kernel [n_channels][K] (ggml {K, n_channels}).
  util::Result<const float*> host_floats(const std::string& name,
                                         std::initializer_list<int64_t> shape);
  // Weights placed in the backend's own memory (0 on a host backend).
  size_t placed_bytes() const { return placer_ ? placer_->bytes() : 0; }
  bool has(const std::string& name) const { return binder_->has(name); }

 private:
  const gguf::File& file_;
  std::unique_ptr<model::BackendPlacer> placer_;
  std::unique_ptr<model::Binder> binder_;
  std::unique_ptr<model::Binder> host_;  // binds into the mapping, never placed
  std::vector<std::vector<float>> converted_;

  util::Result<const gguf::TensorInfo*> find(const std::string& name,
                                             std::initializer_list<int64_t> shape) const;
};

}  // namespace mm

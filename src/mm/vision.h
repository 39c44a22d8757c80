// mm::VisionEncoder — Gemma 4's ViT (Hugging Face's Gemma4VisionModel) and its embedder into the
// text model, on any kernels::Backend, with the ops of the interface only:
//   patch embedding (a matrix product over each patch's pixels) + learned x and y position rows;
//   per block: RMSNorm, q/k/v, per-head q/k RMSNorm and a weightless v RMSNorm, 2-D RoPE (the
//   head's first half rotated by the patch's column, the second by its row), attention of every
//   patch to every patch (scale 1), output, post-norm, residual; RMSNorm, GeGLU FFN, post-norm,
//   residual;
//   average pooling of each k×k block of patches into one soft token, × √E, standardisation;
//   a weightless RMSNorm and the projection to the text model's width.
#pragma once

#include <memory>
#include <span>

#include "gguf/file.h"
#include "kernels/buffer.h"
#include "kernels/ops.h"
#include "mm/encoder.h"
#include "mm/image_preprocess.h"
#include "mm/projector.h"
#include "mm/weights.h"
#include "model/scratch.h"
#include "util/result.h"

namespace mm {

class VisionEncoder {
 public:
  // Binds the vision tower of `file` on `ops`, with activations for images of up to `max_tokens`
  // soft tokens.
  static util::Result<std::unique_ptr<VisionEncoder>> load(const gguf::File& file,
                                                           const ProjectorSpec& projector,
                                                           kernels::Backend& ops, int max_tokens);
  // Activation bytes for images of up to `max_tokens` (the same layout load() allocates).
  static size_t workspace_bytes(const VisionSpec& spec, int n_embd_text, int max_tokens);

  // Encodes one preprocessed image: out [image.n_tokens][n_embd_text] (host memory).
  util::Status encode(const ImagePatches& image, std::span<float> out, const Trace& trace = {});

  int max_tokens() const { return max_tokens_; }
  size_t workspace_bytes() const { return workspace_.size(); }
  // Weights in the backend's memory: those placed, and −std_bias in place of std_bias.
  size_t placed_weight_bytes() const {
    return weights_.placed_bytes() + (ops_.host_memory() ? 0 : neg_std_bias_.size());
  }

  ~VisionEncoder();

 private:
  struct Layer;
  struct Scratch;
  VisionEncoder(const gguf::File& file, const ProjectorSpec& projector, kernels::Backend& ops,
                int max_tokens);
  util::Status bind();
  void attention(const Layer& w, int n);
  void rope_2d(float* x, int n, int n_head);
  void feed_forward(const Layer& w, int n);
  void pool(const ImagePatches& image);
  void trace_stage(const Trace& trace, std::string_view name, const float* values, int64_t rows,
                   int64_t cols);

  VisionSpec spec_;
  int n_embd_text_ = 0;
  kernels::Backend& ops_;
  int max_tokens_ = 0;
  int max_patches_ = 0;
  Weights weights_;
  kernels::Matrix patch_embd_, pos_x_table_, pos_y_table_, projection_;
  const float* std_scale_ = nullptr;
  kernels::Buffer neg_std_bias_;  // −std_bias, in the ops' memory
  std::vector<Layer> layers_;
  model::Workspace workspace_;
  std::unique_ptr<Scratch> s_;
  // Arrays the host fills once (or per image) for rope and attention.
  kernels::Staged<int32_t> pos_x_, pos_y_, query_pos_, cell_pos_;
  kernels::Staged<float> inv_freq_;
  kernels::Staged<kernels::KvSpan> span_;
  kernels::Staged<const kernels::KvSpan*> spans_;
  kernels::Staged<const uint8_t*> k_block_, v_block_;
};

}  // namespace mm

// mm::AudioEncoder — Gemma 4's conformer (Hugging Face's Gemma4AudioModel, after USM) and its
// embedder into the text model, on a kernels::Backend that computes in host memory:
//   sub-sampling: two 3×3 stride-2 convolutions over (time, mel), each with a LayerNorm over
//   channels and ReLU (frames past the clip zeroed first), the (frequency, channel) features
//   projected to the encoder width — 4× fewer frames, one soft token per 40 ms;
//   per block: ½·FFN (SiLU); local self-attention (each token attends itself and the 11 before,
//   with a learned bias by distance and a logit cap of 50); a light convolution module (GLU,
//   causal depthwise conv, norm, SiLU); ½·FFN; output norm;
//   the output projection, a weightless RMSNorm and the projection to the text model's width.
//
// The tower's small ops (LayerNorm, GLU, the depthwise convolution, local attention) are the
// kernels interface's host defaults (kernels/ops.h), so it runs where the host computes: the plan
// places it on the CPU. Its matrix products are the backend's.
#pragma once

#include <memory>
#include <span>

#include "gguf/file.h"
#include "kernels/buffer.h"
#include "kernels/ops.h"
#include "mm/audio.h"
#include "mm/encoder.h"
#include "mm/projector.h"
#include "mm/weights.h"
#include "model/scratch.h"
#include "util/result.h"

namespace mm {

class AudioEncoder {
 public:
  // Binds the audio tower of `file` on `ops`, with activations for clips of up to `max_seconds`.
  static util::Result<std::unique_ptr<AudioEncoder>> load(const gguf::File& file,
                                                          const ProjectorSpec& projector,
                                                          kernels::Backend& ops,
                                                          double max_seconds);
  // Activation bytes for clips of up to `max_seconds` (the same layout load() allocates).
  static size_t workspace_bytes(const AudioSpec& spec, int n_embd_text, double max_seconds);
  // The most soft tokens a clip of `max_seconds` becomes.
  static int max_tokens(double max_seconds);

  // Encodes one clip's features: out [tokens][n_embd_text] (host memory), tokens =
  // ⌈⌈mel.n_valid/2⌉/2⌉.
  util::Status encode(const MelFeatures& mel, std::span<float> out, const Trace& trace = {});

  size_t workspace_bytes() const { return workspace_.size(); }
  size_t placed_weight_bytes() const { return weights_.placed_bytes(); }
  ~AudioEncoder();

 private:
  struct Layer;
  struct Scratch;
  AudioEncoder(const gguf::File& file, const ProjectorSpec& projector, kernels::Backend& ops,
               double max_seconds);
  util::Status bind();
  void subsample(const MelFeatures& mel, int n_tokens);
  void feed_forward(const Layer& w, int suffix, int n);
  void attention(const Layer& w, int il, int n);
  void light_conv(const Layer& w, int n);

  AudioSpec spec_;
  int n_embd_text_ = 0;
  kernels::Backend& ops_;
  double max_seconds_ = 0;
  int max_tokens_ = 0;
  Weights weights_;
  kernels::Matrix conv_[2], input_proj_, output_proj_, projection_;
  const float* conv_norm_[2]{};
  const float* output_bias_ = nullptr;
  std::vector<Layer> layers_;
  std::vector<float> rel_;          // [layer][window][n_embd]: the distance bias keys, per layer
  std::vector<float> query_scale_;  // [layer][n_embd]: q scale × per-dim scale, tiled over heads
  model::Workspace workspace_;
  std::unique_ptr<Scratch> s_;
};

}  // namespace mm

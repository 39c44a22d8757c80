// mm::Encoders — a loaded projector's encoders as a run uses them: the vision encoder on the
// backend the text model runs on, the audio encoder on a host backend, sized for the largest
// image and clip the plan allows; and the byte counts the planner prices them with, from the
// same layouts.
#pragma once

#include <memory>
#include <span>

#include "gguf/file.h"
#include "kernels/ops.h"
#include "mm/audio.h"
#include "mm/audio_encoder.h"
#include "mm/image_preprocess.h"
#include "mm/media.h"
#include "mm/projector.h"
#include "mm/vision.h"
#include "util/result.h"

namespace mm {

// The largest inputs a run takes. 0 turns a modality off.
struct MediaLimits {
  int image_tokens = 0;      // the soft-token budget of the largest image (70 … 1120)
  double audio_seconds = 0;  // the longest clip (at most 30 s)
};

// What the planner prices (bytes) for a projector under limits.
struct EncoderCosts {
  uint64_t vision_weights = 0, vision_activations = 0;
  uint64_t audio_weights = 0, audio_activations = 0;
  // Host memory of preparing one medium: the largest decoded image (and a progressive JPEG's
  // coefficients), its resized copy and patches; the longest clip at the highest sample rate, at
  // 16 kHz and its features.
  uint64_t preparation = 0;
  int max_image_tokens = 0, max_audio_tokens = 0;
  int max_media_tokens() const { return std::max(max_image_tokens, max_audio_tokens); }
  int64_t max_matmul_cols = 0;  // the widest input of the encoders' matrix products
};
EncoderCosts encoder_costs(const gguf::File& file, const ProjectorSpec& projector,
                           const MediaLimits& limits);
// Refuses limits the projector cannot serve (an image budget without a vision encoder, …).
util::Status check_limits(const ProjectorSpec& projector, const MediaLimits& limits);

class Encoders {
 public:
  // `vision_ops` runs the vision encoder (the text model's backend); `audio_ops` the audio one (a
  // host backend). The file must outlive the encoders.
  static util::Result<std::unique_ptr<Encoders>> load(const gguf::File& file,
                                                      ProjectorSpec projector,
                                                      const MediaLimits& limits,
                                                      kernels::Backend& vision_ops,
                                                      kernels::Backend& audio_ops);

  const ProjectorSpec& projector() const { return projector_; }
  const MediaLimits& limits() const { return limits_; }
  // Embeddings of one medium: out [media.n_tokens][n_embd_text] (host memory).
  util::Status encode(const Media& media, std::span<float> out, const Trace& trace = {});
  // Bytes held, for checking the plan: weights placed in device memory, activations.
  size_t placed_weight_bytes() const;
  size_t workspace_bytes() const;

 private:
  Encoders(ProjectorSpec projector, const MediaLimits& limits)
      : projector_(std::move(projector)), limits_(limits) {}
  ProjectorSpec projector_;
  MediaLimits limits_;
  std::unique_ptr<VisionEncoder> vision_;
  std::unique_ptr<AudioEncoder> audio_;
  ImagePatches patches_;  // the image being encoded, in the encoder's input layout
  MelFeatures mel_;       // the clip being encoded
};

}  // namespace mm

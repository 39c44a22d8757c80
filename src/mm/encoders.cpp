// Loading the encoders a run plans, and the planner's byte counts for them (encoders.h).
#include "mm/encoders.h"

#include <algorithm>

namespace mm {
namespace {

// The most samples a clip decodes to before resampling: the longest clip at the highest rate
// decode_audio accepts (mono after downmixing, read in blocks of 4096 frames of 64 channels).
constexpr uint64_t kMaxSourceRate = 384000;
constexpr uint64_t kDecodeBlockFloats = 4096 * 64;

uint64_t tower_weight_bytes(const gguf::File& file, Tower tower) {
  uint64_t bytes = 0;
  for (const auto& t : file.tensors()) bytes += held_by_encoder(t, tower) ? t.n_bytes : 0;
  return bytes;
}

}  // namespace

util::Status check_limits(const ProjectorSpec& projector, const MediaLimits& limits) {
  if (limits.image_tokens > 0) {
    if (!projector.vision)
      return util::errorf("mmproj: {} has no vision encoder: images cannot be taken",
                          projector.name);
    HR_TRY(check_image_tokens(limits.image_tokens));
  }
  if (limits.audio_seconds > 0) {
    if (!projector.audio)
      return util::errorf("mmproj: {} has no audio encoder: audio cannot be taken", projector.name);
    if (limits.audio_seconds > kMaxAudioSeconds)
      return util::errorf("--audio-seconds {}: Gemma 4 takes clips of at most {} s",
                          limits.audio_seconds, kMaxAudioSeconds);
  }
  return {};
}

EncoderCosts encoder_costs(const gguf::File& file, const ProjectorSpec& projector,
                           const MediaLimits& limits) {
  EncoderCosts c;
  if (projector.vision && limits.image_tokens > 0) {
    const VisionSpec& v = *projector.vision;
    c.max_image_tokens = limits.image_tokens;
    c.vision_weights = tower_weight_bytes(file, Tower::kVision);
    c.vision_activations =
        VisionEncoder::workspace_bytes(v, projector.n_embd_text, limits.image_tokens);
    c.max_matmul_cols =
        std::max<int64_t>({v.patch_values(), v.n_embd, int64_t{v.n_head} * v.head_dim, v.n_ff});
    const uint64_t patches =
        uint64_t{static_cast<unsigned>(limits.image_tokens)} * v.pooling * v.pooling;
    const uint64_t resized_pixels = patches * v.patch_size * v.patch_size;
    // Decoded RGB, a progressive JPEG's coefficients (decode_image's libjpeg limit), the resize's
    // intermediate and result, the patches the encoder reads. (The embeddings it writes are the
    // engine's, planned with the batch's: plan/media.h.)
    c.preparation += kMaxImagePixels * 3 + kMaxImagePixels * 6 + (16u << 20);
    c.preparation += std::max<uint64_t>(kMaxImagePixels, resized_pixels) * 3 + resized_pixels * 3;
    c.preparation += patches * v.patch_values() * sizeof(float);
  }
  if (projector.audio && limits.audio_seconds > 0) {
    const AudioSpec& a = *projector.audio;
    c.max_audio_tokens = AudioEncoder::max_tokens(limits.audio_seconds);
    c.audio_weights = tower_weight_bytes(file, Tower::kAudio);
    c.audio_activations =
        AudioEncoder::workspace_bytes(a, projector.n_embd_text, limits.audio_seconds);
    c.max_matmul_cols = std::max<int64_t>({c.max_matmul_cols, a.n_embd, a.n_ff, a.n_out,
                                           int64_t{a.conv_channels[0]} * 9,
                                           int64_t{a.n_freq_sub} * a.conv_channels[1]});
    const uint64_t seconds = static_cast<uint64_t>(std::ceil(limits.audio_seconds));
    const uint64_t frames = seconds * 16000 / 160 + 2;
    c.preparation = std::max(
        c.preparation, (seconds * kMaxSourceRate + kDecodeBlockFloats) * sizeof(float) +
                           seconds * 16000 * sizeof(float) * 2 + frames * a.n_mel * sizeof(float));
  }
  return c;
}

util::Result<std::unique_ptr<Encoders>> Encoders::load(const gguf::File& file,
                                                       ProjectorSpec projector,
                                                       const MediaLimits& limits,
                                                       kernels::Backend& vision_ops,
                                                       kernels::Backend& audio_ops) {
  HR_TRY(check_limits(projector, limits));
  std::unique_ptr<Encoders> e(new Encoders(std::move(projector), limits));
  if (limits.image_tokens > 0) {
    HR_ASSIGN_OR_RETURN(e->vision_,
                        VisionEncoder::load(file, e->projector_, vision_ops, limits.image_tokens));
  }
  if (limits.audio_seconds > 0) {
    HR_ASSIGN_OR_RETURN(e->audio_,
                        AudioEncoder::load(file, e->projector_, audio_ops, limits.audio_seconds));
  }
  return e;
}

util::Status Encoders::encode(const Media& media, std::span<float> out, const Trace& trace) {
  if (media.kind == MediaKind::kImage) {
    if (!vision_)
      return util::errorf("this run takes no images — load it with --mmproj and --image-tokens");
    patchify(media.image, *projector_.vision, patches_);
    return vision_->encode(patches_, out, trace);
  }
  if (!audio_)
    return util::errorf(
        "this run takes no audio — load it with an mmproj that has an audio encoder");
  HR_ASSIGN_OR_RETURN(mel_, log_mel(media.samples, projector_.audio->n_mel));
  return audio_->encode(mel_, out, trace);
}

size_t Encoders::placed_weight_bytes() const {
  return (vision_ ? vision_->placed_weight_bytes() : 0) +
         (audio_ ? audio_->placed_weight_bytes() : 0);
}

size_t Encoders::workspace_bytes() const {
  return (vision_ ? vision_->workspace_bytes() : 0) + (audio_ ? audio_->workspace_bytes() : 0);
}

}  // namespace mm

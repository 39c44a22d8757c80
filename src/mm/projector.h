// mm::ProjectorSpec — Gemma 4's vision and audio encoders as a projector GGUF ("mmproj", in the
// layout of llama.cpp's converter) describes them: read once, checked against the text model.
//
// The file: general.architecture "clip"; clip.has_vision_encoder / clip.has_audio_encoder;
// clip.vision.projector_type "gemma4v" and clip.audio.projector_type "gemma4a" (or
// clip.projector_type for a single encoder); clip.{vision,audio}.{embedding_length,
// feed_forward_length, block_count, attention.head_count, projection_dim}; tensors v.* (the
// ViT), a.* (the conformer), mm.input_projection / mm.a.input_projection (the embedders into the
// text model). What Gemma 4's configuration fixes and the file does not carry (pooling 3, vision
// RoPE base 100, the conformer's chunking and logit cap) is written here, from Hugging Face's
// Gemma4VisionConfig / Gemma4AudioConfig defaults.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gguf/file.h"
#include "model/spec.h"
#include "util/result.h"

namespace mm {

// The ViT (Gemma4VisionModel) and its embedder (Gemma4MultimodalEmbedder).
struct VisionSpec {
  int n_embd = 0;  // E
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_ff = 0;
  int n_layer = 0;
  int patch_size = 0;   // p: pixels per patch side
  int pooling = 3;      // k: each k×k block of patches averages into one soft token
  int n_positions = 0;  // rows of each learned position table: the most patches per side
  float eps = 1e-6f;
  float rope_theta = 100.0f;  // 2-D RoPE base (Gemma4VisionConfig)
  bool standardize = false;   // v.std_bias / v.std_scale present
  bool clipped = false;       // some linear layer has clip bounds (Gemma4ClippableLinear)
  int patch_values() const { return 3 * patch_size * patch_size; }
};

// The conformer (Gemma4AudioModel) and its embedder.
struct AudioSpec {
  int n_embd = 0;  // hidden width
  int n_head = 0;
  int head_dim = 0;
  int n_ff = 0;
  int n_layer = 0;
  int n_mel = 128;         // log-mel bins the features have
  int conv_channels[2]{};  // the two sub-sampling convolutions' output channels
  int n_freq_sub = 0;      // mel bins left after them: ⌈⌈n_mel/2⌉/2⌉
  int conv_kernel = 0;     // the depthwise convolution's width
  int n_out = 0;           // output projection width (output_proj_dims)
  float eps = 1e-6f;       // llama.cpp notes converted files may store a wrong value: fixed
  int window = 12;        // a token attends itself and the 11 before (attention_context_left − 1)
  float softcap = 50.0f;  // attention_logit_cap
  float residual_weight = 0.5f;
  bool clipped = false;     // some linear layer has clip bounds
  int sample_rate = 16000;  // the features' rate
};

struct ProjectorSpec {
  std::string name;     // general.name, or the file name
  int n_embd_text = 0;  // the text model width the embedders project to
  std::optional<VisionSpec> vision;
  std::optional<AudioSpec> audio;
};

// Reads and validates the projector's metadata and tensor shapes (not its weights). Refuses, in
// one line, a file that is not a Gemma 4 projector.
util::Result<ProjectorSpec> projector_from_gguf(const gguf::File& file);

// Refuses, in one line, a projector made for another text model.
util::Status check_projector_fits(const ProjectorSpec& projector, const model::Spec& text,
                                  std::string_view text_name);

// Which encoder a projector tensor belongs to (the embedder counts with its encoder).
enum class Tower { kVision, kAudio, kOther };
Tower tower_of(std::string_view tensor_name);
// Whether an encoder holds a tensor of its tower while it runs (in the file mapping or placed in a
// device's memory): all but the one-value ones (clip bounds, scales), whose values it reads once
// into its own parameters. What the plan prices as the tower's weights.
bool held_by_encoder(const gguf::TensorInfo& tensor, Tower tower);
std::string_view tower_name(Tower tower);

}  // namespace mm

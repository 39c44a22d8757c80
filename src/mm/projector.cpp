// Projector metadata and tensor-table checks: what a Gemma 4 mmproj must hold, named when absent.
#include "mm/projector.h"

#include <limits>

namespace mm {
namespace {

class Reader {
 public:
  explicit Reader(const gguf::File& file) : file_(file) {}

  util::Error error(std::string_view what) const {
    return util::errorf("mmproj: {}: {}", file_.name(), what);
  }

  util::Result<int> integer(const std::string& key) const {
    const gguf::Value* v = file_.find(key);
    if (!v)
      return error(fmt::format("required key '{}' is missing — is this a Gemma 4 mmproj?", key));
    auto i = v->as_i64();
    if (!i || *i <= 0 || *i > std::numeric_limits<int32_t>::max())
      return error(fmt::format("key '{}' must be a positive integer", key));
    return static_cast<int>(*i);
  }

  util::Result<float> number(const std::string& key, float fallback) const {
    const gguf::Value* v = file_.find(key);
    if (!v) return fallback;
    auto f = v->as_f64();
    if (!f || !(*f > 0)) return error(fmt::format("key '{}' must be a positive number", key));
    return static_cast<float>(*f);
  }

  bool has(const std::string& key) const { return file_.find(key) != nullptr; }

  bool flag(const std::string& key) const {
    const gguf::Value* v = file_.find(key);
    return v && v->as_bool().value_or(false);
  }

  std::string string(const std::string& key) const {
    const gguf::Value* v = file_.find(key);
    auto s = v ? v->as_string() : std::nullopt;
    return s ? std::string(*s) : std::string();
  }

  // The tensor's shape, ne[0] first; an error naming it when absent.
  util::Result<const gguf::TensorInfo*> tensor(const std::string& name) const {
    const gguf::TensorInfo* t = file_.find_tensor(name);
    if (!t)
      return error(fmt::format("required tensor '{}' is missing — the file is incomplete", name));
    return t;
  }

  util::Status shape(const std::string& name, std::initializer_list<uint64_t> expected) const {
    HR_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, tensor(name));
    std::vector<uint64_t> want(expected);
    for (size_t d = 0; d < gguf::kMaxDims; ++d) {
      if (t->ne[d] != (d < want.size() ? want[d] : 1)) {
        std::string got = fmt::format("{}", t->ne[0]), exp = fmt::format("{}", want[0]);
        for (uint32_t i = 1; i < t->n_dims; ++i) got += fmt::format(", {}", t->ne[i]);
        for (size_t i = 1; i < want.size(); ++i) exp += fmt::format(", {}", want[i]);
        return error(fmt::format("tensor '{}' has shape [{}] but the metadata implies [{}]", name,
                                 got, exp));
      }
    }
    return {};
  }

 private:
  const gguf::File& file_;
};

// Whether any tensor of the tower starting with `prefix` is a clip bound of a linear layer.
bool has_clip_bounds(const gguf::File& file, std::string_view prefix) {
  for (const auto& t : file.tensors()) {
    if (t.name.starts_with(prefix) &&
        (t.name.ends_with(".input_min") || t.name.ends_with(".input_max") ||
         t.name.ends_with(".output_min") || t.name.ends_with(".output_max")))
      return true;
  }
  return false;
}

// The projector type of one encoder: its own key, or the file's single type.
std::string projector_type(const Reader& r, std::string_view modality, bool only_encoder) {
  std::string type = r.string(fmt::format("clip.{}.projector_type", modality));
  if (type.empty() && only_encoder) type = r.string("clip.projector_type");
  return type;
}

util::Result<VisionSpec> vision_spec(const Reader& r, int n_embd_text) {
  VisionSpec v;
  HR_ASSIGN_OR_RETURN(v.n_embd, r.integer("clip.vision.embedding_length"));
  HR_ASSIGN_OR_RETURN(v.n_ff, r.integer("clip.vision.feed_forward_length"));
  HR_ASSIGN_OR_RETURN(v.n_layer, r.integer("clip.vision.block_count"));
  HR_ASSIGN_OR_RETURN(v.n_head, r.integer("clip.vision.attention.head_count"));
  HR_ASSIGN_OR_RETURN(v.patch_size, r.integer("clip.vision.patch_size"));
  HR_ASSIGN_OR_RETURN(v.eps, r.number("clip.vision.attention.layer_norm_epsilon", 1e-6f));
  if (r.has("clip.vision.projector.scale_factor")) {
    HR_ASSIGN_OR_RETURN(v.pooling, r.integer("clip.vision.projector.scale_factor"));
  }
  // The head dimension is the q-norm's length (E / heads in every released file, 72 on 31B).
  HR_ASSIGN_OR_RETURN(const gguf::TensorInfo* q_norm, r.tensor("v.blk.0.attn_q_norm.weight"));
  v.head_dim = static_cast<int>(q_norm->ne[0]);
  HR_ASSIGN_OR_RETURN(const gguf::TensorInfo* wk, r.tensor("v.blk.0.attn_k.weight"));
  if (v.head_dim <= 0 || v.head_dim % 4 != 0 || v.head_dim > model::kMaxHeadDim ||
      static_cast<int>(wk->ne[1]) % v.head_dim != 0)
    return r.error(
        fmt::format("vision head dimension {} must be a multiple of 4 (2-D RoPE halves) "
                    "that divides the key width {}",
                    v.head_dim, wk->ne[1]));
  v.n_head_kv = static_cast<int>(wk->ne[1]) / v.head_dim;
  if (v.n_head % v.n_head_kv != 0)
    return r.error(fmt::format("{} vision heads cannot share {} key heads", v.n_head, v.n_head_kv));
  HR_ASSIGN_OR_RETURN(const gguf::TensorInfo* pos, r.tensor("v.position_embd.weight"));
  v.n_positions = static_cast<int>(pos->ne[1]);
  const uint64_t E = v.n_embd, p = v.patch_size;
  HR_TRY(r.shape("v.patch_embd.weight", {p, p, 3, E}));
  HR_TRY(r.shape("v.position_embd.weight", {E, static_cast<uint64_t>(v.n_positions), 2}));
  HR_TRY(r.shape("mm.input_projection.weight", {E, static_cast<uint64_t>(n_embd_text)}));
  v.standardize = r.tensor("v.std_bias").ok() && r.tensor("v.std_scale").ok();
  return v;
}

util::Result<AudioSpec> audio_spec(const Reader& r) {
  AudioSpec a;
  HR_ASSIGN_OR_RETURN(a.n_embd, r.integer("clip.audio.embedding_length"));
  HR_ASSIGN_OR_RETURN(a.n_ff, r.integer("clip.audio.feed_forward_length"));
  HR_ASSIGN_OR_RETURN(a.n_layer, r.integer("clip.audio.block_count"));
  HR_ASSIGN_OR_RETURN(a.n_head, r.integer("clip.audio.attention.head_count"));
  HR_ASSIGN_OR_RETURN(a.n_mel, r.integer("clip.audio.num_mel_bins"));
  if (a.n_embd % a.n_head != 0 || a.n_embd % 2 != 0)
    return r.error(
        fmt::format("audio width {} is not a multiple of its {} heads", a.n_embd, a.n_head));
  a.head_dim = a.n_embd / a.n_head;
  if (a.head_dim > model::kMaxHeadDim) return r.error("audio head dimension too large");
  HR_ASSIGN_OR_RETURN(const gguf::TensorInfo* conv0, r.tensor("a.conv1d.0.weight"));
  HR_ASSIGN_OR_RETURN(const gguf::TensorInfo* conv1, r.tensor("a.conv1d.1.weight"));
  a.conv_channels[0] = static_cast<int>(conv0->ne[3]);
  a.conv_channels[1] = static_cast<int>(conv1->ne[3]);
  const uint64_t c0 = a.conv_channels[0], c1 = a.conv_channels[1], H = a.n_embd;
  HR_TRY(r.shape("a.conv1d.0.weight", {3, 3, 1, c0}));
  HR_TRY(r.shape("a.conv1d.1.weight", {3, 3, c0, c1}));
  a.n_freq_sub = ((a.n_mel + 1) / 2 + 1) / 2;
  HR_TRY(r.shape("a.input_projection.weight", {static_cast<uint64_t>(a.n_freq_sub) * c1, H}));
  HR_ASSIGN_OR_RETURN(const gguf::TensorInfo* dw, r.tensor("a.blk.0.conv_dw.weight"));
  a.conv_kernel = static_cast<int>(dw->ne[0]);
  HR_ASSIGN_OR_RETURN(const gguf::TensorInfo* out, r.tensor("a.pre_encode.out.weight"));
  a.n_out = static_cast<int>(out->ne[1]);
  if (a.n_ff <= 0 || a.conv_kernel <= 0 || a.n_out <= 0)
    return r.error("audio encoder shapes are empty");
  return a;
}

}  // namespace

util::Result<ProjectorSpec> projector_from_gguf(const gguf::File& file) {
  Reader r(file);
  const std::string arch = r.string("general.architecture");
  if (arch != "clip") {
    return r.error(
        fmt::format("general.architecture is '{}', not 'clip' — pass the projector file "
                    "(mmproj-*.gguf) made for this model, not a text model",
                    arch.empty() ? "(none)" : arch));
  }
  ProjectorSpec p;
  p.name = r.string("general.name");
  if (p.name.empty()) p.name = file.name();
  const bool has_vision = r.flag("clip.has_vision_encoder");
  const bool has_audio = r.flag("clip.has_audio_encoder");
  if (!has_vision && !has_audio)
    return r.error("the projector has neither a vision nor an audio encoder");
  const int dim_key_count = (has_vision ? 1 : 0) + (has_audio ? 1 : 0);
  const std::string dim_key =
      has_vision ? "clip.vision.projection_dim" : "clip.audio.projection_dim";
  HR_ASSIGN_OR_RETURN(p.n_embd_text, r.integer(dim_key));
  if (has_vision) {
    const std::string type = projector_type(r, "vision", dim_key_count == 1);
    if (type != "gemma4v") {
      return r.error(
          fmt::format("vision projector type is '{}', but headroom runs Gemma 4's (gemma4v) — "
                      "use the mmproj made for a Gemma 4 model",
                      type.empty() ? "(none)" : type));
    }
    HR_ASSIGN_OR_RETURN(p.vision, vision_spec(r, p.n_embd_text));
    p.vision->clipped = has_clip_bounds(file, "v.");
  }
  if (has_audio) {
    const std::string type = projector_type(r, "audio", dim_key_count == 1);
    if (type != "gemma4a") {
      return r.error(
          fmt::format("audio projector type is '{}', but headroom runs Gemma 4's (gemma4a) — "
                      "use the mmproj made for a Gemma 4 model",
                      type.empty() ? "(none)" : type));
    }
    HR_ASSIGN_OR_RETURN(int audio_dim, r.integer("clip.audio.projection_dim"));
    if (audio_dim != p.n_embd_text)
      return r.error(fmt::format("the audio embedder projects to {} but the vision one to {}",
                                 audio_dim, p.n_embd_text));
    HR_ASSIGN_OR_RETURN(p.audio, audio_spec(r));
    p.audio->clipped = has_clip_bounds(file, "a.");
    HR_TRY(r.shape("mm.a.input_projection.weight",
                   {static_cast<uint64_t>(p.audio->n_out), static_cast<uint64_t>(p.n_embd_text)}));
  }
  return p;
}

util::Status check_projector_fits(const ProjectorSpec& projector, const model::Spec& text,
                                  std::string_view text_name) {
  if (text.arch != model::Arch::kGemma4) {
    return util::errorf(
        "mmproj: {} is a {} model; headroom runs projectors with Gemma 4 models only", text_name,
        model::arch_name(text.arch));
  }
  if (projector.n_embd_text != text.n_embd) {
    return util::errorf(
        "mmproj: {} projects into a model {} wide, but {} is {} wide — use the mmproj made for "
        "this model",
        projector.name, projector.n_embd_text, text_name, text.n_embd);
  }
  return {};
}

Tower tower_of(std::string_view name) {
  if (name.starts_with("v.") || name.starts_with("mm.input_projection")) return Tower::kVision;
  if (name.starts_with("a.") || name.starts_with("mm.a.")) return Tower::kAudio;
  return Tower::kOther;
}

bool held_by_encoder(const gguf::TensorInfo& tensor, Tower tower) {
  return tower_of(tensor.name) == tower && tensor.n_elements > 1;
}

std::string_view tower_name(Tower tower) {
  switch (tower) {
    case Tower::kVision:
      return "vision encoder";
    case Tower::kAudio:
      return "audio encoder";
    case Tower::kOther:
      return "other";
  }
  return "?";
}

}  // namespace mm

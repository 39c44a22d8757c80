// Pricing a projector's encoders and media buffers (media.h).
#include "plan/media.h"

#include <algorithm>

#include "kernels/cpu/matmul.h"
#include "mm/encoders.h"
#include "model/model.h"

namespace plan {
namespace {

bool has_media(const PlanInput& in, const Request& r) {
  return in.projector != nullptr && in.projector_file != nullptr &&
         (r.image_tokens > 0 || r.audio_seconds > 0);
}

// KV bytes per sequence that n more tokens take: every KV-owning layer stores them, a sliding
// layer at most its window.
uint64_t kv_bytes_for_tokens(const model::Spec& spec, const Request& r, int n) {
  uint64_t bytes = 0;
  for (const auto& l : model::kv_layers(spec)) {
    if (!l.owns()) continue;
    const int cells = l.sliding ? std::min(n, l.window) : n;
    bytes += static_cast<uint64_t>(cells) *
             (kv::row_bytes(r.k_type, l.kv_dim()) + kv::row_bytes(r.v_type, l.kv_dim()));
  }
  return bytes;
}

}  // namespace

int64_t media_embedding_rows(const PlanInput& in, const Request& r) {
  if (!has_media(in, r)) return 0;
  const mm::EncoderCosts c = mm::encoder_costs(*in.projector_file, *in.projector, media_limits(r));
  return int64_t{r.n_ubatch} + c.max_media_tokens();
}

mm::MediaLimits media_limits(const Request& r) {
  return {.image_tokens = r.image_tokens, .audio_seconds = r.audio_seconds};
}

int64_t cpu_matmul_cols(const PlanInput& in, const Request& r) {
  const int64_t drafter = in.drafter != nullptr ? model::max_matmul_cols(*in.drafter) : 0;
  return std::max({model::max_matmul_cols(in.spec), media_matmul_cols(in, r), drafter});
}

int64_t media_matmul_cols(const PlanInput& in, const Request& r) {
  if (!has_media(in, r)) return 0;
  return mm::encoder_costs(*in.projector_file, *in.projector, media_limits(r)).max_matmul_cols;
}

util::Status fit_media_batch(const PlanInput& in, Plan& p) {
  Request& r = p.request;
  if (!has_media(in, r)) return {};
  HR_TRY(mm::check_projector_fits(*in.projector, in.spec, in.file.name()));
  HR_TRY(mm::check_limits(*in.projector, media_limits(r)));
  const int largest =
      mm::encoder_costs(*in.projector_file, *in.projector, media_limits(r)).max_media_tokens();
  const int needed = largest + r.n_slots - 1;
  if (largest > r.n_ctx) {
    return util::errorf(
        "plan: an image or clip of {} tokens does not fit a context of {} — raise --ctx or lower "
        "--image-tokens / --audio-seconds",
        largest, r.n_ctx);
  }
  if (r.n_ubatch < needed) {
    p.notes.push_back(
        fmt::format("micro-batch raised from {} to {}: an image or clip of up to {} tokens is "
                    "evaluated in one micro-batch "
                    "(never split), beside one token of each of the other {} slots",
                    r.n_ubatch, needed, largest, r.n_slots - 1));
    r.n_ubatch = needed;
  }
  return {};
}

util::Status add_media_items(const PlanInput& in, Plan& p, int threads) {
  const Request& r = p.request;
  if (!has_media(in, r)) return {};
  const mm::EncoderCosts c = mm::encoder_costs(*in.projector_file, *in.projector, media_limits(r));
  const int compute = p.uses_gpu() ? 1 : 0;
  if (c.vision_weights > 0) {
    p.items.push_back({.name = "vision encoder",
                       .kind = ItemKind::kWeights,
                       .device = compute,
                       .bytes = c.vision_weights});
    p.items.push_back({.name = "vision encoder",
                       .kind = ItemKind::kActivations,
                       .device = compute,
                       .bytes = c.vision_activations});
  }
  if (c.audio_weights > 0) {
    // The audio encoder's small ops run in host memory: it stays on the CPU. Beside a GPU it gets
    // a CPU backend of its own (its matrix products' scratch); on the CPU it shares the model's.
    uint64_t activations = c.audio_activations;
    if (p.uses_gpu())
      activations += kernels::cpu::matmul_scratch_bytes(r.n_ubatch, c.max_matmul_cols, threads);
    p.items.push_back({.name = "audio encoder",
                       .kind = ItemKind::kWeights,
                       .device = 0,
                       .bytes = c.audio_weights});
    p.items.push_back({.name = "audio encoder",
                       .kind = ItemKind::kActivations,
                       .device = 0,
                       .bytes = activations});
  }
  p.items.push_back(
      {.name = "media preparation", .kind = ItemKind::kHost, .device = 0, .bytes = c.preparation});
  p.items.push_back({.name = std::string(kMediaEmbeddingsItem),
                     .kind = ItemKind::kHost,
                     .device = 0,
                     .bytes = static_cast<uint64_t>(media_embedding_rows(in, r)) * in.spec.n_embd *
                              sizeof(float)});
  p.media.image_tokens = c.max_image_tokens;
  p.media.audio_tokens = c.max_audio_tokens;
  p.media.image_kv_bytes = kv_bytes_for_tokens(in.spec, r, c.max_image_tokens);
  p.media.audio_kv_bytes = kv_bytes_for_tokens(in.spec, r, c.max_audio_tokens);
  return {};
}

}  // namespace plan

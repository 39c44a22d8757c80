// What a projector (images, audio: mm/) adds to a plan: its encoders' weights and activations on
// the devices that run them, the host buffers of preparing one medium, the rows of embeddings a
// micro-batch takes, a micro-batch wide enough to hold a whole image or clip, and what one
// medium of the largest planned size costs in context and KV cache.
#pragma once

#include <string_view>

#include "mm/encoders.h"
#include "plan/planner.h"

namespace plan {

// The widest input of the encoders' matrix products under `r` (0 without a projector).
int64_t media_matmul_cols(const PlanInput& in, const Request& r);
// The widest input of a matrix product the run's CPU backend is sized for (its activation
// scratch): the model's, an encoder's or the drafter's.
int64_t cpu_matmul_cols(const PlanInput& in, const Request& r);
// The encoders' limits under `r` (what mm::Encoders::load sizes them for).
mm::MediaLimits media_limits(const Request& r);
// The host rows of embeddings a run holds (0 without media): a micro-batch's, then the largest
// medium's encoded whole (whose rows a micro-batch takes when a reused prefix ends inside it).
int64_t media_embedding_rows(const PlanInput& in, const Request& r);
// The plan item of those rows.
inline constexpr std::string_view kMediaEmbeddingsItem = "media embeddings";

// Raises p.request.n_ubatch so that a whole medium of the largest planned size fits in one
// micro-batch beside one decoding token of every other slot (an image is never split across
// micro-batches: its tokens may attend each other both ways), and says so in the notes.
util::Status fit_media_batch(const PlanInput& in, Plan& p);

// Adds the projector's items: the vision encoder where the text model computes, the audio
// encoder on the CPU (its small ops run in host memory), preparation and embedding buffers on the
// host; and fills p.media.
util::Status add_media_items(const PlanInput& in, Plan& p, int threads);

}  // namespace plan

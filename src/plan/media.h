// What a projector (images, audio: mm/) adds to a plan: its encoders' weights and activations on
// the devices that run them, the host buffers of preparing one medium, the rows of embeddings a
// micro-batch takes, a micro-batch wide enough to hold a whole image or clip, and what one
// medium of the largest planned size costs in context and KV cache.
#pragma once

#include "plan/planner.h"

namespace plan {

// The widest input of the encoders' matrix products under `r` (0 without a projector): the CPU
// kernels size their activation scratch with it.
int64_t media_matmul_cols(const PlanInput& in, const Request& r);

// Raises p.request.n_ubatch so that a whole medium of the largest planned size fits in one
// micro-batch beside one decoding token of every other slot (an image is never split across
// micro-batches: its tokens may attend each other both ways), and says so in the notes.
util::Status fit_media_batch(const PlanInput& in, Plan& p);

// Adds the projector's items: the vision encoder where the text model computes, the audio
// encoder on the CPU (its small ops run in host memory), preparation and embedding buffers on the
// host; and fills p.media.
util::Status add_media_items(const PlanInput& in, Plan& p, int threads);

}  // namespace plan

// Architecture dispatch and what all architectures share.
#include "model/model.h"

#include <algorithm>

#include "model/assistant.h"
#include "model/gemma4.h"
#include "model/llama.h"

namespace model {

kernels::RopeStyle to_kernel(RopeStyle style) {
  return style == RopeStyle::kAdjacent ? kernels::RopeStyle::kAdjacent
                                       : kernels::RopeStyle::kRotateHalf;
}

int gather_output_rows(const Batch& batch, int32_t* rows) {
  if (batch.output.empty()) {
    rows[0] = batch.size() - 1;
    return 1;
  }
  int n = 0;
  for (int t = 0; t < batch.size(); ++t) {
    if (batch.output[t]) rows[n++] = t;
  }
  return n;
}

std::vector<kv::LayerGeometry> kv_layers(const Spec& spec) {
  std::vector<kv::LayerGeometry> out;
  for (const auto& l : spec.layers) {
    out.push_back({.il = l.il,
                   .source = l.kv_source,
                   .sliding = l.is_sliding(),
                   .window = l.window,
                   .n_head_kv = l.n_head_kv,
                   .head_dim = l.head_dim});
  }
  return out;
}

util::Result<std::unique_ptr<Model>> load_model(const gguf::File& file, const Spec& spec,
                                                kernels::Backend& backend,
                                                const LoadOptions& options) {
  switch (spec.arch) {
    case Arch::kLlama:
      return load_llama(file, spec, backend, options);
    case Arch::kGemma4:
      return load_gemma4(file, spec, backend, options);
    case Arch::kGemma4Assistant:
      break;  // drafts beside a target: load_assistant
  }
  return util::errorf("model: architecture {} has no forward pass", arch_name(spec.arch));
}

size_t workspace_bytes(const Spec& spec, int max_batch, bool device) {
  switch (spec.arch) {
    case Arch::kLlama:
      return llama_workspace_bytes(spec, max_batch, device);
    case Arch::kGemma4:
      return gemma4_workspace_bytes(spec, max_batch, device);
    case Arch::kGemma4Assistant:
      return assistant_workspace_bytes(spec, max_batch, device);
  }
  return 0;
}

int64_t max_matmul_cols(const Spec& spec) {
  // A drafter's first product reads [embedding ; hidden state], two target widths.
  int64_t cols = std::max({spec.n_embd, spec.n_embd_per_layer, 2 * spec.n_embd_out});
  for (const LayerSpec& l : spec.layers)
    cols = std::max({cols, int64_t{l.q_dim()}, int64_t{l.n_ff}, int64_t{l.n_ff_exp}});
  return cols;
}

}  // namespace model

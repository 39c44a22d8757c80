// engine::DraftModel — a small model of the target's vocabulary that drafts for speculative
// decoding (--draft-model with an ordinary model file, as llama.cpp's -md): greedy, on a KV cache
// of its own in which each of the engine's slots follows the sequence that slot runs. Before it
// drafts for a sequence it evaluates what of the sequence its cache does not hold — the prompt the
// first time, then the tokens the last step kept — in micro-batches; the K/V of the drafts the
// step rejected are written again, as in the model's own cache.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "engine/draft.h"
#include "gguf/file.h"
#include "kernels/ops.h"
#include "kv/cache.h"
#include "model/model.h"
#include "model/spec.h"
#include "plan/planner.h"
#include "util/result.h"

namespace engine {

class DraftModel {
 public:
  // One sequence to draft for: its tokens so far (its last token not yet evaluated by the model),
  // the engine slot it runs in, and the most tokens to draft after it, appended to `out` (empty
  // on entry).
  struct Want {
    std::span<const int32_t> tokens;
    int slot = 0;
    int most = 0;
    std::vector<int32_t>* out = nullptr;
  };

  // Binds the model's weights on `backend` (the model's: in the file mapping on the CPU, placed in
  // a GPU's memory) and allocates its cache and buffers there as the plan prices them
  // (plan::draft_kv_config, "drafter …" items).
  static util::Result<std::unique_ptr<DraftModel>> load(const gguf::File& file,
                                                        const model::Spec& spec,
                                                        kernels::Backend& backend,
                                                        const plan::Request& request);

  // Drafts greedily for each of `wants` (at most plan::drafter_rows of them, each slot once): all
  // sequences catch up together (one that lacks more than a pass holds, a prompt, catches up a
  // pass's worth a call and drafts nothing until it has caught up), then one pass per draft
  // position. A pass that fails leaves the drafts made so far (drafts are only guesses) and
  // returns its error.
  util::Status draft(std::span<const Want> wants);

  // Its passes' time by rows: one more draft costs a pass.
  const StepCost& pass_cost() const { return pass_cost_; }
  const kv::Cache& cache() const { return cache_; }
  // Its activations and, on a GPU, their page-locked staging.
  size_t workspace_bytes() const { return model_->workspace_bytes() + model_->staging_bytes(); }
  // Weights it copied into a GPU's memory (none on the CPU: they stay in the file mapping).
  size_t placed_weight_bytes() const { return model_->placed_weight_bytes(); }

 private:
  DraftModel() = default;
  util::Status warm_up();
  int catch_up_from(int slot, std::span<const int32_t> tokens);
  void add_row(int32_t token, int32_t pos, int slot, int output_of);
  util::Status draft_rows(std::span<const Want> wants);
  util::Status run_rows(std::span<const Want> wants);

  std::unique_ptr<model::Model> model_;
  kv::Cache cache_;
  // Rewinding a slot further than the model's own steps do (rejected drafts) could leave its
  // sliding layers' rings without the window before the new end: such a slot starts over.
  int max_rewind_ = 0;
  // [slot] the tokens whose K/V the cache holds, by position (plan's "drafter kv bookkeeping").
  std::vector<std::vector<int32_t>> fed_;
  // The pass being assembled ([max_batch] each): its rows, and for each output row the want it
  // drafts for.
  std::vector<int32_t> tokens_, pos_, slot_, owner_;
  std::vector<uint8_t> output_;
  int rows_ = 0, outputs_ = 0;
  StepCost pass_cost_;
  std::vector<float> logits_;  // [drafter rows][n_vocab]: the head's working memory
  std::vector<int32_t> top_ids_;
  std::vector<float> top_logits_;
};

}  // namespace engine

// Drafting with a small model of the target's vocabulary, on a KV cache of its own.
#include "engine/draft_model.h"

#include <algorithm>
#include <chrono>

namespace engine {

util::Result<std::unique_ptr<DraftModel>> DraftModel::load(const gguf::File& file,
                                                           const model::Spec& spec,
                                                           kernels::Backend& backend,
                                                           const plan::Request& request) {
  std::unique_ptr<DraftModel> d(new DraftModel());
  const int max_batch = request.n_ubatch;
  HR_ASSIGN_OR_RETURN(d->model_, model::load_model(file, spec, backend, {.max_batch = max_batch}));
  // On a GPU its cache is in the GPU's memory, as its weights and activations.
  HR_ASSIGN_OR_RETURN(d->cache_,
                      kv::Cache::create(model::kv_layers(spec), plan::draft_kv_config(request),
                                        backend.host_memory() ? nullptr : &backend));
  d->max_rewind_ = request.n_draft;
  d->fed_.resize(request.n_slots);
  for (auto& f : d->fed_) f.reserve(request.n_ctx);
  for (auto* v : {&d->tokens_, &d->pos_, &d->slot_, &d->owner_}) v->resize(max_batch);
  d->output_.resize(max_batch);
  const size_t rows = plan::drafter_rows(request);
  d->logits_.resize(rows * spec.n_vocab);
  d->top_ids_.resize(rows);
  d->top_logits_.resize(rows);
  HR_TRY(d->warm_up());
  return d;
}

// One pass, unpriced: the first faults the weights in (and on a GPU records the one-token pass),
// so that the passes that price drafts (Engine::drafter_pass_seconds) are warm ones.
util::Status DraftModel::warm_up() {
  if (!cache_.reserve(0, 1)) return util::errorf("the draft model's cache cannot hold a position");
  std::vector<int32_t> out;
  const Want want{.slot = 0, .most = 1, .out = &out};
  add_row(0, 0, 0, 0);
  HR_TRY(run_rows(std::span(&want, 1)));
  cache_.release(0);
  fed_[0].clear();
  pass_cost_ = StepCost{};
  return {};
}

// Where `slot` resumes evaluating `tokens`: after the longest prefix of them its cache holds, at
// the last token at the latest (its logits are the first draft), unless that is further back
// than the model rewinds (then from the start, the slot released).
int DraftModel::catch_up_from(int slot, std::span<const int32_t> tokens) {
  std::vector<int32_t>& fed = fed_[slot];
  const size_t n = std::min(fed.size(), tokens.size() - 1);
  auto kept = static_cast<int>(std::mismatch(fed.begin(), fed.begin() + n, tokens.begin()).first -
                               fed.begin());
  if (std::ssize(fed) - kept > max_rewind_) {
    cache_.release(slot);
    kept = 0;
  }
  fed.resize(kept);
  return kept;
}

void DraftModel::add_row(int32_t token, int32_t pos, int slot, int output_of) {
  tokens_[rows_] = token;
  pos_[rows_] = pos;
  slot_[rows_] = slot;
  output_[rows_] = output_of >= 0;
  if (output_of >= 0) owner_[outputs_++] = output_of;
  fed_[slot].push_back(token);
  ++rows_;
}

// Evaluates the rows assembled so far; each output row's pick is its want's next draft.
util::Status DraftModel::run_rows(std::span<const Want> wants) {
  if (rows_ == 0) return {};
  const model::Batch batch{.tokens = std::span(tokens_).first(rows_),
                           .pos = std::span(pos_).first(rows_),
                           .slot = std::span(slot_).first(rows_),
                           .output = std::span(output_).first(rows_)};
  const int outputs = outputs_;
  rows_ = outputs_ = 0;
  const auto started = std::chrono::steady_clock::now();
  HR_TRY(model_->forward(batch, cache_,
                         {.logits = logits_.data(),
                          .top_k = 1,
                          .top_ids = top_ids_.data(),
                          .top_logits = top_logits_.data()}));
  pass_cost_.record(
      static_cast<int>(batch.tokens.size()),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  for (int i = 0; i < outputs; ++i) wants[owner_[i]].out->push_back(top_ids_[i]);
  return {};
}

util::Status DraftModel::draft(std::span<const Want> wants) {
  util::Status status = draft_rows(wants);
  if (!status) {
    // What the failed pass was to write is not in the cache: those slots start over.
    rows_ = outputs_ = 0;
    for (const Want& want : wants) {
      fed_[want.slot].clear();
      cache_.release(want.slot);
    }
  }
  return status;
}

util::Status DraftModel::draft_rows(std::span<const Want> wants) {
  // Catching up: each sequence's tokens the cache lacks, its last one's logits the first draft. A
  // sequence that lacks more than a pass holds (a prompt) catches up on a pass's worth and drafts
  // nothing this step: a long prompt is caught up on over several steps, so that the others'
  // decoding never waits for more than a pass per drafting sequence.
  const int max_batch = static_cast<int>(tokens_.size());
  int longest = 0;
  for (int w = 0; w < std::ssize(wants); ++w) {
    const Want& want = wants[w];
    const int n = static_cast<int>(want.tokens.size());
    const int from = catch_up_from(want.slot, want.tokens);
    if (!cache_.reserve(want.slot, n + want.most - 1)) {
      return util::errorf("the draft model's cache cannot hold {} positions", n + want.most - 1);
    }
    const int end = std::min(n, from + max_batch);
    for (int p = from; p < end; ++p) {
      if (rows_ == max_batch) HR_TRY(run_rows(wants));
      add_row(want.tokens[p], p, want.slot, p == n - 1 ? w : -1);
    }
    if (end == n) longest = std::max(longest, want.most);
  }
  HR_TRY(run_rows(wants));
  // Then one row per sequence and draft position, fed the draft before it.
  for (int k = 1; k < longest; ++k) {
    for (int w = 0; w < std::ssize(wants); ++w) {
      const Want& want = wants[w];
      if (want.most <= k || std::ssize(*want.out) != k) continue;
      add_row(want.out->back(), static_cast<int32_t>(want.tokens.size()) + k - 1, want.slot, w);
    }
    HR_TRY(run_rows(wants));
  }
  return {};
}

}  // namespace engine

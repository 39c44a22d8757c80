// engine::Scheduler — continuous batching, the one way tokens are evaluated: every running
// sequence advances in one batched forward per step; new requests join between steps; long
// prompts are prefilled in chunks; one request alone is just a batch of one.
//
// As in vLLM there is no prefill or decode mode: a sequence has n_computed tokens in the KV
// cache and a target; each step lets n_computed catch up within a token budget, decodes first.
// KV blocks are taken as sequences grow (kv::Cache); when the pool runs out the youngest sequence
// is preempted — its blocks given back, complete ones kept in the prefix cache — and resumed
// later by recomputing what the cache no longer holds. A new request starts from the longest
// prefix of its prompt the cache holds, and waits for a running sequence that is prefilling that
// prefix rather than computing it a second time.
//
// Speculative decoding (plan::Request::n_draft): a decoding sequence may draft tokens after its
// last one (engine/draft.h); the step evaluates them with it and keeps each draft while it equals
// what the sampler picks from the row before, so the output is token for token what decoding
// without drafts gives, and a step may add several tokens to a sequence.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "engine/draft.h"
#include "engine/engine.h"
#include "engine/request.h"

namespace engine {

struct SchedulerOptions {
  int max_queue = 64;  // requests waiting for a slot beyond this are refused
  // What one verified row costs, as a share of a decode step (engine/draft.h); unset: measured
  // from the decode steps. Fixed, how much is drafted no longer depends on timing (tests).
  std::optional<double> draft_row_share;
};

// Why submit() refused a request; the server maps these to HTTP statuses.
enum class Refusal { kNone, kContextExceeded, kQueueFull, kInvalid, kUnknownAdapter };

struct SubmitResult {
  int id = -1;
  Refusal refusal = Refusal::kNone;
  std::string message;  // one line, when refused
};

struct StepStats {
  int n_tokens = 0;  // tokens evaluated in the step
  int n_sequences = 0;
  int n_prefill_tokens = 0;
  int n_preempted = 0;  // sequences preempted to make room in this step
};

// Since the scheduler started.
struct SchedulerCounters {
  uint64_t preemptions = 0;
  uint64_t prompt_tokens = 0;    // of admitted requests
  uint64_t cached_tokens = 0;    // of those, reused from the prefix cache
  uint64_t drafted_tokens = 0;   // speculative decoding: drafted and verified
  uint64_t accepted_tokens = 0;  // of those, kept
};

class Scheduler {
 public:
  Scheduler(Engine& engine, SchedulerOptions options = {});
  ~Scheduler();

  SubmitResult submit(Request request);
  // A running request ends at the next step boundary, freeing its KV cache then; a waiting one
  // leaves the queue at once. Either way on_done reports kCancelled.
  void cancel(int id);
  bool idle() const { return running_.empty() && waiting_.empty(); }
  // Sequences holding a slot; one that finished inside this step no longer counts.
  int n_running() const;
  int n_waiting() const { return static_cast<int>(waiting_.size()); }
  const SchedulerCounters& counters() const { return counters_; }
  // The names of the LoRA adapters the running and the waiting requests use (sorted, each once).
  std::vector<std::string> running_adapters() const;
  std::vector<std::string> waiting_adapters() const;

  // Admits what fits, makes room for this step's tokens (preempting if it must), runs one batched
  // forward, samples, finishes what is done.
  util::Result<StepStats> step();

 private:
  struct Sequence;
  void admit();
  bool admit_one(Sequence& seq, int slot);
  bool waits_for_a_prefill(const Sequence& seq) const;
  void choose_tokens(StepStats& stats);
  int draft(Sequence& seq, int wanted);
  void draft_with_assistant(std::vector<std::pair<Sequence*, int>>& wanted);
  void draft_with_model(std::vector<std::pair<Sequence*, int>>& wanted);
  void keep_hidden(const Sequence& seq, int row);
  void make_room(StepStats& stats);
  void encode_media();
  void preempt(Sequence& seq);
  int assemble_batch();
  int selection_size(int n_batch) const;
  void sample(int n_batch, int k);
  void finish(Sequence& seq, FinishReason reason, const std::string& error = "");
  std::vector<std::string> adapter_names(bool running) const;

  Engine& engine_;
  SchedulerOptions options_;
  int next_id_ = 0;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<int> free_slots_;
  SchedulerCounters counters_;
  // Decode steps' time by rows, the engine's drafter's passes left out (Engine prices those): the
  // drafts' length (engine/draft.h).
  StepCost step_cost_;
  double drafter_seconds_ = 0;  // this step's, in the engine's drafter
  // Batch assembly buffers, sized once to the micro-batch (no allocation per step).
  std::vector<int32_t> batch_tokens_, batch_pos_, batch_slot_;
  std::vector<uint8_t> batch_output_;
  std::vector<int32_t> batch_adapter_;  // model slot per token, −1: none
  std::vector<float> batch_scale_;
  std::vector<Sequence*> batch_owner_;  // sequence whose logits row this output is
  // Media in the batch: rows whose input is an embedding, and the image each row sees both ways
  // on sliding layers (model::Batch); used only when some row is a soft token (of such an image).
  std::vector<uint8_t> batch_embedded_;
  std::vector<int32_t> batch_from_, batch_until_;
  bool batch_has_media_ = false, batch_sees_images_ = false;
  std::vector<float> logits_;
  std::vector<int32_t> top_ids_;  // [logit rows][kMaxTopK] when a step samples from selections
  std::vector<float> top_logits_;
  // A Gemma 4 assistant drafter (Engine::assistant) starts from the model's hidden state at the
  // row that sampled a sequence's last token: each output row's ([logit rows][n_embd]), each
  // slot's latest (and whether it has one since the slot was assigned), and a draft step's rows,
  // which the step overwrites with the next ones ([rows][n_embd]) — plan::draft_hidden_rows.
  std::vector<float> hidden_rows_, slot_hidden_, step_hidden_;
  std::vector<uint8_t> slot_has_hidden_;
  std::vector<int32_t> draft_tokens_, draft_pos_, draft_slot_, draft_ids_;
  std::vector<float> draft_top_;
  // Per step: who the engine's drafter drafts for, and how many; a draft model's form of it
  // (engine/draft_model.h).
  std::vector<std::pair<Sequence*, int>> drafter_wanted_;
  std::vector<DraftModel::Want> model_wants_;
};

// Steps `scheduler` until every request it holds has ended.
util::Status run_until_idle(Scheduler& scheduler);

// The logits after every position of `ids` ([ids.size()][n_vocab]), its media in place: one
// request through a Scheduler of its own, on an engine planned with logits_all_positions, under the
// LoRA adapter named `adapter` (empty: the base model).
util::Result<std::vector<float>> prompt_logits(Engine& engine, std::span<const int32_t> ids,
                                               std::span<const mm::MediaSpan> media = {},
                                               const std::string& adapter = {});

}  // namespace engine

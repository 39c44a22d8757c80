// model::Stage — what a forward pass adds to run on a backend with its own memory (a GPU, see
// kernels/ops.h): weights placed in that memory, RoPE tables uploaded once, and per pass one
// step block — the batch's token ids, positions and how far each sees ahead, every layer's K/V
// destinations and spans, and the KV cache's changed views — uploaded in ONE copy, after which one
// scatter op moves the cache's changes where they belong. The pass then waits once, at the end, for
// its outputs: the top-k logits of each row (what sampling reads), or whole rows of logits when
// sampling needs them.
// On a host backend the step block is plain memory the ops read in place, and nothing is copied.
//
// Unless HEADROOM_RECORD_PASSES=0 (docs/cuda.md), a decode pass — at most kActQ8MaxTokens
// tokens, every one wanting top-k output, none under a LoRA adapter — is recorded the first time
// for its (tokens, k) and replayed after that, upload and outputs included: one graph launch per
// token. Everything a step changes lives in the step block's contents, never in the ops'
// arguments, so a replay needs no update.
#pragma once

#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/buffer.h"
#include "kernels/ops.h"
#include "kv/cache.h"
#include "model/model.h"
#include "model/spec.h"
#include "model/weights.h"
#include "util/result.h"

namespace model {

// Where a step's arrays lie in its step block, for T tokens of an n_layer model.
struct StepLayout {
  size_t tokens = 0, pos = 0, attend_from = 0, attend_until = 0, kv_dst = 0, kv_span = 0,
         n_pieces = 0, pieces = 0, payload = 0;
  size_t end = 0;
  static StepLayout of(int n_layer, int n_tokens);
};
// The cache changes one step block carries (more go up in copies of their own before the pass).
inline constexpr int kStepPieces = 128;
inline constexpr size_t kStepPayloadBytes = 8192;
// Bytes of a step block for up to max_batch tokens.
size_t step_block_bytes(const Spec& spec, int max_batch);
// Logit rows a device computes per chunk: bounds its buffer (8 × 262144 f32 = 8 MiB for Gemma's
// vocabulary) whatever the number of rows that want logits.
inline constexpr int kLogitRows = 8;

// The Stage's regions of a lane's activation workspace (each model's Scratch lays them out, so the
// planner prices them with the rest): the step block the ops read, and on a device the logits
// chunk and the top-k selections ([rows][k] ids, then [rows][k] values, per chunk of rows).
struct StageRegions {
  uint8_t* step_block = nullptr;
  float* logits_chunk = nullptr;
  uint8_t* selections = nullptr;

  template <class Carver>
  static StageRegions lay_out(Carver& c, const Spec& s, int max_batch, bool device) {
    StageRegions r;
    r.step_block = c.template array<uint8_t>(step_block_bytes(s, max_batch));
    if (device) {
      r.logits_chunk = c.floats(static_cast<size_t>(kLogitRows) * s.n_vocab);
      r.selections = c.template array<uint8_t>(selection_bytes(max_batch));
    }
    return r;
  }
  static size_t selection_bytes(int max_batch) {
    return static_cast<size_t>(max_batch) * Outputs::kMaxTopK * (sizeof(int32_t) + sizeof(float));
  }
};
// A device's page-locked rows for max_batch hidden states (Outputs::hidden).
inline size_t hidden_bytes(const Spec& s, int max_batch) {
  return static_cast<size_t>(max_batch) * s.n_embd * sizeof(float);
}

class Stage {
 public:
  Stage() = default;
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;
  ~Stage();

  // `may_record`: whether a pass may be recorded (model::Lanes says no for split or traced passes).
  // `cache_layers`, `hidden`: LoadOptions::cache_layers, LoadOptions::hidden.
  util::Status init(kernels::Backend& ops, const Spec& spec, int max_batch, bool may_record = true,
                    std::vector<int> cache_layers = {}, bool hidden = false);
  // Its regions of the lane's activation workspace, once allocated.
  void attach(const StageRegions& regions) { regions_ = regions; }
  // Where bound weights go: `given` on a host backend (null = the file mapping), a placer in the
  // backend's memory on a device (a caller's own placer is refused there: its pointers would be
  // host memory).
  util::Result<TensorPlacer*> placer(TensorPlacer* given);
  // Bytes of weights placed in the backend's memory.
  size_t placed_bytes() const { return placer_ ? placer_->bytes() : 0; }
  size_t staging_bytes() const {
    return host_block_.size() + host_selections_.size() + host_hidden_.size();
  }

  // Per forward pass, after the cache positions are set: fills the step block for the layers
  // whose cache lives in this lane's memory, sends it up in one copy and scatters the cache's
  // changes. `top_k`, `hidden`: what the pass will hand back (0: whole logits; hidden states or
  // not), which decides whether it may be recorded, and which recording it replays.
  void begin(const Batch& batch, kv::Cache& cache, int top_k, bool hidden);
  const int32_t* tokens() const { return at<int32_t>(layout_.tokens); }
  const int32_t* pos() const { return at<int32_t>(layout_.pos); }
  // The image each token sees both ways on sliding layers (Batch::attend_from, attend_until), or
  // null when the batch has none.
  const int32_t* attend_from() const {
    return sees_images_ ? at<int32_t>(layout_.attend_from) : nullptr;
  }
  const int32_t* attend_until() const {
    return sees_images_ ? at<int32_t>(layout_.attend_until) : nullptr;
  }
  const float* inv_freq(int il) const { return inv_freq_[il].ops(); }
  // Layer il's K/V destinations (each token's cache row) and spans (each token's sequence).
  const kernels::KvWrite* kv_destinations(int il) const {
    return at<kernels::KvWrite>(layout_.kv_dst) + static_cast<size_t>(il) * n_tokens_;
  }
  const kernels::KvSpan* const* kv_spans(int il) const {
    return at<const kernels::KvSpan*>(layout_.kv_span) + static_cast<size_t>(il) * n_tokens_;
  }
  // A host array for row indices only the host reads.
  int32_t* host_rows(int32_t* ops_array) { return device_ ? rows_.data() : ops_array; }
  // The first n values of an array the ops wrote, readable by the host (a blocking copy on a
  // device: for tracing).
  const float* read(const float* ops_array, int n);

  // The n_out rows of x ([n_out][n_embd], the normed hidden states) into dst in host memory: at
  // once on a host, with the pass's other outputs in status() on a device.
  void hidden(const float* x, int n_out, float* dst);
  // The outputs of the n_out rows of x (already normed): output · x, softcapped when cap > 0,
  // handed back as `out` asks; then the recorded span, if any, ends.
  void outputs(const kernels::Matrix& output, kernels::Activations x, int n_out, float cap,
               const Outputs& out);

  // The first failed copy since the last call, then clears it; also the backend's own errors,
  // after waiting for the pass (the next one rewrites the step block's host side).
  util::Status status();

 private:
  template <class T>
  const T* at(size_t offset) const {
    return reinterpret_cast<const T*>(regions_.step_block + offset);
  }
  template <class T>
  T* host_at(size_t offset) {
    return reinterpret_cast<T*>(step_host_ + offset);
  }
  // Fills the step block's host side; returns the bytes the ops must see.
  size_t fill(const Batch& batch, kv::Cache& cache);
  void fill_cache_changes(kv::Cache& cache);
  void top_k_outputs(const kernels::Matrix& output, kernels::Activations x, int n_out, float cap,
                     const Outputs& out);
  kernels::Activations rows_of(kernels::Activations x, int first) const;
  void logits(const kernels::Matrix& output, kernels::Activations x, float* y, int n);
  void record(util::Status s) {
    if (!s && error_.ok()) error_ = std::move(s);
  }

  kernels::Backend* ops_ = nullptr;
  bool device_ = false;
  bool may_record_ = false;
  int max_batch_ = 0, n_layer_ = 0, n_tokens_ = 0;
  bool sees_images_ = false;  // the batch has Batch::attend_from/attend_until
  int64_t n_embd_ = 0, n_vocab_ = 0;
  std::unique_ptr<BackendPlacer> placer_;
  std::vector<kernels::Staged<float>> inv_freq_;  // per layer
  std::vector<int> cache_layers_;                 // LoadOptions::cache_layers
  StepLayout layout_;
  StageRegions regions_;
  uint8_t* step_host_ = nullptr;  // where the host fills the step block (itself on a host backend)
  kernels::Buffer host_block_;    // device backends: the step block's page-locked host side
  kernels::Buffer
      host_selections_;       // device backends: page-locked, laid out as regions_.selections
  struct PendingSelections {  // copied out of host_selections_ once the pass is done
    int32_t* ids = nullptr;
    float* values = nullptr;
    int n_out = 0, k = 0;
  } pending_;
  kernels::Buffer host_hidden_;  // device backends with LoadOptions::hidden: page-locked rows
  struct PendingHidden {         // copied out of host_hidden_ once the pass is done
    float* dst = nullptr;
    size_t bytes = 0;
  } pending_hidden_;
  std::vector<kv::ViewChange> changes_;
  std::vector<int32_t> rows_;
  std::vector<float> read_floats_;
  util::Status error_;
  // Recorded passes (see the file comment), by (tokens, k, hidden states or not).
  bool record_ = false;
  using RecordingKey = std::tuple<int, int, bool>;
  std::map<RecordingKey, int> recordings_;
  int replaying_ = -1;
  RecordingKey recording_key_{0, 0, false};
  enum class Mode { kRun, kRecord, kReplay } mode_ = Mode::kRun;
};

}  // namespace model

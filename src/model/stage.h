// model::Stage — what a forward pass adds to run on a backend with its own memory (a GPU, see
// kernels/ops.h): weights placed in that memory, RoPE tables and the batch's token ids and
// positions uploaded, arrays the host fills (KV destinations, spans) uploaded where the ops read
// them, arrays the host reads (MoE routing) downloaded, logits read back in chunks. On a host
// backend every function passes host pointers through and copies nothing, so the CPU path is
// unchanged.
//
// The uploads are queued like ops from page-locked host memory (Backend::upload_async): every
// layer has its own host region for its KV destinations and spans, so nothing the GPU has yet to
// copy is overwritten before the pass ends, and the pass waits only where the host must read a
// result (MoE routing, the logits).
#pragma once

#include <memory>
#include <vector>

#include "kernels/buffer.h"
#include "kernels/ops.h"
#include "kv/cache.h"
#include "model/model.h"
#include "model/spec.h"
#include "model/weights.h"
#include "util/result.h"

namespace model {

class Stage {
 public:
  Stage() = default;
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;
  ~Stage();

  // `may_record`: whether a pass may be recorded (model::Lanes says no for split passes).
  util::Status init(kernels::Backend& ops, const Spec& spec, int max_batch, bool may_record = true);
  // Where bound weights go: `given` on a host backend (null = the file mapping), a placer in the
  // backend's memory on a device (a caller's own placer is refused there: its pointers would be
  // host memory).
  util::Result<TensorPlacer*> placer(TensorPlacer* given);
  // Bytes of weights placed in the backend's memory.
  size_t placed_bytes() const { return placer_ ? placer_->bytes() : 0; }

  // Per forward pass, after the cache positions are set: uploads ids and positions, syncs the
  // cache's device views. With HEADROOM_RECORD_PASSES=1 (not yet run on a GPU, so off by
  // default), a single-token pass on a backend that records passes (a GPU, for a model whose
  // layers need no host reads) is recorded the first time and replayed after that, from here to
  // layers_done(): one launch instead of one per op.
  void begin(const Batch& batch, kv::Cache& cache);
  // After the last layer: ends the recorded or replayed span.
  void layers_done();
  const int32_t* tokens() const { return tokens_.ops(); }
  const int32_t* pos() const { return pos_.ops(); }
  const float* inv_freq(int il) const { return inv_freq_[il].ops(); }

  // Layer il's K/V destinations (each token's cache row) and spans (each token's sequence), filled
  // on the host and queued for the ops at `dst` / `spans`.
  void put_kv_destinations(kernels::KvWrite* dst, int il, const Batch& batch, kv::Cache& cache) {
    kernels::KvWrite* host = host_kv_dst(dst, il);
    for (int t = 0; t < batch.size(); ++t)
      host[t] = cache.destination(il, batch.slot[t], batch.pos[t]);
    put(dst, host, batch.size());
  }
  void put_kv_spans(const kernels::KvSpan** spans, int il, const Batch& batch,
                    const kv::Cache& cache) {
    const kernels::KvSpan** host = host_kv_span(spans, il);
    for (int t = 0; t < batch.size(); ++t) host[t] = cache.span(il, batch.slot[t]);
    put(spans, host, batch.size());
  }
  // A host array for row indices only the host reads.
  int32_t* host_rows(int32_t* ops_array) { return device_ ? rows_.data() : ops_array; }
  template <class T>
  void put(T* ops_array, const T* host, int n) {
    if (device_ && n > 0) ops_->upload_async(ops_array, host, n * sizeof(T));
  }
  // The first n values of an array the ops wrote, readable by the host.
  const int32_t* read(const int32_t* ops_array, int n);
  const float* read(const float* ops_array, int n);

  // logits [n_out][n_vocab] (host) = output · x for the n_out rows of x, softcapped when cap > 0.
  void logits(const kernels::Matrix& output, const float* x, int n_out, float cap, float* logits);

  // The first failed copy since the last call, then clears it; also the backend's own errors.
  util::Status status();

 private:
  // Layer il's host array for the values the ops will read at `ops_array` (which is that array
  // itself on a host backend): each layer has its own, so a queued upload is never overwritten.
  kernels::KvWrite* host_kv_dst(kernels::KvWrite* ops_array, int il) {
    return device_ ? kv_dst_.get<kernels::KvWrite>() + static_cast<size_t>(il) * max_batch_
                   : ops_array;
  }
  const kernels::KvSpan** host_kv_span(const kernels::KvSpan** ops_array, int il) {
    return device_ ? kv_span_.get<const kernels::KvSpan*>() + static_cast<size_t>(il) * max_batch_
                   : ops_array;
  }
  void record(util::Status s) {
    if (!s && error_.ok()) error_ = std::move(s);
  }

  kernels::Backend* ops_ = nullptr;
  bool device_ = false;
  int max_batch_ = 0;
  int64_t n_embd_ = 0, n_vocab_ = 0;
  std::unique_ptr<BackendPlacer> placer_;
  kernels::Staged<int32_t> tokens_, pos_;
  std::vector<kernels::Staged<float>> inv_freq_;  // per layer
  kernels::Buffer kv_dst_, kv_span_;  // device backends: [n_layer][max_batch], page-locked
  std::vector<int32_t> rows_, read_ids_;
  std::vector<float> read_floats_;
  kernels::Buffer logits_;  // device: kLogitRows rows of logits
  util::Status error_;
  // Recorded single-token passes (see begin()).
  bool record_ = false;
  int recording_ = -1;
  enum class Mode { kRun, kRecord, kReplay } mode_ = Mode::kRun;
};

}  // namespace model

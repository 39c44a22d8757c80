// model::Stage: the host/device traffic of a forward pass (stage.h).
#include "model/stage.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace model {
namespace {

size_t aligned(size_t offset) {
  return (offset + 15) / 16 * 16;
}

// The selections of the chunk of n rows starting at row `first`, k per row: ids [n][k], then
// values [n][k] — contiguous, so one copy brings a chunk's back.
size_t chunk_offset(int first, int k) {
  return static_cast<size_t>(first) * k * (sizeof(int32_t) + sizeof(float));
}
size_t chunk_bytes(int n, int k) {
  return chunk_offset(n, k);
}

}  // namespace

StepLayout StepLayout::of(int n_layer, int n_tokens) {
  const size_t T = static_cast<size_t>(n_tokens), L = static_cast<size_t>(n_layer);
  StepLayout s;
  s.n_pieces = 0;
  s.tokens = aligned(s.n_pieces + sizeof(int32_t));
  s.pos = aligned(s.tokens + T * sizeof(int32_t));
  s.attend_from = aligned(s.pos + T * sizeof(int32_t));
  s.attend_until = aligned(s.attend_from + T * sizeof(int32_t));
  s.kv_dst = aligned(s.attend_until + T * sizeof(int32_t));
  s.kv_span = aligned(s.kv_dst + L * T * sizeof(kernels::KvWrite));
  s.pieces = aligned(s.kv_span + L * T * sizeof(const kernels::KvSpan*));
  s.payload = aligned(s.pieces + kStepPieces * sizeof(kernels::ScatterPiece));
  s.end = aligned(s.payload + kStepPayloadBytes);
  return s;
}

size_t step_block_bytes(const Spec& spec, int max_batch) {
  return StepLayout::of(spec.n_layer, max_batch).end;
}

size_t staging_bytes(const Spec& spec, int max_batch, bool device, bool hidden) {
  if (!device) return 0;
  return step_block_bytes(spec, max_batch) + StageRegions::selection_bytes(max_batch) +
         (hidden ? hidden_bytes(spec, max_batch) : 0);
}

Stage::~Stage() {
  for (const auto& [key, id] : recordings_) ops_->release_recording(id);
}

util::Status Stage::init(kernels::Backend& ops, const Spec& spec, int max_batch, bool may_record,
                         std::vector<int> cache_layers, bool hidden) {
  ops_ = &ops;
  cache_layers_ = std::move(cache_layers);
  device_ = !ops.host_memory();
  max_batch_ = max_batch;
  n_layer_ = spec.n_layer;
  n_embd_ = spec.n_embd;
  n_vocab_ = spec.n_vocab;
  may_record_ = may_record;
  // Recorded passes are on unless HEADROOM_RECORD_PASSES=0 (they passed the model tests on an H200
  // and decode 7–10 % faster there: docs/cuda.md); the switch compares the two.
  const char* env = std::getenv("HEADROOM_RECORD_PASSES");
  record_ = may_record && ops.can_record() && !(env != nullptr && std::string_view(env) == "0");
  inv_freq_.resize(spec.layers.size());
  for (const auto& l : spec.layers) {
    HR_TRY(inv_freq_[l.il].init(ops, l.rope.inv_freq.size()));
    std::copy(l.rope.inv_freq.begin(), l.rope.inv_freq.end(), inv_freq_[l.il].host());
    inv_freq_[l.il].push(l.rope.inv_freq.size());
  }
  if (device_) {
    HR_ASSIGN_OR_RETURN(host_block_,
                        kernels::Buffer::make_host(ops, step_block_bytes(spec, max_batch)));
    HR_ASSIGN_OR_RETURN(host_selections_,
                        kernels::Buffer::make_host(ops, StageRegions::selection_bytes(max_batch)));
    if (hidden) {
      HR_ASSIGN_OR_RETURN(host_hidden_,
                          kernels::Buffer::make_host(ops, hidden_bytes(spec, max_batch)));
    }
    rows_.resize(max_batch);
  }
  return {};
}

util::Result<TensorPlacer*> Stage::placer(TensorPlacer* given) {
  if (!device_) return given;
  if (given != nullptr) {
    return util::errorf(
        "model: {} computes in its own memory; load weights with its placer, not another",
        ops_->name());
  }
  placer_ = std::make_unique<BackendPlacer>(*ops_);
  return placer_.get();
}

void Stage::begin(const Batch& batch, kv::Cache& cache, int top_k, bool hidden) {
  const int T = batch.size();
  n_tokens_ = T;
  sees_images_ = !batch.attend_until.empty();
  layout_ = StepLayout::of(n_layer_, T);
  step_host_ = device_ ? host_block_.get<uint8_t>() : regions_.step_block;
  const size_t used = fill(batch, cache);
  // A recording holds the whole pass: the same ops with the same arguments, so the same T, every
  // row wanting output (which rows do decides the head's copies), and the same k — and no media
  // (their embeddings go up in copies of their own, and images seen both ways change attention's).
  // A pass with adapter tokens runs op by op: which adapters it adds is the batch's (model/lora.h).
  const bool all_rows = batch.output.empty() ? T == 1
                                             : std::all_of(batch.output.begin(), batch.output.end(),
                                                           [](uint8_t o) { return o != 0; });
  mode_ = Mode::kRun;
  if (record_ && top_k > 0 && T <= kernels::kActQ8MaxTokens && all_rows && !batch.has_adapters() &&
      !sees_images_ && !batch.has_embeddings()) {
    recording_key_ = {T, top_k, hidden};
    const auto it = recordings_.find(recording_key_);
    mode_ = it == recordings_.end() ? Mode::kRecord : Mode::kReplay;
    replaying_ = it == recordings_.end() ? -1 : it->second;
    if (mode_ == Mode::kRecord)
      ops_->begin_record();
    else
      ops_->begin_replay();
  }
  if (!device_) return;
  // A recorded copy has a fixed size: the whole block, whatever this step uses of it.
  ops_->upload_async(regions_.step_block, step_host_, mode_ == Mode::kRun ? used : layout_.end);
  ops_->scatter(regions_.step_block + layout_.payload, at<kernels::ScatterPiece>(layout_.pieces),
                at<int32_t>(layout_.n_pieces), kStepPieces);
}

size_t Stage::fill(const Batch& batch, kv::Cache& cache) {
  const int T = batch.size();
  auto* tokens = host_at<int32_t>(layout_.tokens);
  for (int t = 0; t < T; ++t)
    tokens[t] = batch.has_embeddings() && batch.embedded[t] ? kEmbeddedRowToken : batch.tokens[t];
  std::copy(batch.pos.begin(), batch.pos.end(), host_at<int32_t>(layout_.pos));
  std::copy(batch.attend_from.begin(), batch.attend_from.end(),
            host_at<int32_t>(layout_.attend_from));
  std::copy(batch.attend_until.begin(), batch.attend_until.end(),
            host_at<int32_t>(layout_.attend_until));
  auto* dst = host_at<kernels::KvWrite>(layout_.kv_dst);
  auto* spans = host_at<const kernels::KvSpan*>(layout_.kv_span);
  for (int il = 0; il < n_layer_; ++il) {
    // A drafter's layer reads another model's layer and writes nothing.
    const int read = cache_layers_.empty() ? il : cache_layers_[il];
    // This lane's layers: those whose cache is in its memory.
    if (cache.on_device(read) != device_) continue;
    const bool owns = cache_layers_.empty() && cache.owns(il);
    for (int t = 0; t < T; ++t) {
      if (owns) dst[il * T + t] = cache.destination(il, batch.slot[t], batch.pos[t]);
      spans[il * T + t] = cache.span(read, batch.slot[t]);
    }
  }
  *host_at<int32_t>(layout_.n_pieces) = 0;
  if (!device_) return layout_.end;
  fill_cache_changes(cache);
  const int n = *host_at<int32_t>(layout_.n_pieces);
  if (n == 0) return layout_.pieces;
  const auto* last = host_at<kernels::ScatterPiece>(layout_.pieces) + (n - 1);
  return layout_.payload + last->offset + last->bytes;
}

// The cache's changed views go into the block as scatter pieces while they fit; the rest (a
// prefix reuse that rewrote whole block tables, say) goes up in copies of its own now, before
// the pass, where a wait costs nothing recorded.
void Stage::fill_cache_changes(kv::Cache& cache) {
  changes_.clear();
  cache.take_changes(changes_);
  auto* pieces = host_at<kernels::ScatterPiece>(layout_.pieces);
  uint8_t* payload = step_host_ + layout_.payload;
  int n = 0;
  uint32_t offset = 0;
  for (const kv::ViewChange& c : changes_) {
    if (n < kStepPieces && offset + c.bytes <= kStepPayloadBytes) {
      std::memcpy(payload + offset, c.src, c.bytes);
      pieces[n++] = {.dst = c.dst, .offset = offset, .bytes = static_cast<uint32_t>(c.bytes)};
      offset = static_cast<uint32_t>(aligned(offset + c.bytes));
    } else {
      record(ops_->upload(c.dst, c.src, c.bytes));
    }
  }
  *host_at<int32_t>(layout_.n_pieces) = n;
}

const float* Stage::read(const float* ops_array, int n) {
  if (!device_) return ops_array;
  read_floats_.resize(std::max<size_t>(read_floats_.size(), n));
  record(ops_->download(read_floats_.data(), ops_array, n * sizeof(float)));
  return read_floats_.data();
}

// Rows [first, first + n) of x, with their 8-bit form when it has one.
kernels::Activations Stage::rows_of(kernels::Activations x, int first) const {
  const auto* q8 = static_cast<const uint8_t*>(x.q8);
  return {x.f32 + static_cast<int64_t>(first) * n_embd_,
          q8 != nullptr ? q8 + first * kernels::act_q8_row_bytes(n_embd_) : nullptr};
}

// The logits of n rows of x into y: one product, on x's 8-bit form when it has one.
void Stage::logits(const kernels::Matrix& output, kernels::Activations x, float* y, int n) {
  if (x.q8 == nullptr) return ops_->matmul(output, x.f32, y, n);
  const kernels::MatmulOut product{output, y};
  ops_->matmuls(&product, 1, x, n);
}

void Stage::outputs(const kernels::Matrix& output, kernels::Activations x, int n_out, float cap,
                    const Outputs& out) {
  if (out.top_k > 0) {
    top_k_outputs(output, x, n_out, cap, out);
  } else if (!device_) {
    logits(output, x, out.logits, n_out);
    if (cap > 0) ops_->softcap(out.logits, cap, static_cast<int64_t>(n_out) * n_vocab_);
  } else {
    for (int first = 0; first < n_out; first += kLogitRows) {
      const int n = std::min(kLogitRows, n_out - first);
      logits(output, rows_of(x, first), regions_.logits_chunk, n);
      if (cap > 0) ops_->softcap(regions_.logits_chunk, cap, static_cast<int64_t>(n) * n_vocab_);
      record(ops_->download(out.logits + static_cast<int64_t>(first) * n_vocab_,
                            regions_.logits_chunk,
                            static_cast<size_t>(n) * n_vocab_ * sizeof(float)));
    }
  }
  if (mode_ == Mode::kRecord) {
    auto id = ops_->end_record();
    if (id) {
      recordings_[recording_key_] = *id;
    } else {
      record(std::move(id).error());
      record_ = false;  // said once, in this pass's error; later passes run op by op
    }
  } else if (mode_ == Mode::kReplay) {
    ops_->replay(replaying_);
  }
  mode_ = Mode::kRun;
}

// Only each row's k best logits leave a device: the logits are computed a chunk of rows at a time,
// selected there, and each chunk's selections queued for the host in one copy.
void Stage::top_k_outputs(const kernels::Matrix& output, kernels::Activations x, int n_out,
                          float cap, const Outputs& out) {
  const int k = out.top_k;
  if (!device_) {
    logits(output, x, out.logits, n_out);
    if (cap > 0) ops_->softcap(out.logits, cap, static_cast<int64_t>(n_out) * n_vocab_);
    ops_->top_k(out.logits, n_vocab_, n_out, k, out.top_ids, out.top_logits);
    return;
  }
  for (int first = 0; first < n_out; first += kLogitRows) {
    const int n = std::min(kLogitRows, n_out - first);
    logits(output, rows_of(x, first), regions_.logits_chunk, n);
    if (cap > 0) ops_->softcap(regions_.logits_chunk, cap, static_cast<int64_t>(n) * n_vocab_);
    uint8_t* chunk = regions_.selections + chunk_offset(first, k);
    auto* ids = reinterpret_cast<int32_t*>(chunk);
    ops_->top_k(regions_.logits_chunk, n_vocab_, n, k, ids,
                reinterpret_cast<float*>(ids + static_cast<size_t>(n) * k));
    ops_->download_async(host_selections_.get<uint8_t>() + chunk_offset(first, k), chunk,
                         chunk_bytes(n, k));
  }
  pending_ = {.ids = out.top_ids, .values = out.top_logits, .n_out = n_out, .k = k};
}

void Stage::hidden(const float* x, int n_out, float* dst) {
  const size_t bytes = static_cast<size_t>(n_out) * n_embd_ * sizeof(float);
  if (!device_) {
    std::memcpy(dst, x, bytes);
  } else if (host_hidden_.size() < bytes) {
    record(
        util::errorf("model: hidden states from {} need the model loaded to hand them back "
                     "(LoadOptions::hidden)",
                     ops_->name()));
  } else {
    // Queued with the pass (and recorded with it): the host copies the rows out in status().
    ops_->download_async(host_hidden_.get<uint8_t>(), x, bytes);
    pending_hidden_ = {.dst = dst, .bytes = bytes};
  }
}

util::Status Stage::status() {
  util::Status s = std::move(error_);
  error_ = {};
  // Always wait: the next pass rewrites the step block's host side.
  util::Status ops = ops_->synchronize();
  const int k = pending_.k;
  for (int first = 0; first < pending_.n_out; first += kLogitRows) {
    const int n = std::min(kLogitRows, pending_.n_out - first);
    const auto* ids =
        reinterpret_cast<const int32_t*>(host_selections_.get<uint8_t>() + chunk_offset(first, k));
    const size_t count = static_cast<size_t>(n) * k;
    std::copy_n(ids, count, pending_.ids + static_cast<size_t>(first) * k);
    std::copy_n(reinterpret_cast<const float*>(ids + count), count,
                pending_.values + static_cast<size_t>(first) * k);
  }
  pending_ = {};
  if (pending_hidden_.dst != nullptr)
    std::memcpy(pending_hidden_.dst, host_hidden_.get<uint8_t>(), pending_hidden_.bytes);
  pending_hidden_ = {};
  return !s ? s : ops;
}

}  // namespace model

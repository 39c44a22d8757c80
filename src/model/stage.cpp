// model::Stage: the host/device traffic of a forward pass (stage.h).
#include "model/stage.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace model {
namespace {
// Logit rows computed per chunk on a device: bounds the device buffer (8 × 262144 f32 = 8 MiB
// for Gemma's vocabulary) whatever the number of rows that want logits.
constexpr int kLogitRows = 8;
}  // namespace

Stage::~Stage() {
  if (recording_ >= 0) ops_->release_recording(recording_);
}

util::Status Stage::init(kernels::Backend& ops, const Spec& spec, int max_batch, bool may_record) {
  ops_ = &ops;
  device_ = !ops.host_memory();
  max_batch_ = max_batch;
  // Recorded passes are off unless HEADROOM_RECORD_PASSES=1: written and compiled, but the GPU
  // lease ended before they ran on one (docs/cuda.md) — the next GPU session turns them on, runs
  // cuda_model_tests and the benchmarks with and without, and makes them the default if they
  // pass. MoE layers read the routing back mid-pass, which a recording cannot hold.
  const char* env = std::getenv("HEADROOM_RECORD_PASSES");
  record_ = may_record && ops.can_record() && env != nullptr && std::string_view(env) == "1" &&
            std::none_of(spec.layers.begin(), spec.layers.end(),
                         [](const LayerSpec& l) { return l.is_moe(); });
  n_embd_ = spec.n_embd;
  n_vocab_ = spec.n_vocab;
  HR_TRY(tokens_.init(ops, max_batch));
  HR_TRY(pos_.init(ops, max_batch));
  inv_freq_.resize(spec.layers.size());
  for (const auto& l : spec.layers) {
    HR_TRY(inv_freq_[l.il].init(ops, l.rope.inv_freq.size()));
    std::copy(l.rope.inv_freq.begin(), l.rope.inv_freq.end(), inv_freq_[l.il].host());
    inv_freq_[l.il].push(l.rope.inv_freq.size());
  }
  if (device_) {
    const size_t per_layer = spec.layers.size() * static_cast<size_t>(max_batch);
    HR_ASSIGN_OR_RETURN(kv_dst_,
                        kernels::Buffer::make_host(ops, per_layer * sizeof(kernels::KvWrite)));
    HR_ASSIGN_OR_RETURN(
        kv_span_, kernels::Buffer::make_host(ops, per_layer * sizeof(const kernels::KvSpan*)));
    rows_.resize(max_batch);
    HR_ASSIGN_OR_RETURN(logits_, kernels::Buffer::make(ops, kLogitRows * n_vocab_ * sizeof(float)));
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

void Stage::begin(const Batch& batch, kv::Cache& cache) {
  const int T = batch.size();
  std::copy(batch.tokens.begin(), batch.tokens.end(), tokens_.host());
  std::copy(batch.pos.begin(), batch.pos.end(), pos_.host());
  record(cache.sync());  // synchronous copies: before any recorded span
  if (record_ && T == 1) {
    mode_ = recording_ < 0 ? Mode::kRecord : Mode::kReplay;
    if (mode_ == Mode::kRecord)
      ops_->begin_record();
    else
      ops_->begin_replay();
  }
  tokens_.push(T);
  pos_.push(T);
}

void Stage::layers_done() {
  if (mode_ == Mode::kRecord) {
    auto id = ops_->end_record();
    if (id) {
      recording_ = *id;
    } else {
      record(std::move(id).error());
      record_ = false;  // said once, in this pass's error; later passes run op by op
    }
  } else if (mode_ == Mode::kReplay) {
    ops_->replay(recording_);
  }
  mode_ = Mode::kRun;
}

const int32_t* Stage::read(const int32_t* ops_array, int n) {
  if (!device_) return ops_array;
  read_ids_.resize(std::max<size_t>(read_ids_.size(), n));
  record(ops_->download(read_ids_.data(), ops_array, n * sizeof(int32_t)));
  return read_ids_.data();
}

const float* Stage::read(const float* ops_array, int n) {
  if (!device_) return ops_array;
  read_floats_.resize(std::max<size_t>(read_floats_.size(), n));
  record(ops_->download(read_floats_.data(), ops_array, n * sizeof(float)));
  return read_floats_.data();
}

void Stage::logits(const kernels::Matrix& output, const float* x, int n_out, float cap,
                   float* logits) {
  if (!device_) {
    ops_->matmul(output, x, logits, n_out);
    if (cap > 0) ops_->softcap(logits, cap, static_cast<int64_t>(n_out) * n_vocab_);
    return;
  }
  for (int first = 0; first < n_out; first += kLogitRows) {
    const int n = std::min(kLogitRows, n_out - first);
    float* chunk = logits_.get<float>();
    ops_->matmul(output, x + first * n_embd_, chunk, n);
    if (cap > 0) ops_->softcap(chunk, cap, static_cast<int64_t>(n) * n_vocab_);
    record(ops_->download(logits + static_cast<int64_t>(first) * n_vocab_, chunk,
                          static_cast<size_t>(n) * n_vocab_ * sizeof(float)));
  }
}

util::Status Stage::status() {
  util::Status s = std::move(error_);
  error_ = {};
  // Always wait: the next pass rewrites the host regions this one's queued copies read.
  util::Status ops = ops_->synchronize();
  return !s ? s : ops;
}

}  // namespace model

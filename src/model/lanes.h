// model::Lanes — the backends one forward pass runs on. A model runs on one lane (the backend
// load_model was given) unless its placement (LoadOptions::placement, the plan's) is split: then
// the parts placed on the host — layers, Gemma 4's per-layer-embedding lookup, MoE experts — run
// on a host lane (options.host, the CPU backend, in host memory) and everything else on the main
// lane (a GPU). Each lane has its own staging (Stage), activations and tensor binding; where
// consecutive steps change lanes the activations they hand over cross with one copy
// (Lanes::cross), the copies the planner counts.
#pragma once

#include <array>
#include <cstring>
#include <memory>
#include <utility>

#include "kernels/ops.h"
#include "kv/cache.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/scratch.h"
#include "model/spec.h"
#include "model/stage.h"
#include "model/weights.h"
#include "util/result.h"

namespace model {

template <class Scratch>
struct Lane {
  kernels::Backend* ops = nullptr;
  Stage stage;
  Workspace buffer;
  Scratch s{};
  std::unique_ptr<Binder> binder;  // kept: it owns norms it converted to f32 on the host
};

template <class Scratch>
class Lanes {
 public:
  using L = Lane<Scratch>;

  util::Status init(const gguf::File& file, kernels::Backend& main, const Spec& spec,
                    const LoadOptions& options) {
    placement_ = options.placement;
    trace_ = options.trace;
    lora_limits_ = options.lora;
    const bool split = placement_.split();
    if (split && (options.host == nullptr || !options.host->host_memory())) {
      return util::errorf(
          "model: the placement runs parts on the host, which needs a backend computing in host "
          "memory, not {}",
          options.host ? options.host->name() : "none");
    }
    if (split && main.host_memory()) {
      return util::errorf("model: a split run needs a device backend for the main lane, not {}",
                          main.name());
    }
    if (!placement_.layer_device.empty() && placement_.layer_device.size() != spec.layers.size()) {
      return util::errorf("model: the placement lists {} layers, but the model has {}",
                          placement_.layer_device.size(), spec.layers.size());
    }
    n_lanes_ = split ? 2 : 1;
    lanes_[0].ops = &main;
    if (split) lanes_[1].ops = options.host;
    for (int i = 0; i < n_lanes_; ++i) {
      L& lane = lanes_[i];
      // A recording spans a whole pass on one backend: a split pass crosses to the host between,
      // and a traced one reads intermediates back. The head, and so the hidden states, are the
      // main lane's.
      HR_TRY(lane.stage.init(*lane.ops, spec, options.max_batch, !split && !trace_,
                             options.cache_layers, i == 0 && options.hidden));
      HR_ASSIGN_OR_RETURN(TensorPlacer * placer,
                          lane.stage.placer(i == 0 ? options.placer : nullptr));
      lane.binder = std::make_unique<Binder>(file, placer);
    }
    return {};
  }

  util::Status allocate_scratch(const Spec& spec, int max_batch) {
    std::vector<kernels::Backend*> backends;
    std::vector<int> lane_of;
    for (int i = 0; i < n_lanes_; ++i) backends.push_back(lanes_[i].ops);
    for (const auto& l : spec.layers) lane_of.push_back(index(of_layer(l.il)));
    HR_TRY(lora_.init(spec, lora_limits_, max_batch, std::move(backends), std::move(lane_of)));
    for (int i = 0; i < n_lanes_; ++i) {
      L& lane = lanes_[i];
      const bool device = !lane.ops->host_memory();
      ScratchCarver counter(nullptr);
      Scratch::lay_out(counter, spec, max_batch, device);
      HR_ASSIGN_OR_RETURN(uint8_t * base, lane.buffer.allocate(*lane.ops, counter.bytes()));
      ScratchCarver carver(base);
      lane.s = Scratch::lay_out(carver, spec, max_batch, device);
      lane.stage.attach(lane.s.stage);
    }
    return {};
  }

  L& main() { return lanes_[0]; }
  const L& main() const { return lanes_[0]; }

  // A decode batch on a device lane: small enough for 8-bit activations and split attention.
  bool decoding(const L& lane, int n_tokens) const {
    return lane.ops->quantizes_activations() && n_tokens <= kernels::kActQ8MaxTokens;
  }
  // Where the 8-bit form of n_tokens' rows of `width` values goes (or is read): `buffer` in a
  // decode batch on a device lane for a width that has one, else null.
  void* q8(const L& lane, void* buffer, int n_tokens, int64_t width) const {
    return decoding(lane, n_tokens) && kernels::act_q8_fits(width) ? buffer : nullptr;
  }
  kernels::Activations act(const L& lane, const float* x, void* q8_buffer, int n_tokens,
                           int64_t width) const {
    return {x, q8(lane, q8_buffer, n_tokens, width)};
  }
  // Where layer il runs, where the per-layer-embedding table is looked up, and where the MoE
  // experts of layer il run: as placed.
  L& of_layer(int il) { return of_device(placement_.layer(il)); }
  L& of_ple_table() { return of_device(placement_.ple_device); }
  L& of_experts(int il) { return of_device(placement_.experts(il)); }

  void begin(const Batch& batch, kv::Cache& cache, const Outputs& out) {
    for (int i = 0; i < n_lanes_; ++i)
      lanes_[i].stage.begin(batch, cache, out.top_k, out.hidden != nullptr);
    lora_.begin(batch);
  }

  // LoRA (model/lora.h): y += the terms this pass's adapters add to layer il's `target` product
  // (nothing when no token's adapter adapts it).
  void lora(L& lane, int il, LoraTarget target, const float* x, float* y, int n_tokens) {
    if (lora_.adapts(il, target)) lora_.apply(index(lane), il, target, x, y, n_tokens);
  }
  LoraBank& lora_bank() { return lora_; }
  // The MLP's gated product on `lane` (gate and up of layer il), with their LoRA terms: an
  // adapted gate or up is computed apart, its terms added, then act(gate) ⊙ up — without the
  // 8-bit form of the result (the down product then reads f32). Returns whether a.out_q8 was
  // written.
  bool mlp_glu(L& lane, int il, const kernels::GluMatmul& a) {
    kernels::Backend& ops = *lane.ops;
    if (!lora_.adapts(il, LoraTarget::kGate) && !lora_.adapts(il, LoraTarget::kUp)) {
      ops.matmul_glu(a);
      return true;
    }
    const int64_t n = a.gate.n_rows;
    const kernels::MatmulOut gate_up[2] = {{a.gate, a.out}, {a.up, a.scratch}};
    ops.matmuls(gate_up, 2, a.x, a.n_tokens);
    lora(lane, il, LoraTarget::kGate, a.x.f32, a.out, a.n_tokens);
    lora(lane, il, LoraTarget::kUp, a.x.f32, a.scratch, a.n_tokens);
    if (a.act == kernels::GluActivation::kGelu)
      ops.gelu_mul(a.out, a.scratch, a.out, n, a.n_tokens, n);
    else
      ops.silu_mul(a.out, a.scratch, a.out, n, a.n_tokens, n);
    return false;
  }

  // The head of every architecture, on the main lane: the rows that want output gathered from the
  // residual stream x into xb (in place when every row does), the final norm, then the outputs.
  void output_head(const Batch& batch, const float* norm, float eps, const kernels::Matrix& output,
                   float softcap, int64_t n_embd, const Outputs& out) {
    L& m = main();
    const int T = batch.size();
    int32_t* rows = m.stage.host_rows(m.s.out_rows);
    const int n_out = gather_output_rows(batch, rows);
    // A decoding device's final norm also writes the 8-bit form, as each layer's input norm does,
    // so the head (a vocabulary of rows) runs on the 8-bit products.
    void* xb_q8 = n_out == T ? q8(m, m.s.xb_q8, n_out, n_embd) : nullptr;
    if (xb_q8 != nullptr) {
      kernels::ResidualNorm r{.n = n_embd, .n_rows = n_out, .eps = eps, .x = m.s.x};
      r.out[r.n_out++] = {.normalize = true, .w = norm, .y = m.s.xb, .y_q8 = xb_q8};
      m.ops->residual_norm(r);
    } else if (n_out == T) {
      m.ops->rmsnorm(m.s.x, norm, m.s.xb, n_embd, n_out, eps);
    } else {
      for (int i = 0; i < n_out; ++i)
        m.ops->copy(m.s.xb + i * n_embd, m.s.x + rows[i] * n_embd, n_embd);
      m.ops->rmsnorm(m.s.xb, norm, m.s.xb, n_embd, n_out, eps);
    }
    trace(m, m.s.xb, n_out, n_embd, "result_norm");
    if (out.hidden != nullptr) m.stage.hidden(m.s.xb, n_out, out.hidden);
    m.stage.outputs(output, {m.s.xb, xb_q8}, n_out, softcap, out);
  }
  // The first failure since the last call — a crossing's copy, then each lane's — after waiting
  // for each lane's queued ops.
  util::Status status() {
    util::Status first = std::exchange(error_, {});
    for (int i = 0; i < n_lanes_; ++i) {
      util::Status s = lanes_[i].stage.status();
      if (!s && first.ok()) first = std::move(s);
    }
    return first;
  }

  // dst, in `to`'s memory, ← bytes at src, in `from`'s memory (at most one of them a device's):
  // a device's result is downloaded after its queued ops, a host's uploaded before the device's
  // next ones. Failures surface in status().
  void cross(L& from, L& to, void* dst, const void* src, size_t bytes) {
    if (&from == &to || bytes == 0) return;
    util::Status s;
    if (!from.ops->host_memory()) {
      s = from.ops->download(dst, src, bytes);
    } else if (!to.ops->host_memory()) {
      s = to.ops->upload(dst, src, bytes);
    } else {
      std::memcpy(dst, src, bytes);
    }
    if (!s && error_.ok()) error_ = std::move(s);
  }

  // Rows of the residual stream x ([T][n_embd] in `lane`'s memory) whose input is an embedding
  // (Batch::embedded) take it, after the token embeddings were gathered: one copy per run of such
  // rows. Failures surface in status().
  void embed_rows(L& lane, const Batch& batch, float* x, int64_t n_embd) {
    if (!batch.has_embeddings()) return;
    const int T = batch.size();
    for (int first = 0; first < T;) {
      if (!batch.embedded[first]) {
        ++first;
        continue;
      }
      int end = first + 1;
      while (end < T && batch.embedded[end]) ++end;
      const size_t offset = static_cast<size_t>(first) * n_embd;
      const size_t bytes = static_cast<size_t>(end - first) * n_embd * sizeof(float);
      if (lane.ops->host_memory()) {
        std::memcpy(x + offset, batch.embeddings.data() + offset, bytes);
      } else if (util::Status s =
                     lane.ops->upload(x + offset, batch.embeddings.data() + offset, bytes);
                 !s && error_.ok()) {
        error_ = std::move(s);
      }
      first = end;
    }
  }

  // Hands the intermediate `name` of layer il — rows [n_tokens][width] at x in `lane`'s memory —
  // to the trace hook, read back first when the lane is a device's. Without a hook: nothing.
  void trace(L& lane, const float* x, int n_tokens, int64_t width, std::string_view name,
             int il = -1) {
    if (!trace_) return;
    trace_({.name = name,
            .layer = il,
            .n_tokens = n_tokens,
            .width = width,
            .data = lane.stage.read(x, static_cast<int>(n_tokens * width))});
  }

  size_t workspace_bytes() const {
    size_t total = lora_.workspace_bytes().ops_bytes;
    for (int i = 0; i < n_lanes_; ++i) total += lanes_[i].buffer.size();
    return total;
  }
  size_t placed_bytes() const { return lanes_[0].stage.placed_bytes(); }
  size_t staging_bytes() const {
    size_t total = lora_.workspace_bytes().staging_bytes;
    for (int i = 0; i < n_lanes_; ++i) total += lanes_[i].stage.staging_bytes();
    return total;
  }
  size_t lora_pool_bytes() const { return lora_.pool_bytes(); }

 private:
  L& of_device(int device) {
    return n_lanes_ > 1 && device != placement_.main_device ? lanes_[1] : lanes_[0];
  }
  int index(const L& lane) const { return static_cast<int>(&lane - lanes_.data()); }

  std::array<L, 2> lanes_;  // [0]: main, [1]: host (split runs)
  int n_lanes_ = 1;
  Placement placement_;
  TraceHook trace_;
  util::Status error_;
  LoraLimits lora_limits_;
  LoraBank lora_;
};

}  // namespace model

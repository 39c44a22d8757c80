// The llama forward pass (Llama 1/2/3, TinyStories): pre-norm attention with RoPE and a SwiGLU FFN.
#include "model/llama.h"

#include <cmath>

#include "model/scratch.h"
#include "model/stage.h"

namespace model {
namespace {

struct LayerWeights {
  const float* attn_norm;  // [H]
  kernels::Matrix wq;      // [nh·hd] × [H]
  kernels::Matrix wk;      // [nkv·hd] × [H]
  kernels::Matrix wv;      // [nkv·hd] × [H]
  kernels::Matrix wo;      // [H] × [nh·hd]
  const float* ffn_norm;   // [H]
  kernels::Matrix w_gate;  // [n_ff] × [H]
  kernels::Matrix w_up;    // [n_ff] × [H]
  kernels::Matrix w_down;  // [H] × [n_ff]
};

// Activations for up to B tokens (B = max batch), laid out once.
struct Scratch {
  float* x;     // [B][H] residual stream
  float* xb;    // [B][H] normed input of a block
  float* xb2;   // [B][H] block output before the residual add
  float* q;     // [B][nh·hd]
  float* k;     // [B][nkv·hd]
  float* v;     // [B][nkv·hd]
  float* att;   // [B][nh·hd] attention output per head
  float* hb;    // [B][n_ff] gate, then act(gate)·up
  float* hb2;   // [B][n_ff] up
  kernels::KvWrite* kv_dst;         // [B]
  const kernels::KvSpan** kv_span;  // [B]
  int32_t* out_rows;                // [B] batch rows that want logits

  template <class Carver>
  static Scratch lay_out(Carver& c, const Spec& s, int B) {
    int q_dim = 0, kv_dim = 0, n_ff = 0;
    for (const auto& l : s.layers) {
      q_dim = std::max(q_dim, l.q_dim());
      kv_dim = std::max(kv_dim, l.kv_dim());
      n_ff = std::max(n_ff, l.n_ff);
    }
    const size_t b = static_cast<size_t>(B), h = static_cast<size_t>(s.n_embd);
    Scratch r{};
    r.x = c.floats(b * h);
    r.xb = c.floats(b * h);
    r.xb2 = c.floats(b * h);
    r.q = c.floats(b * q_dim);
    r.k = c.floats(b * kv_dim);
    r.v = c.floats(b * kv_dim);
    r.att = c.floats(b * q_dim);
    r.hb = c.floats(b * n_ff);
    r.hb2 = c.floats(b * n_ff);
    r.kv_dst = c.template array<kernels::KvWrite>(b);
    r.kv_span = c.template array<const kernels::KvSpan*>(b);
    r.out_rows = c.template array<int32_t>(b);
    return r;
  }
};

class Llama final : public Model {
 public:
  Llama(Spec spec, kernels::Backend& ops, int max_batch) : spec_(std::move(spec)), ops_(ops), max_batch_(max_batch) {}

  util::Status bind(const gguf::File& file, TensorPlacer* given_placer) {
    HR_TRY(stage_.init(ops_, spec_, max_batch_));
    HR_ASSIGN_OR_RETURN(TensorPlacer * placer, stage_.placer(given_placer));
    Binder b(file, placer);
    const int64_t H = spec_.n_embd, V = spec_.n_vocab;
    HR_ASSIGN_OR_RETURN(token_embd_, b.matrix("token_embd.weight", H, V));
    HR_ASSIGN_OR_RETURN(output_norm_, b.vector("output_norm.weight", H));
    output_ = token_embd_;
    if (auto out = b.optional_matrix("output.weight", H, V)) {
      HR_ASSIGN_OR_RETURN(output_, std::move(*out));
    }
    for (const auto& l : spec_.layers) {
      auto name = [&](std::string_view s) { return Binder::layer_name(l.il, s); };
      LayerWeights w;
      HR_ASSIGN_OR_RETURN(w.attn_norm, b.vector(name("attn_norm.weight"), H));
      HR_ASSIGN_OR_RETURN(w.wq, b.matrix(name("attn_q.weight"), H, l.q_dim()));
      HR_ASSIGN_OR_RETURN(w.wk, b.matrix(name("attn_k.weight"), H, l.kv_dim()));
      HR_ASSIGN_OR_RETURN(w.wv, b.matrix(name("attn_v.weight"), H, l.kv_dim()));
      HR_ASSIGN_OR_RETURN(w.wo, b.matrix(name("attn_output.weight"), l.q_dim(), H));
      HR_ASSIGN_OR_RETURN(w.ffn_norm, b.vector(name("ffn_norm.weight"), H));
      HR_ASSIGN_OR_RETURN(w.w_gate, b.matrix(name("ffn_gate.weight"), H, l.n_ff));
      HR_ASSIGN_OR_RETURN(w.w_up, b.matrix(name("ffn_up.weight"), H, l.n_ff));
      HR_ASSIGN_OR_RETURN(w.w_down, b.matrix(name("ffn_down.weight"), l.n_ff, H));
      layers_.push_back(w);
    }
    ScratchCarver counter(nullptr);
    Scratch::lay_out(counter, spec_, max_batch_);
    HR_ASSIGN_OR_RETURN(uint8_t * base, buffer_.allocate(ops_, counter.bytes()));
    ScratchCarver carver(base);
    s_ = Scratch::lay_out(carver, spec_, max_batch_);
    return {};
  }

  const Spec& spec() const override { return spec_; }
  int max_batch() const override { return max_batch_; }
  size_t workspace_bytes() const override { return buffer_.size(); }
  size_t placed_weight_bytes() const override { return stage_.placed_bytes(); }

  util::Status forward(const Batch& batch, kv::Cache& cache, float* logits) override {
    const int T = batch.size();
    const int64_t H = spec_.n_embd;
    if (T <= 0 || T > max_batch_) return util::errorf("model: batch of {} tokens (1 to {} allowed)", T, max_batch_);
    for (int t = 0; t < T; ++t) cache.set_position(batch.slot[t], batch.pos[t]);
    stage_.begin(batch, cache);

    // x = token_embd[tokens]
    ops_.get_rows(token_embd_, stage_.tokens(), T, 1.0f, s_.x);
    for (const auto& l : spec_.layers) {
      const LayerWeights& w = layers_[l.il];
      // Attention block: xb = rmsnorm(x); q, k, v projections; RoPE on q and k.
      ops_.rmsnorm(s_.x, w.attn_norm, s_.xb, H, T, spec_.rms_eps);
      ops_.matmul(w.wq, s_.xb, s_.q, T);
      ops_.matmul(w.wk, s_.xb, s_.k, T);
      ops_.matmul(w.wv, s_.xb, s_.v, T);
      const kernels::RopeParams rope{to_kernel(l.rope.style), l.rope.n_rot, stage_.inv_freq(l.il)};
      ops_.rope(s_.q, T, l.n_head, l.head_dim, stage_.pos(), rope);
      ops_.rope(s_.k, T, l.n_head_kv, l.head_dim, stage_.pos(), rope);
      // K and V go into the cache (quantized as stored); attention reads them back from there.
      kernels::KvWrite* dst = stage_.host_kv_dst(s_.kv_dst, l.il);
      const kernels::KvSpan** spans = stage_.host_kv_span(s_.kv_span, l.il);
      for (int t = 0; t < T; ++t) {
        dst[t] = cache.destination(l.il, batch.slot[t], batch.pos[t]);
        spans[t] = cache.span(l.il, batch.slot[t]);
      }
      stage_.put(s_.kv_dst, dst, T);
      stage_.put(s_.kv_span, spans, T);
      ops_.store_kv(cache.config().k_type, cache.config().v_type, l.kv_dim(), s_.k, s_.v, s_.kv_dst, T);
      ops_.attention({.n_tokens = T,
                      .n_head = l.n_head,
                      .head_dim = l.head_dim,
                      .q = s_.q,
                      .out = s_.att,
                      .pos = stage_.pos(),
                      .kv = s_.kv_span,
                      .window = l.window,
                      .scale = spec_.attention_scale});
      ops_.matmul(w.wo, s_.att, s_.xb2, T);
      ops_.add(s_.x, s_.xb2, T * H);
      // Feed-forward block: x += W_down · (silu(W_gate · xb) ⊙ (W_up · xb)).
      ops_.rmsnorm(s_.x, w.ffn_norm, s_.xb, H, T, spec_.rms_eps);
      ops_.matmul(w.w_gate, s_.xb, s_.hb, T);
      ops_.matmul(w.w_up, s_.xb, s_.hb2, T);
      ops_.silu_mul(s_.hb, s_.hb2, s_.hb, l.n_ff, T, l.n_ff);
      ops_.matmul(w.w_down, s_.hb, s_.xb2, T);
      ops_.add(s_.x, s_.xb2, T * H);
    }
    stage_.layers_done();
    // Logits only for the tokens that need them: gather their rows, final norm, classifier.
    int32_t* rows = stage_.host_rows(s_.out_rows);
    const int n_out = gather_output_rows(batch, rows);
    for (int i = 0; i < n_out; ++i) ops_.copy(s_.xb + i * H, s_.x + rows[i] * H, H);
    ops_.rmsnorm(s_.xb, output_norm_, s_.xb, H, n_out, spec_.rms_eps);
    stage_.logits(output_, s_.xb, n_out, 0.0f, logits);
    return stage_.status();
  }

 private:
  Spec spec_;
  kernels::Backend& ops_;
  int max_batch_;
  kernels::Matrix token_embd_, output_;
  const float* output_norm_ = nullptr;
  std::vector<LayerWeights> layers_;
  Stage stage_;
  Workspace buffer_;
  Scratch s_{};
};

}  // namespace

size_t llama_workspace_bytes(const Spec& spec, int max_batch) {
  ScratchCarver counter(nullptr);
  Scratch::lay_out(counter, spec, max_batch);
  return counter.bytes();
}

util::Result<std::unique_ptr<Model>> load_llama(const gguf::File& file, const Spec& spec, kernels::Backend& ops,
                                                const LoadOptions& options) {
  auto model = std::make_unique<Llama>(spec, ops, options.max_batch);
  HR_TRY(model->bind(file, options.placer));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace model

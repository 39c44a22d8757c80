// The llama forward pass (Llama 1/2/3, TinyStories): pre-norm attention with RoPE and a SwiGLU FFN.
#include "model/llama.h"

#include <cmath>

#include "model/lanes.h"

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
  float* x;                         // [B][H] residual stream
  float* xb;                        // [B][H] normed input of a block
  float* xb2;                       // [B][H] block output before the residual add
  float* q;                         // [B][nh·hd]
  float* k;                         // [B][nkv·hd]
  float* v;                         // [B][nkv·hd]
  float* att;                       // [B][nh·hd] attention output per head
  float* hb;                        // [B][n_ff] gate, then act(gate)·up
  float* hb2;                       // [B][n_ff] up
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
  Llama(Spec spec, int max_batch) : spec_(std::move(spec)), max_batch_(max_batch) {}

  util::Status bind(const gguf::File& file, kernels::Backend& ops, const LoadOptions& options) {
    HR_TRY(lanes_.init(file, ops, spec_, options));
    Binder& b = *lanes_.main().binder;
    const int64_t H = spec_.n_embd, V = spec_.n_vocab;
    HR_ASSIGN_OR_RETURN(token_embd_, b.matrix("token_embd.weight", H, V));
    HR_ASSIGN_OR_RETURN(output_norm_, b.vector("output_norm.weight", H));
    output_ = token_embd_;
    if (auto out = b.optional_matrix("output.weight", H, V)) {
      HR_ASSIGN_OR_RETURN(output_, std::move(*out));
    }
    for (const auto& l : spec_.layers) {
      Binder& lb = *lanes_.of_layer(l.il).binder;
      auto name = [&](std::string_view s) { return Binder::layer_name(l.il, s); };
      LayerWeights w;
      HR_ASSIGN_OR_RETURN(w.attn_norm, lb.vector(name("attn_norm.weight"), H));
      HR_ASSIGN_OR_RETURN(w.wq, lb.matrix(name("attn_q.weight"), H, l.q_dim()));
      HR_ASSIGN_OR_RETURN(w.wk, lb.matrix(name("attn_k.weight"), H, l.kv_dim()));
      HR_ASSIGN_OR_RETURN(w.wv, lb.matrix(name("attn_v.weight"), H, l.kv_dim()));
      HR_ASSIGN_OR_RETURN(w.wo, lb.matrix(name("attn_output.weight"), l.q_dim(), H));
      HR_ASSIGN_OR_RETURN(w.ffn_norm, lb.vector(name("ffn_norm.weight"), H));
      HR_ASSIGN_OR_RETURN(w.w_gate, lb.matrix(name("ffn_gate.weight"), H, l.n_ff));
      HR_ASSIGN_OR_RETURN(w.w_up, lb.matrix(name("ffn_up.weight"), H, l.n_ff));
      HR_ASSIGN_OR_RETURN(w.w_down, lb.matrix(name("ffn_down.weight"), l.n_ff, H));
      layers_.push_back(w);
    }
    return lanes_.allocate_scratch(spec_, max_batch_);
  }

  const Spec& spec() const override { return spec_; }
  int max_batch() const override { return max_batch_; }
  size_t workspace_bytes() const override { return lanes_.workspace_bytes(); }
  size_t placed_weight_bytes() const override { return lanes_.placed_bytes(); }

  util::Status forward(const Batch& batch, kv::Cache& cache, float* logits) override {
    const int T = batch.size();
    const int64_t H = spec_.n_embd;
    if (T <= 0 || T > max_batch_)
      return util::errorf("model: batch of {} tokens (1 to {} allowed)", T, max_batch_);
    for (int t = 0; t < T; ++t) cache.set_position(batch.slot[t], batch.pos[t]);
    lanes_.begin(batch, cache);

    // x = token_embd[tokens]
    L& m = lanes_.main();
    m.ops->get_rows(token_embd_, m.stage.tokens(), T, 1.0f, m.s.x);
    lanes_.trace(m, m.s.x, T, H, "inp_embd");
    L* at = &m;
    for (const auto& l : spec_.layers) {
      L& lane = lanes_.of_layer(l.il);
      if (&lane != at) lanes_.cross(*at, lane, lane.s.x, at->s.x, T * H * sizeof(float));
      at = &lane;
      layer(lane, l, layers_[l.il], batch, cache);
    }
    if (at != &m) lanes_.cross(*at, m, m.s.x, at->s.x, T * H * sizeof(float));
    lanes_.layers_done();
    // Logits only for the tokens that need them: gather their rows, final norm, classifier.
    int32_t* rows = m.stage.host_rows(m.s.out_rows);
    const int n_out = gather_output_rows(batch, rows);
    for (int i = 0; i < n_out; ++i) m.ops->copy(m.s.xb + i * H, m.s.x + rows[i] * H, H);
    m.ops->rmsnorm(m.s.xb, output_norm_, m.s.xb, H, n_out, spec_.rms_eps);
    lanes_.trace(m, m.s.xb, n_out, H, "result_norm");
    m.stage.logits(output_, m.s.xb, n_out, 0.0f, logits);
    return lanes_.status();
  }

 private:
  using L = Lane<Scratch>;

  void layer(L& lane, const LayerSpec& l, const LayerWeights& w, const Batch& batch,
             kv::Cache& cache) {
    kernels::Backend& ops = *lane.ops;
    Stage& stage = lane.stage;
    Scratch& s = lane.s;
    const int T = batch.size();
    const int64_t H = spec_.n_embd;
    // Attention block: xb = rmsnorm(x); q, k, v projections; RoPE on q and k.
    ops.rmsnorm(s.x, w.attn_norm, s.xb, H, T, spec_.rms_eps);
    lanes_.trace(lane, s.xb, T, H, "attn_norm", l.il);
    ops.matmul(w.wq, s.xb, s.q, T);
    ops.matmul(w.wk, s.xb, s.k, T);
    ops.matmul(w.wv, s.xb, s.v, T);
    const kernels::RopeParams rope{to_kernel(l.rope.style), l.rope.n_rot, stage.inv_freq(l.il)};
    ops.rope(s.q, T, l.n_head, l.head_dim, stage.pos(), rope);
    ops.rope(s.k, T, l.n_head_kv, l.head_dim, stage.pos(), rope);
    lanes_.trace(lane, s.q, T, l.q_dim(), "Qcur", l.il);
    lanes_.trace(lane, s.k, T, l.kv_dim(), "Kcur", l.il);
    lanes_.trace(lane, s.v, T, l.kv_dim(), "Vcur", l.il);
    // K and V go into the cache (quantized as stored); attention reads them back from there.
    stage.put_kv_destinations(s.kv_dst, l.il, batch, cache);
    stage.put_kv_spans(s.kv_span, l.il, batch, cache);
    ops.store_kv(cache.config().k_type, cache.config().v_type, l.kv_dim(), s.k, s.v, s.kv_dst, T);
    ops.attention({.n_tokens = T,
                   .n_head = l.n_head,
                   .head_dim = l.head_dim,
                   .q = s.q,
                   .out = s.att,
                   .pos = stage.pos(),
                   .kv = s.kv_span,
                   .window = l.window,
                   .scale = spec_.attention_scale});
    ops.matmul(w.wo, s.att, s.xb2, T);
    lanes_.trace(lane, s.xb2, T, H, "attn_out", l.il);
    ops.add(s.x, s.xb2, T * H);
    lanes_.trace(lane, s.x, T, H, "ffn_inp", l.il);
    // Feed-forward block: x += W_down · (silu(W_gate · xb) ⊙ (W_up · xb)).
    ops.rmsnorm(s.x, w.ffn_norm, s.xb, H, T, spec_.rms_eps);
    ops.matmul(w.w_gate, s.xb, s.hb, T);
    ops.matmul(w.w_up, s.xb, s.hb2, T);
    ops.silu_mul(s.hb, s.hb2, s.hb, l.n_ff, T, l.n_ff);
    ops.matmul(w.w_down, s.hb, s.xb2, T);
    lanes_.trace(lane, s.xb2, T, H, "ffn_out", l.il);
    ops.add(s.x, s.xb2, T * H);
    lanes_.trace(lane, s.x, T, H, "l_out", l.il);
  }

  Spec spec_;
  int max_batch_;
  kernels::Matrix token_embd_, output_;
  const float* output_norm_ = nullptr;
  std::vector<LayerWeights> layers_;
  Lanes<Scratch> lanes_;
};

}  // namespace

size_t llama_workspace_bytes(const Spec& spec, int max_batch) {
  ScratchCarver counter(nullptr);
  Scratch::lay_out(counter, spec, max_batch);
  return counter.bytes();
}

util::Result<std::unique_ptr<Model>> load_llama(const gguf::File& file, const Spec& spec,
                                                kernels::Backend& ops, const LoadOptions& options) {
  auto model = std::make_unique<Llama>(spec, options.max_batch);
  HR_TRY(model->bind(file, ops, options));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace model

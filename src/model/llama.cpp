// The llama forward pass (Llama 1/2/3, TinyStories): pre-norm attention with RoPE and a SwiGLU FFN.
#include "model/llama.h"

#include <algorithm>
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
  float* x;           // [B][H] residual stream
  float* xb;          // [B][H] normed input of a block
  float* xb2;         // [B][H] block output before the residual add
  float* q;           // [B][nh·hd]
  float* k;           // [B][nkv·hd]
  float* v;           // [B][nkv·hd]
  float* att;         // [B][nh·hd] attention output per head
  float* hb;          // [B][n_ff] act(gate)·up
  float* hb2;         // [B][n_ff] up (the composed gated product's)
  int32_t* out_rows;  // [B] batch rows that want logits
  // A device's decode (batches of at most kActQ8MaxTokens): 8-bit activations of the matmul
  // inputs (act_q8.h) and attention's split states; null on a host.
  void *xb_q8, *att_q8, *hb_q8;
  float* attn_partials;
  StageRegions stage;

  template <class Carver>
  static Scratch lay_out(Carver& c, const Spec& s, int B, bool device) {
    int q_dim = 0, kv_dim = 0, n_ff = 0, n_head = 0, hd = 0;
    for (const auto& l : s.layers) {
      q_dim = std::max(q_dim, l.q_dim());
      kv_dim = std::max(kv_dim, l.kv_dim());
      n_ff = std::max(n_ff, l.n_ff);
      n_head = std::max(n_head, l.n_head);
      hd = std::max(hd, l.head_dim);
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
    r.out_rows = c.template array<int32_t>(b);
    if (device) {
      const size_t bq = std::min<size_t>(b, kernels::kActQ8MaxTokens);
      r.xb_q8 = c.act_q8(bq, h);
      r.att_q8 = c.act_q8(bq, q_dim);
      r.hb_q8 = c.act_q8(bq, n_ff);
      r.attn_partials = c.attn_partials(bq, n_head, hd);
    }
    r.stage = StageRegions::lay_out(c, s, B, device);
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
  size_t staging_bytes() const override { return lanes_.staging_bytes(); }
  size_t placed_weight_bytes() const override { return lanes_.placed_bytes(); }
  util::Result<int> attach_lora(const LoraAdapter& a) override {
    return lanes_.lora_bank().attach(a);
  }
  void detach_lora(int slot) override { lanes_.lora_bank().detach(slot); }
  size_t lora_pool_bytes() const override { return lanes_.lora_pool_bytes(); }

  util::Status forward(const Batch& batch, kv::Cache& cache, const Outputs& out) override {
    const int T = batch.size();
    const int64_t H = spec_.n_embd;
    if (T <= 0 || T > max_batch_)
      return util::errorf("model: batch of {} tokens (1 to {} allowed)", T, max_batch_);
    for (int t = 0; t < T; ++t) cache.set_position(batch.slot[t], batch.pos[t]);
    lanes_.begin(batch, cache, out);

    // x = token_embd[tokens], or a row's own embedding (Batch::embedded)
    L& m = lanes_.main();
    m.ops->get_rows(token_embd_, m.stage.tokens(), T, 1.0f, m.s.x);
    lanes_.embed_rows(m, batch, m.s.x, H);
    lanes_.trace(m, m.s.x, T, H, "inp_embd");
    L* at = &m;
    bool normed = false;  // xb holds this layer's attention input, made by the layer before
    const int n_layer = static_cast<int>(spec_.layers.size());
    for (const auto& l : spec_.layers) {
      L& lane = lanes_.of_layer(l.il);
      if (&lane != at) {
        lanes_.cross(*at, lane, lane.s.x, at->s.x, T * H * sizeof(float));
        normed = false;
      }
      at = &lane;
      if (!normed) norm_into_xb(lane, layers_[l.il].attn_norm, T);
      // The next layer's input norm ends this layer when the next layer runs on the same lane.
      const bool last = l.il + 1 == n_layer;
      const float* next_norm =
          !last && &lanes_.of_layer(l.il + 1) == &lane ? layers_[l.il + 1].attn_norm : nullptr;
      layer(lane, l, layers_[l.il], batch, cache, next_norm);
      normed = next_norm != nullptr;
    }
    if (at != &m) lanes_.cross(*at, m, m.s.x, at->s.x, T * H * sizeof(float));
    // Logits only for the tokens that need them: gather their rows, final norm, classifier.
    lanes_.output_head(batch, output_norm_, spec_.rms_eps, output_, 0.0f, H, out);
    return lanes_.status();
  }

 private:
  using L = Lane<Scratch>;

  // xb = rmsnorm(x; w), with its 8-bit form in a decode batch on a device.
  void norm_into_xb(L& lane, const float* w, int T) {
    kernels::ResidualNorm r{.n = spec_.n_embd, .n_rows = T, .eps = spec_.rms_eps, .x = lane.s.x};
    r.out[r.n_out++] = {.normalize = true,
                        .w = w,
                        .y = lane.s.xb,
                        .y_q8 = lanes_.q8(lane, lane.s.xb_q8, T, spec_.n_embd)};
    lane.ops->residual_norm(r);
  }

  // x += block(xb) for the attention and the feed-forward block; xb holds rmsnorm(x; attn_norm)
  // on entry and, when next_norm is given, the next layer's rmsnorm(x; next_norm) on return.
  void layer(L& lane, const LayerSpec& l, const LayerWeights& w, const Batch& batch,
             kv::Cache& cache, const float* next_norm) {
    kernels::Backend& ops = *lane.ops;
    Stage& stage = lane.stage;
    Scratch& s = lane.s;
    const int T = batch.size();
    const int64_t H = spec_.n_embd;
    lanes_.trace(lane, s.xb, T, H, "attn_norm", l.il);
    // Attention block: q, k, v projections; RoPE on q and k; K and V into the cache (quantized
    // as stored), from where attention reads them back.
    const kernels::MatmulOut qkv[3] = {{w.wq, s.q}, {w.wk, s.k}, {w.wv, s.v}};
    ops.matmuls(qkv, 3, lanes_.act(lane, s.xb, s.xb_q8, T, H), T);
    lanes_.lora(lane, l.il, LoraTarget::kQ, s.xb, s.q, T);
    lanes_.lora(lane, l.il, LoraTarget::kK, s.xb, s.k, T);
    lanes_.lora(lane, l.il, LoraTarget::kV, s.xb, s.v, T);
    ops.attn_prep({.n_tokens = T,
                   .n_head = l.n_head,
                   .n_head_kv = l.n_head_kv,
                   .head_dim = l.head_dim,
                   .eps = spec_.rms_eps,
                   .q = s.q,
                   .k = s.k,
                   .v = s.v,
                   .pos = stage.pos(),
                   .rope = {to_kernel(l.rope.style), l.rope.n_rot, stage.inv_freq(l.il)},
                   .k_type = cache.config().k_type,
                   .v_type = cache.config().v_type,
                   .dst = stage.kv_destinations(l.il)});
    lanes_.trace(lane, s.q, T, l.q_dim(), "Qcur", l.il);
    lanes_.trace(lane, s.k, T, l.kv_dim(), "Kcur", l.il);
    lanes_.trace(lane, s.v, T, l.kv_dim(), "Vcur", l.il);
    ops.attention({.n_tokens = T,
                   .n_head = l.n_head,
                   .head_dim = l.head_dim,
                   .q = s.q,
                   .out = s.att,
                   .pos = stage.pos(),
                   .kv = stage.kv_spans(l.il),
                   .window = l.window,
                   .scale = spec_.attention_scale,
                   .out_q8 = lanes_.q8(lane, s.att_q8, T, l.q_dim()),
                   .partials = lanes_.decoding(lane, T) ? s.attn_partials : nullptr});
    const kernels::MatmulOut wo[1] = {{w.wo, s.xb2}};
    ops.matmuls(wo, 1, lanes_.act(lane, s.att, s.att_q8, T, l.q_dim()), T);
    lanes_.lora(lane, l.il, LoraTarget::kO, s.att, s.xb2, T);
    lanes_.trace(lane, s.xb2, T, H, "attn_out", l.il);
    // x += xb2, xb = rmsnorm(x; ffn_norm)
    kernels::ResidualNorm attn_res{.n = H, .n_rows = T, .eps = spec_.rms_eps, .x = s.x};
    attn_res.branch[0] = s.xb2;
    attn_res.out[attn_res.n_out++] = {
        .normalize = true, .w = w.ffn_norm, .y = s.xb, .y_q8 = lanes_.q8(lane, s.xb_q8, T, H)};
    ops.residual_norm(attn_res);
    lanes_.trace(lane, s.x, T, H, "ffn_inp", l.il);
    // Feed-forward block: x += W_down · (silu(W_gate · xb) ⊙ (W_up · xb)).
    const bool hb_q8 = lanes_.mlp_glu(lane, l.il,
                                      {.gate = w.w_gate,
                                       .up = w.w_up,
                                       .act = kernels::GluActivation::kSilu,
                                       .x = lanes_.act(lane, s.xb, s.xb_q8, T, H),
                                       .n_tokens = T,
                                       .out = s.hb,
                                       .out_q8 = lanes_.q8(lane, s.hb_q8, T, l.n_ff),
                                       .scratch = s.hb2});
    const kernels::MatmulOut down[1] = {{w.w_down, s.xb2}};
    ops.matmuls(down, 1, lanes_.act(lane, s.hb, hb_q8 ? s.hb_q8 : nullptr, T, l.n_ff), T);
    lanes_.lora(lane, l.il, LoraTarget::kDown, s.hb, s.xb2, T);
    lanes_.trace(lane, s.xb2, T, H, "ffn_out", l.il);
    kernels::ResidualNorm ffn_res{.n = H, .n_rows = T, .eps = spec_.rms_eps, .x = s.x};
    ffn_res.branch[0] = s.xb2;
    if (next_norm != nullptr) {
      ffn_res.out[ffn_res.n_out++] = {
          .normalize = true, .w = next_norm, .y = s.xb, .y_q8 = lanes_.q8(lane, s.xb_q8, T, H)};
    }
    ops.residual_norm(ffn_res);
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

size_t llama_workspace_bytes(const Spec& spec, int max_batch, bool device) {
  ScratchCarver counter(nullptr);
  Scratch::lay_out(counter, spec, max_batch, device);
  return counter.bytes();
}

util::Result<std::unique_ptr<Model>> load_llama(const gguf::File& file, const Spec& spec,
                                                kernels::Backend& ops, const LoadOptions& options) {
  auto model = std::make_unique<Llama>(spec, options.max_batch);
  HR_TRY(model->bind(file, ops, options));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace model

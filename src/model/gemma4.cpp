// The Gemma 4 forward pass (spec §2): sliding and full attention with per-head norms, KV sharing,
// per-layer embeddings, GeGLU FFN with optional MoE, layer scalars and a final logit softcap.
#include "model/gemma4.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "model/lanes.h"

namespace model {
namespace {

struct MoeWeights {
  kernels::Matrix router;     // [n_expert] × [H]          ffn_gate_inp
  const float* router_scale;  // [H]                       ffn_gate_inp.scale
  const float* pre_norm_2;    // [H]                       pre_ffw_norm_2
  const float* post_norm_1;   // [H]                       post_ffw_norm_1
  const float* post_norm_2;   // [H]                       post_ffw_norm_2
  kernels::Matrix gate_up;    // [n_expert·2F] × [H]       gate rows then up rows per expert
  kernels::Matrix gate, up;   // [n_expert·F] × [H] each   (unfused files)
  bool fused = true;
  kernels::Matrix down;       // [n_expert·H] × [F]
  const float* expert_scale;  // [n_expert] or null        ffn_down_exps.scale
};

struct LayerWeights {
  const float* attn_norm;        // [H]
  kernels::Matrix wq;            // [nh·hd] × [H]
  const float* q_norm;           // [hd]
  kernels::Matrix wk, wv;        // [nkv·hd] × [H]  (KV-owning layers; wv absent when V = raw K)
  const float* k_norm;           // [hd]
  kernels::Matrix wo;            // [H] × [nh·hd]
  const float* post_attn_norm;   // [H]
  const float* ffn_norm;         // [H]
  kernels::Matrix w_gate, w_up;  // [n_ff] × [H]
  kernels::Matrix w_down;        // [H] × [n_ff]
  const float* post_ffw_norm;    // [H]
  float output_scale = 1.0f;     // layer_output_scale (one float for the whole layer)
  kernels::Matrix ple_gate;      // [P] × [H]   inp_gate
  kernels::Matrix ple_proj;      // [H] × [P]   proj
  const float* ple_post_norm;    // [H]         post_norm
  MoeWeights moe;
};

// Activations for up to B tokens.
struct Scratch {
  float *x, *xb, *xb2;   // [B][H]
  float *q, *att;        // [B][max nh·hd]
  float *k, *v;          // [B][max nkv·hd]
  float *hb, *hb2;       // [B][max n_ff]
  float *ple, *ple_tmp;  // [B][L·P] per-layer inputs (layer l at column l·P)
  float *ple_a, *ple_b;  // [B][P]
  // MoE, [B][H]: the router's input, the experts' input, their weighted sum
  float *moe_in, *moe_out, *moe_acc;
  float* router_logits;   // [B][n_expert]
  int32_t* expert_ids;    // [B][k]
  float* expert_weights;  // [B][k]
  float* expert_h;        // [B][k][F]
  // Where the composed MoE ops gather one expert's rows ([B][H], [B][2F], [B][F]).
  float *moe_gather_h, *moe_gather_gu, *moe_gather_f;
  int32_t* out_rows;  // [B]
  // A device's decode (batches of at most kActQ8MaxTokens): 8-bit activations of the matmul
  // inputs (act_q8.h) and attention's split states; null on a host.
  void *xb_q8, *x_q8, *att_q8, *hb_q8, *ple_a_q8, *moe_in_q8, *moe_out_q8, *expert_h_q8;
  float* attn_partials;
  StageRegions stage;

  template <class Carver>
  static Scratch lay_out(Carver& c, const Spec& s, int B, bool device) {
    size_t q_dim = 0, kv_dim = 0, n_ff = 0, n_expert = 1, k = 1, f_exp = 1, n_head = 0, hd = 0;
    for (const auto& l : s.layers) {
      q_dim = std::max<size_t>(q_dim, l.q_dim());
      kv_dim = std::max<size_t>(kv_dim, l.kv_dim());
      n_ff = std::max<size_t>(n_ff, l.n_ff);
      n_expert = std::max<size_t>(n_expert, l.n_expert);
      k = std::max<size_t>(k, l.n_expert_used);
      f_exp = std::max<size_t>(f_exp, l.n_ff_exp);
      n_head = std::max<size_t>(n_head, l.n_head);
      hd = std::max<size_t>(hd, l.head_dim);
    }
    const bool moe = n_expert > 1;
    const size_t b = B, h = s.n_embd, p = s.n_embd_per_layer, lp = p * s.n_layer;
    Scratch r{};
    r.x = c.floats(b * h);
    r.xb = c.floats(b * h);
    r.xb2 = c.floats(b * h);
    r.q = c.floats(b * q_dim);
    r.att = c.floats(b * q_dim);
    r.k = c.floats(b * kv_dim);
    r.v = c.floats(b * kv_dim);
    r.hb = c.floats(b * n_ff);
    r.hb2 = c.floats(b * n_ff);
    r.ple = c.floats(b * lp);
    r.ple_tmp = c.floats(b * lp);
    r.ple_a = c.floats(b * p);
    r.ple_b = c.floats(b * p);
    const size_t moe_b = moe ? b : 0;
    r.moe_in = c.floats(moe_b * h);
    r.moe_out = c.floats(moe_b * h);
    r.moe_acc = c.floats(moe_b * h);
    r.router_logits = c.floats(moe_b * n_expert);
    r.expert_ids = c.template array<int32_t>(moe_b * k);
    r.expert_weights = c.floats(moe_b * k);
    r.expert_h = c.floats(moe_b * k * f_exp);
    r.moe_gather_h = c.floats(moe_b * h);
    r.moe_gather_gu = c.floats(moe_b * 2 * f_exp);
    r.moe_gather_f = c.floats(moe_b * f_exp);
    r.out_rows = c.template array<int32_t>(b);
    if (device) {
      const size_t bq = std::min<size_t>(b, kernels::kActQ8MaxTokens);
      r.xb_q8 = c.act_q8(bq, h);
      r.x_q8 = c.act_q8(bq, h);
      r.att_q8 = c.act_q8(bq, q_dim);
      r.hb_q8 = c.act_q8(bq, n_ff);
      r.ple_a_q8 = p > 0 ? c.act_q8(bq, p) : nullptr;
      r.moe_in_q8 = moe ? c.act_q8(bq, h) : nullptr;
      r.moe_out_q8 = moe ? c.act_q8(bq, h) : nullptr;
      r.expert_h_q8 = moe ? c.act_q8(bq * k, f_exp) : nullptr;
      r.attn_partials = c.attn_partials(bq, n_head, hd);
    }
    r.stage = StageRegions::lay_out(c, s, B, device);
    return r;
  }
};

class Gemma4 final : public Model {
 public:
  Gemma4(Spec spec, int max_batch) : spec_(std::move(spec)), max_batch_(max_batch) {}

  util::Status bind(const gguf::File& file, kernels::Backend& ops, const LoadOptions& options);
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
  util::Status forward(const Batch& batch, kv::Cache& cache, const Outputs& out) override;

 private:
  using L = Lane<Scratch>;
  void per_layer_inputs(const Batch& batch);
  void attention(L& lane, const LayerSpec& l, const LayerWeights& w, const Batch& batch,
                 kv::Cache& cache);
  void attention_residual(L& lane, const LayerSpec& l, const LayerWeights& w, int T);
  void ffn_dense(L& lane, const LayerSpec& l, const LayerWeights& w, int T);
  void ffn_moe(L& lane, const LayerSpec& l, const MoeWeights& w, int T);
  void ffn_residual(L& lane, const LayerSpec& l, const LayerWeights& w, int T,
                    const float* next_norm);
  void inject_ple(L& lane, const LayerWeights& w, int il, int T, const float* next_norm);
  // The norm of x that layer il's attention starts from, when the previous step did not make it.
  void attn_input(L& lane, const LayerWeights& w, int T);
  // Hands the residual stream (and the per-layer inputs) from one lane to the next.
  void cross(L& from, L& to, int T);

  Spec spec_;
  int max_batch_;
  kernels::Matrix token_embd_, output_;
  const float* output_norm_ = nullptr;
  kernels::Matrix ple_table_;             // [V] × [L·P]  per_layer_token_embd (gathered by row)
  kernels::Matrix ple_model_proj_;        // [L·P] × [H]  per_layer_model_proj
  const float* ple_proj_norm_ = nullptr;  // [P]
  std::vector<LayerWeights> layers_;
  Lanes<Scratch> lanes_;
};

util::Status Gemma4::bind(const gguf::File& file, kernels::Backend& ops,
                          const LoadOptions& options) {
  HR_TRY(lanes_.init(file, ops, spec_, options));
  Binder& b = *lanes_.main().binder;
  const int64_t H = spec_.n_embd, V = spec_.n_vocab, P = spec_.n_embd_per_layer, L = spec_.n_layer;
  HR_ASSIGN_OR_RETURN(token_embd_, b.matrix("token_embd.weight", H, V));
  HR_ASSIGN_OR_RETURN(output_norm_, b.vector("output_norm.weight", H));
  output_ = token_embd_;  // tied (§2.4) unless the file carries its own output matrix
  if (auto out = b.optional_matrix("output.weight", H, V)) {
    HR_ASSIGN_OR_RETURN(output_, std::move(*out));
  }
  if (P > 0) {
    HR_ASSIGN_OR_RETURN(
        ple_table_, lanes_.of_ple_table().binder->matrix("per_layer_token_embd.weight", L * P, V));
    HR_ASSIGN_OR_RETURN(ple_model_proj_, b.matrix("per_layer_model_proj.weight", H, L * P));
    HR_ASSIGN_OR_RETURN(ple_proj_norm_, b.vector("per_layer_proj_norm.weight", P));
  }
  for (const auto& l : spec_.layers) {
    Binder& lb = *lanes_.of_layer(l.il).binder;
    auto name = [&](std::string_view s) { return Binder::layer_name(l.il, s); };
    LayerWeights w{};
    HR_ASSIGN_OR_RETURN(w.attn_norm, lb.vector(name("attn_norm.weight"), H));
    HR_ASSIGN_OR_RETURN(w.wq, lb.matrix(name("attn_q.weight"), H, l.q_dim()));
    HR_ASSIGN_OR_RETURN(w.q_norm, lb.vector(name("attn_q_norm.weight"), l.head_dim));
    // KV-shared layers never use attn_k/attn_v/attn_k_norm, whether or not the file has them
    // (§3.3a).
    if (l.owns_kv()) {
      HR_ASSIGN_OR_RETURN(w.wk, lb.matrix(name("attn_k.weight"), H, l.kv_dim()));
      if (l.has_v_proj) {
        HR_ASSIGN_OR_RETURN(w.wv, lb.matrix(name("attn_v.weight"), H, l.kv_dim()));
      }
      HR_ASSIGN_OR_RETURN(w.k_norm, lb.vector(name("attn_k_norm.weight"), l.head_dim));
    }
    HR_ASSIGN_OR_RETURN(w.wo, lb.matrix(name("attn_output.weight"), l.q_dim(), H));
    HR_ASSIGN_OR_RETURN(w.post_attn_norm, lb.vector(name("post_attention_norm.weight"), H));
    HR_ASSIGN_OR_RETURN(w.ffn_norm, lb.vector(name("ffn_norm.weight"), H));
    HR_ASSIGN_OR_RETURN(w.w_gate, lb.matrix(name("ffn_gate.weight"), H, l.n_ff));
    HR_ASSIGN_OR_RETURN(w.w_up, lb.matrix(name("ffn_up.weight"), H, l.n_ff));
    HR_ASSIGN_OR_RETURN(w.w_down, lb.matrix(name("ffn_down.weight"), l.n_ff, H));
    HR_ASSIGN_OR_RETURN(w.post_ffw_norm, lb.vector(name("post_ffw_norm.weight"), H));
    if (auto scale = lb.optional_scalar(name("layer_output_scale.weight"))) {
      // Read once on the host: it multiplies the whole residual stream.
      HR_ASSIGN_OR_RETURN(w.output_scale, std::move(*scale));
    }
    if (P > 0) {
      HR_ASSIGN_OR_RETURN(w.ple_gate, lb.matrix(name("inp_gate.weight"), H, P));
      HR_ASSIGN_OR_RETURN(w.ple_proj, lb.matrix(name("proj.weight"), P, H));
      HR_ASSIGN_OR_RETURN(w.ple_post_norm, lb.vector(name("post_norm.weight"), H));
    }
    if (l.is_moe()) {
      MoeWeights& m = w.moe;
      const int64_t E = l.n_expert, F = l.n_ff_exp;
      // The router and the experts (the planner's "experts" class) live where the experts run.
      Binder& eb = *lanes_.of_experts(l.il).binder;
      HR_ASSIGN_OR_RETURN(m.router, eb.matrix(name("ffn_gate_inp.weight"), H, E));
      HR_ASSIGN_OR_RETURN(m.router_scale, eb.vector(name("ffn_gate_inp.scale"), H));
      HR_ASSIGN_OR_RETURN(m.pre_norm_2, lb.vector(name("pre_ffw_norm_2.weight"), H));
      HR_ASSIGN_OR_RETURN(m.post_norm_1, lb.vector(name("post_ffw_norm_1.weight"), H));
      HR_ASSIGN_OR_RETURN(m.post_norm_2, lb.vector(name("post_ffw_norm_2.weight"), H));
      m.fused = eb.has(name("ffn_gate_up_exps.weight"));
      if (m.fused) {
        HR_ASSIGN_OR_RETURN(m.gate_up, eb.matrix(name("ffn_gate_up_exps.weight"), H, 2 * F, E));
      } else {
        HR_ASSIGN_OR_RETURN(m.gate, eb.matrix(name("ffn_gate_exps.weight"), H, F, E));
        HR_ASSIGN_OR_RETURN(m.up, eb.matrix(name("ffn_up_exps.weight"), H, F, E));
      }
      HR_ASSIGN_OR_RETURN(m.down, eb.matrix(name("ffn_down_exps.weight"), F, H, E));
      m.expert_scale = nullptr;  // absent: every expert scale is 1 (§3.3b)
      if (auto scale = eb.optional_vector(name("ffn_down_exps.scale"), E)) {
        HR_ASSIGN_OR_RETURN(m.expert_scale, std::move(*scale));
      }
    }
    layers_.push_back(w);
  }
  return lanes_.allocate_scratch(spec_, max_batch_);
}

// §2.2: p_l = (RMSNorm(per_layer_model_proj·x0 / √H; proj_norm) + per_layer_token_embd[t]·√P) / √2
// The table lookup runs where the table is (the host lane with ple_on_host); the rest on main.
// A soft token reads the pad token's row (kEmbeddedRowToken) and projects its medium's embedding.
void Gemma4::per_layer_inputs(const Batch& batch) {
  const int T = batch.size();
  const int64_t H = spec_.n_embd, P = spec_.n_embd_per_layer, LP = P * spec_.n_layer;
  L& m = lanes_.main();
  L& t = lanes_.of_ple_table();
  t.ops->get_rows(ple_table_, t.stage.tokens(), T, std::sqrt(static_cast<float>(P)), t.s.ple_tmp);
  lanes_.cross(t, m, m.s.ple_tmp, t.s.ple_tmp, T * LP * sizeof(float));
  kernels::Backend& ops = *m.ops;
  ops.matmul(ple_model_proj_, m.s.x, m.s.ple, T);  // uses the already √H-scaled embedding x0
  ops.scale(m.s.ple, 1.0f / std::sqrt(static_cast<float>(H)), T * LP);
  ops.rmsnorm(m.s.ple, ple_proj_norm_, m.s.ple, P, T * spec_.n_layer, spec_.rms_eps);
  ops.add(m.s.ple, m.s.ple_tmp, T * LP);
  ops.scale(m.s.ple, 1.0f / std::sqrt(2.0f), T * LP);
  lanes_.trace(m, m.s.ple, T, LP, "inp_per_layer");
}

// §2.3 steps 1–6, up to W_o: q/k/v from xb (the layer's attention input, normed), their norms,
// RoPE and the cache store, attention, the output projection into xb2.
void Gemma4::attention(L& lane, const LayerSpec& l, const LayerWeights& w, const Batch& batch,
                       kv::Cache& cache) {
  kernels::Backend& ops = *lane.ops;
  Stage& stage = lane.stage;
  Scratch& s = lane.s;
  const int T = batch.size();
  kernels::MatmulOut qkv[3] = {{w.wq, s.q}};
  int n_proj = 1;
  if (l.owns_kv()) {
    qkv[n_proj++] = {w.wk, s.k};
    // Without attn_v, V is the raw K projection, taken before K's norm and RoPE (§2.7).
    if (l.has_v_proj) qkv[n_proj++] = {w.wv, s.v};
  }
  ops.matmuls(qkv, n_proj, lanes_.act(lane, s.xb, s.xb_q8, T, spec_.n_embd), T);
  // LoRA terms before the norms and RoPE, as merged weights would act: V = raw K takes K's.
  lanes_.lora(lane, l.il, LoraTarget::kQ, s.xb, s.q, T);
  if (l.owns_kv()) {
    lanes_.lora(lane, l.il, LoraTarget::kK, s.xb, s.k, T);
    if (l.has_v_proj) lanes_.lora(lane, l.il, LoraTarget::kV, s.xb, s.v, T);
  }
  ops.attn_prep({.n_tokens = T,
                 .n_head = l.n_head,
                 .n_head_kv = l.n_head_kv,
                 .head_dim = l.head_dim,
                 .eps = spec_.rms_eps,
                 .q = s.q,
                 .q_norm = w.q_norm,
                 .k = l.owns_kv() ? s.k : nullptr,
                 .k_norm = w.k_norm,
                 .v = s.v,
                 .v_from_k = !l.has_v_proj,
                 .v_norm = true,
                 .pos = stage.pos(),
                 .rope = {to_kernel(l.rope.style), l.rope.n_rot, stage.inv_freq(l.il)},
                 .k_type = cache.config().k_type,
                 .v_type = cache.config().v_type,
                 .dst = stage.kv_destinations(l.il)});
  if (l.owns_kv()) {
    lanes_.trace(lane, s.k, T, l.kv_dim(), "Kcur", l.il);
    lanes_.trace(lane, s.v, T, l.kv_dim(), "Vcur", l.il);
  }
  lanes_.trace(lane, s.q, T, l.q_dim(), "Qcur", l.il);
  // A shared layer reads its source layer's cache with its own window rule (§2.6).
  ops.attention({.n_tokens = T,
                 .n_head = l.n_head,
                 .head_dim = l.head_dim,
                 .q = s.q,
                 .out = s.att,
                 .pos = stage.pos(),
                 .kv = stage.kv_spans(l.il),
                 .window = l.window,
                 .scale = spec_.attention_scale,
                 // Hugging Face's Gemma 4 lets an image's tokens see each other both ways on
                 // sliding layers only; full layers stay causal.
                 .attend_from = l.is_sliding() ? stage.attend_from() : nullptr,
                 .attend_until = l.is_sliding() ? stage.attend_until() : nullptr,
                 .out_q8 = lanes_.q8(lane, s.att_q8, T, l.q_dim()),
                 .partials = lanes_.decoding(lane, T) ? s.attn_partials : nullptr});
  ops.matmuls(std::array{kernels::MatmulOut{w.wo, s.xb2}}.data(), 1,
              lanes_.act(lane, s.att, s.att_q8, T, l.q_dim()), T);
  lanes_.lora(lane, l.il, LoraTarget::kO, s.att, s.xb2, T);
}

// §2.3 step 7, dense MLP: hb = gelu(W_gate · f) ⊙ (W_up · f), xb2 = W_down · hb, f = xb (the
// normed h_mid); each product with its LoRA terms.
void Gemma4::ffn_dense(L& lane, const LayerSpec& l, const LayerWeights& w, int T) {
  kernels::Backend& ops = *lane.ops;
  Scratch& s = lane.s;
  const bool hb_q8 = lanes_.mlp_glu(lane, l.il,
                                    {.gate = w.w_gate,
                                     .up = w.w_up,
                                     .act = kernels::GluActivation::kGelu,
                                     .x = lanes_.act(lane, s.xb, s.xb_q8, T, spec_.n_embd),
                                     .n_tokens = T,
                                     .out = s.hb,
                                     .out_q8 = lanes_.q8(lane, s.hb_q8, T, l.n_ff),
                                     .scratch = s.hb2});
  ops.matmuls(std::array{kernels::MatmulOut{w.w_down, s.xb2}}.data(), 1,
              lanes_.act(lane, s.hb, hb_q8 ? s.hb_q8 : nullptr, T, l.n_ff), T);
  lanes_.lora(lane, l.il, LoraTarget::kDown, s.hb, s.xb2, T);
}

// §2.3 step 7, MoE (26B-A4B): the experts' sum into moe_acc, from moe_in (the router's input) and
// moe_out (the experts'), made with the dense MLP's input. The router and the experts run on the
// experts' lane (the host with experts_on_host): the two inputs go there and the sum comes back.
void Gemma4::ffn_moe(L& lane, const LayerSpec& l, const MoeWeights& m, int T) {
  const int64_t H = spec_.n_embd;
  L& e = lanes_.of_experts(l.il);
  lanes_.cross(lane, e, e.s.moe_in, lane.s.moe_in, T * H * sizeof(float));
  lanes_.cross(lane, e, e.s.moe_out, lane.s.moe_out, T * H * sizeof(float));
  kernels::Backend& ops = *e.ops;
  Scratch& s = e.s;
  const bool scaled = &e == &lane;  // attention_residual applied the router's scale
  if (!scaled) {
    for (int t = 0; t < T; ++t) ops.mul(s.moe_in + t * H, m.router_scale, H);
  }
  ops.matmuls(std::array{kernels::MatmulOut{m.router, s.router_logits}}.data(), 1,
              lanes_.act(e, s.moe_in, scaled ? s.moe_in_q8 : nullptr, T, H), T);
  ops.moe_glu({.router_logits = s.router_logits,
               .n_expert = l.n_expert,
               .k = l.n_expert_used,
               .expert_scale = m.expert_scale,
               .ids = s.expert_ids,
               .weights = s.expert_weights,
               .gate_up = m.fused ? m.gate_up : kernels::Matrix{},
               .gate = m.gate,
               .up = m.up,
               .n_ff = l.n_ff_exp,
               .x = lanes_.act(e, s.moe_out, s.moe_out_q8, T, H),
               .n_tokens = T,
               .h = s.expert_h,
               .h_q8 = lanes_.q8(e, s.expert_h_q8, T * l.n_expert_used, l.n_ff_exp),
               .scratch_in = s.moe_gather_h,
               .scratch_gu = s.moe_gather_gu,
               .scratch_h = s.moe_gather_f});
  ops.moe_down({.down = m.down,
                .n_expert = l.n_expert,
                .k = l.n_expert_used,
                .ids = s.expert_ids,
                .weights = s.expert_weights,
                .h = {s.expert_h, lanes_.q8(e, s.expert_h_q8, T * l.n_expert_used, l.n_ff_exp)},
                .n_tokens = T,
                .out = s.moe_acc,
                .scratch_in = s.moe_gather_f,
                .scratch_out = s.moe_gather_h});
  lanes_.cross(e, lane, lane.s.moe_acc, s.moe_acc, T * H * sizeof(float));
}

// After attention: x += RMSNorm(xb2; post_attention_norm), then the FFN's inputs from h_mid = x:
// ffn_norm's for the dense MLP and, on MoE layers, the router's weightless norm / √H ⊙ its scale
// and pre_ffw_norm_2's for the experts (§2.7). The router's scale lives with the experts: where
// they run on another lane, it is applied there.
void Gemma4::attention_residual(L& lane, const LayerSpec& l, const LayerWeights& w, int T) {
  Scratch& s = lane.s;
  const int64_t H = spec_.n_embd;
  kernels::ResidualNorm r{.n = H,
                          .n_rows = T,
                          .eps = spec_.rms_eps,
                          .x = s.x,
                          .branch = {s.xb2, nullptr},
                          .branch_norm = {w.post_attn_norm, nullptr}};
  r.out[r.n_out++] = {
      .normalize = true, .w = w.ffn_norm, .y = s.xb, .y_q8 = lanes_.q8(lane, s.xb_q8, T, H)};
  if (l.is_moe()) {
    const bool experts_here = &lanes_.of_experts(l.il) == &lane;
    r.out[r.n_out++] = {.normalize = true,
                        .scale = 1.0f / std::sqrt(static_cast<float>(H)),
                        .mul = experts_here ? w.moe.router_scale : nullptr,
                        .y = s.moe_in,
                        .y_q8 = experts_here ? lanes_.q8(lane, s.moe_in_q8, T, H) : nullptr};
    r.out[r.n_out++] = {.normalize = true,
                        .w = w.moe.pre_norm_2,
                        .y = s.moe_out,
                        .y_q8 = lanes_.q8(lane, s.moe_out_q8, T, H)};
  }
  lane.ops->residual_norm(r);
  lanes_.trace(lane, s.xb2, T, H, "attn_out", l.il);
  lanes_.trace(lane, s.x, T, H, "ffn_inp", l.il);
}

// After the FFN: x += RMSNorm(branch; post_ffw_norm), the branch being the dense MLP's output or,
// on MoE layers, RMSNorm(dense; post_norm_1) + RMSNorm(experts; post_norm_2). Without per-layer
// inputs the layer ends here (its scalar, then the next layer's input norm); with them, the 8-bit
// form of x is made for the per-layer-input gate.
void Gemma4::ffn_residual(L& lane, const LayerSpec& l, const LayerWeights& w, int T,
                          const float* next_norm) {
  Scratch& s = lane.s;
  const int64_t H = spec_.n_embd;
  const bool ple = spec_.n_embd_per_layer > 0;
  kernels::ResidualNorm r{.n = H, .n_rows = T, .eps = spec_.rms_eps, .x = s.x};
  if (l.is_moe()) {
    r.branch[0] = s.xb2, r.branch[1] = s.moe_acc;
    r.branch_norm[0] = w.moe.post_norm_1, r.branch_norm[1] = w.moe.post_norm_2;
    r.sum_norm = w.post_ffw_norm;
  } else {
    r.branch[0] = s.xb2;
    r.branch_norm[0] = w.post_ffw_norm;
  }
  if (ple) {
    r.out[r.n_out++] = {.y_q8 = lanes_.q8(lane, s.x_q8, T, H)};
  } else {
    // §2.3 step 9: the layer scalar multiplies the whole residual stream, not just the branch.
    r.x_scale = w.output_scale;
    if (next_norm != nullptr)
      r.out[r.n_out++] = {
          .normalize = true, .w = next_norm, .y = s.xb, .y_q8 = lanes_.q8(lane, s.xb_q8, T, H)};
  }
  lane.ops->residual_norm(r);
  lanes_.trace(lane, s.xb2, T, H, "ffn_out", l.il);
}

// §2.2 (inside layer l): x += RMSNorm(proj · (gelu(inp_gate · x) ⊙ p_l); post_norm), then the
// layer scalar and the next layer's input norm.
void Gemma4::inject_ple(L& lane, const LayerWeights& w, int il, int T, const float* next_norm) {
  kernels::Backend& ops = *lane.ops;
  Scratch& s = lane.s;
  const int64_t H = spec_.n_embd, P = spec_.n_embd_per_layer, LP = P * spec_.n_layer;
  ops.matmul_glu({.gate = w.ple_gate,
                  .up_rows = s.ple + il * P,  // this layer's slice of every token
                  .up_stride = LP,
                  .act = kernels::GluActivation::kGelu,
                  .x = lanes_.act(lane, s.x, s.x_q8, T, H),
                  .n_tokens = T,
                  .out = s.ple_a,
                  .out_q8 = lanes_.q8(lane, s.ple_a_q8, T, P),
                  .scratch = s.ple_b});
  ops.matmuls(std::array{kernels::MatmulOut{w.ple_proj, s.xb2}}.data(), 1,
              lanes_.act(lane, s.ple_a, s.ple_a_q8, T, P), T);
  kernels::ResidualNorm r{.n = H,
                          .n_rows = T,
                          .eps = spec_.rms_eps,
                          .x = s.x,
                          .branch = {s.xb2, nullptr},
                          .branch_norm = {w.ple_post_norm, nullptr},
                          .x_scale = w.output_scale};
  if (next_norm != nullptr)
    r.out[r.n_out++] = {
        .normalize = true, .w = next_norm, .y = s.xb, .y_q8 = lanes_.q8(lane, s.xb_q8, T, H)};
  ops.residual_norm(r);
}

void Gemma4::attn_input(L& lane, const LayerWeights& w, int T) {
  kernels::ResidualNorm r{.n = spec_.n_embd, .n_rows = T, .eps = spec_.rms_eps, .x = lane.s.x};
  r.out[r.n_out++] = {.normalize = true,
                      .w = w.attn_norm,
                      .y = lane.s.xb,
                      .y_q8 = lanes_.q8(lane, lane.s.xb_q8, T, spec_.n_embd)};
  lane.ops->residual_norm(r);
}

void Gemma4::cross(L& from, L& to, int T) {
  const int64_t H = spec_.n_embd, LP = spec_.n_embd_per_layer * spec_.n_layer;
  lanes_.cross(from, to, to.s.x, from.s.x, T * H * sizeof(float));
  // The per-layer inputs are made on the main lane and only read after: the host lane takes a
  // copy when the pass first reaches it.
  L& m = lanes_.main();
  if (&to != &m && LP > 0) lanes_.cross(m, to, to.s.ple, m.s.ple, T * LP * sizeof(float));
}

util::Status Gemma4::forward(const Batch& batch, kv::Cache& cache, const Outputs& out) {
  const int T = batch.size();
  const int64_t H = spec_.n_embd;
  if (T <= 0 || T > max_batch_)
    return util::errorf("model: batch of {} tokens (1 to {} allowed)", T, max_batch_);
  for (int t = 0; t < T; ++t) cache.set_position(batch.slot[t], batch.pos[t]);
  lanes_.begin(batch, cache, out);

  L& m = lanes_.main();
  // §2.1: x0 = E[t]·√H; a soft token's x0 is its medium's embedding, unscaled (§2.1).
  m.ops->get_rows(token_embd_, m.stage.tokens(), T, spec_.embed_scale, m.s.x);
  lanes_.embed_rows(m, batch, m.s.x, H);
  lanes_.trace(m, m.s.x, T, H, "inp_embd");
  if (spec_.n_embd_per_layer > 0) per_layer_inputs(batch);
  L* at = &m;
  bool normed = false;  // xb holds this layer's attention input, made by the step before
  const int n_layer = static_cast<int>(spec_.layers.size());
  for (const auto& l : spec_.layers) {
    L& lane = lanes_.of_layer(l.il);
    if (&lane != at) {
      cross(*at, lane, T);
      normed = false;
    }
    at = &lane;
    const LayerWeights& w = layers_[l.il];
    if (!normed) attn_input(lane, w, T);
    lanes_.trace(lane, lane.s.xb, T, H, "attn_norm", l.il);
    attention(lane, l, w, batch, cache);
    attention_residual(lane, l, w, T);
    ffn_dense(lane, l, w, T);
    if (l.is_moe()) ffn_moe(lane, l, w.moe, T);
    // The next layer's input norm ends this layer when the next layer runs on the same lane.
    const bool last = l.il + 1 == n_layer;
    const float* next_norm =
        !last && &lanes_.of_layer(l.il + 1) == &lane ? layers_[l.il + 1].attn_norm : nullptr;
    ffn_residual(lane, l, w, T, next_norm);
    if (spec_.n_embd_per_layer > 0) inject_ple(lane, w, l.il, T, next_norm);
    normed = next_norm != nullptr;
    lanes_.trace(lane, lane.s.x, T, H, "l_out", l.il);
  }
  if (at != &m) cross(*at, m, T);
  // §2.4: final norm, tied projection, softcap — for the rows that want logits only.
  lanes_.output_head(batch, output_norm_, spec_.rms_eps, output_, spec_.final_logit_softcap, H,
                     out);
  return lanes_.status();
}

}  // namespace

size_t gemma4_workspace_bytes(const Spec& spec, int max_batch, bool device) {
  ScratchCarver counter(nullptr);
  Scratch::lay_out(counter, spec, max_batch, device);
  return counter.bytes();
}

util::Result<std::unique_ptr<Model>> load_gemma4(const gguf::File& file, const Spec& spec,
                                                 kernels::Backend& ops,
                                                 const LoadOptions& options) {
  auto model = std::make_unique<Gemma4>(spec, options.max_batch);
  HR_TRY(model->bind(file, ops, options));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace model

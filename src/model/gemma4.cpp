// The Gemma 4 forward pass (spec §2): sliding and full attention with per-head norms, KV sharing,
// per-layer embeddings, GeGLU FFN with optional MoE, layer scalars and a final logit softcap.
#include "model/gemma4.h"

#include <algorithm>
#include <cmath>

#include "model/lanes.h"
#include "model/llama.h"

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
  // [B][H]: router input, experts' input, their sum, rows per expert
  float *moe_in, *moe_out, *moe_acc, *moe_rows_in, *moe_rows_out;
  float* router_logits;             // [B][n_expert]
  float* expert_gu;                 // [B][2F]
  float* expert_h;                  // [B][F]
  int32_t* expert_ids;              // [B][k]
  float* expert_weights;            // [B][k]
  int32_t* expert_rows;             // [B]
  kernels::KvWrite* kv_dst;         // [B]
  const kernels::KvSpan** kv_span;  // [B]
  int32_t* out_rows;                // [B]

  template <class Carver>
  static Scratch lay_out(Carver& c, const Spec& s, int B) {
    size_t q_dim = 0, kv_dim = 0, n_ff = 0, n_expert = 1, k = 1, f_exp = 1;
    for (const auto& l : s.layers) {
      q_dim = std::max<size_t>(q_dim, l.q_dim());
      kv_dim = std::max<size_t>(kv_dim, l.kv_dim());
      n_ff = std::max<size_t>(n_ff, l.n_ff);
      n_expert = std::max<size_t>(n_expert, l.n_expert);
      k = std::max<size_t>(k, l.n_expert_used);
      f_exp = std::max<size_t>(f_exp, l.n_ff_exp);
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
    r.moe_rows_in = c.floats(moe_b * h);
    r.moe_rows_out = c.floats(moe_b * h);
    r.router_logits = c.floats(moe_b * n_expert);
    r.expert_gu = c.floats(moe_b * 2 * f_exp);
    r.expert_h = c.floats(moe_b * f_exp);
    r.expert_ids = c.template array<int32_t>(moe_b * k);
    r.expert_weights = c.floats(moe_b * k);
    r.expert_rows = c.template array<int32_t>(moe_b);
    r.kv_dst = c.template array<kernels::KvWrite>(b);
    r.kv_span = c.template array<const kernels::KvSpan*>(b);
    r.out_rows = c.template array<int32_t>(b);
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
  size_t placed_weight_bytes() const override { return lanes_.placed_bytes(); }
  util::Status forward(const Batch& batch, kv::Cache& cache, float* logits) override;

 private:
  using L = Lane<Scratch>;
  void per_layer_inputs(const Batch& batch);
  void attention(L& lane, const LayerSpec& l, const LayerWeights& w, const Batch& batch,
                 kv::Cache& cache);
  void ffn_dense(L& lane, const LayerSpec& l, const LayerWeights& w, int T);
  void ffn_moe(L& lane, const LayerSpec& l, const MoeWeights& w, int T);
  void inject_ple(L& lane, const LayerWeights& w, int il, int T);
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
  std::vector<char> moe_started_;  // per token of a pass: has its expert sum begun (ffn_moe)
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
  moe_started_.resize(max_batch_);
  return lanes_.allocate_scratch(spec_, max_batch_);
}

// §2.2: p_l = (RMSNorm(per_layer_model_proj·x0 / √H; proj_norm) + per_layer_token_embd[t]·√P) / √2
// The table lookup runs where the table is (the host lane with ple_on_host); the rest on main.
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

// §2.3 steps 1–6: x += RMSNorm(W_o · attention(q, cached k, v); post_attention_norm).
void Gemma4::attention(L& lane, const LayerSpec& l, const LayerWeights& w, const Batch& batch,
                       kv::Cache& cache) {
  kernels::Backend& ops = *lane.ops;
  Stage& stage = lane.stage;
  Scratch& s = lane.s;
  const int T = batch.size();
  const int64_t H = spec_.n_embd;
  const kernels::RopeParams rope{to_kernel(l.rope.style), l.rope.n_rot, stage.inv_freq(l.il)};
  ops.rmsnorm(s.x, w.attn_norm, s.xb, H, T, spec_.rms_eps);
  lanes_.trace(lane, s.xb, T, H, "attn_norm", l.il);
  ops.matmul(w.wq, s.xb, s.q, T);
  ops.rmsnorm(s.q, w.q_norm, s.q, l.head_dim, static_cast<int64_t>(T) * l.n_head, spec_.rms_eps);
  ops.rope(s.q, T, l.n_head, l.head_dim, stage.pos(), rope);
  if (l.owns_kv()) {
    ops.matmul(w.wk, s.xb, s.k, T);
    // Without attn_v, V is the raw K projection, taken before K's norm and RoPE (§2.7).
    if (l.has_v_proj)
      ops.matmul(w.wv, s.xb, s.v, T);
    else
      ops.copy(s.v, s.k, static_cast<int64_t>(T) * l.kv_dim());
    ops.rmsnorm(s.k, w.k_norm, s.k, l.head_dim, static_cast<int64_t>(T) * l.n_head_kv,
                spec_.rms_eps);
    ops.rope(s.k, T, l.n_head_kv, l.head_dim, stage.pos(), rope);
    ops.rmsnorm(s.v, nullptr, s.v, l.head_dim, static_cast<int64_t>(T) * l.n_head_kv,
                spec_.rms_eps);
    lanes_.trace(lane, s.k, T, l.kv_dim(), "Kcur", l.il);
    lanes_.trace(lane, s.v, T, l.kv_dim(), "Vcur", l.il);
    stage.put_kv_destinations(s.kv_dst, l.il, batch, cache);
    ops.store_kv(cache.config().k_type, cache.config().v_type, l.kv_dim(), s.k, s.v, s.kv_dst, T);
  }
  lanes_.trace(lane, s.q, T, l.q_dim(), "Qcur", l.il);
  // A shared layer reads its source layer's cache with its own window rule (§2.6).
  stage.put_kv_spans(s.kv_span, l.il, batch, cache);
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
  ops.rmsnorm(s.xb2, w.post_attn_norm, s.xb2, H, T, spec_.rms_eps);
  lanes_.trace(lane, s.xb2, T, H, "attn_out", l.il);
  ops.add(s.x, s.xb2, T * H);
  lanes_.trace(lane, s.x, T, H, "ffn_inp", l.il);
}

// §2.3 step 7, dense MLP: xb2 = W_down · (gelu(W_gate · f) ⊙ (W_up · f)), f = RMSNorm(h_mid;
// ffn_norm).
void Gemma4::ffn_dense(L& lane, const LayerSpec& l, const LayerWeights& w, int T) {
  kernels::Backend& ops = *lane.ops;
  Scratch& s = lane.s;
  ops.rmsnorm(s.x, w.ffn_norm, s.xb, spec_.n_embd, T, spec_.rms_eps);
  ops.matmul(w.w_gate, s.xb, s.hb, T);
  ops.matmul(w.w_up, s.xb, s.hb2, T);
  ops.gelu_mul(s.hb, s.hb2, s.hb, l.n_ff, T, l.n_ff);
  ops.matmul(w.w_down, s.hb, s.xb2, T);
}

// §2.3 step 7, MoE (26B-A4B): xb2 = RMSNorm(dense; post_norm_1) + RMSNorm(Σ_j w_j·expert_j(e_in);
// post_norm_2). Three inputs from the same h_mid: the router's weightless norm, pre_ffw_norm_2 for
// the experts, ffn_norm for the dense MLP (§2.7). The router and the experts run on the experts'
// lane (the host with experts_on_host): the two inputs go there and the experts' sum comes back.
void Gemma4::ffn_moe(L& lane, const LayerSpec& l, const MoeWeights& m, int T) {
  const int64_t H = spec_.n_embd, F = l.n_ff_exp;
  const int K = l.n_expert_used;
  {
    kernels::Backend& ops = *lane.ops;
    Scratch& s = lane.s;
    ops.rmsnorm(s.xb2, m.post_norm_1, s.xb2, H, T, spec_.rms_eps);
    ops.rmsnorm(s.x, nullptr, s.moe_in, H, T, spec_.rms_eps);  // router input: RMSNorm0(h_mid) / √H
    ops.scale(s.moe_in, 1.0f / std::sqrt(static_cast<float>(H)), T * H);
    ops.rmsnorm(s.x, m.pre_norm_2, s.moe_out, H, T, spec_.rms_eps);  // the experts' input
  }
  L& e = lanes_.of_experts(l.il);
  lanes_.cross(lane, e, e.s.moe_in, lane.s.moe_in, T * H * sizeof(float));
  lanes_.cross(lane, e, e.s.moe_out, lane.s.moe_out, T * H * sizeof(float));
  kernels::Backend& ops = *e.ops;
  Scratch& s = e.s;
  // Router: logits = W_r · (router input ⊙ scale).
  for (int t = 0; t < T; ++t) ops.mul(s.moe_in + t * H, m.router_scale, H);
  ops.matmul(m.router, s.moe_in, s.router_logits, T);
  ops.moe_route(s.router_logits, T, l.n_expert, K, m.expert_scale, s.expert_ids, s.expert_weights);
  // The host dispatches tokens to experts, batched per expert over the tokens that chose it: it
  // reads the routing (from the device, on a GPU).
  const int32_t* ids = e.stage.read(s.expert_ids, T * K);
  const float* weights = e.stage.read(s.expert_weights, T * K);
  int32_t* rows = e.stage.host_rows(s.expert_rows);
  // A token's first expert output is copied into its sum, the others added: the sums start from
  // nothing the previous pass (or, on a GPU, fresh device memory) left there — scaling leftovers
  // by 0 keeps a NaN a NaN.
  std::fill_n(moe_started_.begin(), T, 0);
  for (int ex = 0; ex < l.n_expert; ++ex) {
    int n = 0;
    for (int t = 0; t < T; ++t) {
      for (int j = 0; j < K; ++j) {
        if (ids[t * K + j] == ex) rows[n++] = t * K + j;
      }
    }
    if (n == 0) continue;
    for (int i = 0; i < n; ++i) ops.copy(s.moe_rows_in + i * H, s.moe_out + (rows[i] / K) * H, H);
    if (m.fused) {
      ops.matmul(m.gate_up.rows(ex * 2 * F, 2 * F), s.moe_rows_in, s.expert_gu, n);
      ops.gelu_mul(s.expert_gu, s.expert_gu + F, s.expert_h, F, n, 2 * F);
    } else {
      ops.matmul(m.gate.rows(ex * F, F), s.moe_rows_in, s.expert_gu, n);
      ops.matmul(m.up.rows(ex * F, F), s.moe_rows_in, s.expert_gu + n * F, n);
      ops.gelu_mul(s.expert_gu, s.expert_gu + n * F, s.expert_h, F, n, F);
    }
    ops.matmul(m.down.rows(ex * H, H), s.expert_h, s.moe_rows_out, n);
    for (int i = 0; i < n; ++i) {
      float* row = s.moe_rows_out + i * H;
      ops.scale(row, weights[rows[i]], H);
      const int t = rows[i] / K;
      if (moe_started_[t]) {
        ops.add(s.moe_acc + t * H, row, H);
      } else {
        ops.copy(s.moe_acc + t * H, row, H);
        moe_started_[t] = 1;
      }
    }
  }
  lanes_.cross(e, lane, lane.s.moe_acc, s.moe_acc, T * H * sizeof(float));
  lane.ops->rmsnorm(lane.s.moe_acc, m.post_norm_2, lane.s.moe_acc, H, T, spec_.rms_eps);
  lane.ops->add(lane.s.xb2, lane.s.moe_acc, T * H);
}

// §2.2 (inside layer l): x += RMSNorm(proj · (gelu(inp_gate · x) ⊙ p_l); post_norm).
void Gemma4::inject_ple(L& lane, const LayerWeights& w, int il, int T) {
  kernels::Backend& ops = *lane.ops;
  Scratch& s = lane.s;
  const int64_t H = spec_.n_embd, P = spec_.n_embd_per_layer, LP = P * spec_.n_layer;
  ops.matmul(w.ple_gate, s.x, s.ple_a, T);
  ops.copy_rows(s.ple_b, P, s.ple + il * P, LP, P, T);  // this layer's slice of every token
  ops.gelu_mul(s.ple_a, s.ple_b, s.ple_a, P, T, P);
  ops.matmul(w.ple_proj, s.ple_a, s.xb2, T);
  ops.rmsnorm(s.xb2, w.ple_post_norm, s.xb2, H, T, spec_.rms_eps);
  ops.add(s.x, s.xb2, T * H);
}

void Gemma4::cross(L& from, L& to, int T) {
  const int64_t H = spec_.n_embd, LP = spec_.n_embd_per_layer * spec_.n_layer;
  lanes_.cross(from, to, to.s.x, from.s.x, T * H * sizeof(float));
  // The per-layer inputs are made on the main lane and only read after: the host lane takes a
  // copy when the pass first reaches it.
  L& m = lanes_.main();
  if (&to != &m && LP > 0) lanes_.cross(m, to, to.s.ple, m.s.ple, T * LP * sizeof(float));
}

util::Status Gemma4::forward(const Batch& batch, kv::Cache& cache, float* logits) {
  const int T = batch.size();
  const int64_t H = spec_.n_embd;
  if (T <= 0 || T > max_batch_)
    return util::errorf("model: batch of {} tokens (1 to {} allowed)", T, max_batch_);
  for (int t = 0; t < T; ++t) cache.set_position(batch.slot[t], batch.pos[t]);
  lanes_.begin(batch, cache);

  L& m = lanes_.main();
  // §2.1: x0 = E[t]·√H
  m.ops->get_rows(token_embd_, m.stage.tokens(), T, spec_.embed_scale, m.s.x);
  lanes_.trace(m, m.s.x, T, H, "inp_embd");
  if (spec_.n_embd_per_layer > 0) per_layer_inputs(batch);
  L* at = &m;
  for (const auto& l : spec_.layers) {
    L& lane = lanes_.of_layer(l.il);
    if (&lane != at) cross(*at, lane, T);
    at = &lane;
    kernels::Backend& ops = *lane.ops;
    const LayerWeights& w = layers_[l.il];
    attention(lane, l, w, batch, cache);
    ffn_dense(lane, l, w, T);
    if (l.is_moe()) ffn_moe(lane, l, w.moe, T);
    ops.rmsnorm(lane.s.xb2, w.post_ffw_norm, lane.s.xb2, H, T, spec_.rms_eps);
    lanes_.trace(lane, lane.s.xb2, T, H, "ffn_out", l.il);
    ops.add(lane.s.x, lane.s.xb2, T * H);
    if (spec_.n_embd_per_layer > 0) inject_ple(lane, w, l.il, T);
    // §2.3 step 9: the layer scalar multiplies the whole residual stream, not just the branch.
    if (w.output_scale != 1.0f) ops.scale(lane.s.x, w.output_scale, T * H);
    lanes_.trace(lane, lane.s.x, T, H, "l_out", l.il);
  }
  if (at != &m) cross(*at, m, T);
  lanes_.layers_done();
  // §2.4: final norm, tied projection, softcap — for the rows that want logits only.
  int32_t* rows = m.stage.host_rows(m.s.out_rows);
  const int n_out = gather_output_rows(batch, rows);
  for (int i = 0; i < n_out; ++i) m.ops->copy(m.s.xb + i * H, m.s.x + rows[i] * H, H);
  m.ops->rmsnorm(m.s.xb, output_norm_, m.s.xb, H, n_out, spec_.rms_eps);
  lanes_.trace(m, m.s.xb, n_out, H, "result_norm");
  m.stage.logits(output_, m.s.xb, n_out, spec_.final_logit_softcap, logits);
  return lanes_.status();
}

}  // namespace

size_t gemma4_workspace_bytes(const Spec& spec, int max_batch) {
  ScratchCarver counter(nullptr);
  Scratch::lay_out(counter, spec, max_batch);
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

// Gemma 4's assistant drafter (model/assistant.h; docs/gemma4-assistant.md §3), on the model
// lane of the backend that holds the target's cache (the CPU, or the GPU the whole target computes
// on): the Stage hands each layer the spans of the target layer it reads (LoadOptions::
// cache_layers) and writes no K/V. Its input rows — the target's embedding of each token, gathered
// on the host from the target's file, beside the hidden state the scheduler holds — go up in one
// copy per step, so the target's embedding table is never placed twice.
#include "model/assistant.h"

#include <array>
#include <cmath>
#include <cstring>

#include "kernels/act_q8.h"
#include "kernels/buffer.h"
#include "kernels/ref/ref.h"
#include "model/lanes.h"

namespace model {
namespace {

struct LayerWeights {
  const float* attn_norm;        // [N_d]
  kernels::Matrix wq;            // [nh·hd] × [N_d]
  const float* q_norm;           // [hd]
  kernels::Matrix wo;            // [N_d] × [nh·hd]
  const float* post_attn_norm;   // [N_d]
  const float* ffn_norm;         // [N_d]
  kernels::Matrix w_gate, w_up;  // [n_ff] × [N_d]
  kernels::Matrix w_down;        // [N_d] × [n_ff]
  const float* post_ffw_norm;    // [N_d]
  float output_scale = 1.0f;     // layer_output_scale
};

// Activations for up to B rows (the input rows are Inputs, below).
struct Scratch {
  float *x, *xb, *xb2;  // [B][N_d]
  float *q, *att;       // [B][max nh·hd]
  float *hb, *hb2;      // [B][max n_ff]
  float* hidden_next;   // [B][N_b]
  int32_t* out_rows;    // [B]
  // A device's decode (batches of at most kActQ8MaxTokens), as the target's: 8-bit activations of
  // the matmul inputs (act_q8.h) and attention's split states; null on a host.
  void *xb_q8 = nullptr, *att_q8 = nullptr, *hb_q8 = nullptr;
  float* attn_partials = nullptr;
  StageRegions stage;

  template <class Carver>
  static Scratch lay_out(Carver& c, const Spec& s, int B, bool device) {
    size_t q_dim = 0, n_ff = 0, n_head = 0, hd = 0;
    for (const auto& l : s.layers) {
      q_dim = std::max<size_t>(q_dim, l.q_dim());
      n_ff = std::max<size_t>(n_ff, l.n_ff);
      n_head = std::max<size_t>(n_head, l.n_head);
      hd = std::max<size_t>(hd, l.head_dim);
    }
    const size_t b = B, d = s.n_embd, nb = s.n_embd_out;
    Scratch r{};
    r.x = c.floats(b * d);
    r.xb = c.floats(b * d);
    r.xb2 = c.floats(b * d);
    r.q = c.floats(b * q_dim);
    r.att = c.floats(b * q_dim);
    r.hb = c.floats(b * n_ff);
    r.hb2 = c.floats(b * n_ff);
    r.hidden_next = c.floats(b * nb);
    r.out_rows = c.template array<int32_t>(b);
    if (device) {
      const size_t bq = std::min<size_t>(b, kernels::kActQ8MaxTokens);
      r.xb_q8 = c.act_q8(bq, d);
      r.att_q8 = c.act_q8(bq, q_dim);
      r.hb_q8 = c.act_q8(bq, n_ff);
      r.attn_partials = c.attn_partials(bq, n_head, hd);
    }
    r.stage = StageRegions::lay_out(c, s, B, device);
    return r;
  }
};

// What the host fills each step, for up to B rows: [E_target[token]·√N_b ; h] and the query
// position P (pos + 1). On a device, page-locked arrays copied up to arrays of the ops.
struct Inputs {
  kernels::Staged<float> rows;        // [B][2·N_b]
  kernels::Staged<int32_t> rope_pos;  // [B]

  static size_t values(const Spec& s, int B) { return static_cast<size_t>(B) * 2 * s.n_embd_out; }
  // Bytes on each side: the host's, and the ops' own on a device.
  static size_t bytes(const Spec& s, int B) {
    return values(s, B) * sizeof(float) + static_cast<size_t>(B) * sizeof(int32_t);
  }
};

// The last layer of `target` that owns a cache of `kind`, or −1.
int last_owner(const Spec& target, AttentionKind kind) {
  for (int il = target.n_layer - 1; il >= 0; --il) {
    const LayerSpec& l = target.layers[il];
    if (l.owns_kv() && l.kind == kind) return il;
  }
  return -1;
}

class Gemma4Assistant final : public Assistant {
 public:
  Gemma4Assistant(Spec spec, int max_batch) : spec_(std::move(spec)), max_batch_(max_batch) {}

  util::Status bind(const gguf::File& file, const gguf::File& target_file, const Spec& target,
                    kernels::Backend& ops);
  const Spec& spec() const override { return spec_; }
  int max_batch() const override { return max_batch_; }
  size_t workspace_bytes() const override {
    return lanes_.workspace_bytes() + lanes_.staging_bytes() +
           Inputs::bytes(spec_, max_batch_) * (lanes_.main().ops->host_memory() ? 1 : 2);
  }
  size_t placed_weight_bytes() const override { return lanes_.placed_bytes(); }
  util::Status step(const DraftBatch& batch, kv::Cache& cache, const Outputs& out,
                    float* hidden_next) override;

 private:
  using L = Lane<Scratch>;
  void fill_inputs(const DraftBatch& batch);
  void embed(L& m, int T);
  void layer(L& m, const LayerSpec& l, const LayerWeights& w, int T, const float* next_norm);

  Spec spec_;
  int max_batch_;
  kernels::Matrix target_embd_;  // [V] × [N_b], the target's token_embd in its file's mapping
  kernels::Matrix pre_proj_;     // [N_d] × [2·N_b]
  kernels::Matrix post_proj_;    // [N_b] × [N_d]
  kernels::Matrix output_;       // [V] × [N_d], the drafter's token_embd (tied head)
  const float* output_norm_ = nullptr;
  std::vector<LayerWeights> layers_;
  std::unique_ptr<Binder> target_binder_;
  Lanes<Scratch> lanes_;
  Inputs inputs_;
  std::vector<uint8_t> all_rows_;  // [max_batch] ones: every row wants output
};

util::Status Gemma4Assistant::bind(const gguf::File& file, const gguf::File& target_file,
                                   const Spec& target, kernels::Backend& ops) {
  HR_ASSIGN_OR_RETURN(std::vector<int> cache_layers, assistant_cache_layers(spec_, target));
  LoadOptions options{.max_batch = max_batch_, .cache_layers = std::move(cache_layers)};
  HR_TRY(lanes_.init(file, ops, spec_, options));
  Binder& b = *lanes_.main().binder;
  const int64_t D = spec_.n_embd, NB = spec_.n_embd_out, V = spec_.n_vocab;
  target_binder_ = std::make_unique<Binder>(target_file, nullptr);
  HR_ASSIGN_OR_RETURN(target_embd_, target_binder_->matrix("token_embd.weight", NB, V));
  HR_ASSIGN_OR_RETURN(output_, b.matrix("token_embd.weight", D, V));
  HR_ASSIGN_OR_RETURN(output_norm_, b.vector("output_norm.weight", D));
  HR_ASSIGN_OR_RETURN(pre_proj_, b.matrix("nextn.pre_projection.weight", 2 * NB, D));
  HR_ASSIGN_OR_RETURN(post_proj_, b.matrix("nextn.post_projection.weight", D, NB));
  for (const auto& l : spec_.layers) {
    auto name = [&](std::string_view s) { return Binder::layer_name(l.il, s); };
    LayerWeights w{};
    HR_ASSIGN_OR_RETURN(w.attn_norm, b.vector(name("attn_norm.weight"), D));
    HR_ASSIGN_OR_RETURN(w.wq, b.matrix(name("attn_q.weight"), D, l.q_dim()));
    HR_ASSIGN_OR_RETURN(w.q_norm, b.vector(name("attn_q_norm.weight"), l.head_dim));
    HR_ASSIGN_OR_RETURN(w.wo, b.matrix(name("attn_output.weight"), l.q_dim(), D));
    HR_ASSIGN_OR_RETURN(w.post_attn_norm, b.vector(name("post_attention_norm.weight"), D));
    HR_ASSIGN_OR_RETURN(w.ffn_norm, b.vector(name("ffn_norm.weight"), D));
    HR_ASSIGN_OR_RETURN(w.w_gate, b.matrix(name("ffn_gate.weight"), D, l.n_ff));
    HR_ASSIGN_OR_RETURN(w.w_up, b.matrix(name("ffn_up.weight"), D, l.n_ff));
    HR_ASSIGN_OR_RETURN(w.w_down, b.matrix(name("ffn_down.weight"), l.n_ff, D));
    HR_ASSIGN_OR_RETURN(w.post_ffw_norm, b.vector(name("post_ffw_norm.weight"), D));
    if (auto scale = b.optional_scalar(name("layer_output_scale.weight"))) {
      HR_ASSIGN_OR_RETURN(w.output_scale, std::move(*scale));
    }
    layers_.push_back(w);
  }
  HR_TRY(lanes_.allocate_scratch(spec_, max_batch_));
  HR_TRY(inputs_.rows.init(ops, Inputs::values(spec_, max_batch_)));
  HR_TRY(inputs_.rope_pos.init(ops, max_batch_));
  all_rows_.assign(max_batch_, 1);
  return {};
}

// The input rows [E_target[token]·√N_b ; h] (§3.2: the embedding first, no norm around it) and the
// query positions, on the host: the embedding row gathered from the target's mapping by the
// reference get_rows (the CPU backend's arithmetic), the hidden state copied.
void Gemma4Assistant::fill_inputs(const DraftBatch& batch) {
  const int T = batch.size();
  const int64_t NB = spec_.n_embd_out;
  for (int t = 0; t < T; ++t) {
    float* row = inputs_.rows.host() + t * 2 * NB;
    kernels::ref::get_rows(target_embd_, &batch.tokens[t], 1, spec_.embed_scale, row);
    std::memcpy(row + NB, batch.hidden + t * NB, NB * sizeof(float));
    inputs_.rope_pos.host()[t] = batch.pos[t] + 1;
  }
}

// x0 = W_pre · input rows.
void Gemma4Assistant::embed(L& m, int T) {
  inputs_.rows.push(static_cast<size_t>(T) * 2 * spec_.n_embd_out);
  inputs_.rope_pos.push(T);
  m.ops->matmul(pre_proj_, inputs_.rows.ops(), m.s.x, T);
}

// §3.3: x arrives normed into xb with this layer's attn_norm; leaves normed with next_norm.
void Gemma4Assistant::layer(L& m, const LayerSpec& l, const LayerWeights& w, int T,
                            const float* next_norm) {
  kernels::Backend& ops = *m.ops;
  Scratch& s = m.s;
  const int64_t D = spec_.n_embd;
  ops.matmuls(std::array{kernels::MatmulOut{w.wq, s.q}}.data(), 1,
              lanes_.act(m, s.xb, s.xb_q8, T, D), T);
  ops.attn_prep({.n_tokens = T,
                 .n_head = l.n_head,
                 .n_head_kv = l.n_head_kv,
                 .head_dim = l.head_dim,
                 .eps = spec_.rms_eps,
                 .q = s.q,
                 .q_norm = w.q_norm,
                 .pos = inputs_.rope_pos.ops(),
                 .rope = {to_kernel(l.rope.style), l.rope.n_rot, m.stage.inv_freq(l.il)}});
  // The query stands at P but sees only the keys before it (§3.3 step 6: the target's cells at P
  // and after hold rejected drafts): attention masks at P − 1, where a sliding window of W − 1
  // keeps P − W + 1 … P − 1.
  ops.attention({.n_tokens = T,
                 .n_head = l.n_head,
                 .head_dim = l.head_dim,
                 .q = s.q,
                 .out = s.att,
                 .pos = m.stage.pos(),
                 .kv = m.stage.kv_spans(l.il),
                 .window = l.is_sliding() ? l.window - 1 : 0,
                 .scale = spec_.attention_scale,
                 .out_q8 = lanes_.q8(m, s.att_q8, T, l.q_dim()),
                 .partials = lanes_.decoding(m, T) ? s.attn_partials : nullptr});
  ops.matmuls(std::array{kernels::MatmulOut{w.wo, s.xb2}}.data(), 1,
              lanes_.act(m, s.att, s.att_q8, T, l.q_dim()), T);
  kernels::ResidualNorm attn{.n = D,
                             .n_rows = T,
                             .eps = spec_.rms_eps,
                             .x = s.x,
                             .branch = {s.xb2, nullptr},
                             .branch_norm = {w.post_attn_norm, nullptr}};
  attn.out[attn.n_out++] = {
      .normalize = true, .w = w.ffn_norm, .y = s.xb, .y_q8 = lanes_.q8(m, s.xb_q8, T, D)};
  ops.residual_norm(attn);
  ops.matmul_glu({.gate = w.w_gate,
                  .up = w.w_up,
                  .act = kernels::GluActivation::kGelu,
                  .x = lanes_.act(m, s.xb, s.xb_q8, T, D),
                  .n_tokens = T,
                  .out = s.hb,
                  .out_q8 = lanes_.q8(m, s.hb_q8, T, l.n_ff),
                  .scratch = s.hb2});
  ops.matmuls(std::array{kernels::MatmulOut{w.w_down, s.xb2}}.data(), 1,
              lanes_.act(m, s.hb, s.hb_q8, T, l.n_ff), T);
  kernels::ResidualNorm ffn{.n = D,
                            .n_rows = T,
                            .eps = spec_.rms_eps,
                            .x = s.x,
                            .branch = {s.xb2, nullptr},
                            .branch_norm = {w.post_ffw_norm, nullptr},
                            .x_scale = w.output_scale};
  if (next_norm != nullptr) {
    ffn.out[ffn.n_out++] = {
        .normalize = true, .w = next_norm, .y = s.xb, .y_q8 = lanes_.q8(m, s.xb_q8, T, D)};
  }
  ops.residual_norm(ffn);
}

util::Status Gemma4Assistant::step(const DraftBatch& batch, kv::Cache& cache, const Outputs& out,
                                   float* hidden_next) {
  const int T = batch.size();
  if (T <= 0 || T > max_batch_)
    return util::errorf("model: a draft step of {} rows (1 to {} allowed)", T, max_batch_);
  L& m = lanes_.main();
  Scratch& s = m.s;
  fill_inputs(batch);
  const Batch rows{.tokens = batch.tokens,
                   .pos = batch.pos,
                   .slot = batch.slot,
                   .output = std::span<const uint8_t>(all_rows_.data(), T)};
  lanes_.begin(rows, cache, out);
  embed(m, T);
  const int n_layer = static_cast<int>(spec_.layers.size());
  kernels::ResidualNorm first{.n = spec_.n_embd, .n_rows = T, .eps = spec_.rms_eps, .x = s.x};
  first.out[first.n_out++] = {.normalize = true,
                              .w = layers_[0].attn_norm,
                              .y = s.xb,
                              .y_q8 = lanes_.q8(m, s.xb_q8, T, spec_.n_embd)};
  m.ops->residual_norm(first);
  for (const auto& l : spec_.layers) {
    const bool last = l.il + 1 == n_layer;
    layer(m, l, layers_[l.il], T, last ? nullptr : layers_[l.il + 1].attn_norm);
  }
  // §3.4: y = norm(x) (into xb), the tied head without softcap, then h_next = W_post · y.
  lanes_.output_head(rows, output_norm_, spec_.rms_eps, output_, 0.0f, spec_.n_embd, out);
  // The head's norm wrote xb's 8-bit form (every row is an output row).
  m.ops->matmuls(std::array{kernels::MatmulOut{post_proj_, s.hidden_next}}.data(), 1,
                 lanes_.act(m, s.xb, s.xb_q8, T, spec_.n_embd), T);
  const size_t bytes = static_cast<size_t>(T) * spec_.n_embd_out * sizeof(float);
  util::Status copied;
  if (m.ops->host_memory()) {
    std::memcpy(hidden_next, s.hidden_next, bytes);
  } else {
    copied = m.ops->download(hidden_next, s.hidden_next, bytes);
  }
  util::Status status = lanes_.status();
  return !status ? status : copied;
}

}  // namespace

util::Result<std::vector<int>> assistant_cache_layers(const Spec& drafter, const Spec& target) {
  auto unfit = [&](std::string_view why) {
    return util::errorf("model: drafter {} does not fit {}: {}", drafter.name, target.name, why);
  };
  if (target.arch != Arch::kGemma4) return unfit("a Gemma 4 assistant drafts for Gemma 4 models");
  if (drafter.n_embd_out != target.n_embd) {
    return unfit(fmt::format("it reads hidden states of width {}, the model's are {}",
                             drafter.n_embd_out, target.n_embd));
  }
  if (drafter.n_vocab != target.n_vocab) {
    return unfit(fmt::format("its vocabulary has {} tokens, the model's {}", drafter.n_vocab,
                             target.n_vocab));
  }
  std::vector<int> read;
  for (const LayerSpec& l : drafter.layers) {
    const int source = last_owner(target, l.kind);
    if (source < 0)
      return unfit(
          fmt::format("no layer of the model owns a {} cache", attention_kind_name(l.kind)));
    const LayerSpec& t = target.layers[source];
    if (t.n_head_kv != l.n_head_kv || t.head_dim != l.head_dim ||
        (l.is_sliding() && t.window != l.window)) {
      return unfit(
          fmt::format("its {} layer {} has {} KV heads of {} (window {}), the model's "
                      "layer {} that it reads {} of {} (window {})",
                      attention_kind_name(l.kind), l.il, l.n_head_kv, l.head_dim, l.window, source,
                      t.n_head_kv, t.head_dim, t.window));
    }
    // Its queries must turn as the keys it reads were turned, or no key matches its query.
    if (l.rope.n_rot != t.rope.n_rot || l.rope.inv_freq != t.rope.inv_freq) {
      return unfit(fmt::format(
          "its {} layer {} applies RoPE (base {}, {} dims{}) unlike the layer {} whose keys it "
          "reads (base {}, {} dims)",
          attention_kind_name(l.kind), l.il, l.rope.theta, l.rope.n_rot,
          l.is_sliding() ? "" : ", rope_freqs", source, t.rope.theta, t.rope.n_rot));
    }
    read.push_back(source);
  }
  return read;
}

util::Result<std::unique_ptr<Assistant>> load_assistant(const gguf::File& file, const Spec& spec,
                                                        const gguf::File& target_file,
                                                        const Spec& target_spec,
                                                        kernels::Backend& backend, int max_batch) {
  auto model = std::make_unique<Gemma4Assistant>(spec, max_batch);
  HR_TRY(model->bind(file, target_file, target_spec, backend));
  return std::unique_ptr<Assistant>(std::move(model));
}

size_t assistant_workspace_bytes(const Spec& spec, int max_batch, bool device) {
  ScratchCarver counter(nullptr);
  Scratch::lay_out(counter, spec, max_batch, device);
  return counter.bytes() + Inputs::bytes(spec, max_batch);
}

size_t assistant_staging_bytes(const Spec& spec, int max_batch, bool device) {
  return device ? staging_bytes(spec, max_batch, true) + Inputs::bytes(spec, max_batch) : 0;
}

}  // namespace model

// Gemma 4's vision encoder on the kernels interface (vision.h), step for step as
// Gemma4VisionModel: shapes N patches, E = n_embd, hd = head_dim, F = n_ff, T = soft tokens.
#include "mm/vision.h"

#include <algorithm>
#include <cmath>

#include "tensor/dequantize.h"

namespace mm {
namespace {
// Rows of the feed-forward computed at once: bounds its [rows][F] activations whatever the image.
constexpr int kFfnRows = 1024;
}  // namespace

struct VisionEncoder::Layer {
  const float* ln1;             // [E]
  Linear q, k, v;               // [nh·hd] × [E], [nkv·hd] × [E]
  const float* q_norm;          // [hd]
  const float* k_norm;          // [hd]
  Linear o;                     // [E] × [nh·hd]
  const float* attn_post_norm;  // [E]
  const float* ln2;             // [E]
  Linear gate, up;              // [F] × [E]
  Linear down;                  // [E] × [F]
  const float* ffn_post_norm;   // [E]
  float out_scale = 1.0f;       // optional layer scalar
};

// Activations for up to N patches and T tokens.
struct VisionEncoder::Scratch {
  float* in;            // [N][3p²] pixels
  float *x, *xb;        // [N][E]
  float *q, *att;       // [N][nh·hd]; att also holds one RoPE half at a time
  float *k, *v;         // [N][nkv·hd]
  float *hb, *hb2;      // [kFfnRows][F]
  float* lin;           // a clipped linear's clamped input: [N][max(E, nh·hd)] or [kFfnRows][F]
  float *pooled, *row;  // [T][E]
  float* out;           // [T][text E]

  template <class Carver>
  static Scratch lay_out(Carver& c, const VisionSpec& s, int n_embd_text, int max_tokens) {
    const size_t n = static_cast<size_t>(max_tokens) * s.pooling * s.pooling, t = max_tokens;
    const size_t e = s.n_embd, qd = static_cast<size_t>(s.n_head) * s.head_dim,
                 kvd = static_cast<size_t>(s.n_head_kv) * s.head_dim;
    const size_t ffn_rows = std::min<size_t>(n, kFfnRows);
    Scratch r{};
    r.in = c.floats(n * s.patch_values());
    r.x = c.floats(n * e);
    r.xb = c.floats(n * e);
    r.q = c.floats(n * qd);
    r.att = c.floats(n * qd);
    r.k = c.floats(n * kvd);
    r.v = c.floats(n * kvd);
    r.hb = c.floats(ffn_rows * s.n_ff);
    r.hb2 = c.floats(ffn_rows * s.n_ff);
    r.lin = c.floats(s.clipped ? std::max(n * std::max(e, qd), ffn_rows * s.n_ff) : 0);
    r.pooled = c.floats(t * e);
    r.row = c.floats(t * e);
    r.out = c.floats(t * n_embd_text);
    return r;
  }
};

VisionEncoder::VisionEncoder(const gguf::File& file, const ProjectorSpec& projector,
                             kernels::Backend& ops, int max_tokens)
    : spec_(*projector.vision),
      n_embd_text_(projector.n_embd_text),
      ops_(ops),
      max_tokens_(max_tokens),
      max_patches_(max_tokens * projector.vision->pooling * projector.vision->pooling),
      weights_(file, ops) {}

VisionEncoder::~VisionEncoder() = default;

size_t VisionEncoder::workspace_bytes(const VisionSpec& spec, int n_embd_text, int max_tokens) {
  model::ScratchCarver counter(nullptr);
  Scratch::lay_out(counter, spec, n_embd_text, max_tokens);
  return counter.bytes();
}

util::Result<std::unique_ptr<VisionEncoder>> VisionEncoder::load(const gguf::File& file,
                                                                 const ProjectorSpec& projector,
                                                                 kernels::Backend& ops,
                                                                 int max_tokens) {
  if (!projector.vision) return util::errorf("mmproj: {} has no vision encoder", projector.name);
  HR_TRY(check_image_tokens(max_tokens));
  std::unique_ptr<VisionEncoder> e(new VisionEncoder(file, projector, ops, max_tokens));
  HR_TRY(e->bind());
  return e;
}

util::Status VisionEncoder::bind() {
  const VisionSpec& s = spec_;
  const int64_t E = s.n_embd, p = s.patch_size, hd = s.head_dim, F = s.n_ff;
  const int64_t qd = int64_t{s.n_head} * hd, kvd = int64_t{s.n_head_kv} * hd;
  Weights& w = weights_;
  // The patch embedding as stored: a convolution kernel [E][3][p][p], i.e. E rows of the patch's
  // pixels channel by channel — the order preprocess_image() lays patches out in.
  HR_ASSIGN_OR_RETURN(patch_embd_, w.flat_matrix("v.patch_embd.weight", {p, p, 3, E}));
  HR_ASSIGN_OR_RETURN(kernels::Matrix tables,
                      w.matrix("v.position_embd.weight", E, s.n_positions, 2));
  pos_x_table_ = tables.rows(0, s.n_positions);
  pos_y_table_ = tables.rows(s.n_positions, s.n_positions);
  for (int il = 0; il < s.n_layer; ++il) {
    auto name = [&](std::string_view suffix) { return fmt::format("v.blk.{}.{}", il, suffix); };
    Layer l{};
    HR_ASSIGN_OR_RETURN(l.ln1, w.vector(name("ln1.weight"), E));
    HR_ASSIGN_OR_RETURN(l.q, w.linear(name("attn_q"), E, qd));
    HR_ASSIGN_OR_RETURN(l.k, w.linear(name("attn_k"), E, kvd));
    HR_ASSIGN_OR_RETURN(l.v, w.linear(name("attn_v"), E, kvd));
    HR_ASSIGN_OR_RETURN(l.q_norm, w.vector(name("attn_q_norm.weight"), hd));
    HR_ASSIGN_OR_RETURN(l.k_norm, w.vector(name("attn_k_norm.weight"), hd));
    HR_ASSIGN_OR_RETURN(l.o, w.linear(name("attn_out"), qd, E));
    HR_ASSIGN_OR_RETURN(l.attn_post_norm, w.vector(name("attn_post_norm.weight"), E));
    HR_ASSIGN_OR_RETURN(l.ln2, w.vector(name("ln2.weight"), E));
    HR_ASSIGN_OR_RETURN(l.gate, w.linear(name("ffn_gate"), E, F));
    HR_ASSIGN_OR_RETURN(l.up, w.linear(name("ffn_up"), E, F));
    HR_ASSIGN_OR_RETURN(l.down, w.linear(name("ffn_down"), F, E));
    HR_ASSIGN_OR_RETURN(l.ffn_post_norm, w.vector(name("ffn_post_norm.weight"), E));
    if (auto scale = w.optional_scalar(name("out_scale.weight"))) {
      HR_ASSIGN_OR_RETURN(l.out_scale, std::move(*scale));
    }
    layers_.push_back(l);
  }
  if (s.standardize) {
    HR_ASSIGN_OR_RETURN(std_scale_, w.vector("v.std_scale", E));
    // (x − b) · s as two ops: x + (−b), then · s.
    HR_ASSIGN_OR_RETURN(const float* bias, weights_.host_vector("v.std_bias", E));
    std::vector<float> neg(bias, bias + E);
    for (float& b : neg) b = -b;
    HR_ASSIGN_OR_RETURN(neg_std_bias_, kernels::Buffer::make(ops_, E * sizeof(float)));
    HR_TRY(ops_.upload(neg_std_bias_.get(), neg.data(), E * sizeof(float)));
  }
  HR_ASSIGN_OR_RETURN(projection_, w.matrix("mm.input_projection.weight", E, n_embd_text_));

  // Activations, and the arrays rope and attention read.
  model::ScratchCarver counter(nullptr);
  Scratch::lay_out(counter, s, n_embd_text_, max_tokens_);
  HR_ASSIGN_OR_RETURN(uint8_t * base, workspace_.allocate(ops_, counter.bytes()));
  model::ScratchCarver carver(base);
  s_ = std::make_unique<Scratch>(Scratch::lay_out(carver, s, n_embd_text_, max_tokens_));
  const int n = max_patches_;
  HR_TRY(pos_x_.init(ops_, n));
  HR_TRY(pos_y_.init(ops_, n));
  HR_TRY(query_pos_.init(ops_, n));
  HR_TRY(cell_pos_.init(ops_, n));
  HR_TRY(spans_.init(ops_, n));
  HR_TRY(span_.init(ops_, 1));
  HR_TRY(k_block_.init(ops_, 1));
  HR_TRY(v_block_.init(ops_, 1));
  // Every query sees every patch: queries sit past the last position, and nothing is windowed.
  for (int i = 0; i < n; ++i) {
    query_pos_.host()[i] = n;
    cell_pos_.host()[i] = i;
    spans_.host()[i] = span_.ops();
  }
  k_block_.host()[0] = reinterpret_cast<const uint8_t*>(s_->k);
  v_block_.host()[0] = reinterpret_cast<const uint8_t*>(s_->v);
  // 2-D RoPE: each half of a head rotates with frequencies θ^(−2i / (hd/2)), i < hd/4.
  const int half = s.head_dim / 2;
  HR_TRY(inv_freq_.init(ops_, half / 2));
  for (int i = 0; i < half / 2; ++i)
    inv_freq_.host()[i] =
        static_cast<float>(std::pow(static_cast<double>(s.rope_theta), -2.0 * i / half));
  for (auto* a : {&query_pos_, &cell_pos_}) a->push(n);
  spans_.push(n);
  k_block_.push(1);
  v_block_.push(1);
  inv_freq_.push(half / 2);
  return ops_.synchronize();
}

void VisionEncoder::trace_stage(const Trace& trace, std::string_view name, const float* values,
                                int64_t rows, int64_t cols) {
  if (!trace) return;
  std::vector<float> host(static_cast<size_t>(rows * cols));
  if (ops_.download(host.data(), values, host.size() * sizeof(float))) trace(name, host, rows);
}

util::Status VisionEncoder::encode(const ImagePatches& image, std::span<float> out,
                                   const Trace& trace) {
  const VisionSpec& s = spec_;
  const int n = image.n_patches(), T = image.n_tokens;
  const int64_t E = s.n_embd;
  if (T > max_tokens_) {
    return util::errorf(
        "image of {} tokens, but the vision encoder was planned for at most {} — raise "
        "--image-tokens",
        T, max_tokens_);
  }
  if (static_cast<int64_t>(out.size()) != int64_t{T} * n_embd_text_ ||
      image.pixels.size() != static_cast<size_t>(n) * s.patch_values() ||
      T * s.pooling * s.pooling != n)
    return util::errorf("mm: image buffers do not match its {} patches", n);
  Scratch& a = *s_;
  HR_TRY(ops_.upload(a.in, image.pixels.data(), image.pixels.size() * sizeof(float)));
  for (int i = 0; i < n; ++i) {
    pos_x_.host()[i] = i % image.grid_width;
    pos_y_.host()[i] = i / image.grid_width;
  }
  pos_x_.push(n);
  pos_y_.push(n);
  *span_.host() = {.k_type = kernels::DType::kF32,
                   .v_type = kernels::DType::kF32,
                   .n_head_kv = s.n_head_kv,
                   .head_dim = s.head_dim,
                   .n_cells = n,
                   .cells_per_block = n,
                   .k_blocks = k_block_.ops(),
                   .v_blocks = v_block_.ops(),
                   .k_row_bytes = static_cast<size_t>(s.n_head_kv) * s.head_dim * sizeof(float),
                   .v_row_bytes = static_cast<size_t>(s.n_head_kv) * s.head_dim * sizeof(float),
                   .cell_pos = cell_pos_.ops()};
  span_.push(1);

  // Patch embedding (its −1…1 input scaling done in preprocessing) plus both position rows.
  ops_.matmul(patch_embd_, a.in, a.x, n);
  ops_.get_rows(pos_x_table_, pos_x_.ops(), n, 1.0f, a.xb);
  ops_.add(a.x, a.xb, n * E);
  ops_.get_rows(pos_y_table_, pos_y_.ops(), n, 1.0f, a.xb);
  ops_.add(a.x, a.xb, n * E);
  trace_stage(trace, "patch_embd", a.x, n, E);

  for (int il = 0; il < s.n_layer; ++il) {
    const Layer& w = layers_[il];
    attention(w, n);
    feed_forward(w, n);
    if (w.out_scale != 1.0f) ops_.scale(a.x, w.out_scale, n * E);
    if (trace) trace_stage(trace, fmt::format("blk.{}.out", il), a.x, n, E);
  }

  pool(image);
  if (s.standardize) {
    for (int t = 0; t < T; ++t) {
      ops_.add(a.pooled + t * E, neg_std_bias_.get<float>(), E);
      ops_.mul(a.pooled + t * E, std_scale_, E);
    }
  }
  trace_stage(trace, "pooled", a.pooled, T, E);
  // The embedder: a weightless RMSNorm, then the projection into the text model.
  ops_.rmsnorm(a.pooled, nullptr, a.pooled, E, T, s.eps);
  ops_.matmul(projection_, a.pooled, a.out, T);
  HR_TRY(ops_.download(out.data(), a.out, out.size() * sizeof(float)));
  trace_stage(trace, "projected", a.out, T, n_embd_text_);
  return ops_.synchronize();
}

// x += RMSNorm(W_o · attention(rope(norm(q)), rope(norm(k)), norm0(v)); attn_post_norm)
void VisionEncoder::attention(const Layer& w, int n) {
  const VisionSpec& s = spec_;
  Scratch& a = *s_;
  const int64_t E = s.n_embd;
  ops_.rmsnorm(a.x, w.ln1, a.xb, E, n, s.eps);
  apply(ops_, w.q, a.xb, a.q, n, a.lin);
  apply(ops_, w.k, a.xb, a.k, n, a.lin);
  apply(ops_, w.v, a.xb, a.v, n, a.lin);
  ops_.rmsnorm(a.q, w.q_norm, a.q, s.head_dim, int64_t{n} * s.n_head, s.eps);
  ops_.rmsnorm(a.k, w.k_norm, a.k, s.head_dim, int64_t{n} * s.n_head_kv, s.eps);
  ops_.rmsnorm(a.v, nullptr, a.v, s.head_dim, int64_t{n} * s.n_head_kv, s.eps);
  rope_2d(a.q, n, s.n_head);
  rope_2d(a.k, n, s.n_head_kv);
  ops_.attention({.n_tokens = n,
                  .n_head = s.n_head,
                  .head_dim = s.head_dim,
                  .q = a.q,
                  .out = a.att,
                  .pos = query_pos_.ops(),
                  .kv = spans_.ops(),
                  .window = 0,
                  .scale = 1.0f});
  apply(ops_, w.o, a.att, a.xb, n, a.lin);
  ops_.rmsnorm(a.xb, w.attn_post_norm, a.xb, E, n, s.eps);
  ops_.add(a.x, a.xb, n * E);
}

// Each head's first half turns with the patch's column, its second half with its row, each half
// in rotate-half pairs (i, i + hd/4). The halves are gathered into `att` (free until attention),
// turned by the RoPE op as heads of hd/2, and put back.
void VisionEncoder::rope_2d(float* x, int n, int n_head) {
  const int hd = spec_.head_dim, half = hd / 2;
  const kernels::RopeParams rope{kernels::RopeStyle::kRotateHalf, half, inv_freq_.ops()};
  float* tmp = s_->att;
  const int64_t rows = int64_t{n} * n_head;
  for (int axis = 0; axis < 2; ++axis) {
    ops_.copy_rows(tmp, half, x + axis * half, hd, half, rows);
    ops_.rope(tmp, n, n_head, half, axis == 0 ? pos_x_.ops() : pos_y_.ops(), rope);
    ops_.copy_rows(x + axis * half, hd, tmp, half, half, rows);
  }
}

// x += RMSNorm(W_down · (gelu(W_gate · h) ⊙ W_up · h); ffn_post_norm), h = RMSNorm(x; ln2), in
// blocks of kFfnRows patches.
void VisionEncoder::feed_forward(const Layer& w, int n) {
  const VisionSpec& s = spec_;
  Scratch& a = *s_;
  const int64_t E = s.n_embd;
  ops_.rmsnorm(a.x, w.ln2, a.xb, E, n, s.eps);
  for (int first = 0; first < n; first += kFfnRows) {
    const int rows = std::min(kFfnRows, n - first);
    float* h = a.xb + first * E;
    apply(ops_, w.gate, h, a.hb, rows, a.lin);
    apply(ops_, w.up, h, a.hb2, rows, a.lin);
    ops_.gelu_mul(a.hb, a.hb2, a.hb, s.n_ff, rows, s.n_ff);
    apply(ops_, w.down, a.hb, h, rows, a.lin);  // h is read above before it is overwritten
  }
  ops_.rmsnorm(a.xb, w.ffn_post_norm, a.xb, E, n, s.eps);
  ops_.add(a.x, a.xb, n * E);
}

// Gemma4VisionPooler: soft token (ox, oy) is the mean of patches (k·ox + dx, k·oy + dy), times √E;
// tokens row-major over the pooled grid. Patches of one pooled row and offset (dx, dy) are k rows
// apart: one strided copy each.
void VisionEncoder::pool(const ImagePatches& image) {
  Scratch& a = *s_;
  const int k = spec_.pooling, gw = image.grid_width, ow = gw / k, oh = image.grid_height / k;
  const int64_t E = spec_.n_embd;
  for (int oy = 0; oy < oh; ++oy) {
    float* dst = a.pooled + int64_t{oy} * ow * E;
    for (int dy = 0; dy < k; ++dy) {
      for (int dx = 0; dx < k; ++dx) {
        const float* src = a.x + (int64_t{oy * k + dy} * gw + dx) * E;
        if (dy == 0 && dx == 0) {
          ops_.copy_rows(dst, E, src, k * E, E, ow);
        } else {
          ops_.copy_rows(a.row, E, src, k * E, E, ow);
          ops_.add(dst, a.row, ow * E);
        }
      }
    }
  }
  ops_.scale(a.pooled, std::sqrt(static_cast<float>(E)) / static_cast<float>(k * k),
             int64_t{ow} * oh * E);
}

}  // namespace mm

// Gemma 4's audio encoder (audio_encoder.h), step for step as Gemma4AudioModel: shapes T tokens,
// H = n_embd, F = n_ff, C0/C1 conv channels, M mel bins, M1 = ⌈M/2⌉, M2 = ⌈M1/2⌉.
//
// Gemma4AudioModel also clamps activations to ±gradient_clipping (1e10) around each block: no
// finite activation of a working model comes near it, so it is left out.
#include "mm/audio_encoder.h"

#include <algorithm>
#include <cmath>

namespace mm {
namespace {
// Tokens whose sub-sampling is computed at once: bounds the convolutions' activations
// ([2·kChunk + 1][M1][C0] and [kChunk][M2][9·C0]) whatever the clip.
constexpr int kChunk = 32;
}  // namespace

struct AudioEncoder::Layer {
  const float *ffn_norm[2], *ffn_post_norm[2];  // [H]
  Linear ffn_up[2], ffn_down[2];                // [F] × [H], [H] × [F]
  const float* attn_pre_norm;                   // [H]
  Linear q, k, v, o;                            // [H] × [H]
  kernels::Matrix k_rel;                        // [H] × [H]
  const float* attn_post_norm;                  // [H]
  const float* conv_pre_norm;                   // [H]   (stored as conv_norm)
  Linear conv_in;                               // [2H] × [H]
  const float* conv_kernel;                     // [H][K]
  const float* conv_post_norm;                  // [H]   (stored as norm_conv)
  Linear conv_out;                              // [H] × [H]
  const float* out_norm;                        // [H]
};

struct AudioEncoder::Scratch {
  float *col0, *conv0;     // [(2·kChunk + 1)·M1][9], [(2·kChunk + 1)·M1][C0]
  float* col1;             // [kChunk·M2][9·C0]
  float* features;         // [T][M2·C1]
  float *x, *xb, *tmp;     // [T][H]
  float *q, *k, *v, *att;  // [T][H]
  float* wide;             // [T][max(2H, F)]: the conv module's 2H, the FFN's F
  float* lin;              // a clipped linear's clamped input: [T][max(H, F)]
  float* encoded;          // [T][n_out]
  float* out;              // [T][text H]

  template <class Carver>
  static Scratch lay_out(Carver& c, const AudioSpec& s, int n_embd_text, int max_tokens) {
    const size_t t = max_tokens, h = s.n_embd, m1 = (s.n_mel + 1) / 2, m2 = s.n_freq_sub;
    const size_t c0 = s.conv_channels[0], c1 = s.conv_channels[1], rows0 = (2 * kChunk + 1) * m1;
    Scratch r{};
    r.col0 = c.floats(rows0 * 9);
    r.conv0 = c.floats(rows0 * c0);
    r.col1 = c.floats(kChunk * m2 * 9 * c0);
    r.features = c.floats(t * m2 * c1);
    r.x = c.floats(t * h);
    r.xb = c.floats(t * h);
    r.tmp = c.floats(t * h);
    r.q = c.floats(t * h);
    r.k = c.floats(t * h);
    r.v = c.floats(t * h);
    r.att = c.floats(t * h);
    r.wide = c.floats(t * std::max<size_t>(2 * h, s.n_ff));
    r.lin = c.floats(s.clipped ? t * std::max<size_t>(h, s.n_ff) : 0);
    r.encoded = c.floats(t * s.n_out);
    r.out = c.floats(t * n_embd_text);
    return r;
  }
};

AudioEncoder::AudioEncoder(const gguf::File& file, const ProjectorSpec& projector,
                           kernels::Backend& ops, double max_seconds)
    : spec_(*projector.audio),
      n_embd_text_(projector.n_embd_text),
      ops_(ops),
      max_seconds_(max_seconds),
      max_tokens_(max_tokens(max_seconds)),
      weights_(file, ops) {}

AudioEncoder::~AudioEncoder() = default;

int AudioEncoder::max_tokens(double max_seconds) {
  return audio_token_count(static_cast<int64_t>(std::llround(max_seconds * 16000)));
}

size_t AudioEncoder::workspace_bytes(const AudioSpec& spec, int n_embd_text, double max_seconds) {
  model::ScratchCarver counter(nullptr);
  Scratch::lay_out(counter, spec, n_embd_text, max_tokens(max_seconds));
  return counter.bytes();
}

util::Result<std::unique_ptr<AudioEncoder>> AudioEncoder::load(const gguf::File& file,
                                                               const ProjectorSpec& projector,
                                                               kernels::Backend& ops,
                                                               double max_seconds) {
  if (!projector.audio) return util::errorf("mmproj: {} has no audio encoder", projector.name);
  if (!ops.host_memory()) {
    return util::errorf(
        "mm: the audio encoder runs on a backend that computes in host memory (the CPU), not {}",
        ops.name());
  }
  if (!(max_seconds > 0 && max_seconds <= kMaxAudioSeconds))
    return util::errorf("audio clips of {} s: allow between 0 and {} s", max_seconds,
                        kMaxAudioSeconds);
  std::unique_ptr<AudioEncoder> e(new AudioEncoder(file, projector, ops, max_seconds));
  HR_TRY(e->bind());
  return e;
}

util::Status AudioEncoder::bind() {
  const AudioSpec& s = spec_;
  const int64_t H = s.n_embd, F = s.n_ff, c0 = s.conv_channels[0], c1 = s.conv_channels[1];
  Weights& w = weights_;
  HR_ASSIGN_OR_RETURN(conv_[0], w.flat_matrix("a.conv1d.0.weight", {3, 3, 1, c0}));
  HR_ASSIGN_OR_RETURN(conv_[1], w.flat_matrix("a.conv1d.1.weight", {3, 3, c0, c1}));
  HR_ASSIGN_OR_RETURN(conv_norm_[0], w.vector("a.conv1d.0.norm.weight", c0));
  HR_ASSIGN_OR_RETURN(conv_norm_[1], w.vector("a.conv1d.1.norm.weight", c1));
  HR_ASSIGN_OR_RETURN(input_proj_,
                      w.matrix("a.input_projection.weight", int64_t{s.n_freq_sub} * c1, H));
  for (int il = 0; il < s.n_layer; ++il) {
    auto name = [&](std::string_view suffix) { return fmt::format("a.blk.{}.{}", il, suffix); };
    Layer l{};
    for (int i = 0; i < 2; ++i) {
      const std::string_view sfx = i == 0 ? "" : "_1";
      HR_ASSIGN_OR_RETURN(l.ffn_norm[i], w.vector(name(fmt::format("ffn_norm{}.weight", sfx)), H));
      HR_ASSIGN_OR_RETURN(l.ffn_up[i], w.linear(name(fmt::format("ffn_up{}", sfx)), H, F));
      HR_ASSIGN_OR_RETURN(l.ffn_down[i], w.linear(name(fmt::format("ffn_down{}", sfx)), F, H));
      HR_ASSIGN_OR_RETURN(l.ffn_post_norm[i],
                          w.vector(name(fmt::format("ffn_post_norm{}.weight", sfx)), H));
    }
    HR_ASSIGN_OR_RETURN(l.attn_pre_norm, w.vector(name("attn_pre_norm.weight"), H));
    HR_ASSIGN_OR_RETURN(l.q, w.linear(name("attn_q"), H, H));
    HR_ASSIGN_OR_RETURN(l.k, w.linear(name("attn_k"), H, H));
    HR_ASSIGN_OR_RETURN(l.v, w.linear(name("attn_v"), H, H));
    HR_ASSIGN_OR_RETURN(l.o, w.linear(name("attn_out"), H, H));
    HR_ASSIGN_OR_RETURN(l.k_rel, w.matrix(name("attn_k_rel.weight"), H, H));
    HR_ASSIGN_OR_RETURN(l.attn_post_norm, w.vector(name("attn_post_norm.weight"), H));
    // tensor_mapping.py files lconv1d's pre-norm as conv_norm and its post-conv norm as norm_conv.
    HR_ASSIGN_OR_RETURN(l.conv_pre_norm, w.vector(name("conv_norm.weight"), H));
    HR_ASSIGN_OR_RETURN(l.conv_in, w.linear(name("conv_pw1"), H, 2 * H));
    HR_ASSIGN_OR_RETURN(l.conv_kernel, w.host_floats(name("conv_dw.weight"), {s.conv_kernel, H}));
    HR_ASSIGN_OR_RETURN(l.conv_post_norm, w.vector(name("norm_conv.weight"), H));
    HR_ASSIGN_OR_RETURN(l.conv_out, w.linear(name("conv_pw2"), H, H));
    HR_ASSIGN_OR_RETURN(l.out_norm, w.vector(name("ln2.weight"), H));
    layers_.push_back(l);
  }
  HR_ASSIGN_OR_RETURN(output_proj_, w.matrix("a.pre_encode.out.weight", H, s.n_out));
  HR_ASSIGN_OR_RETURN(output_bias_, w.vector("a.pre_encode.out.bias", s.n_out));
  HR_ASSIGN_OR_RETURN(projection_, w.matrix("mm.a.input_projection.weight", s.n_out, n_embd_text_));

  // Gemma4AudioRelPositionalEncoding: row d = [sin(d·τ_i) | cos(d·τ_i)], τ_i = 10000^(−i/(H/2 −
  // 1)), for the distances a token sees (0 … window − 1); each layer projects it with its
  // attn_k_rel.
  const int half = static_cast<int>(H / 2), W = s.window;
  std::vector<float> sinusoid(static_cast<size_t>(W) * H);
  const double step = std::log(10000.0) / std::max(half - 1, 1);
  for (int d = 0; d < W; ++d) {
    for (int i = 0; i < half; ++i) {
      sinusoid[d * H + i] = static_cast<float>(std::sin(d * std::exp(-i * step)));
      sinusoid[d * H + half + i] = static_cast<float>(std::cos(d * std::exp(-i * step)));
    }
  }
  rel_.resize(static_cast<size_t>(s.n_layer) * W * H);
  for (int il = 0; il < s.n_layer; ++il)
    ops_.matmul(layers_[il].k_rel, sinusoid.data(), rel_.data() + il * W * H, W);
  // Queries scale by d^(−½)/ln 2 and by the learned per-dimension scale (stored already
  // softplus'd).
  query_scale_.resize(static_cast<size_t>(s.n_layer) * H);
  const float q_scale =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)) / std::log(2.0));
  for (int il = 0; il < s.n_layer; ++il) {
    HR_ASSIGN_OR_RETURN(const float* per_dim,
                        w.vector(fmt::format("a.blk.{}.per_dim_scale.weight", il), s.head_dim));
    for (int h = 0; h < s.n_head; ++h) {
      for (int i = 0; i < s.head_dim; ++i)
        query_scale_[il * H + h * s.head_dim + i] = q_scale * per_dim[i];
    }
  }
  model::ScratchCarver counter(nullptr);
  Scratch::lay_out(counter, s, n_embd_text_, max_tokens_);
  HR_ASSIGN_OR_RETURN(uint8_t * base, workspace_.allocate(ops_, counter.bytes()));
  model::ScratchCarver carver(base);
  s_ = std::make_unique<Scratch>(Scratch::lay_out(carver, s, n_embd_text_, max_tokens_));
  return {};
}

util::Status AudioEncoder::encode(const MelFeatures& mel, std::span<float> out,
                                  const Trace& trace) {
  const AudioSpec& s = spec_;
  const int T = static_cast<int>(((mel.n_valid + 1) / 2 + 1) / 2);
  if (mel.n_mel != s.n_mel)
    return util::errorf("mm: features of {} mel bins for an encoder of {}", mel.n_mel, s.n_mel);
  if (T > max_tokens_) {
    return util::errorf(
        "audio of {} tokens, but the audio encoder was planned for at most {} ({:.0f} s) — raise "
        "--audio-seconds",
        T, max_tokens_, max_seconds_);
  }
  if (T <= 0 || static_cast<int64_t>(out.size()) != int64_t{T} * n_embd_text_)
    return util::errorf("mm: audio buffers do not match its {} tokens", T);
  Scratch& a = *s_;
  const int64_t H = s.n_embd;
  auto stage = [&](std::string_view name, const float* values, int64_t rows, int64_t cols) {
    if (trace) trace(name, std::span<const float>(values, rows * cols), rows);
  };
  subsample(mel, T);
  stage("subsampled", a.x, T, H);
  for (int il = 0; il < s.n_layer; ++il) {
    const Layer& w = layers_[il];
    feed_forward(w, 0, T);
    attention(w, il, T);
    light_conv(w, T);
    feed_forward(w, 1, T);
    ops_.rmsnorm(a.x, w.out_norm, a.x, H, T, s.eps);
    if (trace) stage(fmt::format("blk.{}.out", il), a.x, T, H);
  }
  ops_.matmul(output_proj_, a.x, a.encoded, T);
  for (int t = 0; t < T; ++t) ops_.add(a.encoded + int64_t{t} * s.n_out, output_bias_, s.n_out);
  stage("encoded", a.encoded, T, s.n_out);
  // The embedder: a weightless RMSNorm, then the projection into the text model.
  ops_.rmsnorm(a.encoded, nullptr, a.encoded, s.n_out, T, s.eps);
  ops_.matmul(projection_, a.encoded, a.out, T);
  std::copy_n(a.out, out.size(), out.data());
  stage("projected", a.out, T, n_embd_text_);
  return ops_.synchronize();
}

// Gemma4AudioSubSampleConvProjection over the first n_tokens output frames: frames past the clip
// read as zeros before each convolution (the reference's mask), so only the valid frames of each
// layer are computed.
void AudioEncoder::subsample(const MelFeatures& mel, int n_tokens) {
  const AudioSpec& s = spec_;
  Scratch& a = *s_;
  const int m1 = (s.n_mel + 1) / 2, m2 = s.n_freq_sub, c0 = s.conv_channels[0],
            c1 = s.conv_channels[1];
  const int valid1 = (mel.n_valid + 1) / 2;
  for (int first = 0; first < n_tokens; first += kChunk) {
    const int count = std::min(kChunk, n_tokens - first);
    // The first layer's outputs the second reads: times 2·first − 1 … 2·(first + count) − 1.
    const int t1_first = std::max(2 * first - 1, 0), t1_end = std::min(2 * (first + count), valid1);
    const int t1_count = t1_end - t1_first;
    ops_.im2col_3x3_s2({.x = mel.values.data(),
                        .t_first = 0,
                        .t_count = mel.n_frames,
                        .t_valid = mel.n_valid,
                        .n_freq = s.n_mel,
                        .n_channels = 1,
                        .t_out_first = t1_first,
                        .t_out_count = t1_count,
                        .out = a.col0});
    const int rows0 = t1_count * m1;
    ops_.matmul(conv_[0], a.col0, a.conv0, rows0);
    ops_.layer_norm(a.conv0, conv_norm_[0], a.conv0, c0, rows0, s.eps);
    ops_.relu(a.conv0, int64_t{rows0} * c0);
    ops_.im2col_3x3_s2({.x = a.conv0,
                        .t_first = t1_first,
                        .t_count = t1_count,
                        .t_valid = valid1,
                        .n_freq = m1,
                        .n_channels = c0,
                        .t_out_first = first,
                        .t_out_count = count,
                        .out = a.col1});
    // [count·M2][C1] rows are [count][M2·C1]: the (frequency, channel) order the projection reads.
    float* features = a.features + int64_t{first} * m2 * c1;
    const int rows1 = count * m2;
    ops_.matmul(conv_[1], a.col1, features, rows1);
    ops_.layer_norm(features, conv_norm_[1], features, c1, rows1, s.eps);
    ops_.relu(features, int64_t{rows1} * c1);
  }
  ops_.matmul(input_proj_, a.features, a.x, n_tokens);
}

// x += ½ · RMSNorm(W_down · silu(W_up · RMSNorm(x)); post_norm)
void AudioEncoder::feed_forward(const Layer& w, int i, int n) {
  const AudioSpec& s = spec_;
  Scratch& a = *s_;
  const int64_t H = s.n_embd;
  ops_.rmsnorm(a.x, w.ffn_norm[i], a.xb, H, n, s.eps);
  apply(ops_, w.ffn_up[i], a.xb, a.wide, n, a.lin);
  ops_.silu(a.wide, int64_t{n} * s.n_ff);
  apply(ops_, w.ffn_down[i], a.wide, a.xb, n, a.lin);
  ops_.rmsnorm(a.xb, w.ffn_post_norm[i], a.xb, H, n, s.eps);
  ops_.scale(a.xb, s.residual_weight, n * H);
  ops_.add(a.x, a.xb, n * H);
}

// x += RMSNorm(W_o · local attention(q · scales, k · ln(1 + e)/ln 2, v); attn_post_norm)
void AudioEncoder::attention(const Layer& w, int il, int n) {
  const AudioSpec& s = spec_;
  Scratch& a = *s_;
  const int64_t H = s.n_embd;
  ops_.rmsnorm(a.x, w.attn_pre_norm, a.xb, H, n, s.eps);
  apply(ops_, w.q, a.xb, a.q, n, a.lin);
  apply(ops_, w.k, a.xb, a.k, n, a.lin);
  apply(ops_, w.v, a.xb, a.v, n, a.lin);
  for (int t = 0; t < n; ++t) ops_.mul(a.q + t * H, query_scale_.data() + il * H, H);
  ops_.scale(a.k, static_cast<float>(std::log1p(std::exp(1.0)) / std::log(2.0)), n * H);
  ops_.local_attention({.n_tokens = n,
                        .n_head = s.n_head,
                        .head_dim = s.head_dim,
                        .window = s.window,
                        .softcap = s.softcap,
                        .q = a.q,
                        .k = a.k,
                        .v = a.v,
                        .rel = rel_.data() + static_cast<size_t>(il) * s.window * H,
                        .out = a.att});
  apply(ops_, w.o, a.att, a.xb, n, a.lin);
  ops_.rmsnorm(a.xb, w.attn_post_norm, a.xb, H, n, s.eps);
  ops_.add(a.x, a.xb, n * H);
}

// Gemma4AudioLightConv1d: x += W_out · silu(RMSNorm(causal_conv(GLU(W_in · RMSNorm(x)))))
void AudioEncoder::light_conv(const Layer& w, int n) {
  const AudioSpec& s = spec_;
  Scratch& a = *s_;
  const int64_t H = s.n_embd;
  ops_.rmsnorm(a.x, w.conv_pre_norm, a.xb, H, n, s.eps);
  apply(ops_, w.conv_in, a.xb, a.wide, n, a.lin);
  ops_.glu(a.wide, a.xb, H, n);
  ops_.depthwise_conv1d(a.xb, w.conv_kernel, a.tmp, n, H, s.conv_kernel);
  ops_.rmsnorm(a.tmp, w.conv_post_norm, a.tmp, H, n, s.eps);
  ops_.silu(a.tmp, n * H);
  apply(ops_, w.conv_out, a.tmp, a.xb, n, a.lin);
  ops_.add(a.x, a.xb, n * H);
}

}  // namespace mm

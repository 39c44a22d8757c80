// The host-memory defaults of kernels::Backend's memory functions, audio-encoder ops, LoRA terms
// and fused ops (ops.h).
#include "kernels/ops.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include "kernels/ref/ref.h"

namespace kernels {

namespace {
constexpr std::align_val_t kHostAlignment{64};  // a cache line, as util::AlignedBuffer
}  // namespace

// A host backend's own memory is host memory: both kinds come from the same allocator.
util::Result<void*> Backend::allocate(size_t bytes) {
  return Backend::allocate_host(bytes);
}

void Backend::release(void* ptr) {
  Backend::release_host(ptr);
}

util::Status Backend::upload(void* dst, const void* host_src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
  return {};
}

void Backend::upload_async(void* dst, const void* host_src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
}

util::Result<void*> Backend::allocate_host(size_t bytes) {
  void* p = ::operator new(bytes == 0 ? 1 : bytes, kHostAlignment, std::nothrow);
  if (p == nullptr)
    return util::errorf("{}: cannot allocate {} bytes of host memory", name(), bytes);
  return p;
}

void Backend::release_host(void* ptr) {
  if (ptr != nullptr) ::operator delete(ptr, kHostAlignment);
}

util::Status Backend::download(void* host_dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
  return {};
}

// The audio encoder's ops: the reference loops, on host memory (ops.h says who calls them).
void Backend::relu(float* y, int64_t n) {
  ref::relu(y, n);
}
void Backend::silu(float* y, int64_t n) {
  ref::silu_inplace(y, n);
}
void Backend::layer_norm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows,
                         float eps) {
  ref::layer_norm(x, w, y, n, n_rows, eps);
}
void Backend::glu(const float* x, float* out, int64_t n, int64_t n_rows) {
  ref::glu(x, out, n, n_rows);
}
void Backend::depthwise_conv1d(const float* x, const float* w, float* y, int64_t n_tokens,
                               int64_t n_channels, int kernel) {
  ref::depthwise_conv1d(x, w, y, n_tokens, n_channels, kernel);
}
void Backend::im2col_3x3_s2(const Im2Col3x3S2& a) {
  ref::im2col_3x3_s2(a);
}
void Backend::local_attention(const LocalAttention& a) {
  ref::local_attention(a);
}

void Backend::lora(const LoraDelta& a) {
  ref::lora(a);
}

// --- Fused ops: the composed defaults (ops.h). Each is the sequence of ops the models ran before
// the fused op existed, in the same order, so a host backend's results keep their bits. They read
// and write their arguments directly, so they serve host backends only; a device backend
// overrides every one.

void Backend::matmuls(const MatmulOut* outs, int n, Activations x, int n_tokens) {
  for (int i = 0; i < n; ++i) matmul(outs[i].w, x.f32, outs[i].y, n_tokens);
}

void Backend::matmul_glu(const GluMatmul& a) {
  const int64_t n = a.gate.n_rows;
  matmul(a.gate, a.x.f32, a.out, a.n_tokens);
  if (a.up.data != nullptr) {
    matmul(a.up, a.x.f32, a.scratch, a.n_tokens);
  } else {
    copy_rows(a.scratch, n, a.up_rows, a.up_stride, n, a.n_tokens);
  }
  if (a.act == GluActivation::kGelu)
    gelu_mul(a.out, a.scratch, a.out, n, a.n_tokens, n);
  else
    silu_mul(a.out, a.scratch, a.out, n, a.n_tokens, n);
}

void Backend::residual_norm(const ResidualNorm& a) {
  const int64_t total = a.n * a.n_rows;
  if (float* b = a.branch[0]; b != nullptr) {
    for (int i = 0; i < 2; ++i) {
      if (a.branch[i] != nullptr && a.branch_norm[i] != nullptr)
        rmsnorm(a.branch[i], a.branch_norm[i], a.branch[i], a.n, a.n_rows, a.eps);
    }
    if (a.branch[1] != nullptr) add(b, a.branch[1], total);
    if (a.sum_norm != nullptr) rmsnorm(b, a.sum_norm, b, a.n, a.n_rows, a.eps);
    add(a.x, b, total);
    if (a.x_scale != 1.0f) scale(a.x, a.x_scale, total);
  }
  for (int j = 0; j < a.n_out; ++j) {
    const ResidualNorm::Output& o = a.out[j];
    if (o.y == nullptr) continue;  // only the 8-bit form of x was wanted
    if (o.normalize)
      rmsnorm(a.x, o.w, o.y, a.n, a.n_rows, a.eps);
    else
      copy(o.y, a.x, total);
    if (o.scale != 1.0f) scale(o.y, o.scale, total);
    if (o.mul != nullptr) {
      for (int t = 0; t < a.n_rows; ++t) mul(o.y + t * a.n, o.mul, a.n);
    }
  }
}

void Backend::attn_prep(const AttnPrep& a) {
  const int64_t T = a.n_tokens, kv = static_cast<int64_t>(a.n_head_kv) * a.head_dim;
  if (a.k != nullptr && a.v_from_k) copy(a.v, a.k, T * kv);
  if (a.q_norm != nullptr) rmsnorm(a.q, a.q_norm, a.q, a.head_dim, T * a.n_head, a.eps);
  rope(a.q, a.n_tokens, a.n_head, a.head_dim, a.pos, a.rope);
  if (a.k == nullptr) return;
  if (a.k_norm != nullptr) rmsnorm(a.k, a.k_norm, a.k, a.head_dim, T * a.n_head_kv, a.eps);
  rope(a.k, a.n_tokens, a.n_head_kv, a.head_dim, a.pos, a.rope);
  if (a.v_norm) rmsnorm(a.v, nullptr, a.v, a.head_dim, T * a.n_head_kv, a.eps);
  store_kv(a.k_type, a.v_type, static_cast<int>(kv), a.k, a.v, a.dst, a.n_tokens);
}

namespace {

// The (token, slot) entries of a routing [T][k] that chose expert ex, as t·k + j, in token order.
int tokens_of_expert(const int32_t* ids, int n_tokens, int k, int ex, std::vector<int32_t>& rows) {
  rows.clear();
  for (int i = 0; i < n_tokens * k; ++i) {
    if (ids[i] == ex) rows.push_back(i);
  }
  return static_cast<int>(rows.size());
}

}  // namespace

// Tokens are batched per expert, experts in ascending order: each expert's matrices are read once.
void Backend::moe_glu(const MoeGlu& a) {
  moe_route(a.router_logits, a.n_tokens, a.n_expert, a.k, a.expert_scale, a.ids, a.weights);
  const int64_t F = a.n_ff;
  const bool fused = a.gate_up.data != nullptr;
  const int64_t C = fused ? a.gate_up.n_cols : a.gate.n_cols;
  std::vector<int32_t> rows;
  for (int ex = 0; ex < a.n_expert; ++ex) {
    const int n = tokens_of_expert(a.ids, a.n_tokens, a.k, ex, rows);
    if (n == 0) continue;
    for (int i = 0; i < n; ++i) copy(a.scratch_in + i * C, a.x.f32 + (rows[i] / a.k) * C, C);
    if (fused) {
      matmul(a.gate_up.rows(ex * 2 * F, 2 * F), a.scratch_in, a.scratch_gu, n);
      gelu_mul(a.scratch_gu, a.scratch_gu + F, a.scratch_h, F, n, 2 * F);
    } else {
      matmul(a.gate.rows(ex * F, F), a.scratch_in, a.scratch_gu, n);
      matmul(a.up.rows(ex * F, F), a.scratch_in, a.scratch_gu + n * F, n);
      gelu_mul(a.scratch_gu, a.scratch_gu + n * F, a.scratch_h, F, n, F);
    }
    for (int i = 0; i < n; ++i) copy(a.h + rows[i] * F, a.scratch_h + i * F, F);
  }
}

// A token's first expert output is copied into its sum and the others added, so the sum starts
// from nothing a previous pass left there.
void Backend::moe_down(const MoeDown& a) {
  const int64_t H = a.down.n_rows / a.n_expert, F = a.down.n_cols;
  std::vector<int32_t> rows;
  std::vector<char> started(a.n_tokens, 0);
  for (int ex = 0; ex < a.n_expert; ++ex) {
    const int n = tokens_of_expert(a.ids, a.n_tokens, a.k, ex, rows);
    if (n == 0) continue;
    for (int i = 0; i < n; ++i) copy(a.scratch_in + i * F, a.h.f32 + rows[i] * F, F);
    matmul(a.down.rows(ex * H, H), a.scratch_in, a.scratch_out, n);
    for (int i = 0; i < n; ++i) {
      float* row = a.scratch_out + i * H;
      scale(row, a.weights[rows[i]], H);
      const int t = rows[i] / a.k;
      if (started[t]) {
        add(a.out + t * H, row, H);
      } else {
        copy(a.out + t * H, row, H);
        started[t] = 1;
      }
    }
  }
}

void Backend::top_k(const float* x, int64_t n, int n_rows, int k, int32_t* ids, float* values) {
  ref::top_k(x, n, n_rows, k, ids, values);
}

void Backend::scatter(const uint8_t* src, const ScatterPiece* pieces, const int32_t* n_pieces,
                      int max_pieces) {
  const int count = std::min(*n_pieces, max_pieces);
  for (int i = 0; i < count; ++i)
    std::memcpy(pieces[i].dst, src + pieces[i].offset, pieces[i].bytes);
}

void Backend::download_async(void* host_dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
}

}  // namespace kernels

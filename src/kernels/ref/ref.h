// kernels::ref — scalar reference kernels: one plain loop nest per op, the truth others match.
#pragma once

#include "kernels/ops.h"

namespace kernels::ref {

void matmul(const Matrix& w, const float* x, float* y, int n_tokens);
void get_rows(const Matrix& table, const int32_t* ids, int n, float scale, float* out);
void rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows, float eps);
void rope(float* x, int n_tokens, int n_head, int head_dim, const int32_t* pos, const RopeParams& p);
void attention(const AttentionBatch& batch);
void store_kv(DType k_type, DType v_type, int kv_dim, const float* k, const float* v,
              const KvWrite* dst, int n_tokens);
void silu_mul(const float* gate, const float* up, float* out, int64_t n, int64_t n_rows, int64_t stride);
void gelu_mul(const float* gate, const float* up, float* out, int64_t n, int64_t n_rows, int64_t stride);
void moe_route(const float* logits, int n_tokens, int n_expert, int k, const float* expert_scale, int32_t* ids,
               float* weights);
// The k largest of each row, largest first, ties to the lower index, NaN below every number.
void top_k(const float* x, int64_t n, int n_rows, int k, int32_t* ids, float* values);
float gelu(float x);  // tanh approximation (spec §0.1)
float silu(float x);
// The audio encoder's ops (ops.h), and clamp.
void clamp(float* y, float lo, float hi, int64_t n);
void relu(float* y, int64_t n);
void silu_inplace(float* y, int64_t n);
void layer_norm(const float* x, const float* w, float* y, int64_t n, int64_t n_rows, float eps);
void glu(const float* x, float* out, int64_t n, int64_t n_rows);
void depthwise_conv1d(const float* x, const float* w, float* y, int64_t n_tokens, int64_t n_channels, int kernel);
void im2col_3x3_s2(const Im2Col3x3S2& a);
void local_attention(const LocalAttention& a);
// LoRA terms of a product (op_args.h: LoraDelta), accumulated in double.
void lora(const LoraDelta& a);

// The reference backend: every op above, single-threaded, host memory.
class RefBackend final : public Backend {
 public:
  std::string_view name() const override { return "ref"; }
  void matmul(const Matrix& w, const float* x, float* y, int n_tokens) override { ref::matmul(w, x, y, n_tokens); }
  void get_rows(const Matrix& t, const int32_t* ids, int n, float s, float* out) override { ref::get_rows(t, ids, n, s, out); }
  void rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t rows, float eps) override {
    ref::rmsnorm(x, w, y, n, rows, eps);
  }
  void rope(float* x, int t, int h, int d, const int32_t* pos, const RopeParams& p) override { ref::rope(x, t, h, d, pos, p); }
  void attention(const AttentionBatch& b) override { ref::attention(b); }
  void store_kv(DType kt, DType vt, int kv_dim, const float* k, const float* v, const KvWrite* dst, int n) override {
    ref::store_kv(kt, vt, kv_dim, k, v, dst, n);
  }
  void add(float* y, const float* x, int64_t n) override;
  void mul(float* y, const float* x, int64_t n) override;
  void scale(float* y, float s, int64_t n) override;
  void softcap(float* y, float cap, int64_t n) override;
  void clamp(float* y, float lo, float hi, int64_t n) override;
  void silu_mul(const float* g, const float* u, float* o, int64_t n, int64_t rows, int64_t stride) override {
    ref::silu_mul(g, u, o, n, rows, stride);
  }
  void gelu_mul(const float* g, const float* u, float* o, int64_t n, int64_t rows, int64_t stride) override {
    ref::gelu_mul(g, u, o, n, rows, stride);
  }
  void copy(float* y, const float* x, int64_t n) override;
  void moe_route(const float* l, int t, int e, int k, const float* s, int32_t* ids, float* w) override {
    ref::moe_route(l, t, e, k, s, ids, w);
  }
  void copy_rows(float* y, int64_t ys, const float* x, int64_t xs, int64_t n, int64_t rows) override;
};

}  // namespace kernels::ref

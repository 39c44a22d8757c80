// CpuBackend: matmul dispatch, row gathers, cache writes, RoPE and MoE routing.
#include "kernels/cpu/backend.h"

#include <cmath>

#include "kernels/cpu/simd.h"
#include "kernels/ref/ref.h"
#include "tensor/dequantize.h"
#include "tensor/quantize.h"

namespace kernels::cpu {
namespace {

#if HR_HAS_AVX2_PATH
// f32 → f16 with F16C, rounding to nearest even: bit-exact with tensor::quantize_row_f16.
HR_AVX2 void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
  if (i < n) tensor::quantize_row_f16(src + i, dst + i, n - i);
}
#endif

}  // namespace

CpuBackend::CpuBackend(util::ThreadPool& pool, int max_tokens, int64_t max_cols, Isa isa)
    : pool_(pool),
      max_tokens_(max_tokens),
      max_cols_(max_cols),
      isa_(isa),
      scratch_(matmul_scratch_bytes(max_tokens, max_cols, pool.size())) {}

void CpuBackend::matmul(const Matrix& w, const float* x, float* y, int n_tokens) {
  // Batches are bounded by the micro-batch and widths by the model (both planned): split a
  // larger call rather than allocate.
  for (int t0 = 0; t0 < n_tokens; t0 += max_tokens_) {
    const int nt = std::min(max_tokens_, n_tokens - t0);
    if (w.n_cols > max_cols_) {
      ref::matmul(w, x + static_cast<int64_t>(t0) * w.n_cols,
                  y + static_cast<int64_t>(t0) * w.n_rows, nt);
    } else {
      cpu::matmul(w, x + static_cast<int64_t>(t0) * w.n_cols,
                  y + static_cast<int64_t>(t0) * w.n_rows, nt, pool_, scratch_.data(), isa_);
    }
  }
}

void CpuBackend::get_rows(const Matrix& t, const int32_t* ids, int n, float s, float* out) {
  // Types are checked when weights are bound (model::Binder): every row decodes.
  const tensor::DequantizeRowFn decode = tensor::find_dequantizer(t.type);
  for_rows(n, t.n_cols, [&](int64_t i) {
    float* o = out + i * t.n_cols;
    decode(static_cast<const uint8_t*>(t.data) + ids[i] * t.row_bytes, o, t.n_cols);
    if (s != 1.0f) {
      for (int64_t c = 0; c < t.n_cols; ++c) o[c] *= s;  // the reference's rounding
    }
  });
}

void CpuBackend::store_kv(DType kt, DType vt, int kv_dim, const float* k, const float* v,
                          const KvWrite* dst, int n) {
  // Cache types and row lengths are checked when the cache is planned (kv::check_cache_type).
  auto store = [&](DType type, const float* src, uint8_t* out) {
#if HR_HAS_AVX2_PATH
    if (type == DType::kF16 && avx2()) {
      return f32_to_f16_row(src, reinterpret_cast<uint16_t*>(out), kv_dim);
    }
#endif
    (void)tensor::quantize_row(type, src, out, kv_dim);
  };
  for_rows(n, 2 * kv_dim, [&](int64_t t) {
    store(kt, k + t * kv_dim, dst[t].k);
    store(vt, v + t * kv_dim, dst[t].v);
  });
}

// The reference rotation with each (token, pair) angle computed once for all heads, not per head.
void CpuBackend::rope(float* x, int n_tokens, int n_head, int head_dim, const int32_t* pos,
                      const RopeParams& p) {
  const int half = p.n_rot / 2;
  for_rows(n_tokens, static_cast<int64_t>(n_head) * p.n_rot, [&](int64_t t) {
    float cs[512], sn[512];  // n_rot / 2 ≤ 512: head dims are at most 1024 (model::Spec checks)
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos[t]) * p.inv_freq[i];
      cs[i] = static_cast<float>(std::cos(angle));
      sn[i] = static_cast<float>(std::sin(angle));
    }
    for (int h = 0; h < n_head; ++h) {
      float* v = x + (t * n_head + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const int a = p.style == RopeStyle::kAdjacent ? 2 * i : i;
        const int b = p.style == RopeStyle::kAdjacent ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * cs[i] - x1 * sn[i];
        v[b] = x1 * cs[i] + x0 * sn[i];
      }
    }
  });
}

// The reference's routing per token (same double arithmetic in the same order: bit-exact), with
// the top k picked by repeated arg-max (ties → lower id, as the reference's sort) over a buffer
// on the stack instead of vectors.
void CpuBackend::moe_route(const float* logits, int n_tokens, int n_expert, int k,
                           const float* expert_scale, int32_t* ids, float* weights) {
  for_rows(n_tokens, static_cast<int64_t>(n_expert) * 8, [&](int64_t t) {
    double prob[kernels::kMaxExperts];
    bool taken[kernels::kMaxExperts] = {};
    const float* l = logits + t * n_expert;
    double max_logit = l[0];
    for (int e = 1; e < n_expert; ++e) max_logit = std::max(max_logit, static_cast<double>(l[e]));
    double sum = 0;
    for (int e = 0; e < n_expert; ++e)
      sum += prob[e] = std::exp(static_cast<double>(l[e]) - max_logit);
    for (int e = 0; e < n_expert; ++e) prob[e] /= sum;
    int32_t* out_ids = ids + t * k;
    for (int j = 0; j < k; ++j) {
      int best = -1;
      for (int e = 0; e < n_expert; ++e) {
        if (!taken[e] && (best < 0 || prob[e] > prob[best])) best = e;
      }
      taken[best] = true;
      out_ids[j] = best;
    }
    double selected = 0;
    for (int j = 0; j < k; ++j) selected += prob[out_ids[j]];
    selected = std::max(selected, 6.103515625e-5);  // llama.cpp's floor on the renormaliser
    for (int j = 0; j < k; ++j) {
      const int32_t e = out_ids[j];
      weights[t * k + j] =
          static_cast<float>(prob[e] / selected * (expert_scale ? expert_scale[e] : 1.0f));
    }
  });
}

}  // namespace kernels::cpu

// Reference matrix products and row gathers: dequantize a stored row, accumulate in double.
#include <vector>

#include "kernels/ref/ref.h"
#include "tensor/dequantize.h"
#include "tensor/quantize.h"

namespace kernels::ref {

// y[t][r] = Σ_c W[r][c] · x[t][c]   W: [n_rows][n_cols] stored, x: [T][n_cols], y: [T][n_rows]
void matmul(const Matrix& w, const float* x, float* y, int n_tokens) {
  std::vector<float> row(w.n_cols);
  for (int64_t r = 0; r < w.n_rows; ++r) {
    // Types are checked when weights are bound (model::Binder), so a bound row always converts.
    (void)tensor::dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + r * w.row_bytes, row.data(), w.n_cols);
    for (int t = 0; t < n_tokens; ++t) {
      const float* xt = x + static_cast<int64_t>(t) * w.n_cols;
      double acc = 0;
      for (int64_t c = 0; c < w.n_cols; ++c) acc += static_cast<double>(row[c]) * xt[c];
      y[static_cast<int64_t>(t) * w.n_rows + r] = static_cast<float>(acc);
    }
  }
}

// out[i][c] = scale · W[ids[i]][c]
void get_rows(const Matrix& table, const int32_t* ids, int n, float scale, float* out) {
  for (int i = 0; i < n; ++i) {
    float* o = out + static_cast<int64_t>(i) * table.n_cols;
    (void)tensor::dequantize_row(table.type, static_cast<const uint8_t*>(table.data) + ids[i] * table.row_bytes, o,
                                 table.n_cols);
    if (scale != 1.0f) {
      for (int64_t c = 0; c < table.n_cols; ++c) o[c] *= scale;
    }
  }
}

// Each K/V row is quantized straight into its cache cell; no full-precision copy is kept. Cache
// types and row lengths are checked when the cache is planned (kv::check_cache_type).
void store_kv(DType k_type, DType v_type, int kv_dim, const float* k, const float* v, const KvWrite* dst,
              int n_tokens) {
  for (int t = 0; t < n_tokens; ++t) {
    (void)tensor::quantize_row(k_type, k + static_cast<int64_t>(t) * kv_dim, dst[t].k, kv_dim);
    (void)tensor::quantize_row(v_type, v + static_cast<int64_t>(t) * kv_dim, dst[t].v, kv_dim);
  }
}

}  // namespace kernels::ref

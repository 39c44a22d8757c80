// kernels::cpu LoRA terms: scale · A · x per token with the f32 dot kernel into the scratch, then
// B · h added to y, weight rows split over the threads. Every value is made by one thread in a
// fixed order, so neither the batch nor the thread count changes it.
#include <algorithm>

#include "kernels/cpu/backend.h"

namespace kernels::cpu {

void CpuBackend::lora(const LoraDelta& a) {
  const DotFn dot = dot_kernel(DType::kF32, isa_).dot;
  const int T = a.n_tokens;
  const size_t x_stride = static_cast<size_t>(a.n_cols) * sizeof(float);
  for (int i = 0; i < a.n_terms; ++i) {
    const LoraTerm& term = a.terms[i];
    const int rank = term.rank;
    // h[t][k] = s[t] · (A_k · x_t): one task per (token, rank row), those of skipped tokens empty.
    for_rows(int64_t{T} * rank, a.n_cols, [&](int64_t task) {
      const int t = static_cast<int>(task / rank), k = static_cast<int>(task % rank);
      const float s = term.scale[t];
      if (s == 0.0f) return;
      float v = 0;
      dot(a.n_cols, term.a + k * a.n_cols, reinterpret_cast<const uint8_t*>(a.x) + t * x_stride, 0,
          1, &v, 0);
      a.scratch[task] = v * s;
    });
    // y[t][r] += Σ_k B[r][k] · h[t][k], in chunks of rows.
    const int64_t n_chunks = a.n_rows * rank * T < kMinParallel ? 1 : pool_.size() * 4;
    const int64_t chunk = (a.n_rows + n_chunks - 1) / n_chunks;
    pool_.parallel_for(static_cast<int>(n_chunks), [&](int c, int) {
      const int64_t first = c * chunk, last = std::min(a.n_rows, first + chunk);
      for (int t = 0; t < T; ++t) {
        if (term.scale[t] == 0.0f) continue;
        const float* h = a.scratch + int64_t{t} * rank;
        float* yt = a.y + t * a.n_rows;
        for (int64_t r = first; r < last; ++r) {
          const float* br = term.b + r * rank;
          float acc = 0;
          for (int k = 0; k < rank; ++k) acc += br[k] * h[k];
          yt[r] += acc;
        }
      }
    });
  }
}

}  // namespace kernels::cpu

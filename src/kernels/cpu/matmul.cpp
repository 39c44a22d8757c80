// Placeholder CPU matmul: the reference kernel split over rows (the SIMD version replaces it).
#include "kernels/cpu/matmul.h"

#include <algorithm>

#include "kernels/ref/ref.h"

namespace kernels::cpu {

size_t matmul_scratch_bytes(int, int64_t) { return 0; }

void matmul(const Matrix& w, const float* x, float* y, int n_tokens, util::ThreadPool& pool, void*) {
  const int64_t chunk = std::max<int64_t>(1, (w.n_rows + pool.size() * 4 - 1) / (pool.size() * 4));
  const int n_chunks = static_cast<int>((w.n_rows + chunk - 1) / chunk);
  pool.parallel_for(n_chunks, [&](int c, int) {
    const int64_t first = c * chunk, count = std::min(chunk, w.n_rows - first);
    // The reference kernel writes y[t][r] for its rows; give it a row slice and scatter back.
    const Matrix part = w.rows(first, count);
    for (int t = 0; t < n_tokens; ++t) {
      ref::matmul(part, x + static_cast<int64_t>(t) * w.n_cols, y + static_cast<int64_t>(t) * w.n_rows + first, 1);
    }
  });
}

}  // namespace kernels::cpu

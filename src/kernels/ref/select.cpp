// Reference top-k selection: the k largest values of each row, largest first, ties to the lower
// index, a NaN ranked below every number (so the order is total).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/ref/ref.h"

namespace kernels::ref {

void top_k(const float* x, int64_t n, int n_rows, int k, int32_t* ids, float* values) {
  std::vector<int32_t> order(n);
  for (int r = 0; r < n_rows; ++r) {
    const float* row = x + r * n;
    const auto rank = [row](int32_t i) {
      return std::isnan(row[i]) ? -std::numeric_limits<float>::infinity() : row[i];
    };
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return rank(a) > rank(b) || (rank(a) == rank(b) && a < b);
    });
    for (int j = 0; j < k; ++j) {
      ids[static_cast<int64_t>(r) * k + j] = order[j];
      values[static_cast<int64_t>(r) * k + j] = row[order[j]];
    }
  }
}

}  // namespace kernels::ref

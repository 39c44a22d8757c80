// Reference LoRA terms: each token's low-rank update in double, added to its row of y.
#include <vector>

#include "kernels/ref/ref.h"

namespace kernels::ref {

// y[t][r] += s_i[t] · Σ_k B_i[r][k] · (Σ_c A_i[k][c] · x[t][c])   for each term i in order, and
// only for the tokens with s_i[t] ≠ 0.   A_i: [rank][n_cols], B_i: [n_rows][rank]
void lora(const LoraDelta& a) {
  std::vector<double> h;
  for (int i = 0; i < a.n_terms; ++i) {
    const LoraTerm& term = a.terms[i];
    h.assign(term.rank, 0.0);
    for (int t = 0; t < a.n_tokens; ++t) {
      const float s = term.scale[t];
      if (s == 0.0f) continue;
      const float* xt = a.x + t * a.n_cols;
      for (int k = 0; k < term.rank; ++k) {
        const float* ak = term.a + k * a.n_cols;
        double acc = 0;
        for (int64_t c = 0; c < a.n_cols; ++c) acc += static_cast<double>(ak[c]) * xt[c];
        h[k] = acc;
      }
      float* yt = a.y + t * a.n_rows;
      for (int64_t r = 0; r < a.n_rows; ++r) {
        const float* br = term.b + r * term.rank;
        double acc = 0;
        for (int k = 0; k < term.rank; ++k) acc += static_cast<double>(br[k]) * h[k];
        yt[r] = static_cast<float>(yt[r] + s * acc);
      }
    }
  }
}

}  // namespace kernels::ref

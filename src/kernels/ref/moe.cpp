// Reference MoE routing: softmax, top-k with deterministic ties, renormalise, per-expert scale.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/ref/ref.h"

namespace kernels::ref {

void moe_route(const float* logits, int n_tokens, int n_expert, int k, const float* expert_scale, int32_t* ids,
               float* weights) {
  std::vector<double> prob(n_expert);
  std::vector<int32_t> order(n_expert);
  for (int t = 0; t < n_tokens; ++t) {
    const float* l = logits + static_cast<int64_t>(t) * n_expert;
    const double max_logit = *std::max_element(l, l + n_expert);
    double sum = 0;
    for (int e = 0; e < n_expert; ++e) sum += prob[e] = std::exp(static_cast<double>(l[e]) - max_logit);
    for (int e = 0; e < n_expert; ++e) prob[e] /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return prob[a] > prob[b] || (prob[a] == prob[b] && a < b); });
    double selected = 0;
    for (int j = 0; j < k; ++j) selected += prob[order[j]];
    selected = std::max(selected, 6.103515625e-5);  // llama.cpp's floor on the renormaliser
    for (int j = 0; j < k; ++j) {
      const int32_t e = order[j];
      ids[static_cast<int64_t>(t) * k + j] = e;
      const double w = prob[e] / selected * (expert_scale ? expert_scale[e] : 1.0f);
      weights[static_cast<int64_t>(t) * k + j] = static_cast<float>(w);
    }
  }
}

}  // namespace kernels::ref

// MoE routing of one token by one warp, in ref::moe_route's double arithmetic: the moe_route
// kernel (ops.cu) runs it once per token, and every thread block of the fused moe_glu kernel
// (matvec.cu) runs it again for its own token, so that no host round trip sits between the router
// and the experts.
#pragma once

#include <cfloat>
#include <cstdint>

#include "kernels/op_args.h"

namespace kernels::cuda {

// Shared memory of one routing: the probabilities and which experts are chosen already.
struct MoeRouteScratch {
  double prob[kMaxExperts];
  bool taken[kMaxExperts];
};

// Softmax over the n_expert logits, the k most probable experts (ties to the lower id) into
// ids[0..k), and their weights renormalised over the chosen ones (with llama.cpp's floor) times
// expert_scale into weights[0..k). All 32 lanes of a warp call it; ids and weights may be shared
// or global memory (lane 0 writes them and reads ids back).
__device__ inline void route_token(const float* __restrict__ logits, int n_expert, int k,
                                   const float* __restrict__ expert_scale, MoeRouteScratch& s,
                                   int32_t* ids, float* weights) {
  constexpr unsigned int kFullMask = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32);
  float max_logit = -FLT_MAX;
  for (int e = lane; e < n_expert; e += 32) max_logit = fmaxf(max_logit, logits[e]);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    max_logit = fmaxf(max_logit, __shfl_xor_sync(kFullMask, max_logit, offset));
  }
  for (int e = lane; e < n_expert; e += 32) {
    s.prob[e] = exp(static_cast<double>(logits[e]) - static_cast<double>(max_logit));
    s.taken[e] = false;
  }
  __syncwarp();
  double sum = 0;
  if (lane == 0) {
    for (int e = 0; e < n_expert; ++e) sum += s.prob[e];  // in expert order, as the reference
  }
  sum = __shfl_sync(kFullMask, sum, 0);
  for (int e = lane; e < n_expert; e += 32) s.prob[e] /= sum;
  __syncwarp();
  for (int j = 0; j < k; ++j) {
    // Arg-max over the experts not taken yet; ties go to the lower id.
    double best_p = -1.0;
    int best_e = 0x7fffffff;
    for (int e = lane; e < n_expert; e += 32) {
      if (!s.taken[e] && s.prob[e] > best_p) {  // ascending e: a tie keeps the lower id
        best_p = s.prob[e];
        best_e = e;
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      const double other_p = __shfl_xor_sync(kFullMask, best_p, offset);
      const int other_e = __shfl_xor_sync(kFullMask, best_e, offset);
      if (other_p > best_p || (other_p == best_p && other_e < best_e)) {
        best_p = other_p;
        best_e = other_e;
      }
    }
    if (lane == 0) {
      // NaN logits compare false everywhere: take the lowest free expert rather than none.
      if (best_e >= n_expert) {
        best_e = 0;
        while (s.taken[best_e]) ++best_e;
      }
      s.taken[best_e] = true;
      ids[j] = best_e;
    }
    __syncwarp();
  }
  if (lane == 0) {
    double selected = 0;
    for (int j = 0; j < k; ++j) selected += s.prob[ids[j]];
    selected = fmax(selected, 6.103515625e-5);  // llama.cpp's floor on the renormaliser
    for (int j = 0; j < k; ++j) {
      const int32_t e = ids[j];
      const double w = s.prob[e] / selected * (expert_scale ? expert_scale[e] : 1.0f);
      weights[j] = static_cast<float>(w);
    }
  }
  __syncwarp();
}

}  // namespace kernels::cuda

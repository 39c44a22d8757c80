// The arithmetic of the LoRA kernels (lora.cu) as functions g++ also compiles:
// tests/kernels/cuda_lora_lanes_test.cpp runs them lane by lane on the host against the
// reference, so an indexing mistake shows without a GPU. The warp's shuffle that sums the lanes'
// shares lives in lora.cu; the host test repeats it on an array.
#pragma once

#include <cstdint>

#include "kernels/op_args.h"

namespace kernels::cuda::lora {

inline constexpr int kWarpSize = 32;

// Lane `lane`'s share of A_k · x_t: the products at columns lane, lane + 32, … in that order.
HR_HOST_DEVICE inline float a_share(const float* a_row, const float* x, int64_t n_cols, int lane) {
  float acc = 0.0f;
  for (int64_t c = lane; c < n_cols; c += kWarpSize) acc += a_row[c] * x[c];
  return acc;
}

// One value of B · h for output row r: Σ_k B[r][k] · h[k], k in order.
HR_HOST_DEVICE inline float b_value(const float* b_row, const float* h, int rank) {
  float acc = 0.0f;
  for (int k = 0; k < rank; ++k) acc += b_row[k] * h[k];
  return acc;
}

}  // namespace kernels::cuda::lora

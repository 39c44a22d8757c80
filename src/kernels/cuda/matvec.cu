// The CUDA decode products of the fused ops (ops.h): matmuls (q, k, v in one launch), matmul_glu
// (gate and up with the activation, and its 8-bit output), moe_glu (routing, then the chosen
// experts' gate and up) and moe_down (the chosen experts' down projections, weighted and summed).
//
// For decode batches (T ≤ kActQ8MaxTokens) whose activations come in 8-bit form (act_q8.h) and
// whose weights are of a type with pieces in matvec_lanes.h, each weight row is read by a team of
// `team` lanes (8 to 128: several rows per warp for short rows, several warps per row for long
// ones when the matrix has too few rows to fill the GPU). The lanes multiply whole 16-byte chunks
// of quants with the activations through dp4a and keep f32 only for the per-block scales
// (matvec_lanes.h); the team's sum is a shuffle butterfly, then shared memory across warps, added
// in a fixed order: the results do not depend on timing. A thread block switches on its matrix's
// type (uniform over the block), so products of different types share a launch.
//
// Otherwise (other types, no 8-bit activations, prefill batches, a gate and an up of different
// types) the products fall back to the f32-activation kernels of matmul.cu, and the MoE ops to
// per-slot kernels here that decode the weights value by value (decode.cuh) — correct for every
// type, not tuned.
#include "kernels/cuda/decode.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/matvec_lanes.h"
#include "kernels/cuda/moe_route.cuh"

namespace kernels::cuda::detail {
namespace {

constexpr unsigned int kFullMask = 0xffffffffu;
// Threads of the blocks that own as many rows as their teams cover (matmuls, moe_down, and the
// GLU products without an 8-bit output).
constexpr int kRowThreads = 128;
// The GLU products with an 8-bit output: a block owns 32 rows (one block of the 8-bit form per
// token), a team of 8 lanes each.
constexpr int kQ8OutRows = 32;
constexpr int kQ8OutTeam = 8;
constexpr int kMaxThreads = kQ8OutRows * kQ8OutTeam;
// Threads a launch should keep busy: about one full wave of an H100 (132 SMs × 1024). Teams grow
// (more lanes per row, each with fewer pieces) until a matrix's rows reach it.
constexpr int64_t kTargetThreads = int64_t{1} << 17;
constexpr int kMaxProducts = 4;  // products in one matmuls launch

unsigned int blocks_for(int64_t n, int64_t per_block) {
  return static_cast<unsigned int>((n + per_block - 1) / per_block);
}

// --- Host side: which products run on 8-bit activations, and their geometry ---------------------

// Whether w · x runs on x's 8-bit form: a type with pieces, blocks aligned as its loads need, and
// activations where the kernels can read them with 16-byte loads.
bool q8_ready(const Matrix& w, const void* x_q8, int n_tokens) {
  if (x_q8 == nullptr || n_tokens > kActQ8MaxTokens || !has_q8_lanes(w.type)) return false;
  const Q8Layout layout = q8_layout(w.type);
  return reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && w.row_bytes % layout.block_align == 0 &&
         reinterpret_cast<uintptr_t>(x_q8) % 16 == 0 && w.n_cols % layout.block_values == 0;
}

Q8Matrix q8_matrix(const Matrix& w) {
  const Q8Layout layout = q8_layout(w.type);
  const int64_t n_blocks = w.n_cols / layout.block_values;
  const auto* data = static_cast<const uint8_t*>(w.data);
  // The last row's packed bytes end the tensor as far as any load is concerned.
  const uint8_t* end =
      data + (w.n_rows > 0 ? (w.n_rows - 1) * w.row_bytes : 0) + n_blocks * layout.block_bytes;
  return {data, end, w.row_bytes, n_blocks, w.type};
}

int64_t pieces_per_row(const Matrix& w) {
  const Q8Layout layout = q8_layout(w.type);
  return w.n_cols / layout.block_values * layout.pieces;
}

ActQ8Rows act_rows(const void* q8, int64_t n_cols) {
  return {static_cast<const uint8_t*>(q8), act_q8_row_bytes(n_cols), n_cols};
}

// Lanes per row: up to a warp while the row has two pieces per lane, then whole warps (several per
// row) while the matrix's rows leave the GPU short of threads.
int row_team(int64_t n_rows, int64_t pieces) {
  int team = 8;
  while (team < 32 && 2 * team < pieces) team *= 2;
  while (team < kRowThreads && n_rows * team < kTargetThreads && pieces >= 2 * team) team *= 2;
  return team;
}

// --- Device side: team sums and the 8-bit output ------------------------------------------------

// Sums v over each team of `team` lanes (a power of two; teams are aligned groups of threads).
// Only the team's first lane is sure to hold the sums. Every thread of the block calls it.
template <int N>
__device__ __forceinline__ void team_reduce(float (&v)[N], int team, float (*part)[N]) {
  const int width = team < 32 ? team : 32;
  for (int offset = width / 2; offset > 0; offset /= 2) {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] += __shfl_xor_sync(kFullMask, v[i], offset);
  }
  if (team <= 32) return;
  const int warp = threadIdx.x / 32;
  __syncthreads();  // the last reduction's reads of `part` are done
  if (threadIdx.x % 32 == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) part[warp][i] = v[i];
  }
  __syncthreads();
  if (threadIdx.x % team == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      float s = part[warp][i];
      for (int w = 1; w < team / 32; ++w) s += part[warp + w][i];
      v[i] = s;
    }
  }
}

// A warp quantizes the 32 values its lanes hold into one block of the 8-bit form (act_q8.h):
// the bytes quantize_act_block writes (tests/kernels/cuda_lanes_test.cpp).
__device__ __forceinline__ void quantize_block_warp(float v, int8_t* q, float* scales) {
  float amax = act_q8_lane_magnitude(v);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, offset));
  const int quant = act_q8_quant(v, amax);
  int sum = quant;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(kFullMask, sum, offset);
  q[threadIdx.x % 32] = static_cast<int8_t>(quant);
  if (threadIdx.x % 32 == 0) act_q8_block_scales(amax, sum, scales);
}

// Each kernel below switches on its matrix's type once (visit_q8_type, uniform over the block) and
// runs its loops inside the case: a switch inside a loop makes nvcc keep every case's values in
// registers at once, well past 128 of them.

// --- matmuls: up to four products of one input, one launch --------------------------------------

struct Q8Product {
  Q8Matrix w;
  int64_t n_rows = 0;
  float* y = nullptr;  // [T][n_rows]
  int team = 0;
  unsigned int first_block = 0;  // thread blocks before this product's
};

struct Q8Products {
  Q8Product out[kMaxProducts];
  int n = 0;
  ActQ8Rows x;
  int n_tokens = 0;
};

template <int kTok>
__global__ void __launch_bounds__(kRowThreads) q8_matmuls_kernel(const Q8Products p) {
  __shared__ float part[kRowThreads / 32][kTok];
  // This block's product, chosen by comparisons (indexing the parameters at run time would copy
  // them to local memory).
  Q8Product o = p.out[0];
#pragma unroll
  for (int i = 1; i < kMaxProducts; ++i) {
    if (i < p.n && blockIdx.x >= p.out[i].first_block) o = p.out[i];
  }
  const int team = o.team, lane = threadIdx.x % team;
  const int64_t r =
      static_cast<int64_t>(blockIdx.x - o.first_block) * (kRowThreads / team) + threadIdx.x / team;
  float acc[kTok] = {};
  if (r < o.n_rows) {
    visit_q8_type(o.w.type, [&]<DType T>() {
      q8_row_dot_typed<T, kTok>(o.w, r, p.x, p.n_tokens, lane, team, acc);
    });
  }
  team_reduce(acc, team, part);
  if (lane == 0 && r < o.n_rows) {
#pragma unroll
    for (int t = 0; t < kTok; ++t) {
      if (t < p.n_tokens) o.y[t * o.n_rows + r] = acc[t];
    }
  }
}

cudaError_t launch_products(const Q8Products& p, unsigned int blocks, cudaStream_t stream) {
  if (p.n_tokens == 1) {
    q8_matmuls_kernel<1><<<blocks, kRowThreads, 0, stream>>>(p);
  } else {
    q8_matmuls_kernel<kActQ8MaxTokens><<<blocks, kRowThreads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

// --- Gated products: gate and up rows, the activation, the 8-bit output --------------------------

// Rows [first, first + rows_per_block) of out = act(gate · x) ⊙ second for one thread block, where
// second is up · x or up_rows. Row i reads gate row gate_row0 + i and up row up_row0 + i. Gate and
// up are of one type (the launchers send other pairs to the f32 path).
struct GluRows {
  Q8Matrix gate;
  Q8Matrix up;  // data null: up_rows is the second factor
  int64_t gate_row0 = 0, up_row0 = 0;
  const float* up_rows = nullptr;  // [T] rows up_stride apart
  int64_t up_stride = 0;
  GluActivation act = GluActivation::kGelu;
  ActQ8Rows x;
  int n_tokens = 0;
  int64_t n_rows = 0;      // outputs per token
  float* out = nullptr;    // [T][n_rows]
  void* out_q8 = nullptr;  // [T] rows of the 8-bit form, or null
  int team = 0;
  int rows_per_block = 0;  // blockDim.x / team; 32 when out_q8 is given
};

template <int kTok>
__device__ __forceinline__ void glu_block(const GluRows& a, int64_t first, float (*part)[kTok],
                                          float (*rows_out)[kTok]) {
  const int team = a.team, lane = threadIdx.x % team, local = threadIdx.x / team;
  const int64_t r = first + local;
  const bool live = r < a.n_rows;
  const bool has_up = a.up.data != nullptr;
  float g[kTok] = {}, u[kTok] = {};
  visit_q8_type(a.gate.type, [&]<DType T>() {
#pragma unroll 1
    for (int which = 0; which < (has_up ? 2 : 1); ++which) {
      float acc[kTok] = {};
      if (live) {
        q8_row_dot_typed<T, kTok>(which == 0 ? a.gate : a.up,
                                  (which == 0 ? a.gate_row0 : a.up_row0) + r, a.x, a.n_tokens, lane,
                                  team, acc);
      }
      team_reduce(acc, team, part);
#pragma unroll
      for (int t = 0; t < kTok; ++t) {
        g[t] = which == 0 ? acc[t] : g[t];
        u[t] = which == 1 ? acc[t] : u[t];
      }
    }
  });
  if (lane == 0 && live) {
#pragma unroll
    for (int t = 0; t < kTok; ++t) {
      if (t >= a.n_tokens) break;
      const float second = has_up ? u[t] : a.up_rows[t * a.up_stride + r];
      const float v = mul_rn(glu_activation(a.act, g[t]), second);
      a.out[t * a.n_rows + r] = v;
      if (a.out_q8 != nullptr) rows_out[local][t] = v;
    }
  }
  if (a.out_q8 == nullptr) return;
  __syncthreads();
  // One warp per token: the block's 32 rows are one block of each token's 8-bit row.
  for (int t = threadIdx.x / 32; t < a.n_tokens; t += blockDim.x / 32) {
    quantize_block_warp(rows_out[threadIdx.x % 32][t], act_q8_quants(a.out_q8, a.n_rows, t) + first,
                        act_q8_scales(a.out_q8, a.n_rows, t) + 2 * (first / kQ8OutRows));
  }
}

template <int kTok>
__global__ void __launch_bounds__(kMaxThreads) q8_glu_kernel(const GluRows a) {
  __shared__ float part[kMaxThreads / 32][kTok];
  __shared__ float rows_out[kQ8OutRows][kTok];
  glu_block<kTok>(a, static_cast<int64_t>(blockIdx.x) * a.rows_per_block, part, rows_out);
}

// The team, rows per block and threads per block of a GLU product, for `all_rows` output rows in
// the whole launch with `pieces` (gate and up) per row.
void glu_geometry(GluRows& a, int64_t all_rows, int64_t pieces, int* threads) {
  if (a.out_q8 != nullptr) {
    a.team = kQ8OutTeam;
    a.rows_per_block = kQ8OutRows;
    *threads = kQ8OutRows * kQ8OutTeam;
  } else {
    a.team = row_team(all_rows, pieces);
    a.rows_per_block = kRowThreads / a.team;
    *threads = kRowThreads;
  }
}

// --- MoE on 8-bit activations
// ---------------------------------------------------------------------

struct MoeGluRows {
  const float* logits = nullptr;  // [T][n_expert]
  int n_expert = 0, k = 0;
  const float* expert_scale = nullptr;
  int32_t* ids = nullptr;    // [T][k]
  float* weights = nullptr;  // [T][k]
  // Expert e's output row i reads gate row e·expert_rows + i and up row e·expert_rows + up_offset
  // + i (fused gate_up: 2F and F; separate gate and up: F and 0).
  int64_t expert_rows = 0, up_offset = 0;
  GluRows rows;  // one slot (token t, its j-th expert) at a time: n_tokens 1, out and out_q8 slot 0
  float* h = nullptr;    // [T·k][F]
  void* h_q8 = nullptr;  // [T·k] rows, or null
  const uint8_t* x_q8 = nullptr;
  unsigned int row_blocks = 0;  // thread blocks per slot
};

// Block (slot, row block): slot = t·k + j. Every block routes its token (one warp), the first
// block of each token's first slot writes the routing out for moe_down.
__global__ void __launch_bounds__(kMaxThreads) q8_moe_glu_kernel(const MoeGluRows a) {
  __shared__ MoeRouteScratch route;
  __shared__ int32_t chosen[kMaxExperts];
  __shared__ float chosen_weight[kMaxExperts];
  __shared__ float part[kMaxThreads / 32][1];
  __shared__ float rows_out[kQ8OutRows][1];
  const unsigned int slot = blockIdx.x / a.row_blocks, row_block = blockIdx.x % a.row_blocks;
  const int t = static_cast<int>(slot) / a.k, j = static_cast<int>(slot) % a.k;
  if (threadIdx.x < 32) {
    route_token(a.logits + static_cast<int64_t>(t) * a.n_expert, a.n_expert, a.k, a.expert_scale,
                route, chosen, chosen_weight);
  }
  __syncthreads();
  if (row_block == 0 && j == 0) {
    for (int i = threadIdx.x; i < a.k; i += blockDim.x) {
      a.ids[static_cast<int64_t>(t) * a.k + i] = chosen[i];
      a.weights[static_cast<int64_t>(t) * a.k + i] = chosen_weight[i];
    }
  }
  const int64_t e = chosen[j];
  if (e < 0 || e >= a.n_expert) return;  // NaN logits leave no expert chosen: nothing to read
  GluRows rows = a.rows;
  rows.gate_row0 = e * a.expert_rows;
  rows.up_row0 = e * a.expert_rows + a.up_offset;
  rows.x.data = a.x_q8 + t * rows.x.row_bytes;
  rows.out = a.h + static_cast<int64_t>(slot) * rows.n_rows;
  if (a.h_q8 != nullptr) {
    rows.out_q8 = static_cast<uint8_t*>(a.h_q8) + slot * act_q8_row_bytes(rows.n_rows);
  }
  glu_block<1>(rows, static_cast<int64_t>(row_block) * rows.rows_per_block, part, rows_out);
}

// The order moe_down adds a token's k terms in: ascending expert id (the composed default's
// loop), equal ids by slot. Fills order[0..k) from ids[0..k) in shared memory.
__device__ __forceinline__ void order_by_expert(const int32_t* ids, int k, int32_t* order) {
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    int rank = 0;
    for (int m = 0; m < k; ++m) rank += ids[m] < ids[i] || (ids[m] == ids[i] && m < i);
    order[rank] = i;
  }
}

struct MoeDownRows {
  Q8Matrix down;      // [n_expert · H] rows
  int64_t n_out = 0;  // H
  int n_expert = 0, k = 0;
  const int32_t* ids = nullptr;
  const float* weights = nullptr;
  ActQ8Rows h;           // [T·k] rows
  float* out = nullptr;  // [T][H]
  int team = 0;
  unsigned int row_blocks = 0;  // thread blocks per token
};

__global__ void __launch_bounds__(kRowThreads) q8_moe_down_kernel(const MoeDownRows a) {
  __shared__ int32_t expert[kMaxExperts];
  __shared__ float weight[kMaxExperts];
  __shared__ int32_t order[kMaxExperts];
  __shared__ float part[kRowThreads / 32][1];
  const int t = static_cast<int>(blockIdx.x / a.row_blocks);
  const unsigned int row_block = blockIdx.x % a.row_blocks;
  for (int i = threadIdx.x; i < a.k; i += blockDim.x) {
    expert[i] = a.ids[static_cast<int64_t>(t) * a.k + i];
    weight[i] = a.weights[static_cast<int64_t>(t) * a.k + i];
  }
  __syncthreads();
  order_by_expert(expert, a.k, order);
  __syncthreads();
  const int team = a.team, lane = threadIdx.x % team;
  const int64_t r = static_cast<int64_t>(row_block) * (kRowThreads / team) + threadIdx.x / team;
  const bool live = r < a.n_out;
  float sum = 0.0f;
  bool started = false;
  visit_q8_type(a.down.type, [&]<DType T>() {
    for (int n = 0; n < a.k; ++n) {
      const int j = order[n];
      const int64_t e = expert[j];
      if (e < 0 || e >= a.n_expert) continue;  // the composed default skips such ids too
      float acc[1] = {0.0f};
      ActQ8Rows h = a.h;
      h.data = a.h.quants(t * a.k + j);
      if (live) q8_row_dot_typed<T, 1>(a.down, e * a.n_out + r, h, 1, lane, team, acc);
      team_reduce(acc, team, part);
      const float v = mul_rn(acc[0], weight[j]);
      sum = started ? add_rn(sum, v) : v;
      started = true;
    }
  });
  if (lane == 0 && live && started) a.out[t * a.n_out + r] = sum;
}

// --- Fallbacks: f32 activations, any decodable type ---------------------------------------------

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// A lane's share of row · x over f32 activations: the 8-value units lane, lane + 32, …
template <DType T>
__device__ __forceinline__ float f32_row_lane_dot(const uint8_t* row, int64_t n_cols,
                                                  const float* __restrict__ x) {
  float acc = 0.0f;
  for (int64_t u = threadIdx.x % 32; u < (n_cols + 7) / 8; u += 32) {
    float v[8];
    decode_unit<T>(row, u, n_cols, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      if (8 * u + i < n_cols) acc = fmaf(v[i], __ldg(x + 8 * u + i), acc);
    }
  }
  return acc;
}

// What an f32 MoE gate/up launch computes into h (separate gate and up matrices of different
// types take two launches).
enum class MoeGluStep { kGateThenUp, kGateOnly, kUpOnly };

struct F32MoeGlu {
  const uint8_t* gate = nullptr;
  const uint8_t* up = nullptr;
  size_t gate_row_bytes = 0, up_row_bytes = 0;
  int64_t expert_rows = 0, up_offset = 0, n_ff = 0, n_cols = 0;
  const int32_t* ids = nullptr;  // [T·k], written by the routing before
  int k = 0;
  const float* x = nullptr;  // [T][n_cols]
  float* h = nullptr;        // [T·k][n_ff]
  MoeGluStep step = MoeGluStep::kGateThenUp;
  unsigned int row_blocks = 0;
};

// One warp per row of h: block (slot, row block), kRowThreads / 32 rows each.
template <DType T>
__global__ void __launch_bounds__(kRowThreads) f32_moe_glu_kernel(const F32MoeGlu a) {
  const int64_t slot = blockIdx.x / a.row_blocks;
  const int64_t i =
      static_cast<int64_t>(blockIdx.x % a.row_blocks) * (kRowThreads / 32) + threadIdx.x / 32;
  if (i >= a.n_ff) return;  // whole warps
  const int64_t e = a.ids[slot];
  const float* x = a.x + (slot / a.k) * a.n_cols;
  float* h = a.h + slot * a.n_ff + i;
  float g = 0.0f, u = 0.0f;
  if (a.step != MoeGluStep::kUpOnly) {
    g = warp_sum(
        f32_row_lane_dot<T>(a.gate + (e * a.expert_rows + i) * a.gate_row_bytes, a.n_cols, x));
  }
  if (a.step != MoeGluStep::kGateOnly) {
    u = warp_sum(f32_row_lane_dot<T>(a.up + (e * a.expert_rows + a.up_offset + i) * a.up_row_bytes,
                                     a.n_cols, x));
  }
  if (threadIdx.x % 32 != 0) return;
  if (a.step == MoeGluStep::kGateOnly) {
    *h = g;
  } else {
    if (a.step == MoeGluStep::kUpOnly) g = *h;
    *h = mul_rn(glu_activation(GluActivation::kGelu, g), u);
  }
}

struct F32MoeDown {
  const uint8_t* down = nullptr;
  size_t row_bytes = 0;
  int64_t n_out = 0, n_cols = 0;
  int n_expert = 0, k = 0;
  const int32_t* ids = nullptr;
  const float* weights = nullptr;
  const float* h = nullptr;  // [T·k][n_cols]
  float* out = nullptr;      // [T][n_out]
  unsigned int row_blocks = 0;
};

template <DType T>
__global__ void __launch_bounds__(kRowThreads) f32_moe_down_kernel(const F32MoeDown a) {
  __shared__ int32_t expert[kMaxExperts];
  __shared__ int32_t order[kMaxExperts];
  const int64_t t = blockIdx.x / a.row_blocks;
  const int64_t r =
      static_cast<int64_t>(blockIdx.x % a.row_blocks) * (kRowThreads / 32) + threadIdx.x / 32;
  for (int i = threadIdx.x; i < a.k; i += blockDim.x) expert[i] = a.ids[t * a.k + i];
  __syncthreads();
  order_by_expert(expert, a.k, order);
  __syncthreads();
  if (r >= a.n_out) return;  // whole warps, after the block's barriers
  float sum = 0.0f;
  bool started = false;
  for (int n = 0; n < a.k; ++n) {
    const int j = order[n];
    const int64_t e = expert[j];
    if (e < 0 || e >= a.n_expert) continue;
    const float dot = warp_sum(f32_row_lane_dot<T>(a.down + (e * a.n_out + r) * a.row_bytes,
                                                   a.n_cols, a.h + (t * a.k + j) * a.n_cols));
    const float v = mul_rn(dot, __ldg(a.weights + t * a.k + j));
    sum = started ? add_rn(sum, v) : v;
    started = true;
  }
  if (threadIdx.x % 32 == 0 && started) a.out[t * a.n_out + r] = sum;
}

// After f32 products: out = act(out) ⊙ second (when `apply`), then out's 8-bit form (when out_q8
// is given). One warp per 32 values of a row.
__global__ void __launch_bounds__(kRowThreads)
    glu_epilogue_kernel(GluActivation act, bool apply, float* out, const float* second,
                        int64_t second_stride, int64_t n, int n_rows, void* out_q8) {
  const int64_t blocks_per_row = (n + 31) / 32;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * kRowThreads + threadIdx.x) / 32;
  if (warp >= blocks_per_row * n_rows) return;  // whole warps
  const int t = static_cast<int>(warp / blocks_per_row);
  const int64_t b = warp % blocks_per_row, i = 32 * b + threadIdx.x % 32;
  float v = 0.0f;
  if (i < n) {
    v = out[t * n + i];
    if (apply) {
      v = mul_rn(glu_activation(act, v), second[t * second_stride + i]);
      out[t * n + i] = v;
    }
  }
  if (out_q8 != nullptr) {
    quantize_block_warp(v, act_q8_quants(out_q8, n, t) + 32 * b,
                        act_q8_scales(out_q8, n, t) + 2 * b);
  }
}

cudaError_t launch_glu_epilogue(GluActivation act, bool apply, float* out, const float* second,
                                int64_t second_stride, int64_t n, int n_rows, void* out_q8,
                                cudaStream_t stream) {
  if (n <= 0 || n_rows <= 0 || (!apply && out_q8 == nullptr)) return cudaSuccess;
  const int64_t warps = (n + 31) / 32 * n_rows;
  glu_epilogue_kernel<<<blocks_for(warps, kRowThreads / 32), kRowThreads, 0, stream>>>(
      act, apply, out, second, second_stride, n, n_rows, out_q8);
  return cudaGetLastError();
}

// Whether an 8-bit destination fits the format: at most kActQ8MaxTokens rows of a multiple of 32.
bool q8_destination_fits(int64_t n_cols, int64_t n_rows) {
  return act_q8_fits(n_cols) && n_rows <= kActQ8MaxTokens;
}

cudaError_t launch_glu_f32(const GluMatmul& a, cudaStream_t stream) {
  const int64_t n = a.gate.n_rows;
  if (cudaError_t e = launch_matmul(a.gate, a.x.f32, a.out, a.n_tokens, stream); e != cudaSuccess)
    return e;
  const float* second = a.up_rows;
  int64_t stride = a.up_stride;
  if (a.up.data != nullptr) {
    if (cudaError_t e = launch_matmul(a.up, a.x.f32, a.scratch, a.n_tokens, stream);
        e != cudaSuccess)
      return e;
    second = a.scratch;
    stride = n;
  }
  return launch_glu_epilogue(a.act, true, a.out, second, stride, n, a.n_tokens, a.out_q8, stream);
}

cudaError_t launch_moe_glu_f32(const MoeGlu& a, cudaStream_t stream) {
  if (cudaError_t e = launch_moe_route(a.router_logits, a.n_tokens, a.n_expert, a.k, a.expert_scale,
                                       a.ids, a.weights, stream);
      e != cudaSuccess)
    return e;
  const bool fused = a.gate_up.data != nullptr;
  const Matrix& gate = fused ? a.gate_up : a.gate;
  const Matrix& up = fused ? a.gate_up : a.up;
  const int64_t slots = static_cast<int64_t>(a.n_tokens) * a.k;
  F32MoeGlu p;
  p.gate = static_cast<const uint8_t*>(gate.data);
  p.up = static_cast<const uint8_t*>(up.data);
  p.gate_row_bytes = gate.row_bytes;
  p.up_row_bytes = up.row_bytes;
  p.expert_rows = fused ? 2 * a.n_ff : a.n_ff;
  p.up_offset = fused ? a.n_ff : 0;
  p.n_ff = a.n_ff;
  p.n_cols = gate.n_cols;
  p.ids = a.ids;
  p.k = a.k;
  p.x = a.x.f32;
  p.h = a.h;
  p.row_blocks = blocks_for(a.n_ff, kRowThreads / 32);
  const unsigned int blocks = static_cast<unsigned int>(slots * p.row_blocks);
  const auto run = [&](DType type, MoeGluStep step) {
    p.step = step;
    return with_decodable_type(type, [&](auto tag) {
      f32_moe_glu_kernel<decltype(tag)::value><<<blocks, kRowThreads, 0, stream>>>(p);
      return cudaGetLastError();
    });
  };
  cudaError_t e;
  if (gate.type == up.type) {
    e = run(gate.type, MoeGluStep::kGateThenUp);
  } else {
    e = run(gate.type, MoeGluStep::kGateOnly);
    if (e == cudaSuccess) e = run(up.type, MoeGluStep::kUpOnly);
  }
  if (e != cudaSuccess || a.h_q8 == nullptr) return e;
  return launch_glu_epilogue(GluActivation::kGelu, false, a.h, nullptr, 0, a.n_ff,
                             static_cast<int>(slots), a.h_q8, stream);
}

cudaError_t launch_moe_down_f32(const MoeDown& a, cudaStream_t stream) {
  F32MoeDown p;
  p.down = static_cast<const uint8_t*>(a.down.data);
  p.row_bytes = a.down.row_bytes;
  p.n_out = a.down.n_rows / a.n_expert;
  p.n_cols = a.down.n_cols;
  p.n_expert = a.n_expert;
  p.k = a.k;
  p.ids = a.ids;
  p.weights = a.weights;
  p.h = a.h.f32;
  p.out = a.out;
  p.row_blocks = blocks_for(p.n_out, kRowThreads / 32);
  const unsigned int blocks = static_cast<unsigned int>(a.n_tokens * p.row_blocks);
  return with_decodable_type(a.down.type, [&](auto tag) {
    f32_moe_down_kernel<decltype(tag)::value><<<blocks, kRowThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace

bool has_q8_matvec(DType type) {
  return has_q8_lanes(type);
}

cudaError_t launch_matmuls(const MatmulOut* outs, int n, Activations x, int n_tokens,
                           cudaStream_t stream) {
  if (n_tokens <= 0) return cudaSuccess;
  Q8Products p;
  p.n_tokens = n_tokens;
  unsigned int blocks = 0;
  for (int i = 0; i < n; ++i) {
    const Matrix& w = outs[i].w;
    if (w.n_rows == 0) continue;
    if (!q8_ready(w, x.q8, n_tokens)) {
      if (cudaError_t e = launch_matmul(w, x.f32, outs[i].y, n_tokens, stream); e != cudaSuccess)
        return e;
      continue;
    }
    p.x = act_rows(x.q8, w.n_cols);
    const int team = row_team(w.n_rows, pieces_per_row(w));
    p.out[p.n++] = {q8_matrix(w), w.n_rows, outs[i].y, team, blocks};
    blocks += blocks_for(w.n_rows, kRowThreads / team);
    if (p.n == kMaxProducts) {
      if (cudaError_t e = launch_products(p, blocks, stream); e != cudaSuccess) return e;
      p.n = 0;
      blocks = 0;
    }
  }
  return p.n > 0 ? launch_products(p, blocks, stream) : cudaSuccess;
}

cudaError_t launch_matmul_glu(const GluMatmul& a, cudaStream_t stream) {
  const int64_t n = a.gate.n_rows;
  if (a.n_tokens <= 0 || n == 0) return cudaSuccess;
  if (a.out_q8 != nullptr && !q8_destination_fits(n, a.n_tokens)) return cudaErrorInvalidValue;
  const bool has_up = a.up.data != nullptr;
  if (!q8_ready(a.gate, a.x.q8, a.n_tokens) ||
      (has_up && (!q8_ready(a.up, a.x.q8, a.n_tokens) || a.up.type != a.gate.type)))
    return launch_glu_f32(a, stream);
  GluRows rows;
  rows.gate = q8_matrix(a.gate);
  if (has_up) rows.up = q8_matrix(a.up);
  rows.up_rows = a.up_rows;
  rows.up_stride = a.up_stride;
  rows.act = a.act;
  rows.x = act_rows(a.x.q8, a.gate.n_cols);
  rows.n_tokens = a.n_tokens;
  rows.n_rows = n;
  rows.out = a.out;
  rows.out_q8 = a.out_q8;
  int threads = 0;
  glu_geometry(rows, n, pieces_per_row(a.gate) + (has_up ? pieces_per_row(a.up) : 0), &threads);
  const unsigned int blocks = blocks_for(n, rows.rows_per_block);
  if (a.n_tokens == 1) {
    q8_glu_kernel<1><<<blocks, threads, 0, stream>>>(rows);
  } else {
    q8_glu_kernel<kActQ8MaxTokens><<<blocks, threads, 0, stream>>>(rows);
  }
  return cudaGetLastError();
}

cudaError_t launch_moe_glu(const MoeGlu& a, cudaStream_t stream) {
  if (a.n_tokens <= 0) return cudaSuccess;
  const int64_t slots = static_cast<int64_t>(a.n_tokens) * a.k;
  if (a.h_q8 != nullptr && !q8_destination_fits(a.n_ff, slots)) return cudaErrorInvalidValue;
  const bool fused = a.gate_up.data != nullptr;
  const Matrix& gate = fused ? a.gate_up : a.gate;
  const Matrix& up = fused ? a.gate_up : a.up;
  if (!q8_ready(gate, a.x.q8, a.n_tokens) || !q8_ready(up, a.x.q8, a.n_tokens) ||
      gate.type != up.type)
    return launch_moe_glu_f32(a, stream);
  MoeGluRows m;
  m.logits = a.router_logits;
  m.n_expert = a.n_expert;
  m.k = a.k;
  m.expert_scale = a.expert_scale;
  m.ids = a.ids;
  m.weights = a.weights;
  m.expert_rows = fused ? 2 * a.n_ff : a.n_ff;
  m.up_offset = fused ? a.n_ff : 0;
  m.h = a.h;
  m.h_q8 = a.h_q8;
  m.x_q8 = static_cast<const uint8_t*>(a.x.q8);
  GluRows& rows = m.rows;
  rows.gate = q8_matrix(gate);
  rows.up = q8_matrix(up);
  rows.act = GluActivation::kGelu;
  rows.x = act_rows(a.x.q8, gate.n_cols);
  rows.n_tokens = 1;
  rows.n_rows = a.n_ff;
  rows.out_q8 = a.h_q8;  // only its presence counts here: each block points it at its slot's row
  int threads = 0;
  glu_geometry(rows, slots * a.n_ff, pieces_per_row(gate) + pieces_per_row(up), &threads);
  m.row_blocks = blocks_for(a.n_ff, rows.rows_per_block);
  q8_moe_glu_kernel<<<static_cast<unsigned int>(slots * m.row_blocks), threads, 0, stream>>>(m);
  return cudaGetLastError();
}

cudaError_t launch_moe_down(const MoeDown& a, cudaStream_t stream) {
  // The kernels keep a token's k ids in shared arrays of kMaxExperts.
  if (a.n_expert <= 0 || a.k <= 0 || a.k > kMaxExperts) return cudaErrorInvalidValue;
  if (a.n_tokens <= 0 || a.down.n_rows == 0) return cudaSuccess;
  const int64_t slots = static_cast<int64_t>(a.n_tokens) * a.k;
  if (slots > kActQ8MaxTokens || !q8_ready(a.down, a.h.q8, static_cast<int>(slots)))
    return launch_moe_down_f32(a, stream);
  MoeDownRows m;
  m.down = q8_matrix(a.down);
  m.n_out = a.down.n_rows / a.n_expert;
  m.n_expert = a.n_expert;
  m.k = a.k;
  m.ids = a.ids;
  m.weights = a.weights;
  m.h = act_rows(a.h.q8, a.down.n_cols);
  m.out = a.out;
  m.team = row_team(static_cast<int64_t>(a.n_tokens) * m.n_out, pieces_per_row(a.down));
  m.row_blocks = blocks_for(m.n_out, kRowThreads / m.team);
  q8_moe_down_kernel<<<a.n_tokens * m.row_blocks, kRowThreads, 0, stream>>>(m);
  return cudaGetLastError();
}

}  // namespace kernels::cuda::detail
